"""Protobuf's wire format, read and written field by field: what ge needs to scan ONNX files
(formats/onnx/wire.py) and to read and write ONNX's value files (formats/value_protos.py) without
importing onnx, which the deployed runtime does not have.

A message is a run of fields, each a key (field number << 3 | wire type) and a value: a varint, 8 or
4 bytes, or a length and that many bytes (a string, a sub-message, a packed repeated field).
"""
from __future__ import annotations

VARINT, FIXED64, LEN, FIXED32 = 0, 1, 2, 5


class WireError(ValueError):
    """Bytes that are not a protobuf message (truncated, a bad length, a group)."""


def fields(buf, start: int = 0, end: int | None = None):
    """(number, wire type, where the field starts, where its value starts, where it ends) of each
    field of the message in buf[start:end]."""
    size = len(buf)
    end = size if end is None else end
    pos = start
    while pos < end:
        field = pos
        # one-byte varints read here (keys of fields 1-15, dims, short lengths: most of an ONNX file's):
        # a call of varint() costs more than the rest of a field
        if pos < size and buf[pos] < 0x80:
            key, pos = buf[pos], pos + 1
        else:
            key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        value = pos
        if wire == VARINT:
            if pos < size and buf[pos] < 0x80:
                pos += 1
            else:
                _, pos = varint(buf, pos)
        elif wire == FIXED64:
            pos += 8
        elif wire == FIXED32:
            pos += 4
        elif wire == LEN:
            if pos < size and buf[pos] < 0x80:
                n, value = buf[pos], pos + 1
            elif pos + 1 < size and buf[pos + 1] < 0x80:  # two bytes: the length of a node, a small tensor ...
                n, value = buf[pos] & 0x7F | buf[pos + 1] << 7, pos + 2
            else:
                n, value = varint(buf, pos)
            pos = value + n
        else:  # groups: no ONNX message has one
            raise WireError(f"wire type {wire} at byte {field}")
        if number == 0 or pos > end:
            raise WireError(f"field {number} at byte {field} runs past the end" if number else
                            f"field number 0 at byte {field}")
        yield number, wire, field, value, pos


def varint(buf, pos: int) -> tuple[int, int]:
    """(the unsigned varint at buf[pos], where it ends)."""
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise WireError(f"a varint runs past the end (byte {pos})")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError(f"a varint of more than 10 bytes (byte {pos})")


def varint_bytes(n: int) -> bytes:
    """A varint; a negative int64 as its two's complement (ten bytes), as protobuf writes it."""
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(number: int, wire: int = LEN) -> bytes:
    return varint_bytes(number << 3 | wire)


def len_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field: a string, bytes, a sub-message or a packed repeated field."""
    return key(number, LEN) + varint_bytes(len(payload)) + payload


def varint_field(number: int, n: int) -> bytes:
    return key(number, VARINT) + varint_bytes(n)
