"""tests/platforms/avx2_cpu.py: a command run under it sees an AVX2 CPU without AVX-512 or VNNI, everywhere a
program looks (CPUID for numpy and onnxruntime, /proc/cpuinfo for ge), and still fails as it would."""
import ast
import subprocess
import sys

import pytest

from tests.platforms import avx2_cpu

pytestmark = pytest.mark.skipif(avx2_cpu.unavailable() is not None,
                                reason=f"cannot pose as an AVX2 CPU: {avx2_cpu.unavailable()}")

SATURATION = """
import numpy as np, onnx, onnxruntime as ort
from onnx import helper, TensorProto
b = onnx.numpy_helper.from_array(np.full((64, 16), 127, np.int8), "b")
graph = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "g",
    [helper.make_tensor_value_info("a", TensorProto.UINT8, [4, 64])],
    [helper.make_tensor_value_info("y", TensorProto.INT32, [4, 16])], [b])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
print(session.run(None, {"a": np.full((4, 64), 255, np.uint8)})[0][0, 0])
"""


def as_avx2(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=avx2_cpu.environment(), capture_output=True, text=True, timeout=120)


def test_numpy_and_onnxruntime_choose_their_avx2_kernels():
    simd = as_avx2(sys.executable, "-c", "import numpy._core._multiarray_umath as m; print(m.__cpu_features__)")
    features = ast.literal_eval(simd.stdout)
    assert features["AVX2"] and features["FMA3"] and not features["AVX512F"] and not features["AVX512_SKX"]
    # MLAS's AVX2 u8 x s8 kernel adds pairs of products in 16 bits (vpmaddubsw): 2 x 255 x 127 saturates
    # at 32767, 32 pairs a row; its VNNI kernel gives the exact 64 x 255 x 127
    assert as_avx2(sys.executable, "-c", SATURATION).stdout.split() == [str(32 * 32767)]


def test_glibc_takes_its_avx2_string_functions():
    """The dynamic loader reads CPUID before any library: glibc's tunables mask its AVX-512 features."""
    loader = "/lib64/ld-linux-x86-64.so.2"
    diagnostics = as_avx2(loader, "--list-diagnostics")
    if diagnostics.returncode != 0:
        pytest.skip("this glibc's loader has no --list-diagnostics (before 2.33)")
    leaf7_ebx = [line for line in diagnostics.stdout.splitlines() if line.startswith("x86.cpu_features.features[0x1].active[0x1]=")]
    assert int(leaf7_ebx[0].split("=")[1], 16) & (1 << 16) == 0  # AVX512F not usable


def test_ge_picks_its_v3_library_by_itself():
    proc = as_avx2(sys.executable, "-m", "ge.cli.main", "--version")
    assert "kernels: native v3 (sse4.2 avx avx2 fma f16c; blocked for " in proc.stdout and "), the best of" in proc.stdout, proc.stdout + proc.stderr
    assert "avx512" not in as_avx2("cat", "/proc/cpuinfo").stdout


def test_a_real_fault_still_ends_the_program_and_faulthandler_still_reports_it():
    crash = as_avx2(sys.executable, "-X", "faulthandler", "-c", "import ctypes; ctypes.string_at(0)")
    assert crash.returncode == -11 and "Fatal Python error: Segmentation fault" in crash.stderr


def test_the_c_compiler_runs_under_it(tmp_path):
    """gcc's cc1 installs its SIGSEGV handler through signal() and GMP inside it runs CPUID: the install's
    build under the mask (the README's commands run as on an AVX2 machine) needs both kept apart."""
    source = tmp_path / "f.c"
    source.write_text("int f(int x) { return x * 3; }\n")
    proc = as_avx2(avx2_cpu.compiler(), "-O2", "-c", str(source), "-o", str(tmp_path / "f.o"))
    assert proc.returncode == 0 and (tmp_path / "f.o").stat().st_size > 0, proc.stderr
