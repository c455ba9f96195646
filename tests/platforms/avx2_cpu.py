"""Run a command as on an AVX2 CPU without AVX-512 (x86-64-v3), on an AVX-512 machine (issues 29 and 31).

    python -m tests.platforms.avx2_cpu python -c "import numpy; numpy.show_runtime()"
    python -m tests.platforms.avx2_cpu python benchmarks/vs_onnxruntime.py --single-thread
    python -m tests.platforms.avx2_cpu python -m pytest tests/core/kernels/test_int8_paths.py
    python -m tests.platforms.avx2_cpu bash .ci/run     # (in a fresh clone) the README's test command

The command and every process it starts see a CPU whose CPUID lacks AVX-512, VNNI (AVX-512 and AVX-VNNI)
and AMX (avx2_cpuid.c): onnxruntime's MLAS and numpy choose their AVX2 kernels, ge its v3 library, and all
of them run at this CPU's speed -- the comparison an AVX2 machine gives, which GE_NATIVE_LEVEL=v3 alone does
not (onnxruntime keeps its AVX-512 kernels). Needs Linux's CPUID faulting (the "cpuid_fault" flag in
/proc/cpuinfo: Intel CPUs since Ivy Bridge, most hypervisors pass it on) and a C compiler.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("avx2_cpuid.c")


def unavailable() -> str | None:
    """Why this machine cannot pose as an AVX2 CPU, or None."""
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        return "needs Linux on x86-64"
    flags = Path("/proc/cpuinfo").read_text().split()
    if "cpuid_fault" not in flags:
        return "the CPU or hypervisor has no CPUID faulting (no cpuid_fault in /proc/cpuinfo)"
    if "avx2" not in flags or "fma" not in flags:
        return "the CPU has no AVX2+FMA to run"
    if not compiler():
        return "no C compiler"
    return None


def compiler() -> str | None:
    return shutil.which("cc") or shutil.which("gcc")


def library() -> Path:
    """The masking library, compiled once per source version into the temp folder."""
    source = SOURCE.read_bytes()
    lib = Path(tempfile.gettempdir()) / f"ge-avx2-cpuid-{hashlib.sha256(source).hexdigest()[:12]}.so"
    if not lib.exists():
        part = lib.with_suffix(f".{os.getpid()}.part")
        subprocess.run([compiler(), "-O2", "-shared", "-fPIC", "-o", str(part), str(SOURCE), "-ldl"], check=True)
        part.replace(lib)
    return lib


#: glibc reads the CPU before any library's constructor runs (its memcpy/memset variants): its tunables
#: take the same features away from it
GLIBC_HWCAPS = "glibc.cpu.hwcaps=" + ",".join(f"-{f}" for f in (
    "AVX512F", "AVX512CD", "AVX512DQ", "AVX512BW", "AVX512VL", "AVX512_IFMA", "AVX512_VBMI", "AVX512_VBMI2",
    "AVX512_VNNI", "AVX512_BITALG", "AVX512_VPOPCNTDQ", "AVX512_BF16", "AVX512_FP16", "AVX_VNNI"))


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default os.environ) with the masking library preloaded and glibc told the same."""
    env = dict(os.environ if base is None else base)
    env["LD_PRELOAD"] = " ".join(filter(None, [str(library()), env.get("LD_PRELOAD", "")]))
    env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES", ""), GLIBC_HWCAPS]))
    return env


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    reason = unavailable()
    if reason:
        print(f"avx2_cpu: cannot pose as an AVX2 CPU here: {reason}", file=sys.stderr)
        return 2
    return subprocess.run(argv, env=environment()).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
