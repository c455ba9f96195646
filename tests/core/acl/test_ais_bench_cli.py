"""`python3 -m ais_bench ...` as the model zoos run it: preprocess (ndarray.tofile into a folder)
-> ais_bench in a subprocess -> postprocess reading `<output>/<dirname>/<stem>_<i>.<fmt>`, compared
with onnxruntime; its batching, input pairing, summary, and its refusals with their messages."""
from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from ge.core.acl.ais_bench import cli

from .conftest import image

TOL = dict(rtol=1e-5, atol=1e-5)


def preprocess(folder, count, shape=(1, 3, 8, 8), ext="bin"):
    """A zoo preprocess script: one file per sample; returns the arrays by stem."""
    os.makedirs(folder, exist_ok=True)
    samples = {}
    for i in range(count):
        x = image(shape, seed=100 + i)
        stem = f"sample_{i}"
        x.tofile(os.path.join(folder, f"{stem}.bin")) if ext == "bin" else np.save(os.path.join(folder, stem), x)
        samples[stem] = x
    return samples


@pytest.mark.parametrize("outfmt", ["BIN", "NPY", "TXT"])
def test_preprocess_ais_bench_postprocess(models, ais_bench, tmp_path, outfmt):
    samples = preprocess(tmp_path / "prep", 3)
    r = ais_bench("--model", models.om["static"], "--input", "prep/", "--output", "result", "--output_dirname", "bs1",
                  "--outfmt", outfmt, "--batchsize", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    folder = tmp_path / "result" / "bs1"
    ext = outfmt.lower()
    assert sorted(os.listdir(folder)) == sorted(f"{s}_{i}.{ext}" for s in samples for i in (0, 1))
    for stem, x in samples.items():
        want = models.conv(x)
        for i in (0, 1):
            path = folder / f"{stem}_{i}.{ext}"
            if outfmt == "BIN":
                got = np.fromfile(path, dtype=np.float32).reshape(1, 5)
            elif outfmt == "NPY":
                got = np.load(path)
            else:
                got = np.loadtxt(path, dtype=np.float32).reshape(1, 5)
            np.testing.assert_allclose(got, want[i], rtol=1e-5, atol=1e-5 if outfmt != "TXT" else 1e-6 + 5e-7)
    summary = json.loads((tmp_path / "result" / "bs1_summary.json").read_text())
    assert summary["filesinfo"]["0"] == {"infiles": ["prep/sample_0.bin"],
                                         "outfiles": [f"result/bs1/sample_0_0.{ext}", f"result/bs1/sample_0_1.{ext}"]}
    assert summary["NPU_compute_time"]["mean"] > 0 and summary["throughput"] > 0
    assert "[INFO] -----------------Performance Summary------------------" in r.stdout
    assert re.search(r"\[INFO\] throughput 1000\*batchsize.mean\(1\)/NPU_compute_time.mean\([0-9.e-]+\): [0-9.]+",
                     r.stdout)
    assert r.stderr == ""


def test_txt_is_ais_bench_s_layout(models, ais_bench, tmp_path):
    """Rows of the last axis, "%f " per value; an int64 output "%d "."""
    rng = np.random.default_rng(4)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    for name, x in (("a", a), ("b", b)):
        os.makedirs(tmp_path / name)
        x.tofile(tmp_path / name / "0.bin")
    r = ais_bench("--model", models.om["two"], "--input", "a,b", "--output", "out", "--output_dirname", "d",
                  "--outfmt", "TXT", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    s, p, k = models.two(a, b)
    assert (tmp_path / "out/d/0_0.txt").read_text() == "".join(" ".join(f"{v:f}" for v in row) + " \n" for row in s)
    assert (tmp_path / "out/d/0_2.txt").read_text() == " ".join(str(v) for v in k) + " \n"
    np.testing.assert_allclose(np.loadtxt(tmp_path / "out/d/0_1.txt"), p, atol=1e-6)


def test_files_per_execution_and_the_padded_last_batch(models, ais_bench, tmp_path):
    """A batch-4 model and batch-1 files: 4 files per execution, the 5th sample padded, its padding unwritten."""
    samples = preprocess(tmp_path / "prep", 5)
    r = ais_bench("--model", models.om["batch4"], "--input", tmp_path / "prep", "--output", tmp_path / "out",
                  "--output_dirname", "bs4", "--outfmt", "NPY")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "out/bs4")) == sorted(f"sample_{i}_{k}.npy" for i in range(5) for k in (0, 1))
    for stem, x in samples.items():
        for k, want in enumerate(models.conv(x)):
            np.testing.assert_allclose(np.load(tmp_path / f"out/bs4/{stem}_{k}.npy"), want, **TOL)
    summary = json.loads((tmp_path / "out/bs4_summary.json").read_text())
    assert sorted(summary["filesinfo"], key=int) == [str(i) for i in range(5)]
    assert len(summary["npu_compute_time_list"]) == 2  # two executions
    assert "throughput 1000*batchsize.mean(4)/" in r.stdout


def test_comma_folders_pair_files_in_natural_order(models, ais_bench, tmp_path):
    rng = np.random.default_rng(6)
    a_names, b_names = ["1.bin", "2.bin", "10.bin"], ["01.bin", "02.bin", "03.bin"]
    pairs = {}
    for an, bn in zip(a_names, b_names):  # natural order pairs 10.bin with 03.bin
        a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
        for folder, name, x in (("A", an, a), ("B", bn, b)):
            os.makedirs(tmp_path / folder, exist_ok=True)
            x.tofile(tmp_path / folder / name)
        pairs[an.split(".")[0]] = (a, b)
    r = ais_bench("--model", models.om["two"], "--input", f"{tmp_path / 'A'},{tmp_path / 'B'}", "--output",
                  tmp_path / "out", "--output_dirname", "r")
    assert r.returncode == 0, r.stderr
    for stem, (a, b) in pairs.items():
        for i, want in enumerate(models.two(a, b)):
            got = np.fromfile(tmp_path / f"out/r/{stem}_{i}.bin", dtype=want.dtype).reshape(want.shape)
            np.testing.assert_allclose(got, want, **TOL)


def test_timestamped_folder_and_no_input(models, ais_bench, tmp_path):
    r = ais_bench("--model", models.om["static"], "--output", tmp_path / "out", "--loop", "3", "--warmup_count", "2")
    assert r.returncode == 0, r.stderr
    (dirname,) = [n for n in os.listdir(tmp_path / "out") if not n.endswith(".json")]
    assert re.fullmatch(r"\d{4}_\d{2}_\d{2}-\d{2}_\d{2}_\d{2}", dirname)
    summary = json.loads((tmp_path / "out" / f"{dirname}_summary.json").read_text())
    assert len(summary["npu_compute_time_list"]) == 3  # --loop 3 after the warm-up runs
    zeros = np.zeros((1, 3, 8, 8), np.float32)
    got = np.fromfile(tmp_path / "out" / dirname / "pure_infer_data_0.bin", np.float32).reshape(1, 5)
    np.testing.assert_allclose(got, models.conv(zeros)[0], **TOL)
    assert "[INFO] warm up 2 done" in r.stdout


def test_no_output_writes_nothing(models, ais_bench, tmp_path):
    preprocess(tmp_path / "prep", 2)
    r = ais_bench("--model", models.om["static"], "--input", "prep", "--device", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["prep"] and "Performance Summary" in r.stdout


@pytest.mark.parametrize("name,args,shape", [
    ("gears", ("--dymBatch", "2"), (2, 3, 8, 8)),
    ("hw", ("--dymHW", "6,10"), (1, 3, 6, 10)),
    ("dims", ("--dymDims", "x:2,3,6,8"), (2, 3, 6, 8)),
    ("range", ("--dymShape", "x:3,3,8,8", "--outputSize", "1000,1000"), (3, 3, 8, 8)),
])
def test_dynamic_options(models, ais_bench, tmp_path, name, args, shape):
    samples = preprocess(tmp_path / "prep", 2, shape)
    r = ais_bench("--model", models.om[name], "--input", tmp_path / "prep", "--output", tmp_path / "o",
                  "--output_dirname", "d", *args)
    assert r.returncode == 0, r.stderr
    for stem, x in samples.items():
        got = np.fromfile(tmp_path / f"o/d/{stem}_1.bin", np.float32).reshape(shape[0], 5)
        np.testing.assert_allclose(got, models.conv(x)[1], **TOL)
    assert f"batchsize.mean({shape[0]})" in r.stdout


@pytest.mark.parametrize("option,name", [("--auto_set_dymshape_mode", "range"), ("--auto_set_dymdims_mode", "dims")])
def test_auto_set_modes_take_each_file_s_shape(models, ais_bench, tmp_path, option, name):
    os.makedirs(tmp_path / "prep")
    shapes = [(1, 3, 8, 8), (2, 3, 6, 8)] if name == "dims" else [(1, 3, 8, 8), (4, 3, 8, 8), (2, 3, 8, 8)]
    xs = [image(s, seed=i) for i, s in enumerate(shapes)]
    for i, x in enumerate(xs):
        np.save(tmp_path / "prep" / f"s{i}.npy", x)
    r = ais_bench("--model", models.om[name], "--input", tmp_path / "prep", "--output", tmp_path / "o",
                  "--output_dirname", "d", "--outfmt", "NPY", option, "1", "--outputSize", "1000,1000")
    assert r.returncode == 0, r.stderr
    for i, x in enumerate(xs):
        np.testing.assert_allclose(np.load(tmp_path / f"o/d/s{i}_0.npy"), models.conv(x)[0], **TOL)


def test_same_numbers_as_ge_run_in_its_msame_layout(models, ais_bench, tmp_path, ge_cli):
    preprocess(tmp_path / "prep", 5)
    r = ais_bench("--model", models.om["batch4"], "--input", tmp_path / "prep", "--output", tmp_path / "ais",
                  "--output_dirname", "r")
    assert r.returncode == 0, r.stderr
    ge_cli("run", "--model", models.om["batch4"], "--input", tmp_path / "prep", "--output", tmp_path / "msame",
           "--output_dirname", "r")
    for i in range(5):
        for k in (0, 1):
            ais = np.fromfile(tmp_path / f"ais/r/sample_{i}_{k}.bin", np.float32)
            msame = np.fromfile(tmp_path / f"msame/r/sample_{i}_output_{k}.bin", np.float32)
            np.testing.assert_array_equal(ais, msame)


def test_device_list_splits_the_samples_over_devices(models, ais_bench, tmp_path):
    samples = preprocess(tmp_path / "prep", 5)
    r = ais_bench("--model", models.om["static"], "--input", "prep", "--output", "out", "--output_dirname", "md",
                  "--device", "0,1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    shares = {d: sorted(os.listdir(tmp_path / "out/md" / d)) for d in ("device0", "device1")}
    assert shares == {"device0": [f"sample_{i}_{k}.bin" for i in range(3) for k in (0, 1)],
                      "device1": [f"sample_{i}_{k}.bin" for i in (3, 4) for k in (0, 1)]}
    for stem, x in samples.items():
        device = "device0" if int(stem[-1]) < 3 else "device1"
        got = np.fromfile(tmp_path / "out/md" / device / f"{stem}_1.bin", np.float32).reshape(1, 5)
        np.testing.assert_allclose(got, models.conv(x)[1], **TOL)
    assert sorted(n for n in os.listdir(tmp_path / "out/md") if n.endswith(".json")) == [
        "device0_summary.json", "device1_summary.json"]
    assert re.search(r"i:1 device_1 throughput:[0-9.]+ start_time", r.stdout) and "summary throughput:" in r.stdout


def test_profiler_and_dump(models, ais_bench, tmp_path):
    x = preprocess(tmp_path / "prep", 1)["sample_0"]
    r = ais_bench("--model", models.om["static"], "--input", "prep", "--output", "p", "--profiler", "true",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "[INFO] profiler mode with input change warmup_count to 0" in r.stdout
    trace = json.loads((tmp_path / "p/profiler/static_trace.json").read_text())
    assert {e["args"]["sample"] for e in trace["traceEvents"] if e["ph"] == "X"} == {"sample_0"}
    r = ais_bench("--model", models.om["static"], "--input", "prep", "--output", "d", "--dump", "1", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    dumped = sorted(os.listdir(tmp_path / "d/dump/sample_0"))
    assert dumped[0].startswith("0000_Conv") and len(dumped) >= 3
    softmax = next(f for f in dumped if "Softmax" in f)
    np.testing.assert_allclose(np.load(tmp_path / "d/dump/sample_0" / softmax), models.conv(x)[1], **TOL)


def test_dym_shape_range_names_the_best_shape(models, ais_bench):
    r = ais_bench("--model", models.om["range"], "--dymShape_range", "x:1~2,3,8,8")
    assert r.returncode == 0, r.stderr
    assert "[INFO] dymShape:x:1,3,8,8 " in r.stdout and "[INFO] dymShape:x:2,3,8,8 " in r.stdout
    assert re.search(r"\[INFO\] the best shape:x:[12],3,8,8 throughput:", r.stdout)


def test_output_dir_is_a_prefix_of_output_dirname(models, ais_bench, tmp_path):
    """argparse takes a unique prefix, as ais_bench's does: zoo lines write --output_dir."""
    preprocess(tmp_path / "prep", 1)
    r = ais_bench("--model", models.om["static"], "--input", "prep", "--output", "o", "--output_dir", "bs1",
                  cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path / "o/bs1")) == ["sample_0_0.bin", "sample_0_1.bin"]


@pytest.fixture
def ge_cli():
    from click.testing import CliRunner

    from ge.cli.main import cli as ge

    def run(*args):
        result = CliRunner().invoke(ge, [str(a) for a in args])
        assert result.exit_code == 0, result.output
        return result
    return run


# -- options ais_bench's argparse refuses: usage on stderr, exit 2 ---------------------------------
@pytest.mark.parametrize("args,message", [
    (("--model", "m.om", "--bogus", "1"), "error: unrecognized arguments: --bogus 1"),
    (("--model", "m.om", "--outfmt", "CSV"), "error: argument --outfmt: invalid choice: 'CSV'"),
    (("--model", "m.om", "--loop", "0"), "error: argument --loop/-l: 0 is an invalid positive int value"),
    (("--model", "m.om", "--device", "300"), "device:300 is invalid. valid value range is [0, 63]"),
    (("--model", "m.om", "--device", "0,300"), "300 of device:0,300 is invalid. valid value range is [0, 63]"),
    (("--model", "m.om", "--debug", "maybe"), "Boolean value expected true, 1, false, 0 with case insensitive."),
    (("--input", "x"), "error: the following arguments are required: --model/-m"),
])
def test_argparse_refusals(args, message, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(list(args))
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and message in err


# -- runs ais_bench or ge refuses: one [ERROR] line on stderr, exit 1, no traceback ------------------
@pytest.mark.parametrize("args,message", [
    (("--output_dirname", "d"), "parameter --output_dirname cann't be used alone. Please use it together with the "
                                "parameter --output!"),
    (("--profiler", "1", "--dump", "1", "--output", "o"), "parameter --profiler cannot be true at the same time as "
                                                          "parameter --dump, please check them!"),
    (("--aipp_config", "a.config"), "the model has no dynamic AIPP input (ascend_dynamic_aipp_data): compile it "
                                    "with --insert_op_conf and aipp_mode: dynamic"),
    (("--thread", "2"), "need to set --pipeline when setting thread number to be more than one."),
    (("--dump", "1"), "when dump or profiler, miss output path, please check them!"),
    (("--input", "A"), "Invalid args. args input dir num:1 not equal to model inputs num:2 (a, b)"),
    (("--input", "nowhere"), "Invalid args. nowhere of --input is invalid"),
    (("--input", "A,B"), "the input folders hold different numbers of files (A: 2, B: 1): one file per sample in each"),
    (("--input", "A/0.bin,A/1.bin"), "input 'b' (file 'A/1.bin'): the file has 12 bytes, the input needs 24 "
                                     "(float32 [2, 3])"),
])
def test_run_refusals(models, ais_bench, tmp_path, args, message):
    os.makedirs(tmp_path / "A")
    os.makedirs(tmp_path / "B")
    np.zeros((2, 3), np.float32).tofile(tmp_path / "A" / "0.bin")
    np.zeros(3, np.float32).tofile(tmp_path / "A" / "1.bin")
    np.zeros((2, 3), np.float32).tofile(tmp_path / "B" / "0.bin")
    r = ais_bench("--model", models.om["two"], *args, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr == f"[ERROR] {message}\n"
    assert not os.path.exists(tmp_path / "o")


PROBE = """
import json, runpy, sys
import numpy as np
from ais_bench.infer.interface import InferSession
for path, mode, shape in json.loads(sys.argv[1]):
    InferSession(0, path).infer([np.zeros(shape, np.float32)], mode=mode, custom_sizes=1000)
sys.argv = ["ais_bench", "--model", json.loads(sys.argv[1])[0][0]]
try:
    runpy.run_module("ais_bench", run_name="__main__")
except SystemExit as e:
    assert e.code == 0, e.code
print(json.dumps(sorted(m for m in sys.modules if m.startswith(("ge.core.compile", "ge.core.passes", "ge.formats.onnx")))))
"""


def test_a_deployed_runtime_imports_no_compiler(models, tmp_path):
    """InferSession scripts and the command line load and run OMs without ATC (issue 13's rule)."""
    import subprocess
    import sys

    from ge.core.acl import shim_path
    runs = [(models.om["static"], "static", [1, 3, 8, 8]), (models.om["gears"], "dymbatch", [2, 3, 8, 8]),
            (models.om["range"], "dymshape", [3, 3, 8, 8]), (models.om["unknown"], "dymshape", [1, 3, 5, 5])]
    r = subprocess.run([sys.executable, "-c", PROBE, json.dumps(runs)], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=shim_path()), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1]) == []
