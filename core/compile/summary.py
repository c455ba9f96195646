"""The compile summary: what `ge atc` prints (rich) or emits (--json)."""
from __future__ import annotations

import os

from ..ge_model import FILE_CONSTANT, GeModel


def summarize(model: GeModel, seconds: float, passes: dict | None = None, weight_dir: str | None = None) -> dict:
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
