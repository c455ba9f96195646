"""The ABI check between the native library's argument structs (csrc/abi.h, exported by
ge_abi_layout) and the ctypes classes generated from it (native/abi.py): they agree, and a mismatch refuses the library."""
import ctypes
import logging

import pytest

from ge.core.kernels import native as native_mod
from ge.core.kernels.native import loader

from .levels import best_level


@pytest.fixture(params=list(native_mod.built_levels()))
def library(request):
    """Each level's library (loading runs nothing of it: the layout table is plain data)."""
    return ctypes.CDLL(native_mod.built_levels()[request.param])


def test_every_struct_agrees_with_the_library(library):
    assert native_mod.abi_mismatches(library) == []


def test_the_table_covers_every_field(library):
    """The check reads every field of every struct from the library: a struct with a field the C side
    does not list is a mismatch, so nothing passes by omission."""
    class Rows(ctypes.Structure):  # native.Rows with one field more
        _fields_ = native_mod.Rows._fields_ + [("extra", ctypes.c_int64)]

    size = ctypes.sizeof(native_mod.Rows)
    assert native_mod.abi_mismatches(library, (Rows,)) == [
        f"Rows: size {size} in C, {ctypes.sizeof(Rows)} in ctypes",
        f"Rows.extra: (offset, size) None in C, ({Rows.extra.offset}, 8) in ctypes"]


def test_a_moved_field_is_found(library):
    class ConvDirect(ctypes.Structure):  # threads and wide swapped: same size, other offsets
        fields = list(native_mod.ConvDirect._fields_)
        i = [f for f, _ in fields].index("threads")
        fields[i], fields[i + 1] = fields[i + 1], fields[i]
        _fields_ = fields

    at = native_mod.ConvDirect.threads.offset
    assert native_mod.abi_mismatches(library, (ConvDirect,)) == [
        f"ConvDirect.threads: (offset, size) ({at}, 4) in C, ({at + 4}, 4) in ctypes",
        f"ConvDirect.wide: (offset, size) ({at + 4}, 4) in C, ({at}, 4) in ctypes"]


def test_a_struct_the_library_lacks(library):
    class Unknown(ctypes.Structure):
        _fields_ = [("x", ctypes.c_void_p)]

    assert native_mod.abi_mismatches(library, (Unknown,)) == ["Unknown: not in the library's layout table"]


def test_a_mismatch_refuses_the_library_with_a_debug_log(monkeypatch, caplog):
    class Depthwise(ctypes.Structure):  # as if the binding were older than the library: a field short
        _fields_ = native_mod.Depthwise._fields_[:-1]

    best_level()  # (skips where no level runs: nothing to refuse)
    monkeypatch.delenv("GE_NO_NATIVE", raising=False)  # the loader itself is under test
    real = loader.STRUCTS
    monkeypatch.setattr(loader, "STRUCTS", real[:3] + (Depthwise,))
    monkeypatch.setattr(loader, "_NATIVE", False)
    with caplog.at_level(logging.DEBUG, logger="ge.native"):
        assert native_mod.native() is None
    assert "native kernels refused, numpy plans used" in caplog.text
    last, *_ = native_mod.Depthwise._fields_[-1]
    offset, size = getattr(native_mod.Depthwise, last).offset, getattr(native_mod.Depthwise, last).size
    assert f"Depthwise.{last}: (offset, size) ({offset}, {size}) in C, None in ctypes" in caplog.text
    monkeypatch.setattr(loader, "_NATIVE", False)  # the real structs load it again
    monkeypatch.setattr(loader, "STRUCTS", real)
    assert native_mod.native() is not None


def test_ge_no_native_is_logged(monkeypatch, caplog):
    monkeypatch.setenv("GE_NO_NATIVE", "1")
    monkeypatch.setattr(loader, "_NATIVE", False)
    with caplog.at_level(logging.DEBUG, logger="ge.native"):
        assert native_mod.native() is None
    assert "GE_NO_NATIVE" in caplog.text


def test_every_constant_agrees_and_a_changed_one_is_found(library):
    """A library built before an enum grew (a new activation inserted) would read the new opcodes as
    others: each constant's value is in the table and checked."""
    assert native_mod.abi_mismatches(library, ()) == []
    tanh = native_mod.ACT_TANH
    assert native_mod.abi_mismatches(library, (), {"ACT_TANH": tanh + 1, "ACT_UNHEARD_OF": 7}) == [
        f"constant ACT_TANH: {tanh} in C, {tanh + 1} in abi.py", "constant ACT_UNHEARD_OF: None in C, 7 in abi.py"]


def test_the_quick_comparison_agrees_and_any_change_falls_back_to_the_named_walk(library, monkeypatch):
    """load() compares the table's numbers with abi.py's at once (_layout_agrees) and walks it row by row,
    naming what differs, only when they do not agree: a changed constant or a struct with a field more
    or less is such a case (and a table shorter than abi.py's is not read past its end)."""
    assert loader._layout_agrees(library)
    monkeypatch.setattr(loader.abi, "ACT_TANH", native_mod.ACT_TANH + 1)
    assert not loader._layout_agrees(library)
    monkeypatch.undo()

    class Rows(ctypes.Structure):  # native.Rows with one field more
        _fields_ = native_mod.Rows._fields_ + [("extra", ctypes.c_int64)]

    real = loader.STRUCTS
    monkeypatch.setattr(loader, "STRUCTS", real + (Rows,))  # abi.py's rows past the table's end: read up to it only
    assert not loader._layout_agrees(library)
    monkeypatch.setattr(loader, "STRUCTS", real[:2])  # fewer rows: the table's next one is not its end
    assert not loader._layout_agrees(library)
