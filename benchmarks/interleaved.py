"""vs_onnxruntime.py's latency rows with both engines in ONE process, one thread each, their calls
alternating: a ratio that a drifting host does not move.

    python benchmarks/interleaved.py --only dbnet_160x960,mobilenetv2_b8 [--calls 40]

vs_onnxruntime.py gives each engine its own process, so neither sees the other's threads, heap or caches;
on a host whose speed changes by 10-30% within minutes (the Zen 3 machine of docs/performance.md,
2026-12-02) two processes a few seconds apart no longer run at one speed, and a row's ratio moves by 0.1-0.3
between runs. Here ge and onnxruntime (intra- and inter-op threads 1) run call after call in turn, each
call timed by the thread's CPU time, so both meet the same host. The price: each call finds the caches as
the other engine left them (its weights partly evicted), which neither meets in production. Prints per row
the engines' median calls, the ratio of the medians and the quartiles of the per-pair ratios.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402  (the rows and their models)


def interleaved(job: dict, calls: int) -> tuple[list[float], list[float]]:
    """Seconds of each engine's calls, alternating (after two warm-up calls each)."""
    import numpy as np
    import onnxruntime as ort
    from ge.core import api
    feeds = dict(np.load(job["npz"]))
    model_id = api.load_from_file(job["om"], "cpu")
    inputs = [feeds[d.name] for d in api.model(model_id).inputs]
    session = ort.InferenceSession(job["onnx"], vs._ort_options(1), providers=["CPUExecutionProvider"])
    runs = (lambda: api.execute(model_id, inputs), lambda: session.run(None, feeds))
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(2 + calls):
        for run, spent in zip(runs, times):
            start = time.thread_time()
            run()
            if i >= 2:
                spent.append(time.thread_time() - start)
    api.unload(model_id)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", required=True, help="comma-separated latency rows of vs_onnxruntime.py")
    parser.add_argument("--calls", type=int, default=40, help="calls per engine and row")
    args = parser.parse_args()
    from ge.core.kernels import blas
    blas.set_local_threads(1)  # ge's native kernels and OpenBLAS, for calls from this thread
    rows = {row.key: row for row in vs.full_rows()}
    unknown = [key for key in args.only.split(",") if key not in rows or rows[key].kind != "latency"]
    if unknown:
        raise SystemExit(f"not latency rows of vs_onnxruntime.py: {', '.join(unknown)}")
    chosen = [rows[key] for key in args.only.split(",")]
    import numpy as np
    print(f"one process, one thread per engine, calls alternating, CPU time; CPU: {vs.cpu_name()}")
    print("| workload | ge | onnxruntime | ge / onnxruntime | per-pair ratios (quartiles) |")
    print("| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        jobs = vs.prepare(chosen, tmp)
        for row in chosen:
            ge, theirs = interleaved(jobs[row.key], args.calls)
            q1, _, q3 = np.quantile([a / b for a, b in zip(ge, theirs)], [0.25, 0.5, 0.75])
            g, o = statistics.median(ge), statistics.median(theirs)
            print(f"| {row.label} | {g * 1e3:.3g} ms | {o * 1e3:.3g} ms | {g / o:.2f} | {q1:.2f}-{q3:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
