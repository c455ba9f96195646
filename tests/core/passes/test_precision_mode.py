"""--precision_mode: which ops compute in float16, and what that does to results and weights."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.compile.build import build
from ge.core.model.errors import GeError
from ge.core.passes import dead_code, infer_shapes, optimize
from ge.core.passes.precision_mode import apply_precision_mode
from ge.formats.om import write_om
from ge.formats.onnx import load_onnx
from tests.conftest import ort_run

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def weights(*shape):
    return (rng.standard_normal(shape) * 0.2).astype(np.float32)


@pytest.fixture
def cnn(make_model, tmp_path):
    """Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax, saved as ONNX."""
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r1"], ["g"], name="pool"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "w2", "b2"], ["l"], transB=1, name="fc"),
             helper.make_node("Softmax", ["l"], ["y"], name="softmax")]
    inits = {"w1": weights(16, 3, 3, 3), "b1": weights(16), "w2": weights(10, 16), "b2": weights(10)}
    model = make_model(nodes, {"x": (F, [2, 3, 12, 12])}, {"y": (F, [2, 10])}, inits)
    path = tmp_path / "cnn.onnx"
    onnx.save(model, str(path))
    return model, path


def lowered(path, mode, **kw):
    """As optimize() does under --precision_mode: elementwise chains are fused, and convs blocked, after the
    lowering (left out here: each op is seen as precision_mode sees it)."""
    graph = load_onnx(path)
    optimize(graph, disabled={"fuse_elementwise", "nchwc_layout"})
    apply_precision_mode(graph, mode, **kw)
    dead_code(graph)
    infer_shapes(graph)
    return graph


def dtypes(graph):
    return [(n.op_type, str(graph.meta(n.outputs[0]).dtype)) for n in graph.nodes]


FUSED_CNN = ["Conv", "GlobalAveragePool", "Flatten", "Gemm", "Softmax"]  # Relu fused into Conv


@pytest.mark.parametrize("mode,expected", [
    ("force_fp32", [(op, "float32") for op in FUSED_CNN]),
    ("must_keep_origin_dtype", [(op, "float32") for op in FUSED_CNN]),
    ("force_fp16", [("Cast", "float16")] + [(op, "float16") for op in FUSED_CNN] + [("Cast", "float32")]),
    ("allow_fp32_to_fp16", [("Cast", "float16")] + [(op, "float16") for op in FUSED_CNN[:-1]]
     + [("Cast", "float32"), ("Softmax", "float32")]),
    ("allow_mix_precision", [("Cast", "float16")] + [(op, "float16") for op in FUSED_CNN[:-1]]
     + [("Cast", "float32"), ("Softmax", "float32")]),
    ("mixed_float16", [("Cast", "float16")] + [(op, "float16") for op in FUSED_CNN[:-1]]
     + [("Cast", "float32"), ("Softmax", "float32")]),
])
def test_each_mode_lowers_the_ops_it_names(cnn, mode, expected):
    graph = lowered(cnn[1], mode)
    assert dtypes(graph) == expected
    assert graph.meta(graph.outputs[0]).dtype == np.float32 and graph.meta(graph.inputs[0]).dtype == np.float32
    want = np.float32 if expected[0][1] == "float32" else np.float16
    assert {a.dtype for a in graph.initializers.values()} == {np.dtype(want)}
    assert set(graph.initializers) == {"w1", "b1", "w2", "b2"}  # weights keep their names


def test_gray_ops_follow_their_inputs(make_model, tmp_path):
    """Under mixed precision a gray op after a float16 op runs in float16; one fed by float32 ops stays."""
    nodes = [helper.make_node("Exp", ["x"], ["e"]),                 # black: float32
             helper.make_node("Add", ["e", "x"], ["a"]),            # gray, float32 inputs: float32
             helper.make_node("MatMul", ["a", "w"], ["m"]),         # white: float16
             helper.make_node("Concat", ["m", "m"], ["y"], axis=0)]  # gray after float16: float16
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, {"x": (F, [4, 8])}, {"y": (F, [8, 8])}, {"w": weights(8, 8)}), str(path))
    graph = lowered(path, "allow_mix_precision")
    assert dtypes(graph) == [("Exp", "float32"), ("Add", "float32"), ("Cast", "float16"),
                             ("MatMul", "float16"), ("Concat", "float16"), ("Cast", "float32")]


def test_keep_dtype_by_node_name_and_op_type(cnn):
    graph = lowered(cnn[1], "force_fp16", keep_dtype={"fc", "OpType::Softmax"})
    assert dtypes(graph) == [("Cast", "float16"), ("Conv", "float16"), ("GlobalAveragePool", "float16"),
                             ("Flatten", "float16"), ("Cast", "float32"), ("Gemm", "float32"), ("Softmax", "float32")]


def test_modify_mixlist_moves_ops_between_lists(cnn):
    mixlist = {"allow_mix_precision": {"white-list": {"to-add": ["Softmax"], "to-remove": ["Gemm"]}}}
    graph = lowered(cnn[1], "allow_mix_precision", mixlist=mixlist)
    assert dtypes(graph)[-2:] == [("Softmax", "float16"), ("Cast", "float32")]  # Gemm gray: follows Flatten
    mixlist = {"allow_mix_precision": {"black-list": {"to-add": ["Conv"]}}}
    assert dtypes(lowered(cnn[1], "allow_mix_precision", mixlist=mixlist))[0] == ("Conv", "float32")


def test_inputs_of_another_type_parameter_keep_float32(make_model, tmp_path):
    """Resize's scales and LayerNormalization's Mean output are not the op's T: they stay float32."""
    nodes = [helper.make_node("Resize", ["x", "", "s"], ["r"], mode="nearest"),
             helper.make_node("LayerNormalization", ["r", "g", "b"], ["y", "mean"], axis=-1)]
    path = tmp_path / "m.onnx"
    inits = {"s": np.array([1, 1, 2, 2], np.float32), "g": weights(8), "b": weights(8)}
    onnx.save(make_model(nodes, {"x": (F, [1, 2, 4, 4])}, {"y": (F, None), "mean": (F, None)}, inits), str(path))
    graph = lowered(path, "force_fp16")
    assert graph.initializers["s"].dtype == np.float32 and graph.initializers["g"].dtype == np.float16
    ln = next(n for n in graph.nodes if n.op_type == "LayerNormalization")
    assert [str(graph.meta(o).dtype) for o in ln.outputs] == ["float16", "float32"]


@pytest.mark.parametrize("device", ["cpu", "sim"])
@pytest.mark.parametrize("mode", ["force_fp16", "allow_mix_precision"])
def test_float16_results_are_within_float16_error_and_weights_halve(cnn, tmp_path, device, mode):
    model, path = cnn
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    want = ort_run(model, {"x": x})[0]
    sizes = {}
    for m in ("force_fp32", mode):
        graph = lowered(path, m)
        om = tmp_path / f"{m}.om"
        ge_model = build(graph, name=m)
        write_om(ge_model, om)
        sizes[m] = ge_model.weight_size
        model_id = api.load_from_file(str(om), device)
        try:
            got = api.execute(model_id, [x])[0]
        finally:
            api.unload(model_id)
    assert got.dtype == np.float32
    cosine = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert cosine > 0.9999 and np.abs(got - want).max() < 5e-3
    assert not np.array_equal(got, want)  # really computed in float16
    assert sizes[mode] < 0.55 * sizes["force_fp32"]  # half, and each weight's alignment


def test_bad_mode_and_mixlist_are_refused(cnn):
    with pytest.raises(GeError, match="--precision_mode 'fp8' is not one of force_fp32, "):
        lowered(cnn[1], "fp8")
    with pytest.raises(GeError, match="--modify_mixlist: unknown list 'grey-list'"):
        lowered(cnn[1], "allow_mix_precision", mixlist={"allow_mix_precision": {"grey-list": {"to-add": ["Add"]}}})
    with pytest.raises(GeError, match=r"--modify_mixlist: black-list.add: expected \"to-add\""):
        lowered(cnn[1], "allow_mix_precision", mixlist={"allow_mix_precision": {"black-list": {"add": ["Add"]}}})


def test_weights_beyond_float16_saturate(make_model, tmp_path):
    """A float32 weight past float16's range (an exporter's finfo(float32).min mask sentinel) is stored
    as float16's largest finite value, as the NPU converts: never an infinity (0 * inf is NaN)."""
    nodes = [helper.make_node("Mul", ["x", "big"], ["y"])]
    big = np.array([np.finfo(np.float32).min, 1e5, 0.5, -3.0], np.float32)
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, {"x": (F, [4])}, {"y": (F, [4])}, {"big": big}), str(path))
    graph = lowered(path, "force_fp16")
    np.testing.assert_array_equal(graph.initializers["big"], np.array([-65504, 65504, 0.5, -3], np.float16))


def test_float16_output_type_casts_once(cnn, tmp_path):
    """--output_type FP16 on a float16 graph: its output Cast reads the float16 result (a copy), no
    float32 round trip; the result is the float16 one."""
    model, path = cnn
    result = api.atc(str(path), str(tmp_path / "m"), precision_mode="force_fp16", output_type="FP16")
    casts = [t for t in result.model.tasks if t.op_type == "Cast"]
    assert [c.node for c in casts] == ["x_to_fp16", "y:output_type_cast"]
    x = rng.standard_normal((2, 3, 12, 12)).astype(np.float32)
    model_id = api.load_from_file(result.om_path)
    try:
        y = api.execute(model_id, [x])[0]
    finally:
        api.unload(model_id)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), ort_run(model, {"x": x})[0], atol=5e-3)
