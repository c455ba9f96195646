"""Read an OM file (format v1) into a GeModel, trusting nothing until it has been checked.

Order of checks: the file (a regular file: a FIFO or device is refused, never opened), its size,
magic, header length (bounded before anything is read), msgpack header (unpacked with limits),
major version, the header record, header checksum, partition table (inside the file, no overlap,
required partitions present), length, body checksum (xxh3_128 `body_checksum`; sha256 `checksum` in
files before 1.9); then each partition unpacked with limits derived from its size, decoded as its
records (records.py: every field's type and range, in one step per record) and its cross-references
checked, one function each below (allocations, I/O descs, tensors, weights, sizes, tasks, the
dataflow plan; root_check.py for a dynamic OM's root).
Every failure is a FormatError whose message starts with the file name (or "<bytes>") and names
the field's path (`TASK_INFO.tasks[3] 'conv' (Conv).inputs[0]: ...`).

A path is memory-mapped read-only: weight_data is a memoryview slice of the map (no copy). The map
stays alive as long as that view does.
"""
from __future__ import annotations

import mmap
import os
from operator import add, le

import msgpack
import numpy as np

from ge.core.model.errors import FormatError
from ge.core.model.dynamic_model import GEARS, gear_descs
from ge.core.model.weight_files import open_regular
from ge.core.model.ge_model import (FEATURE_MAP, FILE_CONSTANT, FM_ID, INPUT, OUTPUT, WEIGHT, WEIGHT_ID, WORKSPACE,
                                    WORKSPACE_ID, Allocation, DataflowPlan, GeModel, TaskDef, TensorDesc, TensorPlan,
                                    WeightDesc, arg_rows)

from . import records
from .checksum import body_checksum, sha256
from .decode import Bad, check_nbytes, check_weight_file_name, clip, nbytes_list, nbytes_of, show, tname
from .records import HEADER, decode
from .schema import (BODY_CHECKSUM_SINCE, CHECKSUM_SIZE, CHECKSUM_TAIL, FORMAT_VERSION, MAGIC, MAX_ARRAY_LEN,
                     MAX_HEADER_SIZE, MAX_INT, MAX_MAP_LEN, MAX_STR_LEN, MAX_TOTAL_SIZE, MIN_FILE_SIZE, MODEL_DEF,
                     PREFIX_SIZE, REQUIRED_PARTITIONS, TASK_INFO, WEIGHTS_DATA, partition_name)

BYTES_LABEL = "<bytes>"
_SAFETY_NET = (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError, UnicodeError,
               ArithmeticError)
_FIXED_KINDS = {WEIGHT_ID: WEIGHT, FM_ID: FEATURE_MAP, WORKSPACE_ID: WORKSPACE}


# ---------------------------------------------------------------- public entry points


def read_om(source: str | os.PathLike | bytes, *, verify_checksum: bool = True, strict: bool = False) -> GeModel:
    """Load and validate an OM from a path or from bytes. A path is memory-mapped read-only and
    weight_data is a memoryview of the map; for a bytes-like source it is a memoryview of that
    buffer (no copy either way; b"" when the OM has no inline weights). `strict` (tests): a gap in
    the validation raises its own exception instead of the safety net's generic FormatError."""
    return load(source, verify_checksum=verify_checksum, strict=strict)


def header_info(source: str | os.PathLike | bytes, *, verify_checksum: bool = True, strict: bool = False) -> dict:
    """Header fields and partition table of an OM (`ge atc --mode=6` style), validated but without
    unpacking the partitions."""
    label, view, mm = _open(source, None)
    try:
        header, hsize = _guard(label, lambda: parse_header(view, verify_checksum), strict)
        info = {"magic": MAGIC.decode(), "file_size": view.nbytes, "header_size": PREFIX_SIZE + hsize}
        for key, value in header.items():
            if key == "header_version":
                info[key] = f"{value[0]}.{value[1]}"
            elif key in ("checksum", "body_checksum", "header_checksum"):
                info[key] = value.hex() if value is not None else None
            elif key == "partitions":
                info[key] = [{"type": partition_name(p["type"]), "type_id": p["type"], "submodel": p["submodel"],
                              "offset": p["offset"], "size": p["size"]} for p in value]
            else:
                info[key] = value
        return info
    finally:
        _close(view, mm)


def load(source, *, label: str | None = None, verify_checksum: bool = True, strict: bool = False,
         maps: dict | None = None) -> GeModel:
    """read_om's work; `maps`: parse's."""
    label, view, mm = _open(source, label)
    model = None
    try:
        model = _guard(label, lambda: parse(view, verify_checksum, maps), strict)
        return model
    finally:
        if model is None or not isinstance(model.weight_data, memoryview):
            _close(view, mm)


def _guard(label: str, fn, strict: bool = False):
    try:
        return fn()
    except Bad as e:
        raise FormatError(f"{label}: {e}") from None
    except _SAFETY_NET as e:
        if strict:
            raise
        raise FormatError(f"{label}: malformed OM ({type(e).__name__}: {e})") from None


def _open(source, label):
    if isinstance(source, (bytes, bytearray, memoryview)):
        view = memoryview(source)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        return label or BYTES_LABEL, view, None
    try:
        path = os.fspath(source)
    except TypeError:
        raise FormatError(f"read_om: expected a path or bytes, got {type(source).__name__}") from None
    label = label or str(path)
    try:
        with os.fdopen(open_regular(path, label, "the OM"), "rb") as f:  # a FIFO or device: refused, no hang
            size = os.fstat(f.fileno()).st_size
            if size < MIN_FILE_SIZE:
                data = f.read(MIN_FILE_SIZE)
                _guard(label, lambda: _check_prefix(memoryview(data)))
            if size > MAX_TOTAL_SIZE:
                raise FormatError(f"{label}: file is {size} bytes, more than the {MAX_TOTAL_SIZE}-byte limit")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise FormatError(f"{label}: cannot read: {e.strerror or e}") from None
    return label, memoryview(mm), mm


def _close(view: memoryview, mm) -> None:
    view.release()
    if mm is not None:
        try:
            mm.close()
        except BufferError:  # a slice is still referenced (e.g. from a traceback); the GC closes it
            pass


# ---------------------------------------------------------------- header and partition table


def _looks_like_onnx(head: bytes) -> bool:
    """An ONNX ModelProto as exporters write it: ir_version (field 1, a small varint) first, then
    producer_name, graph or opset_import (fields 2, 7, 8)."""
    return len(head) >= 3 and head[0] == 0x08 and head[1] < 0x80 and head[2] in (0x12, 0x1a, 0x22, 0x3a, 0x42)


#: CANN's ModelFileHeader: a 256-byte C struct behind the same magic (its head_size field sits where
#: ge keeps its msgpack header's length); the name and platform_version it holds, NUL-padded
CANN_HEAD_SIZE = 256
CANN_NAME, CANN_PLATFORM = slice(84, 116), slice(156, 176)
#: the first byte of ge's header, a msgpack map (fixmap, map16, map32); CANN's version field is not one
_MSGPACK_MAPS = set(range(0x80, 0x90)) | {0xDE, 0xDF}


def _is_cann_om(view: memoryview, hsize: int) -> bool:
    return hsize == CANN_HEAD_SIZE and view.nbytes >= CANN_HEAD_SIZE and view[PREFIX_SIZE] not in _MSGPACK_MAPS


def _cann_message(view: memoryview) -> str:
    def text(field: slice) -> str:
        return bytes(view[field]).split(b"\0", 1)[0].decode("ascii", "replace")
    name, soc = text(CANN_NAME), text(CANN_PLATFORM)
    about = ", ".join(x for x in (f"model '{name}'" if name else "", f"soc_version {soc}" if soc else "") if x)
    return (f"written by CANN's ATC{f' ({about})' if about else ''}, not by ge: ge runs only the OMs it "
            f"compiles; recompile the ONNX model with `ge atc`")


def _check_prefix(view: memoryview) -> int:
    size = view.nbytes
    head = bytes(view[:len(MAGIC)])
    if head != MAGIC:
        if size < len(MAGIC) and MAGIC.startswith(head):
            raise Bad(f"truncated: file is {size} bytes, an OM has at least {MIN_FILE_SIZE}")
        if _looks_like_onnx(head):
            raise Bad("bad magic: this is an ONNX model, not an OM; compile it with `ge atc` first")
        raise Bad("bad magic (not an OM file)")
    if size < MIN_FILE_SIZE:
        raise Bad(f"truncated: file is {size} bytes, an OM has at least {MIN_FILE_SIZE}")
    if size > MAX_TOTAL_SIZE:
        raise Bad(f"file is {size} bytes, more than the {MAX_TOTAL_SIZE}-byte limit")
    hsize = int.from_bytes(view[len(MAGIC):PREFIX_SIZE], "little")
    if _is_cann_om(view, hsize):
        raise Bad(_cann_message(view))
    if not 1 <= hsize <= MAX_HEADER_SIZE:
        raise Bad(f"header length {hsize} is out of range (1..{MAX_HEADER_SIZE})")
    if PREFIX_SIZE + hsize > size:
        raise Bad(f"truncated: header ends at {PREFIX_SIZE + hsize} beyond file size {size}")
    return hsize


def parse_header(view: memoryview, verify_checksum: bool = True) -> tuple[dict, int]:
    """Validated header map (known fields only, tuples where declared) and the header length H."""
    hsize = _check_prefix(view)
    size = view.nbytes
    raw = view[PREFIX_SIZE:PREFIX_SIZE + hsize]
    header = _unpack(raw, "header")
    if type(header) is not dict:
        raise Bad(f"header is a {tname(header)}, not a map")
    version = header.get("header_version")
    if (type(version) is not list or len(version) != 2
            or any(type(x) is not int or not 0 <= x <= MAX_INT for x in version)):
        raise Bad(f"header has no valid header_version (got {show(version)})")
    major, minor = version
    if major > FORMAT_VERSION[0]:
        raise Bad(f"OM format version {major}.{minor} is newer than this ge supports ({FORMAT_VERSION[0]}.x)")
    if major < FORMAT_VERSION[0]:
        raise Bad(f"OM format version {major}.{minor} is not supported (this ge reads {FORMAT_VERSION[0]}.x)")

    out = {"header_version": (major, minor), **decode(HEADER, header, "header")}
    if out["is_encrypt"]:
        raise Bad("encrypted OM files are not supported (is_encrypt != 0)")
    table = out.pop("partitions")

    if verify_checksum:
        if bytes(raw[-CHECKSUM_SIZE - 2:-CHECKSUM_SIZE]) != CHECKSUM_TAIL or bytes(raw[-CHECKSUM_SIZE:]) != out["header_checksum"]:
            raise Bad("header checksum is not the header's last field (file is corrupt or was modified)")
        if sha256(view[:PREFIX_SIZE + hsize - CHECKSUM_SIZE]) != out["header_checksum"]:
            raise Bad("header checksum mismatch (file is corrupt or was modified)")
    if (major, minor) >= BODY_CHECKSUM_SINCE and out["body_checksum"] is None:
        raise Bad(f"header has no 'body_checksum' (format {major}.{minor} checks its model data with it)")

    body = PREFIX_SIZE + hsize
    parts, seen = [], set()
    for k, p in enumerate(table):
        kind, sub, offset, psize = p.type, p.submodel, p.offset, p.size
        name = partition_name(kind)
        if sub >= out["model_num"]:
            raise Bad(f"partition {name} belongs to submodel {sub} but the header says model_num {out['model_num']}")
        if offset < body:
            raise Bad(f"partition {name} starts at {offset}, inside the header (which ends at {body})")
        if offset + psize > size:
            raise Bad(f"truncated: partition {name} ends at {offset + psize} beyond file size {size}")
        if (kind, sub) in seen:
            raise Bad(f"partition {name} of submodel {sub} appears twice")
        seen.add((kind, sub))
        parts.append({"type": kind, "submodel": sub, "offset": offset, "size": psize})
    for sub in range(out["model_num"]):
        for kind in REQUIRED_PARTITIONS:
            if (kind, sub) not in seen:
                raise Bad(f"partition {partition_name(kind)} of submodel {sub} is missing")
    ordered = sorted((p for p in parts if p["size"]), key=lambda p: p["offset"])
    for a, b in zip(ordered, ordered[1:]):
        if a["offset"] + a["size"] > b["offset"]:
            raise Bad(f"partitions {partition_name(a['type'])} and {partition_name(b['type'])} overlap")
    out["partitions"] = parts

    end = body + out["length"]
    if end > size:
        raise Bad(f"truncated: model data ends at {end} beyond file size {size}")
    if end < size:
        raise Bad(f"{size - end} unexpected bytes after the model data (file is corrupt or was modified)")
    if verify_checksum and out["is_checksum"] and sha256(view[body:]) != out["checksum"]:  # before 1.9
        raise Bad("checksum mismatch (file is corrupt or was modified)")
    if verify_checksum and out["body_checksum"] is not None and body_checksum(view[body:]) != out["body_checksum"]:
        raise Bad("checksum mismatch (file is corrupt or was modified)")
    return out, hsize


def _unpack(raw: memoryview, what: str):
    n = raw.nbytes
    try:
        return msgpack.unpackb(raw, raw=False, strict_map_key=True, use_list=True,
                               max_str_len=min(n, MAX_STR_LEN), max_bin_len=n, max_array_len=min(n, MAX_ARRAY_LEN),
                               max_map_len=min(n // 2, MAX_MAP_LEN), max_ext_len=0)
    except Exception as e:  # msgpack raises ValueError, ExtraData, FormatError, StackError, UnicodeDecodeError...
        raise Bad(f"{what} is not valid msgpack ({type(e).__name__}: {clip(str(e))})") from None


# ---------------------------------------------------------------- the model


def parse(view: memoryview, verify_checksum: bool = True, maps: dict | None = None):
    """The model in `view`. `maps` (the writer's self-check): the MODEL_DEF and TASK_INFO maps by
    (type, submodel), as the writer packed them into these partitions, taken instead of unpacking
    their bytes again; everything else is read and checked as always."""
    header, _ = parse_header(view, verify_checksum)
    if header["has_unknown_shape"]:
        return _parse_dynamic(view, header, maps)
    if header["model_num"] != 1:
        raise Bad(f"holds {header['model_num']} models but has_unknown_shape is false (only a dynamic root "
                  f"model has submodels)")
    where = {p["type"]: p for p in header["partitions"] if p["submodel"] == 0}

    def body(kind):
        p = where[kind]
        return view[p["offset"]:p["offset"] + p["size"]]

    md = _part_map(view, where[MODEL_DEF], "MODEL_DEF", maps)
    ti = _part_map(view, where[TASK_INFO], "TASK_INFO", maps)
    model = _model(md, ti, where[WEIGHTS_DATA]["size"])
    model.atc_cmdline = header["atc_cmdline"]
    if header["name"] != model.name:
        raise Bad(f"header names the model '{clip(header['name'])}' but MODEL_DEF names it '{clip(model.name)}'")
    if header["platform_version"] != model.soc_version:
        raise Bad(f"header platform_version '{clip(header['platform_version'])}' differs from MODEL_DEF "
                  f"soc_version '{clip(model.soc_version)}'")
    if header["ops"] != len(model.tasks):
        raise Bad(f"header says {header['ops']} ops but TASK_INFO holds {len(model.tasks)} tasks")
    if where[WEIGHTS_DATA]["size"]:
        model.weight_data = body(WEIGHTS_DATA)  # a view of the file: no copy
    return model


def _part_map(view: memoryview, p: dict, what: str, maps: dict | None):
    """Partition `p` unpacked, or its map in `maps` (see parse)."""
    if maps is not None:
        return maps[(p["type"], p["submodel"])]
    return _unpack(view[p["offset"]:p["offset"] + p["size"]], what)


def _parse_dynamic(view: memoryview, header: dict, maps: dict | None = None):
    """Root model (submodel 0) plus its static submodels, which share the root's WEIGHTS_DATA. (The
    root's modules are imported here: a static OM's reader needs neither.)"""
    from .root import decode_root
    from .root_check import check_root
    where = {(p["type"], p["submodel"]): p for p in header["partitions"]}

    def body(kind, sub):
        p = where[(kind, sub)]
        return view[p["offset"]:p["offset"] + p["size"]]

    shared = where[(WEIGHTS_DATA, 0)]["size"]
    root_md = _part_map(view, where[(MODEL_DEF, 0)], "root MODEL_DEF", maps)
    if type(root_md) is not dict or root_md.get("root") is not True:
        raise Bad("has_unknown_shape is set but submodel 0 is not a root model")
    root = decode_root(root_md, _part_map(view, where[(TASK_INFO, 0)], "root TASK_INFO", maps), shared)
    if header["model_num"] != 1 + root_md["submodels"]:  # decode_root checked its type
        raise Bad(f"header model_num {header['model_num']} differs from 1 + the root's submodels")
    for sub in range(1, header["model_num"]):
        if where[(WEIGHTS_DATA, sub)]["size"]:
            raise Bad(f"submodel {sub} has WEIGHTS_DATA of its own; submodels read the root's shared weights")
        m = _model(_part_map(view, where[(MODEL_DEF, sub)], f"submodel {sub} MODEL_DEF", maps),
                   _part_map(view, where[(TASK_INFO, sub)], f"submodel {sub} TASK_INFO", maps), shared,
                   f"submodels[{sub}].")
        if m.weight_size != shared:
            raise Bad(f"submodel {sub} has a WEIGHT allocation of {m.weight_size} bytes; the shared weights are {shared}")
        for a in m.weight_files:  # a submodel reads the root's weight files, as they are
            if root.weight_files.get(a.file) != a.size:
                raise Bad(f"submodel {sub} allocation {a.id} ({FILE_CONSTANT}) is weight file '{clip(a.file)}' of "
                          f"{a.size} bytes; the root's weight_files hold "
                          + (f"{root.weight_files[a.file]} bytes" if a.file in root.weight_files else "no such file"))
        root.submodels.append(m)
    root.atc_cmdline = header["atc_cmdline"]
    if header["name"] != root.name:
        raise Bad(f"header names the model '{clip(header['name'])}' but the root MODEL_DEF names it '{clip(root.name)}'")
    ops = len(root.nodes) + sum(len(m.tasks) for m in root.submodels)
    if header["ops"] != ops:
        raise Bad(f"header says {header['ops']} ops but the root and its submodels hold {ops}")
    for c in root.clusters:
        if c.kind == "KNOWN" and c.submodel >= len(root.submodels):
            raise Bad(f"root cluster {c.index} names submodel {c.submodel}, which does not exist")
    check_root(root)
    if root.mode == GEARS:  # the gears' own outputs say which dims vary (older OMs stored gear 0's)
        root.outputs = gear_descs([m.outputs for m in root.submodels])
    if shared:
        root.weight_data = body(WEIGHTS_DATA, 0)  # a view of the file: no copy
    return root


def _model(md, ti, weight_bytes: int, at: str = "") -> GeModel:
    """A static (sub)model: MODEL_DEF and TASK_INFO decoded as their records (records.py: every
    field's type and range), then their cross-references checked. `at`: the submodel's path."""
    md, ti = decode(records.MODEL_DEF, md, f"{at}MODEL_DEF"), decode(records.TASK_INFO, ti, f"{at}TASK_INFO")
    allocations = _allocations(md["allocations"], f"{at}MODEL_DEF")
    place = _Placer(allocations)
    inputs, outputs = (_descs(md[key], f"{at}MODEL_DEF.{key}", place) for key in ("inputs", "outputs"))
    _check_io_indexes(allocations, inputs, outputs, f"{at}MODEL_DEF")
    tensors = _tensors(md["tensors"], f"{at}MODEL_DEF.tensors", place)
    weights = _weights(md["weights"], f"{at}MODEL_DEF.weights", allocations, weight_bytes)
    _check_sizes(md, allocations, f"{at}MODEL_DEF")
    tasks = _tasks(ti["tasks"], f"{at}TASK_INFO.tasks", place, allocations[WORKSPACE_ID].size)
    _check_io_args(tasks, inputs + outputs, f"{at}TASK_INFO.tasks")
    df = ti["dataflow"]
    dataflow = None if df is None else _dataflow(df, f"{at}TASK_INFO.dataflow", tasks, allocations)
    return GeModel(name=md["name"], inputs=inputs, outputs=outputs, allocations=allocations, tensors=tensors,
                   tasks=tasks, weights=weights, soc_version=md["soc_version"], opset=md["opset"], attrs=md["attrs"],
                   dataflow=dataflow)


def _allocations(records_: list[Allocation], path: str) -> list[Allocation]:
    out = []
    for k, a in enumerate(records_):
        where = f"{path}.allocations[{k}]"
        if a.id != k:
            raise Bad(f"{where} has id {a.id} (ids must equal their position)")
        if k in _FIXED_KINDS and a.kind != _FIXED_KINDS[k]:
            raise Bad(f"{where} must be {_FIXED_KINDS[k]}, not {a.kind}")
        if a.kind == FILE_CONSTANT:
            check_weight_file_name(a.file, f"{where} ({a.kind})")
        elif a.file:
            raise Bad(f"{where} ({a.kind}) names a weight file '{clip(a.file)}'; only {FILE_CONSTANT} allocations do")
        out.append(a)
    if len(out) < len(_FIXED_KINDS):
        raise Bad(f"{path} has {len(out)} allocations; WEIGHT, FEATURE_MAP and WORKSPACE are required")
    files = [a.file for a in out if a.kind == FILE_CONSTANT]
    if len(set(files)) != len(files):
        raise Bad(f"{path}: weight file '{clip(next(f for f in files if files.count(f) > 1))}' has two "
                  f"{FILE_CONSTANT} allocations")
    return out


class _Placer:
    """Checks that (allocation, offset, nbytes) lies inside an existing allocation."""

    def __init__(self, allocations: list[Allocation]):
        self.allocations = allocations
        self.sizes = [a.size for a in allocations]

    def fits(self, allocs, offsets, nbytes) -> bool:
        """Whether every (allocation, offset, nbytes) of these columns fits, all at once (a call
        says which one does not)."""
        if not allocs:
            return True
        return max(allocs) < len(self.sizes) and all(map(le, map(add, offsets, nbytes), map(self.sizes.__getitem__, allocs)))

    def __call__(self, alloc: int, offset: int, nbytes: int, where) -> None:
        """`where()`: the label of what is placed, made only for a message."""
        if alloc >= len(self.allocations):
            raise Bad(f"{where()}: allocation {alloc} does not exist (the model has {len(self.allocations)})")
        a = self.allocations[alloc]
        if offset + nbytes > a.size:
            raise Bad(f"{where()}: offset {offset} + {nbytes} bytes exceeds allocation {alloc} ({a.kind}) size {a.size}")


def _descs(records_: list[TensorDesc], path: str, place: _Placer) -> list[TensorDesc]:
    for k, d in enumerate(records_):
        place(d.allocation, 0, nbytes_of(d.dtype, d.shape), lambda: f"{path}[{k}] '{clip(d.name)}'")
    return records_


def _check_io_indexes(allocations: list, inputs: list, outputs: list, path: str) -> None:
    for a in allocations:
        if a.kind in (INPUT, OUTPUT):
            n = len(inputs) if a.kind == INPUT else len(outputs)
            if not 0 <= a.io_index < n:
                raise Bad(f"{path}.allocations[{a.id}] ({a.kind}) has io_index {a.io_index}, but the model has {n} "
                          f"{a.kind.lower()}s")
    for key, kind, descs in (("inputs", INPUT, inputs), ("outputs", OUTPUT, outputs)):
        for k, d in enumerate(descs):  # each I/O its own allocation, the one whose io_index it is
            home = allocations[d.allocation]
            if home.kind != kind or home.io_index != k:
                raise Bad(f"{path}.{key}[{k}] '{clip(d.name)}': allocation {d.allocation} is {home.kind} with "
                          f"io_index {home.io_index}, not {kind} {k}")


def _tensors(records_: list[TensorPlan], path: str, place: _Placer) -> list[TensorPlan]:
    if records_:  # the columns at once; the loop below, which says what is wrong, only when something is
        _, allocs, offsets, nbytes, dtypes, shapes, *_ = zip(*records_)
        if list(nbytes) == nbytes_list(dtypes, shapes) and place.fits(allocs, offsets, nbytes):
            return records_
    for k, t in enumerate(records_):
        def where(k=k, t=t):
            return f"{path}[{k}] '{clip(t.name)}'"
        if t.nbytes != nbytes_of(t.dtype, t.shape):
            check_nbytes(t.nbytes, t.dtype, t.shape, where())
        place(t.allocation, t.offset, t.nbytes, where)
    return records_


def _weights(records_: list[WeightDesc], path: str, allocations: list, weight_bytes: int) -> list[WeightDesc]:
    weight_size = allocations[WEIGHT_ID].size
    if weight_bytes > weight_size:
        raise Bad(f"WEIGHTS_DATA is {weight_bytes} bytes, more than the WEIGHT allocation size {weight_size}")
    if records_ and not _inline_and_fit(records_, weight_bytes):
        _check_weights(records_, path, allocations, weight_bytes)
    unused = {a.file for a in allocations if a.kind == FILE_CONSTANT} - {w.file for w in records_}
    if unused:
        raise Bad(f"{path}: weight file '{clip(sorted(unused)[0])}' has a {FILE_CONSTANT} allocation but no weight")
    return records_


def _inline_and_fit(records_: list[WeightDesc], weight_bytes: int) -> bool:
    """The common case, all weights at once: inline (in the WEIGHT allocation, no file), of their
    dtype and shape's size, inside WEIGHTS_DATA."""
    _, dtypes, shapes, offsets, nbytes, files, _, _, allocs = zip(*records_)
    return (set(allocs) == {WEIGHT_ID} and not any(files) and list(nbytes) == nbytes_list(dtypes, shapes)
            and max(map(add, offsets, nbytes)) <= weight_bytes)


def _check_weights(records_: list[WeightDesc], path: str, allocations: list, weight_bytes: int) -> None:
    for k, w in enumerate(records_):
        inline_and_fits = (w.allocation == WEIGHT_ID and not w.file and w.offset + w.nbytes <= weight_bytes
                           and w.nbytes == nbytes_of(w.dtype, w.shape))
        if not inline_and_fits:  # the common case needs no more; anything else, the full check
            _check_weight(w, f"{path}[{k}] '{clip(w.name)}'", allocations, weight_bytes)


def _check_weight(w, where: str, allocations: list, weight_bytes: int) -> None:
    """One weight record: its bytes, inside the WEIGHT allocation or its file's FILE_CONSTANT one."""
    weight_size = allocations[WEIGHT_ID].size
    check_nbytes(w.nbytes, w.dtype, w.shape, where)
    if w.allocation >= len(allocations):
        raise Bad(f"{where}: allocation {w.allocation} does not exist (the model has {len(allocations)})")
    home, end = allocations[w.allocation], w.offset + w.nbytes
    if home.kind == WEIGHT:
        if end > weight_size:
            raise Bad(f"{where}: offset {w.offset} + {w.nbytes} bytes exceeds weight_size {weight_size}")
        if w.file:
            check_weight_file_name(w.file, where)
            raise Bad(f"{where}: names the weight file '{clip(w.file)}' but lives in the WEIGHT allocation "
                      f"(external weights live in their file's {FILE_CONSTANT} allocation)")
        if end > weight_bytes:
            raise Bad(f"{where}: inline weight ends at {end} beyond WEIGHTS_DATA ({weight_bytes} bytes)")
    elif home.kind == FILE_CONSTANT:
        check_weight_file_name(w.file, where)
        if w.file != home.file:
            raise Bad(f"{where}: names the weight file '{clip(w.file)}' but allocation {w.allocation} is the "
                      f"image of '{clip(home.file)}'")
        if w.file_offset != w.offset:
            raise Bad(f"{where}: file_offset {w.file_offset} differs from its offset {w.offset} in allocation "
                      f"{w.allocation} (the image of its file)")
        if end > home.size:
            raise Bad(f"{where}: offset {w.offset} + {w.nbytes} bytes exceeds weight file '{clip(w.file)}' "
                      f"({home.size} bytes)")
        if not w.sha256:
            raise Bad(f"{where}: an external weight needs its sha256")
    else:
        raise Bad(f"{where}: lives in allocation {w.allocation} ({home.kind}); weights live in WEIGHT or "
                  f"{FILE_CONSTANT} allocations")


def _check_sizes(md, allocations: list, path: str) -> None:
    """The sizes MODEL_DEF repeats (GE's ModelDef attributes) agree with its allocations."""
    sizes = {k: a.size for k, a in enumerate(allocations)}
    expected = {"memory_size": sizes[FM_ID] + sizes[WORKSPACE_ID], "weight_size": sizes[WEIGHT_ID],
                "workspace_size": sizes[WORKSPACE_ID],
                "zero_copy_memory_size": sum(a.size for a in allocations if a.kind in (INPUT, OUTPUT))}
    for key, value in expected.items():
        if md[key] != value:
            raise Bad(f"{path}.{key} is {md[key]} but the allocations add up to {value}")


def _tasks(records_, path: str, place: _Placer, workspace_size: int) -> list[TaskDef]:
    tasks = [TaskDef(t["node"], t["op_type"], t["domain"], t["opset"], t["attrs"], tuple(t["inputs"]),
                     tuple(t["outputs"]), t["workspace"]) for t in records_]
    args = [a for td in tasks for a in td.inputs + td.outputs if a is not None]
    allocs, offsets, dtypes, shapes = zip(*args) if args else ((),) * 4
    if (all(map(any, [td.outputs for td in tasks])) and max([td.workspace for td in tasks], default=0) <= workspace_size
            and place.fits(allocs, offsets, nbytes_list(dtypes, shapes))):
        return tasks  # all well, seen at once; else the loop below says what is wrong
    for k, td in enumerate(tasks):
        def where(k=k, td=td):
            return f"{path}[{k}] '{clip(td.node)}' ({clip(td.op_type)})"
        for role, args in (("inputs", td.inputs), ("outputs", td.outputs)):
            for j, a in enumerate(args):
                if a is not None:
                    place(a.allocation, a.offset, nbytes_of(a.dtype, a.shape), lambda: f"{where()}.{role}[{j}]")
        if not any(td.outputs):
            raise Bad(f"{where()}: no output (a task writes at least one)")
        if td.workspace > workspace_size:
            raise Bad(f"{where()}: workspace {td.workspace} bytes exceeds the WORKSPACE allocation size "
                      f"{workspace_size}")
    return tasks


def _check_io_args(tasks: list, descs: list, path: str) -> None:
    """A task reads a model input (writes an output) as the desc says: at its allocation's start,
    with its dtype and byte size (a Reshape-style alias may view it with another shape)."""
    io = {d.allocation: d for d in descs}
    for k, t in enumerate(tasks):
        for role, args in (("inputs", t.inputs), ("outputs", t.outputs)):
            for j, a in enumerate(args):
                d = None if a is None else io.get(a.allocation)
                if d is not None and (a.offset != 0 or a.dtype != d.dtype or nbytes_of(a.dtype, a.shape)
                                      != nbytes_of(d.dtype, d.shape)):
                    raise Bad(f"{path}[{k}] '{clip(t.node)}' ({clip(t.op_type)}).{role}[{j}]: {a.dtype} "
                              f"{list(a.shape)} at offset {a.offset} of allocation {a.allocation} does not match "
                              f"model I/O '{clip(d.name)}' ({d.dtype} {list(d.shape)})")


def _dataflow(df, path: str, tasks: list, allocations: list) -> DataflowPlan:
    """The dataflow executors' plan: each task waits for earlier tasks only, and exactly the
    feature-map and workspace arguments move, to places inside its fm_size."""
    deps, fm_offsets, fm_size = df["deps"], df["fm_offsets"], df["fm_size"]
    if len(deps) != len(tasks):
        raise Bad(f"{path}.deps has {len(deps)} entries for {len(tasks)} tasks")
    for t, d in enumerate(deps):
        if d and (max(d) >= t or len(set(d)) != len(d)):
            raise Bad(f"{path}.deps[{t}] must be distinct earlier tasks, got {show(d)}")
    alloc, _, _, _, nbytes = arg_rows(tasks)
    if len(fm_offsets) != len(alloc):
        raise Bad(f"{path}.fm_offsets has {len(fm_offsets)} entries for {len(alloc)} task arguments")
    moves = np.array([a.kind in (FEATURE_MAP, WORKSPACE) for a in allocations])[alloc] & (nbytes > 0)
    offsets = np.array(fm_offsets, np.int64)  # (each in [-1, MAX_INT]: o + n > fm_size as o > fm_size - n)
    if not ((offsets >= 0) == moves).all() or (moves & (offsets > fm_size - nbytes)).any():
        for k, (o, a, n) in enumerate(zip(fm_offsets, alloc.tolist(), nbytes.tolist())):  # which one
            moves = allocations[a].kind in (FEATURE_MAP, WORKSPACE) and n > 0
            if (o >= 0) != moves or (moves and o + n > fm_size):
                what = f"an offset in [0, {fm_size - n}]" if moves else "-1 (it keeps its place)"
                raise Bad(f"{path}.fm_offsets[{k}] must be {what}, got {show(o)}")
    return DataflowPlan(tuple(tuple(d) for d in deps), tuple(fm_offsets), fm_size, df["lower_bound"])
