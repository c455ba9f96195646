"""float16 Conv, FusedConv, MatMul, FusedMatMul and Gemm on the native kernels that read float16
activations and write float16 results themselves (csrc/half.h; float16.Float16ViaFloat32 hands them
the float16 arrays): at every level this CPU runs (v2 has no F16C: the portable conversions), the
result is bit for bit the float32 kernel's on the widened inputs, rounded once, as it was when the
adapter converted whole tensors around it; and no whole tensor is converted per run, but what a plan
cannot read in float16 (the direct kernel's pointwise input). Odd shapes: channel
counts off the vector width, tails of panels and rows, batches of 2, K over one block (640: the
float16 C summed per tile), padding columns dropped as the GEMM stores, infinities, NaN and
subnormals in the inputs, results overflowing float16."""
import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels.ops import conv_native
from ge.core.kernels import lookup, native as native_mod
from ge.core.kernels.backend import Backend
from ge.core.kernels.fused import GE_DOMAIN

from .levels import level_params

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
RELU, HSWISH, GELU = [["Relu", {}]], [["HardSwish", {}]], [["Gelu", {}]]


def halves(rng, *shape, scale=1.0, specials=True) -> np.ndarray:
    """Random float16 values; with specials, a few large, tiny (subnormal), infinite and NaN ones."""
    x = (rng.standard_normal(shape) * scale).astype(F16)
    if specials and x.size > 8:
        flat = x.reshape(-1)
        flat[[1, 5]] = [3e4, -3e4]  # products past 65504: infinities in float16
        flat[2], flat[3] = 3e-7, -6e-8  # subnormals
        flat[-2] = np.inf
        flat[-1] = np.nan
    return x


def same_bits(y: np.ndarray, want: np.ndarray) -> None:
    """Bit for bit, but a NaN's sign and payload: a NaN meeting another operand takes the one x86
    picks, and the compiler orders commutative operands as it likes (numpy promises no NaN's bits)."""
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(y), nan)
    np.testing.assert_array_equal(y.view(np.uint16)[~nan], want.view(np.uint16)[~nan])


def build(op, attrs, arrays, consts, dtype, lib, domain="", direct="auto"):
    """op's kernel for the arrays' shapes in dtype, the constant inputs (indices consts) given."""
    arrays = [a.astype(dtype) for a in arrays]
    metas = [Meta(a.dtype, a.shape) for a in arrays]
    values = [a if i in consts else None for i, a in enumerate(arrays)]
    cls = lookup(op, domain, 1) if domain else lookup(op, opset=17)
    return cls(attrs, metas, values, name="n", backend=Backend(lib, direct)).load(), arrays


def check(level, monkeypatch, op, attrs, arrays, consts=(), domain="", direct="auto", widened=(), kind=None):
    """The float16 kernel's output against the float32 kernel's, rounded once, bit for bit; the whole
    tensors converted per run are `widened` (input indices) only."""
    lib = native_mod.load_level(level)
    half, xs = build(op, attrs, arrays, consts, F16, lib, domain, direct)
    wide, ws = build(op, attrs, arrays, consts, F32, lib, domain, direct)
    if kind is not None:
        assert half.inner.native.kind == kind
    calls = []
    for name in ("half_to_float", "float_to_half"):
        real = getattr(lib, name)
        monkeypatch.setattr(lib, name, lambda s, d, real=real, name=name: (calls.append(name), real(s, d)))
    want = wide.compute(*ws)[0].astype(F16)
    (meta,) = half.infer()
    assert meta.dtype == F16 and tuple(meta.shape) == want.shape
    y = np.full(want.shape, 7, F16)
    half.run(xs, [y], np.empty(half.workspace_nbytes(), np.uint8))
    same_bits(y, want)
    assert calls == ["half_to_float"] * len(widened)
    assert sorted(half.widened) == sorted(widened) and half.narrowed == [] and half.half_outputs


def flat_or_dense(monkeypatch, kind: str) -> None:
    """The GEMM's columns flat (padding columns computed, dropped as it stores) or gathered, as `kind`
    says (the choice is a cost heuristic that depends on the level's panel width)."""
    if kind in ("gemm-flat", "gemm-dense"):
        monkeypatch.setattr(conv_native, "FLAT_WASTE", 1e9 if kind == "gemm-flat" else 0.0)


CONVS = [  # (x, w, attrs, direct, the plan's kind, inputs widened per run)
    ((2, 13, 15, 15), (17, 13, 1, 1), {}, "never", "gemm", ()),  # pointwise: the GEMM packs X
    ((1, 19, 7, 7), (33, 19, 1, 1), {}, "always", "direct", (0,)),  # pointwise direct: X read in place, widened
    ((2, 5, 11, 13), (7, 5, 3, 3), {"pads": [1, 1, 1, 1]}, "auto", "direct", ()),  # the phase fill reads X
    ((1, 6, 17, 17), (9, 6, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, "never", "gemm-flat", ()),
    ((2, 7, 9, 10), (5, 7, 3, 2), {"pads": [0, 1, 2, 0], "strides": [2, 1]}, "never", "gemm-dense", ()),
    ((1, 700, 16, 16), (20, 700, 1, 1), {}, "never", "gemm", ()),  # K of two blocks: tiles summed, B packed whole
    ((1, 80, 9, 9), (8, 80, 3, 3), {"pads": [1, 1, 1, 1]}, "never", "gemm-flat", ()),  # and padding columns
    ((1, 8, 9, 9), (6, 4, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}, "auto", "direct", ()),
    ((2, 6, 29), (5, 6, 3), {"pads": [1, 1]}, "auto", "direct", (0,)),  # 1-D: numpy's fill, X widened
    ((1, 3, 3, 4500), (4, 3, 3, 3), {"pads": [1, 1, 1, 1]}, "always", "direct", ()),  # rows past 4096: heap row
    ((1, 24, 12, 12), (40, 24, 1, 1), {"ge.epilogue": HSWISH}, "never", "gemm", ()),
    ((1, 3, 21, 21), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2], "ge.epilogue": RELU}, "auto",
     "direct", ()),  # a network's first conv
    # a short K over long runs: the pixels kernel (a pointwise X read in float16, a vector converted as it
    # is loaded; a tail block of channels and of pixels; a first conv on the phase fill; HardSwish, Relu)
    ((2, 13, 9, 11), (19, 13, 1, 1), {"ge.epilogue": HSWISH}, "auto", "pixels", ()),
    ((1, 16, 20, 21), (24, 16, 1, 1), {}, "auto", "pixels", ()),
    ((1, 3, 100, 101), (16, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2], "ge.epilogue": RELU}, "auto",
     "pixels", ()),
    # depthwise: the masked flat run (a float16 X through the channel's buffer, converted as it is filled:
    # a 14x14 plane, a plane whose buffer is heap memory, dilation and a channel multiplier, a 5x5 kernel with
    # pads larger than the plane, asymmetric pads), channels in the lanes (7x7), 3x3 stride-2 rows read in
    # place (AVX-512; the plane converted first, on the stack or, larger, in heap memory)
    ((2, 19, 14, 14), (19, 1, 3, 3), {"group": 19, "pads": [1, 1, 1, 1], "ge.epilogue": RELU}, "auto", "depthwise", ()),
    ((1, 5, 60, 61), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}, "auto", "depthwise", ()),
    ((1, 5, 60, 61), (5, 1, 3, 3), {"group": 5, "pads": [1, 1, 1, 1]}, "auto", "depthwise", ()),
    ((1, 3, 130, 131), (3, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}, "auto", "depthwise", ()),
    ((1, 6, 11, 11), (12, 1, 5, 5), {"group": 6, "pads": [2, 2, 2, 2], "dilations": [1, 2]}, "auto", "depthwise", ()),
    ((1, 4, 3, 2), (4, 1, 5, 5), {"group": 4, "pads": [3, 1, 2, 4]}, "auto", "depthwise", ()),
    ((1, 3, 40, 41), (3, 1, 3, 3), {"group": 3, "pads": [0, 2, 2, 0], "ge.epilogue": HSWISH}, "auto", "depthwise", ()),
    ((2, 19, 7, 7), (19, 1, 3, 3), {"group": 19, "pads": [1, 1, 1, 1], "ge.epilogue": RELU}, "auto", "depthwise", ()),
    ((1, 2, 130, 131), (2, 1, 3, 3), {"group": 2, "pads": [1, 1, 1, 1], "strides": [2, 2]}, "auto", "depthwise", ()),
    # a squeeze-excite block's 1x1 convs on a 1x1 plane: the GEMV, over 8 items (two blocks of rows)
    ((11, 40, 1, 1), (17, 40, 1, 1), {"ge.epilogue": HSWISH}, "auto", "gemv", ()),
    ((1, 72, 1, 1), (18, 72, 1, 1), {"ge.epilogue": RELU}, "auto", "gemv", ()),
]


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("xs,ws,attrs,direct,kind,widened", CONVS)
def test_conv(level, monkeypatch, xs, ws, attrs, direct, kind, widened):
    flat_or_dense(monkeypatch, kind)
    rng = np.random.default_rng(sum(xs) + sum(ws))
    x, w = halves(rng, *xs), halves(rng, *ws, scale=0.3, specials=False)
    b = halves(rng, ws[0], specials=False)
    check(level, monkeypatch, "Conv", attrs, [x, w, b], (1, 2), direct=direct, widened=widened, kind=kind)


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("xs,ws,attrs,direct,kind", [
    ((2, 24, 12, 12), (24, 24, 1, 1), {"ge.epilogue": RELU}, "never", "gemm"),
    ((1, 33, 7, 7), (21, 33, 1, 1), {}, "always", "direct"),  # Z and Y float16 in the direct kernel's store
    ((1, 16, 10, 10), (16, 16, 1, 1), {}, "auto", "pixels"),  # ... and the pixels kernel's (a tail of 4 pixels)
    ((1, 700, 16, 16), (20, 700, 1, 1), {}, "never", "gemm"),
    ((1, 9, 8, 11), (5, 9, 3, 3), {"pads": [1, 1, 1, 1]}, "never", "gemm-flat"),
    ((1, 80, 8, 11), (7, 80, 3, 3), {"pads": [1, 1, 1, 1]}, "never", "gemm-flat"),  # Z with the first of 2 blocks of K
])
def test_fused_conv_reads_its_residual_in_float16(level, monkeypatch, xs, ws, attrs, direct, kind):
    flat_or_dense(monkeypatch, kind)
    rng = np.random.default_rng(sum(xs))
    x, w, b = halves(rng, *xs), halves(rng, *ws, scale=0.3, specials=False), halves(rng, ws[0], specials=False)
    z = halves(rng, xs[0], ws[0], *xs[2:])
    widened = (0,) if kind == "direct" else ()
    check(level, monkeypatch, "FusedConv", attrs, [x, w, b, z], (1, 2), domain=GE_DOMAIN, direct=direct,
          widened=widened, kind=kind)


PRODUCTS = [  # (op, domain, shapes, attrs, constant inputs)
    ("MatMul", "", [(2, 9, 37), (37, 29)], {}, (1,)),
    ("MatMul", "", [(10, 700), (700, 33)], {}, (1,)),  # raw A over two blocks of K
    ("Gemm", "", [(11, 45), (23, 45), (23,)], {"transB": 1, "ge.epilogue": HSWISH}, (1, 2)),
    ("FusedMatMul", GE_DOMAIN, [(2, 8, 32), (32, 24), (24,), (2, 8, 24)], {}, (1, 2)),  # residual
    ("FusedMatMul", GE_DOMAIN, [(2, 8, 32), (32, 40), (40,)], {"activation": "Gelu"}, (1, 2)),
    ("FusedMatMul", GE_DOMAIN, [(2, 9, 32), (32, 24), (24,)], {"perm_a": [1, 0, 2]}, (1, 2)),  # A through a copy
    ("FusedMatMul", GE_DOMAIN, [(3, 16, 40), (40, 17)], {"ge.epilogue": GELU}, (1,)),
    # both computed: attention's Q K^T with its scale and mask, P V, a batch with K over one block
    ("FusedMatMul", GE_DOMAIN, [(2, 24, 3, 64), (2, 24, 3, 64), (2, 1, 1, 24)],
     {"perm_a": [0, 2, 1, 3], "perm_b": [0, 2, 3, 1], "alpha": 0.3}, ()),
    ("FusedMatMul", GE_DOMAIN, [(2, 3, 24, 24), (2, 24, 3, 64)], {"perm_b": [0, 2, 1, 3], "perm_y": [0, 2, 1, 3]}, ()),
    ("FusedMatMul", GE_DOMAIN, [(2, 3, 20, 33), (2, 3, 33, 57), (2, 3, 20, 57)], {"activation": "Gelu"}, ()),
    ("MatMul", "", [(2, 9, 700), (2, 700, 17)], {}, ()),
    # fewer than 8 rows: the GEMV (its rows converted once per call, its results rounded as stored)
    ("MatMul", "", [(3, 70), (70, 9)], {}, (1,)),
    ("Gemm", "", [(1, 1283), (1001, 1283), (1001,)], {"transB": 1, "ge.epilogue": RELU}, (1, 2)),  # a classifier
    ("FusedMatMul", GE_DOMAIN, [(1, 5, 64), (64, 130), (130,)], {"activation": "Gelu"}, (1, 2)),
]


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op,domain,shapes,attrs,consts", PRODUCTS)
def test_products(level, monkeypatch, op, domain, shapes, attrs, consts):
    rng = np.random.default_rng(sum(map(sum, shapes)))
    arrays = [halves(rng, *s, scale=0.5 if i in consts else 1.0, specials=i not in consts)
              for i, s in enumerate(shapes)]
    check(level, monkeypatch, op, attrs, arrays, consts, domain=domain)


def test_a_strided_output_is_written_through_a_copy():
    """The native plans write rows: a float16 output that is a strided view gets the result through
    a copy, the same values."""
    rng = np.random.default_rng(4)
    lib = native_mod.native()
    half, xs = build("MatMul", {}, [halves(rng, 12, 20), halves(rng, 20, 6, specials=False)], (1,), F16, lib)
    wide, ws = build("MatMul", {}, xs, (1,), F32, lib)
    y = np.zeros((6, 12), F16).T
    half.run(xs, [y], np.empty(half.workspace_nbytes(), np.uint8))
    same_bits(y, wide.compute(*ws)[0].astype(F16))


ROWS = [  # (op, x shape, attrs, Scale and B constant)
    ("LayerNormalization", (2, 5, 37), {"epsilon": 1e-3}, True),  # a row of 37: vectors and a tail
    ("LayerNormalization", (3, 16), {}, True),
    ("Softmax", (2, 3, 7, 19), {}, False),
    ("Softmax", (4, 128), {}, False),
    ("Softmax", (3, 9001), {}, False),  # rows past the stack's 8192: a heap row buffer
    ("LayerNormalization", (2, 8300), {}, True),
]


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("op,shape,attrs,params", ROWS)
def test_rows_read_and_write_float16(level, monkeypatch, op, shape, attrs, params):
    """LayerNormalization and Softmax rows (csrc/rows.c) convert a float16 row at a time: no whole
    tensor converted per run; Softmax gives the float32 kernel's result on the widened input rounded
    once, bit for bit; LayerNormalization, whose float16 Scale and B are converted once at load, the
    native float32 rows' (the float32 model's kernel)."""
    rng = np.random.default_rng(len(shape))
    x = halves(rng, *shape, scale=3.0, specials=False)
    x.reshape(-1)[3] = np.nan  # its row is NaN, the others are not
    arrays = [x] + ([halves(rng, shape[-1], specials=False), halves(rng, shape[-1], specials=False)] if params else [])
    consts = (1, 2) if params else ()
    lib = native_mod.load_level(level)
    half, xs = build(op, attrs, arrays, consts, F16, lib)
    wide, ws = build(op, attrs, arrays, consts, F32, lib)
    assert half.nat is not None and wide.nat is not None
    calls = []
    for name in ("half_to_float", "float_to_half"):
        real = getattr(lib, name)
        monkeypatch.setattr(lib, name, lambda s, d, real=real, name=name: (calls.append(name), real(s, d)))
    y = np.full(shape, 7, F16)
    half.run(xs, [y], np.empty(half.workspace_nbytes(), np.uint8))
    want = np.empty(shape, F32)
    wide.run(ws, [want], np.empty(wide.workspace_nbytes(), np.uint8))
    same_bits(y, want.astype(F16))
    assert calls == []


@pytest.mark.parametrize("level", level_params())
def test_fused_elementwise_float16_rounds_each_step(level):
    """csrc/eltwise.c's float16 chain: float32 steps on float16 blocks (a tail past the 256-element
    blocks; operands contiguous, a vector along the last axis, one value per row, a scalar), each step
    rounded to float16: numpy's float16 ops one by one, bit for bit."""
    rng = np.random.default_rng(9)
    x, v, r = halves(rng, 5, 77), halves(rng, 77, specials=False), halves(rng, 5, 1, specials=False)
    s = np.array(0.3, F16)
    x.reshape(-1)[[7, 8]] = [60000, -60000]
    steps = [["Add", "", {}, [0, 1]], ["Mul", "", {}, [-1, 2]], ["Div", "", {}, [-2, 3]], ["Relu", "", {}, [-3]],
             ["Sub", "", {}, [-4, 0]], ["Neg", "", {}, [-5]], ["Max", "", {}, [-6, 2]]]
    arrays = [x, v, r, s]
    kernel = lookup("FusedElementwise", GE_DOMAIN, 1)({"steps": steps}, [Meta(a.dtype, a.shape) for a in arrays],
                                                      backend=Backend(native_mod.load_level(level))).load()
    assert kernel.native
    with np.errstate(all="ignore"):
        want = np.maximum(-(np.maximum((x + v) * r / s, F16.type(0)) - x), r)
    same_bits(kernel.compute(*arrays)[0], want)


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("shape,attrs", [
    ((2, 5, 13, 17), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 3, 9, 40), {"kernel_shape": [2, 3], "dilations": [2, 1], "pads": [0, 2, 1, 0]}),
    ((1, 2, 6, 6), {"kernel_shape": [2, 2], "strides": [2, 2]}),
])
def test_max_pool_reads_and_writes_float16(level, monkeypatch, shape, attrs):
    """csrc/max_pool.c converts each row run as it reads it and rounds each output vector as it stores
    it: the float32 kernel's maxima, exactly (NaN wins, infinities and subnormals kept)."""
    x = halves(np.random.default_rng(sum(shape)), *shape)
    check(level, monkeypatch, "MaxPool", attrs, [x])


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("shape", [(1, 1280, 7, 7), (2, 67, 5, 3), (1, 3, 56, 57)])
def test_global_average_pool_reads_and_writes_float16(level, monkeypatch, shape):
    """GlobalAveragePool's GEMV (the planes as its weights) converts an item's planes at a time and
    rounds its means as it stores them: the float32 kernel's bits, no whole-tensor conversion."""
    x = halves(np.random.default_rng(sum(shape)), *shape)
    check(level, monkeypatch, "GlobalAveragePool", {}, [x])
