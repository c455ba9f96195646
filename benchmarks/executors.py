"""Throughput and latency of ge's executors and contexts, beside onnxruntime, in one run.

    python benchmarks/executors.py [--loop 30]

MobileNetV2-style with 1 and 2 contexts (linear executor), and the Inception-style sample under
each executor; onnxruntime as 1 session x 2 threads and as 2 sessions x 1 thread on 2 threads.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
import onnxruntime as ort

from ge.core import api
from ge.core.runtime.throughput import run_contexts

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from samples_vs_onnxruntime import load_samples  # noqa: E402


def ort_throughput(path: str, feeds: dict, sessions: int, threads: int, loop: int) -> float:
    def session():
        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"])

    pool = [session() for _ in range(sessions)]
    for s in pool:
        s.run(None, feeds)
    start = threading.Barrier(sessions + 1)

    def work(s):
        start.wait()
        for _ in range(loop):
            s.run(None, feeds)

    threads_ = [threading.Thread(target=work, args=(s,)) for s in pool]
    for t in threads_:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads_:
        t.join()
    rate = sessions * loop / (time.perf_counter() - t0)
    del pool, threads_  # idle onnxruntime threads spin and would slow ge's BLAS calls that follow
    gc.collect()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", type=int, default=30)
    args = parser.parse_args()
    samples = load_samples()
    print(f"{'model':<20}{'runner':<34}{'inferences/s':>14}{'median ms':>11}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model, runs in (("mobilenetv2_style", samples.mobilenetv2_style(),
                                   [("linear", 1), ("linear", 2)]),
                                  ("inception_style", samples.inception_style(),
                                   [("linear", 1), ("dataflow", 1), ("parallel", 1), ("parallel", 2)])):
            path = os.path.join(tmp, f"{name}.onnx")
            onnx.save(model, path)
            om = api.atc(path, os.path.join(tmp, name)).om_path
            model_id = api.load_from_file(om, "cpu")
            dm = api.model(model_id)
            x = np.random.default_rng(0).standard_normal(dm.inputs[0].shape).astype(np.float32)
            for executor, contexts in runs:
                s = run_contexts(dm, [x], contexts, args.loop, executor)
                print(f"{name:<20}{f'ge {executor}, {contexts} context(s)':<34}{s['wall_throughput']:>14.1f}"
                      f"{s['latency_ms']['median']:>11.2f}", flush=True)
            api.unload(model_id)
            feeds = {dm.inputs[0].name: x}
            for sessions, threads in ((1, 2), (2, 1)):
                rate = ort_throughput(path, feeds, sessions, threads, args.loop)
                print(f"{name:<20}{f'onnxruntime {sessions} session(s) x {threads} thread(s)':<34}{rate:>14.1f}"
                      f"{'':>11}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
