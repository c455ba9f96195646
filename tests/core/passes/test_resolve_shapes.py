import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ge.core.passes import constant_folding, optimize_dynamic, resolve_shapes
from ge.formats.onnx import load_onnx

F, I = TensorProto.FLOAT, TensorProto.INT64


def _split_heads_model(target_from: str = "x"):
    """y = Reshape(x, Concat(Unsqueeze(Gather(Shape(src), 0)), Unsqueeze(Gather(Shape(src), 1)), [4], [-1]... ))"""
    c = lambda name, v: helper.make_node("Constant", [], [name], value=helper.make_tensor(name, I, np.shape(v), np.ravel(v)))
    nodes = [c("i0", 0), c("i1", 1), c("i2", 2), c("ax", [0]), c("heads", [4]), c("hd", [8]),
             helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Shape", [target_from], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Gather", ["s", "i1"], ["q"], axis=0),
             helper.make_node("Gather", ["s", "i2"], ["h"], axis=0),  # the static dim: folds to 32
             helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
             helper.make_node("Unsqueeze", ["q", "ax"], ["q1"]),
             helper.make_node("Concat", ["b1", "q1", "heads", "hd"], ["shape"], axis=0),
             helper.make_node("Reshape", ["r", "shape"], ["y"]),
             helper.make_node("Mul", ["h", "h"], ["hh"])]
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", F, ["batch", "seq", 32]),
                                       helper.make_tensor_value_info("z", F, ["n", "m", 32])],
                          [helper.make_tensor_value_info("y", F, None), helper.make_tensor_value_info("hh", I, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _load(model, tmp_path):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    return path, load_onnx(path, None, None, allow_dynamic=True)


def test_reshape_of_its_own_dims_gets_a_constant_shape(tmp_path):
    path, g = _load(_split_heads_model("r"), tmp_path)
    report = optimize_dynamic(g)
    assert [n.op_type for n in g.nodes] == ["Relu", "Reshape", "Identity"]  # hh folded: Shape's static dim
    reshape = g.nodes[1]
    assert g.initializers[reshape.inputs[1]].tolist() == [0, 0, 4, 8]
    assert report["passes"]["resolve_shapes"]["reshapes"] == 1
    from ge.core import api
    result = api.atc(path, str(tmp_path / "m"), input_shape="x:-1,-1,32;z:-1,-1,32")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for shape in [(2, 3, 32), (1, 5, 32)]:
            x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
            feeds = {"x": x, "z": np.zeros((1, 1, 32), np.float32)}
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
            for got, exp in zip(api.execute(model_id, feeds), want):
                np.testing.assert_array_equal(got, exp)
    finally:
        api.unload(model_id)


def test_dims_of_an_unrelated_tensor_stay_computed_unless_one_can_be_minus_one(tmp_path):
    _, g = _load(_split_heads_model("z"), tmp_path)  # z's dims are not provably r's
    constant_folding(g)
    resolve_shapes(g)
    reshape = next(n for n in g.nodes if n.op_type == "Reshape")
    assert reshape.inputs[1] == "shape"  # two dims it cannot prove: they stay computed
    model = _split_heads_model("z")
    concat = next(n for n in model.graph.node if n.op_type == "Concat")
    concat.input[:] = ["b1", "heads", "hd"]  # one dim it cannot prove: -1
    _, g = _load(model, tmp_path)
    constant_folding(g)
    resolve_shapes(g)
    reshape = next(n for n in g.nodes if n.op_type == "Reshape")
    assert g.initializers[reshape.inputs[1]].tolist() == [-1, 4, 8]
    stats = {}
    _, g = _load(_split_heads_model("x"), tmp_path)  # Shape(x), x the Relu's input: the same symbols
    constant_folding(g)
    resolve_shapes(g, stats=stats)
    reshape = next(n for n in g.nodes if n.op_type == "Reshape")
    assert g.initializers[reshape.inputs[1]].tolist() == [0, 0, 4, 8] and stats["reshapes"] == 1


def _conv1d_model(trans_b: int = 0, bias: bool = True):
    """transformers' Conv1D as torch.onnx writes it: lead = Slice(Shape(x), 0, -1), Reshape(x, [-1, 32]),
    Gemm(W, b), Reshape(Concat(lead, [n])); x (batch, seq, 32) symbolic, n = 24."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((24, 32) if trans_b else (32, 24)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(np.array([0], np.int64), "zero"),
             onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             onnx.numpy_helper.from_array(np.array([-1, 32], np.int64), "rows"),
             onnx.numpy_helper.from_array(np.array([24], np.int64), "n")]
    if bias:
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(24).astype(np.float32), "b"))
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Slice", ["s", "zero", "minus1"], ["lead"]),
             helper.make_node("Reshape", ["x", "rows"], ["flat"]),
             helper.make_node("Gemm", ["flat", "w"] + (["b"] if bias else []), ["g"], transB=trans_b),
             helper.make_node("Concat", ["lead", "n"], ["target"], axis=0),
             helper.make_node("Reshape", ["g", "target"], ["y"]),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "conv1d", [helper.make_tensor_value_info("x", F, ["batch", "seq", 32])],
                          [helper.make_tensor_value_info("z", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


@pytest.mark.parametrize("trans_b, bias", [(0, True), (1, True), (0, False)])
def test_a_gemm_of_rows_reshaped_back_is_the_product_of_x(tmp_path, trans_b, bias):
    """The Slice of the Shape is followed, and Conv1D's Reshape -> Gemm -> Reshape back to x's leading dims
    becomes one product of x (its bias and the Relu fused), with no shape arithmetic left; the results are
    onnxruntime's at several shapes."""
    path, g = _load(_conv1d_model(trans_b, bias), tmp_path)
    optimize_dynamic(g)
    assert [n.op_type for n in g.nodes] == (["FusedMatMul"] if bias else ["MatMul"])  # (the Relu its epilogue)
    from ge.core import api
    result = api.atc(path, str(tmp_path / "m"), input_shape="x:-1,-1,32")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for shape in [(2, 3, 32), (1, 5, 32), (3, 1, 32)]:
            feeds = {"x": np.random.default_rng(0).standard_normal(shape).astype(np.float32)}
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            np.testing.assert_allclose(api.execute(model_id, feeds)[0], want, rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)


def test_a_gemm_read_twice_or_reshaped_elsewhere_stays(tmp_path):
    """The rewrite needs the Reshape to restore x's own leading dims: reshaped to another tensor's, it stays."""
    model = _conv1d_model()
    model.graph.input.append(helper.make_tensor_value_info("other", F, ["n", "m", 32]))
    model.graph.node[0].input[0] = "other"  # the lead dims of another tensor
    path, g = _load(model, tmp_path)
    optimize_dynamic(g)
    assert "Gemm" in [n.op_type for n in g.nodes]


def _scores_model(reader: str = "MatMul"):
    """GPT-2's attention scores over a past of symbolic length: k^T = Transpose(k, [0, 1, 3, 2]) read by
    the scores' MatMul and by a Shape (start=-1: the key length) that sizes a Slice of the mask; the
    scores plus the sliced mask are the output. reader: what reads k^T besides the Shape."""
    mask = np.triu(np.full((64, 64), -1e4, np.float32), 1)
    inits = [onnx.numpy_helper.from_array(mask, "bias"), onnx.numpy_helper.from_array(np.array([0], np.int64), "zero"),
             onnx.numpy_helper.from_array(np.array([1], np.int64), "one")]
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node(reader, ["q", "kt"] if reader == "MatMul" else ["kt"], ["scores"]),
             helper.make_node("Shape", ["kt"], ["len"], start=-1),
             helper.make_node("Slice", ["bias", "zero", "len", "one"], ["cols"]),
             helper.make_node("Slice", ["cols", "zero", "one", "zero"], ["row"]),
             helper.make_node("Add", ["scores", "row"] if reader == "MatMul" else ["scores", "scores"], ["y"])]
    g = helper.make_graph(nodes, "scores", [helper.make_tensor_value_info("q", F, [1, 2, 1, 8]),
                                            helper.make_tensor_value_info("k", F, [1, 2, "past", 8])],
                          [helper.make_tensor_value_info("y", F, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_a_shape_of_a_transposed_operand_lets_the_product_read_it_in_place(tmp_path):
    """The Shape of k^T becomes a Gather of Shape(k) by the permutation, so the MatMul is k^T's only reader
    and takes the Transpose as a strided operand (perm_b): no copy of the keys; the results are
    onnxruntime's at several past lengths, a new one every call."""
    path, g = _load(_scores_model(), tmp_path)
    report = optimize_dynamic(g)
    assert report["passes"]["resolve_shapes"]["shapes_of_transposes"] == 1
    ops = [n.op_type for n in g.nodes]
    assert "Transpose" not in ops and ops.count("Shape") == 1 and "Gather" in ops
    from ge.core import api
    result = api.atc(path, str(tmp_path / "m"), input_shape="q:1,2,1,8;k:1,2,-1,8")
    assert "Transpose" not in [n.op_type for n in result.model.nodes]
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        rng = np.random.default_rng(0)
        for past in (5, 6, 7, 40, 6):
            feeds = {"q": rng.standard_normal((1, 2, 1, 8)).astype(np.float32),
                     "k": rng.standard_normal((1, 2, past, 8)).astype(np.float32)}
            want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            np.testing.assert_allclose(api.execute(model_id, feeds)[0], want, rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)


def test_a_transpose_nothing_could_take_keeps_its_shape(tmp_path):
    """Without a MatMul to read the Transpose in place, the Shape stays as written (no node added)."""
    path, g = _load(_scores_model("Relu"), tmp_path)
    report = optimize_dynamic(g)
    assert report["passes"]["resolve_shapes"].get("shapes_of_transposes", 0) == 0
    assert [n.op_type for n in g.nodes].count("Transpose") == 1
