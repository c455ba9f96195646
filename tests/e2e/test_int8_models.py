"""Quantized models as onnxruntime's quantizer writes them (samples/quantize_samples.py), compiled and
run by ge on both plans: within one quantization step of onnxruntime's unfused graph (ort_unfused:
float ops between DequantizeLinear and QuantizeLinear, exact integer products; onnxruntime's own int8
kernels saturate on AVX2 without VNNI), the same top-1 class, and run as quantized kernels (no float
Conv/MatMulInteger left)."""
import os

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.inspection import om_info

from tests.conftest import ort_unfused

from .conftest import ROOT, load_sample_script, make_feeds

pytestmark = pytest.mark.usefixtures("both_plans")


@pytest.fixture(params=["native", "numpy"])
def both_plans(request, default_backend):
    default_backend(request.param)


@pytest.fixture(scope="module")
def quantize():
    return load_sample_script("quantize_samples")


def compile_and_run(model, feeds, tmp_path):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    spec = ";".join(f"{n}:{','.join(map(str, a.shape))}" for n, a in feeds.items())
    om = api.atc(path, str(tmp_path / "model"), input_shape=spec).om_path
    model_id = api.load_from_file(om, "cpu")
    try:
        got = api.execute(model_id, feeds)
    finally:
        api.unload(model_id)
    return got, [t["op"] for t in om_info.inspect(om)["tasks"]]


def output_step(model) -> float:
    """The scale of the QuantizeLinear feeding the model's output (its last DequantizeLinear)."""
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    dq = next(n for n in model.graph.node if n.output[0] == model.graph.output[0].name)
    return float(inits[dq.input[1]])


def test_committed_sample(tmp_path):
    model = onnx.load(os.path.join(ROOT, "samples", "models", "tiny_cnn_int8_qdq.onnx"))
    x = np.load(os.path.join(ROOT, "samples", "models", "tiny_cnn_int8_qdq_input.npy"))
    (got,), ops = compile_and_run(model, {"image": x}, tmp_path)
    (want,) = ort_unfused(model, {"image": x})
    assert np.abs(got - want).max() <= output_step(model) * 1.001 and got.argmax() == want.argmax()
    assert "Conv" not in ops and ops.count("QLinearConv") == 5


@pytest.mark.parametrize("form", ["qdq", "qoperator"])
def test_mobilenetv2_static_int8(samples, quantize, tmp_path, form):
    model = samples.mobilenetv2_style(image=32, width_mult=0.35, classes=10)
    calibration = quantize.calibration_images((1, 3, 32, 32))
    qmodel = getattr(quantize, form)(model, calibration)
    feeds = {"image": np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)}
    (got,), ops = compile_and_run(qmodel, feeds, tmp_path)
    # the reference is the QDQ form unfused (the QOperator form's QLinear ops are onnxruntime's int8
    # kernels); both forms come from one calibration: the same scales and zero points
    twin = qmodel if form == "qdq" else quantize.qdq(model, calibration)
    assert output_step(twin) == output_step(qmodel)
    (want,) = ort_unfused(twin, feeds)
    assert np.abs(got - want).max() <= output_step(qmodel) * 1.001
    assert got.argmax() == want.argmax()
    assert "Conv" not in ops and "QuantizeLinear" in ops and ops.count("QLinearConv") == 52


def test_bert_dynamic_int8(samples, quantize, tmp_path):
    model = quantize.dynamic(samples.bert_style(layers=1, hidden=64, heads=2, intermediate=128, vocab=100))
    feeds = make_feeds(model, {"input_ids": [1, 16], "attention_mask": [1, 16]})
    got, ops = compile_and_run(model, feeds, tmp_path)
    for g, w in zip(got, ort_unfused(model, feeds)):
        # the products are exact on both sides, the float steps around them round in another order
        # (MatMulIntegerToFloat's one store against Cast, Mul, Add): a float that lands on another side
        # of a rounding boundary of a later DynamicQuantizeLinear moves its products by a step
        np.testing.assert_allclose(g, w, rtol=0, atol=2e-3 * np.abs(w).max())
    assert "MatMulInteger" not in ops and ops.count("MatMulIntegerToFloat") == 7


def test_inspect_shows_scale_and_zero_point(tmp_path):
    model = onnx.load(os.path.join(ROOT, "samples", "models", "tiny_cnn_int8_qdq.onnx"))
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    info = om_info.inspect(api.atc(path, str(tmp_path / "m")).om_path)
    quant = {t["tensor"]: t["quantization"] for t in info["allocations"]}
    # the input as QuantizeLinear writes it: its scale and zero point as the model states them
    assert quant["image_QuantizeLinear_Output"] == \
        f"scale {float(inits['image_scale']):.6g}, zero point {int(inits['image_zero_point'])}"
    assert all(t["quantization"] for t in info["allocations"] if t["dtype"] in ("int8", "uint8"))
    assert all(not t["quantization"] for t in info["allocations"] if t["dtype"] == "float32")
    weights = {w["name"]: w["quantization"] for w in info["weights"]}
    assert weights["ConvBnFusion_W_stem.conv.weight_quantized"].startswith("scale per channel (16: ")
