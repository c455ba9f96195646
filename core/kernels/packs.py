"""WeightPacks: constant weights in the layouts kernels want, packed once per loaded model.

A kernel's prepare() may copy a constant weight into the layout its plan runs fastest on (Conv's
"taps" plan: W[OC, C, *k] -> [taps, OC, C]; LSTM/GRU: W^T and R^T contiguous, biases summed).
That layout depends on the weight and on the plan, not on the activation shape; but the hybrid
executor builds one kernel per new shape, so without sharing every new shape would pack again.
This is OpenVINO's update_weights (001_*): weights are reordered only when the chosen impl wants
another layout than the one already made.

A pack is keyed by the identity of its weights (address, shape, strides, dtype: weights are
immutable, and the entry holds a reference so that an address cannot be recycled while the entry
lives) and a layout key naming everything else the result depends on. Packs are read-only: kernels
built for several shapes share them.
"""
from __future__ import annotations

import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)
from typing import Callable

import numpy as np


def _identity(a) -> tuple | None:
    if a is None:
        return None
    a = np.asarray(a)
    return a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str


def _freeze(packed):
    """Mark the arrays of a pack (an array, or a list/tuple/dict of them) read-only."""
    if isinstance(packed, np.ndarray):
        packed.flags.writeable = False
    elif isinstance(packed, dict):
        for v in packed.values():
            _freeze(v)
    elif isinstance(packed, (list, tuple)):
        for v in packed:
            _freeze(v)
    return packed


class WeightPacks:
    """The pack cache of one loaded model; `packs` counts packs made, `hits` packs reused."""

    def __init__(self):
        self._entries: dict[tuple, tuple] = {}
        self._lock = _thread.allocate_lock()
        self.packs = self.hits = 0

    def get(self, weights: tuple, layout: tuple, pack: Callable):
        """pack(*weights), made on the first call for these weights and this layout, shared after."""
        key = (tuple(_identity(w) for w in weights), layout)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self.hits += 1
                return entry[1]
            packed = _freeze(pack(*weights))
            self._entries[key] = (weights, packed)  # the weights' reference pins their addresses
            self.packs += 1
            return packed

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
