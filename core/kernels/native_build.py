"""How setup.py compiles the native kernels: every (level, source) pair is one compiler run, all of
them in parallel; each object is kept in a cache keyed by what made it (object_key), so that a second
install (the editable one after `pip install .`, or a rebuild after an edit) compiles only what changed;
and one line says beforehand what is compiled and roughly for how long (build_message).

Pure functions and the standard library only: setup.py reads this file before ge is installed."""
from __future__ import annotations

import hashlib
import os
import shutil
import tempfile

#: compiler seconds (one core, -O3) of all sources at one level, as measured on a 2020s x86-64 core
#: (v2 about 25 s, v4vnni about 45 s): the estimate's unit
SECONDS_PER_LEVEL = 35


def object_key(source: bytes, headers: list[bytes], command: list[str], compiler_version: str) -> str:
    """The cache key of one object: the source, every header it may include, the whole compiler
    command (compiler, flags, macros, include folders) and the compiler's own version."""
    h = hashlib.sha256()
    for part in [source, *headers, "\0".join(command).encode(), compiler_version.encode()]:
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    return h.hexdigest()


class ObjectCache:
    """Objects by key in `folder`: `get` copies a cached one to its place, `put` keeps a new one
    (written to a temporary name, then renamed: parallel builds never see half a file)."""

    def __init__(self, folder: str):
        self.folder = folder

    def path(self, key: str) -> str:
        return os.path.join(self.folder, key + ".o")

    def has(self, key: str) -> bool:
        return os.path.exists(self.path(key))

    def get(self, key: str, dest: str) -> bool:
        if not self.has(key):
            return False
        os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
        shutil.copyfile(self.path(key), dest)
        return True

    def put(self, key: str, obj: str) -> None:
        os.makedirs(self.folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        os.close(fd)
        shutil.copyfile(obj, tmp)
        os.replace(tmp, self.path(key))


def build_message(levels: list[str], sources: int, cached: int, jobs: int) -> str:
    """The one line said before compiling: the levels, the compiler runs left, and roughly how long."""
    todo = len(levels) * sources - cached
    head = f"ge: compiling the native kernels for {' '.join(levels)}: "
    reused = f" ({cached} objects reused from an earlier build)" if cached else ""
    if not todo:
        return f"{head}nothing to compile{reused}, linking only"
    seconds = SECONDS_PER_LEVEL * todo / sources / max(1, jobs)
    rough = "under a minute" if seconds < 50 else f"about {max(1, round(seconds / 60))} minute{'s' * (seconds >= 90)}"
    return f"{head}{todo} C compiler runs on {jobs} core{'s' * (jobs > 1)}{reused}, {rough}"
