"""ge run --input DIR --ray: the dataset on Ray actors writes what the local dataset mode writes."""
import os

import numpy as np


def test_ray_dataset_writes_the_local_modes_files(ge, compiled, tmp_path, local_ray):
    data = tmp_path / "in"
    data.mkdir()
    rng = np.random.default_rng(0)
    for i in range(5):
        np.save(data / f"s{i}.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    local = ge("run", "--model", compiled["small"], "--input", data, "--output-dir", tmp_path / "local", ok=True)
    on_ray = ge("run", "--model", compiled["small"], "--input", data, "--output-dir", tmp_path / "ray", "--ray",
                "--ray-actors", 2, ok=True)
    names = sorted(os.listdir(tmp_path / "local"))
    assert names == sorted(os.listdir(tmp_path / "ray")) == [f"s{i}_output_0.npy" for i in range(5)]
    for name in names:
        assert np.load(tmp_path / "local" / name).tobytes() == np.load(tmp_path / "ray" / name).tobytes()
    assert "Ray actors (local)" in on_ray.stdout and "5 sample(s)" in on_ray.stdout and local.exit_code == 0


def test_ray_refuses_what_it_cannot_run(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--ray")
    assert r.exit_code != 0 and "--ray runs a dataset: give --input one folder" in r.stderr
    (tmp_path / "in").mkdir()
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "in", "--ray", "--dump", "true")
    assert r.exit_code != 0 and "it does not combine with --dump" in r.stderr
