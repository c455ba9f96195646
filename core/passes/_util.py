"""Helpers shared by the passes: building a node's kernel, renaming tensors, unique names."""
from __future__ import annotations

import numpy as np

from ..model.errors import GraphError
from ..model.ir import Graph, Meta, Node
from ..kernels import Kernel, lookup
from ..kernels.backend import NUMPY

#: the largest computed tensor the compiler takes: its passes run some kernels on sample data of
#: their input shapes, so a mutated dim of 2^40 must stop here, not in a 4 TiB allocation
MAX_TENSOR_NBYTES = 4 << 30


def node_opset(graph: Graph, node: Node) -> int:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    return graph.opset.get(domain, 17 if domain == "" else 1)


def input_meta(graph: Graph, node: Node, name: str) -> Meta | None:
    if not name:
        return None
    if name in graph.initializers:
        a = graph.initializers[name]
        return Meta(a.dtype, tuple(a.shape))
    v = graph.values.get(name)
    if v is None or not v.is_static:
        shape = None if v is None else v.shape
        raise GraphError(f"{node}: input '{name}' has no static shape (shape {shape}); "
                         f"its producer could not be inferred")
    return v.meta


def build_kernel(graph: Graph, node: Node, metas: list[Meta | None] | None = None) -> Kernel:
    """The node's kernel, planned on the numpy backend (the same on every machine), with its input
    metas and constant inputs (initializer values): shapes, and values when folding constants."""
    opset = node_opset(graph, node)
    cls = lookup(node.op_type, node.domain, opset, node=node.name)
    if metas is None:
        metas = [input_meta(graph, node, i) for i in node.inputs]
    consts = [graph.initializers.get(i) if i else None for i in node.inputs]
    for name, m, c in zip(node.inputs, metas, consts):
        if c is None and m is not None and m.nbytes > MAX_TENSOR_NBYTES:
            raise GraphError(f"{node}: input '{name}' {list(m.shape)} is {m.nbytes} bytes; ge compiles tensors "
                             f"of up to {MAX_TENSOR_NBYTES >> 30} GiB (shape inference and planning work on them)")
    try:
        return cls(node.attrs, metas, consts, opset=opset, name=node.name, num_outputs=len(node.outputs), backend=NUMPY)
    except MemoryError:  # a plan sized by absurd attributes (pads, strides) the host cannot give
        raise GraphError(f"{node}: planning it needs more memory than the host has (attributes "
                         f"{sorted(node.attrs)})") from None


def unique_name(graph: Graph, base: str, taken: set[str] | None = None) -> str:
    used = taken if taken is not None else set()
    name, k = base, 1
    while name in graph.values or name in graph.initializers or name in used:
        name, k = f"{base}_{k}", k + 1
    return name


def rename_tensor(graph: Graph, old: str, new: str) -> None:
    """Every reference to tensor `old` (node inputs/outputs, graph outputs) becomes `new`."""
    for n in graph.nodes:
        n.inputs = [new if i == old else i for i in n.inputs]
        n.outputs = [new if o == old else o for o in n.outputs]
    graph.outputs = [new if o == old else o for o in graph.outputs]


def set_initializer(graph: Graph, name: str, array: np.ndarray) -> None:
    array = np.array(array, order="C", copy=None)  # (ascontiguousarray would make scalars 1-D)
    graph.initializers[name] = array
    v = graph.value(name)
    v.dtype, v.shape = array.dtype, tuple(int(d) for d in array.shape)
