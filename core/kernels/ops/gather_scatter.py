"""Index ops: GatherND, ScatterElements (and its ancestor Scatter), Compress, NonZero, Unique,
ReverseSequence.

Every op turns its indices into flat row numbers once (in prepare() when the indices are constants,
else per run, on index-sized arrays) and then moves the data with one np.take / fancy assignment /
ufunc.at into the planned output. Out-of-range indices are an error naming the node, never a silent
wrap.

NonZero, Unique, and Compress with a computed condition have outputs whose shape depends on input
values: their compute() is exact, their infer() works only when those inputs are constants.
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..registry import register
from ..values import text

DYNAMIC = "output shape depends on the input values; needs dynamic shapes"


class IndexKernel(Kernel):
    """compute() runs run() on fresh outputs when infer() can say their shapes; helpers for metas."""

    def meta(self, i: int, what: str) -> Meta:
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None:
            raise self.fail(f"input {i} ({what}) is missing")
        return m

    def known(self, i: int):
        return self.consts[i] if i < len(self.consts) else None

    def axis(self, axis: int, rank: int) -> int:
        if not -rank <= axis < rank:
            raise self.fail(f"axis={axis} is out of range for rank {rank}")
        return axis % rank

    def infer(self):
        return list(self.out_metas)

    def compute(self, *xs):
        metas = [None if x is None else Meta(np.asarray(x).dtype, np.shape(x)) for x in xs]
        consts = [np.asarray(x) if x is not None else None for x in xs]
        k = type(self)(self.attrs, metas, consts, opset=self.opset, name=self.name, num_outputs=self.num_outputs)
        ys = [np.empty(m.shape, m.dtype) for m in k.out_metas]
        k.run([None if x is None else np.asarray(x) for x in xs], ys, None)
        return ys


def check_range(k: Kernel, idx: np.ndarray, dims, what: str = "indices") -> None:
    """Fail unless -dim <= idx < dim (dims broadcast against idx)."""
    if idx.size and (np.any(idx < -np.asarray(dims)) or np.any(idx >= np.asarray(dims))):
        lo, hi = int(idx.min()), int(idx.max())
        raise k.fail(f"{what} out of range: values in [{lo}, {hi}] for dims {list(np.ravel(dims))}")


# -- GatherND ----------------------------------------------------------------------------------------

@register("GatherND", since=11)
class GatherND(IndexKernel):
    """out[b, q] = data[b, idx[b, q, 0], ..., idx[b, q, k-1], ...]: one np.take over rows of
    data viewed as [B * M, R] (B: batch dims, M: the addressed dims, R: the rest)."""

    def prepare(self):
        dm, im = self.meta(0, "data"), self.meta(1, "indices")
        ds, iz = tuple(dm.shape), tuple(im.shape)
        b = int(self.attr("batch_dims", 0)) if self.opset >= 12 else 0
        if len(ds) < 1 or len(iz) < 1:
            raise self.fail(f"data {ds} and indices {iz} must have rank >= 1")
        if not 0 <= b < min(len(ds), len(iz)):
            raise self.fail(f"batch_dims={b} must be in [0, {min(len(ds), len(iz)) - 1}] for data {ds}, indices {iz}")
        if ds[:b] != iz[:b]:
            raise self.fail(f"the batch dims of data {ds} and indices {iz} differ")
        k = iz[-1]
        if k > len(ds) - b:
            raise self.fail(f"indices address {k} axes, data {ds} has {len(ds) - b} after {b} batch dims")
        self.dims = np.array(ds[b:b + k], np.int64)
        self.strides = np.array([math.prod(ds[b + j + 1:b + k]) for j in range(k)], np.int64)
        self.B, self.M, self.R = math.prod(ds[:b]), math.prod(ds[b:b + k]), math.prod(ds[b + k:])
        self.Q = math.prod(iz[b:-1])
        self.k = k
        self.out_metas = [Meta(dm.dtype, iz[:-1] + ds[b + k:])]
        c = self.known(1)
        self.rows = None if c is None else self.flat_rows(c)

    def flat_rows(self, idx) -> np.ndarray:
        idx = np.asarray(idx).reshape(self.B, self.Q, self.k)
        check_range(self, idx, self.dims)
        idx = np.where(idx < 0, idx + self.dims, idx)
        rows = idx @ self.strides if self.k else np.zeros((self.B, self.Q), np.int64)
        rows += (np.arange(self.B, dtype=np.int64) * self.M).reshape(self.B, 1)
        return rows.reshape(-1).astype(np.intp)

    def run(self, xs, ys, ws):
        rows = self.rows if self.rows is not None else self.flat_rows(xs[1])
        np.take(xs[0].reshape(self.B * self.M, self.R), rows, axis=0, out=ys[0].reshape(self.B * self.Q, self.R),
                mode="clip")


# -- ScatterElements, Scatter ------------------------------------------------------------------------

@register("ScatterElements", since=11)
class ScatterElements(IndexKernel):
    """out = data; out[..., idx[i, j, ...], ...] (op)= updates[i, j, ...] along `axis`, through flat
    positions in out.reshape(-1) (reduction: none / add, mul from opset 16 / max, min from 18)."""
    UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    legacy = False

    def prepare(self):
        dm, im, um = self.meta(0, "data"), self.meta(1, "indices"), self.meta(2, "updates")
        ds, iz = tuple(dm.shape), tuple(im.shape)
        self.reduction = "none" if self.legacy else text(self.attr("reduction", "none"))
        allowed = ["none"] + (["add", "mul"] if self.opset >= 16 else []) + (["max", "min"] if self.opset >= 18 else [])
        if self.reduction not in allowed:
            raise self.fail(f"reduction '{self.reduction}' is not supported at opset {self.opset} "
                            f"(one of {', '.join(allowed)})")
        if len(iz) != len(ds) or tuple(um.shape) != iz:
            raise self.fail(f"indices {iz} and updates {tuple(um.shape)} must have one shape, of data's rank {len(ds)}")
        if len(ds) == 0:
            raise self.fail("data is a scalar; rank >= 1 expected")
        self.ax = self.axis(int(self.attr("axis", 0)), len(ds))
        if any(i > d for a, (i, d) in enumerate(zip(iz, ds)) if a != self.ax):
            raise self.fail(f"indices shape {iz} exceeds data shape {ds} off axis {self.ax}")
        self.shape = ds
        strides = [math.prod(ds[a + 1:]) for a in range(len(ds))]
        # the flat position of every index element, without its axis coordinate
        base = np.zeros(iz, np.int64)
        for a in range(len(ds)):  # one broadcast add per axis
            if a != self.ax:
                base += (np.arange(iz[a], dtype=np.int64) * strides[a]).reshape((1,) * a + (-1,) + (1,) * (len(ds) - a - 1))
        self.base, self.step = base, strides[self.ax]
        self.out_metas = [Meta(dm.dtype, ds)]
        c = self.known(1)
        self.flat = None if c is None else self.positions(c)

    def positions(self, idx) -> np.ndarray:
        idx = np.asarray(idx)
        dim = self.shape[self.ax]
        check_range(self, idx, dim)
        flat = np.where(idx < 0, idx + dim, idx).astype(np.int64)
        flat *= self.step
        flat += self.base
        return flat.reshape(-1).astype(np.intp)

    def run(self, xs, ys, ws):
        flat = self.flat if self.flat is not None else self.positions(xs[1])
        y = ys[0]
        np.copyto(y, xs[0])
        y1, u = y.reshape(-1), xs[2].reshape(-1)
        if self.reduction == "none":
            y1[flat] = u
        else:
            self.UFUNCS[self.reduction].at(y1, flat, u)


@register("Scatter", since=9)
class Scatter(ScatterElements):
    """Scatter-9/10: ScatterElements without reduction (deprecated at opset 11)."""
    legacy = True


# -- Compress ------------------------------------------------------------------------------------------

@register("Compress", since=9)
class Compress(IndexKernel):
    """The slices along `axis` (or the elements of the flattened input) where condition is true; the
    output size is the condition's number of true values, so it must be a constant for infer()."""

    def prepare(self):
        xm, cm = self.meta(0, "input"), self.meta(1, "condition")
        if len(cm.shape) != 1:
            raise self.fail(f"condition has shape {tuple(cm.shape)}, 1-D expected")
        shape = tuple(xm.shape)
        a = self.attr("axis")
        self.ax = None if a is None else self.axis(int(a), len(shape))
        dim = math.prod(shape) if self.ax is None else shape[self.ax]
        if cm.shape[0] > dim:
            raise self.fail(f"condition has {cm.shape[0]} values, more than the {dim} "
                            f"{'elements' if self.ax is None else f'slices along axis {self.ax}'}")
        c = self.known(1)
        self.cond = None if c is None else np.asarray(c).astype(bool)
        if self.cond is None:
            self.out_metas = None
            return
        n = int(self.cond.sum())
        out = (n,) if self.ax is None else shape[:self.ax] + (n,) + shape[self.ax + 1:]
        self.out_metas = [Meta(xm.dtype, out)]
        self.sel = np.flatnonzero(self.cond).astype(np.intp)

    def infer(self):
        if self.out_metas is None:
            raise self.value_dependent(f"the condition is computed: {DYNAMIC}")
        return list(self.out_metas)

    def upper_bound(self):  # at most every slice the condition covers
        xm, n = self.inputs[0], self.inputs[1].shape[0]
        out = (n,) if self.ax is None else tuple(xm.shape[:self.ax]) + (n,) + tuple(xm.shape[self.ax + 1:])
        return [Meta(xm.dtype, out)]

    def run(self, xs, ys, ws):
        sel = self.sel if self.cond is not None else np.flatnonzero(np.asarray(xs[1]).astype(bool))
        x = xs[0].reshape(-1) if self.ax is None else xs[0]
        np.take(x, sel, axis=0 if self.ax is None else self.ax, out=ys[0])


# -- NonZero, Unique ------------------------------------------------------------------------------------

@register("NonZero", since=9)
class NonZero(IndexKernel):
    """[rank, nnz] int64 coordinates of the non-zero elements, in row-major order (a scalar counts as
    a 1-element vector: [1, nnz], as onnxruntime and numpy do)."""

    def prepare(self):
        xm = self.meta(0, "X")
        self.rank = max(1, len(xm.shape))
        c = self.known(0)
        self.out_metas = None if c is None else [Meta(np.dtype(np.int64), (self.rank, int(np.count_nonzero(c))))]

    def infer(self):
        if self.out_metas is None:
            raise self.value_dependent(f"the input is computed: {DYNAMIC}")
        return list(self.out_metas)

    def upper_bound(self):  # every element non-zero
        return [Meta(np.dtype(np.int64), (self.rank, math.prod(self.inputs[0].shape)))]

    def run(self, xs, ys, ws):
        x = np.asarray(xs[0])
        y = ys[0]
        flat = np.flatnonzero(x)
        if x.ndim <= 1:
            np.copyto(y[0], flat)
            return
        for a, coord in enumerate(np.unravel_index(flat, x.shape)):  # one row per axis
            np.copyto(y[a], coord)


@register("Unique", since=11)
class Unique(IndexKernel):
    """Y (unique values or slices along `axis`; sorted, or in order of first occurrence with sorted=0),
    indices (first occurrences), inverse_indices, counts — as np.unique."""

    def prepare(self):
        xm = self.meta(0, "X")
        a = self.attr("axis")
        self.ax = None if a is None else self.axis(int(a), len(xm.shape))
        self.sorted = int(self.attr("sorted", 1))
        self.shape, self.dtype = tuple(xm.shape), xm.dtype
        c = self.known(0)
        self.out_metas = None if c is None else [Meta(np.asarray(r).dtype, np.shape(r)) for r in self.unique(np.asarray(c))]

    def unique(self, x) -> list[np.ndarray]:
        src = x.reshape(-1) if self.ax is None else x
        y, idx, inv, cnt = np.unique(src, return_index=True, return_inverse=True, return_counts=True,
                                     axis=None if self.ax is None else self.ax)
        inv = inv.reshape(-1)
        if not self.sorted:
            order = np.argsort(idx, kind="stable")  # by first occurrence
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y = np.take(y, order, axis=0 if self.ax is None else self.ax)
            idx, cnt, inv = idx[order], cnt[order], rank[inv]
        out = [y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)]
        return out[:max(1, self.num_outputs)]

    def infer(self):
        if self.out_metas is None:
            raise self.value_dependent(f"the input is computed: {DYNAMIC}")
        return list(self.out_metas)

    def upper_bound(self):  # every element (or slice) distinct
        n = math.prod(self.shape) if self.ax is None else self.shape[self.ax]
        y = (n,) if self.ax is None else self.shape
        i64 = np.dtype(np.int64)
        inverse = (math.prod(self.shape) if self.ax is None else self.shape[self.ax],)
        out = [Meta(self.dtype, y), Meta(i64, (n,)), Meta(i64, inverse), Meta(i64, (n,))]
        return out[:max(1, self.num_outputs)]

    def run(self, xs, ys, ws):
        for y, r in zip(ys, self.unique(np.asarray(xs[0]))):
            if y is not None:
                np.copyto(y, r)


# -- ReverseSequence --------------------------------------------------------------------------------------

@register("ReverseSequence", since=10)
class ReverseSequence(IndexKernel):
    """Reverse the first sequence_lens[b] steps of every batch item: one np.take of rows of the input
    viewed as [T * B, rest] (or [B * T, rest])."""

    def prepare(self):
        xm, lm = self.meta(0, "input"), self.meta(1, "sequence_lens")
        shape = tuple(xm.shape)
        if len(shape) < 2:
            raise self.fail(f"input has shape {shape}, rank >= 2 expected")
        t_ax, b_ax = int(self.attr("time_axis", 0)), int(self.attr("batch_axis", 1))
        if sorted((t_ax, b_ax)) != [0, 1]:
            raise self.fail(f"time_axis={t_ax}, batch_axis={b_ax}: one must be 0 and the other 1")
        self.time_first = t_ax == 0
        self.T, self.B = shape[t_ax], shape[b_ax]
        if tuple(lm.shape) != (self.B,):
            raise self.fail(f"sequence_lens has shape {tuple(lm.shape)}, ({self.B},) expected")
        self.R = math.prod(shape[2:])
        self.out_metas = [Meta(xm.dtype, shape)]
        c = self.known(1)
        self.rows = None if c is None else self.source_rows(c)

    def source_rows(self, lens) -> np.ndarray:
        lens = np.asarray(lens).astype(np.int64)
        if lens.size and (lens.min() < 0 or lens.max() > self.T):
            raise self.fail(f"sequence_lens values in [{int(lens.min())}, {int(lens.max())}], "
                            f"not within [0, {self.T}]")
        t = np.arange(self.T, dtype=np.int64).reshape(-1, 1)
        src = np.where(t < lens, lens - 1 - t, t)  # [T, B]: the source step of (t, b)
        b = np.arange(self.B, dtype=np.int64)
        rows = src * self.B + b if self.time_first else (b * self.T).reshape(-1, 1) + src.T
        return rows.reshape(-1).astype(np.intp)

    def run(self, xs, ys, ws):
        rows = self.rows if self.rows is not None else self.source_rows(xs[1])
        n = self.T * self.B
        np.take(xs[0].reshape(n, self.R), rows, axis=0, out=ys[0].reshape(n, self.R), mode="clip")
