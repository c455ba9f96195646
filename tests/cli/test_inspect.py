"""`ge inspect`: rich tables and --json (the same data as api.inspect)."""
from __future__ import annotations

import json

import pytest

from ge.core import api


def test_inspect_json(ge, compiled):
    r = ge("inspect", compiled["small"], "--json", ok=True)
    d = json.loads(r.stdout)
    assert d == json.loads(json.dumps(api.inspect(compiled["small"])))
    assert set(d) >= {"header", "inputs", "outputs", "memory", "allocations", "tasks", "weights"}
    assert d["header"]["name"] == "small" and d["header"]["atc_cmdline"].startswith("ge atc")
    assert d["inputs"][0]["name"] == "x" and d["outputs"][0]["name"] == "y"
    assert set(d["memory"]) == {"WEIGHT", "FEATURE_MAP", "WORKSPACE", "IO"}
    assert all(set(r) == {"size"} for r in d["memory"].values())  # an OM on disk has sizes, not addresses
    assert d["memory"]["IO"]["size"] == (1 * 3 * 8 * 8 + 1 * 4 * 8 * 8) * 4
    tensors = {a["tensor"]: a for a in d["allocations"]}
    assert set(tensors) >= {"x", "c", "y"}
    assert tensors["x"]["kind"] == "INPUT" and tensors["y"]["kind"] == "OUTPUT"
    assert tensors["c"]["kind"] == "FEATURE_MAP" and tensors["c"]["size"] == 4 * 64 * 4
    for a in d["allocations"]:
        assert set(a) >= {"tensor", "kind", "offset", "size", "first", "last", "alias_of"}
    conv = d["tasks"][0]
    assert conv["index"] == 0 and conv["op"] == "Conv" and conv["node"] == "conv" and conv["kernel"]
    assert [a["kind"] for a in conv["args"]] == ["INPUT", "WEIGHT", "WEIGHT", "FEATURE_MAP"]
    assert conv["args"][0]["ref"].startswith("alloc#") and "+" in conv["args"][0]["ref"]
    assert {w["name"]: w["storage"] for w in d["weights"]} == {"W": "inline", "B": "inline"}
    assert {w["name"]: w["shape"] for w in d["weights"]}["W"] == [4, 3, 3, 3]


def test_inspect_tables(ge, compiled):
    r = ge("inspect", compiled["small"], ok=True)
    for word in ("Header", "Memory regions", "FEATURE_MAP", "WORKSPACE", "Allocation table", "Tasks", "Weights",
                 "alloc#", "Conv", "inline", "small"):
        assert word in r.stdout, word


def test_inspect_corrupted_om(ge, compiled, tmp_path, error_line):
    data = bytearray(open(compiled["small"], "rb").read())
    data[-5] ^= 0x01
    (tmp_path / "bad.om").write_bytes(bytes(data))
    for extra in ([], ["--json"]):
        r = ge("inspect", tmp_path / "bad.om", *extra)
        assert r.exit_code == 1
        assert "bad.om" in error_line(r)
        assert r.stdout == ""


def test_inspect_args_table(ge, compiled):
    d = json.loads(ge("inspect", compiled["small"], "--json", ok=True).stdout)
    table = d["args_table"]
    assert [r["slot"] for r in table] == list(range(len(table)))
    by_kind = {r["kind"]: r for r in table}
    assert by_kind["WEIGHT"]["policy"] == "fixed" and not by_kind["WEIGHT"]["refreshable"]
    assert by_kind["INPUT"]["policy"] == "by_model_io" and by_kind["OUTPUT"]["refreshable"]
    assert sum(len([a for a in t["args"]]) + (1 if t["workspace"] else 0) for t in d["tasks"]) == len(table)
    assert "Args table" in ge("inspect", compiled["small"], ok=True).stdout


def test_sections_and_plots(ge, compiled, tmp_path):
    from ge.cli.inspect import SECTION_NAMES, SECTIONS
    assert tuple(SECTIONS) == SECTION_NAMES
    r = ge("inspect", compiled["small"], "--section", "tasks", ok=True)
    assert "Tasks" in r.stdout and "Weights" not in r.stdout and "Header" not in r.stdout
    r = ge("inspect", compiled["small"], "--section", "weights", "--json", ok=True)
    assert set(json.loads(r.stdout)["weights"]) == {"weights", "weight_totals"}
    r = ge("inspect", compiled["small"], "--section", "nope")
    assert r.exit_code == 2 and "one of header, io, memory" in r.stderr
    svg, png = tmp_path / "plan.svg", tmp_path / "plan.png"
    ge("inspect", compiled["small"], "--plot", str(svg), ok=True)
    text = svg.read_text()
    assert text.startswith("<svg") and "FEATURE_MAP" in text and "lower bound" in text
    n_boxes = sum(1 for a in api.inspect(compiled["small"])["allocations"] if not a["alias_of"] and a["size"])
    assert text.count("<title>") == n_boxes
    ge("inspect", compiled["small"], "--plot", str(png), ok=True)
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    import zlib
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    idat = data[data.index(b"IDAT") + 4:data.index(b"IEND") - 8]
    assert len(zlib.decompress(idat)) == height * (1 + 3 * width)
    r = ge("inspect", compiled["small"], "--plot", str(tmp_path / "plan.gif"))
    assert r.exit_code == 1 and "the picture is .svg or .png" in r.stderr and not (tmp_path / "plan.gif").exists()


def test_tables_fold_at_80_columns(ge, compiled, monkeypatch):
    from ge.cli import console
    monkeypatch.setattr(console.out, "width", 80)
    r = ge("inspect", compiled["small"], ok=True)
    assert max(len(line) for line in r.stdout.splitlines() if line[:1] in "┏┃┡│└├") <= 80
    assert "…" not in r.stdout  # wrapped, never cut
    # a sentence is one line, whatever its length: the terminal wraps it (a path in it stays whole)
    assert "\nweights (--external_weight=0): inline 2 (448 B), in files 0 (0 B) in 0 files (0 B)\n" in r.stdout


def test_inspect_shows_a_fused_chain(ge, tmp_path):
    """A FusedElementwise task lists its ops (--json: "fused", the table: op[steps])."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node("Add", ["x", "a"], ["t"]), helper.make_node("Relu", ["t"], ["u"]),
             helper.make_node("Mul", ["u", "a"], ["v"]), helper.make_node("HardSwish", ["v"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
                              [numpy_helper.from_array(np.ones(4, np.float32), "a")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8),
              str(tmp_path / "chain.onnx"))
    ge("atc", f"--model={tmp_path / 'chain.onnx'}", "--framework=5", f"--output={tmp_path / 'chain'}", ok=True)
    (task,) = json.loads(ge("inspect", tmp_path / "chain.om", "--json", ok=True).stdout)["tasks"]
    assert task["op"] == "FusedElementwise" and task["domain"] == "ge" and task["kernel"] == "FusedElementwise"
    assert task["fused"] == ["Add", "Relu", "Mul", "HardSwish"]
    assert "FusedElementwise[Add+Relu+Mul+HardSwish]" in ge("inspect", tmp_path / "chain.om", ok=True).stdout


def test_a_section_from_python_is_what_section_json_prints(ge, compiled):
    from ge.core.model.errors import GeError
    data = api.inspect(compiled["small"])
    for section in api.INSPECT_SECTIONS:
        r = ge("inspect", compiled["small"], "--section", section, "--json", ok=True)
        assert json.loads(r.stdout) == {section: api.inspect_section(data, section)}
    with pytest.raises(GeError, match=r"^--section nope: one of header, io, memory, allocations, tasks, args, weights$"):
        api.inspect_section(data, "nope")
