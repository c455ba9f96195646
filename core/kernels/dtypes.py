"""The dtype sets of ONNX type constraints, as numpy dtypes, and the dtypes kernels compute in."""
from __future__ import annotations

import numpy as np

FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64))
SIGNED = frozenset(np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
UNSIGNED = frozenset(np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
INTS = SIGNED | UNSIGNED
NUMERIC = FLOATS | INTS
BOOL = frozenset([np.dtype(np.bool_)])
ALL = NUMERIC | BOOL


def type_names(types) -> str:
    return "/".join(sorted(np.dtype(t).name for t in types))


def working_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype float formulas are evaluated in: float32 for float16, float64 for ints and bool."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return np.dtype(np.float32)
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


#: the representable range of each integer dtype quantized ops saturate to
QRANGE = {np.dtype(t): (np.iinfo(t).min, np.iinfo(t).max) for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32)}
