"""The blocked depthwise convolution (core/kernels/ops/nchwc.py NchwcDepthwise, csrc/nchwc_depthwise.c) against
ge's NCHW depthwise plan of the same conv (csrc/depthwise.c, as a model loads it) and onnxruntime's
Conv node (its own profiler: onnxruntime runs the conv in its NCHWc layout, the reorders around it not
counted, as inside a model of that layout), on MobileNetV2's and MobileNetV3's depthwise layers:

    .venv/bin/python benchmarks/nchwc_depthwise_layers.py [--batch 1 8] [--rounds 3] [--reps 10] [--filter @7]

One thread each, all engines in one process, interleaved per layer and round; `ge` and `nchwc` the
CPU time of the calling thread per call, `ort` the kernel time onnxruntime's profiler records for its
nodes other than the reorders (the Conv with its fused activation): wall time, so `nchwc wall` beside
it, and nchwc/ort compares those two (on a loaded machine the wall times grow with preemption, the CPU
times do not); each figure the median call.
The layers carry MobileNetV2's Clip(0, 6) (3x3) or MobileNetV3's HardSwish (5x5). Not a test."""
from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

from ge.core.kernels import native
from ge.core.kernels.ops.nchwc import NchwcDepthwise, blocked_empty, reorder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nchwc_layers import GeConv, one_native_thread  # noqa: E402

# (name, count in the model, channels, input size, kernel, stride): MobileNetV2's 3x3 layers (224x224
# input), MobileNetV3-Large's 5x5 ones (the 672-channel one is stride 2 in the model; stride 1 beside it)
MOBILENETV2_DW = [
    ("3x3 32 @112", 1, 32, 112, 3, 1), ("3x3 96 @112->56", 1, 96, 112, 3, 2), ("3x3 144 @56", 1, 144, 56, 3, 1),
    ("3x3 144 @56->28", 1, 144, 56, 3, 2), ("3x3 192 @28", 2, 192, 28, 3, 1), ("3x3 192 @28->14", 1, 192, 28, 3, 2),
    ("3x3 384 @14", 4, 384, 14, 3, 1), ("3x3 576 @14", 2, 576, 14, 3, 1), ("3x3 576 @14->7", 1, 576, 14, 3, 2),
    ("3x3 960 @7", 3, 960, 7, 3, 1),
]
MOBILENETV3_DW5 = [
    ("5x5 72 @56->28", 1, 72, 56, 5, 2), ("5x5 120 @28", 2, 120, 28, 5, 1), ("5x5 672 @14", 0, 672, 14, 5, 1),
    ("5x5 672 @14->7", 1, 672, 14, 5, 2), ("5x5 960 @7", 2, 960, 7, 5, 1),
]
NATIVE_ACTS = {"Clip": native.Act(native.ACT_CLAMP, 0.0, 6.0), "HardSwish": native.Act(native.ACT_HARDSWISH)}
ENGINES = ("ge", "nchwc", "nchwc wall", "ort")


def conv_model(x, w, b, attrs, act):
    """A float32 depthwise Conv node and its activation, w and b initializers."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="dw", **attrs)]
    inits = {"w": w, "b": b}
    if act == "Clip":
        inits.update(lo=np.array(0, np.float32), hi=np.array(6, np.float32))
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["y"], name="act"))
    else:
        nodes.append(helper.make_node(act, ["c"], ["y"], name="act"))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, x.shape)],
                              [helper.make_tensor_value_info("y", 1, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


class OrtProfiled:
    """onnxruntime on one thread with its profiler: the kernel time of every node but the reorders
    (counted: the nodes whose op passes `counted`), per run."""

    def __init__(self, model, feeds, tmp, counted=lambda op: not op.startswith("Reorder")):
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        so.enable_profiling, so.profile_file_prefix = True, os.path.join(tmp, "ort")
        self.sess, self.feeds = ort.InferenceSession(model.SerializeToString(), so,
                                                     providers=["CPUExecutionProvider"]), feeds
        self.counted = counted
        self.want = self.sess.run(None, self.feeds)[0]

    def run(self):
        self.sess.run(None, self.feeds)

    def times(self) -> list[float]:
        """Seconds per run (the first, the reference run, left out), summed over the counted nodes."""
        with open(self.sess.end_profiling()) as f:
            events = json.load(f)
        per_node = collections.defaultdict(list)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and \
                    self.counted(e["args"].get("op_name", "")):
                per_node[e["name"]].append(e["dur"] * 1e-6)
        return [sum(run) for run in zip(*per_node.values())][1:]


class Layer:
    def __init__(self, nat, name, count, n, c, h, k, s, act, tmp):
        self.name, self.count = name, count
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((c, 1, k, k)) / k).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32) * 0.1
        p = k // 2
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "group": c}
        self.ort = OrtProfiled(conv_model(x, w, b, attrs, act), {"x": x}, tmp)
        self.ge = GeConv(name, x.shape, w, b, attrs, act, False)
        self.x, self.y = x, np.empty(self.ge.y_shape, np.float32)
        self.dw = NchwcDepthwise(nat, x.shape, (k, k), strides=(s, s), pads=(p,) * 4, act=NATIVE_ACTS[act])
        self.dw.pack(w, b)
        blk = nat.nchwc_block
        self.xb, self.yb = blocked_empty(x.shape, blk), blocked_empty(self.dw.y_shape, blk)
        reorder(nat, x, self.xb, True).run()
        self.call = self.dw.call(self.xb, self.yb)
        self.check(nat)
        self.times = {e: [] for e in ENGINES}

    def check(self, nat):
        want, scale = self.ort.want, np.abs(self.ort.want).max()
        self.run_ge()
        self.call.run()
        y = np.empty(self.dw.y_shape, np.float32)
        reorder(nat, self.yb, y, False).run()
        for plan, got in (("ge", self.y), ("nchwc", y)):
            assert np.abs(got - want).max() <= 1e-4 * scale, (self.name, plan, np.abs(got - want).max() / scale)

    def run_ge(self):
        self.ge.run(self.x, self.y)


def timed(fn, reps) -> tuple[list[float], list[float]]:
    """CPU and wall seconds of reps calls, after one."""
    fn()
    cpu, wall = [], []
    for _ in range(reps):
        t, w = time.thread_time(), time.perf_counter()
        fn()
        cpu.append(time.thread_time() - t)
        wall.append(time.perf_counter() - w)
    return cpu, wall


def table(title, layers, engines=ENGINES, ratios=(("nchwc/ort", "nchwc wall", "ort"), ("nchwc/ge", "nchwc", "ge"))):
    """The layers' median times per engine, their totals weighted by the layers' counts, and the ratios
    (label, engine, engine it is divided by)."""
    print(f"\n{title}")
    print(f"{'layer':18s} {'n':>2s} " + " ".join(f"{e:>10s}" for e in engines) + " " +
          " ".join(f"{r[0]:>9s}" for r in ratios))
    totals = dict.fromkeys(engines, 0.0)
    for layer in layers:
        med = {e: statistics.median(layer.times[e]) * 1e6 for e in engines}
        for e in engines:
            totals[e] += layer.count * med[e]
        print(f"{layer.name:18s} {layer.count:2d} " + " ".join(f"{med[e]:10.1f}" for e in engines) + " " +
              " ".join(f"{med[a] / med[b]:9.2f}" for _, a, b in ratios))
    print(f"{'weighted total':18s} {'':2s} " + " ".join(f"{totals[e]:10.0f}" for e in engines) + " " +
          " ".join(f"{totals[a] / totals[b]:9.2f}" for _, a, b in ratios))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    nat = one_native_thread()
    for batch in args.batch:
        with tempfile.TemporaryDirectory() as tmp:
            models = [(title, [Layer(nat, name, count, batch, c, h, k, s, act, tmp)
                               for name, count, c, h, k, s in rows if args.filter in name])
                      for title, rows, act in (("MobileNetV2 3x3", MOBILENETV2_DW, "Clip"),
                                               ("MobileNetV3 5x5", MOBILENETV3_DW5, "HardSwish"))]
            layers = [layer for _, ls in models for layer in ls]
            for _ in range(args.rounds):
                for layer in layers:
                    layer.times["ge"] += timed(layer.run_ge, args.reps)[0]
                    cpu, wall = timed(layer.call.run, args.reps)
                    layer.times["nchwc"] += cpu
                    layer.times["nchwc wall"] += wall
                    for _ in range(args.reps):
                        layer.ort.run()
            for layer in layers:
                layer.times["ort"] = layer.ort.times()
        for title, ls in models:
            if ls:
                table(f"{title} depthwise layers, batch {batch} (µs, median; one thread)", ls)


if __name__ == "__main__":
    main()
