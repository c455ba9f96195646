"""Where an ONNX file's big weights are, found without parsing them: a scan of protobuf's wire
format along ModelProto.graph -> GraphProto.initializer -> TensorProto.raw_data.

`strip_raw_data` returns the file's bytes without those raw_data fields (a few megabytes at most,
for protobuf to parse) and where each one was in the file, so the importer reads each weight as a
view of the file's map: no weight is copied before the OM writer copies it into the OM. Anything
the scan does not expect (a graph field given twice, a group, a malformed length) returns None and
the importer parses the whole file as before. The wire format itself is formats/protobuf_wire.py.
"""
from __future__ import annotations

from ..protobuf_wire import LEN as _LEN, WireError, fields as _fields, key, varint_bytes

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9


def strip_raw_data(buf, min_nbytes: int) -> tuple[bytes, dict[int, tuple[int, int]]] | None:
    """(the model without the raw_data of its main graph's initializers of at least `min_nbytes`,
    {initializer index: (offset, nbytes) of its raw data in `buf`}), or None."""
    try:
        graphs = [f for f in _fields(buf, 0, len(buf)) if f[0] == _MODEL_GRAPH]
        if len(graphs) != 1 or graphs[0][1] != _LEN:
            return None
        _, _, start, value, end = graphs[0]
        spans: dict[int, tuple[int, int]] = {}
        graph = _strip_graph(buf, value, end, min_nbytes, spans)
        if not spans:
            return None
        return b"".join([buf[:start], key(_MODEL_GRAPH), varint_bytes(len(graph)), graph, buf[end:]]), spans
    except (WireError, IndexError):
        return None


def _strip_graph(buf, start: int, end: int, min_nbytes: int, spans: dict) -> bytes:
    pieces, index = [], 0
    kept = start  # buf[kept:] is not in pieces yet: the fields between two stripped ones go in as one piece
    for number, wire, field, value, stop in _fields(buf, start, end):
        if number == _GRAPH_INITIALIZER and wire == _LEN:
            index += 1
            raw = ()  # (the fields of an initializer smaller than min_nbytes are not scanned: most of a model's)
            if stop - value >= min_nbytes:
                raw = [f for f in _fields(buf, value, stop) if f[0] == _TENSOR_RAW_DATA]
            if len(raw) == 1 and raw[0][1] == _LEN and raw[0][4] - raw[0][3] >= min_nbytes:
                _, _, raw_field, raw_value, raw_stop = raw[0]
                tensor = b"".join([buf[value:raw_field], buf[raw_stop:stop]])
                pieces += [buf[kept:field], key(_GRAPH_INITIALIZER), varint_bytes(len(tensor)), tensor]
                spans[index - 1] = (raw_value, raw_stop - raw_value)
                kept = stop
    pieces.append(buf[kept:end])
    return b"".join(pieces)
