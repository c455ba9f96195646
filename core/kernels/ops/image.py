"""Image sampling ops: GridSample (opset 16: 4-D; opset 20: N-D, modes linear/nearest/cubic), AffineGrid,
MaxUnpool.

GridSample, as onnxruntime computes it: grid coordinates are un-normalized (align_corners), nearest
rounds half to even, out-of-range coordinates are clamped (border) or reflected (reflection), and
the taps outside the image read 0 (zeros) or the clamped/reflected pixel. Every tap (1 nearest,
2^d linear, 4^d cubic) is one gather of all output points per batch item plus one multiply-add over
the whole [N, C, points] output; the loop runs over taps and batch items, never over points.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.ir import Meta
from ..dtypes import working_dtype
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register
from ..values import text

MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


def _cubic_coeffs(t: np.ndarray) -> list[np.ndarray]:
    """Weights of the taps at offsets -1, 0, 1, 2 from floor(x), t = x - floor(x) (A = -0.75)."""
    a = -0.75
    x = np.abs(t)
    c0 = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
    c1 = ((a + 2) * x - (a + 3)) * x * x + 1
    c2 = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
    c3 = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a
    return [c0, c1, c2, c3]


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """onnxruntime's GsReflect: fold coordinates outside [lo, hi] back inside."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0))
    n = np.floor(d / rng)
    r = d - n * rng
    even = (n % 2) == 0
    low_side = np.where(even, lo + r, hi - r)
    high_side = np.where(even, hi - r, lo + r)
    return np.where(below, low_side, np.where(above, high_side, x)).astype(x.dtype)


@register("GridSample", since=16)
class GridSample(PlannedKernel):
    def prepare(self):
        xm, gm = self.spatial_meta(0, "X"), self.spatial_meta(1, "grid")
        # (float16/bfloat16 come widened to float32 by the float32 adapter, float16.py)
        if xm.dtype not in (np.float32, np.float64) or gm.dtype not in (np.float32, np.float64):
            raise self.fail(f"X {xm.dtype} and grid {gm.dtype} must be float tensors")
        xs, gs = tuple(xm.shape), tuple(gm.shape)
        d = len(xs) - 2
        if self.opset < 20 and d != 2:
            raise self.fail(f"X has shape {xs}: GridSample-16 samples 4-D inputs")
        if len(gs) != d + 2 or gs[0] != xs[0] or gs[-1] != d:
            raise self.fail(f"grid has shape {gs}; [{xs[0]}, *out, {d}] expected for X {xs}")
        mode = text(self.attr("mode", "bilinear" if self.opset < 20 else "linear"))
        names = ("bilinear", "nearest", "bicubic") if self.opset < 20 else ("linear", "nearest", "cubic")
        if mode not in names:
            raise self.fail(f"mode '{mode}' is not one of {', '.join(names)} at opset {self.opset}")
        self.mode = MODES[mode]
        self.pad = text(self.attr("padding_mode", "zeros"))
        if self.pad not in ("zeros", "border", "reflection"):
            raise self.fail(f"padding_mode '{self.pad}' is not one of zeros, border, reflection")
        self.align = bool(int(self.attr("align_corners", 0)))
        self.n, self.c = xs[:2]
        self.sizes = xs[2:]  # spatial, outermost first (grid's last dim lists them innermost first)
        self.out = gs[1:-1]
        self.points = math.prod(self.out)
        self.plane = math.prod(self.sizes)
        self.strides = [math.prod(self.sizes[k + 1:]) for k in range(d)]
        self.dt = xm.dtype
        self.out_metas = [Meta(xm.dtype, (self.n, self.c) + tuple(self.out))]
        self.scratch = Scratch()
        self.scratch.add("tap", (self.n, self.c, self.points), xm.dtype)

    def axis_taps(self, g: np.ndarray, size: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray | None]]:
        """Per tap along one axis: (index, weight, valid or None) arrays of shape [N, points]."""
        f = self.dt.type
        if self.align:
            x = (g + 1) / f(2) * f(size - 1)
            lo, hi = 0.0, float(size - 1)
        else:
            x = ((g + 1) * f(size) - 1) / f(2)
            lo, hi = -0.5, size - 0.5
        if self.mode == "nearest":
            x = np.rint(x)
        out = (x < lo) | (x > hi)
        if self.pad == "border" and self.mode != "cubic":  # cubic clamps each tap instead
            x = np.where(out, np.clip(x, 0, size - 1), x)
        elif self.pad == "reflection":
            x = np.where(out, _reflect(x, lo, hi), x)
        if self.mode == "nearest":
            idx, wts = [x.astype(np.int64)], [None]
        elif self.mode == "linear":
            x0 = np.floor(x)
            t = (x - x0).astype(self.dt)
            idx, wts = [x0.astype(np.int64), x0.astype(np.int64) + 1], [1 - t, t]
        else:
            x0 = np.floor(x)
            t = (x - x0).astype(self.dt)
            base = x0.astype(np.int64) - 1
            idx, wts = [base + k for k in range(4)], _cubic_coeffs(t)
        taps = []
        for i, w in zip(idx, wts):
            i, valid = self.pixel_index(i, size, lo, hi)
            taps.append((i, w, valid))
        return taps

    def pixel_index(self, i: np.ndarray, size: int, lo: float, hi: float):
        """onnxruntime's PixelAtGrid for one axis: (in-range index, valid mask for zeros padding)."""
        if self.pad == "zeros":
            valid = (i >= 0) & (i < size)
            return np.clip(i, 0, size - 1), valid
        if self.pad == "border":
            return np.clip(i, 0, size - 1), None
        r = _reflect(i.astype(np.float64), lo, hi).astype(np.int64)
        return np.clip(r, 0, size - 1), None

    def run(self, xs, ys, ws):
        x, grid = xs[0], xs[1]
        d = len(self.sizes)
        g = grid.reshape(self.n, self.points, d).astype(self.dt, copy=False)  # the schema lets grid's type differ
        per_axis = [self.axis_taps(g[..., d - 1 - k], self.sizes[k]) for k in range(d)]  # grid: (x, y, ...)
        tap = self.views(ws)["tap"]
        y = ys[0].reshape(self.n, self.c, self.points)
        y.fill(0)
        x2 = x.reshape(self.n, self.c, self.plane)
        for combo in itertools.product(*per_axis):  # one gather and one multiply-add per tap
            flat = sum(i * s for (i, _, _), s in zip(combo, self.strides))
            w = None
            for _, wk, vk in combo:
                if wk is not None:
                    w = wk if w is None else w * wk
                if vk is not None:
                    w = vk.astype(self.dt) if w is None else w * vk
            for b in range(self.n):
                np.take(x2[b], flat[b], axis=1, out=tap[b])
            if w is None:
                np.add(y, tap, out=y)
            else:
                np.multiply(tap, w.reshape(self.n, 1, self.points), out=tap)
                np.add(y, tap, out=y)


@register("AffineGrid", since=20)
class AffineGrid(PlannedKernel):
    """grid[n] = [x, y, (z,) 1] @ theta[n]^T over the base grid of `size` ([N, C, H, W] or [N, C, D, H, W])."""
    #: size sets the output shape: a computed one runs on the dynamic path (its value at run time)
    shape_inputs = ((1, "size"),)

    def prepare(self):
        tm = self.inputs[0] if self.inputs else None
        if tm is None:
            raise self.fail("input 0 (theta) is missing")
        size = [int(v) for v in np.asarray(self.const(1, "size")).reshape(-1)]
        if len(size) not in (4, 5):
            raise self.fail(f"size {size} must have 4 or 5 values")
        d = len(size) - 2
        n = size[0]
        if tuple(tm.shape) != (n, d, d + 1):
            raise self.fail(f"theta has shape {tuple(tm.shape)}, ({n}, {d}, {d + 1}) expected for size {size}")
        align = bool(int(self.attr("align_corners", 0)))
        spatial = size[2:]
        axes = []
        for L in spatial:
            i = np.arange(L, dtype=np.float64)
            axes.append((-1 + 2 * i / (L - 1) if L > 1 else np.zeros(L)) if align else (2 * i + 1) / L - 1)
        mesh = np.meshgrid(*axes, indexing="ij")  # outermost first; the grid lists x (innermost) first
        base = np.stack([m.reshape(-1) for m in mesh[::-1]] + [np.ones(math.prod(spatial))], axis=1)
        # float16/bfloat16: the grid is computed in float32 and rounded once
        self.work = working_dtype(tm.dtype)
        self.base = base.astype(self.work)  # [points, d + 1]
        self.n, self.d, self.points = n, d, math.prod(spatial)
        self.out_metas = [Meta(tm.dtype, (n,) + tuple(spatial) + (d,))]
        self.scratch = Scratch()
        if self.work != tm.dtype:
            self.scratch.add("theta", (n, d + 1, d), self.work)
            self.scratch.add("grid", (n, self.points, d), self.work)

    def run(self, xs, ys, ws):
        y = ys[0].reshape(self.n, self.points, self.d)
        if self.work == self.inputs[0].dtype:
            np.matmul(self.base, xs[0].transpose(0, 2, 1), out=y)
            return
        v = self.views(ws)
        np.copyto(v["theta"], xs[0].transpose(0, 2, 1), casting="unsafe")
        np.matmul(self.base, v["theta"], out=v["grid"])
        np.copyto(y, v["grid"], casting="unsafe")


@register("MaxUnpool", since=9)
class MaxUnpool(PlannedKernel):
    """Zeros, with X's values put back at MaxPool's flat indices I (over the whole output tensor, also
    when output_shape is given, as onnxruntime and PyTorch's max_unpool: onnx's
    test_maxunpool_export_with_output_shape expects I's coordinates in the default shape instead)."""
    shape_inputs = ((2, "output_shape"),)  # read as a constant: the hybrid executor builds the kernel on its value

    def prepare(self):
        xm, im = self.spatial_meta(0, "X"), self.spatial_meta(1, "I")
        if tuple(im.shape) != tuple(xm.shape):
            raise self.fail(f"I has shape {tuple(im.shape)}; X's {tuple(xm.shape)} expected")
        xs = tuple(xm.shape)
        d = len(xs) - 2
        ks = self.attrs.get("kernel_shape")
        if ks is None or len(ks) != d:
            raise self.fail(f"kernel_shape {ks} does not fit an input with {d} spatial dims")
        kernel = [int(k) for k in ks]
        strides = self.ints("strides", d, 1)
        pads = self.ints("pads", 2 * d, 0)
        out = [(s - 1) * st + k - pads[i] - pads[i + d] for i, (s, st, k) in enumerate(zip(xs[2:], strides, kernel))]
        shape = xs[:2] + tuple(out)
        if len(self.inputs) > 2 and self.inputs[2] is not None:
            given = tuple(int(v) for v in np.asarray(self.const(2, "output_shape")).reshape(-1))
            if len(given) != len(xs) or given[:2] != xs[:2] or any(g < o for g, o in zip(given[2:], out)):
                raise self.fail(f"output_shape {list(given)} does not fit X {xs} (at least {list(shape)})")
            shape = given
        if any(o <= 0 for o in shape[2:]):
            raise self.fail(f"output shape {shape} is empty")
        self.size = math.prod(shape)
        self.out_metas = [Meta(xm.dtype, shape)]
        self.scratch = Scratch()

    def run(self, xs, ys, ws):
        y = ys[0].reshape(-1)
        idx = xs[1].reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise self.fail(f"indices out of range [0, {self.size - 1}]")
        y.fill(0)
        y[idx] = xs[0].reshape(-1)
