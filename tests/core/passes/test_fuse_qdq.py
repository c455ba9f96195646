"""fuse_qdq: QDQ groups and quantize_dynamic's products become quantized ops, results within one
quantization step of onnxruntime's unfused graph (tests/conftest.py's ort_unfused: the float ops
between DequantizeLinear and QuantizeLinear, exact integer products; not its int8 kernels, whose
results depend on the CPU)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.passes import optimize
from tests.conftest import ort_unfused

rng = np.random.default_rng(23)
F, MS = TensorProto.FLOAT, "com.microsoft"


def qdq_model(make_model, conv_readers=1, bias_scale=None):
    """x -> Q -> DQ -> Conv(DQ(w), DQ(b)) -> Q -> DQ -> Add(the block's input) -> Q -> DQ -> MaxPool -> Q -> DQ
    -> GlobalAveragePool -> Q -> DQ -> Flatten -> Q -> DQ -> Gemm(DQ(wg), DQ(bg)) -> Q -> DQ -> y"""
    n = helper.make_node
    s = lambda v: np.array(v, np.float32)  # noqa: E731
    z = lambda v: np.array(v, np.int8)  # noqa: E731
    c = 8
    w = rng.integers(-127, 128, (c, c, 3, 3)).astype(np.int8)
    ws = rng.uniform(0.001, 0.004, c).astype(np.float32)
    xs = np.float32(0.03)
    wg = rng.integers(-127, 128, (5, c)).astype(np.int8)
    wgs = np.float32(0.01)
    inits = {
        "xs": s(xs), "xz": z(3), "w": w, "ws": ws, "wz": np.zeros(c, np.int8),
        "b": rng.integers(-3000, 3000, c).astype(np.int32), "bs": (ws * xs) if bias_scale is None else bias_scale,
        "bz": np.zeros(c, np.int32), "cs": s(0.05), "cz": z(-10), "as": s(0.06), "az": z(0),
        "ps": s(0.02), "pz": z(-20), "wg": wg, "wgs": s(wgs), "wgz": z(0),
        "bg": rng.integers(-500, 500, 5).astype(np.int32), "bgs": s(np.float32(0.02) * wgs), "ys": s(0.04), "yz": z(5),
    }
    nodes = [
        n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), n("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        n("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0), n("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0),
        n("Conv", ["xd", "wd", "bd"], ["conv"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        n("QuantizeLinear", ["conv", "cs", "cz"], ["cq"]), n("DequantizeLinear", ["cq", "cs", "cz"], ["cd"]),
        n("Add", ["cd", "xd"], ["add"]), n("QuantizeLinear", ["add", "as", "az"], ["aq"]),
        n("DequantizeLinear", ["aq", "as", "az"], ["ad"]),
        n("MaxPool", ["ad"], ["mp"], kernel_shape=[2, 2], strides=[2, 2]),
        n("QuantizeLinear", ["mp", "as", "az"], ["mq"]), n("DequantizeLinear", ["mq", "as", "az"], ["md"]),
        n("GlobalAveragePool", ["md"], ["gap"]), n("QuantizeLinear", ["gap", "ps", "pz"], ["pq"]),
        n("DequantizeLinear", ["pq", "ps", "pz"], ["pd"]), n("Flatten", ["pd"], ["fl"], axis=1),
        n("QuantizeLinear", ["fl", "ps", "pz"], ["fq"]), n("DequantizeLinear", ["fq", "ps", "pz"], ["fd"]),
        n("DequantizeLinear", ["wg", "wgs", "wgz"], ["wgd"]), n("DequantizeLinear", ["bg", "bgs"], ["bgd"]),
        n("Gemm", ["fd", "wgd", "bgd"], ["gemm"], transB=1), n("QuantizeLinear", ["gemm", "ys", "yz"], ["yq"]),
        n("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    outputs = {"y": (F, [1, 5])}
    if conv_readers == 2:  # the float conv output is a graph output too: the Conv must stay
        outputs["conv"] = (F, [1, c, 8, 8])
    return make_model(nodes, {"x": (F, [1, c, 8, 8])}, outputs, inits, opset=17)


def ops(graph):
    return sorted({(n.op_type, n.domain) for n in graph.nodes})


def test_qdq_groups_become_quantized_ops(make_model, load, run_ge):
    model = qdq_model(make_model)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_qdq"] == {"conv": 1, "matmul": 0, "gemm": 1, "add": 1, "pool": 1, "reshape": 2,
                                            "dynamic_matmul": 0, "round_trip": 0, "softmax": 0}
    assert ops(g) == [("DequantizeLinear", ""), ("Flatten", ""), ("MaxPool", ""), ("QGemm", MS), ("QLinearAdd", MS),
                      ("QLinearConv", ""), ("QLinearGlobalAveragePool", MS), ("QuantizeLinear", "")]
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    got, want = run_ge(g, {"x": x})[0], ort_unfused(model, {"x": x})[0]
    assert np.abs(got - want).max() <= 0.04 * 1.001  # within one step of the output's scale


def test_groups_that_do_not_match_stay(make_model, load, run_ge):
    # the Conv's float output is read twice, and the Gemm's bias has another scale than a_scale * w_scale
    model = qdq_model(make_model, conv_readers=2, bias_scale=np.full(8, 1e-4, np.float32))
    g = load(model)
    stats = optimize(g)["passes"]["fuse_qdq"]
    assert stats["conv"] == 0 and ("Conv", "") in ops(g)
    x = rng.standard_normal((1, 8, 8, 8)).astype(np.float32)
    for got, want in zip(run_ge(g, {"x": x}), ort_unfused(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=0, atol=0.04 * 1.001)


def test_switched_off(make_model, load):
    g = load(qdq_model(make_model))
    optimize(g, disabled={"fuse_qdq"})
    assert ("QLinearConv", "") not in ops(g)


def attention_model(make_model, zdt, transposed):
    """quantize_static's attention core, activations on both sides: Q -> DQ around q and k, MatMul -> Q -> DQ
    -> Softmax -> Q -> DQ [-> Transpose -> Q -> DQ] -> y (15 x 15 scores: no multiple of a vector)."""
    n = helper.make_node
    z = lambda v: np.array(v, zdt)  # noqa: E731
    inits = {"qs": np.array(0.02, np.float32), "qz": z(3), "ss": np.array(0.05, np.float32), "sz": z(-1 if zdt == np.int8 else 128),
             "ps": np.array(1 / 255, np.float32), "pz": z(-128 if zdt == np.int8 else 0)}
    nodes = [
        n("QuantizeLinear", ["q", "qs", "qz"], ["q8"]), n("DequantizeLinear", ["q8", "qs", "qz"], ["qd"]),
        n("QuantizeLinear", ["k", "qs", "qz"], ["k8"]), n("DequantizeLinear", ["k8", "qs", "qz"], ["kd"]),
        n("MatMul", ["qd", "kd"], ["scores"]),
        n("QuantizeLinear", ["scores", "ss", "sz"], ["s8"]), n("DequantizeLinear", ["s8", "ss", "sz"], ["sd"]),
        n("Softmax", ["sd"], ["p"], axis=-1),
        n("QuantizeLinear", ["p", "ps", "pz"], ["p8"]), n("DequantizeLinear", ["p8", "ps", "pz"], ["pd" if transposed else "y"]),
    ]
    if transposed:
        nodes += [n("Transpose", ["pd"], ["t"], perm=[0, 1, 3, 2]),
                  n("QuantizeLinear", ["t", "ps", "pz"], ["t8"]), n("DequantizeLinear", ["t8", "ps", "pz"], ["y"])]
    return make_model(nodes, {"q": (F, [1, 2, 15, 8]), "k": (F, [1, 2, 8, 15])}, {"y": (F, [1, 2, 15, 15])}, inits,
                      opset=17)


@pytest.mark.parametrize("zdt", [np.uint8, np.int8])
@pytest.mark.parametrize("transposed,fused,graph_ops", [
    (True, {"reshape": 1, "round_trip": 3, "softmax": 0},
     [("DequantizeLinear", ""), ("MatMul", ""), ("QuantizeDequantize", "ge"), ("QuantizeLinear", ""), ("Softmax", ""),
      ("Transpose", "")]),
    (False, {"reshape": 0, "round_trip": 4, "softmax": 1},
     [("MatMul", ""), ("QuantizeDequantize", "ge"), ("SoftmaxQdq", "ge")])])
def test_round_trips_between_float_ops_are_one_op(make_model, load, run_ge, zdt, transposed, fused, graph_ops):
    """A Q -> DQ pair left between float ops runs as one QuantizeDequantize, a DQ -> Transpose -> Q on the
    bytes, a Softmax between two round trips as SoftmaxQdq: ge's results are those of the unfused graph,
    bit for bit, and onnxruntime's within a step."""
    model = attention_model(make_model, zdt, transposed)
    g = load(model)
    assert optimize(g)["passes"]["fuse_qdq"] == {"conv": 0, "matmul": 0, "gemm": 0, "add": 0, "pool": 0,
                                                 "dynamic_matmul": 0, **fused}
    assert ops(g) == graph_ops
    feeds = {"q": rng.standard_normal((1, 2, 15, 8)).astype(np.float32),
             "k": rng.standard_normal((1, 2, 8, 15)).astype(np.float32)}
    unfused = load(model)
    optimize(unfused, disabled={"fuse_qdq"})
    got = run_ge(g, feeds)[0]
    np.testing.assert_array_equal(got, run_ge(unfused, feeds)[0])
    assert np.abs(got - ort_unfused(model, feeds)[0]).max() <= (1 / 255) * 1.001


def dynamic_model(make_model, with_bias=True):
    """quantize_dynamic's projection: DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(a_scale * w_scale) -> Add."""
    n = helper.make_node
    k, m = 48, 40
    w = rng.integers(-127, 128, (k, m)).astype(np.int8)
    inits = {"w": w, "wz": np.array(0, np.int8), "wsc": np.array(0.004, np.float32),
             "bias": rng.standard_normal(m).astype(np.float32)}
    nodes = [
        n("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
        n("Mul", ["xs", "wsc"], ["scale"]),
        n("MatMulInteger", ["xq", "w", "xz", "wz"], ["acc"]),
        n("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
        n("Mul", ["accf", "scale"], ["y0" if with_bias else "y"]),
    ] + ([n("Add", ["y0", "bias"], ["y"])] if with_bias else [])
    return make_model(nodes, {"x": (F, [2, 7, k])}, {"y": (F, [2, 7, m])}, inits if with_bias else
                      {k_: v for k_, v in inits.items() if k_ != "bias"})


@pytest.mark.parametrize("with_bias", [True, False])
def test_dynamic_matmul_becomes_matmul_integer_to_float(make_model, load, run_ge, with_bias):
    model = dynamic_model(make_model, with_bias)
    g = load(model)
    assert optimize(g)["passes"]["fuse_qdq"]["dynamic_matmul"] == 1
    assert ops(g) == [("DynamicQuantizeLinear", ""), ("MatMulIntegerToFloat", MS)]
    x = rng.standard_normal((2, 7, 48)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], ort_unfused(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("plan", ["native", "numpy"])
def test_dynamic_matmul_takes_the_gelu(make_model, load, run_ge, default_backend, plan):
    """BERT's intermediate: the int8 product then Gelu (erf form) -> one MatMulIntegerToFloat, activation Gelu."""
    default_backend(plan)
    model = dynamic_model(make_model)
    n = helper.make_node
    graph = model.graph
    graph.node[-1].output[0] = "h"
    graph.node.extend([n("Div", ["h", "sqrt2"], ["h1"]), n("Erf", ["h1"], ["h2"]), n("Add", ["h2", "one"], ["h3"]),
                       n("Mul", ["h", "h3"], ["h4"]), n("Mul", ["h4", "half"], ["y"])])
    for name, v in (("sqrt2", np.sqrt(2.0)), ("one", 1.0), ("half", 0.5)):
        graph.initializer.append(helper.make_tensor(name, TensorProto.FLOAT, [], [v]))
    g = load(model)
    optimize(g)
    assert ops(g) == [("DynamicQuantizeLinear", ""), ("MatMulIntegerToFloat", MS)]
    assert next(x for x in g.nodes if x.op_type == "MatMulIntegerToFloat").attrs["activation"] == "Gelu"
    x = rng.standard_normal((2, 7, 48)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], ort_unfused(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
