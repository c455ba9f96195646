"""Write a GeModel as an OM file (format v1, msgpack). See schema.py and docs/om-format.md.

`om_bytes` returns the file as bytes; `write_om` streams it to a temporary file beside the target
and renames it into place, so a failure never leaves a partial OM behind. Both check their output
with the reader's validation before handing it out: an OM ge writes is an OM ge can load.
"""
from __future__ import annotations

import hashlib
import operator
import os

import msgpack
import numpy as np

from ge.core.dynamic_model import DynamicModel
from ge.core.errors import FormatError
from ge.core.ge_model import FM_ID, GeModel, INPUT, OUTPUT, WEIGHT_ID, WORKSPACE_ID

from ..atomic import write_atomically
from . import reader
from .schema import (ALIGNMENT, CHECKSUM_SIZE, CHECKSUM_TAIL, DTYPE_TAG, DTYPES, FORMAT_VERSION,
                     GEN_MODE_OFFLINE, MAGIC, MAX_ATTR_DEPTH, MAX_HEADER_SIZE, MODEL_DEF, MODEL_TYPE_NORMAL,
                     NDARRAY_TAG, OM_IR_VERSION, PLATFORM_TYPE_SIM, PREFIX_SIZE, RESERVED_TAGS, TASK_INFO,
                     WEIGHTS_DATA, align_up)

_ZERO_DIGEST = bytes(CHECKSUM_SIZE)


class _Unencodable(Exception):
    """A model field the OM cannot hold (message says which)."""


def om_bytes(model: GeModel) -> bytes:
    """The OM file of `model`, as bytes."""
    label = f"model '{getattr(model, 'name', '?')}'"
    head, pieces = _encode_checked(model, label)
    data = b"".join([head, *pieces])
    _self_check(memoryview(data), label)
    return data


def write_om(model: GeModel, path: str | os.PathLike) -> None:
    """Write `model` to `path` atomically: a temporary file in the same directory, fsync'ed, checked
    and renamed over `path`. On any error the temporary file is removed and `path` is untouched."""
    label = os.fspath(path)
    head, pieces = _encode_checked(model, label)

    def write(f) -> None:
        f.write(head)
        for piece in pieces:
            f.write(piece)

    write_atomically(label, write, check=lambda tmp: _self_check_file(tmp, label))


# ---------------------------------------------------------------- layout


def assemble(fields: dict, parts: list[tuple[int, int, bytes | memoryview]], *, tamper=None
             ) -> tuple[bytes, list]:
    """Lay out an OM: `fields` are the header fields other than version, checksums, length and the
    partition table; `parts` are (type, submodel, body) in file order. Returns (prefix + header,
    body pieces). `tamper(header)` (tests only) may edit the header map before it is signed."""
    parts = [(kind, sub, _as_bytes_view(body)) for kind, sub, body in parts]
    size = 0
    for _ in range(32):  # the header's length depends on the offsets it holds; iterate to a fixed point
        header, pieces = _lay_out(fields, parts, PREFIX_SIZE + size)
        if tamper is not None:
            tamper(header)
        packed = msgpack.packb(header, use_bin_type=True)
        if len(packed) == size:
            break
        size = len(packed)
    else:  # pragma: no cover - offsets grow monotonically with the header, so this converges
        raise FormatError("OM writer: header layout does not converge")
    digest = hashlib.sha256()
    for piece in pieces:
        digest.update(piece)
    header, _ = _lay_out(fields, parts, PREFIX_SIZE + size)
    header["checksum"] = digest.digest()
    if tamper is not None:
        tamper(header)
    packed = msgpack.packb(header, use_bin_type=True)
    if len(packed) > MAX_HEADER_SIZE:
        raise _Unencodable(f"header is {len(packed)} bytes, more than the limit {MAX_HEADER_SIZE}")
    head = bytearray(MAGIC + len(packed).to_bytes(4, "little") + packed)
    if head[-CHECKSUM_SIZE - 2:-CHECKSUM_SIZE] == CHECKSUM_TAIL:
        head[-CHECKSUM_SIZE:] = hashlib.sha256(head[:-CHECKSUM_SIZE]).digest()
    return bytes(head), pieces


def _lay_out(fields: dict, parts: list, start: int) -> tuple[dict, list]:
    pos, table, pieces = start, [], []
    for kind, sub, body in parts:
        offset = align_up(pos, ALIGNMENT)
        if offset > pos:
            pieces.append(bytes(offset - pos))
        pieces.append(body)
        table.append({"type": kind, "submodel": sub, "offset": offset, "size": body.nbytes})
        pos = offset + body.nbytes
    header = {"header_version": list(FORMAT_VERSION), "checksum": _ZERO_DIGEST, "length": pos - start}
    header.update(fields)
    header["partitions"] = table
    header.pop("header_checksum", None)
    header["header_checksum"] = _ZERO_DIGEST  # last: its bytes are the header's final 32 bytes
    return header, pieces


def _as_bytes_view(body) -> memoryview:
    view = memoryview(body)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# ---------------------------------------------------------------- model -> partitions


def _encode_checked(model: GeModel, label: str) -> tuple[bytes, list]:
    if not isinstance(model, (GeModel, DynamicModel)):
        raise FormatError(f"{label}: write_om needs a GeModel or DynamicModel, got {type(model).__name__}")
    try:
        return encode(model)
    except _Unencodable as e:
        raise FormatError(f"{label}: cannot write OM: {e}") from None
    except (AttributeError, TypeError) as e:  # a list holding something that is not a TensorDesc/Arg/...
        raise FormatError(f"{label}: cannot write OM: malformed GeModel ({type(e).__name__}: {e})") from None


def encode(model: GeModel, *, tamper=None) -> tuple[bytes, list]:
    """(prefix + header, body pieces) of `model`, not yet validated (om_bytes/write_om validate)."""
    fields, parts = fields_and_parts(model)
    return assemble(fields, parts, tamper=tamper)


def fields_and_parts(model: GeModel) -> tuple[dict, list]:
    """The header fields `assemble` does not compute, and the (type, submodel, body) partitions."""
    if isinstance(model, DynamicModel):
        return _dynamic_fields_and_parts(model)
    model_def = _model_def(model)
    task_info = {"tasks": [_task(i, t) for i, t in enumerate(model.tasks)]}
    if model.dataflow is not None:
        task_info["dataflow"] = _dataflow(model.dataflow)
    weights = _as_bytes_view(model.weight_data if model.weight_data is not None else b"")
    fields = {
        "is_encrypt": 0,
        "is_checksum": 1,
        "model_type": MODEL_TYPE_NORMAL,
        "gen_mode": GEN_MODE_OFFLINE,
        "name": _s(model.name, "model name"),
        "ops": len(model.tasks),
        "om_ir_version": OM_IR_VERSION,
        "model_num": 1,
        "platform_version": _s(model.soc_version, "soc_version"),
        "platform_type": PLATFORM_TYPE_SIM,
        "has_unknown_shape": bool(model.attrs.get("has_unknown_shape", False)) if isinstance(model.attrs, dict) else False,
        "atc_cmdline": _s(model.atc_cmdline, "atc_cmdline"),
    }
    parts = [(MODEL_DEF, 0, _pack(model_def, "MODEL_DEF")), (TASK_INFO, 0, _pack(task_info, "TASK_INFO")),
             (WEIGHTS_DATA, 0, weights)]
    return fields, parts


def _dynamic_fields_and_parts(model: DynamicModel) -> tuple[dict, list]:
    """Submodel 0 is the root (its WEIGHTS_DATA the shared weights); 1..n the static submodels."""
    import sys

    from .root import encode_root
    root_def, root_tasks = encode_root(model, sys.modules[__name__])
    parts = [(MODEL_DEF, 0, _pack(root_def, "root MODEL_DEF")), (TASK_INFO, 0, _pack(root_tasks, "root TASK_INFO")),
             (WEIGHTS_DATA, 0, _as_bytes_view(model.weight_data))]
    for k, sm in enumerate(model.submodels, start=1):
        sub_fields, sub_parts = fields_and_parts(sm)
        parts += [(kind, k, body if kind != WEIGHTS_DATA else memoryview(b"")) for kind, _, body in sub_parts]
    fields = {
        "is_encrypt": 0, "is_checksum": 1, "model_type": MODEL_TYPE_NORMAL, "gen_mode": GEN_MODE_OFFLINE,
        "name": _s(model.name, "model name"),
        "ops": len(model.nodes) + sum(len(sm.tasks) for sm in model.submodels),
        "om_ir_version": OM_IR_VERSION, "model_num": 1 + len(model.submodels),
        "platform_version": _s(model.soc_version, "soc_version"), "platform_type": PLATFORM_TYPE_SIM,
        "has_unknown_shape": True, "atc_cmdline": _s(model.atc_cmdline, "atc_cmdline"),
    }
    return fields, parts


def _pack(obj, what: str) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:  # pragma: no cover - inputs are normalized first
        raise _Unencodable(f"{what}: {e}") from None


def _model_def(m: GeModel) -> dict:
    if not isinstance(m.allocations, (list, tuple)) or len(m.allocations) < 3:
        raise _Unencodable("a model needs at least the WEIGHT, FEATURE_MAP and WORKSPACE allocations")
    allocations = [{"id": _i(a.id, f"allocation {k} id"), "kind": _s(a.kind, f"allocation {k} kind"),
                    "size": _i(a.size, f"allocation {k} size"), "io_index": _i(a.io_index, f"allocation {k} io_index"),
                    "file": _s(a.file, f"allocation {k} file")}
                   for k, a in enumerate(m.allocations)]
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    return {
        "name": _s(m.name, "model name"),
        "soc_version": _s(m.soc_version, "soc_version"),
        "opset": _i(m.opset, "opset"),
        "memory_size": allocations[FM_ID]["size"] + allocations[WORKSPACE_ID]["size"],
        "weight_size": allocations[WEIGHT_ID]["size"],
        "workspace_size": allocations[WORKSPACE_ID]["size"],
        "zero_copy_memory_size": sum(a["size"] for a in allocations if a["kind"] in (INPUT, OUTPUT)),
        "stream_num": _i(attrs.get("stream_num", 1), "attrs['stream_num']"),
        "event_num": _i(attrs.get("event_num", 0), "attrs['event_num']"),
        "allocations": allocations,
        "inputs": [_desc(d, f"input {k}") for k, d in enumerate(m.inputs)],
        "outputs": [_desc(d, f"output {k}") for k, d in enumerate(m.outputs)],
        "tensors": [{"name": _s(t.name, f"tensor {k} name"), "allocation": _i(t.allocation, f"tensor '{t.name}' allocation"),
                     "offset": _i(t.offset, f"tensor '{t.name}' offset"), "nbytes": _i(t.nbytes, f"tensor '{t.name}' nbytes"),
                     "dtype": _dtype(t.dtype, f"tensor '{t.name}'"), "shape": _shape(t.shape, f"tensor '{t.name}'"),
                     "first": _i(t.first, f"tensor '{t.name}' first"), "last": _i(t.last, f"tensor '{t.name}' last"),
                     "alias_of": _s(t.alias_of, f"tensor '{t.name}' alias_of")}
                    for k, t in enumerate(m.tensors)],
        "weights": [{"name": _s(w.name, f"weight {k} name"), "dtype": _dtype(w.dtype, f"weight '{w.name}'"),
                     "shape": _shape(w.shape, f"weight '{w.name}'"), "offset": _i(w.offset, f"weight '{w.name}' offset"),
                     "nbytes": _i(w.nbytes, f"weight '{w.name}' nbytes"), "file": _s(w.file, f"weight '{w.name}' file"),
                     "file_offset": _i(w.file_offset, f"weight '{w.name}' file_offset"),
                     "sha256": _s(w.sha256, f"weight '{w.name}' sha256"),
                     "allocation": _i(w.allocation, f"weight '{w.name}' allocation")}
                    for k, w in enumerate(m.weights)],
        "attrs": _attr_map(m.attrs, "model attrs", 0),
    }


def _desc(d, where: str) -> dict:
    return {"name": _s(d.name, f"{where} name"), "dtype": _dtype(d.dtype, f"{where} '{d.name}'"),
            "shape": _shape(d.shape, f"{where} '{d.name}'"), "allocation": _i(d.allocation, f"{where} '{d.name}' allocation")}


def _task(k: int, t) -> dict:
    where = f"task {k} '{t.node}' ({t.op_type})"
    return {"node": _s(t.node, f"task {k} node"), "op_type": _s(t.op_type, f"{where} op_type"),
            "domain": _s(t.domain, f"{where} domain"), "opset": _i(t.opset, f"{where} opset"),
            "attrs": _attr_map(t.attrs, f"{where} attrs", 0),
            "inputs": [None if a is None else _arg(a, f"{where} input {j}") for j, a in enumerate(t.inputs)],
            "outputs": [None if a is None else _arg(a, f"{where} output {j}") for j, a in enumerate(t.outputs)],
            "workspace": _i(t.workspace, f"{where} workspace")}


def _dataflow(p) -> dict:
    return {"deps": [[_i(d, f"dataflow deps of task {t}") for d in deps] for t, deps in enumerate(p.deps)],
            "fm_offsets": [_i(o, "dataflow fm_offsets") for o in p.fm_offsets],
            "fm_size": _i(p.fm_size, "dataflow fm_size"), "lower_bound": _i(p.lower_bound, "dataflow lower_bound")}


def _arg(a, where: str) -> dict:
    try:
        return {"allocation": _i(a.allocation, f"{where} allocation"), "offset": _i(a.offset, f"{where} offset"),
                "dtype": _dtype(a.dtype, where), "shape": _shape(a.shape, where)}
    except AttributeError:
        raise _Unencodable(f"{where}: expected an Arg, got {type(a).__name__}") from None


def _i(v, where: str) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise _Unencodable(f"{where}: expected an integer, got {v!r}")
    try:
        v = operator.index(v)
    except TypeError:
        raise _Unencodable(f"{where}: expected an integer, got {type(v).__name__}") from None
    if not -(1 << 63) <= v < 1 << 63:
        raise _Unencodable(f"{where}: {v} does not fit in 64 bits")
    return v


def _s(v, where: str) -> str:
    if not isinstance(v, str):
        raise _Unencodable(f"{where}: expected a string, got {type(v).__name__}")
    return str(v)


def _dtype(v, where: str) -> str:
    try:
        name = np.dtype(v).name
    except TypeError:
        raise _Unencodable(f"{where}: {v!r} is not a dtype") from None
    if name not in DTYPES:
        raise _Unencodable(f"{where}: dtype {name} is not supported by the OM format")
    return name


def _shape(v, where: str) -> list[int]:
    if not isinstance(v, (tuple, list)):
        raise _Unencodable(f"{where}: shape must be a tuple, got {type(v).__name__}")
    return [_i(d, f"{where} shape") for d in v]


# ---------------------------------------------------------------- attribute values


def _attr_map(attrs, where: str, depth: int) -> dict:
    if not isinstance(attrs, dict):
        raise _Unencodable(f"{where}: expected a dict, got {type(attrs).__name__}")
    out = {}
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise _Unencodable(f"{where}: key {key!r} is not a string")
        if key in RESERVED_TAGS:
            raise _Unencodable(f"{where}: key '{key}' is reserved by the OM format")
        out[str(key)] = encode_attr(value, f"{where}['{key}']", depth + 1)
    return out


def encode_attr(v, where: str = "attribute", depth: int = 0):
    """An attribute value as msgpack-native data: scalars, lists, str-keyed maps, tagged ndarrays."""
    if depth > MAX_ATTR_DEPTH:
        raise _Unencodable(f"{where}: nested deeper than {MAX_ATTR_DEPTH} levels")
    if v is None or isinstance(v, (bool, str, bytes)):
        return v
    if isinstance(v, int):
        if not -(1 << 63) <= v < 1 << 64:
            raise _Unencodable(f"{where}: integer {v} does not fit in 64 bits")
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, np.ndarray):
        return _ndarray(v, where)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return encode_attr(int(v), where, depth)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.dtype):
        return {DTYPE_TAG: _dtype(v, where)}
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, (list, tuple)):
        return [encode_attr(x, f"{where}[{j}]", depth + 1) for j, x in enumerate(v)]
    if isinstance(v, dict):
        return _attr_map(v, where, depth)
    raise _Unencodable(f"{where}: values of type {type(v).__name__} cannot be stored in an OM")


def _ndarray(a: np.ndarray, where: str) -> dict:
    name = _dtype(a.dtype, where)
    little = np.dtype(name).newbyteorder("<")
    data = np.ascontiguousarray(a, dtype=little).tobytes()
    return {NDARRAY_TAG: True, "dtype": name, "shape": [int(d) for d in a.shape], "data": data}


# ---------------------------------------------------------------- self check


def _self_check(view: memoryview, label: str) -> None:
    try:
        reader.parse(view, verify_checksum=False)
    except reader.Bad as e:
        raise FormatError(f"{label}: refusing to write an invalid OM: {e}") from None


def _self_check_file(path: str, label: str) -> None:
    try:
        reader.load(path, label=label, verify_checksum=False)
    except FormatError as e:
        detail = str(e)[len(label) + 2:] if str(e).startswith(label + ": ") else str(e)
        raise FormatError(f"{label}: refusing to write an invalid OM: {detail}") from None
