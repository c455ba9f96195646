"""Fold inference-mode BatchNormalization into the preceding Conv / ConvTranspose / Gemm / MatMul.

Why: at inference BN is a per-channel affine map y = s * x + t with s = scale / sqrt(var + eps)
and t = B - mean * s. Applied to a linear op's output it can be folded into the op's weights
(W' = W * s per output channel) and bias (b' = (b - mean) * s + B): one task and one feature map
fewer, and the BN's memory traffic gone. The new weights are computed in float64 and cast back
to the weight dtype; the original weights stay untouched (they may be shared) and are removed by
dead code when nothing else reads them.

Conditions: the producer's output is read only by the BN and is not a graph output; the BN's
four parameters and the producer's weight (and bias, if any) are initializers; the BN is not in
training mode and its optional running-stat outputs are unused.
A MatMul (2-D, constant [K, N] weight) followed by BN becomes a Gemm with the folded bias.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.ir import Graph, Node
from ..kernels.native import native
from ._util import set_initializer, unique_name


def fuse_conv_bn(graph: Graph, stats: dict | None = None) -> Graph:
    """One walk over the nodes in order, fusing as it goes (the maps kept current: a BN fused makes
    its producer the producer of the BN's output, so a BN after it is judged as after a restart),
    repeated until a walk fuses nothing: the fusions a restart after each would make, in the same
    order, without rebuilding the maps and rescanning the graph per BN (quadratic in a CNN)."""
    fused = 0
    changed = True
    while changed:
        changed = False
        producers = graph.producers()
        consumers = graph.consumers()
        removed: set[int] = set()
        for bn in graph.nodes:
            if bn.op_type != "BatchNormalization" or bn.domain != "":
                continue
            x = bn.inputs[0]
            prod = producers.get(x)
            if prod is None or prod.domain != "" or \
                    prod.op_type not in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
                continue
            if _fuse(graph, prod, bn, consumers):
                removed.add(id(bn))
                producers[bn.outputs[0]] = prod
                producers.pop(x, None)
                consumers.pop(x, None)
                fused += 1
                changed = True
        if removed:
            graph.nodes[:] = [n for n in graph.nodes if id(n) not in removed]
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _bn_params(graph: Graph, bn: Node, consumers) -> tuple[np.ndarray, np.ndarray] | None:
    """(s, t) of the BN as float64 vectors, or None when the BN cannot be folded."""
    if len(bn.inputs) < 5 or any(i not in graph.initializers for i in bn.inputs[1:5]):
        return None
    if bn.attrs.get("training_mode", 0):
        return None
    if any(o and (o in consumers or o in graph.outputs) for o in bn.outputs[1:]):
        return None
    scale, bias, mean, var = (graph.initializers[i].astype(np.float64).reshape(-1) for i in bn.inputs[1:5])
    if not (scale.size == bias.size == mean.size == var.size):
        return None
    eps = float(bn.attrs.get("epsilon", 1e-5))
    s = scale / np.sqrt(var + eps)
    return s, bias - mean * s


def _fuse(graph: Graph, prod: Node, bn: Node, consumers) -> bool:
    x = bn.inputs[0]
    if len([o for o in prod.outputs if o]) != 1 or x in graph.outputs or prod.attrs.get("ge.epilogue"):
        return False  # (an epilogue already applies after the producer: BN cannot move before it)
    if len(consumers.get(x, [])) != 1 or bn.inputs.count(x) != 1:
        return False
    if len(prod.inputs) < 2 or prod.inputs[1] not in graph.initializers:
        return False
    if len(prod.inputs) > 2 and prod.inputs[2] and prod.inputs[2] not in graph.initializers:
        return False
    st = _bn_params(graph, bn, consumers)
    if st is None:
        return False
    s, t = st
    w = graph.initializers[prod.inputs[1]]
    if w.dtype.kind != "f":  # (np.issubdtype's Python walk of the type tree: microseconds a conv)
        return False
    b = graph.initializers[prod.inputs[2]] if len(prod.inputs) > 2 and prod.inputs[2] else None

    if prod.op_type == "Conv":
        result = _conv(w, b, s, t)
    elif prod.op_type == "ConvTranspose":
        result = _conv_transpose(w, b, s, t, int(prod.attrs.get("group", 1)))
    elif prod.op_type == "Gemm":
        result = _gemm(graph, prod, w, b, s, t)
    else:
        result = _matmul(graph, prod, w, s, t)
    if result is None:
        return False
    w_new, b_new = result

    base = prod.name or prod.op_type
    w_name = unique_name(graph, f"{base}_W_bn")
    b_name = unique_name(graph, f"{base}_B_bn")
    set_initializer(graph, w_name, w_new.astype(w.dtype, copy=False))
    set_initializer(graph, b_name, b_new.astype(w.dtype))
    if prod.op_type == "MatMul":
        prod.op_type = "Gemm"
        prod.attrs = {}
    if prod.op_type == "Gemm":
        prod.attrs["beta"] = 1.0
    prod.inputs = [prod.inputs[0], w_name, b_name]
    graph.values.pop(x, None)
    prod.outputs = [bn.outputs[0]]
    return True


def _conv(w, b, s, t):
    c_out = w.shape[0]
    if s.size != c_out:
        return None
    b64 = np.zeros(c_out) if b is None else b.astype(np.float64).reshape(-1)
    if b64.size != c_out:
        return None
    # the product in float64, rounded once into the weight's dtype (what astype of a float64 product
    # gives, bit for bit) without float64 copies of the weights; as rows (C_out x the rest), whose
    # inner loop is a row, not a 1x1 kernel's one element (MobileNetV2's 2.2M: 9 -> 5 ms of `ge atc`)
    rows = np.ascontiguousarray(w.reshape(c_out, math.prod(w.shape[1:])))  # (not -1: a 0 dim has 0 elements)
    w_new = np.empty_like(rows)
    lib = native() if rows.dtype == np.float32 else None
    if lib is not None:  # the same product in one pass (numpy's casting loop buffers both operands: 10x)
        lib.scale_rows(rows, s, w_new)
    else:
        np.multiply(rows, s.reshape(c_out, 1), out=w_new, dtype=np.float64, casting="same_kind")
    return w_new.reshape(w.shape), b64 * s + t


def _conv_transpose(w, b, s, t, group):
    # W: [C_in, C_out / group, k...]; output channel g * (C_out/group) + j
    c_in, per = w.shape[0], w.shape[1]
    c_out = per * group
    if s.size != c_out or c_in % group:
        return None
    b64 = np.zeros(c_out) if b is None else b.astype(np.float64).reshape(-1)
    if b64.size != c_out:
        return None
    wg = w.astype(np.float64).reshape((group, c_in // group, per) + w.shape[2:])
    wg = wg * s.reshape((group, 1, per) + (1,) * (w.ndim - 2))
    return wg.reshape(w.shape), b64 * s + t


def _gemm(graph, prod, w, b, s, t):
    if w.ndim != 2:
        return None
    n = w.shape[0] if prod.attrs.get("transB", 0) else w.shape[1]
    if s.size != n:
        return None
    out = graph.values.get(prod.outputs[0]) if prod.outputs else None
    beta = float(prod.attrs.get("beta", 1.0))
    w64 = w.astype(np.float64)
    w_new = w64 * (s[:, None] if prod.attrs.get("transB", 0) else s[None, :])
    if b is None:
        b_new = t
    else:
        c = b.astype(np.float64) * beta
        try:
            shape = np.broadcast_shapes(c.shape, (n,))
        except ValueError:
            return None
        if len(shape) > 2 or (out is not None and out.is_static and len(shape) == 2 and
                              np.broadcast_shapes(shape, tuple(out.shape)) != tuple(out.shape)):
            return None
        if len(shape) == 2 and shape[0] != 1 and (out is None or not out.is_static):
            return None  # a per-row bias against rows only known at run time: cannot tell it fits
        b_new = np.broadcast_to(c, shape) * s + t
    return w_new, b_new


def _matmul(graph, prod, w, s, t):
    a = graph.values.get(prod.inputs[0])
    if w.ndim != 2 or a is None or a.shape is None or len(a.shape) != 2 or s.size != w.shape[1]:
        return None
    return w.astype(np.float64) * s[None, :], t
