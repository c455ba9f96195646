import numpy as np
import pytest

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

rng = np.random.default_rng(3)

DTYPES = [np.float32, np.int64, np.float16, np.int8, np.bool_, np.float64, np.uint8, np.int32]


def data(shape, dtype=np.float32):
    if np.dtype(dtype) == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def rand_index(dims, shape, negative=True):
    """Random indices in [-dim, dim) (or [0, dim)) for each of the last axis' dims."""
    dims = np.asarray(dims)
    hi = rng.integers(0, 1 << 30, tuple(shape)) % dims
    if negative:
        hi = np.where(rng.integers(0, 2, hi.shape).astype(bool), hi - dims, hi)
    return hi.astype(np.int64)


# -- GatherND --------------------------------------------------------------------------------------

GND = [  # data shape, indices shape, batch_dims
    ((2, 2), (2, 2), 0), ((2, 2), (2, 1), 0), ((3, 4, 5), (2, 3), 0), ((3, 4, 5), (6, 2), 0),
    ((3, 4, 5), (2, 2, 1), 0), ((3, 4, 5), (3,), 0),
    ((2, 3, 4), (2, 1), 1), ((2, 3, 4), (2, 5, 2), 1), ((2, 3, 4, 5), (2, 3, 2), 2),
    ((2, 3, 4, 5), (2, 3, 6, 1), 2), ((4, 5), (3, 0), 0),
]


@pytest.mark.parametrize("consts", [(), ("i",)])
@pytest.mark.parametrize("dshape,ishape,b", GND)
def test_gather_nd(check_op, dshape, ishape, b, consts):
    k = ishape[-1]
    idx = rand_index(dshape[b:b + k], ishape) if k else np.zeros(ishape, np.int64)
    opset = 12 if b else 11
    check_op("GatherND", {"x": data(dshape), "i": idx}, {"batch_dims": b} if b else {}, opset=opset, consts=consts)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_nd_dtypes(check_op, dtype):
    check_op("GatherND", {"x": data((3, 4, 2), dtype), "i": rand_index((3, 4), (5, 2))}, opset=13)


def test_gather_nd_errors():
    f, i = np.dtype(np.float32), np.dtype(np.int64)
    k = lookup("GatherND", opset=13)
    with pytest.raises(GraphError, match=r"node 'g' \(GatherND\): indices address 3 axes"):
        k({}, [Meta(f, (2, 3)), Meta(i, (4, 3))], name="g", opset=13)
    with pytest.raises(GraphError, match="batch dims"):
        k({"batch_dims": 1}, [Meta(f, (2, 3)), Meta(i, (3, 1))], name="g", opset=13)
    with pytest.raises(GraphError, match="out of range"):
        k({}, [Meta(f, (2, 3)), Meta(i, (1, 2))], [None, np.array([[0, 3]])], name="g", opset=13)
    g = k({}, [Meta(f, (2, 3)), Meta(i, (1, 2))], name="g", opset=13)
    with pytest.raises(GraphError, match="out of range"):
        g.run([np.zeros((2, 3), np.float32), np.array([[-3, 0]])], [np.zeros(1, np.float32)], None)


# -- ScatterElements, Scatter -----------------------------------------------------------------------

def scatter_inputs(dshape, ishape, axis, dtype=np.float32, unique=False):
    axis %= len(dshape)
    dim = dshape[axis]
    if unique:  # distinct positions along the axis (order of duplicates is unspecified for 'none')
        idx = np.argsort(rng.random(ishape[:axis] + (dim,) + ishape[axis + 1:]), axis=axis)
        idx = np.take(idx, np.arange(ishape[axis]), axis=axis)
        idx = np.where(rng.integers(0, 2, idx.shape).astype(bool), idx - dim, idx).astype(np.int64)
    else:
        idx = rand_index(dim, ishape)
    return {"x": data(dshape, dtype), "i": idx, "u": data(ishape, dtype)}


SCATTER = [((5,), (3,), 0), ((3, 4), (2, 4), 0), ((3, 4), (3, 2), 1), ((3, 4), (2, 2), -1),
           ((2, 3, 4), (2, 3, 3), 2), ((2, 3, 4), (1, 2, 2), 1), ((2, 3, 4), (2, 1, 4), 0)]


@pytest.mark.parametrize("consts", [(), ("i",)])
@pytest.mark.parametrize("dshape,ishape,axis", SCATTER)
def test_scatter_elements(check_op, dshape, ishape, axis, consts):
    check_op("ScatterElements", scatter_inputs(dshape, ishape, axis, unique=True), {"axis": axis}, opset=13,
             consts=consts)


@pytest.mark.parametrize("reduction,opset", [("add", 16), ("mul", 16), ("max", 18), ("min", 18)])
@pytest.mark.parametrize("dshape,ishape,axis", SCATTER)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64, np.int64])
def test_scatter_elements_reduction(check_op, dshape, ishape, axis, reduction, opset, dtype):
    inputs = scatter_inputs(dshape, ishape, axis, dtype)  # duplicates included: they accumulate
    if reduction == "mul" and np.dtype(dtype).kind in "iu":
        inputs["u"] = (inputs["u"] % 3).astype(dtype)
    check_op("ScatterElements", inputs, {"axis": axis, "reduction": reduction}, opset=opset, rtol=1e-5)


@pytest.mark.parametrize("opset", [9, 10])
def test_scatter_legacy(check_op, opset):
    check_op("Scatter", scatter_inputs((3, 4), (3, 2), 1, unique=True), {"axis": 1}, opset=opset)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scatter_elements_dtypes(check_op, dtype):
    check_op("ScatterElements", scatter_inputs((4, 3), (2, 3), 0, dtype, unique=True), {"axis": 0}, opset=13)


def test_scatter_elements_errors():
    f, i = np.dtype(np.float32), np.dtype(np.int64)
    k = lookup("ScatterElements", opset=13)
    with pytest.raises(GraphError, match=r"reduction 'add' is not supported at opset 13"):
        k({"reduction": "add"}, [Meta(f, (3,)), Meta(i, (2,)), Meta(f, (2,))], name="s", opset=13)
    with pytest.raises(GraphError, match="must have one shape"):
        k({}, [Meta(f, (3,)), Meta(i, (2,)), Meta(f, (3,))], name="s", opset=13)
    with pytest.raises(GraphError, match="out of range"):
        k({}, [Meta(f, (3,)), Meta(i, (2,)), Meta(f, (2,))], [None, np.array([0, 3])], name="s", opset=13)
    with pytest.raises(GraphError, match="exceeds data shape"):
        k({"axis": 0}, [Meta(f, (3, 2)), Meta(i, (2, 3)), Meta(f, (2, 3))], name="s", opset=13)


# -- Compress -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,shape,n", [(None, (3, 4), 12), (None, (3, 4), 7), (0, (3, 4), 3), (1, (3, 4), 2),
                                          (-1, (2, 3, 5), 5), (1, (2, 3, 5), 3), (0, (4,), 0)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_compress(check_op, axis, shape, n, dtype):
    cond = rng.integers(0, 2, n).astype(bool)
    check_op("Compress", {"x": data(shape, dtype), "c": cond}, {} if axis is None else {"axis": axis},
             opset=11, consts=("c",))


def test_compress_computed_condition():
    f, b = np.dtype(np.float32), np.dtype(np.bool_)
    k = lookup("Compress", opset=11)({"axis": 0}, [Meta(f, (3, 2)), Meta(b, (3,))], name="c", opset=11)
    with pytest.raises(GraphError, match=r"node 'c' \(Compress\): .*needs dynamic shapes"):
        k.infer()
    x = data((3, 2))
    np.testing.assert_array_equal(k.compute(x, np.array([True, False, True]))[0], x[[0, 2]])
    with pytest.raises(GraphError, match="more than the 3"):
        lookup("Compress", opset=11)({"axis": 0}, [Meta(f, (3, 2)), Meta(b, (4,))], name="c", opset=11)


# -- NonZero --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (2, 1, 3, 2), (0, 3), ()])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_, np.uint8])
def test_nonzero(check_op, shape, dtype):
    x = (rng.integers(0, 3, shape) * rng.integers(0, 2, shape)).astype(dtype)
    check_op("NonZero", {"x": x}, opset=13, consts=("x",))


def test_nonzero_computed_input(check_op):
    x = (rng.integers(0, 2, (3, 5)) * 2.5).astype(np.float32)
    k = lookup("NonZero", opset=13)({}, [Meta(x.dtype, x.shape)], name="nz", opset=13)
    with pytest.raises(GraphError, match=r"node 'nz' \(NonZero\): .*output shape depends on the input values; "
                                          r"needs dynamic shapes"):
        k.infer()
    np.testing.assert_array_equal(k.compute(x)[0], np.array(np.nonzero(x)))
    assert k.compute(x)[0].dtype == np.int64


# -- Unique -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sorted_", [1, 0])
@pytest.mark.parametrize("axis,shape", [(None, (12,)), (None, (3, 4)), (0, (6, 2)), (1, (2, 6)), (-1, (2, 3, 5))])
def test_unique(check_op, sorted_, axis, shape):
    x = rng.integers(0, 3, shape).astype(np.float32)
    attrs = {"sorted": sorted_} | ({} if axis is None else {"axis": axis})
    check_op("Unique", {"x": x}, attrs, n_outputs=4, opset=11, consts=("x",))


def test_unique_computed_input():
    k = lookup("Unique", opset=11)({}, [Meta(np.dtype(np.int64), (5,))], name="u", opset=11, num_outputs=4)
    with pytest.raises(GraphError, match="needs dynamic shapes"):
        k.infer()
    y, idx, inv, cnt = k.compute(np.array([2, 1, 2, 3, 1]))
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(idx, [1, 0, 3])
    np.testing.assert_array_equal(inv, [1, 0, 1, 2, 0])
    np.testing.assert_array_equal(cnt, [2, 2, 1])


# -- ReverseSequence ----------------------------------------------------------------------------------

@pytest.mark.parametrize("consts", [(), ("l",)])
@pytest.mark.parametrize("time_axis,shape", [(0, (4, 3)), (1, (3, 4)), (0, (5, 2, 3)), (1, (2, 5, 3, 2))])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_reverse_sequence(check_op, time_axis, shape, consts, dtype):
    t, b = (shape[0], shape[1]) if time_axis == 0 else (shape[1], shape[0])
    lens = rng.integers(1, t + 1, b).astype(np.int64)
    lens[0] = t
    check_op("ReverseSequence", {"x": data(shape, dtype), "l": lens},
             {"time_axis": time_axis, "batch_axis": 1 - time_axis}, opset=10, consts=consts)


def test_reverse_sequence_errors():
    f, i = np.dtype(np.float32), np.dtype(np.int64)
    k = lookup("ReverseSequence", opset=10)
    with pytest.raises(GraphError, match="one must be 0 and the other 1"):
        k({"time_axis": 0, "batch_axis": 2}, [Meta(f, (3, 2, 2)), Meta(i, (2,))], name="r", opset=10)
    with pytest.raises(GraphError, match=r"not within \[0, 3\]"):
        k({}, [Meta(f, (3, 2)), Meta(i, (2,))], [None, np.array([1, 4])], name="r", opset=10)
