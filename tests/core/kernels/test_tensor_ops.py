import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(2)
BIG = np.iinfo(np.int64).max
SMALL = np.iinfo(np.int64).min


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def i64(values):
    return np.array(values, np.int64)


def ar(*shape, dtype=np.int64):
    return np.arange(math_prod(shape), dtype=dtype).reshape(shape)


def math_prod(shape):
    out = 1
    for d in shape:
        out *= d
    return out


def make(op, inputs, attrs=None, consts=(), opset=17, num_outputs=1):
    arrays = list(inputs.values())
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    cv = [inputs[n] if n in consts else None for n in inputs]
    return lookup(op, opset=opset)(attrs or {}, metas, cv, opset=opset, name="n0", num_outputs=num_outputs)


# -- Transpose, Concat ----------------------------------------------------------------------------

@pytest.mark.parametrize("perm", [None, [0, 1, 2], [2, 0, 1], [1, 0, 2], [2, 1, 0]])
@pytest.mark.parametrize("x", [f32(2, 3, 4), ar(2, 3, 4)])
def test_transpose(check_op, perm, x):
    check_op("Transpose", {"x": x}, {} if perm is None else {"perm": perm})


def test_transpose_4d_and_bad_perm(check_op):
    check_op("Transpose", {"x": f32(2, 3, 4, 5)}, {"perm": [0, 2, 3, 1]}, opset=13)
    with pytest.raises(GraphError, match="not a permutation"):
        make("Transpose", {"x": f32(2, 3)}, {"perm": [0, 0]})


@pytest.mark.usefixtures("native_and_numpy")  # the native block copies (csrc/copy.c) and numpy's concatenate
@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2, -3])
@pytest.mark.parametrize("opset", [11, 13])
def test_concat(check_op, axis, opset):
    shapes = [[2, 3, 4], [2, 3, 4], [2, 3, 4]]
    for s in shapes[1:]:
        s[axis] = 1 + len(s)
    check_op("Concat", {f"x{i}": f32(*s) for i, s in enumerate(shapes)}, {"axis": axis}, opset=opset)


@pytest.mark.usefixtures("native_and_numpy")
def test_concat_int_empty_and_single(check_op):
    check_op("Concat", {"a": ar(2, 0), "b": ar(2, 3), "c": ar(2, 1)}, {"axis": -1})
    check_op("Concat", {"a": ar(3, 2)}, {"axis": 0})
    with pytest.raises(GraphError, match="do not match"):
        make("Concat", {"a": f32(2, 3), "b": f32(3, 3)}, {"axis": 1}).infer()
    with pytest.raises(GraphError, match="out of range"):
        make("Concat", {"a": f32(2, 3), "b": f32(2, 3)}, {"axis": 2}).infer()


# -- Split ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,split", [(0, [1, 3]), (1, [2, 2, 2]), (-1, [1, 4]), (-2, [6]), (1, [0, 6])])
def test_split_11_attr(check_op, axis, split):
    check_op("Split", {"x": f32(4, 6, 5)}, {"axis": axis, "split": split}, n_outputs=len(split), opset=11)


@pytest.mark.parametrize("axis,split", [(0, [1, 3]), (1, [2, 2, 2]), (-1, [1, 4]), (1, [0, 5, 1])])
@pytest.mark.parametrize("opset", [13, 18])
def test_split_13_input(check_op, axis, split, opset):
    check_op("Split", {"x": ar(4, 6, 5), "s": i64(split)}, {"axis": axis}, consts=("s",),
             n_outputs=len(split), opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("axis,n", [(1, 3), (-1, 5), (0, 1)])
def test_split_equal_by_outputs(check_op, opset, axis, n):
    check_op("Split", {"x": f32(4, 6, 5)}, {"axis": axis}, n_outputs=n, opset=opset)


@pytest.mark.parametrize("dim,n", [(6, 3), (7, 3), (5, 2), (10, 4), (1, 1)])
@pytest.mark.parametrize("opset", [18, 21])
def test_split_18_num_outputs_uneven(check_op, dim, n, opset):
    check_op("Split", {"x": f32(2, dim)}, {"axis": -1, "num_outputs": n}, n_outputs=n, opset=opset)


def test_split_errors():
    with pytest.raises(GraphError, match="add up"):
        make("Split", {"x": f32(4)}, {"split": [1, 2]}, opset=11, num_outputs=2)
    with pytest.raises(GraphError, match="evenly"):
        make("Split", {"x": f32(5)}, opset=13, num_outputs=2)
    with pytest.raises(GraphError, match="2 outputs"):
        make("Split", {"x": f32(6)}, {"num_outputs": 3}, opset=18, num_outputs=2)
    with pytest.raises(GraphError, match="must be a constant"):
        make("Split", {"x": f32(6), "s": i64([3, 3])}, opset=13, num_outputs=2).infer()


# -- Slice ------------------------------------------------------------------------------------------------

SLICES = [
    ([0], [2], None, None), ([1, 0], [3, -1], [0, 2], None), ([-1], [-5], [1], [-1]), ([5], [0], [-1], [-2]),
    ([0, 0, 0], [BIG, BIG, BIG], None, [2, 3, 1]), ([-100], [100], [0], None), ([BIG], [SMALL], [2], [-1]),
    ([2], [1], [1], None), ([3], [3], [0], [1]), ([1], [1], [1], [-1]), ([-2, 1], [SMALL, 10], [-1, -2], [-1, 2]),
    ([0], [-1], [2], None),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES)
@pytest.mark.parametrize("opset", [11, 13])
def test_slice(check_op, starts, ends, axes, steps, opset):
    inputs = {"x": f32(4, 5, 6), "s": i64(starts), "e": i64(ends)}
    if axes is not None or steps is not None:
        inputs["a"] = None if axes is None else i64(axes)
    if steps is not None:
        inputs["p"] = i64(steps)
    consts = tuple(n for n in ("s", "e", "a", "p") if inputs.get(n) is not None)
    check_op("Slice", inputs, consts=consts, opset=opset)


def test_slice_int32_bounds_and_int_data(check_op):
    check_op("Slice", {"x": ar(4, 5), "s": np.array([1, -3], np.int32), "e": np.array([4, 5], np.int32)},
             consts=("s", "e"))


def test_slice_empty_input_axis(check_op):
    check_op("Slice", {"x": f32(0, 3), "s": i64([0, -1]), "e": i64([1, SMALL]), "a": i64([0, 1]),
                       "p": i64([1, -1])}, consts=("s", "e", "a", "p"))


def test_slice_1_attrs(check_op):
    check_op("Slice", {"x": f32(4, 5)}, {"starts": [1, -2], "ends": [BIG, 5], "axes": [0, -1]}, opset=9)


def test_slice_errors():
    with pytest.raises(GraphError, match="step 0"):
        make("Slice", {"x": f32(3), "s": i64([0]), "e": i64([2]), "a": i64([0]), "p": i64([0])},
             consts=("s", "e", "a", "p"))
    with pytest.raises(GraphError, match="must be a constant"):
        make("Slice", {"x": f32(3), "s": i64([0]), "e": i64([2])}, consts=("s",)).infer()
    with pytest.raises(GraphError, match="repeat an axis"):
        make("Slice", {"x": f32(3, 3), "s": i64([0, 0]), "e": i64([2, 2]), "a": i64([1, -1])},
             consts=("s", "e", "a"))


def test_slice_compute_without_consts():
    x = f32(4, 5)
    k = make("Slice", {"x": x, "s": i64([1]), "e": i64([3])})
    np.testing.assert_array_equal(k.compute(x, i64([1]), i64([3]))[0], x[1:3])


# -- Gather, GatherElements ------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize("indices", [np.array([0, -1, 2, 1]), np.array([[0, 1], [-2, 2]]), np.array(-1), np.array(1),
                                     np.zeros((0,), np.int64), np.array([2, 0], np.int32)])
@pytest.mark.parametrize("const", [False, True])
@pytest.mark.usefixtures("native_and_numpy")  # the native block copies (csrc/copy.c; int64 indices) and np.take
def test_gather(check_op, axis, indices, const):
    check_op("Gather", {"x": f32(3, 4, 3), "i": indices}, {"axis": axis}, consts=("i",) if const else ())


@pytest.mark.parametrize("opset", [11, 13])
def test_gather_int64_data_embedding(check_op, opset):
    check_op("Gather", {"w": ar(10, 4), "i": np.array([[1, 9, -10], [3, 3, 0]])}, consts=("w",), opset=opset)


@pytest.mark.usefixtures("native_and_numpy")
def test_gather_out_of_range():
    x = f32(3, 2)
    with pytest.raises(GraphError, match="out of range"):
        make("Gather", {"x": x, "i": i64([3])}, consts=("i",))
    k = make("Gather", {"x": x, "i": i64([0])})
    with pytest.raises(GraphError, match=r"node 'n0' \(Gather\): indices out of range \[-3, 2\]"):
        k.run([x, i64([-4])], [np.empty((1, 2), np.float32)], None)
    y = np.full((2, 2), 7, np.float32)
    call = k.bound([x, i64([0, 3])], [y], None)
    with pytest.raises(GraphError, match=r"indices out of range \[-3, 2\]"):
        call()
    assert (y == 7).all()  # nothing written


def test_concat_and_gather_copy_natively(default_backend):
    """With the native kernels and static shapes, both are block copies: an embedding row and a key/value
    cache's concatenation along the tokens (the blocks of the axes before it)."""
    default_backend("native")
    w, ids = f32(50, 8), i64([[7, -1]])
    k = make("Gather", {"w": w, "i": ids}, consts=("w",))
    y = np.empty((1, 2, 8), np.float32)
    k.bound([w, ids], [y], None)()
    assert k.nat is not None and np.array_equal(y, w[[[7, 49]]])
    past, new = f32(1, 2, 5, 4), f32(1, 2, 1, 4)
    k = make("Concat", {"past": past, "new": new}, {"axis": 2})
    y = np.empty((1, 2, 6, 4), np.float32)
    k.bound([past, new], [y], None)()
    assert k.nat is not None and np.array_equal(y, np.concatenate([past, new], axis=2))


def test_concat_builds_its_native_call_for_buffers_that_come_back(default_backend):
    """Run on new buffers each time (a state growing each Loop iteration) a Concat copies with numpy,
    building no native call it would not run again; the same buffers a second time get the call, when
    the output is big enough (under NUMPY_BYTES numpy's copy is the faster one, whatever comes)."""
    default_backend("native")
    k = make("Concat", {"a": f32(3, 4), "b": f32(1, 4)}, {"axis": 0})
    y = np.full((4, 4), np.nan, np.float32)
    a, b = f32(3, 4), f32(1, 4)
    for _ in range(2):
        k.run([a, b], [y], None)
    assert getattr(k.calls.local, "entry", None) is None and np.array_equal(y, np.concatenate([a, b]))
    k.NUMPY_BYTES = 0  # (these small buffers take the path of outputs of 1 MiB and more)
    for rows in (3, 5, 5):
        a, b = f32(rows, 4), f32(1, 4)
        y = np.full((rows + 1, 4), np.nan, np.float32)
        k.run([a, b], [y], None)
        assert np.array_equal(y, np.concatenate([a, b]))
        assert getattr(k.calls.local, "entry", None) is None  # (each time new arrays)
    y = np.full((6, 4), np.nan, np.float32)
    for _ in range(2):
        k.run([a, b], [y], None)
    assert k.calls.local.entry[1] is not None and np.array_equal(y, np.concatenate([a, b]))
    a[:] = 7  # the built call reads the buffers as they are now
    k.run([a, b], [y], None)
    assert np.array_equal(y, np.concatenate([a, b]))


@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("const", [False, True])
def test_gather_elements(check_op, axis, const):
    idx = rng.integers(-3, 3, (3, 5))
    check_op("GatherElements", {"x": f32(3, 5), "i": idx}, {"axis": axis}, consts=("i",) if const else ())


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_gather_elements_3d_smaller_indices(check_op, axis):
    idx = rng.integers(0, 2, (2, 2, 2)).astype(np.int32)
    check_op("GatherElements", {"x": ar(3, 4, 2), "i": idx}, {"axis": axis}, consts=("i",), opset=13)


# -- Expand, Tile ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("in_shape,shape", [((3, 1), [2, 3, 4]), ((1,), [5]), ((2, 3), [1, 1]), ((2, 1, 4), [3, 1, 1, 4]),
                                            ((), [2, 2]), ((1, 3), [0, 1])])
@pytest.mark.parametrize("opset", [8, 13])
def test_expand(check_op, in_shape, shape, opset):
    x = ar(*in_shape) if in_shape else np.array(5, np.int64)
    check_op("Expand", {"x": x, "s": i64(shape)}, consts=("s",), opset=opset)


def test_expand_errors():
    with pytest.raises(GraphError, match="cannot broadcast"):
        make("Expand", {"x": f32(3, 2), "s": i64([4, 3])}, consts=("s",)).infer()
    with pytest.raises(GraphError, match="must be a constant"):
        make("Expand", {"x": f32(3, 2), "s": i64([3, 2])}).infer()


@pytest.mark.parametrize("shape,reps", [((2, 3), [1, 1]), ((2, 3), [2, 3]), ((2, 1, 3), [1, 4, 2]), ((3,), [0]),
                                        ((0, 2), [3, 2]), ((), [])])
def test_tile(check_op, shape, reps):
    x = f32(*shape) if shape else np.array(2.0, np.float32)
    check_op("Tile", {"x": x, "r": i64(reps)}, consts=("r",), opset=13)


def test_tile_int_and_noncontiguous_output(check_op):
    check_op("Tile", {"x": ar(2, 2), "r": i64([2, 1])}, consts=("r",), opset=6)
    k = make("Tile", {"x": ar(2, 2), "r": i64([1, 2])}, consts=("r",))
    big = np.zeros((4, 8), np.int64)
    y = big[::2, ::2]  # a strided output: the interleaved view is impossible, fall back to a copy
    k.run([ar(2, 2), i64([1, 2])], [y], None)
    np.testing.assert_array_equal(y, np.tile(ar(2, 2), (1, 2)))
    with pytest.raises(GraphError, match="one entry per axis"):
        make("Tile", {"x": f32(2, 2), "r": i64([2])}, consts=("r",))


# -- Pad ---------------------------------------------------------------------------------------------------

PADS = [[1, 2, 2, 1], [0, 0, 0, 0], [0, 3, 0, 2], [-1, 1, 1, -2], [2, 0, 0, 0], [-1, -1, -1, -1]]


@pytest.mark.parametrize("pads", PADS)
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("opset", [11, 13, 18])
def test_pad(check_op, pads, mode, opset):
    check_op("Pad", {"x": f32(4, 5), "p": i64(pads)}, {"mode": mode}, consts=("p",), opset=opset)


@pytest.mark.parametrize("pads", PADS + [[6, 7, 11, 9]])
def test_pad_wrap_19(check_op, pads):
    check_op("Pad", {"x": f32(4, 5), "p": i64(pads)}, {"mode": "wrap"}, consts=("p",), opset=19)


def test_pad_edge_large(check_op):
    check_op("Pad", {"x": ar(2, 3), "p": i64([5, 7, 4, 6])}, {"mode": "edge"}, consts=("p",))


@pytest.mark.parametrize("value", [np.array(1.5, np.float32), np.array([-2.0], np.float32)])
@pytest.mark.parametrize("const_value", [False, True])
def test_pad_constant_value(check_op, value, const_value):
    consts = ("p", "v") if const_value else ("p",)
    check_op("Pad", {"x": f32(2, 3, 4), "p": i64([0, 1, 2, 1, 0, 3]), "v": value}, consts=consts)


def test_pad_int(check_op):
    check_op("Pad", {"x": ar(3, 4), "p": i64([1, 1, 1, 1]), "v": np.array(-7, np.int64)}, consts=("p", "v"))
    check_op("Pad", {"x": ar(3, 4, dtype=np.int32), "p": i64([1, 2, 2, 1])}, {"mode": "reflect"}, consts=("p",))


@pytest.mark.parametrize("axes", [[1], [-1], [0, 2], [2, -3]])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_18_axes(check_op, axes, mode):
    pads = i64([1] * len(axes) + [2] * len(axes))
    check_op("Pad", {"x": f32(3, 4, 5), "p": pads, "v": None, "a": i64(axes)}, {"mode": mode},
             consts=("p", "a"), opset=18)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_2_attrs(check_op, mode):
    check_op("Pad", {"x": f32(3, 4)}, {"pads": [1, 0, 2, 2], "mode": mode, "value": 3.0}, opset=10)


def test_pad_errors():
    with pytest.raises(GraphError, match="mode 'wrap' is not supported"):
        make("Pad", {"x": f32(3), "p": i64([1, 1])}, {"mode": "wrap"}, consts=("p",), opset=18)
    with pytest.raises(GraphError, match="2 entries per padded axis"):
        make("Pad", {"x": f32(3), "p": i64([1, 1, 1])}, consts=("p",))
    with pytest.raises(GraphError, match="crop more"):
        make("Pad", {"x": f32(3), "p": i64([-2, -2])}, consts=("p",))
    with pytest.raises(GraphError, match="must be a constant"):
        make("Pad", {"x": f32(3), "p": i64([1, 1])}).infer()


def test_pad_run_without_constant_pads():
    x = f32(3, 4)
    k = make("Pad", {"x": x, "p": i64([1, 1, 1, 1])}, {"mode": "reflect"})
    y = np.zeros((5, 6), np.float32)
    k.run([x, i64([1, 1, 1, 1])], [y], None)
    np.testing.assert_array_equal(y, np.pad(x, 1, mode="reflect"))


# -- Trilu, ScatterND, OneHot, CumSum ---------------------------------------------------------------

@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 1, -1, 3, -5])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (2, 5, 3)])
def test_trilu(check_op, upper, k, shape):
    inputs = {"x": f32(*shape)}
    if k is not None:
        inputs["k"] = i64(k)
    check_op("Trilu", inputs, {"upper": upper}, consts=("k",) if k is not None else (), opset=14)


def test_trilu_dynamic_k_and_int(check_op):
    check_op("Trilu", {"x": ar(3, 4), "k": i64(1)}, {"upper": 0})


@pytest.mark.parametrize("reduction,opset", [("none", 11), ("none", 16), ("add", 16), ("mul", 16),
                                             ("max", 18), ("min", 18)])
@pytest.mark.parametrize("const", [False, True])
def test_scatternd(check_op, reduction, opset, const):
    attrs = {} if opset < 16 else {"reduction": reduction}
    inputs = {"d": f32(4, 3, 2), "i": i64([[0, 1], [3, 2], [-2, 0]]), "u": f32(3, 2)}
    check_op("ScatterND", inputs, attrs, consts=("i",) if const else (), opset=opset)


def test_scatternd_slices_and_reduction_errors(check_op):
    check_op("ScatterND", {"d": ar(4, 3), "i": i64([[1], [3]]), "u": ar(2, 3) + 100}, opset=13)
    with pytest.raises(GraphError, match="reduction 'max' is not supported at opset 16"):
        make("ScatterND", {"d": f32(2), "i": i64([[0]]), "u": f32(1)}, {"reduction": "max"}, opset=16)


@pytest.mark.parametrize("axis", [-1, 0, 1, -2, 2])
@pytest.mark.parametrize("opset", [9, 11])
def test_onehot(check_op, axis, opset):
    idx = i64([[0, 2, -1], [5, -4, 1]]) if opset >= 11 else i64([[0, 2, 1], [3, 0, 1]])
    check_op("OneHot", {"i": idx, "d": i64(4), "v": np.array([0.5, 2.0], np.float32)}, {"axis": axis},
             consts=("d",), opset=opset)


def test_onehot_int_values_and_float_indices(check_op):
    check_op("OneHot", {"i": np.array([1.0, 0.0, 2.0], np.float32), "d": np.array([3.0], np.float32),
                        "v": np.array([0, 1], np.float32)}, consts=("d",), opset=11)
    check_op("OneHot", {"i": np.array([1, 0, 2], np.int64), "d": i64([3]), "v": i64([-1, 1])}, consts=("d",))


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
def test_cumsum(check_op, exclusive, reverse, axis, dtype):
    x = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    check_op("CumSum", {"x": x, "a": np.array(axis, np.int64)}, {"exclusive": exclusive, "reverse": reverse},
             consts=("a",) if axis else (), opset=14 if dtype == np.int32 else 11, rtol=1e-5, atol=1e-5)


# -- TopK ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_topk(check_op, axis, largest, k):
    x = rng.integers(0, 4, (4, 5)).astype(np.float32)  # many ties: lower index first
    check_op("TopK", {"x": x, "k": i64([k])}, {"axis": axis, "largest": largest}, consts=("k",),
             n_outputs=2, opset=11)


def test_topk_int_and_10(check_op):
    check_op("TopK", {"x": (ar(3, 6) % 4).astype(np.float32), "k": i64([2])}, {}, consts=("k",), n_outputs=2,
             opset=10)
    check_op("TopK", {"x": ar(3, 6) % 4, "k": i64([2])}, {}, consts=("k",), n_outputs=2, opset=11)
    check_op("TopK", {"x": ar(2, 6, dtype=np.int32), "k": i64([6])}, {"largest": 0}, consts=("k",), n_outputs=2)


def test_topk_unsorted_and_errors():
    x = f32(3, 7)
    vals, idx = make("TopK", {"x": x, "k": i64([3])}, {"sorted": 0}, consts=("k",), num_outputs=2).compute(x, i64([3]))
    np.testing.assert_array_equal(np.sort(vals, -1)[:, ::-1], np.sort(x, -1)[:, ::-1][:, :3])
    with pytest.raises(GraphError, match="k=8 is out of range"):
        make("TopK", {"x": x, "k": i64([8])}, consts=("k",), num_outputs=2).infer()
    with pytest.raises(GraphError, match="must be a constant"):
        make("TopK", {"x": x, "k": i64([2])}, num_outputs=2).infer()


# -- DepthToSpace, SpaceToDepth -------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("bs,shape", [(2, (1, 8, 2, 3)), (3, (2, 18, 1, 2)), (1, (1, 3, 2, 2))])
def test_depth_to_space(check_op, mode, bs, shape):
    check_op("DepthToSpace", {"x": f32(*shape)}, {"blocksize": bs, "mode": mode}, opset=13)


@pytest.mark.parametrize("bs,shape", [(2, (1, 3, 4, 6)), (3, (2, 2, 3, 6))])
def test_space_to_depth(check_op, bs, shape):
    check_op("SpaceToDepth", {"x": f32(*shape)}, {"blocksize": bs}, opset=13)


def test_block_errors():
    with pytest.raises(GraphError, match="divisible by blocksize"):
        make("SpaceToDepth", {"x": f32(1, 2, 3, 4)}, {"blocksize": 2})
    with pytest.raises(GraphError, match="blocksize must be"):
        make("DepthToSpace", {"x": f32(1, 4, 3, 4)}, {})
    with pytest.raises(GraphError, match="mode must be"):
        make("DepthToSpace", {"x": f32(1, 4, 3, 4)}, {"blocksize": 2, "mode": "XYZ"})


@pytest.mark.parametrize("pads", [[0, 5, 0, 6], [3, 0, 7, 0], [-1, 9, 4, -2]])
def test_pad_reflect_beyond_dim_follows_numpy(pads):
    # onnxruntime refuses reflect pads >= dim; like onnx's reference evaluator, ge reflects repeatedly
    x = f32(3, 4)
    k = make("Pad", {"x": x, "p": i64(pads)}, {"mode": "reflect"}, consts=("p",))
    (meta,) = k.infer()
    y = np.full(meta.shape, 77, np.float32)
    k.run([x, i64(pads)], [y], None)
    crop = x[max(-pads[0], 0):x.shape[0] - max(-pads[2], 0), max(-pads[1], 0):x.shape[1] - max(-pads[3], 0)]
    want = np.pad(crop, [(max(pads[0], 0), max(pads[2], 0)), (max(pads[1], 0), max(pads[3], 0))], mode="reflect")
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(k.compute(x, i64(pads))[0], want)
