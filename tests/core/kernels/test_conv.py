import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)
TOL = dict(rtol=1e-4, atol=1e-5)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


@pytest.fixture(params=["native-direct", "native-wide", "native-pixels", "native-flat", "native-dense", "taps",
                        "im2col"])
def layout(request, monkeypatch, default_backend):
    """Run each conv case through every dense plan (the choice is a cost heuristic): the native direct
    kernel (where it runs) with its tall or wide tile, the pixels kernel (where it runs: 1-D, 2-D and
    pointwise, any K), the native GEMM with flat or gathered (dense) columns, one GEMM per kernel
    tap, or im2col; depthwise with tiny
    channel blocks in one of them, so every code path sees every attribute combination."""
    from ge.core.kernels.ops import conv, conv_native
    if request.param == "native-pixels":
        default_backend("native")
        monkeypatch.setattr(conv_native, "PIXELS_K", 10**9)
        monkeypatch.setattr(conv_native, "PIXELS_RUN", 0)
        return request.param
    if request.param.startswith("native"):
        direct = request.param in ("native-direct", "native-wide")
        default_backend("native", direct="always" if direct else "never")
        monkeypatch.setattr(conv_native, "DIRECT_WIDE_K", 0 if request.param == "native-wide" else 10**9)
        monkeypatch.setattr(conv_native, "DIRECT_WIDE_ROW", 0)
        monkeypatch.setattr(conv_native, "FLAT_WASTE", 1e9 if request.param == "native-flat" else 0.0)
        return request.param
    default_backend("numpy")
    if request.param == "taps" and conv.cblas().sgemm is None:
        pytest.skip("no cblas_sgemm reachable through numpy")
    monkeypatch.setattr(conv, "TAPS_MIN_C", 1 if request.param == "taps" else 10**9)
    monkeypatch.setattr(conv, "TAPS_WASTE", 1e9)
    monkeypatch.setattr(conv, "DW_BLOCK_BYTES", 1 if request.param == "im2col" else conv.DW_BLOCK_BYTES)
    return request.param


CONV2D = [
    # x shape, w shape, attrs
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 3, 9, 9), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 4, 10, 8), (6, 4, 3, 3), {"pads": [1, 2, 0, 1], "strides": [2, 1]}),
    ((1, 4, 11, 11), (5, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 11, 11), (5, 4, 3, 3), {"dilations": [2, 2], "pads": [2, 2, 2, 2]}),
    ((2, 4, 12, 10), (5, 4, 3, 2), {"dilations": [2, 3], "strides": [2, 1]}),
    ((1, 3, 15, 15), (8, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    ((1, 8, 7, 7), (16, 8, 1, 1), {}),
    ((3, 8, 7, 7), (16, 8, 1, 1), {}),
    ((2, 8, 9, 9), (16, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 8, 9, 9), (4, 8, 1, 1), {"pads": [1, 1, 1, 1]}),
    ((1, 8, 9, 9), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ((2, 8, 9, 9), (8, 2, 3, 3), {"group": 4, "strides": [2, 2]}),
    ((1, 8, 6, 6), (4, 2, 1, 1), {"group": 4}),
    ((1, 8, 10, 10), (8, 1, 3, 3), {"group": 8, "pads": [1, 1, 1, 1]}),
    ((2, 6, 11, 11), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 6, 11, 11), (6, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2], "dilations": [1, 2]}),
    ((1, 4, 9, 9), (12, 1, 3, 3), {"group": 4, "pads": [1, 0, 1, 2]}),
    ((1, 4, 9, 9), (4, 1, 3, 3), {"group": 4}),
    ((1, 3, 9, 9), (4, 3, 3, 3), {"auto_pad": "SAME_UPPER"}),
    ((1, 3, 10, 9), (4, 3, 4, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 3, 10, 9), (4, 3, 4, 4), {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),
    ((1, 3, 10, 9), (4, 3, 2, 2), {"auto_pad": "SAME_LOWER"}),
    ((1, 3, 10, 9), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 3]}),
    ((1, 6, 10, 9), (6, 1, 3, 3), {"auto_pad": "SAME_UPPER", "group": 6, "strides": [2, 2]}),
    ((1, 3, 9, 9), (4, 3, 3, 3), {"kernel_shape": [3, 3], "pads": [0, 0, 1, 1]}),
    ((1, 3, 14, 13), (4, 3, 3, 4), {"strides": [3, 2], "dilations": [2, 3], "pads": [2, 1, 0, 3]}),
    ((1, 4, 13, 13), (4, 1, 3, 3), {"group": 4, "strides": [3, 3], "dilations": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 8, 8), (4, 3, 2, 2), {"strides": [4, 4], "pads": [3, 3, 3, 3]}),
    # short K, many more output channels (the native GEMM's blocks of rows across every panel)
    ((2, 5, 9, 11), (40, 5, 1, 1), {}),
    ((1, 1, 12, 13), (16, 1, 1, 1), {}),
    ((2, 8, 13, 13), (30, 8, 1, 1), {"strides": [2, 2]}),
    ((1, 3, 17, 17), (64, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 4, 10, 10), (80, 4, 3, 3), {"pads": [0, 1, 2, 1]}),
    # output channels that AVX2's direct kernel runs in panels of 3 vectors (24, 20 and 66: 3 x 24 with
    # a partial last vector) in tiles of 4 pixels and their tails (rows of 11 and 13)
    ((1, 8, 9, 11), (24, 8, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((2, 6, 10, 13), (20, 6, 3, 3), {"pads": [1, 1, 1, 1]}),
    ((1, 5, 7, 9), (66, 5, 3, 3), {"strides": [2, 1]}),
    # a squeeze-excite block's 1x1 convs on a 1x1 plane (the native GEMV; odd sizes: its tails)
    ((1, 37, 1, 1), (13, 37, 1, 1), {}),
    ((3, 131, 1, 1), (70, 131, 1, 1), {}),
]


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("consts", [True, False])
@pytest.mark.parametrize("xs,ws,attrs", CONV2D)
def test_conv2d(check_op, layout, xs, ws, attrs, bias, consts):
    inputs = {"x": f32(*xs), "w": f32(*ws)}
    if bias:
        inputs["b"] = f32(ws[0])
    names = ("w", "b") if consts else ()
    check_op("Conv", inputs, attrs, consts=tuple(n for n in names if n in inputs), **TOL)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 20), (4, 3, 3), {}),
    ((2, 3, 20), (4, 3, 5), {"pads": [2, 1], "strides": [2], "dilations": [2]}),
    ((1, 4, 20), (4, 1, 3), {"group": 4, "pads": [1, 1]}),
    ((1, 4, 20), (6, 2, 1), {"group": 2}),
    ((1, 3, 17), (4, 3, 4), {"auto_pad": "SAME_LOWER", "strides": [3]}),
    # an STFT as a strided Conv (hop = half the window), padding wider than the stride, input past the last window
    ((1, 1, 80), (18, 1, 16), {"strides": [8], "pads": [0, 8]}),
    ((2, 2, 41), (4, 2, 6), {"strides": [5], "pads": [7, 3]}),
    ((1, 3, 23), (4, 3, 4), {"strides": [4], "pads": [1, 0]}),
])
def test_conv1d(check_op, layout, xs, ws, attrs):
    check_op("Conv", {"x": f32(*xs), "w": f32(*ws), "b": f32(ws[0])}, attrs, consts=("w", "b"), **TOL)


@pytest.mark.parametrize("width,kernel,stride,dil,pads", [
    (640, 256, 128, 1, (0, 64)), (5, 3, 2, 1, (3, 3)), (17, 2, 5, 2, (4, 0)), (9, 3, 1, 1, (1, 1)), (1, 1, 3, 1, (0, 0)),
    (12, 3, 3, 1, (0, 0))])
@pytest.mark.parametrize("indexed", [True, False])
def test_the_1d_phase_fill_lays_the_padded_line_out_by_phase(monkeypatch, width, kernel, stride, dil, pads, indexed):
    """PhaseLayout.fill of a 1-D layout (small: two index passes; else a few copies whatever the stride):
    phase r, position q holds the padded line's element q * stride + r, zero past the input."""
    from ge.core.kernels.ops import phase_layout
    monkeypatch.setattr(phase_layout, "INDEXED_FILL", 1 << 30 if indexed else 0)
    out = (width + sum(pads) - (kernel - 1) * dil - 1) // stride + 1
    lay = phase_layout.PhaseLayout(2, 3, [width], [pads[0]], [stride], [kernel], [dil], [out], np.float32)
    assert (lay.line_index is not None) == indexed
    x = f32(2, 3, width)
    ph = np.full(lay.phase_shape, np.nan, np.float32)
    lay.fill(ph, x)
    line = np.zeros((2, 3, lay.sq[0] * stride + width + pads[0]), np.float32)
    line[..., pads[0]:pads[0] + width] = x
    expected = line[..., :lay.sq[0] * stride].reshape(2, 3, lay.sq[0], stride).transpose(3, 0, 1, 2)
    np.testing.assert_array_equal(ph, expected)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 6, 7, 8), (4, 3, 3, 3, 3), {"pads": [1, 1, 1, 1, 1, 1]}),
    ((1, 4, 6, 7, 8), (4, 2, 2, 3, 1), {"group": 2, "strides": [2, 1, 2], "dilations": [1, 2, 1]}),
    ((2, 3, 5, 5, 5), (6, 3, 1, 1, 1), {}),
    ((1, 4, 6, 6, 6), (4, 1, 3, 3, 3), {"group": 4, "auto_pad": "SAME_UPPER"}),
])
def test_conv3d(check_op, layout, xs, ws, attrs):
    check_op("Conv", {"x": f32(*xs), "w": f32(*ws), "b": f32(ws[0])}, attrs, consts=("w", "b"), **TOL)


def test_conv_resnet_like_shapes(check_op, layout):
    check_op("Conv", {"x": f32(1, 16, 28, 28), "w": f32(32, 16, 3, 3), "b": f32(32)},
             {"pads": [1, 1, 1, 1]}, consts=("w", "b"), **TOL)
    check_op("Conv", {"x": f32(1, 3, 32, 32), "w": f32(16, 3, 7, 7), "b": f32(16)},
             {"pads": [3, 3, 3, 3], "strides": [2, 2]}, consts=("w", "b"), **TOL)
    # direct kernel: rows of 30 in 3 blocks of 10, a second panel of output channels 8 wide
    check_op("Conv", {"x": f32(1, 24, 30, 30), "w": f32(40, 24, 3, 3), "b": f32(40)},
             {"pads": [1, 1, 1, 1]}, consts=("w", "b"), rtol=1e-4, atol=1e-4)  # sums of 216 products
    # pointwise, a 7x7 output: the direct kernel by default (49 pixels in blocks of 13 and 12)
    check_op("Conv", {"x": f32(2, 64, 7, 7), "w": f32(96, 64, 1, 1), "b": f32(96)}, {}, consts=("w", "b"),
             rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,oc,direct", [(1024, 256, True), (384, 64, True), (256, 1024, False), (64, 384, False)])
def test_pointwise_on_a_14x14_plane_takes_the_direct_kernel_when_it_reduces(default_backend, c, oc, direct):
    """196 pixels fill 224 columns of 32-wide GEMM panels: a conv that reduces channels (K >= M) takes
    the direct kernel (the GEMM would pack each panel for few blocks of rows), one that expands the
    pixels kernel, not the GEMM. (The kernels' results: the plans' tests above.)"""
    from ge.core.kernels.ops import conv_native
    default_backend("native")
    k = _kernel("Conv", [Meta(np.dtype(np.float32), (1, c, 14, 14)), Meta(np.dtype(np.float32), (oc, c, 1, 1))], {},
                [None, np.zeros((oc, c, 1, 1), np.float32)])
    assert conv_native.use_direct(k, 32, pointwise=True) == direct
    assert conv_native.use_pixels(k, 32, pointwise=True, block=8) != direct
    assert not conv_native.use_direct(k, 49, pointwise=True)  # panels of 49 columns: 4 hold 196 pixels, no waste


@pytest.mark.parametrize("oc, block, tall_panel, pixels, wide", [
    (24, 8, 32, True, False), (32, 8, 32, True, False), (48, 8, 32, False, True),  # AVX-512's tiles
    (24, 4, 16, False, True), (16, 4, 16, False, False)])  # AVX2's
def test_a_narrow_conv_of_several_taps_takes_the_tiles_that_fill_their_lanes(oc, block, tall_panel, pixels, wide):
    """DBNet's head (96 -> 24 channels, 3x3, 40 x 240): at AVX-512's tiles (pixels blocks of 8 channels)
    a conv of at most 32 output channels takes the pixels kernel (the direct kernel's tiles would fill one
    or two vectors of channels); at AVX2's (blocks of 4) the direct kernel, its wide tile only for more
    channels than the tall one holds. The kernels' results: test_a_narrow_conv_computes_on_its_plan."""
    from ge.core.kernels.ops import conv_native
    k = _kernel("Conv", [Meta(np.dtype(np.float32), (1, 96, 40, 240)), Meta(np.dtype(np.float32), (oc, 96, 3, 3))],
                {"pads": [1, 1, 1, 1]}, [None, np.zeros((oc, 96, 3, 3), np.float32)])
    assert conv_native.use_pixels(k, 2 * tall_panel // 2, pointwise=False, block=block) == pixels
    assert conv_native.use_wide(k, 96 * 9, tall_panel) == wide


@pytest.mark.parametrize("oc", [16, 24, 32])
def test_a_narrow_conv_computes_on_its_plan(check_op, oc):
    """A conv of few output channels and several taps over rows of 60 (pixels at AVX-512's tiles, the direct
    kernel at AVX2's), with a padding and a stride-1 3x3 kernel: onnxruntime's results."""
    check_op("Conv", {"x": f32(1, 96, 12, 60), "w": f32(oc, 96, 3, 3), "b": f32(oc)}, {"pads": [1, 1, 1, 1]},
             consts=("w", "b"), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c, length, stride, gemm", [(384, 3000, 2, True), (64, 1000, 2, False), (384, 3000, 1, False)])
def test_a_strided_1d_conv_over_an_input_beyond_the_l2_takes_the_gemm(check_op, default_backend, c, length, stride, gemm):
    """Whisper's conv2 (384 channels, stride 2, 3000 samples: 4.6 MB) takes the GEMM, whose panels are packed
    once, where the direct kernel would read the input once per group of output channels from memory; a small
    input, or stride 1, keeps the direct kernel. onnxruntime's results either way."""
    from ge.core.kernels.ops import conv_native
    default_backend("native")
    x, w, b = f32(1, c, length), f32(32, c, 3), f32(32)
    k = _kernel("Conv", [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape), Meta(b.dtype, b.shape)],
                {"strides": [stride], "pads": [1, 1]}, [None, w, b]).load()
    l2 = k.backend.lib.caches[1]
    assert conv_native.strided_beyond_l2(k, l2) == (gemm and c * length * 4 > l2)
    assert (k.native.kind == "gemm-flat") == conv_native.strided_beyond_l2(k, l2)
    check_op("Conv", {"x": x, "w": w, "b": b}, {"strides": [stride], "pads": [1, 1]}, consts=("w", "b"),
             rtol=1e-4, atol=1e-4)


def _kernel(op, metas, attrs, consts=()):
    return lookup(op)(attrs, metas, consts, name="c1")


def test_conv_errors():
    x, w = Meta(np.dtype(np.float32), (1, 4, 8, 8)), Meta(np.dtype(np.float32), (4, 3, 3, 3))
    with pytest.raises(GraphError, match=r"node 'c1' \(Conv\).*group"):
        _kernel("Conv", [x, w], {})
    w = Meta(np.dtype(np.float32), (4, 4, 3, 3))
    with pytest.raises(GraphError, match="auto_pad 'BOGUS'"):
        _kernel("Conv", [x, w], {"auto_pad": "BOGUS"})
    with pytest.raises(GraphError, match="kernel_shape"):
        _kernel("Conv", [x, w], {"kernel_shape": [5, 5]})
    with pytest.raises(GraphError, match="larger than the padded input"):
        _kernel("Conv", [Meta(np.dtype(np.float32), (1, 4, 2, 2)), w], {})
    with pytest.raises(GraphError, match="pads"):
        _kernel("Conv", [x, w], {"pads": [1, 1]})


def test_conv_auto_pad_bytes_attribute(check_op):
    k = _kernel("Conv", [Meta(np.dtype(np.float32), (1, 3, 9, 9)), Meta(np.dtype(np.float32), (4, 3, 3, 3))],
                {"auto_pad": b"SAME_UPPER"})
    assert k.infer()[0].shape == (1, 4, 9, 9)


CONVT = [
    ((1, 3, 5, 5), (3, 4, 3, 3), {}),
    ((2, 3, 5, 4), (3, 4, 3, 3), {"strides": [2, 2]}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    ((1, 3, 5, 5), (3, 2, 4, 4), {"strides": [2, 3], "pads": [1, 0, 2, 1], "dilations": [1, 2]}),
    ((1, 4, 5, 5), (4, 3, 3, 3), {"group": 2, "strides": [2, 2]}),
    ((1, 4, 6, 6), (4, 1, 4, 4), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "output_shape": [10, 10]}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "output_shape": [10, 9], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ((1, 3, 5, 5), (3, 4, 4, 4), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 5, 5), (3, 4, 3, 3), {"strides": [2, 2], "auto_pad": "VALID"}),
    ((1, 3, 5, 5), (3, 4, 1, 1), {}),
    ((1, 3, 5, 5), (3, 4, 2, 2), {"strides": [2, 2]}),  # kernel == stride: each tap's own outputs
    ((1, 4, 5, 5), (4, 3, 2, 2), {"group": 2, "strides": [2, 2]}),
    ((1, 3, 5, 5), (3, 4, 2, 2), {"strides": [2, 2], "output_padding": [1, 1]}),  # a row and column of bias alone
]


@pytest.mark.parametrize("consts", [True, False])
@pytest.mark.parametrize("xs,ws,attrs", CONVT)
def test_conv_transpose_2d(check_op, xs, ws, attrs, consts):
    g = attrs.get("group", 1)
    inputs = {"x": f32(*xs), "w": f32(*ws), "b": f32(ws[1] * g)}
    check_op("ConvTranspose", inputs, attrs, consts=("w", "b") if consts else (), **TOL)


def test_conv_transpose_no_bias(check_op):
    check_op("ConvTranspose", {"x": f32(1, 3, 5, 5), "w": f32(3, 4, 3, 3)}, {"strides": [2, 2]}, consts=("w",),
             **TOL)


@pytest.mark.parametrize("xs,ws", [
    ((2, 5, 3, 37), (5, 7, 2, 2)),  # whole and partial vectors of pixels, output channels past a tile
    ((1, 3, 4, 11), (3, 2, 3, 3)),  # a kernel 3 wide: each column's sums stored apart
    ((1, 4, 2, 17), (4, 13, 1, 2)),
])
@pytest.mark.parametrize("act", [None, "Relu", "Sigmoid"])
def test_conv_transpose_with_its_kernel_as_stride_runs_natively(check_op, default_backend, xs, ws, act):
    """ConvTranspose whose kernel is its stride (DBNet's 2x2 upsampling): csrc/conv_transpose.c, the bias and
    a fused activation applied as it stores; as onnxruntime's."""
    from ge.core.kernels.epilogue import ATTR as EPILOGUE
    default_backend("native")
    x, w, b = f32(*xs), f32(*ws), f32(ws[1])
    attrs = {"strides": list(ws[2:])}
    want = check_op("ConvTranspose", {"x": x, "w": w, "b": b}, attrs, consts=("w", "b"), **TOL)[0]
    metas = [Meta(a.dtype, a.shape) for a in (x, w, b)]
    k = lookup("ConvTranspose")({**attrs, **({EPILOGUE: [[act, {}]]} if act else {})}, metas, [None, w, b])
    assert k.plan == "native" and k.absorbs_epilogue == bool(act)
    k = lookup("ConvTranspose")(k.attrs, metas, [None, w, b], outputs=k.infer()).load()
    y = np.full(want.shape, 7, np.float32)
    k.bound([x, w, b], [y], None)()
    expect = {None: want, "Relu": np.maximum(want, 0), "Sigmoid": 1 / (1 + np.exp(-want))}[act]
    np.testing.assert_allclose(y, expect, **TOL)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 3, 7), (3, 2, 3), {"strides": [2], "pads": [1, 0], "output_padding": [1]}),
    ((1, 2, 3, 4, 3), (2, 3, 2, 3, 2), {"strides": [2, 1, 2]}),
    ((1, 3, 6), (3, 2, 3), {"strides": [3]}),  # kernel == stride, no bias
    ((2, 2, 3, 4, 3), (2, 3, 2, 2, 2), {"strides": [2, 2, 2]}),
])
def test_conv_transpose_1d_3d(check_op, xs, ws, attrs):
    check_op("ConvTranspose", {"x": f32(*xs), "w": f32(*ws)}, attrs, consts=("w",), **TOL)


def test_conv_batch_chunks(check_op, layout, monkeypatch):
    """Batches larger than the im2col budget are processed a few items at a time."""
    from ge.core.kernels.ops import conv
    monkeypatch.setattr(conv, "COLS_LIMIT", 2 * 4 * 3 * 9 * 81)
    check_op("Conv", {"x": f32(5, 4, 9, 9), "w": f32(6, 4, 3, 3), "b": f32(6)}, {"pads": [1, 1, 1, 1]},
             consts=("w", "b"), **TOL)


@pytest.mark.parametrize("xs,ws,attrs", [
    ((1, 64, 2), (64, 64, 3), {"strides": [2], "pads": [1, 1]}),  # a VAD encoder's last convs over a frame or two
    ((1, 64, 1), (128, 64, 3), {"pads": [1, 1]}),
    ((3, 5, 4), (7, 5, 4), {}),
    ((2, 3, 5, 5), (6, 3, 3, 3), {"strides": [3, 3], "pads": [0, 0, 0, 0], "dilations": [2, 2]}),
    ((1, 4, 2, 3), (9, 4, 3, 3), {"pads": [1, 1, 0, 0], "strides": [2, 2]}),
    ((1, 2, 2, 2, 1), (3, 2, 2, 3, 1), {"pads": [0, 1, 0, 0, 0, 0]}),
])
@pytest.mark.parametrize("act", [None, "Relu"])
def test_one_output_pixel_takes_the_gathered_column_and_the_gemv(check_op, default_backend, xs, ws, attrs, act):
    """One output pixel per item, one group: the window (padding zeros included) gathered into a column,
    W @ column + bias on the native GEMV, a fused activation as it stores; as onnxruntime's."""
    from ge.core.kernels.epilogue import ATTR as EPILOGUE
    default_backend("native")
    x, w, b = f32(*xs), f32(*ws), f32(ws[0])
    k = lookup("Conv")({**attrs, **({EPILOGUE: [["Relu", {}]]} if act else {})}, [Meta(x.dtype, x.shape),
                       Meta(w.dtype, w.shape), Meta(b.dtype, b.shape)], [None, w, b])
    assert k.plan == "native" and k.native.kind == "gemv-column" and k.absorbs_epilogue == bool(act)
    want = check_op("Conv", {"x": x, "w": w, "b": b}, attrs, consts=("w", "b"), **TOL)[0]
    if act:
        k = lookup("Conv")(k.attrs, k.inputs, [None, w, b], outputs=k.infer()).load()
        y = np.full(want.shape, 7, np.float32)
        k.run([x, w, b], [y], np.zeros(k.workspace_nbytes(), np.uint8))
        np.testing.assert_allclose(y, np.maximum(want, 0), **TOL)


def test_conv_non_contiguous_input_and_output():
    """Planned buffers are contiguous, but a strided input or output view must still be right."""
    k0 = lookup("Conv")({"pads": [1, 1, 1, 1]}, [Meta(np.dtype(np.float32), (1, 4, 6, 6)),
                                                 Meta(np.dtype(np.float32), (5, 4, 3, 3))], [None, f32(5, 4, 3, 3)])
    w = k0.consts[1]
    x = f32(1, 4, 6, 12)[:, :, :, ::2]
    want = k0.compute(np.ascontiguousarray(x), w)[0]
    k = lookup("Conv")({"pads": [1, 1, 1, 1]}, k0.inputs, [None, w], outputs=k0.infer()).load()
    big = np.full((1, 5, 6, 12), 7, np.float32)
    y = big[:, :, :, ::2]
    k.run([x, w], [y], np.zeros(k.workspace_nbytes(), np.uint8))
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(big[:, :, :, 1::2], 7)


@pytest.mark.parametrize("xs,ws,attrs", [
    # the short-K convs of MobileNetV2/V3 at their sizes: first convs (3 channels, 3x3 stride 2), pointwise
    # 32 -> 16, 16 -> 16, 16 -> 64, 16 -> 96 over 112x112 and 24 -> 144 over 56x56
    ((1, 3, 224, 224), (32, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 3, 224, 224), (16, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 32, 112, 112), (16, 32, 1, 1), {}),
    ((1, 16, 112, 112), (16, 16, 1, 1), {}),
    ((1, 16, 112, 112), (64, 16, 1, 1), {}),
    ((1, 16, 112, 112), (96, 16, 1, 1), {}),
    ((1, 24, 56, 56), (144, 24, 1, 1), {}),
    # any K for a 1x1 kernel over 28x28 or more (a projection, ResNet-50's 1x1 convs), a first conv of few
    # channels (ResNet-50's 7x7 conv1, K = 147)
    ((1, 144, 56, 56), (24, 144, 1, 1), {}),
    ((1, 256, 28, 28), (64, 256, 1, 1), {}),
    ((1, 64, 14, 14), (384, 64, 1, 1), {}),
    ((1, 3, 224, 224), (64, 3, 7, 7), {"strides": [2, 2], "pads": [3, 3, 3, 3]}),
    # odd sizes: a tail block of channels, a tail vector of pixels, rows of 3 tiles of unequal widths
    ((2, 5, 37, 41), (19, 5, 1, 1), {}),
    ((1, 3, 121, 135), (13, 3, 3, 3), {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 1, 50, 97), (9, 1, 1, 1), {}),
    ((1, 2, 40, 60), (7, 2, 3, 5), {"pads": [1, 2, 1, 2], "dilations": [1, 2]}),
])
def test_convs_over_long_runs_take_the_pixels_kernel(check_op, default_backend, xs, ws, attrs):
    """A short K (at most conv_native.PIXELS_K steps), a 1x1 kernel over a large plane (from 14x14 where it
    expands channels) or a first conv
    over runs of PIXELS_RUN pixels or more: the pixels kernel (weights broadcast, pixels in the lanes, Y
    written from the registers), onnxruntime's results."""
    default_backend("native")
    k = lookup("Conv", opset=17)(attrs, [Meta(np.float32, xs), Meta(np.float32, ws), Meta(np.float32, ws[:1])],
                                 [None, f32(*ws), f32(ws[0])], opset=17, name="c").load()
    assert k.native.kind == "pixels"
    check_op("Conv", {"x": f32(*xs), "w": f32(*ws), "b": f32(ws[0])}, attrs, consts=("w", "b"), rtol=1e-4, atol=1e-4)
