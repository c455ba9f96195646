"""What the ai.onnx.ml kernels share (ml.py, ml_trees.py, ml_svm.py): the domain, input checks, float
attributes as arrays, and the post transforms of the classifiers and regressors."""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..values import text

ML = "ai.onnx.ml"
NUMBERS = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int64, np.int32))
F32 = np.dtype(np.float32)


def ml_input(k: Kernel, i: int = 0, what: str = "X", types=NUMBERS) -> Meta:
    m = k.input_meta(i, what)
    if m.dtype not in types:
        if m.dtype == np.object_ or m.dtype.kind in "US":
            raise k.fail(f"{what} is a string tensor; ge runs string tensors on the dynamic path only")
        raise k.fail(f"{what} has type {m.dtype}; supported: {', '.join(sorted(np.dtype(t).name for t in types))}")
    return m


def floats(k: Kernel, key: str, required: bool = True) -> np.ndarray | None:
    v = k.attr(key)
    if v is None:
        if required:
            raise k.fail(f"attribute '{key}' is required")
        return None
    return np.asarray(v, dtype=np.float64).reshape(-1)


def rows(x: np.ndarray) -> np.ndarray:
    """The [N, C] view the ml ops compute on (a 1-D input is one row)."""
    return x.reshape(1, -1) if x.ndim == 1 else x


# -- post transforms (shared by the classifiers and regressors) -----------------------------------
POST_TRANSFORMS = ("NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT")


def post_transform_name(k: Kernel, value="NONE") -> str:
    """The post_transform attribute as a name (TreeEnsemble gives it as an int)."""
    value = k.attr("post_transform", value)
    name = POST_TRANSFORMS[int(value)] if isinstance(value, (int, np.integer)) and 0 <= value < 5 else text(value)
    if name not in POST_TRANSFORMS:
        raise k.fail(f"post_transform '{value}' must be one of {', '.join(POST_TRANSFORMS)}")
    return name


def _erf_inv(x: np.ndarray) -> np.ndarray:
    """Winitzki's approximation (a = 0.147), the one onnxruntime's and onnx's PROBIT use."""
    sgn = np.where(x < 0, -1.0, 1.0)
    t = (1 - x) * (1 + x)
    with np.errstate(divide="ignore", invalid="ignore"):
        lg = np.log(t)
        v = 2 / (np.pi * 0.147) + 0.5 * lg
        r = sgn * np.sqrt(-v + np.sqrt(v * v - lg / 0.147))
    return np.where(t == 0, 0.0, r)


def post_transform(scores: np.ndarray, name: str) -> np.ndarray:
    """scores [N, C] (float) transformed row by row."""
    if name == "LOGISTIC":
        return 1 / (1 + np.exp(-scores))
    if name == "SOFTMAX":
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "SOFTMAX_ZERO":  # zeros stay (nearly) zero: they are scaled, not exponentiated
        m = scores.max(axis=1, keepdims=True)
        e = np.where(np.abs(scores) > 1e-7, np.exp(scores - m), scores * np.exp(-m))
        s = e.sum(axis=1, keepdims=True)
        return np.where(s == 0, 0.5, e / np.where(s == 0, 1, s))
    if name == "PROBIT":
        return 1.41421356 * _erf_inv(scores * 2 - 1)
    return scores
