"""Latency of one fixed input shape through ge's four ways of compiling shapes, beside onnxruntime:
the static plan (--input_shape fixed), a gear (--dynamic_batch_size), the range plan (1~8 x 1~128)
and the fully dynamic hybrid path (-1 dims), on the BERT-style sample; and the detection sample
(static backbone submodel + unknown NMS/Gather) against onnxruntime.

    .venv/bin/python benchmarks/dynamic_shapes.py [--reps 30] [--batch 4] [--seq 64]

Prints medians in ms and the ratio to onnxruntime (intra_op_num_threads=2). Not a test.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

from ge.core import api

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def samples():
    spec = importlib.util.spec_from_file_location("build_samples", os.path.join(ROOT, "samples", "build_samples.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fn, reps: int) -> float:
    fn()  # warm-up (cache builds, first allocations)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return float(np.median(times))


def ge_ms(om: str, feeds, reps: int, select=None) -> float:
    model_id = api.load_from_file(om, "cpu")
    try:
        if select:
            select(model_id)
        return median_ms(lambda: api.execute(model_id, feeds), reps)
    finally:
        api.unload(model_id)


def ort_ms(path: str, feeds, reps: int) -> float:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ms = median_ms(lambda: sess.run(None, feeds), reps)
    del sess  # its spinning threads would slow ge's BLAS
    return ms


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    a = ap.parse_args()
    s = samples()
    tmp = tempfile.mkdtemp(prefix="ge_dyn_bench_")
    bert = os.path.join(tmp, "bert.onnx")
    onnx.save(s.bert_style(), bert)
    b, q = a.batch, a.seq
    rng = np.random.default_rng(0)
    feeds = {"input_ids": rng.integers(0, 1000, (b, q)).astype(np.int64), "attention_mask": np.ones((b, q), np.int64)}
    dyn = "input_ids:-1,-1;attention_mask:-1,-1"
    builds = {
        "static plan": dict(input_shape=f"input_ids:{b},{q};attention_mask:{b},{q}"),
        "gear": dict(input_shape=f"input_ids:-1,{q};attention_mask:-1,{q}", dynamic={"dynamic_batch_size": f"1,{b},8"}),
        "range plan": dict(input_shape="input_ids:1~8,1~128;attention_mask:1~8,1~128"),
        "fully dynamic": dict(input_shape=dyn),
    }
    reference = ort_ms(bert, feeds, a.reps)
    print(f"BERT-style (4 layers, hidden 256), input [{b}, {q}], median of {a.reps} runs, cpu")
    print(f"  {'onnxruntime':<16}{reference:9.3f} ms")
    for label, kw in builds.items():
        om = api.atc(bert, os.path.join(tmp, label.replace(" ", "_")), **kw).om_path
        ms = ge_ms(om, feeds, a.reps)
        print(f"  {'ge ' + label:<16}{ms:9.3f} ms   ge/ort {ms / reference:5.2f}")

    det = os.path.join(tmp, "det.onnx")
    onnx.save(s.detection_style(image=64), det)
    x = {"image": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)}
    reference = ort_ms(det, x, a.reps)
    om = api.atc(det, os.path.join(tmp, "det")).om_path
    ms = ge_ms(om, [x["image"]], a.reps)
    print("detection-style (64x64: known backbone submodel + NMS/Gather in the hybrid executor)")
    print(f"  {'onnxruntime':<16}{reference:9.3f} ms")
    print(f"  {'ge hybrid':<16}{ms:9.3f} ms   ge/ort {ms / reference:5.2f}")


if __name__ == "__main__":
    main()
