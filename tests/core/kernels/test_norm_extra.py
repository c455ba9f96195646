import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(1)
TOL = dict(rtol=1e-5, atol=1e-5)
F16 = dict(rtol=2e-3, atol=2e-3)


def rand(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def check_ref(op_type, inputs, attrs, opset=17, **tol):
    """Like check_op, against onnx's reference evaluator (where onnxruntime lacks a case)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    want = ReferenceEvaluator(node).run(None, inputs)[0]
    arrays = list(inputs.values())
    metas = [Meta(a.dtype, a.shape) for a in arrays]
    k = lookup(op_type, opset=opset)(attrs, metas, opset=opset, name="n")
    assert [(m.dtype, m.shape) for m in k.infer()] == [(want.dtype, want.shape)]
    np.testing.assert_allclose(k.compute(*arrays)[0], want, **tol)
    y = np.full(want.shape, 77, want.dtype)
    ws = np.zeros(k.workspace_nbytes(), np.uint8)
    k.run(arrays, [y], ws)
    np.testing.assert_allclose(y, want, **tol)


# -- LRN -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("shape", [(2, 7, 4, 5), (1, 3, 6), (1, 4, 2, 3, 2)])
def test_lrn(check_op, size, shape):
    attrs = {"size": size, "alpha": 0.002, "beta": 0.6, "bias": 1.5}
    if size % 2 == 0:  # onnxruntime has odd sizes only (and onnx's reference sums over the wrong axis)
        x = rand(*shape)
        sq, c = np.zeros_like(x), shape[1]
        for i in range(c):
            sq[:, i] = (x[:, max(0, i - (size - 1) // 2):i + size // 2 + 1] ** 2).sum(axis=1)
        want = x / (1.5 + 0.002 / size * sq) ** 0.6
        k = lookup("LRN", opset=13)(attrs, [Meta(x.dtype, shape)], name="n")
        np.testing.assert_allclose(k.compute(x)[0], want, **TOL)
        return
    if len(shape) != 4:  # onnxruntime only has 4-D LRN: compare against the 4-D form
        x = rand(*shape)
        four = x.reshape(shape[0], shape[1], -1, 1)
        want = check_op("LRN", {"x": four}, attrs, **TOL)[0].reshape(shape)
        k = lookup("LRN", opset=13)({**attrs}, [Meta(x.dtype, shape)], name="n")
        np.testing.assert_allclose(k.compute(x)[0], want, **TOL)
        return
    check_op("LRN", {"x": rand(*shape)}, attrs, **TOL)


@pytest.mark.parametrize("opset", [1, 13])
def test_lrn_defaults_and_f16(check_op, opset):
    check_op("LRN", {"x": rand(1, 16, 5, 5)}, {"size": 5}, opset=opset, **TOL)
    if opset >= 13:  # onnxruntime's float16 LRN-1 model does not load
        check_op("LRN", {"x": rand(1, 16, 5, 5, dtype=np.float16)}, {"size": 3}, opset=opset, **F16)


def test_lrn_errors():
    k = lookup("LRN")
    with pytest.raises(GraphError, match=r"node 'l' \(LRN\): attribute 'size'"):
        k({}, [Meta(np.dtype(np.float32), (1, 3, 4, 4))], name="l")
    with pytest.raises(GraphError, match="rank >= 3"):
        k({"size": 3}, [Meta(np.dtype(np.float32), (3, 4))], name="l")
    with pytest.raises(GraphError, match="int32"):
        k({"size": 3}, [Meta(np.dtype(np.int32), (1, 3, 4, 4))], name="l")


# -- InstanceNormalization --------------------------------------------------------------------------

@pytest.mark.parametrize("consts", [(), ("s", "b")])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 8, 6, 6), (2, 4, 3, 4, 5), (3, 2, 1)])
def test_instance_norm(check_op, shape, consts):
    c = shape[1]
    x = rand(*shape) * 3 + 1
    check_op("InstanceNormalization", {"x": x, "s": rand(c), "b": rand(c)}, {"epsilon": 1e-3},
             consts=consts, **TOL)


def test_instance_norm_default_eps_f16(check_op):
    check_op("InstanceNormalization", {"x": rand(2, 4, 8, 8), "s": rand(4), "b": rand(4)}, **TOL)
    check_op("InstanceNormalization", {"x": rand(2, 4, 8, 8, dtype=np.float16), "s": rand(4, dtype=np.float16),
                                       "b": rand(4, dtype=np.float16)}, **F16)


def test_instance_norm_errors():
    f = np.dtype(np.float32)
    k = lookup("InstanceNormalization")
    with pytest.raises(GraphError, match=r"scale has shape \(4,\), \(3,\) expected"):
        k({}, [Meta(f, (1, 3, 4)), Meta(f, (4,)), Meta(f, (3,))], name="i")


# -- GroupNormalization -------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [18, 21])
@pytest.mark.parametrize("groups,shape", [(1, (2, 6, 3, 3)), (3, (2, 6, 3, 3)), (6, (1, 6, 4)),
                                          (2, (2, 4, 2, 3, 2)), (2, (3, 4))])
@pytest.mark.parametrize("consts", [(), ("s", "b")])
def test_group_norm(check_op, opset, groups, shape, consts):
    n = shape[1] if opset >= 21 else groups
    check_op("GroupNormalization", {"x": rand(*shape) * 2 - 1, "s": rand(n), "b": rand(n)},
             {"num_groups": groups, "epsilon": 1e-4}, opset=opset, consts=consts, rtol=1e-4, atol=1e-4)


def test_group_norm_errors():
    f = np.dtype(np.float32)
    with pytest.raises(GraphError, match="num_groups=4 does not divide the 6 channels"):
        lookup("GroupNormalization", opset=21)({"num_groups": 4}, [Meta(f, (1, 6, 2))] + [Meta(f, (6,))] * 2,
                                               opset=21, name="g")
    with pytest.raises(GraphError, match=r"scale has shape \(6,\), \(3,\) expected \(one per group at opset 18\)"):
        lookup("GroupNormalization", opset=18)({"num_groups": 3}, [Meta(f, (1, 6, 2))] + [Meta(f, (6,))] * 2,
                                               opset=18, name="g")
    with pytest.raises(GraphError, match="stash_type=0"):
        lookup("GroupNormalization", opset=21)({"num_groups": 3, "stash_type": 0},
                                               [Meta(f, (1, 6, 2))] + [Meta(f, (6,))] * 2, opset=21, name="g")


# -- LpNormalization ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis,shape", [(-1, (3, 5)), (0, (3, 5)), (1, (2, 3, 4)), (-2, (2, 3, 4, 2)), (0, (7,))])
def test_lp_norm(check_op, dtype, p, axis, shape):
    check_op("LpNormalization", {"x": rand(*shape, dtype=dtype)}, {"axis": axis, "p": p}, **TOL)


def test_lp_norm_zero_rows(check_op):
    x = rand(4, 6)
    x[1] = 0
    check_op("LpNormalization", {"x": x}, {"p": 2}, **TOL)
    check_op("LpNormalization", {"x": x}, {"p": 1}, **TOL)


def test_lp_norm_errors():
    with pytest.raises(GraphError, match="p=3"):
        lookup("LpNormalization")({"p": 3}, [Meta(np.dtype(np.float32), (2, 3))], name="lp")
    with pytest.raises(GraphError, match="axis=2 is out of range"):
        lookup("LpNormalization")({"axis": 2}, [Meta(np.dtype(np.float32), (2, 3))], name="lp")


# -- MeanVarianceNormalization -------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13])
@pytest.mark.parametrize("axes,shape", [(None, (2, 3, 4, 5)), ([1], (2, 3, 4)), ([0, 1], (3, 4, 5)),
                                        ([2, 3], (2, 3, 4, 5)), ([-1], (4, 6))])
def test_mvn(check_op, opset, axes, shape):
    attrs = {} if axes is None else {"axes": axes}
    check_op("MeanVarianceNormalization", {"x": rand(*shape) * 2 + 0.5}, attrs, opset=opset, rtol=1e-4, atol=1e-4)


# -- Hardmax ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis,shape", [(None, (3, 5)), (0, (3, 5)), (1, (2, 3, 4)), (-1, (2, 3, 4)),
                                        (2, (2, 3, 4, 2)), (0, (6,))])
def test_hardmax(check_op, opset, axis, shape):
    attrs = {} if axis is None else {"axis": axis}
    check_op("Hardmax", {"x": rand(*shape)}, attrs, opset=opset)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_hardmax_ties_take_the_first(check_op, dtype):
    x = np.array([[1, 3, 3, 0], [2, 2, 2, 2], [0, 0, 5, 5]], dtype)
    check_op("Hardmax", {"x": x}, {"axis": 1}, opset=13)
    check_op("Hardmax", {"x": x}, {"axis": 0}, opset=13)
