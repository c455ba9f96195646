"""ATC's --precision_mode on the optimized graph: which float32 ops compute in float16.

An op chosen for float16 reads float16 operands (float32 weights are stored as float16: the OM
shrinks) and writes float16 results; a Cast is inserted only where a value crosses between a
float16 and a float32 op, and the graph's inputs and outputs keep their dtypes (--input_fp16_nodes
and --output_type change those). Products inside Conv/MatMul/Gemm accumulate in float32 as the
NPU's cube units do. The modes:

- force_fp32, must_keep_origin_dtype: nothing changes (ge's default; ATC's is force_fp16).
- force_fp16: every float32 op that has a float16 kernel.
- allow_fp32_to_fp16: ops keep float32 where they have it; on the Ascend inference SoCs the cube
  units (Conv, ConvTranspose, MatMul, Gemm) have float16 only, so those drop to float16, and the
  element-wise ops between two of them follow (the gray list's rule below).
- allow_mix_precision: the white list in float16, the black list (ops whose float16 error grows:
  exponentials, logarithms, sums, statistics) in float32, the gray list follows its inputs: float16
  when one of its float inputs comes float16. `modify_mixlist` edits the lists.

`keep_dtype` (ATC's --keep_dtype file: node names, or `OpType::Conv` for every node of a type)
keeps nodes in their original dtype whatever the mode.

The pass decides once over a whole graph, static or not: a dynamic model's graph is lowered
before it is partitioned (core/compile/build_dynamic.py), so its static submodels and the nodes the
hybrid executor runs follow one decision, with Casts only where values cross. A node whose input
shapes are unknown is asked with a stand-in shape (its unknown dims 1), else by its schema; a
control-flow node keeps its dtypes (its subgraphs are decided as graphs of their own), and so does
a node reading or writing a sequence or an optional.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GeError, GraphError, ValueDependentError
from ..model.ir import Graph, Meta, Node, Value, subgraphs
from ..kernels.fused import GE_DOMAIN
from ..kernels.type_constraints import OpTypes, op_types
from ._util import build_kernel, node_opset, rename_tensor, unique_name

_FLOAT, _FLOAT16 = 1, 10  # onnx's TensorProto.FLOAT and FLOAT16: Cast's `to` (no onnx import for two numbers)

ORIGIN_MODES = ("force_fp32", "must_keep_origin_dtype")
MODES = ORIGIN_MODES + ("force_fp16", "allow_fp32_to_fp16", "allow_mix_precision")
#: --precision_mode_v2's spellings of the same modes
V2_MODES = {"origin": "must_keep_origin_dtype", "fp16": "force_fp16", "mixed_float16": "allow_mix_precision"}

CUBE_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum"})
#: ge's fused ops are listed under the op they extend
FUSED_BASE = {"FusedConv": "Conv", "FusedMatMul": "MatMul"}
WHITE_LIST = CUBE_OPS
BLACK_LIST = frozenset({
    "Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization", "InstanceNormalization",
    "LpNormalization", "MeanVarianceNormalization", "RMSNormalization", "Exp", "Log", "Pow", "Sqrt",
    "Reciprocal", "Softplus", "Erf", "CumSum", "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1",
    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceProd", "Gelu"})

F32, F16 = np.dtype(np.float32), np.dtype(np.float16)
F16_MAX = float(np.finfo(np.float16).max)


def apply_precision_mode(graph: Graph, mode: str, keep_dtype=(), mixlist: dict | None = None,
                         stats: dict | None = None) -> Graph:
    """Rewrite `graph` (shapes inferred) in place for `mode`; `mixlist` is ATC's --modify_mixlist
    content ({"allow_mix_precision": {"black-list": {"to-add": [...], "to-remove": [...]}, ...}})."""
    mode = V2_MODES.get(mode, mode)
    if mode not in MODES:
        raise GeError(f"--precision_mode {mode!r} is not one of {', '.join(MODES)}")
    if mode in ORIGIN_MODES:
        return graph
    keep = set(keep_dtype)
    white, black = _lists(mixlist or {})
    # a tensor of the model -> the name of its float16 / float32 form: a lowered op's output keeps
    # its name (dumps and `ge compare` find it as in the model) unless it is a model output, whose
    # name stays float32; the other form of a tensor is a twin (a Cast's output, a converted weight)
    half: dict[str, str] = {}
    full = {t: t for t in (*graph.inputs, *graph.initializers)}
    outputs = set(graph.outputs)
    nodes: list[Node] = []
    taken = {n.name for n in graph.nodes}
    lowered = casts = 0
    for node in graph.nodes:
        base = _base_op(node)
        ins, outs = _float_formals(graph, node, half)
        if not outs or subgraphs(node) or not _all_tensors(graph, node) or node.name in keep or f"OpType::{base}" in keep:
            low = False
        elif mode == "force_fp16":
            low = True
        elif mode == "allow_fp32_to_fp16":
            low = base in CUBE_OPS or (base not in black and any(node.inputs[i] in half for i in ins))
        else:
            low = base in white or (base not in black and any(node.inputs[i] in half for i in ins))
        if low and _runs_in_half(graph, node, ins):
            lowered += 1
            for i in ins:
                t = node.inputs[i]
                if t not in half:
                    casts += _make_half(graph, t, half, nodes, taken)
                node.inputs[i] = half[t]
            for j in outs:
                o = node.outputs[j]
                half[o] = unique_name(graph, f"{o}_fp16") if o in outputs else o
                _twin_value(graph, o, half[o], F16)
                node.outputs[j] = half[o]
        elif _casts_to_half(node) and node.inputs[0] in half:  # (--output_type FP16's Cast) no round trip
            node.inputs[0] = half[node.inputs[0]]
            full.update((o, o) for o in node.outputs if o)
        else:
            for k, t in enumerate(node.inputs):
                if t and t not in full and t in half:
                    casts += _make_full(graph, t, half, full, nodes, taken)
                node.inputs[k] = full.get(t, t)
            full.update((o, o) for o in node.outputs if o)
        nodes.append(node)
    for t in graph.outputs:
        if t not in full and t in half:
            casts += _make_full(graph, t, half, full, nodes, taken)
    graph.nodes = nodes
    _rename_unshared_weights(graph, half)
    if stats is not None:
        stats.update(lowered=stats.get("lowered", 0) + lowered, casts=stats.get("casts", 0) + casts)
    return graph


def _rename_unshared_weights(graph: Graph, half: dict) -> None:
    """A weight that only float16 ops read keeps its name (its float32 form is gone)."""
    read = set(graph.outputs) | {t for n in graph.nodes for t in n.inputs}
    for t, h in half.items():
        if t in graph.initializers and t not in read:
            graph.initializers[t] = graph.initializers.pop(h)
            rename_tensor(graph, h, t)


def _lists(mixlist: dict) -> tuple[frozenset, frozenset]:
    """The white and black lists after --modify_mixlist (the gray list is everything else)."""
    lists = {"white-list": set(WHITE_LIST), "black-list": set(BLACK_LIST), "gray-list": set()}
    edits = mixlist.get("allow_mix_precision", mixlist)
    if not isinstance(edits, dict):
        raise GeError("--modify_mixlist: expected {\"allow_mix_precision\": {\"black-list\": {\"to-add\": [...]}}}")
    for name, change in edits.items():
        if name not in lists or not isinstance(change, dict):
            raise GeError(f"--modify_mixlist: unknown list {name!r} (white-list, black-list, gray-list)")
        for verb, ops in change.items():
            if verb not in ("to-add", "to-remove") or not isinstance(ops, list):
                raise GeError(f"--modify_mixlist: {name}.{verb}: expected \"to-add\" or \"to-remove\" with a list of op types")
            for op in ops:
                if verb == "to-add":
                    for other in lists.values():  # an op is on one list
                        other.discard(op)
                    lists[name].add(op)
                else:
                    lists[name].discard(op)
    return frozenset(lists["white-list"]), frozenset(lists["black-list"])


def _base_op(node: Node) -> str:
    return FUSED_BASE.get(node.op_type, node.op_type) if node.domain == GE_DOMAIN else node.op_type


def _float_formals(graph: Graph, node: Node, half: dict) -> tuple[list[int], list[int]]:
    """(input indices, output indices) that carry the op's float type: the float32 tensors bound
    to the type parameter of its float32 outputs in the ONNX schema (Resize's scales or
    LayerNormalization's statistics keep float32); ge's fused ops have one type for all. A tensor
    in `half` was float32 in the model (a lowered op's output is float16 under its own name now)."""
    dtype = lambda t: None if not t else F32 if t in half else (graph.initializers[t].dtype if t in graph.initializers
                                         else graph.values[t].dtype if t in graph.values else None)
    types = _types(graph, node)
    if types is None:
        return ([i for i, t in enumerate(node.inputs) if dtype(t) == F32],
                [j for j, t in enumerate(node.outputs) if dtype(t) == F32])
    out_types = [_param(types, j, outputs=True) for j in range(len(node.outputs))]
    ins_t = [_param(types, i) for i in range(len(node.inputs))]
    # a type parameter bound by a float32 input (LayerNormalization's U comes from an attribute)
    param = {t for t, x in zip(ins_t, node.inputs) if dtype(x) == F32 and t}
    outs = [j for j, (t, o) in enumerate(zip(out_types, node.outputs)) if t in param and dtype(o) == F32]
    ins = [i for i, (t, x) in enumerate(zip(ins_t, node.inputs)) if t in param and dtype(x) == F32]
    return ins, outs


def _types(graph: Graph, node: Node) -> OpTypes | None:
    """The type constraints of the node's schema (the generated table: no onnx.defs), None for ge's
    fused ops and ops without one."""
    return None if node.domain == GE_DOMAIN else op_types(node.domain, node.op_type, node_opset(graph, node))


def _param(types: OpTypes, i: int, outputs: bool = False) -> str | None:
    """The type parameter of input (output) i; None past the formals, or for a formal of a fixed type."""
    formal = types.formal(i, outputs)
    return formal.param if formal is not None and formal.param in types.params else None


def _casts_to_half(node: Node) -> bool:
    return node.op_type == "Cast" and node.domain == "" and node.attrs.get("to") == _FLOAT16


def _all_tensors(graph: Graph, node: Node) -> bool:
    return all(graph.values[t].kind == "tensor" for t in (*node.inputs, *node.outputs) if t in graph.values)


def _runs_in_half(graph: Graph, node: Node, ins: list[int]) -> bool:
    """Whether the node's kernel takes float16 where it takes float32 now (its spec decides). A
    node of unknown shapes is built on a stand-in shape; when that says nothing (the float32
    node refuses it too, or its output shape needs input values), its schema decides."""
    metas = [_stand_in(graph, t) for t in node.inputs]
    if any(t and m is None for t, m in zip(node.inputs, metas)):
        return _schema_allows_half(graph, node, ins)
    typed = lambda dtype: [m._replace(dtype=dtype) if i in ins and m is not None else m for i, m in enumerate(metas)]
    try:
        build_kernel(graph, node, typed(F16))
        return True
    except ValueDependentError:
        return _schema_allows_half(graph, node, ins)
    except GraphError:
        pass
    if all(_static(graph, t) for t in node.inputs):
        return False
    try:  # a stand-in shape the float32 node refuses too tells nothing
        build_kernel(graph, node, typed(F32))
    except GraphError:
        return _schema_allows_half(graph, node, ins)
    return False


def _static(graph: Graph, t: str) -> bool:
    return not t or t in graph.initializers or (t in graph.values and graph.values[t].is_static)


def _stand_in(graph: Graph, t: str) -> Meta | None:
    """t's meta, its unknown dims taken as 1; None when t's rank or dtype is unknown."""
    if not t:
        return None
    if t in graph.initializers:
        return Meta(graph.initializers[t].dtype, tuple(graph.initializers[t].shape))
    v = graph.values.get(t)
    if v is None or v.dtype is None or v.shape is None:
        return None
    if v.is_static:
        return v.meta
    return Meta(v.dtype, tuple(d if isinstance(d, int) and d >= 0 else 1 for d in v.shape))


def _schema_allows_half(graph: Graph, node: Node, ins: list[int]) -> bool:
    """The schema's type constraints of the lowered inputs all allow float16 (ge's own fused ops,
    which have no schema, all take it)."""
    types = _types(graph, node)
    if types is None:
        return node.domain == GE_DOMAIN
    return all("float16" in types.params.get(_param(types, i), ()) for i in ins)


def _twin_value(graph: Graph, name: str, twin: str, dtype: np.dtype) -> None:
    shape = graph.values[name].shape if name in graph.values else None
    graph.values[twin] = Value(twin, dtype, shape)


def _make_half(graph: Graph, t: str, half: dict, nodes: list[Node], taken: set) -> int:
    """The float16 twin of float32 tensor t: a converted weight, or a Cast; returns casts made."""
    half[t] = unique_name(graph, f"{t}_fp16")
    if t in graph.initializers:
        # saturated, as the NPU converts (a float32 -inf sentinel such as finfo.min stays a large
        # finite value, not an infinity that turns 0 * x into NaN)
        graph.initializers[half[t]] = np.clip(graph.initializers[t], -F16_MAX, F16_MAX).astype(F16)
        return 0
    _twin_value(graph, t, half[t], F16)
    nodes.append(Node("Cast", [t], [half[t]], {"to": _FLOAT16}, _node_name(graph, f"{t}_to_fp16", taken)))
    return 1


def _make_full(graph: Graph, t: str, half: dict, full: dict, nodes: list[Node], taken: set) -> int:
    """The float32 form of tensor t (float32 in the model) cast from its float16 form: named t when
    t is a model output (its float16 form is the twin then), else a twin."""
    full[t] = t if half[t] != t else unique_name(graph, f"{t}_fp32")
    graph.values[full[t]] = Value(full[t], F32, graph.values[half[t]].shape)
    nodes.append(Node("Cast", [half[t]], [full[t]], {"to": _FLOAT},
                      _node_name(graph, f"{t}_to_fp32", taken)))
    return 1


def _node_name(graph: Graph, base: str, taken: set) -> str:
    name = unique_name(graph, base, taken)
    taken.add(name)
    return name
