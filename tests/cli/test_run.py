"""`ge run` (msame): inputs from .npy/.npz/.bin or random, outputs as NPY/BIN/TXT, timing loop."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ge.core import api
from ge.formats.tensors import random_inputs
from ge.formats.om import read_om


@pytest.fixture
def x(tmp_path):
    data = np.random.default_rng(7).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", data)
    return data


@pytest.mark.parametrize("device", ["cpu", "sim", "SIM"])
def test_run_matches_onnxruntime(ge, models, compiled, tmp_path, x, ort_run, device):
    out = tmp_path / "out"
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", out, "--device", device,
           ok=True)
    assert os.listdir(out) == ["small_output_0.npy"]
    assert str(out / "small_output_0.npy") in r.stdout
    expected = ort_run(models["small"], {"x": x})[0]
    np.testing.assert_allclose(np.load(out / "small_output_0.npy"), expected, rtol=1e-4, atol=1e-5)


def test_default_output_dir_is_out(ge, compiled, tmp_path, x, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ge("run", "--model", compiled["small"], "--input", "x.npy", ok=True)
    assert (tmp_path / "out" / "small_output_0.npy").is_file()


def test_random_inputs_are_seeded(ge, models, compiled, tmp_path, ort_run):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "a", "--seed", "3", ok=True)
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "b", "--seed", "3", ok=True)
    a, b = (np.load(tmp_path / d / "small_output_0.npy") for d in ("a", "b"))
    np.testing.assert_array_equal(a, b)
    (feed,) = random_inputs(read_om(compiled["small"]).inputs, 3)
    np.testing.assert_allclose(a, ort_run(models["small"], {"x": feed})[0], rtol=1e-4, atol=1e-5)


def test_random_int64_ids_are_in_range(ge, models, compiled, tmp_path, ort_run):
    ge("run", "--model", compiled["emb"], "--output-dir", tmp_path, "--device", "sim", "--pure_data_type", "random",
       ok=True)
    (ids,) = random_inputs(read_om(compiled["emb"]).inputs, 0)
    np.testing.assert_array_equal(np.load(tmp_path / "emb_output_0.npy"), ort_run(models["emb"], {"ids": ids})[0])


def test_two_inputs_in_order_npy_bin_npz(ge, models, compiled, tmp_path, ort_run):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    expected = ort_run(models["two"], {"a": a, "b": b})
    np.save(tmp_path / "a.npy", a)
    b.tofile(tmp_path / "b.bin")
    ge("run", "--model", compiled["two"], "--input", f"{tmp_path / 'a.npy'},{tmp_path / 'b.bin'}",
       "--output-dir", tmp_path / "o1", ok=True)
    np.savez(tmp_path / "ab.npz", b=b, a=a)  # one archive, by name
    ge("run", "--model", compiled["two"], "--input", tmp_path / "ab.npz", "--output-dir", tmp_path / "o2", ok=True)
    for d in ("o1", "o2"):
        for i in range(2):
            np.testing.assert_allclose(np.load(tmp_path / d / f"two_output_{i}.npy"), expected[i], rtol=1e-6)


def test_input_count_mismatch(ge, compiled, tmp_path, error_line):
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    r = ge("run", "--model", compiled["two"], "--input", tmp_path / "a.npy", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1
    line = error_line(r)
    assert "2 input" in line and "'a'" in line and "'b'" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("fmt", ["BIN", "txt", "Npy"])
def test_outfmt(ge, compiled, tmp_path, x, fmt):
    ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "ref", ok=True)
    ref = np.load(tmp_path / "ref" / "small_output_0.npy")
    ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "o",
       "--outfmt", fmt, ok=True)
    path = tmp_path / "o" / f"small_output_0.{fmt.lower()}"
    assert os.listdir(tmp_path / "o") == [path.name]
    if fmt.upper() == "BIN":
        got = np.fromfile(path, np.float32)
        assert path.stat().st_size == ref.nbytes
    elif fmt.upper() == "TXT":
        got = np.loadtxt(path, dtype=np.float32)
    else:
        got = np.load(path)
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)


def test_bad_outfmt_is_a_usage_error(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--outfmt", "PNG")
    assert r.exit_code == 2


def test_loop_and_summary_json(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--loop", "5",
           "--summary-json", tmp_path / "perf.json", ok=True)
    s = json.loads((tmp_path / "perf.json").read_text())
    assert set(s) == {"model", "device", "loop", "latency_ms", "throughput", "batch", "executor", "warmup", "output_dir",
                      "load_ms", "inputs", "outputs"}  # what --json prints
    assert s["warmup"] == 1 and s["output_dir"] == str(tmp_path / "o")
    assert set(s["latency_ms"]) == {"min", "mean", "median", "p90", "p95", "p99", "max", "std"}
    assert s["loop"] == 5 and s["batch"] == 1 and s["device"] == "cpu" and s["model"] == compiled["small"]
    lat = s["latency_ms"]
    assert 0 < lat["min"] <= lat["median"] <= lat["p90"] <= lat["p95"] <= lat["p99"] <= lat["max"]
    assert lat["min"] <= lat["mean"] <= lat["max"] and lat["std"] >= 0
    assert s["throughput"] == pytest.approx(1000 / lat["mean"])
    for word in ("min", "mean", "median", "p99", "throughput"):
        assert word in r.stdout


def test_loop_json_output(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["two"], "--output-dir", tmp_path, "--loop", "2", "--json", "--verbose",
           "--device", "sim", ok=True)
    d = json.loads(r.stdout)
    assert d["batch"] == 2 and d["loop"] == 2 and d["device"] == "sim"
    assert [o["file"] for o in d["outputs"]] == [str(tmp_path / f"two_output_{i}.npy") for i in range(2)]
    assert "init_nodes" in d["init_timings_ms"] and d["last_stats"]["tasks"] == 2
    assert d["kernels"] == api.kernels()


def test_verbose_shows_init_steps_and_stats(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--verbose", "--device", "sim", ok=True)
    for word in ("init_weight_mem", "init_nodes", "do_task_sink", "h2d_bytes", "args_bytes", "tasks"):
        assert word in r.stdout
    assert f"kernels: {api.kernels()}\n" in r.stdout  # the native level, or the numpy fallback and why


def test_bin_of_wrong_size(ge, compiled, tmp_path, error_line):
    np.zeros(100, np.float32).tofile(tmp_path / "x.bin")
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.bin", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1
    line = error_line(r)
    assert "'x'" in line and "x.bin" in line and "400" in line and "768" in line
    assert not (tmp_path / "o").exists()


def test_npy_of_wrong_shape(ge, compiled, tmp_path, error_line):
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 8, 9), np.float32))
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1
    line = error_line(r)
    assert "'x'" in line and "[1, 3, 8, 9]" in line and "[1, 3, 8, 8]" in line
    assert not (tmp_path / "o").exists()


def test_corrupted_om(ge, compiled, tmp_path, error_line):
    data = bytearray(open(compiled["small"], "rb").read())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "flipped.om"
    bad.write_bytes(bytes(data))
    r = ge("run", "--model", bad, "--output-dir", tmp_path / "o")
    assert r.exit_code == 1
    assert "flipped.om" in error_line(r)
    assert not (tmp_path / "o").exists()


def test_missing_om(ge, tmp_path, error_line):
    r = ge("run", "--model", tmp_path / "none.om")
    assert r.exit_code == 1
    assert "none.om" in error_line(r)


def test_tiny_cnn_sample(ge, samples, tmp_path, ort_run):
    import onnx

    from ge.core.kernels import supported_ops
    model = samples.tiny_cnn()
    missing = sorted({n.op_type for n in model.graph.node} - set(supported_ops()))
    assert not missing, f"no kernel for {missing}"
    model.ir_version = 8
    path = str(tmp_path / "tiny_cnn.onnx")
    onnx.save(model, path)
    ge("atc", f"--model={path}", "--framework=5", f"--output={tmp_path / 'tiny_cnn'}", ok=True)
    image = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "image.npy", image)
    for device in ("cpu", "sim"):
        ge("run", "--model", tmp_path / "tiny_cnn.om", "--input", tmp_path / "image.npy", "--device", device,
           "--output-dir", tmp_path / device, ok=True)
        np.testing.assert_allclose(np.load(tmp_path / device / "tiny_cnn_output_0.npy"),
                                   ort_run(path, {"image": image})[0], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_stats_per_execution(ge, compiled, tmp_path, device):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--loop", "3", "--device", device,
       "--stats", "--summary-json", tmp_path / "perf.json", ok=True)
    runs = json.loads((tmp_path / "perf.json").read_text())["stats"]
    assert [r["run"] for r in runs] == ["warm-up", 0, 1, 2]
    nbytes_in, nbytes_out = 3 * 8 * 8 * 4, 4 * 8 * 8 * 4
    for r in runs:
        # conv, then relu + add as one chain (c is read twice: the Relu is no epilogue of the conv)
        assert r["tasks"] == 2 and r["allocations"] == 0
        if device == "sim":  # host arrays on a device: copied both ways
            assert (r["h2d_bytes"], r["d2h_bytes"], r["copied_inputs"], r["copied_outputs"]) == (nbytes_in, nbytes_out, 1, 1)
        else:  # the input binds in place; each run's small fresh output is copied out (cheaper than binding it)
            assert (r["h2d_bytes"], r["zero_copy_inputs"], r["copied_outputs"], r["d2h_bytes"]) == (0, 1, 1, nbytes_out)
    if device == "sim":
        assert all(r["args_bytes"] == 0 for r in runs[1:])  # frozen: nothing moved after the first run


@pytest.mark.parametrize("executor", ["linear", "dataflow", "parallel"])
def test_executor_and_contexts(ge, compiled, tmp_path, executor):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--loop", "4", "--contexts", "2",
           "--executor", executor, "--summary-json", tmp_path / "perf.json", ok=True)
    s = json.loads((tmp_path / "perf.json").read_text())
    t = s["throughput_mode"]
    assert s["executor"] == executor and t["contexts"] == 2 and t["loop"] == 4
    for phase in ("h2d_ms", "compute_ms", "d2h_ms"):
        assert set(t[phase]) == {"min", "max", "mean", "median", "p99"}
    assert t["throughput"] == pytest.approx(1000 * t["batch"] / t["compute_ms"]["mean"] * 2)
    assert t["memory"]["total"] == t["memory"]["weights"] + 2 * t["memory"]["per_context"]
    assert "NPU_compute_time (ms)" in r.stdout and "throughput 1000*batchsize" in r.stdout
    # one throughput figure is ge's (wall clock, its definition printed); the single-context loop does not run
    assert s["throughput"] == t["wall_throughput"] and s["latency_ms"] == t["latency_ms"]
    assert "ge's throughput figure" in r.stdout and "Inference average time" not in r.stdout
