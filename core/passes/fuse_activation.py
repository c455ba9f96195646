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

Gated forms: Mul(y, Sigmoid(y)) is Swish (SiLU; ge's own epilogue step ["Swish", {"alpha": 1.0},
"ge"]) and Mul(y, HardSigmoid(y)) with alpha 1/6, beta 1/2 is HardSwish (ge's own before opset 14): y is then read by the gate
and the Mul only, the gate's output by the Mul only; both nodes disappear.

Conditions: the producer has one output, read only by the activation (not a graph output).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import Graph, Meta, Node
from ..kernels.dtypes import is_float
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue
from ..kernels.float16 import NARROW, VIA_FLOAT32
from ..kernels.fused import GE_DOMAIN

PRODUCERS = {"Conv", "Gemm", "MatMul", "Add"}
ACTIVATIONS = {"Relu", "Clip", "LeakyRelu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu"}


def fuse_activation(graph: Graph, stats: dict | None = None) -> Graph:
    fused = 0
    opset = graph.opset.get("", 17)
    consumers = graph.consumers()
    removed: set[int] = set()
    for prod in graph.nodes:
        if id(prod) in removed or prod.domain != "" or prod.op_type not in PRODUCERS:
            continue
        while True:
            found = _fusable(graph, prod, consumers, opset)
            if found is None:
                break
            nodes, step = found
            prod.attrs = dict(prod.attrs)
            prod.attrs[EPILOGUE] = list(prod.attrs.get(EPILOGUE, [])) + [step]
            old = prod.outputs[0]
            prod.outputs = [nodes[-1].outputs[0]]
            for node in nodes:
                removed.add(id(node))
                if node is not nodes[-1]:  # a gate's output: gone with it
                    graph.values.pop(node.outputs[0], None)
                    consumers.pop(node.outputs[0], None)
            graph.values.pop(old, None)
            consumers.pop(old, None)
            fused += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _fusable(graph: Graph, prod: Node, consumers, opset: int):
    """([the nodes that disappear, the last writing the new output], the epilogue step), or None."""
    outs = [o for o in prod.outputs if o]
    if len(outs) != 1 or len(prod.outputs) != 1:
        return None
    y = outs[0]
    users = consumers.get(y, [])
    if y in graph.outputs:
        return None
    if len(users) == 2:
        return _gated(graph, prod, y, users, consumers, opset)
    if len(users) != 1:
        return None
    act = users[0]
    if act.domain != "" or act.op_type not in ACTIVATIONS or act.inputs[0] != y or act.inputs.count(y) != 1:
        return None
    if len([o for o in act.outputs if o]) != 1 or not act.outputs[0]:
        return None
    v = graph.values.get(y)
    if v is None or v.dtype is None:
        return None
    attrs = {k: val for k, val in act.attrs.items()}
    if act.op_type == "Clip":
        bounds = {}
        for key, idx in (("min", 1), ("max", 2)):
            name = act.inputs[idx] if len(act.inputs) > idx else ""
            if name:
                if name not in graph.initializers or graph.initializers[name].size != 1:
                    return None
                bounds[key] = float(graph.initializers[name].reshape(-1)[0])
            elif key in act.attrs:  # opset < 11 spelling
                bounds[key] = float(act.attrs[key])
            else:
                bounds[key] = float("-inf") if key == "min" else float("inf")
        attrs = bounds
    if not works_in_place(act.op_type, attrs, _epilogue_dtype(prod, v.dtype), opset):
        return None
    return [act], [act.op_type, attrs]


def _gated(graph: Graph, prod: Node, y: str, users: list, consumers, opset: int):
    """y * Sigmoid(y) as Swish, y * HardSigmoid(y; 1/6, 1/2) as HardSwish (see the module doc)."""
    gates = [n for n in users if n.domain == "" and n.op_type in ("Sigmoid", "HardSigmoid") and n.inputs == [y]]
    muls = [n for n in users if n.domain == "" and n.op_type == "Mul" and len(n.inputs) == 2]
    if len(gates) != 1 or len(muls) != 1 or len(gates[0].outputs) != 1 or len(muls[0].outputs) != 1:
        return None
    gate, mul = gates[0], muls[0]
    g = gate.outputs[0]
    if sorted(mul.inputs) != sorted([y, g]) or g in graph.outputs or consumers.get(g, []) != [mul] \
            or not mul.outputs[0]:
        return None
    v = graph.values.get(y)
    if v is None or v.dtype is None or not is_float(v.dtype):
        return None
    if gate.op_type == "Sigmoid":
        step = ["Swish", {"alpha": 1.0}, GE_DOMAIN]
    else:
        alpha, beta = float(gate.attrs.get("alpha", 0.2)), float(gate.attrs.get("beta", 0.5))
        if not (abs(alpha - 1 / 6) < 1e-7 and beta == 0.5):
            return None
        # before opset 14 (the TorchScript exporter's hardswish at opsets 11-13) ge's own HardSwish
        step = ["HardSwish", {}] if opset >= 14 else ["HardSwish", {}, GE_DOMAIN]
    if not works_in_place(step[0], step[1], _epilogue_dtype(prod, v.dtype), opset, *step[2:]):
        return None
    return [gate, mul], step


def _epilogue_dtype(prod: Node, dtype) -> np.dtype:
    """The dtype the epilogue is applied in: a float16 or bfloat16 Conv, MatMul or Gemm computes in
    float32 and applies it before rounding (kernels/float16.py), so e.g. a float16 export's Conv +
    HardSwish or Conv + SiLU fuses as a float32 one does."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in NARROW and (prod.domain, prod.op_type) in VIA_FLOAT32 else dtype


def build_epilogue(epilogue: list, meta: Meta, opset: int = 17, name: str = "") -> Callable[[np.ndarray], None]:
    """A function applying a node's "ge.epilogue" in place to its output array `y` (as the runtime does)."""
    return Epilogue(epilogue, meta, opset, name)


def works_in_place(op: str, attrs: dict, dtype: np.dtype, opset: int, domain: str = "") -> bool:
    return Epilogue.supports(op, attrs, dtype, opset, domain)
