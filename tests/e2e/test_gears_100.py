"""ATC's limit of 100 gears: a model with 100 --dynamic_batch_size gears (and one with 100
--dynamic_dims gears) compiles into one OM, loads, and every gear runs as onnxruntime does; the
gears share one copy of the weights."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.om import header_info

from .conftest import onnxruntime_outputs

GEARS = 100


def _mlp(path) -> str:
    """x [N, 16] -> MatMul(16x32) + b -> Relu -> MatMul(32x8): N symbolic."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((32, 8)).astype(np.float32), "w2")
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
             helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
             helper.make_node("Relu", ["hb"], ["r"], name="relu"),
             helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8])], [w1, b1, w2])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return str(path)


@pytest.fixture(scope="module")
def hundred(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gears100")
    path = _mlp(tmp / "mlp.onnx")
    result = api.atc(path, str(tmp / "mlp"), input_shape="x:-1,16",
                     dynamic_batch_size=",".join(str(b) for b in range(1, GEARS + 1)))
    return path, result


def test_100_batch_gears_compile_into_one_om_with_shared_weights(hundred):
    _, result = hundred
    dyn = result.model
    assert len(dyn.submodels) == GEARS and header_info(result.om_path)["model_num"] == GEARS + 1
    weights = (16 * 32 + 32 + 32 * 8) * 4
    assert weights <= dyn.weight_size < weights + 3 * 512  # one copy (aligned), not one per gear
    assert all(m.weight_data == b"" for m in dyn.submodels)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_every_one_of_100_gears_runs_as_onnxruntime(hundred, device):
    path, result = hundred
    model_id = api.load_from_file(result.om_path, device)
    try:
        assert len(api.gear_sizes(model_id)) == GEARS
        rng = np.random.default_rng(1)
        for batch in range(1, GEARS + 1):
            x = rng.standard_normal((batch, 16)).astype(np.float32)
            np.testing.assert_allclose(api.execute(model_id, {"x": x})[0], onnxruntime_outputs(path, {"x": x})[0],
                                       rtol=1e-4, atol=1e-4)
            assert api.model(model_id).last_gear == batch - 1
    finally:
        api.unload(model_id)


def test_100_dynamic_dims_gears(tmp_path):
    path = _mlp(tmp_path / "mlp.onnx")
    result = api.atc(path, str(tmp_path / "dims"), input_shape="x:-1,16",
                     dynamic_dims=";".join(str(b) for b in range(1, GEARS + 1)))
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for batch in (1, 37, 100):
            assert api.set_input_dynamic_dims(model_id, [batch]) == batch - 1  # the -1 dims, in order
            x = np.random.default_rng(batch).standard_normal((batch, 16)).astype(np.float32)
            np.testing.assert_allclose(api.execute(model_id, [x])[0], onnxruntime_outputs(path, {"x": x})[0],
                                       rtol=1e-4, atol=1e-4)
    finally:
        api.unload(model_id)


def test_101_gears_are_refused(tmp_path):
    path = _mlp(tmp_path / "mlp.onnx")
    with pytest.raises(GeError, match=r"--dynamic_batch_size: 101 gears; between 1 and 100 are allowed"):
        api.atc(path, str(tmp_path / "x"), input_shape="x:-1,16",
                dynamic_batch_size=",".join(str(b) for b in range(1, GEARS + 2)))
    assert not (tmp_path / "x.om").exists()


def test_a_gear_that_fails_is_named_with_the_reshape_that_fixes_the_batch(tmp_path):
    """An export traced at batch 1 that writes it into a Reshape (x.view(1, -1)): the gear that does not
    compile is named, and so is the Reshape, with what to do; no OM is left behind."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 10)).astype(np.float32), "w")
    shape = numpy_helper.from_array(np.array([1, -1], np.int64), "flat")
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["f"], name="flatten"),
             helper.make_node("MatMul", ["f", "w"], ["y"], name="fc")]
    graph = helper.make_graph(nodes, "fixed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], [w, shape])
    path = str(tmp_path / "fixed.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(GeError, match=r"^gear \[2\]: node 'fc' \(MatMul\): .*\(the model fixes the batch: Reshape "
                                      r"'flatten' to \[1, -1\]; re-export it with the batch dim as -1 or 0"):
        api.atc(path, str(tmp_path / "m"), input_shape="x:-1,4,4,4", dynamic_batch_size="1,2")
    assert not list(tmp_path.glob("m*"))
    # the gear that fits compiles and runs as onnxruntime
    result = api.atc(path, str(tmp_path / "one"), input_shape="x:-1,4,4,4", dynamic_batch_size="1")
    x = rng.standard_normal((1, 4, 4, 4)).astype(np.float32)
    model_id = api.load_from_file(result.om_path)
    try:
        np.testing.assert_allclose(api.execute(model_id, [x])[0], onnxruntime_outputs(path, {"x": x})[0], rtol=1e-5)
    finally:
        api.unload(model_id)
