"""Erf and Gelu.

float32 (and float16, evaluated in float32): erf(x) = tanh(x P(x^2)), x^2 clamped at 16 where erf
rounds to 1. P fits z(x) = atanh(erf(x)), which is smooth and odd, so one polynomial covers the
whole range with no branch to blend: ~20 ufunc passes instead of ~30 for the two-branch form, and
tanh is one fast SIMD pass. The error in erf is (1 - erf^2) times the error in z, so z may be
loose where erf saturates.
float64: the exact two-branch form (x P(x^2) below `split`, 1 - exp(-x^2) Q(2 / (2 + |x|)) above).
"""
from __future__ import annotations

import math

import numpy as np

from ...model.record import record
from ..dtypes import NUMERIC, working_dtype
from .elementwise import FloatUnary, str_attr
from ..fused import GE_DOMAIN
from ..native import EW_ERF, EW_GELU, CallCache
from ..registry import register

# z(x) = atanh(erf(x)) ~ x P(x^2) on [0, 4]: Lawson minimax fits of the erf error (weighted by
# 1 - erf^2, relative below erf = 0.375), P(0) = 2/sqrt(pi) in float32, monomial form, lowest
# degree first. Degree 8: erf within 1.2e-7 absolute and 2.2e-7 relative (|x| < 1) of math.erf,
# evaluated in float32. Degree 6 (for Gelu, two passes less per degree): 1.7e-7 absolute; it has
# no positive root and grows past x = 4 (z(3.9) > 8.9, where tanh rounds to 1), so it needs no
# clamp (one pass less); degree 8 turns negative at x^2 = 19.3 and is clamped.
_Z8 = (1.128379225730896, 0.10277108070272678, -0.00020151881825073055, -0.0006043874635856463,
       7.687535996140027e-05, -1.9718008749459494e-06, -4.982430273684039e-07, 5.264488594155015e-08,
       -1.603694351206381e-09)
_Z6 = (1.128379225730896, 0.10276947369924064, -0.0001927157823580941, -0.000619073687611517,
       8.738792074836606e-05, -5.630363518813163e-06, 1.398033278982292e-07)
_X2_MAX = 16.0  # the fits' range: |x| <= 4


def _scaled(coefs, s: float) -> tuple:
    """Coefficients of z(s x) = s x P(s^2 x^2) as a polynomial in x."""
    return tuple(c * s ** (2 * k + 1) for k, c in enumerate(coefs))


def tanh_erf_into(x, y, t, coefs=_Z8, x2_max: float | None = _X2_MAX) -> None:
    """y = tanh(x P(min(x^2, x2_max))), float32; t is scratch shaped like y. x must not alias y or t.
    Without x2_max, P must grow with no positive root beyond the fitted range (as _Z6 does)."""
    c = y.dtype.type
    np.square(x, out=t)
    if x2_max is not None:  # beyond it z keeps growing linearly (x P(max)); NaN stays NaN
        np.minimum(t, c(x2_max), out=t)
    np.multiply(t, c(coefs[-1]), out=y)
    for k in coefs[-2:0:-1]:
        np.add(y, c(k), out=y)
        np.multiply(y, t, out=y)
    np.add(y, c(coefs[0]), out=y)
    np.multiply(y, x, out=y)
    np.tanh(y, out=y)


@record
class _ErfCoefs:
    split: float   # |x| < split: x * P(x^2); above: 1 - exp(-x^2) * Q(2 / (2 + |x|))
    top: float     # |x| >= top: erf is 1 in this precision
    small: tuple   # P, lowest degree first
    large: tuple   # Q (erfcx), lowest degree first


# Least-squares Chebyshev fits (relative error) against math.erf / math.erfc, in monomial form.
# Max error on a dense grid: ~9e-16.
_ERF_F64 = _ErfCoefs(split=0.8, top=6.0,
    small=(1.1283791670955126, -0.3761263890319252, 0.11283791671474447, -0.026866170751113437,
           0.005223978698736417, -0.0008548389156709437, 0.00012057518667177713, -1.4973058136127264e-05,
           1.7077813747515539e-06, -2.0681879210693342e-07, 2.6225428375350738e-08),
    large=(1.906277904972775e-08, 0.28209426954322137, 0.2820995011829853, 0.24684404664961304,
           0.17562648704306297, 0.09174865491620382, -0.06070179209037672, 0.22112958072724956,
           -1.0722905129476183, 2.839997798173423, -6.038348423724492, 9.994336800490267,
           -12.152188808643434, 10.634107711409003, -6.57717582706245, 2.755684968989676,
           -0.7075715954356578, 0.08460778862775235))

F64_TEMPS, F64_MASKS = 3, 1


def _horner(coefs, v, out, c):
    np.multiply(v, c(coefs[-1]), out=out)
    for k in coefs[-2:0:-1]:
        np.add(out, c(k), out=out)
        np.multiply(out, v, out=out)
    np.add(out, c(coefs[0]), out=out)


def erf64_into(x, y, t0, t1, t2, large, sign=None):
    """y = erf(x) for float64 arrays. t0..t2 are scratch arrays of y's dtype and shape, `large` a
    bool one. x may be y itself if `sign` (an array with x's signs) is given. Both branches are
    evaluated everywhere (clamped to their ranges) and blended arithmetically: masked ufuncs
    (where=) are several times slower than the whole formula."""
    c = y.dtype.type
    k = _ERF_F64
    if sign is None:
        if np.shares_memory(x, y):
            raise ValueError("erf64_into: x aliases y, pass sign=")
        sign = x
    np.absolute(x, out=t0)                     # x is not read again
    np.greater_equal(t0, c(k.split), out=large)
    np.clip(t0, c(k.split), c(k.top), out=t1)  # |x| for the large branch
    np.minimum(t0, c(k.split), out=t0)         # |x| for the small branch (NaN stays NaN)
    np.multiply(t0, t0, out=t2)
    _horner(k.small, t2, y, c)
    np.multiply(y, t0, out=y)                  # small branch: |x| P(x^2)
    np.add(t1, c(2), out=t2)
    np.divide(c(2), t2, out=t2)
    _horner(k.large, t2, t0, c)                # erfcx(|x|)
    np.multiply(t1, t1, out=t1)
    np.negative(t1, out=t1)
    np.exp(t1, out=t1)
    np.multiply(t0, t1, out=t0)                # erfc(|x|)
    np.subtract(c(1), t0, out=t0)              # large branch
    # y += large * (large branch - small branch): exact, both are finite and, where large is
    # set, the small branch is erf(split) and the difference exact (Sterbenz)
    np.subtract(t0, y, out=t0)
    np.multiply(t0, large, out=t0)
    np.add(y, t0, out=y)
    np.copysign(y, sign, out=y)


def erf(x: np.ndarray) -> np.ndarray:
    """erf of any float array (allocating; float16 is evaluated in float32)."""
    x = np.asarray(x)
    work = working_dtype(x.dtype)
    xw = x.astype(work)
    y = np.empty_like(xw)
    with np.errstate(all="ignore"):
        if work == np.float64:
            erf64_into(xw, y, *(np.empty_like(xw) for _ in range(F64_TEMPS)),
                       *(np.empty(x.shape, np.bool_) for _ in range(F64_MASKS)), sign=xw)
        else:
            tanh_erf_into(xw, y, np.empty_like(xw))
    return y.astype(x.dtype) if x.dtype.kind == "f" else y


class _ErfFamily(FloatUnary):
    """Scratch by working dtype: one temp in float32, the two-branch form's in float64. float32
    blocks of 128K elements: three of them (x, y, t) still sit in L2, and each pass is one ufunc
    call (32K blocks cost four calls per pass, ~20 passes)."""
    CHUNK = 1 << 17
    FLOAT32_TEMPS = 1

    def setup(self):
        if working_dtype(self.dtype) == np.float64:
            self.CHUNK = FloatUnary.CHUNK  # 3 temps and a mask: keep the workspace small
        if self.uses_erf():
            self.temps, self.masks = (F64_TEMPS, F64_MASKS) if working_dtype(self.dtype) == np.float64 \
                else (self.FLOAT32_TEMPS, 0)
        # float32 and float16 on the native kernels where the op has one (native_op): csrc/eltwise.c's, a
        # block at a time, float16 converted as it is read and rounded once, no workspace
        self.native_code = self.native_op() if self.backend.lib is not None and \
            np.dtype(self.dtype) in (np.float32, np.float16) else None
        self.native = self.native_code is not None
        self.calls = CallCache()
        super().setup()

    def uses_erf(self) -> bool:
        return True

    def native_op(self) -> int | None:
        """The eltwise.c opcode of this instance, or None (the formulas only)."""
        return None

    def workspace_nbytes(self):
        return 0 if self.native else super().workspace_nbytes()

    def run(self, xs, ys, ws):
        if not self.native:
            return super().run(xs, ys, ws)
        self.native_unary(self.native_code, xs[0], ys[0])


@register("Erf")
class Erf(_ErfFamily):
    """float32 and float16 natively: csrc/eltwise.c's erf (the one elementwise chains run, so a fused
    Erf gives the bits of this one). Otherwise the formulas above; float32 in place (a chain's numpy
    plan) copies x aside first."""
    types = NUMERIC

    FLOAT32_TEMPS = 2

    def native_op(self):
        return EW_ERF

    def formula(self, x, y, *scratch):
        if self.work == np.float64:
            erf64_into(x, y, *scratch)
        elif np.shares_memory(x, y):
            np.copyto(scratch[1], x)
            tanh_erf_into(scratch[1], y, scratch[0])
        else:
            tanh_erf_into(x, y, scratch[0])


_GELU_Z = _scaled(_Z6, 1 / math.sqrt(2))  # z(x / sqrt(2)) as a polynomial in x


@register("Gelu", since=20)
class Gelu(_ErfFamily):
    # as an epilogue (fuse_activation's tanh form after a Gemm or MatMul where no native kernel
    # applies it): the tanh form copies x aside first; the erf form has scratch, which Epilogue refuses
    in_place = True

    def setup(self):
        self.approximate = str_attr(self, "approximate", "none")
        if self.approximate not in ("none", "tanh"):
            raise self.fail(f"attribute approximate must be 'none' or 'tanh', got {self.approximate!r}")
        super().setup()

    def native_op(self):
        # the exact form: csrc/eltwise.c's Gelu on the Erf kernel's erf (a conv's standalone Gelu, Whisper's
        # stem at 384 x 3000: 3.2 ms of numpy passes, 1.6 so)
        return EW_GELU if self.approximate == "none" else None

    def uses_erf(self):
        return self.approximate == "none"

    def formula(self, x, y, *scratch):
        c = self.c
        if self.approximate == "tanh":
            # 0.5 x (1 + tanh(z)) = x / (1 + exp(-2 z)), z = sqrt(2/pi) (x + 0.044715 x^3): seven passes
            # where the tanh form takes nine (a decoding step's Gelu is a few thousand elements: the
            # passes' calls are its cost), and no cancellation in 1 + tanh(z) for negative x; exp
            # overflows to inf for x below about -10, where x / inf is the form's -0
            k = -2 * math.sqrt(2 / math.pi)
            if np.shares_memory(x, y):
                x = x.copy()
            np.multiply(x, x, out=y)
            np.multiply(y, c(k * 0.044715), out=y)
            np.add(y, c(k), out=y)
            np.multiply(y, x, out=y)
            np.exp(y, out=y)
            np.add(y, c(1), out=y)
            np.divide(x, y, out=y)
            return
        if self.work == np.float64:
            # 0.5 x (1 + erf(x / sqrt(2)))
            np.multiply(x, c(1 / math.sqrt(2)), out=y)
            erf64_into(y, y, *scratch, sign=x)
        else:  # erf(x / sqrt(2)) = tanh(z(x / sqrt(2))), the 1/sqrt(2) folded into the coefficients
            tanh_erf_into(x, y, *scratch, coefs=_GELU_Z, x2_max=None)
        np.multiply(y, c(0.5), out=y)  # (0.5 + 0.5 erf) x: no overflow for x near the float max
        np.add(y, c(0.5), out=y)
        np.multiply(y, x, out=y)


@register("Gelu", since=1, domain=GE_DOMAIN)
class FusedGelu(Gelu):
    """The exported erf form x * 0.5 * (1 + Erf(x / sqrt(2))) recognized by passes.fuse_gelu, at
    any opset: ONNX's Gelu exists from opset 20 only, and a default-domain registration below it
    would accept models that are not valid ONNX."""
