"""The arena planner: place tensors with known lifetimes in one buffer, reusing memory.

Greedy by size (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference",
as in TensorFlow Lite's arena planner): take buffers from largest to smallest and put each at
the lowest offset where it fits beside the already placed buffers whose lifetimes overlap it
(best fit among the gaps, else above them). Pure functions in, an ArenaPlan out. The compiler
plans static models and range models with it; the hybrid executor plans a dynamic model's tensors
with it at run time, once the shapes of a run are known (runtime/hybrid_context.py).
"""
from __future__ import annotations

from _bisect import insort_right as insort  # (bisect.insort, which bisect.py names so: ~3 M instructions to compile)
from typing import Sequence

import numpy as np

from .ge_model import ALIGNMENT
from .record import record


@record
class Buffer:
    """A tensor to place: alive from step `first` (its producer) to step `last` (its last reader)."""
    name: str
    nbytes: int
    first: int
    last: int


@record
class ArenaPlan:
    offsets: dict  # buffer name -> byte offset
    size: int  # arena bytes
    lower_bound: int  # the largest sum of live (aligned) bytes at any step


def align(n: int, alignment: int = ALIGNMENT) -> int:
    return (n + alignment - 1) // alignment * alignment


def lower_bound(buffers: Sequence[Buffer], alignment: int = ALIGNMENT) -> int:
    """No placement can use less than the bytes alive together at the busiest step."""
    events: dict[int, int] = {}
    for b in buffers:
        events[b.first] = events.get(b.first, 0) + align(b.nbytes, alignment)
        events[b.last + 1] = events.get(b.last + 1, 0) - align(b.nbytes, alignment)
    live = peak = 0
    for step in sorted(events):
        live += events[step]
        peak = max(peak, live)
    return peak


def plan_arena(buffers: Sequence[Buffer], alignment: int = ALIGNMENT, conflicts: np.ndarray | None = None,
               reuse: bool = True) -> ArenaPlan:
    """`conflicts` row i, bits packed as np.packbits(..., axis=1) packs them, bit j (buffers in the
    order given): may buffers i and j not share bytes? By default, when their lifetimes in one linear
    order overlap (a row at a time: no buffers x buffers matrix, 400 MB at 20k buffers); a concurrent
    schedule passes a stricter rule (see dataflow_plan). Rows, not a function of two buffers: each
    buffer is placed against all those placed before it at once.
    `reuse=False` (ATC's --disable_reuse_memory=1) gives every buffer bytes of its own: a wrong
    result that goes away then points at a memory plan or a kernel writing past its output."""
    sizes = [align(b.nbytes, alignment) for b in buffers]
    # largest first; ties by earlier start, then name, so the plan is deterministic
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].nbytes, buffers[i].first, buffers[i].name))
    place = _place_few if len(buffers) <= FEW_BUFFERS else _place_many
    starts = place(buffers, sizes, order, conflicts, reuse)
    offsets = {buffers[i].name: starts[i] for i in order}
    total = max((start + size for start, size in zip(starts, sizes)), default=0)
    return ArenaPlan(offsets, total, lower_bound(buffers, alignment))


#: up to this many buffers the placement walks the placed ones in Python, in order of their offsets, with
#: a row of flags of each buffer's conflicts: numpy's ten calls a buffer cost more than that walk for a
#: CNN's few hundred buffers; past it a numpy row at a time (no buffers x buffers matrix)
FEW_BUFFERS = 512


def _place_few(buffers: Sequence[Buffer], sizes: list[int], order: list[int], conflicts: np.ndarray | None,
               reuse: bool) -> list[int]:
    n = len(buffers)
    rows = _rows(buffers, conflicts) if reuse else [b"\x01" * n] * n
    starts = [0] * n
    placed: list[tuple[int, int, int]] = []  # (start, end, buffer), sorted: lowest_fit's walk of them in order
    for i in order:
        row, size = rows[i], sizes[i]
        best, best_gap, cursor = None, None, 0
        for off, stop, j in placed:
            if row[j]:
                gap = off - cursor
                if gap >= size and (best_gap is None or gap < best_gap):
                    best, best_gap = cursor, gap
                if stop > cursor:  # (not max(): a call per neighbour, the walk's most)
                    cursor = stop
        starts[i] = cursor if best is None else best
        insort(placed, (starts[i], starts[i] + size, i))
    return starts


def _rows(buffers: Sequence[Buffer], conflicts: np.ndarray | None) -> list[bytes]:
    """Each buffer's conflicts (plan_arena's) as bytes, 1 at the buffers it conflicts with."""
    n = len(buffers)
    if conflicts is None:
        first = np.array([b.first for b in buffers], np.int64)
        last = np.array([b.last for b in buffers], np.int64)
        flags = ((first[:, None] <= last[None, :]) & (first[None, :] <= last[:, None])).tobytes()
    else:
        flags = np.unpackbits(conflicts, axis=1, count=n).tobytes()
    return [flags[i * n:(i + 1) * n] for i in range(n)]


def _place_many(buffers: Sequence[Buffer], sizes: list[int], order: list[int], conflicts: np.ndarray | None,
                reuse: bool) -> list[int]:
    first = np.array([b.first for b in buffers], np.int64)
    last = np.array([b.last for b in buffers], np.int64)

    def conflicting(i: int) -> np.ndarray:
        if not reuse:
            return np.ones(len(buffers), bool)
        if conflicts is None:
            return (first <= last[i]) & (first[i] <= last)
        return np.unpackbits(conflicts[i], count=len(buffers)).view(bool)

    placed = np.zeros(len(buffers), bool)
    starts = np.zeros(len(buffers), np.int64)
    sizes = np.array(sizes, np.int64)
    for i in order:
        near = np.flatnonzero(placed & conflicting(i))  # the placed buffers it conflicts with
        starts[i] = lowest_fit(starts[near], starts[near] + sizes[near], int(sizes[i]))
        placed[i] = True
    return starts.tolist()


#: below this many placed neighbours lowest_fit walks them in Python (numpy's calls cost more there)
FEW_NEIGHBOURS = 48


def lowest_fit(start: np.ndarray, end: np.ndarray, size: int) -> int:
    """Where a buffer of `size` bytes goes beside placed buffers [start, end): the lowest of the
    smallest gaps between them that fit it, else above them all. Many neighbours (a 20k-node graph's
    buffers have thousands) in numpy: a Python walk of each buffer's took seconds there."""
    if len(start) < FEW_NEIGHBOURS:
        return _walk(list(zip(start.tolist(), end.tolist())), size)
    order = np.argsort(start, kind="stable")
    below = np.maximum.accumulate(np.concatenate(([0], end[order])))  # [k]: the top of the k lowest
    gap = start[order] - below[:-1]
    fits = np.flatnonzero(gap >= size)
    return int(below[fits[np.argmin(gap[fits])]] if len(fits) else below[-1])


def _walk(spans: list[tuple[int, int]], size: int) -> int:
    """lowest_fit of few neighbours' (start, end) spans, walked in Python."""
    best, best_gap, cursor = None, None, 0
    for off, stop in sorted(spans):
        gap = off - cursor
        if gap >= size and (best_gap is None or gap < best_gap):
            best, best_gap = cursor, gap
        cursor = max(cursor, stop)
    return cursor if best is None else best
