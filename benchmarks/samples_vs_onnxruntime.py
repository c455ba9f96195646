"""Median latency of each sample model with ge (cpu device) and onnxruntime (2 threads), in one run.

    python benchmarks/samples_vs_onnxruntime.py [--runs 30] [--rounds 3] [--only resnet50_style,bert_style]

Prints one row per model: ge ms, onnxruntime ms, and the ratio ge / onnxruntime (lower is better).
Rounds alternate onnxruntime and ge, and each figure is the best round's median: this machine is
shared, and a load spike then moves both alike instead of one of them.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

from ge.core import api

HERE = os.path.dirname(os.path.abspath(__file__))


def load_samples():
    spec = importlib.util.spec_from_file_location("build_samples", os.path.join(HERE, "..", "samples", "build_samples.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def median_ms(fn, runs: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def onnxruntime_ms(path: str, feeds: dict, runs: int) -> float:
    """onnxruntime with 2 intra-op threads. The session is dropped before returning: its idle
    threads spin and slow every BLAS call made while it lives (measured: 10x and more)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    try:
        return median_ms(lambda: session.run(None, feeds), runs)
    finally:
        del session
        gc.collect()


def feeds_for(model: onnx.ModelProto, shapes: dict, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = shapes[vi.name]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
            if "mask" in vi.name:
                feeds[vi.name] = np.ones(shape, np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def cases(samples):
    yield "resnet50_style", samples.resnet50_style(), {"input": None}
    yield "mobilenetv2_style", samples.mobilenetv2_style(), {"input": None}
    yield "bert_style", samples.bert_style(), {"input_ids": [1, 128], "attention_mask": [1, 128]}


def compiled_samples(tmp: str, only=()):
    """Each sample of cases() saved in `tmp`, compiled at its benchmark shapes and loaded on cpu:
    yields (name, onnx path, feeds, model id, input arrays, output buffers); unloaded after."""
    for name, model, shapes in cases(load_samples()):
        if only and name not in only:
            continue
        path = os.path.join(tmp, f"{name}.onnx")
        onnx.save(model, path)
        shapes = {vi.name: shapes.get(vi.name) or [d.dim_value for d in vi.type.tensor_type.shape.dim]
                  for vi in model.graph.input}
        spec = ";".join(f"{n}:{','.join(map(str, s))}" for n, s in shapes.items())
        result = api.atc(path, os.path.join(tmp, name), input_shape=spec)
        feeds = feeds_for(model, shapes)
        model_id = api.load_from_file(result.om_path, "cpu")
        loaded = api.model(model_id)
        try:
            yield (name, path, feeds, model_id, [feeds[d.name] for d in loaded.inputs],
                   [np.empty(d.shape, d.dtype) for d in loaded.outputs])
        finally:
            api.unload(model_id)


def sample_arguments(doc: str):
    """The sample benchmarks' command line (--runs, --rounds, --only a,b): (args, the --only set)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    return args, set(filter(None, args.only.split(",")))


def main() -> None:
    args, only = sample_arguments(__doc__)
    print(f"{'model':<20}{'ge ms':>10}{'ort ms':>10}{'ge/ort':>9}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, feeds, model_id, inputs, outputs in compiled_samples(tmp, only):
            ge_ms = ort_ms = float("inf")
            for _ in range(args.rounds):
                ort_ms = min(ort_ms, onnxruntime_ms(path, feeds, args.runs))
                ge_ms = min(ge_ms, median_ms(lambda: api.execute(model_id, inputs, outputs), args.runs))
            print(f"{name:<20}{ge_ms:>10.2f}{ort_ms:>10.2f}{ge_ms / ort_ms:>9.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
