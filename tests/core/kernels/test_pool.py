import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every case through both plans


WINDOWS_2D = [
    ((1, 2, 8, 8), {"kernel_shape": [2, 2]}),
    ((2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ((1, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 64, 112, 112), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 10, 9), {"kernel_shape": [3, 2], "strides": [2, 3], "pads": [1, 0, 2, 1]}),
    ((1, 3, 10, 10), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 3, 11, 10), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 3, 10, 10), {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [1, 1, 1, 1], "ceil_mode": 1}),
    ((1, 3, 9, 9), {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 10), {"kernel_shape": [2, 2], "auto_pad": "SAME_LOWER", "strides": [1, 1]}),
    ((1, 3, 10, 10), {"kernel_shape": [4, 4], "auto_pad": "SAME_UPPER", "strides": [3, 3]}),
    ((1, 3, 10, 10), {"kernel_shape": [3, 3], "auto_pad": "VALID", "strides": [2, 2]}),
    ((1, 3, 5, 5), {"kernel_shape": [5, 5]}),
    ((1, 3, 6, 6), {"kernel_shape": [1, 1], "strides": [2, 2]}),
    ((1, 2, 7, 45), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # rows of several vectors and a tail
    ((1, 2, 9, 40), {"kernel_shape": [2, 5], "strides": [1, 3], "pads": [0, 4, 1, 4]}),  # windows in the padding
    ((1, 1, 3, 9000), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),  # rows too long for the native buffers
    # stride 2 across (the native even-lane taps): outputs of several vectors and a tail, windows in the padding
    ((2, 3, 13, 75), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 6, 33), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
]

DILATED = [
    ((1, 3, 10, 10), {"kernel_shape": [2, 2], "dilations": [2, 2]}),
    ((1, 3, 11, 11), {"kernel_shape": [3, 3], "dilations": [2, 1], "strides": [2, 2], "pads": [1, 1, 2, 2]}),
    ((1, 3, 11, 10), {"kernel_shape": [2, 2], "dilations": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 9, 70), {"kernel_shape": [2, 4], "strides": [1, 2], "dilations": [1, 3], "pads": [0, 2, 1, 3]}),
]


@pytest.mark.parametrize("shape,attrs", WINDOWS_2D + DILATED)
def test_maxpool_2d(check_op, shape, attrs):
    check_op("MaxPool", {"x": f32(*shape)}, attrs)


def test_maxpool_2d_nan_wins():
    """A NaN in a window is its maximum (numpy's rule), on the native plan as on numpy's."""
    x = f32(1, 2, 9, 20)
    x[0, 0, 4, 7] = x[0, 1, 0, 0] = np.nan
    k = lookup("MaxPool")({"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
                          [Meta(x.dtype, x.shape)], name="p")
    k.infer()
    (got,) = k.compute(x)
    # (4, 7) lies in the windows of output row 2, columns 3 and 4; (0, 0) in output (0, 0) only
    assert [tuple(i) for i in np.argwhere(np.isnan(got))] == [(0, 0, 2, 3), (0, 0, 2, 4), (0, 1, 0, 0)]


@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 12), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 3, 12), {"kernel_shape": [2], "strides": [2], "ceil_mode": 1, "dilations": [2]}),
    ((1, 2, 6, 7, 8), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 2], "pads": [0, 1, 0, 1, 1, 1]}),
])
def test_maxpool_1d_3d(check_op, shape, attrs):
    check_op("MaxPool", {"x": f32(*shape)}, attrs)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.float64])
def test_maxpool_dtypes(check_op, dtype):
    x = (rng.standard_normal((1, 3, 9, 9)) * 50).astype(dtype)
    check_op("MaxPool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 9, 9), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 8, 7), {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 9, 7), {"kernel_shape": [2, 3], "dilations": [2, 1]}),
])
def test_maxpool_indices(check_op, shape, attrs, storage_order):
    check_op("MaxPool", {"x": f32(*shape)}, dict(attrs, storage_order=storage_order), n_outputs=2)


def test_maxpool_indices_3d(check_op):
    check_op("MaxPool", {"x": f32(1, 2, 4, 5, 6)}, {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}, n_outputs=2)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", WINDOWS_2D)
def test_averagepool_2d(check_op, shape, attrs, include_pad):
    check_op("AveragePool", {"x": f32(*shape)}, dict(attrs, count_include_pad=include_pad), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", DILATED)
def test_averagepool_dilated(check_op, shape, attrs, include_pad):
    check_op("AveragePool", {"x": f32(*shape)}, dict(attrs, count_include_pad=include_pad), opset=19)


@pytest.mark.parametrize("include_pad", [0, 1])
@pytest.mark.parametrize("shape,attrs", [
    ((2, 3, 12), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ((1, 2, 6, 7, 8), {"kernel_shape": [2, 3, 2], "strides": [2, 2, 2], "pads": [0, 1, 0, 1, 1, 1]}),
    ((1, 2, 6, 7, 8), {"kernel_shape": [3, 3, 3], "strides": [2, 2, 2], "ceil_mode": 1}),
])
def test_averagepool_1d_3d(check_op, shape, attrs, include_pad):
    check_op("AveragePool", {"x": f32(*shape)}, dict(attrs, count_include_pad=include_pad))


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(1, 2048, 7, 7), (2, 3, 5), (2, 3, 4, 5, 6), (1, 3, 1, 1), (3, 37, 13, 11), (8, 20, 7, 7)])
def test_global_pools(check_op, op, shape):
    check_op(op, {"x": f32(*shape)}, rtol=1e-5, atol=1e-6)


def test_pool_errors():
    f = np.dtype(np.float32)
    x = Meta(f, (1, 3, 8, 8))
    with pytest.raises(GraphError, match=r"node 'p' \(MaxPool\): attribute kernel_shape is required"):
        lookup("MaxPool")({}, [x], name="p")
    with pytest.raises(GraphError, match=r"\(AveragePool\).*kernel_shape \[3\]"):
        lookup("AveragePool")({"kernel_shape": [3]}, [x], name="p")
    with pytest.raises(GraphError, match="storage_order"):
        lookup("MaxPool")({"kernel_shape": [2, 2], "storage_order": 3}, [x], name="p", num_outputs=2)
    with pytest.raises(GraphError, match="larger than the padded input"):
        lookup("MaxPool")({"kernel_shape": [10, 10]}, [x], name="p")
    with pytest.raises(GraphError, match="rank >= 3"):
        lookup("GlobalAveragePool")({}, [Meta(f, (3, 4))], name="p")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_2d_float32_pools_take_the_native_walk(native_and_numpy, op):
    """MaxPool and AveragePool share csrc/max_pool.c's walk where a native library is: a plan that
    fell back to numpy unseen would be slower, not wrong (the cases above would still pass)."""
    k = lookup(op)({"kernel_shape": [3, 2], "strides": [3, 2], "pads": [1, 0, 1, 0]},
                   [Meta(np.dtype(np.float32), (1, 4, 6, 8))], name="p")
    assert k.uses_native == (native_and_numpy == "native")
