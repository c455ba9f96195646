"""Executors: how a context walks its sunk task list (ONE's Linear, Dataflow and Parallel).

- linear: the order fixed at compile time; the cheapest, and the default.
- dataflow: the ready set computed at run time, one task at a time; records per-task timings.
- parallel: ready tasks run at once on a thread pool (numpy releases the GIL in BLAS and ufuncs).
Dataflow and parallel run on the dataflow memory plan (core/compile/dataflow_plan.py), which
is safe for any order the dependencies allow; all three give bit-identical results.
"""
from __future__ import annotations

import os
import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)
import time
from collections import deque

import numpy as np

from ..kernels.blas import set_local_threads

EXECUTORS = ("linear", "dataflow", "parallel")


class TaskFailed(Exception):
    """A kernel raised: which task, and why (the context turns it into an error naming the node)."""

    def __init__(self, task: int, cause: BaseException):
        super().__init__(task, cause)
        self.task, self.cause = task, cause


class LinearExecutor:
    name = "linear"

    def __init__(self, deps=None):
        pass

    def run(self, tasks) -> None:
        t = 0
        try:
            for t, task in enumerate(tasks):
                task.run()
        except Exception as e:
            raise TaskFailed(t, e) from e


class TracingExecutor(LinearExecutor):
    """The linear order with an observer after each task, `after(index, task, seconds)`: how
    `ge compare` reads every task's outputs from one run and the profiler times each task."""

    def __init__(self, after):
        self.after = after

    def run(self, tasks) -> None:
        clock = time.perf_counter
        for t, task in enumerate(tasks):
            start = clock()
            try:
                task.run()
            except Exception as e:
                raise TaskFailed(t, e) from e
            self.after(t, task, clock() - start)


class DataflowExecutor:
    name = "dataflow"

    def __init__(self, deps):
        self.pending = [len(d) for d in deps]
        self.successors = [[] for _ in deps]
        for t, ds in enumerate(deps):
            for d in ds:
                self.successors[d].append(t)
        self.initial = [t for t, n in enumerate(self.pending) if n == 0]
        self.timings: list[tuple[int, float]] = []  # (task, seconds) of the last run, in run order

    def run(self, tasks) -> None:
        pending, ready, timings = list(self.pending), deque(self.initial), []
        clock = time.perf_counter
        while ready:
            t = ready.popleft()
            start = clock()
            try:
                tasks[t].run()
            except Exception as e:
                raise TaskFailed(t, e) from e
            timings.append((t, clock() - start))
            for s in self.successors[t]:
                pending[s] -= 1
                if pending[s] == 0:
                    ready.append(s)
        self.timings = timings


_pool = None  # the parallel executor's ThreadPoolExecutor, made on its first run
_pool_lock = _thread.allocate_lock()


def _shared_pool():
    global _pool
    with _pool_lock:
        if _pool is None:
            from concurrent.futures import ThreadPoolExecutor  # (its import: ~10 ms of every load)
            # tasks run side by side: one BLAS thread each, or concurrent GEMMs oversubscribe the cores
            _pool = ThreadPoolExecutor(max(2, os.cpu_count() or 2), thread_name_prefix="ge-parallel",
                                       initializer=set_local_threads, initargs=(1,))
        return _pool


class ParallelExecutor(DataflowExecutor):
    name = "parallel"

    def run(self, tasks) -> None:
        import threading  # (the parallel executor's: a load does not import it)
        pool, lock, done = _shared_pool(), _thread.allocate_lock(), threading.Event()
        pending, left, errors = list(self.pending), [len(tasks)], []

        def work(t: int | None) -> None:
            while t is not None:  # follow one successor on this thread: no hand-off
                try:
                    if not errors:
                        with np.errstate(all="ignore"):  # per thread: errstate is thread-local
                            tasks[t].run()
                except Exception as e:
                    errors.append(TaskFailed(t, e))
                ready = []
                with lock:
                    left[0] -= 1
                    for s in self.successors[t]:
                        pending[s] -= 1
                        if pending[s] == 0:
                            ready.append(s)
                    finished = left[0] == 0
                for s in ready[1:]:
                    pool.submit(work, s)
                t = ready[0] if ready else None
                if finished:
                    done.set()

        if not tasks:
            return
        for t in self.initial:
            pool.submit(work, t)
        done.wait()
        if errors:
            raise errors[0]


def make_executor(name: str, deps):
    cls = {"linear": LinearExecutor, "dataflow": DataflowExecutor, "parallel": ParallelExecutor}.get(name)
    if cls is None:
        from ..model.errors import GeError
        raise GeError(f"unknown executor '{name}' (choose from {', '.join(EXECUTORS)})")
    return cls(deps)
