"""Nodes that omit an optional output and use a later one (LSTM ["Y", "", "Y_c"]): compiled tasks
keep a placeholder, so every output lands in its own place, on cpu and sim, as in onnxruntime."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core import api
from ge.formats.om import om_bytes, read_om

F = onnx.TensorProto.FLOAT
RNG = np.random.default_rng(0)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "omitted", [helper.make_tensor_value_info(*i) for i in inputs],
                          [helper.make_tensor_value_info(*o) for o in outputs],
                          [numpy_helper.from_array(a, k) for k, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def lstm_model(tail=False):
    T, B, I, H = 5, 2, 3, 4
    inits = [("W", RNG.standard_normal((1, 4 * H, I)).astype(np.float32)),
             ("R", RNG.standard_normal((1, 4 * H, H)).astype(np.float32)),
             ("Bias", RNG.standard_normal((1, 8 * H)).astype(np.float32))]
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "Bias"], ["Y", "", "Y_c"], hidden_size=H)]
    outputs = [("Y", F, [T, 1, B, H]), ("Y_c", F, [1, B, H])]
    if tail:  # a small graph: the cell state feeds more work
        nodes.append(helper.make_node("Tanh", ["Y_c"], ["t"]))
        nodes.append(helper.make_node("Add", ["t", "Y_c"], ["z"]))
        outputs = [("z", F, [1, B, H]), ("Y", F, [T, 1, B, H])]
    return model(nodes, [("x", F, [T, B, I])], outputs, inits, opset=14)


def layer_norm_model():
    inits = [("s", RNG.standard_normal(6).astype(np.float32)), ("b", RNG.standard_normal(6).astype(np.float32))]
    nodes = [helper.make_node("LayerNormalization", ["x", "s", "b"], ["Y", "", "InvStdDev"], axis=-1),
             helper.make_node("Relu", ["Y"], ["r"])]
    return model(nodes, [("x", F, [3, 4, 6])], [("r", F, [3, 4, 6]), ("InvStdDev", F, [3, 4, 1])], inits)


def unique_model():
    nodes = [helper.make_node("Unique", ["x"], ["Y", "", "inverse", ""], sorted=1)]
    return model(nodes, [("x", F, [12])], [("Y", F, None), ("inverse", onnx.TensorProto.INT64, None)])


def pool_model():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", ""], kernel_shape=[2, 2]),
             helper.make_node("Dropout", ["y"], ["d", ""])]
    return model(nodes, [("x", F, [1, 2, 4, 4])], [("d", F, [1, 2, 3, 3])], opset=13)


def check(tmp_path, m, x, device, **atc):
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    result = api.atc(path, str(tmp_path / "net"), **atc)
    model_id = api.load_from_file(result.om_path, device)
    try:
        got = api.execute(model_id, [x])
    finally:
        api.unload(model_id)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    return result


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("tail", [False, True])
def test_lstm_without_y_h(tmp_path, device, tail):
    result = check(tmp_path, lstm_model(tail), RNG.standard_normal((5, 2, 3)).astype(np.float32), device)
    (task,) = [t for t in result.model.tasks if t.op_type == "LSTM"]
    assert len(task.outputs) == 3 and task.outputs[1] is None and None not in (task.outputs[0], task.outputs[2])


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_layer_norm_without_mean(tmp_path, device):
    check(tmp_path, layer_norm_model(), RNG.standard_normal((3, 4, 6)).astype(np.float32), device)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_unique_without_indices_and_counts(tmp_path, device):
    x = np.array([3, 1, 2, 3, 1, 5, 5, 0, 2, 3, 7, 1], np.float32)
    check(tmp_path, unique_model(), x, device)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_omitted_trailing_outputs(tmp_path, device):
    """MaxPool without indices and Dropout without a mask: the omitted tail changes nothing."""
    result = check(tmp_path, pool_model(), RNG.standard_normal((1, 2, 4, 4)).astype(np.float32), device)
    assert [t.op_type for t in result.model.tasks] == ["MaxPool"]  # the mask-less Dropout stays an alias


def test_lstm_without_y_h_as_an_unknown_shape_node(tmp_path):
    """Hybrid execution builds its kernels without output metas: ys still keep the placeholder."""
    m = lstm_model()
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_param = "batch"
    for o in m.graph.output:
        o.type.tensor_type.shape.dim[-2].dim_param = "batch"
    path = str(tmp_path / "m.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "net"), input_shape="x:5,-1,3",
                     dynamic={"static_model_ops_lower_limit": 10})
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for b in (1, 3):
            x = RNG.standard_normal((5, b, 3)).astype(np.float32)
            for g, e in zip(api.execute(model_id, [x]), sess.run(None, {"x": x})):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)


def test_om_round_trip_keeps_the_placeholder(tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(lstm_model(), path)
    m = api.atc(path, str(tmp_path / "net")).model
    back = read_om(om_bytes(m))
    assert [t.outputs for t in back.tasks] == [t.outputs for t in m.tasks]
    assert any(None in t.outputs for t in back.tasks)
    info = api.om_to_json(api.atc(path, str(tmp_path / "net")).om_path)
    (task,) = info["tasks"]
    assert task["outputs"][1] is None and task["outputs"][2] is not None


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("op,gates", [("RNN", 1), ("GRU", 3), ("LSTM", 4)])
def test_recurrent_with_only_y_h(tmp_path, device, op, gates):
    """Output 0 (Y) omitted, only Y_h read, default activations (RNN's schema default names two)."""
    T, B, I, H = 4, 2, 3, 5
    inits = [("W", RNG.standard_normal((1, gates * H, I)).astype(np.float32)),
             ("R", RNG.standard_normal((1, gates * H, H)).astype(np.float32))]
    m = model([helper.make_node(op, ["x", "W", "R"], ["", "Y_h"], hidden_size=H)], [("x", F, [T, B, I])],
              [("Y_h", F, [1, B, H])], inits, opset=14)
    check(tmp_path, m, RNG.standard_normal((T, B, I)).astype(np.float32), device)
