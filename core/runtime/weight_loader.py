"""Read external weight files into device memory: the file side of PreProcessFileConstants.

A file is opened through its real path inside the weight folder (core/weight_files.resolve), only
when it is a regular file (looked at before it is opened: a FIFO or device never blocks the load),
its length checked against the OM before a byte is read, and copied to device memory in chunks of at most 10 MB (GE's
CopyWeightFromFile; the device counts them as `weight_file_chunks`) through one reused host
buffer. While the bytes pass, the sha256 of every weight in the file is computed and compared
with the OM's, unless the caller opts out for speed. Every failure is a FormatError naming the file.
"""
from __future__ import annotations

import os

import numpy as np

from ..model.errors import FormatError
from ..model.record import record
from ..model.weight_files import open_regular, resolve

CHUNK = 10 << 20  # bytes per H2D copy


@record
class WeightCheck:
    """What the OM says about one weight inside a file."""
    name: str
    offset: int
    nbytes: int
    sha256: str


def open_weight_file(folder: str, name: str, nbytes: int) -> tuple[str, int]:
    """(path as shown, open descriptor) of weight file `name`, checked to be a regular file of
    exactly `nbytes` bytes inside `folder`."""
    real = resolve(folder, name)
    shown = os.path.join(folder, name)
    try:
        fd = open_regular(real, shown, "external weight file")
    except FileNotFoundError:
        raise FormatError(f"{shown}: external weight file is missing (weight folder {folder})") from None
    try:
        st = os.fstat(fd)
        if st.st_size < nbytes:
            raise FormatError(f"{shown}: external weight file is truncated: {st.st_size} bytes, "
                              f"the model needs {nbytes}")
        if st.st_size > nbytes:
            raise FormatError(f"{shown}: external weight file is {st.st_size} bytes, the model expects {nbytes} "
                              "(a different or modified file)")
    except BaseException:
        os.close(fd)
        raise
    return shown, fd


def copy_to_device(device, addr: int, fd: int, shown: str, nbytes: int, checks: list[WeightCheck],
                   verify: bool) -> int:
    """Copy the file at `fd` to device memory at `addr` in chunks; returns the number of chunks."""
    hashing = _Hashing(checks if verify else [])
    buf = np.empty(min(CHUNK, max(nbytes, 1)), np.uint8)
    chunks = pos = 0
    while pos < nbytes:
        view = buf[:min(CHUNK, nbytes - pos)]
        _read_exactly(fd, view, pos, shown, nbytes)
        device.memcpy_h2d(addr + pos, view)
        device.counters["weight_file_chunks"] += 1
        hashing.update(pos, view)
        pos += view.nbytes
        chunks += 1
    hashing.check(shown)
    return chunks


def verify_file(fd: int, shown: str, nbytes: int, checks: list[WeightCheck]) -> None:
    """Hash the given weights of an open file on the host (no device copy)."""
    hashing = _Hashing(checks)
    buf = np.empty(min(CHUNK, max(nbytes, 1)), np.uint8)
    for (offset, size, _), (digest, _) in hashing.ranges.items():
        pos, end = offset, offset + size
        while pos < end:
            view = buf[:min(CHUNK, end - pos)]
            _read_exactly(fd, view, pos, shown, nbytes)
            digest.update(view)
            pos += view.nbytes
    hashing.check(shown)


def _read_exactly(fd: int, view: np.ndarray, pos: int, shown: str, nbytes: int) -> None:
    mv, done = memoryview(view), 0
    while done < view.nbytes:
        n = os.preadv(fd, [mv[done:]], pos + done) if hasattr(os, "preadv") else _pread_into(fd, mv[done:], pos + done)
        if n <= 0:
            raise FormatError(f"{shown}: external weight file is truncated: it ended at byte {pos + done} while "
                              f"reading (the model needs {nbytes})")
        done += n


def _pread_into(fd: int, mv: memoryview, pos: int) -> int:  # pragma: no cover - platforms without preadv
    data = os.pread(fd, mv.nbytes, pos)
    mv[:len(data)] = data
    return len(data)


class _Hashing:
    """sha256 of each distinct weight range, fed chunk by chunk as the bytes pass."""

    def __init__(self, checks: list[WeightCheck]):
        import hashlib  # OpenSSL's: loaded by the models with external weights only (15-20 ms)
        self.ranges: dict[tuple[int, int, str], tuple] = {}
        for c in checks:
            self.ranges.setdefault((c.offset, c.nbytes, c.sha256), (hashlib.sha256(), c))

    def update(self, pos: int, view: np.ndarray) -> None:
        end = pos + view.nbytes
        for (offset, nbytes, _), (digest, _) in self.ranges.items():
            lo, hi = max(offset, pos), min(offset + nbytes, end)
            if lo < hi:
                digest.update(view[lo - pos:hi - pos])

    def check(self, shown: str) -> None:
        for (offset, nbytes, sha), (digest, c) in self.ranges.items():
            if digest.hexdigest() != sha:
                raise FormatError(f"{shown}: sha256 of weight '{c.name}' (bytes {offset}..{offset + nbytes}) does not "
                                  f"match the model's {sha[:12]}…: the file was modified or corrupted")
