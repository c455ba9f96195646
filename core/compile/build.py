"""Build a GeModel from an optimized, fully static Graph: aliases, lifetimes, memory plan,
task defs with (allocation, offset) arguments, IO descs and the inline weight blob."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..model.errors import GraphError
from ..model.ge_model import (FEATURE_MAP, FM_ID, INPUT, OUTPUT, WEIGHT, WEIGHT_ID, WORKSPACE, WORKSPACE_ID,
                              Allocation, Arg, GeModel, TaskDef, TensorDesc, TensorPlan, WeightDesc, WeightLayout)
from ..model.ir import Graph, Node
from ..kernels import lookup
from ..kernels import backend as backends
from ..kernels.backend import NUMPY, Backend
from ..kernels.ops.fused_elementwise import chain_label
from ..model.arena import ALIGNMENT, Buffer, align, plan_arena
from .dataflow_plan import plan_dataflow
from ..passes._util import node_opset, planned


def build(graph: Graph, *, name: str | None = None, soc_version: str = "Ascend-sim", atc_cmdline: str = "",
          reuse_memory: bool = True, join_weights: bool = True) -> GeModel:
    """`reuse_memory=False` (--disable_reuse_memory=1): every feature map gets bytes of its own.
    `join_weights=False`: weight_data stays a WeightLayout of the graph's arrays, for the OM writer
    to stream (`ge atc` copies each weight once, into the file)."""
    opset = graph.opset.get("", 17)
    output_names = list(graph.outputs)
    _copy_outputs_that_are_not_produced(graph)
    graph.toposort()
    outputs = set(graph.outputs)
    meta = _Metas(graph)

    # 1. aliases: Reshape/Flatten/Squeeze/Unsqueeze/Identity become views of their input (no task), and
    # so do the parts of a Split whose parts are runs of its input's bytes (at their offsets in it)
    root: dict[str, str] = {}
    root_offset: dict[str, int] = {}  # an alias's byte offset in its root (a Split's part)
    tasks_nodes: list[Node] = []
    kernels, workspaces = [], []
    for node in graph.nodes:
        opset = node_opset(graph, node)
        plan = _plan_inputs(graph, node, meta)
        kernel = _kernel(node, opset, plan)  # the instance decides (Dropout with a mask is no alias)
        produced = [o for o in node.outputs if o]
        src = node.inputs[0] if node.inputs else ""
        viewable = src and src not in graph.initializers and not outputs.intersection(produced)
        if viewable and kernel.alias and len(produced) == 1:
            root[produced[0]] = root.get(src, src)
            root_offset[produced[0]] = root_offset.get(src, 0)
        elif viewable and _parts_in_place(graph, kernel, root.get(src, src)):
            for o, off in zip(node.outputs, kernel.part_offsets):
                if o:
                    root[o] = root.get(src, src)
                    root_offset[o] = root_offset.get(src, 0) + off
        else:
            tasks_nodes.append(node)
            kernels.append(kernel)
            workspaces.append(_workspace(node, opset, plan, kernel))

    # 2. lifetimes of every storage root, in task steps
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for step, node in enumerate(tasks_nodes):
        for o in node.outputs:
            if o:
                first[o] = last[o] = step
        for i in node.inputs:
            if i:
                r = root.get(i, i)
                last[r] = max(last.get(r, step), step)

    # 3. allocations: weights, feature maps, workspace, then one per model input and output
    weights, layout, weight_offset = _layout_weights(graph, tasks_nodes, root)
    weight_data = layout.join() if join_weights else layout
    fm_roots = [t for t in first if t not in outputs and t not in graph.inputs]
    over = _outputs_over_inputs(meta, tasks_nodes, kernels, root, root_offset, first, last, set(fm_roots)) \
        if reuse_memory else {}
    spans: dict[str, Buffer] = {}  # a chain of outputs written over their inputs: one buffer, its whole span
    for t in fm_roots:
        h = over.get(t, t)
        b = spans.get(h)
        spans[h] = Buffer(h, meta[t].nbytes, min(first[t], b.first if b else first[t]),
                          max(last[t], b.last if b else last[t]))
    arena = plan_arena(list(spans.values()), reuse=reuse_memory)
    workspace = align(max(workspaces, default=0))
    allocations = [Allocation(WEIGHT_ID, WEIGHT, len(weight_data)), Allocation(FM_ID, FEATURE_MAP, arena.size),
                   Allocation(WORKSPACE_ID, WORKSPACE, workspace)]
    place: dict[str, tuple[int, int]] = {t: (WEIGHT_ID, off) for t, off in weight_offset.items()}
    place.update({t: (FM_ID, arena.offsets[over.get(t, t)]) for t in fm_roots})
    inputs, outs = [], []
    for index, t in enumerate(graph.inputs):
        allocations.append(Allocation(len(allocations), INPUT, meta[t].nbytes, index))
        place[t] = (allocations[-1].id, 0)
        inputs.append(_desc(meta[t], t, allocations[-1].id))
    for index, (t, shown) in enumerate(zip(graph.outputs, output_names)):
        allocations.append(Allocation(len(allocations), OUTPUT, meta[t].nbytes, index))
        place[t] = (allocations[-1].id, 0)
        outs.append(_desc(meta[t], shown, allocations[-1].id))

    # 4. the logical allocation table: every tensor, aliases included, has a place (strict plan)
    args: dict[str, Arg] = {}  # one each: a tensor is a row of the table and its tasks' argument

    def arg(t: str) -> Arg:
        a = args.get(t)
        if a is None:
            r = root.get(t, t)
            if r not in place:
                raise GraphError(f"tensor '{t}' has no memory plan entry")
            m = meta[t]
            a = args[t] = Arg(place[r][0], place[r][1] + root_offset.get(t, 0), _name(m.dtype), tuple(m.shape))
        return a

    tensors = []
    for t in list(first) + list(root) + list(graph.inputs):
        r = root.get(t, t)
        a = arg(t)
        tensors.append(TensorPlan(t, a.allocation, a.offset, meta[t].nbytes, a.dtype, a.shape,
                                  first.get(r, 0), last.get(r, first.get(r, 0)), r if r != t else ""))
    tasks = [TaskDef(n.name, n.op_type, n.domain, node_opset(graph, n), dict(n.attrs),
                     tuple(arg(i) if i else None for i in n.inputs), tuple(arg(o) if o else None for o in n.outputs),
                     ws)
             for n, ws in zip(tasks_nodes, workspaces)]

    ops: dict[str, int] = {}
    for n in graph.nodes:
        op = f"{n.op_type}[{chain_label(n.attrs['steps'])}]" if n.op_type == "FusedElementwise" else n.op_type
        ops[op] = ops.get(op, 0) + 1
    attrs = {"memory_size": arena.size + workspace, "feature_map_size": arena.size, "workspace_size": workspace,
             "weight_size": len(weight_data), "lower_bound": arena.lower_bound, "stream_num": 1, "event_num": 0,
             "zero_copy_memory_size": sum(a.size for a in allocations if a.kind in (INPUT, OUTPUT)),
             "ops": ops, "aliases": len(root), "alignment": ALIGNMENT}
    if not reuse_memory:
        attrs["disable_reuse_memory"] = 1
    model = GeModel(name or graph.name, inputs, outs, allocations, tensors, tasks, weights, weight_data,
                    soc_version=soc_version, opset=opset, atc_cmdline=atc_cmdline, attrs=attrs)
    model.dataflow = plan_dataflow(model)
    return model


def _parts_in_place(graph: Graph, kernel, src: str) -> bool:
    """A Split whose parts can be views of its input: runs of it (kernel.part_offsets) each starting
    at an aligned offset (the kernels' vector loads), the input a feature map of one of the tasks."""
    offsets = kernel.part_offsets
    return offsets is not None and src not in graph.inputs and all(off % ALIGNMENT == 0 for off in offsets)


def _outputs_over_inputs(meta: dict, nodes: list[Node], kernels: list, root: dict, root_offset: dict, first: dict,
                         last: dict, fm: set) -> dict:
    """Feature maps whose task writes its output over an input (Kernel.output_over: a ResNet block's
    FusedConv over its residual Z, as onnxruntime's fused Conv+Add does): the output takes the input's
    bytes when this task is the input's last reader and both are planned feature maps of one size.
    Saves a feature map and the traffic of writing one more (cold) buffer. Each such tensor -> the head
    of its chain (the first tensor, whose bytes the whole chain uses); the tensors keep their own lifetimes,
    which touch at the step that overwrites. The dataflow plan (any order) places them apart again."""
    head: dict[str, str] = {}
    for step, (node, kernel) in enumerate(zip(nodes, kernels)):
        k = getattr(kernel, "output_over", None)
        if k is None or k >= len(node.inputs) or not node.inputs[k] or not node.outputs or not node.outputs[0]:
            continue
        if root_offset.get(node.inputs[k], 0):  # a part of its root: the output would not start where it does
            continue
        src, out = root.get(node.inputs[k], node.inputs[k]), node.outputs[0]
        read_elsewhere = any(i and root.get(i, i) == src for j, i in enumerate(node.inputs) if j != k)
        if src in fm and out in fm and last[src] == step and first[out] == step and not read_elsewhere \
                and meta[src].nbytes == meta[out].nbytes:
            head[out] = head.get(src, src)
    return head


def _copy_outputs_that_are_not_produced(graph: Graph) -> None:
    """A model output must be written by a task into its own OUTPUT allocation: an output that is
    a model input, a constant, or a repeat of another output gets an Identity copy."""
    seen: set[str] = set()
    for j, t in enumerate(graph.outputs):
        if t in graph.inputs or t in graph.initializers or t in seen:
            copy = f"{t}:output{j}"
            graph.nodes.append(Node("Identity", [t], [copy], name=f"{t}:copy_to_output{j}"))
            graph.values[copy] = graph.value(t).__class__(copy, *graph.meta(t))
            graph.outputs[j] = copy
        seen.add(graph.outputs[j])


def _layout_weights(graph: Graph, nodes: list[Node], root: dict) -> tuple[list[WeightDesc], WeightLayout, dict]:
    """Every initializer a task reads, each at an aligned offset of the WEIGHT partition."""
    pieces, descs, offsets, size = [], [], {}, 0
    for node in nodes:
        for t in node.inputs:
            if t in graph.initializers and t not in offsets:
                a = np.array(graph.initializers[t], order="C", copy=None)  # (ascontiguousarray makes scalars 1-D)
                offsets[t] = off = align(size)
                size = off + a.nbytes
                pieces.append((off, a))
                descs.append(WeightDesc(t, _name(a.dtype), tuple(a.shape), off, a.nbytes))
    return descs, WeightLayout(align(size), tuple(pieces)), offsets


class _Metas(dict):
    """graph.meta of each tensor, made on first use: the build asks it of every tensor several times
    (its kernels' two plans, lifetimes, allocations, the tensor table), a Meta made each time."""

    def __init__(self, graph: Graph):
        super().__init__()
        self.graph = graph

    def __missing__(self, name: str):
        m = self[name] = self.graph.meta(name)
        return m


def _plan_inputs(graph: Graph, node: Node, meta: _Metas) -> tuple:
    """What the node's kernels are planned from: its class, input metas, constant inputs and output
    metas (the same for the plan of this machine and the numpy plan of _workspace)."""
    cls = lookup(node.op_type, node.domain, node_opset(graph, node), node.name)
    return (cls, [meta[i] if i else None for i in node.inputs],
            [graph.initializers.get(i) if i else None for i in node.inputs],
            [meta[o] if o else None for o in node.outputs])


def _kernel(node: Node, opset: int, plan: tuple, backend: Backend | None = None):
    """The node's kernel, planned (never loaded: the compiler packs no weight) from _plan_inputs, on
    the best backend this machine has unless one is given."""
    cls, metas, consts, outputs = plan
    return planned(cls, node.attrs, metas, consts, outputs, opset, node.name, len(node.outputs),
                   backend or backends.select())


def _workspace(node: Node, opset: int, plan: tuple, kernel) -> int:
    """Scratch for the plan chosen here and for the numpy plan the kernel falls back to where ge's
    native kernels are not built, so that the OM loads on either machine (the loader takes the numpy
    plan when the native one needs more than the OM plans). A native plan is `uses_native` (products,
    convolutions) or `native` (elementwise chains, Erf and Gelu, quantizers: no workspace of their own,
    where their numpy plans have some)."""
    if not (kernel.uses_native or getattr(kernel, "native", None)):
        return kernel.workspace_nbytes()
    return max(kernel.workspace_nbytes(), _kernel(node, opset, plan, NUMPY).workspace_nbytes())


def _desc(m, shown: str, allocation: int) -> TensorDesc:
    return TensorDesc(shown, _name(m.dtype), tuple(m.shape), allocation)


@lru_cache(maxsize=None)
def _name(dtype: np.dtype) -> str:
    """dtype.name, which numpy computes in Python (microseconds: a model's build asks it of every tensor)."""
    return dtype.name
