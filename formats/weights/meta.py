"""meta.json: which weight file (and offset) holds the bytes of each sha256 in a weight folder.

    {"hash_to_weight_file": {"<sha256>": "weight_<sha256>", ...},
     "hash_to_weight_offset": {"<sha256>": 0, ...}}

GE's FileConstantMeta, with plain file names instead of absolute paths so the folder can move.
Later builds and tools read it to find and verify weights. It is only changed under an exclusive
flock on `meta.json.lock` (a separate file: meta.json itself is replaced by rename, and a lock on
a replaced inode would protect nothing), and written atomically, so concurrent `ge atc` runs into
one folder each see, and leave, a complete and consistent file.
"""
from __future__ import annotations

import contextlib
import json
import os

from ge.core.model.errors import FormatError
from ge.core.model.weight_files import META_NAME, individual_name, name_problem, open_regular

from ..atomic import write_atomically

LOCK_NAME = META_NAME + ".lock"
FILES, OFFSETS = "hash_to_weight_file", "hash_to_weight_offset"
MAX_META_SIZE = 64 << 20  # a folder of a million weights stays far below this


def empty() -> dict:
    return {FILES: {}, OFFSETS: {}}


def read_meta(folder: str | os.PathLike) -> dict:
    """The folder's meta.json, validated (an empty meta when there is none)."""
    path = os.path.join(os.fspath(folder), META_NAME)
    try:
        with os.fdopen(open_regular(path, path, META_NAME), "rb") as f:  # a FIFO: refused, not waited on
            raw = f.read(MAX_META_SIZE + 1)
    except FileNotFoundError:
        return empty()
    except OSError as e:
        raise FormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if len(raw) > MAX_META_SIZE:
        raise FormatError(f"{path}: larger than {MAX_META_SIZE} bytes")
    try:
        meta = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise FormatError(f"{path}: not valid JSON ({e}); delete it and compile again") from None
    _validate(meta, path)
    return {FILES: dict(meta[FILES]), OFFSETS: dict(meta[OFFSETS])}


def _validate(meta, path: str) -> None:
    if not isinstance(meta, dict) or not isinstance(meta.get(FILES), dict) or not isinstance(meta.get(OFFSETS), dict):
        raise FormatError(f"{path}: needs the maps '{FILES}' and '{OFFSETS}'")
    for sha, file in meta[FILES].items():
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise FormatError(f"{path}: key '{sha[:80]}' is not a sha256 (64 lowercase hex digits)")
        problem = name_problem(file) if isinstance(file, str) else "is not a string"
        if problem:
            raise FormatError(f"{path}: file of {sha[:12]}… '{str(file)[:80]}' {problem}")
        offset = meta[OFFSETS].get(sha)
        if type(offset) is not int or offset < 0:
            raise FormatError(f"{path}: offset of {sha[:12]}… must be a non-negative integer, got {offset!r}")
    if set(meta[OFFSETS]) - set(meta[FILES]):
        raise FormatError(f"{path}: '{OFFSETS}' names hashes that '{FILES}' does not")


@contextlib.contextmanager
def locked(folder: str | os.PathLike):
    """Hold the folder's exclusive meta lock (fcntl.flock: released by the OS if we die)."""
    import fcntl  # POSIX; ge's CLI targets Linux and macOS
    path = os.path.join(os.fspath(folder), LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
    except OSError as e:
        raise FormatError(f"{path}: cannot open the lock file ({e.strerror or e})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def update_meta(folder: str | os.PathLike, entries, rewritten=()) -> dict:
    """Record (sha256, file, offset) entries under the lock and return the new meta.

    Entries of files just `rewritten` (a combined file compiled again) and of files that no
    longer exist are dropped first (or moved to the hash's own `weight_<sha256>` file if there
    is one); then a hash already recorded keeps its first location, so an entry does not move
    while its file holds it. Every entry left points at an existing file."""
    folder = os.fspath(folder)
    with locked(folder):
        meta = read_meta(folder)
        rewritten = set(rewritten)
        exists: dict[str, bool] = {}

        def keep(file: str) -> bool:
            if file not in exists:
                exists[file] = file not in rewritten and os.path.isfile(os.path.join(folder, file))
            return exists[file]

        for sha in [s for s, f in meta[FILES].items() if not keep(f)]:
            if keep(individual_name(sha)):  # its bytes still live in their own mode-1 file
                meta[FILES][sha], meta[OFFSETS][sha] = individual_name(sha), 0
            else:
                del meta[FILES][sha]
                meta[OFFSETS].pop(sha, None)
        for sha, file, offset in entries:
            if sha not in meta[FILES]:
                meta[FILES][sha] = file
                meta[OFFSETS][sha] = int(offset)
        text = (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode()
        write_atomically(os.path.join(folder, META_NAME), lambda f: f.write(text))
    return meta
