import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(10)


@pytest.mark.parametrize("opset,mode", [(16, "bilinear"), (16, "nearest"), (16, "bicubic"),
                                        (20, "linear"), (20, "nearest"), (20, "cubic")])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("shape,out", [((2, 3, 5, 6), (4, 7)), ((1, 2, 8, 8), (8, 8))])
def test_grid_sample(check_op, opset, mode, padding, align, shape, out):
    x = rng.standard_normal(shape).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (shape[0],) + out + (2,)).astype(np.float32)  # some points outside
    grid.reshape(-1)[:6] = [-1, 1, 1, -1, 0, 0]
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    check_op("GridSample", {"x": x, "g": grid}, attrs, opset=opset, rtol=1e-4, atol=1e-5)


def test_grid_sample_default_and_identity(check_op):
    x = rng.standard_normal((1, 3, 4, 5)).astype(np.float32)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 5), indexing="ij")
    grid = np.stack([xs, ys], axis=-1)[None].astype(np.float32)
    got = check_op("GridSample", {"x": x, "g": grid}, {"align_corners": 1}, opset=16, rtol=1e-5, atol=1e-6)[0]
    np.testing.assert_allclose(got, x, rtol=1e-5, atol=1e-6)
    check_op("GridSample", {"x": x, "g": grid}, opset=16, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
def test_grid_sample_volumetric(check_op, mode, padding):
    x = rng.standard_normal((1, 2, 3, 4, 5)).astype(np.float32)
    grid = rng.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
    check_op("GridSample", {"x": x, "g": grid}, {"mode": mode, "padding_mode": padding}, opset=20,
             rtol=1e-4, atol=1e-5)


def test_grid_sample_errors():
    f = np.dtype(np.float32)
    k = lookup("GridSample", opset=16)
    with pytest.raises(GraphError, match=r"node 'g' \(GridSample\): mode 'linear' is not one of bilinear"):
        k({"mode": "linear"}, [Meta(f, (1, 2, 4, 4)), Meta(f, (1, 3, 3, 2))], name="g", opset=16)
    with pytest.raises(GraphError, match=r"grid has shape \(1, 3, 3, 3\)"):
        k({}, [Meta(f, (1, 2, 4, 4)), Meta(f, (1, 3, 3, 3))], name="g", opset=16)
    with pytest.raises(GraphError, match="padding_mode 'wrap'"):
        k({"padding_mode": "wrap"}, [Meta(f, (1, 2, 4, 4)), Meta(f, (1, 3, 3, 2))], name="g", opset=16)


@pytest.mark.parametrize("size", [(2, 3, 4, 5), (1, 1, 3, 3), (2, 1, 2, 3, 4)])
@pytest.mark.parametrize("align", [0, 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_affine_grid(check_op, size, align, dtype):
    d = len(size) - 2
    theta = rng.standard_normal((size[0], d, d + 1)).astype(dtype)
    check_op("AffineGrid", {"t": theta, "s": np.array(size, np.int64)}, {"align_corners": align}, opset=20,
             consts=("s",), rtol=1e-5, atol=1e-6)


def maxpool_with_indices(x, kernel, strides, pads=None):
    from ge.core.kernels import lookup as lk
    attrs = {"kernel_shape": kernel, "strides": strides} | ({"pads": pads} if pads else {})
    k = lk("MaxPool", opset=12)(attrs, [Meta(x.dtype, x.shape)], opset=12, num_outputs=2)
    return k.compute(x)


@pytest.mark.parametrize("shape,kernel,strides,pads", [((1, 2, 4, 4), [2, 2], [2, 2], None),
                                                       ((2, 3, 6, 5), [3, 3], [2, 2], [1, 1, 1, 1]),
                                                       ((1, 2, 8), [2], [2], None)])
@pytest.mark.parametrize("with_shape", [False, True])
def test_max_unpool(check_op, shape, kernel, strides, pads, with_shape):
    x = rng.standard_normal(shape).astype(np.float32)
    y, idx = maxpool_with_indices(x, kernel, strides, pads)
    inputs = {"x": y, "i": idx}
    attrs = {"kernel_shape": kernel, "strides": strides} | ({"pads": pads} if pads else {})
    if with_shape:
        inputs["s"] = np.array(shape, np.int64)
    elif pads:  # the default output is smaller than the pooled input: indices fall outside
        k = lookup("MaxUnpool", opset=11)(attrs, [Meta(y.dtype, y.shape), Meta(idx.dtype, idx.shape)], name="u",
                                          opset=11)
        with pytest.raises(GraphError, match=r"node 'u' \(MaxUnpool\): indices out of range"):
            k.compute(y, idx)
        return
    check_op("MaxUnpool", inputs, attrs, opset=11, consts=("s",) if with_shape else ())
