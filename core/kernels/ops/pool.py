"""MaxPool (with the optional Indices output), AveragePool, GlobalAveragePool, GlobalMaxPool (NC + 1-3-D).

Output sizes are onnxruntime's (windows.pool_output_size): a window may be larger than the padded
input, and pools the part of the input it covers; a window that covers none (dilated over a small
input) gives what onnxruntime gives: MaxPool the dtype's lowest value (float16: -inf) and the index
of coordinates -1 (-1 on a 1-D plane), AveragePool and LpPool 0.

The windowed pools reduce one spatial axis at a time (max and sum are separable over a box): per
kernel tap along the axis, one ufunc with `out=` over the strided views of all outputs whose tap lies
inside the input. MaxPool's Indices output needs the whole window at once: that path pads once into
the workspace (with -inf) and updates per kernel position.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.ir import Meta
from ..planned import Scratch
from .windows import (SpatialKernel, empty_windows, kernel_position_view, padded_extent, pool_window, spatial_slices,
                      window_coverage, zero_borders)
from ..native import CallCache, run_for_threads
from ..registry import register



class _WindowPool(SpatialKernel):
    """Shared setup. Two ways to reduce the windows:
    - separable (the default): max and sum over a box are separable, so the pool runs one spatial
      axis at a time: per kernel tap along that axis, one ufunc over the strided view of the outputs
      whose tap falls inside the input (no padded copy: taps in the padding are simply skipped),
      through at most two intermediate tensors in the workspace;
    - per position (MaxPool with Indices): pad once into the workspace, then one update per kernel
      position over the whole (N, C, *out) view.
    """

    reduce = None  # the ufunc combining taps
    separable = True

    def prepare(self):
        xm = self.spatial_meta(0, "X")
        shape = tuple(xm.shape)
        n, c = shape[:2]
        spatial = list(shape[2:])
        kernel, strides, dil, pb, pe, out = pool_window(self, spatial)
        self.n, self.c, self.spatial, self.kernel, self.strides, self.dil = n, c, spatial, kernel, strides, dil
        self.pb, self.pe, self.out = pb, pe, out
        self.taps, covered = window_coverage(kernel, strides, dil, pb, spatial, out)
        self.empty = empty_windows(covered)
        self.dtype = xm.dtype
        self.scratch = Scratch()
        self.out_metas = [Meta(xm.dtype, (n, c) + tuple(out))]
        self.prepare_pool()
        if not all(out):
            return  # an empty output: nothing to plan, nothing to run
        if self.separable:
            self._plan_separable()
        else:
            self._plan_positions()

    def prepare_pool(self):
        pass

    # -- native: 2-D float32 (csrc/max_pool.c) ------------------------------------------------------------
    def plan_native(self) -> bool:
        """Whether the native walk runs this pool (then set up: the separable plan stays, for an
        output that is not contiguous)."""
        nat = self.backend.lib
        if nat is None or self.dtype != np.float32 or len(self.spatial) != 2 or not all(self.out):
            return False
        self.window = dict(kernel=self.kernel, strides=self.strides, dilations=self.dil, pads=self.pb)
        if not nat.max_pool_fits((self.n, self.c, *self.spatial), (self.n, self.c, *self.out), **self.window):
            return False
        self.native, self.calls, self.uses_native = nat, CallCache(), True
        return True

    def run_native(self, x, y, inv_counts=None) -> None:
        if x.flags.c_contiguous:
            self.calls.get((x, y), lambda: self.native.max_pool_call(x, y, inv_counts, **self.window)).run()
        else:  # a copy, new each run: so is its call
            self.native.max_pool_call(np.ascontiguousarray(x), y, inv_counts, **self.window).run()

    # -- separable ---------------------------------------------------------------------------------------
    def _plan_separable(self):
        """Per spatial axis (outermost first, so the early passes read whole contiguous rows): the
        shape after it, and per kernel tap the output range it contributes to with the input slice."""
        self.axis_steps = []
        cur = [self.n, self.c] + list(self.spatial)
        for i in range(len(self.spatial)):
            s, k, dl, b, size, o = (self.strides[i], self.kernel[i], self.dil[i], self.pb[i], self.spatial[i],
                                    self.out[i])
            if k == 1 and s == 1 and b == 0 and o == size:
                continue  # identity along this axis
            taps = []
            for j in range(k):
                off = j * dl - b  # input coordinate of output 0 under tap j
                lo = max(0, -(off // s))
                hi = min(o, (size - 1 - off) // s + 1) if size - 1 - off >= 0 else 0
                if hi > lo:
                    x0 = lo * s + off
                    taps.append((lo, hi, slice(x0, x0 + (hi - lo - 1) * s + 1, s)))
            taps.sort(key=lambda t: t[0] - t[1])  # the widest range first: it initializes the output
            lo, hi = taps[0][:2] if taps else (0, 0)
            holes = [r for r in ((0, lo), (hi, o)) if r[1] > r[0]]  # (no tap at all: one hole, filled)
            cur[2 + i] = o
            self.axis_steps.append((2 + i, tuple(cur), taps, holes))
        sizes = [math.prod(shp) for _, shp, _, _ in self.axis_steps[:-1]]
        for j in range(min(2, len(sizes))):
            self.scratch.add(f"sep{j}", (max(sizes[j::2]),), self.dtype)

    def run_separable(self, x, y, v, init):
        src = x
        last = len(self.axis_steps) - 1
        if last < 0:
            np.copyto(y, x)
            return
        ufunc = type(self).reduce
        for j, (axis, shp, taps, holes) in enumerate(self.axis_steps):
            dst = y if j == last else v[f"sep{j % 2}"][:math.prod(shp)].reshape(shp)
            nd = dst.ndim
            (lo, hi, sl), rest = (taps[0], taps[1:]) if taps else ((0, 0, None), ())
            first = dst[spatial_slices(nd, axis, slice(lo, hi))]
            if rest and rest[0][:2] == (lo, hi):  # two taps over the same range: combine them at once
                ufunc(src[spatial_slices(nd, axis, sl)], src[spatial_slices(nd, axis, rest[0][2])], out=first)
                rest = rest[1:]
            elif taps:
                np.copyto(first, src[spatial_slices(nd, axis, sl)])
            for lo, hi in holes:
                dst[spatial_slices(nd, axis, slice(lo, hi))] = init
            for lo, hi, sl in rest:
                dv = dst[spatial_slices(nd, axis, slice(lo, hi))]
                ufunc(dv, src[spatial_slices(nd, axis, sl)], out=dv)
            src = dst

    # -- per kernel position -----------------------------------------------------------------------------
    def _plan_positions(self):
        padded = padded_extent(self.spatial, self.pb, self.out, self.strides, self.taps, self.dil)
        self.pe_eff = [p - s - b for p, s, b in zip(padded, self.spatial, self.pb)]
        self.needs_pad = any(self.pb) or any(self.pe_eff)
        if self.needs_pad:
            self.scratch.add("xp", (self.n, self.c) + tuple(padded), self.dtype)
        self.positions = list(itertools.product(*self.taps))

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
    reads_outputs = True  # an omitted Indices output is not computed
    reduce = np.maximum

    def prepare_pool(self):
        dt = self.dtype
        if dt.kind == "f":
            self.pad_value = dt.type(-np.inf)
            # a window without input: onnxruntime's lowest value (its float16 MaxPool gives -inf)
            self.empty_value = dt.type(-np.inf) if dt == np.float16 else np.finfo(dt).min
        elif dt.kind in "iu":
            self.pad_value = self.empty_value = np.iinfo(dt).min
        else:
            raise self.fail(f"input type {dt} is not supported")
        self.with_indices = self.num_outputs >= 2 and not (self.outputs and self.outputs[1] is None)
        self.separable = not self.with_indices
        # (the native pool gives -inf to a window without input)
        if not self.with_indices and self.empty is None and self.plan_native():
            return
        if not self.with_indices:
            return
        order = int(self.attr("storage_order", 0))
        if order not in (0, 1):
            raise self.fail(f"storage_order={order} must be 0 or 1")
        sp = self.spatial
        d = len(sp)
        # flat index of each spatial coordinate, row- (storage_order 0) or column-major (1)
        mult = [math.prod(sp[i + 1:]) for i in range(d)] if order == 0 else [math.prod(sp[:i]) for i in range(d)]
        self.empty_index = -sum(mult)  # a window without input: onnxruntime's index, of coordinates -1
        self.mult, self._pos_index = mult, None
        plane = math.prod(sp)
        self.base = (np.arange(self.n * self.c, dtype=np.int64) * plane).reshape((self.n, self.c) + (1,) * d)
        self.out_metas.append(Meta(np.dtype(np.int64), (self.n, self.c) + tuple(self.out)))
        self.scratch.add("mask", (self.n, self.c) + tuple(self.out), np.bool_)

    def position_indices(self) -> list[np.ndarray]:
        """Per kernel position, the flat input index each output reads there: an output plane of
        int64 per position, built at the first run (shape inference at compile time needs none)."""
        if self._pos_index is None:
            d = len(self.spatial)
            grids = np.meshgrid(*[np.arange(o) * s for o, s in zip(self.out, self.strides)], indexing="ij")
            index = []
            for pos in itertools.product(*self.taps):
                idx = np.zeros(tuple(self.out), np.int64)
                for i in range(d):
                    idx += (grids[i] + pos[i] * self.dil[i] - self.pb[i]) * self.mult[i]
                index.append(idx)
            self._pos_index = index
        return self._pos_index

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        return frozenset([0]) if self.uses_native and y_half else frozenset()  # X and Y float16 together

    def float16_outputs(self) -> bool:
        return self.uses_native

    def run(self, xs, ys, ws):
        v = self.views(ws) if self.scratch.items else {}
        y = ys[0]
        if y.size == 0:
            return
        if self.uses_native and y.flags.c_contiguous:
            self.run_native(xs[0], y)
            return
        if self.separable:
            self.run_separable(xs[0], y, v, self.empty_value)
            return
        ind, mask = ys[1], v["mask"]  # None: indices omitted (a kernel built without output metas)
        if not self.positions:  # no window reads the input
            y[...] = self.empty_value
            if ind is not None:
                np.add(self.base, self.empty_index, out=ind)
            return
        xp = self.padded(xs[0], v, self.pad_value)
        views = self.position_views(xp)
        pos_index = self.position_indices() if ind is not None else [None] * len(views)
        np.copyto(y, views[0])
        if ind is not None:
            np.copyto(ind, pos_index[0])
        for xv, idx in zip(views[1:], pos_index[1:]):
            np.greater(xv, y, out=mask)
            np.copyto(y, xv, where=mask)
            if ind is not None:
                np.copyto(ind, idx, where=mask)
        if self.empty is not None:  # windows without input: onnxruntime's values
            empty = np.broadcast_to(self.empty, y.shape)
            np.copyto(y, self.empty_value, where=empty)
            if ind is not None:
                np.copyto(ind, self.empty_index, where=empty)
        if ind is not None:
            np.add(ind, self.base, out=ind)


@register("AveragePool", since=1)
class AveragePool(_WindowPool):
    """The separable sum of the taps inside the input, times 1 / (the window's count): the whole
    window with count_include_pad (but not past the end padding: ceil_mode overhang), else the taps
    inside the input. 2-D float32 natively (MaxPool's walk, summing; a window's count is the
    product of its row's and its column's, so each output is scaled by two factors)."""

    reduce = np.add

    def prepare_pool(self):
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
        self.inv = inv.reshape(-1)[0] if inv.size and np.all(inv == inv.reshape(-1)[0]) else inv
        if self.plan_native():
            self.inv_counts = tuple(np.where(c > 0, 1.0 / np.maximum(c, 1), 0.0).astype(np.float32) for c in counts)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if y.size == 0:
            return
        if self.uses_native and y.flags.c_contiguous:
            self.run_native(x, y, self.inv_counts)
            return
        self.run_separable(x, y, self.views(ws) if self.scratch.items else {}, 0)
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

    def run(self, xs, ys, ws):
        x = xs[0].reshape(self.n, self.c, self.plane)
        type(self).reduce(x, axis=2, out=ys[0].reshape(self.n, self.c))


@register("GlobalAveragePool", since=1)
class GlobalAveragePool(_GlobalPool):
    """float32 natively: the planes' sums times 1/plane (csrc/gemv.c without its row x: the planes read
    once, in order, a block of VL planes summed across lanes at once), the task bound to the prepared
    call; float32 otherwise and float64 as one GEMV by a vector of 1/plane through BLAS (a
    squeeze-excite block's 672 planes of 14x14 in 10-15 us, where np.mean's per-row reductions take
    70); other dtypes np.mean. In a model the planes come cold from the conv before: MobileNetV2's last
    pool (1280 planes of 7x7) took 45-60 us through BLAS's gemv there (6 us warm), 20-35 natively as a
    GEMV; MobileNetV3's 7x7 pools as sums 6-7 us (onnxruntime's 5-6 on its blocked layout), 10-11
    before."""
    reduce = staticmethod(np.mean)

    def prepare(self):
        super().prepare()
        dt = self.inputs[0].dtype
        self.weights = np.full(self.plane, 1.0 / max(self.plane, 1), dt) if dt in (np.float32, np.float64) else None
        self.uses_native = self.backend.lib is not None and dt == np.float32 and self.plane > 0 and self.n * self.c > 0
        if self.uses_native:
            self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        return frozenset([0]) if self.uses_native and y_half else frozenset()  # the planes, a block at a time

    def float16_outputs(self) -> bool:
        return self.uses_native

    def run(self, xs, ys, ws):
        if self.weights is None or self.plane == 0:
            return super().run(xs, ys, ws)
        x, y = xs[0], ys[0]
        if self.uses_native and x.flags.c_contiguous and y.flags.c_contiguous:
            self.calls.get((x, y), lambda: self._gemv(x, y)).run()
            return
        np.matmul(x.reshape(self.n * self.c, self.plane), self.weights, out=y.reshape(self.n * self.c))

    def bound(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.uses_native and x.flags.c_contiguous and y.flags.c_contiguous:
            return run_for_threads(lambda: self._gemv(x, y))
        return super().bound(xs, ys, ws)

    def _gemv(self, x, y):
        return self.backend.lib.row_means_call(x.reshape(self.n * self.c, self.plane), y)


@register("GlobalMaxPool", since=1)
class GlobalMaxPool(_GlobalPool):
    reduce = staticmethod(np.max)
