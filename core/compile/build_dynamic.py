"""Build a DynamicModel: the root graph, its KNOWN clusters as static submodels (GE's
BuildForKnownShapeGraph: optimize + build each one), and one shared copy of every weight.
--precision_mode lowers each graph whole before it is partitioned, so the submodels and the nodes
the hybrid executor runs follow one decision (no Casts at submodel boundaries).
Control-flow nodes' subgraphs are built the same way, recursively, into the root's `subgraphs`:
their static clusters join the root's submodels and their constants the one weight blob."""
from __future__ import annotations

import copy

import numpy as np

from ..model.dynamic_model import GEARS, HYBRID, Cluster, DynamicModel, DynNode, DynTensor, Step, gear_descs
from ..model.errors import GeError, GraphError
from ..model.ge_model import WEIGHT_ID, Allocation, Arg, GeModel, TaskDef, WeightDesc
from ..model.ir import CAPTURES, STRING, Graph, Node, subgraphs
from ..passes import lower_precision, optimize
from ..passes._util import node_opset
from ..shape_options import DEFAULT_STATIC_OPS_LOWER_LIMIT
from ..model.arena import align
from .build import build
from .dynamic_shapes import infer_subgraph
from .partition import KNOWN, PartCluster, partition


def build_hybrid(graph: Graph, unknown: dict[str, str], *, name: str, soc_version: str, atc_cmdline: str = "",
                 min_static_ops: int = DEFAULT_STATIC_OPS_LOWER_LIMIT, mode: str = HYBRID,
                 ranges: dict | None = None, reuse_memory: bool = True) -> DynamicModel:
    """`graph` went through infer_dynamic (which gave `unknown`)."""
    parts = _Parts(soc_version, int(min_static_ops), reuse_memory)
    dyn, consts = _build_graph(graph, unknown, name, parts, int(min_static_ops))
    outputs_from_consts = [o for o in graph.outputs if o in graph.initializers]
    if outputs_from_consts:
        raise GraphError(f"output '{outputs_from_consts[0]}' is a constant; dynamic models need it computed")
    text = next((v.name for v in graph.values.values() if v.dtype == STRING), None)
    if text is not None and mode != HYBRID:  # (their sizes, and the shapes they decide, are in the text)
        raise GeError(f"'{text}' is a string tensor: strings have no shape range to plan; compile with unknown "
                      f"dims (-1) instead of ranges")
    if parts.subgraphs and mode != HYBRID:
        node = next(n for n in dyn.nodes if n.subgraphs)
        raise GeError(f"node '{node.name}' ({node.op_type}): control flow has no shape range to plan; compile "
                      f"with unknown dims (-1) instead of ranges")
    descs, blob, submodels = share_weights(parts.submodels, consts, *parts.consts)
    dyn.weights, dyn.weight_data, dyn.submodels, dyn.subgraphs = descs[0], blob, submodels, parts.subgraphs
    for sub, d in zip(parts.subgraphs, descs[1:]):
        sub.weights = d
    ranges = ranges or {}
    dyn.inputs = [_dyn_tensor(graph, t, ranges.get(t, ())) for t in graph.inputs]
    dyn.mode, dyn.soc_version, dyn.atc_cmdline = mode, soc_version, atc_cmdline
    dyn.attrs["static_model_ops_lower_limit"] = int(min_static_ops)
    return dyn


class _Parts:
    """What the graphs of one model share: static submodels, subgraphs and their constants."""

    def __init__(self, soc_version: str, min_static_ops: int, reuse_memory: bool = True):
        self.soc_version, self.min_static_ops, self.reuse_memory = soc_version, min_static_ops, reuse_memory
        self.submodels: list[GeModel] = []
        self.subgraphs: list[DynamicModel] = []
        self.consts: list[dict] = []


def _build_graph(graph: Graph, unknown: dict[str, str], name: str, parts: _Parts, min_static_ops: int,
                 whole: bool = False) -> tuple[DynamicModel, dict]:
    """One graph (the root or a subgraph) as a DynamicModel: its KNOWN clusters become static
    submodels and its control-flow nodes' subgraphs subgraphs, both in `parts`; returns it with
    the constants its UNKNOWN nodes read (the caller places them). `whole`: a graph without
    unknown nodes is one static submodel, however its nodes connect."""
    _lower_precision(graph, unknown)
    if whole and not unknown:  # a static subgraph: one static submodel with its own plan
        graph.toposort()
        clustered = [PartCluster(KNOWN, list(graph.nodes))]
    else:
        clustered = partition(graph, unknown, min_static_ops)
    consumers = graph.consumers()
    dyn_nodes, steps, clusters = [], [], []
    consts: dict[str, np.ndarray] = {}
    for part in clustered:
        if part.kind == KNOWN:
            index = len(parts.submodels)
            sub = _subgraph(graph, part.nodes, consumers, f"{name}_sub{index}")
            optimize(sub, precision=False)  # lowered with the whole graph
            parts.submodels.append(build(sub, name=sub.name, soc_version=parts.soc_version,
                                         reuse_memory=parts.reuse_memory))
            clusters.append(Cluster(len(clusters), KNOWN, tuple(n.name for n in part.nodes), "", index))
            steps.append(Step("submodel", index))
            continue
        for node in part.nodes:  # one UNKNOWN cluster, its nodes run one by one
            consts.update({i: graph.initializers[i] for i in node.inputs if i in graph.initializers})
            attrs = {k: v for k, v in node.attrs.items() if not isinstance(v, Graph)}
            bodies = subgraphs(node)
            if bodies:
                attrs[CAPTURES] = bodies[0][1].captures
            refs = tuple((key, _build_subgraph(body, f"{name}/{node.name}/{key}", parts)) for key, body in bodies)
            dyn_nodes.append(DynNode(node.name, node.op_type, node.domain, node_opset(graph, node), attrs,
                                     tuple(node.inputs), tuple(node.outputs),
                                     tuple(_dtype_name(graph, o) for o in node.outputs), refs,
                                     _kinds(graph, node.outputs)))
            steps.append(Step("node", len(dyn_nodes) - 1))
        clusters.append(Cluster(len(clusters), "UNKNOWN", tuple(n.name for n in part.nodes), part.reason))
    outputs = [_dyn_tensor(graph, t) for t in graph.outputs]
    dyn = DynamicModel(name, HYBRID, [], outputs, dyn_nodes, steps, clusters, [], [], b"",
                       opset=graph.opset.get("", 17))
    dyn.string_constants = {k: consts.pop(k) for k in [k for k, a in consts.items() if a.dtype == STRING]}
    return dyn, consts


def _lower_precision(graph: Graph, unknown: dict[str, str]) -> None:
    """--precision_mode on the whole graph; a Cast it inserts is unknown when what it casts is."""
    before = {n.name for n in graph.nodes}
    if not lower_precision(graph):
        return
    for node in graph.nodes:
        if node.name not in before and not graph.value(node.inputs[0]).is_static:
            unknown[node.name] = f"input '{node.inputs[0]}' has unknown dims (a precision_mode Cast)"


def _build_subgraph(body: Graph, name: str, parts: _Parts) -> int:
    """Compile a subgraph (its inputs' shapes as compile/control_flow.py left them) into
    `parts.subgraphs`; returns its index. A subgraph with no unknown node is one static submodel
    whatever its size and shape; others keep the model's static_model_ops_lower_limit."""
    sub = copy.deepcopy(body)
    for k, out in enumerate(sub.outputs):  # outputs are computed: a constant, an input or a repeated one gets a copy
        if out in sub.initializers or out in sub.inputs or out in sub.outputs[:k]:
            copied = f"{out}__out{k}"
            sub.nodes.append(Node("Identity", [out], [copied], {}, f"{name}/output{k}", ""))
            sub.outputs[k] = copied
    unknown = infer_subgraph(sub)
    index = len(parts.subgraphs)
    parts.subgraphs.append(None)
    parts.consts.append({})
    dyn, consts = _build_graph(sub, unknown, name, parts, parts.min_static_ops, whole=True)
    dyn.inputs = [_dyn_tensor(sub, t) for t in sub.inputs]
    dyn.attrs["captures"] = sub.captures
    parts.subgraphs[index], parts.consts[index] = dyn, consts
    return index


def build_gears(models: list[GeModel], inputs: list[DynTensor], gears: list[dict], *, name: str, soc_version: str,
                atc_cmdline: str = "", kind: str = "dynamic_batch_size") -> DynamicModel:
    """One static submodel per gear (built by the static path), sharing one copy of the weights.
    `gears[i]` = {input name: shape} of submodel i."""
    (weights,), blob, models = share_weights(models, {})
    return DynamicModel(name, GEARS, inputs, gear_descs([m.outputs for m in models]), [], [], [], models, weights, blob, soc_version=soc_version,
                        opset=models[0].opset, atc_cmdline=atc_cmdline,
                        attrs={"gear_kind": kind, "gears": [{k: list(v) for k, v in g.items()} for g in gears]})


def share_weights(models: list[GeModel], *const_sets: dict[str, np.ndarray]
                  ) -> tuple[list[list[WeightDesc]], bytes, list[GeModel]]:
    """One blob holding each distinct constant once (by dtype, shape and bytes). Returns the weight
    descs of each const set (the root's, each subgraph's), the blob, and the models rewritten to
    point into it (no weight bytes of their own)."""
    import hashlib  # (OpenSSL's: loaded by the dynamic models only)
    blob = bytearray()
    placed: dict[tuple, int] = {}

    def place(a: np.ndarray) -> int:
        a = np.array(a, order="C", copy=None)  # (ascontiguousarray makes scalars 1-D)
        key = (a.dtype.name, a.shape, hashlib.sha256(a.tobytes()).digest())
        if key not in placed:
            placed[key] = off = align(len(blob))
            blob.extend(b"\0" * (off - len(blob)))
            blob.extend(a.tobytes())
        return placed[key]

    descs = [[WeightDesc(n, a.dtype.name, tuple(a.shape), place(a), a.nbytes) for n, a in consts.items()]
             for consts in const_sets]
    shared_models = []
    for m in models:
        data = np.frombuffer(memoryview(m.weight_data), np.uint8)
        moved = {}
        for w in m.weights:
            if w.allocation != WEIGHT_ID or w.file:
                raise GraphError(f"model '{m.name}': external weights are not supported with dynamic shapes")
            moved[w.offset] = place(data[w.offset:w.offset + w.nbytes].view(w.dtype).reshape(w.shape))
        shared_models.append(m)
        m.weights = [w._replace(offset=moved[w.offset]) for w in m.weights]
        m.tasks = [_moved_task(t, moved) for t in m.tasks]
    blob.extend(b"\0" * (align(len(blob)) - len(blob)))
    for m in shared_models:
        m.allocations[WEIGHT_ID] = Allocation(WEIGHT_ID, m.allocations[WEIGHT_ID].kind, len(blob))
        m.weight_data = b""
        m.attrs["weight_size"] = len(blob)
        m.attrs["shared_weights"] = True
    return descs, bytes(blob), shared_models


def _moved_task(t: TaskDef, moved: dict) -> TaskDef:
    def arg(a: Arg | None):
        if a is None or a.allocation != WEIGHT_ID:
            return a
        if a.offset not in moved:
            raise GraphError(f"task '{t.node}' reads weight memory at {a.offset}, where no weight starts")
        return a._replace(offset=moved[a.offset])
    return t._replace(inputs=tuple(arg(a) for a in t.inputs))


def _subgraph(graph: Graph, nodes: list[Node], consumers: dict, name: str) -> Graph:
    """A known cluster as a graph of its own: inputs are what it reads from outside, outputs what
    outside reads from it (or the model outputs it produces)."""
    inside = {id(n) for n in nodes}
    produced = [o for n in nodes for o in n.outputs if o]
    produced_set = set(produced)
    inputs, seen = [], set()
    for n in nodes:
        for t in n.inputs:
            if t and t not in produced_set and t not in graph.initializers and t not in seen:
                seen.add(t)
                inputs.append(t)
    model_outputs = set(graph.outputs)
    outputs = [o for o in produced if o in model_outputs or any(id(c) not in inside for c in consumers.get(o, ()))]
    used = {t for n in nodes for t in n.inputs if t in graph.initializers}
    names = set(inputs) | produced_set | used
    return Graph(name, nodes=copy.deepcopy(nodes), inputs=inputs, outputs=outputs,
                 values={k: copy.copy(v) for k, v in graph.values.items() if k in names},
                 initializers={k: graph.initializers[k] for k in used}, opset=dict(graph.opset),
                 shape_constants=graph.shape_constants & used)


def _dtype_name(graph: Graph, t: str) -> str:
    v = graph.values.get(t)
    return "" if not t or v is None or v.dtype is None else np.dtype(v.dtype).name


def _kinds(graph: Graph, names) -> tuple:
    """Each output's kind, when one is not a tensor (the OM records kinds only then)."""
    kinds = tuple(graph.values[o].kind if o in graph.values else "tensor" for o in names)
    return kinds if any(k != "tensor" for k in kinds) else ()


def _dyn_tensor(graph: Graph, t: str, ranges=()) -> DynTensor:
    v = graph.value(t)
    if v.kind != "tensor":
        if v.dtype is None:
            raise GraphError(f"{v.kind} '{t}' has no known element dtype")
        return DynTensor(t, np.dtype(v.dtype).name, (-2,), (), v.kind)
    if v.dtype is None:
        raise GraphError(f"tensor '{t}' has no known dtype")
    shape = () if v.shape is None and not ranges else tuple(d if isinstance(d, int) and d >= 0 else -1
                                                               for d in (v.shape or ()))
    if v.shape is None:
        shape = (-2,)  # unknown rank (GE's -2)
    return DynTensor(t, np.dtype(v.dtype).name, shape, tuple(tuple(r) for r in ranges))
