"""ModelArgsManager: the active base table and the args table in device memory.

Every task argument is (allocation id, offset). The active base table holds each allocation's
current base address; the args table (one uint64 per argument, in device memory) holds the
resolved addresses kernels run on. Each allocation has a refresh policy (what can move it);
`update_for_execute` rewrites only the entries of allocations whose base moved since the last
refresh (frozen inputs drop out), and reports which tasks must rebuild their views.

ret_up, as in GE, is the highest policy level among the moved allocations: up to
REFRESH_BY_MODEL_IO the refresh is incremental (scattered entries); when feature-map bases move
(known-node mode) most entries change, and one contiguous full write is cheaper.
"""
from __future__ import annotations

import numpy as np

from ..model.ge_model import FEATURE_MAP, FILE_CONSTANT, INPUT, OUTPUT, WEIGHT, WORKSPACE, GeModel, arg_rows
from ..model.record import record

# refresh policies, in rising order (GE's kRefreshByModelIo / kRefreshByFm)
FIXED, REFRESH_BY_MODEL_IO, REFRESH_BY_FM = 0, 1, 2
NOTHING = np.empty(0, np.int64)  # no task to rebuild (read only)
NOTHING.flags.writeable = False
POLICY_NAMES = {FIXED: "fixed", REFRESH_BY_MODEL_IO: "by_model_io", REFRESH_BY_FM: "by_fm"}
POLICY = {WEIGHT: FIXED, FILE_CONSTANT: FIXED, INPUT: REFRESH_BY_MODEL_IO, OUTPUT: REFRESH_BY_MODEL_IO,
          FEATURE_MAP: REFRESH_BY_FM, WORKSPACE: REFRESH_BY_FM}


@record
class ArgsLayout:
    """Immutable, shared by all contexts: where each argument points, and which task owns it."""
    allocation: np.ndarray  # int64 per argument
    offset: np.ndarray  # uint64 per argument
    task: np.ndarray  # int64 per argument
    role: np.ndarray  # int64 per argument: 0 input, 1 output, 2 workspace
    nbytes: np.ndarray  # int64 per argument
    by_allocation: tuple  # allocation id -> int64 array of argument indices
    policy: tuple  # allocation id -> refresh policy

    @classmethod
    def of(cls, model: GeModel) -> "ArgsLayout":
        alloc, off, task, role, nbytes = arg_rows(model.tasks)
        return cls.with_places(alloc, off, task, role, nbytes, tuple(POLICY.get(a.kind, FIXED) for a in model.allocations))

    @classmethod
    def with_places(cls, alloc, off, task, role, nbytes, policy) -> "ArgsLayout":
        """The same arguments at other places (another memory plan)."""
        by = tuple(np.flatnonzero(alloc == a) for a in range(len(policy)))
        return cls(alloc, np.asarray(off, np.uint64), task, role, nbytes, by, policy)

    @property
    def size(self) -> int:
        return len(self.allocation)


class ModelArgsManager:
    """Per context: the active base table (host) and the args table (device memory)."""

    def __init__(self, layout: ArgsLayout, device, table_addr: int):
        self.layout = layout
        self.device = device
        self.table_addr = table_addr
        self.table = device.view(table_addr, np.uint64, (layout.size,))
        self.base = np.zeros(len(layout.by_allocation), np.uint64)
        self._moved: set[int] = set(range(len(layout.by_allocation)))  # everything, before the first refresh
        self.bytes_written = 0  # by the last refresh
        self.full_refresh = False  # whether the last refresh rewrote the whole table

    def set_base(self, allocation: int, addr: int) -> None:
        if self.base[allocation] != addr:
            self.base[allocation] = addr
            self._moved.add(allocation)

    def moved(self) -> bool:
        """Whether an allocation moved since the last refresh (update_for_execute has work to do)."""
        return bool(self._moved)

    def ret_up(self) -> int:
        return max((self.layout.policy[a] for a in self._moved), default=FIXED)

    def update_for_execute(self) -> np.ndarray:
        """Write the entries of moved allocations to the args table; return the tasks to rebuild."""
        self.bytes_written, self.full_refresh = 0, False
        if not self._moved:
            return NOTHING
        lay = self.layout
        idx = np.concatenate([lay.by_allocation[a] for a in sorted(self._moved)])
        self.full_refresh = self.ret_up() >= REFRESH_BY_FM or 2 * idx.size > lay.size
        if self.full_refresh:  # one contiguous H2D of the whole table
            host = self.base[lay.allocation] + lay.offset
            self.device.memcpy_h2d(self.table_addr, host, kind="args")
            self.bytes_written = host.nbytes
        else:  # only the moved entries
            self.device.write_args(self.table, idx, self.base[lay.allocation[idx]] + lay.offset[idx])
            self.bytes_written = idx.size * 8
        self._moved.clear()
        tasks = lay.task[idx]
        if not tasks.size:
            return NOTHING
        # the distinct tasks, in order: np.unique would import numpy.ma (~40 ms) at a process's first load
        seen = np.zeros(int(tasks.max()) + 1, bool)
        seen[tasks] = True
        return np.flatnonzero(seen)
