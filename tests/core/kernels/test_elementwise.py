import math
import tracemalloc

import numpy as np
import onnxruntime.capi.onnxruntime_pybind11_state as ort_state
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)

F16, F32, F64 = np.float16, np.float32, np.float64
SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]

# (shape_a, shape_b): same, trailing, size-1 dims both sides, different ranks, rank 0, empty
BROADCASTS = [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5)), ((3, 1), (2, 1, 4)),
              ((), (2, 3)), ((2, 3), ()), ((), ()), ((1,), (3, 1)), ((0, 3), (1, 3)), ((2, 1, 3), (2, 0, 1))]


def tol(dtype):
    return dict(rtol=2e-3, atol=2e-3) if np.dtype(dtype) == np.float16 else dict(rtol=1e-5, atol=1e-6)


def randn(shape, dtype=F32, scale=2.0):
    return np.asarray(rng.standard_normal(shape) * scale).astype(dtype)


def randint(shape, dtype, lo=-20, hi=20):
    if np.dtype(dtype).kind == "i" or np.dtype(dtype).kind == "u":
        info = np.iinfo(dtype)
        lo, hi = max(lo, info.min), min(hi, info.max)
    return np.asarray(rng.integers(lo, hi, size=shape, endpoint=True)).astype(dtype)


ORT_MISSING = (ort_state.NotImplemented, ort_state.InvalidGraph)


def check_or_ref(check_op, op, inputs, attrs=None, opset=17, ref=None, **tolerance):
    """check_op; where onnxruntime has no kernel for the dtype (or the spec not the dtype, and ge
    accepts it anyway), the planned and reference paths against `ref` (numpy, float64)."""
    try:
        return check_op(op, inputs, attrs, opset=opset, **tolerance)
    except ORT_MISSING:
        if ref is None:
            raise
    arrays = list(inputs.values())
    ys = run_planned(op, arrays, attrs, opset)
    want = ref(*[None if a is None else (a.astype(F64) if a.dtype.kind == "f" else a) for a in arrays])
    want = [want] if not isinstance(want, (list, tuple)) else want
    for got, w in zip(ys, want):
        w = np.asarray(w)
        if got.dtype.kind == "f":
            np.testing.assert_allclose(got.astype(F64), w, **tolerance)
        else:
            np.testing.assert_array_equal(got, w.astype(got.dtype))
    return ys


def kernel(op, arrays, attrs=None, opset=17, consts=None):
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    return lookup(op, opset=opset)(attrs or {}, metas, consts or [], opset=opset, name="n0")


def run_planned(op, arrays, attrs=None, opset=17):
    """The planned path alone (for cases onnxruntime has no kernel for)."""
    k = kernel(op, arrays, attrs, opset)
    ys = [np.full(m.shape, 77, m.dtype) for m in k.infer()]
    n = k.workspace_nbytes()
    with np.errstate(all="ignore"):  # as the runtime runs kernels
        k.run(arrays, ys, np.zeros(n, np.uint8) if n else None)
    got = k.compute(*arrays)
    for a, b in zip(ys, got):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return ys


def test_relu(check_op):
    check_op("Relu", {"x": rng.standard_normal((2, 3, 4)).astype(np.float32)})


@pytest.mark.parametrize("dtype", [F16, F32, F64, np.int8, np.int32, np.int64])
def test_relu_dtypes(check_op, dtype):
    x = randn((3, 5), F32).astype(dtype) if np.dtype(dtype).kind == "f" else randint((3, 5), dtype)
    check_or_ref(check_op, "Relu", {"x": x}, opset=14, ref=lambda x: np.maximum(x, 0))


@pytest.mark.parametrize("shape_a,shape_b", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 3, 1), (2, 1, 5))])
def test_add_broadcasts(check_op, shape_a, shape_b):
    check_op("Add", {"a": rng.standard_normal(shape_a).astype(np.float32),
                     "b": rng.standard_normal(shape_b).astype(np.float32)})


def test_unknown_op_names_node_and_op():
    from ge.core.model.errors import UnsupportedOpError
    with pytest.raises(UnsupportedOpError, match="node 'n7': op FancyOp is not supported"):
        lookup("FancyOp", node="n7")


# ----------------------------------------------------------------------------------------------
# float unary ops
# ----------------------------------------------------------------------------------------------
def _data(kind, shape, dtype):
    if kind == "pos":
        x = rng.uniform(0.05, 5.0, shape)
    elif kind == "unit":
        x = rng.uniform(-0.99, 0.99, shape)
    elif kind == "ge1":
        x = rng.uniform(1.0, 5.0, shape)
    elif kind == "wide":  # includes the saturated tails
        x = np.asarray(rng.standard_normal(shape) * 6)
        x.flat[:6] = [0.0, -0.0, 40.0, -40.0, 100.0, -100.0][:x.size]
    elif kind == "round":
        x = np.round(rng.standard_normal(shape) * 8) / 2  # many exact halves
    else:
        x = rng.standard_normal(shape) * 3
    return np.asarray(x).astype(dtype)


# op, attrs, data kind, opset, float64 numpy reference
_erf = np.vectorize(math.erf, otypes=[F64])
SELU_ALPHA, SELU_GAMMA = 1.67326319217681884765625, 1.05070102214813232421875
UNARY = [
    ("Sigmoid", {}, "wide", 17, lambda x: 1 / (1 + np.exp(-x))),
    ("Tanh", {}, "wide", 17, np.tanh),
    ("Exp", {}, "", 17, np.exp),
    ("Log", {}, "pos", 17, np.log),
    ("Sqrt", {}, "pos", 17, np.sqrt),
    ("Reciprocal", {}, "pos", 17, lambda x: 1 / x),
    ("Neg", {}, "", 17, np.negative),
    ("Abs", {}, "", 17, np.abs),
    ("Floor", {}, "round", 17, np.floor),
    ("Ceil", {}, "round", 17, np.ceil),
    ("Round", {}, "round", 17, np.round),
    ("Sign", {}, "round", 17, np.sign),
    ("Sin", {}, "", 17, np.sin),
    ("Cos", {}, "", 17, np.cos),
    ("Tan", {}, "unit", 17, np.tan),
    ("Asin", {}, "unit", 17, np.arcsin),
    ("Acos", {}, "unit", 17, np.arccos),
    ("Atan", {}, "", 17, np.arctan),
    ("Sinh", {}, "", 17, np.sinh),
    ("Cosh", {}, "", 17, np.cosh),
    ("Asinh", {}, "", 17, np.arcsinh),
    ("Acosh", {}, "ge1", 17, np.arccosh),
    ("Atanh", {}, "unit", 17, np.arctanh),
    ("Erf", {}, "wide", 17, _erf),
    ("LeakyRelu", {}, "", 17, lambda x: np.where(x >= 0, x, 0.01 * x)),
    ("LeakyRelu", {"alpha": 0.3}, "", 17, lambda x: np.where(x >= 0, x, 0.3 * x)),
    ("LeakyRelu", {"alpha": 2.5}, "", 17, lambda x: np.where(x >= 0, x, 2.5 * x)),
    ("LeakyRelu", {"alpha": -0.5}, "", 17, lambda x: np.where(x >= 0, x, -0.5 * x)),
    ("HardSigmoid", {}, "", 17, lambda x: np.clip(0.2 * x + 0.5, 0, 1)),
    ("HardSigmoid", {"alpha": 0.5, "beta": 0.1}, "", 17, lambda x: np.clip(0.5 * x + 0.1, 0, 1)),
    ("HardSwish", {}, "", 17, lambda x: x * np.clip(x / 6 + 0.5, 0, 1)),
    ("Softplus", {}, "wide", 17, lambda x: np.logaddexp(x, 0)),
    ("Softsign", {}, "", 17, lambda x: x / (1 + np.abs(x))),
    ("Elu", {}, "", 17, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    ("Elu", {"alpha": 2.0}, "", 17, lambda x: np.where(x > 0, x, 2 * np.expm1(np.minimum(x, 0)))),
    ("Selu", {}, "", 17, lambda x: SELU_GAMMA * np.where(x > 0, x, SELU_ALPHA * np.expm1(np.minimum(x, 0)))),
    ("Selu", {"alpha": 2.0, "gamma": 3.0}, "", 17, lambda x: 3 * np.where(x > 0, x, 2 * np.expm1(np.minimum(x, 0)))),
    ("Celu", {}, "", 17, lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(x))),
    ("Celu", {"alpha": 0.5}, "", 17, lambda x: np.maximum(x, 0) + np.minimum(0, 0.5 * np.expm1(x / 0.5))),
    ("ThresholdedRelu", {}, "", 17, lambda x: np.where(x > 1, x, 0)),
    ("ThresholdedRelu", {"alpha": -0.5}, "", 17, lambda x: np.where(x > -0.5, x, 0)),
    ("Mish", {}, "wide", 18, lambda x: x * np.tanh(np.logaddexp(x, 0))),
    ("Gelu", {}, "wide", 20, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    ("Gelu", {"approximate": "none"}, "", 20, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2)))),
    ("Gelu", {"approximate": "tanh"}, "wide", 20,
     lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
]
UNARY_IDS = [f"{op}-{'-'.join(f'{k}={v}' for k, v in a.items())}" for op, a, *_ in UNARY]


def half_reference(ref, x) -> list[np.ndarray]:
    """A float16 op's expected output: its float64 reference `ref` rounded to float16."""
    return [ref(x.astype(F64)).astype(F16)]


def default_reference(op):
    """UNARY's float64 reference of `op` with its default attributes."""
    return next(ref for name, attrs, _, _, ref in UNARY if name == op and not attrs)


@pytest.mark.parametrize("op,attrs,kind,opset,ref", UNARY, ids=UNARY_IDS)
@pytest.mark.parametrize("shape", [(2, 3, 17), (), (0, 4)])
@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_float_unary(check_op, op, attrs, kind, opset, ref, shape, dtype):
    x = _data(kind, shape, dtype)
    if op == "Celu" and dtype != F32:
        opset = 28  # Celu takes float16 and float64 since opset 28 (onnxruntime has none: the reference)
    if dtype == F16 and op in ("Sinh", "Cosh", "Exp"):
        x = np.asarray(np.clip(x, -8, 8))
    t = tol(dtype)
    if op in ("Sigmoid", "Tanh", "Erf", "Gelu", "Mish") and dtype == F32:
        t = dict(rtol=1e-5, atol=2e-6)  # onnxruntime's MLAS approximations
    # without an onnxruntime kernel for the dtype: against the float64 reference (tightly for float64)
    ref_t = dict(rtol=1e-12, atol=1e-14) if dtype == F64 else t
    # float16: the float64 reference rounded, not onnxruntime, whose float16 kernels depend on the CPU:
    # with half-precision arithmetic (aarch64) some compute in float16 (Mish's log(1 + exp(x)) is 0 below
    # x = -7.6, where the result is -x exp(x): off by 100%)
    expected = half_reference(ref, x) if dtype == F16 else None
    try:
        check_op(op, {"x": x}, attrs, opset=opset, expected=expected, **t)
        return
    except ORT_MISSING:
        pass
    (y,) = run_planned(op, [x], attrs, opset)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y.astype(F64), ref(x.astype(F64)), **ref_t)


@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_sigmoid_is_stable_in_the_tails(dtype):
    x = np.array([-1e4, -800, -100, -88.5, -30, 0, 30, 100, 800, 1e4, np.inf, -np.inf], dtype)
    with np.errstate(all="raise"):  # no overflow reaches the user
        (y,) = run_planned("Sigmoid", [x])
    ref = 1 / (1 + np.exp(-x.astype(np.longdouble)))
    np.testing.assert_allclose(y.astype(np.float64), ref.astype(np.float64), rtol=2e-3 if dtype == F16 else 1e-6,
                               atol=1e-7 if dtype == F16 else 1e-30)
    assert 0 <= float(y[-1]) < 1e-37 and y[-2] == 1 and np.isnan(run_planned("Sigmoid", [np.array([np.nan], dtype)])[0][0])


def test_sigmoid_dense_grid():
    """float32 over its whole range (the native kernel where it runs, numpy's formula on GE_NO_NATIVE=1),
    in place too (as a fused epilogue applies it): within 1e-6 of the float64 sigmoid, relatively."""
    x = np.concatenate([np.linspace(-90, 90, 200001), np.logspace(-30, 1.9, 4001), -np.logspace(-30, 1.9, 4001)]).astype(F32)
    ref = 1 / (1 + np.exp(-x.astype(F64)))
    (y,) = run_planned("Sigmoid", [x])
    normal = ref > np.finfo(F32).tiny
    assert (np.abs(y - ref)[normal] / ref[normal]).max() < 1e-6 and np.abs(y - ref).max() < 1e-7
    k = kernel("Sigmoid", [x])
    inplace = x.copy()
    k.run([inplace], [inplace], Scratch_for(k))
    np.testing.assert_array_equal(inplace, y)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_erf_dense_grid(dtype):
    from ge.core.kernels.ops.erf import erf
    x = np.concatenate([np.linspace(-7, 7, 300001), np.logspace(-30, 1, 4001), -np.logspace(-30, 1, 4001)]).astype(dtype)
    ref = np.array([math.erf(float(v)) for v in x])
    got = erf(x)
    assert got.dtype == dtype
    err = np.abs(got - ref)
    if dtype == F32:
        assert err.max() < 1.5e-7
        tiny = (np.abs(x) < 1) & (x != 0)
        assert (err[tiny] / np.abs(ref[tiny])).max() < 4e-7  # relative accuracy near 0
    else:
        assert err.max() < 2e-15
        small = (np.abs(x) < 1) & (x != 0)
        assert (err[small] / np.abs(ref[small])).max() < 4e-15
    specials = erf(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e30], dtype))
    assert np.isnan(specials[0]) and list(specials[1:]) == [1, -1, 0, 0, 1, -1]
    assert np.signbit(specials[4]) and not np.signbit(specials[3])


@pytest.mark.parametrize("dtype", [F32, F16])
def test_erf_against_onnxruntime_grid(check_op, dtype):
    x = np.linspace(-5, 5, 20001).astype(dtype)
    if dtype == F16:  # (onnxruntime's float16 Erf depends on the CPU: see test_float_unary)
        check_op("Erf", {"x": x}, expected=half_reference(_erf, x), **tol(dtype))
    else:
        check_op("Erf", {"x": x}, rtol=0, atol=3e-7)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_erf_of_integers(dtype):
    """Erf-9 takes integers (opset 13 dropped them)."""
    x = np.array([0, 1, 3, 7, 100], dtype)
    (y,) = run_planned("Erf", [x], opset=9)
    assert y.dtype == dtype and list(y) == [0, 0, 0, 1, 1]  # erf(x) truncated toward zero


@pytest.mark.parametrize("op,opset", [("Erf", 17), ("Gelu", 20), ("Sigmoid", 17), ("Softplus", 17), ("Selu", 17)])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_float_formulas_across_blocks(check_op, op, opset, dtype):
    """More elements than one scratch block, and not a multiple of it."""
    x = randn((3, lookup(op, opset=opset).CHUNK // 2 + 7), dtype)
    if dtype == F16:  # (onnxruntime's float16 kernels depend on the CPU: see test_float_unary)
        check_op(op, {"x": x}, opset=opset, expected=half_reference(default_reference(op), x), **tol(dtype))
    else:
        check_op(op, {"x": x}, opset=opset, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("op,opset", [("Erf", 17), ("Gelu", 20), ("HardSwish", 17)])
def test_float_formulas_on_strided_views(op, opset):
    base = randn((300, 200))
    x = base.T[::2]  # neither C-contiguous nor dense
    k = kernel(op, [x], opset=opset)
    y = np.full(x.shape, 77, F32)
    k.run([x], [y], Scratch_for(k))
    want = k.compute(np.ascontiguousarray(x))[0]
    np.testing.assert_array_equal(y, want)
    y_t = np.full(x.shape[::-1], 77, F32).T  # a non-contiguous output as well
    k.run([x], [y_t], Scratch_for(k))
    np.testing.assert_array_equal(y_t, want)


def Scratch_for(k):
    n = k.workspace_nbytes()
    return np.zeros(n + 64, np.uint8)[64:] if n else None  # an offset (still aligned) view


def test_gelu_rejects_unknown_approximation():
    x = np.zeros(3, F32)
    with pytest.raises(GraphError, match="approximate"):
        kernel("Gelu", [x], {"approximate": "fast"}, opset=20)
    assert kernel("Gelu", [x], {"approximate": b"tanh"}, opset=20).approximate == "tanh"


def test_gelu_needs_opset_20():
    from ge.core.model.errors import UnsupportedOpError
    with pytest.raises(UnsupportedOpError, match="at opset 17"):
        lookup("Gelu", opset=17)


@pytest.mark.parametrize("dtype", [F32, F64, F16])
def test_fused_gelu_at_any_opset(dtype):
    """ge's domain has the Gelu that passes.fuse_gelu puts in place of the exported erf formula."""
    from ge.core.kernels.fused import GE_DOMAIN
    x = _data("wide", (4, 300), dtype)
    fused = lookup("Gelu", GE_DOMAIN, 1)({}, [Meta(x.dtype, x.shape)], [None], opset=1)
    want = lookup("Gelu", opset=20)({}, [Meta(x.dtype, x.shape)], [None], opset=20).compute(x)[0]
    np.testing.assert_array_equal(fused.compute(x)[0], want)


def test_gelu_float32_dense_grid():
    """Within 4e-7 of 0.5 x (1 + erf(x / sqrt 2)), relative above 1 (a rounding or two of the
    result); x itself beyond 5.7 (up to the float max: no overflow); signed zeros and NaN."""
    x = np.concatenate([np.linspace(-9, 9, 360001), np.logspace(-30, 38.5, 2001)]).astype(F32)
    (y,) = run_planned("Gelu", [x], opset=20)
    ref = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(F64)])
    assert (np.abs(y - ref) / np.maximum(np.abs(ref), 1)).max() < 4e-7
    small = (np.abs(x) < 1e-3) & (x != 0)
    assert (np.abs(y - ref)[small] / np.abs(ref[small])).max() < 2e-7
    assert np.array_equal(y[x > 5.7], x[x > 5.7])
    (s,) = run_planned("Gelu", [np.array([0.0, -0.0, np.nan, np.inf], F32)], opset=20)
    assert list(s[[0, 1, 3]]) == [0, 0, np.inf] and np.isnan(s[2]) and np.signbit(s[1])


def test_gelu_tanh_float32_dense_grid():
    """approximate="tanh" as x / (1 + exp(-2 z)): within 4e-7 of 0.5 x (1 + tanh(z)) (float64), relative
    above 1; x itself beyond 5.5, -0 far below zero (exp overflows there), inf and NaN as they come."""
    x = np.concatenate([np.linspace(-12, 12, 240001), np.logspace(-30, 38.5, 2001)]).astype(F32)
    x = np.concatenate([x, -x])
    (y,) = run_planned("Gelu", [x], {"approximate": "tanh"}, 20)
    v = x.astype(F64)
    with np.errstate(over="ignore"):
        ref = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    assert (np.abs(y - ref) / np.maximum(np.abs(ref), 1)).max() < 4e-7
    assert np.array_equal(y[x > 5.5], x[x > 5.5]) and np.all(y[x < -12] == 0)
    (s,) = run_planned("Gelu", [np.array([0.0, -0.0, np.nan, np.inf, -50.0], F32)], {"approximate": "tanh"}, 20)
    assert list(s[[0, 1, 3, 4]]) == [0, 0, np.inf, 0] and np.isnan(s[2]) and np.signbit(s[1]) and np.signbit(s[4])


def test_float_ops_reject_ints():
    with pytest.raises(GraphError, match="int32"):
        kernel("Sigmoid", [np.zeros(3, np.int32)])


# ----------------------------------------------------------------------------------------------
# the planned path: no per-run allocation, workspace only as declared
# ----------------------------------------------------------------------------------------------
NO_ALLOC = [("Sigmoid", {}, 17), ("HardSwish", {}, 14), ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
            ("Erf", {}, 17), ("Softplus", {}, 17), ("Elu", {}, 17), ("Selu", {}, 17), ("LeakyRelu", {}, 17),
            ("HardSigmoid", {}, 17), ("Mish", {}, 18), ("Tanh", {}, 17), ("Relu", {}, 17), ("Clip", {}, 6)]


@pytest.mark.parametrize("op,attrs,opset", NO_ALLOC, ids=[f"{o}-{a}" for o, a, _ in NO_ALLOC])
@pytest.mark.parametrize("dtype", [F32, F64])
def test_run_does_not_allocate(op, attrs, opset, dtype):
    x = randn((256, 1024), dtype)
    k = kernel(op, [x], attrs, opset)
    y = np.empty_like(x)
    n = k.workspace_nbytes()
    ws = np.zeros(n, np.uint8) if n else None
    k.run([x], [y], ws)  # warm up
    tracemalloc.start()
    k.run([x], [y], ws)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < x.nbytes // 16, f"run() allocated {peak} bytes"


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "PRelu"])
def test_binary_run_does_not_allocate(op):
    a, b = randn((256, 1024)), np.abs(randn((1024,))) + 0.5
    k = kernel(op, [a, b])
    y = np.empty_like(a)
    n = k.workspace_nbytes()
    ws = np.zeros(n, np.uint8) if n else None
    with np.errstate(all="ignore"):  # as the runtime runs kernels
        k.run([a, b], [y], ws)
        tracemalloc.start()
        k.run([a, b], [y], ws)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < a.nbytes // 16, f"run() allocated {peak} bytes"


# ----------------------------------------------------------------------------------------------
# binary arithmetic
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shape_a,shape_b", BROADCASTS)
def test_arith_broadcasts(check_op, op, shape_a, shape_b):
    b = randn(shape_b)
    if op == "Div":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(F32)
    check_op(op, {"a": randn(shape_a), "b": b})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [F16, F64] + SIGNED + UNSIGNED)
def test_arith_dtypes(check_op, op, dtype):
    shape_a, shape_b = (3, 4, 5), (4, 1)
    if np.dtype(dtype).kind == "f":
        a, b = randn(shape_a, dtype), randn(shape_b, dtype)
        if op == "Div":
            b = np.where(np.abs(b) < 0.1, 1, b).astype(dtype)
    else:
        lo = 0 if np.dtype(dtype).kind == "u" else -100
        a, b = randint(shape_a, dtype, lo, 100), randint(shape_b, dtype, lo, 100)
        if op == "Div":
            b = np.where(b == 0, 3, b).astype(dtype)
    check_op(op, {"a": a, "b": b}, opset=14, **tol(dtype))


@pytest.mark.parametrize("dtype", SIGNED)
def test_integer_div_truncates_toward_zero(check_op, dtype):
    a = np.array([7, -7, 7, -7, 0, 6, -6, 1, -1, 127, -128], dtype)
    b = np.array([2, 2, -2, -2, 3, 3, -3, 5, 5, 2, 3], dtype)
    y = check_op("Div", {"a": a, "b": b}, opset=14)[0]
    assert list(y) == [3, -3, -3, 3, 0, 2, 2, 0, 0, 63, -42]


def test_integer_div_extremes():
    a = np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, -9007199254740993], np.int64)
    b = np.array([7, -3, 2], np.int64)
    (y,) = run_planned("Div", [a, b])
    trunc = [(abs(p) // abs(q)) * (1 if (p < 0) == (q < 0) else -1) for p, q in zip(a.tolist(), b.tolist())]
    assert y.tolist() == trunc


@pytest.mark.parametrize("fmod,dtype", [(0, np.int32), (0, np.int64), (1, np.int32), (1, F32), (1, F64), (0, np.uint8)])
def test_mod(check_op, fmod, dtype):
    if np.dtype(dtype).kind == "f":
        a, b = randn((3, 4), dtype), randn((4,), dtype)
    else:
        a, b = randint((3, 4), dtype), randint((4,), dtype)
        b = np.where(b == 0, 3, b).astype(dtype)
    check_op("Mod", {"a": a, "b": b}, {"fmod": fmod}, opset=13)


def test_mod_attribute_errors():
    with pytest.raises(GraphError, match="fmod=0"):
        kernel("Mod", [np.zeros(2, F32), np.ones(2, F32)])
    with pytest.raises(GraphError, match="fmod must be 0 or 1"):
        kernel("Mod", [np.zeros(2, np.int32), np.ones(2, np.int32)], {"fmod": 2})


POW_TYPES = [(F32, F32), (F32, np.int64), (F32, np.int32), (F32, F64), (F64, F32), (F64, F64), (F16, F16),
             (F16, np.int64), (np.int32, F32), (np.int64, np.int64), (np.int64, np.int32), (np.int32, np.int32),
             (np.int64, F16), (np.int64, F64)]


@pytest.mark.parametrize("tb,te", POW_TYPES, ids=[f"{np.dtype(a).name}^{np.dtype(b).name}" for a, b in POW_TYPES])
@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (3, 4)), ((3, 4), ()), ((2, 1, 4), (3, 1))])
def test_pow(check_op, tb, te, shape_a, shape_b):
    if np.dtype(tb).kind == "f":
        base = np.abs(randn(shape_a, tb)) + np.asarray(0.1, tb)
        base.flat[:2] = [-2, -0.5][:base.size]
    else:
        base = randint(shape_a, tb, -6, 6)
    if np.dtype(te).kind == "f":
        ex = rng.choice([-1.5, -1, 0, 0.5, 1, 2, 3, 2.5], size=shape_b).astype(te)
    else:
        ex = rng.choice([0, 1, 2, 3], size=shape_b).astype(te)
    if np.dtype(tb).kind == "i" and np.dtype(te).kind == "i":
        ex = np.asarray(ex)
    if np.dtype(tb).kind == "i" and np.dtype(te).kind == "f":
        base = _defined_integer_powers(base, ex)
    check_op("Pow", {"a": base, "b": ex}, opset=15, **tol(tb if tb == F16 else te))


def _defined_integer_powers(base, ex):
    """`base` with 1 for the bases some power of which is NaN or infinite (a negative base to a fractional
    exponent, zero to a negative one): an integer has no such value, C's cast of it is undefined, and
    onnxruntime's result there is the CPU's (x86 gives INT_MIN, aarch64 saturates, NaN to 0)."""
    with np.errstate(all="ignore"):
        undefined = ~np.isfinite(np.power(base.astype(np.float64), ex.astype(np.float64)))
    undefined = undefined.any(axis=tuple(range(undefined.ndim - base.ndim)))  # back to base's shape
    undefined = undefined.any(axis=tuple(i for i, n in enumerate(base.shape) if n == 1), keepdims=True)
    return np.where(undefined, 1, base).astype(base.dtype)


def test_pow_integer_negative_exponent_truncates(check_op):
    check_op("Pow", {"a": np.array([2, -2, 1, -1, 5], np.int64), "b": np.array([-1, -1, -3, -3, 2], np.int64)}, opset=15)


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("n", [3.0, 2.0, 4.0, 1.0, 0.0, -1.0, -3.0, 7.0])
def test_pow_constant_integral_exponent_is_numpys_pow_within_an_ulp(check_op, dtype, n):
    """The sign trick for negative bases: numpy's own pow is an ulp apart between x and -x (its vector
    and scalar paths), specials (signed zeros, infinities, NaN) are the same."""
    base = randn((4, 37), dtype) * 3
    base.flat[:9] = [-0.0, 0.0, -np.inf, np.inf, np.nan, -1e-30, -1e30, -1, 1]
    ex = np.asarray(n, dtype)
    check_op("Pow", {"a": base, "b": ex}, opset=15, consts=("b",))
    k = kernel("Pow", [base, ex], consts=(None, ex))
    assert k.integral is not None
    with np.errstate(all="ignore"):
        got, want = k.compute(base, ex)[0], np.power(base, ex)
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special].view(f"u{base.itemsize}"), want[special].view(f"u{base.itemsize}"))
    np.testing.assert_array_max_ulp(got[~special], want[~special], maxulp=1)


@pytest.mark.parametrize("shape_a,shape_b", BROADCASTS)
def test_pow_broadcasts(check_op, shape_a, shape_b):
    check_op("Pow", {"a": np.asarray(np.abs(randn(shape_a)) + np.float32(0.5)), "b": randn(shape_b)}, opset=15)


@pytest.mark.parametrize("dtype", SIGNED + [F16, F64])
def test_neg_abs_sign_ints(check_op, dtype):
    x = randint((4, 5), dtype) if np.dtype(dtype).kind == "i" else _data("round", (4, 5), dtype)
    for op in ("Neg", "Abs", "Sign"):
        check_op(op, {"x": x}, opset=13)


@pytest.mark.parametrize("dtype", UNSIGNED)
def test_abs_sign_unsigned(check_op, dtype):
    x = randint((4, 5), dtype, 0, 200)
    check_op("Abs", {"x": x}, opset=13)
    check_op("Sign", {"x": x}, opset=13)


def test_neg_rejects_unsigned():
    with pytest.raises(GraphError, match="uint8"):
        kernel("Neg", [np.zeros(2, np.uint8)])


def test_binary_type_and_shape_errors():
    with pytest.raises(GraphError, match="takes 2 inputs, got 1"):
        kernel("Add", [np.zeros(2, F32)])
    with pytest.raises(GraphError, match="takes 1 to 3 inputs, got 4"):
        kernel("Clip", [np.zeros(2, F32)] * 4, opset=13)
    with pytest.raises(GraphError, match="takes at least 1 inputs, got 0"):
        kernel("Max", [])
    with pytest.raises(GraphError, match="input 1 'B' is float64 and input 0 'A' is float32; Add-14 takes one type T"):
        kernel("Add", [np.zeros(2, F32), np.zeros(2, F64)])
    with pytest.raises(GraphError, match=r"\(2, 3\), \(4,\) do not broadcast"):
        kernel("Mul", [np.zeros((2, 3), F32), np.zeros(4, F32)])
    with pytest.raises(GraphError, match="takes bool"):
        kernel("And", [np.zeros(2, F32), np.zeros(2, F32)])
    with pytest.raises(GraphError, match="node 'n0' \\(Where\\): input 0 'condition' is float32; Where-16 takes bool"):
        kernel("Where", [np.zeros(2, F32), np.zeros(2, F32), np.zeros(2, F32)])


# ----------------------------------------------------------------------------------------------
# PRelu
# ----------------------------------------------------------------------------------------------
PRELU_SHAPES = [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4, 5), (5,)), ((2, 3, 4, 5), (1,)), ((2, 3, 4, 5), ()),
                ((2, 3, 4, 5), (4, 5)), ((2, 3, 4, 5), (2, 3, 4, 5)), ((3,), (3,)), ((1, 3, 2), (3, 1))]


@pytest.mark.parametrize("shape_x,shape_s", PRELU_SHAPES)
@pytest.mark.parametrize("slope", ["small", "big", "mixed"])
@pytest.mark.parametrize("const", [True, False])
def test_prelu(check_op, shape_x, shape_s, slope, const):
    s = {"small": rng.uniform(-0.5, 1.0, shape_s), "big": rng.uniform(1.5, 3, shape_s),
         "mixed": rng.uniform(-2, 3, shape_s)}[slope].astype(F32)
    check_op("PRelu", {"x": randn(shape_x), "slope": s}, consts=("slope",) if const else ())


@pytest.mark.parametrize("dtype", [F16, F64, np.int32, np.int64])
def test_prelu_dtypes(check_op, dtype):
    if np.dtype(dtype).kind == "f":
        x, s = randn((2, 3, 4), dtype), rng.uniform(-1, 2, (3, 1)).astype(dtype)
    else:
        x, s = randint((2, 3, 4), dtype), randint((3, 1), dtype, -3, 3)
    if dtype == F64:  # no float64 PRelu in onnxruntime
        (y,) = run_planned("PRelu", [x, s], opset=16)
        np.testing.assert_allclose(y, np.where(x >= 0, x, x * s))
        return
    check_op("PRelu", {"x": x, "slope": s}, opset=16, **tol(dtype))


def test_prelu_per_channel_1d_slope():
    """A (C,) slope with an NCHW input (not broadcastable as such) applies per channel."""
    x, s = randn((2, 3, 4, 5)), np.array([0.1, 0.5, 2.0], F32)
    (y,) = run_planned("PRelu", [x, s])
    np.testing.assert_allclose(y, np.where(x >= 0, x, x * s.reshape(3, 1, 1)))
    k = kernel("PRelu", [x, s], consts=[None, s])
    assert k.infer()[0].shape == (2, 3, 4, 5)


# ----------------------------------------------------------------------------------------------
# Clip
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("opset", [11, 12, 13])
@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (None, 0.5), (-0.5, None), (None, None), (1.0, -1.0), (0.0, 0.0)])
@pytest.mark.parametrize("how", ["absent", "const"])
def test_clip_inputs(check_op, opset, lo, hi, how):
    x = randn((3, 4, 5))
    inputs, consts = {"x": x}, []
    inputs["min"] = None if lo is None else np.array(lo, F32)
    if hi is not None:
        inputs["max"] = np.array(hi, F32)
    elif how == "absent":
        pass  # trailing optional input left out
    else:
        inputs["max"] = None  # empty-named
    if lo is None and "max" not in inputs:
        del inputs["min"]
    if how == "const":
        consts = [n for n in ("min", "max") if inputs.get(n) is not None]
    check_op("Clip", inputs, opset=opset, consts=tuple(consts))


@pytest.mark.parametrize("dtype", [F16, F64, np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_clip_dtypes(check_op, dtype):
    if np.dtype(dtype).kind == "f":
        x, lo, hi = randn((4, 6), dtype), np.array(-1, dtype), np.array(1.5, dtype)
    else:
        x, lo, hi = randint((4, 6), dtype, 0 if np.dtype(dtype).kind == "u" else -20, 20), np.array(3, dtype), np.array(12, dtype)
    if dtype in (np.uint64, F64):  # onnxruntime lacks these kernels
        (y,) = run_planned("Clip", [x, lo, hi], opset=13)
        np.testing.assert_array_equal(y, np.clip(x, lo, hi))
        return
    check_op("Clip", {"x": x, "min": lo, "max": hi}, opset=13, **tol(dtype))


def test_clip_scalar_shaped_1(check_op):
    check_op("Clip", {"x": randn((2, 3)), "min": np.array([-0.5], F32), "max": np.array([0.5], F32)}, opset=13)
    check_op("Clip", {"x": randn(()), "min": np.array(-0.5, F32), "max": np.array(0.5, F32)}, opset=13)


@pytest.mark.parametrize("attrs", [{}, {"min": -0.5}, {"max": 0.25}, {"min": -1.0, "max": 1.0}, {"min": 0.5, "max": 0.5}])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_clip_opset6_attributes(check_op, attrs, dtype):
    check_op("Clip", {"x": randn((3, 5), dtype)}, attrs, opset=6, **tol(dtype))


def test_clip_min_above_max_gives_max():
    x = randn((3, 4))
    for opset, xs, attrs in [(6, [x], {"min": 1.0, "max": -1.0}), (13, [x, np.array(1, F32), np.array(-1, F32)], {})]:
        (y,) = run_planned("Clip", xs, attrs, opset)  # onnxruntime rejects this at opset 6
        assert np.all(y == -1)


def test_clip_errors():
    with pytest.raises(GraphError, match="must be a scalar"):
        kernel("Clip", [np.zeros((2, 3), F32), np.zeros(3, F32)], opset=13)
    with pytest.raises(GraphError, match="input 1 'min' is float64 and input 0 'input' is float32; Clip-13 takes one"):
        kernel("Clip", [np.zeros((2, 3), F32), np.zeros((), F64)], opset=13)
    with pytest.raises(GraphError, match="input 0 'input' is int32; Clip-6 takes T in"):
        kernel("Clip", [np.zeros((2, 3), np.int32)], {"min": 0.0}, opset=6)


# ----------------------------------------------------------------------------------------------
# variadic
# ----------------------------------------------------------------------------------------------
VARIADIC_SHAPES = [[(3, 4)], [(3, 4), (3, 4)], [(2, 1, 4), (3, 1), ()], [(), ()], [(1,), (5, 1), (1, 7), (5, 7)],
                   [(0, 2), (1, 2)]]


@pytest.mark.parametrize("op", ["Max", "Min", "Sum", "Mean"])
@pytest.mark.parametrize("shapes", VARIADIC_SHAPES, ids=str)
def test_variadic(check_op, op, shapes):
    check_op(op, {f"x{i}": randn(s) for i, s in enumerate(shapes)}, opset=13)


@pytest.mark.parametrize("op", ["Max", "Min"])
@pytest.mark.parametrize("dtype", [F16, F64, np.int8, np.int32, np.int64, np.uint8, np.uint32, np.uint64])
def test_max_min_dtypes(check_op, op, dtype):
    shapes = [(3, 4), (4,), (3, 1)]
    xs = {f"x{i}": (randn(s, dtype) if np.dtype(dtype).kind == "f" else randint(s, dtype, 0 if np.dtype(dtype).kind == "u" else -50, 50))
          for i, s in enumerate(shapes)}
    check_op(op, xs, opset=13)


@pytest.mark.parametrize("op", ["Sum", "Mean"])
@pytest.mark.parametrize("dtype", [F16, F64])
def test_sum_mean_dtypes(check_op, op, dtype):
    xs = [randn((3, 4), dtype), randn((4,), dtype), randn((3, 1), dtype)]
    if op == "Mean" and dtype == F64:  # no float64 Mean in onnxruntime
        (y,) = run_planned(op, xs)
        np.testing.assert_allclose(y, (xs[0] + xs[1] + xs[2]) / 3)
        return
    check_op(op, {f"x{i}": x for i, x in enumerate(xs)}, opset=13, **tol(dtype))


def test_max_min_propagate_nan(check_op):
    a = np.array([np.nan, 1, 2, np.nan], F32)
    b = np.array([1, np.nan, 1, np.nan], F32)
    check_op("Max", {"a": a, "b": b})
    check_op("Min", {"a": a, "b": b})


# ----------------------------------------------------------------------------------------------
# Where, comparisons, logic
# ----------------------------------------------------------------------------------------------
WHERE_SHAPES = [((3, 4), (3, 4), (3, 4)), ((3, 1), (1, 4), ()), ((), (2, 3), (3,)), ((2, 1, 3), (4, 1), (1,)),
                ((), (), ()), ((0, 3), (3,), (1, 3))]


@pytest.mark.parametrize("shapes", WHERE_SHAPES, ids=str)
@pytest.mark.parametrize("dtype", [F32, F16, F64, np.int32, np.int64, np.uint8, np.bool_])
def test_where(check_op, shapes, dtype):
    c = rng.random(shapes[0]) < 0.5
    make = (lambda s: rng.random(s) < 0.5) if dtype == np.bool_ else (lambda s: randint(s, dtype, 0, 50).astype(dtype))
    check_or_ref(check_op, "Where", {"c": np.asarray(c), "x": np.asarray(make(shapes[1])), "y": np.asarray(make(shapes[2]))},
                 opset=16, ref=np.where)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [F32, F16, F64, np.int8, np.int32, np.int64, np.uint8, np.uint64, np.bool_])
@pytest.mark.parametrize("shape_a,shape_b", [((3, 4), (3, 4)), ((3, 1), (4,)), ((), (2, 3))])
def test_compare(check_op, op, dtype, shape_a, shape_b):
    if dtype == np.bool_:
        if op != "Equal":
            pytest.skip("only Equal takes bool")
        a, b = rng.random(shape_a) < 0.5, rng.random(shape_b) < 0.5
    else:
        a, b = randint(shape_a, dtype, 0, 3).astype(dtype), randint(shape_b, dtype, 0, 3).astype(dtype)
    ufunc = {"Equal": np.equal, "Less": np.less, "Greater": np.greater, "LessOrEqual": np.less_equal,
             "GreaterOrEqual": np.greater_equal}[op]
    check_or_ref(check_op, op, {"a": np.asarray(a), "b": np.asarray(b)}, opset=16, ref=ufunc)


@pytest.mark.parametrize("op", ["And", "Or", "Xor"])
@pytest.mark.parametrize("shape_a,shape_b", BROADCASTS)
def test_logical(check_op, op, shape_a, shape_b):
    check_op(op, {"a": np.asarray(rng.random(shape_a) < 0.5), "b": np.asarray(rng.random(shape_b) < 0.5)})


@pytest.mark.parametrize("shape", [(3, 4), (), (0,)])
def test_not(check_op, shape):
    check_op("Not", {"x": np.asarray(rng.random(shape) < 0.5)})


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_bitwise(check_op, op, dtype):
    lo = 0 if np.dtype(dtype).kind == "u" else -100
    check_op(op, {"a": randint((3, 4), dtype, lo, 100), "b": randint((4,), dtype, lo, 100)}, opset=18)


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, np.uint64])
def test_bitwise_not(check_op, dtype):
    check_op("BitwiseNot", {"x": randint((3, 4), dtype, 0 if np.dtype(dtype).kind == "u" else -100, 100)}, opset=18)


@pytest.mark.parametrize("dtype", [F32, F16, F64])
def test_isnan_isinf(check_op, dtype):
    x = np.array([[0, np.nan, np.inf, -np.inf], [1.5, -2, -0.0, np.nan]], dtype)
    check_op("IsNaN", {"x": x}, opset=13)
    for neg in (0, 1):
        for pos in (0, 1):
            ref = lambda x: (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))  # noqa: E731
            check_or_ref(check_op, "IsInf", {"x": x}, {"detect_negative": neg, "detect_positive": pos}, opset=20, ref=ref)


def test_isinf_attribute_error():
    with pytest.raises(GraphError, match="detect_positive must be 0 or 1"):
        kernel("IsInf", [np.zeros(2, F32)], {"detect_positive": 3})


# ----------------------------------------------------------------------------------------------
# Cast
# ----------------------------------------------------------------------------------------------
CAST_TYPES = [F16, F32, F64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.bool_]


def _cast_source(dtype):
    if dtype == np.bool_:
        return np.array([[True, False, True], [False, False, True]])
    if np.dtype(dtype).kind == "f":  # in range of every target: truncation toward zero, 0/1 for bool
        return np.array([[0.0, 1.7, -1.7, 2.5], [-0.0, 100.9, -99.5, 0.25]], dtype)
    if np.dtype(dtype).kind == "u":
        return np.array([[0, 1, 7, 127], [100, 2, 55, 3]], dtype)
    return np.array([[0, 1, -7, 127], [-100, 2, -55, 3]], dtype)


@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast_matrix(check_op, src, dst):
    from ge.core.model.ir import dtype_to_onnx
    x = _cast_source(src)
    # a negative value's unsigned cast is undefined: on aarch64 onnxruntime saturates -1.7 to 0, numpy wraps it
    if np.dtype(src).kind in "if" and np.dtype(dst).kind == "u":
        x = np.abs(x)
    check_op("Cast", {"x": x}, {"to": dtype_to_onnx(dst)}, opset=13, rtol=1e-3 if F16 in (src, dst) else 1e-6)


@pytest.mark.parametrize("shape", [(), (0, 3), (2, 1, 3)])
def test_cast_shapes(check_op, shape):
    check_op("Cast", {"x": randn(shape)}, {"to": 7}, opset=19)
    check_op("Cast", {"x": randn(shape)}, {"to": 10}, opset=19, rtol=1e-3)


def test_cast_ignores_saturate():
    x = np.array([1e6, -1.5], F32)  # onnxruntime rejects saturate outside float8 casts; ge ignores it
    (y,) = run_planned("Cast", [x], {"to": 10, "saturate": 1}, opset=19)
    assert y.dtype == F16 and list(y) == [np.inf, -1.5]


def test_cast_float16_rounding(check_op):
    x = np.array([1 / 3, 65504, 65519, 65520, 1e-8, 6.1e-5, -2.5e-6, np.inf, np.nan], F32)
    check_op("Cast", {"x": x}, {"to": 10}, opset=13, rtol=0, atol=0)
    check_op("Cast", {"x": x.astype(F64)}, {"to": 10}, opset=13, rtol=0, atol=0)


def test_cast_errors():
    with pytest.raises(GraphError, match="casting to STRING gives a string tensor, which has no static layout"):
        kernel("Cast", [np.zeros(2, F32)], {"to": 8})
    with pytest.raises(GraphError, match="cannot cast to ONNX element type 99"):
        kernel("Cast", [np.zeros(2, F32)], {"to": 99})
    with pytest.raises(GraphError, match="'to' is required"):
        kernel("Cast", [np.zeros(2, F32)])
    with pytest.raises(GraphError, match="cannot cast to ONNX element type 'float'"):
        kernel("Cast", [np.zeros(2, F32)], {"to": "float"})


@pytest.mark.parametrize("src,dst", [(F32, np.int64), (np.int32, F16), (np.bool_, F32), (F64, np.uint8)])
def test_castlike(check_op, src, dst):
    check_op("CastLike", {"x": _cast_source(src), "like": np.zeros((1,), dst)}, opset=15, rtol=1e-3)


# ----------------------------------------------------------------------------------------------
# compute() is the run() path: arrays (never numpy scalars), also for rank 0
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,n", [("Add", 2), ("Sigmoid", 1), ("Equal", 2), ("Sum", 3), ("Where", 3)])
def test_compute_returns_arrays_for_rank0(op, n):
    xs = [np.asarray(True)] + [np.asarray(np.float32(1.5))] * (n - 1) if op == "Where" else [np.asarray(np.float32(1.5))] * n
    (y,) = kernel(op, xs).compute(*xs)
    assert isinstance(y, np.ndarray) and y.shape == ()


@pytest.mark.parametrize("op_type", ["Relu", "Sigmoid", "Tanh", "HardSigmoid", "Clip"])
def test_in_place_kernels_run_in_place(op_type):
    """Kernels flagged in_place can be fused as epilogues: run with ys[0] is xs[0], no workspace."""
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    x = (rng.standard_normal((3, 70000)) * 4).astype(np.float32)
    m = Meta(x.dtype, x.shape)
    bounds = [np.array(0, np.float32), np.array(6, np.float32)] if op_type == "Clip" else []
    cls = lookup(op_type)
    assert cls.in_place
    kernel = cls({}, [m] + [Meta(b.dtype, ()) for b in bounds], [None] + bounds, outputs=[m])
    want = kernel.compute(x, *bounds)[0]
    y = x.copy()
    kernel.run([y, *bounds], [y], None)
    np.testing.assert_array_equal(y, want)
