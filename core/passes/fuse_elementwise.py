"""Fuse connected elementwise ops into one task: ge::FusedElementwise (kernels/fused_elementwise.py).

Why: a run of small elementwise ops (an Add/Relu chain, a MobileNet tail of HardSwish, Clip, Add,
Mul that follows no conv) costs a task, a planned tensor and a pass over memory per op; tiny ones
cost mostly the dispatch. Fused, the chain is one task whose native plan walks the output once, in
blocks that stay in L1, and whose numpy plan runs the ops in place in the output.

Recognized: ops of kernels.fused_elementwise.CHAIN_OPS (with their fused epilogues) whose output
has one dtype and a known rank, operands broadcasting to it. A producer joins its reader's group
when its only output is read by that reader alone, once, is no graph output and has the reader's
dtype and shape: a group is a tree whose inner values never leave it, so a value that is a model
output or has two readers stays a tensor of its own. Clip's bounds must be constant scalars. A
group of one node stays as it is, but with an epilogue (an Add and the activation fuse_activation gave
it, applied in place by numpy's ufuncs one pass per op: one pass as a chain), and in float16, where
the interpreter runs it as a one-step chain:
converted and rounded a block at a time, where its own kernel converts whole tensors around a float32
op (Add, Mul: 1.1-1.7x the chain's time at BERT-small sizes, 28x for a 4x64 Add) or runs numpy's
float16 loop (Relu: 19x). Runs after the other fusions: a Conv's or MatMul's activation,
bias and residual are theirs first.

Unknown dims (`dynamic`, passes.optimize_unknown): a chain of broadcasting elementwise ops computes the
same at any shape, so what those dims decide is only which producers join, by their shapes at a
nominal input size (passes/_nominal.py: a gate's chain is not computed per pixel); the kernel is
checked with stand-in sizes for them, and the hybrid executor builds it for each run's shapes.

FLOAT16: a float16 chain runs natively as float32 steps on float16 blocks, each step's result
rounded to float16 as its own kernel rounds it (csrc/eltwise.c): the same bits as the unfused ops,
without their whole-tensor conversions. An op whose float16 kernel needs workspace (a float formula
converting blocks) joins only a chain the interpreter runs (Erf does: an fp16 export's GELU is one
chain); the kernel refuses the others, whose numpy plan would be slower than the separate ops.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GeError
from ..model.ir import Graph, Meta, Node
from ..kernels.backend import NUMPY
from ..kernels.epilogue import ATTR as EPILOGUE
from ..kernels.fused import GE_DOMAIN
from ..kernels.ops.fused_elementwise import CHAIN_OPS, FusedElementwise
from ._fusion import Matcher, known_dims, stand_in
from ._nominal import Sizes


def fuse_elementwise(graph: Graph, stats: dict | None = None, dynamic: bool = False) -> Graph:
    """`dynamic`: the graph has unknown dims, and only the nodes whose outputs have some join a chain (the
    static parts become static submodels, whose own pipeline fuses them)."""
    m, sizes = Matcher(graph), Sizes(graph)
    opset = graph.opset.get("", 17)
    group: dict[int, list[Node]] = {}  # id(root) -> its members in graph order
    for node in graph.nodes:
        meta = _chain_meta(m, node, opset)
        if meta is None or (dynamic and known_dims(meta[1])):
            continue
        members = []
        for name in dict.fromkeys(node.inputs):
            prod = m.producers.get(name)
            if (prod is not None and id(prod) in group and node.inputs.count(name) == 1
                    and m.internal(name) and m.consumers.get(name, []) == [node] and m.meta(name)[0] == meta[0]
                    and sizes.alike(name, node.outputs[0])):
                members.extend(group.pop(id(prod)))
        group[id(node)] = members + [node]
    order = {id(n): i for i, n in enumerate(graph.nodes)}
    fused = steps = 0
    for members in group.values():
        if len(members) < 2 and m.meta(members[0].outputs[0])[0] != np.float16 and not members[0].attrs.get(EPILOGUE):
            continue
        members.sort(key=lambda n: order[id(n)])
        node = _fused_node(m, members, opset)
        if node is not None:
            m.replace(members, node)
            fused += 1
            steps += len(node.attrs["steps"])
    m.commit()
    if stats is not None:
        stats["fused"] = stats.get("fused", 0) + fused
        stats["fused_steps"] = stats.get("fused_steps", 0) + steps
    return graph


def _chain_meta(m: Matcher, node: Node, opset: int):
    """(dtype, shape) of the node's output when it may join a chain, else None."""
    if (node.domain, node.op_type) not in CHAIN_OPS or len(node.outputs) != 1 or not node.outputs[0]:
        return None
    if any((step[2] if len(step) > 2 else "", step[0]) not in CHAIN_OPS for step in node.attrs.get(EPILOGUE, ())):
        return None
    dtype, shape = m.meta(node.outputs[0])
    if dtype is None or shape is None:
        return None
    data = node.inputs[:1] if node.op_type == "Clip" else node.inputs
    if len(data) != CHAIN_OPS[(node.domain, node.op_type)] or not all(data):
        return None
    if node.op_type == "Div" and dtype.kind != "f":  # integer Div is not safe in place
        return None
    for name in data:
        t, s = m.meta(name)
        if t != dtype or s is None:
            return None
    if node.op_type == "Clip" and _clip_bounds(m, node, opset) is None:
        return None
    return dtype, shape


def _clip_bounds(m: Matcher, node: Node, opset: int) -> dict | None:
    """Clip's bounds as the epilogue's attrs {"min", "max"} (absent: none), or None when one is computed."""
    bounds = {}
    for key, i in (("min", 1), ("max", 2)):
        name = node.inputs[i] if len(node.inputs) > i else ""
        if name:
            value = m.graph.initializers.get(name)
            if value is None or value.size != 1:
                return None
            bounds[key] = value.reshape(-1)[0].item()
        elif opset < 11 and key in node.attrs:
            bounds[key] = float(node.attrs[key])
    return bounds


def _fused_node(m: Matcher, members: list[Node], opset: int) -> Node | None:
    """The FusedElementwise node of a group (its root last), or None when its kernel refuses it."""
    inputs: list[str] = []
    step_of: dict[str, int] = {}  # a member's output -> the step computing it
    steps = []
    for node in members:
        data = node.inputs[:1] if node.op_type == "Clip" else node.inputs
        refs = []
        for name in data:
            if name in step_of:
                refs.append(-(step_of[name] + 1))
            else:
                if name not in inputs:
                    inputs.append(name)
                refs.append(inputs.index(name))
        attrs = _clip_bounds(m, node, opset) if node.op_type == "Clip" else \
            {k: v for k, v in node.attrs.items() if k != EPILOGUE}
        steps.append([node.op_type, node.domain, attrs, refs])
        for op, step_attrs, *domain in node.attrs.get(EPILOGUE, ()):
            steps.append([op, domain[0] if domain else "", dict(step_attrs), [-len(steps)]])
        step_of[node.outputs[0]] = len(steps) - 1
    root = members[-1]
    attrs = {"steps": steps}
    try:  # the kernel is the spec: it must accept the chain and compute the root's meta (or a stand-in's)
        metas = [Meta(t, stand_in(s)) for t, s in map(m.meta, inputs)]
        kernel = FusedElementwise(attrs, metas, opset=opset, name=root.name, backend=NUMPY)
        dtype, shape = m.meta(root.outputs[0])
        if kernel.out.dtype != dtype or tuple(kernel.out.shape) != stand_in(shape):
            return None
        if len(members) == 1 and not kernel.interpreted:  # a float16 op alone: only as the interpreter's
            return None
    except GeError:
        return None
    return Node("FusedElementwise", inputs, list(root.outputs), name=root.name, attrs=attrs, domain=GE_DOMAIN)
