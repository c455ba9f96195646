"""Sequence and optional ops: values with no static layout, held by the hybrid executor on the host.

A sequence is a Python list of arrays, an optional a value or None (empty). These kernels are
`host_values`: the hybrid executor calls compute() with its inputs as they are (arrays, lists,
None) and keeps what it returns the same way; an array that goes into a sequence or an optional is
copied, since the executor reuses its tensors' buffers. infer() always raises: every such node
runs on the dynamic path, never in a static submodel.
"""
from __future__ import annotations

import numpy as np

from ..base import HostKernel
from ..registry import register


class HostValueKernel(HostKernel):
    def position(self, p, n: int, last: bool) -> int:
        """An index into a sequence of n (negative from the back); `last` allows n itself (insert)."""
        k = int(np.asarray(p).reshape(-1)[0])
        hi = n if last else n - 1
        if not -n <= k <= hi:
            raise self.fail(f"position {k} is out of range [{-n}, {hi}] for a sequence of {n} tensors")
        return k + n if k < 0 else k

    def sequence(self, s, what: str = "input 0") -> list:
        if not isinstance(s, list):
            raise self.fail(f"{what} must be a sequence, got {'an empty optional' if s is None else 'a tensor'}")
        return s


def _own(x) -> np.ndarray:
    return np.array(x, copy=True)


@register("SequenceEmpty", since=11)
class SequenceEmpty(HostValueKernel):
    def compute(self):
        return [[]]


@register("SequenceConstruct", since=11)
class SequenceConstruct(HostValueKernel):
    def compute(self, *xs):
        dtypes = {np.asarray(x).dtype for x in xs}
        if len(dtypes) > 1:
            raise self.fail(f"the tensors of a sequence must share one dtype, got {sorted(map(str, dtypes))}")
        return [[_own(x) for x in xs]]


@register("SequenceInsert", since=11)
class SequenceInsert(HostValueKernel):
    def compute(self, s, x, position=None):
        s = self.sequence(s)
        if s and np.asarray(x).dtype != s[0].dtype:
            raise self.fail(f"tensor of dtype {np.asarray(x).dtype} inserted into a sequence of {s[0].dtype}")
        k = len(s) if position is None else self.position(position, len(s), last=True)
        return [s[:k] + [_own(x)] + s[k:]]


@register("SequenceAt", since=11)
class SequenceAt(HostValueKernel):
    def compute(self, s, position):
        s = self.sequence(s)
        return [s[self.position(position, len(s), last=False)]]


@register("SequenceErase", since=11)
class SequenceErase(HostValueKernel):
    def compute(self, s, position=None):
        s = self.sequence(s)
        if not s:
            raise self.fail("cannot erase from an empty sequence")
        k = len(s) - 1 if position is None else self.position(position, len(s), last=False)
        return [s[:k] + s[k + 1:]]


@register("SequenceLength", since=11)
class SequenceLength(HostValueKernel):
    def compute(self, s):
        return [np.array(len(self.sequence(s)), np.int64)]


@register("SplitToSequence", since=11)
class SplitToSequence(HostValueKernel):
    def compute(self, x, split=None):
        x = np.asarray(x)
        axis, keepdims = int(self.attr("axis", 0)), int(self.attr("keepdims", 1))
        if not -x.ndim <= axis < x.ndim:
            raise self.fail(f"axis {axis} is out of range for rank {x.ndim}")
        axis %= x.ndim
        n = x.shape[axis]
        if split is None:
            parts = [_own(np.take(x, [k], axis=axis)) for k in range(n)]
            return [parts if keepdims else [p.squeeze(axis) for p in parts]]
        split = np.asarray(split).astype(np.int64)
        if split.ndim == 0:
            if split <= 0:
                raise self.fail(f"split {int(split)} must be positive")
            sizes = [int(split)] * (n // int(split)) + ([n % int(split)] if n % int(split) else [])
        else:
            sizes = [int(v) for v in split.reshape(-1)]
            if any(v < 0 for v in sizes) or sum(sizes) != n:
                raise self.fail(f"split {sizes} must be non-negative sizes summing to dim {axis} ({n})")
        bounds = np.cumsum([0] + sizes)
        return [[_own(np.take(x, range(a, b), axis=axis)) for a, b in zip(bounds[:-1], bounds[1:])]]


@register("ConcatFromSequence", since=11)
class ConcatFromSequence(HostValueKernel):
    def compute(self, s):
        s = self.sequence(s)
        if "axis" not in self.attrs:
            raise self.fail("attribute 'axis' is required")
        axis, new_axis = int(self.attrs["axis"]), int(self.attr("new_axis", 0))
        if not s:
            raise self.fail("cannot concatenate an empty sequence")
        rank = s[0].ndim + (1 if new_axis else 0)
        if not -rank <= axis < rank:
            raise self.fail(f"axis {axis} is out of range for rank {rank}")
        try:
            return [np.stack(s, axis=axis) if new_axis else np.concatenate(s, axis=axis)]
        except ValueError as e:
            raise self.fail(f"the sequence's tensors do not line up: {e}") from None


@register("Optional", since=15)
class Optional(HostValueKernel):
    def compute(self, x=None):
        if x is None and "type" not in self.attrs:
            raise self.fail("an empty Optional needs its 'type' attribute")
        if x is None:
            return [None]
        return [[_own(t) for t in x] if isinstance(x, list) else _own(x)]


@register("OptionalHasElement", since=15)
class OptionalHasElement(HostValueKernel):
    def compute(self, x=None):
        return [np.array(x is not None)]


@register("OptionalGetElement", since=15)
class OptionalGetElement(HostValueKernel):
    def compute(self, x):
        if x is None:
            raise self.fail("the optional input is empty")
        return [x]
