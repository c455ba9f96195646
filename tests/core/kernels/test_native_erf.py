"""Erf on the native kernels (csrc/eltwise.c's vectorized erf, run alone by the Erf kernel and as a
step of elementwise chains), at every level this CPU runs (v2: no F16C, the portable conversions):
float32 within 2 ulp of the correctly rounded erf (math.erf) over the whole range, tails, subnormals,
signed zeros, infinities and NaN; float16 the float32 erf of the widened value rounded once, with no
whole-tensor conversion."""
import math

import numpy as np
import pytest

from ge.core.model.ir import Meta
from ge.core.kernels import lookup, native as native_mod
from ge.core.kernels.backend import Backend

from .levels import best_level, level_params

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)


def erf_kernel(dtype, shape, level):
    k = lookup("Erf", opset=17)({}, [Meta(dtype, shape)], name="erf", backend=Backend(native_mod.load_level(level)))
    assert k.native and k.workspace_nbytes() == 0
    return k.load()


def reference(x: np.ndarray) -> np.ndarray:
    """math.erf of each value (float64), NaN for NaN."""
    return np.array([math.erf(v) if v == v else math.nan for v in x.astype(np.float64).tolist()])


def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between float32 arrays (sign-magnitude to a line)."""
    def line(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return np.abs(line(a) - line(b))


@pytest.mark.parametrize("level", level_params())
def test_float32_is_within_two_ulp_of_math_erf(level):
    rng = np.random.default_rng(3)
    x = np.concatenate([
        np.linspace(-4.5, 4.5, 90001, dtype=F32),                      # both branches, the split at 0.921875
        (rng.standard_normal(60000) * 2).astype(F32),
        (10.0 ** rng.uniform(-44, 1.5, 30000)).astype(F32) * rng.choice([-1, 1], 30000).astype(F32),  # tiny, subnormal
        np.array([0.921875, np.nextafter(F32.type(0.921875), F32.type(0)), 3.9, 3.92, 4, 4.5, 1e30, -1e30,
                  np.finfo(F32).max, 1e-45, -1e-45, np.finfo(F32).tiny], F32)])
    x = x[:-3]  # an odd length: a tail past the vectors and the 256-element blocks
    y = erf_kernel(F32, x.shape, level).compute(x)[0]
    assert y.dtype == F32
    assert ulps(y, reference(x).astype(F32)).max() <= 2
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], F32)
    s = erf_kernel(F32, specials.shape, level).compute(specials)[0]
    assert s[:4].tolist() == [0.0, 0.0, 1.0, -1.0] and np.signbit(s[:2]).tolist() == [False, True]
    assert np.isnan(s[4:]).all()


@pytest.mark.parametrize("level", level_params())
def test_float16_rounds_the_float32_erf_once(level, monkeypatch):
    x = np.arange(1 << 16, dtype=np.uint16).view(F16).reshape(256, 256)  # every float16
    lib = native_mod.load_level(level)
    wide = erf_kernel(F32, x.shape, level).compute(x.astype(F32))[0]
    half = erf_kernel(F16, x.shape, level)
    calls = []
    for name in ("half_to_float", "float_to_half"):  # no whole-tensor conversion
        monkeypatch.setattr(lib, name, lambda s, d, name=name: calls.append(name))
    y = np.full(x.shape, 7, F16)
    half.run([x], [y], None)
    assert calls == []
    nan = np.isnan(x)
    np.testing.assert_array_equal(np.isnan(y), nan)
    np.testing.assert_array_equal(y.view(np.uint16)[~nan], wide.astype(F16).view(np.uint16)[~nan])
    # and so within one float16 ulp of the correctly rounded erf
    ref = reference(x.reshape(-1)).astype(F16).reshape(x.shape)
    assert np.abs(y[~nan].astype(F32) - ref[~nan].astype(F32)).max() <= np.spacing(F16.type(1)) / 2


def test_strided_input_and_in_place():
    level = best_level()
    x = (np.random.default_rng(1).standard_normal((6, 40)) * 2).astype(F32)
    k = erf_kernel(F32, (6, 20), level)
    want = k.compute(np.ascontiguousarray(x[:, ::2]))[0]
    np.testing.assert_array_equal(k.compute(x[:, ::2])[0], want)
    buf = np.ascontiguousarray(x[:, ::2])
    k.run([buf], [buf], None)
    np.testing.assert_array_equal(buf, want)
