"""Pattern matching for the fusion passes: who produces and reads a tensor, scalar constants, and
replacing a matched group of nodes by one node in graph order."""
from __future__ import annotations

from functools import cached_property

import numpy as np

from ..model.ir import Graph, Node
from ..kernels.dtypes import is_float
from ..kernels.fused import GE_DOMAIN


class Matcher:
    def __init__(self, graph: Graph):
        self.graph = graph
        self._removed: set[int] = set()
        self._placed: dict[int, list[Node]] = {}  # id(last node of a group) -> its replacement
        self._order: dict[int, int] | None = None  # id(node) -> its position in graph.nodes, made once

    # the graph's producers and consumers, made when a pass first asks (before it rewrites anything): most
    # fusions find no node to start a match at in most models, and walk no edge then
    @cached_property
    def producers(self) -> dict[str, Node]:
        return self.graph.producers()

    @cached_property
    def consumers(self) -> dict[str, list[Node]]:
        return self.graph.consumers()

    # -- queries -------------------------------------------------------------------------------
    def removed(self, node: Node) -> bool:
        return id(node) in self._removed

    def internal(self, name: str) -> bool:
        """A tensor that can disappear into a fusion: not a graph output, not an initializer."""
        return bool(name) and name not in self.graph.outputs and name not in self.graph.initializers

    def sole_consumer(self, node: Node) -> Node | None:
        """The only node reading node's only output (which is not a graph output)."""
        outs = [o for o in node.outputs if o]
        if len(outs) != 1 or len(node.outputs) != 1 or not self.internal(outs[0]):
            return None
        users = self.consumers.get(outs[0], [])
        if len(users) != 1 or self.removed(users[0]):
            return None
        return users[0]

    def sole_producer(self, name: str, reader: Node, domain: str = "") -> Node | None:
        """The producer of `name`, an op of `domain`, when `reader` is the only node reading it (and it is
        no graph output)."""
        if not self.internal(name):
            return None
        users = self.consumers.get(name, [])
        prod = self.producers.get(name)
        if len(users) != 1 or users[0] is not reader or prod is None or self.removed(prod) or prod.domain != domain:
            return None
        if len([o for o in prod.outputs if o]) != 1 or len(prod.outputs) != 1:
            return None
        return prod

    def scalar_value(self, name: str | None) -> float | None:
        a = self.graph.initializers.get(name) if name else None
        if a is None or a.size != 1 or not is_float(a.dtype):
            return None
        return float(a.reshape(-1)[0])

    def other_input(self, node: Node, name: str) -> str | None:
        """The other input of a two-input node that reads `name` once, else None."""
        if len(node.inputs) != 2 or node.inputs.count(name) != 1:
            return None
        return node.inputs[1] if node.inputs[0] == name else node.inputs[0]

    def scalar_operand(self, node: Node, name: str, value: float) -> bool:
        """node is op(name, c) or op(c, name) with the scalar constant c == value."""
        return self.scalar_value(self.other_input(node, name)) == value

    def is_float(self, name: str) -> bool:
        v = self.graph.values.get(name)
        dtype = self.graph.initializers[name].dtype if name in self.graph.initializers else (v.dtype if v else None)
        return dtype is not None and is_float(dtype)

    def meta(self, name: str):
        """(dtype, shape), or (None, None) when the dtype or the rank is unknown. On a dynamic graph
        dims may be symbolic (str: equal names are equal sizes) or None (unknown): callers check
        only what they need and skip a fusion they cannot decide (see known_dims, same_dim)."""
        if name in self.graph.initializers:
            a = self.graph.initializers[name]
            return a.dtype, tuple(a.shape)
        v = self.graph.values.get(name)
        return (None, None) if v is None or v.dtype is None or v.shape is None else (np.dtype(v.dtype), tuple(v.shape))

    # -- rewriting -----------------------------------------------------------------------------
    def replace(self, group: list[Node], node: Node | list[Node]) -> None:
        """`node` (or several nodes, in their order) takes the place of `group` (in graph order: at
        the group's last node)."""
        order = self._order
        if order is None or any(id(n) not in order for n in group):  # (once a commit; not once a group: n^2)
            order = self._order = {id(n): i for i, n in enumerate(self.graph.nodes)}
        last = max(group, key=lambda n: order[id(n)])
        for n in group:  # a removed node leaves the readers of its inputs (list.remove: no Python loop
            self._removed.add(id(n))  # over a tensor read by thousands, a shared weight)
            for i in n.inputs:
                users = self.consumers.get(i)
                while users and n in users:
                    users.remove(n)
        nodes = node if isinstance(node, list) else [node]
        self._placed[id(last)] = nodes
        for new in nodes:
            for o in new.outputs:
                self.producers[o] = new
            for i in new.inputs:
                self.consumers.setdefault(i, []).append(new)

    def commit(self) -> int:
        """Apply the replacements; drop the tensors only the removed nodes produced. Returns how many."""
        g = self.graph
        if not self._placed:
            return 0
        kept = set()
        nodes = []
        for n in g.nodes:
            if id(n) in self._placed:
                nodes.extend(self._placed[id(n)])
            elif id(n) not in self._removed:
                nodes.append(n)
        for n in nodes:
            kept.update(n.inputs)
            kept.update(n.outputs)
        for n in g.nodes:
            if id(n) in self._removed:
                for o in n.outputs:
                    if o and o not in kept and o not in g.outputs:
                        g.values.pop(o, None)
        g.nodes = nodes
        g.opset.setdefault(GE_DOMAIN, g.opset.get("", 17))  # see kernels/fused.py
        n = len(self._placed)
        self._placed.clear()
        self._removed.clear()
        self._order = None
        return n


def known_dims(shape) -> bool:
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


def stand_in(shape) -> tuple:
    """A static shape standing in for a partly known one (a dynamic graph's): its unknown dims (None,
    symbols) 2, so that they broadcast against known ones only as a 2 would; for checks that a kernel
    accepts an op, never for sizes."""
    return tuple(d if isinstance(d, int) and d >= 0 else 2 for d in shape)


def same_dim(a, b) -> bool:
    """Provably equal dims: equal ints, or one symbol (onnx names equal sizes alike); None is unknown."""
    return a is not None and b is not None and a == b and not (isinstance(a, int) and a < 0)


def fuse_at_reduce_means(graph, stats: dict | None, match, fused_node):
    """The normalization fusions' driver: at each default-domain ReduceMean not yet fused away,
    `match(m, mean)` gives (..., group) or None, and the group becomes `fused_node(mean, match)`."""
    m = Matcher(graph)
    fused = 0
    for mean in list(graph.nodes):
        if mean.op_type != "ReduceMean" or mean.domain != "" or m.removed(mean):
            continue
        found = match(m, mean)
        if found is None:
            continue
        m.replace(found[-1], fused_node(m, mean, found))
        fused += 1
    m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
    return graph

