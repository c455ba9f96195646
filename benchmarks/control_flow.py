"""Control flow beside onnxruntime: a Loop with a static body (an RNN cell, as a generation loop
runs it), a Loop whose carried state grows every iteration, a Scan, and a runtime If in front of
an LSTM step (a voice-activity detector's shape).

    .venv/bin/python benchmarks/control_flow.py [--reps 20] [--steps 200] [--cpu-time]

Prints medians in ms and the ratio to onnxruntime (intra_op_num_threads=2). A Loop's cost in ge is
mostly the per-iteration launch of its body (a subgraph run of the hybrid executor), so the ratio
falls as the body grows. On a loaded machine wall times mostly measure the scheduler (a run longer
than a time slice is preempted): --cpu-time runs both engines on one thread (ge's native kernels
and OpenBLAS, onnxruntime's intra-op pool) and gives medians of the process's CPU time. Not a test.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import onnxruntime as ort
from dynamic_shapes import ge_ms, ort_ms  # benchmarks/ is the script's folder

from ge.core import api
from ge.core.kernels import blas

F, I64, B = T.FLOAT, T.INT64, T.BOOL


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model(nodes, inputs, outputs, inits=()):
    return helper.make_model(helper.make_graph(nodes, "bench", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid("", 17)])


def rnn_loop(hidden: int):
    """h <- tanh(h W + b) for M steps, every h a scan output."""
    rng = np.random.default_rng(0)
    body = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Add", ["a", "b"], ["z"]),
                              helper.make_node("Tanh", ["z"], ["h2"]), helper.make_node("Identity", ["c"], ["c2"]),
                              helper.make_node("Identity", ["h2"], ["y"])], "cell",
                             [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, hidden])],
                             [vi("c2", B, []), vi("h2", F, [1, hidden]), vi("y", F, [1, hidden])])
    inits = [const("W", (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)),
             const("b", rng.standard_normal((1, hidden)).astype(np.float32) * 0.1)]
    return model([helper.make_node("Loop", ["M", "", "h0"], ["hN", "hs"], body=body)],
                 [vi("M", I64, []), vi("h0", F, [1, hidden])], [vi("hN", F, [1, hidden]), vi("hs", F, [None, 1, hidden])],
                 inits)


def growing_loop():
    """The carried sequence gets one row per iteration (its shape changes: the body runs dynamic)."""
    body = helper.make_graph([helper.make_node("Slice", ["seq", "m1", "big", "zero"], ["last"]),
                              helper.make_node("Sin", ["last"], ["nxt"]),
                              helper.make_node("Concat", ["seq", "nxt"], ["seq2"], axis=0),
                              helper.make_node("Identity", ["c"], ["c2"])], "grow",
                             [vi("i", I64, []), vi("c", B, []), vi("seq", F, [None, 16])],
                             [vi("c2", B, []), vi("seq2", F, [None, 16])],
                             [const("m1", np.array([-1], np.int64)), const("big", np.array([1 << 30], np.int64)),
                              const("zero", np.array([0], np.int64))])
    return model([helper.make_node("Loop", ["M", "", "s0"], ["seq"], body=body)],
                 [vi("M", I64, []), vi("s0", F, [1, 16])], [vi("seq", F, [None, 16])])


def cumsum_scan(width: int):
    body = helper.make_graph([helper.make_node("Add", ["acc", "x"], ["acc2"]), helper.make_node("Relu", ["acc2"], ["y"])],
                             "cumsum", [vi("acc", F, [width]), vi("x", F, [width])], [vi("acc2", F, [width]), vi("y", F, [width])])
    return model([helper.make_node("Scan", ["a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1)],
                 [vi("a0", F, [width]), vi("xs", F, ["steps", width])], [vi("a", F, [width]), vi("ys", F, ["steps", width])])


def if_lstm(hidden: int = 64, feat: int = 256):
    """If (sample rate) picks a front end, an LSTM step carries (h, c): a VAD call."""
    rng = np.random.default_rng(1)
    w16, w8 = (rng.standard_normal((512, feat)).astype(np.float32) * 0.05 for _ in range(2))
    b16 = helper.make_graph([helper.make_node("MatMul", ["x", "w16"], ["f"]), helper.make_node("Relu", ["f"], ["o16"])],
                            "sr16", [], [vi("o16", F, None)], [const("w16", w16)])
    b8 = helper.make_graph([helper.make_node("MatMul", ["x", "w8"], ["g"]), helper.make_node("Tanh", ["g"], ["o8"])],
                           "sr8", [], [vi("o8", F, None)], [const("w8", w8)])
    W = rng.standard_normal((1, 4 * hidden, feat)).astype(np.float32) * 0.05
    R = rng.standard_normal((1, 4 * hidden, hidden)).astype(np.float32) * 0.05
    nodes = [helper.make_node("Equal", ["sr", "k16"], ["is16"]),
             helper.make_node("If", ["is16"], ["feat"], then_branch=b16, else_branch=b8),
             helper.make_node("Unsqueeze", ["feat", "ax0"], ["seq"]),
             helper.make_node("LSTM", ["seq", "W", "R", "", "", "h0", "c0"], ["Y", "hn", "cn"], hidden_size=hidden)]
    inits = [const("k16", np.int64(16000)), const("ax0", np.array([0], np.int64)), const("W", W), const("R", R)]
    return model(nodes, [vi("x", F, [1, 512]), vi("sr", I64, []), vi("h0", F, [1, 1, hidden]), vi("c0", F, [1, 1, hidden])],
                 [vi("Y", F, [1, 1, 1, hidden]), vi("hn", F, [1, 1, hidden]), vi("cn", F, [1, 1, hidden])], inits)


def cpu_ms(fn, reps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(reps):
        t = time.process_time()
        fn()
        times.append((time.process_time() - t) * 1e3)
    return float(np.median(times))


def ge_cpu_ms(om: str, feeds, reps: int) -> float:
    model_id = api.load_from_file(om, "cpu")
    try:
        return cpu_ms(lambda: api.execute(model_id, feeds), reps)
    finally:
        api.unload(model_id)


def ort_cpu_ms(path: str, feeds, reps: int) -> float:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    return cpu_ms(lambda: sess.run(None, feeds), reps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--cpu-time", action="store_true", help="one thread per engine, medians of CPU time")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ge_cf_bench_")
    rng = np.random.default_rng(0)
    n = a.steps
    rows = [
        (f"Loop, static RNN cell 64, {n} steps", rnn_loop(64),
         {"M": np.array(n, np.int64), "h0": rng.standard_normal((1, 64)).astype(np.float32)}),
        (f"Loop, static RNN cell 512, {n} steps", rnn_loop(512),
         {"M": np.array(n, np.int64), "h0": rng.standard_normal((1, 512)).astype(np.float32)}),
        (f"Loop, growing state, {n} steps", growing_loop(),
         {"M": np.array(n, np.int64), "s0": rng.standard_normal((1, 16)).astype(np.float32)}),
        (f"Scan, cumsum [1024], {n} steps", cumsum_scan(1024),
         {"a0": np.zeros(1024, np.float32), "xs": rng.standard_normal((n, 1024)).astype(np.float32)}),
        ("If + LSTM step (VAD call)", if_lstm(),
         {"x": rng.standard_normal((1, 512)).astype(np.float32), "sr": np.array(16000, np.int64),
          "h0": np.zeros((1, 1, 64), np.float32), "c0": np.zeros((1, 1, 64), np.float32)}),
    ]
    if a.cpu_time:
        blas.set_local_threads(1)
    print(f"control flow, median of {a.reps} runs, cpu{', CPU time of one thread per engine' if a.cpu_time else ''}")
    for k, (label, m, feeds) in enumerate(rows):
        path = os.path.join(tmp, f"m{k}.onnx")
        onnx.save(m, path)
        shapes = ";".join(f"{name}:{','.join(map(str, x.shape))}" for name, x in feeds.items())
        om = api.atc(path, os.path.join(tmp, f"m{k}"), input_shape=shapes).om_path
        if a.cpu_time:
            reference, ms = ort_cpu_ms(path, feeds, a.reps), ge_cpu_ms(om, feeds, a.reps)
        else:
            reference, ms = ort_ms(path, feeds, a.reps), ge_ms(om, feeds, a.reps)
        print(f"  {label:<38} ort {reference:9.3f} ms   ge {ms:9.3f} ms   ge/ort {ms / reference:6.2f}")


if __name__ == "__main__":
    main()
