"""Time ge's Conv kernel (planned path: run() into preallocated outputs and workspace) against
onnxruntime (CPU, intra_op_num_threads=2) on ResNet-50 (torchvision v1.5), MobileNetV2 and
MobileNetV3-Large layer shapes (the latter with their fused activation: HardSwish, Relu).

    .venv/bin/python benchmarks/conv_layers.py [--reps 20] [--only resnet|mobilenet|mobilenetv3|matmul]
                                               [--filter 3x3] [--max-wait 60] [--single-thread]

--single-thread runs both on one thread and times by the thread's CPU time (steady on a loaded
machine: no waiting for idle cores). Prints per layer both medians and the ratio ge/ort; for ResNet-50 also the sum over all 53 convs
(each unique shape weighted by how often it occurs). Not a test.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.epilogue import ATTR as EPILOGUE, Epilogue

# (name, count in ResNet-50, C, H, OC, k, stride, pad, group)
RESNET50 = [
    ("conv1 7x7s2 3->64 @224", 1, 3, 224, 64, 7, 2, 3, 1),
    ("1x1 64->64 @56", 1, 64, 56, 64, 1, 1, 0, 1),
    ("3x3 64 @56", 3, 64, 56, 64, 3, 1, 1, 1),
    ("1x1 64->256 @56", 4, 64, 56, 256, 1, 1, 0, 1),
    ("1x1 256->64 @56", 2, 256, 56, 64, 1, 1, 0, 1),
    ("1x1 256->128 @56", 1, 256, 56, 128, 1, 1, 0, 1),
    ("3x3s2 128 @56", 1, 128, 56, 128, 3, 2, 1, 1),
    ("1x1s2 256->512 @56", 1, 256, 56, 512, 1, 2, 0, 1),
    ("1x1 128->512 @28", 4, 128, 28, 512, 1, 1, 0, 1),
    ("1x1 512->128 @28", 3, 512, 28, 128, 1, 1, 0, 1),
    ("3x3 128 @28", 3, 128, 28, 128, 3, 1, 1, 1),
    ("1x1 512->256 @28", 1, 512, 28, 256, 1, 1, 0, 1),
    ("3x3s2 256 @28", 1, 256, 28, 256, 3, 2, 1, 1),
    ("1x1s2 512->1024 @28", 1, 512, 28, 1024, 1, 2, 0, 1),
    ("1x1 256->1024 @14", 6, 256, 14, 1024, 1, 1, 0, 1),
    ("1x1 1024->256 @14", 5, 1024, 14, 256, 1, 1, 0, 1),
    ("3x3 256 @14", 5, 256, 14, 256, 3, 1, 1, 1),
    ("1x1 1024->512 @14", 1, 1024, 14, 512, 1, 1, 0, 1),
    ("3x3s2 512 @14", 1, 512, 14, 512, 3, 2, 1, 1),
    ("1x1s2 1024->2048 @14", 1, 1024, 14, 2048, 1, 2, 0, 1),
    ("1x1 512->2048 @7", 3, 512, 7, 2048, 1, 1, 0, 1),
    ("1x1 2048->512 @7", 2, 2048, 7, 512, 1, 1, 0, 1),
    ("3x3 512 @7", 2, 512, 7, 512, 3, 1, 1, 1),
]

MOBILENET_DW = [
    ("conv 3x3s2 3->32 @224", 1, 3, 224, 32, 3, 2, 1, 1),
    ("pw 1x1 32->16 @112", 1, 32, 112, 16, 1, 1, 0, 1),
    ("dw 3x3 32 @112", 1, 32, 112, 32, 3, 1, 1, 32),
    ("dw 3x3s2 96 @112", 1, 96, 112, 96, 3, 2, 1, 96),
    ("dw 3x3 144 @56", 1, 144, 56, 144, 3, 1, 1, 144),
    ("dw 3x3s2 144 @56", 1, 144, 56, 144, 3, 2, 1, 144),
    ("dw 3x3 192 @28", 2, 192, 28, 192, 3, 1, 1, 192),
    ("dw 3x3s2 192 @28", 1, 192, 28, 192, 3, 2, 1, 192),
    ("dw 3x3 384 @14", 4, 384, 14, 384, 3, 1, 1, 384),
    ("dw 3x3 576 @14", 2, 576, 14, 576, 3, 1, 1, 576),
    ("dw 3x3s2 576 @14", 1, 576, 14, 576, 3, 2, 1, 576),
    ("dw 3x3 960 @7", 2, 960, 7, 960, 3, 1, 1, 960),
    ("pw 1x1 144->24 @56", 1, 144, 56, 24, 1, 1, 0, 1),
    ("pw 1x1 24->144 @56", 1, 24, 56, 144, 1, 1, 0, 1),
    ("pw 1x1 384->64 @14", 1, 384, 14, 64, 1, 1, 0, 1),
]

# MobileNetV3-Large's depthwise and expand/project layers, with the activation fused onto each
# (name, count, C, H, OC, k, stride, pad, group, activation)
MOBILENETV3 = [
    ("conv 3x3s2 3->16 @224 hswish", 1, 3, 224, 16, 3, 2, 1, 1, "HardSwish"),
    ("dw 3x3 16 @112 relu", 1, 16, 112, 16, 3, 1, 1, 16, "Relu"),
    ("pw 16->16 @112", 1, 16, 112, 16, 1, 1, 0, 1, None),
    ("pw 16->64 @112 relu", 1, 16, 112, 64, 1, 1, 0, 1, "Relu"),
    ("dw 3x3s2 64 @112 relu", 1, 64, 112, 64, 3, 2, 1, 64, "Relu"),
    ("dw 3x3 72 @56 relu", 1, 72, 56, 72, 3, 1, 1, 72, "Relu"),
    ("dw 5x5s2 72 @56 relu", 1, 72, 56, 72, 5, 2, 2, 72, "Relu"),
    ("dw 5x5 120 @28 relu", 2, 120, 28, 120, 5, 1, 2, 120, "Relu"),
    ("pw 40->240 @28 hswish", 1, 40, 28, 240, 1, 1, 0, 1, "HardSwish"),
    ("dw 3x3s2 240 @28 hswish", 1, 240, 28, 240, 3, 2, 1, 240, "HardSwish"),
    ("dw 3x3 200 @14 hswish", 1, 200, 14, 200, 3, 1, 1, 200, "HardSwish"),
    ("dw 3x3 480 @14 hswish", 1, 480, 14, 480, 3, 1, 1, 480, "HardSwish"),
    ("pw 112->672 @14 hswish", 2, 112, 14, 672, 1, 1, 0, 1, "HardSwish"),
    ("dw 3x3 672 @14 hswish", 1, 672, 14, 672, 3, 1, 1, 672, "HardSwish"),
    ("dw 5x5s2 672 @14 hswish", 1, 672, 14, 672, 5, 2, 2, 672, "HardSwish"),
    ("dw 5x5 960 @7 hswish", 2, 960, 7, 960, 5, 1, 2, 960, "HardSwish"),
    ("pw 160->960 @7 hswish", 3, 160, 7, 960, 1, 1, 0, 1, "HardSwish"),
    ("pw 960->160 @7", 3, 960, 7, 160, 1, 1, 0, 1, None),
]

# (name, count, M, K, N): A[M,K] @ B[K,N] with B constant (MatMul), e.g. ResNet's fc and BERT-base
MATMULS = [
    ("fc 1x2048 @ 2048x1000", 1, 1, 2048, 1000),
    ("bert 128x768 @ 768x768", 1, 128, 768, 768),
    ("bert 128x768 @ 768x3072", 1, 128, 768, 3072),
    ("bert 128x3072 @ 3072x768", 1, 128, 3072, 768),
]


SINGLE_THREAD = "--single-thread" in sys.argv
CLOCK = time.thread_time if SINGLE_THREAD else time.perf_counter


def ort_session(nodes, inputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1 if SINGLE_THREAD else 2
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _cpu_times():
    with open("/proc/stat") as f:
        vals = [int(v) for v in f.readline().split()[1:]]
    return vals[3] + vals[4], sum(vals)  # idle + iowait, total


def wait_quiet(max_wait=60.0, idle_needed=0.9):
    """Wait (up to max_wait s) until the machine is idle: other processes on the 2 cores distort
    2-thread timings badly (BLAS threads spin-wait on each other)."""
    end = time.time() + max_wait
    while True:
        i0, t0 = _cpu_times()
        time.sleep(0.25)
        i1, t1 = _cpu_times()
        if t1 == t0 or (i1 - i0) / (t1 - t0) >= idle_needed or time.time() > end:
            return


def timeit(fn, reps, warmup=3):
    """Per-call times after a few discarded calls (the other library's thread pool may still be spinning)."""
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(reps):
        t = CLOCK()
        fn()
        ts.append(CLOCK() - t)
    return ts


class Case:
    """One node, built both ways: ge's kernel on the planned path and an onnxruntime session."""

    def __init__(self, name, count, op, attrs, x, consts, activation=None):
        self.name, self.count = name, count
        nodes = [helper.make_node(op, ["x"] + list(consts), ["c" if activation else "y"], **attrs)]
        if activation:  # ge's kernel gets it as its fused epilogue, as passes.fuse_activation leaves it
            nodes.append(helper.make_node(activation, ["c"], ["y"]))
            attrs = dict(attrs, **{EPILOGUE: [[activation, {}]]})
        self.sess = ort_session(nodes, [helper.make_tensor_value_info("x", 1, x.shape)], consts)
        metas = [Meta(x.dtype, x.shape)] + [Meta(a.dtype, a.shape) for a in consts.values()]
        cls = lookup(op, opset=17)
        outs = cls(attrs, metas, [None] + list(consts.values()), opset=17, name=name).infer()
        self.kernel = cls(attrs, metas, [None] + list(consts.values()), outputs=outs, opset=17, name=name).load()
        self.ys = [np.empty(m.shape, m.dtype) for m in outs]
        self.epilogue = Epilogue.unless_absorbed(self.kernel, attrs.get(EPILOGUE), outs[0], 17, name)
        nbytes = self.kernel.workspace_nbytes()
        self.ws = np.empty(nbytes, np.uint8) if nbytes else None
        self.xs = [x] + list(consts.values())
        self.feeds = {"x": x}
        nat = getattr(self.kernel, "native", None)  # which native kernel, else the numpy plan's name
        self.plan = getattr(nat, "kind", None) or getattr(self.kernel, "plan", "")
        self.ge_t, self.ort_t = [], []
        want = self.sess.run(None, self.feeds)[0]
        self.run_ge()
        np.testing.assert_allclose(self.ys[0], want, rtol=1e-3, atol=1e-3)

    def run_ge(self):
        self.kernel.run(self.xs, self.ys, self.ws)
        if self.epilogue is not None:
            self.epilogue(self.ys[0])

    def run_ort(self):
        self.sess.run(None, self.feeds)


def measure_side(cases, side, reps, max_wait):
    """Fastest call per case of one library, each case after waiting for an idle machine."""
    res = []
    for c in cases:
        if not SINGLE_THREAD:
            wait_quiet(max_wait)
        res.append(float(np.min(timeit(c.run_ge if side == "ge" else c.run_ort, reps))) * 1e3)
    return res


def measure(cases, reps, rounds, argv, max_wait):
    """Alternating rounds, each library in a process of its own (a library's spinning thread pool slows
    the other down when they share a process). A case's time is its fastest call over all rounds: other
    processes on the 2 cores distort 2-thread timings badly (a BLAS thread descheduled for a moment
    stalls the whole call), and the minimum is the uncontended time."""
    for _ in range(rounds):
        for side in ("ort", "ge"):
            out = subprocess.run([sys.executable, __file__, "--side", side, "--reps", str(reps), "--max-wait", str(max_wait)] + argv,
                                 check=True, capture_output=True, text=True).stdout
            times = json.loads(out.strip().splitlines()[-1])
            for c, t in zip(cases, times):
                (c.ort_t if side == "ort" else c.ge_t).append(t)


def table(title, cases, weighted=True):
    print(f"\n{title}")
    print(f"{'layer':26s} {'n':>2s} {'plan':>11s} {'ge ms':>8s} {'ort ms':>8s} {'ratio':>6s}")
    tot_ge = tot_ort = 0.0
    for c in cases:
        t_ge, t_ort = min(c.ge_t), min(c.ort_t)
        tot_ge += c.count * t_ge
        tot_ort += c.count * t_ort
        print(f"{c.name:26s} {c.count:2d} {c.plan:>11s} {t_ge:8.3f} {t_ort:8.3f} {t_ge / t_ort:6.2f}")
    if weighted and tot_ort:
        print(f"{'weighted total':26s} {'':2s} {'':>11s} {tot_ge:8.3f} {tot_ort:8.3f} {tot_ge / tot_ort:6.2f}")


def conv_cases(layers, flt):
    rng = np.random.default_rng(0)
    cases = []
    for name, count, c, h, oc, kk, s, p, g, *act in layers:
        if flt and flt not in name:
            continue
        x = rng.standard_normal((1, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((oc, c // g, kk, kk)) * 0.1).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        attrs = {"kernel_shape": [kk, kk], "strides": [s, s], "pads": [p] * 4, "group": g}
        cases.append(Case(name, count, "Conv", attrs, x, {"w": w, "b": b}, *act))
    return cases


def matmul_cases(flt):
    rng = np.random.default_rng(0)
    cases = []
    for name, count, m, kdim, n in MATMULS:
        if flt and flt not in name:
            continue
        a = rng.standard_normal((1, m, kdim)).astype(np.float32)
        b = (rng.standard_normal((kdim, n)) * 0.05).astype(np.float32)
        cases.append(Case(name, count, "MatMul", {}, a, {"b": b}))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=["resnet", "mobilenet", "mobilenetv3", "matmul"])
    ap.add_argument("--max-wait", type=float, default=60.0, help="seconds to wait for an idle machine per case")
    ap.add_argument("--filter", default="")
    ap.add_argument("--single-thread", action="store_true", help="one thread each, timed by CPU time")
    ap.add_argument("--side", choices=["ge", "ort"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single_thread:
        from ge.core.kernels import blas
        blas.set_local_threads(1)
    tables = []
    if args.only in (None, "resnet"):
        tables.append(("ResNet-50 convs (batch 1)", conv_cases(RESNET50, args.filter), True))
    if args.only in (None, "mobilenet"):
        tables.append(("MobileNetV2 depthwise / pointwise (batch 1)", conv_cases(MOBILENET_DW, args.filter), True))
    if args.only in (None, "mobilenetv3"):
        tables.append(("MobileNetV3-Large layers with their activation (batch 1)", conv_cases(MOBILENETV3, args.filter),
                       True))
    if args.only in (None, "matmul"):
        tables.append(("MatMul (B constant)", matmul_cases(args.filter), False))
    cases = [c for _, cs, _ in tables for c in cs]
    if args.side:
        print(json.dumps(measure_side(cases, args.side, args.reps, args.max_wait)))
        return
    print("load average:", open("/proc/loadavg").read().split()[:3])
    argv = (["--only", args.only] if args.only else []) + (["--filter", args.filter] if args.filter else []) + \
        (["--single-thread"] if args.single_thread else [])
    measure(cases, args.reps, args.rounds, argv, args.max_wait)
    for title, cs, weighted in tables:
        table(title, cs, weighted)


if __name__ == "__main__":
    main()
