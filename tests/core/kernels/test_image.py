import numpy as np
import pytest

from ge.core.errors import GraphError
from ge.core.ir import Meta
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
