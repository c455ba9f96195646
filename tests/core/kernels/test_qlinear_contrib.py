"""onnxruntime's com.microsoft quantized ops against onnxruntime itself; QGemm, an integer product,
against its exact reference (int8_reference.py: onnxruntime's u8 x s8 products saturate on AVX2
without VNNI); QLinearAdd/QLinearMul against MLAS's x86 float32 formulas in numpy (checked against
onnxruntime on x86, where they are its own)."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta, dtype_to_onnx
from ge.core.kernels import lookup

from .int8_reference import reference

pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every kernel on both plans
rng = np.random.default_rng(9)
MS = "com.microsoft"


def run_ort(op, inputs, attrs, consts):
    names = list(inputs)
    node = helper.make_node(op, [n if inputs[n] is not None else "" for n in names], ["y"], domain=MS, **attrs)
    graph = helper.make_graph(
        [node], "t",
        [helper.make_tensor_value_info(n, dtype_to_onnx(a.dtype), a.shape) for n, a in inputs.items()
         if a is not None and n not in consts],
        [onnx.ValueInfoProto(name="y")],
        [numpy_helper.from_array(inputs[n], n) for n in consts])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: a for n, a in inputs.items() if a is not None and n not in consts})[0]


def check(op, inputs, attrs=None, consts=(), steps=0, frac=0.0, want=None):
    """ge equals onnxruntime, or `want` where given (bit-exact unless `steps` > 0: then at most that
    many quantization steps, on at most `frac` of the values)."""
    attrs = attrs or {}
    if want is None:
        want = run_ort(op, inputs, attrs, consts)
    arrays = list(inputs.values())
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    cv = [inputs[n] if n in consts else None for n in inputs]
    cls = lookup(op, MS, 1)
    k = cls(attrs, metas, cv, opset=1, name="n0")
    (m,) = k.infer()
    assert (m.dtype, tuple(m.shape)) == (want.dtype, want.shape)
    planned = cls(attrs, metas, cv, outputs=[m], opset=1, name="n0").load()
    y = np.full(m.shape, 77, m.dtype)
    planned.run(arrays, [y], np.zeros(planned.workspace_nbytes(), np.uint8))
    for got in (k.compute(*arrays)[0], y):
        assert got.dtype == want.dtype
        diff = np.abs(got.astype(np.int64) - want.astype(np.int64)) if want.dtype != np.float32 else None
        if diff is None:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            assert diff.max(initial=0) <= steps, f"max diff {diff.max()}"
            assert (diff > 0).mean() <= frac, f"{(diff > 0).mean():.3f} of the values differ"


def q(shape, dtype):
    i = np.iinfo(dtype)
    return rng.integers(i.min, i.max + 1, shape).astype(dtype)


def qparams(dtype, scale):
    zp = np.array(128 if dtype == np.uint8 else 0, dtype) + np.array(rng.integers(-10, 10), dtype)
    return np.array(scale, np.float32), zp


def mlas_binary(op, a, sa, za, b, sb, zb, sc, zc):
    """QLinearAdd / QLinearMul as MLAS computes them on x86 (ge's contract: the same float32 steps),
    in numpy: the same on every CPU, where onnxruntime's own kernels are not (on aarch64 its NEON
    QLinearAdd lands one step away on a few values)."""
    f = np.float32
    sa, sb, sc, za, zb, zc = (f(v) for v in (sa, sb, sc, za, zb, zc))
    if op == "QLinearAdd":
        ra, rb = sa / sc, sb / sc
        t = (a.astype(f) * ra + (zc - ra * za - rb * zb)) + b.astype(f) * rb
    else:
        t = (a.astype(f) - za) * (b.astype(f) - zb) * (sa * sb / sc) + zc
    i = np.iinfo(a.dtype)
    return np.clip(np.rint(t), i.min, i.max).astype(a.dtype)


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((1, 8, 5, 5), (1, 8, 1, 1)),
                                    ((3, 1), (1, 3)), ((3, 5, 37), (1,)), ((), (2, 41)), ((1, 1), (1, 1))])
def test_qlinear_binary(op, dtype, shapes):  # (a single value on either side: natively, read for each element)
    import platform
    a_s, a_z = qparams(dtype, 0.05)
    b_s, b_z = qparams(dtype, 0.03)
    c_s, c_z = qparams(dtype, 0.08 if op == "QLinearAdd" else 0.2)
    inputs = {"a": q(shapes[0], dtype), "as": a_s, "az": a_z, "b": q(shapes[1], dtype), "bs": b_s, "bz": b_z,
              "cs": c_s, "cz": c_z}
    consts = ("as", "az", "bs", "bz", "cs", "cz")
    want = mlas_binary(op, *(inputs[k] for k in ("a", "as", "az", "b", "bs", "bz", "cs", "cz")))
    if platform.machine() in ("x86_64", "AMD64"):  # the formula is onnxruntime's own there
        np.testing.assert_array_equal(run_ort(op, inputs, {}, consts), want)
    check(op, inputs, consts=consts, want=want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_add_scales_at_run_time(dtype):
    """The native QLinearAdd with scales and zero points given at run time (not constants: no factors
    computed once), bytes as MLAS's formula."""
    a_s, a_z = qparams(dtype, 0.05)
    b_s, b_z = qparams(dtype, 0.03)
    c_s, c_z = qparams(dtype, 0.08)
    inputs = {"a": q((2, 5, 7), dtype), "as": a_s, "az": a_z, "b": q((2, 5, 7), dtype), "bs": b_s, "bz": b_z,
              "cs": c_s, "cz": c_z}
    check("QLinearAdd", inputs, want=mlas_binary("QLinearAdd", *inputs.values()))


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}),
                                      ("QLinearLeakyRelu", {})])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_unary(op, attrs, dtype):
    xs, xz = qparams(dtype, 0.07)
    ys, yz = qparams(dtype, 0.004 if op == "QLinearSigmoid" else 0.05)
    x = np.arange(np.iinfo(dtype).min, np.iinfo(dtype).max + 1).astype(dtype).reshape(16, 16)  # every value
    check(op, {"x": x, "xs": xs, "xz": xz, "ys": ys, "yz": yz}, attrs, consts=("xs", "xz", "ys", "yz"))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shape,channels_last", [((2, 8, 5, 5), 0), ((1, 16, 7, 7), 0), ((2, 5, 5, 8), 1),
                                                 ((1, 2, 257, 257), 0)])  # (planes past float32's exact sums)
def test_qlinear_global_average_pool(dtype, shape, channels_last):
    xs, xz = qparams(dtype, 0.05)
    ys, yz = qparams(dtype, 0.02)
    check("QLinearGlobalAveragePool", {"x": q(shape, dtype), "xs": xs, "xz": xz, "ys": ys, "yz": yz},
          {"channels_last": channels_last}, consts=("xs", "xz", "ys", "yz"))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [{"kernel_shape": [3, 3]}, {"kernel_shape": [3, 3], "strides": [2, 2],
                                                             "pads": [1, 1, 1, 1]},
                                   {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
                                   {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                                    "count_include_pad": 1},
                                   {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "channels_last": 1}])
def test_qlinear_average_pool(dtype, attrs):
    xs, xz = qparams(dtype, 0.05)
    ys, yz = qparams(dtype, 0.03)
    check("QLinearAveragePool", {"x": q((1, 4, 7, 8), dtype), "xs": xs, "xz": xz, "ys": ys, "yz": yz}, attrs,
          consts=("xs", "xz", "ys", "yz"))


@pytest.mark.parametrize("attrs", [{"kernel_shape": [3], "strides": [2], "pads": [1, 1]},
                                   {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2]}])
def test_qlinear_average_pool_1d_3d(attrs):
    xs, xz = qparams(np.uint8, 0.05)
    ys, yz = qparams(np.uint8, 0.03)
    shape = (1, 3, 9) if len(attrs["kernel_shape"]) == 1 else (1, 2, 4, 5, 6)
    check("QLinearAveragePool", {"x": q(shape, np.uint8), "xs": xs, "xz": xz, "ys": ys, "yz": yz}, attrs,
          consts=("xs", "xz", "ys", "yz"))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("axis", [1, -1])
def test_qlinear_concat(dtype, axis):
    inputs = {"ys": np.array(0.05, np.float32), "yz": np.array(3, dtype)}
    for k, shape in enumerate([(2, 3, 4), (2, 3, 4), (2, 3, 4)]):
        s, z = qparams(dtype, 0.02 * (k + 1))
        inputs |= {f"x{k}": q(shape, dtype), f"s{k}": s, f"z{k}": z}
    check("QLinearConcat", inputs, {"axis": axis}, consts=tuple(n for n in inputs if not n.startswith("x")))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("opset,axis", [(13, -1), (13, 1), (12, 1)])
def test_qlinear_softmax(dtype, opset, axis):
    xs, xz = qparams(dtype, 0.05)
    ys = np.array(1 / 256, np.float32)
    yz = np.array(0 if dtype == np.uint8 else -128, dtype)
    check("QLinearSoftmax", {"x": q((2, 3, 10), dtype), "xs": xs, "xz": xz, "ys": ys, "yz": yz},
          {"opset": opset, "axis": axis}, consts=("xs", "xz", "ys", "yz"))


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("quantized", [True, False])
@pytest.mark.parametrize("consts", [(), ("b", "bs", "bz")])
def test_qgemm(trans_a, trans_b, bias, quantized, consts):
    m, k, n = 5, 16, 7
    a = q((k, m) if trans_a else (m, k), np.uint8)
    b = q((n, k) if trans_b else (k, n), np.int8)
    inputs = {"a": a, "as": np.array(0.02, np.float32), "az": np.array(120, np.uint8),
              "b": b, "bs": np.array(0.01, np.float32), "bz": np.array(0, np.int8),
              "c": rng.integers(-2000, 2000, (n,)).astype(np.int32) if bias else None}
    if quantized:
        inputs |= {"ys": np.array(0.05, np.float32), "yz": np.array(128, np.uint8)}
    attrs = {"transA": trans_a, "transB": trans_b, "alpha": 0.5}
    check("QGemm", inputs, attrs, consts=consts, want=reference("QGemm", list(inputs.values()), attrs))


def test_qlinear_errors():
    u, f = np.dtype(np.uint8), np.dtype(np.float32)
    k = lookup("QLinearAdd", MS, 1)
    with pytest.raises(GraphError, match=r"node 'q' \(QLinearAdd\): input 1 \(scale\) must be a float32 scalar"):
        k({}, [Meta(u, (3,)), Meta(f, (3,)), Meta(u, ()), Meta(u, (3,)), Meta(f, ()), Meta(u, ()), Meta(f, ()),
               Meta(u, ())], name="q")
    with pytest.raises(GraphError, match="must be one type, uint8 or int8"):
        k({}, [Meta(f, (3,)), Meta(f, ()), Meta(u, ()), Meta(u, (3,)), Meta(f, ()), Meta(u, ()), Meta(f, ()),
               Meta(u, ())], name="q")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 3, 4), (2, 3, 4)), ((3, 1), (1, 4), (3, 4)), ((), (2, 5), (5,))])
@pytest.mark.parametrize("same_scale", [False, True])  # onnxruntime copies the bytes of an input already on Z's scale
def test_qlinear_where(dtype, shapes, same_scale):
    xs, xz = qparams(dtype, 0.05)
    ys, yz = qparams(dtype, 0.08)
    zs, zz = (xs, xz) if same_scale else qparams(dtype, 0.06)
    cond = rng.random(shapes[0]) < 0.5
    check("QLinearWhere", {"c": np.asarray(cond), "a": q(shapes[1], dtype), "as": xs, "az": xz, "b": q(shapes[2], dtype),
                           "bs": ys, "bz": yz, "zs": zs, "zz": zz}, consts=("as", "az", "bs", "bz", "zs", "zz"))


def test_qlinear_where_errors():
    u8, f32 = np.dtype(np.uint8), np.dtype(np.float32)
    metas = [Meta(np.dtype(np.bool_), (2,)), Meta(u8, (2,)), Meta(f32, ()), Meta(u8, ()), Meta(u8, (3,)),
             Meta(f32, ()), Meta(u8, ()), Meta(f32, ()), Meta(u8, ())]
    with pytest.raises(GraphError, match=r"node 'w' \(QLinearWhere\): condition \(2,\), X \(2,\) and Y \(3,\) do not broadcast"):
        lookup("QLinearWhere", MS, 1)({}, metas, name="w")
    metas[4], metas[8] = Meta(u8, (2,)), Meta(np.dtype(np.int8), ())
    with pytest.raises(GraphError, match=r"z_zero_point has type int8 and shape \(\); a uint8 scalar expected"):
        lookup("QLinearWhere", MS, 1)({}, metas, name="w")
