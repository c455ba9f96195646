"""What a compiler pass buys: a sample compiled with the full pipeline and without some passes,
timed in alternation (one execution of each in turn), so that load from other processes hits
both alike; prints each variant's median and the median of the paired ratios.

    python benchmarks/pass_ablation.py --without fuse_gelu[,fuse_matmul] [--model bert_style]
                                       [--input_shape "input_ids:1,128;attention_mask:1,128"] [--runs 200]
                                       [--kwargs "batch=8"] [--single-thread]

--single-thread runs ge's native kernels on this thread alone and times CPU time (on a loaded machine,
wall time of 2 threads mostly measures the scheduler); --kwargs are the sample builder's arguments.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx

from ge.core import api
from ge.core import passes

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from profile_ops import DEFAULT_SHAPES  # noqa: E402
from samples_vs_onnxruntime import feeds_for, load_samples  # noqa: E402


def compiled(path: str, out: str, spec: str, pipeline: list, feeds: dict):
    """An execute() closure for the sample compiled with `pipeline`, and its task count."""
    full = list(passes.PIPELINE)
    passes.PIPELINE[:] = pipeline
    try:
        result = api.atc(path, out, input_shape=spec or None)
    finally:
        passes.PIPELINE[:] = full
    model_id = api.load_from_file(result.om_path, "cpu")
    loaded = api.model(model_id)
    inputs = [feeds[d.name] for d in loaded.inputs]
    outputs = [np.empty(d.shape, d.dtype) for d in loaded.outputs]
    return (lambda: api.execute(model_id, inputs, outputs)), len(loaded.default_context.handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--without", required=True, help="comma-separated pass names (keys of passes.PIPELINE)")
    parser.add_argument("--model", default="bert_style")
    parser.add_argument("--input_shape", default=None)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--kwargs", default="", help="the sample builder's arguments, e.g. batch=8,image=160")
    parser.add_argument("--single-thread", action="store_true")
    args = parser.parse_args()
    clock = time.perf_counter
    if args.single_thread:
        from ge.core.kernels import blas
        blas.set_local_threads(1)  # ge's native kernels and OpenBLAS, for calls from this thread
        clock = time.process_time
    kwargs = {k: (float(v) if "." in v else int(v)) for k, v in (kv.split("=") for kv in args.kwargs.split(",") if kv)}
    drop = set(filter(None, args.without.split(",")))
    unknown = drop - {key for key, _ in passes.PIPELINE}
    if unknown:
        parser.error(f"no such pass: {', '.join(sorted(unknown))}")
    model = getattr(load_samples(), args.model)(**kwargs)
    spec = args.input_shape if args.input_shape is not None else DEFAULT_SHAPES.get(args.model, "")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{args.model}.onnx")
        onnx.save(model, path)
        shapes = {name: [int(d) for d in dims.split(",")] for name, dims in
                  (part.split(":") for part in spec.split(";") if part)}
        shapes.update({vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
                       for vi in model.graph.input if vi.name not in shapes})
        feeds = feeds_for(model, shapes)
        variants = {"full pipeline": compiled(path, os.path.join(tmp, "full"), spec, list(passes.PIPELINE), feeds),
                    f"without {','.join(sorted(drop))}": compiled(
                        path, os.path.join(tmp, "without"), spec, [p for p in passes.PIPELINE if p[0] not in drop], feeds)}
    names = list(variants)
    times: dict[str, list[float]] = {n: [] for n in names}
    for run, _ in variants.values():
        run()  # warm-up
    for i in range(args.runs):
        for name in names if i % 2 == 0 else names[::-1]:
            t0 = clock()
            variants[name][0]()
            times[name].append(clock() - t0)
    for name in names:
        print(f"{name:<40}{variants[name][1]:>5} tasks {statistics.median(times[name]) * 1e3:>8.2f} ms")
    ratios = [a / b for a, b in zip(*(times[n] for n in names))]
    print(f"full / without, median of paired ratios: {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    sys.exit(main())
