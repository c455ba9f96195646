"""ATC's --mode=3 pre-check through the API: one entry per node, failures with their reason."""
import onnx
from onnx import TensorProto, helper

from ge.core import api


def test_report_names_every_node_and_every_failure(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Frobnicate", ["r"], ["f"], name="frob", domain="com.example"),
             helper.make_node("LeakyRelu", ["r"], ["l"], name="leaky"),
             helper.make_node("Transpose", ["l"], ["t"], name="bad_perm", perm=[0, 0]),
             helper.make_node("Add", ["t", "f"], ["y"], name="add")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    path = str(tmp_path / "m.onnx")
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(m, path)
    r = api.precheck(path)
    rows = {e["op_name"]: e for e in r["op_list"]}
    assert list(rows) == ["relu", "frob", "leaky", "bad_perm", "add"]
    assert r["result"] == "failed" and r["failed"] == 2 and r["nodes"] == 5
    assert rows["relu"]["result"] == rows["leaky"]["result"] == "success"
    assert rows["frob"]["result"] == "failed" and "com.example::Frobnicate is not supported" in rows["frob"]["reason"]
    assert rows["frob"]["op_type"] == "com.example::Frobnicate"
    assert rows["bad_perm"]["result"] == "failed" and "perm" in rows["bad_perm"]["reason"]
    assert rows["add"]["result"] == "success" and "input shapes unknown" in rows["add"]["reason"]
