"""WeightPacks: kernels built for new shapes reuse packed weights, and pack again only when their
plan wants another layout; without a pack cache (the static path) a kernel packs as before."""
import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.core.kernels.packs import WeightPacks

rng = np.random.default_rng(0)
F32 = np.dtype(np.float32)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def test_one_pack_per_weights_and_layout_read_only():
    packs, w = WeightPacks(), f32(4, 3)
    calls = []

    def transpose(a):
        calls.append(1)
        return np.ascontiguousarray(a.T)
    first = packs.get((w,), ("T",), transpose)
    assert packs.get((w,), ("T",), transpose) is first and (packs.packs, packs.hits) == (1, 1)
    assert packs.get((w[:2],), ("T",), transpose) is not first  # another view: other weights
    assert packs.get((w,), ("T", "other"), transpose) is not first  # another layout: packs again
    assert (packs.packs, packs.hits, len(calls)) == (3, 1, 3)
    with pytest.raises(ValueError):
        first[0, 0] = 1


def conv(x_shape, w, b, packs=None):
    cls = lookup("Conv", opset=17)
    return cls({"pads": [1, 1, 1, 1]}, [Meta(F32, x_shape), Meta(w.dtype, w.shape), Meta(b.dtype, b.shape)],
               [None, w, b], packs=packs).load()


def test_conv_packs_taps_once_and_not_for_a_view_layout(default_backend):
    """A 3x3 Conv over 32 channels, numpy plans: the 'taps' plan on large images packs W into
    [taps, OC, C], once for every image size it serves; small images take im2col, which reads W in
    its stored layout (a reshape, no pack). Every result equals the kernel built without a pack
    cache, bit for bit."""
    from ge.core.kernels.ops import conv as conv_module
    if conv_module.cblas().sgemm is None:
        pytest.skip("no cblas_sgemm reachable through numpy: no taps plan")
    default_backend("numpy")
    w, b, packs = f32(16, 32, 3, 3), f32(16), WeightPacks()
    seen = []
    for size in (32, 40, 4, 48, 5):
        x = f32(1, 32, size, size)
        k = conv(x.shape, w, b, packs)
        seen.append((k.plan, packs.packs, packs.hits))
        np.testing.assert_array_equal(k.compute(x, w, b)[0], conv(x.shape, w, b).compute(x, w, b)[0])
    assert seen == [("taps", 1, 0), ("taps", 1, 1), ("im2col", 1, 1), ("taps", 1, 2), ("im2col", 1, 2)]
    assert conv((1, 32, 32, 32), w, b).packs is None  # static path: no cache, packs per kernel


def test_native_conv_packs_once_per_tile():
    """With ge's native kernels every image size takes the native plan (here the direct convolution):
    W is packed once per tile layout and shared by every size that uses it. Rows of 32 and 40
    pixels take the wide tile, rows of 4 the tall one."""
    from ge.core.kernels.native import native
    if native() is None:
        pytest.skip("ge's native GEMM is not built")
    w, b, packs, seen = f32(64, 32, 3, 3), f32(64), WeightPacks(), []  # (more channels than a tall tile holds)
    for size in (32, 40, 4):
        x = f32(1, 32, size, size)
        k = conv(x.shape, w, b, packs)
        assert k.plan == "native"
        np.testing.assert_array_equal(k.compute(x, w, b)[0], conv(x.shape, w, b).compute(x, w, b)[0])
        seen.append((k.native.kind, packs.packs, packs.hits))
    assert seen == [("direct-wide", 1, 0), ("direct-wide", 1, 1), ("direct", 2, 1)]


def test_recurrent_and_batchnorm_share_their_packs_across_shapes():
    packs = WeightPacks()
    w, r, bias = f32(1, 4 * 8, 5), f32(1, 4 * 8, 8), f32(1, 8 * 8)
    lstm = lookup("LSTM", opset=17)
    for t, batch in ((3, 2), (7, 1), (3, 4)):
        x = f32(t, batch, 5)
        metas = [Meta(F32, a.shape) for a in (x, w, r, bias)]
        k = lstm({"hidden_size": 8}, metas, [None, w, r, bias], packs=packs, num_outputs=3).load()
        ref = lstm({"hidden_size": 8}, metas, [None, w, r, bias], num_outputs=3)
        for got, want in zip(k.compute(x, w, r, bias), ref.compute(x, w, r, bias)):
            np.testing.assert_array_equal(got, want)
    assert (packs.packs, packs.hits) == (1, 2)
    bn = lookup("BatchNormalization", opset=17)
    params = [f32(6), f32(6), f32(6), np.abs(f32(6)) + 0.1]
    for size in (4, 9):
        metas = [Meta(F32, (2, 6, size, size))] + [Meta(F32, (6,))] * 4
        bn({}, metas, [None] + params, packs=packs).load()
    assert (packs.packs, packs.hits) == (2, 3)
