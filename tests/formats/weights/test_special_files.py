"""Weight files, meta.json and the OM itself are regular files or nothing: a FIFO, a directory, a
socket or a device in their place is refused at once with an error naming the file (a FIFO used
to block the load forever), and the folder's `..`/absolute/symlink-out refusals still hold."""
from __future__ import annotations

import os
import socket
import tempfile
import threading

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.model.errors import FormatError
from ge.formats.weights import read_meta

from tests.fuzz.om_fuzz import seed_inputs, seed_onnx

DEADLINE = 30.0  # a refusal takes milliseconds; a blocked open() would never return


def within_deadline(fn):
    """fn() in a thread: its result or exception, or a test failure when it blocks."""
    box = {}

    def call():
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed back to the test
            box["error"] = e

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(DEADLINE)
    assert not t.is_alive(), "blocked (the file was opened instead of being refused)"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture(params=[1, 2], ids=["individual", "combined"])
def compiled(request, tmp_path):
    path = tmp_path / "m.onnx"
    onnx.save(seed_onnx(), str(path))
    result = api.atc(str(path), str(tmp_path / "out" / "m"), external_weight=request.param)
    folder = tmp_path / "out" / "weight"
    files = sorted(f for f in os.listdir(folder) if f.startswith("weight_") or f.endswith("_weight_combined"))
    assert files
    return result.om_path, folder, files[0]


def replace_with(path, kind: str):
    os.remove(path)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        os.mkdir(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)  # bound at a short path (AF_UNIX's limit), then moved in
        short = tempfile.mkdtemp(prefix="ge", dir="/tmp")
        s.bind(os.path.join(short, "s"))
        os.rename(os.path.join(short, "s"), path)
        os.rmdir(short)
        return s
    elif kind == "device":
        os.symlink("/dev/zero", path)  # a symlink out of the folder to a device
    return None


@pytest.mark.parametrize("kind,message", [("fifo", "is a FIFO"), ("directory", "is a directory"),
                                          ("socket", "is a socket"), ("device", "symlink leading outside")])
def test_a_weight_file_that_is_not_a_regular_file_is_refused_at_once(compiled, kind, message):
    om, folder, name = compiled
    expected = api.execute(api.load_from_file(om), seed_inputs())
    held = replace_with(folder / name, kind)
    try:
        with pytest.raises(FormatError, match=message) as e:
            within_deadline(lambda: api.load_from_file(om))
        assert name in str(e.value) and "\n" not in str(e.value)
    finally:
        if held is not None:
            held.close()
    assert len(expected) == 1


def test_a_fifo_with_a_writer_waiting_is_still_refused(compiled):
    """Even with a writer on the other end, a FIFO is never read as weights."""
    om, folder, name = compiled
    replace_with(folder / name, "fifo")
    writer = os.open(folder / name, os.O_RDWR)  # keeps the FIFO open for writing without blocking
    try:
        os.write(writer, b"\0" * 100)
        with pytest.raises(FormatError, match="is a FIFO"):
            within_deadline(lambda: api.load_from_file(om))
    finally:
        os.close(writer)


def test_weight_file_size_is_checked_before_reading(compiled):
    om, folder, name = compiled
    with open(folder / name, "ab") as f:
        f.write(b"\0")
    with pytest.raises(FormatError, match=r"bytes, the model expects \d+ \(a different or modified file\)"):
        api.load_from_file(om)


def test_a_symlink_inside_the_folder_to_a_regular_file_inside_it_still_loads(compiled):
    om, folder, name = compiled
    expected = api.execute(api.load_from_file(om), seed_inputs())
    os.rename(folder / name, folder / "real")
    os.symlink("real", folder / name)
    got = api.execute(api.load_from_file(om), seed_inputs())
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


def test_an_om_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "m.om")
    with pytest.raises(FormatError, match=r"m\.om: the OM is a FIFO"):
        within_deadline(lambda: api.load_from_file(str(tmp_path / "m.om")))


def test_an_om_that_is_a_directory_is_refused(tmp_path):
    os.mkdir(tmp_path / "m.om")
    with pytest.raises(FormatError, match=r"m\.om: the OM is a directory"):
        api.load_from_file(str(tmp_path / "m.om"))


def test_meta_json_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "meta.json")
    with pytest.raises(FormatError, match=r"meta\.json: meta\.json is a FIFO"):
        within_deadline(lambda: read_meta(tmp_path))
