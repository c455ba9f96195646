import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(4)


# -- NonMaxSuppression --------------------------------------------------------------------------------

def random_boxes(batch, n, center, grid=False):
    if center:
        xy = rng.uniform(0, 10, (batch, n, 2))
        wh = rng.uniform(0.5, 4, (batch, n, 2))
        b = np.concatenate([xy, wh], axis=-1)
    else:
        p = rng.uniform(0, 10, (batch, n, 2))
        q = p + rng.uniform(0.5, 4, (batch, n, 2))
        b = np.concatenate([p, q], axis=-1)
        flip = rng.integers(0, 2, (batch, n)).astype(bool)  # corners in either order
        b[flip] = b[flip][:, [2, 3, 0, 1]]
    if grid:
        b = np.round(b)
    return b.astype(np.float32)


def nms_inputs(batch, classes, n, center=0, max_out=3, iou=0.5, thr=0.2, tie=False):
    scores = rng.uniform(0, 1, (batch, classes, n)).astype(np.float32)
    if tie:
        scores = np.round(scores * 4) / 4
    inputs = {"boxes": random_boxes(batch, n, center, grid=tie), "scores": scores}
    if max_out is not None:
        inputs["max_out"] = np.array([max_out], np.int64)
    if iou is not None:
        inputs["iou"] = np.array([iou], np.float32)
    if thr is not None:
        inputs["thr"] = np.array([thr], np.float32)
    return inputs


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("batch,classes,n", [(1, 1, 6), (2, 3, 20), (1, 4, 50), (3, 2, 1)])
@pytest.mark.parametrize("max_out,iou,thr", [(3, 0.5, 0.2), (100, 0.3, None), (5, 0.0, 0.5), (2, 1.0, 0.0),
                                              (10, 0.7, 0.95), (0, 0.5, 0.1), (1, 0.4, None)])
def test_nms(check_op, center, batch, classes, n, max_out, iou, thr):
    inputs = nms_inputs(batch, classes, n, center, max_out, iou, thr)
    attrs = {"center_point_box": center} if center else {}
    check_op("NonMaxSuppression", inputs, attrs, opset=11, consts=tuple(inputs))


@pytest.mark.parametrize("opset", [10, 11])
def test_nms_ties_and_touching_boxes(check_op, opset):
    for _ in range(5):
        inputs = nms_inputs(2, 3, 30, tie=True, max_out=20, iou=0.25, thr=0.0)
        check_op("NonMaxSuppression", inputs, opset=opset, consts=tuple(inputs))


def test_nms_many_candidates(check_op):
    """More candidates than one block of suppression rows (detection.SUPPRESSION_BLOCK): the walk
    keeps candidates past the first block and computes the next."""
    from ge.core.kernels.ops.detection import SUPPRESSION_BLOCK
    n = 700
    assert SUPPRESSION_BLOCK // n < n
    inputs = nms_inputs(1, 2, n, max_out=n, iou=0.6, thr=0.0)
    check_op("NonMaxSuppression", inputs, opset=11, consts=tuple(inputs))


def test_nms_optional_inputs(check_op):
    inputs = nms_inputs(1, 2, 10, max_out=None, iou=None, thr=None)
    check_op("NonMaxSuppression", inputs, opset=11, consts=tuple(inputs))  # no max_out: nothing selected
    inputs = nms_inputs(1, 2, 10, max_out=4, iou=None, thr=None)
    check_op("NonMaxSuppression", inputs, opset=11, consts=tuple(inputs))
    inputs = {"boxes": inputs["boxes"], "scores": inputs["scores"], "max_out": inputs["max_out"], "iou": None,
              "thr": np.array([0.5], np.float32)}
    check_op("NonMaxSuppression", inputs, opset=11, consts=("boxes", "scores", "max_out", "thr"))


def test_nms_degenerate_boxes(check_op):
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0], [0.5, 0.5, 1.5, 1.5],
                       [2, 2, 2, 5]]], np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6, 0.5, 0.4]]], np.float32)
    inputs = {"boxes": boxes, "scores": scores, "max_out": np.array([10], np.int64),
              "iou": np.array([0.1], np.float32)}
    check_op("NonMaxSuppression", inputs, opset=11, consts=tuple(inputs))


@pytest.mark.parametrize("thr", [None, 0.3])
@pytest.mark.parametrize("center", [0, 1])
def test_nms_nan_scores_and_boxes(check_op, center, thr):
    """NaN scores: above no threshold (dropped with one); without one onnxruntime's heap decides where
    they come out (csrc/nms.c and detection._heap_order replay it). NaN, infinite and negative-size boxes
    suppress nothing and are suppressed by nothing."""
    for _ in range(4):
        inputs = nms_inputs(2, 2, 40, center, max_out=25, iou=0.3, thr=thr, tie=True)
        inputs["scores"][rng.uniform(size=inputs["scores"].shape) < 0.3] = np.nan
        b = inputs["boxes"]
        b[0, :6] = [[np.nan, 1, 2, 3], [1, np.inf, 2, -np.inf], [0, 0, -1, -1], [5, 5, 5, 5], [2, 2, 2, 9],
                    [1, 1, 3, 3]]
        attrs = {"center_point_box": center} if center else {}
        check_op("NonMaxSuppression", inputs, attrs, opset=11, consts=tuple(inputs))


def test_nms_native_and_numpy_agree():
    """The native kernel and the numpy plan on one input (each is checked against onnxruntime at its
    level; here both at once): many candidates, ties, NaN scores, several batches and classes."""
    from ge.core.kernels.backend import NUMPY, select
    inputs = nms_inputs(2, 3, 300, max_out=60, iou=0.45, thr=None, tie=True)
    inputs["scores"][rng.uniform(size=inputs["scores"].shape) < 0.05] = np.nan
    metas = [Meta(a.dtype, a.shape) for a in inputs.values()]
    results = [lookup("NonMaxSuppression", opset=11)({}, metas, name="nms", opset=11, backend=backend)
               .compute(*inputs.values())[0] for backend in (select(), NUMPY)]
    assert results[0].shape[0] > 100
    np.testing.assert_array_equal(results[0], results[1])


def test_nms_computed_inputs():
    f = np.dtype(np.float32)
    k = lookup("NonMaxSuppression", opset=11)({}, [Meta(f, (1, 5, 4)), Meta(f, (1, 2, 5))], name="nms", opset=11)
    with pytest.raises(GraphError, match=r"node 'nms' \(NonMaxSuppression\): .*needs dynamic shapes"):
        k.infer()
    inputs = nms_inputs(1, 2, 5, max_out=2)
    y = k.compute(*inputs.values())[0]
    assert y.dtype == np.int64 and y.shape[1] == 3


def test_nms_errors():
    f = np.dtype(np.float32)
    k = lookup("NonMaxSuppression", opset=11)
    with pytest.raises(GraphError, match=r"scores has shape \(1, 2, 4\), \[1, classes, 5\] expected"):
        k({}, [Meta(f, (1, 5, 4)), Meta(f, (1, 2, 4))], name="nms", opset=11)
    with pytest.raises(GraphError, match="center_point_box=2"):
        k({"center_point_box": 2}, [Meta(f, (1, 5, 4)), Meta(f, (1, 2, 5))], name="nms", opset=11)
    nms = k({}, [Meta(f, (1, 5, 4)), Meta(f, (1, 2, 5))], name="nms", opset=11)
    inputs = nms_inputs(1, 2, 5, iou=1.5)
    with pytest.raises(GraphError, match=r"iou_threshold=1.5 is not in \[0, 1\]"):
        nms.compute(*inputs.values())


# -- RoiAlign -----------------------------------------------------------------------------------------

def roi_inputs(n, c, h, w, r, dtype=np.float32, scale=1.0):
    x = rng.standard_normal((n, c, h, w)).astype(dtype)
    p = rng.uniform(-2, max(h, w) / scale, (r, 2))
    q = p + rng.uniform(0, max(h, w) / scale / 2, (r, 2))
    rois = np.concatenate([p, q], axis=1).astype(dtype)
    return {"x": x, "rois": rois, "bi": rng.integers(0, n, r).astype(np.int64)}


@pytest.mark.parametrize("opset,ctm", [(10, None), (16, None), (16, "output_half_pixel"), (16, "half_pixel")])
@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("out,ratio,scale", [((1, 1), 0, 1.0), ((3, 2), 2, 0.5), ((7, 7), 0, 0.25), ((2, 4), 1, 1.0)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_roi_align(check_op, opset, ctm, mode, out, ratio, scale, dtype):
    attrs = {"mode": mode, "output_height": out[0], "output_width": out[1], "sampling_ratio": ratio,
             "spatial_scale": scale}
    if ctm is not None:
        attrs["coordinate_transformation_mode"] = ctm
    check_op("RoiAlign", roi_inputs(2, 3, 10, 12, 6, dtype, scale), attrs, opset=opset, rtol=1e-4, atol=1e-5)


def test_roi_align_errors():
    f, i = np.dtype(np.float32), np.dtype(np.int64)
    k = lookup("RoiAlign", opset=16)
    with pytest.raises(GraphError, match=r"node 'r' \(RoiAlign\): mode 'sum'"):
        k({"mode": "sum"}, [Meta(f, (1, 2, 4, 4)), Meta(f, (3, 4)), Meta(i, (3,))], name="r", opset=16)
    with pytest.raises(GraphError, match=r"batch_indices has shape \(2,\)"):
        k({}, [Meta(f, (1, 2, 4, 4)), Meta(f, (3, 4)), Meta(i, (2,))], name="r", opset=16)
    ra = k({}, [Meta(f, (1, 2, 4, 4)), Meta(f, (1, 4)), Meta(i, (1,))], name="r", opset=16)
    with pytest.raises(GraphError, match="batch_indices out of range"):
        ra.compute(np.zeros((1, 2, 4, 4), np.float32), np.zeros((1, 4), np.float32), np.array([1]))
