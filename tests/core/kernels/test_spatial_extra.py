"""CenterCropPad, Col2Im, DeformConv, MaxRoiPool (and AffineGrid with a computed size): onnx's node cases through ge's API, and
onnxruntime on models built here."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

from .node_cases import (case_ids, check_against_onnxruntime, check_case, compare_with_onnxruntime, node_cases,
                         node_model, run_model)

# AffineGrid's kernel is image.py's; its node cases feed `size` as a graph input (the dynamic path)
CASES = [c for op in ("CenterCropPad", "Col2Im", "DeformConv", "AffineGrid") for c in node_cases(op)]
rng = np.random.default_rng(13)


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_node_case(case, tmp_path, monkeypatch):
    got = check_case(case, tmp_path, monkeypatch)
    check_against_onnxruntime(case, got, rtol=1e-4, atol=1e-5)


def with_consts(model, consts: dict):
    from onnx import numpy_helper
    model.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in consts.items())
    keep = [i for i in model.graph.input if i.name not in consts]
    del model.graph.input[:]
    model.graph.input.extend(keep)
    return model


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_center_crop_pad(dtype, tmp_path, monkeypatch):
    x = (rng.standard_normal((5, 6, 3)) * 10).astype(dtype)
    for shape, axes in (([3, 9], [0, 1]), ([4, 6, 6], None), ([2], [-1])):
        s = np.array(shape, np.int64)
        attrs = {} if axes is None else {"axes": axes}
        model = with_consts(node_model("CenterCropPad", {"x": x, "s": s}, attrs, default_opset=18), {"s": s})
        compare_with_onnxruntime(model, {"x": x}, tmp_path, monkeypatch)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_col2im(dtype, tmp_path, monkeypatch):
    image, block = np.array([7, 6], np.int64), np.array([3, 2], np.int64)
    attrs = {"strides": [2, 1], "dilations": [1, 2], "pads": [1, 0, 2, 1]}
    oh = (7 + 3 - 3) // 2 + 1
    ow = (6 + 1 - 3) // 1 + 1
    x = rng.standard_normal((2, 4 * 6, oh * ow)).astype(dtype)
    model = with_consts(node_model("Col2Im", {"x": x, "i": image, "b": block}, attrs, default_opset=18),
                        {"i": image, "b": block})
    got = run_model(model, [x], tmp_path, monkeypatch)[0]
    # onnxruntime has no CPU Col2Im: each column entry added at its pixel, one by one
    want = np.zeros((2, 4, 7 + 3, 6 + 1), np.float64)
    cols = x.reshape(2, 4, 3, 2, oh, ow)
    for ki in range(3):
        for kj in range(2):
            for i in range(oh):
                for j in range(ow):
                    want[:, :, i * 2 + ki, j + kj * 2] += cols[:, :, ki, kj, i, j]
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want[:, :, 1:8, 0:6], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("group,offset_group", [(1, 1), (2, 2), (2, 1)])
def test_deform_conv(group, offset_group, tmp_path, monkeypatch):
    x = rng.standard_normal((2, 4, 6, 7)).astype(np.float32)
    w = rng.standard_normal((6, 4 // group, 3, 2)).astype(np.float32)
    attrs = {"group": group, "offset_group": offset_group, "pads": [1, 0, 1, 1], "strides": [1, 2],
             "dilations": [2, 1]}
    oh, ow = (6 + 2 - 5) // 1 + 1, (7 + 1 - 2) // 2 + 1
    off = (rng.standard_normal((2, offset_group * 6 * 2, oh, ow)) * 1.5).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    mask = rng.random((2, offset_group * 6, oh, ow)).astype(np.float32)
    inputs = {"x": x, "w": w, "o": off, "b": b, "m": mask}
    compare_with_onnxruntime(node_model("DeformConv", inputs, attrs, default_opset=22), inputs, tmp_path,
                             monkeypatch, rtol=1e-4, atol=1e-4)


def test_max_roi_pool(tmp_path, monkeypatch):
    x = rng.standard_normal((2, 3, 10, 12)).astype(np.float32)
    rois = np.array([[0, 1, 1, 8, 6], [1, 0, 0, 11, 9], [1, 3.4, 2.6, 5.2, 4.9], [0, 6, 6, 6, 6]], np.float32)
    for scale in (1.0, 0.5):
        inputs = {"x": x, "r": rois}
        model = node_model("MaxRoiPool", inputs, {"pooled_shape": [3, 2], "spatial_scale": scale})
        compare_with_onnxruntime(model, inputs, tmp_path, monkeypatch)


def test_errors():
    f32 = np.dtype(np.float32)
    with pytest.raises(GraphError, match=r"node 'c' \(CenterCropPad\): input 1 \(shape\) must be a constant"):
        lookup("CenterCropPad", opset=18)({}, [Meta(f32, (2, 3)), Meta(np.dtype(np.int64), (2,))], name="c")
    with pytest.raises(GraphError, match="input has 5 columns"):
        lookup("Col2Im", opset=18)({}, [Meta(f32, (1, 4, 5)), Meta(np.dtype(np.int64), (2,)),
                                        Meta(np.dtype(np.int64), (2,))],
                                   [None, np.array([3, 3]), np.array([2, 2])], name="c")
    with pytest.raises(GraphError, match="ge runs 2-D DeformConv"):
        lookup("DeformConv", opset=22)({}, [Meta(f32, (1, 2, 5)), Meta(f32, (2, 2, 3)), Meta(f32, (1, 6, 3))],
                                       name="d")
