"""Throughput mode: N contexts of one model executing at once, as ais_bench measures it.

Each context runs on its own thread with its own feature maps, args table and stream (the
weights are shared). Per execution the context reports its H2D, compute and D2H phases; the
summary gives each phase's min/max/mean/median/p99 and throughput = 1000 * batch / mean compute ms
per context times the number of contexts, beside the wall-clock throughput actually reached.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..model.errors import GeError
from ..kernels.blas import set_local_threads
from .loaded_model import STATIC

PHASES = ("h2d_ms", "compute_ms", "d2h_ms")


def percentiles(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"min": float(v.min()), "max": float(v.max()), "mean": float(v.mean()), "median": float(np.median(v)),
            "p99": float(np.percentile(v, 99))}


def run_contexts(model, inputs, contexts: int = 1, loop: int = 1, executor: str = "linear", warmup: int = 1) -> dict:
    """Run `loop` executions on each of `contexts` new contexts in parallel; return the summary.
    Any kind of model: static, gears, ranges, unknown shapes. A worker that fails stops the others
    at their next execution, and its error is raised here, once every thread has ended."""
    device, in_use = model.device, model.device.in_use
    records: list[list[dict]] = [[] for _ in range(contexts)]
    errors: list[tuple[int, BaseException]] = []
    failed = threading.Event()
    start = threading.Barrier(contexts + 1)
    ctxs: list = []
    # a static model's outputs fit fixed buffers; a dynamic model's shapes are known once it ran
    fixed = model.shape_mode == STATIC

    def work(i: int) -> None:
        try:
            ctx = ctxs[i]
            outputs = [np.empty(d.shape, d.dtype) for d in model.outputs] if fixed else None
            if contexts > 1:  # the contexts share the cores: one BLAS thread each, or they oversubscribe
                set_local_threads(1)
            for _ in range(warmup):
                ctx.execute(inputs, outputs)
            start.wait()
            for _ in range(loop):
                if failed.is_set():
                    return
                ctx.execute(inputs, outputs)
                records[i].append(dict(ctx.stats))
        except threading.BrokenBarrierError:
            pass  # another worker failed: its error is the one reported
        except BaseException as e:  # reported after the join, on the caller's thread
            errors.append((i, e))
            failed.set()
            start.abort()

    threads = [threading.Thread(target=work, args=(i,), name=f"ge-context-{i}", daemon=True)
               for i in range(contexts)]
    try:
        for _ in range(contexts):
            ctxs.append(model.create_context(executor=executor))
        for t in threads:
            t.start()
        try:
            start.wait()
        except threading.BrokenBarrierError:
            pass
        t0 = time.perf_counter()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        # after the runs (dynamic contexts grow as they run), each context's own: a gear initialised
        # meanwhile holds memory of the model's, not of a context
        per_context = max(getattr(c, "device_bytes", (device.in_use - in_use) // contexts) for c in ctxs)
    finally:
        failed.set()
        start.abort()  # threads never started, or the caller interrupted: nobody waits on the barrier
        for ctx in ctxs:
            model.destroy_context(ctx)
    if errors:
        raise _worker_error(*errors[0])
    flat = [r for rs in records for r in rs]
    first = next(iter(inputs.values() if isinstance(inputs, dict) else inputs), None)
    batch = int(np.shape(first)[0]) if first is not None and np.ndim(first) else 1
    summary = {phase: percentiles([r[phase] for r in flat]) for phase in PHASES}
    latency = [r["h2d_ms"] + r["compute_ms"] + r["d2h_ms"] for r in flat]
    summary.update(latency_ms=percentiles(latency), contexts=contexts, loop=loop, executor=executor, batch=batch,
                   throughput=1000.0 * batch / summary["compute_ms"]["mean"] * contexts,
                   wall_throughput=len(flat) * batch / wall, wall_s=wall,
                   memory={"weights": model.weight_bytes, "per_context": per_context,
                           "total": model.weight_bytes + contexts * per_context})
    return summary


def _worker_error(i: int, e: BaseException) -> BaseException:
    """A worker's failure as the run's one-line error: a GeError names the context; anything else
    (a bug) is wrapped so that it still reads as one line, its cause kept for --debug."""
    if isinstance(e, GeError):
        err = type(e)(f"context {i}: {e}")
        err.__cause__ = e
        return err
    if not isinstance(e, Exception):  # KeyboardInterrupt, SystemExit: as they are
        return e
    err = GeError(f"context {i} failed: {type(e).__name__}: {e}")
    err.__cause__ = e
    return err
