"""formats/weights: writing weight files (8 threads, atomic, dedup) and keeping meta.json right."""
from __future__ import annotations

import hashlib
import json
import os
import threading

import numpy as np
import pytest

from ge.core.model.weight_files import WeightFilePlan
from ge.core.model.errors import FormatError
from ge.formats.weights import THREADS, read_meta, write_weight_files
from ge.formats.weights import writer as writer_module


def piece(offset: int, data: bytes):
    return offset, hashlib.sha256(data).hexdigest(), memoryview(data)


def individual(data: bytes) -> WeightFilePlan:
    _, sha, view = piece(0, data)
    return WeightFilePlan(f"weight_{sha}", len(data), ((0, sha, view),))


def combined(name: str, *blobs: bytes) -> WeightFilePlan:
    pieces, pos = [], 0
    for b in blobs:
        off = (pos + 511) // 512 * 512
        pieces.append(piece(off, b))
        pos = off + len(b)
    return WeightFilePlan(f"{name}_weight_combined", pos, tuple(pieces))


A, B, C = (np.random.default_rng(i).bytes(2000 + i) for i in range(3))


def test_individual_files_hold_exactly_their_weight(tmp_path):
    plans = [individual(A), individual(B)]
    written = write_weight_files(plans, tmp_path / "weight")
    assert [w.reused for w in written] == [False, False]
    for plan, data in zip(plans, (A, B)):
        assert (tmp_path / "weight" / plan.name).read_bytes() == data
    meta = json.loads((tmp_path / "weight" / "meta.json").read_text())
    assert meta == {"hash_to_weight_file": {p.pieces[0][1]: p.name for p in plans},
                    "hash_to_weight_offset": {p.pieces[0][1]: 0 for p in plans}}
    assert not [f for f in os.listdir(tmp_path / "weight") if f.endswith(".tmp")]


def test_combined_file_layout(tmp_path):
    plan = combined("net", A, B)
    write_weight_files([plan], tmp_path)
    data = (tmp_path / "net_weight_combined").read_bytes()
    assert len(data) == 2048 + len(B)
    assert data[:len(A)] == A and data[len(A):2048] == bytes(2048 - len(A)) and data[2048:] == B
    meta = read_meta(tmp_path)
    assert [(meta["hash_to_weight_file"][s], meta["hash_to_weight_offset"][s]) for _, s, _ in plan.pieces] == \
        [("net_weight_combined", 0), ("net_weight_combined", 2048)]


def test_files_are_written_by_a_pool_of_8_threads(tmp_path, monkeypatch):
    names = set()
    real = writer_module.write_atomically

    def spy(path, write):
        names.add(threading.current_thread().name)
        real(path, write)
    monkeypatch.setattr(writer_module, "write_atomically", spy)
    write_weight_files([individual(bytes([i]) * 3000) for i in range(40)], tmp_path)
    assert THREADS == 8 and 1 <= len(names) <= 8 and all(n.startswith("ge-weight-writer") for n in names)
    assert len(os.listdir(tmp_path)) == 40 + 2  # files, meta.json, its lock file


def test_identical_file_is_reused_not_rewritten(tmp_path):
    plan = individual(A)
    write_weight_files([plan], tmp_path)
    path = tmp_path / plan.name
    os.utime(path, ns=(1, 1))
    (again,) = write_weight_files([plan], tmp_path)
    assert again.reused and os.stat(path).st_mtime_ns == 1


def test_damaged_file_is_replaced(tmp_path):
    plan = individual(A)
    write_weight_files([plan], tmp_path)
    path = tmp_path / plan.name
    data = bytearray(A)
    data[5] ^= 1
    path.write_bytes(bytes(data))
    (again,) = write_weight_files([plan], tmp_path)
    assert not again.reused and path.read_bytes() == A


def test_symlink_in_place_of_a_weight_file_is_replaced_not_followed(tmp_path):
    outside = tmp_path / "outside.bin"
    outside.write_bytes(A)
    folder = tmp_path / "weight"
    folder.mkdir()
    plan = individual(A)
    os.symlink(outside, folder / plan.name)
    (w,) = write_weight_files([plan], folder)
    assert not w.reused and not os.path.islink(folder / plan.name) and outside.read_bytes() == A


def test_two_models_into_one_folder_share_files_and_one_meta(tmp_path):
    write_weight_files([individual(A), individual(B)], tmp_path)
    write_weight_files([individual(A), individual(C)], tmp_path)  # A is already there
    files = sorted(f for f in os.listdir(tmp_path) if f.startswith("weight_"))
    assert len(files) == 3
    meta = read_meta(tmp_path)
    assert sorted(meta["hash_to_weight_file"].values()) == files


def test_recompiled_combined_file_drops_its_stale_entries(tmp_path):
    write_weight_files([combined("net", A, B)], tmp_path)
    write_weight_files([individual(A)], tmp_path)  # A is also recorded... in net's combined file (first wins)
    write_weight_files([combined("net", C)], tmp_path)  # net now holds only C
    meta = read_meta(tmp_path)
    sha = {x: hashlib.sha256(x).hexdigest() for x in (A, B, C)}
    assert sha[B] not in meta["hash_to_weight_file"]
    assert meta["hash_to_weight_file"][sha[C]] == "net_weight_combined"
    assert meta["hash_to_weight_file"][sha[A]] == f"weight_{sha[A]}"  # found again where it still lives
    for s, f in meta["hash_to_weight_file"].items():  # every entry points at bytes that hash right
        off = meta["hash_to_weight_offset"][s]
        data = (tmp_path / f).read_bytes()
        assert any(hashlib.sha256(data[off:off + len(x)]).hexdigest() == s for x in (A, B, C))


def test_entries_of_deleted_files_are_dropped(tmp_path):
    a, b = individual(A), individual(B)
    write_weight_files([a], tmp_path)
    os.remove(tmp_path / a.name)
    write_weight_files([b], tmp_path)
    assert list(read_meta(tmp_path)["hash_to_weight_file"].values()) == [b.name]


@pytest.mark.parametrize("name, message", [("../x", "leaves the weight folder"), ("/tmp/x", "is an absolute path"),
                                           ("a/b", "names a folder")])
def test_names_outside_the_folder_are_refused(tmp_path, name, message):
    plan = WeightFilePlan(name, 1, ((0, "0" * 64, memoryview(b"x")),))
    with pytest.raises(FormatError, match=f"weight file '{name}' {message}"):
        write_weight_files([plan], tmp_path)
    assert os.listdir(tmp_path) == []


def test_folder_that_is_a_file(tmp_path):
    (tmp_path / "weight").write_text("")
    with pytest.raises(FormatError, match="weight: cannot create the weight folder"):
        write_weight_files([individual(A)], tmp_path / "weight")
