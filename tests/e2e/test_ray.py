"""Dataset inference on Ray (issue 21): a local 2-CPU Ray instance, outputs checked against the
local dataset mode (bit-identical) and against api.execute per sample."""
import os
import sys

import numpy as np
import onnx
import pytest
import ray
from onnx import TensorProto, helper

from ge.core import api
from ge.core.acl.ray_dataset import OmPredictor, run_dataset_on_ray
from ge.core.model.errors import GeError

F = TensorProto.FLOAT
rng = np.random.default_rng(0)


def conv_model(tmp_path, make_model, batch=1, **atc):
    """Conv + Relu with the same weights every time, compiled into tmp_path/<batch>/."""
    w = (np.random.default_rng(1).standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    tmp_path = tmp_path / str(batch)
    tmp_path.mkdir()
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    path = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, {"x": (F, [batch, 3, 8, 8])}, {"y": (F, [batch, 4, 8, 8])}, {"w": w}), str(path))
    return api.atc(str(path), str(tmp_path / "m"), **atc).om_path


def test_dataset_on_ray_is_bit_identical_to_the_local_dataset_mode(local_ray, tmp_path, make_model):
    om = conv_model(tmp_path, make_model)
    os.makedirs(tmp_path / "in")
    for i in range(12):
        np.save(tmp_path / "in" / f"img{i:02d}.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    seen = []
    on_ray = run_dataset_on_ray(om, [str(tmp_path / "in")], str(tmp_path / "ray_out"), actors=2, batch_size=2,
                                progress=lambda done, total, stem: seen.append((done, total, stem)))
    model_id = api.load_from_file(om)
    try:
        local = api.run_dataset(model_id, [str(tmp_path / "in")], str(tmp_path / "local_out"))
    finally:
        api.unload(model_id)
    assert on_ray["samples"] == local["samples"] == 12
    assert [s for _, _, s in seen] == [f"img{i:02d}" for i in range(12)]  # in sample order
    for ours, theirs in zip(on_ray["outputs"], local["outputs"]):
        assert [os.path.basename(p) for p in ours] == [os.path.basename(p) for p in theirs]
        for a, b in zip(ours, theirs):
            assert np.load(a).tobytes() == np.load(b).tobytes()
    # Ray hands batches to whichever actor is free: on a loaded machine one actor may take them all
    assert 1 <= len(on_ray["actors"]) <= 2 and sum(a["samples"] for a in on_ray["actors"].values()) == 12


@pytest.mark.parametrize("row_shape", [(3, 8, 8), (1, 3, 8, 8)], ids=["rows", "rows-with-batch-axis"])
def test_predictor_runs_rows_and_passes_other_columns(local_ray, tmp_path, make_model, row_shape):
    om = conv_model(tmp_path, make_model)
    xs = [rng.standard_normal(row_shape).astype(np.float32) for _ in range(5)]
    ds = ray.data.from_items([{"x": x, "id": i} for i, x in enumerate(xs)])
    rows = ds.map_batches(OmPredictor, fn_constructor_kwargs={"om": om}, compute=ray.data.ActorPoolStrategy(size=1),
                          batch_size=2, batch_format="numpy").take_all()
    model_id = api.load_from_file(om)
    try:
        for row in rows:
            expected = api.execute(model_id, [xs[row["id"]].reshape(1, 3, 8, 8)])[0][0]
            assert sorted(row) == ["id", "y"] and np.array_equal(row["y"], expected)
    finally:
        api.unload(model_id)
    assert sorted(r["id"] for r in rows) == list(range(5))


def test_predictor_splits_and_pads_to_the_models_batches(tmp_path, make_model):
    """Called as Ray calls it: 7 rows over batch gears 1, 2, 4 run as 4 + 2 + 1; over a static
    batch of 4 as 4 + 4 (3 rows of padding, dropped)."""
    xs = rng.standard_normal((7, 3, 8, 8)).astype(np.float32)
    static = conv_model(tmp_path, make_model, batch=1)
    model_id = api.load_from_file(static)
    try:
        expected = np.stack([api.execute(model_id, [x[None]])[0][0] for x in xs])
    finally:
        api.unload(model_id)
    gears = conv_model(tmp_path, make_model, batch=-1, input_shape="x:-1,3,8,8", dynamic={"dynamic_batch_size": "1,2,4"})
    batch4 = conv_model(tmp_path, make_model, batch=4)
    for om, batches in ((gears, [1, 2, 4]), (batch4, [4])):
        predictor = OmPredictor(om)
        assert predictor.batches == batches
        got = predictor({"x": xs})["y"]
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
        assert got.shape == (7, 4, 8, 8)


def test_predictor_names_a_missing_column(tmp_path, make_model):
    predictor = OmPredictor(conv_model(tmp_path, make_model))
    with pytest.raises(GeError, match=r"no column for the model's inputs \['x'\] \(columns: \['image'\]\)"):
        predictor({"image": np.zeros((2, 3, 8, 8), np.float32)})


def test_without_ray_the_error_says_how_to_install_it(tmp_path, make_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(GeError, match=r"pip install 'ge\[ray\]'"):
        run_dataset_on_ray(conv_model(tmp_path, make_model), [str(tmp_path)], str(tmp_path / "out"))


def test_nothing_else_imports_ray():
    import subprocess
    code = ("import sys, ge.cli.main, ge.core.api; from ge.core.acl import models, dataset; from ge.core.atc import conversion; "
            "sys.exit('ray' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0
