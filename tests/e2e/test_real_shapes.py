"""Issue 31's real-model shapes, small: a PaddleOCR DBNet detector and CRNN recogniser, a YOLOv8n-style
detector and a Whisper encoder (samples/build_samples.py) compiled by ge equal onnxruntime's outputs (test_every_level.py
reruns this at v2, v3 and on the numpy plans)."""
import numpy as np
import onnx
import pytest

from ge.core import api

from .conftest import make_feeds, onnxruntime_outputs, run_om

CASES = {
    "dbnet": lambda s: s.dbnet_style(height=64, width=96, scale=0.25, neck=32),
    "crnn_b2": lambda s: s.crnn_lcnet_style(batch=2, width=64, scale=0.25, hidden=16, classes=50),
    "yolov8": lambda s: s.yolov8_style(image=64, classes=8),  # channels of whole blocks: C2f runs blocked
    "whisper": lambda s: s.whisper_encoder_style(mels=16, frames=200, layers=2, hidden=64, heads=2, ffn=128),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_outputs_equal_onnxruntime(name, samples, tmp_path):
    model = CASES[name](samples)
    path = str(tmp_path / "model.onnx")
    onnx.save(model, path)
    feeds = make_feeds(model, {})
    spec = ";".join(f"{n}:{','.join(map(str, a.shape))}" for n, a in feeds.items())
    om = api.atc(path, str(tmp_path / "model"), input_shape=spec).om_path
    got, expected = run_om(om, "cpu", feeds), onnxruntime_outputs(path, feeds)
    assert [g.shape for g in got] == [e.shape for e in expected]
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-4 * float(np.abs(e).max()))
