"""Write a file so that readers see the old file or the whole new one, never a part: a temporary
file beside it, fsync'ed, renamed over it. A failure removes the temporary file."""
from __future__ import annotations

import contextlib
import os
import tempfile

from ge.core.errors import FormatError


def write_atomically(path: str, write) -> None:
    """`write(f)` fills the binary file object `f`; then it replaces `path` in one rename."""
    directory, base = os.path.split(path)
    try:
        fd, tmp = tempfile.mkstemp(dir=directory or ".", prefix=f".{base}.", suffix=".tmp")
    except OSError as e:
        raise FormatError(f"{path}: cannot write ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
            if hasattr(os, "fchmod"):  # mkstemp makes 0600; weight files get the usual 0666 & ~umask
                os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise FormatError(f"{path}: cannot write ({e.strerror or e})") from None
        raise


def _umask() -> int:
    """The process umask, read without setting it (os.umask would race with writer threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
