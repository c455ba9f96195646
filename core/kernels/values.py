"""Values as kernels read them: string attributes, 1-D int constants, an output seen in another shape."""
from __future__ import annotations

import numpy as np


def text(value) -> str:
    """A string attribute, as onnx gives it (bytes) or as written by hand (str)."""
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def ints(value) -> list[int]:
    """A 1-D int tensor (or a Python list / scalar) as a list of ints."""
    return [int(v) for v in np.asarray(value).reshape(-1)]


def moves_only_ones(shape, perm) -> bool:
    """Transposing `shape` by `perm` moves only axes of size 1: the elements keep their order, so
    the transpose is a view (a decoding step's [1, 1, heads, d] -> [1, heads, 1, d])."""
    moved = [a for a in perm if shape[a] != 1]
    return moved == sorted(moved)


def view_as(y: np.ndarray, shape) -> np.ndarray | None:
    """`y` reshaped without a copy (so writes land in `y`), or None when that is impossible."""
    v = y.view()
    try:
        v.shape = tuple(shape)
    except AttributeError:
        return None
    return v
