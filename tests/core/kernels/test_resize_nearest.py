"""Resize mode=nearest on ge's native row gather (csrc/resize.c) and on the numpy plan, against
onnxruntime: YOLO's x2 upsample in every coordinate and nearest mode, the index-free copy where a mode
makes the columns j // 2, other scales, element sizes and the blocked (N, C/16, H, W, 16) layout."""
import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels import lookup

pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every case through both plans
rng = np.random.default_rng(3)

#: (coordinate_transformation_mode, nearest_mode, whether x2 makes the columns j // 2 at every size;
#: align_corners does at some sizes (7 -> 14 among them), the last two never)
X2_MODES = [("asymmetric", "floor", True), ("half_pixel", "round_prefer_floor", True),
            ("half_pixel", "round_prefer_ceil", True), ("pytorch_half_pixel", "round_prefer_floor", True),
            ("tf_half_pixel_for_nn", "floor", True), ("align_corners", "round_prefer_floor", None),
            ("half_pixel", "ceil", False), ("asymmetric", "round_prefer_ceil", False)]


def check(check_op, x, attrs, scales, opset=13):
    """onnxruntime's result, ge's kernel compared with it by check_op; returns ge's planned kernel."""
    check_op("Resize", {"x": x, "roi": np.zeros(0, np.float32), "scales": np.asarray(scales, np.float32)}, attrs,
             opset=opset, consts=("roi", "scales"), rtol=0, atol=0)
    metas = [Meta(x.dtype, x.shape), Meta(np.dtype(np.float32), (0,)), Meta(np.dtype(np.float32), (len(scales),))]
    consts = [None, np.zeros(0, np.float32), np.asarray(scales, np.float32)]
    return lookup("Resize", opset=opset)(attrs, metas, consts, opset=opset, name="up")


@pytest.mark.parametrize("coord,nearest_mode,halves", X2_MODES)
def test_x2_upsample_in_every_mode(check_op, native_and_numpy, coord, nearest_mode, halves):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": nearest_mode}
    opset = 11 if coord == "tf_half_pixel_for_nn" else 13
    x = rng.standard_normal((1, 8, 5, 7)).astype(np.float32)
    k = check(check_op, x, attrs, [1, 1, 2, 2], opset)
    if native_and_numpy == "numpy":
        assert k.gather is None and not k.uses_native
        return
    planes, ih, iw, rows, cols, unit, repeat = k.gather
    assert (planes, ih, iw, unit, k.uses_native) == (8, 5, 7, 4, True)
    same = np.array_equal(cols, np.arange(14) // 2)
    assert repeat == (2 if same else 0) and halves in (None, same)


@pytest.mark.parametrize("shape,scales", [
    ((2, 3, 6, 9), [1, 1, 3, 3]),      # x3: gathered
    ((1, 4, 7, 5), [1, 1, 0.5, 0.6]),  # downsampling
    ((1, 2, 5, 33), [1, 1, 1, 2]),     # W only, an odd row length
    ((1, 2, 5, 6), [1, 1, 2, 1]),      # H only: every row a copy
    ((3, 10, 4), [1, 1, 2]),           # 3-D: the resized axis and the one before it
    ((1, 1, 40, 40), [1, 1, 2, 2]),    # more rows than an item's band
])
def test_other_scales_and_ranks(check_op, shape, scales):
    x = rng.standard_normal(shape).astype(np.float32)
    check(check_op, x, {"mode": "nearest", "coordinate_transformation_mode": "half_pixel"}, scales)


@pytest.mark.parametrize("dtype", [np.float16, np.uint8, np.int32])
def test_element_sizes(check_op, native_and_numpy, dtype):
    x = (rng.standard_normal((1, 3, 5, 7)) if dtype == np.float16 else rng.integers(0, 200, (1, 3, 5, 7))).astype(dtype)
    k = check(check_op, x, {"mode": "nearest", "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"},
              [1, 1, 2, 2])
    assert (k.gather is not None) == (native_and_numpy == "native")


@pytest.mark.parametrize("coord", ["asymmetric", "align_corners"])
def test_blocked_layout(check_op, native_and_numpy, coord):
    """The blocked tensor (N, C/16, H, W, 16): a pixel's 16 channels are one 64-byte element."""
    x = rng.standard_normal((1, 2, 5, 7, 16)).astype(np.float32)
    k = check(check_op, x, {"mode": "nearest", "coordinate_transformation_mode": coord}, [1, 1, 2, 2, 1])
    if native_and_numpy == "native":
        assert k.gather[:3] + k.gather[5:6] == (2, 5, 7, 64)
