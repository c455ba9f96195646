"""The arrays a context returned as its outputs (execute without outputs), written again by its next run
when the caller has let go of them.

A run's output arrays are the caller's. A caller that drops them before its next call (a decoding loop
that reads the logits, a benchmark) leaves them held by ge alone, and that call can write into them
again: no new arrays, and an output that keeps coming back can be bound in place where its tasks already
write (ExecutionContext._fresh_outputs), its copy saved (a GPT-2 decoding step's four 132 KiB presents).

"Let go" is read from the array's reference count, against the count it had as the run returned it less
the caller's list. Only the last run's array is kept: between that run and the next, ge's own references
to it (the views of the tasks bound to it) cannot change, so the count can only be back to that value
when nobody else holds the array. A caller that keeps it, or anything made from it (a view, a memoryview,
a torch tensor sharing its memory), or hands it to another context, holds a reference: then the next run
writes a new array. (A weak reference is no reference: what it finds may be a later run's values.)"""
from __future__ import annotations

import sys

import numpy as np

_UNSETTLED = -1  # the count of an array no run has returned yet: never free


class OutputPool:
    def __init__(self, count: int):
        self.kept: list[list | None] = [None] * count  # per output: [the array, its count once let go]

    def take(self, index: int, shape: tuple, dtype: np.dtype) -> tuple[np.ndarray, bool]:
        """An array for output `index` and whether it is the last run's, which nobody else holds now;
        else a new one (kept in its place: the pool lets go of the old one)."""
        entry = self.kept[index]
        if entry is not None:
            array = entry[0]
            if sys.getrefcount(array) == entry[1] and array.shape == shape and array.dtype == dtype:
                return array, True
        array = np.empty(shape, dtype)
        self.kept[index] = [array, _UNSETTLED]
        return array, False

    def settle(self, outputs: list) -> None:
        """As a run returns `outputs` (the list the caller gets), each kept array's count once the caller
        has dropped the list and the array: counted as take() counts (the entry, a local, the argument),
        less the list."""
        for index, entry in enumerate(self.kept):
            if entry is not None:
                array = entry[0]
                entry[1] = sys.getrefcount(array) - 1 if array is outputs[index] else _UNSETTLED

    def clear(self) -> None:
        self.kept = [None] * len(self.kept)
