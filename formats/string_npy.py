"""String tensors as np.save writes an object array of str (onnx's own arrays of strings are such):
an .npy of descr '|O' whose data is a pickle of the array. Input files are untrusted, and a pickle
is a program, so it is never run as one: the unpickler below resolves no global but the three names
numpy's array pickle uses (numpy's _reconstruct, ndarray and dtype), and each resolves to an inert
stand-in that only records its arguments. The array is then built here from what was recorded, and
only when it is an object array whose elements are all str (or UTF-8 bytes); anything else is
refused with a one-line ValueError. No numpy object is ever made from the pickle's data.
"""
from __future__ import annotations

import io
import math
import pickle
import struct

import numpy as np

_RECONSTRUCT = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct")}


class _ArrayClass:
    """numpy.ndarray, as the pickle names it: a marker."""


class _Dtype:
    """numpy.dtype('O8', False, True) as the pickle builds it: its arguments, its state ignored."""

    def __init__(self, *args):
        self.args = args

    def __setstate__(self, state) -> None:
        pass


class _Array:
    """_reconstruct(ndarray, (0,), b'b') then BUILD (version, shape, dtype, fortran, elements)."""

    def __init__(self, cls, *args):
        if cls is not _ArrayClass:
            raise pickle.UnpicklingError("_reconstruct of something other than an ndarray")
        self.state = None

    def __setstate__(self, state) -> None:
        self.state = state


class _Unpickler(pickle._Unpickler):  # (Python's own: a length in the data is checked against what is there)
    def find_class(self, module: str, name: str):
        if (module, name) in _RECONSTRUCT:
            return _Array
        if (module, name) == ("numpy", "ndarray"):
            return _ArrayClass
        if (module, name) == ("numpy", "dtype"):
            return _Dtype
        raise pickle.UnpicklingError(f"it names {module}.{name}")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("it holds a persistent reference")


def is_object_npy(header: dict) -> bool:
    return header.get("descr") == "|O"


def read_strings(f, header: dict) -> np.ndarray:
    """The object array of str whose pickle follows an .npy header at `f`'s position (`header` the
    parsed header dict). ValueError when it is not one."""
    try:  # (read from memory: a length in the pickle never sizes a read of the file)
        made = _Unpickler(io.BytesIO(f.read())).load()
    except (pickle.UnpicklingError, EOFError, AttributeError, TypeError, IndexError, KeyError, ValueError,
            RecursionError, MemoryError, OverflowError, struct.error) as e:
        raise ValueError(f"its pickle is not an array of strings ({e or type(e).__name__})") from None
    state = getattr(made, "state", None) if isinstance(made, _Array) else None
    if not (isinstance(state, tuple) and len(state) == 5):
        raise ValueError("its pickle is not an array of strings (not a numpy array)")
    _, shape, dtype, fortran, elements = state
    if not (isinstance(dtype, _Dtype) and dtype.args[:1] in (("O8",), ("O4",))):
        raise ValueError("its pickle is not an array of strings (not an object array)")
    if not (isinstance(shape, tuple) and all(type(d) is int and d >= 0 for d in shape) and shape == header["shape"]
            and isinstance(fortran, bool) and isinstance(elements, list) and len(elements) == math.prod(shape)):
        raise ValueError(f"its pickle is not an array of shape {list(header['shape'])}")
    bad = [type(e).__name__ for e in elements if not isinstance(e, (str, bytes))][:1]
    if bad:
        raise ValueError(f"it holds a {bad[0]}, not only strings (ge reads object arrays of str)")
    out = np.empty(len(elements), dtype=object)
    try:
        out[:] = [e.decode("utf-8") if isinstance(e, bytes) else e for e in elements]
    except UnicodeDecodeError as e:
        raise ValueError(f"it holds bytes that are not UTF-8 ({e})") from None
    return out.reshape(shape)  # (numpy pickles an object array's elements in C order, whatever its layout)
