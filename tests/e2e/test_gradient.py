"""The Gradient op (ai.onnx.preview.training) through ge atc + run: the backward graph ge builds is
checked against central finite differences of the forward graph (float64), for broadcasting
arithmetic, activations and MatMul, w.r.t. inputs and an intermediate tensor; an op without a
gradient rule fails the compile naming it."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper

from ge.core import api
from ge.core.model.errors import GeError

from .conftest import run_om

D = T.DOUBLE
FORWARD = [helper.make_node("MatMul", ["a", "w"], ["h"]),
           helper.make_node("Add", ["h", "b"], ["z"]),         # b [5] broadcast over rows
           helper.make_node("Tanh", ["z"], ["t"]),
           helper.make_node("Mul", ["t", "s"], ["m"]),         # s [3, 1] broadcast over columns
           helper.make_node("Sigmoid", ["m"], ["g"]),
           helper.make_node("Exp", ["b"], ["e"]),
           helper.make_node("Div", ["g", "e"], ["q"]),
           helper.make_node("Sub", ["q", "h"], ["r"]),         # h read twice: contributions add up
           helper.make_node("Relu", ["r"], ["y"])]
SHAPES = {"a": [3, 4], "w": [4, 5], "b": [5], "s": [3, 1]}


def compile_gradient(tmp_path, xs, forward=FORWARD, y="y"):
    grads = [f"d_{x}" for x in xs]
    zs = [k for k in SHAPES if k not in xs]  # the inputs: xs, then zs (the other inputs y depends on)
    node = helper.make_node("Gradient", xs + zs, grads, domain="ai.onnx.preview.training", name="grad",
                            xs=xs, y=y, **({"zs": zs} if zs else {}))
    g = helper.make_graph(forward + [node], "grad", [helper.make_tensor_value_info(k, D, s) for k, s in SHAPES.items()],
                          [helper.make_tensor_value_info(y, D, None)]
                          + [helper.make_tensor_value_info(d, D, None) for d in grads])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("ai.onnx.preview.training", 1)])
    path = str(tmp_path / "grad.onnx")
    onnx.save(m, path)
    return api.atc(path, str(tmp_path / "grad")).om_path


def forward(feeds, upto="y"):
    v = dict(feeds)
    for n in FORWARD:
        a = [v[i] for i in n.input]
        v[n.output[0]] = {"MatMul": lambda: a[0] @ a[1], "Add": lambda: a[0] + a[1], "Tanh": lambda: np.tanh(a[0]),
                          "Mul": lambda: a[0] * a[1], "Sigmoid": lambda: 1 / (1 + np.exp(-a[0])),
                          "Exp": lambda: np.exp(a[0]), "Div": lambda: a[0] / a[1], "Sub": lambda: a[0] - a[1],
                          "Relu": lambda: np.maximum(a[0], 0)}[n.op_type]()
    return v


def numeric_gradient(feeds, x):
    """d sum(y) / d x by central differences."""
    grad, eps = np.zeros_like(feeds[x]), 1e-6
    for i in np.ndindex(feeds[x].shape):
        hi, lo = dict(feeds), dict(feeds)
        hi[x], lo[x] = feeds[x].copy(), feeds[x].copy()
        hi[x][i] += eps
        lo[x][i] -= eps
        grad[i] = (forward(hi)["y"].sum() - forward(lo)["y"].sum()) / (2 * eps)
    return grad


def feeds(seed):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(s) for k, s in SHAPES.items()}


def test_gradients_match_finite_differences(tmp_path):
    xs = ["a", "w", "b", "s"]
    om = compile_gradient(tmp_path, xs)
    for seed in (0, 1):
        f = feeds(seed)
        for device in ("cpu", "sim"):
            y, *grads = run_om(om, device, [f[k] for k in SHAPES])
            np.testing.assert_allclose(y, forward(f)["y"], rtol=1e-12)
            for x, d in zip(xs, grads):
                assert d.shape == f[x].shape
                np.testing.assert_allclose(d, numeric_gradient(f, x), rtol=1e-5, atol=1e-7, err_msg=x)


def test_gradient_with_respect_to_an_intermediate_tensor(tmp_path):
    """d y / d h: h is an x, so the path stops there (MatMul is not differentiated)."""
    om = compile_gradient(tmp_path, ["h"])
    f = feeds(2)
    _, d_h = run_om(om, "cpu", [f[k] for k in SHAPES])
    v = forward(f)
    eps, expected = 1e-6, np.zeros((3, 5))
    for i in np.ndindex(3, 5):  # y as a function of h (the rest of the forward graph from h on)
        outs = []
        for step in (eps, -eps):
            h = v["h"].copy()
            h[i] += step
            t = np.tanh(h + f["b"]) * f["s"]
            outs.append(np.maximum(1 / (1 + np.exp(-t)) / np.exp(f["b"]) - h, 0).sum())
        expected[i] = (outs[0] - outs[1]) / (2 * eps)
    np.testing.assert_allclose(d_h, expected, rtol=1e-5, atol=1e-7)


def test_an_op_without_a_gradient_rule_is_named(tmp_path):
    fwd = [helper.make_node("Softmax", ["a"], ["p"], name="soft"), helper.make_node("Mul", ["p", "a"], ["y"])]
    with pytest.raises(GeError, match=r"node 'soft' \(Softmax\) lies between xs and y, and ge has no gradient for it"):
        compile_gradient(tmp_path, ["a"], forward=fwd)
    assert not list(tmp_path.glob("*.om"))
