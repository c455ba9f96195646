"""The Python face of everything the `ge` commands do (ACL's aclmdl* calls and ATC's conversion).

    from ge.cli import api
    api.atc("model.onnx", "out/model", input_shape="x:1,3,224,224")
    model_id = api.load_from_file("out/model.om", device="sim")
    outputs = api.execute(model_id, [x])
    api.unload(model_id)

External weights (docs/external-weights.md):

    api.atc("model.onnx", "out/model", external_weight=1)      # out/weight/weight_<sha256> ...
    model_id = api.load_from_file("out/model.om", weight_dir="elsewhere/weight")
    buf = api.malloc(size, "sim"); api.memcpy_h2d(buf, file_bytes)
    model_id = api.load_from_file("out/model.om", "sim", weight_memory={"model_weight_combined": buf})
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..core.compile.build import build
from ..core.compile.external_weights import externalize
from ..core.compile.summary import summarize
from ..core.errors import GeError
from ..core.dynamic_model import DynamicModel
from ..core.ge_model import GeModel
from ..core.passes import optimize
from ..core.runtime.device import DeviceBuffer, get_device
from ..core.runtime.external_weight_manager import ExternalWeightConfig
from ..core.runtime.model_manager import ModelManager
from ..core.weight_files import DEFAULT_DIR
from ..formats.om import read_om, write_om
from ..formats.onnx.importer import load_onnx
from ..formats.weights import write_weight_files
from . import api_dynamic

DEFAULT_SOC = "Ascend-sim"


@dataclass
class AtcResult:
    om_path: str
    model: GeModel
    summary: dict


def om_path_for(output: str) -> str:
    """ATC appends .om to --output."""
    return output if output.endswith(".om") else output + ".om"


def default_weight_dir(om_path: str) -> str:
    """Where external weight files go and are looked for: `<om dir>/weight/`."""
    return os.path.join(os.path.dirname(os.path.abspath(om_path)), DEFAULT_DIR)


def atc(model: str, output: str, *, input_shape: str | dict | None = None, out_nodes: str | list | None = None,
        soc_version: str = DEFAULT_SOC, cmdline: str = "", external_weight: int = 0,
        external_weight_dir: str | None = None, dynamic: dict | None = None) -> AtcResult:
    """Compile an ONNX model into an OM file (ATC --framework=5). `external_weight` 1 or 2 moves
    the weights into files in `external_weight_dir` (default `<om dir>/weight/`)."""
    t0 = time.perf_counter()
    nodes = out_nodes.split(";") if isinstance(out_nodes, str) else out_nodes
    nodes = [n for n in (nodes or []) if n] or None
    name = os.path.splitext(os.path.basename(om_path_for(output)))[0]
    gears = dict(dynamic or {})
    spec = input_shape if isinstance(input_shape, dict) else api_dynamic.parse_shape_spec(input_shape)
    if gears.get("input_shape_range"):  # ATC's deprecated spelling of ranges
        spec.update(api_dynamic.parse_shape_spec(gears.pop("input_shape_range"), "--input_shape_range"))
    min_static_ops = gears.pop("static_model_ops_lower_limit", None) or api_dynamic.DEFAULT_STATIC_OPS_LOWER_LIMIT
    if api_dynamic.is_dynamic(spec, gears):
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, t0)
    shapes = spec
    graph = load_onnx(model, shapes or None, nodes)
    try:
        report = optimize(graph)
    except GeError:
        if not api_dynamic.is_data_dependent(model, shapes, nodes):
            raise
        return _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops,
                            external_weight, t0)
    ge_model = build(graph, name=name, soc_version=soc_version, atc_cmdline=cmdline)
    ge_model, files = externalize(ge_model, external_weight)
    om_path = om_path_for(output)
    os.makedirs(os.path.dirname(os.path.abspath(om_path)), exist_ok=True)
    weight_dir = os.path.abspath(external_weight_dir) if external_weight_dir else default_weight_dir(om_path)
    if files:  # before the OM: an OM never names a weight file that is not there yet
        write_weight_files(files, weight_dir)
    write_om(ge_model, om_path)
    return AtcResult(om_path, ge_model, summarize(ge_model, time.perf_counter() - t0, report, weight_dir))


def _atc_dynamic(model, output, name, spec, gears, nodes, soc_version, cmdline, min_static_ops, external_weight,
                 t0) -> AtcResult:
    """Gears, ranges or the hybrid path: one OM with a root model and its static submodels.
    `gears` holds dynamic_batch_size / dynamic_image_size / dynamic_dims (ATC spellings)."""
    if external_weight:
        raise GeError("--external_weight is not supported with dynamic shapes (gears, ranges, unknown dims)")
    dyn = api_dynamic.compile_dynamic(model, name, spec, gears, nodes, soc_version=soc_version, cmdline=cmdline,
                                      min_static_ops=int(min_static_ops))
    om_path = om_path_for(output)
    os.makedirs(os.path.dirname(os.path.abspath(om_path)), exist_ok=True)
    write_om(dyn, om_path)
    return AtcResult(om_path, dyn, api_dynamic.summarize_dynamic(dyn, time.perf_counter() - t0))


# -- the runtime, ACL style: one process-wide ModelManager -------------------------------------
model_manager = ModelManager()


def load_from_file(path: str, device: str = "cpu", *, weight_dir: str | None = None,
                   weight_memory: dict | None = None, verify_weights: bool = True) -> int:
    """aclmdlLoadFromFile(WithConfig). External weight files are read from `weight_dir`
    (ACL_MDL_WEIGHT_PATH_PTR; default `<om dir>/weight/`), except those given in
    `weight_memory` as {file name: DeviceBuffer or (address, size)} already holding the file's
    bytes (aclmdlSetExternalWeightAddress), which ge uses in place and never frees.
    `verify_weights=False` skips the sha256 check (lengths are always checked)."""
    config = ExternalWeightConfig(weight_dir or default_weight_dir(path), weight_memory or {}, verify_weights)
    return model_manager.load(read_om(path), device, config)


def load_from_mem(data: bytes, device: str = "cpu", *, weight_dir: str | None = None,
                  weight_memory: dict | None = None, verify_weights: bool = True) -> int:
    """aclmdlLoadFromMem: as load_from_file, but an OM in memory has no folder of its own, so a
    model with external weights needs `weight_dir` or `weight_memory`."""
    config = ExternalWeightConfig(weight_dir, weight_memory or {}, verify_weights)
    return model_manager.load(read_om(bytes(data)), device, config)


def malloc(nbytes: int, device: str = "cpu") -> DeviceBuffer:
    """aclrtMalloc: device memory, e.g. to hand a model its external weights."""
    return get_device(device).buffer(nbytes)


def memcpy_h2d(buffer: DeviceBuffer, data) -> None:
    """aclrtMemcpy host -> device into the start of `buffer`."""
    import numpy as np
    host = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data)
    if host.nbytes > buffer.nbytes:
        raise GeError(f"memcpy_h2d: {host.nbytes} bytes do not fit a device buffer of {buffer.nbytes}")
    buffer.device.memcpy_h2d(buffer.addr, host)


def free(buffer: DeviceBuffer) -> None:
    """aclrtFree."""
    buffer.device.free(buffer.addr)


def query_size(path: str) -> tuple[int, int]:
    """(work size, weight size) in bytes, as aclmdlQuerySize."""
    m = read_om(path)
    return m.memory_size, m.weight_size


def execute(model_id: int, inputs, outputs=None, timeout: float | None = None):
    return model_manager.execute(model_id, inputs, outputs, timeout)


def unload(model_id: int) -> None:
    model_manager.unload(model_id)


def set_dynamic_batch_size(model_id: int, batch: int) -> int:
    """aclmdlSetDynamicBatchSize: run the gear of this batch size (a gear model); returns its index."""
    return _gear_model(model_id).set_dynamic_batch_size(batch)


def set_dynamic_hw_size(model_id: int, height: int, width: int) -> int:
    """aclmdlSetDynamicHWSize: run the gear of this image size."""
    return _gear_model(model_id).set_dynamic_hw_size(height, width)


def set_input_dynamic_dims(model_id: int, dims) -> int:
    """aclmdlSetInputDynamicDims: run the gear whose -1 dims take these values (in order)."""
    return _gear_model(model_id).set_input_dynamic_dims(dims)


def gear_sizes(model_id: int) -> list[dict]:
    """Per gear: its -1 dim values, input shapes and work memory (aclmdlGetDynamicBatch & co)."""
    m = _gear_model(model_id)
    return [{"values": list(v), "inputs": {k: list(s) for k, s in shapes.items()}, "memory_size": g.work_size}
            for v, shapes, g in zip(m.gear_values, m.gear_shapes, m.gears)]


def _gear_model(model_id: int):
    from ..core.runtime.gears import GearModel
    m = model_manager.model(model_id)
    if not isinstance(m, GearModel):
        raise GeError(f"model {model_id} ('{m.name}') has no gears (compile it with --dynamic_batch_size, "
                      "--dynamic_image_size or --dynamic_dims)")
    return m


def model(model_id: int):
    """The loaded DavinciModel (descs, contexts, timings)."""
    return model_manager.model(model_id)


# -- looking inside an OM: `ge inspect`, `ge atc --mode=1` and `--mode=6` --------------------------
REGIONS = ("WEIGHT", "FEATURE_MAP", "WORKSPACE", "IO")


def version() -> str:
    """ge's version (the installed distribution's), as `atc_version` shows it."""
    from importlib.metadata import PackageNotFoundError, version as dist_version
    try:
        return dist_version("ge")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
        return "0+unknown"


def inspect(path: str) -> dict:
    """Everything `ge inspect` shows, as plain JSON-ready data: header, IO descs, memory regions,
    the logical allocations, the tensor allocation table, tasks (with kernels and arguments) and
    weights. Raises FormatError for a broken OM."""
    from ..formats.om import header_info
    header = header_info(path)
    m = read_om(path)
    if isinstance(m, DynamicModel):
        return _jsonable(dict(api_dynamic.inspect_dynamic(m, _ge_model_dict), header=header))
    return _jsonable(dict(_ge_model_dict(m), header=header))


def _ge_model_dict(m: GeModel) -> dict:
    kinds = {a.id: a.kind for a in m.allocations}
    return _jsonable({
        "inputs": [_desc_dict(d, kinds) for d in m.inputs],
        "outputs": [_desc_dict(d, kinds) for d in m.outputs],
        "memory": _regions(m),
        "feature_map_lower_bound": int(m.attrs.get("lower_bound", 0)) if isinstance(m.attrs, dict) else 0,
        "logical_allocations": [{"id": a.id, "kind": a.kind, "size": a.size, "io_index": a.io_index}
                                for a in m.allocations],
        "allocations": [{"tensor": t.name, "allocation": t.allocation, "kind": kinds.get(t.allocation, "?"),
                         "offset": t.offset, "size": t.nbytes, "dtype": t.dtype, "shape": list(t.shape),
                         "first": t.first, "last": t.last, "alias_of": t.alias_of} for t in m.tensors],
        "tasks": [_task_dict(i, t, kinds) for i, t in enumerate(m.tasks)],
        "args_table": _args_table(m),
        "weights": [_weight_dict(m, w) for w in m.weights],
        "weight_totals": _weight_totals(m),
    })


def model_info(path: str) -> dict:
    """What `atc --mode=6` displays: command line, versions, resource and partition sizes."""
    from ..formats.om import header_info
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
    from ..formats.om import header_info
    header = header_info(path)
    m = read_om(path)
    if isinstance(m, DynamicModel):  # the root model, then every submodel's model def and tasks
        return _jsonable(dict(api_dynamic.inspect_dynamic(m, _ge_model_dict), header=header))
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    return _jsonable({
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


def vars_of(obj) -> dict:
    """A frozen dataclass (Allocation, TensorDesc, TensorPlan, Arg, WeightDesc) as a dict."""
    import dataclasses
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}


def _regions(m: GeModel) -> dict:
    sizes = {kind: 0 for kind in REGIONS}
    for a in m.allocations:  # FILE_CONSTANT (external weight files) only when the model has some
        kind = "IO" if a.kind in ("INPUT", "OUTPUT") else a.kind
        sizes[kind] = sizes.get(kind, 0) + a.size
    return {kind: {"base": 0, "size": size} for kind, size in sizes.items()}


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
    from ..core.kernels import lookup
    try:
        kernel = lookup(t.op_type, t.domain, t.opset, t.node).__name__
    except GeError:
        kernel = "(unsupported)"

    def arg(a, role):
        kind = kinds.get(a.allocation, "?")
        return {"role": role, "allocation": a.allocation, "kind": kind, "offset": a.offset, "dtype": a.dtype,
                "shape": list(a.shape), "ref": f"alloc#{a.allocation}+{a.offset}"}

    epilogue = [op for op, _ in t.attrs.get("ge.epilogue", ())] if isinstance(t.attrs, dict) else []
    return {"index": index, "node": t.node, "op": t.op_type, "domain": t.domain, "kernel": kernel,
            "epilogue": epilogue,
            "args": ([arg(a, "in") for a in t.inputs if a is not None]
                     + [arg(a, "out") for a in t.outputs if a is not None]),
            "workspace": t.workspace}


def _args_table(m: GeModel) -> list[dict]:
    """One row per args-table slot: task, argument, allocation + offset, and whether a refresh
    can rewrite it (its allocation's policy)."""
    from ..core.runtime.args_manager import FIXED, POLICY, POLICY_NAMES
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


def _jsonable(v):
    """Plain JSON types: tuples -> lists, numpy scalars/arrays -> Python values, dtypes -> names,
    bytes -> hex, dataclasses -> dicts."""
    import dataclasses
    import math

    import numpy as np
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.ndarray):
        return _jsonable(v.tolist())
    if isinstance(v, np.generic):
        return _jsonable(v.item())
    if isinstance(v, (np.dtype, type)) and not isinstance(v, bool):
        return np.dtype(v).name if isinstance(v, np.dtype) else v.__name__
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).hex()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return _jsonable(vars_of(v))
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if v != v else ("inf" if v > 0 else "-inf")  # strict JSON has no Infinity/NaN
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return str(v)
