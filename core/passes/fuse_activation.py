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

Conditions: the producer has one output, read only by the activation (not a graph output).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import Graph, Meta, Node
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue

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
            act = _fusable(graph, prod, consumers, opset)
            if act is None:
                break
            op, attrs = act[1], act[2]
            prod.attrs = dict(prod.attrs)
            prod.attrs[EPILOGUE] = list(prod.attrs.get(EPILOGUE, [])) + [[op, attrs]]
            old = prod.outputs[0]
            prod.outputs = [act[0].outputs[0]]
            removed.add(id(act[0]))
            graph.values.pop(old, None)
            consumers.pop(old, None)
            fused += 1
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _fusable(graph: Graph, prod: Node, consumers, opset: int):
    outs = [o for o in prod.outputs if o]
    if len(outs) != 1 or len(prod.outputs) != 1:
        return None
    y = outs[0]
    users = consumers.get(y, [])
    if y in graph.outputs or len(users) != 1:
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
    if not works_in_place(act.op_type, attrs, np.dtype(v.dtype), opset):
        return None
    return act, act.op_type, attrs


def build_epilogue(epilogue: list, meta: Meta, opset: int = 17, name: str = "") -> Callable[[np.ndarray], None]:
    """A function applying a node's "ge.epilogue" in place to its output array `y` (as the runtime does)."""
    return Epilogue(epilogue, meta, opset, name)


def works_in_place(op: str, attrs: dict, dtype: np.dtype, opset: int) -> bool:
    return Epilogue.supports(op, attrs, dtype, opset)
