import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels import conv_native
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


@pytest.mark.parametrize("plan", ["native-direct", "native-wide", "native-flat", "native-dense", "numpy"])
@pytest.mark.parametrize("kernel,pads,relu", [(1, 0, True), (3, 1, True), (3, 1, False)])
def test_fused_conv_on_every_plan(make_model, tmp_path, monkeypatch, default_backend, plan, kernel, pads, relu):
    """Compiled and run: the direct kernel or the GEMM adds Z and applies the Relu as it stores
    (direct; dense; a pointwise conv's GEMM), or the pass dropping the padding columns adds Z and the
    runtime applies the Relu (flat); numpy plans add Z after the convolution."""
    default_backend("numpy" if plan == "numpy" else "native",
                    direct="always" if plan in ("native-direct", "native-wide") else "never")
    monkeypatch.setattr(conv_native, "DIRECT_WIDE_K", 0 if plan == "native-wide" else 10**9)
    monkeypatch.setattr(conv_native, "DIRECT_WIDE_ROW", 0)
    monkeypatch.setattr(conv_native, "FLAT_WASTE", 0.0 if plan == "native-dense" else 1e9)
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
