"""The native float16 <-> float32 conversion (csrc/convert.c) at every level this CPU runs, one thread
and several: bit for bit numpy's (round to nearest even, overflow to infinity, subnormals, NaN payloads
and signalling NaNs kept as numpy keeps them), over every float16 value and the float32 values at
every rounding boundary; and the float16 adapter converts through it."""
import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels import lookup, native as native_mod
from ge.core.kernels.backend import Backend

from .levels import best_level, level_params

ALL_HALVES = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def float32_edges() -> np.ndarray:
    """Every sign, exponent and top-10 significand bits (2^19) with the 13 bits below them at and
    around the half-way point and the ends; the exact values that round to the ends of float16's
    ranges; and random floats."""
    high = np.arange(1 << 19, dtype=np.uint32) << 13
    low = np.array([0, 1, 0x0fff, 0x1000, 0x1001, 0x1fff], np.uint32)
    named = np.array([0.0, -0.0, np.inf, -np.inf, 65504, 65519.996, 65520, -65520, 2.0 ** -24, 2.0 ** -25,
                      3 * 2.0 ** -26, 2.0 ** -25 * 1.0000001, 2.0 ** -14, 2.0 ** -14 - 2.0 ** -25, 1e-45, 3.4e38],
                     np.float32).view(np.uint32)
    nans = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0x7fa00000, 0xff802000, 0x7f801fff, 0x7fffffff],
                     np.uint32)  # quiet, signalling, payload below float16's bits (-> 0x7c01)
    rand = np.random.default_rng(0).integers(0, 1 << 32, 1 << 20, dtype=np.uint32)
    return np.concatenate([(high[:, None] | low).ravel(), named, nans, rand]).view(np.float32)


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    native_mod.set_threads(request.param)
    yield request.param
    native_mod.calls._local.threads = None


@pytest.mark.parametrize("level", level_params())
def test_half_to_float_is_numpys_for_every_half(level, threads):
    lib = native_mod.load_level(level)
    out = np.empty(ALL_HALVES.size, np.float32)
    lib.half_to_float(ALL_HALVES.view(np.float16), out)
    np.testing.assert_array_equal(out.view(np.uint32), ALL_HALVES.view(np.float16).astype(np.float32).view(np.uint32))


@pytest.mark.parametrize("level", level_params())
def test_float_to_half_is_numpys_at_every_boundary(level, threads):
    lib = native_mod.load_level(level)
    values = float32_edges()
    out = np.empty(values.size, np.float16)
    lib.float_to_half(values, out)
    with np.errstate(over="ignore"):
        want = values.astype(np.float16)
    np.testing.assert_array_equal(out.view(np.uint16), want.view(np.uint16))
    # and every half comes back as numpy brings it back: itself, but for a signalling NaN where numpy's
    # conversions are the CPU's and quiet it (aarch64's FCVT)
    back = np.empty(ALL_HALVES.size, np.float16)
    wide = ALL_HALVES.view(np.float16).astype(np.float32)
    lib.float_to_half(wide, back)
    np.testing.assert_array_equal(back.view(np.uint16), wide.astype(np.float16).view(np.uint16))


@pytest.mark.parametrize("level", level_params())
@pytest.mark.parametrize("n", [0, 1, 7, 8, 15, 17, 100_003])
def test_every_length(level, n):
    """Vector bodies and scalar tails, one item and several (the pool's items are 32768 elements)."""
    lib = native_mod.load_level(level)
    h = np.random.default_rng(n).standard_normal(n).astype(np.float16)
    f = np.empty(n, np.float32)
    lib.half_to_float(h, f)
    np.testing.assert_array_equal(f, h.astype(np.float32))
    h2 = np.empty(n, np.float16)
    lib.float_to_half(f * 1.001, h2)
    np.testing.assert_array_equal(h2.view(np.uint16), (f * 1.001).astype(np.float16).view(np.uint16))


def test_the_float16_adapter_converts_natively(monkeypatch):
    """A float16 Conv on the native backend widens its weights once, at load, through the library, and
    then converts no whole tensor per run: its phase fill reads the float16 input, its GEMM rounds as
    it stores (tests/core/kernels/test_float16_native.py has the kernels' paths)."""
    lib = native_mod.load_level(best_level())
    calls = []
    for name in ("half_to_float", "float_to_half"):
        real = getattr(lib, name)
        monkeypatch.setattr(lib, name, lambda s, d, real=real, name=name: (calls.append(name), real(s, d)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float16)
    w = (rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float16)
    metas = [Meta(x.dtype, x.shape), Meta(w.dtype, w.shape)]
    kernel = lookup("Conv", opset=17)({"pads": [1, 1, 1, 1]}, metas, [None, w], backend=Backend(lib)).load()
    assert calls == ["half_to_float"]  # the weights, once at load
    y = kernel.compute(x, w)[0]
    assert calls == ["half_to_float"]
    want = lookup("Conv", opset=17)({"pads": [1, 1, 1, 1]}, [Meta(np.float32, x.shape), Meta(np.float32, w.shape)],
                                     [None, w.astype(np.float32)], backend=Backend(lib)).load()
    np.testing.assert_array_equal(y, want.compute(x.astype(np.float32), w.astype(np.float32))[0].astype(np.float16))
