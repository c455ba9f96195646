"""Issue 29's first ten minutes: what a new user met, each with the behaviour expected instead."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from ge.core import api
from ge.formats.om import read_om, write_om

GEARS = ("--input_shape", "x:-1,3,8,8", "--dynamic_batch_size", "1,2,4,8")


@pytest.fixture(scope="module")
def gear_om(models, tmp_path_factory):
    """models["dynamic"] (Conv, Relu, Add on x [N, 3, 8, 8]) compiled with batch gears 1, 2, 4, 8, and
    the `ge atc --json` summary."""
    from .conftest import Ge
    d = tmp_path_factory.mktemp("gears")
    r = Ge()("atc", "--model", models["dynamic"], "--output", d / "g", *GEARS, "--json", ok=True)
    return str(d / "g.om"), json.loads(r.stdout)


# -- 2. gear models describe themselves truthfully --------------------------------------------------
def test_gear_summary_has_dynamic_batch_dims_the_gears_and_the_graph(ge, models, gear_om, tmp_path):
    _, s = gear_om
    static = json.loads(ge("atc", "--model", models["small"], "--output", tmp_path / "s", "--json", ok=True).stdout)
    assert s["inputs"] == [{"name": "x", "dtype": "float32", "shape": [-1, 3, 8, 8]}]
    assert s["outputs"] == [{"name": "y", "dtype": "float32", "shape": [-1, 4, 8, 8]}]
    assert s["gears"] == [[1], [2], [4], [8]]
    assert s["ops"] == static["ops"] and s["nodes"] == static["nodes"] > 0
    assert s["weights"]["inline"] == static["weights"]["inline"] == {"count": 2, "bytes": (4 * 3 * 3 * 3 + 4) * 4}


def test_gear_summary_tables_show_the_weights_and_dynamic_outputs(ge, models, tmp_path):
    r = ge("atc", "--model", models["dynamic"], "--output", tmp_path / "g", *GEARS, "--log=info", ok=True)
    assert "2 inline weights, 448 B of data" in r.stdout
    assert "│ output │ y    │ float32 │ [-1, 4, 8, 8] │" in r.stdout


def test_gear_model_outputs_from_python_and_inspect(gear_om):
    path, _ = gear_om
    model_id = api.load_from_file(path)
    try:
        m = api.model(model_id)
        assert [(d.name, tuple(d.shape)) for d in m.inputs] == [("x", (-1, 3, 8, 8))]
        assert [(d.name, tuple(d.shape)) for d in m.outputs] == [("y", (-1, 4, 8, 8))]
        y = api.execute(model_id, [np.ones((4, 3, 8, 8), np.float32)])[0]
        assert y.shape == (4, 4, 8, 8)
    finally:
        api.unload(model_id)
    d = api.inspect(path)["dynamic"]
    assert d["outputs"] == [{"name": "y", "dtype": "float32", "shape": [-1, 4, 8, 8]}]
    assert [g["outputs"] for g in d["gears"]] == [{"y": [n, 4, 8, 8]} for n in (1, 2, 4, 8)]


def test_gear_model_read_back_derives_its_outputs_from_the_gears(gear_om, tmp_path):
    """An OM written before the fix stored gear 0's output shape: reading it gives the truthful one."""
    path, _ = gear_om
    dyn = read_om(path)
    dyn.outputs = [d._replace(shape=(1, 4, 8, 8)) for d in dyn.outputs]
    write_om(dyn, tmp_path / "old.om")
    assert [tuple(d.shape) for d in read_om(tmp_path / "old.om").outputs] == [(-1, 4, 8, 8)]


def test_inspect_of_a_gear_model_prints_its_header_and_partitions(ge, gear_om):
    path, _ = gear_om
    out = ge("inspect", path, ok=True).stdout
    header = out[out.index("Header"):out.index("Partitions")]
    assert "│ magic " in header and "│ model_num " in header and "│ 5 " in header
    parts = out[out.index("Partitions"):out.index("Root inputs")]
    assert parts.count("MODEL_DEF") == 5 and parts.count("TASK_INFO") == 5
    assert out.count("Header") == 1  # the submodels' sections follow, without empty header tables
    assert "│ output │ y    │ float32 │ [-1, 4, 8, 8] │" in out


# -- 1. an OM of CANN's ATC -------------------------------------------------------------------------
def cann_om(name: bytes = b"resnet50", soc: bytes = b"Ascend310P3") -> bytes:
    """A file as CANN's ATC writes it: the 256-byte ModelFileHeader (magic 0x444F4D49, head_size 256,
    version 0x10000000, 64-byte checksum, length, flags, name[32], ops, user info[32], om_ir_version,
    platform_version[20], ...), a ModelPartitionTable, then protobuf partitions."""
    import struct
    header = struct.pack("<III64sIBBBB32sI32sI20sB", 0x444F4D49, 256, 0x10000000, b"\x11" * 64, 64, 0, 0, 0, 0,
                         name, 7, b"", 2, soc, 0)
    table = struct.pack("<IIII", 1, 0, 0, 48)  # one MODEL_DEF partition
    return header.ljust(256, b"\0") + table + b"\x0a\x08resnet50" + b"\0" * 38


@pytest.mark.parametrize("command", ["run", "inspect", "atc-mode-6"])
def test_a_cann_om_is_named_as_cann_s_with_the_way_out(ge, tmp_path, command, error_line):
    path = tmp_path / "resnet50_bs1.om"
    path.write_bytes(cann_om())
    args = {"run": ("run", "--model", path), "inspect": ("inspect", path),
            "atc-mode-6": ("atc", "--mode=6", "--om", path)}[command]
    line = error_line(ge(*args))
    assert line == (f"error: {path}: written by CANN's ATC (model 'resnet50', soc_version Ascend310P3), not by ge: "
                    "ge runs only the OMs it compiles; recompile the ONNX model with `ge atc`")


def test_a_cann_om_without_a_name_and_ge_s_own_header_of_256_bytes(tmp_path):
    from ge.core.model.errors import FormatError
    path = tmp_path / "x.om"
    path.write_bytes(cann_om(b"", b""))
    with pytest.raises(FormatError, match=r"x.om: written by CANN's ATC, not by ge"):
        read_om(path)
    # ge's own header never passes for CANN's, whatever its length: it starts with a msgpack map
    raw = bytearray(path.read_bytes())
    raw[8] = 0xDE
    path.write_bytes(bytes(raw))
    with pytest.raises(FormatError) as e:
        read_om(path)
    assert "CANN" not in str(e.value)


# -- 3. ge compare: another model's OM, gear models ----------------------------------------------------
@pytest.mark.parametrize("onnx_name,om_name,mismatch", [
    ("small", "two", "the OM's inputs ['a', 'b'] are not the ONNX model's ['x']"),
    ("two", "emb", "the OM's inputs ['ids'] are not the ONNX model's ['a', 'b']")])
def test_compare_with_another_model_s_om_names_the_mismatch(ge, models, compiled, error_line, onnx_name, om_name,
                                                            mismatch):
    r = ge("compare", "--model", models[onnx_name], "--om", compiled[om_name])
    assert r.exit_code == 1
    assert error_line(r) == f"error: {compiled[om_name]} was not compiled from {models[onnx_name]}: {mismatch}"


def test_compare_names_a_shape_mismatch(ge, models, tmp_path, error_line):
    ge("atc", "--model", models["dynamic"], "--output", tmp_path / "b2", "--input_shape", "x:2,3,8,8", ok=True)
    import onnx
    other = onnx.load(models["small"])
    other.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 9
    onnx.save(other, tmp_path / "other.onnx")
    r = ge("compare", "--model", tmp_path / "other.onnx", "--om", tmp_path / "b2.om")
    assert error_line(r).endswith("as it stands: input 'x' is [2, 3, 8, 8] in the OM, [1, 3, 9, 8] in the ONNX model "
                                  "(another model, or --input_shape changed a static dim: the reference cannot run at "
                                  "the OM's shape)")


@pytest.mark.parametrize("how", ["dymBatch", "input"])
def test_compare_a_gear_model_at_one_gear(ge, models, gear_om, tmp_path, how):
    path, _ = gear_om
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((4, 3, 8, 8)).astype(np.float32))
    args = ("--dymBatch", 4) if how == "dymBatch" else ("--input", tmp_path / "x.npy")
    r = ge("compare", "--model", models["dynamic"], "--om", path, *args, "--json", "-", ok=True)
    d = json.loads(r.stdout)
    assert d["gear"] == [4] and d["passed"] and [o["name"] for o in d["outputs"]] == ["y"]
    assert {row["op"] for row in d["layers"]} >= {"Conv", "Add"}
    result = api.compare(models["dynamic"], path, dym_batch=2)
    assert result["gear"] == [2] and result["passed"]


def test_compare_a_gear_model_without_a_gear_says_how_to_choose_one(ge, models, gear_om, error_line):
    path, _ = gear_om
    assert error_line(ge("compare", "--model", models["dynamic"], "--om", path)) == (
        f"error: {path} is a gear model: compare it at one gear, chosen by --dymBatch, --dymHW or --dymDims (as ge "
        "run) or by the shapes of --input; its gears (dynamic_batch_size): 1; 2; 4; 8")


# -- 4. input files -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name,kind", [("x.npy", "a .npy file"), ("x.npz", "an .npz archive")])
def test_text_named_npy_is_not_a_npy_file(ge, compiled, tmp_path, error_line, name, kind):
    (tmp_path / name).write_text("hello world")
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / name, "--output-dir", tmp_path / "out")
    where = f"input 'x' (file '{tmp_path / name}')" if name.endswith(".npy") else f"input file '{tmp_path / name}'"
    assert error_line(r) == (f"error: {where}: not {kind} (it does not start as numpy writes one; raw bytes go in a "
                             ".bin file)")
    assert not (tmp_path / "out").exists()


def test_a_pickled_npy_is_still_named_as_such(ge, compiled, tmp_path, error_line):
    np.save(tmp_path / "x.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npy", "--output-dir", tmp_path / "out")
    assert error_line(r) == (f"error: input 'x' (file '{tmp_path / 'x.npy'}'): holds pickled Python objects, which "
                             "ge never loads; save strings as numpy's str dtype (np.save(f, a.astype(str))) or as an "
                             "ONNX TensorProto .pb (onnx.numpy_helper.from_array(a).SerializeToString())")


def test_a_raw_bin_for_a_gear_model_names_the_gear_options(ge, gear_om, tmp_path, error_line):
    path, _ = gear_om
    x = np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)
    x.tofile(tmp_path / "x.bin")
    r = ge("run", "--model", path, "--input", tmp_path / "x.bin", "--output-dir", tmp_path / "out")
    assert error_line(r) == (f"error: {tmp_path / 'x.bin'}: a raw .bin file carries no shape and the model's inputs "
                             "have unknown dims ('x' [-1, 3, 8, 8]): choose the gear with --dymBatch, --dymHW or "
                             "--dymDims (its gears: 1; 2; 4; 8), or give the inputs as .npy, .npz or .pb files")
    ge("run", "--model", path, "--input", tmp_path / "x.bin", "--output-dir", tmp_path / "out", "--dymBatch", 2, ok=True)
    model_id = api.load_from_file(path)
    try:
        np.testing.assert_array_equal(np.load(tmp_path / "out" / "g_output_0.npy"), api.execute(model_id, [x])[0])
    finally:
        api.unload(model_id)


def test_extra_arrays_in_an_npz_are_named_in_a_warning(ge, compiled, tmp_path):
    """An .npz holding every input and more (labels saved beside them) runs, and says what it left out."""
    x = np.ones((1, 3, 8, 8), np.float32)
    np.savez(tmp_path / "x.npz", x=x, label=np.int64(3), mask=np.zeros(2))
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.npz", "--output-dir", tmp_path / "out", ok=True)
    assert r.stderr == (f"[WARNING] ge.inputs: input file '{tmp_path / 'x.npz'}': array(s) ['label', 'mask'] are not "
                        "inputs of the model (its inputs: 'x'); left out\n")
    np.savez(tmp_path / "ab.npz", a=np.ones((2, 3), np.float32), b=np.ones((2, 3), np.float32), c=np.ones(1))
    r = ge("run", "--model", compiled["two"], "--input", tmp_path / "ab.npz", "--output-dir", tmp_path / "o2", ok=True)
    assert "array(s) ['c'] are not inputs of the model (its inputs: 'a', 'b'); left out" in r.stderr


# -- 5. ge atc's output ---------------------------------------------------------------------------------
def test_a_warning_is_printed_once(ge, tmp_path):
    """A data-dependent model tries the static path, then compiles hybrid: one warning all the same."""
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("NonZero", ["x"], ["y"])], "nz",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, tmp_path / "nz.onnx")
    r = ge("atc", "--model", tmp_path / "nz.onnx", "--output", tmp_path / "nz", "--input_shape", "x:2,4", ok=True)
    assert r.stderr.count("--input_shape changes static dim(s) of input 'x'") == 1


# -- 6. one error style ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args,message", [
    (("run", "--model", "{om}", "--summary-json", "{dir}"), "Invalid value for '--summary-json' / '--summary_json': "
                                                            "File '{dir}' is a directory. (see `ge run --help`)"),
    (("run", "--model", "{om}", "--debug", "maybe"), "the model is given twice: --model {om} and the argument "
                                                     "'maybe' (see `ge run --help`)"),
    (("run",), "give the model to run: ge run FILE.om (or --model FILE.om) (see `ge run --help`)"),
    (("run", "--model", "{om}", "--loop", "0"), "Invalid value for '--loop' / '-l': 0 is not in the range x>=1. "
                                                "(see `ge run --help`)"),
    (("atc", "--mode=1", "--om", "{om}"), "--mode=1 needs --json FILE (the JSON file to write; '-' for stdout) "
                                          "(see `ge atc --help`)"),
    (("inspect",), "Missing argument 'FILE.om'. (see `ge inspect --help`)"),
    (("frobnicate",), "No such command 'frobnicate'. (see `ge --help`)")])
def test_usage_errors_are_one_error_line_with_exit_2(ge, compiled, tmp_path, error_line, args, message):
    fill = {"om": compiled["small"], "dir": str(tmp_path)}
    r = ge(*(a.format(**fill) for a in args))
    assert r.exit_code == 2 and error_line(r) == "error: " + message.format(**fill)


def test_an_option_file_that_is_a_folder_says_so(ge, models, tmp_path, error_line):
    r = ge("atc", "--model", models["small"], "--output", tmp_path / "m", f"--fusion_switch_file={tmp_path}")
    assert r.exit_code == 1 and error_line(r) == f"error: --fusion_switch_file: '{tmp_path}' is a folder; give the file"


@pytest.mark.parametrize("option", [("--dymBatch", "4"), ("--dymHW", "8,8"), ("--dymDims", "x:4,3,8,8")])
def test_a_gear_option_on_a_static_model_names_the_file(ge, compiled, tmp_path, error_line, option):
    r = ge("run", "--model", compiled["small"], *option, "--output-dir", tmp_path / "out")
    assert error_line(r) == (f"error: {compiled['small']}: {option[0]} chooses a gear, but this model has none "
                             "(compiled without --dynamic_batch_size, --dynamic_image_size or --dynamic_dims)")


# -- 10. ge run's model argument, the PNG's text, long paths -------------------------------------------
def test_run_takes_the_model_as_its_argument(ge, compiled, tmp_path):
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for args, out in (((compiled["small"],), "a"), (("--model", compiled["small"]), "b"),
                      ((compiled["small"], "--model", compiled["small"]), "c")):
        ge("run", *args, "--input", tmp_path / "x.npy", "--output-dir", tmp_path / out, ok=True)
    ys = [np.load(tmp_path / out / "small_output_0.npy") for out in "abc"]
    np.testing.assert_array_equal(ys[0], ys[1])
    np.testing.assert_array_equal(ys[0], ys[2])


def _png_pixels(data: bytes) -> np.ndarray:
    """An 8-bit RGB PNG of ge's (filter 0 rows, one IDAT) as an [H, W, 3] array."""
    import struct
    import zlib
    width, height = struct.unpack(">II", data[16:24])
    idat = data.index(b"IDAT")
    size = struct.unpack(">I", data[idat - 4:idat])[0]
    raw = np.frombuffer(zlib.decompress(data[idat + 4:idat + 4 + size]), np.uint8).reshape(height, 1 + width * 3)
    return raw[:, 1:].reshape(height, width, 3)


def test_png_memory_plot_has_its_text(ge, compiled, tmp_path):
    from ge.core.inspection.bitmap_font import ADVANCE, text_pixels
    from ge.core.inspection.memory_plot import MARGIN, PNG_TEXT_SCALE
    ge("inspect", compiled["small"], "--plot", tmp_path / "p.png", ok=True)
    pixels = _png_pixels((tmp_path / "p.png").read_bytes())
    title = "memory plan of small: offset (up) against step (across)"
    top = 24 - 7 * PNG_TEXT_SCALE
    want = np.zeros((7 * PNG_TEXT_SCALE, len(title) * ADVANCE * PNG_TEXT_SCALE), bool)
    for x, y, side in text_pixels(title, PNG_TEXT_SCALE):
        want[y:y + side, x:x + side] = True
    strip = pixels[top:top + want.shape[0], MARGIN:MARGIN + want.shape[1]]
    np.testing.assert_array_equal(strip.max(axis=2) == 0, want)  # black text on white, exactly the title
    svg = ge("inspect", compiled["small"], "--plot", tmp_path / "p.svg", ok=True)
    assert svg.exit_code == 0 and title in (tmp_path / "p.svg").read_text()


def test_long_paths_are_not_broken_in_a_100_column_terminal(ge_script, compiled, tmp_path):
    import os
    import shutil
    import subprocess
    deep = tmp_path / ("a_folder_with_a_rather_long_name_" * 2) / "and_another_one_below_it_to_pass_100_columns"
    deep.mkdir(parents=True)
    om = shutil.copy(compiled["small"], deep / "small.om")
    env = dict(os.environ, COLUMNS="100")
    r = subprocess.run([ge_script, "run", om, "--output-dir", str(deep / "out")], capture_output=True, text=True,
                       env=env, check=True)
    assert f"model {om} loaded on cpu in " in r.stdout
    assert f"1 output(s) written to {deep / 'out'}\n" in r.stdout


# -- 7. --profiler traces the timed runs; warm-up by default; progress on a terminal -------------------
def test_profile_traces_the_timed_runs_themselves(ge, compiled, tmp_path):
    ge("run", compiled["small"], "--loop", 4, "--profile", tmp_path / "t.json", "--summary-json", tmp_path / "s.json",
       "--output-dir", tmp_path / "o", ok=True)
    s = json.loads((tmp_path / "s.json").read_text())
    runs = [e for e in json.loads((tmp_path / "t.json").read_text())["traceEvents"] if e.get("args", {}).get("op") == "execute"]
    assert len(runs) == s["loop"] == 4 and s["warmup"] == 1
    ms = sorted(e["dur"] / 1e3 for e in runs)  # the trace's executions are the latencies' (µs rounded to 1 ns)
    assert abs(ms[0] - s["latency_ms"]["min"]) < 1e-5 and abs(ms[-1] - s["latency_ms"]["max"]) < 1e-5
    assert sum(op["count"] for op in s["ops"]) == 4 * len(api.inspect(compiled["small"])["tasks"])


def test_profile_with_another_executor_or_contexts_is_refused(ge, compiled, tmp_path, error_line):
    for extra, drop in ((("--executor", "parallel"), "--executor parallel"), (("--contexts", "2"), "--contexts 2")):
        r = ge("run", compiled["small"], "--loop", 2, "--profile", tmp_path / "t.json", *extra)
        assert error_line(r) == ("error: the profiler traces the timed runs of one context in the linear order: "
                                 f"drop {drop}")


@pytest.mark.parametrize("args,warmup", [(("--duration", "0.05"), 1), (("--duration", "0.05", "--warmup_count", "0"), 0),
                                         (("--loop", "3"), 1), ((), 0), (("--loop", "3", "--warmup_count", "4"), 4)])
def test_timed_runs_warm_up_first_by_default(ge, compiled, tmp_path, args, warmup):
    ge("run", compiled["small"], *args, "--stats", "--summary-json", tmp_path / "s.json", "--output-dir", tmp_path / "o",
       ok=True)
    s = json.loads((tmp_path / "s.json").read_text())
    assert s["warmup"] == warmup
    assert [e["run"] for e in s["stats"]] == ["warm-up"] * warmup + list(range(s["loop"]))


def test_a_long_loop_shows_progress_on_a_terminal_only(ge, compiled, monkeypatch, tmp_path):
    import io

    from rich.console import Console

    from ge.cli import console
    from ge.cli.run_report import ProgressBar
    monkeypatch.setattr(ProgressBar, "SHOW_AFTER", 0.0)
    r = ge("run", compiled["small"], "--loop", 3, "--output-dir", tmp_path / "o", ok=True)
    assert r.stderr == ""  # not a terminal: no bar
    screen = io.StringIO()
    monkeypatch.setattr(console, "err", Console(file=screen, force_terminal=True, width=80))
    bar = ProgressBar("timed runs")
    for done in (1, 2, 3):
        bar(done, 3, "run")
    bar.close()
    assert "timed runs" in screen.getvalue()


def test_atc_prints_atc_s_lines_and_tables_only_when_asked(ge, models, tmp_path):
    args = ("atc", f"--model={models['small']}", "--framework=5", f"--output={tmp_path / 'net'}")
    for extra in (("--log=error",), ()):
        r = ge(*args, *extra, ok=True)
        assert r.stdout.splitlines() == ["ATC start working now, please wait for a moment.",
                                         f"OM written to {tmp_path / 'net.om'}", "ATC run success, welcome to the next use."]
    for extra in (("--log=info",), ("--verbose",), ("-v", "--log=error")):
        out = ge(*args, *extra, ok=True).stdout
        assert "Memory" in out and "Inputs / outputs" in out and "Passes (what changed)" in out


def test_passes_table_shows_what_changed_once():
    from ge.cli.atc import pass_rows
    report = {"nodes_before": 21, "passes": {"dead_code": {"removed_nodes": 0, "removed_initializers": 25},
                                             "fuse_gelu": {"fused": 0}, "select_impl_mode": {},
                                             "fuse_conv_bn": {"fused": 5}},
              "nodes_after": 10, "fused_conv_bn": 5, "removed_nodes": 0}
    assert pass_rows(report) == [("nodes", "21 -> 10"), ("dead_code", "removed_initializers=25"),
                                 ("fuse_conv_bn", "fused=5")]


def test_output_naming_a_folder_is_refused_before_anything_is_written(ge, models, tmp_path, error_line):
    r = ge("atc", f"--model={models['small']}", f"--output={tmp_path / 'adir'}/")
    assert r.exit_code == 2 and error_line(r) == (
        f"error: Invalid value for --output: '{tmp_path / 'adir'}/' is a folder; give the OM's path (ATC appends .om: "
        f"--output {tmp_path / 'adir' / 'net'} writes {tmp_path / 'adir' / 'net.om'}) (see `ge atc --help`)")
    assert not (tmp_path / "adir").exists() and not list(tmp_path.iterdir())


# -- 9. what `ge --version`, `ge --help` and a load import --------------------------------------------
def _imported(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running `code` (then printing sys.modules)."""
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", f"{code}\nimport sys\nprint('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


#: what `ge --version` and `ge --help` need not import: onnx, the compiler, the runtime, the OM reader,
#: the API, any kernel family (the native library's own module aside: --version reports its level)
HEAVY = ("onnx", "ge.core.compile", "ge.core.passes", "ge.formats", "ge.core.runtime", "ge.core.api", "ge.core.atc",
         "ge.core.acl", "ge.core.inspection", "ge.core.model.ir", "ge.core.kernels.base", "ge.core.kernels.registry",
         "ge.cli.atc", "ge.cli.run", "rich.table", "ml_dtypes")


@pytest.mark.parametrize("args", [["--version"], ["--help"]])
def test_version_and_help_import_no_compiler_kernels_or_onnx(args):
    mods = _imported(f"from ge.cli.main import main\ntry:\n    main({args!r})\nexcept SystemExit:\n    pass")
    assert not {m for m in mods if m.split(".")[0] == "onnx" or m.startswith(HEAVY[1:])}
    kernels = {m for m in mods if m.startswith("ge.core.kernels.")}
    assert kernels <= {"ge.core.kernels.native_levels"} | {
        m for m in kernels if m.startswith(("ge.core.kernels._native_", "ge.core.kernels.native"))}


def test_atc_imports_no_runtime(tmp_path):
    """ATC's process compiles and writes: no runtime, no runtime face, no inspection (as a deployed
    runtime has no compiler: tests/e2e/test_runtime_needs_no_compiler.py)."""
    model = os.path.join(os.path.dirname(__file__), "..", "..", "samples", "models", "tiny_cnn.onnx")
    mods = _imported(f"from ge.cli.main import main\ntry:\n    main(['atc', '--model', {model!r}, '--output', "
                     f"{str(tmp_path / 'm')!r}])\nexcept SystemExit:\n    pass")
    assert "ge.core.atc.conversion" in mods and (tmp_path / "m.om").exists()
    assert "ge.core.kernels.ops.strings" not in mods  # Flatten's string variant: no node of strings here
    # a static model inline: none of the dynamic paths', AIPP's or the weight files' modules
    assert not {m for m in mods if m.startswith(tuple(f"ge.core.compile.{k}" for k in (
        "build_dynamic", "dynamic_shapes", "partition", "control_flow", "range_plan", "aipp", "external_weights")))}
    assert "ge.formats.weights" not in mods
    assert not {"ge.formats.om.root", "ge.formats.om.root_check"} & mods  # a dynamic OM's root: not this model's
    assert not {m for m in mods if m.startswith(("ge.core.runtime", "ge.core.acl", "ge.core.inspection", "ge.core.api"))}
    assert not {m for m in mods if m.split(".")[0] == "rich"}  # its lines are plain: no table, no rich
    # onnx's messages, not its package (core/model/onnx_proto.py); a plain model (core/compile/onnx_check.py)
    # asks nothing of onnx's C++ checker, shape inference or schemas: not even their module is loaded
    assert "onnx" not in mods and "onnx.onnx_cpp2py_export" not in mods
    # upb's messages only, not protobuf's pure-Python implementation; no logging (nothing logged)
    assert not {"google.protobuf.descriptor_pool", "google.protobuf.text_format", "logging", "traceback"} & mods
    assert not mods & NOT_FOR_NUMPY_TYPES, sorted(mods & NOT_FOR_NUMPY_TYPES)


#: what a model of numpy's own types compiles and loads without (issue 31's setup: each an import
#: of 8-20 ms in every process): ml_dtypes (the small types), OpenSSL's hashlib (external weight
#: files only), tempfile (formats/atomic.py names its own) and the thread pool (made on first use)
NOT_FOR_NUMPY_TYPES = {"ml_dtypes", "_hashlib", "tempfile", "concurrent.futures"}


def test_loading_an_om_imports_only_the_families_it_uses(compiled):
    """small.om runs a Conv and a fused Relu+Add chain: the conv, fused_elementwise (the chain) and
    elementwise (its steps) families, not the other fifty (recurrent, ml, strings, detection ...)."""
    from ge.core.kernels.registry import family_index
    mods = _imported(f"from ge.core import api\napi.load_from_file({compiled['small']!r})")
    families = {m for strings in (False, True) for modules in family_index(strings).values() for m in modules}
    loaded = {m.rsplit(".", 1)[1] for m in mods if m.startswith("ge.core.kernels.")} & families
    assert loaded == {"conv", "fused_elementwise", "elementwise"}, sorted(loaded)
    assert not {m for m in mods if m.startswith(("ge.core.compile", "ge.core.passes", "ge.formats.onnx"))}
    assert not mods & NOT_FOR_NUMPY_TYPES, sorted(mods & NOT_FOR_NUMPY_TYPES)


def test_a_load_defines_no_dataclass_and_no_graph(compiled):
    """A load's own imports are issue 31's setup (each ge process starts Python and numpy again): no
    dataclass (each compiles its methods at every import, and dataclasses imports inspect), no graph
    IR (the runtime reads Metas: ir/types.py), no AIPP configuration for a model without AIPP, no
    dynamic OM's root decoder for a static OM."""
    mods = _imported(f"from ge.core.acl import models\nmodels.unload(models.load_from_file({compiled['small']!r}))")
    assert "ge.core.runtime.davinci_model" in mods
    assert not {"dataclasses", "ge.core.model.ir.graph", "ge.formats.aipp_config", "ge.formats.om.root",
                "ge.formats.om.root_check"} & mods


# -- 8. ge run --help says where dumps go, and what --debug does ----------------------------------------
def test_run_help_names_the_dump_folder_it_writes_and_debug(ge, compiled, tmp_path):
    import re
    text = " ".join(ge("run", "--help", ok=True).stdout.split())
    assert "into OUTPUT/dump/ (OUTPUT: --output's or --output-dir's folder" in text
    assert "--debug [true|false]" in text and "traceback" in text
    ge("run", compiled["small"], "--dump", "true", "--output-dir", tmp_path / "o", ok=True)
    dumped = os.listdir(tmp_path / "o" / "dump")
    assert dumped and all(re.fullmatch(r"\d{4}_.+_output_\d+\.npy", f) for f in dumped)


def test_a_truncated_pb_is_named_in_one_line(ge, compiled, tmp_path, error_line):
    from onnx import numpy_helper
    x = np.zeros((1, 3, 8, 8), np.float32)
    (tmp_path / "x.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString()[:-10])
    r = ge("run", "--model", compiled["small"], "--input", tmp_path / "x.pb", "--output-dir", tmp_path / "out")
    assert error_line(r).startswith(f"error: input 'x' (file '{tmp_path / 'x.pb'}'): not a readable ONNX TensorProto "
                                    "file (field 9 at byte ")
    assert not (tmp_path / "out").exists()
