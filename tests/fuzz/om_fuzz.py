"""A deterministic, seeded OM mutator and the oracle every mutated file must satisfy.

Seeds (valid OMs compiled by ge): a small CNN (Conv with pads and strides, LeakyRelu, MaxPool,
Reshape, Gemm, Softmax) with inline weights and with external weights in a weight folder, and a
gears, a range and a hybrid model (a root graph with its static submodels), a control-flow
model (an If holding a Loop: nested subgraphs), the native block copies (Gather, Concat, a nearest
Resize), and a model with static and one with dynamic AIPP (the ge::Aipp op's config record; the
parameter input). Case n mutates seed n % 9 one way:

- raw mutations of the file as it is (bit flips, byte runs, truncation, an inflated msgpack length
  prefix); the checksums are left as they are, so these test the framing and the checksums;
- the same raw mutations inside a MODEL_DEF or TASK_INFO partition with both checksums
  recomputed, so the mutation reaches the msgpack decoder and the schema validation;
- structured edits of one decoded field (its value replaced by one of another type or out of
  range, the key deleted, a list entry dropped or duplicated), re-encoded and re-signed.

The oracle, for every case: `api.inspect` gives its data or a `GeError`; `api.load_from_mem` and
`api.execute` raise a `GeError` (not the reader's safety net: "malformed OM (KeyError...)" is a gap
in the validation) or give the unmutated outputs bit for bit. Never another exception, never a
hang. Some mutations leave another well-formed model, whose outputs need only have the unmutated
dtypes and shapes: a re-signed raw mutation that decodes to different data (a flipped bit in an
offset or a float, signed as such), a list entry dropped or duplicated (an optional input dropped,
a bias repeated as the residual) and one of ge's optional "ge.*" attributes deleted (a fused
activation); an output's declared shape changed to another of its size (a dim of 1 repeated) gives the
same bytes in that shape, as the reader lets a Reshape's alias declare the output it views.

    python -m tests.fuzz.om_fuzz --cases 20000 [--seed 1] [--device cpu|sim] [--seeds cnn,gears]

runs a longer campaign and prints each failing case (seed model, case number, mutation); `--only N`
replays one. tests/fuzz/test_om_fuzz.py runs four thousand cases in the test suite.
"""
from __future__ import annotations

import argparse
import copy
import os
import random
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass

import msgpack
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.om import reader, writer
from ge.formats.om.schema import MODEL_DEF, TASK_INFO

HANG_SECONDS = 60.0  # one case (load + execute of a tiny model) takes milliseconds


# ---------------------------------------------------------------- the seed models


def seed_onnx() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal((10, 64)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1], strides=[1, 1]),
        helper.make_node("LeakyRelu", ["c"], ["r"], "leaky", alpha=0.2),
        helper.make_node("MaxPool", ["r"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "g"], ["z"], "gemm", transB=1, alpha=0.5),
        helper.make_node("Softmax", ["z"], ["y"], "softmax", axis=1),
    ]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(g, "g"),
             numpy_helper.from_array(np.array([2, 64], np.int64), "shape")]
    graph = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def seed_inputs() -> list[np.ndarray]:
    return [np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype(np.float32)]


def dynamic_onnx() -> onnx.ModelProto:
    """x [n, 8] -> MatMul, Add, Relu, Softmax: compiled with gears or a range of n."""
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], "matmul"), helper.make_node("Add", ["m", "b"], ["a"], "add"),
             helper.make_node("Relu", ["a"], ["r"], "relu"), helper.make_node("Softmax", ["r"], ["y"], "softmax", axis=-1)]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "b")]
    graph = helper.make_graph(nodes, "dyn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def control_flow_onnx() -> onnx.ModelProto:
    """An If on a computed condition whose then-branch holds a Loop (a static body capturing x and
    the outer w) and whose else-branch is a Neg: OM format 1.5's nested subgraphs."""
    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Mul", ["s", "w"], ["m"], "mul"), helper.make_node("Add", ["m", "x"], ["s2"], "add"),
                              helper.make_node("Identity", ["c"], ["c2"], "cond")], "body",
                             [vi("i", i64, []), vi("c", b, []), vi("s", f, [4])], [vi("c2", b, []), vi("s2", f, [4]), vi("m", f, [4])])
    then = helper.make_graph([helper.make_node("Loop", ["n", "", "x"], ["last", "all"], "loop", body=body),
                              helper.make_node("ReduceSum", ["all", "ax"], ["t"], "sum", keepdims=0)], "then", [],
                             [vi("t", f, [4])], [numpy_helper.from_array(np.array([0], np.int64), "ax")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], "neg")], "else", [], [vi("e", f, [4])])
    nodes = [helper.make_node("ReduceSum", ["x"], ["tot"], "total", keepdims=0),
             helper.make_node("Greater", ["tot", "zero"], ["pos"], "positive"),
             helper.make_node("If", ["pos"], ["y"], "if", then_branch=then, else_branch=other)]
    inits = [numpy_helper.from_array(np.array([0.5, -1, 2, 0.25], np.float32), "w"),
             numpy_helper.from_array(np.array(3, np.int64), "n"), numpy_helper.from_array(np.array(0, np.float32), "zero")]
    graph = helper.make_graph(nodes, "cf", [vi("x", f, [4])], [vi("y", f, [4])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def aipp_onnx() -> onnx.ModelProto:
    """x [1, 3, 4, 6] -> Conv 1x1 + x: the model both AIPP seeds preprocess (an 8x6 RGB image)."""
    w = np.random.default_rng(6).standard_normal((3, 3, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], "conv"), helper.make_node("Add", ["c", "x"], ["y"], "add")]
    graph = helper.make_graph(nodes, "aipp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4, 6])],
                              [numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def copies_onnx() -> onnx.ModelProto:
    """The native block copies: a Concat with a constant, a Gather of its rows (5 of 8), a nearest x2
    Resize (its index-free columns), then a Softmax over the rows."""
    table = np.random.default_rng(8).standard_normal((6, 4)).astype(np.float32)
    nodes = [helper.make_node("Concat", ["x", "table"], ["c"], "concat", axis=0),
             helper.make_node("Gather", ["c", "ids"], ["g"], "gather", axis=0),
             helper.make_node("Unsqueeze", ["g", "axes"], ["u"], "unsqueeze"),
             helper.make_node("Resize", ["u", "", "scales"], ["r"], "resize", mode="nearest"),
             helper.make_node("Softmax", ["r"], ["y"], "softmax", axis=-1)]
    inits = [numpy_helper.from_array(table, "table"), numpy_helper.from_array(np.array([4, 0, 7, 1, -3], np.int64), "ids"),
             numpy_helper.from_array(np.array([0, 1], np.int64), "axes"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    graph = helper.make_graph(nodes, "copies", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 10, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def int8_onnx() -> onnx.ModelProto:
    """The int8 kernels: a uint8 depthwise QLinearConv (stride 2, padded: the staged planes and phase rows)
    into a pointwise one with per-channel int8 weights (the u8 x s8 product and its requantizing store)."""
    rng = np.random.default_rng(10)
    u8 = TensorProto.UINT8
    inits = [numpy_helper.from_array(rng.integers(-127, 128, (4, 1, 3, 3), dtype=np.int8), "wd"),
             numpy_helper.from_array(rng.integers(-127, 128, (8, 4, 1, 1), dtype=np.int8), "wp"),
             numpy_helper.from_array(np.array(0.05, np.float32), "sx"), numpy_helper.from_array(np.array(128, np.uint8), "zx"),
             numpy_helper.from_array(np.array(0.01, np.float32), "sw"), numpy_helper.from_array(np.array(0, np.int8), "zw"),
             numpy_helper.from_array(np.linspace(0.005, 0.02, 8).astype(np.float32), "swp"),
             numpy_helper.from_array(np.zeros(8, np.int8), "zwp"),
             numpy_helper.from_array(np.array(0.1, np.float32), "sy"), numpy_helper.from_array(np.array(120, np.uint8), "zy")]
    nodes = [helper.make_node("QLinearConv", ["x", "sx", "zx", "wd", "sw", "zw", "sx", "zx"], ["d"], "depthwise",
                              group=4, strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("QLinearConv", ["d", "sx", "zx", "wp", "swp", "zwp", "sy", "zy"], ["y"], "pointwise")]
    graph = helper.make_graph(nodes, "int8", [helper.make_tensor_value_info("x", u8, [1, 4, 9, 11])],
                              [helper.make_tensor_value_info("y", u8, [1, 8, 5, 6])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


STATIC_AIPP = ("aipp_op {\n input_format: RGB888_U8\n src_image_size_w: 8\n src_image_size_h: 6\n crop: true\n"
               " load_start_pos_w: 1\n load_start_pos_h: 1\n crop_size_w: 6\n crop_size_h: 4\n mean_chn_0: 3\n"
               " var_reci_chn_1: 0.5\n}\n")
DYNAMIC_AIPP = "aipp_op {\n aipp_mode: dynamic\n max_src_image_size: 144\n}\n"


def aipp_inputs(dynamic: bool) -> list[np.ndarray]:
    from ge.core.model.aipp_params import AippParams, ImageParams
    rng = np.random.default_rng(7)
    if not dynamic:
        return [rng.integers(0, 256, (1, 6, 8, 3), dtype=np.uint8)]
    params = AippParams("RGB888_U8", (8, 6), images=[ImageParams(True, (2, 1), (6, 4), mean=(3, 7, 0, 0))])
    return [rng.integers(0, 256, (1, 144), dtype=np.uint8), params.to_bytes()]


@dataclass
class Seed:
    """One valid OM the mutations start from, how to load it and what it must output."""
    name: str
    om: bytes
    inputs: list
    load: dict  # keyword arguments of api.load_from_mem (weight_dir)
    layout: "Layout" = None
    expected: list = None


# name -> (onnx builder, atc keyword arguments, inputs)
SEEDS = {
    "cnn": (seed_onnx, {}, seed_inputs),
    "cnn_external": (seed_onnx, {"external_weight": 1}, seed_inputs),
    "gears": (dynamic_onnx, {"input_shape": "x:-1,8", "dynamic": {"dynamic_batch_size": "1,3"}},
              lambda: [np.random.default_rng(3).standard_normal((3, 8)).astype(np.float32)]),
    "range": (dynamic_onnx, {"input_shape": "x:1~4,8"},
              lambda: [np.random.default_rng(4).standard_normal((2, 8)).astype(np.float32)]),
    "hybrid": (dynamic_onnx, {"input_shape": "x:-1,8"},
               lambda: [np.random.default_rng(5).standard_normal((5, 8)).astype(np.float32)]),
    "control_flow": (control_flow_onnx, {}, lambda: [np.array([1, 2, -0.5, 0.25], np.float32)]),
    "copies": (copies_onnx, {}, lambda: [np.random.default_rng(9).standard_normal((2, 4)).astype(np.float32)]),
    "aipp_static": (aipp_onnx, {"insert_op_conf": STATIC_AIPP}, lambda: aipp_inputs(False)),
    "aipp_dynamic": (aipp_onnx, {"insert_op_conf": DYNAMIC_AIPP}, lambda: aipp_inputs(True)),
    "int8": (int8_onnx, {}, lambda: [np.random.default_rng(11).integers(0, 256, (1, 4, 9, 11), dtype=np.uint8)]),
}


def compile_seed(name: str = "cnn", folder: str | None = None) -> Seed:
    """Seed `name` compiled by ge; external weight files go to `folder`/weight (kept by the caller)."""
    build, options, inputs = SEEDS[name]
    with tempfile.TemporaryDirectory() as d:
        out = folder or d
        path = os.path.join(d, "fuzz.onnx")
        onnx.save(build(), path)
        if "insert_op_conf" in options:  # the config's text, written beside the model
            with open(os.path.join(d, "aipp.cfg"), "w") as f:
                f.write(options["insert_op_conf"])
            options = dict(options, insert_op_conf=os.path.join(d, "aipp.cfg"))
        result = api.atc(path, os.path.join(out, name), **options)
        with open(result.om_path, "rb") as f:
            om = f.read()
    load = {"weight_dir": os.path.join(out, "weight")} if options.get("external_weight") else {}
    return Seed(name, om, inputs(), load)


# ---------------------------------------------------------------- the file's pieces


@dataclass
class Layout:
    """The seed OM taken apart: header fields, partitions in file order, decoded bodies."""
    fields: dict
    parts: list  # [(type, submodel, body bytes)]
    decoded: dict  # (type, submodel) -> decoded msgpack of MODEL_DEF / TASK_INFO

    @classmethod
    def of(cls, data: bytes) -> "Layout":
        header, _ = reader.parse_header(memoryview(data))
        computed = ("header_version", "checksum", "body_checksum", "length", "partitions", "header_checksum")
        fields = {k: v for k, v in header.items() if k not in computed}
        parts = [(p["type"], p["submodel"], data[p["offset"]:p["offset"] + p["size"]])
                 for p in sorted(header["partitions"], key=lambda p: p["offset"])]
        decoded = {(t, s): msgpack.unpackb(body, raw=False) for t, s, body in parts if t in (MODEL_DEF, TASK_INFO)}
        return cls(fields, parts, decoded)

    def signed(self, replace: dict) -> bytes:
        """The OM with some partition bodies replaced ((type, submodel) -> bytes), checksums recomputed."""
        parts = [(t, s, replace.get((t, s), body)) for t, s, body in self.parts]
        head, pieces = writer.assemble(self.fields, parts)
        return b"".join([head, *(bytes(p) for p in pieces)])


# ---------------------------------------------------------------- mutations


def flip_bits(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    return bytes(b)


def byte_run(rng: random.Random, data: bytes) -> bytes:
    b = bytearray(data)
    start = rng.randrange(len(b))
    n = rng.randint(1, 16)
    b[start:start + n] = bytes([rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))]) * n
    return bytes(b[:len(data)])


def truncate(rng: random.Random, data: bytes) -> bytes:
    return data[:rng.randrange(len(data))]


# msgpack markers followed by a big-endian length: bin/str/array/map 16 and 32
_LENGTH_MARKERS = {0xC5: 2, 0xC6: 4, 0xDA: 2, 0xDB: 4, 0xDC: 2, 0xDD: 4, 0xDE: 2, 0xDF: 4}


def inflate_length(rng: random.Random, data: bytes) -> bytes:
    """One msgpack length prefix (16/32-bit, or a fixarray/fixmap/fixstr) made huge."""
    spots = [i for i in range(len(data) - 1) if data[i] in _LENGTH_MARKERS or 0x80 <= data[i] <= 0xBF]
    if not spots:
        return flip_bits(rng, data)
    i = rng.choice(spots)
    b = bytearray(data)
    n = _LENGTH_MARKERS.get(b[i])
    if n is None:  # fixmap/fixarray/fixstr: becomes the 32-bit form's marker? keep size, max the count
        b[i] |= 0x0F if b[i] < 0xA0 else 0x1F
    else:
        b[i + 1:i + 1 + n] = b"\xff" * n
    return bytes(b)


RAW = {"flip_bits": flip_bits, "byte_run": byte_run, "truncate": truncate, "inflate_length": inflate_length}

# replacement values of another type than the field's, or out of any sane range for an int field;
# an in-range value of the same type (alpha 0.2 -> -1.0) is another valid model, not a mutation
_OTHER_TYPES = ("xxx", "", 1e308, float("nan"), None, True, [], [1e308], [-1], ["x"], {}, {"k": 1}, b"\x00")
_HUGE_INTS = (-(1 << 63), (1 << 64) - 1, 1 << 62)


def hostile_values(value) -> list:
    if type(value) is int:
        return [v for v in _OTHER_TYPES if type(v) is not bool] + list(_HUGE_INTS)
    if type(value) is float:
        return [v for v in _OTHER_TYPES if type(v) not in (int, float)]
    return [v for v in _OTHER_TYPES + (-1, 1 << 62) if type(v) is not type(value)]


def leaves(obj, path=()):
    """(path, value) of every map value and list entry, depth first."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + (k,), v
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list):
        for j, v in enumerate(obj):
            yield path + (j,), v
            yield from leaves(v, path + (j,))


def _parent(obj, path):
    for k in path[:-1]:
        obj = obj[k]
    return obj


# marks an edit that may leave another well-formed model (see the module's docstring)
SEMANTIC = "semantic:"


def structured_edit(rng: random.Random, obj) -> str:
    """Edit one field of `obj` in place with a hostile value; returns what was done."""
    path, value = rng.choice(list(leaves(obj)))
    parent, key = _parent(obj, path), path[-1]
    how = rng.random()
    if how < 0.12 and isinstance(parent, dict):
        del parent[key]
        return f"{SEMANTIC if str(key).startswith('ge.') else ''}delete {path}"
    if how < 0.2 and isinstance(parent, list):
        if rng.random() < 0.5:
            del parent[key]
            return f"{SEMANTIC}drop {path}"
        parent.insert(key, copy.deepcopy(parent[key]))
        return f"{SEMANTIC}duplicate {path}"
    new = rng.choice(hostile_values(value))
    if isinstance(value, str) and rng.random() < 0.3:
        new = value + "_x"  # a name that no longer refers to anything
    parent[key] = copy.deepcopy(new)
    return f"set {path} = {new!r}"


@dataclass
class Case:
    number: int
    kind: str  # raw, signed, structured
    what: str
    data: bytes


def make_case(seed: int, number: int, om: bytes, layout: Layout) -> Case:
    rng = random.Random(f"{seed}:{number}")
    roll = rng.random()
    if roll < 0.2:
        name = rng.choice(sorted(RAW))
        return Case(number, "raw", name, RAW[name](rng, om))
    key = rng.choice(sorted(layout.decoded))
    part = f"{'MODEL_DEF' if key[0] == MODEL_DEF else 'TASK_INFO'}[{key[1]}]"
    if roll < 0.45:
        name = rng.choice(("flip_bits", "byte_run", "inflate_length", "truncate"))
        body = {(t, s): b for t, s, b in layout.parts}[key]
        return Case(number, "signed", f"{name} in {part}", layout.signed({key: RAW[name](rng, body)}))
    obj = copy.deepcopy(layout.decoded[key])
    what = structured_edit(rng, obj)
    return Case(number, "structured", f"{part}: {what}", layout.signed({key: msgpack.packb(obj, use_bin_type=True)}))


# ---------------------------------------------------------------- the oracle


def run_om(data: bytes, inputs, device: str, load: dict | None = None):
    model_id = api.load_from_mem(data, device, **(load or {}))
    try:
        return api.execute(model_id, inputs)
    finally:
        api.unload(model_id)


def bounded(attempt, seconds: float = HANG_SECONDS) -> bool:
    """Run `attempt()` on a daemon thread; False when it is still running after `seconds` (a hang)."""
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(seconds)
    return not t.is_alive()


def check(case: Case, seed: Seed, device: str) -> str | None:
    """None when the case ends as it must, else what went wrong."""
    box, expected, layout = {}, seed.expected, seed.layout

    def attempt():
        try:
            info = api.inspect(case.data)  # what `ge inspect` shows: a GeError or plain data, too
            box["inspected"] = isinstance(info, dict)
        except GeError:
            pass
        except BaseException as e:  # noqa: BLE001 - anything else is the finding
            box["other"], box["tb"] = e, "(in api.inspect) " + traceback.format_exc()
            return
        try:
            box["out"] = run_om(case.data, seed.inputs, device, seed.load)
        except GeError as e:
            box["ge"] = e
        except BaseException as e:  # noqa: BLE001 - anything else is the finding
            box["other"] = e
            box["tb"] = traceback.format_exc()

    if not bounded(attempt):
        return f"hang (> {HANG_SECONDS:.0f} s)"
    if "other" in box:
        e = box["other"]
        return f"{type(e).__name__}: {e}\n{box['tb']}"
    if "ge" in box:
        message = str(box["ge"])
        if "\n" in message.strip():
            return f"GeError of several lines: {message!r}"
        if ": malformed OM (" in message:  # the reader's safety net, not its validation, caught it
            return f"a gap in the OM validation: {message}"
        return None
    out = box["out"]
    if len(out) != len(expected) or any(type(o) is not np.ndarray for o in out):
        return f"returned {len(out)} outputs of types {[type(o).__name__ for o in out]}"
    same = all(o.dtype == e.dtype and o.shape == e.shape and o.tobytes() == e.tobytes() for o, e in zip(out, expected))
    if same:
        return None
    if SEMANTIC in case.what and "('outputs', " in case.what and "'shape'" in case.what and \
            all(o.dtype == e.dtype and o.tobytes() == e.tobytes() for o, e in zip(out, expected)):
        return None  # an output declared in another shape of its size: the same bytes (as a Reshape's alias may)
    if (case.kind == "signed" or SEMANTIC in case.what) and _decodes_differently(case.data, layout):
        if all(o.dtype == e.dtype and o.shape == e.shape for o, e in zip(out, expected)):
            return None  # another well-formed model, signed: its own outputs
    return "ran but its outputs differ from the unmutated model's"


def _decodes_differently(data: bytes, layout: Layout) -> bool:
    try:
        return Layout.of(data).decoded != layout.decoded
    except Exception:  # noqa: BLE001 - unreadable means different
        return True


# ---------------------------------------------------------------- the campaign


class Campaign:
    """Every seed compiled and run once; case n mutates seed n % len(seeds)."""

    def __init__(self, seed: int = 0, device: str = "cpu", seeds=tuple(SEEDS)):
        self.seed, self.device = seed, device
        self._folder = tempfile.TemporaryDirectory(prefix="ge_om_fuzz_")  # external weight files
        self.seeds = [compile_seed(name, os.path.join(self._folder.name, name)) for name in seeds]
        for s in self.seeds:
            s.layout = Layout.of(s.om)
            s.expected = run_om(s.om, s.inputs, device, s.load)

    def seed_of(self, number: int) -> Seed:
        return self.seeds[number % len(self.seeds)]

    def case(self, number: int) -> Case:
        s = self.seed_of(number)
        return make_case(self.seed, number, s.om, s.layout)

    def failure(self, number: int) -> str | None:
        case, s = self.case(number), self.seed_of(number)
        problem = check(case, s, self.device)
        return None if problem is None else f"case {number} on {s.name} ({case.kind}: {case.what}): {problem}"

    def run(self, cases: int, start: int = 0) -> list[str]:
        return [f for f in (self.failure(n) for n in range(start, start + cases)) if f]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.om_fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case number")
    p.add_argument("--only", type=int, default=None, help="replay one case")
    p.add_argument("--device", default="cpu", choices=("cpu", "sim"))
    p.add_argument("--seeds", default=",".join(SEEDS), help=f"seed models (of {', '.join(SEEDS)})")
    args = p.parse_args(argv)
    campaign = Campaign(args.seed, args.device, args.seeds.split(","))
    numbers = [args.only] if args.only is not None else range(args.start, args.start + args.cases)
    t0, failures, kinds = time.perf_counter(), 0, {}
    for n in numbers:
        kind = campaign.case(n).kind
        kinds[kind] = kinds.get(kind, 0) + 1
        problem = campaign.failure(n)
        if problem:
            failures += 1
            print(f"FAIL {problem}", flush=True)
    elapsed = time.perf_counter() - t0
    print(f"{len(numbers)} cases ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))}), seed {args.seed}, "
          f"{failures} failures, {elapsed:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
