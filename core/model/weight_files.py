"""External weight files: their names, their layout rules, and the one path check applied by
both the writer (formats/weights) and the loader (core/runtime). docs/external-weights.md.

Mode 1 writes one file per distinct weight, `weight_<sha256>`; mode 2 one file per model,
`<model name>_weight_combined`, every weight at a 512-byte aligned offset. Files live in one
folder (by default `<om dir>/weight/`) and the OM names them by plain file name only, so the OM
and its folder can move together and no name in an OM can reach outside that folder.
"""
from __future__ import annotations

import os
import stat

from .errors import FormatError
from .record import record

INLINE, INDIVIDUAL, COMBINED = 0, 1, 2  # ATC's --external_weight values
MODES = {INLINE: "inline (in the OM)", INDIVIDUAL: "one file per weight", COMBINED: "one combined file"}
WEIGHT_FILE_PREFIX = "weight_"
COMBINED_SUFFIX = "_weight_combined"
COMBINED_ALIGNMENT = 512  # what the device's DMA wants for a weight's start
DEFAULT_DIR = "weight"  # beside the OM
META_NAME = "meta.json"
# Constants smaller than this stay inline in the OM whatever the mode: shape vectors, axes and
# scalars are part of the graph's structure (kernels read them on the host when they are built),
# a file or a 512-byte slot each would cost more than their bytes, and together they weigh nothing.
INLINE_LIMIT = 1024
MAX_NAME_LEN = 255


def default_weight_dir(om_path: str) -> str:
    """Where external weight files go and are looked for: `<om dir>/weight/`."""
    return os.path.join(os.path.dirname(os.path.abspath(om_path)), DEFAULT_DIR)


@record
class WeightFilePlan:
    """One file to write (made by the compiler, written by formats/weights): `pieces` are
    (offset, sha256, bytes) of its distinct weights, by offset; the gaps between them are zeros."""
    name: str
    nbytes: int
    pieces: tuple


def individual_name(sha256: str) -> str:
    return WEIGHT_FILE_PREFIX + sha256


def combined_name(model_name: str) -> str:
    name = model_name + COMBINED_SUFFIX
    problem = name_problem(name)
    if problem:
        raise FormatError(f"model name '{model_name}' cannot name a combined weight file: '{name}' {problem}")
    return name


def name_problem(name: str) -> str:
    """Why `name` is not a plain file name inside the weight folder ("" when it is one)."""
    if not isinstance(name, str) or not name:
        return "is empty"
    if os.path.isabs(name) or name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "is an absolute path"
    if ".." in name.replace("\\", "/").split("/"):
        return "leaves the weight folder ('..')"
    if "/" in name or "\\" in name or name == ".":
        return "names a folder, not a file in the weight folder"
    if "\0" in name or ":" in name or len(name) > MAX_NAME_LEN or not name.isprintable():
        return f"has characters or a length (at most {MAX_NAME_LEN}) a weight file name cannot have"
    return ""


def resolve(folder: str | os.PathLike, name: str) -> str:
    """The real path of weight file `name` in `folder`, refusing absolute names, '..', anything
    that is not a plain name, and symlinks that lead outside the folder. The file need not exist."""
    problem = name_problem(name)
    if problem:
        raise FormatError(f"external weight file '{name}' {problem}: the OM may only name files inside "
                          f"the weight folder {os.fspath(folder)}")
    root = os.path.realpath(folder)
    path = os.path.join(os.fspath(folder), name)
    real = os.path.realpath(path)
    if real == root or os.path.commonpath([root, real]) != root:
        raise FormatError(f"{path}: a symlink leading outside the weight folder {root} (to {real}); refused")
    return real


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"), (stat.S_ISLNK, "a symlink"))


def not_regular(mode: int) -> str:
    """What a file of this st_mode is when it is not a regular file ("" when it is one)."""
    if stat.S_ISREG(mode):
        return ""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str, shown: str, what: str) -> int:
    """A read-only descriptor of `path`, which must be a regular file: looked at with lstat before
    it is opened (a FIFO, device, socket, directory or symlink is refused at once, never opened, so
    nothing blocks), opened with O_NOFOLLOW and O_NONBLOCK (what replaced it between the two calls
    is not followed and does not block) and checked again on the descriptor. Errors name `shown`."""
    try:
        kind = not_regular(os.lstat(path).st_mode)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError(f"{shown}: cannot read {what} ({e.strerror or e})") from None
    if kind:
        raise FormatError(f"{shown}: {what} is {kind}, not a regular file; refused")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as e:
        raise FormatError(f"{shown}: cannot open {what} ({e.strerror or e})") from None
    kind = not_regular(os.fstat(fd).st_mode)
    if kind:
        os.close(fd)
        raise FormatError(f"{shown}: {what} is {kind}, not a regular file; refused")
    return fd
