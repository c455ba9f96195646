"""ge's native GEMM (core/kernels/csrc/ through core/kernels/native/) against numpy, exactly as callers use it."""
import os
import threading

import numpy as np
import pytest

from ge.core.kernels import native as native_mod
from ge.core.kernels.native import native

nat = native()
pytestmark = pytest.mark.skipif(nat is None, reason="ge's native GEMM is not built")
rng = np.random.default_rng(0)
TOL = dict(rtol=1e-5, atol=1e-4)

SHAPES = [(1, 1, 1), (5, 7, 3), (13, 300, 33), (64, 576, 97), (37, 513, 70), (128, 256, 1024), (3, 0, 4)]


def operands(m, k, n):
    a = rng.standard_normal((m, k), np.float32)
    b = rng.standard_normal((k, n), np.float32)
    return a, b, a.astype(np.float64) @ b


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_raw_a_packed_b_with_epilogue(m, k, n, threads):
    """Rows of activations times packed weights, with a column bias, a residual and a clamp."""
    a, b, ab = operands(m, k, n)
    bias = rng.standard_normal(n).astype(np.float32)
    z = rng.standard_normal((m, n), np.float32)
    c = np.full((m, n), np.nan, np.float32)
    ws = np.empty(nat.workspace_nbytes(m, n, k, raw_a=True, gathered_b=False), np.uint8)
    native_mod.set_threads(threads)
    try:
        nat.gemm(m, n, k, c, n, a=a, lda=k, bp=nat.pack_b(b), bias_n=bias, z=z, ldz=n, act=native_mod.Act(native_mod.ACT_CLAMP, -0.5, 2.0), ws=ws)
    finally:
        native_mod.set_threads(native_mod.default_threads())
    np.testing.assert_allclose(c, np.clip(ab + bias + z, -0.5, 2.0), **TOL)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("m,k,lda", [(m, 70, 75) for m in range(1, 26)] + [(197, 768, 768), (13, 1024, 1024),
                                                                            (13, 1025, 1025), (30, 96, 1024),
                                                                            (197, 3072, 3072), (20, 5000, 5003)])
def test_raw_a_rows_in_place(m, k, lda, threads):
    """Activations (rows lda apart) times packed weights, A read in place where K fits one block:
    every tail of a block of rows (1 to 25 rows), ViT's 197 x 768, and rows 4 KB apart (A packed,
    in place would thrash the L1 cache) or K past WHOLE_K (packed too; one block of K up to 4096,
    1024 with AVX2, blocks past it), each beside numpy."""
    a_wide = rng.standard_normal((m, lda), np.float32)
    a = a_wide[:, :k]
    b = rng.standard_normal((k, 40), np.float32) / np.float32(np.sqrt(k))  # sums of order 1 at any K
    bias = rng.standard_normal(40).astype(np.float32)
    c = np.full((m, 40), np.nan, np.float32)
    ws = np.empty(nat.workspace_nbytes(m, 40, k, raw_a=True, gathered_b=False), np.uint8)
    native_mod.set_threads(threads)
    try:
        nat.gemm(m, 40, k, c, 40, a=a_wide, lda=lda, bp=nat.pack_b(b), bias_n=bias, ws=ws)
    finally:
        native_mod.set_threads(native_mod.default_threads())
    np.testing.assert_allclose(c, a.astype(np.float64) @ b + bias, **TOL)


@pytest.mark.parametrize("m,k,n,lda", [(100, 700, 40, 700), (100, 1500, 64, 1500), (100, 1500, 300, 1500),
                                        (29, 1500, 40, 1500), (100, 4097, 40, 4097), (100, 1024, 40, 2048)])
def test_batch_of_products_reads_long_rows_of_a_in_place(m, k, n, lda):
    """Attention's P V over long sequences: two products of activations, B gathered and packed whole, A's
    rows read in place for any K up to IN_PLACE_K in one block (a tail block of rows packed), packed past
    it or where its rows are 4 KB apart; beside numpy."""
    a = rng.standard_normal((2, m, lda), np.float32)
    b = rng.standard_normal((2, k, n), np.float32) / np.float32(np.sqrt(k))
    c = np.full((2, m, n), np.nan, np.float32)
    offsets = {"a": np.array([0, m * lda], np.int64), "b": np.array([0, k * n], np.int64),
               "c": np.array([0, m * n], np.int64)}
    ws = np.empty(nat.batch_workspace_nbytes(m, n, k), np.uint8)
    nat.batch_call(m, n, k, offsets, ws=ws, a=a, lda=lda, b=b, koff=np.arange(k, dtype=np.int64) * n,
                   noff=np.arange(n, dtype=np.int64), c=c, ldc=n).run()
    np.testing.assert_allclose(c, a[:, :, :k].astype(np.float64) @ b, **TOL)


@pytest.mark.parametrize("threads", [1, 64])
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_packed_a_gathered_b(m, k, n, threads):
    """Packed weights times columns gathered through offset tables (here a transposed matrix: every
    panel is a gather), with a row bias and no clamp."""
    a, b, ab = operands(m, k, n)
    bt = np.ascontiguousarray(b.T)  # B[k, j] = bt[j, k]
    koff = np.arange(k, dtype=np.int64)
    noff = np.arange(n, dtype=np.int64) * k
    bias = rng.standard_normal(m).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    ws = np.empty(nat.workspace_nbytes(m, n, k, raw_a=False, gathered_b=True), np.uint8)
    native_mod.set_threads(threads)  # more than the CPUs: capped, the per-thread panels fit
    try:
        nat.gemm(m, n, k, c, n, ap=nat.pack_a(a), b=bt, koff=koff, noff=noff, bias_m=bias, ws=ws)
    finally:
        native_mod.set_threads(native_mod.default_threads())
    np.testing.assert_allclose(c, ab + bias[:, None], **TOL)


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("m,k,n", [(40, 16, 401), (13, 1, 50), (97, 30, 1000), (20, 20, 300), (64, 64, 33),
                                   (40, 65, 70)])
def test_short_k_many_rows(m, k, n, threads):
    """A short K and at least as many rows (an expanding pointwise conv): blocks of rows across
    every panel of B packed whole; raw A, gathered B, a row bias, a residual and HardSwish."""
    a, b, ab = operands(m, k, n)
    koff = np.arange(k, dtype=np.int64) * n
    noff = np.arange(n, dtype=np.int64)
    bias = rng.standard_normal(m).astype(np.float32)
    z = rng.standard_normal((m, n), np.float32)
    c = np.full((m, n), np.nan, np.float32)
    ws = np.empty(nat.workspace_nbytes(m, n, k, raw_a=True, gathered_b=True), np.uint8)
    native_mod.set_threads(threads)
    try:
        nat.gemm(m, n, k, c, n, a=a, lda=k, b=b, koff=koff, noff=noff, bias_m=bias, z=z, ldz=n,
                 act=native_mod.Act(native_mod.ACT_HARDSWISH, 0.0, 0.0), ws=ws)
    finally:
        native_mod.set_threads(native_mod.default_threads())
    v = ab + bias[:, None] + z
    np.testing.assert_allclose(c, v * np.clip(v / 6 + 0.5, 0, 1), **TOL)


@pytest.mark.parametrize("m", [7, 8, 14, 17, 26])
def test_few_rows_split_tail(m):
    """Few rows whose last block of rows is short (AVX2: 8 rows run as 4 + 4, not 6 + 2; AVX-512: 14 as
    8 + 6; see block_first in gemm.c), A read in place, packed (rows 4 KB apart) and prepacked: near the
    float64 product, the same bits on 1 and 2 threads, and a tile stored straight from its registers
    (biases, residual, clamp) the same bits as one through the epilogue's buffer (forced by a
    LeakyRelu of slope 1, which changes nothing)."""
    k, n = 96, 80
    a_wide = rng.standard_normal((m, 1024), np.float32)
    a, b = a_wide[:, :k], rng.standard_normal((k, n), np.float32)
    bias_m, bias_n = rng.standard_normal(m).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    z = rng.standard_normal((m, n), np.float32)
    bp, ap = nat.pack_b(b), nat.pack_a(a)
    ws = np.empty(nat.workspace_nbytes(m, n, k, raw_a=True, gathered_b=False), np.uint8)
    want = a.astype(np.float64) @ b + bias_m[:, None] + bias_n + z
    no_op = native_mod.Act(native_mod.ACT_LEAKY_RELU, 1.0, 0.0)
    clip = native_mod.Act(native_mod.ACT_CLAMP, -2.0, 3.0)
    for operands in (dict(a=np.ascontiguousarray(a), lda=k), dict(a=a_wide, lda=1024), dict(ap=ap)):
        results = []
        for threads, act in ((1, None), (2, None), (1, no_op), (1, clip)):
            c = np.full((m, n), np.nan, np.float32)
            native_mod.set_threads(threads)
            try:
                nat.gemm(m, n, k, c, n, bp=bp, bias_m=bias_m, bias_n=bias_n, z=z, ldz=n, act=act, ws=ws, **operands)
            finally:
                native_mod.set_threads(native_mod.default_threads())
            results.append(c)
        np.testing.assert_allclose(results[0], want, **TOL)
        np.testing.assert_array_equal(results[1], results[0])
        np.testing.assert_array_equal(results[2], results[0])
        np.testing.assert_array_equal(results[3], np.clip(results[0], np.float32(-2), np.float32(3)))


def test_strided_rows_and_output():
    """A with a row stride wider than K, C written into a wider matrix: the rest stays untouched."""
    a_wide = rng.standard_normal((20, 50), np.float32)
    a = a_wide[:, 5:35]
    b = rng.standard_normal((30, 40), np.float32)
    c_wide = np.zeros((20, 64), np.float32)
    ws = np.empty(nat.workspace_nbytes(20, 40, 30, raw_a=True, gathered_b=False), np.uint8)
    nat.gemm(20, 40, 30, c_wide.ctypes.data + 8 * 4, 64, a=a.ctypes.data, lda=50, bp=nat.pack_b(b), ws=ws)
    np.testing.assert_allclose(c_wide[:, 8:48], a @ b, **TOL)
    assert not c_wide[:, :8].any() and not c_wide[:, 48:].any()


def test_concurrent_callers_share_the_pool():
    """Threads calling at once (several contexts): each result is its own."""
    a, b, ab = operands(96, 200, 150)
    bp = nat.pack_b(b)
    errors = []

    def work(scale):
        x = a * scale
        c = np.empty((96, 150), np.float32)
        ws = np.empty(nat.workspace_nbytes(96, 150, 200, raw_a=True, gathered_b=False), np.uint8)
        for _ in range(30):
            nat.gemm(96, 150, 200, c, 150, a=x, lda=200, bp=bp, ws=ws)
            if not np.allclose(c, ab * scale, **TOL):
                errors.append(scale)

    threads = [threading.Thread(target=work, args=(s,)) for s in (1.0, 2.0, -1.0, 0.5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_workspace_is_required():
    a, b, _ = operands(4, 4, 4)
    with pytest.raises(ValueError, match="workspace"):
        nat.gemm(4, 4, 4, np.empty((4, 4), np.float32), 4, a=a, lda=4, bp=nat.pack_b(b))


def test_disabled_by_environment(monkeypatch):
    monkeypatch.setenv("GE_NO_NATIVE", "1")
    monkeypatch.setattr(native_mod.loader, "_NATIVE", False)
    assert native_mod.native() is None
    monkeypatch.delenv("GE_NO_NATIVE")
    monkeypatch.setattr(native_mod.loader, "_NATIVE", False)
    assert native_mod.native() is not None


@pytest.mark.parametrize("spec,lo,hi", [([["Relu", {}]], 0.0, np.inf), ([["Clip", {"min": 0.0, "max": 6.0}]], 0.0, 6.0)])
def test_kernels_absorb_a_fused_clamp(spec, lo, hi):
    """Conv and FusedMatMul apply a fused Relu/Clip as the GEMM stores: the runtime gets no epilogue
    to run after them, and the output is clamped once."""
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    from ge.core.kernels.epilogue import Epilogue
    x = rng.standard_normal((1, 8, 6, 6), np.float32) * 4
    w = rng.standard_normal((5, 8, 3, 3), np.float32)
    attrs = {"pads": [1, 1, 1, 1], "ge.epilogue": spec}
    conv = lookup("Conv", opset=17)(attrs, [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape)], [None, w]).load()
    a = rng.standard_normal((16, 8), np.float32) * 4
    wm = rng.standard_normal((8, 3), np.float32)
    mm = lookup("FusedMatMul", "ge", 1)({"ge.epilogue": spec}, [Meta(a.dtype, a.shape), Meta(wm.dtype, wm.shape)],
                                        [None, wm]).load()
    plain = lookup("Conv", opset=17)({"pads": [1, 1, 1, 1]}, [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape)], [None, w])
    for kernel, args, want in ((conv, [x, w], plain.compute(x, w)[0]), (mm, [a, wm], a @ wm)):
        assert kernel.absorbs_epilogue
        assert Epilogue.unless_absorbed(kernel, spec, kernel.infer()[0]) is None
        y = np.empty(kernel.infer()[0].shape, np.float32)
        kernel.run(args, [y], np.empty(kernel.workspace_nbytes(), np.uint8))
        np.testing.assert_allclose(y, np.clip(want, lo, hi), **TOL)


@pytest.mark.parametrize("rows", [1, 3])
def test_gemv_absorbs_squeeze_excite_activations(rows):
    """A 1x1 Conv on a 1x1 plane and a Gemm with few rows run on the native GEMV (csrc/gemv.c), which
    applies the bias and the fused HardSigmoid / HardSwish as it stores; odd sizes cover its tails."""
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    from ge.core.kernels.ops.conv_native import NativeConvGemv
    from ge.core.kernels.epilogue import Epilogue
    from ge.core.kernels.ops.matmul_native import NativeGemv
    hsig, hswish = [["HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}]], [["HardSwish", {}]]
    x = rng.standard_normal((rows, 45, 1, 1), np.float32) * 2
    w, b = rng.standard_normal((19, 45, 1, 1), np.float32) / 6, rng.standard_normal(19, np.float32)
    conv = lookup("Conv", opset=17)({"ge.epilogue": hsig}, [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape),
                                                            Meta(b.dtype, b.shape)], [None, w, b]).load()
    a, wm, c = x.reshape(rows, 45), rng.standard_normal((23, 45), np.float32) / 6, rng.standard_normal(23, np.float32)
    gemm = lookup("Gemm", opset=17)({"transB": 1, "ge.epilogue": hswish}, [Meta(a.dtype, a.shape), Meta(
        wm.dtype, wm.shape), Meta(c.dtype, c.shape)], [None, wm, c]).load()
    conv_want = np.clip((a @ w.reshape(19, 45).T + b) / 6 + 0.5, 0, 1).reshape(rows, 19, 1, 1)
    gemm_want = (a @ wm.T + c) * np.clip((a @ wm.T + c) / 6 + 0.5, 0, 1)
    for kernel, plan, spec, args, want in ((conv, NativeConvGemv, hsig, [x, w, b], conv_want),
                                           (gemm, NativeGemv, hswish, [a, wm, c], gemm_want)):
        assert isinstance(kernel.native, plan) and kernel.absorbs_epilogue
        assert Epilogue.unless_absorbed(kernel, spec, kernel.infer()[0]) is None
        y = np.full(kernel.infer()[0].shape, 77, np.float32)
        kernel.run(args, [y], None)
        np.testing.assert_allclose(y, want, **TOL)


def test_kernel_state_keeps_numpy_blas_single_threaded_beside_native_kernels():
    """Around a model with native kernels numpy's OpenBLAS runs one thread (its spinning workers and
    the native pool would fight for the cores); the count is restored after, and left alone for a
    model without native kernels. A nested use (a loop body's launch) keeps what the outer one set,
    and the outer one's exit restores the count and numpy's error state."""
    from ge.core.kernels.blas import kernel_state, openblas_threads_local
    before = openblas_threads_local(2)
    if before is None:
        pytest.skip("numpy's BLAS has no per-thread thread count")
    errors = np.geterr()
    try:
        with kernel_state(True):
            assert openblas_threads_local(1) == 1
            with kernel_state(True), kernel_state(False):
                assert np.geterr()["divide"] == "ignore"
            assert openblas_threads_local(1) == 1 and np.geterr()["divide"] == "ignore"
        assert openblas_threads_local(2) == 2 and np.geterr() == errors
        with kernel_state(False):
            assert openblas_threads_local(2) == 2 and np.geterr()["invalid"] == "ignore"
            with kernel_state(True):
                assert openblas_threads_local(1) == 1
            assert openblas_threads_local(2) == 2
        assert np.geterr() == errors
    finally:
        openblas_threads_local(before)


def test_kernel_state_leaves_numpy_blas_alone_beside_one_native_thread():
    """Native kernels held to one thread (blas.set_local_threads(1), as a single-threaded server's
    workers run) start no pool to fight OpenBLAS's: its count stays what the caller set."""
    from ge.core.kernels.blas import kernel_state, openblas_threads_local
    before = openblas_threads_local(2)
    if before is None:
        pytest.skip("numpy's BLAS has no per-thread thread count")
    threads = native_mod.threads()
    try:
        native_mod.set_threads(1)
        with kernel_state(True):
            assert openblas_threads_local(2) == 2
    finally:
        native_mod.set_threads(threads)
        openblas_threads_local(before)


def test_kernel_state_ignores_errors_inside_and_restores_each_callers_own_state():
    """The error state kernel_state sets (derived once per caller's state, then reused) ignores every
    error whatever the caller had, and each caller's own settings come back after."""
    from ge.core.kernels.blas import kernel_state
    ones, zeros = np.ones(2, np.float32), np.zeros(2, np.float32)
    for outer in ({"divide": "raise"}, {"all": "ignore"}, {"all": "raise", "under": "warn"}):
        with np.errstate(**outer):
            before = np.geterr()
            for _ in range(2):  # the second use takes the derived state from the cache
                with kernel_state(False):
                    assert set(np.geterr().values()) == {"ignore"}
                    assert np.all(np.isinf(ones / zeros))  # neither raised nor warned
                assert np.geterr() == before
            if before["divide"] == "raise":
                with pytest.raises(FloatingPointError):
                    ones / zeros  # noqa: B018 (the caller's "raise" is back)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_a_forked_child_runs_the_pool_again():
    """After fork the child has none of the pool's workers (nor their locks): it starts its own."""
    a, b, ab = operands(64, 96, 80)
    bp = nat.pack_b(b)
    ws = np.empty(nat.workspace_nbytes(64, 80, 96, raw_a=True, gathered_b=False), np.uint8)
    c = np.empty((64, 80), np.float32)
    nat.gemm(64, 80, 96, c, 80, a=a, lda=96, bp=bp, ws=ws)  # the parent's pool has run
    pid = os.fork()
    if pid == 0:  # the child: exit status says whether its product is right
        nat.gemm(64, 80, 96, c, 80, a=a, lda=96, bp=bp, ws=ws)
        os._exit(0 if np.allclose(c, ab, **TOL) else 1)
    _, status = os.waitpid(pid, 0)
    assert status == 0


def test_a_step_loop_runs_prepared_calls_between_its_copies():
    """csrc/loop.c as a bound Scan or Loop uses it: acc2 = acc + x[t] over a reversed input, each acc2
    stacked and carried back, the iteration number counted; a false condition ends it after that
    iteration's outputs, before the state goes back; a strided slice is no block (None)."""
    xs = rng.standard_normal((6, 5)).astype(np.float32)
    acc, x, acc2, ys = np.zeros(5, np.float32), np.empty(5, np.float32), np.empty(5, np.float32), np.zeros((6, 5), np.float32)
    counter, go = np.zeros((), np.int64), np.array(True)
    loop = nat.step_loop([nat.binary_call(native_mod.EW_ADD, acc, x, acc2)], [(x, xs[::-1])], [(ys, acc2)], [(acc, acc2)],
                         counter, go)
    loop.keep[0].start, loop.keep[0].stop = 0, 6
    assert loop.run_checked() == 6 and counter == 5
    np.testing.assert_array_equal(ys, np.cumsum(xs[::-1], axis=0, dtype=np.float32))
    np.testing.assert_array_equal(acc, ys[-1])
    go[...], before = False, acc.copy()
    loop.keep[0].start, loop.keep[0].stop = 2, 6
    assert loop.run_checked() == 3 and counter == 2
    np.testing.assert_array_equal(ys[2], before + xs[::-1][2])
    np.testing.assert_array_equal(acc, before)  # (not carried back: the loop ended)
    assert nat.step_loop([], [(x[:3], xs[:, ::2])], [], [], None, None) is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_compare_calls_give_numpys_comparisons(dtype):
    """ge_compare (a Loop body's Less, Equal...) against numpy's ufuncs, one shape or a scalar on either
    side, NaN and -0.0 included for floats; another broadcast or dtype is not its (None)."""
    special = [0, -0.0, np.nan, np.inf, -np.inf] if np.dtype(dtype).kind == "f" else [0, np.iinfo(dtype).min, np.iinfo(dtype).max]
    a = np.concatenate([np.array(special * 3, dtype), rng.integers(-3, 3, 40).astype(dtype)])
    b = np.concatenate([np.array(special * 3, dtype)[::-1], rng.integers(-3, 3, 40).astype(dtype)])
    ufuncs = {native_mod.CMP_LT: np.less, native_mod.CMP_LE: np.less_equal, native_mod.CMP_GT: np.greater,
              native_mod.CMP_GE: np.greater_equal, native_mod.CMP_EQ: np.equal}
    for op, ufunc in ufuncs.items():
        for x, y in ((a, b), (a, b[2:3]), (a[2:3], b), (a[:1], b[:1])):
            out = np.ones(max(x.size, y.size), np.bool_)
            nat.compare_call(op, x, y, out).run()
            np.testing.assert_array_equal(out, ufunc(x, y))
    assert nat.compare_call(native_mod.CMP_LT, a[:4], b[:2], np.empty(4, np.bool_)) is None
    half = np.zeros(4, np.float16)
    assert nat.compare_call(native_mod.CMP_LT, half, half, np.empty(4, np.bool_)) is None


def test_blocks_sized_to_a_smaller_cache():
    """A CPU with a smaller L1d and L2 (a Zen 3's 32 KB and 512 KB) gets smaller chunks of rows
    (csrc/caches.h): 600 rows are 5 chunks there, 2 as tuned; the same products either way. The
    sizes are clamped to [16 KB, 48 KB] and [256 KB, 2 MB]; 0 asks the C library for this CPU's."""
    a, b, ab = operands(600, 700, 100)
    bp = nat.pack_b(b)
    ws = np.empty(nat.workspace_nbytes(600, 100, 700, raw_a=True, gathered_b=False), np.uint8)
    try:
        assert nat.cache_sizes(1, 10) == (16 << 10, 256 << 10)
        assert nat.cache_sizes(1 << 30, 1 << 30) == (48 << 10, 2 << 20)
        for caches in ((32 << 10, 512 << 10), (48 << 10, 2 << 20)):
            assert nat.cache_sizes(*caches) == caches
            c = np.full((600, 100), np.nan, np.float32)
            nat.gemm(600, 100, 700, c, 100, a=a, lda=700, bp=bp, ws=ws)
            np.testing.assert_allclose(c, ab, **TOL)
    finally:
        l1d, l2 = nat.cache_sizes(0, 0)
    assert 16 << 10 <= l1d <= 48 << 10 and 256 << 10 <= l2 <= 2 << 20
