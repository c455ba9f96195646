"""A deterministic, seeded ONNX mutator and the oracle every mutated model must satisfy in `ge atc`.

Seeds (valid ONNX models, om_fuzz.py's and one of attribute-heavy ops): the small CNN, the same CNN
with its weights in an external data file, an attribute-heavy graph (grouped Conv, Pad,
AveragePool, Transpose, Split, Concat, ReduceMean, Flatten, Gather), the MLP compiled with an
unknown batch (the hybrid path) and the If holding a Loop (nested subgraphs). Case n picks a seed and
mutates it one way:

- at the byte level: bit flips, byte runs, truncation of the serialized model; a name's bytes made
  invalid UTF-8 (same length, so the framing holds);
- at the protobuf level: dims (huge, negative, zero), initializer data truncated or extended,
  integer constants (shapes, pads, split sizes, indices, trip counts) huge, negative or zero,
  dtypes, dangling inputs, duplicate names, cycles, attributes of the wrong type or absurd value
  (kernel 0, negative pads, stride 0, axis out of range, group not dividing the channels, 2^31
  sizes), opsets removed or absurd, unknown ops and domains, corrupted subgraphs, external-data
  locations (NUL bytes, escaping the folder, absolute, missing) and ranges (offset or length past
  the file, the data file truncated).

The oracle, for every case: `api.atc` compiles the model (in this process, on a thread bounded in
time) and the OM is loaded and run on inputs made from its input descs; each step either succeeds
or raises a GeError of one line; a failed compile leaves nothing in its output folder; no case
grows the process's peak RSS by more than MAX_GROWTH. Never another exception, never a hang (the
run has a timeout: a Loop's trip count mutated to 2^58 is a valid model that would run for ages).
`run_cli` runs a case through `ge atc` in a child process under an address-space limit, for the
hard bound: exit 0 or 1, one `error:` line on stderr, no traceback, no signal.

    python -m tests.fuzz.onnx_fuzz --cases 20000 [--seed 1] [--seeds cnn,attrs] [--cli 50]

runs a longer campaign and prints each failing case (seed, case number, mutation); `--only N`
replays one. tests/fuzz/test_onnx_fuzz.py runs a few thousand cases in the test suite.
"""
from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError

from .om_fuzz import HANG_SECONDS, RAW, bounded, control_flow_onnx, dynamic_onnx, seed_onnx

MAX_GROWTH = 256 << 20  # peak RSS one case may add (13,000 cases of seeds 7 and 11 stay under it)
RUN_LIMIT = 64 << 20  # inputs and planned memory of a compiled case larger than this are not run
CLI_MEMORY = 3 << 30  # address space of a `ge atc` child (run_cli)
RUN_SECONDS = 10.0  # execute's timeout: a valid model may loop 2^58 times (a mutated trip count)


# ---------------------------------------------------------------- the seed models


def attrs_onnx() -> onnx.ModelProto:
    """x [1, 4, 8, 8] through ops whose attributes are sizes, axes and groups."""
    rng = np.random.default_rng(6)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], "conv", group=2, pads=[1, 1, 1, 1], strides=[1, 1],
                         dilations=[1, 1], kernel_shape=[3, 3]),
        helper.make_node("Pad", ["c", "pads"], ["p"], "pad", mode="constant"),
        helper.make_node("AveragePool", ["p"], ["a"], "avgpool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Transpose", ["a"], ["t"], "transpose", perm=[0, 1, 3, 2]),
        helper.make_node("Split", ["t", "split"], ["s0", "s1"], "split", axis=1),
        helper.make_node("Concat", ["s1", "s0"], ["cat"], "concat", axis=1),
        helper.make_node("ReduceMean", ["cat"], ["m"], "mean", axes=[3], keepdims=1),
        helper.make_node("Flatten", ["m"], ["f"], "flatten", axis=1),
        helper.make_node("Gather", ["f", "idx"], ["y"], "gather", axis=1),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads"),
             numpy_helper.from_array(np.array([2, 2], np.int64), "split"),
             numpy_helper.from_array(np.array([0, 3, 5], np.int64), "idx")]
    graph = helper.make_graph(nodes, "attrs", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def patterns_onnx() -> onnx.ModelProto:
    """The passes' newer patterns as exporters write them: convs around a nearest x2 upsample and a
    channel Concat (a blocked region), then an RMSNorm over the rows (Pow, ReduceMean, Add eps, Sqrt,
    Reciprocal, Mul x, Mul weight)."""
    rng = np.random.default_rng(7)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], "conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Resize", ["c1", "", "scales"], ["up"], "upsample", mode="nearest"),
        helper.make_node("Conv", ["x2", "w2"], ["c2"], "conv2", kernel_shape=[1, 1]),
        helper.make_node("Concat", ["up", "c2"], ["cat"], "concat", axis=1),
        helper.make_node("Conv", ["cat", "w3"], ["c3"], "conv3", kernel_shape=[1, 1]),
        helper.make_node("Reshape", ["c3", "rows"], ["r"], "rows"),
        helper.make_node("Pow", ["r", "two"], ["sq"], "square"),
        helper.make_node("ReduceMean", ["sq"], ["ms"], "mean", axes=[-1], keepdims=1),
        helper.make_node("Add", ["ms", "eps"], ["mse"], "add_eps"),
        helper.make_node("Sqrt", ["mse"], ["rms"], "sqrt"),
        helper.make_node("Reciprocal", ["rms"], ["inv"], "reciprocal"),
        helper.make_node("Mul", ["r", "inv"], ["n"], "normalize"),
        helper.make_node("Mul", ["n", "gamma"], ["y"], "weight"),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1, "w1"),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(rng.standard_normal((16, 16, 1, 1)).astype(np.float32) * 0.3, "w2"),
             numpy_helper.from_array(rng.standard_normal((16, 32, 1, 1)).astype(np.float32) * 0.3, "w3"),
             numpy_helper.from_array(np.array([16, 64], np.int64), "rows"),
             numpy_helper.from_array(np.array(2, np.float32), "two"),
             numpy_helper.from_array(np.array(1e-6, np.float32), "eps"),
             numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "gamma")]
    graph = helper.make_graph(nodes, "patterns", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 4]),
                                                  helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 16, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


# name -> (onnx builder, atc keyword arguments, weight of the seed among cases)
SEEDS = {
    "cnn": (seed_onnx, {}, 3),
    "cnn_external": (seed_onnx, {}, 2),  # saved with its initializers in "weights.bin"
    "attrs": (attrs_onnx, {}, 3),
    "hybrid": (dynamic_onnx, {"input_shape": "x:-1,8"}, 2),
    "control_flow": (control_flow_onnx, {}, 1),  # the slowest to compile
    "patterns": (patterns_onnx, {}, 2),
}
EXTERNAL = "weights.bin"


@dataclass
class Seed:
    name: str
    model: onnx.ModelProto  # with external data references for cnn_external
    files: dict  # file name -> bytes, beside the model (the external data)
    options: dict


def make_seed(name: str) -> Seed:
    build, options, _ = SEEDS[name]
    model, files = build(), {}
    if name == "cnn_external":
        with tempfile.TemporaryDirectory() as d:
            onnx.save(model, os.path.join(d, "m.onnx"), save_as_external_data=True, location=EXTERNAL,
                      size_threshold=0)
            model = onnx.load(os.path.join(d, "m.onnx"), load_external_data=False)
            with open(os.path.join(d, EXTERNAL), "rb") as f:
                files[EXTERNAL] = f.read()
    return Seed(name, model, files, options)


# ---------------------------------------------------------------- mutations of the proto


def _graphs(g: onnx.GraphProto):
    """The graph and every subgraph in it."""
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.HasField("g"):
                yield from _graphs(a.g)
            for sub in a.graphs:
                yield from _graphs(sub)


def _pick_graph(rng, m):
    return rng.choice(list(_graphs(m.graph)))


def _pick_node(rng, m):
    nodes = [n for g in _graphs(m.graph) for n in g.node]
    return rng.choice(nodes)


HOSTILE_DIMS = (0, -1, -7, 1 << 31, (1 << 31) - 1, 1 << 62, (1 << 63) - 1)


def mutate_dims(rng, m) -> str:
    g = _pick_graph(rng, m)
    tensors = [vi for vi in (*g.input, *g.output, *g.value_info) if vi.type.tensor_type.shape.dim]
    if g.initializer and (not tensors or rng.random() < 0.5):
        t = rng.choice(g.initializer)
        if not t.dims:
            t.dims.append(rng.choice(HOSTILE_DIMS))
            return f"initializer '{t.name}': a dim added"
        k = rng.randrange(len(t.dims))
        t.dims[k] = rng.choice(HOSTILE_DIMS)
        return f"initializer '{t.name}' dims[{k}] = {t.dims[k]}"
    if not tensors:
        return mutate_opset(rng, m)
    vi = rng.choice(tensors)
    dims = vi.type.tensor_type.shape.dim
    k = rng.randrange(len(dims))
    dims[k].dim_value = rng.choice(HOSTILE_DIMS)
    return f"'{vi.name}' dims[{k}] = {dims[k].dim_value}"


def mutate_data(rng, m) -> str:
    g = _pick_graph(rng, m)
    inline = [t for t in g.initializer if t.data_location != TensorProto.EXTERNAL]  # (mutate_external's)
    if not inline:
        return mutate_dims(rng, m)
    t = rng.choice(inline)
    data = t.raw_data or numpy_helper.to_array(t).tobytes()
    t.ClearField("float_data"), t.ClearField("int64_data"), t.ClearField("int32_data")
    how = rng.choice(("truncate", "extend", "empty", "odd"))
    t.raw_data = {"truncate": data[:len(data) // 2], "extend": data + data[:8] * rng.randint(1, 64),
                  "empty": b"", "odd": data[:-1]}[how]
    return f"initializer '{t.name}' data {how}"


HOSTILE_INTS = (0, -1, -2, 1 << 31, -(1 << 31), (1 << 62), 1 << 40, 255)


def mutate_values(rng, m) -> str:
    """An integer constant (a Reshape's shape, pads, split sizes, indices, a trip count) given
    hostile values: huge, negative, zero."""
    ints = [(g, t) for g in _graphs(m.graph) for t in g.initializer
            if t.data_type in (TensorProto.INT64, TensorProto.INT32) and t.data_location != TensorProto.EXTERNAL]
    if not ints:
        return mutate_data(rng, m)
    _, t = rng.choice(ints)
    a = numpy_helper.to_array(t).copy()
    if a.size == 0:
        return mutate_data(rng, m)
    flat = a.reshape(-1)
    k = rng.randrange(flat.size)
    value = rng.choice(HOSTILE_INTS)
    flat[k] = np.array(value).astype(a.dtype)  # (wraps for int32, as a writer's overflow would)
    t.CopyFrom(numpy_helper.from_array(a, t.name))
    return f"initializer '{t.name}'[{k}] = {flat[k]}"


DTYPES = (0, TensorProto.STRING, TensorProto.BFLOAT16, TensorProto.COMPLEX64, TensorProto.FLOAT8E4M3FN,
          TensorProto.UINT4, TensorProto.BOOL, TensorProto.DOUBLE, TensorProto.INT8, 30, 99)


def mutate_dtype(rng, m) -> str:
    g = _pick_graph(rng, m)
    dtype = rng.choice(DTYPES)
    if g.initializer and rng.random() < 0.5:
        t = rng.choice(g.initializer)
        t.data_type = dtype
        return f"initializer '{t.name}' data_type = {dtype}"
    vis = [*g.input, *g.output] or list(m.graph.input)
    vi = rng.choice(vis)
    vi.type.tensor_type.elem_type = dtype
    return f"'{vi.name}' elem_type = {dtype}"


def mutate_names(rng, m) -> str:
    """A dangling input, a duplicate output or node name, a cycle."""
    g = _pick_graph(rng, m)
    if not g.node:
        return mutate_opset(rng, m)
    k = rng.randrange(len(g.node))
    n = g.node[k]
    how = rng.choice(("dangling", "duplicate_output", "duplicate_node", "cycle", "self_loop", "duplicate_init",
                      "output_of_nothing", "input_is_output"))
    if how == "dangling" and n.input:
        j = rng.randrange(len(n.input))
        n.input[j] = "no_such_tensor"
    elif how == "duplicate_output" and len(g.node) > 1:
        other = g.node[(k + 1) % len(g.node)]
        n.output[0] = other.output[0]
    elif how == "duplicate_node" and len(g.node) > 1:
        n.name = g.node[(k + 1) % len(g.node)].name
    elif how == "cycle" and n.input and k + 1 < len(g.node):
        n.input[0] = g.node[rng.randrange(k + 1, len(g.node))].output[0]
    elif how == "self_loop" and n.input:
        n.input[0] = n.output[0]
    elif how == "duplicate_init" and g.initializer:
        t = onnx.TensorProto()
        t.CopyFrom(rng.choice(g.initializer))
        if t.data_location != TensorProto.EXTERNAL:
            t.raw_data = (t.raw_data or numpy_helper.to_array(t).tobytes())[::-1]
        g.initializer.append(t)
    elif how == "output_of_nothing" and g.output:
        g.output[0].name = "nothing_makes_this"
    elif how == "input_is_output" and g.input and g.output:
        g.output[0].name = g.input[0].name
    else:
        n.op_type = "NoSuchOp"
        return f"node '{n.name}' op_type = NoSuchOp"
    return f"node '{n.name}': {how}"


#: attribute name -> absurd values of the right type
ABSURD = {
    "kernel_shape": ([0, 0], [-3, 3], [1 << 31, 1 << 31], [1]), "pads": ([-1, -1, -1, -1], [1 << 31] * 4, [1, 1]),
    "strides": ([0, 0], [-1, -1], [1 << 31, 1], [1]), "dilations": ([0, 0], [-2, 1], [1 << 31, 1 << 31]),
    "axis": (100, -100, 1 << 31, -(1 << 31)), "axes": ([100], [-100], [0, 0], [1 << 31]), "group": (0, -1, 3, 1 << 31),
    "perm": ([0, 0, 1, 2], [3, 2, 1], [0, 1, 2, 9]), "keepdims": (-1, 2), "alpha": (float("nan"), float("inf")),
    "transB": (5, -1), "mode": ("no_such_mode", ""), "then_branch": (), "else_branch": (), "body": (),
}
#: values of every attribute type, for "the wrong type"
WRONG = (("f", 1.5), ("i", 7), ("s", b"\xff\xfe"), ("ints", [1, 2]), ("floats", [0.5]), ("strings", [b"a"]))


def mutate_attribute(rng, m) -> str:
    nodes = [n for g in _graphs(m.graph) for n in g.node if n.attribute]
    if not nodes:
        return mutate_names(rng, m)
    n = rng.choice(nodes)
    k = rng.randrange(len(n.attribute))
    a = n.attribute[k]
    values = ABSURD.get(a.name, ())
    if values and rng.random() < 0.7:
        v = rng.choice(values)
        n.attribute[k].CopyFrom(helper.make_attribute(a.name, v))
        return f"node '{n.name}' {a.name} = {v!r}"
    if rng.random() < 0.2:
        n.attribute.add().CopyFrom(helper.make_attribute(rng.choice(("no_such_attr", a.name)), 1))
        return f"node '{n.name}': an extra attribute"
    kind, v = rng.choice(WRONG)
    n.attribute[k].CopyFrom(helper.make_attribute(a.name, v))
    return f"node '{n.name}' {a.name} as {kind} {v!r}"


def mutate_opset(rng, m) -> str:
    how = rng.choice(("remove", "zero", "negative", "huge", "domain", "ir", "unknown_domain_node", "duplicate"))
    if how == "remove":
        del m.opset_import[:]
    elif how in ("zero", "negative", "huge"):
        m.opset_import[0].version = {"zero": 0, "negative": -5, "huge": 1 << 40}[how]
    elif how == "domain":
        m.opset_import.add(domain="com.evil", version=1)
    elif how == "ir":
        m.ir_version = rng.choice((0, 2, 1 << 40))
    elif how == "unknown_domain_node":
        n = _pick_node(rng, m)
        n.domain = "com.evil"
    else:
        m.opset_import.add(domain="", version=rng.choice((1, 11, 22)))
    return f"opset: {how}"


def mutate_subgraph(rng, m) -> str:
    holders = [(n, a) for g in _graphs(m.graph) for n in g.node for a in n.attribute if a.HasField("g")]
    if not holders:
        return mutate_attribute(rng, m)
    n, a = rng.choice(holders)
    sub = a.g
    how = rng.choice(("drop_output", "drop_input", "dangling", "drop_attr", "as_int", "empty", "extra_output"))
    if how == "drop_output" and sub.output:
        del sub.output[-1]
    elif how == "drop_input" and sub.input:
        del sub.input[-1]
    elif how == "dangling" and sub.node:
        sub.node[0].input[0] = "no_such_outer_value"
    elif how == "drop_attr":
        n.attribute.remove(a)
    elif how == "as_int":
        a.CopyFrom(helper.make_attribute(a.name, 3))
    elif how == "extra_output":
        sub.output.add().CopyFrom(helper.make_tensor_value_info("extra", TensorProto.FLOAT, [1]))
    else:
        del sub.node[:]
    return f"node '{n.name}' subgraph {a.name}: {how}"


def mutate_external(rng, m) -> str:
    ts = [t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    if not ts:
        return mutate_data(rng, m)
    t = rng.choice(ts)
    entries = {e.key: e for e in t.external_data}
    how = rng.choice(("nul", "escape", "absolute", "missing", "directory", "offset", "length", "negative", "dup_key"))
    if how in ("nul", "escape", "absolute", "missing", "directory"):
        entries["location"].value = {"nul": "weig\x00hts.bin", "escape": "../../etc/passwd", "absolute": "/etc/passwd",
                                     "missing": "no_such.bin", "directory": "."}[how]
    elif how in ("offset", "length", "negative"):
        key = "length" if how == "length" else "offset"
        value = {"offset": str(1 << 40), "length": str(1 << 62), "negative": "-16"}[how]
        if key in entries:
            entries[key].value = value
        else:
            t.external_data.add(key=key, value=value)
    else:
        t.external_data.add(key="location", value="other.bin")
    return f"initializer '{t.name}' external data: {how}"


PROTO = {"dims": mutate_dims, "data": mutate_data, "values": mutate_values, "dtype": mutate_dtype, "names": mutate_names,
         "attribute": mutate_attribute, "opset": mutate_opset, "subgraph": mutate_subgraph,
         "external": mutate_external}


# ---------------------------------------------------------------- mutations of the bytes


def invalid_utf8_name(rng, m: onnx.ModelProto) -> tuple[bytes, str]:
    """One occurrence of a tensor, node, input or output name in the serialized model with a byte
    made 0xFF: the framing holds, the string is no longer UTF-8 (protobuf's Python API cannot set it)."""
    data = m.SerializeToString()
    g = m.graph
    names = sorted({*(n.name for n in g.node), *(o for n in g.node for o in n.output), *(v.name for v in g.input),
                    *(v.name for v in g.output), *(t.name for t in g.initializer)} - {""})
    name = rng.choice(names).encode()
    spots, start = [], 0
    while (i := data.find(bytes([len(name)]) + name, start)) >= 0 and len(name) < 128:
        spots.append(i + 1)
        start = i + 1
    if not spots:
        return data, "no name found"
    i = rng.choice(spots) + rng.randrange(len(name))
    bad = bytearray(data)
    bad[i] = 0xFF
    return bytes(bad), f"name {name.decode()!r} with an invalid UTF-8 byte"


# ---------------------------------------------------------------- cases


@dataclass
class Case:
    number: int
    seed: str
    kind: str  # byte, utf8, or one of PROTO
    what: str
    data: bytes
    files: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)


def make_case(campaign_seed: int, number: int, seeds: dict) -> Case:
    rng = random.Random(f"onnx:{campaign_seed}:{number}")
    names = sorted(seeds)
    s = seeds[rng.choices(names, [SEEDS[n][2] for n in names])[0]]
    m = onnx.ModelProto()
    m.CopyFrom(s.model)
    files = dict(s.files)
    roll = rng.random()
    if roll < 0.15:
        name = rng.choice(("flip_bits", "byte_run", "truncate"))
        if files and rng.random() < 0.3:  # the external data file instead of the model
            files[EXTERNAL] = RAW[name](rng, files[EXTERNAL])
            return Case(number, s.name, "byte", f"{name} in {EXTERNAL}", m.SerializeToString(), files, s.options)
        return Case(number, s.name, "byte", name, RAW[name](rng, m.SerializeToString()), files, s.options)
    if roll < 0.25:
        data, what = invalid_utf8_name(rng, m)
        return Case(number, s.name, "utf8", what, data, files, s.options)
    kinds = sorted(PROTO)
    weights = [4 if k == "external" and files else 2 if k == "subgraph" and s.name == "control_flow" else
               0 if k in ("external", "subgraph") else 1 for k in kinds]
    kind = rng.choices(kinds, weights)[0]
    what = PROTO[kind](rng, m)
    return Case(number, s.name, kind, what, m.SerializeToString(), files, s.options)


# ---------------------------------------------------------------- the oracle


def write_case(case: Case, folder: str) -> str:
    """The case's model and its external data files in `folder`; the model's path."""
    for name, data in case.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    path = os.path.join(folder, "model.onnx")
    with open(path, "wb") as f:
        f.write(case.data)
    return path


def inputs_for(model) -> list | None:
    """Inputs for a loaded model from its input descs (an unknown dim taken as 2), None when they
    would be larger than RUN_LIMIT."""
    arrays = []
    for d in model.inputs:
        shape = tuple(int(v) if isinstance(v, (int, np.integer)) and v >= 0 else 2 for v in d.shape)
        dtype = np.dtype(d.dtype)
        if dtype.kind not in "biuf" or np.prod(shape, dtype=np.float64) * dtype.itemsize > RUN_LIMIT:
            return None
        arrays.append(np.random.default_rng(0).standard_normal(shape).astype(dtype) if dtype.kind == "f"
                      else np.ones(shape, dtype))
    return arrays


def compile_and_run(path: str, out: str, options: dict) -> str:
    """What happened to a case that ended well: 'rejected: ...', 'compiled', 'ran', ... (a GeError
    is a rejection; anything else propagates to the oracle)."""
    try:
        result = api.atc(path, os.path.join(out, "model"), **options)
    except GeError as e:
        _one_line(e, "api.atc")
        leftovers = sorted(os.listdir(out)) if os.path.isdir(out) else []
        if leftovers:
            raise AssertionError(f"a failed compile left {leftovers} in its output folder ({e})")
        return f"rejected: {e}"
    work, weights = api.query_size(result.om_path)
    if work + weights > RUN_LIMIT:
        return "compiled (too large to run here)"
    try:
        model_id = api.load_from_file(result.om_path)
    except GeError as e:
        _one_line(e, "api.load_from_file")
        return f"compiled, load refused: {e}"
    try:
        inputs = inputs_for(api.model(model_id))
        if inputs is None:
            return "compiled, inputs too large to run"
        api.execute(model_id, inputs, timeout=RUN_SECONDS)
        return "ran"
    except GeError as e:
        _one_line(e, "api.execute")
        return f"compiled, run refused: {e}"
    finally:
        api.unload(model_id)


def _one_line(e: GeError, where: str) -> None:
    message = str(e).strip()
    if not message or "\n" in message:
        raise AssertionError(f"{where}: a GeError of several lines (or none): {message!r}")


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def check(case: Case) -> tuple[str | None, str]:
    """(None or what went wrong, what happened)."""
    box = {}
    folder = tempfile.mkdtemp(prefix="ge_onnx_fuzz_")
    try:
        path = write_case(case, folder)
        out = os.path.join(folder, "out")
        before = _peak_rss()

        def attempt():
            try:
                box["outcome"] = compile_and_run(path, out, case.options)
            except BaseException as e:  # noqa: BLE001 - anything but a GeError is the finding
                box["error"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()}"

        if not bounded(attempt):
            return f"hang (> {HANG_SECONDS:.0f} s)", ""
        grown = _peak_rss() - before
        if "error" in box:
            return box["error"], ""
        if grown > MAX_GROWTH:
            return f"peak RSS grew by {grown >> 20} MiB", box["outcome"]
        return None, box["outcome"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_cli(case: Case, timeout: float = HANG_SECONDS) -> str | None:
    """`ge atc` on the case in a child process with CLI_MEMORY of address space: None when it exits
    0 or 1 with, on failure, one `error:` line on stderr and no traceback; else what went wrong."""
    folder = tempfile.mkdtemp(prefix="ge_onnx_fuzz_cli_")
    try:
        path = write_case(case, folder)
        cmd = [sys.executable, "-m", "ge.cli.main", "atc", "--model", path, "--output", os.path.join(folder, "out", "m")]
        if case.options.get("input_shape"):
            cmd += ["--input_shape", case.options["input_shape"]]

        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (CLI_MEMORY, CLI_MEMORY))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, preexec_fn=limit,
                               errors="replace")
        except subprocess.TimeoutExpired:
            return f"ge atc hung (> {timeout:.0f} s)"
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        if p.returncode == 0:
            return None if os.path.exists(os.path.join(folder, "out", "m.om")) else "exit 0 without an OM"
        if p.returncode != 1:
            return f"ge atc exited {p.returncode}: {p.stderr[-500:]}"
        if "Traceback" in p.stderr or "internal error" in p.stderr or len(lines) != 1 or "error" not in lines[0]:
            return f"ge atc's stderr is not one error line: {p.stderr[-500:]}"
        if os.path.exists(os.path.join(folder, "out", "m.om")):
            return "ge atc failed but left an OM"
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# ---------------------------------------------------------------- the campaign


class Campaign:
    def __init__(self, seed: int = 0, seeds=tuple(SEEDS)):
        self.seed = seed
        self.seeds = {name: make_seed(name) for name in seeds}
        self._checked: dict = {}

    def case(self, number: int) -> Case:
        return make_case(self.seed, number, self.seeds)

    def checked(self, number: int) -> tuple[str | None, str]:
        """check() of case `number`, done once (the test suite counts the outcomes of cases it ran)."""
        if number not in self._checked:
            self._checked[number] = check(self.case(number))
        return self._checked[number]

    def failure(self, number: int) -> str | None:
        problem, _ = self.checked(number)
        if problem is None:
            return None
        case = self.case(number)
        return f"case {number} on {case.seed} ({case.kind}: {case.what}): {problem}"

    def run(self, cases: int, start: int = 0) -> list[str]:
        return [f for f in (self.failure(n) for n in range(start, start + cases)) if f]

    def outcomes(self, numbers) -> dict:
        """What happened to each case: rejected / compiled / ran, counted."""
        counts: dict = {}
        for n in numbers:
            problem, outcome = self.checked(n)
            key = "FAILED" if problem else outcome.split(":")[0]
            counts[key] = counts.get(key, 0) + 1
        return counts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.onnx_fuzz", description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=0, help="first case number")
    p.add_argument("--only", type=int, default=None, help="replay one case")
    p.add_argument("--seeds", default=",".join(SEEDS), help=f"seed models (of {', '.join(SEEDS)})")
    p.add_argument("--cli", type=int, default=0, help="also run every n-th case through `ge atc` (0: none)")
    p.add_argument("--verbose", action="store_true", help="print what happened to every case")
    args = p.parse_args(argv)
    campaign = Campaign(args.seed, args.seeds.split(","))
    numbers = [args.only] if args.only is not None else range(args.start, args.start + args.cases)
    t0, failures, outcomes = time.perf_counter(), 0, {}
    for n in numbers:
        case = campaign.case(n)
        problem, outcome = check(case)
        if problem is None and args.cli and n % args.cli == 0:
            problem = run_cli(case)
        key = "FAILED" if problem else outcome.split(":")[0]
        outcomes[key] = outcomes.get(key, 0) + 1
        if problem:
            failures += 1
            print(f"FAIL case {n} on {case.seed} ({case.kind}: {case.what}): {problem}", flush=True)
        elif args.verbose:
            print(f"case {n} on {case.seed} ({case.kind}: {case.what}): {outcome}")
    elapsed = time.perf_counter() - t0
    print(f"{len(numbers)} cases ({', '.join(f'{v} {k}' for k, v in sorted(outcomes.items()))}), seed {args.seed}, "
          f"{failures} failures, {elapsed:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
