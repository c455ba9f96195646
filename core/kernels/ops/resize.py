"""Resize (opsets 11-19): nearest (every nearest_mode), n-linear and cubic, every coordinate transformation
mode, scales or sizes (constant), roi for tf_crop_and_resize, axes and keep_aspect_ratio_policy (opset 18).

Everything shape-dependent is computed in prepare(), in float32 like onnxruntime (so ties in nearest
rounding land the same way): per resized axis, a few taps (index array, weight array).
- nearest: with ge's native kernels, when the resized axes are two neighbouring ones (H and W, also of a
  blocked (N, C/16, H, W, 16) tensor), a row gather by the per-axis indices (csrc/resize.c; an
  integer-scale upsample copies without reading them); else one np.take over the flattened trailing
  block of axes, with a precomputed flat index;
- linear/cubic: separable, one axis at a time: per tap a np.take into the workspace, a multiply by the
  tap's weights (broadcast along the axis) and an add, all with out=; the last axis (short rows) is
  instead one GEMM with the interpolation matrix, rows @ M[in, out].
tf_crop_and_resize then writes extrapolation_value where a coordinate fell outside the input.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ...model.ir import Meta
from ..native import CallCache, run_for_threads
from ..planned import Scratch
from .windows import SpatialKernel
from ..registry import register

MODES = ("nearest", "linear", "cubic")
COORD_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
#: above this many flat indices, nearest falls back to one np.take per axis
FLAT_INDEX_LIMIT = 1 << 24
#: linear/cubic along the last axis is a GEMM while the input length is at most this times
#: (2 * taps + 1) (the passes of the gather path, each ~40 multiply-adds' worth of time)
GEMM_PER_TAP = 40


@register("Resize", since=11)
class Resize(SpatialKernel):
    def prepare(self):
        xm = self.inputs[0] if self.inputs else None
        if xm is None:
            raise self.fail("input 0 (X) is missing")
        shape = tuple(int(s) for s in xm.shape)
        r = len(shape)
        self.mode = self.string("mode", "nearest")
        self.coord = self.string("coordinate_transformation_mode", "half_pixel")
        self.nearest_mode = self.string("nearest_mode", "round_prefer_floor")
        if self.mode not in MODES:
            raise self.fail(f"mode '{self.mode}' is not supported ({', '.join(MODES)})")
        if self.coord not in COORD_MODES:
            raise self.fail(f"coordinate_transformation_mode '{self.coord}' is not supported")
        if self.mode == "nearest" and self.nearest_mode not in NEAREST_MODES:
            raise self.fail(f"nearest_mode '{self.nearest_mode}' is not supported")
        self.antialias = bool(int(self.attr("antialias", 0)))
        if self.antialias and self.mode == "nearest":
            raise self.fail("antialias=1 applies to the linear and cubic modes, not nearest")
        if self.mode != "nearest" and xm.dtype.kind != "f":
            raise self.fail(f"mode '{self.mode}' needs a floating-point input, got {xm.dtype}")
        policy = self.string("keep_aspect_ratio_policy", "stretch")
        if policy not in ("stretch", "not_larger", "not_smaller"):
            raise self.fail(f"keep_aspect_ratio_policy '{policy}' is not supported")
        axes = self.attrs.get("axes")
        if axes is None:
            axes = list(range(r))
        else:
            axes = [int(a) + r if int(a) < 0 else int(a) for a in axes]
            if any(not 0 <= a < r for a in axes) or len(set(axes)) != len(axes):
                raise self.fail(f"axes {list(self.attrs['axes'])} are invalid for rank {r}")

        roi = self._optional_const(1, "roi") if self.coord == "tf_crop_and_resize" else None
        scales = self._optional_const(2, "scales")
        sizes = self._optional_const(3, "sizes")
        if (scales is None) == (sizes is None):
            raise self.fail("exactly one of scales and sizes must be given (as a non-empty constant)")
        in_f = np.array([shape[a] for a in axes], np.float32)
        if sizes is not None:
            sizes = [int(s) for s in np.asarray(sizes).reshape(-1)]
            if len(sizes) != len(axes):
                raise self.fail(f"sizes has {len(sizes)} values, {len(axes)} expected")
            sc = np.array(sizes, np.float32) / in_f
            if policy != "stretch":
                common = np.float32(sc.min() if policy == "not_larger" else sc.max())
                sc = np.full(len(axes), common, np.float32)
                sizes = [int(math.floor(float(common) * float(n) + 0.5)) for n in in_f]
            out_ax = sizes
        else:
            sc = np.asarray(scales, np.float32).reshape(-1)
            if len(sc) != len(axes):
                raise self.fail(f"scales has {len(sc)} values, {len(axes)} expected")
            if np.any(sc <= 0):
                raise self.fail(f"scales {sc.tolist()} must be positive")
            out_ax = [int(np.float32(s) * n) for s, n in zip(sc, in_f)]
        if any(o <= 0 for o in out_ax):
            raise self.fail(f"the output shape along axes {axes} would be {out_ax}")
        if roi is not None:
            roi = np.asarray(roi, np.float32).reshape(-1)
            if len(roi) != 2 * len(axes):
                raise self.fail(f"roi has {len(roi)} values, {2 * len(axes)} expected")
        elif self.coord == "tf_crop_and_resize":
            raise self.fail("coordinate_transformation_mode tf_crop_and_resize needs a constant roi")

        out = list(shape)
        self.scale = [np.float32(1)] * r
        starts, ends = [0.0] * r, [1.0] * r
        for j, a in enumerate(axes):
            out[a] = out_ax[j]
            self.scale[a] = np.float32(sc[j])
            if roi is not None:
                starts[a], ends[a] = roi[j], roi[len(axes) + j]
        self.shape, self.out = shape, tuple(out)
        self.dtype = xm.dtype
        self.extrap = xm.dtype.type(float(self.attr("extrapolation_value", 0.0)))
        self.out_metas = [Meta(xm.dtype, self.out)]
        self.scratch = Scratch()

        # per axis: taps [(index, weight)], extrapolation mask or None; identity axes are skipped
        self.steps = []
        self.masks = []
        for a in range(r):
            if self.scale[a] == 1 and out[a] == shape[a] and self.coord != "tf_crop_and_resize":
                continue  # onnxruntime maps unscaled axes straight through (matters for tf_half_pixel_for_nn)
            taps, mask = self._taps(a, starts[a], ends[a])
            if mask is not None and mask.any():
                self.masks.append((a, mask.reshape((-1,) + (1,) * (r - a - 1))))
            if (len(taps) == 1 and taps[0][1] is None and shape[a] == out[a]
                    and np.array_equal(taps[0][0], np.arange(shape[a]))):
                continue
            self.steps.append((a, taps))
        self._plan()

    def _optional_const(self, i, what):
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None or math.prod(m.shape) == 0:
            return None
        return self.const(i, what)

    # -- coordinates -------------------------------------------------------------------------------------
    def _original(self, a, start, end):
        n_in, n_out, s = np.float32(self.shape[a]), np.float32(self.out[a]), self.scale[a]
        y = np.arange(self.out[a], dtype=np.float32)
        one, half = np.float32(1), np.float32(0.5)
        c = self.coord
        if c == "half_pixel":
            return (y + half) / s - half
        if c == "half_pixel_symmetric":
            adjustment = n_out / (s * n_in)
            offset = (n_in / np.float32(2)) * (one - adjustment)
            return offset + (y + half) / s - half
        if c == "pytorch_half_pixel":
            return (y + half) / s - half if self.out[a] > 1 else np.zeros_like(y)
        if c == "align_corners":  # the integer output length, as onnxruntime and PyTorch (onnx's reference
            # divides by length * scale, fractional: test_resize_downsample_scales_*_align_corners expect that)
            return y * (n_in - one) / (n_out - one) if self.out[a] > 1 else np.zeros_like(y)
        if c == "asymmetric":
            return y / s
        if c == "tf_half_pixel_for_nn":
            return (y + half) / s
        # tf_crop_and_resize
        start, end = np.float32(start), np.float32(end)
        if self.out[a] > 1:
            return start * (n_in - one) + (y * (end - start) * (n_in - one)) / (n_out - one)
        return np.full_like(y, np.float32(0.5 * (float(start) + float(end)) * (float(n_in) - 1)))

    def _taps(self, a, start, end):
        n_in = self.shape[a]
        x = self._original(a, start, end)
        mask = None
        if self.coord == "tf_crop_and_resize":
            mask = (x < 0) | (x > np.float32(n_in - 1))
        dt = self.dtype
        if self.mode == "nearest":
            m = self.nearest_mode
            if m == "round_prefer_floor":
                idx = np.where(x == np.trunc(x) + np.float32(0.5), np.floor(x), _round_half_away(x))
            elif m == "round_prefer_ceil":
                idx = _round_half_away(x)
            elif m == "floor":
                idx = np.floor(x)
            else:
                idx = np.ceil(x)
            return [(np.clip(idx, 0, n_in - 1).astype(np.int64), None)], mask
        if self.antialias and self.scale[a] < 1:
            return self._antialias_taps(x, n_in, float(self.scale[a]), dt), mask
        if self.mode == "linear":
            xc = np.clip(x, np.float32(0), np.float32(n_in - 1))
            lo = np.minimum(xc.astype(np.int64), n_in - 1)
            hi = np.minimum(lo + 1, n_in - 1)
            frac = xc - lo.astype(np.float32)
            w_lo, w_hi = np.float32(1) - frac, frac
            same = lo == hi
            w_lo = np.where(same, np.float32(1), w_lo)
            w_hi = np.where(same, np.float32(0), w_hi)
            return _useful([(lo, w_lo), (hi, w_hi)], dt), mask
        # cubic
        a_ = np.float32(float(self.attr("cubic_coeff_a", -0.75)))
        fl = np.floor(x)
        s = x - fl
        s1, s2 = s + np.float32(1), np.float32(1) - s
        s3 = np.float32(2) - s
        coeffs = [((a_ * s1 - 5 * a_) * s1 + 8 * a_) * s1 - 4 * a_,
                  ((a_ + 2) * s - (a_ + 3)) * s * s + 1,
                  ((a_ + 2) * s2 - (a_ + 3)) * s2 * s2 + 1,
                  ((a_ * s3 - 5 * a_) * s3 + 8 * a_) * s3 - 4 * a_]
        base = fl.astype(np.int64) - 1
        idx = [base + i for i in range(4)]
        if int(self.attr("exclude_outside", 0)):
            coeffs = [np.where((ix >= 0) & (ix < n_in), cf, np.float32(0)) for ix, cf in zip(idx, coeffs)]
            total = coeffs[0] + coeffs[1] + coeffs[2] + coeffs[3]
            coeffs = [cf / total for cf in coeffs]
        return _useful([(np.clip(ix, 0, n_in - 1), cf) for ix, cf in zip(idx, coeffs)], dt), mask

    def _antialias_taps(self, x, n_in, scale, dt):
        """Downsampling with antialias=1: the linear (triangle) or cubic filter stretched by 1/scale,
        normalized, over the n inputs nearest each output coordinate (ties to the smaller index),
        edges clamped: onnx's definition (its reference's _linear/_cubic_coeffs_antialias)."""
        x = x.astype(np.float64)
        fl = np.floor(x)
        ratio = np.where(x == fl, 1.0, x - fl)  # an exact coordinate takes its left neighbour's window
        if self.mode == "linear":
            start = int(np.floor(-1 / scale) + 1)
            offsets = np.arange(start, 2 - start)
            c = np.clip(1 - np.abs((offsets[None, :] - ratio[:, None]) * scale), 0, 1)
        else:
            a_ = float(self.attr("cubic_coeff_a", -0.75))
            start = int(np.floor(-2 / scale) + 1)
            t = np.abs(scale * (np.arange(start, 2 - start)[None, :] - ratio[:, None]))
            c = np.where(t <= 1, ((a_ + 2) * t - (a_ + 3)) * t * t + 1,
                         np.where(t < 2, ((a_ * t - 5 * a_) * t + 8 * a_) * t - 4 * a_, 0.0))
        c = c / c.sum(axis=1, keepdims=True)
        n = c.shape[1]
        pad = -(-n // 2)
        xp = x + pad
        p = np.floor(xp)
        frac = xp - p
        if n % 2 == 0:
            off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
        else:
            off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
        idx = (p.astype(np.int64) + off - pad)[:, None] + np.arange(n)[None, :]
        if int(self.attr("exclude_outside", 0)):
            c = np.where((idx < 0) | (idx >= n_in), 0.0, c)
            total = c.sum(axis=1, keepdims=True)
            c = c / np.where(total == 0, 1.0, total)
        idx = np.clip(idx, 0, n_in - 1)
        return _useful([(idx[:, k], c[:, k]) for k in range(n)], dt)

    # -- plan ---------------------------------------------------------------------------------------------
    def _plan(self):
        r = len(self.shape)
        self.gather = None
        if not self.steps:
            self.kind = "copy"
            return
        if self.mode == "nearest":
            self.gather = self._row_gather()
            self.uses_native = self.gather is not None
            self.calls = CallCache()
            a0 = self.steps[0][0]
            if math.prod(self.out[a0:]) <= FLAT_INDEX_LIMIT:
                self.kind = "flat"
                self.pre = math.prod(self.shape[:a0])
                return
        self.kind = "separable"
        # downsampling axes first, so the intermediate tensors stay small
        self.steps.sort(key=lambda st: self.out[st[0]] / self.shape[st[0]])
        cur = list(self.shape)
        self.step_shapes = []
        self.mats = []
        for a, taps in self.steps:
            n_in = cur[a]
            cur[a] = self.out[a]
            self.step_shapes.append(tuple(cur))
            mat = None
            if a == r - 1 and taps[0][1] is not None and n_in <= GEMM_PER_TAP * (2 * len(taps) + 1):
                # the last axis as one GEMM, rows @ M[in, out] (M holds each output's tap weights): cheaper
                # than a gather, a multiply and an add per tap while the input rows are short
                mat = np.zeros((n_in, self.out[a]), self.dtype)
                cols = np.arange(self.out[a])
                for ix, w in taps:
                    np.add.at(mat, (ix, cols), w)
            self.mats.append(mat)
            weights = [None if w is None else w.reshape((-1,) + (1,) * (r - a - 1)) for _, w in taps]
            taps[:] = [(ix, w) for (ix, _), w in zip(taps, weights)]
        biggest = max(math.prod(s) for s in self.step_shapes)
        if any(len(t) > 1 and m is None for (_, t), m in zip(self.steps, self.mats)):
            self.scratch.add("tap", (biggest,), self.dtype)
        if len(self.steps) > 1:
            self.scratch.add("buf0", (biggest,), self.dtype)
        if len(self.steps) > 2:
            self.scratch.add("buf1", (biggest,), self.dtype)

    @functools.cached_property
    def flat(self) -> np.ndarray:
        """The "flat" plan's index into the flattened trailing block of axes (from the first resized one),
        made on the first run that takes that plan: the native row gather and the compiler, which plans
        and never runs, need none (a blocked 80x480 map's 614k indices, made each time the compiler
        planned the node, were 7% of DBNet's compile)."""
        r, a0 = len(self.shape), self.steps[0][0]
        idx = np.zeros(self.out[a0:], np.int64)
        stride = 1
        taps = dict((a, t[0][0]) for a, t in self.steps)
        for a in range(r - 1, a0 - 1, -1):
            ix = taps.get(a, np.arange(self.shape[a]))
            idx += (ix * stride).reshape((-1,) + (1,) * (r - a - 1))
            stride *= self.shape[a]
        return idx.reshape(-1)

    def _row_gather(self):
        """The native nearest plan, (planes, ih, iw, rows, cols, unit bytes, repeat), when the backend has
        native kernels, no extrapolation applies and the resized axes are within two neighbouring axes
        h, h + 1 (rows and cols: their source indices; unit: an element and the axes after them)."""
        if self.backend.lib is None or self.masks or self.dtype.hasobject:
            return None
        r, axes = len(self.shape), [a for a, _ in self.steps]
        h = min(axes) if min(axes) + 1 < r else min(axes) - 1
        if h < 0 or max(axes) > h + 1:
            return None
        index = {a: taps[0][0] for a, taps in self.steps}
        rows, cols = (np.ascontiguousarray(index.get(a, np.arange(self.shape[a])), np.int64) for a in (h, h + 1))
        ih, iw = self.shape[h], self.shape[h + 1]
        ow = len(cols)
        rep = ow // iw if ow % iw == 0 else 0
        repeat = rep if rep > 1 and np.array_equal(cols, np.arange(ow) // rep) else 0
        unit = self.dtype.itemsize * math.prod(self.shape[h + 2:])
        return math.prod(self.shape[:h]), ih, iw, rows, cols, unit, repeat

    def _gather_call(self, x, y):
        planes, ih, iw, rows, cols, unit, repeat = self.gather
        return self.backend.lib.nearest_call(x, y, rows, cols, planes=planes, ih=ih, iw=iw, unit=unit, repeat=repeat)

    def bound(self, xs, ys, ws):
        if self.gather is not None and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            return run_for_threads(lambda: self._gather_call(xs[0], ys[0]))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.gather is not None and x.flags.c_contiguous and y.flags.c_contiguous:
            self.calls.get((x, y), lambda: self._gather_call(x, y)).run()
        elif self.kind == "copy":
            np.copyto(y, x)
        elif self.kind == "flat":
            np.take(x.reshape(self.pre, -1), self.flat, axis=1, out=y.reshape(self.pre, -1), mode="clip")
        else:
            v = self.views(ws)
            cur = x
            last = len(self.steps) - 1
            for j, ((a, taps), shp, mat) in enumerate(zip(self.steps, self.step_shapes, self.mats)):
                n = math.prod(shp)
                dst = y if j == last else v["buf0" if j % 2 == 0 else "buf1"][:n].reshape(shp)
                if mat is not None:
                    np.matmul(cur.reshape(-1, mat.shape[0]), mat, out=dst.reshape(-1, mat.shape[1]))
                    cur = dst
                    continue
                ix, w = taps[0]
                np.take(cur, ix, axis=a, out=dst, mode="clip")
                if w is not None:
                    np.multiply(dst, w, out=dst)
                for ix, w in taps[1:]:
                    tmp = v["tap"][:n].reshape(shp)
                    np.take(cur, ix, axis=a, out=tmp, mode="clip")
                    np.multiply(tmp, w, out=tmp)
                    np.add(dst, tmp, out=dst)
                cur = dst
        for a, mask in self.masks:
            np.copyto(y, self.extrap, where=mask)


def _round_half_away(x):
    """std::round: halves away from zero (exact: the fraction x - trunc(x) is computed without rounding)."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= np.float32(0.5), np.sign(x), np.float32(0))


def _useful(taps, dt):
    """Drop taps whose weights are all zero; a single tap of weight 1 needs no multiply (weight None)."""
    kept = [(ix, w) for ix, w in taps if np.any(w != 0)] or taps[:1]
    if len(kept) == 1 and np.all(kept[0][1] == 1):
        return [(kept[0][0], None)]
    return [(ix, w.astype(dt)) for ix, w in kept]


# -- Upsample (opsets 7-9) and Resize-10 ---------------------------------------------------------------
# Upsample (opsets 7-9) and Resize-10: scales only, asymmetric coordinates, nearest = floor.
# Both are Resize with their old input layout mapped onto Resize-11's (X, roi, scales, sizes):
# pre-opset-11 exports (model-zoo YOLOv3, SSD, FCN at opsets 9-10) use them.
class _ScalesOnly(Resize):
    def prepare(self):
        mode = self.attrs.get("mode", "nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if self.opset < 9 and self.op_type == "Upsample":  # opset 7: scales is an attribute
            if "scales" not in self.attrs:
                raise self.fail("attribute scales is required")
            scales = np.asarray(self.attrs["scales"], np.float32)
        else:
            scales = self.const(1, "scales")
        self.attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        self.inputs = [self.inputs[0], None, Meta(np.dtype(np.float32), (len(scales),))]
        self.consts = [None, None, np.asarray(scales, np.float32)]
        super().prepare()


@register("Upsample", since=7)
class Upsample(_ScalesOnly):
    pass


@register("Resize", since=10)
class Resize10(_ScalesOnly):
    pass
