"""Graph, Node and Value, spelled as ONNX spells them.

A dim is an int (static), a str (symbolic, e.g. "batch") or None (unknown); a shape of None means
unknown rank. Constants live in `Graph.initializers` as numpy arrays.
"""
from __future__ import annotations

import copy as _copy
import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import GraphError

#: ONNX TensorProto data type id -> numpy's own dtype
_NUMPY_TYPES: dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16),
    5: np.dtype(np.int16), 6: np.dtype(np.int32), 7: np.dtype(np.int64), 9: np.dtype(np.bool_),
    10: np.dtype(np.float16), 11: np.dtype(np.float64), 12: np.dtype(np.uint32), 13: np.dtype(np.uint64),
    # STRING: arrays of Python str objects; no static layout, they live on the host (the dynamic path)
    8: np.dtype(object),
}
#: ONNX TensorProto data type id -> the ml_dtypes type's name: one element a byte (or two) in memory,
#: as onnx's numpy_helper unpacks them; Cast converts them
SMALL_TYPES: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz",
    21: "uint4", 22: "int4", 23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2",
}
STRING = np.dtype(object)
_ONNX_OF = {v: k for k, v in _NUMPY_TYPES.items()}
_ONNX_OF_SMALL = {v: k for k, v in SMALL_TYPES.items()}


def small_dtype(name: str) -> np.dtype:
    """numpy's dtype of an ml_dtypes type (onnx's own dependency), imported on first use: its import
    is 15-20 ms of a process, which a model of numpy's types never pays."""
    import ml_dtypes
    return np.dtype(getattr(ml_dtypes, name))


class _OnnxTypes(Mapping):
    """ONNX TensorProto data type id -> numpy dtype (the types ge's kernels handle)."""

    def __getitem__(self, elem_type) -> np.dtype:
        found = _NUMPY_TYPES.get(elem_type)
        return found if found is not None else small_dtype(SMALL_TYPES[elem_type])

    def __contains__(self, elem_type) -> bool:
        return elem_type in _NUMPY_TYPES or elem_type in SMALL_TYPES

    def __iter__(self):
        return iter([*_NUMPY_TYPES, *SMALL_TYPES])

    def __len__(self) -> int:
        return len(_NUMPY_TYPES) + len(SMALL_TYPES)


DTYPES = _OnnxTypes()


def dtype_from_onnx(elem_type: int, where: str = "") -> np.dtype:
    try:
        return DTYPES[elem_type]
    except KeyError:
        raise GraphError(f"{where}: unsupported ONNX element type {elem_type}") from None


def is_onnx_dtype(dtype) -> bool:
    """`dtype` is one of DTYPES' values (without importing ml_dtypes: an array of its types has)."""
    dtype = np.dtype(dtype)
    return dtype in _ONNX_OF or dtype.name in _ONNX_OF_SMALL


def dtype_to_onnx(dtype) -> int:
    dtype = np.dtype(dtype)
    found = _ONNX_OF.get(dtype)
    return found if found is not None else _ONNX_OF_SMALL[dtype.name]


class Meta(NamedTuple):
    """A static tensor description: what kernels and the planner see."""
    dtype: np.dtype
    shape: tuple

    @property
    def numel(self) -> int:
        return math.prod(self.shape)  # Python ints: np.prod costs microseconds per call, on every run

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass
class Value:
    name: str
    dtype: np.dtype | None = None
    shape: tuple | None = None
    #: "tensor", or (no static layout, the dynamic path only) "sequence" of tensors of `dtype`,
    #: "optional" tensor, "optional_sequence"
    kind: str = "tensor"

    @property
    def is_static(self) -> bool:
        return self.kind == "tensor" and self.dtype is not None and self.dtype != STRING and self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def meta(self) -> Meta:
        if not self.is_static:
            raise GraphError(f"tensor '{self.name}' has no static shape (shape {self.shape})")
        return Meta(self.dtype, tuple(self.shape))


@dataclass
class Node:
    op_type: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict = field(default_factory=dict)
    name: str = ""
    domain: str = ""

    def __str__(self) -> str:
        return f"node '{self.name}' ({self.op_type})"


@dataclass
class Graph:
    name: str = "graph"
    nodes: list[Node] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    values: dict[str, Value] = field(default_factory=dict)
    initializers: dict[str, np.ndarray] = field(default_factory=dict)
    opset: dict[str, int] = field(default_factory=lambda: {"": 17})
    #: a subgraph (an If branch, a Loop or Scan body): how many of its inputs, the last ones, are
    #: values of the enclosing graph it reads (captured). The node lists the same values, in the same
    #: order, as its own last inputs: outer-scope reads are explicit edges, so every pass sees them.
    captures: int = 0
    #: initializers constant folding computed from tensors' static shapes (a Shape's value, a Range
    #: up to it ...): they differ from one input shape (a gear) to the next, unlike the weights
    shape_constants: set = field(default_factory=set)

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


def _copy_node(node: Node) -> Node:
    """A node whose attributes a pass may change without touching `node`'s: subgraphs copied as
    graphs, lists and arrays (a Constant's value) copied, scalars and strings shared."""
    attrs = {}
    for k, v in node.attrs.items():
        if isinstance(v, Graph):
            v = v.copy()
        elif isinstance(v, (list, np.ndarray)):
            v = _copy.deepcopy(v)
        attrs[k] = v
    return Node(node.op_type, list(node.inputs), list(node.outputs), attrs, node.name, node.domain)


def stable_topological_order(waits_on: list[set[int]]) -> list[int]:
    """Indices 0..n-1 ordered so each comes after the indices it waits on, the lowest ready index
    first (Kahn's algorithm): an already sorted list keeps its order. Indices on a cycle are left out."""
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


#: a compiled control-flow node's attribute: how many of its inputs (the last ones) are captured
CAPTURES = "ge.captures"


def subgraphs(node: Node) -> list[tuple[str, Graph]]:
    """(attribute name, graph) of each subgraph attribute of a control-flow node (If, Loop, Scan)."""
    return [(k, v) for k, v in node.attrs.items() if isinstance(v, Graph)]
