"""The dtype sets of ONNX type constraints, as numpy dtypes, and the dtypes kernels compute in."""
from __future__ import annotations

import numpy as np

#: the float types by name, as kernels' messages list them (bfloat16 from ml_dtypes)
FLOAT_NAMES = ("float16", "float32", "float64", "bfloat16")
FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
SIGNED = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTS
BOOL = frozenset([np.dtype(np.bool_)])
ALL = NUMERIC | BOOL


def type_names(types, names=()) -> str:
    """dtypes (and dtype names) as messages list them."""
    return "/".join(sorted([*(np.dtype(t).name for t in types), *names]))


def is_float(dtype) -> bool:
    """A float dtype numpy knows (float16/32/64) or bfloat16 (ml_dtypes: numpy's kind 'V')."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def working_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype float formulas are evaluated in: float32 for float16 and bfloat16, float64 for ints
    and bool."""
    dtype = np.dtype(dtype)
    if dtype == np.float16 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


#: the representable range of each integer dtype quantized ops saturate to
QRANGE = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}


# -- the small types (ml_dtypes): bfloat16, float8/float4 formats, 2/4-bit integers ------------------------
# by name: numpy knows them once ml_dtypes is imported (as it is where an array of one exists), an
# import of 15-20 ms that a model without them never pays
SMALL_FLOATS = frozenset(("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                          "float4_e2m1fn", "float8_e8m0fnu"))
SMALL_INTS = frozenset(("int4", "uint4", "int2", "uint2"))
SMALL = SMALL_FLOATS | SMALL_INTS


def cast_to(x: np.ndarray, to: np.dtype, saturate: bool = True, round_mode: str = "up") -> np.ndarray:
    """ONNX Cast of x to `to` where C's conversion is not the spec's: to a float8/float4 type
    out-of-range values clip to its largest finite value when `saturate` (NaN stays NaN), else become
    NaN/inf as the format has them; to a 2/4-bit integer a float is rounded half to even and every
    value wraps around (Cast-25's definition, like the 8-bit casts on every platform); to float8e8m0
    (a power of two) `round_mode` up/down/nearest picks the exponent. Other targets: numpy's cast."""
    to = np.dtype(to)
    src = np.dtype(x.dtype)
    if to.name not in SMALL and src.name not in SMALL:
        return x.astype(to)
    import ml_dtypes
    if to.name == "float8_e8m0fnu":
        return _to_e8m0(x.astype(np.float64), saturate, round_mode).astype(to)
    if to.name in SMALL_INTS:
        lo, hi = int(ml_dtypes.iinfo(to).min), int(ml_dtypes.iinfo(to).max)
        v = np.rint(x.astype(np.float64)) if src.kind == "f" or src.name in SMALL_FLOATS else x
        v = v.astype(np.int64)
        return ((v - lo) % (hi - lo + 1) + lo).astype(to)
    if to.name in SMALL_FLOATS and to.name != "bfloat16" and saturate:
        info = ml_dtypes.finfo(to)
        f = x.astype(np.float32)
        return np.where(np.isnan(f), f, np.clip(f, float(info.min), float(info.max))).astype(to)
    # through float32: ml_dtypes has no direct cast between every pair
    return x.astype(np.float32).astype(to) if src.kind != "b" else x.astype(to)


def _to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    a = np.abs(x)  # (a negative value's cast is undefined; its magnitude's is taken)
    with np.errstate(divide="ignore", invalid="ignore"):
        e = np.log2(a)
        if round_mode == "up":
            e = np.ceil(e)
        elif round_mode == "down":
            e = np.floor(e)
        else:  # nearest, ties up: between 2^k and 2^(k+1) the midpoint is 1.5 * 2^k
            k = np.floor(e)
            e = np.where(a >= 1.5 * np.exp2(k), k + 1, k)
    if saturate:
        e = np.clip(np.nan_to_num(e, nan=np.nan, posinf=127, neginf=-127), -127, 127)
    else:
        e = np.where((e < -127) | (e > 127), np.nan, e)
    return np.where(np.isnan(x), np.nan, np.exp2(e)).astype(np.float32)

