"""Constant folding's work on control flow (If, Loop, Scan nodes and their subgraphs).

- An If whose condition is a constant is replaced by the branch it takes: the branch's nodes and
  constants join the graph (renamed where a name is taken), its captured inputs read the node's
  inputs, and an Identity per output writes the node's output (dead_code bypasses them). Exporters
  emit such Ifs on shape comparisons that fold once shapes are static.
- A constant that a control-flow node captures moves into its subgraphs: it is no longer a
  run-time input, and the subgraph's own constant folding can use it.
- A Loop or Scan (or an If whose condition only its inputs decide) all of whose inputs are
  constants is evaluated: its subgraphs run node by node on the kernels' compute(), as constant
  folding runs any node; exporters build constant tables so (positions, ranges). A fold that would
  take more than MAX_FOLD_ITERATIONS iterations, or that meets a random op, is left to run time.
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Graph, Meta, Node, subgraphs
from ..kernels import lookup
from ..kernels.backend import NUMPY
from ..kernels.schema import attribute_defaults
from ._util import node_opset, set_initializer, unique_name

#: a constant Loop or Scan is evaluated at compile time only up to this many body runs in all
MAX_FOLD_ITERATIONS = 10000
RANDOM_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}


class _TooLong(Exception):
    """A constant control-flow node whose evaluation would take too many body runs."""


def evaluate(graph: Graph, node: Node) -> list[np.ndarray] | None:
    """The outputs of a control-flow node whose inputs are all constants (None: left to run time)."""
    if _has_random(node):
        return None
    budget = [MAX_FOLD_ITERATIONS]
    try:
        return _run_node(graph, node, [graph.initializers[i] if i else None for i in node.inputs], budget)
    except _TooLong:
        return None


def _has_random(node: Node) -> bool:
    return node.op_type in RANDOM_OPS or any(_has_random(n) for _, g in subgraphs(node) for n in g.nodes)


def _run_node(graph: Graph, node: Node, xs: list, budget: list) -> list:
    cls = lookup(node.op_type, node.domain, node_opset(graph, node), node.name)
    metas = [None if x is None else Meta(np.asarray(x).dtype, np.shape(x)) for x in xs]
    kernel = cls(node.attrs, metas, xs, opset=node_opset(graph, node), name=node.name,
                 num_outputs=len(node.outputs), backend=NUMPY)
    bodies = dict(subgraphs(node))
    if not bodies:
        return [_value(r) for r in kernel.compute(*xs)]
    calls = [None if key not in bodies else lambda arrays, g=bodies[key]: _run_graph(g, arrays, budget)
             for key in kernel.bodies]  # (None: an optional subgraph the node does not have)
    return [_value(r) for r in kernel.execute(xs, calls)]


def _value(r):
    """An output as the next node takes it: a sequence (list) or empty optional (None) as it is."""
    return r if r is None or isinstance(r, list) else np.asarray(r)


def _run_graph(g: Graph, arrays: list, budget: list) -> list:
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLong
    values = dict(g.initializers)
    values.update(zip(g.inputs, arrays))
    for n in g.nodes:
        outs = _run_node(g, n, [values[i] if i else None for i in n.inputs], budget)
        values.update((o, a) for o, a in zip(n.outputs, outs) if o)
    return [values[o] for o in g.outputs]


def is_control_flow(node: Node) -> bool:
    return bool(subgraphs(node))


def inline_branch(graph: Graph, node: Node, taken: set[str]) -> list[Node]:
    """The nodes that replace If `node` (its condition a constant): the branch taken, renamed into
    `graph`. `taken` holds the graph's node names (extended with the new ones)."""
    import copy  # (here: a model without a constant If needs none; ~10 M instructions where stdlib has no .pyc)
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
        attrs = {**attribute_defaults(n.domain, n.op_type, node_opset(graph, n)), **copy.deepcopy(n.attrs)}
        inlined.append(Node(n.op_type, inputs, outputs, attrs, name, n.domain))  # (the pipeline completed attributes before)
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
