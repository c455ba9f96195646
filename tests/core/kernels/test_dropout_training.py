"""Dropout in training mode (opset 12+): kept elements scaled by 1 / (1 - ratio), the mask saying
which; a seeded node draws the same mask every run; a computed training_mode makes it a task."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api
from ge.core.model.ir import Meta
from ge.core.kernels import lookup

X = np.random.default_rng(4).standard_normal((4, 50)).astype(np.float32) + 3  # no zeros


def dropout(attrs=None):
    metas = [Meta(X.dtype, X.shape), Meta(np.dtype(np.float32), ()), Meta(np.dtype(np.bool_), ())]
    return lookup("Dropout", opset=13)(attrs or {}, metas, name="d", opset=13, num_outputs=2)


def test_training_drops_and_scales():
    y, mask = dropout({"seed": 3}).compute(X, np.float32(0.75), np.True_)
    assert mask.dtype == np.bool_ and 0.1 < mask.mean() < 0.4
    np.testing.assert_allclose(y, np.where(mask, X / 0.25, 0), rtol=1e-6)
    again, mask2 = dropout({"seed": 3}).compute(X, np.float32(0.75), np.True_)
    np.testing.assert_array_equal(mask, mask2)  # seeded: the same draw


def test_zero_ratio_and_inference_keep_everything():
    for ratio, mode in ((0.0, True), (0.5, False)):
        y, mask = dropout().compute(X, np.float32(ratio), np.bool_(mode))
        np.testing.assert_array_equal(y, X)
        assert mask.all()


def test_unseeded_runs_draw_anew():
    k = dropout()
    masks = [k.compute(X, np.float32(0.5), np.True_)[1] for _ in range(2)]
    assert not np.array_equal(*masks)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_computed_training_mode_compiles_to_a_task(tmp_path, device):
    g = helper.make_graph([helper.make_node("Dropout", ["x", "r", "t"], ["y"], seed=1)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape)),
                           helper.make_tensor_value_info("r", TensorProto.FLOAT, []),
                           helper.make_tensor_value_info("t", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(X.shape))])
    path = str(tmp_path / "d.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    result = api.atc(path, str(tmp_path / "d"))
    assert [t.op_type for t in result.model.tasks] == ["Dropout"]
    model_id = api.load_from_file(result.om_path, device)
    try:
        y_eval, = api.execute(model_id, [X, np.array(0.5, np.float32), np.array(False)])
        y_train, = api.execute(model_id, [X, np.array(0.5, np.float32), np.array(True)])
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(y_eval, X)
    kept = y_train != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(y_train[kept], X[kept] * 2, rtol=1e-6)
