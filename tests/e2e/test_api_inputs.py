"""The forms api.execute takes its inputs in: a list, a dict by name, or one array for a one-input model."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.errors import ShapeError

F = TensorProto.FLOAT


@pytest.fixture
def compile_model(make_model, tmp_path):
    def build(inputs: dict):
        nodes = [helper.make_node("Sum", list(inputs), ["y"])]
        path = tmp_path / "m.onnx"
        onnx.save(make_model(nodes, {k: (F, s) for k, s in inputs.items()}, {"y": (F, [4, 3])}), str(path))
        return api.load_from_file(api.atc(str(path), str(tmp_path / "m")).om_path)
    ids = []
    yield lambda inputs: ids.append(build(inputs)) or ids[-1]
    for i in ids:
        api.unload(i)


def test_one_array_is_the_only_input_not_a_list_of_rows(compile_model):
    model_id = compile_model({"x": [4, 3]})
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    for inputs in (x, [x], {"x": x}):
        np.testing.assert_array_equal(api.execute(model_id, inputs)[0], x)


def test_one_array_for_two_inputs_is_refused(compile_model):
    model_id = compile_model({"a": [4, 3], "b": [4, 3]})
    with pytest.raises(ShapeError, match=r"expects 2 inputs \(a, b\), got 1"):
        api.execute(model_id, np.zeros((4, 3), np.float32))
