"""ge compare: every output and every layer both sides have, against onnxruntime or onnx's
reference evaluator; a deliberately broken OM is caught at the layer it breaks."""
import json
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.inspection.comparison import metrics
from ge.core.model.errors import GeError

rng = np.random.default_rng(0)


def cnn(tmp_path):
    w1 = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 4, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
             helper.make_node("Sigmoid", ["c2"], ["s2"], name="sig2"),
             helper.make_node("Add", ["s2", "r1"], ["y"], name="add")]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    path = str(tmp_path / "cnn.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path, api.atc(path, str(tmp_path / "cnn")).om_path


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_every_output_and_layer_passes(tmp_path, device):
    path, om = cnn(tmp_path)
    r = api.compare(path, om, device=device)
    assert r["reference"] == "onnxruntime" and r["passed"] and r["first_bad_layer"] is None
    assert [o["name"] for o in r["outputs"]] == ["y"] and r["outputs"][0]["cosine"] > 0.999999
    layers = {row["name"]: row["op"] for row in r["layers"]}
    # conv1 + relu1 are fused: compared at the chain's end (r1); c1 exists on the reference side only
    assert "r1" in layers and layers["r1"] == "Relu" and "c1" not in layers and "y" in layers
    assert all(row["pass"] for row in r["layers"])


def test_the_reference_evaluator_stands_in_for_onnxruntime(tmp_path, monkeypatch):
    path, om = cnn(tmp_path)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # as if the compare extra were not installed
    r = api.compare(path, om)
    assert r["reference"] == "onnx.reference" and r["passed"]


def test_bfloat16_inputs_are_compared_on_the_reference_evaluator(tmp_path):
    """onnxruntime's Python API takes no ml_dtypes array: a bfloat16 model is compared on onnx's."""
    nodes = [helper.make_node("Mul", ["x", "x"], ["m"], name="mul"), helper.make_node("Add", ["m", "x"], ["y"], name="add")]
    g = helper.make_graph(nodes, "bf", [helper.make_tensor_value_info("x", TensorProto.BFLOAT16, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 8])])
    path = str(tmp_path / "bf.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    r = api.compare(path, api.atc(path, str(tmp_path / "bf")).om_path)
    assert r["reference"] == "onnx.reference" and r["passed"], r


def test_a_broken_om_names_its_first_bad_layer(tmp_path):
    """The OM of a model whose second conv weight differs: conv2's output and everything after fail,
    r1 still passes; the CLI exits 1 and writes JSON and CSV."""
    path, _ = cnn(tmp_path)
    m = onnx.load(path)
    w2 = next(t for t in m.graph.initializer if t.name == "w2")
    w2.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(w2) * 1.5, "w2"))
    other = str(tmp_path / "other.onnx")
    onnx.save(m, other)
    om = api.atc(other, str(tmp_path / "other")).om_path
    r = api.compare(path, om)
    assert not r["passed"]
    assert r["first_bad_layer"] in ("c2", "s2")
    assert {row["name"]: row["pass"] for row in r["layers"]}["r1"]

    from click.testing import CliRunner
    from ge.cli.main import cli
    res = CliRunner().invoke(cli, ["compare", "--model", path, "--om", om, "--json", str(tmp_path / "c.json"),
                                   "--output", str(tmp_path / "cmp")])
    assert res.exit_code == 1, res.output
    assert "first failing layer in graph order" in res.output
    data = json.loads((tmp_path / "c.json").read_text())
    assert set(data) >= {"outputs", "layers", "first_bad_layer"} and data["first_bad_layer"] == r["first_bad_layer"]
    assert set(data["layers"][0]) == {"name", "op", "cosine", "max_abs", "max_rel", "pass"}
    assert (tmp_path / "cmp" / "layers.csv").read_text().startswith("name,op,cosine,max_abs,max_rel,pass")


def test_cli_passes_with_inputs_from_files(tmp_path):
    from click.testing import CliRunner
    from ge.cli.main import cli
    path, om = cnn(tmp_path)
    np.save(tmp_path / "x.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    res = CliRunner().invoke(cli, ["compare", "--model", path, "--om", om, "--input", str(tmp_path / "x.npy"),
                                   "--json", "-"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["passed"] is True


def test_metrics():
    a = np.array([1.0, 2.0, 0.0], np.float32)
    m = metrics("t", "Op", a, a, 1e-4, 1e-3)
    assert (round(m.cosine, 12), m.max_abs, m.max_rel, m.passed) == (1.0, 0.0, 0.0, True)
    m = metrics("t", "Op", a + [0, 0.5, 0], a, 1e-4, 1e-3)
    assert m.max_abs == 0.5 and m.max_rel == 0.25 and not m.passed
    assert not metrics("t", "Op", np.zeros(2), np.zeros(3), 1, 1).passed  # shapes differ
    nan = np.array([np.nan, 1.0])
    assert metrics("t", "Op", nan, nan, 0, 0).passed and not metrics("t", "Op", nan, np.array([0.0, 1.0]), 0, 0).passed


def test_dynamic_and_mismatched_models_are_refused(tmp_path):
    path, om = cnn(tmp_path)
    other = str(tmp_path / "o.onnx")
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["z"])], "o",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3, 8, 8])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), other)
    with pytest.raises(GeError, match=r"was not compiled from .*o.onnx: the OM's output\(s\) \['y'\] are not tensors of"):
        api.compare(other, om)


def flatten_cnn(tmp_path):
    """Conv -> Relu -> GlobalAveragePool -> Flatten (a view: no task) -> Gemm -> Softmax."""
    seeded = np.random.default_rng(5)
    w = seeded.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    fc = seeded.standard_normal((10, 8)).astype(np.float32) * 0.3
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc"], ["l"], transB=1, name="fc"),
             helper.make_node("Softmax", ["l"], ["y"], name="softmax")]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(fc, "fc")])
    path = str(tmp_path / "flat.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_view_is_compared_in_its_own_shape(tmp_path):
    """Flatten runs as a view of the pool's output: its dump has Flatten's shape, and passes."""
    path = flatten_cnn(tmp_path)
    r = api.compare(path, api.atc(path, str(tmp_path / "flat")).om_path)
    rows = {row["name"]: row for row in r["layers"]}
    assert rows["f"]["op"] == "Flatten" and rows["f"]["pass"] and rows["g"]["pass"] and r["first_bad_layer"] is None


def test_a_float16_om_against_its_float32_model(tmp_path):
    """--precision_mode=force_fp16: every layer the float32 OM compares is compared (the lowered ops keep
    their tensors' names), each with float16's error (cosine ~1, error > 0), in graph order so the
    growth shows; float32's tolerance fails at the first layer, float16's passes."""
    path = flatten_cnn(tmp_path)
    fp32 = api.compare(path, api.atc(path, str(tmp_path / "fp32")).om_path)
    om = api.atc(path, str(tmp_path / "fp16"), precision_mode="force_fp16").om_path
    assert {t["tensor"]: t["dtype"] for t in api.inspect(om)["allocations"]}["r"] == "float16"  # ge inspect shows it
    r = api.compare(path, om)
    assert [row["name"] for row in r["layers"]] == [row["name"] for row in fp32["layers"]] == ["r", "g", "f", "l", "y"]
    assert all(row["cosine"] > 0.9999 and row["max_abs"] > 0 for row in r["layers"][:-1])
    assert r["first_bad_layer"] == "r"
    loose = api.compare(path, om, rtol=1e-2, atol=1e-3)
    assert loose["passed"] and loose["first_bad_layer"] is None


def sequence_string_optional_model(tmp_path):
    """Outputs of every kind a value can be: a sequence, a tensor, strings, an optional."""
    nodes = [helper.make_node("SplitToSequence", ["x"], ["seq"], axis=0, name="split"),
             helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Identity", ["s"], ["s_out"], name="ident"),
             helper.make_node("Optional", ["r"], ["opt"], name="opt")]
    optional = helper.make_optional_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, [3, 4]))
    g = helper.make_graph(nodes, "kinds", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
                                           helper.make_tensor_value_info("s", TensorProto.STRING, [2])],
                          [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("s_out", TensorProto.STRING, [2]),
                           helper.make_value_info("opt", optional)])
    path = str(tmp_path / "kinds.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path, api.atc(path, str(tmp_path / "kinds")).om_path


@pytest.mark.parametrize("reference", ["onnxruntime", "onnx.reference"])
def test_sequence_string_and_optional_outputs_are_compared(tmp_path, monkeypatch, reference):
    """A model ge runs with shapes decided as it runs: compared at its outputs, each of its kind."""
    path, om = sequence_string_optional_model(tmp_path)
    if reference == "onnx.reference":
        monkeypatch.setitem(sys.modules, "onnxruntime", None)
    feeds = {"x": np.arange(12, dtype=np.float32).reshape(3, 4) - 5, "s": np.array(["a", "b"], dtype=object)}
    r = api.compare(path, om, feeds)
    assert r["reference"] == reference and r["passed"] and r["outputs_only"] and r["layers"] == []
    assert [(o["name"], o["pass"]) for o in r["outputs"]] == [("seq", True), ("r", True), ("s_out", True), ("opt", True)]
    with pytest.raises(GeError, match=r"input 's' is a string tensor: give it as a .npy of numpy str dtype"):
        api.compare(path, om)


def test_a_model_with_unknown_dims_is_compared_at_the_inputs_given(tmp_path):
    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1, name="softmax")], "u",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 5])])
    path = str(tmp_path / "u.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    om = api.atc(path, str(tmp_path / "u"), input_shape="x:-1,5").om_path
    r = api.compare(path, om, [rng.standard_normal((3, 5)).astype(np.float32)])
    assert r["passed"] and r["outputs_only"] and r["outputs"][0]["cosine"] > 0.999999
    with pytest.raises(GeError, match=r"u.om has \w+ shapes: give its inputs \(--input\), ge makes no random data of "
                                      r"unknown dims \(x \[-1, 5\]\)"):
        api.compare(path, om)


def test_the_cli_compares_a_hybrid_model_from_pb_files(tmp_path):
    from click.testing import CliRunner
    from ge.cli.main import cli
    path, om = sequence_string_optional_model(tmp_path)
    files = []
    for name, value in (("x", np.ones((3, 4), np.float32)), ("s", np.array(["p", "q"], dtype=object))):
        files.append(str(tmp_path / f"{name}.pb"))
        with open(files[-1], "wb") as f:
            f.write(numpy_helper.from_array(value, name).SerializeToString())
    res = CliRunner().invoke(cli, ["compare", "--model", path, "--om", om, "--input", ",".join(files)])
    assert res.exit_code == 0, res.output
    assert "Outputs: 4/4 pass" in res.output and "outputs only" in res.output and "Layers" not in res.output


def test_metrics_of_sequences_optionals_and_strings():
    a, b = np.ones(3, np.float32), np.array([1.0, 2.0, 1.0], np.float32)
    assert metrics("s", "", [a, b], [a, b], 0, 0).passed and metrics("s", "", [], [], 0, 0).passed
    worst = metrics("s", "", [a, a], [a, b], 0, 0)
    assert not worst.passed and worst.max_abs == 1.0
    assert not metrics("s", "", [a], [a, a], 0, 0).passed and not metrics("s", "", a, [a], 0, 0).passed
    assert metrics("o", "", None, None, 0, 0).passed and not metrics("o", "", None, a, 0, 0).passed
    assert metrics("t", "", np.array(["x", "y"], object), np.array(["x", "y"]), 0, 0).passed
    assert not metrics("t", "", np.array(["x", "y"], object), np.array(["x", "z"], object), 0, 0).passed
