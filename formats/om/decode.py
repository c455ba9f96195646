"""Reading an OM's msgpack maps without trusting them: typed, bounded field access whose every
failure is a `Bad` naming the field, and attribute values decoded (tagged ndarrays, dtypes)."""
from __future__ import annotations

import math
from itertools import chain
from operator import mul

import numpy as np

from ge.core.model.weight_files import name_problem

from .schema import (CHECKSUM_SIZE, DTYPE_TAG, DTYPES, known_dtype, ITEMSIZE, MAX_ARRAY_LEN, MAX_ATTR_DEPTH, MAX_DIM, MAX_INT, MAX_RANK,
                     NDARRAY_TAG, STRING_DTYPE)


class Bad(Exception):
    """What is wrong with an OM; load() prefixes the file name and raises FormatError."""


def nbytes_of(dtype: str, shape: tuple) -> int:
    n = ITEMSIZE[dtype]
    for d in shape:
        n *= d
    return n


def nbytes_list(dtypes, shapes) -> list[int]:
    """nbytes_of each (dtype, shape) of these columns."""
    return list(map(mul, map(ITEMSIZE.__getitem__, dtypes), map(math.prod, shapes)))


def check_nbytes(nbytes: int, dtype: str, shape: tuple, where: str) -> None:
    expected = nbytes_of(dtype, shape)
    if nbytes != expected:
        raise Bad(f"{where}: nbytes {nbytes} does not match {dtype} {list(shape)} ({expected} bytes)")


def check_weight_file_name(name: str, where: str) -> None:
    """External weight files live in <om dir>/weight/: a plain file name, never a path."""
    problem = name_problem(name)
    if problem:
        raise Bad(f"{where}: external weight file '{clip(name)}' is not a plain file name (it {problem})")


# ---------------------------------------------------------------- attribute values


_SCALARS = frozenset((bool, int, float, str, bytes, type(None)))
_STR_ONLY = {str}
_CONTAINER = (list, dict)
_CONTAINERS = _SCALARS | set(_CONTAINER)


def attr_map(v, where: str, depth: int) -> dict:
    if type(v) is not dict:
        raise Bad(f"{where} must be a map, got {tname(v)}")
    if v and set(map(type, v)) != _STR_ONLY:  # the keys in order, each before its value, to find the first wrong one
        return {k: x if type(x) in _SCALARS else decode_attr(x, f"{where}['{clip(k)}']", depth + 1)
                for k, x in v.items() if _str_key(k, where)}
    return {k: x if type(x) in _SCALARS else _attr_value(x, where, k, depth + 1)  # scalars as they are
            for k, x in v.items()}


def _attr_value(x, where: str, key: str, depth: int):
    """A map's value that is not a scalar: a list of scalars as it is (pads, strides: most of them),
    anything else decoded by decode_attr, its path made only then."""
    if type(x) is list and depth <= MAX_ATTR_DEPTH and set(map(type, x)) <= _SCALARS:
        return x
    return decode_attr(x, f"{where}['{clip(key)}']", depth)


def plain(values: list, depth: int) -> bool:
    """Whether attribute values at `depth` are what decode_attr gives back as they are: scalars, and
    lists and maps (str keys, no tag) of such, nested at most MAX_ATTR_DEPTH deep. One level at a
    time for all the values (every task's attributes at once); False says only: decode them."""
    types = set(map(type, values))
    if types <= _SCALARS:
        return True
    if depth > MAX_ATTR_DEPTH or not types <= _CONTAINERS:
        return False
    maps = [x for x in values if type(x) is dict]
    if maps and (not set(map(type, chain.from_iterable(maps))) <= _STR_ONLY
                 or any(NDARRAY_TAG in m or DTYPE_TAG in m for m in maps)):
        return False
    inner = chain.from_iterable(x.values() if type(x) is dict else x for x in values if type(x) in _CONTAINER)
    return plain(list(inner), depth + 1)


def _str_key(k, where: str) -> bool:
    if type(k) is not str:
        raise Bad(f"{where}: key {show(k)} is not a string")
    return True


def decode_attr(v, where: str = "attribute", depth: int = 0):
    """Inverse of encode.encode_attr: tagged maps become ndarrays / dtypes, arrays become lists."""
    if depth > MAX_ATTR_DEPTH:
        raise Bad(f"{where}: nested deeper than {MAX_ATTR_DEPTH} levels")
    t = type(v)
    if v is None or t in (bool, int, float, str, bytes):
        return v
    if t is list:
        return [x if type(x) in _SCALARS else decode_attr(x, f"{where}[{j}]", depth + 1) for j, x in enumerate(v)]
    if t is dict:
        if NDARRAY_TAG in v:
            return _ndarray(v, where)
        if DTYPE_TAG in v:
            if len(v) != 1 or not known_dtype(v[DTYPE_TAG]):
                raise Bad(f"{where}: malformed dtype value {show(v)}")
            return np.dtype(v[DTYPE_TAG])
        return attr_map(v, where, depth)
    raise Bad(f"{where}: unsupported value of type {tname(v)}")


def _ndarray(v: dict, where: str) -> np.ndarray:
    if set(v) != {NDARRAY_TAG, "dtype", "shape", "data"} or v[NDARRAY_TAG] is not True:
        raise Bad(f"{where}: malformed ndarray (keys {sorted(map(str, v))})")
    f = Fields(v, f"{where} (ndarray)")
    if v.get("dtype") == STRING_DTYPE:
        return _strings(f, where)
    dtype, shape, data = f.dtype("dtype"), f.shape("shape"), f.bytes("data")
    expected = nbytes_of(dtype, shape)
    if len(data) != expected:
        raise Bad(f"{where}: ndarray data is {len(data)} bytes, {dtype} {list(shape)} needs {expected}")
    if dtype == "bool":
        flat = np.frombuffer(data, dtype=np.uint8) != 0
    else:
        flat = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).astype(np.dtype(dtype))
    return flat.reshape(shape)


def _strings(f: "Fields", where: str) -> np.ndarray:
    """A string tensor: "data" one str per element of "shape"."""
    shape, data = f.shape("shape"), f.list("data")
    numel = 1
    for d in shape:
        numel *= d
    if len(data) != numel or any(type(s) is not str for s in data):
        raise Bad(f"{where}: string ndarray data must be {numel} strings for shape {list(shape)}, got "
                  f"{len(data)} entries{'' if all(type(s) is str for s in data) else ' (not all strings)'}")
    out = np.empty(numel, object)
    out[:] = data
    return out.reshape(shape)


# ---------------------------------------------------------------- typed field access


class Fields:
    """Typed, bounded access to one msgpack map; every failure names `where` and the key."""

    def __init__(self, m, where: str):
        if type(m) is not dict:
            raise Bad(f"{where} must be a map, got {tname(m)}")
        self.m, self.where = m, where

    def get(self, key: str):
        if key not in self.m:
            raise Bad(f"{self.where} has no '{key}'")
        return self.m[key]

    def int(self, key: str, lo: int = 0, hi: int = MAX_INT) -> int:
        v = self.get(key)
        if type(v) is not int or not lo <= v <= hi:
            raise Bad(f"{self.where}: '{key}' must be an integer in [{lo}, {hi}], got {show(v)}")
        return v

    def str(self, key: str) -> str:
        v = self.get(key)
        if type(v) is not str:
            raise Bad(f"{self.where}: '{key}' must be a string, got {show(v)}")
        return v

    def bool(self, key: str) -> bool:
        v = self.get(key)
        if type(v) is not bool:
            raise Bad(f"{self.where}: '{key}' must be a bool, got {show(v)}")
        return v

    def bytes(self, key: str) -> bytes:
        v = self.get(key)
        if type(v) is not bytes:
            raise Bad(f"{self.where}: '{key}' must be bytes, got {show(v)}")
        return v

    def digest(self, key: str) -> bytes:
        v = self.bytes(key)
        if len(v) != CHECKSUM_SIZE:
            raise Bad(f"{self.where}: '{key}' must be {CHECKSUM_SIZE} bytes, got {len(v)}")
        return v

    def list(self, key: str, max_len: int = MAX_ARRAY_LEN) -> list:
        v = self.get(key)
        if type(v) is not list:
            raise Bad(f"{self.where}: '{key}' must be a list, got {show(v)}")
        if len(v) > max_len:
            raise Bad(f"{self.where}: '{key}' has {len(v)} entries, more than the limit {max_len}")
        return v

    def dtype(self, key: str, strings: bool = False) -> str:
        """A dtype name; `strings`: "object" (string tensors) allowed there."""
        v = self.get(key)
        if not known_dtype(v) and not (strings and v == STRING_DTYPE):
            allowed = DTYPES + ((STRING_DTYPE,) if strings else ())
            raise Bad(f"{self.where}: dtype {show(v)} is not one of {', '.join(allowed)}")
        return v

    def shape(self, key: str) -> tuple:
        v = self.list(key, MAX_RANK)
        if any(type(d) is not int or not 0 <= d <= MAX_DIM for d in v):
            raise Bad(f"{self.where}: shape {show(v)} must be non-negative integers")
        return tuple(v)


def tname(v) -> str:
    return {dict: "map", list: "list", str: "string", bytes: "bytes", type(None): "nil"}.get(type(v), type(v).__name__)


def show(v) -> str:
    return f"{clip(repr(v))} ({tname(v)})"


def clip(s: str, n: int = 60) -> str:
    """`s` shortened for a one-line message; a character that is not printable shows escaped."""
    s = str(s)
    if not s.isprintable():
        s = "".join(c if c.isprintable() else repr(c)[1:-1] for c in s)
    return s if len(s) <= n else s[:n - 3] + "..."
