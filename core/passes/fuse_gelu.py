"""Fuse the exported forms of GELU into one ge::Gelu node: the erf form x * 0.5 * (1 + Erf(x / sqrt(2)))
and the tanh form x * 0.5 * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) (GPT-2's gelu_new,
F.gelu(approximate="tanh")), which becomes Gelu with approximate="tanh".

Why: exporters before opset 20 write GELU as five ops (Div or Mul, Erf, Add, Mul, Mul): five tasks
and five passes over the largest feature map of a transformer, where one kernel evaluates the
whole formula in cache with the 1/sqrt(2) folded into its polynomial.

Recognized: Div(x, sqrt 2) or Mul(x, 1/sqrt 2) (either operand order) -> Erf -> Add(1) -> then
x, the sum and 0.5 multiplied by two Muls in any grouping: (x * s) * 0.5, (0.5 * s) * x,
(x * 0.5) * s. The tanh form's inner part: Mul(sqrt(2/pi), Add(x, Mul(0.044715, cube))), either
operand order, the cube Pow(x, 3) or Mul(Mul(x, x), x) (a Pow on negative bases costs numpy ~100x a
product: GPT-2's MLP spent 60% of its time in it). Every intermediate tensor must be read only inside the pattern and not be a graph
output. The fused node is in ge's domain (kernels/fused.py), usable at any opset.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.ir import Graph, Node
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher

SQRT2 = math.sqrt(2.0)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def fuse_gelu(graph: Graph, stats: dict | None = None) -> Graph:
    m = Matcher(graph)
    fused = 0
    for erf in list(graph.nodes):
        if erf.op_type not in ("Erf", "Tanh") or erf.domain != "" or m.removed(erf):
            continue
        match = _match(m, erf)
        if match is None:
            continue
        x, out, nodes = match
        last = nodes[-1]
        attrs = {"approximate": "tanh"} if erf.op_type == "Tanh" else {}
        m.replace(nodes, Node("Gelu", [x], [out], attrs, name=last.name or f"{erf.name}_gelu", domain=GE_DOMAIN))
        fused += 1
    m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph


def _match(m: Matcher, erf: Node):
    """(x, output, [pattern nodes in order]) or None; erf is the Erf or the Tanh node."""
    scale = m.sole_producer(erf.inputs[0], erf)
    if scale is None:
        return None
    head = _tanh_argument(m, scale) if erf.op_type == "Tanh" else _scaled_input(m, scale)
    if head is None:
        return None
    x, inner = head if erf.op_type == "Tanh" else (head, [])
    if not m.is_float(x):
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
        return x, last.outputs[0], inner + [scale, erf, add, mul, last]
    if other is not None and m.scalar_value(other) == 0.5:  # (0.5 * s) * x
        last = m.sole_consumer(mul)
        if last is None or last.op_type != "Mul" or m.other_input(last, mul.outputs[0]) != x:
            return None
        return x, last.outputs[0], inner + [scale, erf, add, mul, last]
    half = m.sole_producer(other, mul) if other is not None else None  # (x * 0.5) * s
    if half is None or half.op_type != "Mul" or not m.scalar_operand(half, x, 0.5):
        return None
    return x, mul.outputs[0], inner + [scale, half, erf, add, mul]


def _scalar_times(m: Matcher, node: Node, value: float) -> str | None:
    """y when node is Mul(y, c) or Mul(c, y) with the scalar constant c close to value, else None."""
    if node.op_type != "Mul" or len(node.inputs) != 2:
        return None
    for i in (0, 1):
        c = m.scalar_value(node.inputs[1 - i])
        if c is not None and np.isclose(c, value, rtol=1e-6, atol=0):
            return node.inputs[i]
    return None


def _tanh_argument(m: Matcher, scale: Node):
    """(x, [nodes from the cube to scale]) when scale is sqrt(2/pi) * (x + 0.044715 * x^3), else None."""
    sum_ = _scalar_times(m, scale, SQRT_2_OVER_PI)
    add = m.sole_producer(sum_, scale) if sum_ is not None else None
    if add is None or add.op_type != "Add" or len(add.inputs) != 2:
        return None
    for i in (0, 1):
        x, term = add.inputs[i], add.inputs[1 - i]
        kappa = m.sole_producer(term, add)
        cube_out = _scalar_times(m, kappa, 0.044715) if kappa is not None else None
        cube = m.sole_producer(cube_out, kappa) if cube_out is not None else None
        nodes = _cube_of(m, cube, x) if cube is not None else None
        if nodes is not None:
            return x, nodes + [kappa, add]
    return None


def _cube_of(m: Matcher, cube: Node, x: str) -> list[Node] | None:
    """The nodes computing x^3 ending at cube: Pow(x, 3), or Mul(Mul(x, x), x) in either order."""
    if cube.op_type == "Pow" and len(cube.inputs) == 2 and cube.inputs[0] == x:
        return [cube] if m.scalar_value(cube.inputs[1]) == 3.0 else None
    if cube.op_type != "Mul" or len(cube.inputs) != 2 or x not in cube.inputs:
        return None
    square_out = cube.inputs[1] if cube.inputs[0] == x else cube.inputs[0]
    square = m.sole_producer(square_out, cube)
    if square is None or square.op_type != "Mul" or list(square.inputs) != [x, x]:
        return None
    return [square, cube]


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
