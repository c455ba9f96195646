import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels.ops import conv_native
from ge.core.kernels.epilogue import ATTR as EPILOGUE
from ge.core.kernels.fused import GE_DOMAIN
from ge.core.passes import optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(7)


def w(*shape):
    return (rng.standard_normal(shape) * 0.3).astype(np.float32)


def block(make_model, kernel=1, pads=0, group=1, residual_shape=(1, 8, 6, 6), relu=True, reuse=False):
    """x -> Conv -> Add(residual) [-> Relu]: a ResNet block's tail."""
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], kernel_shape=[kernel, kernel], pads=[pads] * 4, group=group),
             n("Add", ["c", "r"], ["s"])]
    outputs = ["y"]
    nodes.append(n("Relu", ["s"], ["y"]) if relu else n("Identity", ["s"], ["y"]))
    if reuse:  # the conv output is read twice: no fusion
        nodes.append(n("Neg", ["c"], ["c2"]))
        outputs.append("c2")
    inits = {"w": w(8, 8 // group, kernel, kernel), "b": w(8)}
    return make_model(nodes, {"x": (F, [1, 8, 6, 6]), "r": (F, list(residual_shape))}, outputs, inits)


def feeds(shape=(1, 8, 6, 6)):
    return {"x": rng.standard_normal((1, 8, 6, 6)).astype(np.float32),
            "r": rng.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("kernel,pads", [(1, 0), (3, 1)])
def test_residual_add_and_relu_fold_into_the_conv(make_model, load, run_ort, run_ge, kernel, pads):
    model = block(make_model, kernel, pads)
    g = load(model)
    report = optimize(g)
    assert report["passes"]["fuse_conv_add"] == {"fused": 1}
    (node,) = g.nodes
    assert (node.op_type, node.domain, node.inputs[-1]) == ("FusedConv", GE_DOMAIN, "r")
    assert node.attrs[EPILOGUE] == [["Relu", {}]]
    f = feeds()
    np.testing.assert_allclose(run_ge(g, f)[0], run_ort(model, f)[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [dict(residual_shape=(1, 8, 1, 1)), dict(group=2), dict(reuse=True)])
def test_not_folded(make_model, load, case):
    """A broadcast addend, a grouped conv, a conv output read twice: the Add stays."""
    g = load(block(make_model, **case))
    optimize(g)
    assert [n.op_type for n in g.nodes if n.op_type in ("Conv", "FusedConv")] == ["Conv"]


def use_plan(plan: str, monkeypatch, default_backend) -> None:
    """Steer every conv of the test onto one plan: the direct kernel (tall or wide tile), the pixels
    kernel, the GEMM with flat or dense columns, or numpy."""
    default_backend("numpy" if plan == "numpy" else "native",
                    direct="always" if plan in ("native-direct", "native-wide") else
                    "auto" if plan == "native-pixels" else "never")
    monkeypatch.setattr(conv_native, "PIXELS_K", 10**9)  # with "auto": any K, any run
    monkeypatch.setattr(conv_native, "PIXELS_RUN", 0)
    monkeypatch.setattr(conv_native, "DIRECT_WIDE_K", 0 if plan == "native-wide" else 10**9)
    monkeypatch.setattr(conv_native, "DIRECT_WIDE_ROW", 0)
    monkeypatch.setattr(conv_native, "FLAT_WASTE", 0.0 if plan == "native-dense" else 1e9)


@pytest.mark.parametrize("plan", ["native-direct", "native-wide", "native-flat", "native-dense", "numpy"])
@pytest.mark.parametrize("kernel,pads,relu", [(1, 0, True), (3, 1, True), (3, 1, False)])
def test_fused_conv_on_every_plan(make_model, tmp_path, monkeypatch, default_backend, plan, kernel, pads, relu):
    """Compiled and run: the direct kernel or the GEMM adds Z and applies the Relu as it stores
    (direct; dense; a pointwise conv's GEMM), or the pass dropping the padding columns adds Z and the
    runtime applies the Relu (flat); numpy plans add Z after the convolution."""
    use_plan(plan, monkeypatch, default_backend)
    model = block(make_model, kernel, pads, relu=relu)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    f = feeds()
    result = api.atc(path, str(tmp_path / "m"))
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        (task,) = api.model(model_id).default_context.handle
        assert task.plan.kernel.op_type == "FusedConv" and task.plan.kernel.uses_native == (plan != "numpy")
        got = api.execute(model_id, [f["x"], f["r"]])[0]
    finally:
        api.unload(model_id)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, f)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def two_blocks(channels: int, kernel: int):
    """x -> a -> b -> FusedConv(b, Z=a) -> d -> FusedConv(d, Z=the first's output) -> out: each residual's
    last reader is its FusedConv, so the planner writes each block's output over its Z (a chain of two)."""
    n = helper.make_node
    c = channels
    conv = lambda i, o, k: n("Conv", [i, f"w_{o}", f"b_{o}"], [o], kernel_shape=[k, k], pads=[k // 2] * 4)
    nodes = [conv("x", "a", 1), n("Relu", ["a"], ["ar"]), conv("ar", "b", kernel),
             conv("b", "c", kernel), n("Add", ["c", "ar"], ["s1"]), n("Relu", ["s1"], ["y1"]),
             conv("y1", "d", kernel), conv("d", "e", kernel), n("Add", ["y1", "e"], ["s2"]),  # Z first this time
             n("Relu", ["s2"], ["y2"]), conv("y2", "out", 1)]
    inits = {}
    for o, k in (("a", 1), ("b", kernel), ("c", kernel), ("d", kernel), ("e", kernel), ("out", 1)):
        inits[f"w_{o}"] = (rng.standard_normal((c, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        inits[f"b_{o}"] = w(c)
    graph = helper.make_graph(nodes, "two_blocks", [helper.make_tensor_value_info("x", F, [2, c, 5, 6])],
                              [helper.make_tensor_value_info("out", F, [2, c, 5, 6])],
                              [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("plan", ["native-direct", "native-wide", "native-pixels", "native-flat", "native-dense",
                                  "numpy"])
@pytest.mark.parametrize("channels,kernel", [(80, 3), (700, 1), (24, 3)])
def test_block_output_written_over_its_residual(tmp_path, monkeypatch, default_backend, plan, channels, kernel):
    """Each FusedConv's output takes its Z's bytes (Kernel.output_over); every plan gives onnxruntime's
    result with Y being Z, also where K is split into blocks (3x3 x 80 channels, 1x1 x 700: K > the
    GEMM's block of K, whose first block would overwrite Z), and so do the dataflow and parallel
    executors, whose plan keeps Z and Y apart."""
    use_plan(plan, monkeypatch, default_backend)
    model = two_blocks(channels, kernel)
    path = str(tmp_path / "m.onnx")
    onnx.save(model, path)
    x = rng.standard_normal((2, channels, 5, 6)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    switch = tmp_path / "switch.json"  # the NCHW plans: no blocked layout (tests/core/passes/test_nchwc_layout.py)
    switch.write_text(json.dumps({"Switch": {"GraphFusion": {"nchwc_layout": "off"}}}))
    result = api.atc(path, str(tmp_path / "m"), fusion_switch_file=str(switch))
    fused = [t for t in result.model.tasks if t.op_type == "FusedConv"]
    assert len(fused) == 2
    for t in fused:
        assert (t.outputs[0].allocation, t.outputs[0].offset) == (t.inputs[3].allocation, t.inputs[3].offset)
    assert fused[0].outputs[0].offset == fused[1].outputs[0].offset  # the chain: one buffer
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        loaded = api.model(model_id)
        assert all(t.plan.kernel.uses_native == (plan != "numpy") for t in loaded.default_context.handle)
        for executor in ("linear", "dataflow", "parallel"):
            ctx = loaded.create_context(executor=executor)
            for _ in range(2):  # again: Z is computed anew each run
                np.testing.assert_allclose(ctx.execute([x])[0], want, rtol=1e-4, atol=1e-5)
    finally:
        api.unload(model_id)
