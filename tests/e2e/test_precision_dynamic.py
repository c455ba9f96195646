"""--precision_mode on dynamic models: hybrid (unknown dims, data-dependent ops, control flow), range
and gear models are lowered by one decision over the whole graph, whatever path compiles them: the
nodes the hybrid executor runs compute in float16 as the static submodels do, Casts sit only where
values cross between float16 and float32 (never at a submodel boundary), and the results are within
float16 error of onnxruntime's float32 run, on cpu and sim."""
import numpy as np
import onnx
import pytest
from onnx import helper

from ge.core import api
from ge.formats.om import read_om

from .conftest import onnxruntime_outputs, run_om
from .test_control_flow import _if_model, _loop_model, rand
from .test_dynamic import bert_feeds

DEVICES = ["cpu", "sim"]
BERT_SPECS = {"hybrid": ("input_ids:-1,-1;attention_mask:-1,-1", {}),
              "range": ("input_ids:1~4,1~32;attention_mask:1~4,1~32", {}),
              "gears": ("input_ids:-1,-1;attention_mask:-1,-1", {"dynamic_dims": "1,16,1,16;3,24,3,24"})}


def assert_float16_error(got, want, rel=2e-2):
    """float16's error against the float32 model: close in direction and size, and not float32's result."""
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    cosine = float((got.astype(np.float64) * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cosine > 0.9999, cosine
    assert np.abs(got - want).max() < rel * np.abs(want).max()
    assert not np.allclose(got, want, rtol=1e-6, atol=1e-7)  # really computed in float16


def casts(om_path) -> list[str]:
    """The Casts of a dynamic OM: the hybrid executor's nodes, its subgraphs', its submodels' tasks."""
    om = read_om(om_path)
    names = [n.name for g in (om, *om.subgraphs) for n in g.nodes if n.op_type == "Cast"]
    return sorted(names + [t.node for m in om.submodels for t in m.tasks if t.op_type == "Cast"])


@pytest.fixture(scope="module")
def bert(samples, tmp_path_factory):
    """BERT-style (2 layers) saved once; its OMs compiled per (kind, mode) on first use."""
    tmp = tmp_path_factory.mktemp("bert_fp16")
    path = str(tmp / "bert.onnx")
    onnx.save(samples.bert_style(layers=2, hidden=64, heads=2, intermediate=128, vocab=100), path)
    built = {}

    def compiled(kind, mode):
        if (kind, mode) not in built:
            spec, dynamic = BERT_SPECS[kind]
            built[kind, mode] = api.atc(path, str(tmp / f"{kind}_{mode}"), input_shape=spec, dynamic=dynamic,
                                        precision_mode=mode)
        return built[kind, mode]
    return path, compiled


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["hybrid", "range", "gears"])
def test_bert_in_float16_on_every_dynamic_path(bert, kind, device):
    path, compiled = bert
    result = compiled(kind, "force_fp16")
    for b, s in [(1, 16), (3, 24)]:
        feeds = bert_feeds(b, s)
        for got, want in zip(run_om(result.om_path, device, feeds), onnxruntime_outputs(path, feeds)):
            assert_float16_error(got, want)
    if kind != "gears":  # every node is unknown (the dims are): the hybrid executor computes in float16
        dtypes = {n.op_type: n.dtypes[0] for n in result.model.nodes}
        assert dtypes["FusedMatMul"] == dtypes["LayerNormalization"] == dtypes["Softmax"] == "float16"


def test_one_decision_whatever_path_compiles_the_model(bert):
    """The same graph lowered by the static path (each gear), the hybrid executor's path and the range
    plan's: the same Casts, only where the float16 graph meets its float32 outputs."""
    _, compiled = bert
    found = {kind: casts(compiled(kind, "force_fp16").om_path) for kind in BERT_SPECS}
    assert found["hybrid"] == found["range"] == ["last_hidden_state_to_fp32", "pooler_output_to_fp32"]
    assert found["gears"] == sorted(found["hybrid"] * 2)  # once per gear


def test_mixed_precision_in_the_hybrid_executor(bert):
    """allow_mix_precision on unknown-shape nodes: the white list (MatMul) in float16, the black list
    (LayerNormalization, Softmax) in float32, as a static model's."""
    path, compiled = bert
    result = compiled("hybrid", "allow_mix_precision")
    dtypes = {}
    for n in result.model.nodes:
        dtypes.setdefault(n.op_type, set()).add(n.dtypes[0])
    assert dtypes["FusedMatMul"] == {"float16"}
    assert dtypes["LayerNormalization"] == dtypes["Softmax"] == {"float32"}
    feeds = bert_feeds(3, 24)
    for got, want in zip(run_om(result.om_path, "cpu", feeds), onnxruntime_outputs(path, feeds)):
        assert_float16_error(got, want)


def test_keep_dtype_applies_to_the_hybrid_executors_nodes(bert, tmp_path):
    path, _ = bert
    keep = tmp_path / "keep.cfg"
    keep.write_text("OpType::MatMul\n")
    result = api.atc(path, str(tmp_path / "kept"), input_shape=BERT_SPECS["hybrid"][0], precision_mode="force_fp16",
                     keep_dtype=str(keep))
    dtypes = {}
    for n in result.model.nodes:
        dtypes.setdefault(n.op_type, set()).add(n.dtypes[0])
    assert dtypes["FusedMatMul"] == {"float32"} and dtypes["LayerNormalization"] == {"float16"}
    feeds = bert_feeds(3, 24)
    for got, want in zip(run_om(result.om_path, "cpu", feeds), onnxruntime_outputs(path, feeds)):
        assert_float16_error(got, want)


@pytest.fixture(scope="module")
def detection(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("detection_fp16")
    path = str(tmp / "det.onnx")
    onnx.save(samples.detection_style(), path)
    return path, api.atc(path, str(tmp / "det"), precision_mode="force_fp16")


@pytest.mark.parametrize("device", DEVICES)
def test_data_dependent_model_in_float16(detection, device):
    """A static submodel (the convolutions) feeding data-dependent nodes (NonMaxSuppression and the
    Gathers of what it keeps): the Gathers run in float16 on the submodel's float16 outputs; the only
    Casts are the model's input, NonMaxSuppression's float32-only boxes and scores, and the outputs."""
    path, result = detection
    assert casts(result.om_path) == sorted(["image_to_fp16", "/Add_output_0_to_fp32", "/Transpose_1_output_0_to_fp32",
                                            "kept_boxes_to_fp32", "kept_scores_to_fp32"])
    assert {n.dtypes[0] for n in result.model.nodes if n.op_type == "Gather"} == {"int64", "float16"}
    for seed in (0, 1):
        image = np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)
        got = run_om(result.om_path, device, {"image": image})
        want = onnxruntime_outputs(path, {"image": image})
        for g, w in zip(got, want):
            assert g.shape == w.shape  # the same boxes kept
            np.testing.assert_allclose(g, w, rtol=2e-2, atol=2e-3)


def test_inspect_shows_the_hybrid_nodes_dtypes(detection, tmp_path):
    from click.testing import CliRunner

    from ge.cli.main import cli
    _, result = detection
    nodes = {n["name"]: n["outputs"] for n in api.inspect(result.om_path)["dynamic"]["nodes"]}
    assert nodes["/Gather_1"] == [{"name": "kept_boxes_fp16", "dtype": "float16"}]
    assert nodes["kept_boxes_to_fp32"] == [{"name": "kept_boxes", "dtype": "float32"}]
    assert nodes["/NonMaxSuppression"][0]["dtype"] == "int64"
    text = CliRunner().invoke(cli, ["inspect", result.om_path]).output
    assert "Hybrid executor's nodes" in text and "float16" in text


@pytest.mark.parametrize("device", DEVICES)
def test_loop_body_is_lowered_as_a_graph_of_its_own(tmp_path, device):
    """A control-flow node keeps its dtypes (its body's signature); its body is lowered whole."""
    path = str(tmp_path / "loop.onnx")
    onnx.save(_loop_model(True, False), path)
    result = api.atc(path, str(tmp_path / "loop"), precision_mode="force_fp16")
    assert [n.dtypes for n in result.model.nodes] == [("float32", "float32")]
    body = result.model.submodels[0]
    # (a float16 Add or Mul alone is a one-step chain)
    assert {t.outputs[0].dtype for t in body.tasks if t.op_type in ("Add", "Mul", "FusedElementwise")} == {"float16"}
    feeds = {"M": np.array(5, np.int64), "s0": np.abs(rand(2, 3)), "w": rand(2, 3, seed=1),
             "lim": np.array(1e9, np.float32)}
    for got, want in zip(run_om(result.om_path, device, feeds), onnxruntime_outputs(path, feeds)):
        assert_float16_error(got, want)


def test_if_captures_a_lowered_value_in_float32(tmp_path):
    """An If reading (capturing) a value computed in float16 gets it cast back: its branches declare
    float32, and each branch computes in float16 inside."""
    m = _if_model([helper.make_node("Add", ["r", "x"], ["t"])], "t", [helper.make_node("Mul", ["x", "x"], ["e"])], "e",
                  [2, 3])
    path = str(tmp_path / "if.onnx")
    onnx.save(m, path)
    result = api.atc(path, str(tmp_path / "if"), precision_mode="force_fp16")
    node = next(n for n in result.model.nodes if n.op_type == "If")
    assert node.dtypes == ("float32",) and node.inputs[2] == "r_fp32"
    for cond in (True, False):
        feeds = {"cond": np.array(cond), "x": rand(2, 3)}
        for device in DEVICES:
            got, = run_om(result.om_path, device, feeds)
            assert_float16_error(got, onnxruntime_outputs(path, feeds)[0])


def test_sequences_keep_their_dtype(tmp_path):
    """Sequence ops are no float16 candidates (a sequence has no twin): the tensors around them are."""
    F, I64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("SplitToSequence", ["m", "split"], ["s"], axis=1),
             helper.make_node("SequenceAt", ["s", "k"], ["at"]),
             helper.make_node("Relu", ["at"], ["y"])]
    g = helper.make_graph(nodes, "seq", [helper.make_tensor_value_info("x", F, [2, 6]),
                                         helper.make_tensor_value_info("split", I64, ["parts"]),
                                         helper.make_tensor_value_info("k", I64, [])],
                          [helper.make_tensor_value_info("y", F, None)],
                          [onnx.numpy_helper.from_array(rand(6, 6, seed=2), "w")])
    path = str(tmp_path / "seq.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    result = api.atc(path, str(tmp_path / "seq"), input_shape={"split": [-1]}, precision_mode="force_fp16")
    dtypes = {n.op_type: n.dtypes[0] for n in result.model.nodes}
    assert dtypes["SplitToSequence"] == dtypes["SequenceAt"] == "float32"
    feeds = {"x": rand(2, 6), "split": np.array([2, 4], np.int64), "k": np.array(1, np.int64)}
    for device in DEVICES:
        got, = run_om(result.om_path, device, feeds)
        assert_float16_error(got, onnxruntime_outputs(path, feeds)[0])
