"""ONNX's value files: one TensorProto, SequenceProto or OptionalProto message per `.pb` file, the
`test_data_set_N/input_K.pb` layout onnx's backend tests, onnxruntime's onnx_test_runner and
Polygraphy read. Read and written with ge's own wire code (formats/protobuf_wire.py): the deployed
runtime has no onnx.

A message does not say which of the three it is: as onnx's runner, the reader is told by the
model's type (`kind`: "tensor", "sequence", "optional", "optional_sequence"). A tensor is read as
onnx's numpy_helper.to_array reads it (raw_data, little-endian, 4-bit types two to a byte and 2-bit
types four to a byte, low bits first; or the typed fields: int32_data for the small types' bits,
float_data, int64_data, double_data, uint64_data, string_data); it is written with raw_data (strings
with string_data), as numpy_helper.from_array writes it. A sequence is a list of arrays, an empty
optional None.
"""
from __future__ import annotations

import math
import struct

import numpy as np

from ge.core.model.ir.types import small_dtype

from .om.schema import SMALL_DTYPES
from .protobuf_wire import FIXED32, FIXED64, LEN, VARINT, WireError, fields, len_field, varint, varint_field

#: TensorProto.DataType -> numpy dtype name (ge's names; "object": strings)
DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 8: "object",
          9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16", 17: "float8_e4m3fn",
          18: "float8_e4m3fnuz", 19: "float8_e5m2", 20: "float8_e5m2fnuz", 21: "uint4", 22: "int4",
          23: "float4_e2m1fn", 24: "float8_e8m0fnu", 25: "uint2", 26: "int2"}
DATA_TYPES = {name: number for number, name in DTYPES.items()}
_UNSUPPORTED = {14: "COMPLEX64", 15: "COMPLEX128", 27: "FLOAT6E2M3", 28: "FLOAT6E3M2"}
_NIBBLES = {"int4", "uint4", "float4_e2m1fn"}  # two elements a byte
_CRUMBS = {"int2", "uint2"}  # four elements a byte
# TensorProto's fields
_DIMS, _DATA_TYPE, _SEGMENT, _FLOAT, _INT32, _STRING, _INT64, _NAME, _RAW, _DOUBLE, _UINT64, _LOCATION = \
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 14
# SequenceProto's and OptionalProto's fields, and their elem_type values
_VALUE_NAME, _ELEM_TYPE, _TENSOR_VALUE, _SEQUENCE_VALUE = 1, 2, 3, 5
_UNDEFINED, _TENSOR, _SEQUENCE = 0, 1, 3
KINDS = ("tensor", "sequence", "optional", "optional_sequence")


def read(buf, kind: str = "tensor"):
    """The value of a message of `kind`: an array, a list of arrays, or None (an empty optional).
    Bytes that are not one: WireError (a ValueError) saying what is wrong."""
    if kind not in KINDS:
        raise ValueError(f"a value of kind {kind!r} has no file form")
    buf = memoryview(buf).cast("B")
    if kind == "tensor":
        return _tensor(buf, 0, len(buf))
    if kind == "sequence":
        return _sequence(buf, 0, len(buf))
    return _optional(buf, 0, len(buf), kind)


def write(value, kind: str = "tensor", name: str = "") -> bytes:
    """A message of `kind` holding `value` (an array, a list of arrays, None for an empty optional)."""
    if kind == "tensor":
        return _tensor_bytes(np.asarray(value), name)
    if kind == "sequence":
        return _sequence_bytes(value, name)
    if kind in ("optional", "optional_sequence"):
        head = len_field(_VALUE_NAME, name.encode()) if name else b""
        if value is None:
            return head + varint_field(_ELEM_TYPE, _UNDEFINED)
        if kind == "optional":
            return head + varint_field(_ELEM_TYPE, _TENSOR) + len_field(_TENSOR_VALUE, _tensor_bytes(np.asarray(value)))
        return head + varint_field(_ELEM_TYPE, _SEQUENCE) + len_field(_SEQUENCE_VALUE, _sequence_bytes(value))
    raise ValueError(f"a value of kind {kind!r} has no file form")


def kind_of(value) -> str:
    """The kind a value written without a model type is given: a list is a sequence, None an empty
    optional, anything else a tensor."""
    return "sequence" if isinstance(value, (list, tuple)) else "optional" if value is None else "tensor"


def tensor_header(buf) -> tuple[str, tuple]:
    """(dtype name, dims) of a TensorProto, its data not decoded: a dynamic model's input shape."""
    buf = memoryview(buf).cast("B")
    data_type, dims = 0, []
    for number, wire, _, value, end in fields(buf):
        if number == _DIMS:
            dims += _ints(buf, wire, value, end)
        elif number == _DATA_TYPE and wire == VARINT:
            data_type = varint(buf, value)[0]
    return _dtype(data_type), _dims(dims)


# --------------------------------------------------------------------------------------------
# reading
# --------------------------------------------------------------------------------------------
def _tensor(buf, start: int, end: int) -> np.ndarray:
    data_type, dims, raw, strings = 0, [], None, []
    typed: dict[int, list] = {}
    for number, wire, _, value, stop in fields(buf, start, end):
        if number == _DIMS:
            dims += _ints(buf, wire, value, stop)
        elif number == _DATA_TYPE and wire == VARINT:
            data_type = varint(buf, value)[0]
        elif number == _RAW and wire == LEN:
            raw = buf[value:stop]
        elif number == _STRING and wire == LEN:
            strings.append(bytes(buf[value:stop]))
        elif number in (_FLOAT, _DOUBLE):
            typed.setdefault(number, []).extend(_floats(buf, wire, value, stop, number == _DOUBLE))
        elif number in (_INT32, _INT64, _UINT64):
            typed.setdefault(number, []).extend(_ints(buf, wire, value, stop))
        elif number == _SEGMENT:
            raise WireError("a segment of a tensor (TensorProto.segment) is not supported")
        elif number == _LOCATION and wire == VARINT and varint(buf, value)[0] == 1:
            raise WireError("the tensor's data is external (data_location EXTERNAL); give it in the file")
    dtype, shape = _dtype(data_type), _dims(dims)
    count = math.prod(shape)
    if dtype == "object":
        if len(strings) != count:
            raise WireError(f"{len(strings)} strings for dims {list(shape)} ({count} elements)")
        out = np.empty(count, dtype=object)  # (filled, not np.array(list): a list of str is never nested)
        try:
            out[:] = [s.decode("utf-8") for s in strings]
        except UnicodeDecodeError as e:
            raise WireError(f"a string that is not UTF-8 ({e})") from None
        return out.reshape(shape)
    np_dtype = _np_dtype(dtype)
    if raw is not None:
        if dtype in _NIBBLES or dtype in _CRUMBS:
            return _unpack(np.frombuffer(raw, np.uint8), dtype, count).reshape(shape)
        if len(raw) != count * np_dtype.itemsize:
            raise WireError(f"raw_data of {len(raw)} bytes for {dtype} {list(shape)} ({count * np_dtype.itemsize} "
                            f"bytes)")
        return np.frombuffer(raw, np_dtype).copy().reshape(shape)
    return _typed(typed, dtype, np_dtype, count).reshape(shape)


def _typed(typed: dict, dtype: str, np_dtype: np.dtype, count: int) -> np.ndarray:
    """A tensor from its typed field, as numpy_helper.to_array: the small types' bits in int32_data."""
    field = (_FLOAT if dtype == "float32" else _DOUBLE if dtype == "float64" else _INT64 if dtype == "int64"
             else _UINT64 if dtype in ("uint32", "uint64") else _INT32)
    values = typed.get(field, [])
    if field in (_FLOAT, _DOUBLE):
        data = np.array(values, dtype=np_dtype)
    elif field == _INT32:
        bits = np.array(values, dtype=np.uint64).astype(np.uint32)  # an int32 as protobuf's 64-bit varint
        if dtype in _NIBBLES or dtype in _CRUMBS:
            return _unpack(bits.astype(np.uint8), dtype, count)
        if np_dtype.itemsize == 2 and dtype not in ("int16", "uint16"):  # float16, bfloat16: their bits
            data = bits.astype(np.uint16).view(np_dtype)
        elif np_dtype.itemsize == 1 and dtype not in ("int8", "uint8"):  # bool, the float8 formats
            data = bits.astype(np.uint8).view(np_dtype)
        else:
            data = bits.view(np.int32).astype(np_dtype)
    else:
        data = np.array([v & (1 << 64) - 1 for v in values], dtype=np.uint64)
        data = data.view(np.int64) if field == _INT64 else data.astype(np_dtype)
    if data.size != count:
        raise WireError(f"{data.size} values of {dtype} for {count} elements")
    return data


def _unpack(packed: np.ndarray, dtype: str, count: int) -> np.ndarray:
    per_byte, bits = (2, 4) if dtype in _NIBBLES else (4, 2)
    if packed.size != -(-count // per_byte):
        raise WireError(f"{packed.size} bytes of packed {dtype} for {count} elements ({-(-count // per_byte)} bytes)")
    mask = (1 << bits) - 1
    out = np.stack([(packed >> (bits * k)) & mask for k in range(per_byte)], axis=-1).reshape(-1)[:count]
    return out.astype(np.uint8).view(_np_dtype(dtype))


def _sequence(buf, start: int, end: int) -> list:
    items, elem_type = [], _TENSOR
    for number, wire, _, value, stop in fields(buf, start, end):
        if number == _ELEM_TYPE and wire == VARINT:
            elem_type = varint(buf, value)[0]
        elif number == _TENSOR_VALUE and wire == LEN:
            items.append(_tensor(buf, value, stop))
        elif number in (4, 5, 6, 7):
            raise WireError("a sequence of sparse tensors, sequences, maps or optionals (ge's sequences hold tensors)")
    if elem_type not in (_TENSOR, _UNDEFINED):
        raise WireError(f"a sequence of elem_type {elem_type} (ge's sequences hold tensors)")
    return items


def _optional(buf, start: int, end: int, kind: str):
    elem_type, found = _UNDEFINED, None
    for number, wire, _, value, stop in fields(buf, start, end):
        if number == _ELEM_TYPE and wire == VARINT:
            elem_type = varint(buf, value)[0]
        elif number in (_TENSOR_VALUE, _SEQUENCE_VALUE) and wire == LEN:
            found = (number, value, stop)
        elif number in (4, 6, 7):
            raise WireError("an optional of a sparse tensor, map or optional (ge's optionals hold a tensor or a "
                            "sequence)")
    if elem_type == _UNDEFINED:
        return None
    want = _TENSOR_VALUE if kind == "optional" else _SEQUENCE_VALUE
    if elem_type != (_TENSOR if kind == "optional" else _SEQUENCE) or found is None or found[0] != want:
        raise WireError(f"an optional of elem_type {elem_type}, the model's is an {kind.replace('_', ' of a ')}")
    _, value, stop = found
    return _tensor(buf, value, stop) if kind == "optional" else _sequence(buf, value, stop)


def _np_dtype(name: str) -> np.dtype:
    """numpy's dtype of a ge dtype name (ml_dtypes' types by their own names, imported for them only)."""
    return small_dtype(name) if name in SMALL_DTYPES else np.dtype(name)


def _dtype(data_type: int) -> str:
    if data_type in DTYPES:
        return DTYPES[data_type]
    if data_type in _UNSUPPORTED:
        raise WireError(f"a tensor of {_UNSUPPORTED[data_type]}, which ge does not compute with")
    raise WireError(f"data_type {data_type} is not a tensor element type" if data_type else "no data_type")


def _dims(dims: list) -> tuple:
    signed = tuple(d - (1 << 64) if d >= 1 << 63 else d for d in dims)
    if any(d < 0 for d in signed):
        raise WireError(f"negative dims {list(signed)}")
    return signed


def _ints(buf, wire: int, value: int, end: int) -> list[int]:
    """A repeated integer field's values at one occurrence: a varint, or packed varints."""
    if wire == VARINT:
        return [varint(buf, value)[0]]
    if wire != LEN:
        raise WireError(f"an integer field of wire type {wire}")
    out, pos = [], value
    while pos < end:
        n, pos = varint(buf, pos)
        out.append(n)
    if pos != end:
        raise WireError("packed integers run past their field")
    return out


def _floats(buf, wire: int, value: int, end: int, double: bool) -> list[float]:
    size, fmt = (8, "<d") if double else (4, "<f")
    if wire == (FIXED64 if double else FIXED32):
        return list(struct.unpack_from(fmt, buf, value))
    if wire != LEN or (end - value) % size:
        raise WireError(f"a {'double' if double else 'float'} field of {end - value} bytes")
    return np.frombuffer(buf[value:end], fmt).tolist()


# --------------------------------------------------------------------------------------------
# writing
# --------------------------------------------------------------------------------------------
def _tensor_bytes(x: np.ndarray, name: str = "") -> bytes:
    dtype = "object" if x.dtype == object or x.dtype.kind == "U" else x.dtype.name
    if dtype not in DATA_TYPES:
        raise ValueError(f"dtype {x.dtype} has no ONNX tensor type")
    parts = [varint_field(_DIMS, d) for d in x.shape] + [varint_field(_DATA_TYPE, DATA_TYPES[dtype])]
    if dtype == "object":
        parts += [len_field(_STRING, (s if isinstance(s, bytes) else str(s).encode("utf-8"))) for s in x.reshape(-1)]
    if name:
        parts.append(len_field(_NAME, name.encode("utf-8")))
    if dtype != "object":
        parts.append(len_field(_RAW, _pack(x) if dtype in _NIBBLES or dtype in _CRUMBS else
                                np.ascontiguousarray(x).tobytes()))
    return b"".join(parts)


def _pack(x: np.ndarray) -> bytes:
    """The 4-bit types two to a byte, the 2-bit types four, low bits first (numpy_helper's packing)."""
    per_byte, bits = (2, 4) if x.dtype.name in _NIBBLES else (4, 2)
    flat = np.ascontiguousarray(x).reshape(-1).view(np.uint8) & ((1 << bits) - 1)
    flat = np.concatenate([flat, np.zeros(-flat.size % per_byte, np.uint8)]).reshape(-1, per_byte)
    return np.bitwise_or.reduce(flat << (bits * np.arange(per_byte, dtype=np.uint8)), axis=1).astype(np.uint8).tobytes()


def _sequence_bytes(items, name: str = "") -> bytes:
    if not isinstance(items, (list, tuple)):
        raise ValueError(f"a sequence is a list of arrays, got {type(items).__name__}")
    head = len_field(_VALUE_NAME, name.encode()) if name else b""
    return head + varint_field(_ELEM_TYPE, _TENSOR) + b"".join(
        len_field(_TENSOR_VALUE, _tensor_bytes(np.asarray(t))) for t in items)
