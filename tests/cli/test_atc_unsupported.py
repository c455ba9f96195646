"""`ge atc` / api.atc refuse, before writing anything, a model with nodes ge has no kernel for:
one error naming every such node and op (it used to compile and fail at `ge run`)."""
from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.errors import GraphError, UnsupportedOpError


def _model(path, dims=(2, 3)) -> str:
    """x -> Relu -> r; r -> two ops of custom domains (no kernel anywhere) -> loss, z."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"),
         helper.make_node("Loss", ["r", "t"], ["loss"], name="sce", domain="vendor.ops"),
         helper.make_node("BlackmanWindowish", ["r"], ["z"], name="custom", domain="my.domain")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims)),
         helper.make_tensor_value_info("t", TensorProto.INT64, [dims[0]])],
        [helper.make_tensor_value_info("r", TensorProto.FLOAT, list(dims)),
         helper.make_tensor_value_info("loss", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.domain", 1),
                                                          helper.make_opsetid("vendor.ops", 3)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def test_atc_names_every_unsupported_node_and_writes_nothing(ge, tmp_path):
    model = _model(tmp_path / "m.onnx")
    out = tmp_path / "out"
    r = ge("atc", "--model", model, "--output", out / "m")
    assert r.exit_code != 0 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert line.count("\n") == 0, line
    assert "2 node(s) use an op ge has no kernel" in line
    assert "'sce' (vendor.ops::Loss)" in line and "'custom' (my.domain::BlackmanWindowish)" in line
    assert "'relu'" not in line
    assert not out.exists()


@pytest.mark.parametrize("input_shape", [None, "x:-1,3;t:-1"])
def test_api_atc_refuses_static_and_dynamic_alike(tmp_path, input_shape):
    model = _model(tmp_path / "m.onnx")
    with pytest.raises(UnsupportedOpError, match=r"'sce' \(vendor\.ops::Loss\), 'custom'"):
        api.atc(model, str(tmp_path / "m"), input_shape=input_shape)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_nodes_cut_off_by_out_nodes_do_not_count(tmp_path):
    model = _model(tmp_path / "m.onnx")
    result = api.atc(model, str(tmp_path / "m"), out_nodes="relu:0")
    assert os.path.isfile(result.om_path)
    assert [d.name for d in result.model.outputs] == ["r"]


def test_precheck_reports_the_same_nodes(tmp_path):
    report = api.precheck(_model(tmp_path / "m.onnx"))
    failed = {e["op_name"]: e["reason"] for e in report["op_list"] if e["result"] == "failed"}
    assert set(failed) == {"sce", "custom"}
    assert "op vendor.ops::Loss is not supported" in failed["sce"]


@pytest.mark.parametrize("input_shape", [None, "x:-1,3"])
def test_a_kernel_refusing_its_attributes_fails_the_compile_not_the_run(tmp_path, input_shape):
    """A refusal that no input value can change (here Celu's alpha 0, on bfloat16 after a Cast) used to
    send the model down the hybrid path, compiled as success, and fail at run."""
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["b"], to=TensorProto.BFLOAT16, name="cast"),
         helper.make_node("Celu", ["b"], ["y"], name="celu", alpha=0.0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    with pytest.raises(GraphError, match=r"node 'celu' \(Celu\): attribute alpha must not be 0"):
        api.atc(str(path), str(tmp_path / "m"), input_shape=input_shape)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]


def test_value_dependent_shapes_still_take_the_hybrid_path(tmp_path):
    graph = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"], name="nz")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    path = tmp_path / "nz.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    result = api.atc(str(path), str(tmp_path / "nz"))
    model_id = api.load_from_file(result.om_path)
    try:
        y, = api.execute(model_id, [np.array([[0, 1, 0], [2, 0, 3]], np.float32)])
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(y, [[0, 1, 1], [1, 0, 2]])
