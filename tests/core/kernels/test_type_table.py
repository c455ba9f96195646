"""type_table.py (the type constraints of every op ge registers in onnx's domains, generated so that
a loaded model's kernels are checked without onnx) agrees with onnx's schemas, and the framework
checks a node's input types against it before the kernel's prepare()."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels import schema, type_constraints as tc
from ge.core.kernels.registry import lookup
from ge.core.kernels.type_table import ONNX_VERSION, TABLE
from ge.core.model.errors import GeError, GraphError
from ge.core.model.ir import Meta


def test_the_table_is_onnx_s_schemas():
    """Every stored version is onnx's; with the onnx it was generated from, every version is stored
    (regenerate with `python -m ge.core.kernels.schema`)."""
    fresh, stored = schema.type_table(schema.registered_ops()), schema.resolved_table()
    for domain, ops in stored.items():
        for op, versions in ops.items():
            for since, entry in versions.items():
                assert fresh[domain][op][since] == entry, (domain, op, since)
    if onnx.__version__ == ONNX_VERSION:
        assert fresh == stored


def test_the_table_covers_every_registered_op():
    """A new kernel in the default or ai.onnx.ml domain fails here until the table is regenerated."""
    registered = schema.registered_ops()
    assert {d: sorted(ops) for d, ops in registered.items()} == {d: sorted(ops) for d, ops in TABLE.items()}
    assert {"Add", "Conv", "Loop", "SequenceAt"} <= set(TABLE[""]) and "LabelEncoder" in TABLE["ai.onnx.ml"]


def test_formals_and_params():
    add = tc.op_types("", "Add", 14)
    assert add.since == 14 and [f.param for f in add.inputs] == ["T", "T"] and "int8" in add.params["T"]
    assert tc.op_types("", "Add", 13).since == 13 and "int8" not in tc.op_types("", "Add", 13).params["T"]
    concat = tc.op_types("", "Concat", 13)
    assert concat.formal(5).name == "inputs" and concat.formal(5).option == tc.VARIADIC
    assert tc.op_types("", "Reshape", 14).allowed(tc.op_types("", "Reshape", 14).inputs[1].param) == ("int64",)
    assert tc.op_types("", "Relu", 17).formal(1) is None
    assert tc.op_types("", "Gelu", 17) is None  # before its first version (20)
    assert tc.op_types("ge", "FusedConv", 17) is None and tc.op_types("com.microsoft", "QGemm", 1) is None


F32, I8, I32, I64 = (np.dtype(t) for t in (np.float32, np.int8, np.int32, np.int64))


@pytest.mark.parametrize("op,opset,dtypes,problem", [
    ("Add", 13, [F32, I8], "input 1 'B' is int8; Add-13 takes T in {float16, float32, float64, bfloat16, int32, "
                           "int64, uint32, uint64}"),
    ("Add", 14, [F32, I8], "input 1 'B' is int8 and input 0 'A' is float32; Add-14 takes one type T for both"),
    ("Reshape", 14, [F32, I32], "input 1 'shape' is int32; Reshape-14 takes int64"),
    ("Concat", 13, [F32, F32, I64], "input 2 'inputs' is int64 and input 0 'inputs' is float32; Concat-13 takes "
                                   "one type T for both"),
    ("Clip", 13, [F32, None, I64], "input 2 'max' is int64 and input 0 'input' is float32; Clip-13 takes one "
                                   "type T for both"),
])
def test_the_problem_names_the_input_and_the_constraint(op, opset, dtypes, problem):
    assert tc.input_type_problem("", op, opset, dtypes) == problem


@pytest.mark.parametrize("op,opset,dtypes", [
    ("Add", 14, [I8, I8]), ("Clip", 13, [F32, None, F32]), ("Where", 16, [np.dtype(bool), F32, F32]),
    ("Loop", 16, [I64, np.dtype(bool), F32, I64]),  # v_initial: variadic of several types
    ("SequenceAt", 11, [None, I64]),  # a sequence input has no dtype to check
    ("Identity", 16, [np.dtype(object)]),  # a string tensor
    ("FusedConv", 1, [I8]),  # no entry: the kernel checks
])
def test_conforming_types_pass(op, opset, dtypes):
    assert tc.input_type_problem("ge" if op.startswith("Fused") else "", op, opset, dtypes) is None


def test_the_framework_checks_before_prepare():
    """Building a kernel on a type its op's schema refuses fails with the node's name, before the
    kernel's own checks."""
    with pytest.raises(GraphError) as e:
        lookup("Where", opset=16)({}, [Meta(F32, (2,)), Meta(F32, (2,)), Meta(F32, (2,))], name="w")
    assert str(e.value) == "node 'w' (Where): input 0 'condition' is float32; Where-16 takes bool"


def test_a_model_breaking_a_constraint_is_refused_at_compile(tmp_path):
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["c"], name="add")], "m",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2]),
                           helper.make_tensor_value_info("b", TensorProto.INT8, [2])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)]), path)
    with pytest.raises(GeError) as e:
        api.atc(path, str(tmp_path / "m"))
    assert "node 'add' (Add): input 1 'B' is int8 and input 0 'A' is float32; Add-14 takes one type T for both" \
        in str(e.value).splitlines()[0]
