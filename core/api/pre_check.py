"""ATC's `--mode=3` pre-check: can ge run every node of this model? One entry per node (name,
type, result, the reason for a failure), written as `--check_report` (default check_result.json)
even when some fail. The check is the compiler's own: the node's kernel is looked up at the
model's opset and planned on the shapes shape inference gives (so an attribute value or a dtype a
kernel refuses fails here too); a node whose input shapes are unknown is checked for a kernel
only.

`require_kernels` is the same lookup, made by `ge atc` before it compiles anything: a node ge
cannot run fails the conversion there, every such node named in one error, and no file is written.
"""
from __future__ import annotations

import json

from ..errors import GeError, UnsupportedOpError
from ..ir import Graph, subgraphs
from ..kernels import lookup
from ..kernels.registry import kernel_classes
from ..passes import LOWERED_OPS, complete_attributes
from ..passes._util import build_kernel, node_opset
from ...formats.onnx.importer import load_onnx
from ...formats.tensors import write_text

SUCCESS, FAILED = "success", "failed"


def precheck(model: str, input_shape: dict | None = None, out_nodes=None) -> dict:
    """{"model", "result", "nodes", "failed", "op_list": [{"op_name", "op_type", "result", "reason"}]}."""
    graph = load_onnx(model, input_shape or None, out_nodes, allow_dynamic=True)
    complete_attributes(graph)
    graph.toposort()
    entries = [_check(graph, node) for node in graph.nodes]
    failed = sum(e["result"] == FAILED for e in entries)
    return {"model": model, "result": SUCCESS if not failed else FAILED, "nodes": len(entries), "failed": failed,
            "op_list": entries}


def require_kernels(graph: Graph, model: str) -> None:
    """Raise one UnsupportedOpError naming every node the graph's outputs need that has no kernel
    at the model's opset, and the operator domains among them ge does not implement at all (nodes
    nobody reads, e.g. cut off by --out_nodes, do not count: they are not compiled); the ops inside
    a control-flow node's subgraphs are needed with it."""
    missing = [(f"'{node.name}'", node) for node in _needed(graph) if _missing_kernel(graph, node)]
    for node in _needed(graph):  # control flow: the ops of its subgraphs (nested too)
        missing.extend(_subgraph_missing(graph, node, ""))
    if not missing:
        return
    listed = ", ".join(f"{label} ({_op_name(n)})" for label, n in missing)
    opset = f" (ai.onnx opset {graph.opset['']})" if "" in graph.opset else ""
    known = {cls.domain for cls in kernel_classes()}
    foreign = sorted({n.domain for _, n in missing if ("" if n.domain == "ai.onnx" else n.domain) not in known})
    domains = (f"; domain(s) {', '.join(foreign)} not implemented by ge (it implements "
               f"{', '.join(sorted(d or 'ai.onnx' for d in known))})") if foreign else ""
    raise UnsupportedOpError(f"{model}: {len(missing)} node(s) use an op ge has no kernel for{opset}: {listed}{domains}")


def _needed(graph: Graph) -> list:
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    needed, stack = set(), [producer[o] for o in graph.outputs if o in producer]
    while stack:
        node = stack.pop()
        if id(node) not in needed:
            needed.add(id(node))
            stack.extend(producer[i] for i in node.inputs if i in producer)
    return [n for n in graph.nodes if id(n) in needed]


def _missing_kernel(graph: Graph, node) -> str:
    """Why the node has no kernel ('' when it has one, or when a pass lowers it to other ops: Gradient)."""
    if (node.domain, node.op_type) in LOWERED_OPS:
        return ""
    try:
        lookup(node.op_type, node.domain, node_opset(graph, node), node.name)
    except GeError as e:
        return str(e)
    return ""


def _subgraph_missing(graph: Graph, node, where: str) -> list[tuple[str, str]]:
    """("'<node>.<attribute>/<inner node>'", inner node) for each node without a kernel in the node's subgraphs."""
    out = []
    for key, body in subgraphs(node):
        place = f"{where}{node.name}.{key}/"
        for inner in body.nodes:
            if _missing_kernel(body, inner):
                out.append((f"'{place}{inner.name}'", inner))
            out.extend(_subgraph_missing(body, inner, place))
    return out


def _op_name(node) -> str:
    return node.op_type if not node.domain else f"{node.domain}::{node.op_type}"


def _check(graph: Graph, node) -> dict:
    entry = {"op_name": node.name, "op_type": _op_name(node), "result": SUCCESS, "reason": ""}
    missing = _missing_kernel(graph, node)
    if missing:
        return dict(entry, result=FAILED, reason=missing)
    if subgraphs(node):  # control flow: every op of its subgraphs must have a kernel
        inner = _subgraph_missing(graph, node, "")
        if inner:
            return dict(entry, result=FAILED, reason="; ".join(f"{n} ({_op_name(i)}) has no kernel" for n, i in inner))
        entry["reason"] = "control flow: runs its subgraphs in the hybrid executor; their ops have kernels"
        return entry
    if not all(graph.value(i).is_static for i in node.inputs if i and i not in graph.initializers):
        entry["reason"] = "kernel found; input shapes unknown here, so attributes and dtypes are checked at compile"
        return entry
    try:
        metas = build_kernel(graph, node).infer()
    except GeError as e:
        return dict(entry, result=FAILED, reason=str(e))
    except Exception as e:  # a kernel's own bug on this input is a failure of the check, named
        return dict(entry, result=FAILED, reason=f"{type(e).__name__}: {e}")
    for out, m in zip(node.outputs, metas):
        if out:
            v = graph.value(out)
            v.dtype, v.shape = m.dtype, tuple(int(d) for d in m.shape)
    return entry


def check_report(result: dict) -> dict:
    """precheck()'s result in the layout of ATC's check_result.json: the model's name, result and
    counts, then one entry per op with its cause(s) when it failed."""
    ops = []
    for e in result["op_list"]:
        op = {"name": e["op_name"], "type": e["op_type"], "result": e["result"]}
        if e["result"] == FAILED:
            op["cause"] = [{"code": "TYPE_UNSUPPORTED" if "no kernel" in e["reason"] or "not supported" in e["reason"]
                            else "PARAM_INVALID", "message": e["reason"]}]
        ops.append(op)
    return {"name": result["model"], "result": result["result"], "total": result["nodes"],
            "pass": result["nodes"] - result["failed"], "fail": result["failed"], "op": ops}


def write_check_report(result: dict, path: str) -> None:
    """ATC's --check_report file: check_report(result) as JSON, written atomically."""
    write_text(path, json.dumps(check_report(result), indent=4) + "\n")
