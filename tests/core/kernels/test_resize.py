import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)
TOL = dict(rtol=1e-5, atol=1e-5)
EMPTY = np.zeros(0, np.float32)
COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
SCALES_4D = [[1, 1, 2, 2], [1, 1, 1.7, 2.3], [1, 1, 0.6, 0.5], [1, 1, 3, 1], [1, 1, 0.8, 1.4]]


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(autouse=True, params=["gemm", "gather"])
def last_axis_path(request, monkeypatch):
    """Every case with the last axis interpolated by a GEMM (short rows) and by per-tap gathers."""
    from ge.core.kernels.ops import resize
    monkeypatch.setattr(resize, "GEMM_PER_TAP", 40 if request.param == "gemm" else 0)
    return request.param


def resize(check_op, x, attrs, scales=None, sizes=None, roi=None, opset=13, **tol):
    inputs = {"x": x}
    if opset < 13:  # opset 11: roi and scales are required inputs, possibly empty
        inputs["roi"] = EMPTY if roi is None else np.asarray(roi, np.float32)
        inputs["scales"] = EMPTY if scales is None else np.asarray(scales, np.float32)
    else:
        inputs["roi"] = None if roi is None else np.asarray(roi, np.float32)
        inputs["scales"] = None if scales is None else np.asarray(scales, np.float32)
    if sizes is not None:
        inputs["sizes"] = np.asarray(sizes, np.int64)
    consts = tuple(n for n in ("roi", "scales", "sizes") if inputs.get(n) is not None)
    return check_op("Resize", inputs, attrs, opset=opset, consts=consts, **(tol or TOL))


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("coord", COORDS + ["tf_half_pixel_for_nn"])
@pytest.mark.parametrize("scales", SCALES_4D)
def test_nearest_scales(check_op, scales, coord, nearest_mode):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": nearest_mode}
    resize(check_op, f32(2, 3, 5, 7), attrs, scales=scales, opset=11 if coord == "tf_half_pixel_for_nn" else 13)


@pytest.mark.parametrize("coord", COORDS + ["half_pixel_symmetric"])
@pytest.mark.parametrize("scales", SCALES_4D)
def test_linear_scales(check_op, scales, coord):
    attrs = {"mode": "linear", "coordinate_transformation_mode": coord}
    resize(check_op, f32(2, 3, 5, 7), attrs, scales=scales, opset=19 if coord == "half_pixel_symmetric" else 13)


@pytest.mark.parametrize("exclude_outside", [0, 1])
@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("scales", SCALES_4D)
def test_cubic_scales(check_op, scales, coord, exclude_outside):
    attrs = {"mode": "cubic", "coordinate_transformation_mode": coord, "exclude_outside": exclude_outside}
    resize(check_op, f32(1, 2, 6, 7), attrs, scales=scales)


def test_cubic_coeff_a(check_op):
    resize(check_op, f32(1, 2, 6, 7), {"mode": "cubic", "cubic_coeff_a": -0.5}, scales=[1, 1, 1.5, 2.5])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sizes", [[2, 3, 10, 14], [2, 3, 3, 4], [2, 3, 9, 7], [2, 3, 1, 1]])
def test_sizes(check_op, mode, sizes):
    resize(check_op, f32(2, 3, 5, 7), {"mode": mode}, sizes=sizes)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_opset11_layout_and_sizes(check_op, opset, mode):
    resize(check_op, f32(1, 3, 4, 4), {"mode": mode, "coordinate_transformation_mode": "asymmetric"},
           sizes=[1, 3, 8, 6], opset=opset)
    resize(check_op, f32(1, 3, 4, 4), {"mode": mode}, scales=[1, 1, 2, 1.5], opset=opset)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("extrapolation", [0.0, -7.5])
@pytest.mark.parametrize("roi", [[0, 0, 0.2, 0.1, 1, 1, 0.8, 0.7], [0, 0, -0.3, 0.4, 1, 1, 1.2, 1.5],
                                 [0, 0, 0.5, 0.5, 1, 1, 0.5, 0.5]])
def test_tf_crop_and_resize(check_op, mode, extrapolation, roi):
    attrs = {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": extrapolation}
    resize(check_op, f32(1, 2, 6, 7), attrs, sizes=[1, 2, 5, 4], roi=roi, opset=11)


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_axes_and_aspect_ratio_policy(check_op, policy, mode):
    attrs = {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}
    resize(check_op, f32(1, 3, 6, 8), attrs, sizes=[9, 10], opset=18)
    resize(check_op, f32(1, 3, 6, 8), {"mode": mode, "axes": [-1, -2]}, scales=[1.5, 0.5], opset=18)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_3d_resize(check_op, mode):
    resize(check_op, f32(1, 2, 4, 5, 6), {"mode": mode}, scales=[1, 1, 2, 1.5, 0.5])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_2d_input(check_op, mode):
    resize(check_op, f32(5, 7), {"mode": mode}, scales=[1.6, 2.0])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32])
def test_nearest_integer_types(check_op, dtype):
    x = rng.integers(0, 100, (1, 2, 5, 5)).astype(dtype)
    resize(check_op, x, {"mode": "nearest"}, scales=[1, 1, 2.5, 1.5])


def test_nearest_resizes_channels_too(check_op):
    resize(check_op, f32(2, 3, 4, 4), {"mode": "nearest"}, scales=[1, 2, 2, 1])


def test_identity_scales(check_op):
    resize(check_op, f32(1, 3, 4, 4), {"mode": "linear"}, scales=[1, 1, 1, 1])


def test_upsample_segmentation_like(check_op):
    resize(check_op, f32(1, 21, 32, 32), {"mode": "linear", "coordinate_transformation_mode": "align_corners"},
           sizes=[1, 21, 128, 128])


def _k(attrs, metas, consts, opset=13):
    return lookup("Resize", opset=opset)(attrs, metas, consts, name="r", opset=opset)


def test_resize_errors():
    f = np.dtype(np.float32)
    x = Meta(f, (1, 3, 4, 4))
    sc = np.array([1, 1, 2, 2], np.float32)
    sm = Meta(f, (4,))
    with pytest.raises(GraphError, match=r"node 'r' \(Resize\): mode 'bogus'"):
        _k({"mode": "bogus"}, [x, None, sm], [None, None, sc])
    with pytest.raises(GraphError, match="coordinate_transformation_mode 'x'"):
        _k({"coordinate_transformation_mode": "x"}, [x, None, sm], [None, None, sc])
    with pytest.raises(GraphError, match="must be a constant"):
        _k({}, [x, None, sm], [None, None, None])
    with pytest.raises(GraphError, match="exactly one of scales and sizes"):
        _k({}, [x, None, None], [])
    with pytest.raises(GraphError, match="scales has 2 values"):
        _k({}, [x, None, Meta(f, (2,))], [None, None, np.array([2, 2], np.float32)])
    with pytest.raises(GraphError, match="antialias"):
        _k({"antialias": 1}, [x, None, sm], [None, None, sc], opset=18)
    with pytest.raises(GraphError, match="floating-point"):
        _k({"mode": "linear"}, [Meta(np.dtype(np.uint8), (1, 3, 4, 4)), None, sm], [None, None, sc])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("coord", ["half_pixel", "pytorch_half_pixel", "asymmetric"])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 0.6, 0.5], None), ([1, 1, 0.3, 1.5], None),
                                          (None, [2, 3, 4, 3])])
def test_antialias_downsampling(check_op, mode, coord, scales, sizes):
    """antialias=1 (Resize-18): the filter widens by 1/scale on downsampled axes, as onnxruntime."""
    attrs = {"mode": mode, "coordinate_transformation_mode": coord, "antialias": 1}
    resize(check_op, f32(2, 3, 12, 10), attrs, scales=scales, sizes=sizes, opset=18, rtol=1e-4, atol=1e-4)


def test_antialias_is_for_linear_and_cubic():
    k = lookup("Resize", opset=18)
    metas = [Meta(np.dtype(np.float32), (1, 1, 4, 4)), None, Meta(np.dtype(np.float32), (4,))]
    with pytest.raises(GraphError, match=r"antialias=1 applies to the linear and cubic modes, not nearest"):
        k({"mode": "nearest", "antialias": 1}, metas, [None, None, np.array([1, 1, .5, .5], np.float32)],
          name="r", opset=18)
