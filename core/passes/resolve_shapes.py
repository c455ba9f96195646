"""Symbolic shape resolution, for graphs with unknown dims (optimize_dynamic).

Why: exporters compute shapes at run time (Shape -> Gather -> Unsqueeze -> Concat -> Reshape).
With static inputs constant_folding folds all of it; with unknown dims it stays, and in a BERT-style
graph two nodes in three are such shape arithmetic, each one an unknown node of the hybrid
executor. Most of it only restates what the Reshape already knows: "keep my batch and sequence
dims, split the last one in heads x head_dim".

Each 1-D int64 shape tensor is followed as a list of elements, an int or a dim (tensor, axis,
symbol): Shape gives the dims of its input (the static ones as ints), Gather of constant indices
picks some, a Slice of constant bounds (step 1) some in a row (GPT-2's Conv1D: all but the last),
Unsqueeze of a scalar makes one, Concat joins them. Then:
- a Gather/Unsqueeze/Concat whose elements are all ints becomes a constant (Shape of a tensor with
  partly static dims, followed by a Gather of its static dims, folds);
- a Reshape (allowzero=0) whose target shape is such a list becomes a Reshape with a constant
  shape: a dim that is provably the Reshape input's own dim at the same position becomes 0 (copy
  the dim), and one remaining dim becomes -1 when the list has no -1 yet. Anything else stays.
  (A -1 cannot be inferred for an empty input: such a Reshape fails at run time, like a -1 in the
  model would.)
- a Reshape back to x's leading dims of a Gemm of x's rows (Reshape(x, [-1, k]) -> Gemm(W, b) ->
  Reshape(x.shape[:-1] + [n]): transformers' Conv1D, GPT-2's four a layer) becomes the MatMul of x (and
  the Add of b) it is, whose target no constant could state; fuse_matmul then makes it one product.
- a Shape of a Transpose's output that a MatMul reads too becomes the Shape of the Transpose's input
  and a Gather of the permutation: the MatMul is then the Transpose's only reader, and fuse_matmul can
  read its input as a strided operand instead of copying it (GPT-2's key^T over the whole past, read by
  the scores' product and by the Shape that sizes the causal mask).
dead_code then drops the chains nobody reads any more.
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Graph, Node
from ._fusion import same_dim
from ._util import partial_shape, set_initializer, unique_name


def resolve_shapes(graph: Graph, stats: dict | None = None) -> Graph:
    graph.toposort()
    elems: dict[str, list] = {}  # 1-D shape tensor -> [int | (tensor, axis, symbol)]
    scalars: dict[str, object] = {}  # 0-D shape scalar -> int | (tensor, axis, symbol)
    outputs = set(graph.outputs)
    producers, consumers = graph.producers(), graph.consumers()
    kept: list[Node] = []
    folded = reshapes = transposes = 0
    for node in graph.nodes:
        if node.domain not in ("", "ai.onnx"):
            kept.append(node)
            continue
        out = node.outputs[0] if node.outputs else ""
        got = _follow(graph, node, elems, scalars)
        if got is not None:
            value, is_scalar = got
            (scalars if is_scalar else elems)[out] = value
            items = [value] if is_scalar else value
            if node.op_type != "Shape" and all(isinstance(e, int) for e in items) and out not in outputs:
                shape = () if is_scalar else (len(items),)
                set_initializer(graph, out, np.array(items, np.int64).reshape(shape))
                folded += 1
                continue
        if node.op_type == "Reshape" and len(node.inputs) > 1 and node.inputs[1] in elems \
                and int(node.attrs.get("allowzero", 0)) == 0:
            product = _rows_product(graph, node, elems[node.inputs[1]], producers, consumers)
            if product is not None:
                kept = [n for n in kept if all(n is not p for p in product[0])]
                kept.extend(product[1])
                reshapes += 1
                continue
            target = _reshape_target(graph, node.inputs[0], elems[node.inputs[1]])
            if target is not None:
                const = unique_name(graph, f"{node.name}_shape")
                set_initializer(graph, const, np.array(target, np.int64))
                node.inputs = [node.inputs[0], const]
                reshapes += 1
        if node.op_type == "Shape" and _shape_through_transpose(graph, node, producers, consumers, kept):
            transposes += 1
            continue
        kept.append(node)
    graph.nodes = kept
    if stats is not None:
        stats["folded"] = stats.get("folded", 0) + folded
        stats["reshapes"] = stats.get("reshapes", 0) + reshapes
        stats["shapes_of_transposes"] = stats.get("shapes_of_transposes", 0) + transposes
    return graph


def _shape_through_transpose(graph: Graph, shape: Node, producers: dict, consumers: dict, kept: list) -> bool:
    """Shape(Transpose(x)) as Gather(Shape(x), perm[start:end]), appended to `kept`, when a MatMul reads
    the Transpose too and nothing but Shapes does otherwise (the module doc)."""
    t = producers.get(shape.inputs[0])
    if t is None or t.op_type != "Transpose" or t.domain not in ("", "ai.onnx") or t.outputs[0] in graph.outputs:
        return False
    readers = [n for n in consumers.get(t.outputs[0], []) if n.op_type != "Shape"]
    x_shape = partial_shape(graph, t.inputs[0])
    if len(readers) != 1 or readers[0].op_type != "MatMul" or x_shape is None:
        return False
    rank = len(x_shape)
    perm = [int(p) for p in t.attrs.get("perm", range(rank - 1, -1, -1))]
    start, end = shape.attrs.get("start", 0), shape.attrs.get("end", rank)
    start, end = (max(0, min(rank, a + rank if a < 0 else a)) for a in (start, end))
    dims, picked = unique_name(graph, f"{shape.name}_of_input"), unique_name(graph, f"{shape.name}_perm")
    set_initializer(graph, picked, np.array(perm[start:end], np.int64))
    v = graph.value(dims)
    v.dtype, v.shape = np.dtype(np.int64), (rank,)
    kept.append(Node("Shape", [t.inputs[0]], [dims], {"start": 0}, name=f"{shape.name}_of_input"))
    kept.append(Node("Gather", [dims, picked], shape.outputs, {"axis": 0}, name=shape.name))
    consumers[t.outputs[0]] = [n for n in consumers[t.outputs[0]] if n is not shape]
    consumers.setdefault(t.inputs[0], []).append(kept[-2])
    return True


def _const_ints(graph: Graph, name: str):
    a = graph.initializers.get(name) if name else None
    return None if a is None or a.dtype.kind not in "iu" else a


def _follow(graph: Graph, node: Node, elems: dict, scalars: dict):
    """(elements, is_scalar) of the node's output when it is shape arithmetic we can follow, else None."""
    op, ins = node.op_type, node.inputs
    if len(node.outputs) != 1 or not ins or not ins[0]:
        return None
    if op == "Shape":
        shape = partial_shape(graph, ins[0])
        if shape is None:
            return None
        rank = len(shape)
        start, end = node.attrs.get("start", 0), node.attrs.get("end", rank)
        start, end = (max(0, min(rank, a + rank if a < 0 else a)) for a in (start, end))
        return [d if isinstance(d, int) and d >= 0 else (ins[0], k, d)
                for k, d in enumerate(shape) if start <= k < end], False
    if op == "Gather" and ins[0] in elems and len(ins) > 1 and int(node.attrs.get("axis", 0)) in (0, -1):
        idx, src = _const_ints(graph, ins[1]), elems[ins[0]]
        if idx is None or idx.ndim > 1 or not all(-len(src) <= int(i) < len(src) for i in idx.reshape(-1)):
            return None
        picked = [src[int(i)] for i in idx.reshape(-1)]
        return (picked[0], True) if idx.ndim == 0 else (picked, False)
    if op == "Unsqueeze" and ins[0] in scalars:
        axes = _const_ints(graph, ins[1]) if len(ins) > 1 else node.attrs.get("axes")
        if axes is not None and [int(a) for a in np.asarray(axes).reshape(-1)] in ([0], [-1]):
            return [scalars[ins[0]]], False
        return None
    if op == "Slice" and ins[0] in elems and len(ins) >= 3:  # (opset 10+: starts, ends, axes, steps inputs)
        consts = [_const_ints(graph, i) if i else None for i in (ins + ["", ""])[1:5]]
        starts, ends, axes, steps = consts
        if starts is None or ends is None or starts.size != 1 or ends.size != 1 \
                or (axes is not None and [int(a) for a in axes.reshape(-1)] not in ([0], [-1])) \
                or (steps is not None and [int(t) for t in steps.reshape(-1)] != [1]) \
                or any(i and c is None for i, c in zip(ins[3:5], consts[2:])):
            return None
        src = elems[ins[0]]
        return src[slice(int(starts.reshape(-1)[0]), int(ends.reshape(-1)[0]))], False
    if op == "Concat" and int(node.attrs.get("axis", 0)) in (0, -1):
        parts = []
        for i in ins:
            c = _const_ints(graph, i)
            if c is not None and c.ndim == 1:
                parts.extend(int(v) for v in c)
            elif i in elems:
                parts.extend(elems[i])
            else:
                return None
        return parts, False
    return None


def _rows_product(graph: Graph, reshape: Node, items: list, producers: dict, consumers: dict):
    """(the nodes replaced, the MatMul and Add replacing them) when `reshape` gives back x's leading dims to
    Gemm(Reshape(x, [-1, k]), W, b) (constant W and b, no transposed A, alpha and beta 1), each read only
    by the next; else None."""
    gemm = producers.get(reshape.inputs[0])
    if gemm is None or gemm.op_type != "Gemm" or gemm.domain not in ("", "ai.onnx") or len(gemm.outputs) != 1 \
            or [n for n in consumers.get(gemm.outputs[0], [])] != [reshape] or gemm.outputs[0] in graph.outputs:
        return None
    if int(gemm.attrs.get("transA", 0)) or float(gemm.attrs.get("alpha", 1.0)) != 1.0 \
            or float(gemm.attrs.get("beta", 1.0)) != 1.0:
        return None
    flatten = producers.get(gemm.inputs[0])
    w = graph.initializers.get(gemm.inputs[1])
    b = graph.initializers.get(gemm.inputs[2]) if len(gemm.inputs) > 2 and gemm.inputs[2] else None
    if flatten is None or flatten.op_type != "Reshape" or w is None or w.ndim != 2 \
            or (len(gemm.inputs) > 2 and gemm.inputs[2] and (b is None or b.size != w.shape[0 if gemm.attrs.get("transB") else 1])):
        return None
    x = flatten.inputs[0]
    x_shape, flat = partial_shape(graph, x), _const_ints(graph, flatten.inputs[1]) if len(flatten.inputs) > 1 else None
    k, n = (w.shape[1], w.shape[0]) if int(gemm.attrs.get("transB", 0)) else w.shape
    if x_shape is None or len(x_shape) < 2 or x_shape[-1] != k or flat is None or list(flat.reshape(-1)) != [-1, k]:
        return None
    lead = items[:-1]
    if len(items) != len(x_shape) or items[-1] != n or not all(
            isinstance(e, int) and e == d or not isinstance(e, int) and e[0] == x and e[1] == j
            for j, (e, d) in enumerate(zip(lead, x_shape))):
        return None
    weight = w.T if int(gemm.attrs.get("transB", 0)) else w
    if weight is not w:
        wname = unique_name(graph, f"{gemm.inputs[1]}_t")
        set_initializer(graph, wname, np.ascontiguousarray(weight))
    else:
        wname = gemm.inputs[1]
    y = reshape.outputs[0]
    if b is None:
        return [flatten, gemm] if len(consumers.get(flatten.outputs[0], [])) == 1 else [gemm], \
            [Node("MatMul", [x, wname], [y], name=gemm.name)]
    rows = unique_name(graph, f"{gemm.name}_rows")
    v = graph.value(rows)
    v.dtype, v.shape = weight.dtype, tuple(x_shape[:-1]) + (int(n),)
    replaced = [flatten, gemm] if len(consumers.get(flatten.outputs[0], [])) == 1 else [gemm]
    return replaced, [Node("MatMul", [x, wname], [rows], name=gemm.name),
                      Node("Add", [rows, gemm.inputs[2]], [y], name=reshape.name)]


def _reshape_target(graph: Graph, data: str, items: list):
    """The constant shape with 0 (copy) / -1 (infer) for the symbolic dims, or None if it cannot be."""
    shape = partial_shape(graph, data)
    if shape is None:
        return None
    target, open_at = [], []
    for j, e in enumerate(items):
        if isinstance(e, int):
            target.append(e)
        elif j < len(shape) and ((e[0] == data and e[1] == j) or same_dim(e[2], shape[j])):
            target.append(0)
        else:
            target.append(None)
            open_at.append(j)
    if len(open_at) > 1 or (open_at and -1 in target):
        return None
    if open_at:
        target[open_at[0]] = -1
    return target
