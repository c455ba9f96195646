"""Write a model's external weight files (ATC --external_weight 1|2) and record them in meta.json.

Files are written by a pool of 8 threads, each atomically (formats/atomic.py), so a
crash or a concurrent `ge atc` never leaves a half-written weight file under its final name. A
file that already holds exactly the planned bytes (a weight shared with another model compiled
into the same folder, or the same model compiled again) is kept, not written again.
"""
from __future__ import annotations

import os

from ge.core.model.errors import FormatError
from ge.core.model.record import record
from ge.core.model.weight_files import WeightFilePlan, individual_name, name_problem

from ..atomic import make_folder, write_atomically
from .meta import update_meta

THREADS = 8
_READ_CHUNK = 8 << 20


@record
class WrittenFile:
    name: str  # plain name inside the folder, as the OM stores it
    path: str
    nbytes: int
    reused: bool  # an identical file was already there


def write_weight_files(plans: list[WeightFilePlan], folder: str | os.PathLike) -> list[WrittenFile]:
    """Write every planned file into `folder` (created if needed), then update its meta.json."""
    folder = os.fspath(folder)
    for plan in plans:
        problem = name_problem(plan.name)
        if problem:
            raise FormatError(f"weight file '{plan.name}' {problem}")
    make_folder(folder, what="weight folder")
    if not os.path.isdir(folder):
        raise FormatError(f"{folder}: the weight folder is not a directory")
    from concurrent.futures import ThreadPoolExecutor  # (imported by the models with weight files only)
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="ge-weight-writer") as pool:
        written = list(pool.map(lambda plan: _write_one(plan, folder), plans))
    # a combined file written anew may hold other bytes than before: its old entries go
    rewritten = [w.name for w, p in zip(written, plans) if not w.reused and not _content_addressed(p)]
    update_meta(folder, [(sha, p.name, offset) for p in plans for offset, sha, _ in p.pieces], rewritten)
    return written


def _content_addressed(plan: WeightFilePlan) -> bool:
    return len(plan.pieces) == 1 and plan.name == individual_name(plan.pieces[0][1])


def _write_one(plan: WeightFilePlan, folder: str) -> WrittenFile:
    path = os.path.join(folder, plan.name)
    if _holds(path, plan):
        return WrittenFile(plan.name, path, plan.nbytes, True)

    def write(f) -> None:
        pos = 0
        for offset, _, data in plan.pieces:
            f.write(bytes(offset - pos))  # zeros up to the aligned offset
            f.write(data)
            pos = offset + len(data)
        f.write(bytes(plan.nbytes - pos))

    write_atomically(path, write)
    return WrittenFile(plan.name, path, plan.nbytes, False)


def _holds(path: str, plan: WeightFilePlan) -> bool:
    """Is `path` a regular file (not a symlink) of the planned size whose weights hash right?"""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not os.path.isfile(path) or os.path.islink(path) or st.st_size != plan.nbytes:
        return False
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb") as f:
            if not os.path.samestat(st, os.fstat(f.fileno())):  # replaced since lstat: not ours to reuse
                return False
            for offset, sha, data in plan.pieces:
                f.seek(offset)
                digest, left = _sha256(), len(data)
                while left:
                    chunk = f.read(min(left, _READ_CHUNK))
                    if not chunk:
                        return False
                    digest.update(chunk)
                    left -= len(chunk)
                if digest.hexdigest() != sha:
                    return False
    except OSError:
        return False
    return True


def _sha256():
    import hashlib  # OpenSSL's (fast on big data): loaded by the models with weight files only
    return hashlib.sha256()
