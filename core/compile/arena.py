"""The arena planner: place tensors with known lifetimes in one buffer, reusing memory.

Greedy by size (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference",
as in TensorFlow Lite's arena planner): take buffers from largest to smallest and put each at
the lowest offset where it fits beside the already placed buffers whose lifetimes overlap it
(best fit among the gaps, else above them). Pure functions in, an ArenaPlan out.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..model.ge_model import ALIGNMENT
from ..model.record import record


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
    first = np.array([b.first for b in buffers], np.int64)
    last = np.array([b.last for b in buffers], np.int64)

    def conflicting(i: int) -> np.ndarray:
        if not reuse:
            return np.ones(len(buffers), bool)
        if conflicts is None:
            return (first <= last[i]) & (first[i] <= last)
        return np.unpackbits(conflicts[i], count=len(buffers)).view(bool)

    placed = np.zeros(len(buffers), bool)
    offsets: dict[str, int] = {}
    starts = np.zeros(len(buffers), np.int64)
    sizes = np.array([align(b.nbytes, alignment) for b in buffers], np.int64)
    # largest first; ties by earlier start, then name, so the plan is deterministic
    for i in sorted(range(len(buffers)), key=lambda i: (-buffers[i].nbytes, buffers[i].first, buffers[i].name)):
        near = np.flatnonzero(placed & conflicting(i))  # the placed buffers it conflicts with
        starts[i] = offsets[buffers[i].name] = lowest_fit(starts[near], starts[near] + sizes[near], int(sizes[i]))
        placed[i] = True
    total = int((starts + sizes).max(initial=0))
    return ArenaPlan(offsets, total, lower_bound(buffers, alignment))


#: below this many placed neighbours lowest_fit walks them in Python (numpy's calls cost more there)
FEW_NEIGHBOURS = 48


def lowest_fit(start: np.ndarray, end: np.ndarray, size: int) -> int:
    """Where a buffer of `size` bytes goes beside placed buffers [start, end): the lowest of the
    smallest gaps between them that fit it, else above them all. Many neighbours (a 20k-node graph's
    buffers have thousands) in numpy: a Python walk of each buffer's took seconds there."""
    if len(start) < FEW_NEIGHBOURS:
        best, best_gap, cursor = None, None, 0
        for off, stop in sorted(zip(start.tolist(), end.tolist())):
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, stop)
        return cursor if best is None else best
    order = np.argsort(start, kind="stable")
    below = np.maximum.accumulate(np.concatenate(([0], end[order])))  # [k]: the top of the k lowest
    gap = start[order] - below[:-1]
    fits = np.flatnonzero(gap >= size)
    return int(below[fits[np.argmin(gap[fits])]] if len(fits) else below[-1])
