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

import re

import numpy as np

from ..core.compile.build import build
from ..core.compile.build_dynamic import DEFAULT_STATIC_OPS_LOWER_LIMIT, build_gears, build_hybrid
from ..core.compile.dynamic_shapes import infer_dynamic
from ..core.dynamic_model import HYBRID, RANGE, DynamicModel, DynTensor
from ..core.errors import GeError
from ..core.passes import optimize
from ..core.runtime.device import get_device
from ..core.runtime.gears import MAX_GEARS
from ..core.runtime.hybrid import plan_range
from ..formats.onnx.importer import load_onnx

GEAR_OPTIONS = ("dynamic_batch_size", "dynamic_image_size", "dynamic_dims")


def parse_shape_spec(spec: str | None, option: str = "--input_shape") -> dict[str, list]:
    """{input: [dim]} where a dim is an int >= 0, -1 (unknown) or (lo, hi) (a range, hi -1: unbounded)."""
    shapes: dict[str, list] = {}
    for part in filter(None, (p.strip() for p in (spec or "").split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise GeError(f"{option}: '{part}' is not 'name:d1,d2,...'")
        dims = dims.strip().strip("[]")
        out = []
        for d in filter(None, (x.strip() for x in dims.split(","))):
            m = re.fullmatch(r"(\d+)~(-1|\d+)", d)
            try:
                out.append((int(m[1]), int(m[2])) if m else int(d))
            except ValueError:
                raise GeError(f"{option}: dim '{d}' of input '{name}' is not an integer, -1 or lo~hi") from None
            if m and 0 <= int(m[2]) < int(m[1]):
                raise GeError(f"{option}: range '{d}' of input '{name}' has its upper bound below its lower bound")
            if not m and out[-1] < -1:
                raise GeError(f"{option}: input '{name}' has dim {out[-1]}; dims are >= 0, -1 or lo~hi")
        shapes[name] = out
    return shapes


def is_dynamic(shapes: dict, gears: dict) -> bool:
    return any(gears.values()) or any(d == -1 or isinstance(d, tuple) for dims in shapes.values() for d in dims)


def parse_gears(gears: dict, shapes: dict) -> tuple[str, list[tuple]]:
    """(option, the values of the -1 dims per gear) after ATC's checks."""
    given = [k for k in GEAR_OPTIONS if gears.get(k)]
    if len(given) > 1:
        raise GeError(f"--{given[0]} and --{given[1]} are mutually exclusive")
    kind = given[0]
    unknown = sum(d == -1 for dims in shapes.values() for d in dims)
    if not unknown:
        raise GeError(f"--{kind} needs -1 dims in --input_shape (e.g. \"x:-1,3,224,224\")")
    groups = [g.strip() for g in (gears[kind].split(";") if kind != "dynamic_batch_size" else gears[kind].split(","))]
    try:
        values = [tuple(int(v) for v in g.split(",")) for g in groups if g]
    except ValueError:
        raise GeError(f"--{kind}: '{gears[kind]}' must be integers") from None
    if kind == "dynamic_batch_size":
        values = [v * unknown for v in values]
    if not 1 <= len(values) <= MAX_GEARS:
        raise GeError(f"--{kind}: {len(values)} gears; between 1 and {MAX_GEARS} are allowed")
    for v in values:
        if len(v) != unknown:
            raise GeError(f"--{kind}: gear {','.join(map(str, v))} has {len(v)} values for {unknown} -1 dims")
        if any(x <= 0 for x in v):
            raise GeError(f"--{kind}: gear {','.join(map(str, v))} has a dim <= 0")
    if len(set(values)) != len(values):
        raise GeError(f"--{kind}: gears repeat")
    return kind, values


def compile_dynamic(model: str, name: str, shapes: dict, gears: dict, out_nodes, *, soc_version: str,
                    cmdline: str = "", min_static_ops: int = DEFAULT_STATIC_OPS_LOWER_LIMIT) -> DynamicModel:
    if any(gears.values()):
        return _compile_gears(model, name, shapes, gears, out_nodes, soc_version, cmdline)
    plain = {k: [-1 if isinstance(d, tuple) else d for d in dims] for k, dims in shapes.items()}
    ranges = {k: [d if isinstance(d, tuple) else (d, d) if d >= 0 else (0, -1) for d in dims]
              for k, dims in shapes.items() if any(isinstance(d, tuple) for d in dims)}
    graph = load_onnx(model, plain or None, out_nodes, allow_dynamic=True)
    unknown = infer_dynamic(graph)
    mode = RANGE if ranges else HYBRID
    dyn = build_hybrid(graph, unknown, name=name, soc_version=soc_version, atc_cmdline=cmdline,
                       min_static_ops=min_static_ops, mode=mode, ranges=ranges)
    if mode == RANGE:
        for t in dyn.inputs:
            if not t.ranges and any(d < 0 for d in t.shape):
                raise GeError(f"input '{t.name}' has unknown dims {list(t.shape)} but no range; give it one "
                              f"(e.g. \"{t.name}:1~8,...\")")
            unbounded = [k for k, (lo, hi) in enumerate(t.ranges) if hi < 0]
            if unbounded:
                raise GeError(f"input '{t.name}': dim {unbounded[0]} has no upper bound; a range plan needs one")
        largest = [np.zeros([hi for _, hi in t.ranges] if t.ranges else t.shape, t.dtype) for t in dyn.inputs]
        dyn.attrs.update(plan_range(dyn, largest, get_device("cpu")))
    return dyn


def _compile_gears(model, name, shapes, gears, out_nodes, soc_version, cmdline) -> DynamicModel:
    kind, values = parse_gears(gears, shapes)
    models, gear_shapes = [], []
    for v in values:
        it = iter(v)
        concrete = {k: [next(it) if d == -1 else d for d in dims] for k, dims in shapes.items()}
        graph = load_onnx(model, concrete, out_nodes)
        optimize(graph)
        models.append(build(graph, name=f"{name}_gear{len(models)}", soc_version=soc_version))
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


def summarize_dynamic(dyn: DynamicModel, seconds: float) -> dict:
    known = [c for c in dyn.clusters if c.kind == "KNOWN"]
    return {
        "model": dyn.name, "soc_version": dyn.soc_version, "opset": dyn.opset, "mode": dyn.mode,
        "ops": {}, "nodes": len(dyn.nodes) + sum(len(c.nodes) for c in known),
        "tasks": len(dyn.nodes) + sum(len(m.tasks) for m in dyn.submodels),
        "memory": {"WEIGHT": dyn.weight_size, "SUBMODELS": sum(m.memory_size for m in dyn.submodels),
                   "PLANNED_CAPACITY": sum(dyn.attrs.get("capacities", {}).values()),
                   "RANGE_ARENA": dyn.attrs.get("arena", {}).get("size", 0)},
        "partitions": {"known": len(known), "unknown_nodes": len(dyn.nodes), "submodels": len(dyn.submodels)},
        "gears": dyn.attrs.get("gear_values", []),
        "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in dyn.inputs],
        "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in dyn.outputs],
        "seconds": seconds,
    }


def inspect_dynamic(dyn: DynamicModel, submodel_dict) -> dict:
    """`ge inspect` of a dynamic OM: partitions (nodes, known/unknown and why), gears with their
    memory, ranges with their planned capacity, and each static submodel as a static OM shows it."""
    caps = dyn.attrs.get("capacities", {})
    gears = [{"gear": k, "values": list(v), "inputs": {n: list(s) for n, s in dyn.attrs["gears"][k].items()},
              "memory_size": m.memory_size} for k, (v, m) in enumerate(zip(dyn.attrs.get("gear_values", []),
                                                                                dyn.submodels))]
    return {
        "dynamic": {"mode": dyn.mode, "name": dyn.name, "weight_size": dyn.weight_size,
                    "static_model_ops_lower_limit": dyn.attrs.get("static_model_ops_lower_limit"),
                    "inputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape),
                                "ranges": [f"{lo}~{hi}" if lo != hi else str(lo) for lo, hi in t.ranges]}
                               for t in dyn.inputs],
                    "outputs": [{"name": t.name, "dtype": t.dtype, "shape": list(t.shape)} for t in dyn.outputs],
                    "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                                  "submodel": c.submodel} for c in dyn.clusters],
                    "steps": [f"{s.kind} {s.index}" for s in dyn.steps],
                    "gears": gears,
                    "planned_capacity": {"total": sum(caps.values()), "tensors": caps,
                                         "arena": {k: v for k, v in dyn.attrs.get("arena", {}).items()
                                                   if k != "offsets"}}},
        "submodels": [submodel_dict(m) for m in dyn.submodels],
    }
