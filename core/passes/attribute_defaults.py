"""Every node's attributes completed with its schema's defaults (core/kernels/schema.py), first in
the pipeline: the passes, the kernels and the OM all see the op as its spec defines it."""
from __future__ import annotations

from ..model.ir import Graph
from ..kernels.schema import attribute_defaults
from ._util import node_opset


def complete_attributes(graph: Graph, stats: dict | None = None) -> Graph:
    filled = 0
    for node in graph.nodes:
        defaults = attribute_defaults(node.domain, node.op_type, node_opset(graph, node))
        for name, value in defaults.items():
            if name not in node.attrs:
                node.attrs[name] = value
                filled += 1
    if stats is not None:
        stats["filled"] = stats.get("filled", 0) + filled
    return graph
