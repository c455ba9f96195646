"""`ge atc --external_weight`, `ge run --weight_dir/--skip_weight_check`, `ge inspect` of weights,
and two real `ge atc` processes compiling into one weight folder at once."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ge.formats.om import read_om

from .conftest import ROOT

TINY = os.path.join(ROOT, "samples", "models", "tiny_cnn.onnx")
TINY_INPUT = os.path.join(ROOT, "samples", "models", "tiny_cnn_input.npy")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """tiny_cnn compiled in modes 0, 1 and 2, each into its own folder: mode -> om path."""
    from click.testing import CliRunner

    from ge.cli.main import cli
    d = tmp_path_factory.mktemp("ext")
    out = {}
    for mode in (0, 1, 2):
        r = CliRunner().invoke(cli, ["atc", f"--model={TINY}", f"--output={d / f'm{mode}' / 'tiny'}",
                                     f"--external_weight={mode}"])
        assert r.exit_code == 0, r.output
        out[mode] = str(d / f"m{mode}" / "tiny.om")
    return out


def run_output(ge, om, out_dir, *extra, ok=True):
    r = ge("run", "--model", om, "--input", TINY_INPUT, "--output-dir", out_dir, *extra, ok=ok)
    return r, (np.load(os.path.join(out_dir, "tiny_output_0.npy")) if r.exit_code == 0 else None)


def test_json_summary_lists_external_weight_paths(ge, tmp_path):
    r = ge("atc", f"--model={TINY}", f"--output={tmp_path / 'net'}", "--external_weight=1", "--json", ok=True)
    s = json.loads(r.stdout)
    ext = s["external_weight"]
    assert ext["mode"] == 1 and ext["dir"] == str(tmp_path / "weight")
    assert len(ext["files"]) == 5 == s["weights"]["external"]["files"]
    for d in ext["paths"]:  # GE's ExternalWeightDesc: path, size, offset, id
        assert set(d) == {"id", "weight", "path", "size", "offset"} and d["offset"] == 0
        data = open(d["path"], "rb").read()
        assert len(data) == d["size"] and os.path.basename(d["path"]) == "weight_" + hashlib.sha256(data).hexdigest()
    assert [d["id"] for d in ext["paths"]] == list(range(len(ext["paths"])))
    assert s["memory"]["FILE_CONSTANT"] == sum(f["size"] for f in ext["files"])
    assert s["weights"]["inline"]["count"] + s["weights"]["external"]["count"] == s["weights"]["count"]
    meta = json.loads((tmp_path / "weight" / "meta.json").read_text())
    assert sorted(meta["hash_to_weight_file"].values()) == sorted(f["file"] for f in ext["files"])


def test_rich_summary_shows_the_combined_file(ge, tmp_path):
    r = ge("atc", f"--model={TINY}", f"--output={tmp_path / 'net'}", "--external_weight=2", "--verbose", ok=True)
    assert "External weights (--external_weight=2, 1 file in" in r.stdout
    assert str(tmp_path / "weight" / "net_weight_combined") in r.stdout
    assert "FILE_CONSTANT" in r.stdout and "ATC run success" in r.stdout
    assert sorted(os.listdir(tmp_path / "weight")) == ["meta.json", "meta.json.lock", "net_weight_combined"]


def test_unknown_mode_is_an_error(ge, tmp_path, error_line):
    r = ge("atc", f"--model={TINY}", f"--output={tmp_path / 'net'}", "--external_weight=3")
    assert r.exit_code == 1
    assert "--external_weight=3 is not supported; choose 0" in error_line(r)
    assert os.listdir(tmp_path) == []


def test_om_sizes(built):
    sizes = {mode: os.path.getsize(om) for mode, om in built.items()}
    weight_bytes = sum(w.nbytes for w in read_om(built[0]).weights if w.nbytes >= 1024)
    assert sizes[1] < sizes[0] - weight_bytes + 4096 and sizes[2] < sizes[0] - weight_bytes + 4096


def test_run_gives_identical_outputs_in_every_mode(ge, built, tmp_path):
    results = [run_output(ge, built[mode], tmp_path / f"{mode}{device}", "--device", device)[1]
               for mode in (0, 1, 2) for device in ("cpu", "sim")]
    for y in results[1:]:
        np.testing.assert_array_equal(y, results[0])


def test_moved_folder_still_loads(ge, built, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(os.path.dirname(built[2]), moved)
    _, y = run_output(ge, str(moved / "tiny.om"), tmp_path / "out")
    _, y0 = run_output(ge, built[0], tmp_path / "out0")
    np.testing.assert_array_equal(y, y0)


def test_weight_dir_elsewhere(ge, tmp_path, error_line):
    weights = tmp_path / "store"
    ge("atc", f"--model={TINY}", f"--output={tmp_path / 'net'}", "--external_weight=1",
       f"--external_weight_dir={weights}", ok=True)
    assert not (tmp_path / "weight").exists() and len(os.listdir(weights)) == 5 + 2
    r = ge("run", "--model", tmp_path / "net.om", "--input", TINY_INPUT, "--output-dir", tmp_path / "o")
    assert r.exit_code == 1
    assert f"{tmp_path / 'weight'}/weight_" in error_line(r) and "external weight file is missing" in error_line(r)
    r = ge("run", "--model", tmp_path / "net.om", "--input", TINY_INPUT, "--output-dir", tmp_path / "o",
           "--weight_dir", weights, "-v", ok=True)
    assert "External weight files" in r.stdout and "loaded" in r.stdout


@pytest.mark.parametrize("damage, message", [
    ("truncate", "external weight file is truncated"),
    ("flip", "sha256 of weight '.*' .* does not match the model's"),
    ("remove", "external weight file is missing"),
])
def test_damaged_weight_file_is_a_one_line_error_naming_it(ge, built, tmp_path, error_line, damage, message):
    folder = tmp_path / "copy"
    shutil.copytree(os.path.dirname(built[2]), folder)
    path = folder / "weight" / "tiny_weight_combined"
    if damage == "truncate":
        os.truncate(path, 1000)
    elif damage == "flip":
        data = bytearray(path.read_bytes())
        data[10] ^= 0x10
        path.write_bytes(bytes(data))
    else:
        path.unlink()
    r, _ = run_output(ge, str(folder / "tiny.om"), tmp_path / "o", ok=None)
    assert r.exit_code == 1
    line = error_line(r)
    assert str(path) in line
    assert __import__("re").search(message, line), line
    if damage == "flip":  # the user may opt out of the sha256 check for speed: then it loads
        run_output(ge, str(folder / "tiny.om"), tmp_path / "o", "--skip_weight_check")


def test_inspect_shows_where_each_weight_lives(ge, built):
    d = json.loads(ge("inspect", built[2], "--json", ok=True).stdout)
    files = [w for w in d["weights"] if w["storage"] == "file"]
    assert files and all(w["file"] == "tiny_weight_combined" and w["offset"] % 512 == 0 for w in files)
    assert all(len(w["sha256"]) == 64 and w["short_sha256"] == w["sha256"][:12] for w in d["weights"])
    t = d["weight_totals"]
    assert t["mode"] == 2 and t["file"]["files"] == 1 and t["file"]["count"] == len(files)
    assert t["inline"]["count"] == len(d["weights"]) - len(files)
    assert d["memory"]["FILE_CONSTANT"]["size"] == t["file"]["file_bytes"]
    text = ge("inspect", built[2], ok=True).stdout
    assert "tiny_weight_combined" in text and files[0]["short_sha256"] in text
    assert f"in files {len(files)} (" in text and "(--external_weight=2)" in text
    assert "FILE_CONSTANT" in text
    inline = json.loads(ge("inspect", built[0], "--json", ok=True).stdout)
    assert {w["storage"] for w in inline["weights"]} == {"inline"} and inline["weight_totals"]["mode"] == 0


def test_two_atc_processes_into_one_folder(ge_script, tmp_path):
    """Real processes racing on meta.json: both succeed and leave every hash recorded, each
    entry pointing at bytes that hash to it."""
    model = onnx.load(TINY)
    fc = next(t for t in model.graph.initializer if t.name == "fc.weight")
    fc.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(fc) * 2, "fc.weight"))  # one weight differs
    onnx.save(model, str(tmp_path / "tiny_b.onnx"))
    shared = tmp_path / "shared"
    jobs = [(TINY, "a", 1), (str(tmp_path / "tiny_b.onnx"), "b", 1), (TINY, "c", 2), (str(tmp_path / "tiny_b.onnx"), "d", 2)]
    procs = [subprocess.Popen([ge_script, "atc", f"--model={src}", f"--output={tmp_path / name}",
                               f"--external_weight={mode}", f"--external_weight_dir={shared}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for src, name, mode in jobs]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err.decode()
    meta = json.loads((shared / "meta.json").read_text())
    hashes = {w.sha256 for _, name, _ in jobs for w in read_om(tmp_path / f"{name}.om").weights if w.file}
    assert set(meta["hash_to_weight_file"]) == hashes
    for sha, file in meta["hash_to_weight_file"].items():
        data = (shared / file).read_bytes()
        offset = meta["hash_to_weight_offset"][sha]
        size = next(w.nbytes for _, name, _ in jobs for w in read_om(tmp_path / f"{name}.om").weights if w.sha256 == sha)
        assert hashlib.sha256(data[offset:offset + size]).hexdigest() == sha
    assert not [f for f in os.listdir(shared) if f.endswith(".tmp")]
    assert len([f for f in os.listdir(shared) if f.startswith("weight_")]) == 6  # 5 shared + b's fc.weight
