"""Finding and loading ge's native library: the levels built (native_levels.py), the CPU's features,
the level to load (the best the CPU runs, or GE_NATIVE_LEVEL's; none with GE_NO_NATIVE=1), the
library's argument structs checked against abi.py's and its self-test against numpy. Nothing here
prints at import: a missing library is said once, at first use, and by status()."""
from __future__ import annotations

import ctypes
import os
import platform
import sys
import warnings
from importlib.machinery import PathFinder

from .. import native_levels
from ..native_levels import Level, cpu_flags, lacks
from . import abi
from .abi import CONSTANTS, STRUCTS, AbiEntry
from .binding import Native

def abi_mismatches(lib: ctypes.CDLL, structs=None, constants=None) -> list[str]:
    """How the library's argument structs and constants differ from abi.py's (empty: they agree):
    each struct's size and each field's offset and size, by name, both ways; each constant's value
    (`constants`: {name: value}, default abi.py's every one)."""
    get_layout = lib.ge_abi_layout
    get_layout.argtypes, get_layout.restype = [], ctypes.POINTER(AbiEntry)
    table = get_layout()
    c_layout: dict[str, dict] = {}  # struct -> {None: size, field: (offset, size)}; "" -> {constant: value}
    for i in range(10_000):
        row = table[i]
        if row.type is None:
            break
        c_layout.setdefault(row.type.decode(), {})[row.field.decode() if row.field else None] = \
            row.size if row.field is None or not row.type else (row.offset, row.size)
    problems = []
    c_constants = c_layout.pop("", {})
    wanted = {name: getattr(abi, name) for name in CONSTANTS} if constants is None else constants
    problems += [f"constant {name}: {c_constants.get(name)} in C, {value} in abi.py"
                 for name, value in wanted.items() if c_constants.get(name) != value]
    for cls in STRUCTS if structs is None else structs:
        name = cls.__name__
        c = c_layout.get(name)
        if c is None:
            problems.append(f"{name}: not in the library's layout table")
            continue
        if c.get(None) != ctypes.sizeof(cls):
            problems.append(f"{name}: size {c.get(None)} in C, {ctypes.sizeof(cls)} in ctypes")
        py = {f: (getattr(cls, f).offset, getattr(cls, f).size) for f, *_ in cls._fields_}
        for f in sorted(set(py) | set(c) - {None}):
            if c.get(f) != py.get(f):
                problems.append(f"{name}.{f}: (offset, size) {c.get(f)} in C, {py.get(f)} in ctypes")
    return problems


def _layout_agrees(lib: ctypes.CDLL) -> bool:
    """Whether the library's layout table is abi.py's row for row, in the order generate.py writes both
    (each struct's size, its fields' offsets and sizes, then the constants' values): the table's numbers
    read at once and compared, where abi_mismatches decodes and names every row (~3 M instructions more,
    paid by every process that loads the library). False: abi_mismatches says how they differ (or that
    they agree in another order)."""
    expected = []
    for cls in STRUCTS:
        expected += (0, ctypes.sizeof(cls))
        for name, *_ in cls._fields_:
            field = getattr(cls, name)
            expected += (field.offset, field.size)
    for name in CONSTANTS:
        expected += (0, getattr(abi, name))
    rows, stride = len(expected) // 2, ctypes.sizeof(AbiEntry)
    if stride % 8 or AbiEntry.offset.offset % 8 or AbiEntry.size.offset != AbiEntry.offset.offset + 8:
        return False
    get_layout = lib.ge_abi_layout
    get_layout.argtypes, get_layout.restype = [], ctypes.c_void_p
    base, words = get_layout(), stride // ctypes.sizeof(ctypes.c_void_p)
    types = (ctypes.c_void_p * ((rows + 1) * words)).from_address(base)  # (an element read is one row's type)
    for i in range(0, rows * words, words):  # in order, up to its end (NULL): a shorter table is not read past
        if types[i] is None:
            return False
    if types[rows * words] is not None:
        return False
    numbers = memoryview(ctypes.string_at(base, rows * stride)).cast("q")
    at, step = AbiEntry.offset.offset // 8, stride // 8
    table = [0] * len(expected)
    table[0::2], table[1::2] = numbers[at::step], numbers[at + 1::step]
    return table == expected


_KERNELS = __package__.rpartition(".")[0]  # the libraries are ge.core.kernels._native_<level>


class Unavailable(Exception):
    """Why ge's native kernels are not used (the numpy plans run instead)."""


def built_levels() -> dict[str, str]:
    """The levels of this architecture whose library is built (setup.py), worst first: name -> path."""
    found, package = {}, sys.modules[_KERNELS].__path__  # (importlib.util's find_spec, not imported at load)
    for level in native_levels.levels_for(platform.machine()):
        spec = PathFinder.find_spec(f"{_KERNELS}._native_{level.name}", package)
        if spec is not None and spec.origin:
            found[level.name] = spec.origin
    return found


def choose_level(levels, built, flags: frozenset[str] | None, asked: str | None = None) -> tuple[Level, str]:
    """The level to load among `levels` (worst first) of those `built`, on a CPU with `flags` (None:
    unknown), and why it; `asked`: GE_NATIVE_LEVEL's. Raises Unavailable when none fits."""
    names = [lv.name for lv in levels]
    if asked:
        level = next((lv for lv in levels if lv.name == asked), None)
        if level is None:
            raise Unavailable(f"GE_NATIVE_LEVEL={asked} is not a level of this machine ({', '.join(names)})")
        if lacks(level, flags):
            raise Unavailable(f"GE_NATIVE_LEVEL={asked}: this CPU lacks {' '.join(sorted(lacks(level, flags)))}")
        if asked not in built:
            raise Unavailable(f"GE_NATIVE_LEVEL={asked}: its library is not built (an install builds the levels its "
                              f"CPU runs; GE_BUILD_LEVELS=all builds every one)")
        return level, f"GE_NATIVE_LEVEL={asked}"
    if not built:
        raise Unavailable("the native kernels are not built (no C compiler at install?)")
    if flags is None:  # only the baseline is safe to run blind
        if levels[0].name not in built:
            raise Unavailable(f"CPU features unknown (no /proc/cpuinfo) and the baseline level {names[0]} not built")
        return levels[0], "the baseline: CPU features unknown (no /proc/cpuinfo)"
    runnable = [lv for lv in levels if lv.name in built and not lacks(lv, flags)]
    if not runnable:
        first = next(lv for lv in levels if lv.name in built)
        raise Unavailable(f"this CPU lacks what the built levels need ({first.name}: "
                          f"{' '.join(sorted(lacks(first, flags)))})")
    return runnable[-1], f"the best of {' '.join(lv.name for lv in levels if lv.name in built)} this CPU runs"


_NATIVE: Native | None | bool = False
_STATUS = ""


def _debug(msg: str, *args) -> None:
    """A debug line of logger "ge.native". Only a program that imported logging can have configured
    where it goes, so one that has not (a script that loads an OM) does not import it for this."""
    logging = sys.modules.get("logging")
    if logging is not None:
        logging.getLogger("ge.native").debug(msg, *args)


def load(path: str) -> Native:
    """The library at `path` as a Native; Unavailable (why) when its ABI differs from this module's
    structs, a symbol is missing, or it fails its self-test."""
    name = os.path.basename(path).split(".")[0]
    try:
        lib = ctypes.CDLL(path)
        problems = [] if _layout_agrees(lib) else abi_mismatches(lib)
        if problems:
            raise Unavailable(f"{name} refused: its argument structs differ from the binding's (native/abi.py): {'; '.join(problems)}")
        candidate = Native(lib)
    except (OSError, AttributeError) as exc:
        raise Unavailable(f"{name} unusable: {exc}") from None
    if not candidate._works():
        raise Unavailable(f"{name} refused: it fails its self-test against numpy")
    return candidate


def load_level(name: str) -> Native:
    """The library of level `name` (native_levels.py), as a Native, if it is built and this CPU runs it
    (Unavailable: why not)."""
    level, _ = choose_level(native_levels.levels_for(platform.machine()), built_levels(), cpu_flags(), name)
    return load(built_levels()[level.name])


def _select() -> tuple[Native | None, str]:
    if os.environ.get("GE_NO_NATIVE"):
        _debug("native kernels off (GE_NO_NATIVE): numpy plans used")
        return None, "numpy fallback: GE_NO_NATIVE is set"
    built = built_levels()
    warn_if_not_built(built)
    try:
        level, why = choose_level(native_levels.levels_for(platform.machine()), built, cpu_flags(),
                                  os.environ.get("GE_NATIVE_LEVEL"))
        lib = load(built[level.name])
    except Unavailable as exc:
        _debug("native kernels refused, numpy plans used: %s", exc)
        return None, f"numpy fallback: {exc}"
    l1d, l2 = lib.caches
    return lib, f"native {level.name} ({lib.isa}; blocked for {l1d >> 10} KB L1d, {l2 >> 10} KB L2), {why}"


def native() -> Native | None:
    """ge's native kernels at the best level this CPU runs (or GE_NATIVE_LEVEL's), or None when they
    are not built, turned off (GE_NO_NATIVE=1), do not match this module's ABI or fail their
    self-test (status() says which). Kernels do not call this: they take the Backend they are given
    (backend.py)."""
    global _NATIVE, _STATUS
    if _NATIVE is False:
        _NATIVE, _STATUS = _select()
    return _NATIVE


def status() -> str:
    """What runs ge's kernels, for `ge --version` and `ge run --verbose`: the native level and its
    instruction sets, or the numpy fallback and why."""
    native()
    return _STATUS


def warn_if_not_built(built: dict | None = None) -> None:
    """Said once, at first use: an install without a C compiler runs, but every kernel several times slower."""
    if not (built_levels() if built is None else built):
        warnings.warn("ge: the native kernels are not built (no C compiler when ge was installed?): every kernel "
                      "runs its numpy plan, several times slower; reinstall ge where a C compiler is found",
                      RuntimeWarning, stacklevel=2)
