"""KernelMemo: a compile plans a node again only when something its plan is made from changed."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.kernels.backend import NUMPY
from ge.core.passes._util import build_kernel, memoized_kernels, planned

F = TensorProto.FLOAT


@pytest.fixture
def conv_graph(make_model, load, requires):
    requires("Conv")
    w = np.ones((4, 3, 3, 3), np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="c", pads=[1, 1, 1, 1], strides=[1, 1])
    return load(make_model([node], {"x": (F, [1, 3, 8, 8])}, ["y"], {"w": w}))


def test_a_node_planned_again_unchanged_is_the_same_kernel(conv_graph):
    g = conv_graph
    node = g.nodes[0]
    with memoized_kernels():
        k = build_kernel(g, node)
        assert build_kernel(g, node) is k
    assert build_kernel(g, node) is not build_kernel(g, node)  # outside a compile: planned anew


@pytest.mark.parametrize("change", ["attribute in place", "equal weights", "input shape", "name"])
def test_a_change_plans_anew(conv_graph, change):
    g = conv_graph
    node = g.nodes[0]
    with memoized_kernels():
        k = build_kernel(g, node)
        if change == "attribute in place":
            node.attrs["strides"][0] = 2
        elif change == "equal weights":  # constants compared by identity: no array compared by value
            g.initializers["w"] = g.initializers["w"].copy()
        elif change == "input shape":
            g.values["x"].shape = (1, 3, 9, 9)
        else:
            node.name = "c2"
        assert build_kernel(g, node) is not k


def test_attributes_compare_as_values_of_their_own_type(make_model, load, requires):
    """-0.0 is not 0.0 (a sign a kernel may keep), nor 1.0 the int 1, though Python finds them equal."""
    requires("LeakyRelu")
    g = load(make_model([helper.make_node("LeakyRelu", ["x"], ["y"], name="r", alpha=0.0)], {"x": (F, [4])}, ["y"]))
    node = g.nodes[0]
    with memoized_kernels():
        k = build_kernel(g, node)
        node.attrs["alpha"] = -0.0
        assert build_kernel(g, node) is not k
        node.attrs["alpha"] = 1.0
        k = build_kernel(g, node)
        node.attrs["alpha"] = 1
        assert build_kernel(g, node) is not k
        node.attrs["alpha"] = 1
        assert build_kernel(g, node) is build_kernel(g, node)


def test_a_backend_keeps_its_own_kernel(conv_graph):
    """The builder plans each node on the best backend and on numpy (with its output metas, which a
    Conv does not read): the numpy plan made before (the check after the fusions) is not dropped by
    the other."""
    from ge.core.compile.build import _Metas, _kernel, _plan_inputs
    g = conv_graph
    node = g.nodes[0]
    plan = _plan_inputs(g, node, _Metas(g))
    with memoized_kernels():
        numpy_plan = build_kernel(g, node)
        _kernel(node, 17, plan)
        assert _kernel(node, 17, plan, NUMPY) is numpy_plan


def test_output_metas_count_for_a_kernel_that_reads_them(make_model, load, requires):
    """MaxPool computes its indices only when the node names that output: planned with the output
    metas (an omitted one None), it is another plan than without them."""
    requires("MaxPool")
    g = load(make_model([helper.make_node("MaxPool", ["x"], ["y", ""], name="p", kernel_shape=[2, 2])],
                        {"x": (F, [1, 1, 4, 4])}, ["y"]))
    node = g.nodes[0]
    cls = type(build_kernel(g, node))
    assert cls.reads_outputs
    with memoized_kernels():
        k = planned(cls, node.attrs, [g.meta("x")], [None], None, 17, "p", 2, NUMPY)
        with_metas = planned(cls, node.attrs, [g.meta("x")], [None], [g.meta("y"), None], 17, "p", 2, NUMPY)
        assert with_metas is not k and k.with_indices and not with_metas.with_indices
