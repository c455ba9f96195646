"""The native levels of this machine's architecture, for tests that run each one: a level runs where
this CPU runs it and its library is built; elsewhere it is skipped, naming what the machine lacks (a
CPU feature, or a C compiler at install). That a C compiler builds every level this CPU runs is
test_native_levels.py's test_every_level_this_cpu_runs_is_built."""
from __future__ import annotations

import platform
import shutil
import sysconfig

import pytest

from ge.core.kernels import native
from ge.core.kernels.native_levels import Level, cpu_flags, lacks, levels_for, runnable

LEVELS_HERE = levels_for(platform.machine())
FLAGS = cpu_flags()


def c_compiler() -> str | None:
    """The C compiler setuptools would build with (Python's CC), if it is on PATH."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    return shutil.which(cc[0]) if cc else None


def skip_reason(level: Level) -> str | None:
    """Why `level` cannot run here, or None."""
    if level not in runnable(LEVELS_HERE, FLAGS):
        if FLAGS is None:
            return f"{level.name}: CPU features unknown (no /proc/cpuinfo): only the baseline runs"
        return f"{level.name}: this CPU lacks {' '.join(sorted(lacks(level, FLAGS)))}"
    if level.name not in native.built_levels():
        return f"{level.name}: not built ({'GE_BUILD_LEVELS left it out' if c_compiler() else 'no C compiler'})"
    return None


#: the levels that run here, worst first
RUNNABLE = [lv.name for lv in LEVELS_HERE if skip_reason(lv) is None]


def level_params() -> list:
    """Every level of the architecture as a pytest parameter, skipped where it cannot run here."""
    return [pytest.param(lv.name, id=lv.name, marks=[pytest.mark.skip(reason=r)] if (r := skip_reason(lv)) else [])
            for lv in LEVELS_HERE]


def best_level() -> str:
    """The best level that runs here (skips the test when none does)."""
    if not RUNNABLE:
        pytest.skip(skip_reason(LEVELS_HERE[0]) or "no native level runs here")
    return RUNNABLE[-1]


def native_library() -> native.Native | None:
    """The library that tests of the native kernels themselves call: the one ge selected (GE_NATIVE_LEVEL's),
    or where ge runs its numpy plans by choice (GE_NO_NATIVE), the best level that runs here; None
    where no level runs (skip_reason(LEVELS_HERE[0]) says why)."""
    return native.native() or (native.load_level(RUNNABLE[-1]) if RUNNABLE else None)
