"""`ge run` from Python (core/acl/runner.py): the same files, names and summary as the command line,
and the same refusals; ATC's --mode=3 report from Python (pre_check.write_check_report)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ge.core import api
from ge.core.atc.pre_check import write_check_report
from ge.core.acl.runner import RunOptions, run
from ge.core.model.errors import GeError


def small_input(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)


def test_dataset_folder_with_msame_names_as_ge_run_writes(ge, models, compiled, tmp_path, ort_run):
    data = tmp_path / "data"
    data.mkdir()
    xs = {f"img{i}": small_input(i) for i in range(3)}
    for stem, x in xs.items():
        x.tofile(data / f"{stem}.bin")
    result = run(RunOptions(compiled["small"], inputs=[str(data)], output=str(tmp_path / "py"), output_dirname="r1"))
    r = ge("run", "--model", compiled["small"], "--input", data, "--output", tmp_path / "cli", "--output_dirname", "r1",
           "--json", ok=True)
    names = [f"img{i}_output_0.bin" for i in range(3)]
    assert sorted(os.listdir(tmp_path / "py" / "r1")) == sorted(os.listdir(tmp_path / "cli" / "r1")) == names
    for name in names:  # msame's BIN: the raw bytes, the same from both
        assert (tmp_path / "py" / "r1" / name).read_bytes() == (tmp_path / "cli" / "r1" / name).read_bytes()
    for stem, x in xs.items():
        y = np.fromfile(tmp_path / "py" / "r1" / f"{stem}_output_0.bin", np.float32).reshape(1, 4, 8, 8)
        np.testing.assert_allclose(y, ort_run(models["small"], {"x": x})[0], rtol=1e-5, atol=1e-6)
    assert result.kind == "dataset"
    assert result.summary["outputs"] == [[str(tmp_path / "py" / "r1" / name)] for name in names]
    cli_summary = json.loads(r.stdout)
    assert set(result.summary) == set(cli_summary)
    assert {k: cli_summary[k] for k in ("samples", "executions", "files_per_batch", "warmup", "device")} == \
        {k: result.summary[k] for k in ("samples", "executions", "files_per_batch", "warmup", "device")}


def test_input_files_summary_as_ge_run_json(ge, compiled, tmp_path):
    np.save(tmp_path / "x.npy", small_input(1))
    result = run(RunOptions(compiled["small"], inputs=[str(tmp_path / "x.npy")], output_dir=str(tmp_path / "py"),
                            loop=3, stats=True, verbose=True))
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "cli",
           "--loop", "3", "--stats", "--verbose", "--json", ok=True)
    cli_summary = json.loads(r.stdout)
    assert list(result.summary) == list(cli_summary)  # the same fields, in the same order
    assert result.summary["inputs"] == cli_summary["inputs"]
    assert [o["file"] for o in result.summary["outputs"]] == [str(tmp_path / "py" / "small_output_0.npy")]
    np.testing.assert_array_equal(np.load(tmp_path / "py" / "small_output_0.npy"),
                                  np.load(tmp_path / "cli" / "small_output_0.npy"))
    assert (result.summary["loop"], result.summary["warmup"], len(result.latencies_ms)) == (3, 1, 3)
    assert [e["run"] for e in result.summary["stats"]] == ["warm-up", 0, 1, 2]
    assert result.last_stats == result.summary["last_stats"]


def test_generated_inputs_and_profiler_folder(compiled, tmp_path):
    result = run(RunOptions(compiled["small"], output=str(tmp_path / "o"), output_dirname="r", seed=5,
                            profiler=True))
    assert result.summary["inputs"][0]["source"] == "random (seed 5)"
    assert result.summary["trace"] == [str(tmp_path / "o" / "profiler" / "small_trace.json")]
    with open(tmp_path / "o" / "profiler" / "small_trace.json") as f:
        assert any(e.get("ph") == "X" for e in json.load(f)["traceEvents"])
    assert os.listdir(tmp_path / "o" / "r") == ["small_output_0.bin"]


@pytest.mark.parametrize("options, message", [
    (dict(output="a", output_dir="b"), "--output (msame's timestamped folder) and --output-dir (exactly that folder) "
                                       "both say where outputs go: give one"),
    (dict(output_dirname="r"), "--output_dirname names a folder inside --output: give --output too"),
    (dict(profiler=True, dump=True), "--profiler and --dump cannot both be true (as msame and ais_bench): profile or "
                                     "dump, one per run"),
    (dict(inputs="x.npy"), "inputs 'x.npy': give a list of paths (one file per model input, or dataset folders)"),
    (dict(inputs=["x.npy"], ray_address="local"), "--ray runs a dataset: give --input one folder (or one folder per "
                                                   "input)"),
])
def test_contradicting_options_refused_before_anything_runs(compiled, tmp_path, monkeypatch, options, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GeError) as e:
        run(RunOptions(compiled["small"], **options))
    assert str(e.value) == message
    assert os.listdir(tmp_path) == []


def test_check_report_from_python_is_atcs_file(ge, models, tmp_path):
    ge("atc", "--mode=3", f"--model={models['small']}", "--framework=5", f"--check_report={tmp_path / 'cli.json'}",
       ok=True)
    write_check_report(api.precheck(models["small"]), str(tmp_path / "py.json"))
    assert (tmp_path / "py.json").read_bytes() == (tmp_path / "cli.json").read_bytes()
    assert json.loads((tmp_path / "py.json").read_text())["result"] == "success"
