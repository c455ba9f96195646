"""More normalizations: LRN, InstanceNormalization, GroupNormalization, LpNormalization,
MeanVarianceNormalization, and Hardmax.

All of them are planned kernels: statistics go into small workspace arrays, the result is written
with ufuncs into the planned output. LRN sums its channel window with one add per window tap (the
window is a handful of channels), never per channel or pixel.
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register

def _axis(k: PlannedKernel, axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise k.fail(f"axis={axis} is out of range for rank {rank}")
    return axis % rank


def _row_stats(x2, y2, mean, inv, inv_n, eps) -> None:
    """Per row of x2 [rows, cols]: y2 = x2 - mean, inv = 1 / sqrt(var + eps) (mean, inv: [rows, 1])."""
    np.mean(x2, axis=1, keepdims=True, out=mean)
    np.subtract(x2, mean, out=y2)
    inv1 = inv.reshape(-1)
    np.einsum("ij,ij->i", y2, y2, out=inv1)
    np.multiply(inv1, inv_n, out=inv1)
    np.add(inv1, eps, out=inv1)
    np.sqrt(inv1, out=inv1)
    np.divide(1, inv1, out=inv1)


@register("LRN", since=1)
class LRN(PlannedKernel):
    """y = x * (bias + alpha / size * sum of x^2 over a window of `size` channels) ^ -beta."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        if len(xm.shape) < 3:
            raise self.fail(f"X has shape {tuple(xm.shape)}, rank >= 3 (N, C, D1, ...) expected")
        size = self.attr("size")
        if size is None or int(size) < 1:
            raise self.fail(f"attribute 'size' must be a positive integer, got {size}")
        self.size = int(size)
        self.alpha = float(self.attr("alpha", 1e-4))
        self.beta = float(self.attr("beta", 0.75))
        self.bias = float(self.attr("bias", 1.0))
        n, c = xm.shape[:2]
        self.shape3 = (n, c, math.prod(xm.shape[2:]))
        self.lo = (self.size - 1) // 2
        self.dtype = xm.dtype
        self.out_metas = [Meta(xm.dtype, tuple(xm.shape))]
        self.scratch = Scratch()
        self.scratch.add("sq", (n, c + self.size - 1, self.shape3[2]), xm.dtype)

    def run(self, xs, ys, ws):
        sq = self.views(ws)["sq"]
        n, c, r = self.shape3
        lo, dt = self.lo, self.dtype.type
        x = xs[0].reshape(self.shape3)
        y = ys[0].reshape(self.shape3)
        sq[:, :lo] = 0
        sq[:, lo + c:] = 0
        np.square(x, out=sq[:, lo:lo + c])
        np.copyto(y, sq[:, :c])
        for k in range(1, self.size):  # one add per window tap
            np.add(y, sq[:, k:k + c], out=y)
        np.multiply(y, dt(self.alpha / self.size), out=y)
        np.add(y, dt(self.bias), out=y)
        np.power(y, dt(-self.beta), out=y)
        np.multiply(y, x, out=y)


@register("InstanceNormalization", since=1)
class InstanceNormalization(PlannedKernel):
    """Per (n, c): y = scale[c] * (x - mean) / sqrt(var + eps) + B[c]."""

    def prepare(self):
        xm = self.input_meta(0, "input")
        if len(xm.shape) < 3:
            raise self.fail(f"input has shape {tuple(xm.shape)}, rank >= 3 (N, C, D1, ...) expected")
        n, c = xm.shape[:2]
        for i, what in ((1, "scale"), (2, "B")):
            m = self.input_meta(i, what)
            if tuple(m.shape) != (c,):
                raise self.fail(f"{what} has shape {tuple(m.shape)}, ({c},) expected")
        dt = xm.dtype
        self.dt = dt
        self.n, self.c = n, c
        self.cols = math.prod(xm.shape[2:])
        self.rows = n * c
        self.eps = float(self.attr("epsilon", 1e-5))
        self.out_metas = [Meta(dt, tuple(xm.shape))]
        self.scratch = Scratch()
        # statistics in float32 at least (float16 sums lose too much)
        st = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
        self.st = st
        self.scratch.add("mean", (self.rows, 1), st)
        self.scratch.add("inv", (self.rows, 1), st)
        if dt == np.float16:
            self.scratch.add("xf", (self.rows, self.cols), st)

    def run(self, xs, ys, ws):
        if ys[0].size == 0:
            return
        v = self.views(ws)
        mean, inv = v["mean"], v["inv"]
        x2 = xs[0].reshape(self.rows, self.cols)
        y2 = ys[0].reshape(self.rows, self.cols)
        st = self.st.type
        work = v.get("xf", y2)  # float16: statistics and normalization in float32 scratch
        if work is not y2:
            np.copyto(work, x2)
            x2 = work
        _row_stats(x2, work, mean, inv, st(1.0 / max(self.cols, 1)), st(self.eps))
        a = inv.reshape(self.n, self.c)
        np.multiply(a, xs[1], out=a)  # inv * scale per (n, c)
        np.multiply(work, inv, out=work)
        w3 = work.reshape(self.n, self.c, self.cols)
        np.add(w3, xs[2].reshape(self.c, 1), out=w3)
        if work is not y2:
            np.copyto(y2, work, casting="unsafe")


@register("GroupNormalization", since=18)
class GroupNormalization(PlannedKernel):
    """Statistics per (n, group); GroupNormalization-18 has one scale/bias per group, -21 one per channel."""
    per_channel = False

    def prepare(self):
        xm = self.input_meta(0, "X")
        if len(xm.shape) < 2:
            raise self.fail(f"X has shape {tuple(xm.shape)}, rank >= 2 (N, C, ...) expected")
        g = self.attr("num_groups")
        if g is None:
            raise self.fail("attribute 'num_groups' is required")
        g = int(g)
        n, c = xm.shape[:2]
        if g < 1 or c % g:
            raise self.fail(f"num_groups={g} does not divide the {c} channels")
        if self.per_channel:
            stash = int(self.attr("stash_type", 1))
            if stash != 1:
                raise self.fail(f"stash_type={stash} is not supported (1: float32 statistics)")
        want = (c,) if self.per_channel else (g,)
        for i, what in ((1, "scale"), (2, "bias")):
            m = self.input_meta(i, what)
            if tuple(m.shape) != want:
                raise self.fail(f"{what} has shape {tuple(m.shape)}, {want} expected "
                                f"({'one per channel' if self.per_channel else 'one per group'} at opset "
                                f"{self.opset})")
        dt = xm.dtype
        self.n, self.c, self.g = n, c, g
        self.sp = math.prod(xm.shape[2:])
        self.rows, self.cols = n * g, (c // g) * self.sp
        self.eps = float(self.attr("epsilon", 1e-5))
        self.st = np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)
        self.out_metas = [Meta(dt, tuple(xm.shape))]
        self.scratch = Scratch()
        self.scratch.add("mean", (self.rows, 1), self.st)
        self.scratch.add("inv", (self.rows, 1), self.st)
        if dt != self.st:
            self.scratch.add("xf", (self.rows, self.cols), self.st)

    def run(self, xs, ys, ws):
        if ys[0].size == 0:
            return
        v = self.views(ws)
        mean, inv = v["mean"], v["inv"]
        x2 = xs[0].reshape(self.rows, self.cols)
        y2 = ys[0].reshape(self.rows, self.cols)
        st = self.st.type
        work = v.get("xf", y2)
        if work is not y2:
            np.copyto(work, x2)
            x2 = work
        _row_stats(x2, work, mean, inv, st(1.0 / max(self.cols, 1)), st(self.eps))
        np.multiply(work, inv, out=work)
        n, c, g, sp = self.n, self.c, self.g, self.sp
        if self.per_channel:
            w3 = work.reshape(n, c, sp)
            np.multiply(w3, xs[1].reshape(c, 1), out=w3)
            np.add(w3, xs[2].reshape(c, 1), out=w3)
        else:
            w3 = work.reshape(n, g, self.cols)
            np.multiply(w3, xs[1].reshape(g, 1), out=w3)
            np.add(w3, xs[2].reshape(g, 1), out=w3)
        if work is not y2:
            np.copyto(y2, work, casting="unsafe")


@register("GroupNormalization", since=21)
class GroupNormalization21(GroupNormalization):
    per_channel = True


@register("LpNormalization", since=1)
class LpNormalization(PlannedKernel):
    """y = x / ||x||_p along `axis` (p = 1 or 2); a zero norm leaves the (zero) slice as it is."""

    def prepare(self):
        xm = self.input_meta(0, "input")
        shape = tuple(xm.shape)
        if not shape:
            raise self.fail("the input is a scalar; rank >= 1 expected")
        self.axis = _axis(self, int(self.attr("axis", -1)), len(shape))
        self.p = int(self.attr("p", 2))
        if self.p not in (1, 2):
            raise self.fail(f"p={self.p} is not supported (1 or 2)")
        outer = math.prod(shape[:self.axis])
        inner = math.prod(shape[self.axis + 1:])
        self.shape3 = (outer, shape[self.axis], inner)
        self.out_metas = [Meta(xm.dtype, shape)]
        self.scratch = Scratch()
        self.scratch.add("norm", (outer, 1, inner), xm.dtype)
        self.scratch.add("zero", (outer, 1, inner), np.bool_)

    def run(self, xs, ys, ws):
        v = self.views(ws)
        norm, zero = v["norm"], v["zero"]
        x = xs[0].reshape(self.shape3)
        y = ys[0].reshape(self.shape3)
        if self.p == 1:
            np.abs(x, out=y)
            np.sum(y, axis=1, keepdims=True, out=norm)
        else:
            np.square(x, out=y)
            np.sum(y, axis=1, keepdims=True, out=norm)
            np.sqrt(norm, out=norm)
        np.equal(norm, 0, out=zero)
        np.add(norm, zero, out=norm)
        np.divide(x, norm, out=y)


@register("MeanVarianceNormalization", since=9)
class MeanVarianceNormalization(PlannedKernel):
    """y = (x - mean) / (sqrt(var) + 1e-9) over `axes` (default [0, 2, 3]), as ONNX's function body."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        shape = tuple(xm.shape)
        axes = self.attr("axes", [0, 2, 3])
        axes = [_axis(self, int(a), len(shape)) for a in axes]
        if len(set(axes)) != len(axes):
            raise self.fail(f"axes {list(axes)} repeat an axis")
        self.axes = tuple(sorted(axes))
        red = tuple(1 if i in self.axes else d for i, d in enumerate(shape))
        self.out_metas = [Meta(xm.dtype, shape)]
        self.dt = xm.dtype
        self.scratch = Scratch()
        self.scratch.add("mean", red, xm.dtype)
        self.scratch.add("var", red, xm.dtype)
        self.scratch.add("m2", red, xm.dtype)
        self.scratch.add("sq", shape, xm.dtype)

    def run(self, xs, ys, ws):
        if ys[0].size == 0:
            return
        v = self.views(ws)
        mean, var, m2, sq = v["mean"], v["var"], v["m2"], v["sq"]
        x, y, ax = xs[0], ys[0], self.axes
        # as the function body: var = E[x^2] - E[x]^2
        np.mean(x, axis=ax, keepdims=True, out=mean)
        np.square(x, out=sq)
        np.mean(sq, axis=ax, keepdims=True, out=var)
        np.square(mean, out=m2)
        np.subtract(var, m2, out=var)
        np.sqrt(var, out=var)
        np.add(var, self.dt.type(1e-9), out=var)
        np.subtract(x, mean, out=y)
        np.divide(y, var, out=y)


@register("Hardmax", since=1)
class Hardmax(PlannedKernel):
    """1 at the first maximum along `axis`, 0 elsewhere (opset < 13: over the input coerced to 2-D)."""

    def prepare(self):
        xm = self.input_meta(0, "input")
        shape = tuple(xm.shape)
        r = len(shape)
        if r == 0:
            raise self.fail("the input is a scalar; rank >= 1 expected")
        legacy = self.opset < 13
        axis = _axis(self, int(self.attr("axis", 1 if legacy else -1)), r)
        if legacy:
            self.shape3 = (math.prod(shape[:axis]), math.prod(shape[axis:]), 1)
        else:
            self.shape3 = (math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:]))
        self.out_metas = [Meta(xm.dtype, shape)]
        o, _, i = self.shape3
        self.scratch = Scratch()
        self.scratch.add("idx", (o, 1, i), np.int64)
        self.scratch.add("flat", (o, 1, i), np.int64)
        if self.shape3[1] > 0:
            d = self.shape3[1]
            # flat offset of (o, 0, i) in the output
            self.base = (np.arange(o, dtype=np.int64).reshape(o, 1, 1) * (d * i)
                         + np.arange(i, dtype=np.int64).reshape(1, 1, i))

    def run(self, xs, ys, ws):
        v = self.views(ws)
        x = xs[0].reshape(self.shape3)
        y = ys[0]
        y.fill(0)
        if y.size == 0:
            return
        idx, flat = v["idx"], v["flat"]
        np.argmax(x, axis=1, keepdims=True, out=idx)
        np.multiply(idx, self.shape3[2], out=flat)
        np.add(flat, self.base, out=flat)
        y.reshape(-1)[flat.reshape(-1)] = 1
