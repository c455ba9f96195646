"""Upsample (7, 9) and Resize-10 against onnxruntime."""
import numpy as np
import pytest

rng = np.random.default_rng(0)
X = rng.standard_normal((1, 2, 3, 5)).astype(np.float32)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2, 2], [1, 1, 2, 3], [1, 1, 1.5, 2.5]])
def test_upsample_9_and_resize_10(check_op, mode, scales):
    s = np.array(scales, np.float32)
    check_op("Upsample", {"x": X, "scales": s}, {"mode": mode}, opset=9, consts=("scales",), rtol=1e-5, atol=1e-6)
    check_op("Resize", {"x": X, "scales": s}, {"mode": mode}, opset=10, consts=("scales",), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_7_scales_attribute(check_op, mode):
    check_op("Upsample", {"x": X}, {"mode": mode, "scales": [1.0, 1.0, 2.0, 2.0]}, opset=7)
