"""ATC's `--mode=3` pre-check: can ge run every node of this model? One entry per node (name,
type, result, the reason for a failure), written as `--check_report` (default check_result.json)
even when some fail. The check is the compiler's own: the node's kernel is looked up at the
model's opset and planned on the shapes shape inference gives (so an attribute value or a dtype a
kernel refuses fails here too); a node whose input shapes are unknown is checked for a kernel
only.

The compiler makes the same lookup before it compiles anything (core/compile/kernel_check.py): a
node ge cannot run fails the conversion there, every such node named in one error, and no file is
written.
"""
from __future__ import annotations

import json

from ..compile.kernel_check import missing_kernel, op_name, subgraph_missing
from ..model.errors import GeError
from ..model.ir import Graph, subgraphs
from ..passes import complete_attributes
from ..passes._util import build_kernel
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


def _check(graph: Graph, node) -> dict:
    entry = {"op_name": node.name, "op_type": op_name(node), "result": SUCCESS, "reason": ""}
    missing = missing_kernel(graph, node)
    if missing:
        return dict(entry, result=FAILED, reason=missing)
    if subgraphs(node):  # control flow: every op of its subgraphs must have a kernel
        inner = subgraph_missing(graph, node, "")
        if inner:
            return dict(entry, result=FAILED, reason="; ".join(f"{n} ({op_name(i)}) has no kernel" for n, i in inner))
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
