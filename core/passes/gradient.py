"""Gradient (ai.onnx.preview.training), first in the pipeline: each such node becomes the backward
graph of the forward nodes between its `xs` and its `y` (reverse-mode differentiation: y's
gradient seeded with ones, each node's rule applied from y back to the xs, contributions to a
tensor read twice summed), made of ordinary ops the later passes fold, fuse and plan. A gradient
that went through a broadcast is summed back to its operand's shape, which needs the static shapes
the importer inferred. An op on the path without a rule fails the compile naming it.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GraphError
from ..model.ir import Graph, Node
from ._util import set_initializer, unique_name

TRAINING = "ai.onnx.preview.training"
#: ops a pass turns into others before any kernel is looked up (pre_check does not require one)
LOWERED_OPS = {(TRAINING, "Gradient")}


def expand_gradients(graph: Graph, stats: dict | None = None) -> Graph:
    nodes = [n for n in graph.nodes if n.domain == TRAINING and n.op_type == "Gradient"]
    for node in nodes:
        _Backward(graph, node).expand()
    if nodes:
        graph.toposort()
    if stats is not None:
        stats["expanded"] = stats.get("expanded", 0) + len(nodes)
    return graph


class _Backward:
    def __init__(self, graph: Graph, node: Node):
        self.g, self.node = graph, node
        self.xs = [str(x) for x in node.attrs.get("xs") or []]
        self.y = str(node.attrs.get("y") or "")
        if not self.xs or not self.y:
            raise self.fail("attributes 'xs' and 'y' are required")
        if len(node.outputs) > len(self.xs):
            raise self.fail(f"{len(node.outputs)} outputs for {len(self.xs)} xs")
        self.opset = graph.opset.get("", 17)
        self.taken: set[str] = set()
        self.made: list[Node] = []

    def fail(self, message: str) -> GraphError:
        return GraphError(f"{self.node}: {message}")

    # -- the forward graph ----------------------------------------------------------------------------
    def expand(self) -> None:
        producer = {o: n for n in self.g.nodes for o in n.outputs if o}
        active: dict[str, bool] = {}

        def depends(t: str) -> bool:  # t is an x or computed from one (never past an x)
            if t not in active:
                active[t] = t in self.xs or (t in producer and producer[t] is not self.node
                                             and any(depends(i) for i in producer[t].inputs if i))
            return active[t]

        if not depends(self.y):
            raise self.fail(f"'{self.y}' does not depend on any of xs {self.xs}")
        order = {id(n): k for k, n in enumerate(self.g.nodes)}
        path, stack, seen = [], [producer[self.y]] if self.y not in self.xs else [], set()
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            path.append(n)
            stack.extend(producer[i] for i in n.inputs if i and i not in self.xs and depends(i) and i in producer)
        grads: dict[str, list[str]] = {self.y: [self.const(np.ones(self.shape(self.y), self.dtype(self.y)))]}
        for n in sorted(path, key=lambda n: order[id(n)], reverse=True):
            if n.outputs[0] not in grads:
                continue
            if len([o for o in n.outputs if o]) != 1:
                raise self.fail(f"node '{n.name}' ({n.op_type}) has several outputs; ge differentiates "
                                f"single-output ops only")
            for i, d in zip(n.inputs, self.rule(n, self.total(grads[n.outputs[0]]))):
                if i and d is not None and depends(i):
                    grads.setdefault(i, []).append(d)
        for x, out in zip(self.xs, self.node.outputs):
            if out:
                d = self.total(grads[x]) if x in grads else self.const(np.zeros(self.shape(x), self.dtype(x)))
                self.made.append(Node("Identity", [d], [out], {}, self.node_name("Identity"), ""))
        k = self.g.nodes.index(self.node)
        self.g.nodes[k:k + 1] = self.made

    # -- the rules -------------------------------------------------------------------------------------
    def rule(self, n: Node, g: str) -> list[str | None]:
        """The gradient of each input of `n`, given g, the gradient of its output."""
        op, a, y = n.op_type, n.inputs, n.outputs[0]
        if n.domain != "":
            raise self.no_rule(n)
        if op == "Identity":
            return [g]
        if op == "Neg":
            return [self.emit("Neg", g)]
        if op == "Add":
            return [self.unbroadcast(g, a[0], y), self.unbroadcast(g, a[1], y)]
        if op == "Sub":
            return [self.unbroadcast(g, a[0], y), self.unbroadcast(self.emit("Neg", g), a[1], y)]
        if op == "Mul":
            return [self.unbroadcast(self.emit("Mul", g, a[1]), a[0], y),
                    self.unbroadcast(self.emit("Mul", g, a[0]), a[1], y)]
        if op == "Div":  # d(a/b)/db = -(a/b)/b
            return [self.unbroadcast(self.emit("Div", g, a[1]), a[0], y),
                    self.unbroadcast(self.emit("Neg", self.emit("Div", self.emit("Mul", g, y), a[1])), a[1], y)]
        if op == "Exp":
            return [self.emit("Mul", g, y)]
        if op == "Log":
            return [self.emit("Div", g, a[0])]
        if op == "Sqrt":
            return [self.emit("Div", g, self.emit("Mul", y, self.scalar(2, y)))]
        if op == "Tanh":
            return [self.emit("Mul", g, self.emit("Sub", self.scalar(1, y), self.emit("Mul", y, y)))]
        if op == "Sigmoid":
            return [self.emit("Mul", g, self.emit("Mul", y, self.emit("Sub", self.scalar(1, y), y)))]
        if op == "Relu":
            zero = self.scalar(0, y)
            return [self.emit("Where", self.emit("Greater", a[0], zero), g, zero)]
        if op == "MatMul" and len(self.shape(a[0])) == 2 and len(self.shape(a[1])) == 2:
            return [self.emit("MatMul", g, self.emit("Transpose", a[1])),
                    self.emit("MatMul", self.emit("Transpose", a[0]), g)]
        raise self.no_rule(n)

    def no_rule(self, n: Node) -> GraphError:
        return self.fail(f"node '{n.name}' ({n.domain + '::' if n.domain else ''}{n.op_type}) lies between xs and "
                         f"y, and ge has no gradient for it (it differentiates Identity, Neg, Add, Sub, Mul, Div, "
                         f"Exp, Log, Sqrt, Tanh, Sigmoid, Relu and 2-D MatMul)")

    def unbroadcast(self, g: str, operand: str, out: str) -> str:
        """g (of `out`'s shape) summed over the axes `operand` was broadcast along."""
        target, full = self.shape(operand), self.shape(out)
        if target == full:
            return g
        lead = len(full) - len(target)
        axes = list(range(lead)) + [lead + k for k, d in enumerate(target) if d == 1 and full[lead + k] != 1]
        if axes:
            axes_value = np.array(axes, np.int64)
            g = (self.emit("ReduceSum", g, self.const(axes_value), keepdims=1) if self.opset >= 13
                 else self.emit("ReduceSum", g, axes=axes, keepdims=1))
        return self.emit("Reshape", g, self.const(np.array(target, np.int64)))

    def total(self, parts: list[str]) -> str:
        total = parts[0]
        for p in parts[1:]:
            total = self.emit("Add", total, p)
        return total

    # -- building ----------------------------------------------------------------------------------------
    def shape(self, t: str) -> tuple:
        if t in self.g.initializers:
            return tuple(self.g.initializers[t].shape)
        v = self.g.values.get(t)
        if v is None or not v.is_static:
            raise self.fail(f"'{t}' has no static shape; ge differentiates graphs of static shapes")
        return tuple(v.shape)

    def dtype(self, t: str) -> np.dtype:
        dtype = self.g.initializers[t].dtype if t in self.g.initializers else self.g.value(t).dtype
        if dtype is None or np.dtype(dtype).kind != "f":
            raise self.fail(f"'{t}' is not a float tensor (dtype {dtype}); gradients need floats")
        return np.dtype(dtype)

    def scalar(self, value: float, like: str) -> str:
        return self.const(np.array(value, self.dtype(like)))

    def const(self, a: np.ndarray) -> str:
        name = unique_name(self.g, f"{self.node.name}/const", self.taken)
        self.taken.add(name)
        set_initializer(self.g, name, a)
        return name

    def node_name(self, op: str) -> str:
        used = {n.name for n in self.g.nodes} | {n.name for n in self.made}
        name, k = f"{self.node.name}/{op}", 1
        while name in used:
            name, k = f"{self.node.name}/{op}_{k}", k + 1
        return name

    def emit(self, op: str, *inputs: str, **attrs) -> str:
        out = unique_name(self.g, f"{self.node.name}/{op.lower()}", self.taken)
        self.taken.add(out)
        self.g.value(out)
        self.made.append(Node(op, list(inputs), [out], dict(attrs), self.node_name(op), ""))
        return out
