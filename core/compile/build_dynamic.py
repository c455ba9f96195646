"""Build a DynamicModel: the root graph, its KNOWN clusters as static submodels (the seed's
BuildForKnownShapeGraph: optimize + build each one), and one shared copy of every weight."""
from __future__ import annotations

import copy
import dataclasses
import hashlib

import numpy as np

from ..dynamic_model import GEARS, HYBRID, Cluster, DynamicModel, DynNode, DynTensor, Step
from ..errors import GraphError
from ..ge_model import WEIGHT_ID, Allocation, Arg, GeModel, TaskDef, WeightDesc
from ..ir import Graph, Node
from ..passes import optimize
from ..passes._util import node_opset
from .arena import align
from .build import build
from .partition import KNOWN, partition

#: ATC's --static_model_ops_lower_limit: a known cluster smaller than this runs in the hybrid executor
DEFAULT_STATIC_OPS_LOWER_LIMIT = 4


def build_hybrid(graph: Graph, unknown: dict[str, str], *, name: str, soc_version: str, atc_cmdline: str = "",
                 min_static_ops: int = DEFAULT_STATIC_OPS_LOWER_LIMIT, mode: str = HYBRID,
                 ranges: dict | None = None, reuse_memory: bool = True) -> DynamicModel:
    """`graph` went through infer_dynamic (which gave `unknown`)."""
    parts = partition(graph, unknown, min_static_ops)
    consumers = graph.consumers()
    dyn_nodes, steps, clusters, submodels = [], [], [], []
    root_consts: dict[str, np.ndarray] = {}
    for part in parts:
        if part.kind == KNOWN:
            sub = _subgraph(graph, part.nodes, consumers, f"{name}_sub{len(submodels)}")
            optimize(sub)
            submodels.append(build(sub, name=sub.name, soc_version=soc_version, reuse_memory=reuse_memory))
            clusters.append(Cluster(len(clusters), KNOWN, tuple(n.name for n in part.nodes), "", len(submodels) - 1))
            steps.append(Step("submodel", len(submodels) - 1))
            continue
        node = part.nodes[0]
        root_consts.update({i: graph.initializers[i] for i in node.inputs if i in graph.initializers})
        dyn_nodes.append(DynNode(node.name, node.op_type, node.domain, node_opset(graph, node), dict(node.attrs),
                                 tuple(node.inputs), tuple(node.outputs),
                                 tuple(_dtype_name(graph, o) for o in node.outputs)))
        clusters.append(Cluster(len(clusters), "UNKNOWN", (node.name,), part.reason))
        steps.append(Step("node", len(dyn_nodes) - 1))
    outputs_from_consts = [o for o in graph.outputs if o in graph.initializers]
    if outputs_from_consts:
        raise GraphError(f"output '{outputs_from_consts[0]}' is a constant; dynamic models need it computed")
    weights, blob, submodels = share_weights(submodels, root_consts)
    ranges = ranges or {}
    inputs = [_dyn_tensor(graph, t, ranges.get(t, ())) for t in graph.inputs]
    outputs = [_dyn_tensor(graph, t) for t in graph.outputs]
    return DynamicModel(name, mode, inputs, outputs, dyn_nodes, steps, clusters, submodels, weights, blob,
                        soc_version=soc_version, opset=graph.opset.get("", 17), atc_cmdline=atc_cmdline,
                        attrs={"static_model_ops_lower_limit": int(min_static_ops)})


def build_gears(models: list[GeModel], inputs: list[DynTensor], gears: list[dict], *, name: str, soc_version: str,
                atc_cmdline: str = "", kind: str = "dynamic_batch_size") -> DynamicModel:
    """One static submodel per gear (built by the static path), sharing one copy of the weights.
    `gears[i]` = {input name: shape} of submodel i."""
    weights, blob, models = share_weights(models, {})
    outputs = [DynTensor(d.name, d.dtype, tuple(d.shape)) for d in models[0].outputs]
    return DynamicModel(name, GEARS, inputs, outputs, [], [], [], models, weights, blob, soc_version=soc_version,
                        opset=models[0].opset, atc_cmdline=atc_cmdline,
                        attrs={"gear_kind": kind, "gears": [{k: list(v) for k, v in g.items()} for g in gears]})


def share_weights(models: list[GeModel], root_consts: dict[str, np.ndarray]
                  ) -> tuple[list[WeightDesc], bytes, list[GeModel]]:
    """One blob holding each distinct constant once (by dtype, shape and bytes). Returns the root's
    weight descs, the blob, and the models rewritten to point into it (no weight bytes of their own)."""
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

    root = [WeightDesc(n, a.dtype.name, tuple(a.shape), place(a), a.nbytes) for n, a in root_consts.items()]
    shared_models = []
    for m in models:
        data = np.frombuffer(memoryview(m.weight_data), np.uint8)
        moved = {}
        for w in m.weights:
            if w.allocation != WEIGHT_ID or w.file:
                raise GraphError(f"model '{m.name}': external weights are not supported with dynamic shapes")
            moved[w.offset] = place(data[w.offset:w.offset + w.nbytes].view(w.dtype).reshape(w.shape))
        shared_models.append(m)
        m.weights = [dataclasses.replace(w, offset=moved[w.offset]) for w in m.weights]
        m.tasks = [_moved_task(t, moved) for t in m.tasks]
    blob.extend(b"\0" * (align(len(blob)) - len(blob)))
    for m in shared_models:
        m.allocations[WEIGHT_ID] = Allocation(WEIGHT_ID, m.allocations[WEIGHT_ID].kind, len(blob))
        m.weight_data = b""
        m.attrs["weight_size"] = len(blob)
        m.attrs["shared_weights"] = True
    return root, bytes(blob), shared_models


def _moved_task(t: TaskDef, moved: dict) -> TaskDef:
    def arg(a: Arg | None):
        if a is None or a.allocation != WEIGHT_ID:
            return a
        if a.offset not in moved:
            raise GraphError(f"task '{t.node}' reads weight memory at {a.offset}, where no weight starts")
        return dataclasses.replace(a, offset=moved[a.offset])
    return dataclasses.replace(t, inputs=tuple(arg(a) for a in t.inputs))


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
                 initializers={k: graph.initializers[k] for k in used}, opset=dict(graph.opset))


def _dtype_name(graph: Graph, t: str) -> str:
    v = graph.values.get(t)
    return "" if not t or v is None or v.dtype is None else np.dtype(v.dtype).name


def _dyn_tensor(graph: Graph, t: str, ranges=()) -> DynTensor:
    v = graph.value(t)
    if v.dtype is None:
        raise GraphError(f"tensor '{t}' has no known dtype")
    shape = () if v.shape is None and not ranges else tuple(d if isinstance(d, int) and d >= 0 else -1
                                                               for d in (v.shape or ()))
    if v.shape is None:
        shape = (-2,)  # unknown rank (GE's -2)
    return DynTensor(t, np.dtype(v.dtype).name, shape, tuple(tuple(r) for r in ranges))
