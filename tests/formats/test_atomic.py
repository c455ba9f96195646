"""formats/atomic.py: EarlyWriteback starts the kernel's writeback of each `step` of a big file
while the rest is written (the fsync at the end waits for the tail only); the file is the same."""
from __future__ import annotations

import os

from ge.formats import atomic
from ge.formats.atomic import EarlyWriteback, write_atomically


def test_early_writeback_asks_for_each_step_and_leaves_the_bytes_as_written(tmp_path, monkeypatch):
    asked = []
    real = atomic._SYNC_FILE_RANGE
    assert real is not None  # Linux: sync_file_range is there

    def spy(fd, start, nbytes, flags):
        asked.append((start, nbytes, flags))
        return real(fd, start, nbytes, flags)
    monkeypatch.setattr(atomic, "_SYNC_FILE_RANGE", spy)
    pieces = [bytes([k]) * (3000 + k) for k in range(10)]

    def write(f):
        f.write(b"head")
        writeback = EarlyWriteback(f, step=8000)
        for p in pieces:
            f.write(p)
            writeback.wrote()
    write_atomically(tmp_path / "big.bin", write)
    assert (tmp_path / "big.bin").read_bytes() == b"head" + b"".join(pieces)
    ends = [4 + sum(map(len, pieces[:k + 1])) for k in range(len(pieces))]
    starts = [4] + [s + n for s, n, _ in asked[:-1]]
    assert [s for s, _, _ in asked] == starts and all(flags == 2 for _, _, flags in asked)
    assert all(s + n in ends and n >= 8000 for s, n, _ in asked) and len(asked) == 3  # after pieces 3, 6 and 9: the tail is left to the fsync
    assert os.listdir(tmp_path) == ["big.bin"]


def test_early_writeback_does_nothing_where_the_call_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(atomic, "_SYNC_FILE_RANGE", None)

    def write(f):
        writeback = EarlyWriteback(f, step=1)
        f.write(b"abc")
        writeback.wrote()
    write_atomically(tmp_path / "a.bin", write)
    assert (tmp_path / "a.bin").read_bytes() == b"abc"
