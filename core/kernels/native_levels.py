"""The instruction-set levels ge's native kernels are built for, one library per level, and what
each needs of the CPU. setup.py builds every level of the building machine's architecture from the
same sources (csrc/: their `#ifdef __AVX512F__`/`__AVX2__`/`__F16C__` paths pick the level's code);
native/loader.py loads the best one the running CPU has. So a wheel or an install moves between machines of
one architecture: no library is built for the building CPU alone (no -march=native), as numpy's and
ggml's CPU dispatch do. A source install builds the levels the installing CPU runs (levels_to_build);
GE_BUILD_LEVELS=all builds every level, for a wheel or an install meant for other machines.

Plain data and pure functions without imports of ge: setup.py reads this file before ge is installed."""
from __future__ import annotations

from collections import namedtuple


class Level(namedtuple("Level", ("name", "cflags", "needs"))):
    """name: the library is ge.core.kernels._native_<name>; GE_NATIVE_LEVEL=<name> asks for it;
    cflags: the compiler's target flags for this level (a tuple of str); needs: the CPU features it
    runs on, as Linux's /proc/cpuinfo names them (a frozenset of str). (collections' namedtuple, not
    typing's NamedTuple: its annotations, strings here, were compiled at every import, ~6 M instructions
    of each load process.)"""
    __slots__ = ()


_V2 = frozenset({"cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2"})
_V3 = _V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}

#: per architecture (platform.machine(), normalized by arch()), worst first: the x86-64 psABI levels
#: (v4vnni adds AVX-512 VNNI for the int8 kernels' vpdpbusd); on aarch64 NEON is part of armv8-a
LEVELS: dict[str, tuple[Level, ...]] = {
    "x86_64": (
        Level("v2", ("-march=x86-64-v2",), _V2),
        Level("v3", ("-march=x86-64-v3",), _V3),
        Level("v4", ("-march=x86-64-v4",), _V4),
        Level("v4vnni", ("-march=x86-64-v4", "-mavx512vnni"), _V4 | {"avx512_vnni"}),
    ),
    "aarch64": (Level("armv8", ("-march=armv8-a",), frozenset()),),
}
#: any other architecture: the compiler's default target
GENERIC = (Level("generic", (), frozenset()),)

_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


def arch(machine: str) -> str:
    """platform.machine() as LEVELS's key ("AMD64" and "x86_64" -> "x86_64", "arm64" -> "aarch64")."""
    m = machine.lower()
    return _ALIASES.get(m, m)


def levels_for(machine: str) -> tuple[Level, ...]:
    return LEVELS.get(arch(machine), GENERIC)


def cpu_flags(path: str = "/proc/cpuinfo") -> frozenset[str] | None:
    """The CPU's features as Linux's /proc/cpuinfo names them (x86's "flags", arm's "Features"), or
    None where there is no /proc/cpuinfo to read them from."""
    try:
        with open(path) as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        return None
    return frozenset()


def lacks(level: Level, flags: frozenset[str] | None) -> frozenset[str]:
    """The features `level` needs that a CPU with `flags` lacks (None: unknown, only the baseline is
    safe to run blind: callers pass the baseline)."""
    return frozenset() if flags is None else level.needs - flags


def runnable(levels: tuple[Level, ...], flags: frozenset[str] | None) -> tuple[Level, ...]:
    """The levels (worst first) a CPU with `flags` runs; with its features unknown, the baseline."""
    if flags is None:
        return levels[:1]
    return tuple(lv for lv in levels if not lacks(lv, flags))


def levels_to_build(machine: str, flags: frozenset[str] | None, asked: str | None = None) -> tuple[Level, ...]:
    """What an install builds: the levels of `machine`'s architecture a CPU with `flags` runs, or
    `asked` (GE_BUILD_LEVELS): "all" for every level, or names separated by commas."""
    levels = levels_for(machine)
    if not asked:
        return runnable(levels, flags)
    if asked.strip() == "all":
        return levels
    names = [n.strip() for n in asked.split(",") if n.strip()]
    unknown = [n for n in names if n not in {lv.name for lv in levels}]
    if unknown:
        raise ValueError(f"GE_BUILD_LEVELS={asked}: {', '.join(unknown)} not a level of {arch(machine)} "
                         f"({', '.join(lv.name for lv in levels)}, or all)")
    return tuple(lv for lv in levels if lv.name in names)
