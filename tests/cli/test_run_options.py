"""`ge run` with msame's and ais_bench's options as users write them: one test per option, its
effect checked against onnxruntime where it has one, its exact message where it is refused
(docs/run-options.md is the table)."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.formats.om import read_om
from ge.formats.tensors import random_inputs

TIMESTAMP = re.compile(r"\d{8}_\d{6}")  # msame's YYYYMMDD_HHMMSS


@pytest.fixture(scope="module")
def free(tmp_path_factory, models) -> str:
    """The conv model with batch, height and width all symbolic."""
    model = onnx.load(models["dynamic"])
    for vi in (model.graph.input[0], model.graph.output[0]):
        for k, name in ((2, "h"), (3, "w")):
            vi.type.tensor_type.shape.dim[k].dim_param = name
    path = str(tmp_path_factory.mktemp("free") / "free.onnx")
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def gears(tmp_path_factory, free):
    """The conv model compiled with batch gears 1,2 (dynamic_batch_size), dims gears (dynamic_dims),
    image-size gears (dynamic_image_size) and a batch range 1~4."""
    d = tmp_path_factory.mktemp("gears")
    out = {}
    for name, options in {"batch": dict(input_shape="x:-1,3,8,8", dynamic={"dynamic_batch_size": "1,2"}),
                          "dims": dict(input_shape="x:-1,3,-1,8", dynamic={"dynamic_dims": "1,8;2,6"}),
                          "hw": dict(input_shape="x:1,3,-1,-1", dynamic={"dynamic_image_size": "8,8;6,10"}),
                          "range": dict(input_shape="x:1~4,3,8,8")}.items():
        out[name] = api.atc(free, str(d / name), **options).om_path
    return out


def small_input(shape=(1, 3, 8, 8), seed=7):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def only_folder(parent) -> str:
    (name,) = os.listdir(parent)
    return os.path.join(parent, name)


def summary(ge, *args) -> dict:
    r = ge("run", *args, "--json", ok=True)
    return json.loads(r.stdout)


# -- msame ---------------------------------------------------------------------------------------
def test_msame_line_as_written(ge, models, compiled, tmp_path, ort_run):
    x = small_input()
    x.tofile(tmp_path / "x.bin")
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.bin", "--output", tmp_path / "out",
           "--outfmt", "TXT", "--loop", "2", ok=True)
    folder = only_folder(tmp_path / "out")
    assert TIMESTAMP.fullmatch(os.path.basename(folder))
    assert os.listdir(folder) == ["small_output_0.txt"]
    got = np.loadtxt(os.path.join(folder, "small_output_0.txt"), dtype=np.float32).reshape(1, 4, 8, 8)
    np.testing.assert_allclose(got, ort_run(models["small"], {"x": x})[0], rtol=1e-5, atol=1e-5)
    assert "Inference average time:" in r.stdout and "Inference average time without first time:" in r.stdout


def test_output_defaults_to_bin_in_a_timestamped_folder(ge, models, compiled, tmp_path, ort_run):
    ge("run", "--model", compiled["small"], "--output", tmp_path / "out", ok=True)
    folder = only_folder(tmp_path / "out")
    got = np.fromfile(os.path.join(folder, "small_output_0.bin"), np.float32).reshape(1, 4, 8, 8)
    np.testing.assert_allclose(got, ort_run(models["small"], {"x": np.zeros((1, 3, 8, 8), np.float32)})[0],
                               rtol=1e-5, atol=1e-6)


def test_output_dir_is_exact_and_npy(ge, compiled, tmp_path):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", ok=True)
    assert os.listdir(tmp_path / "o") == ["small_output_0.npy"]


def test_no_input_means_zeros(ge, models, compiled, tmp_path, ort_run):
    d = summary(ge, "--model", compiled["two"], "--output-dir", tmp_path)
    assert [i["source"] for i in d["inputs"]] == ["zeros", "zeros"]
    zeros = np.zeros((2, 3), np.float32)
    for i, want in enumerate(ort_run(models["two"], {"a": zeros, "b": zeros})):
        np.testing.assert_array_equal(np.load(tmp_path / f"two_output_{i}.npy"), want)


def test_loop_runs_n_times_after_warmup(ge, compiled, tmp_path):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--loop", "4", "--stats",
       "--summary-json", tmp_path / "s.json", ok=True)
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["loop"] == 4 and s["warmup"] == 1
    assert [e["run"] for e in s["stats"]] == ["warm-up", 0, 1, 2, 3]


def test_device_takes_npu_ids(ge, models, compiled, tmp_path, ort_run, error_line):
    x = small_input()
    np.save(tmp_path / "x.npy", x)
    d = summary(ge, "--model", compiled["small"], "--input", tmp_path / "x.npy", "--device", "3", "--output-dir",
                tmp_path / "o")
    assert d["device"] == "sim" and d["device_id"] == 3
    np.testing.assert_allclose(np.load(tmp_path / "o" / "small_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
    assert ge("run", "--model", compiled["small"], "--device", "256").exit_code == 2
    r = ge("run", "--model", compiled["small"], "--device", "0,1")
    assert r.exit_code == 1 and error_line(r) == (
        "error: --device 0,1: multi-device runs are not supported (one simulated NPU per process); run one ge per "
        "device")


@pytest.mark.parametrize("args,verbose", [(("--debug", "true"), True), (("--debug", "false"), False),
                                          (("--debug=1",), True), (("--debug=false",), False)])
def test_debug_true_prints_the_model_description(ge, compiled, tmp_path, args, verbose):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path, *args, ok=True)
    assert ("DavinciModel init" in r.stdout) is verbose


def test_debug_true_shows_the_traceback_of_an_error(ge, tmp_path):
    r = ge("run", "--model", tmp_path / "none.om", "--debug", "true")
    assert r.exit_code == 1 and "Traceback" in r.stderr


@pytest.mark.parametrize("option", ["--dymBatch", "--dym_batch", "--dym-batch"])
def test_dym_batch(ge, free, gears, tmp_path, ort_run, option):
    x = small_input((2, 3, 8, 8))
    x.tofile(tmp_path / "x.bin")  # a raw file: its shape is the gear's
    ge("run", "--model", gears["batch"], "--input", tmp_path / "x.bin", option, "2", "--output-dir", tmp_path, ok=True)
    np.testing.assert_allclose(np.load(tmp_path / "batch_output_0.npy"), ort_run(free, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("option", ["--dymHW", "--dym_hw"])
def test_dym_hw(ge, free, gears, tmp_path, ort_run, option):
    x = small_input((1, 3, 6, 10))
    x.tofile(tmp_path / "x.bin")
    ge("run", "--model", gears["hw"], "--input", tmp_path / "x.bin", option, "6,10", "--output-dir", tmp_path, ok=True)
    np.testing.assert_allclose(np.load(tmp_path / "hw_output_0.npy"), ort_run(free, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dims", ["x:2,3,6,8", "2,3,6,8"])  # ais_bench's spelling, msame's flat one
def test_dym_dims(ge, free, gears, tmp_path, ort_run, dims):
    x = small_input((2, 3, 6, 8))
    x.tofile(tmp_path / "x.bin")
    ge("run", "--model", gears["dims"], "--input", tmp_path / "x.bin", "--dymDims", dims, "--output-dir", tmp_path,
       ok=True)
    np.testing.assert_allclose(np.load(tmp_path / "dims_output_0.npy"), ort_run(free, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_dym_dims_of_the_wrong_length(ge, gears, error_line):
    r = ge("run", "--model", gears["dims"], "--dym_dims", "2,3,6")
    assert r.exit_code == 1 and error_line(r) == (
        "error: --dymDims '2,3,6' gives 3 dims; the model's inputs have 4 (x:[-1, 3, -1, 8])")


@pytest.mark.parametrize("option", ["--dymShape", "--dym_shape"])
def test_dym_shape_reads_bin_inputs_of_a_range_model(ge, free, gears, tmp_path, ort_run, option):
    x = small_input((3, 3, 8, 8))
    x.tofile(tmp_path / "x.bin")
    ge("run", "--model", gears["range"], "--input", tmp_path / "x.bin", option, "x:3,3,8,8", "--output-dir", tmp_path,
       ok=True)
    np.testing.assert_allclose(np.load(tmp_path / "range_output_0.npy"), ort_run(free, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_dym_shape_names_an_unknown_input(ge, gears, error_line):
    r = ge("run", "--model", gears["range"], "--dymShape", "y:3,3,8,8")
    assert r.exit_code == 1 and error_line(r) == "error: --dymShape: the model has no input 'y' (its inputs: x)"


def test_dym_shape_range_times_every_shape(ge, gears):
    r = ge("run", "--model", gears["range"], "--dym_shape_range", "x:1~3,3,8,8", "--json", ok=True)
    d = json.loads(r.stdout)
    assert [row["shape"] for row in d["shapes"]] == ["x:1,3,8,8", "x:2,3,8,8", "x:3,3,8,8"]
    assert d["best"] == max(d["shapes"], key=lambda row: row["throughput"])["shape"]
    r = ge("run", "--model", gears["range"], "--dymShape_range", "x:1-4,3,8,8", ok=True)
    assert "x:1,3,8,8" in r.stdout and "x:4,3,8,8" in r.stdout and "best throughput" in r.stdout


def test_dym_shape_range_refuses_inputs(ge, gears, tmp_path, error_line):
    np.save(tmp_path / "x.npy", small_input())
    r = ge("run", "--model", gears["range"], "--dymShape_range", "x:1~2,3,8,8", "--input", tmp_path / "x.npy")
    assert r.exit_code == 1 and error_line(r) == (
        "error: --dymShape_range times generated inputs at each of its shapes; it does not combine with --input")


def test_output_size(ge, compiled, tmp_path, error_line):
    ge("run", "--model", compiled["small"], "--outputSize", "1024", "--output-dir", tmp_path / "ok", ok=True)
    r = ge("run", "--model", compiled["small"], "--output_size", "1000", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1 and error_line(r) == (
        "error: output 0 ('y', float32 [1, 4, 8, 8]) needs 1024 bytes; --outputSize gives 1000")
    assert not (tmp_path / "o").exists()


# -- ais_bench ----------------------------------------------------------------------------------
def test_ais_bench_line_as_written(ge, models, compiled, tmp_path, ort_run):
    data = tmp_path / "data"
    data.mkdir()
    xs = {f"img{i}": small_input(seed=i) for i in range(3)}
    for stem, x in xs.items():
        x.tofile(data / f"{stem}.bin")
    r = ge("run", "--model", compiled["small"], "--input", data, "--output", tmp_path / "result", "--output_dirname",
           "r1", "--outfmt", "NPY", "--batchsize", "1", "--warmup_count", "2", "--loop", "1", "--device", "0", ok=True)
    folder = tmp_path / "result" / "r1"
    assert "loaded on sim (NPU id 0)" in r.stdout
    assert sorted(os.listdir(folder)) == [f"img{i}_output_0.npy" for i in range(3)]
    for stem, x in xs.items():
        np.testing.assert_allclose(np.load(folder / f"{stem}_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)


def test_short_options(ge, compiled, tmp_path):
    small_input().tofile(tmp_path / "x.bin")
    d = summary(ge, "-m", compiled["small"], "-i", tmp_path / "x.bin", "-o", tmp_path / "o", "-l", "3", "-d", "0")
    assert d["loop"] == 3 and d["device"] == "sim" and d["outputs"][0]["file"].endswith(".bin")


def test_output_and_output_dir_together(ge, compiled, tmp_path, error_line):
    r = ge("run", "--model", compiled["small"], "--output", tmp_path / "a", "--output-dir", tmp_path / "b")
    assert r.exit_code == 1 and error_line(r) == ("error: --output (msame's timestamped folder) and --output-dir "
                                                  "(exactly that folder) both say where outputs go: give one")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_output_dirname_needs_output(ge, compiled, error_line):
    r = ge("run", "--model", compiled["small"], "--output_dirname", "r1")
    assert r.exit_code == 1
    assert error_line(r) == "error: --output_dirname names a folder inside --output: give --output too"


@pytest.mark.parametrize("args", [("--pure_data_type", "random"), ("--seed", "0")])
def test_pure_data_type_random(ge, models, compiled, tmp_path, ort_run, args):
    d = summary(ge, "--model", compiled["small"], "--output-dir", tmp_path, *args)
    assert d["inputs"][0]["source"] == "random (seed 0)"
    (x,) = random_inputs(read_om(compiled["small"]).inputs, 0)
    np.testing.assert_allclose(np.load(tmp_path / "small_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("count", ["0", "3"])
def test_warmup_count(ge, compiled, tmp_path, count):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--warmup_count", count, "--loop", "2", "--stats",
       "--summary-json", tmp_path / "s.json", ok=True)
    runs = [e["run"] for e in json.loads((tmp_path / "s.json").read_text())["stats"]]
    assert runs == ["warm-up"] * int(count) + [0, 1]


def test_batchsize_sets_the_throughput_batch(ge, compiled, tmp_path):
    d = summary(ge, "--model", compiled["small"], "--output-dir", tmp_path, "--batchsize", "8", "--loop", "2")
    assert d["batch"] == 8 and d["throughput"] == pytest.approx(1000 * 8 / d["latency_ms"]["mean"])


def test_display_all_summary(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--display_all_summary", "true", "--loop",
           "3",
           "--device", "sim", "--summary-json", tmp_path / "s.json", ok=True)
    for label in ("H2D_latency", "NPU_compute_time", "D2H_latency"):
        assert f"[INFO] {label} (ms): min = " in r.stdout
    s = json.loads((tmp_path / "s.json").read_text())
    assert set(s["h2d_ms"]) == {"min", "max", "mean", "median", "p99"} and s["compute_ms"]["mean"] > 0


def test_profiler_true_writes_a_trace_under_output(ge, compiled, tmp_path):
    r = ge("run", "--model", compiled["small"], "--output", tmp_path / "out", "--profiler", "true", "--loop", "2",
           ok=True)
    trace = json.loads((tmp_path / "out" / "profiler" / "small_trace.json").read_text())
    tasks = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0]
    assert sorted((e["name"], e["args"]["run"]) for e in tasks) == sorted(
        (n, k) for n in ("conv", "add") for k in range(2))  # relu + add: one chain, named after its add
    assert "Time per op type" in r.stdout


def test_profile_file_and_summary_ops(ge, compiled, tmp_path):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--profile", tmp_path / "t.json", "--loop", "3",
       "--summary-json", tmp_path / "s.json", ok=True)
    trace = json.loads((tmp_path / "t.json").read_text())
    assert len([e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0]) == 3 * 2  # two tasks
    ops = json.loads((tmp_path / "s.json").read_text())["ops"]
    assert sum(o["count"] for o in ops) == 6 and sum(o["share"] for o in ops) == pytest.approx(1, abs=1e-3)


def test_dump_true_writes_every_op_output(ge, models, compiled, tmp_path, ort_run):
    x = small_input()
    np.save(tmp_path / "x.npy", x)
    ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output", tmp_path / "out", "--dump",
       "true", "--dump_npy", "true", ok=True)
    dump = tmp_path / "out" / "dump"
    files = sorted(os.listdir(dump))
    assert [f.split("_")[0] for f in files] == ["0000", "0001"]  # the conv, the relu + add chain
    model = onnx.load(models["small"])  # the conv's output as a graph output too
    model.graph.output.append(onnx.helper.make_tensor_value_info("c", onnx.TensorProto.FLOAT, [1, 4, 8, 8]))
    onnx.save(model, str(tmp_path / "with_c.onnx"))
    y, c = ort_run(str(tmp_path / "with_c.onnx"), {"x": x})
    conv = next(f for f in files if "_conv_" in f)
    np.testing.assert_allclose(np.load(dump / conv), c, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.load(dump / files[-1]), y, rtol=1e-5, atol=1e-5)


def test_profiler_and_dump_together_are_refused(ge, compiled, tmp_path, error_line):
    r = ge("run", "--model", compiled["small"], "--output", tmp_path, "--profiler", "true", "--dump", "true")
    assert r.exit_code == 1 and error_line(r) == (
        "error: --profiler and --dump cannot both be true (as msame and ais_bench): profile or dump, one per run")


def test_acl_json_path(ge, compiled, tmp_path, error_line):
    cfg = tmp_path / "acl.json"
    cfg.write_text(json.dumps({"dump": {"dump_path": str(tmp_path / "d"), "dump_mode": "output",
                                        "dump_list": [{"model_name": "small"}]}}))
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--acl_json_path", cfg, ok=True)
    assert len(os.listdir(tmp_path / "d")) == 2
    cfg.write_text(json.dumps({"profiler": {"switch": "on", "output": str(tmp_path / "p"), "aic_metrics": ""}}))
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--acl_json_path", cfg, ok=True)
    assert os.listdir(tmp_path / "p") == ["small_trace.json"]
    cfg.write_text(json.dumps({"dump": {"dump_path": "d", "dump_mode": "all"}}))
    r = ge("run", "--model", compiled["small"], "--acl_json_path", cfg)
    assert r.exit_code == 1 and error_line(r) == (
        f"error: {cfg}: dump.dump_mode 'all': ge dumps each op's outputs (an op's inputs are its producers' outputs); "
        "use \"output\"")


@pytest.mark.parametrize("mode", ["--auto_set_dymshape_mode", "--auto_set_dymdims_mode"])
def test_auto_set_modes_take_each_samples_shape(ge, free, gears, tmp_path, ort_run, mode):
    om = gears["range"] if "dymshape" in mode else gears["batch"]
    data = tmp_path / "data"
    data.mkdir()
    xs = {"a": small_input((1, 3, 8, 8), 1), "b": small_input((2, 3, 8, 8), 2)}
    for stem, x in xs.items():
        np.save(data / f"{stem}.npy", x)
    ge("run", "--model", om, "--input", data, "--output", tmp_path / "out", "--output_dirname", "r", "--outfmt", "NPY",
       mode, "true", ok=True)
    for stem, x in xs.items():
        np.testing.assert_allclose(np.load(tmp_path / "out" / "r" / f"{stem}_output_0.npy"),
                                   ort_run(free, {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_output_batchsize_axis_is_checked_against_each_output(ge, compiled, tmp_path, error_line):
    ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--output_batchsize_axis", "3", ok=True)
    r = ge("run", "--model", compiled["small"], "--output-dir", tmp_path / "o", "--output_batchsize_axis", "4")
    assert r.exit_code == 1 and error_line(r) == "error: --output_batchsize_axis 4: output 0 ('y') has rank 4"


@pytest.mark.parametrize("args", [("--run_mode", "full"), ("--run_mode", "tensor"),
                                  ("--profiler_rename", "false"), ("--npu_id", "1"),
                                  ("--energy_consumption", "false"), ("--executor", "parallel")])
def test_options_that_keep_the_results(ge, models, compiled, tmp_path, ort_run, args):
    x = small_input()
    np.save(tmp_path / "x.npy", x)
    ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "o", *args,
       ok=True)
    np.testing.assert_allclose(np.load(tmp_path / "o" / "small_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def test_msame_dataset_of_two_inputs(ge, models, compiled, tmp_path, ort_run):
    rng = np.random.default_rng(3)
    for name in ("da", "db"):
        (tmp_path / name).mkdir()
    feeds = {}
    for stem in ("s0", "s1"):
        a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
        a.tofile(tmp_path / "da" / f"{stem}.bin")
        b.tofile(tmp_path / "db" / f"{stem}.bin")
        feeds[stem] = {"a": a, "b": b}
    r = ge("run", "--model", compiled["two"], "--input", f"{tmp_path / 'da'},{tmp_path / 'db'}", "--output",
           tmp_path / "out", ok=True)
    folder = only_folder(tmp_path / "out")
    for stem, feed in feeds.items():
        for i, want in enumerate(ort_run(models["two"], feed)):
            np.testing.assert_array_equal(np.fromfile(os.path.join(folder, f"{stem}_output_{i}.bin"), np.float32)
                                          .reshape(2, 3), want)
    assert "2 sample(s)" in r.stdout


REFUSED = [
    (("--aipp_config", "aipp.config"), "--aipp_config aipp.config: model 'small' has no dynamic AIPP input (compile "
     "it with --insert_op_conf and aipp_mode: dynamic)"),
    (("--energy_consumption", "true"), "--energy_consumption: there is no NPU power sensor to read (ais_bench reads "
     "npu-smi); ge runs on the CPU or a simulated NPU"),
    (("--backend", "trtexec"), "--backend trtexec: ais_bench's backend runs another engine (trtexec: TensorRT); ge "
     "runs the OM itself"),
    (("--perf", "true"), "--perf: trtexec's per-layer report belongs to ais_bench's trtexec backend; ge's per-op "
     "profile is --profiler true"),
    (("--divide_input", "true"), "--divide_input: splitting inputs across several devices needs a multi-device run, "
     "which ge does not do (one simulated NPU per process)"),
]


@pytest.mark.parametrize("args,message", REFUSED)
def test_refused_options(ge, compiled, tmp_path, error_line, args, message):
    r = ge("run", "--model", compiled["small"], "--output", tmp_path / "o", *args)
    assert r.exit_code == 1 and error_line(r) == f"error: {message}"
    assert not (tmp_path / "o").exists()


def test_switch_values(ge, compiled, tmp_path):
    for value in ("TRUE", "1", "yes", "n", "False"):
        ge("run", "--model", compiled["small"], "--output-dir", tmp_path, "--display_all_summary", value, ok=True)
    assert ge("run", "--model", compiled["small"], "--dump", "maybe").exit_code == 2


def test_the_python_api_does_what_the_cli_does(free, gears, tmp_path, ort_run):
    from ge.core.acl import inference
    model_id = api.load_from_file(gears["batch"])
    try:
        descs = inference.select_gear(model_id, batch=2)
        (x,) = inference.generated_inputs(descs, "random", 5)
        outputs, latencies, runs = inference.timed_runs(api.model(model_id).default_context, [x], loop=2, warmup=1)
        assert len(latencies) == 2 and [r["run"] for r in runs] == ["warm-up", 0, 1]
        np.testing.assert_allclose(outputs[0], ort_run(free, {"x": x})[0], rtol=1e-5, atol=1e-6)
    finally:
        api.unload(model_id)
    import time
    assert inference.output_folder("out", now=0) == os.path.join("out", time.strftime("%Y%m%d_%H%M%S",
                                                                                      time.localtime(0)))
    assert TIMESTAMP.fullmatch(os.path.basename(inference.output_folder("out")))
    assert inference.output_folder("out", "r1") == os.path.join("out", "r1")
    with pytest.raises(api.GeError, match=r"--output_dirname '\.\./x': give a folder name inside --output"):
        inference.output_folder("out", "../x")
    from ge.core.kernels import blas, native
    before = native.threads(), blas.openblas_threads_local(1)
    blas.openblas_threads_local(before[1] or 1)
    with inference.threads(1):
        assert native.threads() == 1
    assert native.threads() == before[0] and blas.openblas_threads_local(before[1] or 1) == before[1]
    assert inference.dym_shape_range("x:1~2,3;y:4-6") == ["x:1,3;y:4", "x:1,3;y:6", "x:2,3;y:4", "x:2,3;y:6"]


@pytest.mark.parametrize("axis", ["0", "1"])
def test_batch_of_files_and_output_batchsize_axis(ge, free, tmp_path, ort_run, axis):
    """ais_bench: a batch-2 model reads batch-1 files two per execution (the odd one out padded) and
    splits each output back per file along --output_batchsize_axis."""
    om = api.atc(free, str(tmp_path / "b2"), input_shape="x:2,3,8,8").om_path
    data = tmp_path / "data"
    data.mkdir()
    xs = {f"s{i}": small_input(seed=i) for i in range(3)}
    for stem, x in xs.items():
        x.tofile(data / f"{stem}.bin")
    d = summary(ge, "--model", om, "--input", data, "--output-dir", tmp_path / "o", "--output_batchsize_axis", axis)
    assert (d["samples"], d["executions"], d["files_per_batch"]) == (3, 2, 2)
    assert sorted(os.listdir(tmp_path / "o")) == [f"s{i}_output_0.npy" for i in range(3)]
    groups = [["s0", "s1"], ["s2", "s2"]]  # the last group padded with its first sample
    for group in groups:
        full = ort_run(free, {"x": np.concatenate([xs[s] for s in group])})[0]  # [2, 4, 8, 8]
        for j, stem in enumerate(group[:1] if group[0] == group[1] else group):
            got = np.load(tmp_path / "o" / f"{stem}_output_0.npy")
            want = full[j:j + 1] if axis == "0" else full[:, 2 * j:2 * j + 2]  # axis 1: half the channels each
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dataset_warmup_count(ge, compiled, tmp_path, monkeypatch):
    from ge.core.acl import dataset
    calls = []
    real = dataset.execute
    monkeypatch.setattr(dataset, "execute", lambda model_id, inputs: calls.append(1) or real(model_id, inputs))
    data = tmp_path / "data"
    data.mkdir()
    for i in range(2):
        small_input(seed=i).tofile(data / f"s{i}.bin")
    d = summary(ge, "--model", compiled["small"], "--input", data, "--output-dir", tmp_path / "o", "--warmup_count",
                "3")
    assert d["warmup"] == 3 and d["samples"] == 2 and len(calls) == 3 + 2


def test_pipeline_reads_the_next_sample_on_another_thread(ge, models, compiled, tmp_path, ort_run, monkeypatch,
                                                          error_line):
    import threading

    from ge.core.acl import dataset
    readers = []
    real = dataset.load_inputs
    monkeypatch.setattr(dataset, "load_inputs",
                        lambda paths, descs: readers.append(threading.current_thread().name) or real(paths, descs))
    data = tmp_path / "data"
    data.mkdir()
    xs = {f"s{i}": small_input(seed=i) for i in range(3)}
    for stem, x in xs.items():
        x.tofile(data / f"{stem}.bin")
    ge("run", "--model", compiled["small"], "--input", data, "--output-dir", tmp_path / "o", "--pipeline", "true",
       ok=True)
    assert len(readers) == 3 and all(name.startswith("ge-prefetch") for name in readers)
    for stem, x in xs.items():
        np.testing.assert_allclose(np.load(tmp_path / "o" / f"{stem}_output_0.npy"),
                                   ort_run(models["small"], {"x": x})[0], rtol=1e-5, atol=1e-6)
    np.zeros(5, np.float32).tofile(data / "s1.bin")  # a bad sample read ahead is reported when its turn comes
    r = ge("run", "--model", compiled["small"], "--input", data, "--output-dir", tmp_path / "p", "--pipeline", "true")
    assert r.exit_code == 1 and "s1.bin" in error_line(r)
    assert os.listdir(tmp_path / "p") == ["s0_output_0.npy"]


def test_threads_apply_to_the_run_only(ge, models, compiled, tmp_path, ort_run, monkeypatch):
    from ge.core.acl import inference
    from ge.core.kernels import native
    seen = []
    real = inference.timed_runs
    monkeypatch.setattr(inference, "timed_runs", lambda *a, **k: seen.append(native.threads()) or real(*a, **k))
    before = native.threads()
    x = small_input()
    np.save(tmp_path / "x.npy", x)
    ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path, "--threads", "1",
       ok=True)
    assert seen == [1] and native.threads() == before
    np.testing.assert_allclose(np.load(tmp_path / "small_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def dataset_of(tmp_path, n=2) -> tuple:
    data = tmp_path / "data"
    data.mkdir()
    xs = {f"s{i}": small_input(seed=i) for i in range(n)}
    for stem, x in xs.items():
        x.tofile(data / f"{stem}.bin")
    return data, xs


def test_dataset_profiler_traces_every_sample(ge, compiled, tmp_path):
    data, _ = dataset_of(tmp_path)
    d = summary(ge, "--model", compiled["small"], "--input", data, "--output", tmp_path / "out", "--profiler", "true",
                "--display_all_summary", "true", "--stats")
    trace = json.loads((tmp_path / "out" / "profiler" / "small_trace.json").read_text())
    tasks = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0]
    assert sorted((e["name"], e["args"]["sample"]) for e in tasks) == sorted(
        (n, s) for n in ("conv", "add") for s in ("s0", "s1"))
    assert sum(o["count"] for o in d["ops"]) == 4
    assert [e["run"] for e in d["stats"]] == [0, 1] and set(d["compute_ms"]) == {"min", "max", "mean", "median", "p99"}


def test_dataset_dump_per_sample(ge, models, compiled, tmp_path, ort_run):
    data, xs = dataset_of(tmp_path)
    ge("run", "--model", compiled["small"], "--input", data, "--output", tmp_path / "out", "--dump", "true", ok=True)
    for stem, x in xs.items():
        files = sorted(os.listdir(tmp_path / "out" / "dump" / stem))
        assert len(files) == 2
        np.testing.assert_allclose(np.load(tmp_path / "out" / "dump" / stem / files[-1]),
                                   ort_run(models["small"], {"x": x})[0], rtol=1e-5, atol=1e-6)


def test_dataset_refuses_contexts(ge, compiled, tmp_path, error_line):
    data, _ = dataset_of(tmp_path)
    r = ge("run", "--model", compiled["small"], "--input", data, "--contexts", "2", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1 and error_line(r) == (
        "error: --contexts and --executor time one set of inputs; a dataset folder runs its samples in turn (give one "
        "sample's files with --input)")


def test_input_mixing_folders_and_files(ge, compiled, tmp_path, error_line):
    data, _ = dataset_of(tmp_path)
    np.zeros((2, 3), np.float32).tofile(tmp_path / "b.bin")
    r = ge("run", "--model", compiled["two"], "--input", f"{data},{tmp_path / 'b.bin'}", "--output-dir", tmp_path / "o")
    assert r.exit_code == 1 and error_line(r) == (
        f"error: --input mixes folders and files ({data}, {tmp_path / 'b.bin'}): give files, or one folder per input")


def test_dump_of_a_dynamic_model_is_refused(ge, gears, tmp_path, error_line):
    r = ge("run", "--model", gears["range"], "--dymShape", "x:2,3,8,8", "--output", tmp_path / "out", "--dump", "true")
    assert r.exit_code == 1 and "has dynamic shapes; the dump covers static models and gears" in error_line(r)
    assert not any(f.endswith(".bin") for _, _, fs in os.walk(tmp_path) for f in fs)


def test_profile_and_dump_of_a_gear(ge, gears, tmp_path):
    d = summary(ge, "--model", gears["batch"], "--dymBatch", "2", "--output", tmp_path / "out", "--profiler", "true")
    assert d["inputs"][0]["shape"] == [2, 3, 8, 8] and sum(o["count"] for o in d["ops"]) == 2
    ge("run", "--model", gears["batch"], "--dymBatch", "2", "--output", tmp_path / "o2", "--dump", "true", ok=True)
    dumped = sorted(os.listdir(tmp_path / "o2" / "dump"))
    assert len(dumped) == 2 and np.load(tmp_path / "o2" / "dump" / dumped[0]).shape == (2, 4, 8, 8)
