"""The compile summary: what `ge atc` prints (rich) or emits (--json)."""
from __future__ import annotations

from ..ge_model import GeModel


def summarize(model: GeModel, seconds: float, passes: dict | None = None) -> dict:
    a = model.attrs
    regions = {alloc.kind: alloc.size for alloc in model.allocations if alloc.kind in ("WEIGHT", "FEATURE_MAP", "WORKSPACE")}
    regions["IO"] = sum(alloc.size for alloc in model.allocations if alloc.kind in ("INPUT", "OUTPUT"))
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
        "weights": {"count": len(model.weights), "bytes": sum(w.nbytes for w in model.weights)},
        "inputs": [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in model.inputs],
        "outputs": [{"name": d.name, "dtype": d.dtype, "shape": list(d.shape)} for d in model.outputs],
        "passes": passes or {},
        "seconds": round(seconds, 4),
    }
