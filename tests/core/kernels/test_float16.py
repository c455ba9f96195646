"""float16 ops numpy computes slowly run through their float32 kernels (core/kernels/float16.py):
same results as onnxruntime's float16 kernels, on both plans, weights constant or not."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.float16 import VIA_FLOAT32, Float16ViaFloat32
from tests.conftest import ort_run
from tests.core.kernels.conftest import run_onnxruntime

rng = np.random.default_rng(0)
TOL = dict(rtol=2e-3, atol=2e-3)
pytestmark = pytest.mark.usefixtures("native_and_numpy")


def f16(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float16)


CASES = [
    ("Conv", {"x": f16(1, 8, 10, 10), "w": f16(16, 8, 3, 3, scale=0.2), "b": f16(16)}, {"pads": [1, 1, 1, 1]}),
    ("Conv", {"x": f16(2, 8, 9, 9), "w": f16(8, 1, 3, 3)}, {"group": 8, "strides": [2, 2]}),
    ("ConvTranspose", {"x": f16(1, 4, 5, 5), "w": f16(4, 3, 2, 2)}, {"strides": [2, 2]}),
    ("MatMul", {"a": f16(2, 16, 32, scale=0.2), "b": f16(32, 24, scale=0.2)}, {}),
    ("Gemm", {"a": f16(16, 32, scale=0.2), "b": f16(24, 32, scale=0.2), "c": f16(24)}, {"transB": 1, "alpha": 0.5}),
    ("MaxPool", {"x": f16(1, 4, 9, 9)}, {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("AveragePool", {"x": f16(1, 4, 9, 9)}, {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
    ("GlobalAveragePool", {"x": f16(2, 4, 7, 7)}, {}),
    ("GlobalMaxPool", {"x": f16(2, 4, 7, 7)}, {}),
    ("ReduceMean", {"x": f16(2, 4, 7, 7)}, {"axes": [2, 3]}),
    ("ReduceSum", {"x": f16(2, 4, 7)}, {"keepdims": 0}),
    ("ReduceMax", {"x": f16(2, 4, 7)}, {"axes": [1]}),
    ("InstanceNormalization", {"x": f16(2, 4, 6, 6), "s": f16(4), "b": f16(4)}, {}),
]


@pytest.mark.parametrize("consts", [False, True], ids=["weights-as-inputs", "constant-weights"])
@pytest.mark.parametrize("op,inputs,attrs", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
def test_float16_op_matches_onnxruntime(check_op, op, inputs, attrs, consts):
    """Against onnxruntime's float32 run of the same values, rounded to float16: what ge computes
    (each op in float32, rounded once), and what onnxruntime's float16 kernels give on x86 — on
    aarch64 its float16 Conv with constant weights accumulates in half precision, 3.8% of values
    beyond 2e-3 (found under qemu-aarch64)."""
    opset = 17 if op != "ReduceSum" else 13
    const_names = list(inputs)[1:] if consts else ()
    wide = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in inputs.items()}
    expected = [y.astype(np.float16) if y.dtype == np.float32 else y
                for y in run_onnxruntime(op, wide, attrs, 1, opset, const_names)]
    check_op(op, inputs, attrs, opset=opset, consts=const_names, expected=expected, **TOL)


def test_float16_instances_are_the_float32_kernel_behind_conversions():
    h, f = np.dtype(np.float16), np.dtype(np.float32)
    k = lookup("MatMul", opset=17)({}, [Meta(h, (4, 8)), Meta(h, (8, 3))], name="mm")
    assert isinstance(k, Float16ViaFloat32) and type(k.inner).__name__ == "MatMul"
    assert [m.dtype for m in k.infer()] == [h] and [m.dtype for m in k.inner.infer()] == [f]
    plain = lookup("MatMul", opset=17)({}, [Meta(f, (4, 8)), Meta(f, (8, 3))], name="mm")
    assert not isinstance(plain, Float16ViaFloat32)
    assert all(domain in ("", "ge") for domain, _ in VIA_FLOAT32)


WEIGHTED = [("MatMul", {}, (2, 16, 32), (32, 24)), ("Gemm", {"transB": 1}, (16, 32), (24, 32)),
            ("Conv", {"pads": [1, 1, 1, 1]}, (1, 8, 10, 10), (16, 8, 3, 3))]


@pytest.mark.parametrize("op,attrs,x_shape,w_shape", WEIGHTED, ids=[c[0] for c in WEIGHTED])
def test_float16_constant_weights_get_the_float32_plan(op, attrs, x_shape, w_shape):
    """A float16 export's weights are float16 initializers: the float32 kernel behind them is planned
    on float32 copies, as a float32 model's kernel is (a float16 B kept a float16 Gemm off BLAS and
    the native GEMM: 25x its float32 time), and loads with them."""
    h, f = np.dtype(np.float16), np.dtype(np.float32)
    w = f16(*w_shape, scale=0.2)
    narrow = lookup(op, opset=17)(attrs, [Meta(h, x_shape), Meta(h, w_shape)], [None, w], name="n")
    wide = lookup(op, opset=17)(attrs, [Meta(f, x_shape), Meta(f, w_shape)], [None, w.astype(f)], name="n")
    assert narrow.inner.uses_native == wide.uses_native
    assert narrow.workspace_nbytes() >= wide.workspace_nbytes()
    assert narrow.inner.consts[1].dtype == f and narrow.consts[1].dtype == h
    narrow.load()
    assert narrow.wide_consts[1] is narrow.inner.consts[1]


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_float16_model_end_to_end(make_model, tmp_path, device):
    """A float16 export: weights stay float16 in the OM, results as onnxruntime's."""
    H = TensorProto.FLOAT16
    w, w2 = f16(8, 3, 3, 3, scale=0.3), f16(8, 10, scale=0.3)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["g"]), helper.make_node("Flatten", ["g"], ["f"]),
             helper.make_node("MatMul", ["f", "w2"], ["y"])]
    model = make_model(nodes, {"x": (H, [2, 3, 8, 8])}, {"y": (H, [2, 10])}, {"w": w, "w2": w2})
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    result = api.atc(str(path), str(tmp_path / "m"))
    assert {w.dtype for w in result.model.weights} == {"float16"}
    x = f16(2, 3, 8, 8)
    model_id = api.load_from_file(result.om_path, device)
    try:
        got = api.execute(model_id, [x])[0]
    finally:
        api.unload(model_id)
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ort_run(model, {"x": x})[0].astype(np.float32), **TOL)


PRODUCTS = [
    ("MatMul", "", {}, [(2, 16, 32), (32, 24)]),
    ("Gemm", "", {"transB": 1}, [(16, 32), (24, 32), (24,)]),
    ("Gemm", "", {"transB": 1}, [(1, 32), (24, 32), (24,)]),  # one row: the native GEMV
    ("FusedMatMul", "ge", {}, [(2, 16, 32), (32, 24), (24,)]),
    ("ConvTranspose", "", {"strides": [2, 2]}, [(1, 4, 5, 5), (4, 3, 2, 2), (3,)]),  # kernel == stride: native
    ("ConvTranspose", "", {"strides": [2, 2]}, [(1, 4, 5, 5), (4, 3, 3, 3), (3,)]),  # numpy's GEMM and scatter
]


@pytest.mark.parametrize("op,domain,attrs,shapes", PRODUCTS, ids=[f"{p[0]}{i}" for i, p in enumerate(PRODUCTS)])
def test_float16_constant_weights_take_the_float32_plan(native_and_numpy, op, domain, attrs, shapes):
    """float16 weights are planned as float32 ones (the native GEMM where the float32 model has it)
    and converted once at load: the result is the float32 kernel's on the widened values, rounded."""
    h, f = np.dtype(np.float16), np.dtype(np.float32)
    cls = lookup(op, domain, 17)
    xs = [f16(*s, scale=0.3) for s in shapes]
    k = cls(attrs, [Meta(h, s) for s in shapes], [None] + xs[1:], name="p")
    plain = cls(attrs, [Meta(f, s) for s in shapes], [None] + [x.astype(f) for x in xs[1:]], name="p")
    assert isinstance(k, Float16ViaFloat32) and type(k.inner) is type(plain)
    numpy_plan = op == "ConvTranspose" and shapes[1][2:] != tuple(attrs["strides"])
    assert k.inner.uses_native == plain.uses_native == (native_and_numpy == "native" and not numpy_plan)
    assert k.inner.workspace_nbytes() == plain.workspace_nbytes()
    got = k.compute(*xs)[0]
    assert k.inner.consts[1].dtype == f and k.inner.consts[1].strides  # the converted weights, not a stand-in
    expected = plain.compute(xs[0].astype(f), *[x.astype(f) for x in xs[1:]])[0].astype(h)
    assert got.dtype == h and np.array_equal(got.view(np.uint16), expected.view(np.uint16))


def every_half(n: int, seed: int) -> np.ndarray:
    """n float16 values of random bit patterns: subnormals, infinities and NaNs included."""
    return np.random.default_rng(seed).integers(0, 1 << 16, n, dtype=np.uint16).view(np.float16)


@pytest.mark.parametrize("op,ufunc", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply),
                                      ("Div", np.divide)])
@pytest.mark.parametrize("shape_b", [(3, 40000), (40000,), ()], ids=["same", "broadcast", "scalar"])
def test_float16_arithmetic_is_numpys_bit_for_bit(native_and_numpy, op, ufunc, shape_b):
    """float16 arithmetic runs its float32 kernel between conversions: numpy's float16 result, bit for
    bit (the float32 result of two float16 values, rounded once, is the correctly rounded one)."""
    h = np.dtype(np.float16)
    a = every_half(3 * 40000, 1).reshape(3, 40000)
    b = every_half(int(np.prod(shape_b)), 2).reshape(shape_b)
    k = lookup(op, opset=17)({}, [Meta(h, a.shape), Meta(h, b.shape)], name="e")
    assert isinstance(k, Float16ViaFloat32)
    with np.errstate(all="ignore"):
        got, expected = k.compute(a, b)[0], ufunc(a, b)
    # bit for bit, but for which NaN's payload a NaN of two NaNs carries (numpy's scalar loop and the
    # vector float32 kernel pick differently)
    same = got.view(np.uint16) == expected.view(np.uint16)
    both_nan = np.isnan(a) & np.isnan(b)
    assert got.dtype == h and np.all(same | both_nan) and np.all(np.isnan(got[both_nan]))


@pytest.mark.parametrize("op", ["Tanh", "Sigmoid", "Sqrt"])
def test_float16_formulas_convert_natively_with_numpys_rounding(default_backend, op):
    """A float16 formula (FloatUnary) converts its blocks with the native conversions: the same bits as
    with numpy's casts (the numpy backend). (Erf has a native formula of its own: test_native_erf.py.)"""
    h = np.dtype(np.float16)
    x = every_half(100000, 3)
    results = []
    for backend in ("native", "numpy"):
        default_backend(backend)
        with np.errstate(all="ignore"):
            results.append(lookup(op, opset=17)({}, [Meta(h, x.shape)], name="u").compute(x)[0])
    assert results[0].dtype == h and np.array_equal(results[0].view(np.uint16), results[1].view(np.uint16))


@pytest.mark.parametrize("op,attrs,n_inputs,plan", [("LayerNormalization", {"axis": -1}, 3, "numpy"),
                                                    ("Softmax", {}, 1, "native"), ("LogSoftmax", {}, 1, "native")])
def test_float16_normalizations_widen_natively(default_backend, op, attrs, n_inputs, plan):
    """A float16 LayerNormalization or Softmax widens X and rounds Y with the native conversions:
    its float32 kernel's result, rounded (LayerNormalization's numpy plan: its float16 Scale and B
    keep it off the native row kernel, as before)."""
    h, f = np.dtype(np.float16), np.dtype(np.float32)
    xs = [f16(4, 64, 256)] + [f16(256) for _ in range(n_inputs - 1)]
    default_backend("native")
    got = lookup(op, opset=17)(attrs, [Meta(h, x.shape) for x in xs], name="n").compute(*xs)[0]
    default_backend(plan)
    wide = lookup(op, opset=17)(attrs, [Meta(f, x.shape) for x in xs], name="n").compute(*[x.astype(f) for x in xs])
    expected = wide[0].astype(h)
    assert got.dtype == h and np.array_equal(got.view(np.uint16), expected.view(np.uint16))


@pytest.mark.parametrize("src,dst", [(np.float32, np.float16), (np.float16, np.float32), (np.float64, np.float16),
                                     (np.float16, np.float64)])
def test_float16_casts_are_numpys(default_backend, src, dst):
    """Cast between float32 and float16 converts natively (an fp16 export's boundary Casts); every
    cast gives numpy's bits, NaN, infinities, subnormals and overflow included."""
    x = np.concatenate([every_half(50000, 4).astype(src) * src(1.001),
                        np.array([np.inf, -np.inf, np.nan, 70000.0, -1e-8, 6e-8], src)])
    default_backend("native")
    got = lookup("Cast", opset=19)({"to": onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dst))},
                                   [Meta(np.dtype(src), x.shape)], name="c").compute(x)[0]
    with np.errstate(all="ignore"):
        expected = x.astype(dst)
    assert got.dtype == dst and np.array_equal(got.view(np.uint8), expected.view(np.uint8))


def test_float16_weights_are_converted_once_for_every_shape():
    """Kernels built for other shapes (the hybrid executor's) share the float32 copy of a float16
    weight and its native pack, through the model's pack cache."""
    from ge.core.kernels.packs import WeightPacks
    h = np.dtype(np.float16)
    w, packs = f16(32, 24), WeightPacks()
    kernels = [lookup("MatMul", opset=17)({}, [Meta(h, (rows, 32)), Meta(h, (32, 24))], [None, w], name="m",
                                          packs=packs).load() for rows in (16, 40)]
    assert kernels[0].inner.consts[1] is kernels[1].inner.consts[1]
    assert packs.hits >= 1 and len(packs) == (2 if kernels[0].inner.uses_native else 1)
    f = np.dtype(np.float32)
    for k, rows in zip(kernels, (16, 40)):
        x = f16(rows, 32)
        plain = lookup("MatMul", opset=17)({}, [Meta(f, (rows, 32)), Meta(f, (32, 24))], [None, w.astype(f)], name="m")
        assert np.array_equal(k.compute(x, w)[0], plain.compute(x.astype(f), w.astype(f))[0].astype(h))
