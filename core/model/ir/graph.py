"""Graph, Node and Value, spelled as ONNX spells them.

A dim is an int (static), a str (symbolic, e.g. "batch") or None (unknown); a shape of None means
unknown rank. Constants live in `Graph.initializers` as numpy arrays. Plain classes, not dataclasses
(whose methods would be compiled at every import of the compiler).
"""
from __future__ import annotations

import numpy as np

from ..errors import GraphError
from .types import STRING, Meta


class Value:
    def __init__(self, name: str, dtype: np.dtype | None = None, shape: tuple | None = None, kind: str = "tensor"):
        self.name, self.dtype, self.shape = name, dtype, shape
        #: "tensor", or (no static layout, the dynamic path only) "sequence" of tensors of `dtype`,
        #: "optional" tensor, "optional_sequence"
        self.kind = kind

    def __repr__(self) -> str:
        return f"Value({self.name!r}, {self.dtype}, {self.shape}, {self.kind!r})"

    @property
    def is_static(self) -> bool:
        if self.kind != "tensor" or self.dtype is None or self.shape is None or self.dtype == STRING:
            return False
        for d in self.shape:  # (a loop, not all() of a generator: a third of the time, thousands of calls a compile)
            if not (isinstance(d, int) and d >= 0):
                return False
        return True

    @property
    def meta(self) -> Meta:
        if not self.is_static:
            raise GraphError(f"tensor '{self.name}' has no static shape (shape {self.shape})")
        return Meta(self.dtype, tuple(self.shape))


class Node:
    """One node; nodes compare by identity (a graph's nodes are distinct by their outputs anyway)."""

    def __init__(self, op_type: str, inputs: list[str], outputs: list[str], attrs: dict | None = None, name: str = "",
                 domain: str = ""):
        self.op_type, self.inputs, self.outputs = op_type, inputs, outputs
        self.attrs = {} if attrs is None else attrs
        self.name, self.domain = name, domain

    def __str__(self) -> str:
        return f"node '{self.name}' ({self.op_type})"

    def __repr__(self) -> str:
        return f"Node({self.op_type!r}, {self.inputs}, {self.outputs}, name={self.name!r})"


class Graph:
    def __init__(self, name: str = "graph", nodes: list[Node] | None = None, inputs: list[str] | None = None,
                 outputs: list[str] | None = None, values: dict[str, Value] | None = None,
                 initializers: dict[str, np.ndarray] | None = None, opset: dict[str, int] | None = None,
                 captures: int = 0, shape_constants: set | None = None):
        self.name = name
        self.nodes = [] if nodes is None else nodes
        self.inputs = [] if inputs is None else inputs
        self.outputs = [] if outputs is None else outputs
        self.values = {} if values is None else values
        self.initializers = {} if initializers is None else initializers
        self.opset = {"": 17} if opset is None else opset
        #: a subgraph (an If branch, a Loop or Scan body): how many of its inputs, the last ones, are
        #: values of the enclosing graph it reads (captured). The node lists the same values, in the same
        #: order, as its own last inputs: outer-scope reads are explicit edges, so every pass sees them.
        self.captures = captures
        #: initializers constant folding computed from tensors' static shapes (a Shape's value, a Range
        #: up to it ...): they differ from one input shape (a gear) to the next, unlike the weights
        self.shape_constants = set() if shape_constants is None else shape_constants

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"

    def copy(self) -> "Graph":
        """A deep copy that shares the initializer arrays (weights are read-only once imported): a
        gear's graph, or the graph kept for another path, costs its nodes and values, not its weights.
        Written out rather than copy.deepcopy, which copies every Value's dtype the slow way (a
        BERT-base graph: 30 ms a copy, a gear each)."""
        return Graph(self.name, [_copy_node(n) for n in self.nodes], list(self.inputs), list(self.outputs),
                     {k: Value(v.name, v.dtype, v.shape, v.kind) for k, v in self.values.items()},
                     dict(self.initializers), dict(self.opset), self.captures, set(self.shape_constants))

    def value(self, name: str) -> Value:
        if name not in self.values:
            self.values[name] = Value(name)
        return self.values[name]

    def meta(self, name: str) -> Meta:
        if name in self.initializers:
            a = self.initializers[name]
            return Meta(a.dtype, a.shape)
        return self.value(name).meta

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    users.setdefault(i, []).append(n)
        return users

    def toposort(self) -> None:
        """Order nodes so each runs after its producers (stable_topological_order)."""
        produced = {o: i for i, n in enumerate(self.nodes) for o in n.outputs if o}
        available = set(self.inputs) | set(self.initializers)
        if _sorted(self.nodes, produced, available):  # the passes keep graphs so: no sets of waits to build
            self.nodes = list(self.nodes)  # (a new list, as a sort makes)
            return
        waits_on: list[set[int]] = []
        for n in self.nodes:
            waits_on.append(set())
            for name in n.inputs:
                if not name or name in available:
                    continue
                if name not in produced:
                    raise GraphError(f"{n} reads '{name}', which no node, input or initializer provides")
                waits_on[-1].add(produced[name])
        order = stable_topological_order(waits_on)
        if len(order) != len(self.nodes):
            stuck = self.nodes[min(set(range(len(self.nodes))) - set(order))]
            raise GraphError(f"graph has a cycle through {stuck}")
        self.nodes = [self.nodes[i] for i in order]


#: the types of attribute list elements a shallow copy of the list copies deeply
_IMMUTABLE = frozenset((int, float, str, bytes, bool))


def _copy_node(node: Node) -> Node:
    """A node whose attributes a pass may change without touching `node`'s: subgraphs copied as
    graphs, lists and arrays (a Constant's value) copied, scalars and strings shared."""
    attrs = {}
    for k, v in node.attrs.items():
        if isinstance(v, Graph):
            v = v.copy()
        elif isinstance(v, list) and _IMMUTABLE.issuperset(map(type, v)):
            v = list(v)  # (ints, floats, strings: copy.deepcopy's walk of them was most of a copy)
        elif isinstance(v, np.ndarray):
            # a Constant's value, numbers or strings: copied as copy.deepcopy copies it (strings shared), without
            # importing copy (~10 M instructions of `ge atc` where the standard library has no cached bytecode)
            v = v.copy(order="K")
        elif isinstance(v, list):
            import copy  # (here: a list of lists or of arrays, rare)
            v = copy.deepcopy(v)
        attrs[k] = v
    return Node(node.op_type, list(node.inputs), list(node.outputs), attrs, node.name, node.domain)


def _sorted(nodes: list[Node], produced: dict[str, int], available: set[str]) -> bool:
    """Every node reads only what is available or made by a node before it (toposort's order as it is)."""
    for i, n in enumerate(nodes):
        for name in n.inputs:
            if name and name not in available and produced.get(name, i) >= i:
                return False
    return True


def stable_topological_order(waits_on: list[set[int]]) -> list[int]:
    """Indices 0..n-1 ordered so each comes after the indices it waits on, the lowest ready index
    first (Kahn's algorithm): an already sorted list keeps its order. Indices on a cycle are left out."""
    if all(j < i for i, deps in enumerate(waits_on) for j in deps):  # sorted already (the passes keep graphs so):
        return list(range(len(waits_on)))  # what the heap would give, without it
    import heapq  # (here: sorted graphs, the common case, need none)
    users: dict[int, list[int]] = {}
    pending = [len(w) for w in waits_on]
    for i, deps in enumerate(waits_on):
        for j in deps:
            users.setdefault(j, []).append(i)
    ready = [i for i, c in enumerate(pending) if c == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users.get(i, ()):
            pending[u] -= 1
            if pending[u] == 0:
                heapq.heappush(ready, u)
    return order


def subgraphs(node: Node) -> list[tuple[str, Graph]]:
    """(attribute name, graph) of each subgraph attribute of a control-flow node (If, Loop, Scan)."""
    return [(k, v) for k, v in node.attrs.items() if isinstance(v, Graph)]
