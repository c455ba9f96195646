import importlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.model.ir import Meta
from ge.core.passes import fuse_activation, infer_shapes
from ge.core.passes.fuse_activation import EPILOGUE, build_epilogue, works_in_place

fa = importlib.import_module("ge.core.passes.fuse_activation")  # the module (the package exports the function)
F = TensorProto.FLOAT
rng = np.random.default_rng(1)


def _conv_model(make_model, act_nodes, extra_inits=None, outputs=("y",)):
    inits = {"W": rng.standard_normal((4, 3, 3, 3)).astype(np.float32), **(extra_inits or {})}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1])] + act_nodes
    return make_model(nodes, {"x": (F, [1, 3, 5, 5])}, list(outputs), inits)


def test_conv_relu_sets_epilogue_and_removes_node(make_model, load, run_ort, run_ge, requires):
    requires("Conv", "Relu")
    model = _conv_model(make_model, [helper.make_node("Relu", ["c"], ["y"])])
    g = load(model)
    stats = {}
    fuse_activation(g, stats=stats)
    assert stats["fused"] == 1
    assert [n.op_type for n in g.nodes] == ["Conv"]
    conv = g.nodes[0]
    assert conv.outputs == ["y"] and conv.attrs[EPILOGUE] == [["Relu", {}]]
    assert "c" not in g.values
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_clip_bounds_become_attrs(make_model, load, run_ort, run_ge, requires, monkeypatch):
    requires("Conv", "Clip")
    model = _conv_model(make_model, [helper.make_node("Clip", ["c", "lo", "hi"], ["y"])],
                        {"lo": np.array(0, np.float32), "hi": np.array(6, np.float32)})
    really = works_in_place("Clip", {"min": 0.0, "max": 6.0}, np.dtype(np.float32), 17)
    monkeypatch.setattr(fa, "works_in_place", lambda *a: True)
    g = load(model)
    fuse_activation(g)
    assert [n.op_type for n in g.nodes] == ["Conv"]
    assert g.nodes[0].attrs[EPILOGUE] == [["Clip", {"min": 0.0, "max": 6.0}]]
    if really:  # the Clip kernel applies its constant bounds when run in place
        x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32) * 5
        np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_activation_whose_kernel_is_not_in_place_safe_stays(make_model, load, requires, monkeypatch):
    requires("Conv", "Relu")
    monkeypatch.setattr(fa, "works_in_place", lambda *a: False)
    g = load(_conv_model(make_model, [helper.make_node("Relu", ["c"], ["y"])]))
    fuse_activation(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"]


def test_chained_activations_and_add_producer(make_model, load, run_ort, run_ge, requires):
    requires("Add", "Relu", "Sigmoid")
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["y"])]
    model = make_model(nodes, {"a": (F, [2, 3]), "b": (F, [2, 3])}, ["y"])
    g = load(model)
    fuse_activation(g)
    assert [n.op_type for n in g.nodes] == ["Add"]
    assert g.nodes[0].attrs[EPILOGUE] == [["Relu", {}], ["Sigmoid", {}]]
    feeds = {"a": rng.standard_normal((2, 3)).astype(np.float32), "b": rng.standard_normal((2, 3)).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_no_fusion_when_output_is_shared_or_a_graph_output(make_model, load, requires):
    requires("Conv", "Relu")
    shared = _conv_model(make_model, [helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Add", ["r", "c"], ["y"])])
    g = load(shared)
    fuse_activation(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu", "Add"]
    out = _conv_model(make_model, [helper.make_node("Relu", ["c"], ["y"])], outputs=("y", "c"))
    g = load(out, name="out.onnx")
    fuse_activation(g)
    assert [n.op_type for n in g.nodes] == ["Conv", "Relu"] and EPILOGUE not in g.nodes[0].attrs


def test_leaky_relu_keeps_its_attrs(make_model, load, requires, monkeypatch):
    requires("Conv", "LeakyRelu")
    monkeypatch.setattr(fa, "works_in_place", lambda *a: True)
    g = load(_conv_model(make_model, [helper.make_node("LeakyRelu", ["c"], ["y"], alpha=0.2)]))
    fuse_activation(g)
    assert g.nodes[0].attrs[EPILOGUE] == [["LeakyRelu", {"alpha": pytest.approx(0.2)}]]


def test_in_place_check_and_build_epilogue(requires):
    requires("Relu")
    assert works_in_place("Relu", {}, np.dtype(np.float32), 17)
    assert not works_in_place("NoSuchActivation", {}, np.dtype(np.float32), 17)
    y = np.array([[-1.0, 2.0]], np.float32)
    build_epilogue([["Relu", {}]], Meta(y.dtype, y.shape))(y)
    np.testing.assert_array_equal(y, [[0.0, 2.0]])


def test_shapes_stay_valid_after_fusion(make_model, load, requires):
    requires("Conv", "Relu")
    g = load(_conv_model(make_model, [helper.make_node("Relu", ["c"], ["y"])]))
    fuse_activation(g)
    infer_shapes(g)
    assert g.values["y"].shape == (1, 4, 5, 5)


def test_optimize_twice_is_stable(make_model, load, run_ort, run_ge, requires):
    requires("Conv", "Relu")
    from ge.core.passes import optimize
    model = _conv_model(make_model, [helper.make_node("Relu", ["c"], ["y"])])
    g = load(model)
    first = optimize(g)
    second = optimize(g)
    assert first["fused_activations"] == 1 and second["fused_activations"] == 0
    assert second["folded_nodes"] == 0 and second["removed_nodes"] == 0
    assert [n.op_type for n in g.nodes] == ["Conv"] and g.nodes[0].attrs[EPILOGUE] == [["Relu", {}]]
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
