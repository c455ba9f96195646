"""ml_dtypes tensors through `ge run`'s files as through the API: inputs saved with plain np.save
(a void descr, or '<f1' for float8_e5m2) and outputs read back with np.load(f).view(dtype)."""
import warnings

import ml_dtypes
import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper

from ge.cli.main import cli as main
from ge.core import api


def _model():
    nodes = [helper.make_node("Identity", ["a"], ["a_copy"]),
             helper.make_node("Cast", ["b"], ["b_float"], to=T.FLOAT),
             helper.make_node("Cast", ["a"], ["a_e4m3"], to=T.FLOAT8E4M3FN)]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("a", T.BFLOAT16, [2, 3]),
                                               helper.make_tensor_value_info("b", T.FLOAT8E5M2, [2, 3])],
                              [helper.make_tensor_value_info(n, t, [2, 3]) for n, t in
                               (("a_copy", T.BFLOAT16), ("b_float", T.FLOAT), ("a_e4m3", T.FLOAT8E4M3FN))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def test_ge_run_reads_and_writes_ml_dtypes_npy_as_the_api_computes(tmp_path):
    path = str(tmp_path / "small.onnx")
    onnx.save(_model(), path)
    a = np.array([[1.5, -2, 0.25], [3, 0.125, -0.5]], np.float32).astype(ml_dtypes.bfloat16)
    b = np.array([[1, -2, 0.5], [4, 0.125, -8]], np.float32).astype(ml_dtypes.float8_e5m2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's note that these dtypes have no descr
        np.save(tmp_path / "a.npy", a)
        np.save(tmp_path / "b.npy", b)
    runner = CliRunner()
    r = runner.invoke(main, ["atc", "--model", path, "--framework", "5", "--output", str(tmp_path / "small")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["run", "-m", str(tmp_path / "small.om"), "--input", f"{tmp_path / 'a.npy'},{tmp_path / 'b.npy'}",
                             "--output-dir", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    model_id = api.load_from_file(str(tmp_path / "small.om"), "cpu")
    try:
        expected = api.execute(model_id, {"a": a, "b": b})
    finally:
        api.unload(model_id)
    for k, e in enumerate(expected):
        got = np.load(tmp_path / "out" / f"small_output_{k}.npy")
        assert got.dtype.itemsize == e.dtype.itemsize
        assert got.view(e.dtype).tobytes() == e.tobytes()
    # exact expectations (these values are exact in every type on the way)
    assert expected[0].dtype == ml_dtypes.bfloat16 and expected[0].tobytes() == a.tobytes()
    np.testing.assert_array_equal(expected[1], b.astype(np.float32))
    assert expected[2].tobytes() == a.astype(np.float32).astype(ml_dtypes.float8_e4m3fn).tobytes()
