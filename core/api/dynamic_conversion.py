"""ATC's dynamic-shape options, compiled: gears, shape ranges and the hybrid (unknown-shape) path.

    --input_shape "x:-1,3,224,224" --dynamic_batch_size "1,2,4,8"     gears
    --input_shape "x:-1,3,-1,-1" --dynamic_image_size "224,224;448,448"
    --input_shape "ids:-1,-1;mask:-1,-1" --dynamic_dims "1,16;8,128"
    --input_shape "x:1~8,3,224,224"   (or --input_shape_range "x:[1~8,3,224,224]")   range
    --input_shape "ids:-1,-1;mask:-1,-1"                                   fully dynamic (hybrid)
A model whose shapes are static but data-dependent (NonZero, NonMaxSuppression ...) goes the
hybrid way too: its static parts become submodels.
"""
from __future__ import annotations

import os
from collections import Counter
from typing import Callable

from ..compile.build import build
from ..compile.build_dynamic import DEFAULT_STATIC_OPS_LOWER_LIMIT, build_gears, build_hybrid
from ..compile.dynamic_shapes import infer_dynamic
from ..compile.range_plan import plan_range
from ..dynamic_model import GEARS, HYBRID, RANGE, DynamicModel, DynTensor
from ..errors import GeError
from ..ir import STRING, Graph, subgraphs
from ..passes import optimize
from ...formats.onnx.importer import load_onnx
from .pre_check import require_kernels
from .shape_options import parse_gears


def compile_dynamic(model: str, name: str, shapes: dict, gears: dict, out_nodes, *, soc_version: str,
                    cmdline: str = "", min_static_ops: int = DEFAULT_STATIC_OPS_LOWER_LIMIT,
                    prepare: Callable[[Graph], None] | None = None, reuse_memory: bool = True) -> DynamicModel:
    """`prepare(graph)`: applied to each graph as it is imported (the options' boundary Casts and checks)."""
    prepare = prepare or (lambda graph: None)
    if any(gears.values()):
        return _compile_gears(model, name, shapes, gears, out_nodes, soc_version, cmdline, prepare, reuse_memory)
    plain = {k: [-1 if isinstance(d, tuple) else d for d in dims] for k, dims in shapes.items()}
    ranges = {k: [d if isinstance(d, tuple) else (d, d) if d >= 0 else (0, -1) for d in dims]
              for k, dims in shapes.items() if any(isinstance(d, tuple) for d in dims)}
    graph = load_onnx(model, plain or None, out_nodes, allow_dynamic=True)
    require_kernels(graph, model)
    prepare(graph)
    unknown = infer_dynamic(graph)
    mode = RANGE if ranges else HYBRID
    dyn = build_hybrid(graph, unknown, name=name, soc_version=soc_version, atc_cmdline=cmdline,
                       min_static_ops=min_static_ops, mode=mode, ranges=ranges, reuse_memory=reuse_memory)
    if mode == RANGE:
        for t in dyn.inputs:
            if not t.ranges and any(d < 0 for d in t.shape):
                raise GeError(f"input '{t.name}' has unknown dims {list(t.shape)} but no range; give it one "
                              f"(e.g. \"{t.name}:1~8,...\")")
            unbounded = [k for k, (lo, hi) in enumerate(t.ranges) if hi < 0]
            if unbounded:
                raise GeError(f"input '{t.name}': dim {unbounded[0]} has no upper bound; a range plan needs one")
        dyn.attrs.update(plan_range(dyn, {t.name: tuple(hi for _, hi in t.ranges) if t.ranges else t.shape
                                          for t in dyn.inputs}))
    return dyn


def _compile_gears(model, name, shapes, gears, out_nodes, soc_version, cmdline, prepare, reuse_memory) -> DynamicModel:
    kind, values = parse_gears(gears, shapes)
    models, gear_shapes = [], []
    for v in values:
        it = iter(v)
        concrete = {k: [next(it) if d == -1 else d for d in dims] for k, dims in shapes.items()}
        graph = load_onnx(model, concrete, out_nodes)
        if not models:
            require_kernels(graph, model)
        prepare(graph)
        try:
            optimize(graph)
        except GeError:
            flow = next((n for n in graph.nodes if subgraphs(n)), None)
            odd = next((v for v in graph.values.values() if v.kind != "tensor" or v.dtype == STRING), None)
            if flow is None and odd is not None:
                what = odd.kind if odd.kind != "tensor" else "string tensor"
                raise GeError(f"'{odd.name}' is a {what}: sequences, optionals and strings run in the hybrid "
                              f"executor, not in gears; compile with unknown dims (-1) and no gear list") from None
            if flow is None:
                raise
            raise GeError(f"{flow}: control flow runs in the hybrid executor, not in gears; compile with "
                          f"unknown dims (-1) and no gear list") from None
        models.append(build(graph, name=f"{name}_gear{len(models)}", soc_version=soc_version,
                            reuse_memory=reuse_memory))
        gear_shapes.append({d.name: tuple(d.shape) for d in models[-1].inputs})
    inputs = [DynTensor(d.name, d.dtype, tuple(-1 if x == -1 else x for x in shapes.get(d.name, d.shape)))
              for d in models[0].inputs]
    dyn = build_gears(models, inputs, gear_shapes, name=name, soc_version=soc_version, atc_cmdline=cmdline, kind=kind)
    dyn.attrs["gear_values"] = [list(v) for v in values]
    return dyn


def is_data_dependent(model: str, shapes: dict, out_nodes) -> bool:
    """A static model the static path refused: does it hold data-dependent shapes?"""
    graph = load_onnx(model, shapes or None, out_nodes, allow_dynamic=True)
    return bool(infer_dynamic(graph))


def summarize_dynamic(dyn: DynamicModel, seconds: float, weight_dir: str | None = None) -> dict:
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
