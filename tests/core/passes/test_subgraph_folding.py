"""Constant folding across control flow: an If on a constant becomes its branch (renamed into the
graph, its captured inputs wired to the node's), and constants a Loop captures move into its body."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ge.core.passes import constant_folding, dead_code
from ge.core.passes._util import rename_tensor

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def test_if_on_a_folded_condition_becomes_the_branch_with_names_kept_apart(make_model, load):
    # the branch's own tensor "s" meets an outer "s" (onnx's checker keeps models apart, but passes
    # name tensors too): the inlined one is renamed
    then = helper.make_graph([helper.make_node("Neg", ["x"], ["s"]), helper.make_node("Abs", ["s"], ["t"])], "then", [],
                             [helper.make_tensor_value_info("t", F, [2])])
    other = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", F, [2])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"]),
             helper.make_node("ReduceSum", ["shp"], ["n"], keepdims=0),
             helper.make_node("Equal", ["n", "two"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if"),
             helper.make_node("Sigmoid", ["y"], ["z"])]
    g = load(make_model(nodes, {"x": (F, [2])}, {"z": (F, [2])}, inits={"two": np.array(2, np.int64)}))
    rename_tensor(g, "shp", "s")
    g.values["s"] = g.values.pop("shp")
    stats = {}
    constant_folding(g, stats)
    dead_code(g)
    assert stats["inlined_branches"] == 1
    assert [n.op_type for n in g.nodes] == ["Neg", "Abs", "Sigmoid"]
    neg, absolute, sigmoid = g.nodes
    assert neg.inputs == ["x"] and absolute.inputs == neg.outputs and sigmoid.inputs == absolute.outputs
    assert neg.outputs == ["s_1"]  # not the outer "s"


def test_constants_a_loop_captures_move_into_its_body(make_model, load):
    body = helper.make_graph([helper.make_node("Mul", ["s", "scale"], ["s2"]), helper.make_node("Add", ["s2", "x"], ["s3"]),
                              helper.make_node("Identity", ["c"], ["c2"])], "body",
                             [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("c", B, []),
                              helper.make_tensor_value_info("s", F, [2])],
                             [helper.make_tensor_value_info("c2", B, []), helper.make_tensor_value_info("s3", F, [2])])
    nodes = [helper.make_node("Shape", ["x"], ["shp"]), helper.make_node("Cast", ["shp"], ["scale"], to=F),  # folds: [2.]
             helper.make_node("Loop", ["M", "", "x"], ["y"], body=body, name="loop")]
    g = load(make_model(nodes, {"M": (I64, []), "x": (F, [2])}, {"y": (F, [2])}))
    loop = next(n for n in g.nodes if n.op_type == "Loop")
    assert loop.inputs[:3] == ["M", "", "x"] and sorted(loop.inputs[3:]) == ["scale", "x"]
    stats = {}
    constant_folding(g, stats)
    body = loop.attrs["body"]
    assert stats["captured_constants"] == 1
    assert loop.inputs == ["M", "", "x", "x"] and body.captures == 1 and body.inputs[-1] == "x"
    assert "scale" not in body.inputs
    np.testing.assert_array_equal(body.initializers["scale"], np.array([2], np.float32))
