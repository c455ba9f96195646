"""The compile summary: what `ge atc` prints (rich) or emits (--json), of a static model or of a
dynamic one (gears, ranges, the hybrid path)."""
from __future__ import annotations

import os
from collections import Counter

from ..model.dynamic_model import GEARS, DynamicModel
from ..model.ge_model import FILE_CONSTANT, GeModel


def summarize(model: GeModel | DynamicModel, seconds: float, passes: dict | None = None,
              weight_dir: str | None = None) -> dict:
    """`passes`: the static path's pass report; `weight_dir`: where the external weight files went."""
    if isinstance(model, DynamicModel):
        return _summarize_dynamic(model, seconds, weight_dir)
    a = model.attrs
    regions = {alloc.kind: alloc.size for alloc in model.allocations if alloc.kind in ("WEIGHT", "FEATURE_MAP", "WORKSPACE")}
    regions["IO"] = sum(alloc.size for alloc in model.allocations if alloc.kind in ("INPUT", "OUTPUT"))
    files = model.weight_files
    if files:
        regions[FILE_CONSTANT] = sum(f.size for f in files)
    inline = [w for w in model.weights if not w.file]
    external = [w for w in model.weights if w.file]
    return {
        "model": model.name,
        "soc_version": model.soc_version,
        "opset": model.opset,
        "ops": dict(sorted(a.get("ops", {}).items())),
        "nodes": sum(a.get("ops", {}).values()),
        "tasks": len(model.tasks),
        "aliases": a.get("aliases", 0),
        "memory": regions,
        "feature_map_lower_bound": a.get("lower_bound", 0),
        "weights": {"count": len(model.weights), "bytes": sum(w.nbytes for w in model.weights),
                    "inline": {"count": len(inline), "bytes": sum(w.nbytes for w in inline)},
                    "external": {"count": len(external), "bytes": sum(w.nbytes for w in external),
                                 "files": len(files), "file_bytes": sum(f.size for f in files)}},
        "external_weight": {"mode": int(a.get("external_weight", 0)), "dir": weight_dir if files else None,
                            "files": [{"file": f.file, "path": _path(weight_dir, f.file), "size": f.size} for f in files],
                            "paths": external_weight_paths(model, weight_dir)},
        "inputs": [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in model.inputs],
        "outputs": [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in model.outputs],
        "passes": passes or {},
        "seconds": round(seconds, 4),
    }


def external_weight_paths(model: GeModel, weight_dir: str | None) -> list[dict]:
    """GE's CompiledGraphSummary::GetExternalWeightPaths: one ExternalWeightDesc (path, size,
    offset, id) per external weight; weights deduplicated into one file share its path."""
    external = [w for w in model.weights if w.file]
    return [{"id": k, "weight": w.name, "path": _path(weight_dir, w.file), "size": w.nbytes, "offset": w.file_offset}
            for k, w in enumerate(external)]


def _path(weight_dir: str | None, name: str) -> str:
    return os.path.join(weight_dir, name) if weight_dir else name


def _summarize_dynamic(dyn: DynamicModel, seconds: float, weight_dir: str | None = None) -> dict:
    known = [c for c in dyn.clusters if c.kind == "KNOWN"]
    files = dyn.weight_files
    ops = _ops(dyn)
    return {
        "model": dyn.name, "soc_version": dyn.soc_version, "opset": dyn.opset, "mode": dyn.mode,
        "ops": ops, "nodes": sum(ops.values()),
        "tasks": len(dyn.nodes) + sum(len(m.tasks) for m in dyn.submodels),
        "aliases": sum(m.attrs.get("aliases", 0) for m in _graph_models(dyn)),
        "memory": {"WEIGHT": dyn.weight_size, **({"FILE_CONSTANT": sum(files.values())} if files else {}),
                   "SUBMODELS": sum(m.memory_size for m in dyn.submodels),
                   "PLANNED_CAPACITY": sum(dyn.attrs.get("capacities", {}).values()),
                   "RANGE_ARENA": dyn.attrs.get("arena", {}).get("size", 0)},
        "weights": _weights(dyn),
        "partitions": {"known": len(known), "unknown_nodes": len(dyn.nodes), "submodels": len(dyn.submodels),
                       "subgraphs": len(dyn.subgraphs)},
        "gears": dyn.attrs.get("gear_values", []),
        "external_weight": {"mode": int(dyn.attrs.get("external_weight", 0)), "dir": weight_dir if files else None,
                            "files": [{"file": f, "path": os.path.join(weight_dir, f) if weight_dir else f, "size": n}
                                      for f, n in files.items()]},
        "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in dyn.inputs],
        "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in dyn.outputs],
        "seconds": seconds,
    }


def _graph_models(dyn: DynamicModel) -> list:
    """The static models that together hold the graph's nodes once: one gear (every gear is the
    whole graph at another shape), or every submodel of a partitioned graph."""
    return dyn.submodels[:1] if dyn.mode == GEARS else dyn.submodels


def _ops(dyn: DynamicModel) -> dict:
    """Node count per op type, of the root and subgraph nodes and of the static submodels."""
    counts = Counter(n.op_type for g in (dyn, *dyn.subgraphs) for n in g.nodes)
    for m in _graph_models(dyn):
        counts.update(m.attrs.get("ops", {}))
    return dict(sorted(counts.items()))


def _weights(dyn: DynamicModel) -> dict:
    """Distinct weights (the root's, subgraphs' and submodels' descs share them), inline and in files."""
    distinct = {}
    for w in [w for g in (dyn, *dyn.subgraphs) for w in g.weights] + [w for m in dyn.submodels for w in m.weights]:
        distinct[(w.file, w.offset)] = w
    inline = [w for w in distinct.values() if not w.file]
    external = [w for w in distinct.values() if w.file]
    return {"count": len(distinct), "bytes": sum(w.nbytes for w in distinct.values()),
            "inline": {"count": len(inline), "bytes": sum(w.nbytes for w in inline)},
            "external": {"count": len(external), "bytes": sum(w.nbytes for w in external),
                         "files": len(dyn.weight_files), "file_bytes": sum(dyn.weight_files.values())}}
