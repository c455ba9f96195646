"""bfloat16, the float8/float4 formats and the 2/4-bit integers (ml_dtypes): Cast's spec rules and a
model carrying them through the OM on both devices, checked against exact expectations."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.kernels.dtypes import cast_to

E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)


def test_float8_saturates_unless_told_not_to():
    x = np.array([1.0, 500.0, -1e6, np.inf, np.nan, 0.3], np.float32)
    sat = cast_to(x, E4M3, saturate=True).astype(np.float32)
    np.testing.assert_array_equal(sat[:4], [1.0, 448.0, -448.0, 448.0])  # 448: e4m3fn's largest finite value
    assert np.isnan(sat[4]) and sat[5] == np.float32(x[5].astype(E4M3))
    raw = cast_to(x, E4M3, saturate=False).astype(np.float32)
    assert np.isnan(raw[1]) and np.isnan(raw[3])  # e4m3fn has no inf: out of range is NaN


def test_small_ints_round_half_even_and_wrap():
    x = np.array([-9.0, -8.0, 7.0, 8.0, 2.5, 3.5, 15.0], np.float32)
    y = cast_to(x, np.dtype(ml_dtypes.int4))
    np.testing.assert_array_equal(y.astype(np.int64), [7, -8, 7, -8, 2, 4, -1])
    u2 = cast_to(np.array([-3, -1, 3, 4], np.int64), np.dtype(ml_dtypes.uint2))
    np.testing.assert_array_equal(u2.astype(np.int64), [1, 3, 3, 0])


@pytest.mark.parametrize("mode,expected", [("up", [0.125, 2.0, 2.0, 4.0]), ("down", [0.0625, 1.0, 1.0, 2.0]),
                                            ("nearest", [0.125, 1.0, 2.0, 4.0])])
def test_e8m0_round_modes(mode, expected):
    x = np.array([0.1, 1.1, 1.5, 3.0], np.float32)
    y = cast_to(x, np.dtype(ml_dtypes.float8_e8m0fnu), True, mode).astype(np.float32)
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_int4_weights_and_bfloat16_through_the_om(tmp_path, device):
    """y = Cast<bf16>(DequantizeLinear(w_int4, scale) @ x): int4 initializer and bfloat16 output."""
    w = np.array([[-8, -1, 0, 7], [3, 2, 1, -5]], dtype=ml_dtypes.int4)
    g = helper.make_graph(
        [helper.make_node("DequantizeLinear", ["w", "s"], ["wf"]), helper.make_node("MatMul", ["wf", "x"], ["m"]),
         helper.make_node("Cast", ["m"], ["y"], to=TensorProto.BFLOAT16)], "small",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [2, 3])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.array(0.5, np.float32), "s")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), path)
    result = api.atc(path, str(tmp_path / "m"))
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 4
    model_id = api.load_from_file(result.om_path, device)
    try:
        y, = api.execute(model_id, [x])
    finally:
        api.unload(model_id)
    assert y.dtype == np.dtype(ml_dtypes.bfloat16) and y.shape == (2, 3)
    expected = (w.astype(np.float32) * 0.5 @ x).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(y.astype(np.float32), expected.astype(np.float32))
