import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.backend import NUMPY

from .conftest import run_onnxruntime
from .int8_reference import reference

pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every kernel on both plans
rng = np.random.default_rng(5)
EXACT = dict(rtol=0, atol=0)


def exact(op, inputs: dict, attrs=None) -> list:
    """The integer product ops' expected output, exact on every CPU (int8_reference.py): onnxruntime's
    u8 x s8 products saturate on AVX2 without VNNI. `inputs` in the node's order."""
    return [reference(op, list(inputs.values()), attrs)]


def q8(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def zp(shape, dtype):
    info = np.iinfo(dtype)
    lo, hi = (info.min // 4, info.max // 4) if info.min < 0 else (info.max // 4, info.max * 3 // 4)
    return rng.integers(lo, hi + 1, shape).astype(dtype)


def with_ties(x, scale):
    """Put some values exactly half-way between two quantization steps (round half to even)."""
    x = x.copy()
    flat = x.reshape(-1)
    k = rng.integers(-40, 40, flat.size // 3).astype(np.float32) + np.float32(0.5)
    flat[:k.size] = (k * np.asarray(scale, np.float32).reshape(-1)[0]).astype(x.dtype)
    return x


# -- QuantizeLinear ---------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("with_zp", [True, False])
@pytest.mark.parametrize("consts", [(), ("s", "z")])
def test_quantize_per_tensor(check_op, opset, ydt, with_zp, consts):
    s = np.array(0.05, np.float32)
    x = with_ties((rng.standard_normal((3, 4, 5)) * 4).astype(np.float32), s)
    inputs = {"x": x, "s": s}
    if with_zp:
        inputs["z"] = zp((), ydt)
    elif ydt == np.int8:
        return  # without a zero point the output is uint8
    check_op("QuantizeLinear", inputs, opset=opset, consts=tuple(c for c in consts if c in inputs), **EXACT)


@pytest.mark.parametrize("opset", [13, 19, 21])
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("consts", [(), ("s", "z")])
def test_quantize_per_axis(check_op, opset, axis, ydt, consts):
    shape = (3, 4, 5)
    d = shape[axis]
    s = rng.uniform(0.01, 0.1, d).astype(np.float32)
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    check_op("QuantizeLinear", {"x": x, "s": s, "z": zp((d,), ydt)}, {"axis": axis}, opset=opset, consts=consts,
             **EXACT)


@pytest.mark.parametrize("ydt", [np.uint16, np.int16, np.uint8, np.int8])
@pytest.mark.parametrize("block,axis,shape", [(2, 1, (3, 4)), (3, 1, (2, 7)), (4, 0, (8, 3)), (2, -1, (2, 3, 5))])
@pytest.mark.parametrize("consts", [(), ("s", "z")])
def test_quantize_blocked_and_16bit(check_op, ydt, block, axis, shape, consts):
    ax = axis % len(shape)
    pshape = shape[:ax] + (-(-shape[ax] // block),) + shape[ax + 1:]
    s = rng.uniform(0.001, 0.01, pshape).astype(np.float32)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    check_op("QuantizeLinear", {"x": x, "s": s, "z": zp(pshape, ydt)}, {"axis": axis, "block_size": block},
             opset=21, consts=consts, **EXACT)


@pytest.mark.parametrize("opset", [19, 21])
def test_quantize_float16(check_op, opset):
    x = (rng.standard_normal((4, 6)) * 100).astype(np.float16)
    check_op("QuantizeLinear", {"x": x, "s": np.array(0.7, np.float16), "z": zp((), np.int8)}, opset=opset, **EXACT)


def test_quantize_int32():  # onnxruntime has no int32 QuantizeLinear: the ONNX formula
    x = rng.integers(-1000, 1000, (4, 6)).astype(np.int32)
    x[0, :4] = [5, 15, -5, -15]  # ties at scale 10
    s, z = np.array(10, np.float32), np.array(3, np.int8)
    k = lookup("QuantizeLinear", opset=13)({}, [Meta(x.dtype, x.shape), Meta(s.dtype, ()), Meta(z.dtype, ())],
                                           name="q", opset=13)
    want = np.clip(np.rint(x.astype(np.float32) / s) + 3, -128, 127).astype(np.int8)
    np.testing.assert_array_equal(k.compute(x, s, z)[0], want)
    assert list(want[0, :4]) == [3, 5, 3, 1]


def test_quantize_output_dtype_without_zero_point(check_op):
    x = (rng.standard_normal((4, 6)) * 100).astype(np.float32)
    check_op("QuantizeLinear", {"x": x, "s": np.array(0.3, np.float32)}, {"output_dtype": 3}, opset=21, **EXACT)


def test_quantize_errors():
    f = np.dtype(np.float32)
    k = lookup("QuantizeLinear", opset=13)
    with pytest.raises(GraphError, match=r"node 'q' \(QuantizeLinear\): y_scale has 3 values but x \(2, 4\) has 4"):
        k({"axis": 1}, [Meta(f, (2, 4)), Meta(f, (3,)), Meta(np.dtype(np.uint8), (3,))], name="q", opset=13)
    with pytest.raises(GraphError, match="input 2 'y_zero_point' is int16; QuantizeLinear-13 takes T2 in \\{int8, uint8\\}"):
        k({}, [Meta(f, (2, 4)), Meta(f, ()), Meta(np.dtype(np.int16), ())], name="q", opset=13)
    with pytest.raises(GraphError, match=r"with block_size=2 on axis 1 of x \(2, 4\), \(2, 2\) expected"):
        lookup("QuantizeLinear", opset=21)({"block_size": 2}, [Meta(f, (2, 4)), Meta(f, (2, 3))], name="q", opset=21)


@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("shape", [(3, 5, 1500), (2, 37)])  # rows in pairs and one left; vector tails
def test_softmax_between_round_trips_is_the_three_ops(ydt, shape):
    """SoftmaxQdq gives the bits of its three ops run one after the other (ge's kernels, each its plan)."""
    xs, xz = np.array(0.04, np.float32), zp((), ydt)
    ps, pz = np.array(1 / 255, np.float32), np.array(-128 if ydt == np.int8 else 0, ydt)
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    m = lambda a: Meta(a.dtype, a.shape)  # noqa: E731
    trip = lookup("QuantizeDequantize", "ge", 17)
    t = trip({}, [m(x), m(xs), m(xz)], [None, xs, xz], opset=17, name="a").load().compute(x, xs, xz)[0]
    p = lookup("Softmax", "", 17)({"axis": -1}, [m(t)], [None], opset=17, name="b").load().compute(t)[0]
    want = trip({}, [m(p), m(ps), m(pz)], [None, ps, pz], opset=17, name="c").load().compute(p, ps, pz)[0]
    kernel = lookup("SoftmaxQdq", "ge", 17)({"axis": -1}, [m(a) for a in (x, xs, xz, ps, pz)], [None, xs, xz, ps, pz],
                                             opset=17, name="n0")
    assert kernel.native == (kernel.backend.lib is not None)  # the native rows read and store through the trips
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    y = np.full(shape, 77, np.float32)
    kernel.load().run([x, xs, xz, ps, pz], [y], ws)
    np.testing.assert_array_equal(y, want)



# -- DequantizeLinear -------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
@pytest.mark.parametrize("with_zp", [True, False])
@pytest.mark.parametrize("consts", [(), ("s", "z")])
def test_dequantize_per_tensor(check_op, opset, xdt, with_zp, consts):
    inputs = {"x": q8((3, 4, 5), xdt), "s": np.array(0.037, np.float32)}
    if with_zp:
        inputs["z"] = zp((), xdt)
    check_op("DequantizeLinear", inputs, opset=opset, consts=tuple(c for c in consts if c in inputs), **EXACT)


@pytest.mark.parametrize("opset", [13, 21])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("xdt", [np.uint8, np.int8])
@pytest.mark.parametrize("consts", [(), ("s", "z")])
def test_dequantize_per_axis(check_op, opset, axis, xdt, consts):
    shape = (3, 4, 5)
    d = shape[axis]
    check_op("DequantizeLinear", {"x": q8(shape, xdt), "s": rng.uniform(0.01, 0.1, d).astype(np.float32),
                                  "z": zp((d,), xdt)}, {"axis": axis}, opset=opset, consts=consts, **EXACT)


@pytest.mark.parametrize("xdt", [np.uint16, np.int16, np.int8])
@pytest.mark.parametrize("block,axis,shape", [(2, 1, (3, 4)), (3, 1, (2, 7)), (4, 0, (8, 3))])
def test_dequantize_blocked_and_16bit(check_op, xdt, block, axis, shape):
    pshape = shape[:axis] + (-(-shape[axis] // block),) + shape[axis + 1:]
    check_op("DequantizeLinear", {"x": q8(shape, xdt), "s": rng.uniform(0.001, 0.01, pshape).astype(np.float32),
                                  "z": zp(pshape, xdt)}, {"axis": axis, "block_size": block}, opset=21, **EXACT)


def test_dequantize_int32_and_float16(check_op):
    x = rng.integers(-(1 << 30), 1 << 30, (4, 5)).astype(np.int32)
    check_op("DequantizeLinear", {"x": x, "s": np.array(1e-4, np.float32)}, opset=13, **EXACT)
    check_op("DequantizeLinear", {"x": q8((4, 5), np.uint8), "s": np.array(0.03, np.float16),
                                  "z": zp((), np.uint8)}, opset=19, **EXACT)
    check_op("DequantizeLinear", {"x": q8((4, 5), np.int8), "s": rng.uniform(0.1, 1, 5).astype(np.float16),
                                  "z": zp((5,), np.int8)}, {"axis": 1}, opset=21, **EXACT)


def test_dequantize_errors():
    k = lookup("DequantizeLinear", opset=13)
    with pytest.raises(GraphError, match=r"node 'd' \(DequantizeLinear\): input 2 'x_zero_point' is int8 and input 0 'x' is uint8; "
                                         r"DequantizeLinear-13 takes one type T for both"):
        k({}, [Meta(np.dtype(np.uint8), (2,)), Meta(np.dtype(np.float32), ()), Meta(np.dtype(np.int8), ())],
          name="d", opset=13)
    with pytest.raises(GraphError, match=r"input 0 'x' is float32; DequantizeLinear-13 takes T in \{int8, int32, uint8\}"):
        k({}, [Meta(np.dtype(np.float32), (2,)), Meta(np.dtype(np.float32), ())], name="d", opset=13)

# -- QuantizeDequantize (ge's: fuse_qdq's QuantizeLinear -> DequantizeLinear) -------------------------

@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("n", [37, 2 * 16384 + 21])  # a vector tail; several items of QR_CHUNK and a tail
def test_quantize_dequantize_is_the_two_ops(ydt, n):
    """The same values as onnxruntime's QuantizeLinear then DequantizeLinear: ties to even, both ends
    saturated, the zero point's step."""
    s, z = np.array(0.05, np.float32), zp((), ydt)
    x = with_ties((rng.standard_normal(n) * 8).astype(np.float32), s)
    x[-3:] = [1e9, -1e9, np.float32(z) * s]
    q = run_onnxruntime("QuantizeLinear", {"x": x, "s": s, "z": z}, {}, 1, 17, ("s", "z"))[0]
    want = run_onnxruntime("DequantizeLinear", {"q": q, "s": s, "z": z}, {}, 1, 17, ("s", "z"))[0]
    metas = [Meta(a.dtype, a.shape) for a in (x, s, z)]
    kernel = lookup("QuantizeDequantize", "ge", 17)({}, metas, [None, s, z], opset=17, name="n0")
    assert [(m.dtype, m.shape) for m in kernel.infer()] == [(np.dtype(np.float32), x.shape)]
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    y = np.full(x.shape, 77, np.float32)
    kernel.load().run([x, s, z], [y], ws)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(kernel.compute(x, s, z)[0], want)



@pytest.mark.parametrize("ydt", [np.uint8, np.int8])
@pytest.mark.parametrize("zero", [0, 3])
def test_quantize_dequantize_edges_bit_for_bit(ydt, zero):
    """The native round trip (csrc/simd.h's vround_trip, in floats) gives the numpy plan's bits, sign of
    zero included, at the edges: NaN (the byte 0), infinities and huge values (saturated), -0 and values
    rounding to -0, ties; in vectors and in the tail."""
    s, z = np.array(0.05, np.float32), np.array(zero, ydt)
    edges = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, -0.01, 0.01, -0.025, 0.025, 0.075, -0.075, 1e30, -1e30,
                      3e38, 6.4, -6.4, 12.775, -12.775], np.float32)
    x = np.concatenate([edges, (rng.standard_normal(45) * 8).astype(np.float32), edges])
    metas = [Meta(a.dtype, a.shape) for a in (x, s, z)]
    built = {b: lookup("QuantizeDequantize", "ge", 17)({}, metas, [None, s, z], opset=17, name="n0", backend=b).load()
             for b in (NUMPY, None)}
    got = {}
    for b, kernel in built.items():
        ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
        got[b] = np.full(x.shape, 77, np.float32)
        kernel.run([x, s, z], [got[b]], ws)
    assert built[None].native == (built[None].backend.lib is not None)
    np.testing.assert_array_equal(got[None].view(np.int32), got[NUMPY].view(np.int32))


# -- DynamicQuantizeLinear ----------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["mixed", "positive", "negative", "zeros", "constant", "ties"])
def test_dynamic_quantize(check_op, kind):
    x = rng.standard_normal((3, 17)).astype(np.float32) * 3
    if kind == "positive":
        x = np.abs(x) + 1
    elif kind == "negative":
        x = -np.abs(x) - 1
    elif kind == "zeros":
        x = np.zeros((4, 4), np.float32)
    elif kind == "constant":
        x = np.full((4, 4), 2.5, np.float32)
    elif kind == "ties":
        x = np.arange(-255, 256, dtype=np.float32) / 2  # scale 2: half steps everywhere
    check_op("DynamicQuantizeLinear", {"x": x}, n_outputs=3, opset=11, **EXACT)


# -- MatMulInteger, QLinearMatMul ------------------------------------------------------------------

MM_SHAPES = [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((4,), (4, 5)), ((3, 4), (4,)),
             ((1, 3, 4), (2, 4, 6)), ((16, 64), (64, 32))]
TYPE_PAIRS = [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8)]


@pytest.mark.parametrize("ash,bsh", MM_SHAPES)
@pytest.mark.parametrize("adt,bdt", TYPE_PAIRS[:3])
@pytest.mark.parametrize("zps", ["none", "scalar", "b_column"])
@pytest.mark.parametrize("consts", [(), ("b", "bz")])
def test_matmul_integer(check_op, ash, bsh, adt, bdt, zps, consts):
    inputs = {"a": q8(ash, adt), "b": q8(bsh, bdt)}
    if zps != "none":
        inputs["az"] = zp((), adt)
        n = bsh[-1] if len(bsh) > 1 else 1
        inputs["bz"] = zp((n,) if zps == "b_column" and len(bsh) == 2 else (), bdt)
    check_op("MatMulInteger", inputs, opset=10, consts=tuple(c for c in consts if c in inputs),
             expected=exact("MatMulInteger", inputs), **EXACT)


@pytest.mark.parametrize("ash,bsh", MM_SHAPES)
@pytest.mark.parametrize("adt,bdt,ydt", [(np.uint8, np.uint8, np.uint8), (np.uint8, np.int8, np.uint8),
                                         (np.int8, np.int8, np.int8)])  # the combinations onnxruntime has
@pytest.mark.parametrize("consts", [(), ("b", "bs", "bz", "as", "ys")])
def test_qlinear_matmul(check_op, ash, bsh, adt, bdt, ydt, consts):
    k = ash[-1]
    inputs = {"a": q8(ash, adt), "as": np.array(0.02, np.float32), "az": zp((), adt),
              "b": q8(bsh, bdt), "bs": np.array(0.01, np.float32), "bz": zp((), bdt),
              "ys": np.array(0.003 * k, np.float32), "yz": zp((), ydt)}
    check_op("QLinearMatMul", inputs, opset=10, consts=consts, expected=exact("QLinearMatMul", inputs), **EXACT)


@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul_per_column(check_op, opset):
    inputs = {"a": q8((5, 8), np.uint8), "as": np.array(0.02, np.float32), "az": zp((), np.uint8),
              "b": q8((8, 6), np.int8), "bs": rng.uniform(0.005, 0.02, 6).astype(np.float32),
              "bz": np.zeros(6, np.int8), "ys": np.array(0.05, np.float32), "yz": zp((), np.uint8)}
    check_op("QLinearMatMul", inputs, opset=opset, expected=exact("QLinearMatMul", inputs), **EXACT)


def test_matmul_integer_errors():
    u = np.dtype(np.uint8)
    k = lookup("MatMulInteger", opset=10)
    with pytest.raises(GraphError, match=r"node 'm' \(MatMulInteger\): A \(3, 4\) and B \(5, 2\): inner dims"):
        k({}, [Meta(u, (3, 4)), Meta(u, (5, 2))], name="m", opset=10)
    with pytest.raises(GraphError, match=r"input 0 'A' is float32; MatMulInteger-10 takes T1 in \{int8, uint8\}"):
        k({}, [Meta(np.dtype(np.float32), (3, 4)), Meta(u, (4, 2))], name="m", opset=10)


# -- ConvInteger, QLinearConv ---------------------------------------------------------------------

CONVS = [  # x shape, w shape, attrs
    ((1, 3, 7, 7), (4, 3, 3, 3), {}),
    ((2, 4, 8, 8), (6, 4, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "pads": [1, 1, 1, 1]}),
    ((1, 6, 5, 5), (4, 3, 1, 1), {"group": 2}),
    ((1, 8, 5, 5), (16, 8, 1, 1), {}),
    ((1, 2, 9), (3, 2, 3), {"dilations": [2], "pads": [2, 1]}),  # 1-D: natively the 2-D conv of height 1
    ((2, 8, 30), (16, 8, 3), {"pads": [1, 1], "strides": [2]}),  # Whisper's second stem conv, small
    ((1, 4, 20), (4, 1, 5), {"group": 4, "pads": [2, 2]}),
    ((1, 3, 10), (2, 3, 4), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 6, 6), (2, 3, 2, 2), {"auto_pad": "SAME_UPPER"}),
]


@pytest.mark.parametrize("xsh,wsh,attrs", CONVS)
@pytest.mark.parametrize("with_zp", [True, False])
@pytest.mark.parametrize("consts", [(), ("w", "wz")])
def test_conv_integer(check_op, xsh, wsh, attrs, with_zp, consts):
    inputs = {"x": q8(xsh, np.uint8), "w": q8(wsh, np.uint8)}
    if with_zp:
        inputs["xz"] = zp((), np.uint8)
        inputs["wz"] = zp((), np.uint8)
    check_op("ConvInteger", inputs, attrs, opset=10, consts=tuple(c for c in consts if c in inputs),
             expected=exact("ConvInteger", inputs, attrs), **EXACT)


@pytest.mark.parametrize("xsh,wsh,attrs", CONVS)
@pytest.mark.parametrize("xdt,wdt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("consts", [(), ("w", "ws", "wz", "b", "xs", "ys")])
def test_qlinear_conv(check_op, xsh, wsh, attrs, xdt, wdt, per_channel, bias, consts):
    oc = wsh[0]
    k = int(np.prod(wsh[1:]))
    ws = rng.uniform(0.005, 0.02, oc).astype(np.float32) if per_channel else np.array(0.01, np.float32)
    wz = zp((oc,), wdt) if per_channel else zp((), wdt)
    inputs = {"x": q8(xsh, xdt), "xs": np.array(0.02, np.float32), "xz": zp((), xdt),
              "w": q8(wsh, wdt), "ws": ws, "wz": wz,
              "ys": np.array(0.002 * k, np.float32), "yz": zp((), xdt)}
    if bias:
        inputs["b"] = rng.integers(-5000, 5000, oc).astype(np.int32)
    check_op("QLinearConv", inputs, attrs, opset=10, consts=tuple(c for c in consts if c in inputs),
             expected=exact("QLinearConv", inputs, attrs), **EXACT)


def test_qlinear_conv_errors():
    u, f = np.dtype(np.uint8), np.dtype(np.float32)
    metas = [Meta(u, (1, 3, 5, 5)), Meta(f, ()), Meta(u, ()), Meta(u, (4, 3, 3, 3)), Meta(f, (3,)), Meta(u, ()),
             Meta(f, ()), Meta(u, ())]
    k = lookup("QLinearConv", opset=10)
    with pytest.raises(GraphError, match=r"node 'c' \(QLinearConv\): w_scale has shape \(3,\): a scalar or 4 values"):
        k({}, metas, name="c", opset=10)
    metas[4] = Meta(f, ())
    with pytest.raises(GraphError, match=r"input 8 'B' is int64; QLinearConv-10 takes int32"):
        k({}, metas + [Meta(np.dtype(np.int64), (4,))], name="c", opset=10)


def test_qlinear_matmul_21_float16_scales():
    """QLinearMatMul-21 takes float16 scales: requantized as their float32 values are."""
    a = rng.integers(0, 255, (3, 4), dtype=np.uint8)
    b = rng.integers(0, 255, (4, 5), dtype=np.uint8)
    az, bz, yz = np.uint8(120), np.uint8(130), np.uint8(128)
    sa, sb, sy = np.float16(0.02), np.float16(0.03), np.float16(0.5)
    xs = [a, np.array(sa), np.array(az), b, np.array(sb), np.array(bz), np.array(sy), np.array(yz)]
    metas = [Meta(x.dtype, x.shape) for x in xs]
    y = lookup("QLinearMatMul", opset=21)({}, metas, name="q", opset=21).compute(*xs)[0]
    acc = (a.astype(np.int64) - 120) @ (b.astype(np.int64) - 130)
    mult = np.float32(sa) * np.float32(sb) / np.float32(sy)
    expected = np.clip(np.rint(acc.astype(np.float32) * mult) + 128, 0, 255).astype(np.uint8)
    np.testing.assert_array_equal(y, expected)
    with pytest.raises(GraphError, match=r"node 'q' \(QLinearMatMul\): input 1 'a_scale' is float16; "
                                         r"QLinearMatMul-10 takes float32"):
        lookup("QLinearMatMul", opset=20)({}, metas, name="q", opset=20)
