"""Helpers shared by the passes: building a node's kernel, renaming tensors, unique names."""
from __future__ import annotations

import contextlib
import contextvars
import pickle

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


def input_metas(graph: Graph, node: Node) -> list[Meta | None]:
    """The metas of the node's inputs (None where one is absent): an initializer's (made once a compile:
    KernelMemo.const_meta), a value's when it is static; a GraphError naming an input that is not."""
    memo = _MEMO.get()
    made = {} if memo is None else memo.const_metas  # name -> (array, its Meta)
    metas = []
    for name in node.inputs:  # (one call a node, not one an input: every plan and memo hit asks them all)
        a = graph.initializers.get(name) if name else None
        if a is not None:
            held = made.get(name)
            metas.append(held[1] if held is not None and held[0] is a else
                         Meta(a.dtype, a.shape) if memo is None else memo.const_meta(name, a))
            continue
        v = graph.values.get(name) if name else None
        if name and (v is None or not v.is_static):
            shape = None if v is None else v.shape
            raise GraphError(f"{node}: input '{name}' has no static shape (shape {shape}); "
                             f"its producer could not be inferred")
        metas.append(Meta(v.dtype, tuple(v.shape)) if name else None)  # (not v.meta: is_static once)
    return metas


def build_kernel(graph: Graph, node: Node, metas: list[Meta | None] | None = None, values: dict | None = None) -> Kernel:
    """The node's kernel, planned on the numpy backend (the same on every machine), with its input
    metas and constant inputs (initializer values, and those in `values`): shapes, and values when
    folding constants."""
    opset = node_opset(graph, node)
    cls = lookup(node.op_type, node.domain, opset, node=node.name)
    if metas is None:
        metas = input_metas(graph, node)
    consts = [(graph.initializers.get(i) if values is None or i not in values else values[i]) if i else None
              for i in node.inputs]
    for name, m, c in zip(node.inputs, metas, consts):
        if c is None and m is not None and m.nbytes > MAX_TENSOR_NBYTES:
            raise GraphError(f"{node}: input '{name}' {list(m.shape)} is {m.nbytes} bytes; ge compiles tensors "
                             f"of up to {MAX_TENSOR_NBYTES >> 30} GiB (shape inference and planning work on them)")
    try:
        return planned(cls, node.attrs, metas, consts, None, opset, node.name, len(node.outputs), NUMPY)
    except MemoryError:  # a plan sized by absurd attributes (pads, strides) the host cannot give
        raise GraphError(f"{node}: planning it needs more memory than the host has (attributes "
                         f"{sorted(node.attrs)})") from None


class KernelMemo:
    """The kernels one compile planned: for each node name and backend the last one, with everything
    its plan was made from (class, opset, attributes, input metas, constant inputs, number of outputs,
    and the output metas for a kernel that reads them: Kernel.reads_outputs). Planning a node again
    with none of that changed gives that kernel back: constant folding's inference of a node whose
    outputs onnx left unknown and infer_shapes' are one plan, and so are the check after the fusions
    and the builder's numpy plan (the workspace of the loader's fallback). Nothing
    changes a kernel after construction but load() (constant folding computes with it), and no
    planned property (output metas, alias, workspace) depends on that. Attributes are compared as
    they were when planned (a copy), arrays and subgraphs by identity: constant inputs by their ids (the
    arrays held beside the key), attributes' held by the key, so that no id is reused while compared.
    One kernel a name and backend: a node's older plans, and the weights they hold, go when it is
    planned anew."""

    def __init__(self):
        self._last: dict[tuple, tuple[tuple, Kernel, tuple]] = {}  # (name, backend) -> (key, kernel, consts)
        #: initializer name -> (its array, the array's Meta): made once while the name holds that array (a Meta
        #: costs more than the rest of input_metas; each pass asks it of every weight, scale and zero point again)
        self.const_metas: dict[str, tuple[np.ndarray, Meta]] = {}

    def const_meta(self, name: str, array: np.ndarray) -> Meta:
        """The Meta of initializer `name` holding `array`, remembered in const_metas."""
        m = Meta(array.dtype, array.shape)
        self.const_metas[name] = (array, m)
        return m

    def planned(self, cls: type[Kernel], attrs: dict, metas: list, consts: list, outputs: list | None, opset: int,
                name: str, num_outputs: int, backend) -> Kernel:
        try:
            key = (cls, opset, num_outputs, tuple(metas), tuple(map(id, consts)),
                   None if outputs is None or not cls.reads_outputs else tuple(outputs), _attrs_key(attrs))
        except Exception:  # an attribute pickle cannot copy (none of ONNX's types): not remembered
            key = None
        last = self._last.get((name, backend))
        if key is not None and last is not None and last[0] == key:
            return last[1]
        kernel = _plan(cls, attrs, metas, consts, outputs, opset, name, num_outputs, backend)
        if key is not None:
            self._last[name, backend] = (key, kernel, tuple(consts))
        return kernel


#: the memo of the compile under way (memoized_kernels), None outside one: each kernel planned anew
_MEMO: contextvars.ContextVar[KernelMemo | None] = contextvars.ContextVar("ge_kernel_memo", default=None)


@contextlib.contextmanager
def memoized_kernels():
    """Within the block, build_kernel and the builder share one KernelMemo (a compile's)."""
    token = _MEMO.set(KernelMemo())
    try:
        yield
    finally:
        _MEMO.reset(token)


def planned(cls: type[Kernel], attrs: dict, metas: list, consts: list, outputs: list | None, opset: int, name: str,
            num_outputs: int, backend) -> Kernel:
    """cls's kernel planned from these: within a compile (memoized_kernels), the one planned before
    from the same when there is one."""
    memo = _MEMO.get()
    if memo is None:
        return _plan(cls, attrs, metas, consts, outputs, opset, name, num_outputs, backend)
    return memo.planned(cls, attrs, metas, consts, outputs, opset, name, num_outputs, backend)


def _plan(cls, attrs, metas, consts, outputs, opset, name, num_outputs, backend) -> Kernel:
    return cls(attrs, metas, consts, outputs=outputs, opset=opset, name=name, num_outputs=num_outputs, backend=backend)


class _Same:
    """An object compared by identity (an array, a subgraph), held while its key is."""
    __slots__ = ("obj",)

    def __init__(self, obj):
        self.obj = obj

    def __eq__(self, other) -> bool:
        return type(other) is _Same and self.obj is other.obj


#: attribute value types that are neither an array nor a subgraph (nor a subclass of one)
_UNHELD = frozenset({int, float, str, bytes, bool, list, tuple, type(None)})


def _attrs_key(attrs: dict) -> tuple:
    """The attributes as a value equal only to equal attributes: their pickle (a copy, in C: 0.0 apart
    from -0.0, 1 from True, a list from a tuple), the arrays and subgraphs among them by identity."""
    if _UNHELD.issuperset(map(type, attrs.values())):  # (most nodes: no value held by identity, one C walk)
        return (pickle.dumps(attrs, pickle.HIGHEST_PROTOCOL),)
    plain, held = {}, []
    for k, v in attrs.items():
        if isinstance(v, (np.ndarray, Graph)):
            held.append((k, _Same(v)))
        else:
            plain[k] = v
    return pickle.dumps(plain, pickle.HIGHEST_PROTOCOL), *held


def partial_shape(graph: Graph, name: str) -> tuple | None:
    """A tensor's shape as the graph knows it (a dynamic graph's unknown dims are None or symbols), an
    initializer's own; None where even the rank is unknown."""
    if name in graph.initializers:
        return tuple(graph.initializers[name].shape)
    v = graph.values.get(name)
    return None if v is None or v.shape is None else tuple(v.shape)


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
