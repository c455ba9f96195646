import numpy as np
import onnx
import onnxruntime as ort
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
