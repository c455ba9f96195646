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

from ..kernels.blas import set_local_threads

PHASES = ("h2d_ms", "compute_ms", "d2h_ms")


def percentiles(values) -> dict:
    v = np.asarray(values, np.float64)
    return {"min": float(v.min()), "max": float(v.max()), "mean": float(v.mean()), "median": float(np.median(v)),
            "p99": float(np.percentile(v, 99))}


def run_contexts(model, inputs, contexts: int = 1, loop: int = 1, executor: str = "linear", warmup: int = 1) -> dict:
    """Run `loop` executions on each of `contexts` new contexts in parallel; return the summary."""
    in_use = model.device.in_use
    ctxs = [model.create_context(executor=executor) for _ in range(contexts)]
    per_context = (model.device.in_use - in_use) // contexts
    records: list[list[dict]] = [[] for _ in ctxs]
    errors: list[BaseException] = []
    start = threading.Barrier(contexts + 1)

    def work(i: int) -> None:
        ctx = ctxs[i]
        outputs = [np.empty(d.shape, d.dtype) for d in model.outputs]
        if contexts > 1:  # the contexts share the cores: one BLAS thread each, or they oversubscribe
            set_local_threads(1)
        try:
            for _ in range(warmup):
                ctx.execute(inputs, outputs)
            start.wait()
            for _ in range(loop):
                ctx.execute(inputs, outputs)
                records[i].append(dict(ctx.stats))
        except BaseException as e:  # reported after the join, on the caller's thread
            errors.append(e)
            start.abort()

    threads = [threading.Thread(target=work, args=(i,), name=f"ge-context-{i}") for i in range(contexts)]
    try:
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
    finally:
        for ctx in ctxs:
            model.destroy_context(ctx)
    if errors:
        raise errors[0]
    flat = [r for rs in records for r in rs]
    batch = int(model.inputs[0].shape[0]) if model.inputs and model.inputs[0].shape else 1
    summary = {phase: percentiles([r[phase] for r in flat]) for phase in PHASES}
    latency = [r["h2d_ms"] + r["compute_ms"] + r["d2h_ms"] for r in flat]
    summary.update(latency_ms=percentiles(latency), contexts=contexts, loop=loop, executor=executor, batch=batch,
                   throughput=1000.0 * batch / summary["compute_ms"]["mean"] * contexts,
                   wall_throughput=len(flat) * batch / wall, wall_s=wall,
                   memory={"weights": model.weight_bytes, "per_context": per_context,
                           "total": model.weight_bytes + contexts * per_context})
    return summary
