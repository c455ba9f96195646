import numpy as np
import onnxruntime.capi.onnxruntime_pybind11_state as ort_state
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(1)

F16, F32, F64 = np.float16, np.float32, np.float64
ORT_MISSING = (ort_state.NotImplemented, ort_state.InvalidGraph)

REF = {
    "ReduceSum": lambda x, ax, kd: np.sum(x, axis=ax, keepdims=kd),
    "ReduceMean": lambda x, ax, kd: np.mean(x, axis=ax, keepdims=kd),
    "ReduceMax": lambda x, ax, kd: np.max(x, axis=ax, keepdims=kd),
    "ReduceMin": lambda x, ax, kd: np.min(x, axis=ax, keepdims=kd),
    "ReduceProd": lambda x, ax, kd: np.prod(x, axis=ax, keepdims=kd),
    "ReduceL1": lambda x, ax, kd: np.sum(np.abs(x), axis=ax, keepdims=kd),
    "ReduceL2": lambda x, ax, kd: np.sqrt(np.sum(x * x, axis=ax, keepdims=kd)),
    "ReduceSumSquare": lambda x, ax, kd: np.sum(x * x, axis=ax, keepdims=kd),
    "ReduceLogSum": lambda x, ax, kd: np.log(np.sum(x, axis=ax, keepdims=kd)),
    "ReduceLogSumExp": lambda x, ax, kd: np.log(np.sum(np.exp(x), axis=ax, keepdims=kd)),
}
OPS = list(REF)


def axes_since(op):
    return 13 if op == "ReduceSum" else 18


def data(op, shape, dtype):
    if np.dtype(dtype).kind in "iu":
        lo = 1 if op in ("ReduceLogSum",) else (0 if np.dtype(dtype).kind == "u" else -5)
        x = rng.integers(lo, 6, size=shape)
    elif op == "ReduceLogSum":
        x = rng.uniform(0.1, 2, shape)
    elif op == "ReduceProd":
        x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1, 1], shape)
    else:
        x = rng.standard_normal(shape) * 2
    return np.asarray(x).astype(dtype)


def kernel(op, arrays, attrs=None, opset=17, consts=None):
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    return lookup(op, opset=opset)(attrs or {}, metas, consts or [], opset=opset, name="n0")


def run_planned(op, arrays, attrs, opset, consts):
    k = kernel(op, arrays, attrs, opset, consts)
    (m,) = k.infer()
    y = np.full(m.shape, 77, m.dtype)
    n = k.workspace_nbytes()
    k.run(arrays, [y], np.zeros(n, np.uint8) if n else None)
    (c,) = k.compute(*arrays)
    assert c.dtype == y.dtype and c.shape == y.shape
    np.testing.assert_array_equal(c, y)
    return y


def check_reduce(check_op, op, x, axes, keepdims, opset, noop=None, how="const", **tol):
    """axes: None (absent), a list; how: "const" (initializer input) / "empty-name" (opset >= since)."""
    attrs = {} if keepdims is None else {"keepdims": keepdims}
    inputs, consts = {"x": x}, ()
    if opset >= axes_since(op):
        if noop is not None:
            attrs["noop_with_empty_axes"] = noop
        if axes is not None:
            inputs["axes"] = np.array(axes, np.int64)
            consts = ("axes",)
        elif how == "empty-name":
            inputs["axes"] = None
    elif axes is not None:
        attrs["axes"] = axes
    tol = tol or (dict(rtol=3e-3, atol=3e-3) if x.dtype == F16 else dict(rtol=1e-5, atol=1e-5))
    try:
        return check_op(op, inputs, attrs, opset=opset, consts=consts, **tol)
    except ORT_MISSING:
        pass
    # onnxruntime has no kernel for this dtype: the planned path against numpy
    arrays = list(inputs.values())
    y = run_planned(op, arrays, attrs, opset, [inputs[n] if n in consts else None for n in inputs])
    ax = tuple(axes) if axes else (None if not noop else ())
    want = REF[op](x.astype(F64) if x.dtype.kind == "f" else x.astype(np.int64), ax, bool(1 if keepdims is None else keepdims))
    if x.dtype.kind == "f":
        np.testing.assert_allclose(y.astype(F64), want, **tol)
    else:
        np.testing.assert_array_equal(y, np.trunc(want).astype(y.dtype))
    return [y]


AXES = [None, [1], [-1], [0, 2], [2, 0], [0, 1, 2], [-3, -2]]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("axes", AXES, ids=str)
@pytest.mark.parametrize("keepdims", [None, 0, 1])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_reduce_axes(check_op, op, axes, keepdims, opset):
    check_reduce(check_op, op, data(op, (2, 3, 4), F32), axes, keepdims, opset)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("dtype", [F16, F64, np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("axes", [None, [1], [0, 2]], ids=str)
def test_reduce_dtypes(check_op, op, dtype, axes):
    if op in ("ReduceLogSum", "ReduceLogSumExp") and np.dtype(dtype).kind in "iu":
        pytest.skip("log reductions of integers: covered by test_log_reductions_of_integers")
    check_reduce(check_op, op, data(op, (3, 4, 5), dtype), axes, 0, 18)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("shape,axes", [((), None), ((5,), [0]), ((5,), None), ((1, 1), [1]), ((4, 1, 3), [1]),
                                        ((2, 3, 4, 5), [1, 3]), ((2, 3, 4, 5), [-1, 0])], ids=str)
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_shapes(check_op, op, shape, axes, keepdims):
    check_reduce(check_op, op, data(op, shape, F32), axes, keepdims, 18)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("noop", [0, 1])
@pytest.mark.parametrize("how", ["absent", "empty-name", "empty-tensor"])
def test_reduce_empty_axes(check_op, op, noop, how):
    x = data(op, (2, 3), F32)
    axes = [] if how == "empty-tensor" else None
    check_reduce(check_op, op, x, axes, 1, axes_since(op), noop=noop, how=how)


@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2",
                                "ReduceSumSquare", "ReduceL1"])
@pytest.mark.parametrize("dtype", [F32, np.int32])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_over_an_empty_dim(check_op, op, dtype, keepdims):
    x = np.zeros((2, 0, 3), dtype)
    y = check_reduce(check_op, op, x, [1], keepdims, 18)[0]
    assert y.shape == ((2, 1, 3) if keepdims else (2, 3))


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_mean_truncates(check_op, dtype):
    x = np.array([[-7, 0], [7, 0], [-5, -4], [5, 4], [-1, -1]], dtype)
    y = check_reduce(check_op, "ReduceMean", x, [1], 0, 18)[0]
    assert y.tolist() == [-3, 3, -4, 4, -1]


def test_integer_l2_truncates(check_op):
    y = check_reduce(check_op, "ReduceL2", np.array([[3, 5], [3, 4]], np.int64), [1], 0, 18)[0]
    assert y.tolist() == [5, 5]


@pytest.mark.parametrize("op", ["ReduceLogSum", "ReduceLogSumExp"])
def test_log_reductions_of_integers(check_op, op):
    check_reduce(check_op, op, data(op, (3, 4), np.int64), [1], 1, 18)


def test_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf], [0, -np.inf]], F32)
    with np.errstate(all="raise"):
        y = run_planned("ReduceLogSumExp", [x, np.array([1], np.int64)], {"keepdims": 0}, 18, [None, np.array([1], np.int64)])
    np.testing.assert_allclose(y, [1000 + np.log(2), -1000 + np.log(2), -np.inf, 0], rtol=1e-6)


def test_float16_accumulates_in_float32(check_op):
    x = np.full((4096,), 1.0, F16)  # 4096 + 1 is not representable in float16
    x[0] = 0.5
    y = check_reduce(check_op, "ReduceSum", x, None, 0, 13)[0]
    assert float(y) == 4096.0  # 4095.5 rounded once; a float16 running sum would stop at 2048


def test_reduce_max_bool():
    x = np.array([[True, False], [False, False]])
    ax = np.array([1], np.int64)
    assert run_planned("ReduceMax", [x, ax], {"keepdims": 0}, 20, [None, ax]).tolist() == [True, False]
    assert run_planned("ReduceMin", [x, ax], {"keepdims": 0}, 20, [None, ax]).tolist() == [False, False]


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("dtype", [np.int8, np.uint8])  # (int16: no ReduceMax/ReduceMin takes it)
def test_reduce_max_min_small_ints(check_op, op, dtype):
    check_reduce(check_op, op, data(op, (3, 4, 5), dtype), [1, 2], 1, 18)


def test_reduce_max_min_propagate_nan():
    """Any NaN in a slice gives NaN (like Max/Min). onnxruntime only returns NaN when the slice
    starts with one: it gives [nan, 1, 3] for ReduceMax here."""
    x = np.array([[np.nan, 1, 2], [1, np.nan, 0], [3, 1, 2]], F32)
    ax = np.array([1], np.int64)
    y = run_planned("ReduceMax", [x, ax], {"keepdims": 0}, 18, [None, ax])
    np.testing.assert_array_equal(y, [np.nan, np.nan, 3])
    y = run_planned("ReduceMin", [x, ax], {"keepdims": 0}, 18, [None, ax])
    np.testing.assert_array_equal(y, [np.nan, np.nan, 1])


def test_reduce_errors():
    x = np.zeros((2, 3), F32)
    with pytest.raises(GraphError, match="axis 2 is out of range for an input of rank 2"):
        kernel("ReduceMean", [x], {"axes": [2]}, opset=13)
    with pytest.raises(GraphError, match="repeat an axis"):
        kernel("ReduceMean", [x], {"axes": [1, -1]}, opset=13)
    with pytest.raises(GraphError, match="keepdims must be 0 or 1"):
        kernel("ReduceMax", [x], {"keepdims": 2}, opset=13)
    with pytest.raises(GraphError, match="noop_with_empty_axes must be 0 or 1"):
        kernel("ReduceSum", [x], {"noop_with_empty_axes": 5}, opset=13)
    with pytest.raises(GraphError, match=r"node 'n0' \(ReduceSum\): input 1 \(axes\) must be a constant"):
        kernel("ReduceSum", [x, np.array([1], np.int64)], opset=13)
    with pytest.raises(GraphError, match="axes is an input since opset 18"):
        kernel("ReduceMean", [x], {"axes": [1]}, opset=18)
    with pytest.raises(GraphError, match=r"node 'n0' \(ReduceSum\): input 0 'data' is bool; ReduceSum-13 takes T in "
                                         r"\{float16, float32, float64, bfloat16, int32, int64, uint32, uint64\}$"):
        kernel("ReduceSum", [np.zeros(2, np.bool_)], opset=13)
    with pytest.raises(GraphError, match="input 0 'data' is uint8; ReduceL2-13 takes T in"):
        kernel("ReduceL2", [np.zeros(2, np.uint8)], opset=13)
    with pytest.raises(GraphError, match="input 1 'axes' is int32; ReduceSum-13 takes int64"):
        kernel("ReduceSum", [x, np.array([1], np.int32)], opset=13)
    ax = np.array([3], np.int64)
    with pytest.raises(GraphError, match="axis 3 is out of range"):
        kernel("ReduceSum", [x, ax], opset=13, consts=[None, ax])


def test_reduce_infer_without_consts_evaluation():
    k = kernel("ReduceSum", [np.zeros((2, 3, 4), F32), np.array([0, 2], np.int64)], {"keepdims": 0}, 13,
               [None, np.array([0, 2], np.int64)])
    assert k.infer() == [Meta(np.dtype(F32), (3,))]


# ----------------------------------------------------------------------------------------------
# ArgMax / ArgMin
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("keepdims", [None, 0, 1])
@pytest.mark.parametrize("last", [None, 0, 1])
def test_arg(check_op, op, axis, keepdims, last):
    x = rng.integers(0, 3, size=(3, 4, 5)).astype(F32)  # many ties: first vs last index matters
    attrs = {"axis": axis}
    if keepdims is not None:
        attrs["keepdims"] = keepdims
    if last is not None:
        attrs["select_last_index"] = last
    check_op(op, {"x": x}, attrs, opset=13)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dtype", [F16, F64, np.int8, np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_dtypes(check_op, op, dtype, last):
    x = rng.integers(0, 4, size=(6, 7)).astype(dtype)
    attrs = {"axis": 1, "select_last_index": last}
    try:
        check_op(op, {"x": x}, attrs, opset=13)
    except ORT_MISSING:
        y = run_planned(op, [x], attrs, 13, [])
        f = np.argmax if op == "ArgMax" else np.argmin
        want = f(x, axis=1, keepdims=True) if not last else 6 - f(x[:, ::-1], axis=1, keepdims=True)
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((1,), 0), ((2, 1, 3), 1), ((0, 3), 1)], ids=str)
def test_arg_shapes(check_op, op, shape, axis):
    check_op(op, {"x": np.asarray(rng.standard_normal(shape)).astype(F32)}, {"axis": axis, "keepdims": 0}, opset=13)


def test_arg_errors():
    with pytest.raises(GraphError, match="axis 2 is out of range for an input of rank 2"):
        kernel("ArgMax", [np.zeros((2, 3), F32)], {"axis": 2})
    with pytest.raises(GraphError, match="out of range for an input of rank 0"):
        kernel("ArgMax", [np.zeros((), F32)], {"axis": 0})
    with pytest.raises(GraphError, match="over axis 1 of size 0"):
        kernel("ArgMin", [np.zeros((2, 0), F32)], {"axis": 1})
    with pytest.raises(GraphError, match="select_last_index must be 0 or 1"):
        kernel("ArgMin", [np.zeros((2, 3), F32)], {"axis": 1, "select_last_index": 7})


@pytest.mark.parametrize("op", OPS + ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axes", [[1], [0], [0, 1]], ids=str)
@pytest.mark.parametrize("dtype", [F32, F16])
def test_run_does_not_allocate(op, axes, dtype):
    import tracemalloc
    x = np.abs(data(op, (1024, 1024), dtype)) + np.asarray(0.5, dtype)
    if op.startswith("Arg"):
        if len(axes) > 1:
            pytest.skip("one axis")
        arrays, attrs, consts = [x], {"axis": axes[0]}, []
    else:
        ax = np.array(axes, np.int64)
        arrays, attrs, consts = [x, ax], {}, [None, ax]
    k = kernel(op, arrays, attrs, 18, consts)
    (m,) = k.infer()
    y = np.empty(m.shape, m.dtype)
    n = k.workspace_nbytes()
    ws = np.zeros(n, np.uint8) if n else None
    k.run(arrays, [y], ws)
    tracemalloc.start()
    k.run(arrays, [y], ws)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 160_000, f"run() allocated {peak} bytes"  # numpy's cast buffers are 8192 items
