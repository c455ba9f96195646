"""Read an OM file (format v1) into a GeModel, trusting nothing until it has been checked.

Order of checks: file size, magic, header length (bounded before anything is read), msgpack header
(unpacked with limits), major version, header checksum, partition table (inside the file, no
overlap, required partitions present), length, body checksum, then each partition unpacked with
limits derived from its size and validated field by field (types, ranges, offsets inside their
allocation, dtypes, shapes, nbytes). Every failure is a FormatError whose message starts with the
file name (or "<bytes>").

A path is memory-mapped read-only: weight_data is a memoryview slice of the map (no copy). The map
stays alive as long as that view does.
"""
from __future__ import annotations

import hashlib
import mmap
import os

import msgpack

from ge.core.errors import FormatError
from ge.core.weight_files import open_regular
from ge.core.ge_model import (ALLOCATION_KINDS, FEATURE_MAP, FILE_CONSTANT, FM_ID, INPUT, OUTPUT, WEIGHT, WEIGHT_ID,
                              WORKSPACE, WORKSPACE_ID, Allocation, Arg, DataflowPlan, GeModel, TaskDef, TensorDesc,
                              TensorPlan, WeightDesc, arg_rows)

from .decode import Bad, Fields, attr_map, check_nbytes, check_weight_file_name, clip, nbytes_of, show, tname
from .root import decode_root
from .root_check import check_root
from .schema import (CHECKSUM_SIZE, CHECKSUM_TAIL, FORMAT_VERSION, MAGIC, MAX_ALLOCATION_SIZE, MAX_ARRAY_LEN,
                     MAX_HEADER_SIZE, MAX_INT, MAX_MAP_LEN, MAX_MODELS, MAX_OPSET, MAX_PARTITIONS, MAX_STR_LEN,
                     MAX_TOTAL_SIZE, MIN_FILE_SIZE, MODEL_DEF, PREFIX_SIZE, REQUIRED_PARTITIONS, TASK_INFO, WEIGHTS_DATA,
                     partition_name)

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
            elif key in ("checksum", "header_checksum"):
                info[key] = value.hex()
            elif key == "partitions":
                info[key] = [{"type": partition_name(p["type"]), "type_id": p["type"], "submodel": p["submodel"],
                              "offset": p["offset"], "size": p["size"]} for p in value]
            else:
                info[key] = value
        return info
    finally:
        _close(view, mm)


def load(source, *, label: str | None = None, verify_checksum: bool = True, strict: bool = False) -> GeModel:
    label, view, mm = _open(source, label)
    model = None
    try:
        model = _guard(label, lambda: parse(view, verify_checksum), strict)
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


def _check_prefix(view: memoryview) -> int:
    size = view.nbytes
    head = bytes(view[:len(MAGIC)])
    if head != MAGIC:
        if size < len(MAGIC) and MAGIC.startswith(head):
            raise Bad(f"truncated: file is {size} bytes, an OM has at least {MIN_FILE_SIZE}")
        raise Bad("bad magic (not an OM file)")
    if size < MIN_FILE_SIZE:
        raise Bad(f"truncated: file is {size} bytes, an OM has at least {MIN_FILE_SIZE}")
    if size > MAX_TOTAL_SIZE:
        raise Bad(f"file is {size} bytes, more than the {MAX_TOTAL_SIZE}-byte limit")
    hsize = int.from_bytes(view[len(MAGIC):PREFIX_SIZE], "little")
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

    f = Fields(header, "header")
    out = {"header_version": (major, minor)}
    out["checksum"] = f.digest("checksum")
    out["length"] = f.int("length", hi=MAX_TOTAL_SIZE)
    out["is_encrypt"] = f.int("is_encrypt", hi=255)
    if out["is_encrypt"]:
        raise Bad("encrypted OM files are not supported (is_encrypt != 0)")
    out["is_checksum"] = f.int("is_checksum", hi=1)
    out["model_type"] = f.int("model_type", hi=255)
    out["gen_mode"] = f.int("gen_mode", hi=1)
    out["name"] = f.str("name")
    out["ops"] = f.int("ops")
    out["om_ir_version"] = f.int("om_ir_version")
    out["model_num"] = f.int("model_num", lo=1, hi=MAX_MODELS)
    out["platform_version"] = f.str("platform_version")
    out["platform_type"] = f.int("platform_type", hi=255)
    out["has_unknown_shape"] = f.bool("has_unknown_shape")
    out["atc_cmdline"] = f.str("atc_cmdline")
    table = f.list("partitions", MAX_PARTITIONS)
    out["header_checksum"] = f.digest("header_checksum")

    if verify_checksum:
        if bytes(raw[-CHECKSUM_SIZE - 2:-CHECKSUM_SIZE]) != CHECKSUM_TAIL or bytes(raw[-CHECKSUM_SIZE:]) != out["header_checksum"]:
            raise Bad("header checksum is not the header's last field (file is corrupt or was modified)")
        if hashlib.sha256(view[:PREFIX_SIZE + hsize - CHECKSUM_SIZE]).digest() != out["header_checksum"]:
            raise Bad("header checksum mismatch (file is corrupt or was modified)")

    body = PREFIX_SIZE + hsize
    parts, seen = [], set()
    for k, p in enumerate(table):
        pf = Fields(p, f"partition table entry {k}")
        kind = pf.int("type")
        name = partition_name(kind)
        sub = pf.int("submodel")
        if sub >= out["model_num"]:
            raise Bad(f"partition {name} belongs to submodel {sub} but the header says model_num {out['model_num']}")
        offset, psize = pf.int("offset", hi=MAX_TOTAL_SIZE), pf.int("size", hi=MAX_TOTAL_SIZE)
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
    if verify_checksum and out["is_checksum"]:
        if hashlib.sha256(view[body:]).digest() != out["checksum"]:
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


def parse(view: memoryview, verify_checksum: bool = True):
    header, _ = parse_header(view, verify_checksum)
    if header["has_unknown_shape"]:
        return _parse_dynamic(view, header)
    if header["model_num"] != 1:
        raise Bad(f"holds {header['model_num']} models but has_unknown_shape is false (only a dynamic root "
                  f"model has submodels)")
    where = {p["type"]: p for p in header["partitions"] if p["submodel"] == 0}

    def body(kind):
        p = where[kind]
        return view[p["offset"]:p["offset"] + p["size"]]

    md = _unpack(body(MODEL_DEF), "MODEL_DEF")
    ti = _unpack(body(TASK_INFO), "TASK_INFO")
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


def _parse_dynamic(view: memoryview, header: dict):
    """Root model (submodel 0) plus its static submodels, which share the root's WEIGHTS_DATA."""
    where = {(p["type"], p["submodel"]): p for p in header["partitions"]}

    def body(kind, sub):
        p = where[(kind, sub)]
        return view[p["offset"]:p["offset"] + p["size"]]

    shared = where[(WEIGHTS_DATA, 0)]["size"]
    root_md = _unpack(body(MODEL_DEF, 0), "root MODEL_DEF")
    if type(root_md) is not dict or root_md.get("root") is not True:
        raise Bad("has_unknown_shape is set but submodel 0 is not a root model")
    root = decode_root(root_md, _unpack(body(TASK_INFO, 0), "root TASK_INFO"), shared)
    if header["model_num"] != 1 + root_md["submodels"]:  # decode_root checked its type
        raise Bad(f"header model_num {header['model_num']} differs from 1 + the root's submodels")
    for sub in range(1, header["model_num"]):
        if where[(WEIGHTS_DATA, sub)]["size"]:
            raise Bad(f"submodel {sub} has WEIGHTS_DATA of its own; submodels read the root's shared weights")
        m = _model(_unpack(body(MODEL_DEF, sub), f"submodel {sub} MODEL_DEF"),
                   _unpack(body(TASK_INFO, sub), f"submodel {sub} TASK_INFO"), shared)
        if m.weight_size != shared:
            raise Bad(f"submodel {sub} has a WEIGHT allocation of {m.weight_size} bytes; the shared weights are {shared}")
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
    if shared:
        root.weight_data = body(WEIGHTS_DATA, 0)  # a view of the file: no copy
    return root


def _model(md, ti, weight_bytes: int) -> GeModel:
    f = Fields(md, "MODEL_DEF")
    name = f.str("name")
    soc = f.str("soc_version")
    opset = f.int("opset", lo=1, hi=MAX_OPSET)

    allocations = []
    for k, a in enumerate(f.list("allocations")):
        af = Fields(a, f"MODEL_DEF allocation {k}")
        aid = af.int("id")
        if aid != k:
            raise Bad(f"MODEL_DEF allocation {k} has id {aid} (ids must equal their position)")
        kind = af.str("kind")
        if kind not in ALLOCATION_KINDS:
            raise Bad(f"MODEL_DEF allocation {k} has unknown kind '{clip(kind)}'")
        if k in _FIXED_KINDS and kind != _FIXED_KINDS[k]:
            raise Bad(f"MODEL_DEF allocation {k} must be {_FIXED_KINDS[k]}, not {kind}")
        file = af.str("file") if "file" in a else ""  # since format 1.1
        if kind == FILE_CONSTANT:
            check_weight_file_name(file, f"MODEL_DEF allocation {k} ({kind})")
        elif file:
            raise Bad(f"MODEL_DEF allocation {k} ({kind}) names a weight file '{clip(file)}'; only "
                      f"{FILE_CONSTANT} allocations do")
        allocations.append(Allocation(aid, kind, af.int("size", hi=MAX_ALLOCATION_SIZE), af.int("io_index", lo=-1),
                                      file))
    if len(allocations) < len(_FIXED_KINDS):
        raise Bad(f"MODEL_DEF has {len(allocations)} allocations; WEIGHT, FEATURE_MAP and WORKSPACE are required")
    files = [a.file for a in allocations if a.kind == FILE_CONSTANT]
    if len(set(files)) != len(files):
        raise Bad(f"MODEL_DEF: weight file '{clip(next(f for f in files if files.count(f) > 1))}' has two "
                  f"{FILE_CONSTANT} allocations")

    def check_place(alloc: int, offset: int, nbytes: int, what: str) -> None:
        if alloc >= len(allocations):
            raise Bad(f"{what}: allocation {alloc} does not exist (the model has {len(allocations)})")
        a = allocations[alloc]
        if offset + nbytes > a.size:
            raise Bad(f"{what}: offset {offset} + {nbytes} bytes exceeds allocation {alloc} ({a.kind}) "
                      f"size {a.size}")

    def descs(key: str) -> list[TensorDesc]:
        out = []
        for k, d in enumerate(f.list(key)):
            df = Fields(d, f"MODEL_DEF {key[:-1]} {k}")
            dname = df.str("name")
            df.where = f"MODEL_DEF {key[:-1]} {k} '{clip(dname)}'"
            dtype, shape = df.dtype("dtype"), df.shape("shape")
            alloc = df.int("allocation")
            check_place(alloc, 0, nbytes_of(dtype, shape), df.where)
            out.append(TensorDesc(dname, dtype, shape, alloc))
        return out

    inputs, outputs = descs("inputs"), descs("outputs")
    for a in allocations:
        if a.kind in (INPUT, OUTPUT):
            n = len(inputs) if a.kind == INPUT else len(outputs)
            if not 0 <= a.io_index < n:
                raise Bad(f"MODEL_DEF allocation {a.id} ({a.kind}) has io_index {a.io_index}, "
                          f"but the model has {n} {a.kind.lower()}s")
    for key, kind, descs_ in (("input", INPUT, inputs), ("output", OUTPUT, outputs)):
        for k, d in enumerate(descs_):  # each I/O its own allocation, the one whose io_index it is
            home = allocations[d.allocation]
            if home.kind != kind or home.io_index != k:
                raise Bad(f"MODEL_DEF {key} {k} '{clip(d.name)}': allocation {d.allocation} is {home.kind} with "
                          f"io_index {home.io_index}, not {kind} {k}")

    tensors = []
    for k, t in enumerate(f.list("tensors")):
        tf = Fields(t, f"MODEL_DEF tensor {k}")
        tname = tf.str("name")
        tf.where = f"MODEL_DEF tensor {k} '{clip(tname)}'"
        alloc, offset, nbytes = tf.int("allocation"), tf.int("offset"), tf.int("nbytes")
        dtype, shape = tf.dtype("dtype"), tf.shape("shape")
        check_nbytes(nbytes, dtype, shape, tf.where)
        check_place(alloc, offset, nbytes, tf.where)
        tensors.append(TensorPlan(tname, alloc, offset, nbytes, dtype, shape, tf.int("first", lo=-1),
                                  tf.int("last", lo=-1), tf.str("alias_of")))

    weight_size = allocations[WEIGHT_ID].size
    if weight_bytes > weight_size:
        raise Bad(f"WEIGHTS_DATA is {weight_bytes} bytes, more than the WEIGHT allocation size {weight_size}")
    weights = []
    for k, w in enumerate(f.list("weights")):
        wf = Fields(w, f"MODEL_DEF weight {k}")
        wname = wf.str("name")
        wf.where = f"MODEL_DEF weight {k} '{clip(wname)}'"
        dtype, shape = wf.dtype("dtype"), wf.shape("shape")
        offset, nbytes = wf.int("offset"), wf.int("nbytes")
        check_nbytes(nbytes, dtype, shape, wf.where)
        file, file_offset, sha = wf.str("file"), wf.int("file_offset"), wf.str("sha256")
        if sha and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
            raise Bad(f"{wf.where}: sha256 '{clip(sha)}' is not 64 lowercase hex digits")
        alloc = wf.int("allocation") if "allocation" in w else WEIGHT_ID  # since format 1.1
        if alloc >= len(allocations):
            raise Bad(f"{wf.where}: allocation {alloc} does not exist (the model has {len(allocations)})")
        home = allocations[alloc]
        if home.kind == WEIGHT:
            if offset + nbytes > weight_size:
                raise Bad(f"{wf.where}: offset {offset} + {nbytes} bytes exceeds weight_size {weight_size}")
            if file:
                check_weight_file_name(file, wf.where)
                raise Bad(f"{wf.where}: names the weight file '{clip(file)}' but lives in the WEIGHT allocation "
                          f"(external weights live in their file's {FILE_CONSTANT} allocation)")
            if offset + nbytes > weight_bytes:
                raise Bad(f"{wf.where}: inline weight ends at {offset + nbytes} beyond WEIGHTS_DATA "
                          f"({weight_bytes} bytes)")
        elif home.kind == FILE_CONSTANT:
            check_weight_file_name(file, wf.where)
            if file != home.file:
                raise Bad(f"{wf.where}: names the weight file '{clip(file)}' but allocation {alloc} is the image "
                          f"of '{clip(home.file)}'")
            if file_offset != offset:
                raise Bad(f"{wf.where}: file_offset {file_offset} differs from its offset {offset} in allocation "
                          f"{alloc} (the image of its file)")
            if offset + nbytes > home.size:
                raise Bad(f"{wf.where}: offset {offset} + {nbytes} bytes exceeds weight file '{clip(file)}' "
                          f"({home.size} bytes)")
            if not sha:
                raise Bad(f"{wf.where}: an external weight needs its sha256")
        else:
            raise Bad(f"{wf.where}: lives in allocation {alloc} ({home.kind}); weights live in WEIGHT or "
                      f"{FILE_CONSTANT} allocations")
        weights.append(WeightDesc(wname, dtype, shape, offset, nbytes, file, file_offset, sha, alloc))
    unused = {a.file for a in allocations if a.kind == FILE_CONSTANT} - {w.file for w in weights}
    if unused:
        raise Bad(f"MODEL_DEF: weight file '{clip(sorted(unused)[0])}' has a {FILE_CONSTANT} allocation but no weight")

    sizes = {k: a.size for k, a in enumerate(allocations)}
    expected = {"memory_size": sizes[FM_ID] + sizes[WORKSPACE_ID], "weight_size": weight_size,
                "workspace_size": sizes[WORKSPACE_ID],
                "zero_copy_memory_size": sum(a.size for a in allocations if a.kind in (INPUT, OUTPUT))}
    for key, value in expected.items():
        got = f.int(key)
        if got != value:
            raise Bad(f"MODEL_DEF {key} is {got} but the allocations add up to {value}")
    f.int("stream_num", lo=1)
    f.int("event_num")
    attrs = attr_map(f.get("attrs"), "MODEL_DEF attrs", 0)

    tasks = []
    tf = Fields(ti, "TASK_INFO")
    for k, t in enumerate(tf.list("tasks")):
        kf = Fields(t, f"TASK_INFO task {k}")
        node = kf.str("node")
        op_type = kf.str("op_type")
        kf.where = f"TASK_INFO task {k} '{clip(node)}' ({clip(op_type)})"

        def arg(a, what):
            af = Fields(a, what)
            alloc, offset = af.int("allocation"), af.int("offset")
            dtype, shape = af.dtype("dtype"), af.shape("shape")
            check_place(alloc, offset, nbytes_of(dtype, shape), what)
            return Arg(alloc, offset, dtype, shape)

        ins = tuple(None if a is None else arg(a, f"{kf.where} input {j}") for j, a in enumerate(kf.list("inputs")))
        outs = tuple(None if a is None else arg(a, f"{kf.where} output {j}") for j, a in enumerate(kf.list("outputs")))
        if all(a is None for a in outs):
            raise Bad(f"{kf.where}: no output (a task writes at least one)")
        workspace = kf.int("workspace")
        if workspace > sizes[WORKSPACE_ID]:
            raise Bad(f"{kf.where}: workspace {workspace} bytes exceeds the WORKSPACE allocation "
                      f"size {sizes[WORKSPACE_ID]}")
        tasks.append(TaskDef(node, op_type, kf.str("domain"), kf.int("opset", lo=1, hi=MAX_OPSET),
                             attr_map(kf.get("attrs"), f"{kf.where} attrs", 0), ins, outs, workspace))

    _check_io_args(tasks, inputs + outputs)
    dataflow = _dataflow(tf, tasks, allocations) if "dataflow" in ti else None  # since format 1.4
    return GeModel(name=name, inputs=inputs, outputs=outputs, allocations=allocations, tensors=tensors,
                   tasks=tasks, weights=weights, soc_version=soc, opset=opset, attrs=attrs, dataflow=dataflow)


def _check_io_args(tasks: list, descs: list) -> None:
    """A task reads a model input (writes an output) as the desc says: at its allocation's start,
    with its dtype and byte size (a Reshape-style alias may view it with another shape)."""
    io = {d.allocation: d for d in descs}
    for k, t in enumerate(tasks):
        for role, args in (("inputs", t.inputs), ("outputs", t.outputs)):
            for j, a in enumerate(args):
                d = None if a is None else io.get(a.allocation)
                if d is not None and (a.offset != 0 or a.dtype != d.dtype or nbytes_of(a.dtype, a.shape)
                                      != nbytes_of(d.dtype, d.shape)):
                    raise Bad(f"TASK_INFO task {k} '{clip(t.node)}' ({clip(t.op_type)}) {role[:-1]} {j}: "
                              f"{a.dtype} {list(a.shape)} at offset {a.offset} of allocation {a.allocation} "
                              f"does not match model I/O '{clip(d.name)}' "
                              f"({d.dtype} {list(d.shape)})")


def _dataflow(tf: "Fields", tasks: list, allocations: list) -> DataflowPlan:
    """The dataflow executors' plan: each task waits for earlier tasks only, and exactly the
    feature-map and workspace arguments move, to places inside its fm_size."""
    df = Fields(tf.get("dataflow"), "TASK_INFO dataflow")
    fm_size, lower_bound = df.int("fm_size", hi=MAX_ALLOCATION_SIZE), df.int("lower_bound", hi=MAX_ALLOCATION_SIZE)
    deps = df.list("deps")
    if len(deps) != len(tasks):
        raise Bad(f"{df.where}: 'deps' has {len(deps)} entries for {len(tasks)} tasks")
    for t, d in enumerate(deps):
        if type(d) is not list or any(type(x) is not int or not 0 <= x < t for x in d) or len(set(d)) != len(d):
            raise Bad(f"{df.where}: deps of task {t} must be distinct earlier tasks, got {show(d)}")
    alloc, _, _, _, nbytes = arg_rows(tasks)
    offsets = df.list("fm_offsets")
    if len(offsets) != len(alloc):
        raise Bad(f"{df.where}: 'fm_offsets' has {len(offsets)} entries for {len(alloc)} task arguments")
    for k, (o, a, n) in enumerate(zip(offsets, alloc.tolist(), nbytes.tolist())):
        moves = allocations[a].kind in (FEATURE_MAP, WORKSPACE) and n > 0
        if type(o) is not int or (o >= 0) != moves or (moves and o + n > fm_size) or o < -1:
            what = f"an offset in [0, {fm_size - n}]" if moves else "-1 (it keeps its place)"
            raise Bad(f"{df.where}: fm_offsets[{k}] must be {what}, got {show(o)}")
    return DataflowPlan(tuple(tuple(d) for d in deps), tuple(offsets), fm_size, lower_bound)
