"""Write a file so that readers see the old file or the whole new one, never a part: a temporary
file beside it, optionally checked, renamed over it. A failure removes the temporary file and leaves
`path` as it was. Used for OM files, weight files, meta.json and run outputs.

No fsync: what ge writes can be made again, and its readers refuse a file whose bytes do not match
its checksums (an OM's header and body, each weight's sha256 in the OM), so the power cut that
an fsync guards against ends in an error naming the file, not a wrong answer; as ATC, onnx.save or
torch.save, ge leaves durability to the file system. (An fsync was 10-30 ms of a `ge atc` writing a
14 MB OM here, a tenth of onnxruntime's whole session creation; a full disk is still reported by the
writes themselves: ext4, XFS and btrfs reserve the space of buffered writes as they are made.)"""
from __future__ import annotations

import contextlib
import os

from ge.core.model.errors import FormatError


def make_folder(folder, label: str | None = None, what: str = "folder") -> None:
    """os.makedirs(exist_ok=True), an OSError (a full disk, a file in the way) a FormatError
    "<label>: cannot create the <what>: <why>"."""
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise FormatError(f"{label or os.fspath(folder)}: cannot create the {what}: {e.strerror or e}") from None


def write_atomically(path, write, *, label: str | None = None, check=None) -> None:
    """`write(f)` fills the binary file object `f`; `check(tmp_path)` may inspect the finished
    file before it replaces `path`. OS errors become FormatError "<label>: cannot write: <why>"."""
    path = os.fspath(path)
    label = label or path
    directory, base = os.path.split(os.path.abspath(path))
    try:
        fd, tmp = _create_temporary(directory, base)
    except OSError as e:
        raise FormatError(f"{label}: cannot write: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            if hasattr(os, "fchmod"):  # mkstemp makes 0600; files get the usual 0666 & ~umask
                os.fchmod(f.fileno(), 0o666 & ~_UMASK)
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise FormatError(f"{label}: cannot write: {e.strerror or e}") from None
        raise


def _create_temporary(directory: str, base: str) -> tuple[int, str]:
    """tempfile.mkstemp(dir=directory, prefix=f".{base}.", suffix=".tmp"), without importing tempfile
    (shutil, random and their compression modules: ~8 ms of `ge atc`): a new file, mode 0600."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.urandom(6).hex()}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {base}")


def _read_umask() -> int:
    """The process umask, read once at import (os.umask sets it too: never toggle it while threads write)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()
