"""Data movement ops: Transpose, Concat, Split, Slice, Gather, GatherElements, Expand, Tile, Pad,
Trilu, ScatterND, OneHot, CumSum, TopK, DepthToSpace, SpaceToDepth.

`compute` reads every input from its arguments (constant folding passes concrete arrays). When the
inputs that define the output (slice bounds, pads, split sizes, constant indices) are constants,
`prepare` precomputes slices / index arrays so that `run` only copies into the planned outputs.
With ge's native kernels and static shapes, Concat and Gather are block copies (csrc/copy.c): a
decoding step's key/value cache and embedding row, where numpy's per-call cost was most of the time.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...model.ir import Meta
from ..native import CallCache, run_for_threads
from ..base import copyto
from ..registry import register
from .shape_kernel import ShapeKernel
from ..values import ints, moves_only_ones, text, view_as

#: np.concatenate without its __array_function__ dispatch (a Python dispatcher call each time: a Loop
#: body whose state grows concatenates every iteration)
_concatenate = getattr(np.concatenate, "_implementation", np.concatenate)


def _at(axis: int, index, rank: int) -> tuple:
    """An index tuple selecting `index` along `axis` and everything along the other axes."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (rank - axis - 1)


def _scalar(value):
    a = np.asarray(value)
    return a.reshape(-1)[0] if a.size else None


class StaticInputKernel(ShapeKernel):
    """Helpers to know, in prepare(), whether input 0's shape and the needed constants are known."""

    def in_shape(self, i: int = 0):
        return None if i >= len(self.inputs) or self.inputs[i] is None else tuple(self.inputs[i].shape)

    def consts_ready(self, *indices) -> bool:
        """True when every listed input is absent or a known constant."""
        return all(not self.has_input(i) or self.const_or_none(i) is not None for i in indices)


# -- Transpose, Concat, Split ------------------------------------------------------------------------

@register("Transpose")
class Transpose(StaticInputKernel):
    shape_agnostic = True  # (run transposes the arrays it is given)

    def agnostic_output_shape(self, shapes):
        return tuple(shapes[0][p] for p in self.perm_for(len(shapes[0])))

    def prepare(self):
        perm = self.attr("perm")
        self.perm_attr = None if perm is None else ints(perm)
        self.perm = None if self.in_shape() is None else self.perm_for(len(self.in_shape()))
        if self.perm is not None:
            self.alias = moves_only_ones(self.in_shape(), self.perm)

    def perm_for(self, rank: int) -> list[int]:
        perm = list(range(rank))[::-1] if self.perm_attr is None else self.perm_attr
        if sorted(perm) != list(range(rank)):
            raise self.fail(f"perm {perm} is not a permutation of the {rank} axes")
        return perm

    def compute(self, x):
        return [np.transpose(x, self.perm_for(x.ndim))]

    def run(self, xs, ys, ws):
        np.copyto(ys[0], xs[0].transpose(self.perm or self.perm_for(xs[0].ndim)))


def _static(metas) -> bool:
    return all(m is not None and m.shape is not None and all(isinstance(d, int) and d >= 0 for d in m.shape)
               for m in metas)


def _contiguous(*arrays) -> bool:
    return all(a.flags.c_contiguous for a in arrays)


@register("Concat")
class Concat(StaticInputKernel):
    shape_agnostic = True  # (run's native call takes its outer count from the arrays: a decoder's past and new keys)

    def agnostic_output_shape(self, shapes):
        axis = self.axis_for([tuple(s) for s in shapes])
        out = list(shapes[0])
        out[axis] = sum(s[axis] for s in shapes)
        return tuple(out)

    def prepare(self):
        if self.attr("axis") is None:
            raise self.fail("attribute 'axis' is required")
        if not self.inputs:
            raise self.fail("needs at least one input")
        self.axis, self.nat, self.bytes_alike = None, None, False
        if _static(self.inputs):  # checked once; natively, blocks of bytes copied in a loop
            self.axis = self.axis_for([tuple(m.shape) for m in self.inputs])
            self.bytes_alike = len({np.dtype(m.dtype) for m in self.inputs}) == 1 and \
                not np.dtype(self.inputs[0].dtype).hasobject
            if self.bytes_alike:
                self.nat = self.backend.lib
                self.calls = CallCache()

    def axis_for(self, shapes) -> int:
        rank = len(shapes[0])
        if rank == 0:
            raise self.fail("cannot concatenate scalars")
        a = self.norm_axis(self.attr("axis"), rank)
        for s in shapes:
            if len(s) != rank or s[:a] + s[a + 1:] != shapes[0][:a] + shapes[0][a + 1:]:
                raise self.fail(f"input shapes {list(shapes)} do not match outside axis {a}")
        return a

    def infer(self):
        """With static inputs of one dtype, the output's meta by arithmetic: concatenating zeros of
        the inputs' shapes (the default) wrote a detector's feature maps at compile time, twice."""
        if not self.bytes_alike:
            return super().infer()
        shapes = [tuple(m.shape) for m in self.inputs]
        out = list(shapes[0])
        out[self.axis] = sum(s[self.axis] for s in shapes)
        return [Meta(np.dtype(self.inputs[0].dtype), tuple(out))]

    def compute(self, *xs):
        return [np.concatenate(xs, axis=self.axis_for([x.shape for x in xs]))]

    def bound(self, xs, ys, ws):
        if self.nat is not None and _contiguous(*xs, ys[0]):
            outer = math.prod(xs[0].shape[:self.axis])
            return run_for_threads(lambda: self.nat.concat_call(list(xs), ys[0], outer))
        return super().bound(xs, ys, ws)

    #: below this many output bytes, run() is numpy's concatenate: finding or building the native
    #: call for buffers given anew (~4 us, a dynamic node's) costs more than the copy saves
    NUMPY_BYTES = 1 << 20

    def run(self, xs, ys, ws):
        if self.nat is not None and ys[0].nbytes >= self.NUMPY_BYTES and _contiguous(*xs, ys[0]):
            outer = math.prod(xs[0].shape[:self.axis])
            call = self.calls.get_repeated((*xs, ys[0]), lambda: self.nat.concat_call(list(xs), ys[0], outer))
            if call is not None:
                call.run()
                return
        _concatenate(xs, axis=self.axis if self.axis is not None else self.axis_for([x.shape for x in xs]), out=ys[0])


@register("Split", since=2)
class Split(StaticInputKernel):
    """Split-2/11: `split` as an attribute; without it, equal parts, one per node output."""
    split_from_input = False

    def prepare(self):
        self.axis = int(self.attr("axis", 0))
        self.parts = None
        if self.in_shape() is not None and (not self.split_from_input or self.consts_ready(1)):
            self.parts = self.slices(self.in_shape(), self.const_or_none(1) if self.split_from_input else None)
            shape, a = self.in_shape(), self.norm_axis(self.axis, len(self.in_shape()))
            if math.prod(shape[:a]) == 1:  # each part is a run of input 0's bytes: views (a decoding step's q, k, v)
                row = math.prod(shape[a + 1:]) * np.dtype(self.inputs[0].dtype).itemsize
                self.part_offsets = [sl[a].start * row for sl in self.parts]

    def sizes(self, dim: int, split) -> list[int]:
        if not self.split_from_input:
            split = self.attr("split")
        n_out = self.num_outputs
        if split is not None:
            split = ints(split)
            if len(split) != n_out:
                raise self.fail(f"split {split} has {len(split)} parts but the node has {n_out} outputs")
            if any(s < 0 for s in split) or sum(split) != dim:
                raise self.fail(f"split {split} does not add up to the dim {dim}")
            return split
        n = self.attr("num_outputs")
        if n is not None and self.opset >= 18:
            n = int(n)
            if n < 1 or n != n_out:
                raise self.fail(f"num_outputs={n} but the node has {n_out} outputs")
            chunk = -(-dim // n)
            last = dim - chunk * (n - 1)
            if last < 0:
                raise self.fail(f"cannot split a dim of {dim} into {n} chunks of {chunk}")
            return [chunk] * (n - 1) + [last]
        if self.opset >= 18:
            raise self.fail("needs the 'split' input or the 'num_outputs' attribute")
        if dim % n_out:
            raise self.fail(f"cannot split a dim of {dim} evenly into {n_out} outputs")
        return [dim // n_out] * n_out

    def slices(self, shape, split) -> list[tuple]:
        a = self.norm_axis(self.axis, len(shape))
        out, start = [], 0
        for s in self.sizes(shape[a], split):
            out.append(_at(a, slice(start, start + s), len(shape)))
            start += s
        return out

    def infer(self):
        """With static parts, each part's meta from its slices (no input of zeros to slice)."""
        if self.parts is None:
            return super().infer()
        x = self.inputs[0]
        return [Meta(np.dtype(x.dtype), tuple(len(range(*s.indices(d))) for s, d in zip(part, x.shape)))
                for part in self.parts]

    def compute(self, x, split=None):
        return [x[sl] for sl in self.slices(x.shape, split)]

    def run(self, xs, ys, ws):
        parts = self.parts or self.slices(xs[0].shape, xs[1] if len(xs) > 1 else None)
        for y, sl in zip(ys, parts):
            if y is not None:
                np.copyto(y, xs[0][sl])

    def bound(self, xs, ys, ws):
        """With static parts, the views of the input are made once per binding, not per call."""
        if self.parts is None:
            return super().bound(xs, ys, ws)
        pairs = [(y, xs[0][sl]) for y, sl in zip(ys, self.parts) if y is not None]

        def run():
            for y, part in pairs:
                np.copyto(y, part)
        return run


@register("Split", since=13)
class Split13(Split):
    """Split-13: `split` as an optional input; Split-18 adds the `num_outputs` attribute (uneven
    last chunk)."""
    split_from_input = True
    shape_inputs = ((1, "split"),)

    def upper_bound(self):  # no part is larger than the input
        return [self.inputs[0]] * self.num_outputs


# -- Slice ------------------------------------------------------------------------------------------------

class SliceBase(StaticInputKernel):
    def index(self, shape, starts, ends, axes, steps) -> tuple:
        rank = len(shape)
        starts, ends = ints(starts), ints(ends)
        n = len(starts)
        axes = list(range(n)) if axes is None else self.norm_axes(ints(axes), rank)
        steps = [1] * n if steps is None else ints(steps)
        if not len(ends) == len(axes) == len(steps) == n:
            raise self.fail(f"starts/ends/axes/steps lengths differ: {n}, {len(ends)}, {len(axes)}, {len(steps)}")
        idx = [slice(None)] * rank
        for a, s, e, st in zip(axes, starts, ends, steps):
            d = shape[a]
            if st == 0:
                raise self.fail(f"step 0 on axis {a}")
            s = s + d if s < 0 else s
            e = e + d if e < 0 else e
            if st > 0:
                s, e = min(max(s, 0), d), min(max(e, 0), d)
                idx[a] = slice(s, e, st)
            elif d == 0:
                idx[a] = slice(0, 0, 1)
            else:
                s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
                idx[a] = slice(s, None if e < 0 else e, st)
        return tuple(idx)

    def run(self, xs, ys, ws):
        idx = self.idx if self.idx is not None and xs[0].shape == self.in_shape() else \
            self.index(xs[0].shape, *self.bounds(xs))
        copyto(ys[0], xs[0][idx])

    def bound(self, xs, ys, ws):
        """With static bounds, the view of the input is made once per binding, not per call."""
        if self.idx is None or xs[0].shape != self.in_shape():
            return super().bound(xs, ys, ws)
        return partial(copyto, ys[0], xs[0][self.idx])


@register("Slice", since=1)
class Slice1(SliceBase):
    """Slice-1: starts/ends/axes as attributes."""

    def bounds(self, xs):
        if self.attr("starts") is None or self.attr("ends") is None:
            raise self.fail("attributes 'starts' and 'ends' are required")
        return self.attr("starts"), self.attr("ends"), self.attr("axes"), None

    def prepare(self):
        self.idx = None if self.in_shape() is None else self.index(self.in_shape(), *self.bounds(()))

    def compute(self, x):
        return [x[self.index(x.shape, *self.bounds(()))]]


@register("Slice", since=10)
class Slice(SliceBase):
    """Slice-10/11/13: starts, ends, axes (optional), steps (optional) as inputs."""
    shape_inputs = ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps"))
    shape_agnostic = True  # (run slices by the arrays it is given: a decoder's causal mask, new bounds every call)

    def agnostic_output_shape(self, shapes, values=None):
        values = values or {}
        bounds = self.bounds([None] + [values.get(i, c) for i, c in enumerate(self.consts[1:5], start=1)])
        if bounds[0] is None or bounds[1] is None:
            raise ValueError("starts and ends are not known")
        return tuple(len(range(*s.indices(d))) for s, d in zip(self.index(shapes[0], *bounds), shapes[0]))

    def bounds(self, xs):
        xs = list(xs) + [None] * (5 - len(xs))
        return xs[1], xs[2], xs[3], xs[4]

    def prepare(self):
        self.idx = None
        if self.in_shape() is not None and self.consts_ready(1, 2, 3, 4) and self.has_input(1) and self.has_input(2):
            self.idx = self.index(self.in_shape(), *self.bounds([None] + self.consts[1:5]))

    def compute(self, x, starts, ends, axes=None, steps=None):
        return [x[self.index(x.shape, starts, ends, axes, steps)]]

    def upper_bound(self):  # a slice is never larger than its input
        return [self.inputs[0]]


# -- Gather, GatherElements ----------------------------------------------------------------------------

@register("Gather")
class Gather(StaticInputKernel):
    def prepare(self):
        self.axis_attr = int(self.attr("axis", 0))
        self.axis = self.idx = self.nat = None
        if self.in_shape() is not None:
            self.axis = self.norm_axis(self.axis_attr, len(self.in_shape()))
            if self.const_or_none(1) is not None:
                self.idx = self.normalized(self.consts[1], self.in_shape()[self.axis])
        xm, im = self.inputs[0], self.inputs[1] if len(self.inputs) > 1 else None
        if self.axis is not None and _static([xm]) and not np.dtype(xm.dtype).hasobject and \
                (self.idx is not None or (im is not None and im.dtype == np.int64)):
            # natively: blocks of the axes after `axis` copied by index, the range checked first
            self.nat = self.backend.lib
            self.idx64 = None if self.idx is None else np.ascontiguousarray(self.idx, np.int64)
            shape = xm.shape
            self.blocks = dict(outer=math.prod(shape[:self.axis]), dim=shape[self.axis],
                               block=np.dtype(xm.dtype).itemsize * math.prod(shape[self.axis + 1:]))
            self.calls = CallCache()

    def normalized(self, idx, dim: int) -> np.ndarray:
        idx = np.asarray(idx)
        if idx.dtype.kind not in "iu":
            raise self.fail(f"indices must be integers, got {idx.dtype}")
        if idx.size and (idx.min() < -dim or idx.max() >= dim):
            raise self.fail(f"indices out of range [{-dim}, {dim - 1}]")
        return np.where(idx < 0, idx + dim, idx).astype(np.intp)

    def infer(self):
        """From shapes alone: the default infer gathers from the data, and an embedding table whose
        bytes sit unaligned in the mapped ONNX file is copied whole by every take."""
        x, idx = self.inputs[0], self.inputs[1]
        if x is None or idx is None:
            return super().infer()
        a = self.norm_axis(self.axis_attr, len(x.shape))
        indices = self.const_or_none(1)
        self.normalized(np.zeros(idx.shape, idx.dtype) if indices is None else indices, x.shape[a])
        return [Meta(np.dtype(x.dtype), tuple(x.shape[:a]) + tuple(idx.shape) + tuple(x.shape[a + 1:]))]

    def compute(self, x, indices):
        a = self.norm_axis(self.axis_attr, x.ndim)
        return [np.take(x, self.normalized(indices, x.shape[a]), axis=a)]

    def _native_index(self, xs, ys):
        """The int64 indices the native gather reads for these arrays, else None."""
        if self.nat is None or not _contiguous(xs[0], ys[0]):
            return None
        idx = self.idx64 if self.idx64 is not None else xs[1]
        return idx if idx.dtype == np.int64 and idx.flags.c_contiguous else None

    def _gather(self, call) -> None:
        if call.run_checked():
            dim = self.blocks["dim"]
            raise self.fail(f"indices out of range [{-dim}, {dim - 1}]")

    def bound(self, xs, ys, ws):
        idx = self._native_index(xs, ys)
        if idx is None:
            return super().bound(xs, ys, ws)
        call = self.nat.gather_call(xs[0], ys[0], idx, **self.blocks)
        return partial(self._gather, call)

    def run(self, xs, ys, ws):
        x = xs[0]
        idx = self._native_index(xs, ys)
        if idx is not None:
            self._gather(self.calls.get((x, ys[0], idx), lambda: self.nat.gather_call(x, ys[0], idx, **self.blocks)))
            return
        a = self.axis if self.axis is not None else self.norm_axis(self.axis_attr, x.ndim)
        if self.idx is not None:
            np.take(x, self.idx, axis=a, out=ys[0], mode="clip")
            return
        try:  # "raise" checks the range and maps -1 to dim-1 in one pass (min() and max() cost two more)
            np.take(x, xs[1], axis=a, out=ys[0], mode="raise")
        except IndexError:
            dim = x.shape[a]
            raise self.fail(f"indices out of range [{-dim}, {dim - 1}]") from None


@register("GatherElements", since=11)
class GatherElements(StaticInputKernel):
    def prepare(self):
        self.axis_attr = int(self.attr("axis", 0))
        self.flat = None
        if self.in_shape() is not None and self.const_or_none(1) is not None:
            self.flat = self.flat_index(self.in_shape(), self.consts[1])

    def flat_index(self, shape, idx) -> np.ndarray:
        """Indices into data.reshape(-1): the axis coordinate from `idx`, the others from position."""
        idx = np.asarray(idx)
        rank = len(shape)
        if idx.ndim != rank:
            raise self.fail(f"indices rank {idx.ndim} differs from data rank {rank}")
        a = self.norm_axis(self.axis_attr, rank)
        if any(i > d for k, (i, d) in enumerate(zip(idx.shape, shape)) if k != a):
            raise self.fail(f"indices shape {idx.shape} exceeds data shape {tuple(shape)} off axis {a}")
        dim = shape[a]
        if idx.size and (idx.min() < -dim or idx.max() >= dim):
            raise self.fail(f"indices out of range [{-dim}, {dim - 1}]")
        strides = [math.prod(shape[k + 1:]) for k in range(rank)]
        flat = np.where(idx < 0, idx + dim, idx).astype(np.intp) * strides[a]
        for k in range(rank):
            if k != a:
                flat += (np.arange(idx.shape[k], dtype=np.intp) * strides[k]).reshape(
                    (1,) * k + (-1,) + (1,) * (rank - k - 1))
        return flat

    def compute(self, x, indices):
        return [np.take(x.reshape(-1), self.flat_index(x.shape, indices))]

    def run(self, xs, ys, ws):
        flat = self.flat if self.flat is not None else self.flat_index(xs[0].shape, xs[1])
        np.take(xs[0].reshape(-1), flat, out=ys[0], mode="clip")


# -- Expand, Tile ------------------------------------------------------------------------------------

@register("Expand", since=8)
class Expand(StaticInputKernel):
    shape_inputs = ((1, "shape"),)

    def out_shape(self, in_shape, shape) -> tuple:
        shape = ints(shape)
        if any(d < 0 for d in shape):
            raise self.fail(f"negative dim in shape {shape}")
        try:
            return np.broadcast_shapes(tuple(in_shape), tuple(shape))
        except ValueError:
            raise self.fail(f"cannot broadcast {tuple(in_shape)} to {shape}") from None

    def compute(self, x, shape):
        return [np.broadcast_to(x, self.out_shape(x.shape, shape)).copy()]

    def run(self, xs, ys, ws):
        np.copyto(ys[0], xs[0])  # copyto broadcasts the input over the planned output


@register("Tile", since=6)
class Tile(StaticInputKernel):
    shape_inputs = ((1, "repeats"),)

    def prepare(self):
        r = self.const_or_none(1)
        self.reps = None if r is None or self.in_shape() is None else self.repeats(self.in_shape(), r)

    def repeats(self, shape, repeats) -> list[int]:
        reps = ints(repeats)
        if len(reps) != len(shape):
            raise self.fail(f"repeats {reps} must have one entry per axis of the input (rank {len(shape)})")
        if any(r < 0 for r in reps):
            raise self.fail(f"negative repeat in {reps}")
        return reps

    def compute(self, x, repeats):
        return [np.tile(x, self.repeats(x.shape, repeats))]

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        reps = self.reps if self.reps is not None else self.repeats(x.shape, xs[1])
        # y viewed as (r0, d0, r1, d1, ...) receives x viewed as (1, d0, 1, d1, ...): one broadcast copy
        yv = view_as(y, [v for r, d in zip(reps, x.shape) for v in (r, d)])
        if yv is None:
            np.copyto(y, np.tile(x, reps))
        else:
            np.copyto(yv, x.reshape([v for d in x.shape for v in (1, d)]))


# -- Pad ---------------------------------------------------------------------------------------------------

class PadBase(StaticInputKernel):
    def prepare(self):
        self.mode = text(self.attr("mode", "constant"))
        modes = ("constant", "reflect", "edge") + (("wrap",) if self.opset >= 19 else ())
        if self.mode not in modes:
            raise self.fail(f"mode '{self.mode}' is not supported (expected one of {', '.join(modes)})")
        self.plan = None
        if self.in_shape() is not None and self.pads_known():
            self.plan = self.make_plan(self.in_shape(), *self.split_pads(len(self.in_shape()), *self.pads_args()))

    def infer(self):
        """From the plan when the input's shape and the pads are known: computing a pad of sample
        data would allocate the output, whatever its size (pads of 2^28 are 40 GiB)."""
        if self.plan is None:
            return super().infer()
        crop, _, pads, _ = self.plan
        return [Meta(self.inputs[0].dtype, tuple(c.stop - c.start + b + e for c, (b, e) in zip(crop, pads)))]

    def split_pads(self, rank, pads, axes) -> tuple[list[int], list[int]]:
        pads = ints(pads)
        axes = list(range(rank)) if axes is None else self.norm_axes(ints(axes), rank)
        if len(pads) != 2 * len(axes):
            raise self.fail(f"pads {pads} must have 2 entries per padded axis ({len(axes)} axes)")
        begins, ends = [0] * rank, [0] * rank
        for k, a in enumerate(axes):
            begins[a], ends[a] = pads[k], pads[k + len(axes)]
        return begins, ends

    def make_plan(self, shape, begins, ends):
        """crop: slices of x (negative pads); inner: where the cropped x lands in y; fills: per axis,
        (dst, src) slice pairs along that axis copying from y into the border (non-constant modes)."""
        crop, inner, pads, fills = [], [], [], []
        for a, (d, b, e) in enumerate(zip(shape, begins, ends)):
            lo, hi = max(-b, 0), d - max(-e, 0)
            if hi < lo:
                raise self.fail(f"negative pads ({b}, {e}) crop more than the dim {d} of axis {a}")
            dc, pb, pe = hi - lo, max(b, 0), max(e, 0)
            crop.append(slice(lo, hi))
            inner.append(slice(pb, pb + dc))
            pads.append((pb, pe))
            if self.mode == "constant" or not (pb or pe):
                continue
            if dc == 0:
                raise self.fail(f"cannot pad an empty axis {a} in '{self.mode}' mode")
            src = np.pad(np.arange(dc), (pb, pe), mode=self.mode) + pb  # source position in y
            runs = []
            for lo_k, hi_k in ((0, pb), (pb + dc, pb + dc + pe)):
                k = lo_k
                while k < hi_k:
                    step = int(src[k + 1] - src[k]) if k + 1 < hi_k else 1
                    if step not in (-1, 0, 1):
                        step = 1
                    j = k + 1
                    while j < hi_k and src[j] - src[j - 1] == step:
                        j += 1
                    n, s0 = j - k, int(src[k])
                    if step == 0:
                        s = slice(s0, s0 + 1)
                    elif step == 1 or n == 1:
                        s = slice(s0, s0 + n)
                    else:
                        s = slice(s0, None if s0 - n < 0 else s0 - n, -1)
                    runs.append((slice(k, j), s))
                    k = j
            fills.append((a, runs))
        return tuple(crop), tuple(inner), pads, fills

    def value_of(self, value, dtype):
        return np.zeros((), dtype) if value is None else np.asarray(value).astype(dtype).reshape(())

    def pad(self, x, plan, value, y=None):
        crop, inner, pads, fills = plan
        xc = x[crop]
        if y is None:
            if self.mode == "constant":
                return np.pad(xc, pads, mode="constant", constant_values=self.value_of(value, x.dtype))
            return np.pad(xc, pads, mode=self.mode)
        rank = x.ndim
        if self.mode == "constant":
            v = self.value_of(value, y.dtype)
            for a, (pb, pe) in enumerate(pads):
                if pb:
                    y[_at(a, slice(0, pb), rank)] = v
                if pe:
                    y[_at(a, slice(y.shape[a] - pe, None), rank)] = v
        np.copyto(y[inner], xc)
        for a, runs in fills:
            for dst, src in runs:
                np.copyto(y[_at(a, dst, rank)], y[_at(a, src, rank)])
        return y

    def run(self, xs, ys, ws):
        x = xs[0]
        plan = self.plan or self.make_plan(x.shape, *self.split_pads(x.ndim, *self.pads_args(xs)))
        self.pad(x, plan, self.value_arg(xs), ys[0])

    def bound(self, xs, ys, ws):
        """With the plan known, pad()'s copies as views of these arrays, sliced once: a call is the
        copies alone (and the constant's fills, its value read each call), pad()'s order kept."""
        y = ys[0]
        if self.plan is None or y is None:
            return super().bound(xs, ys, ws)
        crop, inner, pads, fills = self.plan
        rank = y.ndim
        borders = [y[_at(a, part, rank)] for a, (pb, pe) in enumerate(pads) if self.mode == "constant"
                   for part, n in ((slice(0, pb), pb), (slice(y.shape[a] - pe, None), pe)) if n]
        copies = [(y[inner], xs[0][crop])] + [(y[_at(a, dst, rank)], y[_at(a, src, rank)])
                                              for a, runs in fills for dst, src in runs]
        value_of, value_arg, copyto = self.value_of, self.value_arg, np.copyto

        def run() -> None:
            if borders:
                v = value_of(value_arg(xs), y.dtype)
                for border in borders:
                    border[...] = v
            for dst, src in copies:
                copyto(dst, src)
        return run


@register("Pad", since=2)
class Pad2(PadBase):
    """Pad-2: pads and value as attributes."""

    def pads_known(self):
        return True

    def pads_args(self, xs=None):
        pads = self.attr("pads")
        if pads is None:
            raise self.fail("attribute 'pads' is required")
        return pads, None

    def value_arg(self, xs):
        return np.float32(self.attr("value", 0.0))

    def compute(self, x):
        plan = self.make_plan(x.shape, *self.split_pads(x.ndim, *self.pads_args()))
        return [self.pad(x, plan, self.value_arg(None))]


@register("Pad", since=11)
class Pad(PadBase):
    """Pad-11/13/18/19: pads, constant_value (optional) and axes (optional, 18) as inputs; 'wrap' from 19."""
    shape_inputs = ((1, "pads"), (3, "axes"))

    def pads_known(self):
        return self.has_input(1) and self.consts_ready(1, 3)

    def pads_args(self, xs=None):
        xs = list(self.consts if xs is None else xs) + [None] * 4
        return xs[1], xs[3]

    def value_arg(self, xs):
        return xs[2] if len(xs) > 2 else None

    def compute(self, x, pads, constant_value=None, axes=None):
        plan = self.make_plan(x.shape, *self.split_pads(x.ndim, pads, axes))
        return [self.pad(x, plan, constant_value)]


# -- Trilu, ScatterND, OneHot, CumSum, TopK -------------------------------------------------------------

@register("Trilu", since=14)
class Trilu(StaticInputKernel):
    def prepare(self):
        self.upper = int(self.attr("upper", 1))
        self.zero = None
        shape = self.in_shape()
        if shape is not None:
            if len(shape) < 2:
                raise self.fail(f"input must have rank >= 2, got shape {shape}")
            if self.consts_ready(1):
                self.zero = self.zero_mask(shape, self.const_or_none(1))

    def k_of(self, k) -> int:
        return 0 if k is None else int(_scalar(k))

    def zero_mask(self, shape, k) -> np.ndarray:
        """True where the output is 0, for the last two axes (broadcast over the batch)."""
        h, w, k = shape[-2], shape[-1], self.k_of(k)
        if self.upper:
            return np.tri(h, w, k - 1, dtype=np.bool_)
        return ~np.tri(h, w, k, dtype=np.bool_)

    def compute(self, x, k=None):
        if x.ndim < 2:
            raise self.fail(f"input must have rank >= 2, got shape {x.shape}")
        return [np.triu(x, self.k_of(k)) if self.upper else np.tril(x, self.k_of(k))]

    def run(self, xs, ys, ws):
        zero = self.zero if self.zero is not None else self.zero_mask(xs[0].shape, xs[1] if len(xs) > 1 else None)
        np.copyto(ys[0], xs[0])
        np.copyto(ys[0], np.zeros((), ys[0].dtype), where=zero)


@register("ScatterND", since=11)
class ScatterND(StaticInputKernel):
    """ScatterND-11/13/16 (reduction none/add/mul)/18 (max/min). Negative indices count from the end."""
    _UFUNCS = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}

    def prepare(self):
        self.reduction = text(self.attr("reduction", "none"))
        allowed = ["none"] + (["add", "mul"] if self.opset >= 16 else []) + (["max", "min"] if self.opset >= 18 else [])
        if self.reduction not in allowed:
            raise self.fail(f"reduction '{self.reduction}' is not supported at opset {self.opset} "
                            f"(expected one of {', '.join(allowed)})")
        self.where = None
        if self.in_shape() is not None and self.const_or_none(1) is not None:
            self.where = self.locations(self.in_shape(), self.consts[1])

    def locations(self, shape, indices) -> tuple:
        idx = np.asarray(indices)
        if idx.ndim < 1 or idx.dtype.kind not in "iu":
            raise self.fail(f"indices must be an integer tensor of rank >= 1, got {idx.dtype} {idx.shape}")
        k = idx.shape[-1]
        if k > len(shape):
            raise self.fail(f"indices address {k} axes but data has rank {len(shape)}")
        dims = np.array(shape[:k], np.int64)
        if idx.size and ((idx < -dims).any() or (idx >= dims).any()):
            raise self.fail(f"indices out of range for data shape {tuple(shape)}")
        idx = np.where(idx < 0, idx + dims, idx).astype(np.intp)
        return tuple(np.moveaxis(idx, -1, 0)), idx.shape[:-1]

    def scatter(self, out, location, updates):
        where, batch = location
        want = tuple(batch) + out.shape[len(where):]
        if tuple(updates.shape) != want:
            raise self.fail(f"updates shape {updates.shape} should be {want}")
        if self.reduction == "none":
            out[where] = updates
        else:
            self._UFUNCS[self.reduction].at(out, where, updates)

    def compute(self, data, indices, updates):
        out = data.copy()
        self.scatter(out, self.locations(data.shape, indices), updates)
        return [out]

    def run(self, xs, ys, ws):
        np.copyto(ys[0], xs[0])
        self.scatter(ys[0], self.where if self.where is not None else self.locations(xs[0].shape, xs[1]), xs[2])


@register("OneHot", since=9)
class OneHot(StaticInputKernel):
    reads_outputs = True  # its workspace is its output's size
    shape_inputs = ((1, "depth"),)

    def prepare(self):
        self.axis_attr = int(self.attr("axis", -1))

    def depth_of(self, depth) -> int:
        d = int(_scalar(depth))
        if d < 1:
            raise self.fail(f"depth must be positive, got {d}")
        return d

    def layout(self, rank: int, depth: int):
        """(axis of depth in the output, shape of arange(depth) broadcast along that axis)."""
        a = self.norm_axis(self.axis_attr, rank + 1)
        return a, (1,) * a + (depth,) + (1,) * (rank - a)

    def hot(self, indices, depth, out=None):
        """Boolean one-hot of `indices` (negative ones count from depth, out-of-range ones are cold)."""
        idx = np.asarray(indices)
        if idx.dtype.kind == "f":
            idx = idx.astype(np.int64)
        idx = np.where(idx < 0, idx + depth, idx)
        a, lay = self.layout(idx.ndim, depth)
        return np.equal(np.expand_dims(idx, a), np.arange(depth).reshape(lay), out=out)

    def values_of(self, values):
        v = np.asarray(values).reshape(-1)
        if v.size != 2:
            raise self.fail(f"values must hold [off, on], got {v.size} elements")
        return v

    def compute(self, indices, depth, values):
        v = self.values_of(values)
        return [np.where(self.hot(indices, self.depth_of(depth)), v[1], v[0]).astype(v.dtype)]

    def workspace_nbytes(self):
        return self.outputs[0].numel if self.outputs else 0

    def run(self, xs, ys, ws):
        y = ys[0]
        depth = self.depth_of(self.consts[1] if self.const_or_none(1) is not None else xs[1])
        buf = None if ws is None or ws.nbytes < y.size else ws[:y.size].view(np.bool_).reshape(y.shape)
        hot = self.hot(xs[0], depth, out=buf)
        v = self.values_of(xs[2])
        np.copyto(y, v[0])
        np.copyto(y, v[1], where=hot)


@register("CumSum", since=11)
class CumSum(StaticInputKernel):
    def prepare(self):
        self.exclusive = int(self.attr("exclusive", 0))
        self.reverse = int(self.attr("reverse", 0))

    def axis_of(self, axis, rank) -> int:
        a = np.asarray(axis)
        if a.size != 1 or a.dtype.kind not in "iu":
            raise self.fail(f"axis must be one integer, got {a.dtype} {a.shape}")
        return self.norm_axis(int(a.reshape(-1)[0]), rank)

    def cumsum(self, x, a, out):
        rank = x.ndim
        if self.reverse:
            x, out = x[_at(a, slice(None, None, -1), rank)], out[_at(a, slice(None, None, -1), rank)]
        if not self.exclusive:
            np.cumsum(x, axis=a, dtype=out.dtype, out=out)
            return
        out[_at(a, slice(0, 1), rank)] = 0
        n = x.shape[a]
        if n > 1:
            np.cumsum(x[_at(a, slice(0, n - 1), rank)], axis=a, dtype=out.dtype, out=out[_at(a, slice(1, None), rank)])

    def compute(self, x, axis):
        out = np.empty_like(x)
        self.cumsum(x, self.axis_of(axis, x.ndim), out)
        return [out]

    def run(self, xs, ys, ws):
        self.cumsum(xs[0], self.axis_of(xs[1], xs[0].ndim), ys[0])


class TopKBase(StaticInputKernel):
    def prepare(self):
        self.axis_attr = int(self.attr("axis", -1))
        self.largest = int(self.attr("largest", 1))
        self.sorted = int(self.attr("sorted", 1))

    def topk(self, x, k):
        a = self.norm_axis(self.axis_attr, x.ndim)
        n = x.shape[a]
        if not 0 <= k <= n:
            raise self.fail(f"k={k} is out of range for an axis of {n}")
        if self.largest:  # descending, ties by ascending index: stable sort of the reversed axis
            order = np.flip(np.argsort(np.flip(x, a), axis=a, kind="stable"), a)
            order = (n - 1) - order
        else:
            order = np.argsort(x, axis=a, kind="stable")
        idx = order[_at(a, slice(0, k), x.ndim)].astype(np.int64)
        return [np.take_along_axis(x, idx, axis=a), idx]


@register("TopK", since=1)
class TopK1(TopKBase):
    """TopK-1: k as an attribute."""

    def compute(self, x):
        if self.attr("k") is None:
            raise self.fail("attribute 'k' is required")
        return self.topk(x, int(self.attr("k")))


@register("TopK", since=10)
class TopK(TopKBase):
    """TopK-10/11: K as a (constant) input; largest and sorted attributes from 11."""
    shape_inputs = ((1, "K"),)

    def compute(self, x, k):
        return self.topk(x, int(_scalar(k)))

    def upper_bound(self):  # k is at most the axis' size
        x = self.inputs[0]
        return [x, Meta(np.dtype(np.int64), tuple(x.shape))][:self.num_outputs]


# -- DepthToSpace, SpaceToDepth ------------------------------------------------------------------------

class BlockKernel(StaticInputKernel):
    def prepare(self):
        self.bs = int(self.attr("blocksize", 0))
        if self.bs < 1:
            raise self.fail(f"blocksize must be a positive integer, got {self.attr('blocksize')}")
        self.mode = text(self.attr("mode", "DCR")).upper()
        if self.mode not in ("DCR", "CRD"):
            raise self.fail(f"mode must be DCR or CRD, got '{self.mode}'")
        if self.in_shape() is not None:
            self.plan(self.in_shape())

    def compute(self, x):
        src, perm, mid, out = self.plan(x.shape)
        return [x.reshape(src).transpose(perm).reshape(out)]

    def run(self, xs, ys, ws):
        src, perm, mid, out = self.plan(xs[0].shape)
        yv = view_as(ys[0], mid)
        moved = xs[0].reshape(src).transpose(perm)
        if yv is None:
            np.copyto(ys[0], moved.reshape(out))
        else:
            np.copyto(yv, moved)


@register("DepthToSpace")
class DepthToSpace(BlockKernel):
    def plan(self, shape):
        if len(shape) != 4:
            raise self.fail(f"input must be 4-D (N, C, H, W), got {tuple(shape)}")
        n, c, h, w = shape
        b = self.bs
        if c % (b * b):
            raise self.fail(f"channels {c} are not divisible by blocksize^2 = {b * b}")
        co = c // (b * b)
        if self.mode == "DCR":
            src, perm = (n, b, b, co, h, w), (0, 3, 4, 1, 5, 2)
        else:
            src, perm = (n, co, b, b, h, w), (0, 1, 4, 2, 5, 3)
        return src, perm, (n, co, h, b, w, b), (n, co, h * b, w * b)


@register("SpaceToDepth")
class SpaceToDepth(BlockKernel):
    def plan(self, shape):
        if len(shape) != 4:
            raise self.fail(f"input must be 4-D (N, C, H, W), got {tuple(shape)}")
        n, c, h, w = shape
        b = self.bs
        if h % b or w % b:
            raise self.fail(f"spatial dims {h}x{w} are not divisible by blocksize {b}")
        src, out = (n, c, h // b, b, w // b, b), (n, c * b * b, h // b, w // b)
        if self.mode == "DCR":  # (the only order before SpaceToDepth-28's mode)
            return src, (0, 3, 5, 1, 2, 4), (n, b, b, c, h // b, w // b), out
        return src, (0, 1, 3, 5, 2, 4), (n, c, b, b, h // b, w // b), out
