"""ge's int8 depthwise convolution (QLinearConv, csrc/qgemm.c ge_qdepthwise) against ge's float32
depthwise convolution of the same layer in its blocked layout (NchwcDepthwise, csrc/nchwc_depthwise.c,
as a float32 model runs it: the reorders around it not counted) and onnxruntime's QLinearConv node
(its profiler's kernel time), on MobileNetV2's depthwise layers as its QOperator export has them
(int8 activations with zero point -128, int8 weights with per-channel scales):

    .venv/bin/python benchmarks/int8_depthwise_layers.py [--batch 1] [--rounds 5] [--reps 20] [--filter @7]
    GE_NATIVE_LEVEL=v3 .venv/bin/python benchmarks/int8_depthwise_layers.py    # AVX2 without AVX-512

One thread each, all engines in one process, interleaved per layer and round; `int8` and `fp32` the
CPU time of the calling thread per prepared native call, `ort` onnxruntime's kernel time (wall); each
figure the median call. int8/fp32 is what issue 31 asks to bring under 1. Not a test."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ge.core.kernels import lookup
from ge.core.kernels.ops.nchwc import NchwcDepthwise, blocked_empty, reorder
from ge.core.model.ir import Meta

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nchwc_depthwise_layers import MOBILENETV2_DW, NATIVE_ACTS, OrtProfiled, table  # noqa: E402
from nchwc_layers import one_native_thread, timed  # noqa: E402

ENGINES = ("int8", "fp32", "ort")
ORDER = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"]  # QLinearConv's inputs


def qlinear_conv_model(x, consts, attrs):
    graph = helper.make_graph(
        [helper.make_node("QLinearConv", ORDER, ["y"], name="dw", **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, x.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        [numpy_helper.from_array(a, n) for n, a in consts.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


class Layer:
    def __init__(self, nat, name, count, n, c, h, k, s, tmp):
        self.name, self.count = name, count
        rng = np.random.default_rng(0)
        p = k // 2
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4, "group": c}
        # int8 as MobileNetV2's QOperator export: x and y zero point -128, symmetric per-channel weights
        x = rng.integers(-128, 128, (n, c, h, h)).astype(np.int8)
        consts = {"xs": np.array(0.0143, np.float32), "xz": np.array(-128, np.int8),
                  "w": rng.integers(-127, 128, (c, 1, k, k)).astype(np.int8),
                  "ws": rng.uniform(0.002, 0.01, c).astype(np.float32), "wz": np.zeros(c, np.int8),
                  "ys": np.array(0.0235 * k * k, np.float32), "yz": np.array(-128, np.int8),
                  "b": rng.integers(-3000, 3000, c).astype(np.int32)}
        self.ort = OrtProfiled(qlinear_conv_model(x, consts, attrs), {"x": x}, tmp, lambda op: "Conv" in op)
        xs = [x] + [consts[i] for i in ORDER[1:]]
        metas = [Meta(a.dtype, a.shape) for a in xs]
        kernel = lookup("QLinearConv", "", 17)(attrs, metas, [None] + xs[1:], opset=17, name=name).load()
        assert kernel.uses_native
        y = np.empty(kernel.infer()[0].shape, np.int8)
        nbytes = kernel.workspace_nbytes()
        kernel.run(xs, [y], np.zeros(nbytes, np.uint8) if nbytes else None)
        assert np.abs(y.astype(np.int32) - self.ort.want).max() <= 1, name
        self.int8_calls = kernel.qc.calls.local.entry[1]  # the prepared calls, one per batch item
        self.keep = (kernel, xs, y)
        # float32: the same layer in ge's blocked layout, with MobileNetV2's Clip(0, 6)
        xf = rng.standard_normal((n, c, h, h)).astype(np.float32)
        dw = NchwcDepthwise(nat, xf.shape, (k, k), strides=(s, s), pads=(p,) * 4, act=NATIVE_ACTS["Clip"])
        dw.pack((rng.standard_normal((c, 1, k, k)) / k).astype(np.float32), np.zeros(c, np.float32))
        self.xb, self.yb = blocked_empty(xf.shape, nat.nchwc_block), blocked_empty(dw.y_shape, nat.nchwc_block)
        reorder(nat, xf, self.xb, True).run()
        self.fp32_call = dw.call(self.xb, self.yb)
        self.times = {e: [] for e in ENGINES}

    def run_int8(self):
        for call in self.int8_calls:
            call.run()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    nat = one_native_thread()
    with tempfile.TemporaryDirectory() as tmp:
        layers = [Layer(nat, name, count, args.batch, c, h, k, s, tmp)
                  for name, count, c, h, k, s in MOBILENETV2_DW if args.filter in name]
        for _ in range(args.rounds):
            for layer in layers:
                layer.times["int8"] += timed(layer.run_int8, args.reps)
                layer.times["fp32"] += timed(layer.fp32_call.run, args.reps)
                for _ in range(args.reps):
                    layer.ort.run()
        for layer in layers:
            layer.times["ort"] = layer.ort.times()
    table(f"MobileNetV2 depthwise layers, batch {args.batch} (µs, median; one thread)", layers, ENGINES,
          (("int8/fp32", "int8", "fp32"), ("int8/ort", "int8", "ort")))

if __name__ == "__main__":
    main()
