"""Writing an OM's msgpack maps: every value checked and converted to what msgpack and the
reader accept (64-bit ints, supported dtypes, str-keyed attribute maps, tagged ndarrays), or an
`Unencodable` naming the field."""
from __future__ import annotations

import operator

import numpy as np

from .schema import DTYPE_TAG, DTYPES, MAX_ATTR_DEPTH, NDARRAY_TAG, RESERVED_TAGS, STRING_DTYPE


class Unencodable(Exception):
    """A model field the OM cannot hold (message says which)."""


def as_int(v, where: str) -> int:
    if isinstance(v, (bool, np.bool_)):
        raise Unencodable(f"{where}: expected an integer, got {v!r}")
    try:
        v = operator.index(v)
    except TypeError:
        raise Unencodable(f"{where}: expected an integer, got {type(v).__name__}") from None
    if not -(1 << 63) <= v < 1 << 63:
        raise Unencodable(f"{where}: {v} does not fit in 64 bits")
    return v


def as_str(v, where: str) -> str:
    if not isinstance(v, str):
        raise Unencodable(f"{where}: expected a string, got {type(v).__name__}")
    return str(v)


def as_dtype(v, where: str, strings: bool = False) -> str:
    """A dtype's name; `strings`: string tensors (dtype object) allowed there."""
    if type(v) is str and v in DTYPES:  # a name already (numpy's dtype.name is a Python property: ~5 us)
        return v
    try:
        name = np.dtype(v).name
    except TypeError:
        raise Unencodable(f"{where}: {v!r} is not a dtype") from None
    if name not in DTYPES and not (strings and name == STRING_DTYPE):
        raise Unencodable(f"{where}: dtype {name} is not supported by the OM format")
    return name


def as_shape(v, where: str) -> list[int]:
    if not isinstance(v, (tuple, list)):
        raise Unencodable(f"{where}: shape must be a tuple, got {type(v).__name__}")
    return [as_int(d, f"{where} shape") for d in v]


# ---------------------------------------------------------------- attribute values


def as_attr_map(attrs, where: str, depth: int) -> dict:
    if not isinstance(attrs, dict):
        raise Unencodable(f"{where}: expected a dict, got {type(attrs).__name__}")
    out = {}
    for key, value in attrs.items():
        if not isinstance(key, str):
            raise Unencodable(f"{where}: key {key!r} is not a string")
        if key in RESERVED_TAGS:
            raise Unencodable(f"{where}: key '{key}' is reserved by the OM format")
        out[str(key)] = encode_attr(value, f"{where}['{key}']", depth + 1)
    return out


def encode_attr(v, where: str = "attribute", depth: int = 0):
    """An attribute value as msgpack-native data: scalars, lists, str-keyed maps, tagged ndarrays."""
    if depth > MAX_ATTR_DEPTH:
        raise Unencodable(f"{where}: nested deeper than {MAX_ATTR_DEPTH} levels")
    if v is None or isinstance(v, (bool, str, bytes)):
        return v
    if isinstance(v, int):
        if not -(1 << 63) <= v < 1 << 64:
            raise Unencodable(f"{where}: integer {v} does not fit in 64 bits")
        return int(v)
    if isinstance(v, float):
        return float(v)
    if isinstance(v, np.ndarray):
        return _ndarray(v, where)
    if isinstance(v, np.bool_):
        return bool(v)
    if isinstance(v, np.integer):
        return encode_attr(int(v), where, depth)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.dtype):
        return {DTYPE_TAG: as_dtype(v, where)}
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, (list, tuple)):
        return [encode_attr(x, f"{where}[{j}]", depth + 1) for j, x in enumerate(v)]
    if isinstance(v, dict):
        return as_attr_map(v, where, depth)
    raise Unencodable(f"{where}: values of type {type(v).__name__} cannot be stored in an OM")


def _ndarray(a: np.ndarray, where: str) -> dict:
    name = as_dtype(a.dtype, where, strings=True)
    if name == STRING_DTYPE:
        if not all(type(s) is str for s in a.flat):
            raise Unencodable(f"{where}: an object array must hold str only (a string tensor)")
        return {NDARRAY_TAG: True, "dtype": name, "shape": [int(d) for d in a.shape], "data": a.reshape(-1).tolist()}
    little = np.dtype(name).newbyteorder("<")
    data = np.ascontiguousarray(a, dtype=little).tobytes()
    return {NDARRAY_TAG: True, "dtype": name, "shape": [int(d) for d in a.shape], "data": data}
