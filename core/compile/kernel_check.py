"""Can ge run every node a compile needs? The kernel lookup the compiler makes before it compiles
anything (and `ge atc --mode=3`'s pre-check, core/atc/pre_check.py, node by node): a node without a
kernel at the model's opset fails the conversion, every such node named in one error, before any
file is written."""
from __future__ import annotations

from ..model.errors import GeError, UnsupportedOpError
from ..model.ir import Graph, subgraphs
from ..kernels import lookup
from ..kernels.registry import kernel_classes
from ..passes import LOWERED_OPS
from ..passes._util import node_opset


def require_kernels(graph: Graph, model: str) -> None:
    """Raise one UnsupportedOpError naming every node the graph's outputs need that has no kernel
    at the model's opset, and the operator domains among them ge does not implement at all (nodes
    nobody reads, e.g. cut off by --out_nodes, do not count: they are not compiled); the ops inside
    a control-flow node's subgraphs are needed with it."""
    needed = _needed(graph)
    missing = [(f"'{node.name}'", node) for node in needed if missing_kernel(graph, node)]
    for node in needed:  # control flow: the ops of its subgraphs (nested too)
        missing.extend(subgraph_missing(graph, node, ""))
    if not missing:
        return
    listed = ", ".join(f"{label} ({op_name(n)})" for label, n in missing)
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


def missing_kernel(graph: Graph, node) -> str:
    """Why the node has no kernel ('' when it has one, or when a pass lowers it to other ops: Gradient)."""
    if (node.domain, node.op_type) in LOWERED_OPS:
        return ""
    try:
        lookup(node.op_type, node.domain, node_opset(graph, node), node.name)
    except GeError as e:
        return str(e)
    return ""


def subgraph_missing(graph: Graph, node, where: str) -> list[tuple[str, str]]:
    """("'<node>.<attribute>/<inner node>'", inner node) for each node without a kernel in the node's subgraphs."""
    out = []
    for key, body in subgraphs(node):
        place = f"{where}{node.name}.{key}/"
        for inner in body.nodes:
            if missing_kernel(body, inner):
                out.append((f"'{place}{inner.name}'", inner))
            out.extend(subgraph_missing(body, inner, place))
    return out


def op_name(node) -> str:
    return node.op_type if not node.domain else f"{node.domain}::{node.op_type}"
