"""Constant folding.

Why: exporters (PyTorch above all) compute shapes at run time: Shape -> Gather -> Unsqueeze ->
Concat -> Reshape, Range(0, seq), ConstantOfShape ... With static input shapes all of that is
known at compile time. Folding it turns shape inputs into constants (which kernels like Reshape
need at build time), removes tasks, and leaves only real computation in the graph.

Rules, in topological order (so chains fold completely in one pass):
- Constant nodes become initializers.
- A node whose inputs are all initializers (or absent) is evaluated with its kernel's compute()
  and its outputs become initializers; random ops are never folded.
- Shape and Size of a tensor with a static shape fold even though the tensor itself is not constant.
- A fold that would create a huge constant (> 64 MB, much bigger than its inputs: Expand, Tile,
  ConstantOfShape blow-ups) is skipped: the node stays and computes at run time.
- So is a fold that would lay data out in the pattern of a shape (lays_out_shape: a Gather of an
  embedding table by Range(0, seq), a ConstantOfShape, Expand or Tile to the input's shape): its
  constant would be one input shape's own, so every gear would carry a copy.
- A graph output that folds keeps a producer: Identity(constant), so outputs are always written
  by a task.
- An If with a constant condition is replaced by the branch it takes; constants a control-flow
  node captures move into its subgraphs; a control-flow node whose inputs are all constants is
  evaluated (passes/subgraphs.py).
Nodes that do not fold get their output shapes inferred on the way (best effort), so a later Shape
of their output can fold too.
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..model.errors import GeError, GraphError, UnsupportedOpError
from ..model.ir import STRING, Graph, Node, is_onnx_dtype
from ._util import build_kernel, input_metas, set_initializer, unique_name
from .subgraphs import capture_constants, evaluate, inline_branch, is_control_flow

#: a fold may not create a constant bigger than this unless its inputs are about as big
MAX_FOLD_NBYTES = 64 << 20
#: a fold reading values computed from shapes may make at most this much, or SHAPED_FOLD_GROWTH
#: times what it reads from shapes (lays_out_shape)
SHAPED_FOLD_NBYTES = 4 << 10
SHAPED_FOLD_GROWTH = 4
NONDETERMINISTIC = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                    "Multinomial", "Bernoulli"}


def constant_folding(graph: Graph, stats: dict | None = None) -> Graph:
    graph.toposort()
    outputs = set(graph.outputs)
    kept: list[Node] = []
    folded = skipped_big = skipped_shaped = inlined = captured = evaluated = 0
    node_names = {n.name for n in graph.nodes}

    pending = deque(graph.nodes)
    while pending:
        node = pending.popleft()
        if is_control_flow(node):
            if node.op_type == "If" and node.domain == "" and node.inputs[0] in graph.initializers:
                pending.extendleft(reversed(inline_branch(graph, node, node_names)))
                inlined += 1
                continue
            captured += capture_constants(graph, node)
            arrays = _evaluate(graph, node)
            evaluated += arrays is not None and arrays != "big"
        elif node.op_type == "Identity" and node.domain == "" and node.outputs and node.outputs[0] in outputs:
            arrays = None  # the copy a folded graph output keeps
        else:
            arrays = _fold(graph, node)
        if arrays is None or isinstance(arrays, str):
            skipped_big += arrays == "big"
            skipped_shaped += arrays == "shaped"
            kept.append(node)
            _infer_best_effort(graph, node)
            continue
        folded += 1
        shaped = _from_shapes(graph, node)
        for name, a in zip(node.outputs, arrays):
            if not name:
                continue
            if name in outputs:
                const = unique_name(graph, f"{name}_const")
                set_initializer(graph, const, a)
                if shaped:
                    graph.shape_constants.add(const)
                v = graph.value(name)
                v.dtype, v.shape = a.dtype, tuple(a.shape)
                ident = unique_name(graph, f"{node.name}_const_out", node_names)
                node_names.add(ident)
                kept.append(Node("Identity", [const], [name], {}, ident, ""))
            else:
                set_initializer(graph, name, a)
                if shaped:
                    graph.shape_constants.add(name)
    graph.nodes = kept

    if stats is not None:
        stats["folded"] = stats.get("folded", 0) + folded
        stats["skipped_big"] = stats.get("skipped_big", 0) + skipped_big
        stats["skipped_shaped"] = stats.get("skipped_shaped", 0) + skipped_shaped
        stats["inlined_branches"] = stats.get("inlined_branches", 0) + inlined
        stats["captured_constants"] = stats.get("captured_constants", 0) + captured
        stats["evaluated_control_flow"] = stats.get("evaluated_control_flow", 0) + evaluated
    return graph


def constant_value(node: Node) -> np.ndarray:
    """The value of a Constant node (any of its value_* attributes)."""
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "sparse_value" in a:
        return np.asarray(a["sparse_value"])
    if "value_float" in a:
        return np.array(a["value_float"], np.float32)
    if "value_floats" in a:
        return np.array(a["value_floats"], np.float32)
    if "value_int" in a:
        return np.array(a["value_int"], np.int64)
    if "value_string" in a or "value_strings" in a:  # a string tensor: an object array of str
        strings = a.get("value_strings", a.get("value_string"))
        out = np.empty(np.shape(strings), STRING)
        out[...] = strings
        return out
    if "value_ints" in a:
        return np.array(a["value_ints"], np.int64)
    raise GraphError(f"{node}: Constant without a supported value attribute (has {sorted(a)})")


def _fold(graph: Graph, node: Node):
    """The node's output values if it folds, None if it does not, "big" if it would be too big,
    "shaped" if it would lay data out in the pattern of a shape (lays_out_shape)."""
    if node.domain == "" and node.op_type == "Constant":
        return [constant_value(node)]
    if node.op_type in NONDETERMINISTIC:
        return None
    if node.domain == "" and node.op_type in ("Shape", "Size") and node.inputs and node.inputs[0]:
        shape = _static_shape(graph, node.inputs[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape, dtype=np.int64)), np.int64)]
        start = node.attrs.get("start", 0)
        end = node.attrs.get("end", None)
        return [np.array(shape[start:end], np.int64)]
    ins = [i for i in node.inputs if i]
    if not all(i in graph.initializers for i in ins):
        return None
    if any(o in graph.values and (graph.values[o].kind != "tensor" or graph.values[o].dtype == STRING)
           for o in node.outputs) or any(graph.initializers[i].dtype == STRING for i in ins):
        return None  # sequences, optionals and strings are run-time values

    in_nbytes = sum(graph.initializers[i].nbytes for i in ins)
    estimate = _estimate_nbytes(graph, node)
    if estimate is not None and _too_big(estimate, in_nbytes):
        return "big"
    if estimate is not None and lays_out_shape(graph, node, estimate):
        return "shaped"
    kernel = build_kernel(graph, node)
    try:
        results = kernel.compute(*[graph.initializers[i] if i else None for i in node.inputs])
    except GeError:
        raise
    except Exception as e:
        raise GraphError(f"{node}: constant folding failed: {type(e).__name__}: {e}") from e
    if any(r is None or isinstance(r, list) for r in results):
        return None  # a sequence or an optional: no initializer holds one, it is made at run time
    arrays = [np.asarray(r) for r in results]
    if any(node.outputs[len(arrays):]):
        return None  # the kernel does not produce an output somebody names
    if any(not is_onnx_dtype(a.dtype) for a in arrays[:len(node.outputs)]):
        return None
    out_nbytes = sum(a.nbytes for a, o in zip(arrays, node.outputs) if o)
    if _too_big(out_nbytes, in_nbytes):
        return "big"
    if lays_out_shape(graph, node, out_nbytes):
        return "shaped"
    return [np.array(a, order="C", copy=None) for a in arrays[:len(node.outputs)]]


def _evaluate(graph: Graph, node: Node):
    """A control-flow node's outputs when its inputs are all constants, None if they are not (or it
    does not fold), "big" if they would be too big."""
    ins = [i for i in node.inputs if i]
    if not all(i in graph.initializers for i in ins):
        return None
    try:
        arrays = evaluate(graph, node)
    except GeError:
        raise
    except Exception as e:
        raise GraphError(f"{node}: constant folding failed: {type(e).__name__}: {e}") from e
    if arrays is None or any(not isinstance(a, np.ndarray) or not is_onnx_dtype(a.dtype) for a in arrays):
        return None
    if _too_big(sum(a.nbytes for a in arrays), sum(graph.initializers[i].nbytes for i in ins)):
        return "big"
    return [np.array(a, order="C", copy=None) for a in arrays]


def _too_big(out_nbytes: int, in_nbytes: int) -> bool:
    return out_nbytes > MAX_FOLD_NBYTES and out_nbytes > 2 * in_nbytes


def lays_out_shape(graph: Graph, node: Node, out_nbytes: int) -> bool:
    """The folding policy for values computed from tensors' shapes (graph.shape_constants): a
    node reading one does not fold when its output would exceed SHAPED_FOLD_NBYTES and be
    SHAPED_FOLD_GROWTH times what it reads from shapes. Such a constant is weight data (or a fill
    value) laid out in the pattern of one input shape: position embeddings gathered by Range(0,
    seq), token types by ConstantOfShape, an Expand or Tile to the input's shape. Each gear would
    get its own (the weights themselves are shared: build_dynamic.share_weights), 100 BERT gears
    30 MiB of them; as a task it costs a gather or a broadcast per run. Small shape arithmetic
    (Reshape targets, a Range up to the sequence length) folds as before."""
    if out_nbytes <= SHAPED_FOLD_NBYTES:
        return False
    shaped = sum(graph.initializers[i].nbytes for i in node.inputs if i in graph.shape_constants)
    return bool(shaped) and out_nbytes > SHAPED_FOLD_GROWTH * shaped


def _from_shapes(graph: Graph, node: Node) -> bool:
    """Is the folded node's value computed from a tensor's shape (not from weights alone)?"""
    if node.domain == "" and node.op_type in ("Shape", "Size"):
        return node.inputs[0] not in graph.initializers or node.inputs[0] in graph.shape_constants
    return any(i in graph.shape_constants for i in node.inputs)


def _static_shape(graph: Graph, name: str):
    if name in graph.initializers:
        return tuple(graph.initializers[name].shape)
    v = graph.values.get(name)
    return tuple(v.shape) if v is not None and v.is_static else None


def _estimate_nbytes(graph: Graph, node: Node) -> int | None:
    """Output size of a would-be fold, without computing it (None: unknown)."""
    total = 0
    for o in node.outputs:
        if not o:
            continue
        v = graph.values.get(o)
        if v is None or not v.is_static:
            break
        total += v.meta.nbytes
    else:
        return total
    init = graph.initializers
    try:
        if node.op_type == "ConstantOfShape":
            value = node.attrs.get("value")
            itemsize = np.asarray(value).dtype.itemsize if value is not None else 4
            return int(np.prod(init[node.inputs[0]], dtype=np.int64)) * itemsize
        if node.op_type == "Expand":
            x, shape = init[node.inputs[0]], init[node.inputs[1]]
            return int(np.prod(np.broadcast_shapes(x.shape, tuple(int(d) for d in shape)), dtype=np.int64)) * x.itemsize
        if node.op_type == "Tile":
            x, reps = init[node.inputs[0]], init[node.inputs[1]]
            return int(np.prod(np.array(x.shape, np.int64) * reps.astype(np.int64))) * x.itemsize
    except Exception:
        return None
    return None


def _infer_best_effort(graph: Graph, node: Node) -> None:
    """Fill output shapes of a node that stays, if they are unknown and its inputs are static."""
    outs = [graph.value(o) for o in node.outputs if o]
    if all(v.is_static for v in outs):
        return
    try:
        metas = input_metas(graph, node)
        inferred = build_kernel(graph, node, metas).infer()
    except UnsupportedOpError:
        return  # infer_shapes reports it, naming the node
    except Exception:
        return
    for o, m in zip(node.outputs, inferred):
        if o and not graph.value(o).is_static:
            v = graph.value(o)
            v.dtype, v.shape = np.dtype(m.dtype), tuple(int(d) for d in m.shape)
