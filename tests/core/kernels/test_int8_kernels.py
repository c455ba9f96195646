"""The int8 kernels on their edge values, both plans (native: csrc/qgemm.c; numpy), against exact
references (int8_reference.py: numpy int64 products, ONNX's float32 requantization) and onnx's
reference evaluator (within one quantization step): activations and weights at 0/255 and -128/127,
zero points at the ends of their range, accumulators that saturate the output, and requantized values
exactly half-way between two steps (rounded half to even). Not onnxruntime's int8 products: on AVX2
without VNNI they saturate on these very values (int8_reference.py). Constant weights and scales, as in
a compiled model, so that the native plans take them (asserted)."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from ge.core.model.ir import Meta
from ge.core.kernels import backend, lookup

from .int8_reference import fma_atol, reference

pytestmark = pytest.mark.usefixtures("native_and_numpy")
rng = np.random.default_rng(19)
MS = "com.microsoft"
U8, S8 = np.uint8, np.int8


def edge(shape, dtype):
    """Values drawn mostly from the ends of the type's range (and some from anywhere)."""
    info = np.iinfo(dtype)
    ends = np.array([info.min, info.min + 1, info.max - 1, info.max, 0], np.int64)
    x = np.where(rng.random(shape) < 0.6, rng.choice(ends, shape), rng.integers(info.min, info.max + 1, shape))
    return x.astype(dtype)


def node_model(op, inputs: dict, consts: dict, order: list, attrs=None, domain="", out_type=TensorProto.FLOAT,
               outputs=(("y", None),)):
    """One node reading `order` (graph inputs `inputs`, initializers `consts`); outputs (name, type or None: out_type)."""
    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    outs = [helper.make_tensor_value_info(name, t or out_type, None) for name, t in outputs]
    node = helper.make_node(op, order, [name for name, _ in outputs], domain=domain, **(attrs or {}))
    graph = helper.make_graph([node], "t", ins, outs, [numpy_helper.from_array(v, k) for k, v in consts.items()])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(MS, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def check(op, inputs: dict, consts: dict, order: list, attrs=None, domain="", evaluator=True):
    """ge's planned kernel (every `consts` input known at build time) against the exact reference and,
    for the standard ops, onnx's reference evaluator; `order` names the node's inputs ("" = absent)."""
    arrays = {**inputs, **consts}
    xs = [arrays[n] if n else None for n in order]
    metas = [None if x is None else Meta(x.dtype, x.shape) for x in xs]
    kconsts = [arrays[n] if n in consts else None for n in order]
    kernel = lookup(op, domain, 17)(attrs or {}, metas, kconsts, opset=17, name="n").load()
    assert kernel.uses_native == (backend.select().lib is not None)
    out = kernel.infer()[0]
    want = reference(op, xs, attrs)
    assert want.dtype == out.dtype and want.shape == tuple(out.shape)
    y = np.full(out.shape, 77, out.dtype)
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    kernel.run(xs, [y], ws)
    if want.dtype == np.float32:  # float32(acc) * scale (+ bias): the native store step may fuse it
        np.testing.assert_allclose(y, want, rtol=0, atol=fma_atol(want))
    else:
        np.testing.assert_array_equal(y, want)
    if evaluator:  # onnx's evaluator multiplies the int32 accumulator in float64, ge in float32: where
        # float32(acc) rounds, the two land one step apart, never more
        model = node_model(op, inputs, consts, order, attrs, domain, helper.np_dtype_to_tensor_dtype(out.dtype))
        ref = ReferenceEvaluator(model).run(None, inputs)[0]
        assert ref.dtype == y.dtype and np.abs(ref.astype(np.int64) - y).max() <= (0 if ref.dtype == np.int32 else 1)
    return y


CONVS = [  # x shape, w shape, attrs: a pointwise conv, a padded strided conv, K not a multiple of 4,
    # depthwise stride 1 and 2 (padded on one side), a 7x7 plane, dilation
    ((1, 16, 5, 7), (40, 16, 1, 1), {}),
    ((2, 3, 11, 9), (8, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 5, 6, 6), (33, 5, 3, 1), {"pads": [1, 0, 1, 0]}),
    ((1, 24, 12, 12), (24, 1, 3, 3), {"group": 24, "pads": [1, 1, 1, 1]}),
    ((1, 24, 13, 12), (24, 1, 3, 3), {"group": 24, "pads": [0, 0, 1, 1], "strides": [2, 2]}),
    ((2, 40, 7, 7), (40, 1, 3, 3), {"group": 40, "pads": [1, 1, 1, 1]}),
    ((1, 8, 9, 9), (8, 1, 3, 3), {"group": 8, "pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 8, 9, 9), (12, 8, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    # depthwise rows longer than a vector with tails (stride 1: 70 and 131 bytes; stride 2: 67 -> 34
    # and 65 -> 33 columns), an even number of taps (2x2) and 25 taps (5x5, an odd last pair)
    ((1, 3, 5, 131), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 4, 9, 70), (4, 1, 2, 2), {"group": 4}),
    ((1, 3, 7, 67), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 2, 9, 65), (2, 1, 5, 5), {"group": 2, "pads": [2, 2, 2, 2], "strides": [2, 2]}),
    # depthwise strides 1 x 2 and 3 x 3 (the phases' rows from a stride-2 pick and byte by byte), uneven pads
    ((1, 5, 8, 40), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1], "strides": [1, 2]}),
    ((1, 6, 11, 17), (6, 1, 3, 3), {"group": 6, "pads": [1, 2, 0, 1], "strides": [3, 3]}),
    # phase rows exactly one vector wide at AVX2 (32 columns at stride 1, 16 at stride 2)
    ((1, 3, 6, 30), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ((1, 3, 7, 29), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    # small planes, 8 channels an item at AVX2 (their rows stored by vectors of 8, 16 and 32 bytes: widths 4,
    # 7, 13, 21), channel counts leaving a short last item, the planes read in place but at the tensor's ends
    ((1, 19, 7, 7), (19, 1, 3, 3), {"group": 19, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 17, 14, 13), (17, 1, 3, 3), {"group": 17, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 13, 9, 13), (13, 1, 3, 3), {"group": 13, "pads": [1, 1, 1, 1]}),
    ((1, 11, 5, 21), (11, 1, 3, 3), {"group": 11, "pads": [1, 1, 1, 1]}),
    # gathered panels whose output rows (38 columns) straddle panels: stride 2 padded, stride 1, and an
    # unpadded stride-2 pointwise conv (int8 input flipped as it is gathered)
    ((1, 3, 9, 75), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 5, 4, 40), (9, 5, 3, 3), {}),
    ((1, 8, 6, 75), (12, 8, 1, 1), {"strides": [2, 2]}),
]
# (x type, w type, x zero point, w zero point, y zero point): ends of the ranges, onnxruntime's combinations
ZPS = [(U8, S8, 0, 0, 255), (U8, S8, 255, -128, 0), (S8, S8, -128, 127, 127), (S8, S8, 127, 0, -128),
       (U8, U8, 0, 255, 128)]


@pytest.mark.parametrize("xsh,wsh,attrs", CONVS)
@pytest.mark.parametrize("xdt,wdt,xz,wz,yz", ZPS)
def test_qlinear_conv_edges(xsh, wsh, attrs, xdt, wdt, xz, wz, yz):
    oc = wsh[0]
    k = int(np.prod(wsh[1:]))
    per_channel = wdt == S8
    ws = (rng.choice([0.5, 1.0, 0.25], oc) if per_channel else np.array(0.5)).astype(np.float32)
    # y_scale 1 or 2 with x_scale 1: products land on x.5 (ties) and beyond the output range (saturation)
    consts = {"xs": np.array(1.0, np.float32), "xz": np.array(xz, xdt), "w": edge(wsh, wdt), "ws": ws,
              "wz": (np.full(oc, wz) if per_channel else np.array(wz)).astype(wdt),
              "ys": np.array(2.0 * k, np.float32), "yz": np.array(yz, xdt),
              "b": rng.integers(-40000, 40000, oc).astype(np.int32)}
    if per_channel and wz != 0:
        consts["wz"] = np.zeros(oc, wdt)  # onnxruntime: per-channel int8 weights are symmetric
    check("QLinearConv", {"x": edge(xsh, xdt)}, consts, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], attrs)


# The depthwise convolution of AVX2 builds in float32 by groups of 16 channels (csrc/qgemm.c dwf_item): channels
# not a multiple of 16 (the last group's missing channels stored nowhere) and exactly 16, batch 2, 1x1 / 5x5
# kernels, strides 1 x 2, dilation, asymmetric pads (right columns the outputs never read), a plane of 15 output
# pixels (the per-channel kernel) and of 16, bands of output rows (over 512 pixels: 40 x 40 in 3 bands, the last
# one longer; 600-wide rows, a band each), an input of 4 pixels inside wide padding. On the channels' own planes
# (dwp_item: 3x3, rows of 8 outputs or more at stride 2, of 48 or more at stride 1 on AVX2-only builds): odd
# widths (the last 8 outputs again) and heights (a last row alone), no padding, asymmetric and wide pads, batch 2,
# rows of 9 and 8 outputs. On planes of int16 column pairs (dwq_item: 3x3, stride 2 rows under 48 outputs,
# stride 1 under 128, both groups of a pixel in a zmm on AVX-512 builds; even widths or odd ones under 16; most shapes above): odd left pads (the outputs' columns start on a pair's second), an
# input of 8 pixels (gathered one by one)
DEPTHWISE = [
    ((1, 33, 7, 7), (33, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 19, 9, 9), (19, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 16, 14, 14), (16, 1, 5, 5), {"pads": [2, 2, 2, 2]}),
    ((1, 17, 6, 11), (17, 1, 1, 1), {}),
    ((1, 21, 9, 12), (21, 1, 3, 3), {"pads": [0, 2, 1, 0], "strides": [1, 2]}),
    ((1, 18, 11, 11), (18, 1, 3, 3), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}),
    ((1, 20, 8, 9), (20, 1, 3, 3), {"pads": [0, 0, 1, 1], "strides": [2, 2]}),
    ((1, 20, 3, 5), (20, 1, 1, 1), {}),
    ((1, 20, 4, 4), (20, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 17, 40, 40), (17, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 17, 3, 600), (17, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 17, 2, 2), (17, 1, 3, 3), {"pads": [3, 3, 3, 3]}),
    ((1, 19, 33, 35), (19, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 17, 34, 40), (17, 1, 3, 3), {"strides": [2, 2]}),
    ((1, 18, 20, 37), (18, 1, 3, 3), {"pads": [0, 2, 1, 0], "strides": [2, 2]}),
    ((1, 17, 9, 36), (17, 1, 3, 3), {"pads": [2, 2, 2, 2], "strides": [2, 2]}),
    ((2, 20, 32, 32), (20, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 17, 5, 70), (17, 1, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 17, 6, 67), (17, 1, 3, 3), {}),
    ((1, 17, 16, 17), (17, 1, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 17, 15, 16), (17, 1, 3, 3), {"pads": [0, 0, 1, 1], "strides": [2, 2]}),
    ((1, 18, 10, 12), (18, 1, 3, 3), {"pads": [1, 3, 0, 1]}),
    ((1, 17, 12, 20), (17, 1, 3, 3), {"pads": [3, 3, 3, 3], "strides": [2, 2]}),
    ((1, 17, 2, 4), (17, 1, 3, 3), {"pads": [2, 2, 2, 2]}),
]


@pytest.mark.parametrize("xsh,wsh,attrs", DEPTHWISE)
@pytest.mark.parametrize("xdt,wdt,xz,wz,yz", ZPS[1:])
@pytest.mark.parametrize("case", ["edges", "big bias", "big scale"])
def test_qlinear_conv_depthwise_groups(xsh, wsh, attrs, xdt, wdt, xz, wz, yz, case):
    """Bit-exact on edge values. big bias: biases past 2^24 - 64 * 255^2 (the store then adds them in
    int32), scaled to land inside the output range; big scale: scales of 2^14-2^16, products past 2^31
    (the store's clamp before the conversion)."""
    oc = wsh[0]
    per_channel = wdt == S8
    ws = (rng.choice([0.5, 1.0, 0.25], oc) if per_channel else np.array(0.5)).astype(np.float32)
    b = 2 ** 25 + rng.integers(0, 2 ** 22, oc) if case == "big bias" else rng.integers(-40000, 40000, oc)
    ys = {"edges": 2.0 * np.prod(wsh[1:]), "big bias": 2.0 ** 19, "big scale": 2.0 ** -16}[case]
    consts = {"xs": np.array(1.0, np.float32), "xz": np.array(xz, xdt), "w": edge(wsh, wdt), "ws": ws,
              "wz": (np.zeros(oc) if per_channel else np.array(wz)).astype(wdt), "ys": np.array(ys, np.float32),
              "yz": np.array(yz, xdt), "b": b.astype(np.int32)}
    check("QLinearConv", {"x": edge(xsh, xdt)}, consts, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
          {**attrs, "group": oc})


def test_qlinear_conv_depthwise_bias_past_float32():
    """A bias of 2^25 + 2^19 + 2 is no float32 (it rounds to 2^25 + 2^19): with accumulators of 0-9 and
    a scale of 2^-20, acc + bias lands on x.5 and past it only as the int32 sum does (acc 1: 2^25 + 2^19
    + 3 rounds to + 4, 33 after the scale; acc added to the float bias: 32.5, 32), so the float32 path
    must add such a bias in int32."""
    x = (7 + rng.integers(0, 2, (1, 20, 6, 6))).astype(U8)  # x - zx: 0 or 1
    consts = {"xs": np.array(1.0, np.float32), "xz": np.array(7, U8), "w": np.full((20, 1, 3, 3), 101, U8),
              "ws": np.array(0.5, np.float32), "wz": np.array(100, U8), "ys": np.array(2.0 ** 19, np.float32),
              "yz": np.array(0, U8), "b": np.full(20, 2 ** 25 + 2 ** 19 + 2, np.int32)}
    y = check("QLinearConv", {"x": x}, consts, ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
              {"group": 20, "pads": [1, 1, 1, 1]})
    assert {32, 33} <= set(np.unique(y))


@pytest.mark.parametrize("xsh,wsh,attrs", CONVS[:3] + CONVS[6:])
def test_conv_integer_edges(xsh, wsh, attrs):
    check("ConvInteger", {"x": edge(xsh, U8)}, {"w": edge(wsh, U8), "xz": np.array(255, U8), "wz": np.array(0, U8)},
          ["x", "w", "xz", "wz"], attrs)


MATMULS = [((5, 36), (36, 40)), ((2, 9, 64), (64, 7)), ((33, 130), (130, 65)),
           ((3, 13), (13, 17)), ((9, 7), (7, 33))]  # the last quad of K 1, 2 or 3 bytes long


@pytest.mark.parametrize("ash,bsh", MATMULS)
@pytest.mark.parametrize("adt,bdt,az,bz,yz", [(U8, S8, 255, 0, 0), (U8, U8, 0, 255, 255), (S8, S8, -128, 127, 127),
                                               (U8, S8, 128, -128, 128)])
def test_qlinear_matmul_edges(ash, bsh, adt, bdt, az, bz, yz):
    n = bsh[-1]
    ydt = S8 if adt == S8 else U8
    consts = {"as": np.array(1.0, np.float32), "az": np.array(az, adt), "b": edge(bsh, bdt),
              "bs": rng.choice([1.0, 0.5], n).astype(np.float32), "bz": np.full(n, bz, bdt),
              "ys": np.array(2.0 * ash[-1], np.float32), "yz": np.array(yz, ydt)}
    check("QLinearMatMul", {"a": edge(ash, adt)}, consts, ["a", "as", "az", "b", "bs", "bz", "ys", "yz"])


@pytest.mark.parametrize("ash,bsh", MATMULS)
@pytest.mark.parametrize("adt,bdt,az,bz", [(U8, S8, 255, -128), (U8, U8, 0, 255), (S8, S8, 127, -128)])
def test_matmul_integer_edges(ash, bsh, adt, bdt, az, bz):
    consts = {"b": edge(bsh, bdt), "az": np.array(az, adt), "bz": np.full(bsh[-1], bz, bdt)}
    check("MatMulInteger", {"a": edge(ash, adt)}, consts, ["a", "b", "az", "bz"])


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("quantized", [True, False])
@pytest.mark.parametrize("adt,bdt,az,yz", [(U8, S8, 255, 0), (S8, S8, -128, 127)])
def test_qgemm_edges(trans_b, quantized, adt, bdt, az, yz):
    m, k, n = 6, 70, 45
    b = edge((n, k) if trans_b else (k, n), bdt)
    consts = {"as": np.array(1.0, np.float32), "az": np.array(az, adt), "b": b,
              "bs": rng.choice([1.0, 0.5], n).astype(np.float32), "bz": np.zeros(n, bdt),
              "c": rng.integers(-70000, 70000, n).astype(np.int32)}
    order = ["a", "as", "az", "b", "bs", "bz", "c"]
    if quantized:
        consts.update(ys=np.array(2.0 * k, np.float32), yz=np.array(yz, adt))
        order += ["ys", "yz"]
    check("QGemm", {"a": edge((m, k), adt)}, consts, order, {"transB": trans_b}, domain=MS, evaluator=False)


@pytest.mark.parametrize("ash,bsh", MATMULS)
@pytest.mark.parametrize("bdt", [S8, U8])
@pytest.mark.parametrize("bias", [True, False])
def test_matmul_integer_to_float(ash, bsh, bdt, bias):
    n = bsh[-1]
    inputs = {"a": edge(ash, U8), "as": np.array(0.0173, np.float32), "az": np.array(255, U8)}
    consts = {"b": edge(bsh, bdt), "bs": rng.uniform(0.001, 0.01, n).astype(np.float32),
              "bz": np.full(n, 3, bdt)}
    order = ["a", "b", "as", "bs", "az", "bz"]
    if bias:
        consts["bias"] = rng.standard_normal(n).astype(np.float32)
        order.append("bias")
    check("MatMulIntegerToFloat", inputs, consts, order, domain=MS, evaluator=False)


@pytest.mark.parametrize("shape", [(2, 8, 33), (3, 7, 11)])  # whole vectors; a tail at every vector width
@pytest.mark.parametrize("dtype", [U8, S8])
def test_qlinear_add_edges(dtype, shape):
    info = np.iinfo(dtype)
    inputs = {"a": edge(shape, dtype), "b": edge(shape, dtype)}
    consts = {"as": np.array(0.5, np.float32), "az": np.array(info.max, dtype), "bs": np.array(1.5, np.float32),
              "bz": np.array(info.min, dtype), "cs": np.array(1.0, np.float32), "cz": np.array(0, dtype)}
    check("QLinearAdd", inputs, consts, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], domain=MS, evaluator=False)


@pytest.mark.parametrize("adt", [U8, S8])
def test_matmul_integer_to_float_runs_again_on_its_buffers(adt):
    """As an execution runs it: the same activation, scale and zero point arrays with new values at every
    run (DynamicQuantizeLinear's outputs); each run against the exact reference, and the native plan
    prepares its call once (the key holds the activation, not its per-run reshape)."""
    b, bs = edge((40, 24), S8), rng.uniform(0.001, 0.01, 24).astype(np.float32)
    a, a_scale, a_zp = np.zeros((2, 5, 40), adt), np.zeros((), np.float32), np.zeros((), adt)
    metas = [Meta(x.dtype, x.shape) for x in (a, b, a_scale, bs, a_zp)]
    kernel = lookup("MatMulIntegerToFloat", MS, 1)({}, metas, [None, b, None, bs, None], name="n").load()
    y = np.zeros(kernel.infer()[0].shape, np.float32)
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    prepared = []
    for scale in (0.02, 0.5, 0.003):
        a[...], a_scale[...], a_zp[...] = edge(a.shape, adt), scale, edge((), adt)
        kernel.run([a, b, a_scale, bs, a_zp], [y], ws)
        want = reference("MatMulIntegerToFloat", [a, b, a_scale, bs, a_zp])
        np.testing.assert_allclose(y, want, rtol=0, atol=fma_atol(want))
        if kernel.uses_native:
            prepared.append(kernel.qn.calls.local.entry[1])
    assert all(call is prepared[0] for call in prepared)


def test_dynamic_quantize_linear_on_both_plans():
    x = np.concatenate([rng.standard_normal(999).astype(np.float32) * 3, [0.0, 2.5, -2.5]]).astype(np.float32)
    import onnxruntime as ort
    model = node_model("DynamicQuantizeLinear", {"x": x}, {}, ["x"],
                       outputs=(("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8)))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    kernel = lookup("DynamicQuantizeLinear", "", 17)({}, [Meta(x.dtype, x.shape)], name="n").load()
    ys = [np.zeros(m.shape, m.dtype) for m in kernel.infer()]
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    kernel.run([x], ys, ws)
    for got, w in zip(ys, want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("at", [0, 17, 35, 63, 200, 245, 249])
def test_dynamic_quantize_linear_range_anywhere(at):
    """The range's ends in each of the native pass's running extremes (4 blocks of vectors), in its whole
    vectors after the blocks and in its scalar tail; the kernel run again on the same buffers with new
    values (its prepared call), then on a strided x, then bound as a task; each against onnxruntime."""
    import onnxruntime as ort
    model = node_model("DynamicQuantizeLinear", {"x": np.zeros(250, np.float32)}, {}, ["x"],
                       outputs=(("y", TensorProto.UINT8), ("s", TensorProto.FLOAT), ("z", TensorProto.UINT8)))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    kernel = lookup("DynamicQuantizeLinear", "", 17)({}, [Meta(np.dtype(np.float32), (250,))], name="n").load()
    ys = [np.zeros(m.shape, m.dtype) for m in kernel.infer()]
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    x = np.empty(250, np.float32)
    for shift in (1.0, -1.0):
        x[:] = rng.uniform(-1, 1, 250).astype(np.float32) + shift
        x[at], x[249 - at] = -9.0, 7.0
        kernel.run([x], ys, ws)
        for got, w in zip(ys, session.run(None, {"x": x})):
            np.testing.assert_array_equal(got, w)
    wide = np.repeat(-x, 2)
    kernel.run([wide[::2]], ys, ws)
    for got, w in zip(ys, session.run(None, {"x": -x})):
        np.testing.assert_array_equal(got, w)
    for xb in (x, wide[::2]):  # bound as the runtime binds a task, then run with new values
        call = kernel.bound([xb], ys, ws)
        xb[:] = rng.uniform(-3, 2, 250).astype(np.float32)
        call()
        for got, w in zip(ys, session.run(None, {"x": np.ascontiguousarray(xb)})):
            np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("dtype,zp", [(U8, 0), (U8, 255), (U8, 128), (S8, -128), (S8, 127), (S8, 0)])
def test_quantize_linear_per_tensor(dtype, zp):
    """The native pass (float32 to 8 bits, constant per-tensor scale and zero point; numpy's without the
    native kernels) against onnxruntime and onnx's reference: ties (half to even), saturation at both ends, a tail at every vector width."""
    import onnxruntime as ort
    s = np.float32(0.25)
    ties = (np.arange(-600, 600, dtype=np.float32) + 0.5) * s
    x = np.concatenate([ties, rng.standard_normal(37).astype(np.float32) * 40, [1e9, -1e9, 0.0]]).astype(np.float32)
    consts = {"s": np.array(s), "z": np.array(zp, dtype)}
    model = node_model("QuantizeLinear", {"x": x}, consts, ["x", "s", "z"], out_type=helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ref = ReferenceEvaluator(model).run(None, {"x": x[:-3]})[0]  # (its cast of 4e9 wraps: not the ends)
    np.testing.assert_array_equal(want[:-3], ref)
    kernel = lookup("QuantizeLinear", "", 17)({}, [Meta(x.dtype, x.shape), Meta(np.dtype(np.float32), ()), Meta(np.dtype(dtype), ())],
                                              [None, consts["s"], consts["z"]], opset=17, name="n").load()
    assert kernel.native == (backend.select().lib is not None)
    y = np.full(x.shape, 77, dtype)
    ws = np.zeros(kernel.workspace_nbytes(), np.uint8) if kernel.workspace_nbytes() else None
    kernel.run([x, consts["s"], consts["z"]], [y], ws)
    np.testing.assert_array_equal(y, want)
