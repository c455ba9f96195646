import numpy as np
import pytest
from onnx import TensorProto, helper

from ge.core.passes import constant_folding, dead_code, fuse_conv_bn, optimize

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def _bn_params(c, prefix="bn"):
    return {f"{prefix}_s": rng.uniform(0.5, 2, c).astype(np.float32),
            f"{prefix}_b": rng.standard_normal(c).astype(np.float32),
            f"{prefix}_m": rng.standard_normal(c).astype(np.float32),
            f"{prefix}_v": rng.uniform(0.1, 3, c).astype(np.float32)}


def _bn(x, y, prefix="bn", eps=1e-3):
    return helper.make_node("BatchNormalization", [x, f"{prefix}_s", f"{prefix}_b", f"{prefix}_m", f"{prefix}_v"],
                            [y], epsilon=eps)


@pytest.mark.parametrize("bias,group", [(True, 1), (False, 1), (True, 2), (False, 4)])
def test_conv_bn_fold_matches_onnxruntime(make_model, load, run_ort, run_ge, requires, bias, group):
    requires("Conv")
    c_in, c_out = 4, 8
    inits = {"W": rng.standard_normal((c_out, c_in // group, 3, 3)).astype(np.float32), **_bn_params(c_out)}
    conv_inputs = ["x", "W"]
    if bias:
        inits["B"] = rng.standard_normal(c_out).astype(np.float32)
        conv_inputs.append("B")
    nodes = [helper.make_node("Conv", conv_inputs, ["c"], pads=[1, 1, 1, 1], group=group), _bn("c", "y")]
    model = make_model(nodes, {"x": (F, [2, c_in, 6, 6])}, ["y"], inits)
    g = load(model)
    stats = {}
    constant_folding(g)
    fuse_conv_bn(g, stats=stats)
    dead_code(g)
    assert stats["fused"] == 1
    assert [n.op_type for n in g.nodes] == ["Conv"]
    assert g.nodes[0].outputs == ["y"] and len(g.nodes[0].inputs) == 3
    assert set(g.initializers) == set(g.nodes[0].inputs[1:])  # old W, B and BN params are gone
    assert all(a.dtype == np.float32 for a in g.initializers.values())
    x = rng.standard_normal((2, c_in, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_conv_transpose_bn_fold(make_model, load, run_ort, run_ge, requires):
    requires("ConvTranspose")
    c_in, c_out, group = 4, 6, 2
    inits = {"W": rng.standard_normal((c_in, c_out // group, 3, 3)).astype(np.float32), **_bn_params(c_out)}
    nodes = [helper.make_node("ConvTranspose", ["x", "W"], ["c"], group=group, strides=[2, 2]), _bn("c", "y")]
    model = make_model(nodes, {"x": (F, [1, c_in, 4, 4])}, ["y"], inits)
    g = load(model)
    fuse_conv_bn(g)
    dead_code(g)
    assert [n.op_type for n in g.nodes] == ["ConvTranspose"]
    x = rng.standard_normal((1, c_in, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("trans_b,with_c", [(0, True), (1, True), (1, False)])
def test_gemm_bn_fold(make_model, load, run_ort, run_ge, requires, trans_b, with_c):
    requires("Gemm")
    k, n = 5, 7
    inits = {"Bw": rng.standard_normal((n, k) if trans_b else (k, n)).astype(np.float32), **_bn_params(n)}
    ins = ["x", "Bw"]
    if with_c:
        inits["C"] = rng.standard_normal(n).astype(np.float32)
        ins.append("C")
    nodes = [helper.make_node("Gemm", ins, ["g"], transB=trans_b, alpha=0.5, beta=2.0), _bn("g", "y")]
    model = make_model(nodes, {"x": (F, [3, k])}, ["y"], inits)
    g = load(model)
    fuse_conv_bn(g)
    assert [n.op_type for n in g.nodes] == ["Gemm"]
    x = rng.standard_normal((3, k)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(8, 4, 3, 3), (16, 1, 3, 3), (5, 7, 1, 1)])
def test_conv_bn_fold_is_the_float64_product_rounded(make_model, load, shape):
    """The folded weights are W * s in float64 rounded once to float32, bit for bit, whichever computes
    them (ge_scale_rows where the native kernels are built, numpy's casting multiply where not), also
    at the edges: infinities, NaNs, signed zeros, subnormals, products beyond float32's range."""
    c_out = shape[0]
    w = (rng.standard_normal(shape) * 10.0 ** rng.integers(-44, 38, shape)).astype(np.float32)
    w.flat[::7], w.flat[::11], w.flat[::13], w.flat[::5] = np.nan, np.inf, -0.0, np.float32(1e-45)
    params = _bn_params(c_out)
    params["bn_s"][:2] = [3e38, -1e-30]
    group = shape[0] if shape[1] == 1 else 1
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], group=group), _bn("c", "y")]
    g = load(make_model(nodes, {"x": (F, [1, shape[1] * group, 4, 4])}, ["y"], {"W": w, **params}))
    with np.errstate(all="ignore"):
        fuse_conv_bn(g)
        s = params["bn_s"].astype(np.float64) / np.sqrt(params["bn_v"].astype(np.float64) + 1e-3)
        expected = (w.astype(np.float64) * s.reshape(-1, 1, 1, 1)).astype(np.float32)
    folded = g.initializers[g.nodes[0].inputs[1]]
    assert folded.dtype == np.float32 and folded.shape == shape
    assert folded.view(np.uint32).tolist() == expected.view(np.uint32).tolist()


def test_conv_output_used_twice_is_not_fused(make_model, load, requires):
    c = 3
    inits = {"W": rng.standard_normal((c, c, 1, 1)).astype(np.float32), **_bn_params(c)}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"]), _bn("c", "b"), helper.make_node("Add", ["b", "c"], ["y"])]
    g = load(make_model(nodes, {"x": (F, [1, c, 4, 4])}, ["y"], inits))
    stats = {}
    fuse_conv_bn(g, stats=stats)
    assert stats["fused"] == 0 and [n.op_type for n in g.nodes] == ["Conv", "BatchNormalization", "Add"]


def test_optimize_reports_conv_bn_relu(make_model, load, run_ort, run_ge, requires):
    requires("Conv", "BatchNormalization", "Relu")
    c = 4
    inits = {"W": rng.standard_normal((c, 3, 3, 3)).astype(np.float32), **_bn_params(c)}
    nodes = [helper.make_node("Conv", ["x", "W"], ["c"], pads=[1, 1, 1, 1]), _bn("c", "b"),
             helper.make_node("Relu", ["b"], ["y"])]
    model = make_model(nodes, {"x": (F, [1, 3, 8, 8])}, ["y"], inits)
    g = load(model)
    report = optimize(g)
    assert report["fused_conv_bn"] == 1 and report["fused_activations"] == 1
    assert report["nodes_before"] == 3 and report["nodes_after"] == 1
    assert g.nodes[0].attrs["ge.epilogue"] == [["Relu", {}]]
    x = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(run_ge(g, {"x": x})[0], run_ort(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
