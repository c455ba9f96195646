"""Quantized models run as quantized kernels: QDQ patterns and quantize_dynamic's products are fused.

Why: a QDQ model (onnxruntime's quantize_static, QuantFormat.QDQ) says "this Conv runs in int8" with
DequantizeLinear on its inputs and QuantizeLinear on its output; run as written, every layer is
dequantize, float32 Conv, quantize: three passes over the activations and a float product. As in
onnxruntime's QDQ transformer, each such group becomes the operator that computes it on the 8-bit
values (the QOperator form), whose kernel accumulates in int32 and requantizes as it stores:
- DQ(x) + DQ(w) [+ DQ(int32 bias, scale x_scale * w_scale)] -> Conv -> Q  =>  QLinearConv
- DQ(a) + DQ(w) -> MatMul -> Q                                              =>  QLinearMatMul
- DQ(a) + DQ(w) [+ DQ(bias)] -> Gemm (alpha 1, beta 1, transA 0) -> Q      =>  com.microsoft QGemm
- DQ(a) + DQ(b) -> Add -> Q                                                 =>  com.microsoft QLinearAdd
- DQ(x) -> GlobalAveragePool -> Q                                           =>  com.microsoft QLinearGlobalAveragePool
- DQ(x) -> Reshape/Flatten/Squeeze/Unsqueeze/Transpose/MaxPool -> Q, same scale and zero point  =>  that op on x
and quantize_dynamic's MatMulInteger(a, w) -> Cast(float) -> Mul(Mul(a_scale, w_scale)) [-> Add(bias)]
becomes one com.microsoft MatMulIntegerToFloat (the product scaled to float32 as it stores). Then, what
is left between float ops (an attention's scores and probabilities, an activation's pieces):
- Q(x) -> DQ, same scale and zero point, Q read by that DQ only                  =>  ge QuantizeDequantize
the same values in one pass over the tensor (the two ops took two and a byte tensor), and
- QuantizeDequantize -> Softmax -> QuantizeDequantize, each read by the next only     =>  ge SoftmaxQdq
an attention's probabilities, whose softmax reads and stores through the round trips (no pass of its own).

Conditions: weights, scales and zero points are initializers; activations have one scale and zero
point (weights may have one per output channel: axis 0 of Conv's or transB Gemm's W, the last axis
of MatMul's); the product's output has no other reader than its QuantizeLinear. The pass runs before
constant folding, which would otherwise turn the weights' DequantizeLinear into float32 weights; the
DequantizeLinear nodes left without readers go with dead_code.
"""
from __future__ import annotations

import numpy as np

from ..kernels.fused import GE_DOMAIN
from ..model.ir import Graph, Node
from ._fusion import Matcher

MS = "com.microsoft"
Q8 = (np.dtype(np.uint8), np.dtype(np.int8))
#: ops that commute with quantization at equal input and output parameters (moving values, or MaxPool's
#: order-preserving choice): DQ -> op -> Q is the op on the 8-bit tensor
RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "MaxPool")


def fuse_qdq(graph: Graph, stats: dict | None = None) -> Graph:
    m = QdqMatcher(graph)
    counts = {"conv": 0, "matmul": 0, "gemm": 0, "add": 0, "pool": 0, "reshape": 0, "dynamic_matmul": 0,
              "round_trip": 0, "softmax": 0}
    # every pattern ends in a QuantizeLinear (m.q) but the MatMulInteger one: a float model has neither
    anchored = any(n.op_type in ("QuantizeLinear", "MatMulInteger") and n.domain == "" for n in graph.nodes)
    for node in list(graph.nodes) if anchored else ():
        if node.domain != "" or m.removed(node):
            continue
        key = {"Conv": "conv", "MatMul": "matmul", "Gemm": "gemm", "Add": "add", "GlobalAveragePool": "pool",
               "MatMulInteger": "dynamic_matmul"}.get(node.op_type) or ("reshape" if node.op_type in RESHAPES else None)
        if key and _FUSERS[key](m, node):
            counts[key] += 1
    m.commit()
    if anchored:  # after the fusions above, which read the DequantizeLinears a round trip would take
        m = QdqMatcher(graph)
        counts["round_trip"] = sum(_fuse_round_trip(m, n) for n in list(graph.nodes) if n.op_type == "QuantizeLinear")
        m.commit()
        m = QdqMatcher(graph)
        counts["softmax"] = sum(_fuse_softmax(m, n) for n in list(graph.nodes) if n.op_type == "Softmax")
        m.commit()
    if any(counts[k] for k in ("gemm", "add", "pool", "dynamic_matmul")):
        graph.opset.setdefault(MS, 1)
    if stats is not None:
        for k, v in counts.items():
            stats[k] = stats.get(k, 0) + v
    return graph


class QdqMatcher(Matcher):
    def init(self, name: str | None) -> np.ndarray | None:
        return self.graph.initializers.get(name) if name else None

    def dq(self, name: str, *, weights: bool = False) -> Node | None:
        """The DequantizeLinear producing `name` (per tensor, scale and 8-bit zero point initializers;
        weights: its x an initializer too, per-axis scales allowed)."""
        n = self.producers.get(name)
        if n is None or n.op_type != "DequantizeLinear" or n.domain != "" or self.removed(n) or len(n.inputs) < 3:
            return None
        s, z = self.init(n.inputs[1]), self.init(n.inputs[2])
        if s is None or z is None or s.dtype != np.float32 or z.dtype not in Q8 or s.shape != z.shape \
                or int(n.attrs.get("block_size", 0) or 0):
            return None
        if weights:
            x = self.init(n.inputs[0])
            return n if x is not None and x.dtype == z.dtype and s.ndim <= 1 else None
        return n if s.size == 1 else None

    def q(self, node: Node) -> Node | None:
        """The per-tensor QuantizeLinear that alone reads node's output."""
        n = self.sole_consumer(node)
        return n if n is not None and n.inputs[0] == node.outputs[0] and self.per_tensor_q(n) else None

    def per_tensor_q(self, n: Node) -> bool:
        """n is a QuantizeLinear to 8 bits with one float32 scale and zero point, initializers."""
        if n.op_type != "QuantizeLinear" or n.domain != "" or len(n.inputs) < 3:
            return False
        s, z = self.init(n.inputs[1]), self.init(n.inputs[2])
        return not (s is None or z is None or s.dtype != np.float32 or s.size != 1 or z.dtype not in Q8 or z.size != 1
                    or int(n.attrs.get("block_size", 0) or 0) or int(n.attrs.get("output_dtype", 0) or 0))

    def same_params(self, a: Node, b: Node) -> bool:
        """a's and b's scale and zero point (inputs 1 and 2) are initializers of the same dtypes and values."""
        def same(x, y):
            return x is not None and y is not None and x.dtype == y.dtype and np.array_equal(x, y)
        return all(same(self.init(a.inputs[i]), self.init(b.inputs[i])) for i in (1, 2))

    def per_axis_ok(self, w_dq: Node, axis: int) -> bool:
        """Weights' scale per tensor, or one per channel along `axis` of W."""
        s, w = self.init(w_dq.inputs[1]), self.init(w_dq.inputs[0])
        if s.size == 1:
            return True
        a = int(w_dq.attrs.get("axis", 1))
        return s.ndim == 1 and a % w.ndim == axis % w.ndim and s.size == w.shape[axis]

    def int32_bias(self, name: str | None, x_dq: Node, w_dq: Node) -> str | None:
        """The int32 bias behind DQ(bias) when its scale is x_scale * w_scale and its zero point 0."""
        n = self.producers.get(name) if name else None
        if n is None or n.op_type != "DequantizeLinear" or self.removed(n):
            return None
        b, s = self.init(n.inputs[0]), self.init(n.inputs[1])
        z = self.init(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
        if b is None or s is None or b.dtype != np.int32 or b.ndim != 1 or (z is not None and np.any(z != 0)):
            return None
        want = self.init(x_dq.inputs[1]).reshape(()) * self.init(w_dq.inputs[1]).reshape(-1)
        if s.reshape(-1).shape not in (want.shape, (1,)) or not np.allclose(s.reshape(-1), want, rtol=1e-5, atol=0):
            return None
        return n.inputs[0]


def _params(dq: Node) -> list[str]:
    return list(dq.inputs[:3])


def _fuse_conv(m: QdqMatcher, conv: Node) -> bool:
    if len(conv.inputs) < 2:
        return False
    x_dq, w_dq, q = m.dq(conv.inputs[0]), m.dq(conv.inputs[1], weights=True), m.q(conv)
    if x_dq is None or w_dq is None or q is None or not m.per_axis_ok(w_dq, 0):
        return False
    bias = []
    if len(conv.inputs) > 2 and conv.inputs[2]:
        b = m.int32_bias(conv.inputs[2], x_dq, w_dq)
        if b is None:
            return False
        bias = [b]
    attrs = {k: v for k, v in conv.attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")}
    m.replace([conv, q], Node("QLinearConv", _params(x_dq) + _params(w_dq) + list(q.inputs[1:3]) + bias,
                              [q.outputs[0]], attrs, name=conv.name, domain=""))
    return True


def _fuse_matmul(m: QdqMatcher, mm: Node) -> bool:
    a_dq, w_dq, q = m.dq(mm.inputs[0]), m.dq(mm.inputs[1], weights=True), m.q(mm)
    if a_dq is None or w_dq is None or q is None or m.init(w_dq.inputs[0]).ndim != 2 or not m.per_axis_ok(w_dq, 1):
        return False
    m.replace([mm, q], Node("QLinearMatMul", _params(a_dq) + _params(w_dq) + list(q.inputs[1:3]), [q.outputs[0]], {},
                            name=mm.name, domain=""))
    return True


def _fuse_gemm(m: QdqMatcher, gemm: Node) -> bool:
    a = gemm.attrs
    if float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0 or int(a.get("transA", 0)):
        return False
    a_dq, w_dq, q = m.dq(gemm.inputs[0]), m.dq(gemm.inputs[1], weights=True), m.q(gemm)
    trans_b = int(a.get("transB", 0))
    if a_dq is None or w_dq is None or q is None or not m.per_axis_ok(w_dq, 0 if trans_b else 1):
        return False
    c = ""
    if len(gemm.inputs) > 2 and gemm.inputs[2]:
        c = m.int32_bias(gemm.inputs[2], a_dq, w_dq)
        if c is None:
            return False
    m.replace([gemm, q], Node("QGemm", _params(a_dq) + _params(w_dq) + [c] + list(q.inputs[1:3]), [q.outputs[0]],
                              {"transB": trans_b}, name=gemm.name, domain=MS))
    return True


def _same_type(m: QdqMatcher, *nodes: Node) -> bool:
    return len({m.init(n.inputs[2]).dtype for n in nodes}) == 1


def _fuse_add(m: QdqMatcher, add: Node) -> bool:
    if len(add.inputs) != 2:
        return False
    a_dq, b_dq, q = m.dq(add.inputs[0]), m.dq(add.inputs[1]), m.q(add)
    if a_dq is None or b_dq is None or q is None or not _same_type(m, a_dq, b_dq, q):
        return False
    m.replace([add, q], Node("QLinearAdd", _params(a_dq) + _params(b_dq) + list(q.inputs[1:3]), [q.outputs[0]], {},
                             name=add.name, domain=MS))
    return True


def _fuse_pool(m: QdqMatcher, pool: Node) -> bool:
    x_dq, q = m.dq(pool.inputs[0]), m.q(pool)
    if x_dq is None or q is None or not _same_type(m, x_dq, q):
        return False
    m.replace([pool, q], Node("QLinearGlobalAveragePool", _params(x_dq) + list(q.inputs[1:3]), [q.outputs[0]],
                              {"channels_last": 0}, name=pool.name, domain=MS))
    return True


def _fuse_reshape(m: QdqMatcher, r: Node) -> bool:
    """DQ -> reshape (or MaxPool) -> Q with the same parameters is that op on the quantized tensor."""
    x_dq, q = m.dq(r.inputs[0]), m.q(r)
    if x_dq is None or q is None or (r.op_type == "MaxPool" and len(r.outputs) > 1):
        return False
    if not m.same_params(x_dq, q):
        return False
    m.replace([r, q], Node(r.op_type, [x_dq.inputs[0]] + list(r.inputs[1:]), [q.outputs[0]], dict(r.attrs),
                           name=r.name, domain=""))
    return True


def _fuse_round_trip(m: QdqMatcher, q: Node) -> bool:
    """Q(x) -> DQ with the same scale and zero point, the DQ Q's only reader => ge QuantizeDequantize."""
    if not m.per_tensor_q(q):
        return False
    dq = m.sole_consumer(q)
    if dq is None or dq.op_type != "DequantizeLinear" or dq.domain != "" or len(dq.inputs) < 3 \
            or dq.inputs[0] != q.outputs[0] or int(dq.attrs.get("block_size", 0) or 0) \
            or int(dq.attrs.get("output_dtype", 0) or 0) not in (0, 1) or not m.same_params(q, dq):
        return False
    m.replace([q, dq], Node("QuantizeDequantize", list(q.inputs[:3]), [dq.outputs[0]], {}, name=q.name,
                            domain=GE_DOMAIN))
    return True


def _fuse_softmax(m: QdqMatcher, softmax: Node) -> bool:
    """QuantizeDequantize -> Softmax -> QuantizeDequantize, each read by the next alone => ge SoftmaxQdq."""
    if softmax.domain != "" or len(softmax.inputs) != 1 or len(softmax.outputs) != 1:
        return False
    before, after = m.sole_producer(softmax.inputs[0], softmax, domain=GE_DOMAIN), m.sole_consumer(softmax)
    if before is None or before.op_type != "QuantizeDequantize" or after is None \
            or after.op_type != "QuantizeDequantize" or after.domain != GE_DOMAIN:
        return False
    m.replace([before, softmax, after], Node("SoftmaxQdq", [*before.inputs[:3], *after.inputs[1:3]], [after.outputs[0]],
                                             dict(softmax.attrs), name=softmax.name, domain=GE_DOMAIN))
    return True


def _fuse_dynamic_matmul(m: QdqMatcher, mm: Node) -> bool:
    """MatMulInteger(a, w, a_zp, w_zp) -> Cast(float) -> Mul(scale) [-> Add(bias)] => MatMulIntegerToFloat,
    where scale = Mul(a_scale, w_scale) with w_scale an initializer."""
    w = m.init(mm.inputs[1]) if len(mm.inputs) > 1 else None
    if w is None or w.ndim != 2:
        return False
    cast = m.sole_consumer(mm)
    if cast is None or cast.op_type != "Cast" or int(cast.attrs.get("to", 0)) != 1:
        return False
    mul = m.sole_consumer(cast)
    scale = m.other_input(mul, cast.outputs[0]) if mul is not None and mul.op_type == "Mul" else None
    sm = m.producers.get(scale) if scale else None
    if sm is None or sm.op_type != "Mul" or len(sm.inputs) != 2 or sm.domain != "":
        return False
    consts = [m.init(i) for i in sm.inputs]
    k = 1 if consts[1] is not None else 0 if consts[0] is not None else None
    n = w.shape[1]
    if k is None or consts[k].dtype != np.float32 or consts[k].size not in (1, n):
        return False
    a_scale, w_scale = sm.inputs[1 - k], sm.inputs[k]
    group, y, bias = [mm, cast, mul], mul.outputs[0], ""
    add = m.sole_consumer(mul)
    if add is not None and add.op_type == "Add":
        b_name = m.other_input(add, y)
        b = m.init(b_name)
        if b is not None and b.dtype == np.float32 and b.shape == (n,):
            group.append(add)
            y, bias = add.outputs[0], b_name
    zps = list(mm.inputs[2:4]) + [""] * (4 - len(mm.inputs))
    inputs = [mm.inputs[0], mm.inputs[1], a_scale, w_scale, zps[0], zps[1], bias]
    while not inputs[-1]:
        inputs.pop()
    m.replace(group, Node("MatMulIntegerToFloat", inputs, [y], {}, name=mm.name, domain=MS))
    return True


_FUSERS = {"conv": _fuse_conv, "matmul": _fuse_matmul, "gemm": _fuse_gemm, "add": _fuse_add, "pool": _fuse_pool,
           "reshape": _fuse_reshape, "dynamic_matmul": _fuse_dynamic_matmul}
