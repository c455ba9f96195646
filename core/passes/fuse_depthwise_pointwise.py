"""Fuse a depthwise Conv into the pointwise Conv that reads it, ge::DepthwisePointwise, and with the expanding
1x1 Conv before it too, ge::ExpandDepthwisePointwise (kernels/conv.py).

Why: an inverted residual block (MobileNetV2/V3, PP-LCNet, EfficientNet) runs expand 1x1 -> depthwise
-> project 1x1 over its expanded channels; as tasks, the depthwise output goes to memory whole (megabytes
on the large planes, beyond the L2 cache) and the projection reads it back. Fused, the native kernel
makes it band by band of output rows in cache and projects each band at once (csrc/dwpw.c), as
onnxruntime's and OpenVINO's fused depthwise+pointwise kernels do.

Recognized: a 2-D float32 depthwise Conv (group == C, one output channel per group, constant weights;
its activation as its epilogue) whose only output is read only by a one-group 1x1 Conv without
strides, pads or dilation (constant weights; or a FusedConv: its residual Z comes along), when the
depthwise output of one batch item is larger than MIN_BYTES: a smaller one stays in cache between the
two tasks, whose own kernels are then faster (MobileNetV2 at batch 1, single-threaded: the blocks over
112x112 and 56x56 planes (1.2-1.8 MB) 12-33% faster fused, those over 28x28 and 14x14 ones (0.15-0.6
MB) 0-20% slower; at batch 8 those 1.5-2x slower: each band reads all of the projection's weights,
which a band of a small plane does not amortize).
Runs after fuse_activation and fuse_conv_add, so each Conv carries its activation and the projection
its residual. The 1x1 Conv (one group, no strides, pads or dilation, constant weights; its activation
as its epilogue) whose output only the depthwise Conv reads joins when that output (the block's
expanded tensor) is larger than MIN_BYTES per batch item, and then the depthwise output may be smaller.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node
from ..kernels.conv import DEPTHWISE_EPILOGUE, EXPAND_EPILOGUE
from ..kernels.epilogue import ATTR as EPILOGUE
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher, known_dims

#: the depthwise output's least size (bytes, one batch item) for the fusion: about an L2 cache
MIN_BYTES = 1 << 20


def fuse_depthwise_pointwise(graph: Graph, stats: dict | None = None) -> Graph:
    m = Matcher(graph)
    for dw in list(graph.nodes):
        if dw.op_type != "Conv" or dw.domain != "" or m.removed(dw) or not _depthwise(m, dw):
            continue
        pw = m.sole_consumer(dw)
        if pw is None or not _pointwise(m, pw, dw.outputs[0]):
            continue
        ex = m.sole_producer(dw.inputs[0], dw)
        if ex is not None and not (_pointwise(m, ex, ex.inputs[0] if ex.inputs else "") and ex.op_type == "Conv"
                                   and _large(m, dw.inputs[0])):
            ex = None
        if ex is None and not _large(m, dw.outputs[0]):
            continue
        pad = lambda node: list(node.inputs) + [""] * (3 - len(node.inputs))  # noqa: E731
        attrs = {k: v for k, v in dw.attrs.items() if k != EPILOGUE}
        for node, key in ((ex, EXPAND_EPILOGUE), (dw, DEPTHWISE_EPILOGUE), (pw, EPILOGUE)):
            if node is not None and node.attrs.get(EPILOGUE):
                attrs[key] = node.attrs[EPILOGUE]
        inputs = ([ex.inputs[0]] + pad(ex)[1:] if ex is not None else [dw.inputs[0]]) + pad(dw)[1:] + pad(pw)[1:]
        op = "DepthwisePointwise" if ex is None else "ExpandDepthwisePointwise"
        m.replace([n for n in (ex, dw, pw) if n is not None],
                  Node(op, inputs, list(pw.outputs), name=pw.name, attrs=attrs, domain=GE_DOMAIN))
    fused = m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _large(m: Matcher, name: str) -> bool:
    """More than MIN_BYTES per batch item (a float32 tensor of known shape)."""
    _, shape = m.meta(name)
    return known_dims(shape) and 4 * math.prod(shape[1:]) > MIN_BYTES


def _depthwise(m: Matcher, conv: Node) -> bool:
    if len(conv.inputs) < 2 or conv.inputs[1] not in m.graph.initializers or len(conv.outputs) != 1:
        return False
    (xt, xs), (_, ws), (yt, ys) = m.meta(conv.inputs[0]), m.meta(conv.inputs[1]), m.meta(conv.outputs[0])
    if xt != np.float32 or yt != np.float32 or not known_dims(xs) or not known_dims(ys) or len(xs) != 4:
        return False
    group = int(conv.attrs.get("group", 1))
    return group == xs[1] == ws[0] and group > 1 and ws[1] == 1


def _pointwise(m: Matcher, conv: Node, x: str) -> bool:
    if conv.domain == GE_DOMAIN and conv.op_type == "FusedConv":
        z = conv.inputs[3] if len(conv.inputs) > 3 else ""
        if not z or m.meta(z)[0] != np.float32:
            return False
    elif conv.op_type != "Conv" or conv.domain != "":
        return False
    if len(conv.inputs) < 2 or conv.inputs[0] != x or conv.inputs[1] not in m.graph.initializers:
        return False
    w = m.graph.initializers[conv.inputs[1]]
    attrs = conv.attrs
    ones = lambda key: all(int(v) == 1 for v in attrs.get(key, (1, 1)))  # noqa: E731
    return (w.ndim == 4 and tuple(w.shape[2:]) == (1, 1) and int(attrs.get("group", 1)) == 1 and ones("strides")
            and ones("dilations") and not any(int(v) for v in attrs.get("pads", ())) and
            attrs.get("auto_pad", "NOTSET") in ("NOTSET", b"NOTSET", "VALID", b"VALID"))
