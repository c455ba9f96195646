"""csrc/gemv.c's packed GEMV (ge_gemv_panels: W packed once into column panels) at every native level
against float64: the panel's edges (N past the last full panel, in whole and partial vectors), K odd,
1 and past a chunk, several rows, strided rows, the bias, residual and activation epilogue, float16
rows and outputs, and the same bits for a row whatever the rows and threads beside it."""
import numpy as np
import pytest

from ge.core.kernels import native

rng = np.random.default_rng(3)
TOL = dict(rtol=1e-5, atol=1e-5)


def _product(nat, x, w, bias=None, act=None, lda=None, y=None):
    rows, k = x.shape[0], w.shape[0]
    n = w.shape[1]
    y = np.full((rows, n), np.nan, np.float32) if y is None else y
    nat.gemv_panels_call(rows, x, lda or k, nat.gemv_pack(w), k, n, y, y.shape[1], bias=bias, act=act).run()
    return y


def _operands(rows, k, n):
    x = rng.standard_normal((rows, k), np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    return x, w, x.astype(np.float64) @ w


def test_panel_edges_and_odd_k(nat):
    """N from one lane to past two panels (a narrow last panel of 1..4 vectors, partial lanes), K of
    1, odd and past GEMV_CHUNK (256) with several rows; the packed size is what the panels need."""
    p = nat.lib.ge_gemv_panel()
    lanes = p // 4
    for n in sorted({1, lanes - 1, lanes + 1, 3 * lanes, p - 1, p, p + 1, 2 * p + 3 * lanes + 5}):
        for rows, k in ((1, 1), (1, 7), (2, 33), (5, 515)):
            x, w, want = _operands(rows, k, n)
            np.testing.assert_allclose(_product(nat, x, w), want, **TOL, err_msg=f"rows {rows} k {k} n {n}")
        whole = n // p * p + -(-(n % p) // lanes) * lanes
        assert nat.lib.ge_gemv_packed_floats(9, n) == 9 * whole



def test_weights_packed_through_their_strides(nat):
    """A Gemm's transB weights (a transposed view), a column slice and a reversed view pack as their
    contiguous copies do, bit for bit (the pack reads W through its strides: no copy first)."""
    stored = rng.standard_normal((2 * nat.lib.ge_gemv_panel() + 9, 70)).astype(np.float32)  # (N, K)
    for w in (stored.T, stored.T[:, 3:40], stored.T[::-1], stored[:, ::-2].T):
        np.testing.assert_array_equal(nat.gemv_pack(w), nat.gemv_pack(np.ascontiguousarray(w)))
        x = rng.standard_normal((2, w.shape[0]), np.float32)
        np.testing.assert_allclose(_product(nat, x, w), x.astype(np.float64) @ w, **TOL)

@pytest.mark.parametrize("act", [native.GELU, native.Act(native.ACT_CLAMP, -0.5, 0.75)], ids=["gelu", "clamp"])
def test_bias_and_activation_epilogue(nat, act):
    """The bias and the activation applied as the outputs are stored, rows lda apart, y's ldc wider
    than N (the columns past N untouched)."""
    from math import erf
    x, w, want = _operands(3, 100, 45)
    bias = rng.standard_normal(45).astype(np.float32)
    wide = np.concatenate([x, np.full((3, 9), np.nan, np.float32)], axis=1)  # rows 109 apart
    y = np.full((3, 50), 7.0, np.float32)
    _product(nat, wide, w, bias=bias, act=act, lda=109, y=y)
    pre = want + bias
    if act == native.GELU:
        expect = pre * 0.5 * (1 + np.vectorize(erf)(pre / np.sqrt(2)))
    else:
        expect = np.clip(pre, -0.5, 0.75)
    np.testing.assert_allclose(y[:, :45], expect, rtol=1e-5, atol=1e-5)
    assert (y[:, 45:] == 7.0).all()


def test_residual_added_as_stored(nat):
    """Z (a residual of y's shape) added before the bias and activation; Z may be y itself (each
    output read before it is written); a float16 Z with a float16 y."""
    x, w, want = _operands(3, 70, 45)
    bias = rng.standard_normal(45).astype(np.float32)
    z = rng.standard_normal((3, 45)).astype(np.float32)
    y = np.full((3, 45), np.nan, np.float32)
    relu = native.Act(native.ACT_CLAMP, 0.0, np.inf)
    nat.gemv_panels_call(3, x, 70, nat.gemv_pack(w), 70, 45, y, 45, bias=bias, z=z, ldz=45, act=relu).run()
    np.testing.assert_allclose(y, np.maximum(want + z + bias, 0), **TOL)
    onto = z.copy()
    nat.gemv_panels_call(3, x, 70, nat.gemv_pack(w), 70, 45, onto, 45, z=onto, ldz=45).run()
    np.testing.assert_allclose(onto, want + z, **TOL)
    zh, yh = z.astype(np.float16), np.zeros((3, 45), np.float16)
    nat.gemv_panels_call(3, x, 70, nat.gemv_pack(w), 70, 45, yh, 45, z=zh, ldz=45).run()
    np.testing.assert_allclose(yh.astype(np.float64), want + zh, rtol=2e-3, atol=2e-3)


def test_float16_rows_and_outputs(nat):
    """float16 x (converted once) and y (rounded once as stored), with a bias."""
    x, w, _ = _operands(2, 70, 37)
    bias = rng.standard_normal(37).astype(np.float32)
    xh = x.astype(np.float16)
    y = np.zeros((2, 37), np.float16)
    nat.gemv_panels_call(2, xh, 70, nat.gemv_pack(w), 70, 37, y, 37, bias=bias).run()
    want = xh.astype(np.float64) @ w + bias
    np.testing.assert_allclose(y.astype(np.float64), want, rtol=2e-3, atol=2e-3)


def test_a_row_has_the_same_bits_whatever_the_rows_and_threads(nat):
    """Every output is one sum in one order: a row alone, among 7 rows (chunked passes) and on 1 or 2
    threads gives the same bits."""
    x, w, _ = _operands(7, 600, 300)
    alone = _product(nat, x[3:4], w)
    for threads in (1, 2):
        native.set_threads(threads)
        try:
            together = _product(nat, x, w)
        finally:
            native.set_threads(native.default_threads())
        assert np.array_equal(together[3:4], alone)


def test_a_gemm_at_one_row_absorbs_the_tanh_gelu(default_backend):
    """A Gemm whose epilogue is fuse_gelu's tanh form runs on the packed GEMV, which applies it as it
    stores (no Gelu pass after it): equal to ge's own numpy Gelu over the product."""
    from math import sqrt, pi
    from ge.core.kernels import lookup
    from ge.core.kernels.epilogue import Epilogue
    from ge.core.kernels.fused import GE_DOMAIN
    from ge.core.kernels.ops.matmul_native import NativeGemv
    from ge.core.model.ir import Meta
    default_backend("native")
    spec = [["Gelu", {"approximate": "tanh"}, GE_DOMAIN]]
    x, w, _ = _operands(1, 50, 70)
    x *= 8  # both tails: e^(-2z) under- and overflows
    bias = rng.standard_normal(70).astype(np.float32)
    k = lookup("Gemm", opset=17)({"ge.epilogue": spec}, [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape),
                                                         Meta(bias.dtype, bias.shape)], [None, w, bias]).load()
    assert isinstance(k.native, NativeGemv) and k.absorbs_epilogue
    assert Epilogue.unless_absorbed(k, spec, k.infer()[0]) is None
    y = np.full((1, 70), np.nan, np.float32)
    k.run([x, w, bias], [y], None)
    pre = x.astype(np.float64) @ w + bias
    want = 0.5 * pre * (1 + np.tanh(sqrt(2 / pi) * (pre + 0.044715 * pre ** 3)))
    assert pre.min() < -10 and pre.max() > 10
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 16])
def test_a_matmul_absorbs_a_fused_tanh(default_backend, rows):
    """FusedMatMul + bias + Tanh (an RNN cell in a Loop body) on the GEMV (one row) and the GEMM:
    the kernel applies tanh as it stores (simd.h's vtanh, the recurrent kernels' rational form), no
    numpy pass after it; values past its [-9, 9] range come out +-1, values near 0 keep their digits."""
    from ge.core.kernels import lookup
    from ge.core.kernels.epilogue import Epilogue
    from ge.core.kernels.ops.matmul_native import NativeGemv, NativeProduct
    from ge.core.model.ir import Meta
    default_backend("native")
    spec = [["Tanh", {}]]
    x, w, _ = _operands(rows, 40, 37)
    w[:, :6] *= 40  # past the clamp
    w[:, -3:] *= 1e-4  # near 0: tanh(v) ~ v, relative digits matter
    bias = np.zeros(37, np.float32)
    metas = [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape), Meta(bias.dtype, bias.shape)]
    k = lookup("FusedMatMul", "ge", 1)({"ge.epilogue": spec}, metas, [None, w, bias]).load()
    plain = lookup("FusedMatMul", "ge", 1)({}, metas, [None, w, bias]).load()  # the same product, no activation
    assert isinstance(k.native, NativeGemv if rows == 1 else NativeProduct) and k.absorbs_epilogue
    assert Epilogue.unless_absorbed(k, spec, k.infer()[0]) is None
    y, pre = np.full((rows, 37), np.nan, np.float32), np.full((rows, 37), np.nan, np.float32)
    for kernel, out in ((k, y), (plain, pre)):
        kernel.run([x, w, bias], [out], np.empty(kernel.workspace_nbytes(), np.uint8))
    assert np.abs(pre[:, :6]).max() > 9 and np.abs(pre[:, -3:]).max() < 1e-3
    np.testing.assert_allclose(y, np.tanh(pre.astype(np.float64)), rtol=1e-6, atol=1e-30)
