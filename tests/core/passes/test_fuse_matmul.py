import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core.kernels.epilogue import ATTR as EPILOGUE
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import fuse_matmul, infer_shapes, optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(5)
S, H, D = 8, 2, 4  # sequence, heads, head size


def w(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def attention_model(make_model, seq=S):
    """BERT's self-attention as exported: projections + bias, heads moved by Reshape/Transpose,
    scores scaled by Div and masked by Add, context moved back."""
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q0"]), n("Add", ["q0", "bq"], ["q1"]), n("Reshape", ["q1", "heads"], ["q2"]),
        n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
        n("MatMul", ["x", "wk"], ["k0"]), n("Add", ["bk", "k0"], ["k1"]), n("Reshape", ["k1", "heads"], ["k2"]),
        n("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1]),
        n("MatMul", ["x", "wv"], ["v0"]), n("Add", ["v0", "bv"], ["v1"]), n("Reshape", ["v1", "heads"], ["v2"]),
        n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Div", ["s0", "scale"], ["s1"]), n("Add", ["s1", "mask"], ["s2"]),
        n("Softmax", ["s2"], ["p"], axis=-1),
        n("MatMul", ["p", "v"], ["c0"]), n("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3]),
        n("Reshape", ["c1", "merge"], ["c2"]),
        n("MatMul", ["c2", "wo"], ["o0"]), n("Add", ["o0", "bo"], ["o1"]), n("Relu", ["o1"], ["y"]),
    ]
    inits = {"wq": w(H * D, H * D), "wk": w(H * D, H * D), "wv": w(H * D, H * D), "wo": w(H * D, H * D),
             "bq": w(H * D), "bk": w(H * D), "bv": w(H * D), "bo": w(H * D), "scale": np.array(np.sqrt(D), np.float32),
             "heads": np.array([1, seq, H, D], np.int64), "merge": np.array([1, seq, H * D], np.int64)}
    return make_model(nodes, {"x": (F, [1, seq, H * D]), "mask": (F, [1, 1, 1, seq])}, ["y"], inits)


def test_attention_becomes_fused_matmuls(make_model, load, run_ort, run_ge):
    model = attention_model(make_model)
    g = load(model)
    report = optimize(g)
    stats = report["passes"]["fuse_matmul"]
    assert stats == {"fused": 6, "transposes": 4, "scales": 1, "adds": 5, "gelus": 0}
    ops = [(n.op_type, n.domain) for n in g.nodes if n.op_type not in ("Reshape",)]
    assert ops.count(("FusedMatMul", GE_DOMAIN)) == 6 and ("Softmax", "") in ops and len(ops) == 7
    scores = next(n for n in g.nodes if n.inputs[-1] == "mask")
    assert scores.attrs == {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": pytest.approx(1 / np.sqrt(D))}
    out = next(n for n in g.nodes if n.outputs == ["y"])
    assert out.attrs[EPILOGUE] == [["Relu", {}]]  # moved along with the bias Add
    feeds = {"x": rng.standard_normal((1, S, H * D)).astype(np.float32),
             "mask": np.where(np.arange(S) < S - 2, 0, -1e4).astype(np.float32).reshape(1, 1, 1, S)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_transposes_of_one_token_stay_views(make_model, load, run_ort, run_ge):
    """At seq 1 the head Transposes move only axes of size 1 (views at build): the products read them
    as they are, no perm_a/perm_b (a constant's product stays a plain GEMV on the heads' rows)."""
    model = attention_model(make_model, seq=1)
    g = load(model)
    optimize(g)
    fused = [n for n in g.nodes if n.op_type == "FusedMatMul"]
    assert fused and not any("perm_a" in n.attrs or "perm_b" in n.attrs for n in fused)
    feeds = {"x": rng.standard_normal((1, 1, H * D)).astype(np.float32), "mask": np.zeros((1, 1, 1, 1), np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_near_misses_stay(make_model, load):
    n = helper.make_node
    nodes = [
        n("Transpose", ["a"], ["at"], perm=[2, 0, 1]),   # A's last axis would leave the matrix view
        n("MatMul", ["at", "b"], ["p"]),
        n("Div", ["two", "p"], ["r"]),                    # scalar / product: no alpha
        n("MatMul", ["a", "b2"], ["y2"]),                 # product is a graph output: nothing after it folds
        n("Add", ["y2", "bias"], ["y3"]),
        n("MatMul", ["a", "b2"], ["y4"]),                 # bias that would enlarge the product
        n("Add", ["y4", "big"], ["y5"]),
    ]
    inits = {"b": w(5, 3), "b2": w(6, 3), "two": np.array(2, np.float32), "bias": w(3), "big": w(2, 4, 5, 3)}
    model = make_model(nodes, {"a": (F, [4, 5, 6])}, ["r", "y2", "y3", "y5"], inits)
    g = infer_shapes(load(model))
    stats = {}
    fuse_matmul(g, stats=stats)
    assert stats["fused"] == 0
    assert [x.op_type for x in g.nodes] == ["Transpose", "MatMul", "Div", "MatMul", "Add", "MatMul", "Add"]


def test_bias_and_residual_then_a_third_add_stays(make_model, load, run_ort, run_ge):
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w"], ["p"]), n("Add", ["p", "b"], ["q"]), n("Add", ["x", "q"], ["r"]),
             n("Add", ["r", "b"], ["y"])]
    model = make_model(nodes, {"x": (F, [2, S, 6])}, ["y"], {"w": w(6, 6), "b": w(6)})
    g = infer_shapes(load(model))
    stats = {}
    fuse_matmul(g, stats=stats)
    assert stats["adds"] == 2
    assert [(x.op_type, x.inputs) for x in g.nodes] == [("FusedMatMul", ["x", "w", "b", "x"]), ("Add", ["r", "b"])]
    feeds = {"x": rng.standard_normal((2, S, 6)).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_symbolic_dims_fuse_only_what_they_prove():
    """On a dynamic graph a bias over the known last dim and an addend sharing the product's
    symbols fuse; an addend whose dim is unknown (None) or another symbol stays an Add task."""
    from ge.core.model.ir import Graph, Node
    from ge.core.passes._util import set_initializer
    nodes = [Node("MatMul", ["x", "w"], ["y0"], name="mm"), Node("Add", ["y0", "b"], ["y1"], name="bias"),
             Node("Add", ["y1", "r"], ["y2"], name="res"),
             Node("MatMul", ["x", "w"], ["z0"], name="mm2"), Node("Add", ["z0", "u"], ["z1"], name="odd")]
    g = Graph("g", nodes=nodes, inputs=["x", "r", "u"], outputs=["y2", "z1"])
    for name, shape in (("x", ("batch", "seq", 4)), ("r", ("batch", 1, 4)), ("u", (None, "seq", 4)),
                        ("y0", ("batch", "seq", 4)), ("y1", ("batch", "seq", 4)), ("y2", ("batch", "seq", 4)),
                        ("z0", ("batch", "seq", 4)), ("z1", ("batch", "seq", 4))):
        v = g.value(name)
        v.dtype, v.shape = np.dtype(np.float32), shape
    set_initializer(g, "w", w(4, 4))
    set_initializer(g, "b", w(4))
    fuse_matmul(g)
    assert [(n.op_type, n.inputs) for n in g.nodes] == [("FusedMatMul", ["x", "w", "b", "r"]),
                                                        ("MatMul", ["x", "w"]), ("Add", ["z0", "u"])]


def test_intermediate_gelu_becomes_the_products_activation(make_model, load, run_ort, run_ge):
    """BERT's intermediate as exported: x W + b, then Gelu written out with Erf. fuse_gelu makes it a
    Gelu, fuse_matmul folds bias and Gelu into one FusedMatMul (activation="Gelu")."""
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w"], ["h0"]), n("Add", ["h0", "b"], ["h"]),
             n("Div", ["h", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]), n("Add", ["g1", "one"], ["g2"]),
             n("Mul", ["h", "g2"], ["g3"]), n("Mul", ["g3", "half"], ["y"])]
    inits = {"w": w(16, 32), "b": w(32), "sqrt2": np.array(np.sqrt(2), np.float32),
             "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}
    model = make_model(nodes, {"x": (F, [1, 12, 16])}, ["y"], inits)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_matmul"]["gelus"] == 1
    (node,) = g.nodes
    assert (node.op_type, node.attrs["activation"]) == ("FusedMatMul", "Gelu")
    feeds = {"x": rng.standard_normal((1, 12, 16)).astype(np.float32) * 2}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-4, atol=1e-5)


def conv1d_residual_model(make_model, residual_first: bool):
    """GPT-2's Conv1D as HF exports it, twice: Reshape/Gemm(+bias)/Reshape then the residual Add
    (operands in either order), and Reshape/MatMul/Add(bias)/Reshape then the residual Add and a Relu;
    a transB Gemm, so the fused product reads W through perm_b."""
    n = helper.make_node

    def add(r, res, out):
        return n("Add", [res, r] if residual_first else [r, res], [out])
    nodes = [n("Reshape", ["x", "rows"], ["xf"]), n("Gemm", ["xf", "wt", "b"], ["g"], transB=1),
             n("Reshape", ["g", "back"], ["gr"]), add("gr", "x", "h"),
             n("Reshape", ["h", "rows"], ["hf"]), n("MatMul", ["hf", "w"], ["p"]), n("Add", ["p", "b"], ["q"]),
             n("Reshape", ["q", "back"], ["qr"]), add("qr", "h", "s"), n("Relu", ["s"], ["y"])]
    inits = {"rows": np.array([-1, 6], np.int64), "back": np.array([2, 3, 6], np.int64), "wt": w(6, 6), "w": w(6, 6),
             "b": w(6)}
    return make_model(nodes, {"x": (F, [2, 3, 6])}, {"y": (F, [2, 3, 6])}, inits)


@pytest.mark.parametrize("residual_first", [False, True])
def test_residual_add_after_a_reshape_of_the_product_folds_into_it(make_model, load, run_ort, run_ge, residual_first):
    """The residual, seen in the product's [6, 6] through a Reshape, becomes the product's last
    addend; the product reshaped writes the Add's output (names and shapes as before)."""
    model = conv1d_residual_model(make_model, residual_first)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_matmul"] == {"fused": 2, "transposes": 0, "scales": 0, "adds": 3, "gelus": 0}
    ops = [(x.op_type, x.inputs[0], x.outputs[0]) for x in g.nodes]
    assert ops == [("Reshape", "x", "xf"), ("Reshape", "x", "x:rows"), ("FusedMatMul", "xf", "g"), ("Reshape", "g", "h"),
                   ("Reshape", "h", "hf"), ("Reshape", "h", "h:rows"), ("FusedMatMul", "hf", "q"), ("Reshape", "q", "y")]
    first, second = g.nodes[2], g.nodes[6]
    assert (first.inputs, first.attrs) == (["xf", "wt", "b", "x:rows"], {"perm_b": [1, 0]})
    assert (second.inputs, second.attrs[EPILOGUE]) == (["hf", "w", "b", "h:rows"], [["Relu", {}]])
    assert g.outputs == ["y"] and g.values["y"].shape == (2, 3, 6) and g.values["x:rows"].shape == (6, 6)
    feeds = {"x": rng.standard_normal((2, 3, 6)).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_residual_add_after_a_reshape_near_misses_stay(make_model, load):
    """No fold when the Reshape changes the last dim, when the residual broadcasts, when the product
    has another reader, or when the product already has an epilogue (a Gelu, applied before any addend)."""
    n = helper.make_node

    def conv1d(k, back, res, first=False):
        g, r = f"g{k}", f"r{k}"
        return [n("Gemm", ["x", "w", "b"], [g]), n("Reshape", [g, back], [r]),
                n("Add", [res, r] if first else [r, res], [f"y{k}"])]
    nodes = conv1d(1, "wide", "res1") + conv1d(2, "back", "res2", first=True) + conv1d(3, "back", "res3") + \
        [n("Relu", ["g3"], ["y5"])] + conv1d(4, "back", "res3")
    inits = {"w": w(4, 6), "b": w(6), "wide": np.array([3, 12], np.int64), "back": np.array([2, 3, 6], np.int64)}
    inputs = {"x": (F, [6, 4]), "res1": (F, [3, 12]), "res2": (F, [3, 6]), "res3": (F, [2, 3, 6])}
    g = infer_shapes(load(make_model(nodes, inputs, ["y1", "y2", "y3", "y4", "y5"], inits)))
    g.nodes[-3].attrs[EPILOGUE] = [["Gelu", {"approximate": "tanh"}, GE_DOMAIN]]
    stats = {}
    fuse_matmul(g, stats=stats)
    assert stats["fused"] == 0
    assert [x.op_type for x in g.nodes] == ["Gemm", "Reshape", "Add"] * 3 + ["Relu"] + ["Gemm", "Reshape", "Add"]
    del g.nodes[-3].attrs[EPILOGUE]  # the same Gemm without its epilogue folds
    fuse_matmul(g, stats=stats)
    assert stats["fused"] == 1 and [x.op_type for x in g.nodes[-3:]] == ["Reshape", "FusedMatMul", "Reshape"]


def _attention_scores(mask_dims):
    """Q K^T / 8 + mask as BERT exports it with dynamic axes: the product's dims are fresh symbols
    after onnx's inference (unk__...), the mask (batch, 1, 1, seq) of the input's own symbols."""
    n = helper.make_node
    nodes = [n("MatMul", ["q", "kt"], ["s0"]), n("Div", ["s0", "eight"], ["s1"]), n("Add", ["s1", "mask"], ["y"])]
    graph = helper.make_graph(nodes, "scores", [helper.make_tensor_value_info("q", F, ["batch", 4, "seq", 16]),
                                                helper.make_tensor_value_info("kt", F, ["batch", 4, 16, "seq"]),
                                                helper.make_tensor_value_info("mask", F, mask_dims)],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.array(8, np.float32), "eight")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("mask_dims, fused", [(["batch", 1, 1, "seq"], True), (["mask_batch", 1, 1, "mask_seq"], False)])
def test_dynamic_addends_fuse_where_both_nominal_runs_agree(tmp_path, mask_dims, fused):
    """With unknown dims the mask's broadcast into the product is shown at two nominal sizes: where its
    dims are the inputs' own symbols (one name, one size) it fuses; named apart (sizes independent as
    written) it stays an Add. Either way the results are onnxruntime's at several shapes."""
    model = _attention_scores(mask_dims)
    path = str(tmp_path / "scores.onnx")
    onnx.save(model, path)
    from ge.core import api
    result = api.atc(path, str(tmp_path / "scores"), input_shape="q:-1,4,-1,16;kt:-1,4,16,-1;mask:-1,1,1,-1")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        ops = [n.op_type for n in api.model(model_id).dyn.nodes]
        assert ops == (["FusedMatMul"] if fused else ["FusedMatMul", "Add"])
        for b, s in ((1, 7), (2, 12), (3, 1)):
            feeds = {"q": w(b, 4, s, 16), "kt": w(b, 4, 16, s), "mask": w(b, 1, 1, s)}
            got = api.execute(model_id, feeds)[0]
            want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)
