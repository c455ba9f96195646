"""core/model/onnx_proto.py: what the compiler takes of onnx without `import onnx` gives what onnx's
own functions give (every op schema's defaults, tensors of every plain type stored either way), and a
later `import onnx` in the same process works with the same message classes."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core.kernels.schema import attribute_defaults
from ge.core.model import onnx_proto


def test_every_schema_defaults_as_onnx_defs_gives_them():
    checked = 0
    for s in onnx.defs.get_all_schemas_with_history():
        ours = onnx_proto.schema_defaults(s.name, s.since_version, s.domain)
        theirs = {n: a.default_value for n, a in s.attributes.items()
                  if not a.required and a.default_value is not None and a.default_value.type}
        assert ours == theirs, (s.domain, s.name, s.since_version)
        checked += len(ours)
    assert checked > 500
    assert onnx_proto.schema_defaults("NoSuchOp", 13, "") is None
    assert attribute_defaults("", "LeakyRelu", 16) == {"alpha": pytest.approx(0.01)}
    assert attribute_defaults("", "Pad", 11) == {"mode": "constant"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                   np.int64, np.uint32, np.uint64, np.bool_, np.float16])
@pytest.mark.parametrize("raw", [True, False])
def test_to_array_as_numpy_helper(dtype, raw):
    values = (np.arange(12) % 5 - 2).reshape(3, 4)
    values = values.astype(dtype) if np.dtype(dtype).kind in "fi" else (values % 2).astype(dtype)
    t = helper.make_tensor("t", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), values.shape,
                           values.tobytes() if raw else values.ravel().tolist(), raw=raw)
    ours, theirs = onnx_proto.to_array(t), numpy_helper.to_array(t)
    assert ours.dtype == theirs.dtype and ours.shape == theirs.shape and np.array_equal(ours, theirs)
    strings = helper.make_tensor("s", TensorProto.STRING, [2], [b"a", b"bc"])
    assert onnx_proto.to_array(strings).tolist() == ["a", "bc"]


def test_calendar_imported_at_its_first_use():
    """In a fresh interpreter: making the messages imports no calendar (protobuf's well_known_types gets a
    stand-in); a Timestamp method imports it, the real module, and works as without the stand-in."""
    code = """
import sys, datetime
from ge.core.model import onnx_proto
assert "calendar" not in sys.modules
from google.protobuf.timestamp_pb2 import Timestamp
t = Timestamp()
t.FromDatetime(datetime.datetime(2020, 1, 2, 3, 4, 5))
import calendar
assert sys.modules["calendar"] is calendar and hasattr(calendar, "__file__")
assert t.ToJsonString() == "2020-01-02T03:04:05Z" and t.seconds == calendar.timegm((2020, 1, 2, 3, 4, 5))
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_check_infer_and_a_later_import_of_onnx():
    """In a fresh interpreter: the checker refuses what onnx's refuses, shape inference infers, and
    `import onnx` afterwards has the same ModelProto and a working checker."""
    code = """
import sys
from ge.core.model import onnx_proto as p
assert "onnx" not in sys.modules
x, y = p.make_tensor_value_info("x", 1, [2, 3]), p.make_tensor_value_info("y", 1, [2, 3])
nodes = [p.NodeProto(op_type="Relu", input=["x"], output=["t"]), p.NodeProto(op_type="Relu", input=["t"], output=["y"])]
g = p.GraphProto(name="g", node=nodes, input=[x], output=[y])
m = p.ModelProto(ir_version=8, graph=g)
m.opset_import.add().version = 13
p.check_model(m)
out = p.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
(t,) = out.graph.value_info
assert t.name == "t" and [d.dim_value for d in t.type.tensor_type.shape.dim] == [2, 3], t
bad = p.ModelProto(); bad.CopyFrom(m); bad.graph.node[0].op_type = "NoSuchOp"
try:
    p.check_model(bad)
    raise SystemExit("the checker passed an unknown op")
except Exception as e:
    assert "NoSuchOp" in str(e), e
assert "onnx" not in sys.modules
import onnx, onnx.checker
assert onnx.ModelProto is p.ModelProto and isinstance(m, onnx.ModelProto)
onnx.checker.check_model(m, full_check=True)
assert p.onnx_opset_version() == onnx.defs.onnx_opset_version()
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_is_utf8_text_finds_what_the_walk_of_every_string_field_finds():
    """The proto3 twin's parse (importer._read_model's quick check) says a model's text is not UTF-8
    wherever importer._invalid_text (the walk naming the field) finds it: names, types, docs, dims,
    metadata, attributes, a subgraph's and a function's fields."""
    from ge.formats.onnx.importer import _invalid_text
    body = helper.make_graph([helper.make_node("Relu", ["a"], ["b"], name="m_sub_node")], "m_sub_graph",
                             [], [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["m_sub_dim"])])
    nodes = [helper.make_node("Relu", ["x"], ["m_tensor"], name="m_node", doc_string="m_doc"),
             helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body, m_attr_name="m_attr_s"),
             helper.make_node("m_fn", ["y"], ["z"], domain="m_domain")]
    fn = helper.make_function("m_domain", "m_fn", ["i"], ["o"], [helper.make_node("Relu", ["i"], ["o"])],
                              [helper.make_opsetid("", 17)])
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["m_dim", 3]),
                                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, functions=[fn], producer_name="m_producer",
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("m_domain", 1)])
    helper.set_model_props(model, {"m_key": "m_value"})
    data = model.SerializeToString()
    assert onnx_proto.is_utf8_text(data) and _invalid_text(onnx_proto.ModelProto.FromString(data)) is None
    markers = ["m_sub_node", "m_sub_graph", "m_sub_dim", "m_tensor", "m_node", "m_doc", "m_attr_name", "m_fn",
               "m_domain", "m_dim", "m_producer", "m_key", "m_value"]
    for marker in markers:
        assert data.count(marker.encode()) >= 1, marker
        bad = data.replace(marker.encode(), b"\xff" + marker[1:].encode())
        assert not onnx_proto.is_utf8_text(bad), marker
        assert _invalid_text(onnx_proto.ModelProto.FromString(bad)) is not None, marker
    # bytes fields (an attribute's string, raw data) hold any bytes
    assert onnx_proto.is_utf8_text(data.replace(b"m_attr_s", b"\xff_attr_s"))
