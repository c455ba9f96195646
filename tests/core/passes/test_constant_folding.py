import numpy as np
from onnx import TensorProto, helper, numpy_helper

from ge.core.passes import constant_folding, dead_code, infer_shapes, optimize
from ge.core.passes.constant_folding import MAX_FOLD_NBYTES

F = TensorProto.FLOAT


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name + "_v"))


def test_pytorch_shape_chain_folds_to_constant_reshape(make_model, load, requires, run_ort, run_ge):
    requires("Shape", "Gather", "Unsqueeze", "Concat", "Reshape")
    # x.view(x.size(0), -1), as torch.onnx exports it
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        _const("i0", np.array(0, np.int64)),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        _const("ax", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        _const("m1", np.array([-1], np.int64)),
        helper.make_node("Concat", ["n1", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["y"]),
    ]
    model = make_model(nodes, {"x": (F, ["batch", 3, 4, 5])}, ["y"])
    g = load(model, {"x": [2, 3, 4, 5]})
    constant_folding(g)
    assert [n.op_type for n in g.nodes] == ["Reshape"]
    assert g.nodes[0].inputs[1] == "shape"
    np.testing.assert_array_equal(g.initializers["shape"], [2, -1])
    infer_shapes(g)
    dead_code(g)
    assert set(g.initializers) == {"shape"}
    assert g.values["y"].shape == (2, 60)
    x = np.random.rand(2, 3, 4, 5).astype(np.float32)
    np.testing.assert_array_equal(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_constant_node_becomes_initializer(make_model, load):
    nodes = [_const("c", np.arange(6, dtype=np.float32).reshape(2, 3)),
             helper.make_node("Add", ["x", "c"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [2, 3])}, ["y"]))
    stats = {}
    constant_folding(g, stats=stats)
    assert [n.op_type for n in g.nodes] == ["Add"]
    np.testing.assert_array_equal(g.initializers["c"], np.arange(6).reshape(2, 3))
    assert stats["folded"] == 1


def test_chain_of_constant_ops_folds(make_model, load):
    nodes = [_const("a", np.ones((2, 3), np.float32)),
             helper.make_node("Add", ["a", "b"], ["ab"]),
             helper.make_node("Relu", ["ab"], ["r"]),
             helper.make_node("Add", ["x", "r"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [2, 3])}, ["y"], {"b": np.full((2, 3), -3.0, np.float32)}))
    constant_folding(g)
    assert [n.op_type for n in g.nodes] == ["Add"]
    np.testing.assert_array_equal(g.initializers["r"], np.zeros((2, 3)))
    dead_code(g)
    assert set(g.initializers) == {"r"}


def test_range_of_sequence_length_and_constant_of_shape(make_model, load, requires):
    requires("Shape", "Gather", "Range", "ConstantOfShape", "Unsqueeze")
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        _const("one", np.array(1, np.int64)),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        _const("zero", np.array(0, np.int64)),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        _const("ax", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["seq", "ax"], ["seq1"]),
        helper.make_node("ConstantOfShape", ["seq1"], ["ones"],
                         value=numpy_helper.from_array(np.array([1], np.int64))),
        helper.make_node("Add", ["ids", "pos"], ["t"]),
        helper.make_node("Add", ["t", "ones"], ["y"]),
    ]
    g = load(make_model(nodes, {"ids": (TensorProto.INT64, ["b", "seq"])}, ["y"]), {"ids": [1, 7]})
    constant_folding(g)
    assert [n.op_type for n in g.nodes] == ["Add", "Add"]
    np.testing.assert_array_equal(g.initializers["pos"], np.arange(7))
    np.testing.assert_array_equal(g.initializers["ones"], np.ones(7))


def test_huge_constant_of_shape_is_not_folded(make_model, load, requires):
    requires("ConstantOfShape")
    n = int(np.sqrt(MAX_FOLD_NBYTES // 4)) + 64  # a bit more than the limit, float32
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"],
                              value=numpy_helper.from_array(np.array([0.5], np.float32))),
             helper.make_node("Add", ["x", "big"], ["y"])]
    model = make_model(nodes, {"x": (F, [1, n])}, ["y"], {"shape": np.array([n, n], np.int64)})
    g = load(model)
    stats = {}
    constant_folding(g, stats=stats)
    assert [nd.op_type for nd in g.nodes] == ["ConstantOfShape", "Add"]
    assert "big" not in g.initializers and stats["skipped_big"] == 1


def test_folded_graph_output_keeps_a_producer(make_model, load, requires):
    requires("Shape", "Identity")
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [2, 3])}, ["s", "y"]))
    report = optimize(g)
    assert g.outputs == ["s", "y"]
    producer = {o: n for n in g.nodes for o in n.outputs}
    assert producer["s"].op_type == "Identity"
    np.testing.assert_array_equal(g.initializers[producer["s"].inputs[0]], [2, 3])
    assert report["folded_nodes"] == 1


def test_shape_with_start_end_and_size_fold(make_model, load, requires):
    requires("Shape", "Size", "Concat")
    nodes = [helper.make_node("Shape", ["x"], ["tail"], start=-2),
             helper.make_node("Shape", ["x"], ["mid"], start=1, end=2),
             helper.make_node("Size", ["x"], ["n"]),
             _const("ax", np.array([0], np.int64)),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["tail", "mid", "n1"], ["y"], axis=0),
             helper.make_node("Relu", ["x"], ["r"])]
    g = load(make_model(nodes, {"x": (F, [2, 3, 4, 5])}, ["y", "r"]))
    constant_folding(g)
    producer = {o: n for n in g.nodes for o in n.outputs}
    assert producer["y"].op_type == "Identity"  # the folded output keeps a producer
    np.testing.assert_array_equal(g.initializers[producer["y"].inputs[0]], [4, 5, 3, 120])


def test_huge_expand_is_not_folded(make_model, load, requires):
    requires("Expand")
    n = int(np.sqrt(MAX_FOLD_NBYTES // 4)) + 64
    nodes = [helper.make_node("Expand", ["one", "shape"], ["big"]), helper.make_node("Add", ["x", "big"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [n, n])}, ["y"],
                        {"one": np.ones((1, 1), np.float32), "shape": np.array([n, n], np.int64)}))
    constant_folding(g)
    assert [nd.op_type for nd in g.nodes] == ["Expand", "Add"]


def test_random_ops_are_not_folded(make_model, load):
    nodes = [helper.make_node("RandomUniform", [], ["r"], shape=[2], dtype=F),
             helper.make_node("Add", ["x", "r"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [2])}, ["y"]))
    constant_folding(g)
    assert [nd.op_type for nd in g.nodes] == ["RandomUniform", "Add"]


def _embeddings(make_model, seq):
    """BERT's position and token-type lookups: tables gathered by Range(0, seq) and by zeros of
    the input's shape (ConstantOfShape), added to the input."""
    nodes = [
        helper.make_node("Shape", ["ids"], ["s"]),
        _const("one", np.array(1, np.int64)),
        _const("zero", np.array(0, np.int64)),
        helper.make_node("Gather", ["s", "one"], ["seq"], axis=0),
        helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
        helper.make_node("Gather", ["position", "pos"], ["pos_emb"], axis=0),
        helper.make_node("ConstantOfShape", ["s"], ["types"], value=numpy_helper.from_array(np.zeros([1], np.int64))),
        helper.make_node("Gather", ["token_type", "types"], ["type_emb"], axis=0),
        helper.make_node("Add", ["x", "pos_emb"], ["t"]),
        helper.make_node("Add", ["t", "type_emb"], ["y"]),
        helper.make_node("Transpose", ["position"], ["position_t"]),  # weight preprocessing
        helper.make_node("MatMul", ["x", "position_t"], ["z"]),
    ]
    rng = np.random.default_rng(0)
    inits = {"position": rng.standard_normal((512, 64)).astype(np.float32),
             "token_type": rng.standard_normal((2, 64)).astype(np.float32)}
    return make_model(nodes, {"ids": (TensorProto.INT64, [2, seq]), "x": (F, [2, seq, 64])}, ["y", "z"], inits)


def test_shape_sized_copies_of_weights_stay_tasks(make_model, load, run_ort, run_ge, requires):
    """A gear's position and token-type embeddings (the tables gathered by the sequence's Range
    and by zeros of the input's shape) are not folded into constants of that shape past
    SHAPED_FOLD_NBYTES: every gear would carry its own copy. The shape arithmetic feeding them and
    the weight's own preprocessing (a Transpose) fold; the results are onnxruntime's."""
    requires("Shape", "Gather", "Range", "ConstantOfShape", "Transpose", "MatMul")
    model = _embeddings(make_model, 100)  # [100, 64] float32 = 25 KiB of positions, 51 KiB of token types
    g = load(model)
    stats = {}
    constant_folding(g, stats=stats)
    assert [n.op_type for n in g.nodes] == ["Gather", "Gather", "Add", "Add", "MatMul"]
    assert stats["skipped_shaped"] == 2
    np.testing.assert_array_equal(g.initializers["pos"], np.arange(100))
    assert {"s", "seq", "pos", "types"} <= g.shape_constants and "position_t" not in g.shape_constants
    assert g.initializers["position_t"].shape == (64, 512)
    rng = np.random.default_rng(1)
    feeds = {"ids": np.zeros((2, 100), np.int64), "x": rng.standard_normal((2, 100, 64)).astype(np.float32)}
    optimize(g)
    for got, want in zip(run_ge(g, feeds), run_ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_small_shape_sized_lookups_still_fold(make_model, load, requires):
    requires("Shape", "Gather", "Range", "ConstantOfShape")
    g = load(_embeddings(make_model, 8))  # 2 KiB and 4 KiB: no more than SHAPED_FOLD_NBYTES
    stats = {}
    constant_folding(g, stats=stats)
    assert [n.op_type for n in g.nodes] == ["Add", "Add", "MatMul"]
    assert stats["skipped_shaped"] == 0 and g.initializers["pos_emb"].shape == (8, 64)
