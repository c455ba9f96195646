"""One compile pipeline: `ge atc` reads and checks the ONNX file once whatever the path (4 gears, a
data-dependent model that falls from the static path to the hybrid one), gears are copies of one
graph sharing its weights, and the importer's graph can be made again from the model it read."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.ir import Graph
from ge.formats.onnx import importer

W = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)


def _save(nodes, x_shape, out_shape, path) -> str:
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                              [numpy_helper.from_array(W, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture
def reads(monkeypatch):
    """The ONNX files read (importer._read_model, the one function that opens the model file)."""
    seen = []
    real = importer._read_model

    def counted(path):
        seen.append(str(path))
        return real(path)

    monkeypatch.setattr(importer, "_read_model", counted)
    return seen


@pytest.fixture
def copies(monkeypatch):
    """The graphs Graph.copy made, with the graph each was copied from."""
    made = []
    real = Graph.copy

    def copy(self):
        made.append((self, real(self)))
        return made[-1][1]

    monkeypatch.setattr(Graph, "copy", copy)
    return made


def test_four_gears_read_the_file_once_and_share_its_weights(tmp_path, reads, copies):
    path = _save([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], ["N", 16], ["N", 8],
                 tmp_path / "mlp.onnx")
    result = api.atc(path, str(tmp_path / "gears"), input_shape="x:-1,16", dynamic_batch_size="1,2,4,8")
    assert reads == [path]
    assert len(result.model.submodels) == 4 and result.summary["gears"] == [[1], [2], [4], [8]]
    assert len(copies) == 4 and all(src is copies[0][0] for src, _ in copies)  # each gear a copy of one graph
    assert all(gear.initializers["W"] is src.initializers["W"] for src, gear in copies)  # weights not copied
    assert [gear.value("x").shape for _, gear in copies] == [(b, 16) for b in (1, 2, 4, 8)]


def test_a_data_dependent_model_is_read_once(tmp_path, reads):
    """The static path fails on NonZero; the hybrid path compiles the graph kept from before the
    static passes (it used to import the file twice more: to check, then to compile)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("NonZero", ["r"], ["nz"]), helper.make_node("Cast", ["nz"], ["y"], to=TensorProto.FLOAT)]
    path = _save(nodes, [4, 16], None, tmp_path / "dd.onnx")
    result = api.atc(path, str(tmp_path / "dd"))
    assert reads == [path] and result.summary["mode"] == "hybrid"
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        got = api.execute(model_id, {"x": x})[0]
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(got, np.stack(np.nonzero(np.maximum(x @ W, 0))).astype(np.float32))


def test_to_graph_makes_the_same_graph_again_from_one_read(tmp_path):
    path = _save([helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], ["N", 16], ["N", 8], tmp_path / "m.onnx")
    model = importer.read_onnx(path)
    first = importer.to_graph(model, {"x": [2, 16]})
    again = importer.to_graph(model, {"x": [3, 16]})
    assert first.value("x").shape == (2, 16) and again.value("x").shape == (3, 16)
    assert again.initializers["W"] is first.initializers["W"] and not first.initializers["W"].flags.writeable
    np.testing.assert_array_equal(again.initializers["W"], W)
    gear = importer.to_graph(model, {"x": [None, 16]})  # a gear's dim: unknown until the compiler sets it
    assert gear.value("x").shape[0] is None and gear.value("x").shape[1] == 16
