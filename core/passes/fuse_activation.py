"""Fuse activations into their producer as an epilogue.

Why: an activation after Conv/Gemm/MatMul/Add is a full extra pass over a feature map, a task
and a tensor to plan. Applied in place to the producer's output right after the producer wrote
it (while it is hot in cache) it costs no extra memory and no task.

Representation: the producer gets node.attrs["ge.epilogue"] = [[op_type, attrs], ...], applied
in order, in place, to its output; the activation node disappears and the producer writes the
activation's output tensor. Clip's min/max (inputs from opset 11 on) must be constants and are
recorded as attrs {"min": float, "max": float}. The runtime applies each step with the
activation's own kernel through ge.core.kernels.epilogue.Epilogue, so an activation is only fused
when its kernel exists, is flagged `in_place` (tested per kernel) and needs no workspace.

Decomposed forms (passes/_activation_forms.py: what paddle2onnx, tf2onnx, Keras and torch.onnx
write): a chain of scalar steps after the producer that computes one activation becomes its step
(Relu then Min(6): Clip 0..6; Div(Clip(Add(y, 3), 0, 6), 6): HardSigmoid 1/6, 1/2), and y times such a
chain of y, maybe scaled after the product, is Swish (SiLU; ge's own step ["Swish", {"alpha": a},
"ge"]: Mul(y, Sigmoid(y)), Mul(y, Sigmoid(Mul(y, a)))) or HardSwish (ge's own before opset 14):
Mul(y, HardSigmoid(y; 1/6, 1/2)), Div(Mul(y, Clip(Add(y, 3), 0, 6)), 6), Mul(y, Mul(Clip(...), 1/6)), ...
y is then read by the gate and the Mul only; every inner value by the next step only, and none is a
graph output; all the nodes disappear. Anything else is left to fuse_elementwise.

fuse_gelu's tanh form (ge's ["Gelu", {"approximate": "tanh"}, "ge"], GPT-2's gelu_new) fuses into a
Gemm or MatMul: the native GEMM and GEMV apply it as they store (a decoding step's Gelu alone is
7 numpy passes over a thousand floats, several times slower after a product that streamed its
weights through the caches). The exact form stays with fuse_matmul (FusedMatMul's activation).

Conditions: the producer has one output, read only by the activation (not a graph output).
"""
from __future__ import annotations

import pickle
from typing import Callable

import numpy as np

from ..model.ir import Graph, Meta, Node
from ..kernels.dtypes import is_float
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue
from ..kernels.float16 import NARROW, VIA_FLOAT32
from ..kernels.fused import GE_DOMAIN
from ._activation_forms import Chains, Ramp, rtol_of, step_of
from ._fusion import Matcher

PRODUCERS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Add"}
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu"}


def fuse_activation(graph: Graph, stats: dict | None = None) -> Graph:
    fused = 0
    opset = graph.opset.get("", 17)
    chains = Chains(Matcher(graph))
    consumers = chains.m.consumers
    removed: set[int] = set()
    in_place = InPlaceSteps()
    for prod in graph.nodes:
        if id(prod) in removed or prod.domain != "" or prod.op_type not in PRODUCERS:
            continue
        while True:
            found = _fusable(graph, prod, chains, opset, in_place)
            if found is None:
                break
            nodes, step = found
            prod.attrs = dict(prod.attrs)
            prod.attrs[EPILOGUE] = list(prod.attrs.get(EPILOGUE, [])) + [step]
            old = prod.outputs[0]
            prod.outputs = [nodes[-1].outputs[0]]
            for node in nodes:
                removed.add(id(node))
                if node is not nodes[-1]:  # an inner value of the pattern: gone with it
                    graph.values.pop(node.outputs[0], None)
                    consumers.pop(node.outputs[0], None)
            graph.values.pop(old, None)
            consumers.pop(old, None)
            fused += 1
        if _gelu_after_reshape(graph, chains, prod, opset, removed, in_place):
            fused += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _fusable(graph: Graph, prod: Node, chains: Chains, opset: int, in_place: InPlaceSteps):
    """([the nodes that disappear, the last writing the new output], the epilogue step), or None."""
    outs = [o for o in prod.outputs if o]
    if len(outs) != 1 or len(prod.outputs) != 1:
        return None
    y = outs[0]
    v = graph.values.get(y)
    if y in graph.outputs or v is None or v.dtype is None:
        return None
    users = chains.m.consumers.get(y, [])
    if len(users) == 1 and prod.op_type in ("Gemm", "MatMul") and _tanh_gelu(users[0], y):
        found = [users[0]], ["Gelu", dict(users[0].attrs), GE_DOMAIN]
    elif len(users) == 1:
        found = _single(chains, y, users[0], v, opset)
    elif len(users) == 2:
        found = _gated(chains, y, users, v, opset)
    else:
        return None
    if found is None:
        return None
    nodes, step = found
    if not in_place(step[0], step[1], _epilogue_dtype(prod, v.dtype), opset, *step[2:]):
        return None
    return nodes, step


def _single(chains: Chains, y: str, act: Node, v, opset: int):
    """The longest chain from act that is one activation (Relu then Min(6): Clip 0..6), or act alone."""
    found = None
    if is_float(v.dtype):
        for f, nodes in chains.prefixes(act, y, _rank(v)):
            step = step_of(f, False, rtol_of(v.dtype), opset)
            if step is not None and (len(nodes) > 1 or act.op_type not in ACTIVATIONS):
                found = nodes, step
    if found is not None:
        return found
    if act.domain != "" or act.op_type not in ACTIVATIONS or act.inputs[0] != y or act.inputs.count(y) != 1:
        return None
    if len([o for o in act.outputs if o]) != 1 or not act.outputs[0]:
        return None
    attrs = dict(act.attrs)
    if act.op_type == "Clip":
        bounds = chains.after(Ramp(), act, y, _rank(v))
        if bounds is None:
            return None
        attrs = {"min": bounds.lo, "max": bounds.hi}
    return [act], [act.op_type, attrs]


def _gelu_after_reshape(graph: Graph, chains: Chains, prod: Node, opset: int, removed: set,
                        in_place: InPlaceSteps) -> bool:
    """Gemm or MatMul -> Reshape -> tanh Gelu, each read by the next alone (GPT-2's Conv1D exported as
    Reshape/Gemm/Reshape, then gelu_new): the Gelu becomes the product's epilogue and the Reshape
    writes the Gelu's output (an elementwise step commutes with a reshape). True when done."""
    consumers = chains.m.consumers
    if prod.op_type not in ("Gemm", "MatMul") or len(prod.outputs) != 1 or prod.attrs.get(EPILOGUE):
        return False
    y = prod.outputs[0]
    users = consumers.get(y, [])
    if not y or y in graph.outputs or len(users) != 1 or users[0].op_type != "Reshape" or users[0].domain != "" \
            or users[0].inputs[:1] != [y] or len(users[0].outputs) != 1:
        return False
    reshape, r = users[0], users[0].outputs[0]
    after = consumers.get(r, [])
    if r in graph.outputs or len(after) != 1 or not _tanh_gelu(after[0], r):
        return False
    gelu, v = after[0], graph.values.get(y)
    if v is None or v.dtype is None or not in_place("Gelu", dict(gelu.attrs), _epilogue_dtype(prod, v.dtype),
                                                   opset, GE_DOMAIN):
        return False
    prod.attrs = dict(prod.attrs, **{EPILOGUE: [["Gelu", dict(gelu.attrs), GE_DOMAIN]]})
    reshape.outputs = [gelu.outputs[0]]
    graph.values.pop(r, None)
    consumers.pop(r, None)
    removed.add(id(gelu))
    return True


def _tanh_gelu(node: Node, y: str) -> bool:
    """fuse_gelu's Gelu with approximate="tanh", of y alone, without an epilogue of its own."""
    if node.op_type != "Gelu" or node.domain != GE_DOMAIN or node.inputs != [y] or node.attrs.get(EPILOGUE):
        return False
    value = node.attrs.get("approximate", "none")
    return (value.decode() if isinstance(value, bytes) else value) == "tanh" and len(node.outputs) == 1


def _gated(chains: Chains, y: str, users: list, v, opset: int):
    """y * f(y), maybe scaled after the product (the module doc): Swish, HardSwish."""
    if not is_float(v.dtype):
        return None
    rank, rtol = _rank(v), rtol_of(v.dtype)
    for mul, first in (users, users[::-1]):
        if mul.domain != "" or mul.op_type != "Mul" or first is mul or len(mul.outputs) != 1 or not mul.outputs[0]:
            continue
        gate = chains.m.other_input(mul, y)
        for f, nodes in chains.prefixes(first, y, rank):
            if nodes[-1].outputs[0] != gate:
                continue
            if chains.m.consumers.get(gate, []) != [mul] or gate in chains.m.graph.outputs:
                return None
            found = None
            step = step_of(f, True, rtol, opset)
            if step is not None:
                found = nodes + [mul], step
            for scaled, after in _scales(chains, mul, f, rank):
                step = step_of(scaled, True, rtol, opset)
                if step is not None:
                    found = nodes + [mul] + after, step
            return found
    return None


def _scales(chains: Chains, mul: Node, f: Ramp, rank: int):
    """(f scaled, [the nodes]) for the Mul or Div by positive constants that follow y * f(y):
    s * y * f(y) = y * (s * f)(y)."""
    nodes, node = [], chains.m.sole_consumer(mul)
    x = mul.outputs[0]
    while node is not None and node.op_type in ("Mul", "Div"):
        g = chains.after(Ramp(), node, x, rank)
        if g is None:
            return
        f = f.scale(g.a)
        nodes.append(node)
        yield f, list(nodes)
        x = node.outputs[0]
        node = chains.m.sole_consumer(node)


def _rank(v) -> int:
    """y's rank: a constant of no more dims broadcasts to y without changing its shape (0: unknown)."""
    return len(v.shape) if v.shape is not None else 0


def _epilogue_dtype(prod: Node, dtype) -> np.dtype:
    """The dtype the epilogue is applied in: a float16 or bfloat16 Conv, MatMul or Gemm computes in
    float32 and applies it before rounding (kernels/float16.py), so e.g. a float16 export's Conv +
    HardSwish or Conv + SiLU fuses as a float32 one does."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if np.dtype(dtype).name in NARROW and (prod.domain, prod.op_type) in VIA_FLOAT32 else dtype


def build_epilogue(epilogue: list, meta: Meta, opset: int = 17, name: str = "") -> Callable[[np.ndarray], None]:
    """A function applying a node's "ge.epilogue" in place to its output array `y` (as the runtime does)."""
    return Epilogue(epilogue, meta, opset, name)


def works_in_place(op: str, attrs: dict, dtype: np.dtype, opset: int, domain: str = "") -> bool:
    return Epilogue.supports(op, attrs, dtype, opset, domain)


class InPlaceSteps:
    """works_in_place, asked once per step (op, attributes, dtype, opset, domain) within one
    fuse_activation: a CNN asks it of the same Relu or HardSwish at every producer, and each answer
    plans the step's kernel."""

    def __init__(self):
        self._known: dict[tuple, bool] = {}

    def __call__(self, op: str, attrs: dict, dtype: np.dtype, opset: int, domain: str = "") -> bool:
        key = (op, pickle.dumps(attrs, pickle.HIGHEST_PROTOCOL), np.dtype(dtype), opset, domain)
        if key not in self._known:
            self._known[key] = works_in_place(op, attrs, dtype, opset, domain)
        return self._known[key]
