"""`ge atc`: modes 0 (compile), 1 (OM -> JSON) and 6 (model info), ATC's option spelling, errors."""
from __future__ import annotations

import json
import os

import pytest

from ge.core import api
from ge.formats.om import header_info


def _no_leftovers(directory) -> list[str]:
    return [f for f in os.listdir(directory) if f.endswith((".om", ".tmp"))]


@pytest.mark.parametrize("style", ["equals", "space"])
def test_atc_writes_name_om(ge, models, tmp_path, style):
    out = tmp_path / "net"
    if style == "equals":
        args = [f"--model={models['small']}", "--framework=5", f"--output={out}", "--soc_version=Ascend310"]
    else:
        args = ["--model", models["small"], "--framework", "5", "--output", out, "--soc_version", "Ascend310"]
    r = ge("atc", *args, "--verbose", ok=True)
    assert (tmp_path / "net.om").is_file()
    assert "ATC run success" in r.stdout
    assert str(tmp_path / "net.om") in r.stdout
    for word in ("Conv", "Relu", "FEATURE_MAP", "lower bound", "WORKSPACE"):
        assert word in r.stdout
    h = header_info(str(tmp_path / "net.om"))
    assert h["platform_version"] == "Ascend310"
    assert h["atc_cmdline"].startswith("ge atc ") and "--output" in h["atc_cmdline"]


def test_output_with_om_suffix_is_kept(ge, models, tmp_path):
    ge("atc", "--model", models["small"], "--output", tmp_path / "a.om", ok=True)
    assert os.listdir(tmp_path) == ["a.om"]


def test_json_summary(ge, models, tmp_path):
    r = ge("atc", f"--model={models['small']}", f"--output={tmp_path / 'net'}", "--json", ok=True)
    s = json.loads(r.stdout)
    assert s["ops"] == {"Conv": 1, "FusedElementwise[Relu+Add]": 1}  # y = Relu(c) + c: one chain after the Conv
    assert s["tasks"] == 2
    assert set(s["memory"]) >= {"WEIGHT", "FEATURE_MAP", "WORKSPACE", "IO"}
    assert s["memory"]["FEATURE_MAP"] >= s["feature_map_lower_bound"] > 0
    assert s["om"] == str(tmp_path / "net.om")
    assert s["inputs"] == [{"name": "x", "dtype": "float32", "shape": [1, 3, 8, 8]}]


def test_json_summary_to_file(ge, models, tmp_path):
    r = ge("atc", "--model", models["small"], "--output", tmp_path / "net", "--json", tmp_path / "s.json", ok=True)
    assert "ATC run success" in r.stdout
    assert json.loads((tmp_path / "s.json").read_text())["tasks"] == 2


@pytest.mark.parametrize("framework, name", [(3, "TensorFlow"), (0, "Caffe"), (7, "")])
def test_other_frameworks_are_refused(ge, models, tmp_path, error_line, framework, name):
    r = ge("atc", f"--model={models['small']}", f"--framework={framework}", f"--output={tmp_path / 'net'}")
    assert r.exit_code == 1
    line = error_line(r)
    assert f"--framework={framework}" in line and "--framework=5" in line and name in line
    assert _no_leftovers(tmp_path) == []


def test_missing_model_or_output_is_a_usage_error(ge, models, tmp_path):
    r = ge("atc", "--output", tmp_path / "x")
    assert r.exit_code == 2 and "--model" in r.stderr
    r = ge("atc", "--model", models["small"])
    assert r.exit_code == 2 and "--output" in r.stderr


def test_unsupported_mode(ge, error_line):
    r = ge("atc", "--mode=5", "--om", "x.om")
    assert r.exit_code == 1
    assert "--mode=5" in error_line(r)


def test_symbolic_input_needs_input_shape(ge, models, tmp_path, error_line):
    r = ge("atc", "--model", models["dynamic"], "--output", tmp_path / "dyn")
    assert r.exit_code == 1
    line = error_line(r)
    assert "'x'" in line or " x " in line or "x:" in line
    assert "input_shape" in line
    assert _no_leftovers(tmp_path) == []
    r = ge("atc", "--model", models["dynamic"], "--output", tmp_path / "dyn", "--input_shape=x:2,3,8,8", "--json",
           ok=True)
    assert json.loads(r.stdout)["inputs"][0]["shape"] == [2, 3, 8, 8]


def test_bad_input_shape_syntax(ge, models, tmp_path, error_line):
    r = ge("atc", "--model", models["small"], "--output", tmp_path / "n", "--input_shape", "x=1,3,8,8")
    assert r.exit_code == 1
    assert "--input_shape" in error_line(r)


def test_out_nodes(ge, models, tmp_path):
    r = ge("atc", "--model", models["small"], "--output", tmp_path / "n", "--out_nodes", "relu:0", "--json", ok=True)
    s = json.loads(r.stdout)
    assert [o["name"] for o in s["outputs"]] == ["r"]
    assert "Add" not in s["ops"] and s["tasks"] == 1  # Relu is fused into the Conv as its epilogue


def test_broken_onnx_leaves_no_om(ge, tmp_path, error_line):
    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf model\xff\xff\xff")
    r = ge("atc", f"--model={bad}", "--framework=5", f"--output={tmp_path / 'broken'}")
    assert r.exit_code == 1
    assert "broken.onnx" in error_line(r)
    assert _no_leftovers(tmp_path) == []


def test_missing_onnx_file(ge, tmp_path, error_line):
    r = ge("atc", "--model", tmp_path / "nope.onnx", "--output", tmp_path / "nope")
    assert r.exit_code == 1
    assert "nope.onnx" in error_line(r)


def test_failure_keeps_an_existing_om_untouched(ge, models, tmp_path):
    ge("atc", "--model", models["small"], "--output", tmp_path / "net", ok=True)
    before = (tmp_path / "net.om").read_bytes()
    r = ge("atc", "--model", models["dynamic"], "--output", tmp_path / "net")
    assert r.exit_code == 1
    assert (tmp_path / "net.om").read_bytes() == before
    assert [f for f in os.listdir(tmp_path) if f.endswith(".tmp")] == []


def test_mode1_om_to_json(ge, compiled, tmp_path):
    r = ge("atc", "--mode=1", "--om", compiled["small"], "--json", tmp_path / "small.json", ok=True)
    assert "ATC run success" in r.stdout
    d = json.loads((tmp_path / "small.json").read_text())
    assert set(d) == {"header", "model_def", "tasks", "weights"}
    assert d["header"]["name"] == "small" and d["header"]["magic"] == "IMOD"
    assert [t["op_type"] for t in d["tasks"]] == ["Conv", "FusedElementwise"]  # Relu(c) + c: one chain
    assert d["model_def"]["inputs"][0]["name"] == "x"
    assert {w["name"] for w in d["weights"]} == {"W", "B"}
    assert all(set(w) >= {"dtype", "shape", "offset", "nbytes"} for w in d["weights"])
    assert "weight_data" not in json.dumps(d)  # descs only, no weight bytes
    r = ge("atc", "--mode=1", "--om", compiled["small"], "--json", ok=True)  # bare --json: stdout
    assert json.loads(r.stdout)["header"]["name"] == "small"


def test_mode1_needs_om_and_json(ge, compiled):
    assert ge("atc", "--mode=1", "--om", compiled["small"]).exit_code == 2
    assert ge("atc", "--mode=1", "--json", "x.json").exit_code == 2


def test_mode6_display(ge, compiled):
    r = ge("atc", "--mode=6", "--om", compiled["small"], ok=True)
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "============ Display Model Info start ============"
    assert lines[-1] == "============ Display Model Info end   ============"
    assert lines[1].startswith("Original Atc command line: ge atc --model=")
    info = api.model_info(compiled["small"])
    assert lines[2] == (f"system   info: atc_version[ge {api.version()}], soc_version[{api.DEFAULT_SOC}], "
                        "framework_type[5].")
    assert lines[3] == (f"resource info: memory_size[{info['memory_size']} B], weight_size[{info['weight_size']} B], "
                        "stream_num[1], event_num[0].")
    h = header_info(compiled["small"])
    sizes = {p["type"]: p["size"] for p in h["partitions"]}
    assert lines[4] == (f"om       info: modeldef_size[{sizes['MODEL_DEF']} B], "
                        f"weight_data_size[{sizes['WEIGHTS_DATA']} B], task_info_size[{sizes['TASK_INFO']} B].")
    r = ge("atc", "--mode", "6", "--om", compiled["small"], "--json", ok=True)
    assert json.loads(r.stdout)["memory_size"] == info["memory_size"]


def test_mode6_broken_om(ge, tmp_path, error_line):
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"NOPE" + bytes(100))
    r = ge("atc", "--mode=6", "--om", bad)
    assert r.exit_code == 1
    assert "bad.om" in error_line(r)
