"""Constant folding's work on control flow (If, Loop, Scan nodes and their subgraphs).

- An If whose condition is a constant is replaced by the branch it takes: the branch's nodes and
  constants join the graph (renamed where a name is taken), its captured inputs read the node's
  inputs, and an Identity per output writes the node's output (dead_code bypasses them). Exporters
  emit such Ifs on shape comparisons that fold once shapes are static.
- A constant that a control-flow node captures moves into its subgraphs: it is no longer a
  run-time input, and the subgraph's own constant folding can use it.
"""
from __future__ import annotations

import copy

from ..ir import Graph, Node, subgraphs
from ._util import set_initializer, unique_name


def is_control_flow(node: Node) -> bool:
    return bool(subgraphs(node))


def inline_branch(graph: Graph, node: Node, taken: set[str]) -> list[Node]:
    """The nodes that replace If `node` (its condition a constant): the branch taken, renamed into
    `graph`. `taken` holds the graph's node names (extended with the new ones)."""
    cond = graph.initializers[node.inputs[0]]
    branch = node.attrs["then_branch" if bool(cond.reshape(-1)[0]) else "else_branch"]
    formal = len(branch.inputs) - branch.captures
    rename = dict(zip(branch.inputs[formal:], node.inputs[1:]))

    def local(name: str) -> str:
        if name not in rename:
            rename[name] = unique_name(graph, name) if name in graph.values or name in graph.initializers else name
            v = branch.values.get(name)
            if v is not None and v.dtype is not None:  # the dtype only: shapes are inferred where they land
                graph.value(rename[name]).dtype = v.dtype
        return rename[name]

    for name, a in branch.initializers.items():
        set_initializer(graph, local(name), a)
    inlined = []
    for n in branch.nodes:
        inputs = [local(i) if i else i for i in n.inputs]
        outputs = [local(o) if o else o for o in n.outputs]
        name = n.name if n.name not in taken else unique_name(graph, f"{node.name}/{n.name}", taken)
        taken.add(name)
        inlined.append(Node(n.op_type, inputs, outputs, copy.deepcopy(n.attrs), name, n.domain))
    for k, (inner, outer) in enumerate(zip(branch.outputs, node.outputs)):
        if outer:
            name = unique_name(graph, f"{node.name}/output{k}", taken)
            taken.add(name)
            inlined.append(Node("Identity", [local(inner)], [outer], {}, name, ""))
    return inlined


def capture_constants(graph: Graph, node: Node) -> int:
    """Move the constants `node` captures into its subgraphs; returns how many moved."""
    bodies = [g for _, g in subgraphs(node)]
    k = bodies[0].captures
    first = len(node.inputs) - k
    formal = [len(body.inputs) - k for body in bodies]
    moved = 0
    for j in range(k - 1, -1, -1):  # from the last: the positions of those before stay
        outer = node.inputs[first + j]
        if outer not in graph.initializers:
            continue
        for body, f in zip(bodies, formal):
            inner = body.inputs.pop(f + j)
            set_initializer(body, inner, graph.initializers[outer])
        del node.inputs[first + j]
        moved += 1
    for body in bodies:
        body.captures = k - moved
    return moved
