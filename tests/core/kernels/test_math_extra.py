import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(7)


# -- Shrink ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("attrs", [{}, {"lambd": 1.5}, {"bias": 0.3, "lambd": 0.2}, {"bias": 2.0, "lambd": 0.0}])
def test_shrink(check_op, dtype, attrs):
    x = (rng.standard_normal((3, 4, 5)) * 2).astype(dtype)
    x.reshape(-1)[:4] = [np.inf, -np.inf, 0.5, -0.5]
    tol = dict(rtol=1e-3, atol=1e-3) if dtype == np.float16 else {}
    check_op("Shrink", {"x": x}, attrs, opset=9, **tol)


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.int64])
def test_shrink_integers(check_op, dtype):
    x = rng.integers(-10, 10, (4, 6)).astype(dtype)
    check_op("Shrink", {"x": x}, {"bias": 2.0, "lambd": 3.0}, opset=9)


# -- BitShift ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])  # onnxruntime has no uint16 BitShift
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((5,), ())])
def test_bitshift(check_op, dtype, direction, shapes):
    bits = np.iinfo(dtype).bits
    x = rng.integers(0, np.iinfo(dtype).max, shapes[0], dtype=dtype)
    s = rng.integers(0, bits, shapes[1]).astype(dtype)
    check_op("BitShift", {"x": x, "s": s}, {"direction": direction}, opset=11)


def test_bitshift_uint16():
    x = np.array([1, 0x8001, 0xFFFF], np.uint16)
    s = np.array([3, 1, 15], np.uint16)
    k = lookup("BitShift", opset=11)({"direction": "LEFT"}, [Meta(x.dtype, x.shape)] * 2, name="b", opset=11)
    np.testing.assert_array_equal(k.compute(x, s)[0], np.array([8, 2, 0x8000], np.uint16))


def test_bitshift_errors():
    k = lookup("BitShift", opset=11)
    with pytest.raises(GraphError, match=r"node 'b' \(BitShift\): direction 'UP'"):
        k({"direction": "UP"}, [Meta(np.dtype(np.uint8), (2,))] * 2, name="b", opset=11)
    with pytest.raises(GraphError, match=r"input 0 'X' is int32; BitShift-11 takes T in \{uint8, uint16, uint32, uint64\}"):
        k({"direction": "LEFT"}, [Meta(np.dtype(np.int32), (2,))] * 2, name="b", opset=11)


# -- Det -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (2, 3, 2, 2), (1, 1), (5, 6, 6)])
def test_det(check_op, shape):
    x = rng.standard_normal(shape).astype(np.float32)
    check_op("Det", {"x": x}, opset=11, rtol=1e-4, atol=1e-5)
    x64 = x.astype(np.float64)  # onnxruntime has float32 only
    k = lookup("Det", opset=11)({}, [Meta(x64.dtype, x64.shape)], name="d", opset=11)
    np.testing.assert_allclose(k.compute(x64)[0], np.linalg.det(x64), rtol=1e-12)


def test_det_errors():
    with pytest.raises(GraphError, match=r"\[..., M, M\] expected"):
        lookup("Det", opset=11)({}, [Meta(np.dtype(np.float32), (2, 3))], name="d", opset=11)


# -- LpPool, GlobalLpPool ---------------------------------------------------------------------------

POOLS = [
    ((1, 2, 6, 6), {"kernel_shape": [2, 2]}),
    ((2, 3, 7, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 8), {"kernel_shape": [3], "strides": [2]}),
    ((1, 2, 5, 6), {"kernel_shape": [2, 3], "auto_pad": "SAME_UPPER"}),
    ((1, 1, 4, 4, 4), {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}),
]


@pytest.mark.parametrize("shape,attrs", POOLS)
@pytest.mark.parametrize("p", [1, 2, 3])
@pytest.mark.parametrize("opset", [11, 18])
def test_lp_pool(check_op, shape, attrs, p, opset):
    x = rng.standard_normal(shape).astype(np.float32)
    check_op("LpPool", {"x": x}, attrs | {"p": p}, opset=opset, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3], "dilations": [2, 2]},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}])
def test_lp_pool_18(check_op, attrs):
    check_op("LpPool", {"x": rng.standard_normal((1, 2, 8, 8)).astype(np.float32)}, attrs, opset=18,
             rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 4, 7), (1, 2, 3, 3, 3)])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool(check_op, shape, p):
    check_op("GlobalLpPool", {"x": rng.standard_normal(shape).astype(np.float32)}, {"p": p}, opset=2,
             rtol=1e-5, atol=1e-5)
