"""ge's native kernels: the sources of csrc/ built once per instruction-set level (core/kernels/
native_levels.py) into ge.core.kernels._native_<level>, for the levels the installing CPU runs
(GE_BUILD_LEVELS=all: every level of its architecture, for a wheel meant for other machines); native/loader.py
loads the best one the running CPU has. All sources of all levels compile in parallel, through a cache
of objects (core/kernels/native_build.py). Everything else about the package is in pyproject.toml.

Optional: a level the compiler cannot build is skipped, and without a C compiler the install still
succeeds (the kernels keep their numpy plans); either is said on stderr, and again at first use."""
import concurrent.futures
import os
import platform
import runpy
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CCompilerError, CompileError, LinkError, PlatformError

ROOT = os.path.dirname(os.path.abspath(__file__))
CSRC = "core/kernels/csrc"
#: every source of the library (each built at every level); abi.h lists the functions they export
SOURCES = ["gemm.c", "gemv.c", "direct_conv.c", "conv_pixels.c", "nchwc.c", "nchwc_pool.c", "nchwc_depthwise.c", "depthwise.c", "conv_transpose.c", "max_pool.c", "phase_fill.c", "rows.c", "resize.c", "copy.c", "nms.c", "convert.c", "eltwise.c", "qgemm.c", "recurrent.c",
           "pool.c", "caches.c", "loop.c", "module.c"]
DEPENDS = ["abi.h", "abi_layout.h", "simd.h", "half.h", "pool.h", "nchwc.h", "caches.h"]
#: -g0: no debug information (Python's own CFLAGS ask for it; it is a fifth of the build's time);
#: -frecord-gcc-switches: each object keeps its compiler flags in the library (.GCC.command.line),
#: where tests/core/kernels/test_native_levels.py checks that every object of a level has its flags
CFLAGS = ["-O3", "-g0", "-std=gnu11", "-frecord-gcc-switches"]
#: compiled objects by the hash of what made them (native_build.object_key): a second install reuses them
OBJECT_CACHE = os.path.join(ROOT, "build", "native-objects")

_levels = runpy.run_path(os.path.join(ROOT, "core/kernels/native_levels.py"))
_build = runpy.run_path(os.path.join(ROOT, "core/kernels/native_build.py"))


def say(line: str) -> None:
    """A line for whoever runs the install: on stderr, and on the terminal itself when there is one,
    as pip shows a build backend's output only with -v (else its spinner)."""
    print(line, file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        return
    try:
        with open("/dev/tty", "w") as tty:
            tty.write("\n" + line + "\n")  # (pip's spinner may hold the line)
    except OSError:  # no controlling terminal (CI, an IDE): stderr it is
        pass


def levels_to_build():
    try:
        levels = _levels["levels_to_build"](platform.machine(), _levels["cpu_flags"](), os.environ.get("GE_BUILD_LEVELS"))
    except ValueError as exc:
        sys.exit(f"error: ge: {exc}")
    if not levels:
        say("WARNING: ge: this CPU runs none of the native kernels' levels: none is built, ge runs its numpy plans "
            "(GE_BUILD_LEVELS=all builds them all)")
    return levels


def native_extension(level) -> Extension:
    return Extension(f"ge.core.kernels._native_{level.name}", [f"{CSRC}/{s}" for s in SOURCES],
                     depends=[f"{CSRC}/{h}" for h in DEPENDS], define_macros=[("GE_LEVEL", level.name)],
                     extra_compile_args=CFLAGS + list(level.cflags), extra_link_args=["-lpthread"], optional=True)


def compiler_version(command: list[str]) -> str:
    try:
        return subprocess.run([command[0], "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


class BuildLevels(build_ext):
    """Every (level, source) pair is one compiler run, all of them at once on every core (largest
    sources first), each level into its own temporary folder (the sources are the same: one level's
    objects must not land in another's library); objects come from and go to OBJECT_CACHE; a level
    that fails is reported and skipped."""

    def finalize_options(self):
        if self.parallel is None:
            self.parallel = True
        super().finalize_options()

    def build_extensions(self):
        self.check_extensions_list(self.extensions)
        jobs = (os.cpu_count() or 1) if self.parallel is True else max(1, int(self.parallel))
        cache = _build["ObjectCache"](OBJECT_CACHE)
        command = list(getattr(self.compiler, "compiler_so", [self.compiler.compiler_type]))
        version = compiler_version(command)
        headers = [open(os.path.join(ROOT, CSRC, h), "rb").read() for h in DEPENDS]
        keys = {}
        for ext in self.extensions:
            flags = command + [f"-D{n}={v}" for n, v in ext.define_macros] + \
                [f"-I{d}" for d in self.compiler.include_dirs + ext.include_dirs] + ext.extra_compile_args
            for src in ext.sources:
                keys[ext.name, src] = _build["object_key"](open(os.path.join(ROOT, src), "rb").read(), headers,
                                                           flags, version)
        say(_build["build_message"]([e.name.rsplit("_native_", 1)[-1] for e in self.extensions], len(SOURCES),
                                    sum(cache.has(k) for k in keys.values()), jobs))
        order = sorted(keys, key=lambda es: -os.path.getsize(os.path.join(ROOT, es[1])))
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            objects = {es: pool.submit(self.object, *es, keys[es], cache) for es in order}
            failed = []
            for ext in self.extensions:
                try:
                    self.link(ext, [objects[ext.name, src].result() for src in ext.sources])
                except (CCompilerError, CompileError, LinkError, PlatformError) as exc:
                    failed.append(ext.name)
                    say(f"WARNING: ge: native kernels {ext.name} not built ({exc}); that level is skipped")
        if len(failed) == len(self.extensions):
            say("WARNING: ge: no native kernels were built (no working C compiler?): ge runs, but every kernel "
                "takes its numpy plan, several times slower")

    def object(self, ext_name: str, src: str, key: str, cache) -> str:
        """The object of `src` at the level of extension `ext_name`: from the cache, else compiled."""
        ext = next(e for e in self.extensions if e.name == ext_name)
        temp = os.path.join(self.build_temp, ext_name.rsplit(".", 1)[-1])
        obj = self.compiler.object_filenames([src], output_dir=temp)[0]
        if not cache.get(key, obj):
            self.compiler.compile([src], output_dir=temp, macros=ext.define_macros, include_dirs=ext.include_dirs,
                                  debug=self.debug, extra_postargs=ext.extra_compile_args, depends=ext.depends)
            cache.put(key, obj)
        return obj

    def link(self, ext, objects: list[str]) -> None:
        """As build_ext.build_extension links, from the objects made here."""
        self.compiler.link_shared_object(
            objects, self.get_ext_fullpath(ext.name), libraries=self.get_libraries(ext),
            library_dirs=ext.library_dirs, runtime_library_dirs=ext.runtime_library_dirs,
            extra_postargs=ext.extra_link_args, export_symbols=self.get_export_symbols(ext), debug=self.debug,
            build_temp=self.build_temp, target_lang=self.compiler.detect_language(ext.sources))


setup(ext_modules=[native_extension(level) for level in levels_to_build()], cmdclass={"build_ext": BuildLevels})
