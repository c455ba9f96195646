"""Dead code elimination.

Why: after folding and fusion (and after --out_nodes picks a subgraph) parts of the graph no
longer contribute to any output; Identity, and Dropout at inference, are copies that only cost a
task and a tensor. Removing them shrinks the task list, the memory plan and the weights.

- Identity, Dropout whose mask is unused and that is not in training mode, and a Where whose
  condition is a constant all True (or all False) and whose output is its x (or y) as it is (a
  decoding step's causal mask, a Slice of a triangle that folded to its last row), are bypassed: their
  consumers read the input directly. When the output is a graph output the producer writes it
  directly instead, unless the input is a graph input, an initializer or another graph output
  (then a copy is really needed and the node stays).
- Nodes none of whose outputs reach a graph output are removed.
- Initializers nobody reads and Values nobody references are removed.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GraphError
from ..model.ir import Graph, Node


def dead_code(graph: Graph, stats: dict | None = None) -> Graph:
    graph.toposort()
    bypassed = _bypass_copies(graph)
    unreachable = _remove_unreachable(graph)

    read = set()
    for n in graph.nodes:  # (whole lists, "" dropped after: no generator a node)
        read.update(n.inputs)
    read.discard("")
    read.update(graph.outputs)
    unused_inits = [k for k in graph.initializers if k not in read]
    for k in unused_inits:
        del graph.initializers[k]

    referenced = set()
    for n in graph.nodes:
        referenced.update(n.inputs)
        referenced.update(n.outputs)
    referenced.discard("")
    referenced.update(graph.inputs, graph.outputs, graph.initializers)
    for k in [k for k in graph.values if k not in referenced]:
        del graph.values[k]

    if stats is not None:
        stats["removed_nodes"] = stats.get("removed_nodes", 0) + bypassed + unreachable
        stats["bypassed_copies"] = stats.get("bypassed_copies", 0) + bypassed
        stats["removed_initializers"] = stats.get("removed_initializers", 0) + len(unused_inits)
    return graph


def _copied_input(graph: Graph, node: Node, read: set[str]) -> int | None:
    """The input whose copy the node's one output is, or None."""
    if node.domain != "" or not node.inputs or not node.inputs[0] or not node.outputs or not node.outputs[0]:
        return None
    if node.op_type == "Identity":
        return 0
    if node.op_type == "Where":
        return _where_taken(graph, node)
    if node.op_type != "Dropout":
        return None
    if any(o and (o in read or o in graph.outputs) for o in node.outputs[1:]):
        return None
    if len(node.inputs) > 2 and node.inputs[2]:
        mode = graph.initializers.get(node.inputs[2])
        if mode is None or bool(np.asarray(mode).reshape(-1)[0]):
            return None
    return 0


def _where_taken(graph: Graph, node: Node) -> int | None:
    """1 or 2 when the Where's condition is a constant that takes x (or y) everywhere and the output
    is that input unchanged (no broadcast, the same dtype)."""
    cond = graph.initializers.get(node.inputs[0])
    if cond is None or cond.dtype != np.bool_ or len(node.inputs) != 3 or cond.size == 0:
        return None
    k = 1 if cond.all() else 2 if not cond.any() else None
    if k is None or not node.inputs[k]:
        return None
    try:  # (the output's shape is the broadcast of all three: the same as x's, the condition fits it)
        return k if graph.meta(node.outputs[0]) == graph.meta(node.inputs[k]) else None
    except GraphError:  # not static (yet)
        return None


def _bypass_copies(graph: Graph) -> int:
    read = {i for n in graph.nodes for i in n.inputs if i}
    outputs, inputs = set(graph.outputs), set(graph.inputs)
    alias: dict[str, str] = {}

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    kept: list[Node] = []
    removed = 0
    for node in graph.nodes:  # in topological order: a chain of copies resolves to its source
        k = _copied_input(graph, node, read)
        if k is None:
            kept.append(node)
            continue
        x, y = resolve(node.inputs[k]), node.outputs[0]
        if y in outputs:
            if x in inputs or x in outputs or x in graph.initializers:
                if k == 0:
                    node.inputs = [x]
                    node.outputs = [y]
                kept.append(node)
                continue
            alias[x] = y  # the producer of x writes y
        else:
            alias[y] = x
        removed += 1
    if alias:
        for n in kept:
            n.inputs = [resolve(i) if i else i for i in n.inputs]
            n.outputs = [resolve(o) if o else o for o in n.outputs]
    graph.nodes = kept
    return removed


def _remove_unreachable(graph: Graph) -> int:
    producers = graph.producers()
    live: set[int] = set()
    stack = [producers[o] for o in graph.outputs if o in producers]
    while stack:
        n = stack.pop()
        if id(n) in live:
            continue
        live.add(id(n))
        for i in n.inputs:
            p = producers.get(i)
            if p is not None and id(p) not in live:
                stack.append(p)
    before = len(graph.nodes)
    graph.nodes = [n for n in graph.nodes if id(n) in live]
    return before - len(graph.nodes)
