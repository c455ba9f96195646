"""Write a GeModel as an OM file (format v1, msgpack). See schema.py and docs/om-format.md.

`om_bytes` returns the file as bytes; `write_om` streams it to a temporary file beside the target
and renames it into place, so a failure never leaves a partial OM behind. Both check their output
with the reader's validation before handing it out: an OM ge writes is an OM ge can load.
"""
from __future__ import annotations

import os
from typing import Callable

import msgpack

from ge.core.model.collector import collector_paused
from ge.core.model.dynamic_model import DynamicModel
from ge.core.model.errors import FormatError
from ge.core.model.ge_model import (FM_ID, INPUT, OUTPUT, WEIGHT_ID, WORKSPACE_ID, Allocation, Arg, GeModel, TaskDef,
                                    TensorDesc, TensorPlan, WeightDesc, WeightLayout)

from ..atomic import write_atomically
from . import reader
from .checksum import body_digest, sha256
from .encode import Unencodable, as_attr_map, as_dtype, as_int, as_shape, as_str, plain_int_lists, plain_ints, plain_rows
from .schema import (ALIGNMENT, BODY_CHECKSUM_SIZE, CHECKSUM_SIZE, CHECKSUM_TAIL, FORMAT_VERSION, GEN_MODE_OFFLINE,
                     MAGIC, MAX_ARRAY_LEN, MAX_HEADER_SIZE, MAX_MAP_LEN, MAX_STR_LEN, MODEL_DEF, MODEL_TYPE_NORMAL,
                     OM_IR_VERSION, PLATFORM_TYPE_SIM, PREFIX_SIZE, TASK_INFO, WEIGHTS_DATA, align_up, partition_name)

_ZERO_DIGEST = bytes(CHECKSUM_SIZE)
_ZERO_BODY = bytes(BODY_CHECKSUM_SIZE)
#: a partition of at most this many bytes holds no string, list or map beyond the reader's msgpack limits
_UNPACK_BOUND = min(MAX_STR_LEN, MAX_ARRAY_LEN, MAX_MAP_LEN)


def om_bytes(model: GeModel) -> bytes:
    """The OM file of `model`, as bytes."""
    label = f"model '{getattr(model, 'name', '?')}'"
    (head, pieces), maps = _encode_checked(model, label)
    data = b"".join([head, *pieces])
    _self_check(data, label, maps)
    return data


def write_om(model: GeModel, path: str | os.PathLike) -> GeModel | DynamicModel:
    """Write `model` to `path` atomically: a temporary file in the same directory, checked and renamed
    over `path`. On any error the temporary file is removed and `path` is untouched.
    Each piece is hashed, then written; the signed header then replaces the placeholder of the same
    length written first. Returns the model as the check read it back (its weight_data a view of
    the file's map).

    Hashing a piece before writing it matters at load: a weight is a view of the mapped ONNX file,
    and a write() whose source faults mid-copy falls back to 4 KiB page-cache pages, where a
    source already in memory is copied into large folios, which the loader's map then maps 2 MiB
    at a time (BERT-base's OM at load: its checksum 116 -> 50 ms, dropping the pages the checksum
    read 43 -> 4 ms)."""
    with collector_paused():  # (what it makes lives until it returns)
        return _write_om(model, os.fspath(path))


def _write_om(model: GeModel, label: str) -> GeModel | DynamicModel:
    (sign, pieces), maps = _encode_checked(model, label, lay_out)
    placeholder = sign(_ZERO_BODY)  # the body checksum has one length whatever its value

    def write(f) -> None:
        f.write(placeholder)
        digest = body_digest()
        for piece in pieces:
            digest.update(piece)  # first: its reads fault a mapped weight's pages in, so that write() below
            f.write(piece)  # copies without faulting, in whole large folios (see the docstring)
        f.flush()
        os.pwrite(f.fileno(), sign(digest.digest()), 0)

    written = []
    write_atomically(label, write, check=lambda tmp: written.append(_self_check(tmp, label, maps)))
    return written[0]


# ---------------------------------------------------------------- layout


def assemble(fields: dict, parts: list[tuple[int, int, bytes | memoryview]], *, tamper=None
             ) -> tuple[bytes, list]:
    """Lay out an OM: `fields` are the header fields other than version, checksums, length and the
    partition table; `parts` are (type, submodel, body) in file order. Returns (prefix + header,
    body pieces). `tamper(header)` (tests only) may edit the header map before it is signed."""
    sign, pieces = lay_out(fields, parts, tamper=tamper)
    digest = body_digest()
    for piece in pieces:
        digest.update(piece)
    return sign(digest.digest()), pieces


def lay_out(fields: dict, parts: list, *, tamper=None) -> tuple[Callable[[bytes], bytes], list]:
    """assemble() before the body is hashed: (sign(body checksum) -> prefix + signed header, body pieces)."""
    parts = [(kind, sub, _as_bytes_view(body)) for kind, sub, body in parts]
    size = 0
    for _ in range(32):  # the header's length depends on the offsets it holds; iterate to a fixed point
        header = _lay_out(fields, parts, PREFIX_SIZE + size)
        if tamper is not None:
            tamper(header)
        packed = msgpack.packb(header, use_bin_type=True)
        if len(packed) == size:
            break
        size = len(packed)
    else:  # pragma: no cover - offsets grow monotonically with the header, so this converges
        raise FormatError("OM writer: header layout does not converge")
    pieces = []
    _lay_out(fields, parts, PREFIX_SIZE + size, pieces)

    def sign(checksum: bytes) -> bytes:
        header = _lay_out(fields, parts, PREFIX_SIZE + size)
        header["body_checksum"] = checksum
        if tamper is not None:
            tamper(header)
        packed = msgpack.packb(header, use_bin_type=True)
        if len(packed) > MAX_HEADER_SIZE:
            raise Unencodable(f"header is {len(packed)} bytes, more than the limit {MAX_HEADER_SIZE}")
        head = bytearray(MAGIC + len(packed).to_bytes(4, "little") + packed)
        if head[-CHECKSUM_SIZE - 2:-CHECKSUM_SIZE] == CHECKSUM_TAIL:
            head[-CHECKSUM_SIZE:] = sha256(head[:-CHECKSUM_SIZE])
        return bytes(head)

    return sign, pieces


def _lay_out(fields: dict, parts: list, start: int, pieces: list | None = None) -> dict:
    """The header of the parts laid out from `start`; their body pieces appended to `pieces` if given
    (once: a WeightLayout's are one per weight, and the header is laid out several times)."""
    pos, table = start, []
    for kind, sub, body in parts:
        offset = align_up(pos, ALIGNMENT)
        if pieces is not None:
            if offset > pos:
                pieces.append(bytes(offset - pos))
            if isinstance(body, WeightLayout):  # streamed weight by weight, never joined
                pieces.extend(body.chunks())
            else:
                pieces.append(body)
        table.append({"type": kind, "submodel": sub, "offset": offset, "size": body.nbytes})
        pos = offset + body.nbytes
    # GE's sha256 `checksum` stays zero (is_checksum 0): body_checksum, filled by sign(), checks the body
    header = {"header_version": list(FORMAT_VERSION), "checksum": _ZERO_DIGEST, "body_checksum": _ZERO_BODY,
              "length": pos - start}
    header.update(fields)
    header["partitions"] = table
    header.pop("header_checksum", None)
    header["header_checksum"] = _ZERO_DIGEST  # last: its bytes are the header's final 32 bytes
    return header


def _as_bytes_view(body) -> memoryview | WeightLayout:
    if isinstance(body, WeightLayout):
        return body
    view = memoryview(body)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    return view


# ---------------------------------------------------------------- model -> partitions


def _encode_checked(model: GeModel, label: str, how=assemble) -> tuple:
    """(how(fields, parts): assemble's or lay_out's, the self-check's maps), with what cannot be written
    a FormatError. The maps are the MODEL_DEF and TASK_INFO maps by (type, submodel), or None where a
    partition is larger than the least of the reader's msgpack limits: a string, list or map inside it
    could then be beyond one, which only unpacking its bytes tells."""
    if not isinstance(model, (GeModel, DynamicModel)):
        raise FormatError(f"{label}: write_om needs a GeModel or DynamicModel, got {type(model).__name__}")
    try:
        fields, parts = _fields_and_maps(model)
        packed = _packed(parts)
        laid_out = how(fields, packed)
        if how is lay_out:
            laid_out[0](_ZERO_BODY)  # a header too big fails here, before any file is opened
        small = all(kind == WEIGHTS_DATA or len(body) <= _UNPACK_BOUND for kind, _, body in packed)
        return laid_out, {(kind, sub): body for kind, sub, body in parts if kind != WEIGHTS_DATA} if small else None
    except Unencodable as e:
        raise FormatError(f"{label}: cannot write OM: {e}") from None
    except (AttributeError, TypeError) as e:  # a list holding something that is not a TensorDesc/Arg/...
        raise FormatError(f"{label}: cannot write OM: malformed GeModel ({type(e).__name__}: {e})") from None


def encode(model: GeModel, *, tamper=None) -> tuple[bytes, list]:
    """(prefix + header, body pieces) of `model`, not yet validated (om_bytes/write_om validate)."""
    fields, parts = fields_and_parts(model)
    return assemble(fields, parts, tamper=tamper)


def fields_and_parts(model: GeModel) -> tuple[dict, list]:
    """The header fields `assemble` does not compute, and the (type, submodel, body) partitions."""
    fields, parts = _fields_and_maps(model)
    return fields, _packed(parts)


def _packed(parts: list) -> list:
    """The partitions' maps packed (WEIGHTS_DATA is bytes already)."""
    return [(kind, sub, body if kind == WEIGHTS_DATA else _pack(body, f"{partition_name(kind)} of submodel {sub}"))
            for kind, sub, body in parts]


def _fields_and_maps(model: GeModel) -> tuple[dict, list]:
    """fields_and_parts, the MODEL_DEF and TASK_INFO partitions still their maps."""
    if isinstance(model, DynamicModel):
        return _dynamic_fields_and_parts(model)
    model_def = _model_def(model)
    task_info = {"tasks": _tasks(model.tasks)}
    if model.dataflow is not None:
        task_info["dataflow"] = _dataflow(model.dataflow)
    weights = _as_bytes_view(model.weight_data if model.weight_data is not None else b"")
    fields = {
        "is_encrypt": 0,
        "is_checksum": 0,
        "model_type": MODEL_TYPE_NORMAL,
        "gen_mode": GEN_MODE_OFFLINE,
        "name": as_str(model.name, "model name"),
        "ops": len(model.tasks),
        "om_ir_version": OM_IR_VERSION,
        "model_num": 1,
        "platform_version": as_str(model.soc_version, "soc_version"),
        "platform_type": PLATFORM_TYPE_SIM,
        "has_unknown_shape": bool(model.attrs.get("has_unknown_shape", False)) if isinstance(model.attrs, dict) else False,
        "atc_cmdline": as_str(model.atc_cmdline, "atc_cmdline"),
    }
    return fields, [(MODEL_DEF, 0, model_def), (TASK_INFO, 0, task_info), (WEIGHTS_DATA, 0, weights)]


def _dynamic_fields_and_parts(model: DynamicModel) -> tuple[dict, list]:
    """Submodel 0 is the root (its WEIGHTS_DATA the shared weights); 1..n the static submodels."""
    from .root import encode_root  # (a static model's writer needs none of the root's modules)
    root_def, root_tasks = encode_root(model)
    parts = [(MODEL_DEF, 0, root_def), (TASK_INFO, 0, root_tasks), (WEIGHTS_DATA, 0, _as_bytes_view(model.weight_data))]
    for k, sm in enumerate(model.submodels, start=1):
        sub_fields, sub_parts = _fields_and_maps(sm)
        parts += [(kind, k, body if kind != WEIGHTS_DATA else memoryview(b"")) for kind, _, body in sub_parts]
    fields = {
        "is_encrypt": 0, "is_checksum": 0, "model_type": MODEL_TYPE_NORMAL, "gen_mode": GEN_MODE_OFFLINE,
        "name": as_str(model.name, "model name"),
        "ops": len(model.nodes) + sum(len(sm.tasks) for sm in model.submodels),
        "om_ir_version": OM_IR_VERSION, "model_num": 1 + len(model.submodels),
        "platform_version": as_str(model.soc_version, "soc_version"), "platform_type": PLATFORM_TYPE_SIM,
        "has_unknown_shape": True, "atc_cmdline": as_str(model.atc_cmdline, "atc_cmdline"),
    }
    return fields, parts


def _pack(obj, what: str) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:  # pragma: no cover - inputs are normalized first
        raise Unencodable(f"{what}: {e}") from None


#: each field's kind (encode.plain_rows) of a TensorPlan and a WeightDesc
_TENSOR, _WEIGHT = "siiidpiis", "sdpiisisi"


def _model_def(m: GeModel) -> dict:
    if not isinstance(m.allocations, (list, tuple)) or len(m.allocations) < 3:
        raise Unencodable("a model needs at least the WEIGHT, FEATURE_MAP and WORKSPACE allocations")
    allocations = _rows(m.allocations, Allocation, "isiis", _allocation)
    attrs = m.attrs if isinstance(m.attrs, dict) else {}
    return {
        "name": as_str(m.name, "model name"),
        "soc_version": as_str(m.soc_version, "soc_version"),
        "opset": as_int(m.opset, "opset"),
        "memory_size": allocations[FM_ID]["size"] + allocations[WORKSPACE_ID]["size"],
        "weight_size": allocations[WEIGHT_ID]["size"],
        "workspace_size": allocations[WORKSPACE_ID]["size"],
        "zero_copy_memory_size": sum(a["size"] for a in allocations if a["kind"] in (INPUT, OUTPUT)),
        "stream_num": as_int(attrs.get("stream_num", 1), "attrs['stream_num']"),
        "event_num": as_int(attrs.get("event_num", 0), "attrs['event_num']"),
        "allocations": allocations,
        "inputs": _rows(m.inputs, TensorDesc, "sdpi", lambda k, d: _desc(d, f"input {k}")),
        "outputs": _rows(m.outputs, TensorDesc, "sdpi", lambda k, d: _desc(d, f"output {k}")),
        "tensors": _rows(m.tensors, TensorPlan, _TENSOR, _by_name("tensor", TensorPlan, _TENSOR)),
        "weights": _rows(m.weights, WeightDesc, _WEIGHT, _by_name("weight", WeightDesc, _WEIGHT)),
        "attrs": as_attr_map(m.attrs, "model attrs", 0),
    }


def _rows(rows, record: type, kinds: str, encode_row) -> list[dict]:
    """The maps of a list of records: a column at a time when plain (encode.plain_rows), else
    `encode_row(k, row)` each, which checks every field and names the first one the OM cannot hold."""
    plain = plain_rows(rows, record, kinds)
    return plain if plain is not None else [encode_row(k, row) for k, row in enumerate(rows)]


def _allocation(k: int, a) -> dict:
    return {"id": as_int(a.id, f"allocation {k} id"), "kind": as_str(a.kind, f"allocation {k} kind"),
            "size": as_int(a.size, f"allocation {k} size"), "io_index": as_int(a.io_index, f"allocation {k} io_index"),
            "file": as_str(a.file, f"allocation {k} file")}


_AS = {"i": as_int, "s": as_str, "d": as_dtype, "p": as_shape}


def _by_name(what: str, record: type, kinds: str):
    """encode_row for _rows of records named by their first field (tensors, weights): each field
    checked in order, named "tensor 3 name", "tensor 'x' offset", or "tensor 'x'" for a dtype or shape."""
    def encode_row(k: int, row) -> dict:
        out = {"name": as_str(row.name, f"{what} {k} name")}
        for field, kind in zip(record._fields[1:], kinds[1:]):
            out[field] = _AS[kind](getattr(row, field), f"{what} '{row.name}'" + ("" if kind in "dp" else f" {field}"))
        return out
    return encode_row


def _desc(d, where: str) -> dict:
    return {"name": as_str(d.name, f"{where} name"), "dtype": as_dtype(d.dtype, f"{where} '{d.name}'"),
            "shape": as_shape(d.shape, f"{where} '{d.name}'"), "allocation": as_int(d.allocation, f"{where} '{d.name}' allocation")}


def _tasks(tasks) -> list[dict]:
    """TASK_INFO's tasks: when they and all their arguments are plain (encode.plain_rows), their maps
    are made a column at a time and only each task's attributes are encoded as _task does; else _task's."""
    rows = plain_rows(tasks, TaskDef, "sssiaaai")
    lists = [] if rows is None else [row[key] for row in rows for key in ("inputs", "outputs")]
    args = None
    if rows is not None and {tuple, list}.issuperset(map(type, lists)):
        args = plain_rows([a for arg_list in lists for a in arg_list if a is not None], Arg, "iidp")
    if args is None:
        return [_task(k, t) for k, t in enumerate(tasks)]
    maps = iter(args)
    for k, row in enumerate(rows):
        row["attrs"] = as_attr_map(row["attrs"], f"task {k} '{row['node']}' ({row['op_type']}) attrs", 0)
        row["inputs"] = [None if a is None else next(maps) for a in row["inputs"]]
        row["outputs"] = [None if a is None else next(maps) for a in row["outputs"]]
    return rows


def _task(k: int, t) -> dict:
    where = f"task {k} '{t.node}' ({t.op_type})"
    return {"node": as_str(t.node, f"task {k} node"), "op_type": as_str(t.op_type, f"{where} op_type"),
            "domain": as_str(t.domain, f"{where} domain"), "opset": as_int(t.opset, f"{where} opset"),
            "attrs": as_attr_map(t.attrs, f"{where} attrs", 0),
            "inputs": [None if a is None else _arg(a, f"{where} input {j}") for j, a in enumerate(t.inputs)],
            "outputs": [None if a is None else _arg(a, f"{where} output {j}") for j, a in enumerate(t.outputs)],
            "workspace": as_int(t.workspace, f"{where} workspace")}


def _dataflow(p) -> dict:
    if plain_int_lists([*p.deps, p.fm_offsets, (p.fm_size, p.lower_bound)]):  # as below, no message spelled
        return {"deps": list(map(list, p.deps)), "fm_offsets": list(p.fm_offsets), "fm_size": p.fm_size,
                "lower_bound": p.lower_bound}  # (lists: as msgpack unpacks them, for the self-check)
    return {"deps": [[as_int(d, f"dataflow deps of task {t}") for d in deps] for t, deps in enumerate(p.deps)],
            "fm_offsets": [as_int(o, "dataflow fm_offsets") for o in p.fm_offsets],
            "fm_size": as_int(p.fm_size, "dataflow fm_size"), "lower_bound": as_int(p.lower_bound, "dataflow lower_bound")}


def _arg(a, where: str) -> dict:
    try:
        return {"allocation": as_int(a.allocation, f"{where} allocation"), "offset": as_int(a.offset, f"{where} offset"),
                "dtype": as_dtype(a.dtype, where), "shape": as_shape(a.shape, where)}
    except AttributeError:
        raise Unencodable(f"{where}: expected an Arg, got {type(a).__name__}") from None


# ---------------------------------------------------------------- self check


def _self_check(source: str | bytes, label: str, maps: dict | None) -> GeModel | DynamicModel:
    """The OM just written (a path or bytes) read back as a load reads it, but for its checksums;
    the model read. Its MODEL_DEF and TASK_INFO are checked as the maps they were packed from
    (`maps`, see _encode_checked), which is what unpacking their bytes gives, but where it has
    lists, these may hold tuples (packed the same), which the reader's types take for an error. So a
    failure there is never the answer: the file is then read back whole, unpacked, and that says."""
    if maps is not None:
        try:
            return reader.load(source, label=label, verify_checksum=False, maps=maps)
        except FormatError:
            pass
    try:
        return reader.load(source, label=label, verify_checksum=False)
    except FormatError as e:
        detail = str(e)[len(label) + 2:] if str(e).startswith(label + ": ") else str(e)
        raise FormatError(f"{label}: refusing to write an invalid OM: {detail}") from None
