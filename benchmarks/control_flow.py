"""Control flow beside onnxruntime: a Loop with a static body (an RNN cell, as a generation loop
runs it), the same with a condition that ends it early, a Loop whose carried state grows every
iteration, Scans (a cumulative sum, an RNN step over a long sequence), and a runtime If in front of
an LSTM step (a voice-activity detector's shape).

    .venv/bin/python benchmarks/control_flow.py [--reps 20] [--steps 200] [--rounds 1] [--single-thread]

Prints medians in ms, the time of one iteration (us a step) and the ratio to onnxruntime
(intra_op_num_threads=2). A static body (one static submodel) runs bound once, its iterations its
kernels and a few copies; a dynamic one (the growing state) runs its nodes one by one each
iteration. On a loaded machine wall times mostly measure the scheduler (a run longer than a time
slice is preempted): --single-thread (or --cpu-time) runs both engines on one thread (ge's native
kernels and OpenBLAS, onnxruntime's intra-op pool) and gives medians of the process's CPU time.
--rounds N measures every row N times, the two engines interleaved (which one goes first
alternates), and prints each round and the median of the rounds. Not a test.
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


def early_exit_loop(hidden: int):
    """The RNN cell of rnn_loop under a trip count, ended earlier by its condition (i + 1 < stop)."""
    rng = np.random.default_rng(2)
    body = helper.make_graph([helper.make_node("MatMul", ["h", "W"], ["a"]), helper.make_node("Add", ["a", "b"], ["z"]),
                              helper.make_node("Tanh", ["z"], ["h2"]), helper.make_node("Add", ["i", "one"], ["i1"]),
                              helper.make_node("Less", ["i1", "stop"], ["c2"]), helper.make_node("Identity", ["h2"], ["y"])],
                             "cell", [vi("i", I64, []), vi("c", B, []), vi("h", F, [1, hidden])],
                             [vi("c2", B, []), vi("h2", F, [1, hidden]), vi("y", F, [1, hidden])])
    inits = [const("W", (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)),
             const("b", rng.standard_normal((1, hidden)).astype(np.float32) * 0.1), const("one", np.int64(1))]
    return model([helper.make_node("Loop", ["M", "go", "h0"], ["hN", "hs"], body=body)],
                 [vi("M", I64, []), vi("go", B, []), vi("stop", I64, []), vi("h0", F, [1, hidden])],
                 [vi("hN", F, [1, hidden]), vi("hs", F, [None, 1, hidden])], inits)


def rnn_scan(hidden: int, feat: int):
    """h <- tanh(x U + h W + b) over a sequence of x [steps, 1, feat]: a Scan running an RNN step."""
    rng = np.random.default_rng(3)
    body = helper.make_graph([helper.make_node("MatMul", ["x", "U"], ["xu"]), helper.make_node("MatMul", ["h", "W"], ["hw"]),
                              helper.make_node("Add", ["xu", "hw"], ["s"]), helper.make_node("Add", ["s", "b"], ["z"]),
                              helper.make_node("Tanh", ["z"], ["h2"]), helper.make_node("Identity", ["h2"], ["y"])],
                             "step", [vi("h", F, [1, hidden]), vi("x", F, [1, feat])],
                             [vi("h2", F, [1, hidden]), vi("y", F, [1, hidden])])
    inits = [const("U", (rng.standard_normal((feat, hidden)) / np.sqrt(feat)).astype(np.float32)),
             const("W", (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)),
             const("b", rng.standard_normal((1, hidden)).astype(np.float32) * 0.1)]
    return model([helper.make_node("Scan", ["h0", "xs"], ["hN", "hs"], body=body, num_scan_inputs=1)],
                 [vi("h0", F, [1, hidden]), vi("xs", F, ["steps", 1, feat])],
                 [vi("hN", F, [1, hidden]), vi("hs", F, ["steps", 1, hidden])], inits)


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
    ap.add_argument("--rounds", type=int, default=1, help="measure every row this many times, the engines interleaved")
    ap.add_argument("--single-thread", "--cpu-time", dest="cpu_time", action="store_true",
                    help="one thread per engine, medians of CPU time")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ge_cf_bench_")
    rng = np.random.default_rng(0)
    n, long = a.steps, 5 * a.steps
    rows = [  # (label, model, feeds, iterations a run)
        (f"Loop, static RNN cell 64, {n} steps", rnn_loop(64),
         {"M": np.array(n, np.int64), "h0": rng.standard_normal((1, 64)).astype(np.float32)}, n),
        (f"Loop, static RNN cell 512, {n} steps", rnn_loop(512),
         {"M": np.array(n, np.int64), "h0": rng.standard_normal((1, 512)).astype(np.float32)}, n),
        (f"Loop, trip {long}, cond ends it at {n}", early_exit_loop(64),
         {"M": np.array(long, np.int64), "go": np.array(True), "stop": np.array(n, np.int64),
          "h0": rng.standard_normal((1, 64)).astype(np.float32)}, n),
        (f"Loop, growing state, {n} steps", growing_loop(),
         {"M": np.array(n, np.int64), "s0": rng.standard_normal((1, 16)).astype(np.float32)}, n),
        (f"Scan, cumsum [1024], {n} steps", cumsum_scan(1024),
         {"a0": np.zeros(1024, np.float32), "xs": rng.standard_normal((n, 1024)).astype(np.float32)}, n),
        (f"Scan, RNN step 64 (x 32), {long} steps", rnn_scan(64, 32),
         {"h0": np.zeros((1, 64), np.float32), "xs": rng.standard_normal((long, 1, 32)).astype(np.float32)}, long),
        ("If + LSTM step (VAD call)", if_lstm(),
         {"x": rng.standard_normal((1, 512)).astype(np.float32), "sr": np.array(16000, np.int64),
          "h0": np.zeros((1, 1, 64), np.float32), "c0": np.zeros((1, 1, 64), np.float32)}, 1),
    ]
    if a.cpu_time:
        blas.set_local_threads(1)
    models = []
    for k, (label, m, feeds, steps) in enumerate(rows):
        path = os.path.join(tmp, f"m{k}.onnx")
        onnx.save(m, path)
        shapes = ";".join(f"{name}:{','.join(map(str, x.shape))}" for name, x in feeds.items())
        models.append((label, path, api.atc(path, os.path.join(tmp, f"m{k}"), input_shape=shapes).om_path, feeds, steps))
    ge_time, ort_time = (ge_cpu_ms, ort_cpu_ms) if a.cpu_time else (ge_ms, ort_ms)
    print(f"control flow, median of {a.reps} runs, {a.rounds} round(s), cpu"
          f"{', CPU time of one thread per engine' if a.cpu_time else ''}; us/step: a run's time over its iterations")
    measured = {label: [] for label, *_ in models}
    for r in range(a.rounds):
        for label, path, om, feeds, steps in models:
            if r % 2:  # the engines interleaved: which goes first alternates
                ms = ge_time(om, feeds, a.reps)
                reference = ort_time(path, feeds, a.reps)
            else:
                reference = ort_time(path, feeds, a.reps)
                ms = ge_time(om, feeds, a.reps)
            measured[label].append((reference, ms))
            print(f"  {label:<38} ort {reference:8.3f} ms {reference * 1e3 / steps:7.2f} us/step   "
                  f"ge {ms:8.3f} ms {ms * 1e3 / steps:7.2f} us/step   ge/ort {ms / reference:6.2f}")
    if a.rounds > 1:
        print("median of the rounds")
        for label, path, om, feeds, steps in models:
            reference, ms = (float(np.median([t[j] for t in measured[label]])) for j in (0, 1))
            ratio = float(np.median([g / o for o, g in measured[label]]))
            print(f"  {label:<38} ort {reference:8.3f} ms {reference * 1e3 / steps:7.2f} us/step   "
                  f"ge {ms:8.3f} ms {ms * 1e3 / steps:7.2f} us/step   ge/ort {ratio:6.2f}")


if __name__ == "__main__":
    main()
