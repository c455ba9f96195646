"""float16 exports (samples/build_samples.py's float16_of: onnxruntime's float16 converter with
keep_io_types, as engineers deploying fp16 write them) compile and run on cpu and sim within float16
tolerance of the float32 model run by onnxruntime; their float16 weights stay float16 in the OM."""
import numpy as np
import onnx
import pytest

from ge.core import api

from .conftest import onnxruntime_outputs, run_om
from .test_dynamic import bert_feeds

DEVICES = ["cpu", "sim"]


def assert_float16_tolerance(got, want):
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    cosine = float((got.astype(np.float64) * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cosine > 0.9999, cosine
    assert np.abs(got - want).max() < 1e-2 * np.abs(want).max()


@pytest.fixture(scope="module")
def exports(samples, tmp_path_factory):
    """{name: (float32 path, float16 path, feeds, input_shape)}: MobileNetV2 as the converter leaves
    it (its input Cast after the Conv reading it: unsorted) and BERT-style (sorted by the sample)."""
    tmp = tmp_path_factory.mktemp("fp16_exports")
    cases = {"mobilenetv2": (samples.mobilenetv2_style(), False),
             "bert": (samples.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100), True)}
    out = {}
    for name, (model, sort) in cases.items():
        fp32, fp16 = str(tmp / f"{name}.onnx"), str(tmp / f"{name}_fp16.onnx")
        onnx.save(model, fp32)
        onnx.save(samples.float16_of(model, sort=sort), fp16)
        feeds = samples.sample_inputs(model, batch=2, seq=24)
        out[name] = fp32, fp16, feeds, {k: list(v.shape) for k, v in feeds.items()}
    return out


def test_the_unsorted_export_is_what_the_converter_writes(exports):
    with pytest.raises(onnx.checker.ValidationError, match="topologically sorted"):
        onnx.checker.check_model(onnx.load(exports["mobilenetv2"][1]))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["mobilenetv2", "bert"])
def test_float16_export_within_float16_tolerance(exports, tmp_path, name, device):
    fp32, fp16, feeds, shapes = exports[name]
    result = api.atc(fp16, str(tmp_path / name), input_shape=shapes)
    reference = api.atc(fp32, str(tmp_path / f"{name}_fp32"), input_shape=shapes)
    weights = {t["dtype"] for t in api.inspect(result.om_path)["weights"] if t["dtype"].startswith("float")}
    assert "float16" in weights
    assert result.model.weight_size < 0.55 * reference.model.weight_size  # the weights stay half
    for got, want in zip(run_om(result.om_path, device, feeds), onnxruntime_outputs(fp32, feeds)):
        assert_float16_tolerance(got, want)


@pytest.mark.parametrize("device", DEVICES)
def test_float16_bert_export_with_unknown_dims(exports, tmp_path, device):
    """The same export on the hybrid path (batch and sequence unknown): float16 unknown-shape nodes."""
    fp32, fp16, _, _ = exports["bert"]
    result = api.atc(fp16, str(tmp_path / "bert_dyn"), input_shape="input_ids:-1,-1;attention_mask:-1,-1")
    assert "float16" in {n.dtypes[0] for n in result.model.nodes if n.op_type == "FusedMatMul"}
    for b, s in [(1, 16), (3, 24)]:
        feeds = bert_feeds(b, s)
        for got, want in zip(run_om(result.om_path, device, feeds), onnxruntime_outputs(fp32, feeds)):
            assert_float16_tolerance(got, want)

