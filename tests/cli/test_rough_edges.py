"""Issue 15's rough edges, each with the behaviour a user expects."""
import os

import numpy as np
import pytest


@pytest.mark.parametrize("model,arrays", [("small", {"wrong": np.zeros((1, 3, 8, 8), np.float32)}),
                                          ("two", {"a": np.zeros((2, 3), np.float32), "c": np.zeros((2, 3), np.float32)})])
def test_npz_whose_keys_are_not_the_inputs_is_refused_naming_them(ge, compiled, tmp_path, model, arrays):
    np.savez(tmp_path / "x.npz", **arrays)
    r = ge("run", "--model", compiled[model], "--input", tmp_path / "x.npz", "--output-dir", tmp_path / "out")
    assert r.exit_code != 0 and str(sorted(arrays))[1:-1] in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_npz_saved_unnamed_feeds_the_inputs_in_order(ge, compiled, tmp_path):
    a, b = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    np.savez(tmp_path / "x.npz", a, b)
    ge("run", "--model", compiled["two"], "--input", tmp_path / "x.npz", "--output-dir", tmp_path / "out", ok=True)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "two_output_1.npy"), (a - b) * a)


def test_an_onnx_model_where_an_om_is_expected_says_so(ge, models, tmp_path):
    for args in (("run", "--model", models["small"]), ("atc", "--mode=1", "--om", models["small"], "--json", tmp_path / "x.json")):
        r = ge(*args)
        assert r.exit_code != 0 and "this is an ONNX model, not an OM; compile it with `ge atc` first" in r.stderr


def test_json_folder_is_refused_before_anything_is_written(ge, models, tmp_path):
    (tmp_path / "j").mkdir()
    r = ge("atc", "-m", models["small"], "--output", tmp_path / "m", "--json", f"{tmp_path / 'j'}{os.sep}")
    assert r.exit_code != 0 and "is a folder; give the JSON file's name" in r.stderr
    assert not (tmp_path / "m.om").exists()


def test_input_shape_changing_a_static_dim_warns(ge, models, tmp_path):
    r = ge("atc", "-m", models["small"], "--output", tmp_path / "m", "--input_shape", "x:2,3,8,8", ok=True)
    assert "--input_shape changes static dim(s) of input 'x' the model declares [1, 3, 8, 8]: dim 0 1 -> 2" in r.stderr


@pytest.mark.parametrize("dataset", [False, True], ids=["one-run", "dataset"])
def test_json_on_stdout_and_summary_json_hold_the_same_fields(ge, compiled, tmp_path, dataset):
    import json
    args = ["run", "--model", compiled["small"], "--loop", 3, "--output-dir", tmp_path / "out", "--json",
            "--summary-json", tmp_path / "s.json"]
    if dataset:
        (tmp_path / "in").mkdir()
        np.save(tmp_path / "in" / "a.npy", np.ones((1, 3, 8, 8), np.float32))
        args[3:5] = ["--input", tmp_path / "in"]
    r = ge(*args, ok=True)
    printed, written = json.loads(r.stdout), json.loads((tmp_path / "s.json").read_text())
    assert printed == written and "outputs" in printed and "latency_ms" in printed


def test_duration_runs_as_many_timed_runs_as_fit(ge, compiled, tmp_path):
    import json
    ge("run", "--model", compiled["small"], "--duration", 0.2, "--loop", 3, "--output-dir", tmp_path / "o",
       "--summary-json", tmp_path / "s.json", ok=True)
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["loop"] >= 3 and s["loop"] * s["latency_ms"]["min"] <= 200 + s["latency_ms"]["max"]
    r = ge("run", "--model", compiled["small"], "--duration", 0, "--output-dir", tmp_path / "o")
    assert r.exit_code != 0 and "--duration" in r.stderr
