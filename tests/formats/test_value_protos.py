"""formats/value_protos.py: ONNX's TensorProto/SequenceProto/OptionalProto files read and written by
ge's own wire code, checked both ways against onnx's numpy_helper (the test's oracle) for every dtype,
in raw_data and in the typed fields; bad messages refused with a reason."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from ge.formats import value_protos
from ge.formats.protobuf_wire import WireError

NATIVE = ("float32", "float64", "float16", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool")


def _values(dtype: str) -> np.ndarray:
    """Five values (odd: the packed types' last byte is half used) every type holds exactly."""
    if dtype == "object":
        return np.array(["", "a", "ß∂", "x y", "z"], dtype=object)
    if dtype == "bool":
        return np.array([True, False, True, True, False])
    unsigned = dtype.startswith("u") or dtype == "float8_e8m0fnu"
    return np.array([1, 2, 0.5 if "float" in dtype else 0, 1, 2] if unsigned else [1, -2, 0, -1, 1],
                    np.float32).astype(dtype)


def _same(got: np.ndarray, want: np.ndarray) -> bool:
    if want.dtype == object:
        return got.dtype == object and got.shape == want.shape and got.tolist() == want.tolist()
    return got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("dtype", list(value_protos.DATA_TYPES))
def test_every_dtype_round_trips_with_onnx(dtype):
    x = _values(dtype)
    assert _same(value_protos.read(numpy_helper.from_array(x, "x").SerializeToString()), x)  # onnx writes, ge reads
    assert _same(numpy_helper.to_array(onnx.TensorProto.FromString(value_protos.write(x, name="x"))), x)
    assert _same(value_protos.read(value_protos.write(x.reshape(5, 1))), x.reshape(5, 1))
    if dtype != "object":  # the typed fields (int32_data holds the small types' bits), as onnx's helper fills them
        typed = helper.make_tensor("x", value_protos.DATA_TYPES[dtype], [5],
                                   x.tolist() if dtype in NATIVE else x.astype(np.float32).tolist())
        assert _same(value_protos.read(typed.SerializeToString()), numpy_helper.to_array(typed))


def test_sequences_and_optionals_round_trip_with_onnx():
    seq = [np.arange(3, dtype=np.float32), np.ones((2, 2), np.float32)]
    for value, kind, proto in ((seq, "sequence", numpy_helper.from_list(seq)),
                               ([], "sequence", numpy_helper.from_list([])),
                               (None, "optional", numpy_helper.from_optional(None)),
                               (seq[0], "optional", numpy_helper.from_optional(seq[0])),
                               (seq, "optional_sequence", numpy_helper.from_optional(seq))):
        got = value_protos.read(proto.SerializeToString(), kind)
        written = value_protos.write(value, kind)
        back = (numpy_helper.to_list(onnx.SequenceProto.FromString(written)) if kind == "sequence" else
                numpy_helper.to_optional(onnx.OptionalProto.FromString(written)))
        for v in (got, back):
            if value is None:
                assert v is None
            elif isinstance(value, list):
                assert len(v) == len(value) and all(_same(a, b) for a, b in zip(v, value))
            else:
                assert _same(v, value)


def test_a_tensor_header_is_read_without_its_data():
    proto = numpy_helper.from_array(np.zeros((2, 0, 3), np.float16))
    assert value_protos.tensor_header(proto.SerializeToString()) == ("float16", (2, 0, 3))


@pytest.mark.parametrize("data,kind,message", [
    (numpy_helper.from_array(np.arange(6, dtype=np.float32)).SerializeToString()[:-3], "tensor", "runs past the end"),
    (b"\x08\x02\x10\x01\x4a\x04abcd", "tensor", r"raw_data of 4 bytes for float32 \[2\] \(8 bytes\)"),
    (numpy_helper.from_array(np.ones(1, np.complex64)).SerializeToString(), "tensor",
     "COMPLEX64, which ge does not compute with"),
    (b"\x08\x02", "tensor", "no data_type"),
    (numpy_helper.from_optional(np.zeros(2)).SerializeToString(), "optional_sequence",
     "an optional of elem_type 1, the model's is an optional of a sequence"),
    (b"\x0b", "tensor", "wire type 3"),
])
def test_bad_messages_say_what_is_wrong(data, kind, message):
    with pytest.raises(WireError, match=message):
        value_protos.read(data, kind)


def test_mutated_messages_are_read_or_refused_with_a_wire_error():
    """Truncated, bit-flipped and spliced messages of every kind: a value or a WireError, nothing else."""
    rng = np.random.default_rng(7)
    seeds = [(numpy_helper.from_array(_values(d)).SerializeToString(), "tensor") for d in ("float32", "int4", "object")]
    seeds += [(numpy_helper.from_list([np.ones(3, np.float32)]).SerializeToString(), "sequence"),
              (numpy_helper.from_optional([np.ones(2, np.int64)]).SerializeToString(), "optional_sequence")]
    for _ in range(400):
        data, kind = seeds[rng.integers(len(seeds))]
        data = bytearray(data)
        for _ in range(rng.integers(1, 4)):
            pos = int(rng.integers(len(data)))
            what = rng.integers(3)
            if what == 0:
                data[pos] = int(rng.integers(256))
            elif what == 1:
                del data[pos:]
            else:
                data[pos:pos] = rng.integers(256, size=int(rng.integers(1, 6))).astype(np.uint8).tobytes()
            if not data:
                break
        try:
            value_protos.read(bytes(data), kind)
        except WireError:
            pass
