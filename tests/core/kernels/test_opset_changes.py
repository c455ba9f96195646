"""The ops whose meaning changed after opset 21 (docs/opsets.md), each checked with exact
expectations from the spec's text, and the opset range the importer accepts."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core.model.errors import GraphError
from ge.core.model.ir import Meta
from ge.core.kernels import lookup
from ge.formats.onnx import load_onnx


def run(op, opset, xs, **attrs):
    k = lookup(op, opset=opset)(attrs, [Meta(x.dtype, x.shape) for x in xs], name="n", opset=opset)
    return k.compute(*xs)[0]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8])
def test_bitshift_28_signed_and_out_of_range_shifts(dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([-8, 5, -1, 3, -128 if bits == 8 else -(2 ** 20), 7], np.int64)
    if np.iinfo(dtype).min == 0:
        x = np.abs(x)
    x = x.astype(dtype)
    s = np.array([1, 2, bits - 1, bits, -1, bits + 3], np.int64).astype(dtype)  # (uint8: -1 wraps to 255)
    right, left = run("BitShift", 28, [x, s], direction="RIGHT"), run("BitShift", 28, [x, s], direction="LEFT")
    for i in range(len(x)):
        shift = int(np.asarray(s[i]).astype(np.int64))
        if 0 <= shift < bits:
            assert right[i] == x[i] >> np.asarray(shift, dtype), (i, right[i])  # arithmetic for signed
            assert left[i] == np.left_shift(x[i], np.asarray(shift, dtype)), (i, left[i])
        else:
            assert right[i] == (-1 if x[i] < 0 else 0) and left[i] == 0, (i, right[i], left[i])
    assert right.dtype == left.dtype == dtype


def test_bitshift_signed_needs_opset_28():
    with pytest.raises(GraphError, match="input 0 'X' is int32; BitShift-11 takes T in"):
        run("BitShift", 27, [np.zeros(2, np.int32)] * 2, direction="LEFT")


def test_mod_28_floor_remainder_of_floats():
    a = np.array([5.5, -5.5, 5.5, -5.5, 0.0, np.inf, 3.0, 3.0, -3.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, -2.0, -3.0, 2.0, 0.0, np.inf, np.inf], np.float32)
    y = run("Mod", 28, [a, b], fmod=0)
    np.testing.assert_array_equal(y[:4], [1.5, 0.5, -0.5, -1.5])  # the divisor's sign
    assert y[4] == 0 and np.signbit(y[4])  # ±0 takes the divisor's sign
    assert np.isnan(y[5]) and np.isnan(y[6])
    assert y[7] == 3.0 and y[8] == np.inf  # same signs: x; otherwise y
    with pytest.raises(GraphError, match="fmod=0 is not defined for floating point inputs before opset 28"):
        run("Mod", 21, [a, b], fmod=0)


def test_spacetodepth_28_crd_is_depthtospace_crd_inverted():
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    for mode in ("DCR", "CRD"):
        y = run("SpaceToDepth", 28, [x], blocksize=2, mode=mode)
        assert y.shape == (2, 12, 2, 3)
        np.testing.assert_array_equal(run("DepthToSpace", 13, [y], blocksize=2, mode=mode), x)
    crd = run("SpaceToDepth", 28, [x], blocksize=2, mode="CRD")
    # CRD: output channel c * 4 + bh * 2 + bw holds x[:, c, bh::2, bw::2]
    np.testing.assert_array_equal(crd[:, 1 * 4 + 1 * 2 + 0], x[:, 1, 1::2, 0::2])


def _model_at(tmp_path, opset):
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    path = tmp_path / f"m{opset}.onnx"
    onnx.save(m, str(path))
    return path


def test_every_opset_from_7_to_the_newest_onnx_defines(tmp_path):
    newest = onnx.defs.onnx_opset_version()
    for opset in (7, 21, 22, 25, newest):
        assert load_onnx(_model_at(tmp_path, opset)).opset[""] == opset
    for old in (1, 6):  # lifted to 7 by onnx's version converter (legacy attributes rewritten)
        assert load_onnx(_model_at(tmp_path, old)).opset[""] == 7
    with pytest.raises(GraphError, match=f"opset {newest + 1} of the default domain .* ge supports opsets 7..{newest}"):
        load_onnx(_model_at(tmp_path, newest + 1))


def _add6(tmp_path, b_shape, **attrs):
    g = helper.make_graph([helper.make_node("Add", ["x", "b"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, b_shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])])
    path = tmp_path / "add6.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 6)]), str(path))
    return str(path)


def test_opset_6_legacy_broadcast_is_converted(tmp_path):
    """Add-6 with broadcast=1, axis=2: B's dims placed at `axis`, as Add-7's numpy broadcasting."""
    from ge.core import api
    result = api.atc(_add6(tmp_path, [4, 5], broadcast=1, axis=2), str(tmp_path / "add6"))
    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.arange(20, dtype=np.float32).reshape(4, 5) * 100
    model_id = api.load_from_file(result.om_path)
    try:
        y, = api.execute(model_id, [x, b])
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(y, x + b)


def test_what_the_converter_cannot_lift_is_named(tmp_path):
    """onnx's converter refuses B aligned inside A (axis=1 of a 4-D A): a one-line error, no guess."""
    with pytest.raises(GraphError, match=r"add6\.onnx: opset 6 model: onnx's version converter cannot lift it to "
                                         r"opset 7 \(.*\); re-export it at opset 7 or newer"):
        load_onnx(_add6(tmp_path, [3], broadcast=1, axis=1))


def test_a_model_of_other_domains_only_needs_no_default_opset(tmp_path):
    g = helper.make_graph([helper.make_node("Binarizer", ["x"], ["y"], domain="ai.onnx.ml", name="bin")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    path = tmp_path / "ml.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("ai.onnx.ml", 1)]), str(path))
    assert "" not in load_onnx(path).opset
