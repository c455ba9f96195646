"""The kernels of the newer families on zero-size tensors: same shapes (and values) as onnxruntime."""
import numpy as np
import pytest

F = np.float32
U8 = np.uint8
CASES = [
    ("LRN", {"x": np.zeros((0, 3, 2, 2), F)}, {"size": 3}, 17, (), 1),
    ("InstanceNormalization", {"x": np.zeros((0, 3, 2), F), "s": np.ones(3, F), "b": np.zeros(3, F)}, {}, 17, (), 1),
    ("InstanceNormalization", {"x": np.zeros((1, 3, 0), F), "s": np.ones(3, F), "b": np.zeros(3, F)}, {}, 17, (), 1),
    ("MeanVarianceNormalization", {"x": np.zeros((0, 3, 2, 2), F)}, {}, 13, (), 1),
    ("Hardmax", {"x": np.zeros((0, 4), F)}, {}, 13, (), 1),
    ("LpNormalization", {"x": np.zeros((0, 4), F)}, {}, 13, (), 1),
    ("GatherND", {"x": np.zeros((3, 4), F), "i": np.zeros((0, 2), np.int64)}, {}, 13, (), 1),
    ("ScatterElements", {"x": np.ones((3, 4), F), "i": np.zeros((0, 4), np.int64), "u": np.zeros((0, 4), F)}, {}, 13,
     (), 1),
    ("Einsum", {"a": np.zeros((0, 4), F), "b": np.zeros((4, 5), F)}, {"equation": "ij,jk->ik"}, 13, (), 1),
    ("Einsum", {"a": np.zeros((3, 0), F), "b": np.zeros((0, 5), F)}, {"equation": "ij,jk->ik"}, 13, (), 1),
    ("NonZero", {"x": np.zeros((0, 4), F)}, {}, 13, ("x",), 1),
    ("ReverseSequence", {"x": np.zeros((3, 0, 2), F), "l": np.zeros((0,), np.int64)}, {}, 13, (), 1),
    ("Compress", {"x": np.zeros((3, 2), F), "c": np.zeros(0, bool)}, {"axis": 0}, 13, ("c",), 1),
    ("QuantizeLinear", {"x": np.zeros((0, 4), F), "s": np.array(0.1, F), "z": np.array(1, U8)}, {}, 13, (), 1),
    ("DequantizeLinear", {"x": np.zeros((0, 4), U8), "s": np.array(0.1, F), "z": np.array(1, U8)}, {}, 13, (), 1),
    ("DynamicQuantizeLinear", {"x": np.zeros((0, 4), F)}, {}, 11, (), 3),
    ("MatMulInteger", {"a": np.zeros((0, 4), U8), "b": np.zeros((4, 5), U8)}, {}, 10, (), 1),
    ("RoiAlign", {"x": np.zeros((1, 2, 4, 4), F), "r": np.zeros((0, 4), F), "b": np.zeros(0, np.int64)}, {}, 16, (),
     1),
    ("NonMaxSuppression", {"b": np.zeros((1, 0, 4), F), "s": np.zeros((1, 2, 0), F), "m": np.array([3], np.int64)},
     {}, 11, ("b", "s", "m"), 1),
    ("GridSample", {"x": np.zeros((1, 2, 3, 3), F), "g": np.zeros((1, 0, 2, 2), F)}, {}, 16, (), 1),
    ("DFT", {"x": np.zeros((0, 8, 1), F)}, {}, 17, (), 1),
    ("Det", {"x": np.zeros((0, 3, 3), F)}, {}, 11, (), 1),
]


@pytest.mark.parametrize("op,inputs,attrs,opset,consts,n", CASES, ids=[c[0] for c in CASES])
def test_empty(check_op, op, inputs, attrs, opset, consts, n):
    check_op(op, inputs, attrs, n_outputs=n, opset=opset, consts=consts)


def test_empty_sequence_keeps_the_initial_state():
    """T = 0: Y is empty, Y_h / Y_c are the initial states (onnxruntime leaves them uninitialized)."""
    from ge.core.model.ir import Meta
    from ge.core.kernels import lookup
    x, w, r = np.zeros((0, 2, 3), F), np.zeros((1, 8, 3), F), np.zeros((1, 8, 2), F)
    h0, c0 = np.full((1, 2, 2), 0.5, F), np.full((1, 2, 2), -1.5, F)
    arrays = [x, w, r, None, None, h0, c0]
    metas = [None if a is None else Meta(a.dtype, a.shape) for a in arrays]
    y, yh, yc = lookup("LSTM", opset=14)({"hidden_size": 2}, metas, opset=14, num_outputs=3).compute(*arrays)
    assert y.shape == (0, 1, 2, 2)
    np.testing.assert_array_equal(yh, h0)
    np.testing.assert_array_equal(yc, c0)
