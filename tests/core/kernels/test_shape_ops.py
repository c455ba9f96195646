import numpy as np
import pytest
from onnx import helper, numpy_helper

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(1)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(values):
    return np.array(values, np.int64)


def make(op, inputs, attrs=None, consts=(), opset=17, num_outputs=1, outputs=None):
    """Build a kernel the way the compiler does, for error and metadata checks."""
    arrays = list(inputs.values())
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    cv = [inputs[n] if n in consts else None for n in inputs]
    return lookup(op, opset=opset)(attrs or {}, metas, cv, outputs=outputs, opset=opset, name="n0",
                                   num_outputs=num_outputs)


@pytest.mark.parametrize("op", ["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_alias_ops_declare_alias(op, opset):
    assert lookup(op, opset=opset).alias is True


@pytest.mark.parametrize("op", ["Shape", "Size", "ConstantOfShape", "Range", "Constant"])
def test_non_alias_ops(op):
    assert lookup(op, opset=17).alias is False


# -- Reshape ------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_shape,shape", [
    ((2, 3, 4), [4, 6]), ((2, 3, 4), [-1]), ((2, 3, 4), [0, -1]), ((2, 3, 4), [0, 0, 2, 2]),
    ((2, 3, 4), [-1, 0, 2]), ((2, 3, 4), [24, 1]), ((1,), []), ((0, 3), [-1, 3]), ((0, 3), [0, 3, 1]),
])
@pytest.mark.parametrize("opset", [11, 13, 14, 19])
def test_reshape(check_op, in_shape, shape, opset):
    check_op("Reshape", {"x": f32(*in_shape), "s": i64(shape)}, consts=("s",), opset=opset)


@pytest.mark.parametrize("in_shape,shape", [((2, 0, 4), [0, 8]), ((2, 0, 4), [4, 0, 2]), ((3, 4), [0, 12])])
def test_reshape_allowzero(check_op, in_shape, shape):
    if 0 not in in_shape:
        # allowzero=1 with 0 means a real 0 dim: only valid when the input is empty
        with pytest.raises(GraphError, match="cannot reshape"):
            make("Reshape", {"x": f32(*in_shape), "s": i64(shape)}, {"allowzero": 1}, consts=("s",)).infer()
        return
    check_op("Reshape", {"x": f32(*in_shape), "s": i64(shape)}, {"allowzero": 1}, consts=("s",), opset=14)


def test_reshape_int64_and_compute_without_consts(check_op):
    x = np.arange(12, dtype=np.int64).reshape(3, 4)
    check_op("Reshape", {"x": x, "s": i64([2, -1, 3])}, consts=("s",))
    k = make("Reshape", {"x": x, "s": i64([2, -1, 3])})  # shape not constant: folding still works
    assert k.compute(x, i64([6, 2]))[0].shape == (6, 2)


@pytest.mark.parametrize("shape,msg", [([5, -1], "cannot reshape"), ([-1, -1], "more than one"),
                                       ([0, 0, 0, 0], "lacks"), ([-2, 12], "invalid dim")])
def test_reshape_errors(shape, msg):
    with pytest.raises(GraphError, match=msg):
        make("Reshape", {"x": f32(2, 3, 4), "s": i64(shape)}, consts=("s",)).infer()


def test_reshape_minus_one_with_zero_product():
    # onnxruntime refuses this too ("Product cannot be 0 in combination with -1")
    with pytest.raises(GraphError, match="cannot reshape"):
        make("Reshape", {"x": f32(0, 3), "s": i64([0, -1])}, consts=("s",)).infer()


def test_reshape_needs_constant_shape():
    with pytest.raises(GraphError, match=r"node 'n0' \(Reshape\): input 1 \(shape\) must be a constant"):
        make("Reshape", {"x": f32(2, 3), "s": i64([6])}).infer()


def test_alias_run_into_copy():
    x = f32(2, 3, 4)
    k = make("Reshape", {"x": x, "s": i64([4, 6])}, consts=("s",))
    y = np.full((4, 6), 7, np.float32)
    k.run([x.transpose(1, 0, 2).copy().transpose(1, 0, 2), None], [y], None)  # non-contiguous input
    np.testing.assert_array_equal(y, x.reshape(4, 6))


# -- Flatten, Squeeze, Unsqueeze, Identity -------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -2, -3])
@pytest.mark.parametrize("opset", [11, 13])
def test_flatten(check_op, axis, opset):
    check_op("Flatten", {"x": f32(2, 3, 4)}, {"axis": axis}, opset=opset)


def test_flatten_default_and_bad_axis(check_op):
    check_op("Flatten", {"x": np.arange(24, dtype=np.int64).reshape(2, 3, 4)})
    for axis in (4, -4):
        with pytest.raises(GraphError, match=f"axis {axis} is out of range"):
            make("Flatten", {"x": f32(2, 3, 4)}, {"axis": axis}).infer()


@pytest.mark.parametrize("axes", [None, [0], [-2], [0, 2], [2, 0], [-4, -2]])
def test_squeeze_11_attr(check_op, axes):
    attrs = {} if axes is None else {"axes": axes}
    check_op("Squeeze", {"x": f32(1, 3, 1, 4)}, attrs, opset=11)


@pytest.mark.parametrize("axes", [None, [0], [-2], [0, 2], [2, 0], [-4, -2]])
@pytest.mark.parametrize("opset", [13, 21])
def test_squeeze_13_input(check_op, axes, opset):
    inputs = {"x": f32(1, 3, 1, 4)}
    if axes is not None:
        inputs["axes"] = i64(axes)
    check_op("Squeeze", inputs, opset=opset, consts=("axes",) if axes is not None else ())


def test_squeeze_errors():
    with pytest.raises(GraphError, match="cannot squeeze axis 1 of size 3"):
        make("Squeeze", {"x": f32(1, 3), "a": i64([1])}, consts=("a",), opset=13).infer()
    with pytest.raises(GraphError, match="out of range"):
        make("Squeeze", {"x": f32(1, 3)}, {"axes": [2]}, opset=11).infer()
    with pytest.raises(GraphError, match="must be a constant"):
        make("Squeeze", {"x": f32(1, 3), "a": i64([0])}, opset=13).infer()


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [3, 1], [-1, 0], [0, 1, 2]])
def test_unsqueeze_11_attr(check_op, axes):
    check_op("Unsqueeze", {"x": f32(3, 4)}, {"axes": axes}, opset=11)


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [3, 1], [-1, 0], [0, 1, 2]])
@pytest.mark.parametrize("opset", [13, 21])
def test_unsqueeze_13_input(check_op, axes, opset):
    check_op("Unsqueeze", {"x": np.arange(12, dtype=np.int64).reshape(3, 4), "axes": i64(axes)},
             consts=("axes",), opset=opset)


def test_unsqueeze_scalar(check_op):
    check_op("Unsqueeze", {"x": np.array(3.5, np.float32), "axes": i64([0])}, consts=("axes",))


def test_unsqueeze_errors():
    with pytest.raises(GraphError, match="repeat an axis"):
        make("Unsqueeze", {"x": f32(3), "a": i64([0, -3])}, consts=("a",), opset=13).infer()
    with pytest.raises(GraphError, match="'axes' is required"):
        make("Unsqueeze", {"x": f32(3)}, opset=11)


@pytest.mark.parametrize("x", [f32(2, 3), np.arange(5, dtype=np.int64), np.array(True)])
def test_identity(check_op, x):
    check_op("Identity", {"x": x})


# -- Dropout ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [11, 13])
def test_dropout_no_mask(check_op, opset):
    check_op("Dropout", {"x": f32(2, 5)}, {"ratio": 0.3} if opset < 12 else {}, opset=opset)


@pytest.mark.parametrize("opset", [12, 13, 21])
def test_dropout_mask(check_op, opset):
    check_op("Dropout", {"x": f32(2, 5)}, n_outputs=2, opset=opset)
    k = make("Dropout", {"x": f32(2, 5)}, opset=opset, num_outputs=2)
    assert k.alias is False and type(k).alias is True


@pytest.mark.parametrize("opset", [10, 11])
def test_dropout_mask_before_12_is_all_true(opset):
    # the spec's inference mask keeps everything; onnxruntime's Dropout-10 writes all False instead
    x = f32(2, 5)
    k = make("Dropout", {"x": x}, opset=opset, num_outputs=2)
    (m1, m2), y = k.infer(), [np.zeros((2, 5), np.float32), np.zeros((2, 5), np.bool_)]
    assert m2 == Meta(np.dtype(np.bool_), (2, 5))
    out, mask = k.compute(x)
    assert mask.all() and mask.dtype == np.bool_
    k.run([x], y, None)
    assert y[1].all()
    np.testing.assert_array_equal(y[0], x)


def test_dropout_ratio_and_training_mode_inputs(check_op):
    inputs = {"x": f32(3, 4), "r": np.array(0.2, np.float32), "t": np.array(False)}
    check_op("Dropout", inputs, consts=("r", "t"), opset=13, n_outputs=2)
    # a constant True training_mode: a task that drops (tests/core/kernels/test_dropout_training.py)
    k = make("Dropout", {"x": f32(3), "r": np.array(0.2, np.float32), "t": np.array(True)}, consts=("r", "t"),
             opset=13)
    assert k.alias is False


# -- Shape, Size ---------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{}, {"start": 1}, {"end": -1}, {"start": -2}, {"start": 1, "end": 3},
                                   {"start": -10, "end": 10}, {"start": 3, "end": 1}])
def test_shape_15(check_op, attrs):
    check_op("Shape", {"x": f32(2, 3, 4, 5)}, attrs, opset=15)


@pytest.mark.parametrize("x", [f32(2, 3), np.zeros((0, 4), np.int64), np.array(1.0, np.float32)])
@pytest.mark.parametrize("opset", [11, 13])
def test_shape_and_size(check_op, x, opset):
    check_op("Shape", {"x": x}, opset=opset)
    check_op("Size", {"x": x}, opset=opset)


# -- Constant, ConstantOfShape, Range, EyeLike -------------------------------------------------------

@pytest.mark.parametrize("attrs", [
    {"value": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))},
    {"value": numpy_helper.from_array(np.array([1, -2], np.int64))},
    {"value": numpy_helper.from_array(np.array(True))},
    {"value_float": 2.5}, {"value_floats": [1.0, 2.0]}, {"value_int": 7}, {"value_ints": [3, 4, 5]},
])
def test_constant(check_op, attrs):
    check_op("Constant", {}, attrs, opset=13)


def test_constant_accepts_arrays_and_refuses_two_values():
    k = lookup("Constant", opset=13)({"value": np.ones((2, 2), np.int32)}, [], opset=13)
    assert k.compute()[0].dtype == np.int32
    k = lookup("Constant", opset=13)({"sparse_value": np.eye(2, dtype=np.float32)}, [], opset=13)
    np.testing.assert_array_equal(k.compute()[0], np.eye(2))
    with pytest.raises(GraphError, match="exactly one"):
        lookup("Constant", opset=13)({"value_int": 1, "value_float": 2.0}, [], opset=13)
    with pytest.raises(GraphError, match="not supported"):
        lookup("Constant", opset=13)({"value_string": b"x"}, [], opset=13)


@pytest.mark.parametrize("shape", [[2, 3], [4], [], [0, 2]])
@pytest.mark.parametrize("value", [None, np.array([1.5], np.float32), np.array([7], np.int64),
                                   np.array([3], np.int32)])
def test_constant_of_shape(check_op, shape, value):
    attrs = {} if value is None else {"value": numpy_helper.from_array(value)}
    check_op("ConstantOfShape", {"s": i64(shape)}, attrs, consts=("s",), opset=11)


def test_constant_of_shape_needs_constant():
    with pytest.raises(GraphError, match="must be a constant"):
        make("ConstantOfShape", {"s": i64([2])}).infer()


@pytest.mark.parametrize("start,limit,delta", [(0, 10, 1), (1, 10, 3), (10, 0, -3), (5, 5, 1), (5, 0, 2), (-4, 3, 2)])
@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_range(check_op, start, limit, delta, dtype):
    inputs = {"a": np.array(start, dtype), "b": np.array(limit, dtype), "c": np.array(delta, dtype)}
    check_op("Range", inputs, consts=("a", "b", "c"), opset=11)


def test_range_float_fraction(check_op):
    inputs = {"a": np.array(0.5, np.float32), "b": np.array(2.3, np.float32), "c": np.array(0.25, np.float32)}
    check_op("Range", inputs, consts=("a", "b", "c"))
    with pytest.raises(GraphError, match="delta is 0"):
        make("Range", {"a": i64(1), "b": i64(3), "c": i64(0)}, consts=("a", "b", "c")).infer()


@pytest.mark.parametrize("shape", [(3, 3), (3, 5), (5, 3)])
@pytest.mark.parametrize("k", [0, 1, -2, 4, -6])
def test_eyelike(check_op, shape, k):
    check_op("EyeLike", {"x": f32(*shape)}, {"k": k})


def test_eyelike_dtype(check_op):
    check_op("EyeLike", {"x": f32(2, 3)}, {"dtype": 7})


def test_squeeze_empty_axes_input_squeezes_all(check_op):
    check_op("Squeeze", {"x": f32(1, 3, 1), "axes": np.zeros(0, np.int64)}, consts=("axes",), opset=13)
