"""MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool (NC + 1-3-D).

The windowed pools pad once into the workspace (with -inf, or 0 for the average) when the windows
reach outside the input, then reduce over the kernel positions: one ufunc call with `out=` per
position, over the whole (N, C, *out) strided view.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..ir import Meta
from .conv import Scratch, SpatialKernel, kernel_position_view, window_pads, zero_borders
from .registry import register


class _WindowPool(SpatialKernel):
    pad_kind = "zero"

    def prepare(self):
        xm = self.spatial_meta(0, "X")
        shape = tuple(xm.shape)
        n, c = shape[:2]
        spatial = list(shape[2:])
        d = len(spatial)
        ks = self.attrs.get("kernel_shape")
        if ks is None:
            raise self.fail("attribute kernel_shape is required")
        kernel = [int(v) for v in ks]
        if len(kernel) != d or any(k < 1 for k in kernel):
            raise self.fail(f"kernel_shape {kernel} does not fit an input with {d} spatial dims")
        strides = self.ints("strides", d, 1)
        dil = self.ints("dilations", d, 1)
        if any(s < 1 for s in strides) or any(v < 1 for v in dil):
            raise self.fail(f"strides {strides} and dilations {dil} must be positive")
        ceil_mode = bool(int(self.attr("ceil_mode", 0)))
        pb, pe, out = window_pads(self, spatial, kernel, strides, dil, ceil_mode)
        if any(o <= 0 for o in out):
            raise self.fail(f"output spatial shape {out} is empty")
        dk = [(k - 1) * v + 1 for k, v in zip(kernel, dil)]
        # the padded extent every window fits in (ceil_mode windows may run past the end padding)
        padded = [max(s + b + e, (o - 1) * st + e_) for s, b, e, o, st, e_ in zip(spatial, pb, pe, out, strides, dk)]
        self.pe_eff = [p - s - b for p, s, b in zip(padded, spatial, pb)]
        self.n, self.c, self.spatial, self.kernel, self.strides, self.dil = n, c, spatial, kernel, strides, dil
        self.pb, self.pe, self.out = pb, pe, out
        self.dtype = xm.dtype
        self.needs_pad = any(pb) or any(self.pe_eff)
        self.scratch = Scratch()
        if self.needs_pad:
            self.scratch.add("xp", (n, c) + tuple(padded), xm.dtype)
        self.positions = list(itertools.product(*[range(k) for k in kernel]))
        self.out_metas = [Meta(xm.dtype, (n, c) + tuple(out))]
        self.prepare_pool()

    def prepare_pool(self):
        pass

    def padded(self, x, v, value):
        if not self.needs_pad:
            return x
        xp = v["xp"]
        zero_borders(xp, self.pb, self.pe_eff, value)
        inner = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(self.pb, self.spatial))
        np.copyto(xp[inner], x)
        return xp

    def position_views(self, xp):
        return [kernel_position_view(xp, pos, self.strides, self.dil, self.out) for pos in self.positions]


@register("MaxPool", since=1)
class MaxPool(_WindowPool):
    def prepare_pool(self):
        dt = self.dtype
        if dt.kind == "f":
            self.pad_value = dt.type(-np.inf)
        elif dt.kind in "iu":
            self.pad_value = np.iinfo(dt).min
        else:
            raise self.fail(f"input type {dt} is not supported")
        self.with_indices = self.num_outputs >= 2
        if not self.with_indices:
            return
        order = int(self.attr("storage_order", 0))
        if order not in (0, 1):
            raise self.fail(f"storage_order={order} must be 0 or 1")
        sp = self.spatial
        d = len(sp)
        # flat index of each spatial coordinate, row- (storage_order 0) or column-major (1)
        mult = [math.prod(sp[i + 1:]) for i in range(d)] if order == 0 else [math.prod(sp[:i]) for i in range(d)]
        grids = np.meshgrid(*[np.arange(o) * s for o, s in zip(self.out, self.strides)], indexing="ij")
        self.pos_index = []
        for pos in self.positions:
            idx = np.zeros(tuple(self.out), np.int64)
            for i in range(d):
                idx += (grids[i] + pos[i] * self.dil[i] - self.pb[i]) * mult[i]
            self.pos_index.append(idx)
        plane = math.prod(sp)
        self.base = (np.arange(self.n * self.c, dtype=np.int64) * plane).reshape((self.n, self.c) + (1,) * d)
        self.out_metas.append(Meta(np.dtype(np.int64), (self.n, self.c) + tuple(self.out)))
        self.scratch.add("mask", (self.n, self.c) + tuple(self.out), np.bool_)

    def run(self, xs, ys, ws):
        v = self.views(ws) if self.scratch.items else {}
        xp = self.padded(xs[0], v, self.pad_value)
        y = ys[0]
        views = self.position_views(xp)
        np.copyto(y, views[0])
        if not self.with_indices:
            for xv in views[1:]:
                np.maximum(y, xv, out=y)
            return
        ind, mask = ys[1], v["mask"]
        np.copyto(ind, self.pos_index[0])
        for xv, idx in zip(views[1:], self.pos_index[1:]):
            np.greater(xv, y, out=mask)
            np.copyto(y, xv, where=mask)
            np.copyto(ind, idx, where=mask)
        np.add(ind, self.base, out=ind)


@register("AveragePool", since=1)
class AveragePool(_WindowPool):
    def prepare_pool(self):
        if self.dtype.kind != "f":
            raise self.fail(f"input type {self.dtype} is not supported")
        include = bool(int(self.attr("count_include_pad", 0)))
        counts = []
        for s, b, e, o, st, k, dl in zip(self.spatial, self.pb, self.pe, self.out, self.strides, self.kernel,
                                         self.dil):
            lo, hi = (-b, s + e) if include else (0, s)
            pos = (np.arange(o)[:, None] * st - b) + np.arange(k)[None, :] * dl
            counts.append(((pos >= lo) & (pos < hi)).sum(axis=1))
        count = counts[0]
        for cnt in counts[1:]:
            count = np.multiply.outer(count, cnt)
        count = np.asarray(count, np.float64)
        inv = np.where(count > 0, 1.0 / np.maximum(count, 1), 0.0).astype(self.dtype)
        self.inv = inv.reshape(-1)[0] if np.all(inv == inv.reshape(-1)[0]) else inv

    def run(self, xs, ys, ws):
        v = self.views(ws) if self.scratch.items else {}
        xp = self.padded(xs[0], v, 0)
        y = ys[0]
        views = self.position_views(xp)
        if len(views) == 1:
            np.multiply(views[0], self.inv, out=y)
            return
        np.add(views[0], views[1], out=y)
        for xv in views[2:]:
            np.add(y, xv, out=y)
        np.multiply(y, self.inv, out=y)


class _GlobalPool(SpatialKernel):
    reduce = None

    def prepare(self):
        xm = self.spatial_meta(0, "X")
        shape = tuple(xm.shape)
        self.n, self.c = shape[:2]
        self.plane = math.prod(shape[2:])
        self.scratch = Scratch()
        self.out_metas = [Meta(xm.dtype, shape[:2] + (1,) * (len(shape) - 2))]
        self.check_dtype(xm.dtype)

    def check_dtype(self, dt):
        if dt.kind != "f":
            raise self.fail(f"input type {dt} is not supported")

    def run(self, xs, ys, ws):
        x = xs[0].reshape(self.n, self.c, self.plane)
        type(self).reduce(x, axis=2, out=ys[0].reshape(self.n, self.c))


@register("GlobalAveragePool", since=1)
class GlobalAveragePool(_GlobalPool):
    reduce = staticmethod(np.mean)


@register("GlobalMaxPool", since=1)
class GlobalMaxPool(_GlobalPool):
    reduce = staticmethod(np.max)

    def check_dtype(self, dt):
        if dt.kind not in "fiu":
            raise self.fail(f"input type {dt} is not supported")
