"""core/compile/onnx_check.py: `ge atc` checks a plain model itself and compiles it without onnx's
checker and shape inference (whose schema registry is the biggest single cost of a small model's
compile); every other model, and a plain one whose shapes prove data-dependent, goes through them as
before. What the own check refuses, it refuses naming file, node and field, and writes nothing."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ge.core import api
from ge.core.compile.onnx_check import is_plain
from ge.core.model.errors import FormatError, GraphError
from ge.formats.onnx import importer

from tests.conftest import ort_run

X = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)


def _model(nodes, inits=(), opset=17, outputs=(("y", T.FLOAT, [2, 4]),), ir_version=8) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                          [helper.make_tensor_value_info(*o) for o in outputs], list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)


def _relu_add() -> onnx.ModelProto:
    w = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(2, 4) / 10, "w")
    return _model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                   helper.make_node("Add", ["r", "w"], ["y"], name="add")], [w])


@pytest.fixture
def onnx_calls(monkeypatch):
    """The calls of onnx's checker and shape inference a compile makes."""
    calls = []
    real_check, real_infer = importer.check_model, importer.infer_shapes
    monkeypatch.setattr(importer, "check_model", lambda m: (calls.append("check"), real_check(m))[1])
    monkeypatch.setattr(importer, "infer_shapes", lambda m, **k: (calls.append("infer"), real_infer(m, **k))[1])
    return calls


def _compile_and_run(model, tmp_path, feeds, **options):
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "m"), **options).om_path)
    try:
        return api.execute(model_id, list(feeds.values()))
    finally:
        api.unload(model_id)


def test_a_plain_model_compiles_without_onnxs_checker_and_inference(tmp_path, onnx_calls):
    model = _relu_add()
    got = _compile_and_run(model, tmp_path, {"x": X})
    assert onnx_calls == []
    np.testing.assert_allclose(got[0], ort_run(model, {"x": X})[0], rtol=1e-6)
    # the Python API's load_onnx still gives onnx's checked and inferred graph
    g = importer.load_onnx(tmp_path / "m.onnx")
    assert onnx_calls == ["check", "infer"] and g.value("r").shape == (2, 4)


def test_data_dependent_shapes_compile_again_with_onnxs_inference(tmp_path, onnx_calls):
    """NonZero's output length is the data's: the compile without onnx's types stops, the model is
    imported again with them and takes the hybrid path, as any model does."""
    model = _model([helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                    helper.make_node("Cast", ["nz"], ["y"], to=T.FLOAT, name="cast")],
                   outputs=(("y", T.FLOAT, [2, None]),))
    got = _compile_and_run(model, tmp_path, {"x": X})
    assert onnx_calls == ["infer"]  # (the own check stood; its inference once, for the second import)
    np.testing.assert_array_equal(got[0], ort_run(model, {"x": X})[0])


def test_a_second_import_warns_no_more(tmp_path, caplog):
    """What --input_shape changes is said once, though the model is imported twice (data-dependent)."""
    model = _model([helper.make_node("NonZero", ["x"], ["nz"], name="nonzero"),
                    helper.make_node("Cast", ["nz"], ["y"], to=T.FLOAT, name="cast")],
                   outputs=(("y", T.FLOAT, [2, None]),))
    x = np.ones((3, 4), np.float32)
    got = _compile_and_run(model, tmp_path, {"x": x}, input_shape="x:3,4")
    np.testing.assert_array_equal(got[0], np.float32(np.nonzero(x)))
    said = [r.getMessage() for r in caplog.records if "--input_shape changes" in r.getMessage()]
    assert said == ["--input_shape changes static dim(s) of input 'x' the model declares [2, 4]: dim 0 2 -> 3"]


def test_dynamic_inputs_gears_and_options_that_read_outputs_keep_onnxs_inference(tmp_path, onnx_calls):
    model = _relu_add()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "n"
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    api.atc(path, str(tmp_path / "gears"), input_shape="x:-1,4", dynamic_batch_size="2")
    assert onnx_calls == ["infer"]
    api.atc(path, str(tmp_path / "typed"), input_shape="x:2,4", output_type="FP16")
    assert onnx_calls == ["infer", "infer"]


@pytest.mark.parametrize("what,mutate", [
    ("control flow", lambda m: m.graph.node.append(helper.make_node(
        "If", ["c"], ["z"], then_branch=helper.make_graph([], "t", [], []),
        else_branch=helper.make_graph([], "e", [], [])))),
    ("a sequence output", lambda m: m.graph.output.append(helper.make_tensor_sequence_value_info("s", T.FLOAT, None))),
    ("an opset the version converter lifts", lambda m: m.opset_import[0].__setattr__("version", 6)),
    ("a sparse initializer", lambda m: m.graph.sparse_initializer.append(helper.make_sparse_tensor(
        numpy_helper.from_array(np.ones(1, np.float32), "v"), numpy_helper.from_array(np.zeros(1, np.int64), "i"),
        [2]))),
    ("a model-local function", lambda m: m.functions.append(helper.make_function("local", "f", [], [], [], []))),
    ("an ai.onnx.ml node", lambda m: m.graph.node.append(helper.make_node("Binarizer", ["x"], ["b"],
                                                                           domain="ai.onnx.ml"))),
    ("strings", lambda m: m.graph.output.append(helper.make_tensor_value_info("s", T.STRING, [1]))),
    ("RMSNormalization (onnx's schema and inference type it differently)",
     lambda m: m.graph.node.append(helper.make_node("RMSNormalization", ["x", "w"], ["z"]))),
])
def test_what_is_not_plain(what, mutate):
    model = _relu_add()
    assert is_plain(model)
    mutate(model)
    assert not is_plain(model), what


def test_com_microsoft_nodes_are_plain():
    """onnx has no schemas of the domain (its checker asks only that it is imported): ge's kernels check them."""
    model = _relu_add()
    model.graph.node.append(helper.make_node("FusedMatMul", ["x", "w"], ["z"], domain="com.microsoft"))
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert is_plain(model)


def _named(**attrs):
    return [helper.make_node("LeakyRelu", ["x"], ["y"], name="leaky", **attrs)]


@pytest.mark.parametrize("nodes,inits,error,message", [
    (_named(alpha=0.1, beta=1.0), (), GraphError,
     r"node 'leaky' \(LeakyRelu\): unrecognized attribute 'beta' \(the op's attributes at opset 17: alpha\)"),
    (_named(alpha=1), (), GraphError, r"node 'leaky' \(LeakyRelu\): attribute 'alpha' is INT, the op's schema declares FLOAT"),
    ([helper.make_node("Transpose", ["x", "x"], ["y"], name="t")], (), GraphError,
     r"node 't' \(Transpose\): 2 inputs where the op takes at most 1 \(its schema at opset 13\)"),
    ([helper.make_node("Add", ["x"], ["y"], name="add")], (), GraphError,
     r"node 'add' \(Add\): input 1 \('B'\) is required but not given"),
    ([helper.make_node("Add", ["x", ""], ["y"], name="add")], (), GraphError,
     r"node 'add' \(Add\): input 1 \('B'\) is required but not given"),
    ([helper.make_node("Flatten", ["x"], ["y"], name="f", axis=1),
      helper.make_node("Relu", ["x"], ["y"], name="r")], (), GraphError, r"tensor 'y' is assigned twice"),
    ([helper.make_node("Relu", ["x"], ["x"], name="r")], (), GraphError, r"tensor 'x' is assigned twice"),
    ([helper.make_node("Add", ["x", "nowhere"], ["y"], name="add")], (), GraphError,
     r"node 'add' \(Add\): input 'nowhere' is no graph input, initializer or node output"),
    ([helper.make_node("Gelu", ["x"], ["y"], name="gelu")], (), GraphError,
     r"node 'gelu' \(Gelu\): no Gelu at opset 17 \(onnx has it from opset 20\)"),
    ([helper.make_node("Scatter", ["x", "i", "x"], ["y"], name="scatter")],
     (numpy_helper.from_array(np.zeros((2, 4), np.int64), "i"),), GraphError,
     r"node 'scatter' \(Scatter\): its schema at opset 17 is deprecated \(since opset 11\)"),
    ([helper.make_node("FusedMatMul", ["x", "x"], ["y"], name="fm", domain="com.microsoft")], (), GraphError,
     r"node 'fm' \(FusedMatMul\): its domain 'com.microsoft' is not among the model's opset imports"),
])
def test_the_own_check_refuses_naming_file_node_and_field(tmp_path, nodes, inits, error, message):
    path = str(tmp_path / "bad.onnx")
    onnx.save(_model(nodes, inits), path)
    assert is_plain(onnx.load(path))
    with pytest.raises(error, match=r"bad\.onnx: " + message) as e:
        api.atc(path, str(tmp_path / "out"))
    assert "\n" not in str(e.value)
    assert list(tmp_path.iterdir()) == [tmp_path / "bad.onnx"]


def _both_fields(m):
    m.graph.initializer[0].float_data.extend(range(8))


def _negative_dim(m):
    m.graph.initializer[0].dims[0] = -2


@pytest.mark.parametrize("mutate,message", [
    (lambda m: m.graph.input.append(m.graph.input[0]), r"graph input 'x' is declared twice"),
    (lambda m: setattr(m.graph.initializer[0], "name", ""), r"an initializer has no name"),
    (_negative_dim, r"initializer 'w' has a negative dim \(\[-2, 4\]\)"),
    (_both_fields, r"initializer 'w' holds float_data and raw_data: a tensor holds its values in one field"),
])
def test_the_graphs_own_faults_are_refused(tmp_path, mutate, message):
    model = _relu_add()
    mutate(model)
    path = str(tmp_path / "bad.onnx")
    onnx.save(model, path)
    with pytest.raises(GraphError, match=r"bad\.onnx: " + message + "$"):
        api.atc(path, str(tmp_path / "out"))
    assert list(tmp_path.iterdir()) == [tmp_path / "bad.onnx"]


def test_a_required_attribute_missing_is_named(tmp_path):
    path = str(tmp_path / "bad.onnx")
    onnx.save(_model([helper.make_node("Cast", ["x"], ["y"], name="cast")]), path)
    with pytest.raises(GraphError, match=r"bad\.onnx: node 'cast' \(Cast\): required attribute 'to' is missing$"):
        api.atc(path, str(tmp_path / "out"))


def test_a_newer_ir_version_is_refused(tmp_path):
    path = str(tmp_path / "new.onnx")
    onnx.save(_model(_named(alpha=0.1), ir_version=99), path)
    with pytest.raises(FormatError, match=r"new\.onnx: ir_version 99 is higher than the newest this onnx knows"):
        api.atc(path, str(tmp_path / "out"))
