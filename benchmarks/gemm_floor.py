"""How fast could ge be with numpy's BLAS? The "GEMM floor" of each sample beside onnxruntime, in one run.

    python benchmarks/gemm_floor.py [--runs 30] [--rounds 3] [--only resnet50_style,bert_style]

For each sample the script compiles the model with ge, collects the matrix products its kernels
compute (Conv and FusedConv as OC x C*k*k @ C*k*k x H*W per batch item and group, MatMul,
FusedMatMul, Gemm) and times exactly those products with np.matmul on preallocated operands, one
after the other as an execution would run them. That is the floor of a ge built on numpy's BLAS:
the latency of one that spent nothing outside it. (ge's native kernels go below it: ge / floor
under 1.)
Rounds alternate onnxruntime, ge and the floor, and each figure is the best round's median, so a
load spike on this shared machine moves all three alike. Columns: ge ms, onnxruntime ms, floor ms,
floor / onnxruntime (what numpy's BLAS alone allows) and ge / floor (ge's cost beyond BLAS).
Depthwise convolutions are not GEMMs and are left out of the floor.
"""
from __future__ import annotations

import math
import os
import sys
import tempfile

import numpy as np

from ge.core import api

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from samples_vs_onnxruntime import compiled_samples, median_ms, onnxruntime_ms, sample_arguments  # noqa: E402


def gemm_shapes(kernel) -> list[tuple[int, int, int, int]]:
    """(batch, M, K, N) of the matrix products one kernel computes; [] for the rest."""
    op, ins = kernel.op_type, kernel.inputs
    if op in ("Conv", "FusedConv"):
        x, w = ins[0].shape, ins[1].shape
        n, c, oc, g = x[0], x[1], w[0], int(kernel.attrs.get("group", 1))
        if g > 1 and g == c and w[1] == 1:
            return []  # depthwise
        out = kernel.infer()[0].shape
        return [(n * g, oc // g, w[1] * math.prod(w[2:]), math.prod(out[2:]))]
    if op in ("MatMul", "FusedMatMul", "Gemm"):
        out = kernel.infer()[0].shape
        a = ins[0].shape
        if op == "FusedMatMul" and kernel.perm_a is not None:
            a = tuple(a[p] for p in kernel.perm_a)
        if op == "Gemm":
            k = a[0] if kernel.ta else a[1]
            return [(1, out[0], k, out[1])]
        m, n = (out[-2], out[-1]) if len(out) >= 2 else (1, out[-1])
        batch = math.prod(out[:-2]) if len(out) > 2 else 1
        if len(ins[1].shape) == 2:  # a stack of rows times one matrix: one GEMM
            return [(1, batch * m, a[-1], n)]
        return [(batch, m, a[-1], n)]
    return []


def floor_runner(shapes):
    rng = np.random.default_rng(0)
    ops = [(rng.standard_normal((b, m, k), np.float32), rng.standard_normal((b, k, n), np.float32),
            np.empty((b, m, n), np.float32)) for b, m, k, n in shapes]

    def run():
        for a, b, c in ops:
            np.matmul(a, b, out=c)
    return run


def main() -> None:
    args, only = sample_arguments(__doc__)
    print(f"{'model':<20}{'ge ms':>9}{'ort ms':>9}{'floor ms':>10}{'floor/ort':>11}{'ge/floor':>10}  GFLOP")
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, feeds, model_id, inputs, outputs in compiled_samples(tmp, only):
            handle = api.model(model_id).default_context.handle
            products = [s for task in handle for s in gemm_shapes(task.plan.kernel)]
            floor = floor_runner(products)
            best = {"ge": math.inf, "ort": math.inf, "floor": math.inf}
            for _ in range(args.rounds):
                best["ort"] = min(best["ort"], onnxruntime_ms(path, feeds, args.runs))
                best["ge"] = min(best["ge"], median_ms(lambda: api.execute(model_id, inputs, outputs), args.runs))
                best["floor"] = min(best["floor"], median_ms(floor, args.runs))
            gflop = sum(2 * b * m * k * n for b, m, k, n in products) / 1e9
            print(f"{name:<20}{best['ge']:>9.2f}{best['ort']:>9.2f}{best['floor']:>10.2f}"
                  f"{best['floor'] / best['ort']:>11.2f}{best['ge'] / best['floor']:>10.2f}  {gflop:.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
