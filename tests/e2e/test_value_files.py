"""onnx's test_data_set layout through ge run, the API and ge compare: a folder of test_data_set_N
folders is a dataset, one such folder a set of inputs; --outfmt pb outputs are what onnx reads, and
equal what the API computes from the same values."""
import ml_dtypes
import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ge.cli.main import cli
from ge.core import api
from ge.core.acl import inference


def _model_and_data(tmp_path):
    nodes = [helper.make_node("Cast", ["b"], ["b_float"], to=T.FLOAT), helper.make_node("Add", ["x", "b_float"], ["y"]),
             helper.make_node("Cast", ["y"], ["z"], to=T.BFLOAT16)]
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", T.FLOAT, [2, 3]),
                                           helper.make_tensor_value_info("b", T.BFLOAT16, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3]),
                               helper.make_tensor_value_info("z", T.BFLOAT16, [2, 3])])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    rng = np.random.default_rng(0)
    feeds = []
    for k in range(2):
        x = rng.standard_normal((2, 3)).astype(np.float32)
        b = rng.standard_normal((2, 3)).astype(np.float32).astype(ml_dtypes.bfloat16)
        folder = tmp_path / "case" / f"test_data_set_{k}"
        folder.mkdir(parents=True)
        for i, (name, v) in enumerate((("x", x), ("b", b))):
            (folder / f"input_{i}.pb").write_bytes(numpy_helper.from_array(v, name).SerializeToString())
        feeds.append([x, b])
    return path, feeds


def test_test_data_sets_through_ge_run_the_api_and_ge_compare(tmp_path):
    path, feeds = _model_and_data(tmp_path)
    runner = CliRunner()
    r = runner.invoke(cli, ["atc", "--model", path, "--framework", "5", "--output", str(tmp_path / "m")])
    assert r.exit_code == 0, r.output
    om = str(tmp_path / "m.om")
    r = runner.invoke(cli, ["run", om, "--input", str(tmp_path / "case"), "--output-dir", str(tmp_path / "out"),
                            "--outfmt", "pb"])
    assert r.exit_code == 0, r.output
    model_id = api.load_from_file(om, "cpu")
    try:
        for k, inputs in enumerate(feeds):
            expected = api.execute(model_id, inputs)
            for i, (name, e) in enumerate(zip("yz", expected)):
                t = onnx.load_tensor(str(tmp_path / "out" / f"test_data_set_{k}_output_{i}.pb"))
                got = numpy_helper.to_array(t)
                assert t.name == name and got.dtype == e.dtype and got.tobytes() == e.tobytes()
        read = inference.read_inputs(model_id, [tmp_path / "case" / "test_data_set_1"])  # the API's way to the same
        assert [a.tobytes() for a in read] == [a.tobytes() for a in feeds[1]] and read[1].dtype == ml_dtypes.bfloat16
        (y, z), = [api.execute(model_id, read)]
        files = inference.write_outputs(model_id, [y, z], str(tmp_path / "api"), "m", "pb")
        assert numpy_helper.to_array(onnx.load_tensor(files[1])).tobytes() == z.tobytes()
    finally:
        api.unload(model_id)
    np.testing.assert_allclose(y, feeds[1][0] + feeds[1][1].astype(np.float32), rtol=1e-6)


def test_ge_compare_takes_a_test_data_set(tmp_path):
    graph = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["y"])], "sq",
                              [helper.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [2, 3])])
    path = str(tmp_path / "sq.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), path)
    om = api.atc(path, str(tmp_path / "sq")).om_path
    folder = tmp_path / "test_data_set_0"
    folder.mkdir()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    r = CliRunner().invoke(cli, ["compare", "--model", path, "--om", om, "--input", str(folder), "--json", "-"])
    assert r.exit_code == 0, r.output
    result = api.compare(path, om, [str(folder)])
    assert result["passed"] and result["outputs"][0]["max_abs"] == 0.0
    (folder / "input_0.pb").write_bytes(numpy_helper.from_array(x.astype(np.int32), "x").SerializeToString())
    r = CliRunner().invoke(cli, ["compare", "--model", path, "--om", om, "--input", str(folder)])
    assert r.exit_code == 1 and f"input 'x' (file '{folder / 'input_0.pb'}'): dtype int32 does not match" in r.output
