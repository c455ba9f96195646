"""formats/atomic.py: write_atomically replaces a file whole or not at all, and its temporary file
never outlives it (the whole commands' fault injection is tests/e2e/test_write_faults.py)."""
from __future__ import annotations

import errno
import os
import stat

import pytest

from ge.core.model.errors import FormatError
from ge.formats.atomic import write_atomically


def test_the_new_bytes_replace_the_old_file_with_the_usual_mode(tmp_path):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    write_atomically(target, lambda f: (f.write(b"new "), f.write(b"bytes")))
    assert target.read_bytes() == b"new bytes" and os.listdir(tmp_path) == ["a.bin"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600


@pytest.mark.parametrize("stage", ["write", "check"])
def test_a_failure_leaves_the_old_file_and_no_temporary(tmp_path, stage):
    target = tmp_path / "a.bin"
    target.write_bytes(b"old")
    seen = []

    def write(f):
        f.write(b"half")
        if stage == "write":
            raise OSError(errno.ENOSPC, "No space left on device")

    def check(tmp):
        seen.append(open(tmp, "rb").read())  # the check sees the whole new file, closed
        raise FormatError(f"{tmp}: refused")
    with pytest.raises(FormatError, match="cannot write: No space left on device" if stage == "write" else "refused"):
        write_atomically(target, write, label="the file", check=check)
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["a.bin"]
    assert seen == ([] if stage == "write" else [b"half"])


def test_an_error_names_the_label(tmp_path):
    with pytest.raises(FormatError, match=r"^output file 'x': cannot write: "):
        write_atomically(tmp_path / "missing" / "x", lambda f: None, label="output file 'x'")
