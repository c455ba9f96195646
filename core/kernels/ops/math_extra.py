"""Less common math ops: Shrink, BitShift, Det, LpPool, GlobalLpPool.

LpPool pads |x|^p once into the workspace (zeros) and sums the kernel positions' strided views into
the output, one ufunc per kernel position, as the other window pools do; then takes the p-th root.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.ir import Meta
from ..planned import Scratch
from .windows import kernel_position_view, padded_extent, pool_window, window_coverage, zero_borders
from ..planned import PlannedKernel
from ..registry import register
from ..values import text

FLOATS = (np.float16, np.float32, np.float64)


@register("Shrink", since=9)
class Shrink(PlannedKernel):
    """y = x - bias where x > lambd, x + bias where x < -lambd, else 0."""

    def prepare(self):
        xm = self.input_meta(0, "input")
        self.bias = float(self.attr("bias", 0.0))
        self.lambd = float(self.attr("lambd", 0.5))
        shape = tuple(xm.shape)
        self.out_metas = [Meta(xm.dtype, shape)]
        # integers: computed in float32 (as onnxruntime, float bias) and truncated
        self.wt = xm.dtype if xm.dtype.kind == "f" else np.dtype(np.float32)
        self.scratch = Scratch()
        self.scratch.add("t", shape, self.wt)
        self.scratch.add("m", shape, np.bool_)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        t, m = v["t"], v["m"]
        x, y = xs[0], ys[0]
        w = self.wt.type
        y.fill(0)
        np.greater(x, w(self.lambd), out=m)
        np.subtract(x, w(self.bias), out=t, dtype=self.wt)
        np.copyto(y, t, where=m, casting="unsafe")
        np.less(x, w(-self.lambd), out=m)
        np.add(x, w(self.bias), out=t, dtype=self.wt)
        np.copyto(y, t, where=m, casting="unsafe")


@register("BitShift", since=11)
class BitShift(PlannedKernel):
    """BitShift-11 on unsigned integers; BitShift-28 adds the signed ones (an arithmetic right shift)
    and defines a shift < 0 or >= the type's width: 0, or -1 shifting a negative X right."""

    def prepare(self):
        xm, sm = self.input_meta(0, "X"), self.input_meta(1, "Y")
        d = text(self.attr("direction", ""))
        if d not in ("LEFT", "RIGHT"):
            raise self.fail(f"direction '{d}' must be LEFT or RIGHT")
        self.ufunc = np.left_shift if d == "LEFT" else np.right_shift
        self.bits = np.dtype(xm.dtype).itemsize * 8
        try:
            shape = np.broadcast_shapes(tuple(xm.shape), tuple(sm.shape))
        except ValueError:
            raise self.fail(f"X {tuple(xm.shape)} and Y {tuple(sm.shape)} do not broadcast") from None
        self.out_metas = [Meta(xm.dtype, shape)]
        self.scratch = Scratch()
        self.scratch.add("out", shape, np.bool_)

    def run(self, xs, ys, ws):
        x, s, y = xs[0], xs[1], ys[0]
        out = self.views(ws)["out"]  # shifts out of [0, bits): C leaves them undefined, ONNX does not
        np.logical_or(s < 0, s >= self.bits, out=out)
        self.ufunc(x, np.where(out, 0, s).astype(s.dtype, copy=False), out=y)
        if out.any():
            fill = np.where(x < 0, -1, 0) if self.ufunc is np.right_shift and y.dtype.kind == "i" else 0
            np.copyto(y, np.broadcast_to(fill, y.shape), where=out, casting="unsafe")


@register("Det", since=11)
class Det(PlannedKernel):
    """Determinants of the trailing [M, M] matrices (LAPACK LU through numpy)."""

    def prepare(self):
        xm = self.input_meta(0, "X")  # float32/float64 (float16 and bfloat16 come widened, float16.py)
        s = tuple(xm.shape)
        if len(s) < 2 or s[-1] != s[-2]:
            raise self.fail(f"X has shape {s}; [..., M, M] expected")
        self.out_metas = [Meta(xm.dtype, s[:-2])]
        self.scratch = Scratch()

    def run(self, xs, ys, ws):
        x = xs[0]
        r = np.linalg.det(x.astype(np.float32) if x.dtype == np.float16 else x)
        np.copyto(ys[0], r, casting="unsafe")


def _p(k) -> float:
    p = k.attr("p", 2.0 if k.opset < 2 else 2)
    p = float(p)
    if p <= 0:
        raise k.fail(f"p={p} must be positive")
    return p


def _abs_pow(x, p, out):
    """|x|^p into out (x**2 for p=2, |x| for p=1)."""
    if p == 2:
        np.square(x, out=out)
    elif p == 1:
        np.abs(x, out=out)
    else:
        np.abs(x, out=out)
        np.power(out, out.dtype.type(p), out=out)


def _root(y, p):
    if p == 2:
        np.sqrt(y, out=y)
    elif p != 1:
        np.power(y, y.dtype.type(1.0 / p), out=y)


@register("LpPool", since=1)
class LpPool(PlannedKernel):
    """(sum over the window of |x|^p)^(1/p), windows as the other pools (pads, auto_pad, strides,
    dilations and ceil_mode from opset 18)."""

    def prepare(self):
        xm = self.spatial_meta(0, "X")  # float32/float64 (float16 and bfloat16 come widened, float16.py)
        shape = tuple(xm.shape)
        n, c = shape[:2]
        spatial = list(shape[2:])
        kernel, strides, dil, pb, pe, out = pool_window(self, spatial, dilations_and_ceil=self.opset >= 18)
        taps, _ = window_coverage(kernel, strides, dil, pb, spatial, out)
        padded = padded_extent(spatial, pb, out, strides, taps, dil)
        self.pe_eff = [p - s - b for p, s, b in zip(padded, spatial, pb)]
        self.pb, self.spatial, self.strides, self.dil, self.out = pb, spatial, strides, dil, out
        self.p = _p(self)
        self.positions = list(itertools.product(*taps))
        self.out_metas = [Meta(xm.dtype, (n, c) + tuple(out))]
        self.scratch = Scratch()
        self.scratch.add("xp", (n, c) + tuple(padded), xm.dtype)

    def run(self, xs, ys, ws):
        xp = self.views(ws)["xp"]
        zero_borders(xp, self.pb, self.pe_eff, 0)
        inner = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(self.pb, self.spatial))
        _abs_pow(xs[0], self.p, xp[inner])
        y = ys[0]
        if not self.positions:  # no window reads the input (or the output is empty)
            y[...] = 0
            return
        views = [kernel_position_view(xp, pos, self.strides, self.dil, self.out) for pos in self.positions]
        np.copyto(y, views[0])
        for xv in views[1:]:  # one add per kernel position that reads the input
            np.add(y, xv, out=y)
        _root(y, self.p)


@register("GlobalLpPool", since=1)
class GlobalLpPool(PlannedKernel):
    def prepare(self):
        xm = self.spatial_meta(0, "X")
        if xm.dtype not in FLOATS:
            raise self.fail(f"X has type {xm.dtype}; a float type expected")
        shape = tuple(xm.shape)
        self.p = _p(self)
        self.nc, self.sp = shape[0] * shape[1], math.prod(shape[2:])
        self.out_metas = [Meta(xm.dtype, shape[:2] + (1,) * (len(shape) - 2))]
        self.scratch = Scratch()
        self.scratch.add("t", shape, xm.dtype)

    def run(self, xs, ys, ws):
        t = self.views(ws)["t"].reshape(self.nc, self.sp)
        _abs_pow(xs[0].reshape(self.nc, self.sp), self.p, t)
        y = ys[0].reshape(self.nc)
        np.sum(t, axis=1, out=y)
        _root(y, self.p)
