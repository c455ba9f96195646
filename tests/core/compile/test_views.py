"""Views instead of copies (compile/build.py): a Transpose that moves only axes of size 1 and the
parts of a Split along an axis with only dims of 1 before it are views of their input, no task; a
decoding step's q, k, v. Results against onnxruntime on every executor, and the copies where the
views would not hold (parts of a graph input, axes of more than one moved)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ge.core import api

RNG = np.random.default_rng(3)
W = RNG.standard_normal((32, 96)).astype(np.float32)


def _decode_step(path: str, seq: int) -> str:
    """x [1, seq, 32] @ W -> Split into q, k, v along the last axis, heads [1, seq, 2, 16] moved to
    [1, 2, seq, 16]; k concatenated after a past of 5 tokens; q also split straight from the input x
    (a graph input: a task)."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["qkv"]),
        helper.make_node("Split", ["qkv", "sizes"], ["q", "k", "v"], axis=2),
        helper.make_node("Reshape", ["q", "heads"], ["q4"]),
        helper.make_node("Transpose", ["q4"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["k", "heads"], ["k4"]),
        helper.make_node("Transpose", ["k4"], ["kt"], perm=[0, 2, 1, 3]),
        helper.make_node("Concat", ["past", "kt"], ["present"], axis=2),
        helper.make_node("MatMul", ["qt", "kt_all"], ["scores"]),
        helper.make_node("Transpose", ["present"], ["kt_all"], perm=[0, 1, 3, 2]),
        helper.make_node("Split", ["x", "halves"], ["x0", "x1"], axis=2),
        helper.make_node("Add", ["x0", "x1"], ["xs"]),
        helper.make_node("Relu", ["v"], ["v_out"]),
    ]
    graph = helper.make_graph(
        nodes, "decode", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, 32]),
                          helper.make_tensor_value_info("past", TensorProto.FLOAT, [1, 2, 5, 16])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("scores", "present", "xs", "v_out")],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(np.array([32, 32, 32], np.int64), "sizes"),
         numpy_helper.from_array(np.array([1, seq, 2, 16], np.int64), "heads"),
         numpy_helper.from_array(np.array([16, 16], np.int64), "halves")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(onnx.shape_inference.infer_shapes(model), path)
    return path


def test_decoding_step_parts_are_views(tmp_path, run_ort):
    for seq in (1, 3):  # seq 3: the parts are strided and the Transposes move an axis of 3: tasks
        path = _decode_step(str(tmp_path / f"decode{seq}.onnx"), seq)
        feeds = {"x": RNG.standard_normal((1, seq, 32)).astype(np.float32),
                 "past": RNG.standard_normal((1, 2, 5, 16)).astype(np.float32)}
        om = api.atc(path, str(tmp_path / f"decode{seq}"))
        tasks = [t.op_type for t in om.model.tasks]
        assert tasks.count("Split") == (1 if seq == 1 else 2)  # the graph input's is a task
        assert tasks.count("Transpose") == (0 if seq == 1 else 1)  # (q's is read by the product through strides)
        want = run_ort(onnx.load(path), feeds)
        model_id = api.load_from_file(om.om_path, "cpu")
        try:
            model = api.model(model_id)
            for executor in ("linear", "dataflow", "parallel"):
                got = model.create_context(executor=executor).execute([feeds["x"], feeds["past"]])
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
        finally:
            api.unload(model_id)


def test_compare_reads_each_part_from_its_offset(tmp_path):
    """ge compare dumps every layer: a Split's parts are runs of the product's bytes at their offsets."""
    path = _decode_step(str(tmp_path / "decode.onnx"), 1)
    r = api.compare(path, api.atc(path, str(tmp_path / "decode")).om_path)
    layers = {row["name"]: row for row in r["layers"]}
    assert r["passed"] and {"q", "k", "v", "kt"} <= set(layers) and all(row["pass"] for row in r["layers"])


def test_attention_probabilities_are_written_over_their_scores(tmp_path, run_ort):
    """Softmax on the native rows writes its output over its input where it reads that input last
    (Kernel.output_over: the scores of attention, [heads, n, n], are the largest tensor of a long
    sequence's layer); where the scores are read again (a graph output here), or on numpy's plan (whose
    fast path is not redone over a row it wrote), it writes a tensor of its own. onnxruntime's results on
    every executor."""
    from ge.core.kernels import native
    for scores_out in (False, True):
        nodes = [helper.make_node("MatMul", ["q", "kt"], ["scores"]),
                 helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
                 helper.make_node("MatMul", ["probs", "v"], ["y"])]
        outs = ["y"] + (["scores"] if scores_out else [])
        graph = helper.make_graph(nodes, "attn", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in
                                                  (("q", [2, 40, 16]), ("kt", [2, 16, 40]), ("v", [2, 40, 16]))],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        model.ir_version = 8
        path = str(tmp_path / f"attn{int(scores_out)}.onnx")
        onnx.save(model, path)
        om = api.atc(path, str(tmp_path / f"attn{int(scores_out)}"))
        softmax = next(t for t in om.model.tasks if t.op_type == "Softmax")
        same = (softmax.inputs[0].allocation, softmax.inputs[0].offset) == \
            (softmax.outputs[0].allocation, softmax.outputs[0].offset)
        assert same == (not scores_out and native.native() is not None)
        feeds = {n: RNG.standard_normal(s).astype(np.float32) for n, s in
                 (("q", (2, 40, 16)), ("kt", (2, 16, 40)), ("v", (2, 40, 16)))}
        want = run_ort(model, feeds)
        model_id = api.load_from_file(om.om_path, "cpu")
        try:
            loaded = api.model(model_id)
            for executor in ("linear", "dataflow", "parallel"):
                got = loaded.create_context(executor=executor).execute([feeds["q"], feeds["kt"], feeds["v"]])
                for g, w in zip(got, want):
                    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
        finally:
            api.unload(model_id)
