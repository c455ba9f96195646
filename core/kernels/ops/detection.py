"""Detection ops: NonMaxSuppression and RoiAlign, as onnxruntime computes them.

NonMaxSuppression is greedy by nature: per (batch, class), candidates above score_threshold are taken
in descending score (ties: lower box index first); a candidate is kept unless its IoU with a kept box
exceeds iou_threshold. With native kernels it is one call (csrc/nms.c: onnxruntime's operations and
its heap's order). The numpy plan: the suppression test of a block of candidates against every
candidate is one vectorized IoU (the same float32 operations, on a [block, n] grid; a block of every
candidate up to ~500), packed into bits: the greedy walk is then a Python loop on one integer of n
bits (a candidate is skipped when its bit is set, a kept one ORs in its row), and a block is
computed only when the walk keeps a candidate past the last one. NaN scores (no score_threshold to
drop them) take onnxruntime's order too: its std::priority_queue's, replayed (_heap_order). Its
output size depends on the data: compute() is exact, infer() needs every input to be a constant.

RoiAlign samples a regular grid per bin with bilinear interpolation. The interpolation is separable
(row weights x column weights), so for mode=avg one roi is two small GEMMs over the rows and columns
it touches: Wy[PH, rows] @ X[b, :, rows, cols] @ Wx[PW, cols]^T. mode=max (onnxruntime's definition:
the max over samples of the largest weighted corner) gathers the corners. The loop is over rois.
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..registry import register
from ..native import NMS_BAD_IOU, NMS_NO_MEMORY, NMS_NO_ROOM, CallCache
from ..values import text

#: the types csrc/nms.c reads: boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold
NMS_TYPES = (np.float32, np.float32, np.int64, np.float32, np.float32)
DYNAMIC = "output shape depends on the input values; needs dynamic shapes"
#: NonMaxSuppression computes its suppression bits for this many (candidate, candidate) pairs at a time
#: at most: every candidate's row at once up to ~500 candidates, fewer rows a block beyond
SUPPRESSION_BLOCK = 1 << 18


def _scalar(k: Kernel, x, what: str, default):
    if x is None:
        return default
    a = np.asarray(x)
    if a.size != 1:
        raise k.fail(f"{what} must hold one value, got shape {a.shape}")
    return a.reshape(-1)[0]


@register("NonMaxSuppression", since=10)
class NonMaxSuppression(Kernel):
    def prepare(self):
        bm, sm = self.input_meta(0, "boxes"), self.input_meta(1, "scores")
        if len(bm.shape) != 3 or bm.shape[2] != 4:
            raise self.fail(f"boxes has shape {tuple(bm.shape)}, [batch, boxes, 4] expected")
        if len(sm.shape) != 3 or sm.shape[0] != bm.shape[0] or sm.shape[2] != bm.shape[1]:
            raise self.fail(f"scores has shape {tuple(sm.shape)}, [{bm.shape[0]}, classes, {bm.shape[1]}] expected")
        self.center = int(self.attr("center_point_box", 0))
        if self.center not in (0, 1):
            raise self.fail(f"center_point_box={self.center}, 0 or 1 expected")
        self.calls = CallCache()

    def infer(self):
        present = [i for i, m in enumerate(self.inputs) if m is not None]
        if any(self.consts[i] is None for i in present):
            raise self.value_dependent(f"boxes and scores are computed: {DYNAMIC}")
        return [Meta(np.dtype(np.int64), self.compute(*self.consts)[0].shape)]

    def upper_bound(self):  # every box of every class kept, up to max_output_boxes_per_class
        (batch, n, _), classes = self.inputs[0].shape, self.inputs[1].shape[1]
        cap = self.consts[2] if len(self.consts) > 2 else None
        per_class = n if cap is None else min(n, max(0, int(np.asarray(cap).reshape(-1)[0])))
        return [Meta(np.dtype(np.int64), (batch * classes * per_class, 3))]

    def corners(self, boxes: np.ndarray):
        """x_min, y_min, x_max, y_max, area: float32 arrays [batch, boxes] (as onnxruntime's float math)."""
        b = boxes.astype(np.float32, copy=False)
        if self.center == 0:  # [y1, x1, y2, x2], either corner first
            y_min, y_max = np.minimum(b[..., 0], b[..., 2]), np.maximum(b[..., 0], b[..., 2])
            x_min, x_max = np.minimum(b[..., 1], b[..., 3]), np.maximum(b[..., 1], b[..., 3])
        else:  # [x_center, y_center, width, height]
            hw, hh = b[..., 2] / np.float32(2), b[..., 3] / np.float32(2)
            x_min, x_max = b[..., 0] - hw, b[..., 0] + hw
            y_min, y_max = b[..., 1] - hh, b[..., 1] + hh
        return x_min, y_min, x_max, y_max, (x_max - x_min) * (y_max - y_min)

    def compute(self, boxes, scores, max_out=None, iou=None, score_thr=None):
        if self.backend.lib is not None:
            return [self.native(boxes, scores, max_out, iou, score_thr)]
        max_out = int(_scalar(self, max_out, "max_output_boxes_per_class", 0))
        iou = np.float32(_scalar(self, iou, "iou_threshold", 0.0))
        if not 0 <= iou <= 1:
            raise self.fail(f"iou_threshold={iou} is not in [0, 1]")
        has_thr = score_thr is not None
        thr = np.float32(_scalar(self, score_thr, "score_threshold", 0.0))
        boxes, scores = np.asarray(boxes, np.float32), np.asarray(scores, np.float32)
        n_batch, n_class = scores.shape[:2]
        out = []
        if max_out > 0:
            with np.errstate(all="ignore"):  # (infinite and NaN boxes: NaN corners and IoUs, which suppress nothing)
                cx0, cy0, cx1, cy1, carea = self.corners(boxes)
                for b in range(n_batch):  # per (batch, class): a greedy selection
                    for c in range(n_class):
                        kept = self.select(scores[b, c], has_thr, thr, max_out, iou,
                                           cx0[b], cy0[b], cx1[b], cy1[b], carea[b])
                        if kept.size:
                            out.append(np.stack([np.full(kept.size, b), np.full(kept.size, c), kept], axis=1))
        y = np.concatenate(out).astype(np.int64) if out else np.zeros((0, 3), np.int64)
        return [y]

    def native(self, *xs) -> np.ndarray:
        """compute() by csrc/nms.c: a prepared call per set of input arrays (the same ones each run of a
        model: a call costs the native selection and a few microseconds), which reads the scalars itself."""
        prepared = self.calls.get(xs, lambda: self.native_call(xs, room=False) if all(
            x is None or (type(x) is np.ndarray and x.dtype == t and x.flags.c_contiguous)
            for x, t in zip(xs, NMS_TYPES)) else None)
        if prepared is None:  # not the types and layout it reads: converted copies, new each time
            xs = tuple(None if x is None else np.ascontiguousarray(x, t) for x, t in zip(xs, NMS_TYPES))
            prepared = self.native_call(xs, room=False)
        call, out = prepared
        rows = call.run_checked()
        if rows == NMS_NO_ROOM:  # max_output_boxes_per_class grew since the call was made
            call, out = self.native_call(xs, room=True)
            rows = call.run_checked()
        if rows == NMS_BAD_IOU:
            raise self.fail(f"iou_threshold={np.float32(xs[3].reshape(-1)[0])} is not in [0, 1]")
        if rows == NMS_NO_MEMORY:
            raise MemoryError(f"node '{self.name}' (NonMaxSuppression): no memory for its workspace")
        return out[:rows].copy()  # (out is the call's, for its next run)

    def native_call(self, xs: tuple, room: bool):
        """The prepared call on these arrays and its output buffer: room for batch * classes * min(n,
        max_out) rows (room: max_out as n, which always suffices)."""
        boxes, scores, max_out, iou, thr = xs
        for x, what in zip(xs[2:], ("max_output_boxes_per_class", "iou_threshold", "score_threshold")):
            _scalar(self, x, what, 0)
        (batch, n, _), classes = boxes.shape, scores.shape[1]
        per_class = n if room or max_out is None else min(n, max(0, int(max_out.reshape(-1)[0])))
        out = np.empty((batch * classes * per_class, 3), np.int64)
        return self.backend.lib.nms_call(boxes, scores, max_out, iou, thr, out, self.center), out

    @staticmethod
    def select(s, has_thr, thr, max_out, iou, x0, y0, x1, y1, area) -> np.ndarray:
        cand = np.flatnonzero(s > thr) if has_thr else np.arange(s.size)
        if not cand.size:
            return cand
        if np.isnan(s[cand]).any():  # (only without a threshold) onnxruntime's heap decides where NaN goes
            order = _heap_order(s, cand)
        else:
            order = cand[np.argsort(-s[cand], kind="stable")]  # descending score, ties: lower index first
        boxes = x0[order], y0[order], x1[order], y1[order], area[order]
        n = order.size
        block = max(1, min(n, SUPPRESSION_BLOCK // n))
        kept, suppressed = [], 0  # bit j: candidate j (in score order) overlaps a kept one
        rows, first = np.zeros((0, 0), np.uint8), 0  # the suppression bits of candidates first, first + 1...
        i = 0
        while len(kept) < max_out:
            free = ~suppressed >> i  # (bits past n are set: the lowest set bit is the next candidate left)
            i += (free & -free).bit_length() - 1
            if i >= n:
                break
            kept.append(order[i])
            if len(kept) >= max_out:
                break
            if i >= first + len(rows):
                rows, first = _suppression(slice(i, min(n, i + block)), iou, *boxes), i
            suppressed |= int.from_bytes(rows[i - first].tobytes(), "little")
            i += 1
        return np.array(kept, np.int64)

    def run(self, xs, ys, ws):
        np.copyto(ys[0], self.compute(*xs)[0])


def _heap_order(s: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """The candidates in the order onnxruntime's std::priority_queue pops them (libstdc++'s make_heap,
    then pop_heap per candidate; csrc/nms.c does the same): with a NaN score the comparison is no
    order, and only the heap's own moves say where each comes out. (score, index) pairs, "below" as
    its BoxInfoPtr's operator<: the lower score, or the same score and the higher index."""
    heap = [(float(s[i]), int(i)) for i in cand]

    def below(a, b):
        return a[0] < b[0] or (a[0] == b[0] and a[1] > b[1])

    def adjust(hole, length, value):  # __adjust_heap: the hole sinks by the larger child, value rises
        top = child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if below(heap[child], heap[child - 1]):
                child -= 1
            heap[hole] = heap[child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            heap[hole] = heap[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2  # __push_heap
        while hole > top and below(heap[parent], value):
            heap[hole] = heap[parent]
            hole = parent
            parent = (hole - 1) // 2
        heap[hole] = value

    n = len(heap)
    for parent in range((n - 2) // 2, -1, -1):  # make_heap
        adjust(parent, n, heap[parent])
    order = []
    for length in range(n, 0, -1):  # top, then pop_heap
        order.append(heap[0][1])
        if length > 1:
            last = heap[length - 1]
            heap[length - 1] = heap[0]
            adjust(0, length - 1, last)
    return np.array(order, np.int64)


def _suppression(rows: slice, iou, x0, y0, x1, y1, area) -> np.ndarray:
    """Bits [len(rows), n / 8] (little-endian within each row): bit j of row k set when candidate
    rows.start + k, kept, suppresses candidate j: they intersect, and their IoU exceeds `iou`. The
    float32 operations of onnxruntime's test for one pair, for a block of pairs in a few buffers:
    (ix1 > ix0) & (iy1 > iy0) & (inter > 0) is (ix1 - ix0 > 0) & (inter > 0), as a positive width
    needs ix1 > ix0 and a positive product two widths of one sign."""
    X0, Y0, X1, Y1, A = x0[rows, None], y0[rows, None], x1[rows, None], y1[rows, None], area[rows, None]
    w, t = np.minimum(X1, x1), np.maximum(X0, x0)
    w -= t  # ix1 - ix0
    h = np.minimum(Y1, y1)
    h -= np.maximum(Y0, y0, out=t)  # iy1 - iy0
    sup = w > 0
    w *= h  # inter
    sup &= w > 0
    union = np.add(A, area, out=h)
    union -= w
    sup &= union > 0
    sup &= np.divide(w, union, out=w) > iou
    sup &= (A > 0) & (area > 0)
    return np.packbits(sup, axis=1, bitorder="little")


@register("RoiAlign", since=10)
class RoiAlign(Kernel):
    def prepare(self):
        xm, rm, im = self.input_meta(0, "X"), self.input_meta(1, "rois"), self.input_meta(2, "batch_indices")
        if len(xm.shape) != 4:
            raise self.fail(f"X has shape {tuple(xm.shape)}, [N, C, H, W] expected")
        # X and rois: one type T1, float32 or float64 (float16 and bfloat16 come widened, float16.py)
        if len(rm.shape) != 2 or rm.shape[1] != 4:
            raise self.fail(f"rois has shape {tuple(rm.shape)}, [num_rois, 4] expected")
        if tuple(im.shape) != (rm.shape[0],):
            raise self.fail(f"batch_indices has shape {tuple(im.shape)}, ({rm.shape[0]},) expected")
        self.mode = text(self.attr("mode", "avg"))
        if self.mode not in ("avg", "max"):
            raise self.fail(f"mode '{self.mode}' is not supported (avg, max)")
        ctm = text(self.attr("coordinate_transformation_mode", "half_pixel" if self.opset >= 16 else "output_half_pixel"))
        if ctm not in ("half_pixel", "output_half_pixel"):
            raise self.fail(f"coordinate_transformation_mode '{ctm}' is not supported (half_pixel, output_half_pixel)")
        self.half_pixel = ctm == "half_pixel"
        self.ph, self.pw = int(self.attr("output_height", 1)), int(self.attr("output_width", 1))
        if self.ph < 1 or self.pw < 1:
            raise self.fail(f"output_height={self.ph} and output_width={self.pw} must be positive")
        self.ratio = int(self.attr("sampling_ratio", 0))
        self.scale = float(self.attr("spatial_scale", 1.0))
        n, c, h, w = xm.shape
        self.n, self.c, self.h, self.w = n, c, h, w
        self.dtype = xm.dtype
        self.out_metas = [Meta(xm.dtype, (rm.shape[0], c, self.ph, self.pw))]

    def infer(self):
        return list(self.out_metas)

    def compute(self, x, rois, batch_indices):
        y = np.empty((np.shape(rois)[0], x.shape[1], self.ph, self.pw), x.dtype)
        self.run([x, rois, batch_indices], [y], None)
        return [y]

    def axis_weights(self, start, size, pooled, grid, limit):
        """Per output bin and sample along one axis: two source indices and their weights [pooled, grid, 2]
        (0 where the sample falls outside [-1, limit]), as onnxruntime's pre-computation."""
        f = self.dtype.type
        bin_size = f(size) / f(pooled)
        p = np.arange(pooled, dtype=f).reshape(-1, 1)
        g = np.arange(grid, dtype=f).reshape(1, -1)
        v = f(start) + p * bin_size + (g + f(0.5)) * bin_size / f(grid)
        valid = (v >= -1) & (v <= limit)
        v = np.maximum(v, 0)
        low = v.astype(np.int64)
        edge = low >= limit - 1
        low = np.where(edge, limit - 1, low)
        high = np.where(edge, low, low + 1)
        v = np.where(edge, low.astype(f), v)
        frac = v - low
        idx = np.stack([low, high], axis=-1)
        wts = np.stack([1 - frac, frac], axis=-1) * valid[..., None]
        return idx, wts.astype(f)

    def run(self, xs, ys, ws):
        x, rois, bidx = xs
        y = ys[0]
        n_rois = rois.shape[0]
        if bidx.size and (bidx.min() < 0 or bidx.max() >= self.n):
            raise self.fail(f"batch_indices out of range [0, {self.n - 1}]")
        f = self.dtype.type
        r = rois.astype(f) * f(self.scale) - f(0.5 if self.half_pixel else 0.0)
        h, w, ph, pw = self.h, self.w, self.ph, self.pw
        for k in range(n_rois):  # per roi: its own sampling grid
            x0, y0, x1, y1 = r[k]
            rw, rh = x1 - x0, y1 - y0
            if not self.half_pixel:
                rw, rh = max(rw, f(1)), max(rh, f(1))
            gh = self.ratio if self.ratio > 0 else int(math.ceil(rh / f(ph)))
            gw = self.ratio if self.ratio > 0 else int(math.ceil(rw / f(pw)))
            count = max(gh * gw, 1)
            yk = y[k]
            if gh <= 0 or gw <= 0:
                yk.fill(0)
                continue
            iy, wy = self.axis_weights(y0, rh, ph, gh, h)
            ix, wx = self.axis_weights(x0, rw, pw, gw, w)
            img = x[int(bidx[k])]
            if self.mode == "avg":
                r0, r1 = int(iy.min()), int(iy.max()) + 1
                c0, c1 = int(ix.min()), int(ix.max()) + 1
                my = np.zeros((ph, r1 - r0), f)
                np.add.at(my, (np.arange(ph).reshape(-1, 1, 1), iy - r0), wy)
                mx = np.zeros((pw, c1 - c0), f)
                np.add.at(mx, (np.arange(pw).reshape(-1, 1, 1), ix - c0), wx)
                out = np.matmul(np.matmul(my, img[:, r0:r1, c0:c1]), mx.T)  # [C, PH, PW]
                np.divide(out, f(count), out=out)
                np.copyto(yk, out, casting="unsafe")
            else:
                # v[c, ph, gh, 2, pw, gw, 2]: each corner times its weight; max over samples and corners
                g = img[:, iy.reshape(ph, gh, 2, 1, 1, 1), ix.reshape(1, 1, 1, pw, gw, 2)]
                g *= wy.reshape(ph, gh, 2, 1, 1, 1)
                g *= wx.reshape(1, 1, 1, pw, gw, 2)
                # onnxruntime: per sample, max of the four weighted corners (y_low/x_low, y_low/x_high, ...)
                out = g.max(axis=(2, 5)).max(axis=(2, 4))
                np.copyto(yk, out, casting="unsafe")
