"""fuse_rms_norm: the exported RMSNorm forms become one ge::RMSNormalization, whose native rows and
numpy plan both match onnxruntime on the unfused graph."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.kernels import lookup
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.model.ir import Meta
from ge.core.passes import fuse_rms_norm, infer_shapes, optimize

F, H = TensorProto.FLOAT, TensorProto.FLOAT16
rng = np.random.default_rng(11)


def mk(op, ins, out, **attrs):
    return helper.make_node(op, ins, [out], **attrs)


def written_out(hidden, eps=1e-6, square="pow", inverse="reciprocal", weight="after", cast=False, opset=17):
    """RMSNorm as torch.onnx writes LLaMA's (square pow, inverse reciprocal, weight after) or T5's and
    others' variants. inverse: "reciprocal" x * Reciprocal(s), "div1" x * Div(1, s), "div" Div(x, s).
    weight: "after" (the weight's Mul last), "before" (before the Cast back: float32), None.
    cast: x is float16, Cast to float32 at the start and back at the end."""
    nodes, inits = [], {"two": np.array(2.0, np.float32), "eps": np.array(eps, np.float32),
                        "one": np.array(1.0, np.float32), "axes": np.array([-1], np.int64)}
    xf = "x"
    if cast:
        nodes.append(mk("Cast", ["x"], "xf", to=F))
        xf = "xf"
    nodes.append(mk("Pow", [xf, "two"], "sq") if square == "pow" else mk("Mul", [xf, xf], "sq"))
    nodes.append(mk("ReduceMean", ["sq", "axes"], "ms", keepdims=1) if opset >= 18 else
                 mk("ReduceMean", ["sq"], "ms", axes=[-1], keepdims=1))
    nodes += [mk("Add", ["ms", "eps"], "ve"), mk("Sqrt", ["ve"], "s")]
    if inverse == "div":
        nodes.append(mk("Div", [xf, "s"], "n"))
    else:
        nodes.append(mk("Reciprocal", ["s"], "r") if inverse == "reciprocal" else mk("Div", ["one", "s"], "r"))
        nodes.append(mk("Mul", [xf, "r"], "n"))
    if cast:
        steps = {"after": ["back", "weight"], "before": ["weight", "back"], None: ["back"]}[weight]
    else:
        steps = [] if weight is None else ["weight"]
    t = "n"
    for i, step in enumerate(steps):
        out = "y" if i == len(steps) - 1 else f"t{i}"
        if step == "back":
            nodes.append(mk("Cast", [t], out, to=H))
        else:
            w = (1 + 0.1 * rng.standard_normal(hidden))
            inits["w"] = w.astype(np.float16 if cast and weight == "after" else np.float32)
            nodes.append(mk("Mul", ["w", t], out))
        t = out
    if t != "y":
        nodes[-1].output[0] = "y"
    return nodes, inits


def fused(make_model, load, rows, hidden, **form):
    nodes, inits = written_out(hidden, **form)
    dt = H if form.get("cast") else F
    model = make_model(nodes, {"x": (dt, [1, rows, hidden])}, ["y"], inits, opset=form.get("opset", 17))
    g = infer_shapes(load(model))
    stats = {}
    fuse_rms_norm(g, stats=stats)
    return model, g, stats


def run_planned(g, x):
    """The fused node's kernel as the runtime runs it: planned (garbage-filled output, its workspace),
    then bound to the arrays and called twice."""
    (node,) = g.nodes
    ins = [x] + [g.initializers[i] for i in node.inputs[1:]]
    metas = [Meta(a.dtype, a.shape) for a in ins]
    consts = [None] + ins[1:]
    cls = lookup(node.op_type, node.domain, g.opset.get("", 17), node.name)
    (out,) = cls(node.attrs, metas, consts, opset=17, name=node.name).infer()
    k = cls(node.attrs, metas, consts, outputs=[out], opset=17, name=node.name).load()
    ws = np.zeros(k.workspace_nbytes(), np.uint8) if k.workspace_nbytes() else None
    y = np.full(out.shape, 77, out.dtype)
    k.run(ins, [y], ws)
    y2 = np.full(out.shape, 77, out.dtype)
    call = k.bound(ins, [y2], ws)
    call()
    call()
    np.testing.assert_array_equal(y2, y)
    return y


@pytest.fixture(params=["native", "numpy"])
def plan(request, default_backend):
    default_backend(request.param)
    return request.param


FORMS = [dict(), dict(square="mul", inverse="div"), dict(inverse="div1", weight=None), dict(opset=18),
         dict(cast=True), dict(cast=True, weight="before"), dict(cast=True, weight=None)]


@pytest.mark.parametrize("form", FORMS, ids=[str(f) for f in FORMS])
def test_exported_forms_become_one_node(make_model, load, run_ort, plan, form):
    model, g, stats = fused(make_model, load, 7, 100, **form)
    assert stats["fused"] == 1
    (node,) = g.nodes
    assert (node.op_type, node.domain, node.inputs[0], node.outputs) == ("RMSNormalization", GE_DOMAIN, "x", ["y"])
    assert node.attrs == {"axis": 2, "epsilon": pytest.approx(1e-6)}
    assert len(node.inputs) == (1 if form.get("weight", "after") is None else 2)
    x = (rng.standard_normal((1, 7, 100)) * 3 + 0.5).astype(np.float16 if form.get("cast") else np.float32)
    want = run_ort(model, {"x": x})[0]
    got = run_planned(g, x)
    assert got.dtype == want.dtype
    if form.get("cast"):  # one rounding to float16 where the export rounds before the weight's Mul too
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=1e-3)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rows,hidden,eps", [(1, 64, 1e-6), (7, 100, 1e-5), (128, 4096, 1e-6), (1, 4096, 0.5),
                                             (128, 100, 1e-6), (7, 17, 1e-3), (1, 1, 1e-6)])
def test_rows_and_tails_match_onnxruntime(make_model, load, run_ort, plan, rows, hidden, eps):
    model, g, stats = fused(make_model, load, rows, hidden, eps=eps)
    assert stats["fused"] == 1
    x = (rng.standard_normal((1, rows, hidden)) * 2).astype(np.float32)
    x[0, 0, :] *= 1e-3  # a row whose mean square is near eps
    np.testing.assert_allclose(run_planned(g, x), run_ort(model, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_zero_rows_stay_finite(make_model, load, plan):
    _, g, _ = fused(make_model, load, 3, 100)
    w = g.initializers[g.nodes[0].inputs[1]]
    assert np.array_equal(run_planned(g, np.zeros((1, 3, 100), np.float32)), np.zeros((1, 3, 100), np.float32) * w)


@pytest.mark.parametrize("change", ["cube", "square read elsewhere", "eps not constant", "axes not trailing"])
def test_near_misses_stay(make_model, load, change):
    nodes, inits = written_out(16)
    inputs, outputs = {"x": (F, [2, 4, 16])}, ["y"]
    if change == "cube":
        inits["two"] = np.array(3.0, np.float32)
    elif change == "square read elsewhere":
        nodes.append(mk("Neg", ["sq"], "z"))
        outputs.append("z")
    elif change == "eps not constant":
        inputs["eps"] = (F, [1])
        del inits["eps"]
    elif change == "axes not trailing":
        nodes[1] = mk("ReduceMean", ["sq"], "ms", axes=[1], keepdims=1)
    g = infer_shapes(load(make_model(nodes, inputs, outputs, inits)))
    stats = {}
    fuse_rms_norm(g, stats=stats)
    assert stats["fused"] == 0 and "Sqrt" in [n.op_type for n in g.nodes]


def test_a_bfloat16_cast_stays(make_model, load):
    """From bfloat16 (no type of the fused kernel) the Casts stay: the fused node reads float32."""
    nodes, inits = written_out(16, cast=True, weight=None)
    next(n for n in nodes if n.op_type == "Cast" and n.input[0] == "n").attribute[0].i = TensorProto.BFLOAT16
    g = infer_shapes(load(make_model(nodes, {"x": (TensorProto.BFLOAT16, [2, 4, 16])}, ["y"], inits)))
    stats = {}
    fuse_rms_norm(g, stats=stats)
    assert stats["fused"] == 1
    assert [(n.op_type, n.inputs[0]) for n in g.nodes] == [("Cast", "x"), ("RMSNormalization", "xf"), ("Cast", "n")]


@pytest.mark.parametrize("change", ["normalized read elsewhere", "no cast back"])
def test_partial_forms_keep_what_others_read(make_model, load, run_ort, run_ge, change):
    """The core fuses; the weight's Mul stays when the normalized value is read elsewhere too, and
    the Cast to float32 stays when nothing casts back (the fused node then reads float32)."""
    nodes, inits = written_out(16, cast=change == "no cast back", weight="before")
    inputs, outputs = {"x": (H if change == "no cast back" else F, [2, 4, 16])}, ["y"]
    if change == "normalized read elsewhere":
        nodes.append(mk("Neg", ["n"], "z"))
        outputs.append("z")
    else:
        nodes = [n for n in nodes if not (n.op_type == "Cast" and n.input[0] == "t0")]
        nodes[-1].output[0] = "y"
    model = make_model(nodes, inputs, outputs, inits)
    g = infer_shapes(load(model))
    stats = {}
    fuse_rms_norm(g, stats=stats)
    assert stats["fused"] == 1
    ops = [(n.op_type, n.domain) for n in g.nodes]
    if change == "normalized read elsewhere":
        assert ops == [("RMSNormalization", GE_DOMAIN), ("Mul", ""), ("Neg", "")]
    else:
        assert ops == [("Cast", ""), ("RMSNormalization", GE_DOMAIN)]
    x = rng.standard_normal((2, 4, 16)).astype(np.float16 if change == "no cast back" else np.float32)
    for got, want in zip(run_ge(g, {"x": x}), run_ort(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_llama_sample_decode_step(load, run_ort, run_ge):
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "samples", "build_samples.py")
    spec = importlib.util.spec_from_file_location("build_samples", path)
    samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(samples)
    model = samples.llama_style(seq=1, past=8, layers=1, hidden=64, heads=4, kv_heads=2, intermediate=96, vocab=50,
                                max_pos=16)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_rms_norm"]["fused"] == 3  # 2 per layer + the final norm
    assert not {"ReduceMean", "Sqrt", "Reciprocal", "Pow"} & {n.op_type for n in g.nodes}
    feeds = {"input_ids": np.array([[7]], np.int64)}
    for i in range(1):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal((1, 2, 8, 16)).astype(np.float32)
    for got, want in zip(run_ge(g, feeds), run_ort(model, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_an_unknown_input_is_left_alone(make_model, load):
    """A graph whose shapes inference could not settle (the dynamic path): x of unknown type and rank
    is no RMSNorm to fuse (numpy reads a None dtype as float64: it once passed the type check)."""
    nodes, inits = written_out(16)
    g = load(make_model(nodes, {"x": (F, [2, 4, 16])}, ["y"], inits))
    g.values["x"].dtype = g.values["x"].shape = None
    stats = {}
    fuse_rms_norm(g, stats=stats)
    assert stats["fused"] == 0 and "Sqrt" in [n.op_type for n in g.nodes]
