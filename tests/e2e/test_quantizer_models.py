"""Models written by onnxruntime's quantization tools (quantize_dynamic, quantize_static, and
onnxruntime's optimizer saving a quantized model), compiled by ge and compared with onnxruntime:
DynamicQuantizeLSTM, DynamicQuantizeMatMul, QLinearWhere and the com.microsoft QuantizeLinear /
DequantizeLinear, beside the QLinear* ops ge had.

Tolerances: ge's integer products are exact (checked bit for bit against numpy int32 below); the
float steps around them may round differently from onnxruntime's in the last place (its MLAS
activations, its order of adds). Such a difference can move a value across a rounding boundary of
a later quantization by one step: for an LSTM, one step of h's scale (h in [-1, 1]: 2/255 at most)
through the largest recurrent weight; for a QOperator model, one step of an output's scale.

onnxruntime is an exact oracle only where its integer kernels are: on x86 CPUs without VNNI its u8 x s8
products add pairs in saturating int16 (vpmaddubsw: 2 x 255 x 127 overflows). Models whose u8 x s8
products it runs fused (QGemm/QLinearConv, QAttention, DynamicQuantizeMatMul) are quantized here with
reduce_range (7-bit weights, which onnxruntime's quantizer offers for those CPUs), so that its result is the
same on every CPU; ge's exact products over full-range weights are checked against numpy int64 in
tests/core/kernels (int8_reference.py) and below (test_the_quantized_product_is_the_int32_product_scaled)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic, quantize_static

from ge.core import api
from ge.core.kernels.ops.dynamic_quantize import quantized_product

DEVICES = ["cpu", "sim"]


def _w(rng, *shape, scale=0.4):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _onnxruntime(path, feeds):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # onnxruntime's LSTM quantizes a batch per thread: one, as ge
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _ge(path, feeds, out, device="cpu"):
    result = api.atc(path, out)
    model_id = api.load_from_file(result.om_path, device)
    try:
        return api.execute(model_id, feeds)
    finally:
        api.unload(model_id)


def _lstm_model(rng, steps, batch, inputs, hidden, direction="forward", lens=None, initial=False, peepholes=False,
                outputs=("Y", "Y_h", "Y_c")):
    dirs = 2 if direction == "bidirectional" else 1
    names = ["x", "W", "R", "B", "", "", "", ""]
    inits = [numpy_helper.from_array(_w(rng, dirs, 4 * hidden, inputs), "W"),
             numpy_helper.from_array(_w(rng, dirs, 4 * hidden, hidden), "R"),
             numpy_helper.from_array(_w(rng, dirs, 8 * hidden), "B")]
    graph_inputs = [helper.make_tensor_value_info("x", T.FLOAT, [steps, batch, inputs])]
    feeds = {"x": _w(rng, steps, batch, inputs, scale=1.2)}
    if lens is not None:
        inits.append(numpy_helper.from_array(np.array(lens, np.int32), "lens"))
        names[4] = "lens"
    if initial:
        for k, name in ((5, "h0"), (6, "c0")):
            graph_inputs.append(helper.make_tensor_value_info(name, T.FLOAT, [dirs, batch, hidden]))
            names[k] = name
            feeds[name] = _w(rng, dirs, batch, hidden)
    if peepholes:
        inits.append(numpy_helper.from_array(_w(rng, dirs, 3 * hidden), "P"))
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    node = helper.make_node("LSTM", names, [o if o in outputs else "" for o in ("Y", "Y_h", "Y_c")],
                            hidden_size=hidden, direction=direction)
    graph = helper.make_graph([node], "lstm", graph_inputs,
                              [helper.make_tensor_value_info(o, T.FLOAT, None) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model, feeds


LSTMS = {
    "forward": dict(steps=6, batch=1, inputs=5, hidden=8),
    "reverse": dict(steps=6, batch=1, inputs=5, hidden=8, direction="reverse"),
    "bidirectional_batch": dict(steps=6, batch=2, inputs=5, hidden=8, direction="bidirectional"),
    "sequence_lens": dict(steps=6, batch=3, inputs=5, hidden=8, direction="bidirectional", lens=[6, 3, 0]),
    "sequence_lens_without_Y": dict(steps=6, batch=3, inputs=5, hidden=8, lens=[6, 2, 4], outputs=("Y_h", "Y_c")),
    "initial_states_peepholes": dict(steps=5, batch=2, inputs=4, hidden=6, direction="bidirectional", initial=True,
                                     peepholes=True),
    "longer": dict(steps=20, batch=1, inputs=48, hidden=32, direction="bidirectional"),
}


#: (weight type, per channel): onnxruntime's DynamicQuantizeLSTM refuses per-channel uint8 weights (their zero points differ)
WEIGHTS = {"int8": (QuantType.QInt8, False), "int8_per_channel": (QuantType.QInt8, True), "uint8": (QuantType.QUInt8, False)}


@pytest.mark.parametrize("weights", list(WEIGHTS))
@pytest.mark.parametrize("case", list(LSTMS))
def test_quantize_dynamic_lstm_is_dynamic_quantize_lstm_as_onnxruntime(tmp_path, case, weights):
    weight_type, per_channel = WEIGHTS[weights]
    rng = np.random.default_rng(len(case))
    model, feeds = _lstm_model(rng, **LSTMS[case])
    onnx.save(model, tmp_path / "f.onnx")
    quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=weight_type, per_channel=per_channel,
                     reduce_range=True)
    q = onnx.load(tmp_path / "q.onnx")
    assert [(n.domain, n.op_type) for n in q.graph.node] == [("com.microsoft", "DynamicQuantizeLSTM")]
    expected = _onnxruntime(str(tmp_path / "q.onnx"), feeds)
    got = _ge(str(tmp_path / "q.onnx"), feeds, str(tmp_path / "q"))
    step = 2 / 255 * np.abs(numpy_helper.to_array(model.graph.initializer[1])).max()  # one step of h through R
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=0, atol=step)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)  # what these seeds give: no boundary was crossed


def _ocr(rng, steps=8, hidden=16, classes=12):
    """An OCR-style CNN+LSTM: two Conv+Relu+MaxPool stages over a 16 x 4*steps line image, the columns
    as time steps into a bidirectional LSTM, a classifier per step, Softmax."""
    nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p", "cw2", "cb2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[8, 2], strides=[8, 2]),
             helper.make_node("Squeeze", ["p2", "ax2"], ["s"]),
             helper.make_node("Transpose", ["s"], ["t"], perm=[2, 0, 1]),
             helper.make_node("LSTM", ["t", "W", "R", "B"], ["Y", "", ""], hidden_size=hidden, direction="bidirectional"),
             helper.make_node("Transpose", ["Y"], ["yt"], perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["yt", "shape"], ["y2"]),
             helper.make_node("MatMul", ["y2", "fc"], ["logits"]),
             helper.make_node("Add", ["logits", "fcb"], ["biased"]),
             helper.make_node("Softmax", ["biased"], ["prob"], axis=-1)]
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("cw", _w(rng, 4, 1, 3, 3)), ("cb", _w(rng, 4)), ("cw2", _w(rng, 8, 4, 3, 3)), ("cb2", _w(rng, 8)),
        ("ax2", np.array([2], np.int64)), ("W", _w(rng, 2, 4 * hidden, 8)), ("R", _w(rng, 2, 4 * hidden, hidden)),
        ("B", _w(rng, 2, 8 * hidden)), ("shape", np.array([steps, 2 * hidden], np.int64)),
        ("fc", _w(rng, 2 * hidden, classes)), ("fcb", _w(rng, classes))]]
    graph = helper.make_graph(nodes, "ocr", [helper.make_tensor_value_info("x", T.FLOAT, [1, 1, 16, 4 * steps])],
                              [helper.make_tensor_value_info("prob", T.FLOAT, [steps, classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def ocr_paths(tmp_path_factory):
    """The float OCR model, quantize_dynamic's int8 model, and that model as onnxruntime's optimizer
    saves it (DynamicQuantizeLinear + MatMulInteger fused into DynamicQuantizeMatMul)."""
    d = tmp_path_factory.mktemp("ocr")
    _quantize_dynamic_and_optimize(_ocr(np.random.default_rng(4)), d, "ocr")
    return {k: str(d / f"{k}.onnx") for k in ("ocr", "ocr_int8", "ocr_int8_optimized")}


def _quantize_dynamic_and_optimize(model: onnx.ModelProto, directory, stem: str) -> None:
    """<stem>.onnx (the float model), <stem>_int8.onnx (quantize_dynamic's) and
    <stem>_int8_optimized.onnx (that one as onnxruntime's optimizer saves it) in `directory`."""
    onnx.save(model, directory / f"{stem}.onnx")
    quantize_dynamic(directory / f"{stem}.onnx", directory / f"{stem}_int8.onnx", weight_type=QuantType.QInt8,
                     reduce_range=True)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(directory / f"{stem}_int8_optimized.onnx")
    ort.InferenceSession(str(directory / f"{stem}_int8.onnx"), options, providers=["CPUExecutionProvider"])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which,ops", [
    ("ocr_int8", {"DynamicQuantizeLSTM"}),
    ("ocr_int8_optimized", {"DynamicQuantizeLSTM", "DynamicQuantizeMatMul"}),
])
def test_quantized_cnn_lstm_ocr(ocr_paths, tmp_path, which, ops, device):
    path = ocr_paths[which]
    assert ops <= {n.op_type for n in onnx.load(path).graph.node if n.domain == "com.microsoft"}
    x = np.random.default_rng(9).standard_normal((1, 1, 16, 32)).astype(np.float32)
    (expected,) = _onnxruntime(path, {"x": x})
    (got,) = _ge(path, {"x": x}, str(tmp_path / which), device)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
    (float_result,) = _onnxruntime(ocr_paths["ocr"], {"x": x})
    assert np.abs(got - float_result).max() < 0.05  # and still the float model's probabilities, roughly


@pytest.mark.parametrize("b_dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("shape", [(1, 7), (5, 33), (3, 4, 16)])
def test_the_quantized_product_is_the_int32_product_scaled(shape, b_dtype):
    """Exact: ge's dynamic quantization then (a_q - a_zero) @ (b_q - b_zero) against numpy's int32
    product of the same integers, scaled in float32."""
    rng = np.random.default_rng(2)
    a = (rng.standard_normal(shape) * 3).astype(np.float32).reshape(-1, shape[-1])
    info = np.iinfo(b_dtype)
    b = rng.integers(info.min, info.max + 1, (shape[-1], 6)).astype(b_dtype)
    b_zero = np.array(0 if b_dtype == np.int8 else 131, b_dtype)
    scale = rng.uniform(0.001, 0.01, 6).astype(np.float32)
    m, k = a.shape
    v = {"q": np.empty((m, k), np.uint8), "qt": np.empty((m, k), np.float32), "a": np.empty((m, k)),
         "acc": np.empty((m, 6))}
    out = np.empty((m, 6), np.float32)
    quantized_product(a, b.astype(np.float64) - float(b_zero), scale, out, v)
    lo, hi = min(a.min(), 0), max(a.max(), 0)
    a_scale = np.float32((np.float32(hi) - np.float32(lo)) / np.float32(255))
    a_zero = np.rint(np.clip(-np.float32(lo) / a_scale, 0, 255))
    a_q = np.clip(np.rint(a / a_scale) + a_zero, 0, 255).astype(np.int32)
    acc = (a_q - np.int32(a_zero)) @ (b.astype(np.int32) - np.int32(b_zero))
    np.testing.assert_array_equal(out, acc.astype(np.float32) * (a_scale * scale))


def _cnn(rng):
    """A small CNN through the ops quantize_static turns into com.microsoft QLinear* ops: LeakyRelu,
    SiLU (Sigmoid, Mul), a residual Add, AveragePool and MaxPool joined by Concat, GlobalAveragePool,
    Gemm, and Where choosing between logits and half of them."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["c1"], ["l1"], alpha=0.1),
             helper.make_node("Conv", ["l1", "w2", "b2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c2"], ["g2"]),
             helper.make_node("Mul", ["c2", "g2"], ["m2"]),
             helper.make_node("Add", ["m2", "l1"], ["a2"]),
             helper.make_node("AveragePool", ["a2"], ["ap"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxPool", ["a2"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Concat", ["ap", "mp"], ["cat"], axis=1),
             helper.make_node("Relu", ["cat"], ["rc"]),
             helper.make_node("GlobalAveragePool", ["rc"], ["gp"]),
             helper.make_node("Flatten", ["gp"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["o"], transB=1),
             helper.make_node("Mul", ["o", "half"], ["o2"]),
             helper.make_node("Greater", ["o", "zero"], ["positive"]),
             helper.make_node("Where", ["positive", "o", "o2"], ["wh"]),
             helper.make_node("Softmax", ["wh"], ["prob"], axis=-1)]
    inits = [numpy_helper.from_array(a, n) for n, a in [
        ("w1", _w(rng, 8, 3, 3, 3)), ("b1", _w(rng, 8)), ("w2", _w(rng, 8, 8, 3, 3)), ("b2", _w(rng, 8)),
        ("fw", _w(rng, 10, 16)), ("fb", _w(rng, 10)), ("zero", np.zeros(1, np.float32)),
        ("half", np.full(1, 0.5, np.float32))]]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", T.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("prob", T.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class _Images(CalibrationDataReader):
    def __init__(self, name, shape):
        self.feeds = iter([{name: np.random.default_rng(k).standard_normal(shape).astype(np.float32)} for k in range(4)])

    def get_next(self):
        return next(self.feeds, None)


def _as_written(path, feeds) -> list:
    """onnxruntime with its graph optimizations off: each op its own kernel, as the model says (its
    optimizer fuses QDQ groups into saturating integer kernels, not the reference here)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"]).run(None, feeds)


def _output_step(model: onnx.ModelProto) -> float:
    """The scale of the DequantizeLinear that writes the model's output: one step of it."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    (dq,) = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and model.graph.output[0].name in n.output]
    return float(inits[dq.input[1]])


STATIC = {  # name: (model, input shape, quantize_static options, com.microsoft ops the model must hold)
    "cnn_qoperator_uint8": (_cnn, (1, 3, 16, 16), dict(quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                            reduce_range=True, extra_options={"ForceQuantizeNoInputCheck": True}),
                            {"QLinearWhere", "QLinearLeakyRelu", "QLinearSigmoid", "QLinearMul", "QLinearAdd",
                             "QLinearAveragePool", "QLinearConcat", "QLinearGlobalAveragePool", "QGemm", "QLinearSoftmax"}),
    "cnn_qoperator_int8": (_cnn, (1, 3, 16, 16), dict(quant_format=QuantFormat.QOperator, activation_type=QuantType.QInt8,
                           extra_options={"ForceQuantizeNoInputCheck": True}), {"QLinearWhere", "QGemm"}),
    "cnn_qdq_int16_contrib": (_cnn, (1, 3, 16, 16), dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt16,
                              extra_options={"UseQDQContribOps": True}), {"QuantizeLinear", "DequantizeLinear"}),
    "ocr_qdq_int16_contrib": (_ocr, (1, 1, 16, 32), dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt16,
                              extra_options={"UseQDQContribOps": True}), {"QuantizeLinear", "DequantizeLinear"}),
    "ocr_qdq_uint16_contrib": (_ocr, (1, 1, 16, 32), dict(quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt16,
                               weight_type=QuantType.QUInt8, extra_options={"UseQDQContribOps": True}),
                               {"QuantizeLinear", "DequantizeLinear"}),
}


@pytest.mark.parametrize("name", list(STATIC))
def test_quantize_static_models_as_onnxruntime_runs_their_ops(tmp_path, name):
    """Against onnxruntime running each op as the model says (_as_written)."""
    build, shape, options, ops = STATIC[name]
    onnx.save(build(np.random.default_rng(6)), tmp_path / "f.onnx")
    quantize_static(tmp_path / "f.onnx", tmp_path / "q.onnx", _Images("x", shape),
                    **{"weight_type": QuantType.QInt8, **options})
    q = onnx.load(tmp_path / "q.onnx")
    assert ops <= {n.op_type for n in q.graph.node if n.domain == "com.microsoft"}
    for seed in range(3):
        x = np.random.default_rng(10 + seed).standard_normal(shape).astype(np.float32)
        (expected,) = _as_written(tmp_path / "q.onnx", {"x": x})
        (got,) = _ge(str(tmp_path / "q.onnx"), {"x": x}, str(tmp_path / "q"), DEVICES[seed % 2])
        # one step of the output; 16-bit activations' steps are 256x finer than 8-bit ones, so a float
        # rounding difference in a layer before (FMA contraction at v3 and up, none at v2) can move an
        # intermediate requantization by a step, which the layers after carry to the output: there the
        # float32 conv's own relative error is the bound, not an output step
        fine = "int16" in name
        np.testing.assert_allclose(got, expected, rtol=1e-3 if fine else 0, atol=_output_step(q) * 1.001)
        assert (got == expected).mean() >= (0.7 if fine else 0.9)  # and mostly the very values


@pytest.mark.parametrize("batch", [1, 2])
def test_quantize_static_whisper_encoder_as_onnxruntime_runs_its_ops(tmp_path, samples, batch):
    """An audio classifier on Whisper's encoder quantized by quantize_static (per channel, QDQ), small: its
    1-D convs run the native int8 conv, the Q -> DQ pairs between float ops run as QuantizeDequantize and
    the attention's Softmax between two of them as SoftmaxQdq; the outputs those of onnxruntime running
    each op as the model says, within a step of the output."""
    shape = (batch, 16, 64)
    fp32 = samples.whisper_encoder_style(batch=batch, mels=16, frames=64, layers=2, hidden=32, heads=2, ffn=64,
                                         classes=5)
    onnx.save(fp32, tmp_path / "f.onnx")
    quantize_static(tmp_path / "f.onnx", tmp_path / "q.onnx", _Images("input_features", shape), per_channel=True,
                    quant_format=QuantFormat.QDQ)
    q = onnx.load(tmp_path / "q.onnx")
    compiled = api.atc(str(tmp_path / "q.onnx"), str(tmp_path / "q")).model
    ops = {t.op_type for t in compiled.tasks}
    assert {"QLinearConv", "QuantizeDequantize", "SoftmaxQdq"} <= ops and "Softmax" not in ops
    for seed in range(2):
        x = np.random.default_rng(20 + seed).standard_normal(shape).astype(np.float32)
        (expected,) = _as_written(tmp_path / "q.onnx", {"input_features": x})
        (got,) = _ge(str(tmp_path / "q.onnx"), [x], str(tmp_path / "q"), DEVICES[seed % 2])
        np.testing.assert_allclose(got, expected, rtol=0, atol=_output_step(q) * 1.001)


ATTENTION_MASKS = {  # mask_index kind: (its shape, its values for batch 2, sequence 5)
    "none": None,
    "key_lengths": ([2], np.array([5, 3], np.int32)),
    "end_and_start": ([4], np.array([5, 4, 0, 2], np.int32)),
    "raw_2d": ([2, 5], np.array([[1, 1, 1, 0, 1], [1, 1, 0, 0, 0]], np.int32)),
    "raw_3d": ([2, 5, 5], (np.random.default_rng(3).random((2, 5, 5)) < 0.7).astype(np.int32)),
    "unidirectional": None,
}


def _attention(rng, mask, batch=2, seq=5, hidden=16, heads=4, present=False):
    """The transformers optimizer's com.microsoft Attention over a float input (ge has no float kernel
    for it: the quantized model is what it runs)."""
    inputs = [helper.make_tensor_value_info("x", T.FLOAT, [batch, seq, hidden])]
    names = ["x", "w", "b"]
    if ATTENTION_MASKS[mask] is not None:
        inputs.append(helper.make_tensor_value_info("mask", T.INT32, ATTENTION_MASKS[mask][0]))
        names.append("mask")
    node = helper.make_node("Attention", names, ["y", "present"] if present else ["y"], domain="com.microsoft",
                            num_heads=heads, unidirectional=int(mask == "unidirectional"))
    outputs = [helper.make_tensor_value_info(o, T.FLOAT, None) for o in node.output]
    graph = helper.make_graph([node], "attention", inputs, outputs,
                              [numpy_helper.from_array(_w(rng, hidden, 3 * hidden), "w"),
                               numpy_helper.from_array(_w(rng, 3 * hidden, scale=0.1), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("mask", list(ATTENTION_MASKS))
def test_quantize_dynamic_attention_is_qattention_as_onnxruntime(tmp_path, mask, per_channel):
    """Exact integers, then float32 softmax attention: onnxruntime's float steps in another order,
    a few float32 ulps of the context (no later quantization to cross)."""
    rng = np.random.default_rng(8)
    onnx.save(_attention(rng, mask, present=mask == "none"), tmp_path / "f.onnx")
    quantize_dynamic(tmp_path / "f.onnx", tmp_path / "q.onnx", weight_type=QuantType.QInt8, per_channel=per_channel,
                     reduce_range=True)
    assert "QAttention" in {n.op_type for n in onnx.load(tmp_path / "q.onnx").graph.node}
    feeds = {"x": _w(rng, 2, 5, 16, scale=1.0)}
    if ATTENTION_MASKS[mask] is not None:
        feeds["mask"] = ATTENTION_MASKS[mask][1]
    expected = _onnxruntime(str(tmp_path / "q.onnx"), feeds)
    for device in DEVICES:
        got = _ge(str(tmp_path / "q.onnx"), feeds, str(tmp_path / device), device)
        for g, e in zip(got, expected):
            assert g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_qattention_with_a_past_state_is_refused_naming_the_node():
    from ge.core.model.errors import GraphError
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    f32, u8, i8 = np.dtype(np.float32), np.dtype(np.uint8), np.dtype(np.int8)
    metas = [Meta(u8, (1, 3, 8)), Meta(i8, (8, 24)), Meta(f32, (24,)), Meta(f32, ()), Meta(f32, ()), None,
             Meta(u8, ()), Meta(i8, ()), Meta(f32, (2, 1, 2, 4, 4))]
    with pytest.raises(GraphError, match=r"node 'qa' \(QAttention\): a past state \(input 8\) is not supported"):
        lookup("QAttention", "com.microsoft", 1)({"num_heads": 2}, metas, name="qa")
    with pytest.raises(GraphError, match=r"node 'qa' \(QAttention\): num_heads=3 does not divide the hidden size 8"):
        lookup("QAttention", "com.microsoft", 1)({"num_heads": 3}, metas[:8], name="qa")


def test_quantize_dynamic_cnn_saved_by_onnxruntime_optimizer(tmp_path):
    """quantize_dynamic's CNN, saved by onnxruntime's optimizer: its SiLU becomes com.microsoft
    QuickGelu, its classifier DynamicQuantizeMatMul (the integer parts exact, the float ones within
    float32 rounding: no dynamic quantization boundary is crossed for these inputs)."""
    _quantize_dynamic_and_optimize(_cnn(np.random.default_rng(6)), tmp_path, "cnn")
    path = str(tmp_path / "cnn_int8_optimized.onnx")
    ops = {n.op_type for n in onnx.load(path).graph.node if n.domain == "com.microsoft"}
    assert {"QuickGelu", "DynamicQuantizeMatMul"} <= ops
    for seed, device in enumerate(DEVICES):
        x = np.random.default_rng(20 + seed).standard_normal((1, 3, 16, 16)).astype(np.float32)
        (expected,) = _onnxruntime(path, {"x": x})
        (got,) = _ge(path, {"x": x}, str(tmp_path / device), device)
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("alpha", [None, 1.0, 0.5])
def test_quick_gelu_as_onnxruntime(tmp_path, alpha):
    attrs = {} if alpha is None else {"alpha": alpha}
    node = helper.make_node("QuickGelu", ["x"], ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", T.FLOAT, [4, 33])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [4, 33])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    onnx.save(model, tmp_path / "g.onnx")
    x = np.random.default_rng(1).standard_normal((4, 33)).astype(np.float32) * 6
    (expected,) = _onnxruntime(str(tmp_path / "g.onnx"), {"x": x})
    (got,) = _ge(str(tmp_path / "g.onnx"), {"x": x}, str(tmp_path / "g"))
    # onnxruntime's logistic is MLAS's rational approximation, a few 1e-6 absolute off in its tails
    # (where x * sigmoid(alpha x) is itself about 1e-6); ge's is exact to an ulp or two
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=5e-6)
