"""The blocked-layout convolution (core/kernels/ops/nchwc.py, csrc/nchwc.c) and its reorders, on every
built native level this CPU runs (conftest.py's fixture `nat`; a block of 16 channels is one AVX-512
vector, two AVX2 ones, four SSE ones), against onnxruntime's Conv (+ Add) (+ activation)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from ge.core.kernels import native
from ge.core.kernels.ops.nchwc import NchwcConv, blocked_empty, blocked_shape, reorder

RELU = native.Act(native.ACT_CLAMP, 0.0, float("inf"))
LEAKY = native.Act(native.ACT_LEAKY_RELU, 0.1)


def _op(name, **attrs):
    return lambda x, y: ([helper.make_node(name, [x], [y], **attrs)], [])


def _clip(x, y):
    lo, hi = np.array(0.0, np.float32), np.array(6.0, np.float32)
    return [helper.make_node("Clip", [x, "lo", "hi"], [y])], [numpy_helper.from_array(lo, "lo"),
                                                               numpy_helper.from_array(hi, "hi")]


def _swish(x, y):  # x * sigmoid(alpha x): no ONNX op of its own
    alpha = numpy_helper.from_array(np.array(1.5, np.float32), "alpha")
    return [helper.make_node("Mul", [x, "alpha"], ["ax"]), helper.make_node("Sigmoid", ["ax"], ["sax"]),
            helper.make_node("Mul", [x, "sax"], [y])], [alpha]


# every activation of abi.h: the kernel's Act, and the onnxruntime nodes (and constants) from x to y
ACTS = {None: (None, None), "Relu": (RELU, _op("Relu")), "LeakyRelu": (LEAKY, _op("LeakyRelu", alpha=0.1)),
        "HardSigmoid": (native.Act(native.ACT_HARDSIGMOID, 0.2, 0.5), _op("HardSigmoid", alpha=0.2, beta=0.5)),
        "Clip": (native.Act(native.ACT_CLAMP, 0.0, 6.0), _clip), "HardSwish": (native.Act(native.ACT_HARDSWISH),
                                                                              _op("HardSwish")),
        "Sigmoid": (native.Act(native.ACT_SIGMOID), _op("Sigmoid")), "Swish": (native.Act(native.ACT_SWISH, 1.5), _swish),
        "Gelu": (native.GELU, _op("Gelu"))}


def onnxruntime_conv(x, w, b, attrs, z=None, act=None):
    nodes, out = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)], "c"
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
    inputs, feeds = [helper.make_tensor_value_info("x", 1, x.shape)], {"x": x}
    if z is not None:
        nodes.append(helper.make_node("Add", ["c", "z"], ["a"]))
        inputs.append(helper.make_tensor_value_info("z", 1, z.shape))
        feeds["z"], out = z, "a"
    if act is not None:
        act_nodes, act_inits = ACTS[act][1](out, "y")
        nodes, inits, out = nodes + act_nodes, inits + act_inits, "y"
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, 1, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])  # 20: Gelu
    model.ir_version = 8
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


# (n, c, h, w, oc, kernel, strides, pads (top, left, bottom, right), dilations, residual, activation)
CASES = [
    (1, 16, 8, 8, 16, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, None),         # one block each way
    (1, 19, 14, 14, 37, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), True, "Relu"),      # odd channels, a flat plane in 2 segments
    (2, 24, 15, 17, 70, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "Relu"),     # batch 2, 255 pixels (3 segments)
    (1, 40, 13, 11, 20, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False, None),       # 1x1 stride 2 (ResNet's downsample)
    (2, 19, 9, 11, 37, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "Relu"),
    (1, 5, 13, 7, 70, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False, "LeakyRelu"),  # 5 groups of blocks at VL 4
    (1, 32, 10, 10, 80, (5, 5), (2, 2), (2, 2, 2, 2), (1, 1), True, None),
    (1, 3, 17, 17, 33, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), False, "HardSigmoid"),  # dilation 2
    (3, 8, 5, 30, 8, (7, 7), (2, 2), (3, 3, 3, 3), (1, 1), True, "Relu"),         # taps wider than the rows
    (1, 20, 12, 9, 18, (3, 2), (3, 1), (0, 2, 1, 0), (1, 2), False, None),        # stride 3, uneven kernel and pads
    (1, 64, 7, 7, 64, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "Relu"),        # ResNet's 7x7 plane
    (1, 4, 4, 4, 6, (3, 3), (1, 1), (4, 4, 4, 4), (1, 1), False, None),           # rows and columns of padding only
    # the pointwise path (1x1, no padding): pixels counted over rows and images, tiles that cross a row or
    # an image gathered
    (3, 40, 14, 14, 70, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), True, "Relu"),      # 7x7 outputs: tiles across rows, images
    (4, 19, 7, 7, 24, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "HardSwish"),  # 2 blocks (tall tiles) across images
    (2, 24, 9, 10, 33, (1, 1), (1, 2), (0, 0, 0, 0), (1, 1), True, "Sigmoid"),    # stride 2 across only
    (2, 16, 10, 9, 20, (1, 1), (2, 1), (0, 0, 0, 0), (1, 1), False, "Swish"),     # stride 2 down only
    (2, 33, 5, 3, 50, (1, 1), (3, 3), (0, 0, 0, 0), (1, 1), True, "Gelu"),        # 2x1 outputs, one tile over 2 images
    # few pixels, many channels (CRNN's last stage): input channels in passes of 8 blocks (31 blocks: 8, 8, 8, 7),
    # a last group of 3 output blocks, the next pass's weights prefetched; one segment of 240 pixels
    (1, 488, 3, 80, 488, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "HardSwish"),
    (2, 300, 3, 7, 200, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), True, "Relu"),      # 42 pixels over 2 images, 19 blocks in
    (1, 136, 20, 15, 40, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, None),      # 2 segments, passes of 8 + 1 blocks
    (1, 16, 6, 6, 20, (1, 1), (1, 1), (0, 0, 1, 1), (1, 1), False, "Relu"),       # 1x1 padded: the rows path
    (2, 18, 6, 7, 20, (1, 1), (2, 2), (1, 0, 0, 1), (1, 1), True, "LeakyRelu"),
    # ResNet-50's and MobileNetV2's layers as they are
    (1, 64, 56, 56, 256, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), True, "Relu"),     # layer1's conv3 over its residual
    (1, 256, 56, 56, 512, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False, None),     # layer2's downsample
    (2, 1024, 14, 14, 2048, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), False, None),   # layer4's downsample, batch 2
    (2, 512, 7, 7, 2048, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), True, "Relu"),     # layer4's conv3, batch 2
    (1, 2048, 7, 7, 512, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "Relu"),    # layer4's conv1: 8 passes
    (1, 128, 28, 28, 128, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), False, "Relu"),   # layer2's conv2
    (1, 32, 28, 28, 64, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, "Relu"),     # layer3's conv2 (thinner): 14-wide
                                                                                  # rows, tiles of 3 and 2 and 1 pixels
    (1, 24, 56, 56, 144, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "Clip"),    # MobileNetV2's expansion, Clip 0..6
    (2, 960, 7, 7, 160, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), True, None),        # its projection over the residual
    # X beyond 4 MB: the tiles prefetch it
    (2, 256, 56, 56, 64, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), False, "Relu"),    # layer1's conv1 at batch 2
    (1, 88, 112, 112, 24, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), True, "Clip"),
]


@pytest.mark.parametrize("n, c, h, w, oc, kernel, strides, pads, dil, residual, act", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_conv_matches_onnxruntime(nat, n, c, h, w, oc, kernel, strides, pads, dil, residual, act, threads):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, *kernel)) / np.sqrt(c * np.prod(kernel))).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    native.set_threads(threads)
    try:
        conv = NchwcConv(nat, x.shape, oc, kernel, strides=strides, pads=pads, dilations=dil, act=ACTS[act][0])
        conv.pack(wt, b)
        z = rng.standard_normal(conv.y_shape).astype(np.float32) if residual else None
        blk = nat.nchwc_block
        xb, yb = blocked_empty(x.shape, blk), blocked_empty(conv.y_shape, blk)
        reorder(nat, x, xb, True).run()
        if residual:  # Y written over Z, as a ResNet block's output
            reorder(nat, z, yb, True).run()
        conv.call(xb, yb, yb if residual else None).run()
        y = np.empty(conv.y_shape, np.float32)
        reorder(nat, yb, y, False).run()
    finally:
        native.set_threads(native.default_threads())
    attrs = {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads), "dilations": list(dil)}
    want = onnxruntime_conv(x, wt, b, attrs, z, act)
    assert y.shape == want.shape
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if oc % blk:  # the padding channels hold act(0): zero weights and bias (and Z's zeros); the next conv ignores them
        assert np.all(yb[:, -1, ..., oc % blk:] == (0.5 if act in ("HardSigmoid", "Sigmoid") else 0.0))


@pytest.mark.parametrize("c, kernel, pads", [(128, (3, 3), (1, 1, 1, 1)), (96, (5, 5), (2, 2, 2, 2)), (40, (1, 1), (0, 0, 0, 1))])
def test_passes_sized_to_a_smaller_l1(nat, c, kernel, pads):
    """On a CPU with a smaller L1d (a Zen 3's 32 KB) a pass over input channels takes fewer blocks
    (csrc/caches.h): the same convolution either way."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, c, 12, 10)).astype(np.float32)
    wt = (rng.standard_normal((64, c, *kernel)) / np.sqrt(c * np.prod(kernel))).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    attrs = {"kernel_shape": list(kernel), "pads": list(pads)}
    want = onnxruntime_conv(x, wt, b, attrs, act="Relu")
    try:
        for l1d in (32 << 10, 16 << 10):
            nat.cache_sizes(l1d, 0)
            yb = _blocked_conv(nat, x, wt, b, kernel, (1, 1), pads, 1)
            y = np.empty(want.shape, np.float32)
            reorder(nat, yb, y, False).run()
            np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    finally:
        nat.cache_sizes(0, 0)


def _blocked_conv(nat, x, wt, b, kernel, strides, pads, threads):
    native.set_threads(threads)
    try:
        conv = NchwcConv(nat, x.shape, wt.shape[0], kernel, strides=strides, pads=pads, act=RELU)
        conv.pack(wt, b)
        xb, yb = blocked_empty(x.shape, nat.nchwc_block), blocked_empty(conv.y_shape, nat.nchwc_block)
        reorder(nat, x, xb, True).run()
        conv.call(xb, yb, None).run()
        return yb
    finally:
        native.set_threads(native.default_threads())


@pytest.mark.parametrize("c, h, oc, strides", [(32, 28, 64, (2, 2)), (64, 7, 64, (1, 1))])
def test_a_pixels_sum_does_not_depend_on_its_tile(nat, c, h, oc, strides):
    """On 2 threads the rows are split into more items, so the edge columns' tiles down a column and the
    rows' tiles change (a pixel in a tile of 3, 2 or 1): each pixel's sum is the same FMAs in the same
    order whatever tile computes it, so the output is bit-identical (the executors split rows as they
    will, tests/e2e/test_samples.py)"""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, c, h, h)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    one, two = (_blocked_conv(nat, x, wt, b, (3, 3), strides, (1, 1, 1, 1), t) for t in (1, 2))
    assert np.array_equal(one, two)


# (n, c, h, w, oc, kernel, strides, pads, residual, activation) of an NCHW X (planar): stems
PLANAR_CASES = [
    (1, 3, 33, 31, 32, (3, 3), (2, 2), (1, 1, 1, 1), False, "Clip"),      # MobileNetV2's: 3x4 tiles at AVX2
    (2, 3, 20, 21, 64, (7, 7), (2, 2), (3, 3, 3, 3), True, "Relu"),        # ResNet-50's, two groups, a residual
    (1, 5, 13, 7, 24, (3, 3), (1, 1), (1, 1, 1, 1), False, "HardSwish"),   # stride 1, 24 channels (1.5 blocks)
    (1, 1, 9, 10, 16, (3, 3), (3, 2), (0, 2, 1, 0), False, "Sigmoid"),     # one channel, uneven strides and pads
]


@pytest.mark.parametrize("n, c, h, w, oc, kernel, strides, pads, residual, act", PLANAR_CASES)
def test_planar_input_matches_onnxruntime(nat, n, c, h, w, oc, kernel, strides, pads, residual, act):
    """An NCHW X read in place (a stem's few channels), Y blocked: onnxruntime's Conv, the padding channels act(0)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((oc, c, *kernel)) / np.sqrt(c * np.prod(kernel))).astype(np.float32)
    b = rng.standard_normal(oc).astype(np.float32)
    conv = NchwcConv(nat, x.shape, oc, kernel, strides=strides, pads=pads, act=ACTS[act][0], planar=True)
    conv.pack(wt, b)
    z = rng.standard_normal(conv.y_shape).astype(np.float32) if residual else None
    blk = nat.nchwc_block
    yb = blocked_empty(conv.y_shape, blk)
    if residual:
        reorder(nat, z, yb, True).run()
    conv.call(x, yb, yb if residual else None).run()
    y = np.empty(conv.y_shape, np.float32)
    reorder(nat, yb, y, False).run()
    want = onnxruntime_conv(x, wt, b, {"kernel_shape": list(kernel), "strides": list(strides), "pads": list(pads)}, z, act)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    if oc % blk:
        assert np.all(yb[:, -1, ..., oc % blk:] == (0.5 if act == "Sigmoid" else 0.0))


def test_residual_in_its_own_buffer(nat):
    """Z apart from Y gives what Z under Y gives, and Z is left as it was."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 21, 9, 9)).astype(np.float32)
    conv = NchwcConv(nat, x.shape, 35, (3, 3), pads=(1, 1, 1, 1), act=RELU)
    conv.pack(rng.standard_normal((35, 21, 3, 3)).astype(np.float32) * 0.1, rng.standard_normal(35).astype(np.float32))
    blk = nat.nchwc_block
    xb, zb, y1, y2 = (blocked_empty(s, blk) for s in (x.shape, conv.y_shape, conv.y_shape, conv.y_shape))
    reorder(nat, x, xb, True).run()
    reorder(nat, rng.standard_normal(conv.y_shape).astype(np.float32), zb, True).run()
    z_before = zb.copy()
    conv.call(xb, y1, zb).run()
    np.copyto(y2, zb)
    conv.call(xb, y2, y2).run()
    np.testing.assert_array_equal(zb, z_before)
    np.testing.assert_array_equal(y1, y2)


@pytest.mark.parametrize("shape", [(1, 16, 4, 4), (2, 3, 5, 7), (1, 37, 14, 14), (3, 9, 1, 1), (1, 33, 17, 3)])
def test_reorders_round_trip(nat, shape):
    """NCHW -> blocked puts channel c of pixel p at [c // B][p][c % B] with zeros past C; back is exact."""
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    blk = nat.nchwc_block
    xb = blocked_empty(shape, blk)
    xb[...] = np.nan  # every element must be written, the padding channels as zeros
    reorder(nat, x, xb, True).run()
    n, c, h, w = shape
    want = np.zeros((n, -(-c // blk) * blk, h, w), np.float32)
    want[:, :c] = x
    assert xb.shape == blocked_shape(shape, blk)
    np.testing.assert_array_equal(xb, want.reshape(n, -1, blk, h, w).transpose(0, 1, 3, 4, 2))
    back = np.full(shape, np.nan, np.float32)
    reorder(nat, xb, back, False).run()
    np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("shape, kernel", [((0, 20, 7, 7), (3, 3)), ((1, 20, 7, 0), (3, 3)), ((0, 20, 7, 7), (1, 1)),
                                           ((1, 20, 0, 7), (1, 1))], ids=["no-batch", "no-columns", "pointwise-no-batch",
                                                                          "pointwise-no-rows"])
def test_empty_tensors_are_nothing_to_do(nat, shape, kernel):
    """An empty X or Y (a hostile OM's shapes, or a batch of none) writes nothing and divides by nothing."""
    pads = (1, 1, 1, 1) if kernel == (3, 3) else (0, 0, 0, 0)
    conv = NchwcConv(nat, shape, 24, kernel, pads=pads)
    conv.pack(np.ones((24, 20) + kernel, np.float32), None)
    assert conv.y_shape == (shape[0], 24) + shape[2:]
    x, y = blocked_empty(shape, nat.nchwc_block), blocked_empty(conv.y_shape, nat.nchwc_block)
    conv.call(x, y).run()


@pytest.mark.parametrize("planes, h, w, oh, ow", [(0, 8, 8, 4, 4), (2, 8, 0, 4, 0), (2, 0, 8, 0, 4)],
                         ids=["no-planes", "no-columns", "no-rows"])
def test_empty_max_pool_is_nothing_to_do(nat, planes, h, w, oh, ow):
    """The blocked MaxPool of an empty tensor writes nothing and divides by nothing."""
    x, y = (np.zeros((max(planes, 1), max(a, 1), max(b, 1), nat.nchwc_block), np.float32) for a, b in ((h, w), (oh, ow)))
    y_before = y.copy()
    nat.nchwc_max_pool_call(x, y, (planes, h, w, oh, ow, 2, 2, 2, 2, 0, 0, 1, 1)).run()
    np.testing.assert_array_equal(y, y_before)


def _sequential_max_pool(x, oh, ow, k, s, p):
    """MaxPool of blocked x [planes][h][w][16] as nchwc_pool.c's vmax takes it: taps in order from -inf,
    a later tap taken where greater or NaN (so a NaN wins, and of equal taps, -0 and +0, the first stays)"""
    planes, h, w, blk = x.shape
    y = np.full((planes, oh, ow, blk), -np.inf, np.float32)
    for i in range(oh):
        for j in range(ow):
            for kh in range(k):
                for kw in range(k):
                    ih, iw = i * s - p + kh, j * s - p + kw
                    if 0 <= ih < h and 0 <= iw < w:
                        v, m = x[:, ih, iw], y[:, i, j]
                        y[:, i, j] = np.where((v > m) | np.isnan(v), v, m)
    return y


@pytest.mark.parametrize("k, s, p", [(3, 2, 1), (5, 1, 2)], ids=["resnet-3x3s2", "sppf-5x5s1"])
def test_max_pool_keeps_nans_and_the_first_of_equal_zeros(nat, k, s, p):
    """The pool's fast maximum (x86's max and a NaN check) gives what the tap-by-tap vmax gives: a NaN
    wins wherever it falls in the window, and of -0 and +0 the first tap's stays"""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 9, 9, nat.nchwc_block)) - 1).astype(np.float32)  # many windows of zeros only
    x[x < -1] = -0.0  # ReLU's output where its input was -0: zeros of both signs
    x[x < 0] = 0.0
    x.flat[rng.choice(x.size, 12, replace=False)] = np.nan
    o = (9 + 2 * p - k) // s + 1
    y = np.empty((2, o, o, nat.nchwc_block), np.float32)
    nat.nchwc_max_pool_call(x, y, (2, 9, 9, o, o, k, k, s, s, p, p, 1, 1)).run()
    want = _sequential_max_pool(x, o, o, k, s, p)
    np.testing.assert_array_equal(y, want)
    assert np.array_equal(np.signbit(y), np.signbit(want))
