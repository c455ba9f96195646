import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(0)
TOL = dict(rtol=1e-5, atol=1e-5)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


pytestmark = pytest.mark.usefixtures("native_and_numpy")  # every case through both plans


def bn_inputs(shape):
    c = shape[1]
    return {"x": f32(*shape), "scale": f32(c), "b": f32(c), "mean": f32(c),
            "var": rng.uniform(0.5, 2.0, c).astype(np.float32)}


@pytest.mark.parametrize("opset", [11, 14, 15])
@pytest.mark.parametrize("consts", [(), ("scale", "b", "mean", "var")])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (1, 8, 6, 6), (2, 4, 3, 4, 5)])
def test_batchnorm(check_op, shape, consts, opset):
    check_op("BatchNormalization", bn_inputs(shape), {"epsilon": 1e-3}, consts=consts, opset=opset, **TOL)


def test_batchnorm_default_epsilon(check_op):
    check_op("BatchNormalization", bn_inputs((1, 16, 7, 7)), consts=("scale", "b", "mean", "var"), **TOL)


def test_batchnorm_errors():
    f = np.dtype(np.float32)
    ms = [Meta(f, (1, 3, 4, 4))] + [Meta(f, (3,))] * 4
    k = lookup("BatchNormalization", opset=15)
    with pytest.raises(GraphError, match=r"node 'bn' \(BatchNormalization\): 4 outputs requested, at most 3"):
        k({"training_mode": 1}, ms, name="bn", opset=15, num_outputs=4)
    with pytest.raises(GraphError, match=r"scale has shape \(4,\)"):
        k({}, [ms[0], Meta(f, (4,))] + ms[2:], name="bn")


@pytest.mark.parametrize("n_outputs", [1, 2, 3])
@pytest.mark.parametrize("consts", [(), ("scale", "b")])
@pytest.mark.parametrize("shape,axis,sshape", [
    ((2, 5, 8), -1, (8,)),
    ((2, 5, 8), 1, (5, 8)),
    ((2, 5, 8), -2, (5, 8)),
    ((2, 5, 8), 0, (2, 5, 8)),
    ((4, 3, 2, 6), 2, (2, 6)),
    ((1, 128, 768), -1, (768,)),
    ((2, 5, 8), -1, (1,)),
    ((2, 5, 8), 1, (8,)),
])
def test_layernorm(check_op, shape, axis, sshape, consts, n_outputs):
    inputs = {"x": f32(*shape) * 3 + 1, "scale": f32(*sshape), "b": f32(*sshape)}
    check_op("LayerNormalization", inputs, {"axis": axis, "epsilon": 1e-4}, n_outputs=n_outputs, consts=consts,
             rtol=1e-4, atol=1e-5)


def test_layernorm_without_bias(check_op):
    check_op("LayerNormalization", {"x": f32(3, 4, 10), "scale": f32(10)}, {}, rtol=1e-4, atol=1e-5)


def test_layernorm_errors():
    f = np.dtype(np.float32)
    k = lookup("LayerNormalization")
    with pytest.raises(GraphError, match=r"node 'ln' \(LayerNormalization\): axis=3"):
        k({"axis": 3}, [Meta(f, (2, 3, 4)), Meta(f, (4,))], name="ln")
    with pytest.raises(GraphError, match="does not broadcast"):
        k({}, [Meta(f, (2, 3, 4)), Meta(f, (3,))], name="ln")
    with pytest.raises(GraphError, match="input 0 'X' is int32; LayerNormalization-17 takes T in"):
        k({}, [Meta(np.dtype(np.int32), (2, 3, 4)), Meta(np.dtype(np.int32), (4,))], name="ln")


SOFTMAX_CASES = [((7,), None), ((3, 5), None), ((3, 5), 0), ((2, 3, 4), None), ((2, 3, 4), 0), ((2, 3, 4), 1),
                 ((2, 3, 4), -1), ((2, 3, 4), 2), ((2, 3, 4, 5), -3), ((1, 1000), None)]


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13, 17])
@pytest.mark.parametrize("shape,axis", SOFTMAX_CASES)
def test_softmax(check_op, op, opset, shape, axis):
    x = f32(*shape) * 4
    attrs = {} if axis is None else {"axis": axis}
    if opset < 13 and len(shape) == 1 and axis is None:  # the legacy default axis=1 does not exist
        with pytest.raises(GraphError, match="axis=1 is out of range"):
            lookup(op, opset=opset)(attrs, [Meta(x.dtype, x.shape)], opset=opset)
        return
    check_op(op, {"x": x}, attrs, opset=opset, **TOL)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_extreme_values(check_op, op):
    x = np.array([[1000.0, 0.0, -1000.0], [-1e30, -1e30, 5.0]], np.float32)
    check_op(op, {"x": x}, {}, **TOL)


def test_softmax_errors():
    k = lookup("Softmax", opset=13)
    with pytest.raises(GraphError, match=r"node 's' \(Softmax\): axis=2"):
        k({"axis": 2}, [Meta(np.dtype(np.float32), (3, 4))], name="s", opset=13)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("case", ["far apart", "nan row", "nan past the last full vector", "inf", "masked"])
def test_softmax_shift_by_tensor_max(check_op, op, case):
    """The last-axis path shifts by the tensor's maximum; rows far below it, NaN and inf fall
    back to per-row shifts and give what onnxruntime gives."""
    x = f32(6, 37) * 3
    if case == "far apart":
        x += np.array([0, -50, -80, -200, 300, 1e30], np.float32)[:, None]
    elif case == "nan row":
        x[2, 5] = np.nan
    elif case == "nan past the last full vector":  # the native row's masked tail (37 = 2 x 16 + 5)
        x[3, 35] = np.nan
    elif case == "inf":
        x[1, 3] = np.inf
        x[4, 0] = -np.inf
    else:  # attention masks: finfo.min added to some columns, a row fully masked
        x[:, 30:] += np.finfo(np.float32).min
        x[5] = np.finfo(np.float32).min
    check_op(op, {"x": x}, {"axis": -1}, opset=13, **TOL)


def test_layernorm_and_softmax_run_do_not_allocate():
    """Nothing in proportion to the tensors (numpy's ufunc iterator takes a fixed 32 KB buffer for
    per-row operands such as the means)."""
    import tracemalloc
    f = np.dtype(np.float32)
    x = f32(16, 128, 128)
    cases = [(lookup("Softmax", opset=13)({}, [Meta(f, x.shape)], opset=13), [x]),
             (lookup("LayerNormalization")({}, [Meta(f, x.shape), Meta(f, (128,)), Meta(f, (128,))]),
              [x, f32(128), f32(128)])]
    for k, xs in cases:
        y = np.empty_like(x)
        ws = np.zeros(k.workspace_nbytes(), np.uint8)
        k.run(xs, [y], ws)
        tracemalloc.start()
        k.run(xs, [y], ws)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < 48 * 1024, f"{k.op_type} allocated {peak} bytes"


@pytest.mark.parametrize("masked", [-np.inf, np.finfo(np.float32).min, -200.0])
def test_softmax_masked_entries_are_exact_zeros(masked):
    """A causal or padding mask (-inf, float's lowest, or just far below) gives exact zeros: tiny
    values there would be denormals, and the product that follows would crawl."""
    x = f32(2, 8, 40)
    x[:, :, 20:] = masked
    k = lookup("Softmax", opset=17)({"axis": -1}, [Meta(x.dtype, x.shape)])
    y = np.empty_like(x)
    k.run([x], [y], np.empty(k.workspace_nbytes(), np.uint8))
    assert np.all(y[:, :, 20:] == 0)
    e = np.exp(x[:, :, :20] - x[:, :, :20].max(-1, keepdims=True))
    np.testing.assert_allclose(y[:, :, :20], e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-7)


FP16_TOL = dict(rtol=2e-3, atol=2e-3)  # one float16 rounding of a float32 result


def f16(*shape):
    return rng.standard_normal(shape).astype(np.float16)


@pytest.mark.parametrize("consts", [(), ("scale", "b", "mean", "var")])
def test_batchnorm_float16(check_op, consts):
    inputs = {k: v.astype(np.float16) for k, v in bn_inputs((2, 3, 4, 5)).items()}
    check_op("BatchNormalization", inputs, consts=consts, opset=15, **FP16_TOL)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_layernorm_float16_statistics_in_float32(check_op, n_outputs):
    """Y is float16; Mean and InvStdDev are the stash type (float32), as the schema's U says."""
    expected = check_op("LayerNormalization", {"x": f16(2, 5, 64), "scale": f16(64), "b": f16(64)}, {},
                        n_outputs=n_outputs, **FP16_TOL)
    assert [e.dtype for e in expected] == [np.float16] + [np.float32] * (n_outputs - 1)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis", [(11, 1), (13, -1), (13, 0)])
def test_softmax_float16(check_op, op, opset, axis):
    check_op(op, {"x": f16(3, 4, 50) * 4}, {"axis": axis}, opset=opset, **FP16_TOL)


def test_batchnorm_training_mode_uses_batch_statistics():
    x = f32(4, 3, 5, 2) * 2 + 1
    s, b = f32(3), f32(3)
    mean, var = f32(3), np.abs(f32(3)) + 0.5
    xs = [x, s, b, mean, var]
    k = lookup("BatchNormalization", opset=15)({"training_mode": 1, "momentum": 0.8, "epsilon": 1e-3},
                                               [Meta(a.dtype, a.shape) for a in xs], name="bn", opset=15,
                                               num_outputs=3)
    y, running_mean, running_var = k.compute(*xs)
    bm, bv = x.astype(np.float64).mean(axis=(0, 2, 3)), x.astype(np.float64).var(axis=(0, 2, 3))
    expected = (x - bm.reshape(3, 1, 1)) / np.sqrt(bv.reshape(3, 1, 1) + 1e-3) * s.reshape(3, 1, 1) + b.reshape(3, 1, 1)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(running_mean, mean * 0.8 + bm * 0.2, rtol=1e-6)
    np.testing.assert_allclose(running_var, var * 0.8 + bv * 0.2, rtol=1e-6)
    with pytest.raises(GraphError, match=r"node 'bn' \(BatchNormalization\): 3 outputs requested: the inference "
                                         r"form has 1"):
        lookup("BatchNormalization", opset=15)({}, [Meta(a.dtype, a.shape) for a in xs], name="bn", opset=15,
                                               num_outputs=3)


@pytest.mark.parametrize("op", ["LayerNormalization", "Softmax"])
def test_bound_native_rows_follow_the_thread_count(op, native_and_numpy, monkeypatch):
    """The bound row call is prepared once for its arrays and rebuilt only when the calling thread's
    native thread count changes; a strided input keeps run()'s own path."""
    from ge.core.kernels import native
    x, scale, b = f32(6, 32), f32(32), f32(32)
    inputs = [x, scale, b] if op == "LayerNormalization" else [x]
    metas = [Meta(a.dtype, a.shape) for a in inputs]
    k = lookup(op, opset=17)({}, metas, [None] * len(inputs), outputs=[Meta(x.dtype, x.shape)], opset=17, name="n").load()
    if op == "LayerNormalization":
        mean = x.mean(-1, keepdims=True)
        want = (x - mean) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * scale + b
    else:
        e = np.exp(x - x.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    builds = []
    if k.nat is not None:
        lib = k.nat

        class Counting:
            def rows_call(self, *a, **kw):
                builds.append(kw)
                return lib.rows_call(*a, **kw)
        monkeypatch.setattr(k, "nat", Counting())
    y = np.full_like(x, 7)
    ws = np.zeros(k.workspace_nbytes(), np.uint8) if k.workspace_nbytes() else None
    call = k.bound(inputs, [y], ws)
    before = native.threads()
    try:
        for n in (before, before, 1, 1, before):
            native.set_threads(n)
            y.fill(7)
            call()
            np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    finally:
        native.set_threads(before)
    assert len(builds) == (0 if native_and_numpy == "numpy" else (1 if before == 1 else 3))
    strided = np.asfortranarray(x)
    y.fill(7)
    k.bound([strided] + inputs[1:], [y], ws)()
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
