"""attribute_table.py (the attribute types a loaded OM's tasks are checked against, generated so
that a load never wakes onnx.defs' registry) agrees with onnx's schemas, and the check uses it."""
from __future__ import annotations

import onnx
import pytest

from ge.core.kernels import schema
from ge.core.kernels.attribute_table import DEPRECATED, ONNX_VERSION, TABLE


def test_the_table_is_onnx_s_schemas():
    """Every stored version is still onnx's (a newer onnx only adds versions; regenerate with
    `python -m ge.core.kernels.schema` to pick them up)."""
    assert ONNX_VERSION
    fresh = schema.attribute_table(set(TABLE))
    for op, versions in TABLE.items():
        for since, attrs in versions.items():
            assert fresh[op][since] == attrs, (op, since)
    assert DEPRECATED == schema.deprecated_schemas() and DEPRECATED["Upsample"] == 10


def test_the_compilers_defaults_come_from_the_table_as_onnx_gives_them():
    """schema.attribute_defaults (what the compiler writes into every task) reads the table for the
    ops it has, so a compile never wakes onnx.defs' registry, and gives onnx's values."""
    from ge.core.kernels.attribute_table import OPSET
    from ge.core.model import onnx_proto
    checked = 0
    for op, versions in TABLE.items():
        for since in versions:
            theirs = {n: schema._value(d) for n, d in onnx_proto.schema_defaults(op, since, "").items()}
            assert schema.attribute_defaults("", op, since) == theirs, (op, since)
            checked += len(theirs)
    assert checked > 500
    assert schema.attribute_entry("", "Relu", OPSET + 1) is None  # past the table's opset: onnx.defs answers
    assert schema.attribute_defaults("", "LeakyRelu", OPSET + 1) == {"alpha": pytest.approx(0.01)}
    assert schema.attribute_defaults("com.microsoft", "QLinearAdd", 1) == {}  # no onnx schema, no lookup


def test_the_table_covers_every_registered_op():
    """Every default-domain op ge has a kernel for is in the table (an op missing from it would wake
    onnx.defs at load): a new kernel fails here until `python -m ge.core.kernels.schema` is rerun."""
    from ge.core.kernels.registry import kernel_classes
    registered = {cls.op_type for cls in kernel_classes() if cls.domain == ""}
    assert sorted(registered - set(TABLE)) == []
    assert sorted(set(TABLE) - registered) == []


def test_ops_in_the_table_never_ask_onnx_defs(monkeypatch):
    def woken(*a):
        raise AssertionError("onnx.defs was asked")
    monkeypatch.setattr(schema, "schema_attributes", woken)
    schema.attribute_types.cache_clear()
    try:
        types, present = schema.attribute_types("", "Conv", 17)
        assert types["pads"] == onnx.AttributeProto.INTS and "group" in present and "pads" not in present
        assert schema.attribute_types("", "Softmax", 12)[0] == {"axis": onnx.AttributeProto.INT}
        assert schema.attribute_types("", "Gelu", 17) == ({}, frozenset())  # before its first version (20)
    finally:
        schema.attribute_types.cache_clear()


def test_other_ops_come_from_onnx_defs():
    schema.attribute_types.cache_clear()
    types, present = schema.attribute_types("", "NotAnOp", 17)
    assert (types, present) == ({}, frozenset())
    types, _ = schema.attribute_types("com.microsoft", "QGemm", 1)  # no onnx schema: the kernel checks
    assert types == {}


@pytest.mark.parametrize("attrs,problem", [
    ({"alpha": "x"}, "attrs['alpha'] must be a float, got 'x' (str)"),
    ({"alpha": 1}, "attrs['alpha'] must be a float, got 1 (int)"),
    ({}, "attrs['alpha'] is missing"),
])
def test_attribute_problem_names_the_attribute(attrs, problem):
    assert schema.attribute_problem("", "LeakyRelu", 16, attrs, complete=True).startswith(problem)
