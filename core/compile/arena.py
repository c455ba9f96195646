"""The arena planner: place tensors with known lifetimes in one buffer, reusing memory.

Greedy by size (Pisarchyk & Lee, "Efficient Memory Management for Deep Neural Net Inference",
as in TensorFlow Lite's arena planner): take buffers from largest to smallest and put each at
the lowest offset where it fits beside the already placed buffers whose lifetimes overlap it
(best fit among the gaps, else above them). Pure functions in, an ArenaPlan out.
"""
from __future__ import annotations

from typing import Callable, Sequence

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


def lifetimes_overlap(a: Buffer, b: Buffer) -> bool:
    return a.first <= b.last and b.first <= a.last


def never_share(a: Buffer, b: Buffer) -> bool:
    return True


def plan_arena(buffers: Sequence[Buffer], alignment: int = ALIGNMENT,
               conflicts: Callable[[Buffer, Buffer], bool] = lifetimes_overlap, reuse: bool = True) -> ArenaPlan:
    """`conflicts(a, b)`: may a and b not share bytes? By default, when their lifetimes in one
    linear order overlap; a concurrent schedule passes a stricter rule (see dataflow_plan).
    `reuse=False` (ATC's --disable_reuse_memory=1) gives every buffer bytes of its own: a wrong
    result that goes away then points at a memory plan or a kernel writing past its output."""
    if not reuse:
        conflicts = never_share
    placed: list[tuple[int, int, Buffer]] = []  # (offset, aligned size, buffer)
    offsets: dict[str, int] = {}
    # largest first; ties by earlier start, then name, so the plan is deterministic
    for b in sorted(buffers, key=lambda b: (-b.nbytes, b.first, b.name)):
        size = align(b.nbytes, alignment)
        overlapping = sorted((off, sz) for off, sz, o in placed if conflicts(o, b))
        best, best_gap, cursor = None, None, 0
        for off, sz in overlapping:
            gap = off - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, off + sz)
        offset = best if best is not None else cursor
        offsets[b.name] = offset
        placed.append((offset, size, b))
    total = max((off + sz for off, sz, _ in placed), default=0)
    return ArenaPlan(offsets, total, lower_bound(buffers, alignment))
