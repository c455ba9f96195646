"""Fuse a rotary embedding at a known position (a decoding step's) into one product by a constant.

Why: LLaMA-style models rotate q and k as HF writes it, `x * cos + rotate_half(x) * sin` with
`rotate_half(x) = cat(-x[..., h:], x[..., :h])`: two Slices, a Neg, a Concat, two Muls and an Add
for each of q and k, every one a task of a few microseconds on a decoding step's single token. When
cos and sin are constants holding one row (a step at a static position: constant folding made them
so), the whole is x @ R, R a constant d x d matrix: R[k, k] = cos[k], and sin[k] on row k + h (k < h,
negated) or k - h (k >= h), the rest 0. One product on a few rows (the packed GEMV); and none when x
is a constant projection's heads that only the rotary reads (x = Transpose?(Reshape(MatMul(h, W))),
LLaMA's q and k): each head's columns of W times R, computed once in float64, and the projection
gives the rotated heads itself.

Recognized: Add(Mul(x, cos), Mul(Concat(Neg(Slice(x, h:d)), Slice(x, 0:h), axis=-1), sin)), the
operands of each Mul and of the Add in either order, slices along the last axis with step 1, d = 2h
the last dim of x, cos and sin float constants of x's dtype with d values along the last axis and 1
everywhere else, at most x's rank (so the product keeps x's shape). Every intermediate is read only
by the pattern and is no graph output. Results differ from the written-out form by the rounding of
one sum of three terms, or of the projection's sums over rotated weights (the zeros of R add
nothing; a non-finite x gives NaN where R holds 0).
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Graph, Node
from ._fusion import Matcher, known_dims
from ._util import set_initializer, unique_name


def fuse_rotary(graph: Graph, stats: dict | None = None) -> Graph:
    m = Matcher(graph)
    fused = folded_into_weights = 0
    for add in list(graph.nodes):
        if add.op_type != "Add" or add.domain != "" or m.removed(add) or len(add.inputs) != 2:
            continue
        match = _match(m, add)
        if match is None:
            continue
        x, rotation, group = match
        projection = _projection(m, x, group, rotation)
        if projection is not None:  # R folded into the weights: the heads come out rotated
            weights, nodes = projection
            name = unique_name(graph, f"{nodes[0].inputs[1]}/rotated")
            set_initializer(graph, name, weights)
            m.replace(nodes + group, _renamed(nodes, name, add.outputs[0]))
            folded_into_weights += 1
        else:
            name = unique_name(graph, f"{add.name or 'rotary'}/rotation")
            set_initializer(graph, name, rotation)
            m.replace(group, Node("MatMul", [x, name], list(add.outputs), {}, f"{add.name}/rotary", ""))
        fused += 1
    m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
        stats["into_weights"] = stats.get("into_weights", 0) + folded_into_weights
    return graph


def _projection(m: Matcher, x: str, group: list[Node], rotation: np.ndarray):
    """(W @ R per head, [MatMul, Reshape(, Transpose)]) when x is a constant projection's heads that
    only the pattern reads: x = Transpose?(Reshape(MatMul(h, W))), the Reshape splitting the last dim
    into heads of d, a Transpose keeping the last axis last; else None."""
    if any(u not in group for u in m.consumers.get(x, [])) or not m.internal(x):
        return None
    node, chain = m.producers.get(x), []
    if node is not None and node.op_type == "Transpose" and node.domain == "" and not m.removed(node):
        if [int(p) for p in node.attrs.get("perm", [])][-1:] != [len(m.meta(x)[1]) - 1]:
            return None
        chain.append(node)
        node = m.sole_producer(node.inputs[0], node)
    if node is None or node.op_type != "Reshape" or node.domain != "" or m.removed(node):
        return None
    chain.insert(0, node)
    mm = m.sole_producer(node.inputs[0], node)
    if mm is None or mm.op_type != "MatMul" or len(mm.inputs) != 2 or mm.attrs:
        return None
    w = m.graph.initializers.get(mm.inputs[1])
    (_, flat), (_, heads), d = m.meta(node.inputs[0]), m.meta(node.outputs[0]), rotation.shape[0]
    if w is None or w.ndim != 2 or w.dtype != rotation.dtype or not known_dims(flat) or not known_dims(heads) \
            or tuple(heads[:-2]) != tuple(flat[:-1]) or heads[-1] != d or heads[-2] * d != flat[-1]:
        return None
    rotated = w.reshape(w.shape[0], -1, d).astype(np.float64) @ rotation.astype(np.float64)
    return rotated.reshape(w.shape).astype(w.dtype), [mm] + chain


def _renamed(nodes: list[Node], weights: str, out: str) -> list[Node]:
    """The projection's nodes again, the MatMul on the rotated weights, the last one writing `out`."""
    again = [Node(n.op_type, list(n.inputs), list(n.outputs), dict(n.attrs), n.name, n.domain) for n in nodes]
    again[0].inputs[1] = weights
    again[-1].outputs = [out]
    return again


def _match(m: Matcher, add: Node):
    """(x, R, the nodes) for the pattern ending in `add`, else None."""
    muls = [m.sole_producer(i, add) for i in add.inputs]
    if any(p is None or p.op_type != "Mul" or len(p.inputs) != 2 for p in muls):
        return None
    for direct, rotated in (muls, muls[::-1]):
        for x_at in (0, 1):
            x, cos = direct.inputs[x_at], direct.inputs[1 - x_at]
            for cat_at in (0, 1):
                concat, sin = m.sole_producer(rotated.inputs[cat_at], rotated), rotated.inputs[1 - cat_at]
                found = _rotate_half(m, concat, x)
                if found is None:
                    continue
                rotation = _rotation(m, x, cos, sin)
                if rotation is not None:
                    return x, rotation, [direct, rotated, concat, *found, add]
    return None


def _rotate_half(m: Matcher, concat: Node | None, x: str):
    """[Neg, its Slice, the other Slice] when concat is cat(-x[..., h:], x[..., :h]) on the last axis."""
    dtype, shape = m.meta(x)
    if concat is None or concat.op_type != "Concat" or len(concat.inputs) != 2 or not known_dims(shape):
        return None
    rank, d = len(shape), shape[-1] if shape else 0
    if rank == 0 or d % 2 or int(concat.attrs.get("axis", 0)) not in (-1, rank - 1):
        return None
    neg, low = m.sole_producer(concat.inputs[0], concat), m.sole_producer(concat.inputs[1], concat)
    if neg is None or neg.op_type != "Neg" or low is None:
        return None
    high = m.sole_producer(neg.inputs[0], neg)
    h = d // 2
    if _slice_of(m, low, x, rank) != (0, h) or _slice_of(m, high, x, rank) != (h, d):
        return None
    return [neg, high, low]


def _slice_of(m: Matcher, node: Node | None, x: str, rank: int):
    """(start, end) of a Slice of x along its last axis with step 1 (clamped to the dim), else None."""
    if node is None or node.op_type != "Slice" or not node.inputs or node.inputs[0] != x or len(node.inputs) < 3:
        return None
    consts = [m.graph.initializers.get(i) if i else None for i in node.inputs[1:5]]
    if any(c is None for c in consts[:2]) or any(i and c is None for i, c in zip(node.inputs[3:5], consts[2:])):
        return None
    starts, ends = (np.asarray(c).reshape(-1) for c in consts[:2])
    axes = np.asarray(consts[2]).reshape(-1) if len(consts) > 2 and consts[2] is not None else np.arange(len(starts))
    steps = np.asarray(consts[3]).reshape(-1) if len(consts) > 3 and consts[3] is not None else np.ones(len(starts))
    if len(starts) != 1 or len(ends) != 1 or len(axes) != 1 or len(steps) != 1 or int(steps[0]) != 1 \
            or int(axes[0]) not in (-1, rank - 1):
        return None
    d = m.meta(x)[1][-1]
    start, end = int(starts[0]), int(ends[0])
    start, end = (s + d if s < 0 else s for s in (start, end))
    return min(max(start, 0), d), min(max(end, 0), d)


def _rotation(m: Matcher, x: str, cos: str, sin: str) -> np.ndarray | None:
    """R (d x d, x's dtype) with x @ R == x * cos + rotate_half(x) * sin, or None when cos and sin are
    not one constant row of d values that broadcasts into x's shape."""
    dtype, shape = m.meta(x)
    c, s = m.graph.initializers.get(cos), m.graph.initializers.get(sin)
    if c is None or s is None or dtype is None:
        return None
    d = shape[-1]
    for a in (c, s):
        if a.dtype != dtype or a.ndim == 0 or a.ndim > len(shape) or a.shape[-1] != d or a.size != d:
            return None
    c, s = c.reshape(-1).astype(np.float64), s.reshape(-1).astype(np.float64)
    h, k = d // 2, np.arange(d // 2)
    r = np.diag(c)
    r[k + h, k] = -s[:h]   # y[k] = x[k] cos[k] - x[k + h] sin[k], k < h
    r[k, k + h] = s[h:]    # y[k + h] = x[k + h] cos[k + h] + x[k] sin[k + h]
    return r.astype(dtype)
