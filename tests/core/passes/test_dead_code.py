import numpy as np
from onnx import TensorProto, helper

from ge.core.passes import dead_code, optimize

F = TensorProto.FLOAT


def test_unreachable_nodes_and_unused_initializers_removed(make_model, load):
    nodes = [helper.make_node("Relu", ["x"], ["y"]),
             helper.make_node("Add", ["x", "w"], ["unused"]),
             helper.make_node("Relu", ["unused"], ["unused2"])]
    g = load(make_model(nodes, {"x": (F, [2])}, ["y"], {"w": np.ones(2, np.float32), "w2": np.ones(3, np.float32)}))
    stats = {}
    dead_code(g, stats=stats)
    assert [n.op_type for n in g.nodes] == ["Relu"]
    assert g.initializers == {}
    assert set(g.values) == {"x", "y"}
    assert stats["removed_nodes"] == 2 and stats["removed_initializers"] == 2


def test_identity_and_dropout_are_bypassed(make_model, load, run_ort, run_ge):
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Identity", ["a"], ["b"]),
             helper.make_node("Dropout", ["b"], ["c"], ratio=0.5),
             helper.make_node("Add", ["c", "b"], ["d"]),
             helper.make_node("Identity", ["d"], ["y"])]
    model = make_model(nodes, {"x": (F, [2, 3])}, ["y"], opset=11)
    g = load(model)
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Relu", "Add"]
    assert g.nodes[0].outputs == ["a"] and g.nodes[1].inputs == ["a", "a"] and g.nodes[1].outputs == ["y"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_where_with_a_constant_condition_is_bypassed(make_model, load, run_ort, run_ge):
    """All True takes x, all False y; a mixed condition, or an output broadcast past x, keeps the Where."""
    rng = np.random.default_rng(1)
    inits = {"all": np.ones((1, 4), bool), "none": np.zeros((1, 4), bool), "mixed": np.tril(np.ones((3, 4), bool)),
             "wide": np.ones((3, 4), bool), "fill": np.array(-1e4, np.float32)}
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("Where", ["all", "a", "fill"], ["b"]),
             helper.make_node("Where", ["none", "fill", "b"], ["c"]),
             helper.make_node("Where", ["mixed", "c", "fill"], ["y"]),
             helper.make_node("Where", ["wide", "x1", "fill"], ["z"])]
    model = make_model(nodes, {"x": (F, [3, 4]), "x1": (F, [1, 4])}, ["y", "z"], inits)
    g = load(model)
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Relu", "Where", "Where"]
    assert g.nodes[1].inputs == ["mixed", "a", "fill"]
    feeds = {"x": rng.standard_normal((3, 4)).astype(np.float32), "x1": rng.standard_normal((1, 4)).astype(np.float32)}
    for got, want in zip(run_ge(g, feeds), run_ort(model, feeds)):
        np.testing.assert_array_equal(got, want)


def test_identity_of_input_to_output_is_kept(make_model, load):
    nodes = [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"]),
             helper.make_node("Identity", ["z"], ["z2"])]
    g = load(make_model(nodes, {"x": (F, [2])}, ["y", "z", "z2"]))
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Identity", "Relu", "Identity"]


def test_dropout_with_used_mask_is_kept(make_model, load):
    nodes = [helper.make_node("Dropout", ["x"], ["y", "mask"])]
    g = load(make_model(nodes, {"x": (F, [2])}, ["y", "mask"]))
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Dropout"]


def test_out_nodes_cut_then_optimize(make_model, load, requires):
    requires("Relu", "Add")
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"),
             helper.make_node("Add", ["a", "a"], ["b"], name="second"),
             helper.make_node("Det", ["b"], ["y"], name="weird")]
    g = load(make_model(nodes, {"x": (F, [2, 2])}, {"y": (F, [])}), out_nodes=["second:0"])
    assert g.outputs == ["b"]
    report = optimize(g)  # Det (unsupported, and not needed) is cut away before any kernel is looked up
    assert [n.name for n in g.nodes] == ["first", "second"] and report["fused_activations"] == 0
    assert report["removed_nodes"] == 1


def test_dropout_in_training_mode_is_kept(make_model, load):
    nodes = [helper.make_node("Dropout", ["x", "ratio", "train"], ["y"])]
    inits = {"ratio": np.array(0.5, np.float32), "train": np.array(True)}
    g = load(make_model(nodes, {"x": (F, [2])}, ["y"], inits, opset=13))
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Dropout"]
    inits["train"] = np.array(False)
    g = load(make_model([helper.make_node("Dropout", ["x", "ratio", "train"], ["d"]),
                         helper.make_node("Relu", ["d"], ["y"])], {"x": (F, [2])}, ["y"], inits, opset=13),
             name="m2.onnx")
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["Relu"] and g.nodes[0].inputs == ["x"]
    assert g.initializers == {}
