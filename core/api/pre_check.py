"""ATC's `--mode=3` pre-check: can ge run every node of this model? One entry per node (name,
type, result, the reason for a failure), written as `--check_report` (default check_result.json)
even when some fail. The check is the compiler's own: the node's kernel is looked up at the
model's opset and planned on the shapes shape inference gives (so an attribute value or a dtype a
kernel refuses fails here too); a node whose input shapes are unknown is checked for a kernel
only."""
from __future__ import annotations

from ..errors import GeError
from ..ir import Graph, subgraphs
from ..kernels import lookup
from ..passes import complete_attributes
from ..passes._util import build_kernel, node_opset
from ...formats.onnx.importer import load_onnx

SUCCESS, FAILED = "success", "failed"


def _subgraph_failures(node, where: str = "") -> list[str]:
    """'<node>.<attribute>: <why>' for each op in the node's subgraphs (nested too) without a kernel."""
    out = []
    for key, body in subgraphs(node):
        for inner in body.nodes:
            place = f"{where}{node.name}.{key}"
            try:
                lookup(inner.op_type, inner.domain, node_opset(body, inner), inner.name)
            except GeError as e:
                out.append(f"{place}: {e}")
            out.extend(_subgraph_failures(inner, f"{place}/"))
    return out


def precheck(model: str, input_shape: dict | None = None, out_nodes=None) -> dict:
    """{"model", "result", "nodes", "failed", "op_list": [{"op_name", "op_type", "result", "reason"}]}."""
    graph = load_onnx(model, input_shape or None, out_nodes, allow_dynamic=True)
    complete_attributes(graph)
    graph.toposort()
    entries = [_check(graph, node) for node in graph.nodes]
    failed = sum(e["result"] == FAILED for e in entries)
    return {"model": model, "result": SUCCESS if not failed else FAILED, "nodes": len(entries), "failed": failed,
            "op_list": entries}


def _check(graph: Graph, node) -> dict:
    entry = {"op_name": node.name, "op_type": node.op_type if not node.domain else f"{node.domain}::{node.op_type}",
             "result": SUCCESS, "reason": ""}
    try:
        lookup(node.op_type, node.domain, node_opset(graph, node), node.name)
    except GeError as e:
        return dict(entry, result=FAILED, reason=str(e))
    if subgraphs(node):  # control flow: every op of its subgraphs must have a kernel
        missing = _subgraph_failures(node)
        if missing:
            return dict(entry, result=FAILED, reason="; ".join(missing))
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
