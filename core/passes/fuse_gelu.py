"""Fuse the exported erf form of GELU, x * 0.5 * (1 + Erf(x / sqrt(2))), into one ge::Gelu node.

Why: exporters before opset 20 write GELU as five ops (Div or Mul, Erf, Add, Mul, Mul): five tasks
and five passes over the largest feature map of a transformer, where one kernel evaluates the
whole formula in cache with the 1/sqrt(2) folded into its polynomial.

Recognized: Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (either operand order) -> Erf -> Add(1) -> then
x, the sum and 0.5 multiplied by two Muls in any grouping: (x * s) * 0.5, (0.5 * s) * x,
(x * 0.5) * s. Every intermediate tensor must be read only inside the pattern and not be a graph
output. The fused node is in ge's domain (kernels/fused.py), usable at any opset.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Graph, Node
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher

SQRT2 = math.sqrt(2.0)


def fuse_gelu(graph: Graph, stats: dict | None = None) -> Graph:
    m = Matcher(graph)
    fused = 0
    for erf in list(graph.nodes):
        if erf.op_type != "Erf" or erf.domain != "" or m.removed(erf):
            continue
        match = _match(m, erf)
        if match is None:
            continue
        x, out, nodes = match
        last = nodes[-1]
        m.replace(nodes, Node("Gelu", [x], [out], {}, name=last.name or f"{erf.name}_gelu", domain=GE_DOMAIN))
        fused += 1
    m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _match(m: Matcher, erf: Node):
    """(x, output, [pattern nodes in order]) or None."""
    scale = m.sole_producer(erf.inputs[0], erf)
    if scale is None:
        return None
    x = _scaled_input(m, scale)
    if x is None or not m.is_float(x):
        return None
    add = m.sole_consumer(erf)
    if add is None or add.op_type != "Add" or not m.scalar_operand(add, erf.outputs[0], 1.0):
        return None
    mul = m.sole_consumer(add)
    if mul is None or mul.op_type != "Mul":
        return None
    s = add.outputs[0]
    other = m.other_input(mul, s)
    if other == x:  # (x * s) * 0.5
        last = m.sole_consumer(mul)
        if last is None or last.op_type != "Mul" or not m.scalar_operand(last, mul.outputs[0], 0.5):
            return None
        return x, last.outputs[0], [scale, erf, add, mul, last]
    if other is not None and m.scalar_value(other) == 0.5:  # (0.5 * s) * x
        last = m.sole_consumer(mul)
        if last is None or last.op_type != "Mul" or m.other_input(last, mul.outputs[0]) != x:
            return None
        return x, last.outputs[0], [scale, erf, add, mul, last]
    half = m.sole_producer(other, mul) if other is not None else None  # (x * 0.5) * s
    if half is None or half.op_type != "Mul" or not m.scalar_operand(half, x, 0.5):
        return None
    return x, mul.outputs[0], [scale, half, erf, add, mul]


def _scaled_input(m: Matcher, node: Node):
    """x when node is x / sqrt(2) or x * (1 / sqrt(2)), else None."""
    if node.op_type == "Div" and len(node.inputs) == 2:
        c = m.scalar_value(node.inputs[1])
        return node.inputs[0] if c is not None and np.isclose(c, SQRT2, rtol=1e-6, atol=0) else None
    if node.op_type == "Mul" and len(node.inputs) == 2:
        for i in (0, 1):
            c = m.scalar_value(node.inputs[1 - i])
            if c is not None and np.isclose(c, 1 / SQRT2, rtol=1e-6, atol=0):
                return node.inputs[i]
    return None
