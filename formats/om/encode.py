"""Writing an OM's msgpack maps: every value checked and converted to what msgpack and the
reader accept (64-bit ints, supported dtypes, str-keyed attribute maps, tagged ndarrays), or an
`Unencodable` naming the field."""
from __future__ import annotations

import operator
from itertools import chain, repeat

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


# ---------------------------------------------------------------- whole lists at once


def plain_rows(rows, record: type, kinds: str) -> list[dict] | None:
    """`rows`, each a `record` (a named tuple), as the maps of its fields the per-field calls above build,
    when every field is what they return unchanged: `kinds` holds one letter a field, i (as_int), s
    (as_str), d (as_dtype), p (as_shape) or a (any: the caller encodes it). Checked a column at a time,
    with no message built (the per-field calls spell one for every field, most of a small model's OM
    writing); None when anything is not plain: the caller then takes the per-field path, which names it.
    Shapes become lists, as as_shape returns them and msgpack unpacks them (the writer's self-check
    reads these maps)."""
    if type(rows) not in (list, tuple) or not {record}.issuperset(map(type, rows)):
        return None
    columns = list(zip(*rows))
    for k, kind in enumerate(kinds[:len(columns)]):
        if not _PLAIN[kind](columns[k]):
            return None
        if kind == "p":
            columns[k] = map(list, columns[k])
    return list(map(dict, map(zip, repeat(record._fields), zip(*columns))))


def plain_ints(values) -> bool:
    """Every value an int (not a bool or numpy's) of 64 bits: as_int returns each as it is."""
    return not values or ({int}.issuperset(map(type, values)) and -(1 << 63) <= min(values) and max(values) < 1 << 63)


def plain_int_lists(lists) -> bool:
    """Every value a list or tuple of plain_ints (a shape as as_shape returns it, or packs the same)."""
    return {tuple, list}.issuperset(map(type, lists)) and plain_ints(list(chain.from_iterable(lists)))


_PLAIN = {"i": plain_ints, "s": lambda values: {str}.issuperset(map(type, values)),
          "d": lambda values: {str}.issuperset(map(type, values)) and set(values).issubset(DTYPES),
          "p": plain_int_lists, "a": lambda values: True}


# ---------------------------------------------------------------- attribute values


def as_attr_map(attrs, where: str, depth: int) -> dict:
    if not isinstance(attrs, dict):
        raise Unencodable(f"{where}: expected a dict, got {type(attrs).__name__}")
    out = {}
    plain_depth = depth + 2 <= MAX_ATTR_DEPTH  # (a list's items are two levels down)
    for key, value in attrs.items():
        if plain_depth and type(key) is str and key not in RESERVED_TAGS and _plain_value(value):
            out[key] = value if type(value) is not tuple else list(value)  # what encode_attr returns, no message spelled
            continue
        if not isinstance(key, str):
            raise Unencodable(f"{where}: key {key!r} is not a string")
        if key in RESERVED_TAGS:
            raise Unencodable(f"{where}: key '{key}' is reserved by the OM format")
        out[str(key)] = encode_attr(value, f"{where}['{key}']", depth + 1)
    return out


_SCALARS = frozenset({type(None), bool, str, bytes, float})


def _plain_value(v) -> bool:
    """A scalar, or a list or tuple of scalars, that encode_attr returns as it is (or as a list)."""
    kind = type(v)
    if kind in _SCALARS:
        return True
    if kind is int:
        return -(1 << 63) <= v < 1 << 64
    if kind is list or kind is tuple:
        if {int}.issuperset(map(type, v)):
            return not v or (-(1 << 63) <= min(v) and max(v) < 1 << 64)
        return _SCALARS.issuperset(map(type, v))
    return False


def encode_attr(v, where: str = "attribute", depth: int = 0):
    """An attribute value as msgpack-native data: scalars, lists, str-keyed maps, tagged ndarrays."""
    if depth > MAX_ATTR_DEPTH:
        raise Unencodable(f"{where}: nested deeper than {MAX_ATTR_DEPTH} levels")
    if type(v) is list or type(v) is tuple:  # (first: nested lists, the most of a large attribute)
        return _encode_items(v, where, depth)
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
        return _encode_items(v, where, depth)
    if isinstance(v, dict):
        return as_attr_map(v, where, depth)
    raise Unencodable(f"{where}: values of type {type(v).__name__} cannot be stored in an OM")


def _encode_items(v: list | tuple, where: str, depth: int) -> list:
    """A list's items as encode_attr returns them: plain ones (_plain_value) as they are (a tuple as a
    list), with no path spelled, as as_attr_map takes a map's values."""
    plain_depth = depth + 2 <= MAX_ATTR_DEPTH  # (an item's items are two levels down)
    return [(x if type(x) is not tuple else list(x)) if plain_depth and _plain_value(x)
            else encode_attr(x, f"{where}[{j}]", depth + 1) for j, x in enumerate(v)]


def _ndarray(a: np.ndarray, where: str) -> dict:
    name = as_dtype(a.dtype, where, strings=True)
    if name == STRING_DTYPE:
        if not all(type(s) is str for s in a.flat):
            raise Unencodable(f"{where}: an object array must hold str only (a string tensor)")
        return {NDARRAY_TAG: True, "dtype": name, "shape": [int(d) for d in a.shape], "data": a.reshape(-1).tolist()}
    little = np.dtype(name).newbyteorder("<")
    data = np.ascontiguousarray(a, dtype=little).tobytes()
    return {NDARRAY_TAG: True, "dtype": name, "shape": [int(d) for d in a.shape], "data": data}
