"""OM format v1: round trip of every field, and malformed files that must fail as FormatError."""
from __future__ import annotations

import copy
import functools
import hashlib
import os
import random
import stat
import tracemalloc

import msgpack
import numpy as np
import pytest
import xxhash

from ge.core.model.errors import FormatError, GeError
from ge.core.model.ge_model import (FEATURE_MAP, FILE_CONSTANT, INPUT, OUTPUT, WEIGHT, WORKSPACE, Allocation, Arg, DataflowPlan, GeModel, TaskDef,
                                    TensorDesc, TensorPlan, WeightDesc, WeightLayout)
from ge.formats.om import FORMAT_VERSION, MAGIC, header_info, om_bytes, read_om, write_om
from ge.formats.om import reader, schema, writer


# No safety net: a validation gap surfaces as the raw exception and fails the test.
read_om = functools.partial(read_om, strict=True)
header_info = functools.partial(header_info, strict=True)


# ---------------------------------------------------------------- a model with every field type

SHA = hashlib.sha256(b"external").hexdigest()


def make_model(**changes) -> GeModel:
    w0 = np.arange(12, dtype=np.float32).reshape(3, 4)
    w1 = np.array([1, -2, 3], dtype=np.int64)
    weight_data = bytearray(192)
    weight_data[0:48] = w0.tobytes()
    weight_data[64:88] = w1.tobytes()
    x, y = Arg(3, 0, "float32", (2, 3, 4)), Arg(5, 0, "float32", (2, 3, 3))
    fields = dict(
        name="tiny",
        inputs=[TensorDesc("x", "float32", (2, 3, 4), 3), TensorDesc("mask", "bool", (2, 3), 4)],
        outputs=[TensorDesc("y", "float32", (2, 3, 3), 5)],
        allocations=[Allocation(0, WEIGHT, 192), Allocation(1, FEATURE_MAP, 256), Allocation(2, WORKSPACE, 64),
                     Allocation(3, INPUT, 96, 0), Allocation(4, INPUT, 6, 1), Allocation(5, OUTPUT, 72, 0),
                     Allocation(6, FILE_CONSTANT, 544, file=f"weight_{SHA}")],
        tensors=[TensorPlan("x", 3, 0, 96, "float32", (2, 3, 4), 0, 0),
                 TensorPlan("h", 1, 0, 96, "float32", (2, 3, 4), 0, 1),
                 TensorPlan("h2", 1, 0, 96, "float32", (6, 4), 1, 1, alias_of="h"),
                 TensorPlan("y", 5, 0, 72, "float32", (2, 3, 3), 1, 1),
                 TensorPlan("empty", 1, 128, 0, "float16", (0, 5), 1, 1)],
        tasks=[
            TaskDef("relu", "Relu", "", 17, {}, (x,), (Arg(1, 0, "float32", (2, 3, 4)),)),
            TaskDef("gemm", "Gemm", "", 17,
                    {"perm": [0, 2, 1], "alpha": 0.25, "mode": "constant", "transB": True, "blob": b"\x00\x01",
                     "t": np.arange(6, dtype=np.float16).reshape(2, 3), "scalar": np.array(7, dtype=np.int8),
                     "mask": np.array([True, False]), "be": np.array([1, 2], dtype=">i4"),
                     "tensors": [np.zeros((0, 2), np.uint16), np.ones(3, np.float64)],
                     "to": np.dtype("int32"), "nested": {"a": [1, [2, 3]], "b": None}, "big": 2**64 - 1,
                     "neg": -2**63, "npint": np.int64(5), "npf": np.float32(0.5), "empty": []},
                    (Arg(1, 0, "float32", (2, 3, 4)), None, Arg(0, 0, "float32", (3, 4))),
                    (y,), workspace=64),
        ],
        weights=[WeightDesc("w0", "float32", (3, 4), 0, 48),
                 WeightDesc("w1", "int64", (3,), 64, 24),
                 WeightDesc("ext", "uint8", (32,), 512, 32, file=f"weight_{SHA}", file_offset=512, sha256=SHA,
                            allocation=6)],
        weight_data=bytes(weight_data),
        soc_version="Ascend310P3",
        opset=17,
        atc_cmdline="ge atc --model=tiny.onnx --framework=5 --output=tiny",
        attrs={"memory_size": 320, "ops": {"Relu": 1, "Gemm": 1}, "lower_bound": 96, "alignment": 64,
               "ratio": 0.5, "flag": False, "list": [1, 2.5, "x"]},
    )
    fields.update(changes)
    return GeModel(**fields)


def assert_attrs_equal(a: dict, b: dict):
    assert type(b) is dict and list(a) == list(b)
    for key in a:
        assert_value_equal(a[key], b[key], key)


def assert_value_equal(a, b, where):
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray), where
        assert b.dtype == a.dtype.newbyteorder("=") and b.shape == a.shape, where
        assert np.array_equal(a, b), where
        assert b.flags.writeable, where
    elif isinstance(a, (list, tuple)):
        assert type(b) is list and len(a) == len(b), where
        for i, (x, z) in enumerate(zip(a, b)):
            assert_value_equal(x, z, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert_attrs_equal(a, b)
    elif isinstance(a, np.dtype):
        assert isinstance(b, np.dtype) and a == b, where
    else:
        assert a == b and type(b) is type(a.item() if isinstance(a, np.generic) else a), where


def assert_models_equal(m: GeModel, r: GeModel):
    for name in ("name", "inputs", "outputs", "allocations", "tensors", "weights", "soc_version", "opset",
                 "atc_cmdline"):
        assert getattr(r, name) == getattr(m, name), name
    assert type(r.inputs) is list and type(r.tensors) is list and type(r.weights) is list
    for d in r.inputs + r.outputs:
        assert type(d.shape) is tuple
    for t in r.tensors:
        assert type(t.shape) is tuple
    assert len(r.tasks) == len(m.tasks)
    for a, b in zip(m.tasks, r.tasks):
        assert (b.node, b.op_type, b.domain, b.opset, b.workspace) == (a.node, a.op_type, a.domain, a.opset, a.workspace)
        assert b.inputs == a.inputs and b.outputs == a.outputs
        assert type(b.inputs) is tuple and type(b.outputs) is tuple
        assert all(type(arg.shape) is tuple for arg in b.args)
        assert_attrs_equal(a.attrs, b.attrs)
    assert_attrs_equal(m.attrs, r.attrs)
    assert bytes(r.weight_data) == bytes(m.weight_data)


# ---------------------------------------------------------------- round trip


def test_round_trip_bytes():
    m = make_model()
    data = om_bytes(m)
    assert data[:4] == MAGIC
    r = read_om(data)
    assert_models_equal(m, r)
    assert r.weight_size == m.weight_size and r.memory_size == m.memory_size
    assert r.tasks[1].inputs[1] is None


def test_round_trip_file_maps_weights(tmp_path):
    m = make_model()
    path = tmp_path / "tiny.om"
    write_om(m, path)
    assert sorted(os.listdir(tmp_path)) == ["tiny.om"]
    r = read_om(path)
    assert_models_equal(m, r)
    assert isinstance(r.weight_data, memoryview) and r.weight_data.readonly
    w0 = np.frombuffer(r.weight_data, np.float32, 12, 0).reshape(3, 4)
    assert np.array_equal(w0, np.arange(12, dtype=np.float32).reshape(3, 4))
    info = header_info(path)
    weights = next(p for p in info["partitions"] if p["type"] == "WEIGHTS_DATA")
    assert weights["offset"] % 64 == 0 and weights["size"] == 192
    assert path.read_bytes() == om_bytes(m)
    r2 = read_om(str(path))
    assert bytes(r2.weight_data) == m.weight_data


def test_every_partition_is_aligned_and_table_is_consistent():
    data = om_bytes(make_model())
    info = header_info(data)
    assert [p["type"] for p in info["partitions"]] == ["MODEL_DEF", "TASK_INFO", "WEIGHTS_DATA"]
    assert all(p["offset"] % schema.ALIGNMENT == 0 and p["submodel"] == 0 for p in info["partitions"])
    assert info["partitions"][-1]["offset"] + info["partitions"][-1]["size"] == len(data)
    assert info["length"] == len(data) - info["header_size"]
    assert info["body_checksum"] == xxhash.xxh3_128(data[info["header_size"]:]).hexdigest()


def test_header_info_fields():
    info = header_info(om_bytes(make_model()))
    assert info["magic"] == "IMOD"
    assert info["header_version"] == f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}"
    assert (info["is_encrypt"], info["is_checksum"], info["model_num"], info["ops"]) == (0, 0, 1, 2)
    assert info["checksum"] == "00" * 32  # GE's sha256 field, unused since 1.9: body_checksum checks the body
    assert info["name"] == "tiny" and info["platform_version"] == "Ascend310P3"
    assert info["atc_cmdline"].startswith("ge atc") and info["has_unknown_shape"] is False
    assert set(schema.HEADER_FIELDS) <= set(info)


def test_model_def_holds_derived_sizes():
    m = make_model()
    _, parts = writer.fields_and_parts(m)
    md = msgpack.unpackb(parts[0][2])
    assert md["memory_size"] == 256 + 64 and md["weight_size"] == 192 and md["workspace_size"] == 64
    assert md["zero_copy_memory_size"] == 96 + 6 + 72 and md["stream_num"] == 1 and md["event_num"] == 0
    assert md["soc_version"] == "Ascend310P3" and md["opset"] == 17


def test_empty_weights_and_no_tasks():
    m = make_model(weights=[], weight_data=b"", tasks=[], tensors=[],
                   allocations=[Allocation(0, WEIGHT, 0), Allocation(1, FEATURE_MAP, 0), Allocation(2, WORKSPACE, 0),
                                Allocation(3, INPUT, 96, 0), Allocation(4, INPUT, 6, 1), Allocation(5, OUTPUT, 72, 0)])
    r = read_om(om_bytes(m))
    assert r.weight_data == b"" and r.tasks == [] and r.weights == []


def test_bytes_like_sources_and_determinism():
    m = make_model()
    data = om_bytes(m)
    assert om_bytes(m) == data
    assert_models_equal(m, read_om(bytearray(data)))
    assert_models_equal(m, read_om(memoryview(data)))


def test_memoryview_weight_data_round_trips(tmp_path):
    path = tmp_path / "a.om"
    write_om(make_model(), path)
    loaded = read_om(path)  # weight_data is a view of the first file's map
    write_om(loaded, tmp_path / "b.om")
    assert (tmp_path / "b.om").read_bytes() == path.read_bytes()


def test_newer_minor_version_and_unknown_fields_are_accepted():
    def tamper(h):
        h["header_version"] = [FORMAT_VERSION[0], FORMAT_VERSION[1] + 3]
        h["some_future_field"] = {"x": 1}
        h["header_checksum"] = h.pop("header_checksum")  # writers keep it last
    data = join(writer.encode(make_model(), tamper=tamper))
    assert header_info(data)["header_version"] == f"{FORMAT_VERSION[0]}.{FORMAT_VERSION[1] + 3}"
    assert_models_equal(make_model(), read_om(data))


def test_format_1_0_files_without_external_weight_fields_still_read():
    base = make_model()
    m = make_model(allocations=base.allocations[:6], weights=base.weights[:2])

    def as_1_0(md):
        for a in md["allocations"]:
            a.pop("file")
        for w in md["weights"]:
            w.pop("allocation")
    r = read_om(rebuild(m, md=as_1_0, tamper=lambda h: h.update(header_version=[1, 0])))
    assert r.allocations == m.allocations and r.weights == m.weights


# ---------------------------------------------------------------- helpers for malformed files


def join(encoded) -> bytes:
    head, pieces = encoded
    return b"".join([head, *map(bytes, pieces)])


def rebuild(model=None, *, md=None, ti=None, weights=None, tamper=None, fields=None, parts=None) -> bytes:
    """Re-assemble a correctly signed OM after editing its MODEL_DEF / TASK_INFO maps or header."""
    f, p = writer.fields_and_parts(model or make_model())
    md_map, ti_map = msgpack.unpackb(p[0][2]), msgpack.unpackb(p[1][2])
    if md:
        md(md_map)
    if ti:
        ti(ti_map)
    if fields:
        fields(f)
    p = [(schema.MODEL_DEF, 0, msgpack.packb(md_map)), (schema.TASK_INFO, 0, msgpack.packb(ti_map)),
         (schema.WEIGHTS_DATA, 0, p[2][2] if weights is None else weights)]
    if parts:
        p = parts(p)
    return join(writer.assemble(f, p, tamper=tamper))


def fails(data, match: str, **kw) -> FormatError:
    with pytest.raises(FormatError, match=match) as e:
        read_om(data, **kw)
    assert str(e.value).startswith("<bytes>: ")
    return e.value


def regions(data: bytes) -> dict:
    info = header_info(data)
    return {"header": (0, info["header_size"]),
            **{p["type"]: (p["offset"], p["offset"] + p["size"]) for p in info["partitions"]}}


# ---------------------------------------------------------------- truncation and corruption


def test_truncated_at_every_cut_point():
    data = om_bytes(make_model())
    for cut in range(len(data)):
        with pytest.raises(FormatError) as e:
            read_om(data[:cut])
        assert str(e.value).startswith("<bytes>: ")
        assert "truncated" in str(e.value) or "bad magic" in str(e.value) or cut < 4, (cut, str(e.value))
        with pytest.raises(FormatError):
            read_om(data[:cut], verify_checksum=False)


def test_truncated_file_messages(tmp_path):
    data = om_bytes(make_model())
    r = regions(data)
    path = tmp_path / "model.om"
    for cut, match in [(0, "model.om: truncated: file is 0 bytes"), (3, "model.om: truncated"),
                       (r["header"][1] - 1, "model.om: truncated: header ends at"),
                       (r["TASK_INFO"][1] - 5, f"model.om: truncated: partition TASK_INFO ends at {r['TASK_INFO'][1]} "
                                               f"beyond file size {r['TASK_INFO'][1] - 5}"),
                       (len(data) - 1, "model.om: truncated: partition WEIGHTS_DATA ends at")]:
        path.write_bytes(data[:cut])
        with pytest.raises(FormatError, match=match):
            read_om(path)
    assert os.listdir(tmp_path) == ["model.om"]


def test_every_byte_flip_is_detected_with_checksum():
    data = om_bytes(make_model())
    for pos in range(len(data)):
        for mask in (0xFF, 0x01):
            bad = bytearray(data)
            bad[pos] ^= mask
            with pytest.raises(FormatError):
                read_om(bytes(bad))


def test_every_byte_flip_without_checksum_is_format_error_or_valid_model():
    data = om_bytes(make_model())
    outcomes = {"error": 0, "model": 0}
    for pos in range(len(data)):
        for mask in (0xFF, 0x01, 0x80):
            bad = bytearray(data)
            bad[pos] ^= mask
            try:
                m = read_om(bytes(bad), verify_checksum=False)
            except FormatError:
                outcomes["error"] += 1
            else:
                assert isinstance(m, GeModel)
                outcomes["model"] += 1
    assert outcomes["error"] and outcomes["model"]


def test_random_multi_byte_corruption_without_checksum():
    data = om_bytes(make_model())
    r = regions(data)
    rng = random.Random(1234)
    spans = [r["header"], r["MODEL_DEF"], r["TASK_INFO"]]
    for _ in range(3000):
        bad = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            lo, hi = rng.choice(spans)
            bad[rng.randrange(lo, hi)] = rng.randrange(256)
        try:
            read_om(bytes(bad), verify_checksum=False)
        except FormatError:
            pass


JUNK = [None, -1, 0, 1, 2**63 - 1, 2**64 - 1, -2**63, "x", "", [], {}, [1, 2], {"a": 1}, 1.5, True, b"xyz",
        {"__ndarray__": True}, {"__dtype__": "x"}, [None], "float32", "../x", [2**62, 2**62]]


def test_structural_fuzz_of_every_field():
    """Replace random fields of the header, MODEL_DEF and TASK_INFO maps with junk of every type and
    re-sign the file: the reader must answer FormatError or a model, nothing else."""
    rng = random.Random(99)

    def paths(o, prefix=()):
        if prefix:
            yield prefix
        items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else ()
        for k, v in items:
            yield from paths(v, prefix + (k,))

    def edit(m, seed):
        r = random.Random(seed)  # deterministic: assemble() calls a header tamper more than once
        for _ in range(r.randint(1, 3)):
            choices = list(paths(m))
            if not choices:
                return
            path = r.choice(choices)
            parent = m
            for k in path[:-1]:
                parent = parent[k]
            if isinstance(parent, dict) and r.random() < 0.2:
                del parent[path[-1]]
            else:
                parent[path[-1]] = copy.deepcopy(r.choice(JUNK))

    def edit_header(h, seed):
        edit(h, seed)
        h["header_checksum"] = h.pop("header_checksum", bytes(32))

    outcomes = {"error": 0, "model": 0}
    for _ in range(1500):
        which, seed = rng.choice(["md", "ti", "header"]), rng.random()
        if which == "header":
            data = join(writer.encode(make_model(), tamper=lambda h: edit_header(h, seed)))
        else:
            data = rebuild(**{which: lambda m: edit(m, seed)})
        try:
            read_om(data)
            outcomes["model"] += 1
        except FormatError:
            outcomes["error"] += 1
    assert outcomes["error"] > 1000 and outcomes["model"] > 10


def test_checksum_mismatch_message_and_bypass():
    data = om_bytes(make_model())
    lo, _ = regions(data)["WEIGHTS_DATA"]
    bad = bytearray(data)
    bad[lo] ^= 0xFF
    fails(bytes(bad), r"^<bytes>: checksum mismatch \(file is corrupt or was modified\)$")
    m = read_om(bytes(bad), verify_checksum=False)
    assert bytes(m.weight_data)[0] == data[lo] ^ 0xFF


def sha256_signed(model=None, version=(1, 8)) -> bytes:
    """The OM as ge wrote it before 1.9: no body_checksum, is_checksum 1 and the body's sha256 in `checksum`."""
    sha = [bytes(32)]  # the header's length does not depend on the digest: laid out first, filled in after

    def tamper(h):
        h.update(header_version=list(version), is_checksum=1, checksum=sha[0])
        h.pop("body_checksum")
        h["header_checksum"] = h.pop("header_checksum")  # writers keep it last
    sign, pieces = writer.lay_out(*writer.fields_and_parts(model or make_model()), tamper=tamper)
    body = b"".join(map(bytes, pieces))
    sha[0] = hashlib.sha256(body).digest()
    return sign(bytes(schema.BODY_CHECKSUM_SIZE)) + body


def test_format_1_8_files_checked_by_sha256_still_read():
    data = sha256_signed()
    info = header_info(data)
    assert (info["header_version"], info["is_checksum"], info["body_checksum"]) == ("1.8", 1, None)
    assert info["checksum"] == hashlib.sha256(data[info["header_size"]:]).hexdigest()
    assert_models_equal(make_model(), read_om(data))
    lo, hi = regions(data)["WEIGHTS_DATA"]
    for pos in range(lo, hi, 7):  # the sha256 still guards the body of such a file
        bad = bytearray(data)
        bad[pos] ^= 0x01
        fails(bytes(bad), r"^<bytes>: checksum mismatch \(file is corrupt or was modified\)$")


def test_body_checksum_is_the_xxh3_128_of_the_model_data():
    data = om_bytes(make_model())
    info = header_info(data)
    assert info["header_version"] == "1.9" and info["body_checksum"] == xxhash.xxh3_128(data[info["header_size"]:]).hexdigest()
    for region in ("MODEL_DEF", "TASK_INFO", "WEIGHTS_DATA"):
        lo, hi = regions(data)[region]
        bad = bytearray(data)
        bad[(lo + hi) // 2] ^= 0x80
        fails(bytes(bad), r"^<bytes>: checksum mismatch \(file is corrupt or was modified\)$")
    # a body edited and its body_checksum recomputed: the header checksum still catches it
    bad = bytearray(data)
    bad[lo] ^= 0x01
    pos = data.index(bytes.fromhex(info["body_checksum"]))
    bad[pos:pos + 16] = xxhash.xxh3_128(bytes(bad[info["header_size"]:])).digest()
    fails(bytes(bad), "header checksum mismatch")


def test_header_checksum_guards_header_fields():
    data = om_bytes(make_model())
    pos = data.index(b"tiny")
    bad = data[:pos] + b"tinY" + data[pos + 4:]
    fails(bad, "header checksum mismatch")
    fails(bad, "header names the model 'tinY' but MODEL_DEF names it 'tiny'", verify_checksum=False)


# ---------------------------------------------------------------- prefix, version, sizes


def test_bad_magic(tmp_path):
    data = om_bytes(make_model())
    fails(b"ONNX" + data[4:], r"^<bytes>: bad magic \(not an OM file\)$")
    fails(b"\x08\x01\x12\x00", "bad magic")
    path = tmp_path / "model.om"
    path.write_bytes(b"PK\x03\x04" + bytes(100))
    with pytest.raises(FormatError, match=r"^.*model\.om: bad magic \(not an OM file\)$"):
        read_om(path)
    with pytest.raises(FormatError, match="bad magic"):
        header_info(path)


def test_newer_major_version_is_refused(tmp_path):
    data = join(writer.encode(make_model(), tamper=lambda h: h.update(header_version=[2, 0])))
    path = tmp_path / "model.om"
    path.write_bytes(data)
    with pytest.raises(FormatError) as e:
        read_om(path)
    assert str(e.value) == f"{path}: OM format version 2.0 is newer than this ge supports (1.x)"
    with pytest.raises(FormatError, match="newer than this ge supports"):
        read_om(path, verify_checksum=False)
    with pytest.raises(FormatError, match="newer than this ge supports"):
        header_info(path)


def test_bad_versions():
    fails(join(writer.encode(make_model(), tamper=lambda h: h.update(header_version=[0, 9]))),
          "OM format version 0.9 is not supported")
    fails(join(writer.encode(make_model(), tamper=lambda h: h.update(header_version="1.0"))),
          "header has no valid header_version")
    fails(join(writer.encode(make_model(), tamper=lambda h: h.pop("header_version"))),
          "header has no valid header_version")


def test_huge_header_length_rejected_without_allocating():
    data = om_bytes(make_model())
    tracemalloc.start()
    try:
        for claimed in (2**31, 2**32 - 1, schema.MAX_HEADER_SIZE + 1, 0):
            fails(MAGIC + claimed.to_bytes(4, "little") + data[8:], "header length .* is out of range")
        fails(MAGIC + (len(data)).to_bytes(4, "little") + data[8:], "truncated: header ends at")
        fails(join(writer.encode(make_model(), tamper=lambda h: h.update(length=2**40))),
              r"truncated: model data ends at \d+ beyond file size \d+$")
        fails(join(writer.encode(make_model(), tamper=lambda h: h.update(length=2**41))),
              "header\\.length must be an integer in")

        def huge_partition(h):
            h["partitions"][2]["size"] = 2**40
        fails(join(writer.encode(make_model(), tamper=huge_partition)),
              f"truncated: partition WEIGHTS_DATA ends at .* beyond file size {len(data)}")
        # msgpack containers claiming 2**32 - 1 entries inside a tiny partition
        for body in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                     b"\xc6\xff\xff\xff\xff", b"\xc9\xff\xff\xff\xff\x01"):
            data2 = rebuild(parts=lambda p: [(schema.MODEL_DEF, 0, body)] + p[1:])
            fails(data2, "MODEL_DEF is not valid msgpack")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20


def test_header_field_validation():
    cases = [
        (lambda h: h.update(is_encrypt=1), "encrypted OM files are not supported"),
        (lambda h: h.update(is_checksum=2), "header\\.is_checksum must be an integer in"),
        (lambda h: h.update(model_num=0), "header\\.model_num must be an integer in"),
        (lambda h: h.update(model_num=2), "partition MODEL_DEF of submodel 1 is missing"),
        (lambda h: h.update(name=5), "header\\.name must be a string"),
        (lambda h: h.update(ops=-1), "header\\.ops must be an integer"),
        (lambda h: h.update(ops=True), "header\\.ops must be an integer"),
        (lambda h: h.update(ops=7), "header says 7 ops but TASK_INFO holds 2 tasks"),
        (lambda h: h.update(has_unknown_shape=1), "header\\.has_unknown_shape must be a bool"),
        (lambda h: h.update(checksum=b"short"), "header\\.checksum must be 32 bytes"),
        (lambda h: h.update(body_checksum=bytes(32)), "header\\.body_checksum must be 16 bytes, got 32"),
        (lambda h: h.update(body_checksum="0" * 16), "header\\.body_checksum must be 16 bytes, got '0000"),
        (lambda h: h.pop("body_checksum"), r"header has no 'body_checksum' \(format 1\.9 checks its model data with it\)"),
        (lambda h: h.pop("atc_cmdline"), "header has no 'atc_cmdline'"),
        (lambda h: h.update(platform_version="Ascend910"), "header platform_version 'Ascend910' differs"),
        (lambda h: h.update(partitions=[{"type": 0}] * (schema.MAX_PARTITIONS + 1)), "more than the limit"),
        (lambda h: h.update(partitions="nope"), "header\\.partitions must be a list"),
        (lambda h: h["partitions"].pop(1), "partition TASK_INFO of submodel 0 is missing"),
        (lambda h: h["partitions"].append(dict(h["partitions"][0])), "partition MODEL_DEF of submodel 0 appears twice"),
        (lambda h: h["partitions"][1].update(offset=h["partitions"][0]["offset"] + 1),
         "partitions MODEL_DEF and TASK_INFO overlap"),
        (lambda h: h["partitions"][0].update(offset=4), "partition MODEL_DEF starts at 4, inside the header"),
        (lambda h: h["partitions"][0].update(submodel=3), "belongs to submodel 3"),
        (lambda h: h["partitions"][0].update(type="MODEL_DEF"), r"header\.partitions\[0\]\.type must be an integer"),
        (lambda h: h["partitions"].__setitem__(0, [0, 0, 0, 0]), r"header\.partitions\[0\] must be a map"),
    ]
    for tamper, match in cases:
        fails(join(writer.encode(make_model(), tamper=tamper)), match)


def test_header_must_be_a_map_and_checksum_last():
    body = msgpack.packb([1, 2, 3])
    fails(MAGIC + len(body).to_bytes(4, "little") + body, "header is a list, not a map")
    garbage = b"\xc1" * 16
    fails(MAGIC + len(garbage).to_bytes(4, "little") + garbage, "header is not valid msgpack")

    def move_checksum(h):
        h["header_checksum"] = h.pop("header_checksum")
        h["zzz"] = 1
    fails(join(writer.encode(make_model(), tamper=move_checksum)), "header checksum is not the header's last field")


def test_trailing_bytes_are_rejected():
    data = om_bytes(make_model())
    fails(data + b"\0" * 64, "64 unexpected bytes after the model data")


def test_unknown_partition_types_are_skipped():
    data = rebuild(parts=lambda p: p + [(7, 0, b"future payload")],
                   fields=lambda f: None)
    assert_models_equal(make_model(), read_om(data))
    assert header_info(data)["partitions"][-1]["type"] == "type 7"


# ---------------------------------------------------------------- partition schema


def test_arg_offset_beyond_its_allocation():
    m = make_model()
    t = m.tasks[0]
    m.tasks[0] = TaskDef(t.node, t.op_type, t.domain, t.opset, t.attrs, (Arg(3, 8, "float32", (2, 3, 4)),), t.outputs)
    with pytest.raises(FormatError, match=r"model 'tiny': refusing to write an invalid OM: TASK_INFO\.tasks\[0\] "
                                          r"'relu' \(Relu\)\.inputs\[0\]: offset 8 \+ 96 bytes exceeds allocation 3 "
                                          r"\(INPUT\) size 96"):
        om_bytes(m)
    data = join(writer.encode(m))  # the unchecked encoder writes it anyway; the reader refuses
    fails(data, "tasks\\[0\\] 'relu' .*inputs\\[0\\]: offset 8 \\+ 96 bytes exceeds allocation 3")
    fails(data, "exceeds allocation 3", verify_checksum=False)


def test_model_def_validation():
    def tensor(i, **kw):
        return lambda md: md["tensors"][i].update(kw)

    def weight(i, **kw):
        return lambda md: md["weights"][i].update(kw)

    def alloc(i, **kw):
        return lambda md: md["allocations"][i].update(kw)

    cases = [
        (tensor(1, dtype="complex64"), "dtype 'complex64' .* is not one of float16"),
        (tensor(1, dtype="object"), "is not one of"),
        (tensor(1, shape=[2, -3, 4]), "shape .* must be non-negative integers"),
        (tensor(1, shape=[1] * (schema.MAX_RANK + 1)), "more than the limit"),
        (tensor(1, shape=[2, 3.0, 4]), "must be non-negative integers"),
        (tensor(1, nbytes=95), r"MODEL_DEF\.tensors\[1\] 'h': nbytes 95 does not match float32 \[2, 3, 4\] \(96 bytes\)"),
        (tensor(1, offset=200), r"MODEL_DEF\.tensors\[1\] 'h': offset 200 \+ 96 bytes exceeds allocation 1 \(FEATURE_MAP\) size 256"),
        (tensor(1, allocation=9), "allocation 9 does not exist"),
        (tensor(1, allocation=-1), r"tensors\[1\]\.allocation must be an integer in"),
        (tensor(1, first="0"), r"tensors\[1\]\.first must be an integer"),
        (lambda md: md["tensors"][1].pop("last"), r"MODEL_DEF\.tensors\[1\] has no 'last'"),
        (lambda md: md["tensors"].__setitem__(1, None), r"MODEL_DEF\.tensors\[1\] must be a map, got nil"),
        (weight(0, offset=180), "weights\\[0\\] 'w0': offset 180 \\+ 48 bytes exceeds weight_size 192"),
        (weight(0, nbytes=47), "nbytes 47 does not match"),
        (weight(2, file="../../etc/passwd"), "is not a plain file name"),
        (weight(2, file=".."), "is not a plain file name"),
        (weight(2, sha256="XYZ"), "sha256 'XYZ' is not 64 lowercase hex digits"),
        (weight(2, file="/etc/passwd"), "is not a plain file name \\(it is an absolute path\\)"),
        (weight(2, file="weight_other"), "names the weight file 'weight_other' but allocation 6 is the image of"),
        (weight(2, file_offset=0), "file_offset 0 differs from its offset 512 in allocation 6"),
        (weight(2, offset=520, file_offset=520), "offset 520 \\+ 32 bytes exceeds weight file 'weight_.*' \\(544 bytes\\)"),
        (weight(2, sha256=""), r"weights\[2\] 'ext': an external weight needs its sha256"),
        (weight(2, allocation=1), "lives in allocation 1 \\(FEATURE_MAP\\); weights live in WEIGHT or FILE_CONSTANT"),
        (weight(2, allocation=7), r"weights\[2\] 'ext': allocation 7 does not exist"),
        (weight(2, allocation=0, offset=0, file_offset=0),
         "names the weight file 'weight_.*' but lives in the WEIGHT allocation"),
        (weight(0, file="x", allocation=6), "names the weight file 'x' but allocation 6"),
        (alloc(6, file="../w"), "allocations\\[6\\] \\(FILE_CONSTANT\\): external weight file '../w' is not a plain file name"),
        (alloc(6, file=""), "allocations\\[6\\] \\(FILE_CONSTANT\\): external weight file '' is not a plain file name"),
        (alloc(2, file="w"), "allocations\\[2\\] \\(WORKSPACE\\) names a weight file 'w'; only FILE_CONSTANT"),
        (lambda md: md["allocations"].append(dict(md["allocations"][6], id=7)), "has two FILE_CONSTANT allocations"),
        (lambda md: md["allocations"].append(dict(md["allocations"][6], id=7, file="weight_x")),
         "weight file 'weight_x' has a FILE_CONSTANT allocation but no weight"),
        (alloc(0, size=100), "WEIGHTS_DATA is 192 bytes, more than the WEIGHT allocation size 100"),
        (alloc(1, kind="WEIGHT"), r"allocations\[1\] must be FEATURE_MAP, not WEIGHT"),
        (alloc(3, kind="HBM"), r"allocations\[3\]\.kind 'HBM' is not one of WEIGHT"),
        (alloc(3, id=4), r"allocations\[3\] has id 4"),
        (alloc(3, io_index=5), "allocations\\[3\\] \\(INPUT\\) has io_index 5, but the model has 2 inputs"),
        (alloc(1, size=2**41), r"allocations\[1\]\.size must be an integer in"),
        (lambda md: md.update(allocations=md["allocations"][:2]), "WEIGHT, FEATURE_MAP and WORKSPACE are required"),
        (lambda md: md["inputs"][0].update(shape=[2, 3, 5]), "inputs\\[0\\] 'x': offset 0 \\+ 120 bytes exceeds allocation 3"),
        (lambda md: md["outputs"][0].update(dtype=7), "outputs\\[0\\]\\.dtype: dtype 7 .* is not one of"),
        (lambda md: md.update(memory_size=1), "MODEL_DEF\\.memory_size is 1 but the allocations add up to 320"),
        (lambda md: md.update(zero_copy_memory_size=0), "zero_copy_memory_size is 0"),
        (lambda md: md.update(stream_num=0), "MODEL_DEF\\.stream_num must be an integer in \\[1,"),
        (lambda md: md.update(name="other"), "header names the model 'tiny' but MODEL_DEF names it 'other'"),
        (lambda md: md.update(attrs=[1]), r"MODEL_DEF\.attrs must be a map, got list"),
        (lambda md: md["attrs"].update({"t": {"__ndarray__": True, "dtype": "float32", "shape": [2], "data": b"abc"}}),
         "ndarray data is 3 bytes, float32 \\[2\\] needs 8"),
        (lambda md: md["attrs"].update({"t": {"__ndarray__": 1, "dtype": "float32", "shape": [], "data": bytes(4)}}),
         "malformed ndarray"),
        (lambda md: md["attrs"].update({"t": {"__dtype__": "str"}}), "malformed dtype value"),
        (lambda md: md.pop("tensors"), "MODEL_DEF has no 'tensors'"),
        (lambda md: md["attrs"].update(lower_bound="96"), r"MODEL_DEF\.attrs\['lower_bound'\] must be an integer"),
        (lambda md: md["attrs"].update(external_weight=3), r"MODEL_DEF\.attrs\['external_weight'\] must be an integer "
                                                           r"in \[0, 2\]"),
        (lambda md: md["attrs"].update(aipp=[{"input": 1}]), r"MODEL_DEF\.attrs\['aipp'\]\[0\]\.input must be a string"),
        (lambda md: md["attrs"].update(aipp={}), r"MODEL_DEF\.attrs\['aipp'\] must be a list"),
    ]
    for edit, match in cases:
        fails(rebuild(md=edit), match)
    fails(rebuild(md=weight(2, file="", allocation=0, offset=128, file_offset=0), weights=bytes(128)),
          "weights\\[2\\] 'ext': inline weight ends at 160 beyond WEIGHTS_DATA \\(128 bytes\\)")
    assert read_om(rebuild(weights=bytes(128))).weight_data == bytes(128)  # 'ext' is external: fine


def test_task_info_validation():
    def task(i, **kw):
        return lambda ti: ti["tasks"][i].update(kw)

    deep = 1
    for _ in range(schema.MAX_ATTR_DEPTH + 2):
        deep = [deep]
    cases = [
        (task(1, workspace=65), "tasks\\[1\\] 'gemm' \\(Gemm\\): workspace 65 bytes exceeds the WORKSPACE allocation size 64"),
        (task(0, outputs=[None]), "tasks\\[0\\] 'relu' \\(Relu\\): no output \\(a task writes at least one\\)"),
        (task(0, outputs=[None, 3]), r"TASK_INFO\.tasks\[0\]\.outputs\[1\] must be a map, got int"),
        (task(0, inputs={"a": 1}), r"tasks\[0\]\.inputs must be a list, got"),
        (task(0, attrs=None), "attrs must be a map, got nil"),
        (task(0, attrs={"x": deep}), "nested deeper than"),
        (task(0, opset=-17), r"tasks\[0\]\.opset must be an integer"),
        (lambda ti: ti["tasks"][1]["inputs"][2].update(allocation=9), r"inputs\[2\]: allocation 9 does not exist"),
        (lambda ti: ti["tasks"][1]["inputs"][2].update(shape=[100, 4]),
         "inputs\\[2\\]: offset 0 \\+ 1600 bytes exceeds allocation 0 \\(WEIGHT\\) size 192"),
        (lambda ti: ti["tasks"].append(dict(ti["tasks"][0])), "header says 2 ops but TASK_INFO holds 3 tasks"),
        (lambda ti: ti.update(tasks=None), r"TASK_INFO\.tasks must be a list, got None \(nil\)"),
    ]
    for edit, match in cases:
        fails(rebuild(ti=edit), match)
    # non-string keys and ext types cannot sneak in
    ti_bad = msgpack.packb({"tasks": [], 1: 2})
    fails(rebuild(parts=lambda p: [p[0], (schema.TASK_INFO, 0, ti_bad), p[2]]), "TASK_INFO is not valid msgpack")
    ti_ext = msgpack.packb({"tasks": [msgpack.ExtType(5, b"xy")]})
    fails(rebuild(parts=lambda p: [p[0], (schema.TASK_INFO, 0, ti_ext), p[2]]), "TASK_INFO is not valid msgpack")
    ti_junk = msgpack.packb({"tasks": []}) + b"\x00"
    fails(rebuild(parts=lambda p: [p[0], (schema.TASK_INFO, 0, ti_junk), p[2]]), "TASK_INFO is not valid msgpack")


DATAFLOW = DataflowPlan(deps=((), (0,)), fm_offsets=(-1, 0, 0, -1, -1, 128), fm_size=192, lower_bound=160)


def test_dataflow_plan_round_trips():
    m = read_om(writer.om_bytes(make_model(dataflow=DATAFLOW)))
    assert m.dataflow == DATAFLOW
    assert read_om(writer.om_bytes(make_model())).dataflow is None  # an OM before format 1.4


def test_dataflow_plan_validation():
    def edit(**kw):
        return lambda ti: ti["dataflow"].update(kw)

    cases = [
        (edit(deps=[[]]), r"TASK_INFO\.dataflow\.deps has 1 entries for 2 tasks"),
        (edit(deps=[[], [1]]), r"dataflow\.deps\[1\] must be distinct earlier tasks, got \[1\]"),
        (edit(deps=[[0], []]), r"dataflow\.deps\[0\] must be distinct earlier tasks"),
        (edit(deps=[[], [0, 0]]), r"dataflow\.deps\[1\] must be distinct earlier tasks"),
        (edit(deps=[[], "0"]), r"dataflow\.deps\[1\] must be a list, got '0'"),
        (edit(fm_offsets=[-1, 0, 0]), "dataflow\\.fm_offsets has 3 entries for 6 task arguments"),
        (edit(fm_offsets=[0, 0, 0, -1, -1, 128]), "fm_offsets\\[0\\] must be -1 \\(it keeps its place\\)"),
        (edit(fm_offsets=[-1, -1, 0, -1, -1, 128]), "fm_offsets\\[1\\] must be an offset in \\[0, 96\\]"),
        (edit(fm_offsets=[-1, 0, 0, -1, -1, 129]), "fm_offsets\\[5\\] must be an offset in \\[0, 128\\], got 129"),
        (edit(fm_offsets=[-1, 0, 0, -1, -1, "x"]), r"fm_offsets\[5\] must be an integer"),
        (edit(fm_size=-5), r"dataflow\.fm_size must be an integer"),
        (lambda ti: ti.update(dataflow=[]), r"TASK_INFO\.dataflow must be a map, got list"),
    ]
    for change, match in cases:
        fails(rebuild(make_model(dataflow=DATAFLOW), ti=change), match)


# ---------------------------------------------------------------- writer


def test_writer_rejects_what_it_cannot_store():
    cases = [
        ({"f": {1, 2}}, "values of type set cannot be stored"),
        ({"f": object()}, "values of type object cannot be stored"),
        ({"__ndarray__": 1}, "key '__ndarray__' is reserved"),
        ({"f": {3: "x"}}, "key 3 is not a string"),
        ({"f": 2**70}, "does not fit in 64 bits"),
        ({"f": np.array(["a", "b"])}, "dtype str.* is not supported"),
        ({"f": np.zeros(2, np.complex64)}, "dtype complex64 is not supported"),
    ]
    for attrs, match in cases:
        m = make_model()
        t = m.tasks[0]
        m.tasks[0] = TaskDef(t.node, t.op_type, t.domain, t.opset, attrs, t.inputs, t.outputs)
        with pytest.raises(FormatError, match=match):
            om_bytes(m)
    with pytest.raises(FormatError, match="needs a GeModel"):
        om_bytes({"name": "x"})
    with pytest.raises(FormatError, match="malformed GeModel"):
        om_bytes(make_model(tensors=[None]))
    with pytest.raises(FormatError, match="dtype complex128 is not supported"):
        om_bytes(make_model(inputs=[TensorDesc("x", "complex128", (2,), 3)]))


def test_write_om_into_missing_directory_leaves_nothing(tmp_path):
    target = tmp_path / "missing" / "model.om"
    with pytest.raises(FormatError, match="cannot write"):
        write_om(make_model(), target)
    assert not (tmp_path / "missing").exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(FormatError, match="cannot write"):
        write_om(make_model(), blocker / "model.om")
    assert sorted(os.listdir(tmp_path)) == ["file"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores directory permissions")
def test_write_om_into_read_only_directory_leaves_nothing(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        with pytest.raises(FormatError, match="cannot write"):
            write_om(make_model(), d / "model.om")
        assert os.listdir(d) == []
    finally:
        d.chmod(stat.S_IRWXU)


def test_write_om_failure_keeps_old_file_and_removes_temp(tmp_path, monkeypatch):
    target = tmp_path / "model.om"
    target.write_bytes(b"old contents")

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(writer.os, "replace", broken_replace)
    with pytest.raises(FormatError, match="model.om: cannot write: No space left on device"):
        write_om(make_model(), target)
    assert os.listdir(tmp_path) == ["model.om"] and target.read_bytes() == b"old contents"


def test_write_om_of_invalid_model_leaves_nothing(tmp_path):
    m = make_model(weights=[WeightDesc("w0", "float32", (3, 4), 0, 50)])
    with pytest.raises(FormatError, match="refusing to write an invalid OM: .*nbytes 50 does not match"):
        write_om(m, tmp_path / "model.om")
    with pytest.raises(FormatError, match="refusing to write"):
        om_bytes(m)
    assert os.listdir(tmp_path) == []


def test_self_check_takes_the_maps_for_the_partitions_unpacked():
    """The writer's self-check reads the MODEL_DEF and TASK_INFO maps it packed instead of unpacking
    the partitions again: they are what unpacking gives, to the type (lists, not tuples)."""
    m = make_model(dataflow=DATAFLOW)
    _, maps = writer._encode_checked(m, "tiny")
    _, parts = writer.fields_and_parts(m)
    unpacked = {(kind, sub): msgpack.unpackb(body) for kind, sub, body in parts if kind != schema.WEIGHTS_DATA}
    assert unpacked == maps and len(maps) == 2


def test_self_check_reads_the_file_when_the_maps_fail(tmp_path, monkeypatch):
    """A map the reader refuses (a tuple packs as the list it refuses as a tuple) is no error: the file's
    partitions unpacked decide."""
    make_maps = writer._fields_and_maps

    def with_a_tuple(model):
        fields, parts = make_maps(model)
        parts[0][2]["inputs"][0]["shape"] = tuple(parts[0][2]["inputs"][0]["shape"])
        return fields, parts
    monkeypatch.setattr(writer, "_fields_and_maps", with_a_tuple)
    loads = []
    monkeypatch.setattr(reader, "load", lambda *a, load=reader.load, **k: loads.append(k.get("maps")) or load(*a, **k))
    assert_models_equal(make_model(), write_om(make_model(), tmp_path / "model.om"))
    assert [maps is None for maps in loads] == [False, True]
    assert_models_equal(make_model(), read_om(tmp_path / "model.om"))


def test_write_om_replaces_existing_file(tmp_path):
    target = tmp_path / "model.om"
    target.write_bytes(b"old")
    write_om(make_model(), target)
    assert_models_equal(make_model(), read_om(target))
    assert os.listdir(tmp_path) == ["model.om"]


# ---------------------------------------------------------------- reader entry points


def test_read_missing_file_or_directory(tmp_path):
    with pytest.raises(FormatError, match="nope.om: cannot read"):
        read_om(tmp_path / "nope.om")
    with pytest.raises(FormatError, match="the OM is a directory, not a regular file; refused"):
        read_om(tmp_path)
    with pytest.raises(FormatError, match="expected a path or bytes"):
        read_om(12)


def test_errors_are_ge_errors_and_safety_net(monkeypatch):
    assert issubclass(FormatError, GeError)
    data = om_bytes(make_model())

    def boom(*a, **k):
        raise KeyError("gap")
    monkeypatch.setattr(reader, "_model", boom)
    with pytest.raises(FormatError, match="<bytes>: malformed OM \\(KeyError"):
        reader.read_om(data)
    with pytest.raises(KeyError, match="gap"):
        reader.read_om(data, strict=True)


def test_weight_layout_is_written_as_its_joined_bytes(tmp_path):
    w0 = np.arange(12, dtype=np.float32).reshape(3, 4)
    w1 = np.array([1, -2, 3], dtype=np.int64)
    layout = WeightLayout(192, ((0, w0), (64, w1)))
    assert bytes(layout.join()) == bytes(make_model().weight_data)
    assert b"".join(layout.chunks()) == bytes(make_model().weight_data)
    write_om(make_model(), tmp_path / "joined.om")
    written = write_om(make_model(weight_data=layout), tmp_path / "layout.om")  # streamed, never joined
    data = (tmp_path / "layout.om").read_bytes()
    assert data == (tmp_path / "joined.om").read_bytes() == om_bytes(make_model())
    assert header_info(data)["body_checksum"] == xxhash.xxh3_128(data[header_info(data)["header_size"]:]).hexdigest()
    assert bytes(written.weight_data) == bytes(layout.join()) and written.weight_data.readonly
