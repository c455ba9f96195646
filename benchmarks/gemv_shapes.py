"""The one-row product alone (a decoding step's MatMuls at seq 1) against numpy's OpenBLAS sgemv and
onnxruntime's one-MatMul model, one thread each, CPU time:

    python benchmarks/gemv_shapes.py [--level v3] [--rounds 3] [--shapes 256x1024,768x256]

Shapes are KxN (x [1, K] @ W [K, N], W a constant: 4 K N bytes). Rows: ge's packed GEMV (csrc/gemv.c,
ge_gemv_panels, W packed once at load), ge's row GEMV (ge_gemv over W^T's rows, what conv_native and
the recurrent projection still use), numpy (x @ W) and onnxruntime; each a median of batches of
calls, the engines interleaved round after round, the median round reported.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

SHAPES = "256x256,256x768,256x1024,1024x256,256x2048,768x768,768x2304,768x3072,3072x768,1024x3072"


def _per_call(fn, seconds: float = 0.05) -> float:
    """Median CPU seconds per call over batches sized to about 2 ms."""
    fn()
    t0 = time.process_time()
    n = 0
    while time.process_time() - t0 < 0.002:
        fn()
        n += 1
    times = []
    end = time.process_time() + seconds
    while time.process_time() < end or len(times) < 5:
        t0 = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - t0) / n)
    return statistics.median(times)


def _ort_matmul(w: np.ndarray):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    k, n = w.shape
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--level", default=None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", default=SHAPES)
    args = parser.parse_args()
    from ge.core.kernels.native import load_level, native, set_threads
    nat = load_level(args.level) if args.level else native()
    set_threads(1)
    print(f"level {args.level or 'best'}, one thread each, CPU time per call (us), median of {args.rounds} rounds")
    print("| K x N | weights | ge packed | ge rows | numpy sgemv | onnxruntime | packed/ort | packed/numpy |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    rng = np.random.default_rng(0)
    for shape in args.shapes.split(","):
        k, n = map(int, shape.split("x"))
        w = rng.standard_normal((k, n)).astype(np.float32)
        x = rng.standard_normal((1, k)).astype(np.float32)
        y = np.empty((1, n), np.float32)
        packed = nat.gemv_panels_call(1, x, k, nat.gemv_pack(w), k, n, y, n)
        rows = nat.gemv_call(1, x, k, np.ascontiguousarray(w.T), y, n)
        session = _ort_matmul(w)
        feeds = {"x": x}
        engines = {"packed": packed.run, "rows": rows.run, "numpy": lambda: np.matmul(x, w, out=y),
                   "ort": lambda: session.run(None, feeds)}
        times = {e: [] for e in engines}
        for _ in range(args.rounds):
            for e, fn in engines.items():
                times[e].append(_per_call(fn) * 1e6)
        t = {e: statistics.median(v) for e, v in times.items()}
        print(f"| {k} x {n} | {4 * k * n / 2**20:.2f} MB | {t['packed']:.1f} | {t['rows']:.1f} | {t['numpy']:.1f} | "
              f"{t['ort']:.1f} | {t['packed'] / t['ort']:.2f} | {t['packed'] / t['numpy']:.2f} |")


if __name__ == "__main__":
    main()
