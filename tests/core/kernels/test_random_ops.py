"""Random ops: shapes and types as onnxruntime, statistics, seeded reproducibility."""
import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup


def ort_like(op, inputs, attrs, opset=17):
    """onnxruntime's output (for its shape and dtype)."""
    import onnx
    import onnxruntime as ort
    from onnx import helper
    from ge.core.model.ir import dtype_to_onnx
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(n, dtype_to_onnx(a.dtype), a.shape)
                                        for n, a in inputs.items()], [onnx.ValueInfoProto(name="y")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, dict(inputs))[0]


def build(op, inputs, attrs, opset=17):
    metas = [Meta(a.dtype, a.shape) for a in inputs.values()]
    k = lookup(op, opset=opset)(attrs, metas, opset=opset, name="r")
    return k


def planned_run(k, inputs):
    (m,) = k.infer()
    y = np.full(m.shape, 77, m.dtype)
    k.run(list(inputs.values()), [y], np.zeros(k.workspace_nbytes(), np.uint8))
    return y


@pytest.mark.parametrize("op,attrs", [
    ("RandomNormal", {"shape": [200, 300]}), ("RandomNormal", {"shape": [100, 100], "mean": 2.0, "scale": 0.5}),
    ("RandomNormal", {"shape": [64, 64], "dtype": 11}), ("RandomNormal", {"shape": [64, 64], "dtype": 10}),
    ("RandomUniform", {"shape": [200, 300]}), ("RandomUniform", {"shape": [100, 100], "low": -3.0, "high": 5.0}),
    ("RandomUniform", {"shape": [64, 64], "dtype": 11, "seed": 3.0}),
])
def test_random_shaped(op, attrs):
    # onnxruntime has no float16 RandomNormal
    want = np.zeros(attrs["shape"], np.float16) if attrs.get("dtype") == 10 else ort_like(op, {}, attrs)
    k = build(op, {}, attrs)
    (m,) = k.infer()
    assert (m.dtype, tuple(m.shape)) == (want.dtype, want.shape)
    y = planned_run(k, {})
    c = k.compute()[0]
    assert c.dtype == want.dtype and c.shape == want.shape
    y64 = y.astype(np.float64)
    if op == "RandomNormal":
        mean, scale = attrs.get("mean", 0.0), attrs.get("scale", 1.0)
        assert abs(y64.mean() - mean) < 0.1 * scale and abs(y64.std() - scale) < 0.1 * scale
    else:
        lo, hi = attrs.get("low", 0.0), attrs.get("high", 1.0)
        assert y64.min() >= lo and y64.max() <= hi and abs(y64.mean() - (lo + hi) / 2) < 0.05 * (hi - lo)


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
@pytest.mark.parametrize("dtype,attr", [(np.float32, None), (np.float64, None), (np.int64, 1), (np.float32, 11)])
def test_random_like(op, dtype, attr):
    x = np.zeros((30, 40), dtype)
    attrs = {} if attr is None else {"dtype": attr}
    want = ort_like(op, {"x": x}, attrs)
    k = build(op, {"x": x}, attrs)
    assert [(m.dtype, tuple(m.shape)) for m in k.infer()] == [(want.dtype, want.shape)]
    y = planned_run(k, {"x": x})
    assert np.isfinite(y).all() and y.std() > 0.1


def test_seeded_ops_repeat_their_sequence():
    a = build("RandomNormal", {}, {"shape": [5], "seed": 7.0})
    b = build("RandomNormal", {}, {"shape": [5], "seed": 7.0})
    first = [planned_run(a, {}) for _ in range(3)]
    second = [planned_run(b, {}) for _ in range(3)]
    for x, y in zip(first, second):
        np.testing.assert_array_equal(x, y)
    assert not np.array_equal(first[0], first[1])  # the generator advances between runs


@pytest.mark.parametrize("dtype,attr", [(np.float32, None), (np.float64, None), (np.float32, 7), (np.float32, 9)])
def test_bernoulli(dtype, attr):
    p = np.random.default_rng(0).uniform(0, 1, (400, 50)).astype(dtype)
    p[0] = 0
    p[1] = 1
    attrs = {} if attr is None else {"dtype": attr}
    want = ort_like("Bernoulli", {"p": p}, attrs, opset=15)
    k = build("Bernoulli", {"p": p}, attrs, opset=15)
    assert [(m.dtype, tuple(m.shape)) for m in k.infer()] == [(want.dtype, want.shape)]
    y = planned_run(k, {"p": p}).astype(np.float64)
    assert set(np.unique(y)) <= {0.0, 1.0}
    assert y[0].sum() == 0 and y[1].sum() == 50
    assert abs(y.mean() - p.astype(np.float64).mean()) < 0.02


@pytest.mark.parametrize("dtype", [None, 6, 7])
def test_multinomial(dtype):
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], np.float32) + 1e-30)
    attrs = {"sample_size": 4000} | ({} if dtype is None else {"dtype": dtype})
    want = ort_like("Multinomial", {"x": logits}, attrs, opset=7)
    k = build("Multinomial", {"x": logits}, attrs, opset=7)
    assert [(m.dtype, tuple(m.shape)) for m in k.infer()] == [(want.dtype, want.shape)]
    y = planned_run(k, {"x": logits})
    freq = np.stack([(y == c).mean(axis=1) for c in range(3)], axis=1)
    np.testing.assert_allclose(freq, [[0.1, 0.2, 0.7], [0.5, 0.5, 0.0], [1.0, 0.0, 0.0]], atol=0.03)


def test_random_errors():
    with pytest.raises(GraphError, match=r"node 'r' \(RandomNormal\): attribute 'shape' is required"):
        build("RandomNormal", {}, {})
    with pytest.raises(GraphError, match="output type int32 is not supported"):
        build("RandomUniform", {}, {"shape": [2], "dtype": 6})
