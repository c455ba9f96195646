import numpy as np
import onnx
import pytest
from google.protobuf.message import DecodeError
from onnx import TensorProto, helper, numpy_helper

from ge.formats.onnx.wire import strip_raw_data


def _model(**inits):
    tensors = [numpy_helper.from_array(a, name) for name, a in inits.items()]
    nodes = [helper.make_node("Add", [name, name], [name + "_2"], name=f"add_{name}") for name in inits]
    outs = [helper.make_tensor_value_info(name + "_2", TensorProto.FLOAT, None) for name in inits]
    m = helper.make_model(helper.make_graph(nodes, "g", [], outs, tensors), doc_string="after the graph")
    m.metadata_props.add(key="k", value="v")  # a field after the graph, kept as it was
    return m


def test_big_raw_data_is_cut_out_and_located():
    rng = np.random.default_rng(0)
    big, small, big2 = (rng.standard_normal(n).astype(np.float32) for n in (5000, 3, 300))
    model = _model(big=big, small=small, big2=big2)
    data = model.SerializeToString()
    stripped, spans = strip_raw_data(memoryview(data), 1000)
    assert sorted(spans) == [0, 2]  # initializer indices, in file order
    for i, a in ((0, big), (2, big2)):
        offset, n = spans[i]
        np.testing.assert_array_equal(np.frombuffer(data[offset:offset + n], np.float32), a)
    parsed = onnx.ModelProto()
    parsed.ParseFromString(stripped)
    expected = onnx.ModelProto()
    expected.CopyFrom(model)
    expected.graph.initializer[0].ClearField("raw_data")
    expected.graph.initializer[2].ClearField("raw_data")
    assert parsed == expected
    assert len(stripped) < len(data) - 5000 * 4


def test_nothing_to_cut_or_anything_unexpected_is_none():
    small = _model(small=np.ones(3, np.float32)).SerializeToString()
    assert strip_raw_data(memoryview(small), 1000) is None  # nothing that big
    big = _model(big=np.ones(5000, np.float32)).SerializeToString()
    assert strip_raw_data(memoryview(big), 1000) is not None
    assert strip_raw_data(memoryview(big + big), 1000) is None  # the graph twice: protobuf merges, no scan
    assert strip_raw_data(memoryview(big[:-100]), 1000) is None  # truncated
    assert strip_raw_data(memoryview(b"\x0b" + big), 1000) is None  # a group
    assert strip_raw_data(memoryview(b""), 1000) is None


def test_a_small_initializer_is_not_scanned_and_its_damage_is_left_to_protobuf():
    """An initializer smaller than min_nbytes cannot hold raw data to cut: its fields are not read, so
    damage inside it passes the scan and fails protobuf's parse of the stripped bytes, after which the
    importer parses the whole file for protobuf's own message (importer._read_model)."""
    model = _model(big=np.ones(5000, np.float32), small=np.full(3, 7, np.float32))
    data = model.SerializeToString()
    small = model.graph.initializer[1].SerializeToString()
    damaged = data.replace(small, b"\x0b" * len(small))  # wire type 3, a group: no ONNX message has one
    stripped, spans = strip_raw_data(memoryview(damaged), 1000)
    assert list(spans) == [0]
    for buf in (stripped, damaged):
        with pytest.raises(DecodeError):
            onnx.ModelProto().ParseFromString(buf)
