"""Every op accepts every dtype its ONNX schema allows for each of its type parameters (issue 19
item 1: T, T1, T2, Tind, ... — float16 and bfloat16 included), and the float16/bfloat16 instances
that run through their float32 kernels (core/kernels/float16.py) compute what onnxruntime computes in
float32 on the same values, rounded once.

KNOWN_GAPS lists today's refusals, each with its reason: a new refusal (a regression) or a gap
that closes (a fix: delete its line) turns test_refusals_are_the_known_gaps red."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx.reference import ReferenceEvaluator

from ge.core.kernels.float16 import BFLOAT16_VIA_FLOAT32, FLOAT32_ONLY, VIA_FLOAT32
from tests.core.kernels.dtype_audit import _first_case, audit, audited_ops, case_as, float_types, run_ge

_INTS = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool")
#: (op, type parameter, dtype) -> why ge refuses it today
KNOWN_GAPS = {
    **{("BitCast", "T1", t): "not a gap: the audited case bit-casts to int32 (its `to`); BitCast needs equal widths, "
                             "so a model pairing int32 with this type is invalid"
       for t in ("float16", "bfloat16", "float64", "int8", "int16", "int64", "uint8", "uint16", "uint64", "bool")},
    **{("GridSample", "T1", t): "integer X (allowed since opset 20) is refused: ge samples float X only, as "
                                "onnxruntime's CPU kernel (no GridSample implementation for it either)" for t in _INTS},
    **{("Resize", "T1", t): "linear and cubic (the audited case) interpolate float inputs only: the spec does not say "
                            "how an interpolated integer rounds, and onnx's reference (rounds, saturates) and "
                            "onnxruntime (truncates linear, fails on cubic) differ; nearest takes every type" for t in _INTS},
    ("QLinearMatMul", "TS", "bfloat16"): "bfloat16 scales (opset 21) are refused; the quantized kernels are being "
                                         "reworked on their own branch (issue 19 item 2)",
    **{("RMSNormalization", "T", t): "onnx disagrees with itself when X and scale differ in type: its schema types Y "
                                     "as V (scale's), its shape inference and reference as T (X's); ge follows the "
                                     "schema and refuses a model onnx's inference types otherwise (an export with X "
                                     "and scale of one type, as every one is, runs)"
       for t in ("float16", "bfloat16", "float64")},
}

NARROW = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
#: half an ulp of each type at 1.0 plus float32's own error: one rounding step apart at most
RTOL = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def test_refusals_are_the_known_gaps():
    refused = audit()
    new = {k: v for k, v in refused.items() if k not in KNOWN_GAPS}
    fixed = sorted(k for k in KNOWN_GAPS if k not in refused)
    assert not new, f"newly refused (regressions): {new}"
    assert not fixed, f"no longer refused (delete these from KNOWN_GAPS): {fixed}"


def test_the_audit_covers_the_float_ops():
    """The audit reaches the ops an fp16/bf16 export is made of (not an empty loop)."""
    ops = {op for _, op in audited_ops()}
    assert {"Add", "MatMul", "Conv", "Softmax", "LayerNormalization", "ReduceMean", "LSTM", "Gemm"} <= ops
    assert len(ops) > 120


def test_the_audit_covers_every_type_parameter():
    """Not only the first input's: indices, scales, depths, other operands (T1, T2, Tind, ...)."""
    from tests.core.kernels.dtype_audit import constraints
    assert set(constraints("Gather")) == {"T", "Tind"} and "int32" in str(constraints("Gather")["Tind"])
    assert set(constraints("OneHot")) == {"T1", "T2", "T3"}
    assert set(constraints("Resize")) >= {"T1", "T2"} and set(constraints("Slice")) == {"T", "Tind"}
    assert len(constraints("Where")["T"]) == 13  # every audited type: the floats, the integers, bool


@pytest.mark.parametrize("op,narrow_inputs,build", [
    ("BatchNormalization", (1, 2), lambda: ([np.ones((2, 3, 2), np.float32) * 1.7] + [np.full(3, v, np.float32) for v in
                                        (0.3, 0.1, 0.5, 2.0)], {"epsilon": 1e-5}, 15)),
    ("Pow", (1,), lambda: ([np.linspace(0.5, 2, 6, dtype=np.float32), np.float32(1.3) * np.ones(6, np.float32)], {}, 15)),
])
@pytest.mark.parametrize("narrow", ["float16", "bfloat16"])
def test_a_narrow_operand_leaves_a_float32_x_float32(op, narrow_inputs, build, narrow):
    """A float16/bfloat16 scale and bias (one type T1) or exponent next to a float32 X: the result has
    X's type (the schema's T), computed on the narrow operands' values, as onnx's reference computes it."""
    xs, attrs, opset = build()
    for k in narrow_inputs:
        xs[k] = xs[k].astype(NARROW[narrow])
    from onnx import helper
    names = [f"i{k}" for k in range(len(xs))]
    g = helper.make_graph([helper.make_node(op, names, ["y"], **attrs)], "m",
                          [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
                           for n, x in zip(names, xs)], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    got, = run_ge(model, xs)
    wide = [x.astype(np.float32) for x in xs]
    want = ReferenceEvaluator(model.SerializeToString()).run(None, dict(zip(names, wide)))[0] \
        if op != "BatchNormalization" else \
        (wide[0] - wide[3][:, None]) / np.sqrt(wide[4][:, None] + 1e-5) * wide[1][:, None] + wide[2][:, None]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
def test_einsum_of_narrow_integers_wraps_in_its_type(dtype):
    from onnx import helper
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    g = helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], equation="bij,bjk->bik")], "e",
                          [helper.make_tensor_value_info("a", elem, [2, 3, 4]),
                           helper.make_tensor_value_info("b", elem, [2, 4, 5])], [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 100, (2, 3, 4)).astype(dtype), rng.integers(0, 100, (2, 4, 5)).astype(dtype)
    got, = run_ge(model, [a, b])
    want = ReferenceEvaluator(model).run(None, {"a": a, "b": b})[0]
    assert got.dtype == dtype and (np.abs(want.astype(np.int64)) > np.iinfo(dtype).max).any() is not None
    np.testing.assert_array_equal(got, want)


def _via_float32_cases():
    adapted = VIA_FLOAT32 | FLOAT32_ONLY | BFLOAT16_VIA_FLOAT32
    cases = []
    for domain, op in audited_ops():
        if (domain, op) not in adapted or _first_case(op, domain) is None:
            continue
        for dtype in float_types(op, domain):
            if dtype == "bfloat16" or (dtype == "float16" and (domain, op) in FLOAT32_ONLY):
                cases.append(pytest.param(op, domain, dtype, id=f"{op}-{dtype}"))
    return cases


def _reference(model: onnx.ModelProto, inputs: list) -> list[np.ndarray]:
    """The float32 model's outputs: onnxruntime's, or the onnx reference's where onnxruntime lacks the op
    or the opset."""
    names = [vi.name for vi in model.graph.input]
    inputs = [np.asarray(x) for x in inputs]
    try:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception:  # (onnxruntime's load errors have no common type)
        return [np.asarray(y) for y in ReferenceEvaluator(model).run(None, dict(zip(names, inputs)))]
    return sess.run(None, dict(zip(names, inputs)))


@pytest.mark.parametrize("op,domain,dtype", _via_float32_cases())
def test_narrow_floats_match_float32_rounded_once(op, domain, dtype):
    """ge's float16/bfloat16 result == the float32 result on the same (representable) values, rounded
    to the narrow type: what onnxruntime and the onnx reference compute for these types."""
    narrow_model, narrow_inputs = case_as(op, domain, dtype)
    wide_model, wide_inputs = case_as(op, domain, "float32")
    # the float32 model is fed the narrow values, so both see the same numbers
    wide_inputs = [x.astype(np.float32) if isinstance(x, np.ndarray) and x.dtype == NARROW[dtype] else w
                   for x, w in zip(narrow_inputs, wide_inputs)]
    sums = ("", op) not in BFLOAT16_VIA_FLOAT32
    got = run_ge(narrow_model, narrow_inputs)
    expected = _reference(wide_model, wide_inputs)
    assert len(got) == len(expected)
    for y, e in zip(got, expected):
        e = np.asarray(e)
        if y.dtype == NARROW[dtype]:
            assert e.dtype == np.float32
            e = e.astype(NARROW[dtype])
            # a sum (matmul, transform, reduction) that cancels to ~0 is exact only to its terms' scale
            scale = float(np.nanmax(np.abs(e.astype(np.float32)), initial=1.0)) if sums else 1e-2
            np.testing.assert_allclose(y.astype(np.float32), e.astype(np.float32), rtol=RTOL[dtype],
                                       atol=RTOL[dtype] * scale, equal_nan=True)
        else:  # bool, int64 indices, a float32 statistic: the same type and values as in float32
            assert y.dtype == e.dtype
            np.testing.assert_allclose(y, e, rtol=1e-5, atol=1e-6, equal_nan=True)


def test_float64_layer_norm_statistics_have_the_stash_type():
    """LayerNormalization of float64 X: Y float64, Mean and InvStdDev float32 (stash_type 1), as onnxruntime."""
    model, inputs = case_as("LayerNormalization", "", "float64")
    g = model.graph
    node = g.node[0]
    assert len(node.output) == 3
    got = run_ge(model, inputs)
    expected = _reference(model, inputs)
    assert [y.dtype for y in got] == [np.float64, np.float32, np.float32]
    for y, e in zip(got, expected):
        assert y.dtype == e.dtype
        np.testing.assert_allclose(y, e, rtol=1e-5, atol=1e-6)


def test_grid_sample_grid_may_have_another_float_type():
    """GridSample's X (T1) and grid (T2) are separate constraints: float64 X sampled at a float32 grid
    gives what the float64 grid gives (onnxruntime's float64 model, grid values the same)."""
    model, inputs = case_as("GridSample", "", "float64")
    got = run_ge(model, inputs)
    same = [x.astype(np.float64) if isinstance(x, np.ndarray) else x for x in inputs]
    wide = onnx.ModelProto()
    wide.CopyFrom(model)
    for vi in wide.graph.input:
        vi.type.tensor_type.elem_type = onnx.TensorProto.DOUBLE
    assert inputs[1].dtype == np.float32 and got[0].dtype == np.float64
    np.testing.assert_allclose(got[0], _reference(wide, same)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale_const", [False, True], ids=["scale-input", "scale-constant"])
def test_bfloat16_quantize_and_dequantize(scale_const):
    """QuantizeLinear of bfloat16 x by a bfloat16 scale (rounded half to even, saturated), and
    DequantizeLinear back to bfloat16 (its scale's type): exact expectations, both through the OM."""
    from onnx import TensorProto, helper, numpy_helper
    bf16 = ml_dtypes.bfloat16
    x = np.array([-300.0, -3.0, -1.25, -0.75, 0.0, 0.25, 0.75, 1.25, 2.5, 260.0], bf16)
    scale = np.array(0.5, bf16)
    zp = np.array(-2, np.int8)
    inits = [numpy_helper.from_array(zp, "zp")] + ([numpy_helper.from_array(scale, "s")] if scale_const else [])
    inputs = [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [10])] + (
        [] if scale_const else [helper.make_tensor_value_info("s", TensorProto.BFLOAT16, [])])
    g = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"])], "q", inputs,
        [helper.make_tensor_value_info("q", TensorProto.INT8, [10]),
         helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [10])], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    q, y = run_ge(model, [x] if scale_const else [x, scale])
    # x / 0.5 = -600, -6, -2.5, -1.5, 0, 0.5, 1.5, 2.5, 5, 520: half to even, + zp, saturated to int8
    np.testing.assert_array_equal(q, np.array([-128, -8, -4, -4, -2, -2, 0, 0, 3, 127], np.int8))
    assert y.dtype == bf16
    np.testing.assert_array_equal(y.astype(np.float32), (q.astype(np.float32) + 2) * 0.5)


def test_bfloat16_bernoulli_draws_at_its_probabilities():
    """Bernoulli of bfloat16 probabilities 0 and 1 (the draws that are certain): bfloat16 zeros and ones."""
    from onnx import TensorProto, helper
    p = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]], ml_dtypes.bfloat16)
    g = helper.make_graph([helper.make_node("Bernoulli", ["p"], ["y"], seed=3.0)], "b",
                          [helper.make_tensor_value_info("p", TensorProto.BFLOAT16, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])])
    y, = run_ge(helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)]), [p])
    assert y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), p.astype(np.float32))


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_bfloat16_network_through_the_om(tmp_path, device):
    """A bfloat16 export (Conv with bfloat16 weights, Relu, x*sigmoid(x) that ge fuses, a residual Add,
    pooling, Softmax) compiles and runs on both devices, within a few bfloat16 roundings (each op
    rounds its result) of onnxruntime's float32 run of the same weights and inputs. Opset 22: Conv and the pools take
    bfloat16 since."""
    from onnx import TensorProto, helper, numpy_helper

    from ge.core import api
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(bf16)
    b = (rng.standard_normal(8) * 0.1).astype(bf16)
    x = rng.standard_normal((2, 4, 6, 6)).astype(bf16)
    x2 = rng.standard_normal((2, 8, 6, 6)).astype(bf16)

    def model(elem, dt):
        g = helper.make_graph([
            helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"]),
            helper.make_node("Mul", ["r", "s"], ["m"]), helper.make_node("Add", ["m", "x2"], ["a"]),
            helper.make_node("GlobalAveragePool", ["a"], ["p"]), helper.make_node("Flatten", ["p"], ["f"]),
            helper.make_node("Softmax", ["f"], ["y"])], "bf16",
            [helper.make_tensor_value_info("x", elem, [2, 4, 6, 6]), helper.make_tensor_value_info("x2", elem, [2, 8, 6, 6])],
            [helper.make_tensor_value_info("y", elem, [2, 8])],
            [numpy_helper.from_array(w.astype(dt), "w"), numpy_helper.from_array(b.astype(dt), "b")])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])

    path = str(tmp_path / "m.onnx")
    onnx.save(model(TensorProto.BFLOAT16, bf16), path)
    result = api.atc(path, str(tmp_path / "m"))
    model_id = api.load_from_file(result.om_path, device)
    try:
        y, = api.execute(model_id, [x, x2])
    finally:
        api.unload(model_id)
    expected = _reference(model(TensorProto.FLOAT, np.float32), [x.astype(np.float32), x2.astype(np.float32)])[0]
    assert y.dtype == bf16 and y.shape == (2, 8)
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=0, atol=4 * 2.0 ** -7 * np.abs(expected).max())


@pytest.mark.parametrize("op", ["LayerNormalization", "Gelu", "Swish", "HardSwish"])
def test_bfloat16_fused_ops_of_ges_domain(op):
    """ge's own fused ops on bfloat16: their float32 kernel's result on the same values, rounded once."""
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    bf16 = np.dtype(ml_dtypes.bfloat16)
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal((4, 16)).astype(bf16)]
    if op == "LayerNormalization":
        xs += [np.linspace(0.5, 1.5, 16).astype(bf16), np.linspace(-0.1, 0.1, 16).astype(bf16)]
    cls = lookup(op, "ge", 17)
    narrow = cls({}, [Meta(x.dtype, x.shape) for x in xs], opset=17)
    wide = cls({}, [Meta(np.dtype(np.float32), x.shape) for x in xs], opset=17)
    got = narrow.compute(*xs)[0]
    expected = wide.compute(*[x.astype(np.float32) for x in xs])[0].astype(bf16)
    assert got.dtype == bf16
    np.testing.assert_array_equal(got.astype(np.float32), expected.astype(np.float32))


def test_bfloat16_on_the_dynamic_path(tmp_path):
    """A dynamic batch (the hybrid executor builds kernels per shape): bfloat16 Add, Tanh and ReduceSum
    give the float32 evaluation rounded once per op, whatever the batch, shapes revisited included."""
    from onnx import TensorProto, helper

    from ge.core import api
    bf16 = ml_dtypes.bfloat16
    g = helper.make_graph([helper.make_node("Add", ["x", "x"], ["a"]), helper.make_node("Tanh", ["a"], ["t"]),
                           helper.make_node("ReduceSum", ["t"], ["y"], keepdims=0)], "dyn",
                          [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, ["N", 3])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    result = api.atc(path, str(tmp_path / "m"), input_shape="x:-1,3")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for n in (2, 5, 2, 7):
            x = np.linspace(-0.3, 1, n * 3).reshape(n, 3).astype(bf16)
            y, = api.execute(model_id, [x])
            t = np.tanh((x.astype(np.float32) * 2).astype(bf16).astype(np.float32)).astype(bf16)
            expected = np.float32(t.astype(np.float32).sum())
            assert y.dtype == bf16 and y.shape == ()
            np.testing.assert_allclose(np.float32(y), expected, rtol=2.0 ** -8)
    finally:
        api.unload(model_id)


def test_bfloat16_layer_norm_written_out_is_fused(tmp_path):
    """A bfloat16 export's written-out LayerNormalization (ReduceMean, Sub, Pow, ..., Add) is fused into
    ge's LayerNormalization as a float32 one is, and the result is onnxruntime's float32 run of the same
    values within a bfloat16 rounding or two (the fused op rounds once instead of per step)."""
    from onnx import TensorProto, helper, numpy_helper

    from ge.core import api
    bf16 = ml_dtypes.bfloat16

    def model(elem, dt):
        c = lambda name, v: numpy_helper.from_array(np.array(v, np.float32).astype(bf16).astype(dt), name)
        nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[-1]), helper.make_node("Sub", ["x", "m"], ["d"]),
                 helper.make_node("Pow", ["d", "two"], ["p"]), helper.make_node("ReduceMean", ["p"], ["v"], axes=[-1]),
                 helper.make_node("Add", ["v", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
                 helper.make_node("Div", ["d", "sd"], ["n"]), helper.make_node("Mul", ["n", "g"], ["ng"]),
                 helper.make_node("Add", ["ng", "b"], ["y"])]
        inits = [c("two", 2.0), c("eps", 1e-5), c("g", np.linspace(0.5, 1.5, 16)), c("b", np.linspace(-0.1, 0.1, 16))]
        g = helper.make_graph(nodes, "ln", [helper.make_tensor_value_info("x", elem, [4, 16])],
                              [helper.make_tensor_value_info("y", elem, [4, 16])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    path = str(tmp_path / "m.onnx")
    onnx.save(model(TensorProto.BFLOAT16, bf16), path)
    result = api.atc(path, str(tmp_path / "m"))
    tasks = [(t.get("op"), t.get("domain")) for t in api.inspect(result.om_path)["tasks"]]
    assert tasks == [("LayerNormalization", "ge")]
    x = np.random.default_rng(0).standard_normal((4, 16)).astype(bf16)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        y, = api.execute(model_id, [x])
    finally:
        api.unload(model_id)
    expected = _reference(model(TensorProto.FLOAT, np.float32), [x.astype(np.float32)])[0]
    assert y.dtype == bf16
    np.testing.assert_allclose(y.astype(np.float32), expected, rtol=2.0 ** -7, atol=2.0 ** -9)
