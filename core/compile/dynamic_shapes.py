"""Shape inference that tolerates unknown shapes: the partitioner's MarkUnknownShapeNodes input.

A node whose inputs are all static gets its outputs from its kernel's infer(); when infer() fails
because an output depends on input *values* (NonZero, NonMaxSuppression, a Reshape whose shape is
computed, TopK with a computed k...: a ValueDependentError), the node is data-dependent; any other
refusal of its kernel fails the compile, since the node could not run either. A node with any input of unknown
dims is unknown too. Outputs of unknown nodes keep the partial shape onnx's inference gave them at import
(known rank, the dims it knows, symbolic or unknown ones): an output whose shape the op's attributes and
input ranks decide (a reduction to a scalar, Shape, Size, NonZero's rank) is static even after a
data-dependent node, so the nodes that read only such outputs are KNOWN again (a static tail).
A node that reads or gives a string tensor is unknown (strings have no layout), and must have a
string kernel (kernels/strings.py and the ops' string variants), else the compile fails naming it.
Control-flow nodes (If, Loop, Scan) are unknown; their outputs keep what their subgraphs tell
(compile/control_flow.py), so a static Scan feeds a static cluster.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import UnsupportedOpError, ValueDependentError
from ..model.ir import STRING, Graph, subgraphs
from ..kernels import lookup
from .control_flow import CONTROL_FLOW, SUBGRAPH_OPS, control_flow_outputs
from ..passes import optimize_dynamic, optimize_unknown
from ..passes._util import build_kernel, node_opset as _opset
from ..passes.infer_shapes import inferred_metas


def _shape_text(shape) -> str:
    return "?" if shape is None else "[" + ", ".join("?" if not isinstance(d, int) or d < 0 else str(d)
                                                        for d in shape) + "]"


def infer_dynamic(graph: Graph, stats: dict | None = None, onnx_shapes: bool = True) -> dict[str, str]:
    """Optimize `graph` (dead code, constant folding, the fusions: optimize_dynamic) and infer what
    can be inferred, in place. Returns {node name: why its shape is unknown} for every unknown node.
    `onnx_shapes`: the Values hold onnx's inference of this graph (the root graph); a subgraph's hold
    the model's declared value infos, which may contradict the shapes it is inferred with, so its
    unknown nodes' outputs have unknown shapes."""
    optimize_dynamic(graph)
    graph.toposort()
    unknown: dict[str, str] = {}
    for node in graph.nodes:
        if subgraphs(node):  # control flow runs in the hybrid executor, its outputs as far as known
            if (node.domain != "" or node.op_type not in CONTROL_FLOW) and (node.domain, node.op_type) not in SUBGRAPH_OPS:
                raise UnsupportedOpError(f"{node}: ge runs the subgraphs of {', '.join(CONTROL_FLOW)} and "
                                         f"FlexAttention only; this "
                                         f"op's subgraph attributes ({', '.join(k for k, _ in subgraphs(node))}) are not supported")
            unknown[node.name] = f"control flow ({node.op_type}): runs its subgraphs as submodels"
            for out, (dtype, shape) in zip(node.outputs, control_flow_outputs(graph, node, infer_subgraph)):
                if out:
                    v = graph.value(out)
                    v.dtype, v.shape = (v.dtype if dtype is None else np.dtype(dtype)), shape
            continue
        strings = _strings(graph, node)
        cls = lookup(node.op_type, node.domain, _opset(graph, node), node.name, strings=bool(strings))
        if getattr(cls, "host_values", False):  # built from its attributes alone: checked now, not at the first run
            cls(dict(node.attrs), [None] * len(node.inputs), opset=_opset(graph, node), name=node.name,
                num_outputs=len(node.outputs))
        if strings:
            unknown[node.name] = f"'{strings[0]}' is a string tensor (no static layout)"
            _keep_partial(graph, node, onnx_shapes)
            continue
        dynamic_in = [i for i in node.inputs if i and i not in graph.initializers and not graph.value(i).is_static]
        if dynamic_in:
            v = graph.value(dynamic_in[0])
            unknown[node.name] = (f"input '{v.name}' is a {v.kind} (no static layout)" if v.kind != "tensor"
                                  else f"input '{v.name}' has unknown dims {_shape_text(v.shape)}")
            _keep_partial(graph, node, onnx_shapes)
            continue
        try:
            metas = inferred_metas(build_kernel(graph, node), node)
        except ValueDependentError as e:  # any other refusal (an attribute, a dtype) means it cannot run at all
            unknown[node.name] = f"data-dependent output ({_short(e)})"
            _keep_partial(graph, node, onnx_shapes)
            continue
        for out, m in zip(node.outputs, metas):
            if out:
                v = graph.value(out)
                v.dtype, v.shape = np.dtype(m.dtype), tuple(int(d) for d in m.shape)
    _optimize_unknown(graph, unknown)
    if stats is not None:
        stats["unknown_nodes"] = len(unknown)
    return unknown


def _optimize_unknown(graph: Graph, unknown: dict[str, str]) -> None:
    """optimize_unknown's chains and blocked regions among the unknown nodes, `unknown` kept true: a node they
    replaced leaves it, one they made with an unknown output joins it (a reorder of a static value entering a
    region is static, and runs in a static cluster)."""
    if not unknown:
        return
    optimize_unknown(graph)
    names = {n.name for n in graph.nodes}
    for name in [k for k in unknown if k not in names]:
        del unknown[name]
    for node in graph.nodes:
        if node.name in unknown or all(graph.value(o).is_static for o in node.outputs if o):
            continue
        dynamic_in = next((i for i in node.inputs if i and i not in graph.initializers and not graph.value(i).is_static), None)
        unknown[node.name] = (f"input '{dynamic_in}' has unknown dims {_shape_text(graph.value(dynamic_in).shape)}"
                              if dynamic_in else "output of unknown dims")


def _strings(graph: Graph, node) -> list[str]:
    """The node's inputs and outputs that are string tensors."""
    return [t for t in list(node.inputs) + list(node.outputs) if t and (
        graph.initializers[t].dtype == STRING if t in graph.initializers
        else t in graph.values and graph.values[t].dtype == STRING)]


def infer_subgraph(graph: Graph) -> dict[str, str]:
    """infer_dynamic of a control-flow subgraph (see `onnx_shapes`)."""
    return infer_dynamic(graph, onnx_shapes=False)


def _keep_partial(graph: Graph, node, onnx_shapes: bool) -> None:
    """Outputs of an unknown node: the dtype and onnx's partial shape (import time: inferred from the
    given input shapes on a fresh copy, never from a model's stale value_info); a dim it does not know
    becomes None, a symbolic dim stays the symbol it is."""
    for out in node.outputs:
        if out:
            v = graph.value(out)
            if not onnx_shapes:
                v.shape = None
            elif v.shape is not None:
                v.shape = tuple(d if isinstance(d, str) or (isinstance(d, int) and d >= 0) else None for d in v.shape)


def _short(e: Exception) -> str:
    text = str(e)
    return text.split("): ", 1)[-1] if "): " in text else text
