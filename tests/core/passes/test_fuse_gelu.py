import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import fuse_gelu, infer_shapes, optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(3)
C = {"sqrt2": np.array(math.sqrt(2), np.float32), "isqrt2": np.array(1 / math.sqrt(2), np.float32),
     "one": np.array(1, np.float32), "half": np.array(0.5, np.float32)}


def mk(op, ins, out):
    return helper.make_node(op, ins, [out])


# the exported orderings: (name, nodes producing "y" from "x")
PATTERNS = [
    ("torch: (x * s) * 0.5", [mk("Div", ["x", "sqrt2"], "u"), mk("Erf", ["u"], "e"), mk("Add", ["e", "one"], "s"),
                              mk("Mul", ["x", "s"], "p"), mk("Mul", ["p", "half"], "y")]),
    ("mul by 1/sqrt2, (0.5 * s) * x", [mk("Mul", ["isqrt2", "x"], "u"), mk("Erf", ["u"], "e"),
                                       mk("Add", ["one", "e"], "s"), mk("Mul", ["half", "s"], "p"),
                                       mk("Mul", ["x", "p"], "y")]),
    ("(x * 0.5) * s", [mk("Mul", ["x", "half"], "h"), mk("Div", ["x", "sqrt2"], "u"), mk("Erf", ["u"], "e"),
                       mk("Add", ["e", "one"], "s"), mk("Mul", ["h", "s"], "y")]),
]


def _model(make_model, nodes, outputs=("y",), opset=13):
    # x comes out of a Relu-free producer (an Add) so that it is an intermediate tensor, as in BERT
    pre = [helper.make_node("Add", ["a", "b"], ["x"])]
    return make_model(pre + nodes, {"a": (F, [2, 8, 16]), "b": (F, [16])}, list(outputs), C, opset=opset)


@pytest.mark.parametrize("name,nodes", PATTERNS, ids=[p[0] for p in PATTERNS])
def test_patterns_become_one_gelu(make_model, load, run_ort, run_ge, name, nodes):
    model = _model(make_model, nodes)
    g = infer_shapes(load(model))
    stats = {}
    fuse_gelu(g, stats=stats)
    assert stats["fused"] == 1
    assert [(n.op_type, n.domain) for n in g.nodes] == [("Add", ""), ("Gelu", GE_DOMAIN)]
    gelu = g.nodes[1]
    assert gelu.inputs == ["x"] and gelu.outputs == ["y"]
    assert not {"u", "e", "s", "p", "h"} & set(g.values)
    assert g.opset[GE_DOMAIN] == g.opset[""]
    feeds = {"a": (rng.standard_normal((2, 8, 16)) * 3).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", ["intermediate is an output", "intermediate read twice", "wrong constant", "add 2"])
def test_near_misses_stay(make_model, load, change):
    nodes = [mk("Div", ["x", "sqrt2"], "u"), mk("Erf", ["u"], "e"), mk("Add", ["e", "one"], "s"),
             mk("Mul", ["x", "s"], "p"), mk("Mul", ["p", "half"], "y")]
    outputs = ["y"]
    if change == "intermediate is an output":
        outputs.append("e")
    elif change == "intermediate read twice":
        nodes.append(mk("Neg", ["s"], "z"))
        outputs.append("z")
    elif change == "wrong constant":
        nodes[0] = mk("Div", ["x", "one"], "u")
    else:
        nodes[2] = mk("Add", ["e", "half"], "s")
    g = infer_shapes(load(_model(make_model, nodes, outputs)))
    stats = {}
    fuse_gelu(g, stats=stats)
    assert stats["fused"] == 0 and "Erf" in [n.op_type for n in g.nodes]


def test_two_gelus_and_the_pipeline(make_model, load, run_ort, run_ge):
    nodes = [mk("Div", ["x", "sqrt2"], "u"), mk("Erf", ["u"], "e"), mk("Add", ["e", "one"], "s"),
             mk("Mul", ["x", "s"], "p"), mk("Mul", ["p", "half"], "y1"),
             mk("Mul", ["y1", "isqrt2"], "u2"), mk("Erf", ["u2"], "e2"), mk("Add", ["one", "e2"], "s2"),
             mk("Mul", ["s2", "y1"], "p2"), mk("Mul", ["half", "p2"], "y")]
    model = _model(make_model, nodes, opset=17)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_gelu"]["fused"] == 2
    assert [n.op_type for n in g.nodes] == ["Add", "Gelu", "Gelu"]
    feeds = {"a": (rng.standard_normal((2, 8, 16)) * 3).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


TANH_C = dict(C, sq2pi=np.array(math.sqrt(2 / math.pi), np.float32), kappa=np.array(0.044715, np.float32),
              three=np.array(3.0, np.float32))
# the tanh form: (name, nodes producing "y" from "x")
TANH_PATTERNS = [
    ("gelu_new: 0.5 * x * (1 + tanh(c * (x + k * pow(x, 3))))",
     [mk("Mul", ["half", "x"], "h"), mk("Pow", ["x", "three"], "c3"), mk("Mul", ["kappa", "c3"], "kc"),
      mk("Add", ["x", "kc"], "i"), mk("Mul", ["sq2pi", "i"], "u"), mk("Tanh", ["u"], "t"), mk("Add", ["one", "t"], "s"),
      mk("Mul", ["h", "s"], "y")]),
    ("torch approximate='tanh': x * x * x, (x * s) * 0.5",
     [mk("Mul", ["x", "x"], "sq"), mk("Mul", ["sq", "x"], "c3"), mk("Mul", ["c3", "kappa"], "kc"),
      mk("Add", ["kc", "x"], "i"), mk("Mul", ["i", "sq2pi"], "u"), mk("Tanh", ["u"], "t"), mk("Add", ["t", "one"], "s"),
      mk("Mul", ["x", "s"], "p"), mk("Mul", ["p", "half"], "y")]),
]


@pytest.mark.parametrize("name,nodes", TANH_PATTERNS, ids=[p[0] for p in TANH_PATTERNS])
def test_tanh_forms_become_one_tanh_gelu(make_model, load, run_ort, run_ge, name, nodes):
    pre = [helper.make_node("Add", ["a", "b"], ["x"])]
    model = make_model(pre + nodes, {"a": (F, [2, 8, 16]), "b": (F, [16])}, ["y"], TANH_C, opset=13)
    g = infer_shapes(load(model))
    stats = {}
    fuse_gelu(g, stats=stats)
    assert stats["fused"] == 1
    assert [(n.op_type, n.domain) for n in g.nodes] == [("Add", ""), ("Gelu", GE_DOMAIN)]
    assert g.nodes[1].attrs == {"approximate": "tanh"} and g.nodes[1].inputs == ["x"]
    feeds = {"a": (rng.standard_normal((2, 8, 16)) * 3).astype(np.float32), "b": rng.standard_normal(16).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("change", ["square is an output", "pow of 2", "wrong kappa", "cube of another tensor"])
def test_tanh_near_misses_stay(make_model, load, change):
    nodes = [mk("Mul", ["x", "x"], "sq"), mk("Mul", ["sq", "x"], "c3"), mk("Mul", ["c3", "kappa"], "kc"),
             mk("Add", ["kc", "x"], "i"), mk("Mul", ["i", "sq2pi"], "u"), mk("Tanh", ["u"], "t"),
             mk("Add", ["t", "one"], "s"), mk("Mul", ["x", "s"], "p"), mk("Mul", ["p", "half"], "y")]
    outputs = ["y"]
    if change == "square is an output":
        outputs.append("sq")
    elif change == "pow of 2":
        nodes[:2] = [mk("Pow", ["x", "sqrt2"], "c3")]
    elif change == "wrong kappa":
        nodes[2] = mk("Mul", ["c3", "half"], "kc")
    else:
        nodes[1] = mk("Mul", ["sq", "b"], "c3")
    pre = [helper.make_node("Add", ["a", "b"], ["x"])]
    model = make_model(pre + nodes, {"a": (F, [2, 8, 16]), "b": (F, [16])}, outputs, TANH_C, opset=13)
    g = infer_shapes(load(model))
    stats = {}
    fuse_gelu(g, stats=stats)
    assert stats["fused"] == 0 and "Tanh" in [n.op_type for n in g.nodes]


@pytest.mark.parametrize("rows", [1, 9])
def test_tanh_gelu_after_a_gemm_is_its_epilogue(make_model, load, run_ort, run_ge, rows):
    """GPT-2's Conv1D as a Gemm then gelu_new: the tanh Gelu fuse_gelu makes becomes the Gemm's
    epilogue (the native GEMV at one row, the GEMM at 9, apply it as they store), equal to
    onnxruntime's decomposed form out to the tails where exp over- and underflows."""
    nodes = [helper.make_node("Gemm", ["a", "w", "bias"], ["x"])] + TANH_PATTERNS[0][1]
    consts = dict(TANH_C, w=(rng.standard_normal((24, 37)) / 2).astype(np.float32),
                  bias=rng.standard_normal(37).astype(np.float32))
    model = make_model(nodes, {"a": (F, [rows, 24])}, ["y"], consts, opset=13)
    g = load(model)
    optimize(g)
    assert [(n.op_type, n.attrs.get("ge.epilogue")) for n in g.nodes] == \
        [("Gemm", [["Gelu", {"approximate": "tanh"}, GE_DOMAIN]])]
    feeds = {"a": (rng.standard_normal((rows, 24)) * 8).astype(np.float32)}
    pre = feeds["a"] @ consts["w"] + consts["bias"]
    assert pre.min() < -10 and pre.max() > 10  # both tails of the form
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)


def test_tanh_gelu_after_a_reshaped_gemm_is_its_epilogue(make_model, load, run_ort, run_ge):
    """GPT-2's Conv1D as torch.onnx exports it, Reshape / Gemm / Reshape, then gelu_new: the Gelu moves
    before the last Reshape into the Gemm's epilogue, and that Reshape writes the Gelu's output."""
    nodes = [helper.make_node("Reshape", ["a", "flat"], ["a2"]), helper.make_node("Gemm", ["a2", "w", "bias"], ["p"]),
             helper.make_node("Reshape", ["p", "back"], ["x"])] + TANH_PATTERNS[0][1]
    consts = dict(TANH_C, w=(rng.standard_normal((24, 37)) / 2).astype(np.float32),
                  bias=rng.standard_normal(37).astype(np.float32), flat=np.array([-1, 24], np.int64),
                  back=np.array([1, 1, 37], np.int64))
    model = make_model(nodes, {"a": (F, [1, 1, 24])}, ["y"], consts, opset=13)
    g = load(model)
    optimize(g)
    gemm = next(n for n in g.nodes if n.op_type == "Gemm")
    assert gemm.attrs["ge.epilogue"] == [["Gelu", {"approximate": "tanh"}, GE_DOMAIN]]
    assert "Gelu" not in [n.op_type for n in g.nodes] and g.nodes[-1].outputs == ["y"]
    feeds = {"a": (rng.standard_normal((1, 1, 24)) * 8).astype(np.float32)}
    np.testing.assert_allclose(run_ge(g, feeds)[0], run_ort(model, feeds)[0], rtol=1e-5, atol=1e-5)
