"""Time ge's Conv kernel (planned path: run() into preallocated outputs and workspace) against
onnxruntime (CPU, intra_op_num_threads=2) on ResNet-50 (torchvision v1.5) and MobileNetV2 layer shapes.

    .venv/bin/python benchmarks/conv_layers.py [--reps 20] [--only resnet|mobilenet|matmul] [--filter 3x3]

Prints per layer both medians and the ratio ge/ort; for ResNet-50 also the sum over all 53 convs
(each unique shape weighted by how often it occurs). Not a test.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

from ge.core.ir import Meta
from ge.core.kernels import lookup

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

# (name, count, M, K, N): A[M,K] @ B[K,N] with B constant (MatMul), e.g. ResNet's fc and BERT-base
MATMULS = [
    ("fc 1x2048 @ 2048x1000", 1, 1, 2048, 1000),
    ("bert 128x768 @ 768x768", 1, 128, 768, 768),
    ("bert 128x768 @ 768x3072", 1, 128, 768, 3072),
    ("bert 128x3072 @ 3072x768", 1, 128, 3072, 768),
]


def ort_session(node, inputs, inits):
    graph = helper.make_graph([node], "g", inputs, [onnx.ValueInfoProto(name="y")],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def timeit(fn, reps):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def compare(op, attrs, x, consts, reps, rounds=5):
    """Median times (ms) of ge's planned run and onnxruntime, interleaved in rounds."""
    names = list(consts)
    node = helper.make_node(op, ["x"] + names, ["y"], **attrs)
    sess = ort_session(node, [helper.make_tensor_value_info("x", 1, x.shape)], consts)
    metas = [Meta(x.dtype, x.shape)] + [Meta(a.dtype, a.shape) for a in consts.values()]
    cls = lookup(op, opset=17)
    probe = cls(attrs, metas, [None] + list(consts.values()), opset=17, name="bench")
    outs = probe.infer()
    k = cls(attrs, metas, [None] + list(consts.values()), outputs=outs, opset=17, name="bench")
    ys = [np.empty(m.shape, m.dtype) for m in outs]
    ws = np.empty(k.workspace_nbytes(), np.uint8) if k.workspace_nbytes() else None
    xs = [x] + list(consts.values())
    feeds = {"x": x}
    want = sess.run(None, feeds)[0]
    k.run(xs, ys, ws)
    np.testing.assert_allclose(ys[0], want, rtol=1e-3, atol=1e-3)
    ge_t, ort_t = [], []
    for _ in range(rounds):
        ge_t += timeit(lambda: k.run(xs, ys, ws), reps)
        ort_t += timeit(lambda: sess.run(None, feeds), reps)
    return float(np.median(ge_t)) * 1e3, float(np.median(ort_t)) * 1e3, getattr(k, "plan", "")


def conv_table(title, layers, reps, flt):
    rng = np.random.default_rng(0)
    print(f"\n{title}")
    print(f"{'layer':26s} {'n':>2s} {'plan':>10s} {'ge ms':>8s} {'ort ms':>8s} {'ratio':>6s}")
    tot_ge = tot_ort = 0.0
    for name, count, c, h, oc, kk, s, p, g in layers:
        if flt and flt not in name:
            continue
        x = rng.standard_normal((1, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((oc, c // g, kk, kk)) * 0.1).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        attrs = {"kernel_shape": [kk, kk], "strides": [s, s], "pads": [p] * 4, "group": g}
        t_ge, t_ort, plan = compare("Conv", attrs, x, {"w": w, "b": b}, reps)
        tot_ge += count * t_ge
        tot_ort += count * t_ort
        print(f"{name:26s} {count:2d} {plan:>10s} {t_ge:8.3f} {t_ort:8.3f} {t_ge / t_ort:6.2f}")
    if tot_ort:
        print(f"{'weighted total':26s} {'':2s} {'':>10s} {tot_ge:8.3f} {tot_ort:8.3f} {tot_ge / tot_ort:6.2f}")


def matmul_table(reps):
    rng = np.random.default_rng(0)
    print("\nMatMul (B constant)")
    for name, _, m, kdim, n in MATMULS:
        a = rng.standard_normal((1, m, kdim)).astype(np.float32)
        b = (rng.standard_normal((kdim, n)) * 0.05).astype(np.float32)
        t_ge, t_ort, _ = compare("MatMul", {}, a, {"b": b}, reps)
        print(f"{name:26s} {t_ge:8.3f} {t_ort:8.3f} {t_ge / t_ort:6.2f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--only", choices=["resnet", "mobilenet", "matmul"])
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    if args.only in (None, "resnet"):
        conv_table("ResNet-50 convs (batch 1)", RESNET50, args.reps, args.filter)
    if args.only in (None, "mobilenet"):
        conv_table("MobileNetV2 depthwise / pointwise (batch 1)", MOBILENET_DW, args.reps, args.filter)
    if args.only in (None, "matmul"):
        matmul_table(args.reps)


if __name__ == "__main__":
    main()
