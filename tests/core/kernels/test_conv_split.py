"""How the direct and the pixels convolutions (csrc/direct_conv.c, conv_pixels.c) split their work into
the pool's items on MobileNetV2's small planes, and that any split gives one thread's bits."""
import numpy as np
import pytest

from ge.core.kernels import native as native_mod

from .levels import LEVELS_HERE, native_library, skip_reason

nat = native_library()
rng = np.random.default_rng(3)


def pointwise(m, k, plane, *, pixels, wide=False):
    """A 1x1 conv of k -> m channels over `plane` pixels: its prepared call, x, w, y."""
    x = rng.standard_normal((k, plane)).astype(np.float32)
    w = (rng.standard_normal((m, k)) * 0.1).astype(np.float32)
    y = np.full((m, plane), np.nan, np.float32)
    koff = np.arange(k, dtype=np.int64) * plane
    wp = nat.pack_pixels(w) if pixels else nat.pack_direct(w, wide)
    call = nat.conv_direct_call(x.ctypes.data, koff, wp, y.ctypes.data, m=m, k=k, rows=1, width=plane, pitch=plane,
                                ldy=plane, wide=wide, pixels=pixels)
    return call, x, w, y


def items(call, threads: int, pixels: bool) -> int:
    call.keep[0].threads = threads
    fn = nat.lib.ge_conv_pixels_items if pixels else nat.lib.ge_conv_direct_items
    return fn(call.ref)


@pytest.fixture(autouse=True)
def _native():
    if nat is None:
        pytest.skip(skip_reason(LEVELS_HERE[0]))


def test_pixels_splits_a_small_planes_channels_for_two_threads():
    """14x14, 64 -> 384 (MobileNetV2's expanding convs): 13 vectors of 16 pixels make at most 5 strips of
    3 vectors; 2 threads take 2 parts of the channels x 5 strips (3 and 2 strips left one idle 20%)."""
    call = pointwise(384, 64, 196, pixels=True)[0]
    vl16 = nat.lib.ge_pixels_block() == 8  # 8 channels per block on AVX-512, 4 on AVX2
    assert [items(call, t, True) for t in (1, 2)] == ([4, 10] if vl16 else [4, 8])


def test_pixels_keeps_whole_channels_where_strips_balance():
    call = pointwise(144, 24, 56 * 56, pixels=True)[0]  # 56x56: strips enough, no channel parts
    assert [items(call, t, True) for t in (1, 2)] == [4, 8]


def test_direct_splits_into_a_multiple_of_the_threads():
    """14x14, 576 -> 96 (MobileNetV2's projections), the tall tile: 3 panels of 32 channels (AVX-512) x
    14 blocks of 14 pixels; 2 threads: 3 x 4 chunks, not 3 x 3 (5 and 4 items). (AVX2: 6 panels x 2
    chunks; SSE: 12 panels, enough alone.)"""
    call = pointwise(96, 576, 196, pixels=False)[0]
    panels = -(-96 // nat.lib.ge_direct_panel(0, 96))
    assert [items(call, t, False) for t in (1, 2)] == [panels, 12]


@pytest.mark.parametrize("m,k,plane,pixels", [(384, 64, 196, True), (96, 576, 196, False), (160, 960, 49, False),
                                              (13, 7, 150, True), (40, 30, 29, False)])
def test_any_split_gives_one_threads_bits(m, k, plane, pixels):
    call, x, w, y = pointwise(m, k, plane, pixels=pixels)
    out = {}
    for threads in (1, 2, 3):
        y[:] = np.nan
        call.keep[0].threads = threads  # the split for that many threads (the pool runs what it can)
        call.run()
        out[threads] = y.copy()
    np.testing.assert_allclose(out[1], w.astype(np.float64) @ x, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(out[2], out[1])
    np.testing.assert_array_equal(out[3], out[1])



def depthwise_calls(x, w, y):
    n, c, h, wd = x.shape
    return [nat.depthwise_call(x[i].ctypes.data, w, None, y[i].ctypes.data, channels=c, mult=1, spatial=(h, wd),
                               out=(h, wd), kernel=(3, 3), strides=(1, 1), dilations=(1, 1), pads=(1, 1))
            for i in range(n)]


@pytest.mark.parametrize("n,threads", [(4, 2), (2, 2), (3, 2), (4, 1), (1, 2)])
def test_a_batch_shared_evenly_is_one_job_of_whole_items(n, threads):
    """Batch items that share out evenly over the threads: one pool job, an item per batch item, each
    call unsplit (its thread count 1); otherwise each item's call is split over the threads. Either
    way, each item's bits are one thread's."""
    x = rng.standard_normal((n, 6, 20, 20)).astype(np.float32)
    w = rng.standard_normal((6, 9)).astype(np.float32)
    y, want = (np.full(x.shape, np.nan, np.float32) for _ in range(2))
    native_mod.set_threads(threads)
    try:
        calls = depthwise_calls(x, w, y)
        prepared = nat.per_item_calls(calls, n)
        threads = native_mod.threads()  # at most the CPUs
    finally:
        native_mod.set_threads(native_mod.default_threads())
    shared = threads > 1 and n % threads == 0
    assert len(prepared) == (1 if shared or n == 1 else n)
    if shared:
        batch = prepared[0].keep[0]
        assert (batch.count, batch.threads) == (n, threads) and all(c.keep[0].threads == 1 for c in calls)
    for call in prepared:
        call.run()
    for call in depthwise_calls(x, w, want):
        call.keep[0].threads = 1
        call.run()
    assert not np.isnan(want).any()
    np.testing.assert_array_equal(y, want)
