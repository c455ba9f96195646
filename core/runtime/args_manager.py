"""ModelArgsManager: the active base table and the args table in device memory.

Every task argument is (allocation id, offset). The active base table holds each allocation's
current base address; the args table (one uint64 per argument, in device memory) holds the
resolved addresses kernels run on. A refresh rewrites only the entries of allocations whose base
moved, and reports which tasks must rebuild their views.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ge_model import FEATURE_MAP, INPUT, OUTPUT, WEIGHT, WORKSPACE, GeModel

# refresh policies, by what moves an allocation's base (GE's kRefreshByFm / kRefreshByModelIo)
FIXED, REFRESH_BY_FM, REFRESH_BY_MODEL_IO = "fixed", "by_fm", "by_model_io"
POLICY = {WEIGHT: FIXED, FEATURE_MAP: REFRESH_BY_FM, WORKSPACE: REFRESH_BY_FM, INPUT: REFRESH_BY_MODEL_IO,
          OUTPUT: REFRESH_BY_MODEL_IO}


@dataclass(frozen=True)
class ArgsLayout:
    """Immutable, shared by all contexts: where each argument points, and which task owns it."""
    allocation: np.ndarray  # int64 per argument
    offset: np.ndarray  # uint64 per argument
    task: np.ndarray  # int64 per argument
    by_allocation: tuple  # allocation id -> int64 array of argument indices
    policy: tuple  # allocation id -> refresh policy

    @classmethod
    def of(cls, model: GeModel) -> "ArgsLayout":
        alloc, off, task = [], [], []
        for t, td in enumerate(model.tasks):
            for a in td.args:
                alloc.append(a.allocation)
                off.append(a.offset)
                task.append(t)
        alloc_a = np.array(alloc, np.int64)
        by = tuple(np.flatnonzero(alloc_a == a.id) for a in model.allocations)
        return cls(alloc_a, np.array(off, np.uint64), np.array(task, np.int64), by,
                   tuple(POLICY[a.kind] for a in model.allocations))

    @property
    def size(self) -> int:
        return len(self.allocation)


class ModelArgsManager:
    """Per context: the active base table (host) and the args table (device memory)."""

    def __init__(self, layout: ArgsLayout, device, table_addr: int):
        self.layout = layout
        self.device = device
        self.table = device.view(table_addr, np.uint64, (layout.size,))
        self.base = np.zeros(len(layout.by_allocation), np.uint64)
        self._moved: set[int] = set(range(len(layout.by_allocation)))  # everything, before the first refresh
        self.bytes_written = 0  # of the last refresh

    def set_base(self, allocation: int, addr: int) -> None:
        if self.base[allocation] != addr:
            self.base[allocation] = addr
            self._moved.add(allocation)

    def update_for_execute(self) -> np.ndarray:
        """Write the entries of moved allocations to the args table; return the tasks to rebuild."""
        if not self._moved:
            self.bytes_written = 0
            return np.empty(0, np.int64)
        idx = np.concatenate([self.layout.by_allocation[a] for a in sorted(self._moved)])
        self._moved.clear()
        self.table[idx] = self.base[self.layout.allocation[idx]] + self.layout.offset[idx]
        self.bytes_written = idx.size * 8
        self.device.counters["args_bytes"] += self.bytes_written
        return np.unique(self.layout.task[idx])
