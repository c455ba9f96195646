"""onnx's checker complaints that onnxruntime tolerates, looked at one by one (issue 19 item 1): each
is accepted (the model compiles and computes what onnxruntime computes) or refused with a reason.
The complaints onnxruntime shares are refused naming node and field: by ge's own check in a plain
model (core/compile/onnx_check.py), as the checker words them in any other."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError

W = np.arange(8, dtype=np.float32).reshape(2, 4) / 10
X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


def base() -> onnx.ModelProto:
    """x -> Relu -> Add(W) -> LeakyRelu -> y"""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                           helper.make_node("Add", ["r", "W"], ["a"], name="add"),
                           helper.make_node("LeakyRelu", ["a"], ["y"], name="leaky", alpha=0.1)], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info("y", T.FLOAT, [2, 4])], [numpy_helper.from_array(W, "W")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _nodes(m, field, value):
    for n in m.graph.node:
        setattr(n, field, value)


def _sparse_weights(m):
    del m.graph.initializer[:]
    flat = W.ravel()
    m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        numpy_helper.from_array(flat[flat != 0], "W"), numpy_helper.from_array(np.nonzero(flat)[0].astype(np.int64), "i"),
        [2, 4]))


def _input_without_shape(m):
    m.graph.input[0].type.tensor_type.ClearField("shape")


#: complaint -> (how the model gets it, what the checker says)
ACCEPTED = {
    "an initializer repeated with the same values": (
        lambda m: m.graph.initializer.append(numpy_helper.from_array(W, "W")), "initializer name is not unique"),
    "an IR 3 model whose initializers are not inputs": (lambda m: setattr(m, "ir_version", 3), "not in graph input"),
    "nodes spelling the default domain ai.onnx": (lambda m: _nodes(m, "domain", "ai.onnx"), "No opset import for domain"),
    "an input without a shape (--input_shape gives it)": (_input_without_shape, "Field 'shape' of 'type' is required"),
    "a value_info shape that contradicts inference (full check)": (
        lambda m: m.graph.value_info.append(helper.make_tensor_value_info("r", T.FLOAT, [3, 3])), "Inferred shape"),
    "an output declared with another shape (full check)": (
        lambda m: m.graph.output[0].CopyFrom(helper.make_tensor_value_info("y", T.FLOAT, [3, 5])), "Inferred shape"),
    "a sparse initializer (full check)": (_sparse_weights, "sparse_tensor"),
    "a main graph without a name": (lambda m: setattr(m.graph, "name", ""), "Field 'name' of 'graph' is required"),
    "IR version 2 with opset imports": (lambda m: setattr(m, "ir_version", 2), "IR version < 3"),
    # the same where onnx's checker checks the model (not plain: a sparse initializer)
    "a main graph without a name, checked by onnx": (
        lambda m: (_sparse_weights(m), setattr(m.graph, "name", "")), "Field 'name' of 'graph' is required"),
    "IR version 2 with opset imports, checked by onnx": (
        lambda m: (_sparse_weights(m), setattr(m, "ir_version", 2)), "IR version < 3"),
}


@pytest.mark.parametrize("complaint", list(ACCEPTED))
def test_tolerated_complaints_compile_and_match_onnxruntime(tmp_path, complaint):
    mutate, says = ACCEPTED[complaint]
    m = base()
    mutate(m)
    with pytest.raises(Exception, match=says):
        onnx.checker.check_model(m, full_check=True)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), input_shape="x:2,4").om_path)
    try:
        got = api.execute(model_id, [X])
    finally:
        api.unload(model_id)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6)


#: what the checker accepts and onnxruntime runs, where ge makes a choice
def test_initializers_listed_as_inputs_are_constants(tmp_path):
    """onnxruntime lets a caller override them; ge (as ATC) compiles them as weights."""
    m = base()
    m.graph.input.append(helper.make_tensor_value_info("W", T.FLOAT, [2, 4]))
    m.graph.initializer.append(numpy_helper.from_array(W, "unused"))
    _nodes(m, "name", "")  # and nodes without names, which get unique ones
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    onnx.checker.check_model(m, full_check=True)
    result = api.atc(path, str(tmp_path / "m"))
    assert [d.name for d in result.model.inputs] == ["x"]
    assert {w.name for w in result.model.weights} == {"W"}  # the unused initializer is dropped
    model_id = api.load_from_file(result.om_path)
    try:
        want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]
        np.testing.assert_allclose(api.execute(model_id, [X])[0], want, rtol=1e-6)
    finally:
        api.unload(model_id)


REFUSED = {
    "an initializer repeated with other values": (
        lambda m: m.graph.initializer.append(numpy_helper.from_array(W * 2, "W")),
        True, "initializer 'W' is given twice with different values (onnxruntime silently takes the last)"),
    "an attribute of another type (int for float)": (
        lambda m: (m.graph.node[2].ClearField("attribute"), m.graph.node[2].attribute.append(
            helper.make_attribute("alpha", 1))), False, "node 'leaky' (LeakyRelu): attribute 'alpha' is INT, the op's schema declares FLOAT"),
    "an attribute the op does not have": (
        lambda m: m.graph.node[0].attribute.append(helper.make_attribute("foo", 1)), False,
        "node 'relu' (Relu): unrecognized attribute 'foo' (the op's attributes at opset 17: none)"),
    "an IR version newer than onnx knows": (lambda m: setattr(m, "ir_version", 99), False, "ir_version 99 is higher"),
}


@pytest.mark.parametrize("complaint", list(REFUSED))
def test_refused_complaints_name_their_reason(tmp_path, complaint):
    mutate, onnxruntime_runs, message = REFUSED[complaint]
    m = base()
    mutate(m)
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    try:
        ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        ran = True
    except Exception:  # (onnxruntime's load errors have no common type)
        ran = False
    assert ran == onnxruntime_runs
    with pytest.raises(GeError, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        api.atc(path, str(tmp_path / "m"))
    assert str(e.value).startswith(path) and "\n" not in str(e.value)
    assert not (tmp_path / "m.om").exists()
