"""Range mode (`--input_shape "x:1~8,..."`): the memory a HybridModel needs inside its range,
planned at compile time so that a context allocates one arena and a run inside the range
allocates nothing.

Capacities are upper bounds derived from shapes, never from a sample run: the steps are walked
with every input at its largest shape; a node's kernel, built for its inputs' bounds, states its
outputs' bounds (`infer()`, or `upper_bound()` when the values decide the shapes: NonZero of an
[N, 4] input is at most [2, 4N]). Shape arithmetic (Shape -> Gather -> Concat ...) is carried as
value bounds through ops that never make a value smaller when an input grows, and is read only
where a larger value means a larger output (ConstantOfShape, Expand, Tile, Range's limit, Reshape).
A tensor without a finite bound (a size computed from data) is `growable`: it lives outside the
arena and grows at run time, each reallocation counted.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.dynamic_model import DynamicModel
from ..model.errors import GeError, ValueDependentError
from ..model.ge_model import FEATURE_MAP, WORKSPACE
from ..model.ir import Meta
from ..kernels import backend as backends
from ..kernels import lookup
from ..model.arena import Buffer, plan_arena

#: ops whose output values never decrease when the value of input 0 (or, for Shape/Size, its
#: shape) grows, their other inputs constant: value bounds pass through them
MONOTONE = {"Shape", "Size", "Gather", "Slice", "Unsqueeze", "Squeeze", "Reshape", "Flatten", "Identity",
            "Cast", "ReduceProd", "ReduceMax", "ReduceSum", "Ceil", "Floor"}
#: ... and those monotone in every input (Mul: over non-negative values)
MONOTONE_ALL = {"Concat", "Add", "Mul", "Max", "Min"}
#: (op, input): a shape input whose larger value gives a larger output, so its value bound gives
#: the output's bound; the op's other shape inputs must be constants
BOUNDED_BY_VALUE = {("ConstantOfShape", 0), ("Expand", 1), ("Tile", 1), ("Range", 1), ("Reshape", 1)}


def plan_range(dyn: DynamicModel, max_shapes: dict[str, tuple]) -> dict:
    """The capacities (bytes at the bound), the growable tensors and one arena for the capacities
    and the submodels' FM and workspace, reusing memory between lifetimes. `max_shapes`: each root
    input's largest shape. Returns the attrs {"capacities", "growable", "arena"}."""
    weights = np.frombuffer(memoryview(dyn.weight_data), np.uint8)
    consts = {w.name: weights[w.offset:w.offset + w.nbytes].view(w.dtype).reshape(w.shape) for w in dyn.weights}
    bounds: dict[str, Meta | None] = {d.name: Meta(np.dtype(d.dtype), tuple(max_shapes[d.name])) for d in dyn.inputs}
    values: dict[str, np.ndarray] = {}  # value bounds of shape arithmetic
    workspaces: dict[str, int] = {}
    life: dict[str, list] = {d.name: [0, 0] for d in dyn.inputs}

    def touch(name: str, pos: int) -> None:
        life.setdefault(name, [pos, pos])[1] = pos

    buffers = []
    for pos, step in enumerate(dyn.steps, 1):
        if step.kind == "submodel":
            sm = dyn.submodels[step.index]
            for d in sm.inputs:
                touch(d.name, pos)
            for d in sm.outputs:
                bounds[d.name] = Meta(np.dtype(d.dtype), tuple(d.shape))
                touch(d.name, pos)
            buffers += [Buffer(f"submodel{step.index}:fm", sm.allocation(FEATURE_MAP).size, pos, pos),
                        Buffer(f"submodel{step.index}:workspace", sm.allocation(WORKSPACE).size, pos, pos)]
            continue
        node = dyn.nodes[step.index]
        for t in node.inputs:
            if t and t not in consts:
                touch(t, pos)
        outs, ws = _node_bounds(node, consts, bounds, values)
        kinds = node.kinds or ("tensor",) * len(node.outputs)
        for o, b, kind in zip(node.outputs, outs, kinds):
            if o and kind == "tensor":  # sequences and optionals stay on the host: no buffer
                bounds[o] = b
                touch(o, pos)
        if ws is None:  # a node without bounds: its workspace (if any) grows with what it is built for
            bounds[f"{node.name}:workspace"] = None
        elif ws:
            workspaces[f"{node.name}:workspace"] = ws
            touch(f"{node.name}:workspace", pos)
    for d in dyn.outputs:
        touch(d.name, len(dyn.steps) + 1)
    capacities = {name: b.nbytes for name, b in bounds.items() if b is not None}
    capacities.update(workspaces)
    growable = sorted(name for name, b in bounds.items() if b is None)
    buffers += [Buffer(name, capacities[name], first, last) for name, (first, last) in life.items()
                if name in capacities]
    plan = plan_arena(buffers)
    return {"capacities": {name: capacities[name] for name in life if name in capacities}, "growable": growable,
            "arena": {"size": plan.size, "lower_bound": plan.lower_bound, "offsets": dict(plan.offsets)}}


def _node_bounds(node, consts: dict, bounds: dict, values: dict) -> tuple[list, int | None]:
    """The node's output bounds (None: no finite bound) and its largest workspace (None: unknown)."""
    none = [None] * len(node.outputs)
    cls = lookup(node.op_type, node.domain, node.opset, node.name)
    if node.subgraphs or any(k != "tensor" for k in node.kinds) or cls.__dict__.get("host_values"):
        return none, None
    metas = [None if not t else (Meta(consts[t].dtype, consts[t].shape) if t in consts else bounds.get(t))
             for t in node.inputs]
    if any(t and m is None for t, m in zip(node.inputs, metas)):  # reads a tensor without a bound
        return none, None
    known = [consts.get(t) if t else None for t in node.inputs]
    by_value = list(known)
    for i, t in enumerate(node.inputs):
        if (node.op_type, i) in BOUNDED_BY_VALUE and t in values and _usable(node.op_type, values[t], known):
            by_value[i] = values[t]
    try:
        outs, ws, kernel = _bounds(cls, node, metas, by_value)
    except GeError:
        if by_value == known:
            raise
        outs, ws, kernel = _bounds(cls, node, metas, known)  # the value bounds do not fit: no bound from them
    if kernel is not None and node.domain == "" and (node.op_type in MONOTONE or node.op_type in MONOTONE_ALL):
        _carry_values(node, kernel, metas, consts, values)
    return (outs + none)[:len(node.outputs)], ws


def _bounds(cls, node, metas, known) -> tuple[list, int | None, object]:
    """Output bounds, workspace and kernel (the last backend's) of `node` built for `metas`."""
    outs, ws, kernel = [], 0, None
    for backend in {backends.NUMPY, backends.select()}:  # the OM's workspace fits both plans
        try:
            kernel = cls(node.attrs, metas, known, opset=node.opset, name=node.name,
                         num_outputs=len(node.outputs), backend=backend)
            outs = [Meta(np.dtype(m.dtype), tuple(int(d) for d in m.shape)) for m in kernel.infer()]
            ws = max(ws, int(kernel.workspace_nbytes()))
        except ValueDependentError:  # the values decide: the kernel states how large they can be (the
            # hybrid executor runs such a node's compute(), no workspace)
            return ([] if kernel is None else list(kernel.upper_bound())), 0, None
        except GeError as e:
            raise GeError(f"range plan at the largest input shapes: {e}") from None
    return outs, ws, kernel


def _usable(op: str, value: np.ndarray, known: list) -> bool:
    """A value bound read as a shape: Reshape's 0 (copy) and -1 (infer) are no bounds, nor is
    Range's limit unless start and delta are constants and delta is positive."""
    if value.dtype.kind not in "iu":
        return False
    if op == "Reshape":
        return bool(np.all(value > 0))
    if op == "Range":
        return known[0] is not None and known[2] is not None and bool(np.all(np.asarray(known[2]) > 0))
    return True


def _carry_values(node, kernel, metas, consts: dict, values: dict) -> None:
    """Value bounds through a monotone op: every input a constant or a value bound (for Shape and
    Size, any tensor: its bound's shape is what they read); Mul only over non-negative values."""
    xs = []
    for i, (t, m) in enumerate(zip(node.inputs, metas)):
        if not t:
            xs.append(None)
        elif t in consts:
            xs.append(consts[t])
        elif t in values and (i == 0 or node.op_type in MONOTONE_ALL):
            xs.append(values[t])
        elif node.op_type in ("Shape", "Size"):
            xs.append(np.broadcast_to(np.zeros((), m.dtype), m.shape))  # no memory: only the shape is read
        else:
            return
    if node.op_type == "Mul" and any(x is not None and np.any(x < 0) for x in xs):
        return
    if math.prod(np.shape(xs[0])) > 1 << 16 and node.op_type not in ("Shape", "Size"):
        return  # shape arithmetic is small; a large tensor is data
    for o, r in zip(node.outputs, kernel.built_for(xs).compute(*xs)):
        if o:
            values[o] = np.asarray(r)
