"""OM format 1.5: control-flow subgraphs round-trip, and the reader refuses inconsistent ones with
a FormatError that names the graph, the node and what is wrong."""
import msgpack
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ge.core import api
from ge.core.model.errors import FormatError
from ge.formats.om import FORMAT_VERSION, header_info, om_bytes, read_om, writer
from ge.formats.om.schema import MODEL_DEF

F = T.FLOAT


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    """If (root) -> then: a Loop whose body is static; else: Neg."""
    tmp = tmp_path_factory.mktemp("nested")
    body = helper.make_graph([helper.make_node("Add", ["s_in", "x"], ["s_out"]),
                              helper.make_node("Identity", ["c"], ["c_out"])], "body",
                             [helper.make_tensor_value_info("i", T.INT64, []),
                              helper.make_tensor_value_info("c", T.BOOL, []),
                              helper.make_tensor_value_info("s_in", F, [3])],
                             [helper.make_tensor_value_info("c_out", T.BOOL, []),
                              helper.make_tensor_value_info("s_out", F, [3])])
    then = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["looped"], body=body)], "then", [],
                             [helper.make_tensor_value_info("looped", F, [3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["neg"])], "else", [],
                              [helper.make_tensor_value_info("neg", F, [3])])
    g = helper.make_graph([helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=other)], "nested",
                          [helper.make_tensor_value_info("cond", T.BOOL, []),
                           helper.make_tensor_value_info("M", T.INT64, []),
                           helper.make_tensor_value_info("x", F, [3])],
                          [helper.make_tensor_value_info("y", F, [3])])
    path = str(tmp / "nested.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return read_om(api.atc(path, str(tmp / "nested")).om_path)


def test_subgraphs_round_trip(nested, tmp_path):
    again = read_om(om_bytes(nested))
    assert [sg.name for sg in again.subgraphs] == [sg.name for sg in nested.subgraphs]
    assert [[n.subgraphs for n in sg.nodes] for sg in again.subgraphs] == \
        [[n.subgraphs for n in sg.nodes] for sg in nested.subgraphs]
    assert again.nodes == nested.nodes and len(again.subgraphs) == 3  # then, its Loop's body, else
    assert header_info(om_bytes(nested))["header_version"] == "1.9" and FORMAT_VERSION == (1, 9)
    x = np.arange(3, dtype=np.float32)
    model_id = api.load_from_file(_write(again, tmp_path), "cpu")
    try:
        (y,) = api.execute(model_id, {"cond": np.array(True), "M": np.array(3, np.int64), "x": x})
        np.testing.assert_array_equal(y, x * 4)
    finally:
        api.unload(model_id)


def _write(model, tmp_path):
    path = str(tmp_path / "again.om")
    writer.write_om(model, path)
    return path


def _tampered(model, edit) -> bytes:
    """The OM of `model` with its root MODEL_DEF edited by edit(model_def)."""
    fields, parts = writer.fields_and_parts(model)
    md = msgpack.unpackb(bytes(parts[0][2]), raw=False)
    assert parts[0][0] == MODEL_DEF
    edit(md)
    parts[0] = (MODEL_DEF, 0, msgpack.packb(md, use_bin_type=True))
    head, pieces = writer.assemble(fields, parts)
    return head + b"".join(bytes(p) for p in pieces)


def _node(md, graph: int):
    """The control-flow node of subgraph `graph` (the root when -1) in a MODEL_DEF."""
    ti = md["subgraphs"][graph]["task_info"]
    return next(n for n in ti["nodes"] if n["subgraphs"])


def _loop_owner(md) -> int:
    return next(k for k, sg in enumerate(md["subgraphs"]) if any(n["subgraphs"] for n in sg["task_info"]["nodes"]))


def _self_reference(md):
    k = _loop_owner(md)
    _node(md, k)["subgraphs"][0][1] = k


def _captures_differ(md):
    k = _loop_owner(md)
    _node(md, k)["attrs"]["ge.captures"] += 1


def _wrong_attribute(md):
    k = _loop_owner(md)
    _node(md, k)["subgraphs"][0][0] = "then_branch"


def _body_inputs(md):
    body = _node(md, _loop_owner(md))["subgraphs"][0][1]
    md["subgraphs"][body]["model_def"]["inputs"].pop()


def _gears_mode(md):
    md["subgraphs"][0]["model_def"]["mode"] = "gears"


def _too_many_captures(md):
    md["subgraphs"][0]["model_def"]["attrs"]["captures"] = 99


def _not_a_list(md):
    md["subgraphs"] = {"a": 1}


def _output_from_nowhere(md):
    md["subgraphs"][0]["model_def"]["outputs"][0]["name"] = "nowhere"


@pytest.mark.parametrize("edit,message", [
    (_output_from_nowhere, r"subgraph 0 '.*': output 'nowhere' is produced by no step"),
    (_self_reference, r"subgraph \d+ '.*' node '.*' \(Loop\): attribute 'body' names subgraph \d+; it must be one of"),
    (_captures_differ, r"node '.*' \(Loop\): captures \d+ .*but its subgraph \d+ captures \d+"),
    (_wrong_attribute, r"node '.*' \(Loop\): subgraph attributes \['then_branch'\], expected \['body'\]"),
    (_body_inputs, r"node '.*' \(Loop\): subgraph \d+ '.*' has 3 inputs and 2 outputs; the node needs 4 and 2"),
    (_gears_mode, r"subgraph 0 '.*': must be a hybrid graph that is not a root"),
    (_too_many_captures, r"subgraph 0 '.*': attrs 'captures' must be an integer in \[0, \d+\]"),
    (_not_a_list, r"root MODEL_DEF: 'subgraphs' must be a list"),
])
def test_reader_refuses_inconsistent_subgraphs(nested, edit, message):
    with pytest.raises(FormatError, match=message):
        read_om(_tampered(nested, edit))
