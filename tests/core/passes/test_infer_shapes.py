import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.model.errors import GraphError, UnsupportedOpError
from ge.core.passes import infer_shapes

F = TensorProto.FLOAT


def test_fills_every_value(make_model, load, requires):
    requires("Relu", "Add")
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Add", ["a", "w"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [2, 3])}, ["y"], {"w": np.ones(3, np.float32)}))
    for name in ("a", "y"):
        g.values[name].shape = None
        g.values[name].dtype = None
    infer_shapes(g)
    assert g.values["a"].shape == (2, 3) and g.values["y"].shape == (2, 3)
    assert g.values["y"].dtype == np.float32


def test_custom_domain_op_is_named(make_model, load):
    nodes = [helper.make_node("FusedThing", ["x"], ["y"], name="ft", domain="com.example")]
    model = make_model(nodes, {"x": (F, [2])}, {"y": (F, [2])})
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    g = load(model)
    with pytest.raises(UnsupportedOpError) as e:
        infer_shapes(g)
    assert all(part in str(e.value) for part in ("com.example", "FusedThing", "'ft'"))


def test_cross_check_with_onnx_shapes(make_model, load, requires):
    requires("Relu")
    g = load(make_model([helper.make_node("Relu", ["x"], ["a"], name="r"),
                         helper.make_node("Relu", ["a"], ["y"])], {"x": (F, [2, 3])}, ["y"]))
    g.values["a"].shape = (3, 2)  # as if onnx had inferred something else
    with pytest.raises(GraphError, match=r"node 'r'.*\[2, 3\].*\[3, 2\]"):
        infer_shapes(g)
