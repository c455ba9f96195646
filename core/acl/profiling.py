"""Per-task profiles of a loaded model (`ge run --profile`, onnxruntime's profiler): every task of
every timed execution as a Chrome trace event (`{"traceEvents": [...]}`, complete events
"ph": "X", opens in Perfetto and chrome://tracing), the H2D/D2H copies as their own events, and
a table per op type. One context of its own, the linear order with an observer after each task.
The same observer dumps every task's outputs (msame's and ais_bench's `--dump`)."""
from __future__ import annotations

import os
import re
import time

import numpy as np

from ..model.errors import GeError
from ..runtime.davinci_model import DavinciModel
from ...formats.atomic import make_folder, write_atomically
from ...formats.tensors import random_inputs
from .models import model as loaded_model

TASKS_TID, COPIES_TID = 0, 1


def profile(model_id: int, inputs=None, *, runs: int = 1, warmup: int = 1, seed: int = 0,
            origin: float | None = None) -> dict:
    """{"traceEvents": [...], "ops": [{op, count, total_ms, mean_us, share}], "runs": n} for `runs`
    executions after `warmup` untimed ones. `inputs`: arrays in input order (random when None).
    `origin`: the time.perf_counter() that is ts 0 (several profiles on one timeline); default now."""
    dm = traced_model(model_id, inputs)
    if runs < 1:
        raise GeError(f"runs={runs}: profile at least one run")
    feeds = random_inputs(dm.inputs, seed) if inputs is None else [np.asarray(x) for x in inputs]
    ctx = dm.create_context()
    try:
        for _ in range(warmup):
            ctx.execute(feeds)
        trace = TaskTrace(ctx, origin)
        for k in range(runs):
            start = time.perf_counter()
            ctx.execute(feeds)
            trace.executed(k, start, time.perf_counter() - start)
    finally:
        dm.destroy_context(ctx)
    return trace.result(dm, runs)


def traced_model(model_id: int, inputs=None) -> DavinciModel:
    """The static model the profiler traces: the model, or the gear of a gear model that runs `inputs`."""
    return _static(model_id, "the profiler traces", inputs)


class TaskTrace:
    """Every task and copy of a context's executions as trace events: the context runs its tasks in
    the linear order with an observer after each (so a timed loop can be its own trace)."""

    def __init__(self, ctx, origin: float | None = None):
        self.ctx, self.origin = ctx, time.perf_counter() if origin is None else origin
        self.events: list[dict] = []
        self._tasks: list = []
        self._copies: list = []
        ctx.observe(lambda t, task, seconds: self._tasks.append((t, time.perf_counter() - seconds, seconds)),
                    self._copies)

    def discard(self) -> None:
        """Forget what ran since the last execution was recorded (warm-up runs)."""
        self._tasks.clear()
        self._copies.clear()

    def executed(self, k: int, start: float, seconds: float) -> None:
        """Execution k, which began at `start` and took `seconds`: its event, its tasks' and copies'."""
        self.events.append(_event(f"execute #{k}", "execute", start, seconds, self.origin, COPIES_TID + 1))
        for t, begin, took in self._tasks:
            p = self.ctx.handle[t].plan
            self.events.append(_event(p.name, _op(p), begin, took, self.origin, TASKS_TID, run=k, task=t))
        for kind, begin, took, nbytes in self._copies:
            self.events.append(_event(kind.upper(), "copy", begin, took, self.origin, COPIES_TID, run=k, bytes=nbytes))
        self.discard()

    def result(self, dm, runs: int) -> dict:
        return {"traceEvents": trace_meta() + self.events, "ops": op_table(self.events), "runs": runs,
                "model": dm.name, "device": dm.device.name}


def trace_meta() -> list[dict]:
    """The names of the trace's rows (Chrome trace metadata events)."""
    return [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid, "args": {"name": name}}
            for tid, name in ((TASKS_TID, "tasks"), (COPIES_TID, "copies"), (COPIES_TID + 1, "executions"))]


def _op(plan) -> str:
    """The op type as run: a fused node shows what it absorbed (FusedConv+Relu)."""
    ep = plan.epilogue
    return plan.kernel.op_type + "".join(f"+{k.op_type}" for k, _ in (ep.steps if ep is not None else ()))


def _event(name: str, op: str, start: float, seconds: float, origin: float, tid: int, **args) -> dict:
    return {"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": round((start - origin) * 1e6, 3),
            "dur": round(seconds * 1e6, 3), "args": {"op": op, **args}}


def op_table(events: list[dict]) -> list[dict]:
    """Per op type over the task events: count, total ms, mean us, share of the tasks' time; largest first."""
    totals: dict[str, list] = {}
    for e in events:
        if e.get("tid") == TASKS_TID and e.get("ph") == "X":
            acc = totals.setdefault(e["args"]["op"], [0, 0.0])
            acc[0] += 1
            acc[1] += e["dur"]
    whole = sum(t for _, t in totals.values()) or 1.0
    rows = [{"op": op, "count": n, "total_ms": round(us / 1e3, 4), "mean_us": round(us / n, 2),
             "share": round(us / whole, 4)} for op, (n, us) in totals.items()]
    return sorted(rows, key=lambda r: -r["total_ms"])


def dump(model_id: int, inputs, folder: str) -> list[str]:
    """Run once and write every task's outputs (an ACL dump in "output" mode) as
    `folder/<task>_<op>_<node>_output_<j>.npy`, task in run order; returns the files written."""
    dm = _static(model_id, "the dump covers", inputs)
    taken: list[tuple[int, int, np.ndarray]] = []

    def keep(t: int, task, seconds: float) -> None:
        taken.extend((t, j, np.array(y)) for j, y in enumerate(task.ys) if y is not None)

    ctx = dm.create_context()
    try:
        ctx.observe(keep)
        ctx.execute([np.asarray(x) for x in inputs])
        plans = [ctx.handle[t].plan for t in range(len(ctx.handle))]
    finally:
        dm.destroy_context(ctx)
    make_folder(folder, f"dump folder '{folder}'")
    files = []
    for t, j, y in taken:
        p = plans[t]
        path = os.path.join(folder, f"{t:04d}_{_safe(_op(p))}_{_safe(p.name)}_output_{j}.npy")
        write_atomically(path, lambda f, y=y: np.save(f, y, allow_pickle=False), label=f"dump file '{path}'")
        files.append(path)
    return files


def _static(model_id: int, what: str, inputs=None) -> DavinciModel:
    """The static model that runs: the model itself, or a gear model's gear for these inputs (the
    one set with set_dynamic_* first, else the first gear when no inputs are given)."""
    dm = loaded_model(model_id)
    static = dm.static_model(inputs)
    if static is None:
        raise GeError(f"model {model_id} ('{dm.name}') has dynamic shapes; {what} static models and gears")
    return static


def _safe(name: str) -> str:
    """A node name as part of a file name."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name) or "_"
