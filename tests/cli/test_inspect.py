"""`ge inspect`: rich tables and --json (the same data as api.inspect)."""
from __future__ import annotations

import json

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
