"""ge's native kernels: the sources of csrc/ built once per instruction-set level of this machine's
architecture (core/kernels/native_levels.py) into ge.core.kernels._native_<level>; native/loader.py loads the
best one the running CPU has. Everything else about the package is in pyproject.toml.

Optional: a level the compiler cannot build is skipped, and without a C compiler the install still
succeeds (the kernels keep their numpy plans); either is said on stderr, and again at first use."""
import copy
import os
import platform
import runpy
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, PlatformError

CSRC = "core/kernels/csrc"
#: every source of the library (each built at every level); abi.h lists the functions they export
SOURCES = ["gemm.c", "gemv.c", "direct_conv.c", "conv_pixels.c", "nchwc.c", "nchwc_pool.c", "nchwc_depthwise.c", "depthwise.c", "max_pool.c", "phase_fill.c", "rows.c", "convert.c", "eltwise.c", "qgemm.c", "recurrent.c",
           "pool.c", "module.c"]
DEPENDS = ["abi.h", "abi_layout.h", "simd.h", "half.h", "pool.h", "nchwc.h"]
#: -g0: no debug information (Python's own CFLAGS ask for it; it is a fifth of the build's time);
#: -frecord-gcc-switches: each object keeps its compiler flags in the library (.GCC.command.line),
#: where tests/core/kernels/test_native_levels.py checks that every object of a level has its flags
CFLAGS = ["-O3", "-g0", "-std=gnu11", "-frecord-gcc-switches"]

_levels = runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "core/kernels/native_levels.py"))


def native_extension(level) -> Extension:
    return Extension(f"ge.core.kernels._native_{level.name}", [f"{CSRC}/{s}" for s in SOURCES],
                     depends=[f"{CSRC}/{h}" for h in DEPENDS], define_macros=[("GE_LEVEL", level.name)],
                     extra_compile_args=CFLAGS + list(level.cflags), extra_link_args=["-lpthread"], optional=True)


class BuildLevels(build_ext):
    """The levels in parallel (one compiler per core), each compiling into its own temporary folder
    (the sources are the same: one level's objects must not land in another's library); a level that
    fails is reported and skipped."""

    def finalize_options(self):
        if self.parallel is None:
            self.parallel = True
        super().finalize_options()

    def build_extension(self, ext):
        own = copy.copy(self)  # the levels build in parallel: each with its own build_temp
        own.build_temp = os.path.join(self.build_temp, ext.name.rsplit(".", 1)[-1])
        try:
            build_ext.build_extension(own, ext)
        except (CCompilerError, CompileError, PlatformError) as exc:
            self.failed = getattr(self, "failed", []) + [ext.name]
            print(f"WARNING: ge: native kernels {ext.name} not built ({exc}); that level is skipped",
                  file=sys.stderr)

    def run(self):
        super().run()
        if len(getattr(self, "failed", [])) == len(self.extensions):
            print("WARNING: ge: no native kernels were built (no working C compiler?): ge runs, but every kernel "
                  "takes its numpy plan, several times slower", file=sys.stderr)


setup(ext_modules=[native_extension(level) for level in _levels["levels_for"](platform.machine())],
      cmdclass={"build_ext": BuildLevels})
