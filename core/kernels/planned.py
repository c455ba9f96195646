"""The base of kernels with a planned `run`: a Scratch layout of their workspace (typed regions,
ALIGNMENT-aligned, carved out of the uint8 `ws` the runtime plans per task) and `compute`/`infer`
derived from `run`."""
from __future__ import annotations

import math

import numpy as np

from ..model.ge_model import ALIGNMENT
from ..model.ir import Meta
from .base import Kernel

_EMPTY = np.empty(0, np.uint8)


def address(a: np.ndarray) -> int:
    """The address of an array's first byte."""
    return a.__array_interface__["data"][0]


class Scratch:
    """A workspace layout: named typed regions, each ALIGNMENT-aligned, carved out of the uint8 `ws`."""

    def __init__(self):
        self.nbytes = 0
        self.items: dict[str, tuple[int, tuple, np.dtype]] = {}

    def add(self, name: str, shape, dtype) -> None:
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        off = (self.nbytes + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        self.items[name] = (off, shape, dtype)
        self.nbytes = off + math.prod(shape) * dtype.itemsize

    @classmethod
    def of(cls, specs) -> "Scratch":
        """Unnamed regions, one per (dtype, shape) of `specs`, for carve_list."""
        s = cls()
        for k, (dtype, shape) in enumerate(specs):
            s.add(str(k), shape, dtype)
        return s

    def carve_list(self, ws: np.ndarray | None) -> list[np.ndarray]:
        """The regions in the order they were added (ws may be None when they are all empty)."""
        if self.nbytes and (ws is None or ws.nbytes < self.nbytes):
            raise ValueError(f"workspace of {0 if ws is None else ws.nbytes} bytes, {self.nbytes} needed")
        return list(self.carve(_EMPTY if ws is None else ws.reshape(-1).view(np.uint8)).values())

    def allocate(self) -> np.ndarray | None:
        """A workspace of this layout's size, for compute() outside planned memory."""
        return np.empty(self.nbytes, np.uint8) if self.nbytes else None

    def carve(self, ws: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for name, (off, shape, dtype) in self.items.items():
            n = math.prod(shape) * dtype.itemsize
            out[name] = ws[off:off + n].view(dtype).reshape(shape)
        return out


class PlannedKernel(Kernel):
    """A kernel with a planned `run` over a Scratch workspace, and `compute`/`infer` derived from it.

    Subclasses set self.out_metas and self.scratch in prepare() and implement run(). The views of
    the workspace are cached per workspace buffer (the check is on the buffer object and address,
    and the cache holds a reference, so a recycled address cannot alias a stale view)."""

    out_metas: list[Meta]
    scratch: Scratch

    def infer(self):
        return list(self.out_metas)

    def workspace_nbytes(self) -> int:
        return self.scratch.nbytes

    def views(self, ws) -> dict[str, np.ndarray]:
        if not self.scratch.items:
            return {}
        if ws is None and self.scratch.nbytes == 0:  # every region empty (zero-size tensors): no workspace passed
            ws = _EMPTY
        cache = getattr(self, "_view_cache", None)
        if cache is not None and cache[3] is ws:  # the same array as last run (a task's bound view)
            return cache[2]
        owner, addr = ws if ws.base is None else ws.base, address(ws)
        if cache is not None and cache[0] is owner and cache[1] == addr:
            return cache[2]
        if ws.nbytes < self.scratch.nbytes:
            raise self.fail(f"workspace of {ws.nbytes} bytes, {self.scratch.nbytes} needed")
        v = self.scratch.carve(ws)
        self.derive(v)
        self._view_cache = (owner, addr, v, ws)
        return v

    def derive(self, v: dict) -> None:
        """Add views (or call arguments) derived from the workspace views; cached with them."""

    def compute(self, *xs):
        other = self.built_for(xs)
        if other is not self:
            return other.compute(*xs)
        self.load()
        xs = [None if x is None else np.array(x, order="C", copy=None) for x in xs]  # scalars stay 0-d
        ys = [np.empty(m.shape, m.dtype) for m in self.out_metas]
        ws = np.empty(self.scratch.nbytes, np.uint8) if self.scratch.nbytes else None
        self.run(xs, ys, ws)
        return ys

    # attribute helpers
    def ints(self, key, n, default):
        v = self.attrs.get(key)
        if v is None:
            return [default] * n
        v = [int(a) for a in v]
        if len(v) != n:
            raise self.fail(f"attribute {key} has {len(v)} values, {n} expected")
        return v

    def string(self, key, default):
        v = self.attrs.get(key, default)
        return v.decode() if isinstance(v, bytes) else str(v)

    def spatial_meta(self, index: int, what: str, min_rank: int = 3) -> Meta:
        m = self.inputs[index] if index < len(self.inputs) else None
        if m is None:
            raise self.fail(f"input {index} ({what}) is missing")
        if len(m.shape) < min_rank:
            raise self.fail(f"input {index} ({what}) has shape {tuple(m.shape)}, rank >= {min_rank} expected")
        return m
