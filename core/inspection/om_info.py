"""An OM as plain JSON-ready data: what `ge inspect`, `ge atc --mode=1` (OM -> JSON) and
`--mode=6` (the info banner) show. Reading only: nothing here compiles or loads."""
from __future__ import annotations

import os

from ..model.dynamic_model import STRING, DynamicModel
from ..model.errors import GeError
from ..model.ge_model import GeModel
from ..kernels.ops.fused_elementwise import chain_label
from .quant_info import int8_products, quant_params
from ..jsonable import jsonable, vars_of
from ..version import version
from ..runtime.task_check import check_model_tasks
from ..model.soc import soc_info
from ...formats.om import header_info, read_om

REGIONS = ("WEIGHT", "FEATURE_MAP", "WORKSPACE", "IO")


def inspect(path: str) -> dict:
    """Everything `ge inspect` shows, as plain JSON-ready data: header, IO descs, memory regions,
    the logical allocations, the tensor allocation table, tasks (with kernels and arguments) and
    weights. Raises FormatError for a broken OM."""
    header = header_info(path)
    m = read_om(path)
    check_model_tasks(m, complete=True)  # what it shows of the tasks (epilogues, attributes) as a load checks it
    if isinstance(m, DynamicModel):
        return jsonable(dict(inspect_dynamic(m, _ge_model_dict), header=header))
    return jsonable(dict(_ge_model_dict(m), header=header))


#: `ge inspect --section NAME`: the keys of inspect()'s data each section holds
INSPECT_SECTIONS = {"header": ("header", "soc", "atc_options"), "io": ("inputs", "outputs", "aipp"),
                    "memory": ("memory", "feature_map_lower_bound", "logical_allocations"),
                    "allocations": ("allocations",), "tasks": ("tasks",), "args": ("args_table",),
                    "weights": ("weights", "weight_totals")}


def inspect_section(data: dict, section: str) -> dict:
    """One section of inspect()'s data, as `ge inspect --section NAME --json` prints it under NAME."""
    if section not in INSPECT_SECTIONS:
        raise GeError(f"--section {section}: one of {', '.join(INSPECT_SECTIONS)}")
    return {k: data[k] for k in INSPECT_SECTIONS[section] if k in data}


def _ge_model_dict(m: GeModel) -> dict:
    from ..kernels import native
    kinds = {a.id: a.kind for a in m.allocations}
    quant = quant_params(m)
    products = int8_products(m, native.native())  # with the kernels this machine (or GE_NATIVE_LEVEL) runs
    return jsonable({
        "inputs": [_desc_dict(d, kinds) for d in m.inputs],
        "outputs": [_desc_dict(d, kinds) for d in m.outputs],
        "memory": _regions(m),
        "feature_map_lower_bound": int(m.attrs.get("lower_bound", 0)) if isinstance(m.attrs, dict) else 0,
        "logical_allocations": [{"id": a.id, "kind": a.kind, "size": a.size, "io_index": a.io_index}
                                for a in m.allocations],
        "allocations": [{"tensor": t.name, "allocation": t.allocation, "kind": kinds.get(t.allocation, "?"),
                         "offset": t.offset, "size": t.nbytes, "dtype": t.dtype, "shape": list(t.shape),
                         "first": t.first, "last": t.last, "alias_of": t.alias_of,
                         "quantization": quant.get(t.name, "")} for t in m.tensors],
        "tasks": [dict(_task_dict(i, t, kinds), int8_product=products.get(i, "")) for i, t in enumerate(m.tasks)],
        "args_table": _args_table(m),
        "weights": [dict(_weight_dict(m, w), quantization=quant.get(w.name, "")) for w in m.weights],
        "weight_totals": _weight_totals(m),
        "aipp": list(m.attrs.get("aipp", [])) if isinstance(m.attrs, dict) else [],
        "atc_options": dict(m.attrs.get("atc_options", {})) if isinstance(m.attrs, dict) else {},
        "soc": soc_info(m.soc_version),
    })


def model_info(path: str) -> dict:
    """What `atc --mode=6` displays: command line, versions, resource and partition sizes."""
    header = header_info(path)
    m = read_om(path)
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    if isinstance(m, DynamicModel):
        attrs = {"stream_num": 1, "event_num": 0}
    parts: dict[str, int] = {}
    for p in header.get("partitions", []):
        parts[p["type"]] = parts.get(p["type"], 0) + int(p["size"])
    return {
        "atc_cmdline": header.get("atc_cmdline", ""),
        "atc_version": f"ge {version()}",
        "soc_version": header.get("platform_version", m.soc_version),
        "framework_type": 5,
        "memory_size": m.memory_size,
        "weight_size": m.weight_size,
        "stream_num": int(attrs.get("stream_num", 1)),
        "event_num": int(attrs.get("event_num", 0)),
        "modeldef_size": parts.get("MODEL_DEF", 0),
        "weight_data_size": parts.get("WEIGHTS_DATA", 0),
        "task_info_size": parts.get("TASK_INFO", 0),
    }


def om_to_json(path: str) -> dict:
    """The whole OM as JSON-ready data (`atc --mode=1`): header, model def, tasks and weight descs;
    weight bytes are left out (their offsets and sizes are in the descs)."""
    header = header_info(path)
    m = read_om(path)
    if isinstance(m, DynamicModel):  # the root model, then every submodel's model def and tasks
        return jsonable(dict(inspect_dynamic(m, _ge_model_dict), header=header))
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    return jsonable({
        "header": header,
        "model_def": {
            "name": m.name, "soc_version": m.soc_version, "opset": m.opset,
            "memory_size": m.memory_size, "weight_size": m.weight_size,
            "workspace_size": m.allocation("WORKSPACE").size,
            "zero_copy_memory_size": sum(a.size for a in m.allocations if a.kind in ("INPUT", "OUTPUT")),
            "stream_num": attrs.get("stream_num", 1), "event_num": attrs.get("event_num", 0),
            "allocations": [vars_of(a) for a in m.allocations],
            "inputs": [vars_of(d) for d in m.inputs],
            "outputs": [vars_of(d) for d in m.outputs],
            "tensors": [vars_of(t) for t in m.tensors],
            "attrs": attrs,
        },
        "tasks": [{"index": i, "node": t.node, "op_type": t.op_type, "domain": t.domain, "opset": t.opset,
                   "attrs": t.attrs, "inputs": [None if a is None else vars_of(a) for a in t.inputs],
                   "outputs": [None if a is None else vars_of(a) for a in t.outputs], "workspace": t.workspace}
                  for i, t in enumerate(m.tasks)],
        "weights": [vars_of(w) for w in m.weights],
    })


def _regions(m: GeModel) -> dict:
    sizes = {kind: 0 for kind in REGIONS}
    for a in m.allocations:  # FILE_CONSTANT (external weight files) only when the model has some
        kind = "IO" if a.kind in ("INPUT", "OUTPUT") else a.kind
        sizes[kind] = sizes.get(kind, 0) + a.size
    return {kind: {"size": size} for kind, size in sizes.items()}  # bases exist only once loaded (`ge run --verbose`)


def _weight_dict(m: GeModel, w) -> dict:
    """One weight for `ge inspect`: where it lives (inline or which file, offset, length) and its
    sha256 (an inline weight's is computed from WEIGHTS_DATA: the OM stores only external ones)."""
    import hashlib
    sha = w.sha256 or hashlib.sha256(memoryview(m.weight_data)[w.offset:w.offset + w.nbytes]).hexdigest()
    return {"name": w.name, "dtype": w.dtype, "shape": list(w.shape), "storage": "file" if w.file else "inline",
            "file": w.file, "allocation": w.allocation, "offset": w.file_offset if w.file else w.offset,
            "bytes": w.nbytes, "sha256": sha, "short_sha256": sha[:12]}


def _weight_totals(m: GeModel) -> dict:
    inline = [w for w in m.weights if not w.file]
    external = [w for w in m.weights if w.file]
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    return {"mode": int(attrs.get("external_weight", 0)),
            "inline": {"count": len(inline), "bytes": sum(w.nbytes for w in inline)},
            "file": {"count": len(external), "bytes": sum(w.nbytes for w in external), "files": len(m.weight_files),
                     "file_bytes": sum(a.size for a in m.weight_files)}}


def _desc_dict(d, kinds: dict) -> dict:
    return {"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "bytes": d.nbytes,
            "allocation": d.allocation, "kind": kinds.get(d.allocation, "?")}


def _task_dict(index: int, t, kinds: dict) -> dict:
    from ..kernels import lookup
    try:
        kernel = lookup(t.op_type, t.domain, t.opset, t.node).__name__
    except GeError:
        kernel = "(unsupported)"

    def arg(a, role):
        kind = kinds.get(a.allocation, "?")
        return {"role": role, "allocation": a.allocation, "kind": kind, "offset": a.offset, "dtype": a.dtype,
                "shape": list(a.shape), "ref": f"alloc#{a.allocation}+{a.offset}"}

    attrs = t.attrs if isinstance(t.attrs, dict) else {}
    epilogue = [step[0] for step in attrs.get("ge.epilogue", ())]
    # a fused elementwise chain (kernels/fused_elementwise.py): its ops, in evaluation order
    steps = attrs.get("steps") if t.op_type == "FusedElementwise" else None
    if type(steps) is not list or not all(type(s) is list and s and type(s[0]) is str for s in steps):
        steps = []  # (a load refuses such a chain, naming the step; inspect shows the task without it)
    return {"index": index, "node": t.node, "op": t.op_type, "domain": t.domain, "kernel": kernel,
            "epilogue": epilogue, "fused": [step[0] for step in steps],
            "label": f"{t.op_type}[{chain_label(steps)}]" if steps else "+".join([t.op_type, *epilogue]),
            "args": ([arg(a, "in") for a in t.inputs if a is not None]
                     + [arg(a, "out") for a in t.outputs if a is not None]),
            "workspace": t.workspace}


def _args_table(m: GeModel) -> list[dict]:
    """One row per args-table slot: task, argument, allocation + offset, and whether a refresh
    can rewrite it (its allocation's policy)."""
    from ..runtime.args_manager import FIXED, POLICY, POLICY_NAMES
    rows = []
    for index, t in enumerate(m.tasks):
        roles = ([f"in{i}" for i, a in enumerate(t.inputs) if a is not None]
                 + [f"out{i}" for i, a in enumerate(t.outputs) if a is not None]
                 + (["workspace"] if t.workspace else []))
        for role, a in zip(roles, t.args):
            policy = POLICY.get(m.allocations[a.allocation].kind, FIXED)
            rows.append({"slot": len(rows), "task": index, "node": t.node, "arg": role, "allocation": a.allocation,
                         "kind": m.allocations[a.allocation].kind, "offset": a.offset,
                         "policy": POLICY_NAMES[policy], "refreshable": policy != FIXED})
    return rows


def inspect_dynamic(dyn: DynamicModel, submodel_dict) -> dict:
    """`ge inspect` of a dynamic OM: partitions (nodes, known/unknown and why), gears with their
    memory, ranges with their planned capacity, and each static submodel as a static OM shows it."""
    caps = dyn.attrs.get("capacities", {})
    gears = [{"gear": k, "values": list(v), "inputs": {n: list(s) for n, s in dyn.attrs["gears"][k].items()},
              "outputs": {d.name: list(d.shape) for d in m.outputs}, "memory_size": m.memory_size} for k, (v, m) in enumerate(zip(dyn.attrs.get("gear_values", []),
                                                                                dyn.submodels))]
    return {
        "dynamic": {"mode": dyn.mode, "name": dyn.name, "weight_size": dyn.weight_size,
                    "weight_files": dict(dyn.weight_files),
                    "external_weights": [{"name": w.name, "graph": label, "file": w.file, "offset": w.offset,
                                          "nbytes": w.nbytes, "sha256": w.sha256}
                                         for label, g in [("root", dyn)] + [(f"subgraph {k}", sg) for k, sg in
                                                                            enumerate(dyn.subgraphs)]
                                         for w in g.weights if w.file],
                    "static_model_ops_lower_limit": dyn.attrs.get("static_model_ops_lower_limit"),
                    "atc_options": dict(dyn.attrs.get("atc_options", {})), "soc": soc_info(dyn.soc_version),
                    "inputs": [{"name": t.name, "dtype": _typed(t), "shape": list(t.shape),
                                "ranges": [f"{lo}~{hi}" if lo != hi else str(lo) for lo, hi in t.ranges]}
                               for t in dyn.inputs],
                    "outputs": [{"name": t.name, "dtype": _typed(t), "shape": list(t.shape)} for t in dyn.outputs],
                    "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                                  "submodel": c.submodel} for c in dyn.clusters],
                    "steps": [f"{s.kind} {s.index}" for s in dyn.steps],
                    "nodes": _dyn_nodes(dyn),
                    "gears": gears,
                    "planned_capacity": {"total": sum(caps.values()), "tensors": caps,
                                         "growable": list(dyn.attrs.get("growable", [])),
                                         "arena": {k: v for k, v in dyn.attrs.get("arena", {}).items()
                                                   if k != "offsets"}}},
        "subgraphs": subgraphs_info(dyn),
        "submodels": [submodel_dict(m) for m in dyn.submodels],
    }


def subgraphs_info(dyn: DynamicModel) -> list[dict]:
    """The control-flow subgraphs: whose (graph, node, attribute) each is, its inputs and outputs
    (the last `captures` inputs are outer values), and how it runs (its partitions and steps)."""
    owners = {}
    for label, g in [("root", dyn)] + [(f"subgraph {k}", sg) for k, sg in enumerate(dyn.subgraphs)]:
        for n in g.nodes:
            for key, j in n.subgraphs:
                owners[j] = {"graph": label, "node": n.name, "op_type": n.op_type, "attribute": key}
    return [{"index": k, "name": sg.name, **owners.get(k, {}), "captures": sg.attrs.get("captures", 0),
             "inputs": [{"name": t.name, "dtype": _typed(t), "shape": list(t.shape)} for t in sg.inputs],
             "outputs": [{"name": t.name, "dtype": _typed(t), "shape": list(t.shape)} for t in sg.outputs],
             "clusters": [{"index": c.index, "kind": c.kind, "nodes": list(c.nodes), "reason": c.reason,
                           "submodel": c.submodel} for c in sg.clusters],
             "steps": [f"{s.kind} {s.index}" for s in sg.steps], "nodes": _dyn_nodes(sg)}
            for k, sg in enumerate(dyn.subgraphs)]


def _dyn_nodes(g) -> list[dict]:
    """The hybrid executor's nodes of a root or subgraph, each output with its dtype ("" when only a
    run tells) and its kind when it is not a tensor."""
    return [{"name": n.name, "op_type": n.op_type,
             "outputs": [{"name": o, "dtype": dt if not n.kinds or n.kinds[j] == "tensor" else f"{n.kinds[j]}({dt})"}
                         for j, (o, dt) in enumerate(zip(n.outputs, n.dtypes)) if o]}
            for n in g.nodes]


def plot_memory(path: str, out_file: str) -> str:
    """`ge inspect --plot`: the memory plan of a static OM as SVG or PNG (by `out_file`'s extension)."""
    from ...formats.atomic import write_atomically
    from .memory_plot import plot_png, plot_svg
    kind = os.path.splitext(out_file)[1].lower()
    if kind not in (".svg", ".png"):
        raise GeError(f"--plot {out_file}: the picture is .svg or .png")
    d = inspect(path)
    if "dynamic" in d:
        raise GeError(f"{path}: --plot draws a static OM's memory plan (this one has dynamic shapes)")
    data = plot_svg(d).encode() if kind == ".svg" else plot_png(d)
    write_atomically(out_file, lambda f: f.write(data))
    return out_file


def _typed(t) -> str:
    """A root value's type as shown: its dtype ("string" for a string tensor), or e.g. sequence(float32)
    for a sequence or optional."""
    dtype = "string" if t.dtype == STRING else t.dtype
    return dtype if t.kind == "tensor" else f"{t.kind}({dtype})"
