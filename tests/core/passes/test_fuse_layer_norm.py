import importlib.util
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import fuse_layer_norm, infer_shapes, optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(7)
D = 16


def mk(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], **attrs)


def written_out(square="pow", affine=True, axes=(-1,), gamma_shape=(D,), swap=False, opset=13):
    """The opset < 17 export of LayerNorm over `axes`; opset 18 takes the axes as an input."""
    def reduce(x, out):
        if opset >= 18:
            return mk("ReduceMean", [x, "axes"], out, keepdims=1)
        return mk("ReduceMean", [x], out, axes=list(axes), keepdims=1)
    nodes = [reduce("x", "mean"), mk("Sub", ["x", "mean"], "d"),
             mk("Pow", ["d", "two"], "sq") if square == "pow" else mk("Mul", ["d", "d"], "sq"),
             reduce("sq", "var"), mk("Add", ["eps", "var"] if swap else ["var", "eps"], "ve"),
             mk("Sqrt", ["ve"], "std"), mk("Div", ["d", "std"], "n" if affine else "y")]
    inits = {"two": np.array(2, np.float32), "eps": np.array(1e-5, np.float32),
             "axes": np.array(axes, np.int64)}
    if affine:
        nodes += [mk("Mul", ["gamma", "n"] if swap else ["n", "gamma"], "s"),
                  mk("Add", ["s", "beta"] if not swap else ["beta", "s"], "y")]
        inits.update(gamma=(1 + 0.1 * rng.standard_normal(gamma_shape)).astype(np.float32),
                     beta=(0.1 * rng.standard_normal(gamma_shape)).astype(np.float32))
    return nodes, inits


CASES = [dict(), dict(square="mul"), dict(affine=False), dict(swap=True), dict(gamma_shape=(1, 1, D)),
         dict(axes=(-2, -1), gamma_shape=(4, D)), dict(opset=18)]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_written_out_layer_norm_becomes_one_node(make_model, load, run_ort, run_ge, case):
    nodes, inits = written_out(**case)
    opset = case.get("opset", 13)
    model = make_model(nodes, {"x": (F, [2, 4, D])}, ["y"], inits, opset=opset)
    g = infer_shapes(load(model))
    stats = {}
    fuse_layer_norm(g, stats=stats)
    assert stats["fused"] == 1
    (node,) = g.nodes
    assert (node.op_type, node.domain, node.outputs) == ("LayerNormalization", GE_DOMAIN, ["y"])
    assert node.attrs == {"axis": 1 if case.get("axes") == (-2, -1) else 2, "epsilon": pytest.approx(1e-5)}
    assert len(node.inputs) == (3 if case.get("affine", True) else 2)
    x = (rng.standard_normal((2, 4, D)) * 3 + 1).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change", ["axes not trailing", "centered read elsewhere", "keepdims 0", "cube"])
def test_near_misses_stay(make_model, load, change):
    nodes, inits = written_out(axes=(1,) if change == "axes not trailing" else (-1,))
    outputs = ["y"]
    if change == "centered read elsewhere":
        nodes.append(mk("Neg", ["d"], "z"))
        outputs.append("z")
    elif change == "keepdims 0":
        nodes[0] = mk("ReduceMean", ["x"], "mean0", axes=[-1], keepdims=0)
        nodes.insert(1, mk("Unsqueeze", ["mean0", "axes"], "mean"))
        inits["axes"] = np.array([-1], np.int64)
    elif change == "cube":
        inits["two"] = np.array(3, np.float32)
    g = infer_shapes(load(make_model(nodes, {"x": (F, [2, 4, D])}, outputs, inits, opset=13)))
    stats = {}
    fuse_layer_norm(g, stats=stats)
    assert stats["fused"] == 0 and "Sqrt" in [n.op_type for n in g.nodes]


def test_bert_sample_before_opset_17(load, run_ort, run_ge):
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples", "build_samples.py")
    spec = importlib.util.spec_from_file_location("build_samples", path)
    samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(samples)
    model = samples.bert_style(layers=2, hidden=32, heads=2, intermediate=64, vocab=50, opset=13)
    g = load(model, {"input_ids": [2, 12], "attention_mask": [2, 12]})
    report = optimize(g)
    assert report["passes"]["fuse_layer_norm"]["fused"] == 5  # embeddings + 2 per layer
    assert report["passes"]["fuse_gelu"]["fused"] == 2
    assert not {"ReduceMean", "Sqrt", "Erf", "Transpose", "MatMul"} & {n.op_type for n in g.nodes}
    feeds = samples.sample_inputs(model, batch=2, seq=12)
    for got, want in zip(run_ge(g, feeds), run_ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
