"""Small real models (samples' GPT-2-style decoder and CIFAR ResNet-8, benchmarks/small_models.py's
rows at test size): atc -> OM -> run == onnxruntime within 1e-4, static and dynamic."""
import numpy as np
import onnx
import pytest

from ge.core import api

from .conftest import make_feeds, onnxruntime_outputs

GPT2 = dict(layers=2, hidden=64, heads=2, vocab=128, max_pos=40)


def _compile(tmp_path, model, spec=None):
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    return path, api.atc(path, str(tmp_path / "model"), input_shape=spec)


def _run_twice(om_path, feeds):
    model_id = api.load_from_file(om_path, "cpu")
    try:
        first = api.execute(model_id, feeds)
        return first, api.execute(model_id, feeds), api.model(model_id)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("seq", [8, 32])
def test_gpt2_style_equals_onnxruntime_with_one_gelu_task(samples, tmp_path, seq):
    path, result = _compile(tmp_path, samples.gpt2_style(seq=seq, **GPT2))
    feeds = make_feeds(onnx.load(path), {})
    got, again, loaded = _run_twice(result.om_path, feeds)
    expected = onnxruntime_outputs(path, feeds)
    np.testing.assert_allclose(got[0], expected[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[0], again[0])
    ops = [t.plan.kernel.op_type for t in loaded.default_context.handle]
    assert ops.count("Gelu") == GPT2["layers"] and "Pow" not in ops and "Tanh" not in ops


def test_gpt2_style_with_dynamic_seq(samples, tmp_path):
    path, result = _compile(tmp_path, samples.gpt2_style(seq="seq", **GPT2), spec="input_ids:1,-1")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for seq in (5, 17, 5):
            feeds = make_feeds(onnx.load(path), {"input_ids": [1, seq]}, seed=seq)
            got = api.execute(model_id, feeds)
            np.testing.assert_allclose(got[0], onnxruntime_outputs(path, feeds)[0], rtol=1e-4, atol=1e-5)
    finally:
        api.unload(model_id)


def test_resnet8_equals_onnxruntime(samples, tmp_path):
    path, result = _compile(tmp_path, samples.resnet8())
    feeds = make_feeds(onnx.load(path), {})
    got, again, _ = _run_twice(result.om_path, feeds)
    np.testing.assert_allclose(got[0], onnxruntime_outputs(path, feeds)[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(got[0], again[0])
