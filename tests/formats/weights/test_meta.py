"""meta.json: validation of an untrusted file, the exclusive lock, and the shared name rules."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ge.core.model.errors import FormatError
from ge.core.model.weight_files import combined_name, name_problem, resolve
from ge.formats.weights import read_meta, update_meta
from ge.formats.weights.meta import LOCK_NAME, locked

SHA = "ab" * 32


def write_meta(folder, obj) -> str:
    path = os.path.join(folder, "meta.json")
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def test_no_meta_is_empty(tmp_path):
    assert read_meta(tmp_path) == {"hash_to_weight_file": {}, "hash_to_weight_offset": {}}


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON .*; delete it and compile again"),
    ([], "needs the maps 'hash_to_weight_file' and 'hash_to_weight_offset'"),
    ({"hash_to_weight_file": {}}, "needs the maps"),
    ({"hash_to_weight_file": {"xyz": "weight_x"}, "hash_to_weight_offset": {"xyz": 0}}, "key 'xyz' is not a sha256"),
    ({"hash_to_weight_file": {SHA: "../../etc/passwd"}, "hash_to_weight_offset": {SHA: 0}},
     "file of abababababab… '../../etc/passwd' leaves the weight folder"),
    ({"hash_to_weight_file": {SHA: "/etc/passwd"}, "hash_to_weight_offset": {SHA: 0}}, "is an absolute path"),
    ({"hash_to_weight_file": {SHA: 7}, "hash_to_weight_offset": {SHA: 0}}, "is not a string"),
    ({"hash_to_weight_file": {SHA: "w"}, "hash_to_weight_offset": {SHA: -1}}, "must be a non-negative integer"),
    ({"hash_to_weight_file": {SHA: "w"}, "hash_to_weight_offset": {}}, "must be a non-negative integer, got None"),
    ({"hash_to_weight_file": {}, "hash_to_weight_offset": {SHA: 0}}, "names hashes that 'hash_to_weight_file' does not"),
])
def test_bad_meta_is_refused_with_its_path(tmp_path, content, message):
    path = write_meta(tmp_path, content)
    with pytest.raises(FormatError, match=f"^{path}: .*{message}"):
        read_meta(tmp_path)
    with pytest.raises(FormatError, match=message):  # a compile into that folder says so too
        update_meta(tmp_path, [])


def test_update_keeps_valid_entries_and_drops_missing_files(tmp_path):
    (tmp_path / "kept").write_bytes(b"x")
    other = "cd" * 32
    write_meta(tmp_path, {"hash_to_weight_file": {SHA: "kept", other: "gone"},
                          "hash_to_weight_offset": {SHA: 0, other: 512}})
    meta = update_meta(tmp_path, [("ef" * 32, "kept", 0)])
    assert meta["hash_to_weight_file"] == {SHA: "kept", "ef" * 32: "kept"}
    assert read_meta(tmp_path) == meta


def test_lock_is_exclusive_across_processes(tmp_path):
    probe = ("import fcntl, os, sys\n"
             f"fd = os.open({str(tmp_path / LOCK_NAME)!r}, os.O_RDWR)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n")
    with locked(tmp_path):
        assert subprocess.run([sys.executable, "-c", probe]).returncode == 3  # held: another process must wait
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0


@pytest.mark.parametrize("name, problem", [
    ("weight_" + SHA, ""), ("net_weight_combined", ""),
    ("", "is empty"), ("/abs", "is an absolute path"), ("C:x", "is an absolute path"), ("..", "leaves the weight folder"),
    ("a/../b", "leaves the weight folder"), ("..\\x", "leaves the weight folder"), ("a/b", "names a folder"),
    (".", "names a folder"), ("a\0b", "has characters"), ("x" * 256, "has characters or a length"),
])
def test_name_rules(name, problem):
    assert name_problem(name).startswith(problem) and (problem or name_problem(name) == "")


def test_resolve_follows_symlinks_only_inside(tmp_path):
    folder = tmp_path / "weight"
    (folder / "store").mkdir(parents=True)
    (folder / "store" / "real").write_bytes(b"x")
    os.symlink(folder / "store" / "real", folder / "inside")
    os.symlink(tmp_path / "elsewhere", folder / "outside")
    os.symlink(folder, folder / "loop")
    assert resolve(folder, "inside") == os.path.realpath(folder / "store" / "real")
    assert resolve(folder, "missing") == os.path.join(os.path.realpath(folder), "missing")  # need not exist
    with pytest.raises(FormatError, match="outside: a symlink leading outside the weight folder"):
        resolve(folder, "outside")
    with pytest.raises(FormatError, match="loop: a symlink leading outside the weight folder"):
        resolve(folder, "loop")  # the folder itself is not a file in it
    with pytest.raises(FormatError, match="external weight file '../x' leaves the weight folder"):
        resolve(folder, "../x")


def test_combined_name():
    assert combined_name("resnet") == "resnet_weight_combined"
    with pytest.raises(FormatError, match="model name '../x' cannot name a combined weight file"):
        combined_name("../x")
