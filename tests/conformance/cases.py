"""ONNX's own backend test cases, collected in memory: the node cases from
`onnx.backend.test.case.node` (the wheel no longer ships their data files) and the model cases
whose data the wheel does ship (`onnx/backend/test/data/{simple,pytorch-converted,pytorch-operator}`),
2,024 with onnx 1.23. `real` and `light` are left out: their models are downloads."""
from __future__ import annotations

import functools
import glob
import os
import pickle
import warnings
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

#: the data-file kinds onnx's own runner runs besides the node cases
DATA_KINDS = ("simple", "pytorch-converted", "pytorch-operator")
#: the environment variable naming a file of onnx's node cases pickled by the process that made them
#: (tests/test_every_level.py: its reruns read them rather than make them again)
NODE_CASES_FILE = "GE_TEST_ONNX_NODE_CASES"


@dataclass
class Case:
    name: str
    kind: str  # "node" or one of DATA_KINDS
    op: str  # the op a node case tests (an expanded case: its function's op); the kind otherwise
    model: onnx.ModelProto
    data_sets: list  # [(inputs, expected outputs)], each a list of arrays (or lists, for sequences)
    rtol: float
    atol: float


@functools.cache
def all_cases() -> tuple[Case, ...]:
    """Every case, node cases first, each kind in name order."""
    return tuple(_node_cases()) + tuple(c for kind in DATA_KINDS for c in _data_cases(kind))


def by_name() -> dict[str, Case]:
    return {c.name: c for c in all_cases()}


@functools.cache
def onnx_node_cases() -> tuple:
    """onnx's node test cases as onnx.backend.test.case.node makes them: collecting them runs every
    case's generator (with onnx's reference implementations), about 15 s, once per process, or read
    from NODE_CASES_FILE (the same onnx's cases, pickled)."""
    path = os.environ.get(NODE_CASES_FILE)
    if path:
        with open(path, "rb") as f:
            return pickle.load(f)
    from onnx.backend.test.case import node
    with warnings.catch_warnings(), np.errstate(all="ignore"):  # the generators overflow on purpose
        warnings.simplefilter("ignore")
        return tuple(node.collect_testcases(None))


def _node_cases() -> list[Case]:
    found = sorted(onnx_node_cases(), key=lambda t: t.name)
    ops = {t.name: t.model.graph.node[0].op_type for t in found
           if "_expanded" not in t.name and len(t.model.graph.node) == 1}
    cases = []
    for t in found:
        base = t.name.split("_expanded")[0]
        op = ops.get(base) or (t.model.graph.node[0].op_type if t.model.graph.node else "?")
        data = [([_array(x) for x in ins], [_array(y) for y in outs]) for ins, outs in t.data_sets]
        if op in ("Cast", "CastLike"):
            data = [(ins, [_defined_cast(ins[0], y) for y in outs]) for ins, outs in data]
        cases.append(Case(t.name, "node", op, t.model, data, t.rtol, t.atol))
    return cases


def _defined_cast(x, y):
    """The expected output of a cast from a float type to a 2- or 4-bit integer, where the spec leaves
    a value out of the target's range undefined: onnx's data there is whatever the installed ml_dtypes
    gives (it wrapped around up to 0.6, 0.7 gives 0), so those elements expect what ge defines: the
    value rounded half to even, wrapped around (core/kernels/dtypes.cast_to)."""
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.dtype.kind == "f"
            and y.dtype.name in ("int4", "uint4", "int2", "uint2") and x.shape == y.shape):
        return y
    import ml_dtypes
    lo, hi = int(ml_dtypes.iinfo(y.dtype).min), int(ml_dtypes.iinfo(y.dtype).max)
    v = np.rint(x.astype(np.float64))
    outside = (v < lo) | (v > hi)
    wrapped = ((np.nan_to_num(v).astype(np.int64) - lo) % (hi - lo + 1) + lo).astype(y.dtype)
    return np.where(outside, wrapped, y).astype(y.dtype)


def _data_cases(kind: str) -> list[Case]:
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", kind)
    cases = []
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        folder = os.path.join(root, name)
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            continue
        model = onnx.load(os.path.join(folder, "model.onnx"))
        data = []
        for ds in sorted(glob.glob(os.path.join(folder, "test_data_set_*"))):
            ins = [_read_pb(os.path.join(ds, f"input_{i}.pb"), model.graph.input[i].type)
                   for i in range(len(glob.glob(os.path.join(ds, "input_*.pb"))))]
            outs = [_read_pb(os.path.join(ds, f"output_{i}.pb"), model.graph.output[i].type)
                    for i in range(len(glob.glob(os.path.join(ds, "output_*.pb"))))]
            data.append((ins, outs))
        cases.append(Case(name, kind, kind, model, data, 1e-3, 1e-7))
    return cases


def _read_pb(path: str, type_proto: onnx.TypeProto):
    """A data file as onnx's runner reads it: tensor, sequence or optional, by the model's type."""
    with open(path, "rb") as f:
        raw = f.read()
    which = type_proto.WhichOneof("value")
    if which == "sequence_type":
        proto = onnx.SequenceProto()
        proto.ParseFromString(raw)
        return numpy_helper.to_list(proto)
    if which == "optional_type":
        proto = onnx.OptionalProto()
        proto.ParseFromString(raw)
        return numpy_helper.to_optional(proto)
    proto = onnx.TensorProto()
    proto.ParseFromString(raw)
    return numpy_helper.to_array(proto)


def _array(x):
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else x
