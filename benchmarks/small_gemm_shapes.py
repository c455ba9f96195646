"""A few-row product alone (a short sequence's MatMul + bias: tiny transformers, seq 8-128) against
onnxruntime's one-MatMul model, one thread each, CPU time:

    python benchmarks/small_gemm_shapes.py [--level v3] [--rounds 5] [--shapes 8x256x1024,12x256x1024]
    python -m tests.platforms.avx2_cpu .venv/bin/python benchmarks/small_gemm_shapes.py --level v3

Shapes are MxKxN (x [M, K] @ W [K, N] + b, W and b constants). Each engine's median of 300 calls a
round, the engines interleaved, the median round reported, with ge's GFLOP/s. Under
tests.platforms.avx2_cpu both engines see an AVX2 CPU without AVX-512 (what --level v3 is for).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402

SHAPES = "8x256x1024,8x1024x256,8x256x2048,12x256x1024,16x256x1024,32x256x1024,64x256x1024,128x768x768"


def _median_call(fn) -> float:
    return vs._median_time(fn, 300, warmup=1, cpu_time=True)  # (one thread per engine: the process's CPU time)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", default=None, help="ge's kernels: v2, v3, v4, v4vnni or numpy")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--shapes", default=SHAPES)
    args = parser.parse_args()
    if args.level:
        vs.use_level(args.level)
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    from ge.core import api
    from ge.core.kernels import blas
    blas.set_local_threads(1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    rng = np.random.default_rng(0)
    print("| M x K x N | ge | onnxruntime | ge / onnxruntime | ge GFLOP/s |\n| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            m, k, n = (int(v) for v in shape.split("x"))
            w, b = rng.standard_normal((k, n)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            graph = helper.make_graph(
                [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])], "mm",
                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
                [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
            path = os.path.join(tmp, f"mm_{shape}.onnx")
            onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
            model = api.load_from_file(api.atc(path, path[:-5]).om_path)
            session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
            x = rng.standard_normal((m, k)).astype(np.float32)
            ge_round, ort_round = [], []
            for _ in range(args.rounds):
                ge_round.append(_median_call(lambda: api.execute(model, [x])))
                ort_round.append(_median_call(lambda: session.run(None, {"x": x})))
            api.unload(model)
            g, o = statistics.median(ge_round), statistics.median(ort_round)
            print(f"| {shape} | {g * 1e6:.1f} us | {o * 1e6:.1f} us | {g / o:.2f} | {2 * m * k * n / g / 1e9:.0f} |")


if __name__ == "__main__":
    main()
