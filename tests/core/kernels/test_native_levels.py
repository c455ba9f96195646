"""ge's native kernels built per instruction-set level (core/kernels/native_levels.py, setup.py): an
install builds the levels its CPU runs (GE_BUILD_LEVELS: others too), each with its own flags only
(no -march=native); the loader picks the best level the CPU's features allow, GE_NATIVE_LEVEL asks
for one; each level this CPU runs passes the self-test and runs an OM compiled at another level to
onnxruntime's results (the levels it cannot run are skipped, naming the features it lacks); and an
install without the kernels says so."""
import json
import os
import platform
import struct
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core.kernels import native as native_mod
from ge.core.kernels.native import loader
from ge.core.kernels.native import Unavailable, choose_level, cpu_flags
from ge.core.kernels.native_levels import LEVELS, levels_for, levels_to_build, runnable
from tests.conftest import ort_run

from .levels import FLAGS, LEVELS_HERE, RUNNABLE, best_level, c_compiler, level_params

X86 = LEVELS["x86_64"]


def x86_flags(name: str) -> frozenset:
    return next(lv.needs for lv in X86 if lv.name == name)


# -- the selection, on made-up CPUs -----------------------------------------------------------------

@pytest.mark.parametrize("cpu,built,want", [
    ("v4vnni", "v2 v3 v4 v4vnni", "v4vnni"),
    ("v4", "v2 v3 v4 v4vnni", "v4"),  # AVX-512 without VNNI (Skylake-SP)
    ("v3", "v2 v3 v4 v4vnni", "v3"),  # AVX2 (Haswell .. Alder Lake, Zen 1-3)
    ("v2", "v2 v3 v4 v4vnni", "v2"),
    ("v4vnni", "v2 v3", "v3"),  # the best that is built
])
def test_the_best_level_the_cpu_runs(cpu, built, want):
    level, why = choose_level(X86, built.split(), x86_flags(cpu) | {"sse4a", "avx512_bf16"})
    assert level.name == want and why == f"the best of {built} this CPU runs"


def test_a_cpu_below_every_level_gets_none():
    with pytest.raises(Unavailable, match="this CPU lacks what the built levels need \\(v2: sse4_1 sse4_2\\)"):
        choose_level(X86, ["v2", "v3"], x86_flags("v2") - {"sse4_1", "sse4_2"})


def test_unknown_cpu_features_take_the_baseline():
    level, why = choose_level(X86, ["v2", "v3", "v4"], None)
    assert level.name == "v2" and "CPU features unknown" in why
    with pytest.raises(Unavailable, match="baseline level v2 not built"):
        choose_level(X86, ["v3"], None)


def test_nothing_built():
    with pytest.raises(Unavailable, match="the native kernels are not built"):
        choose_level(X86, [], x86_flags("v4"))


def test_ge_native_level_asks_for_one():
    assert choose_level(X86, ["v2", "v3", "v4"], x86_flags("v4"), "v3") == (X86[1], "GE_NATIVE_LEVEL=v3")
    with pytest.raises(Unavailable, match="GE_NATIVE_LEVEL=v4: this CPU lacks avx512bw avx512cd avx512dq avx512f "
                                          "avx512vl$"):
        choose_level(X86, ["v2", "v3", "v4"], x86_flags("v3"), "v4")
    with pytest.raises(Unavailable, match="GE_NATIVE_LEVEL=v4vnni: its library is not built"):
        choose_level(X86, ["v2", "v3", "v4"], x86_flags("v4vnni"), "v4vnni")
    with pytest.raises(Unavailable, match=r"GE_NATIVE_LEVEL=avx9 is not a level of this machine \(v2, v3, v4, v4vnni\)"):
        choose_level(X86, ["v2"], x86_flags("v4"), "avx9")


def test_levels_per_architecture():
    assert [lv.name for lv in levels_for("x86_64")] == [lv.name for lv in levels_for("AMD64")] == \
        ["v2", "v3", "v4", "v4vnni"]
    arm = levels_for("arm64")
    assert arm == levels_for("aarch64") and [lv.name for lv in arm] == ["armv8"]
    assert choose_level(arm, ["armv8"], frozenset({"fp", "asimd"}))[0].name == "armv8"
    assert choose_level(arm, ["armv8"], None)[0].name == "armv8"  # macOS: no /proc/cpuinfo, NEON is armv8-a's
    assert [(lv.name, lv.cflags) for lv in levels_for("riscv64")] == [("generic", ())]


@pytest.mark.parametrize("cpu,asked,want", [
    ("v3", None, "v2 v3"),  # AVX2 without AVX-512: v4 and v4vnni would never run
    ("v4vnni", None, "v2 v3 v4 v4vnni"),
    ("v2", "", "v2"),
    ("v2", "all", "v2 v3 v4 v4vnni"),  # a wheel for other machines
    ("v4", " v3,v2 ", "v2 v3"),
])
def test_an_install_builds_the_levels_its_cpu_runs(cpu, asked, want):
    assert [lv.name for lv in levels_to_build("x86_64", x86_flags(cpu), asked)] == want.split()


def test_levels_to_build_elsewhere():
    assert [lv.name for lv in levels_to_build("x86_64", None)] == ["v2"]  # features unknown: what the loader runs
    assert [lv.name for lv in levels_to_build("arm64", frozenset({"fp", "asimd"}))] == ["armv8"]
    assert levels_to_build("x86_64", x86_flags("v2") - {"sse4_2"}) == ()  # below the baseline: nothing runs
    with pytest.raises(ValueError, match=r"GE_BUILD_LEVELS=v3,v5: v5 not a level of x86_64 \(v2, v3, v4, v4vnni, "
                                         r"or all\)"):
        levels_to_build("x86_64", x86_flags("v4"), "v3,v5")


@pytest.mark.parametrize("text,want", [
    ("processor\t: 0\nflags\t\t: fpu sse4_2 avx2\nbugs\t\t: spectre\n", {"fpu", "sse4_2", "avx2"}),
    ("processor\t: 0\nFeatures\t: fp asimd evtstrm crc32\n", {"fp", "asimd", "evtstrm", "crc32"}),
])
def test_cpu_flags_from_proc_cpuinfo(tmp_path, monkeypatch, text, want):
    (tmp_path / "cpuinfo").write_text(text)
    real_open = open
    monkeypatch.setattr("builtins.open", lambda p, *a, **k: real_open(tmp_path / "cpuinfo" if p == "/proc/cpuinfo"
                                                                      else p, *a, **k))
    assert cpu_flags() == want


# -- what is built ----------------------------------------------------------------------------------

def test_every_level_this_cpu_runs_is_built():
    """An install with a C compiler builds every level this CPU runs (native_levels.levels_to_build)."""
    if not c_compiler():
        pytest.skip("no C compiler: the install built no native level")
    want = [lv.name for lv in runnable(LEVELS_HERE, FLAGS)]
    assert [name for name in native_mod.built_levels() if name in want] == want


def recorded_switches(path: str) -> list[str]:
    """The strings of the library's .GCC.command.line section (-frecord-gcc-switches: each object's
    compiler flags), read from the ELF section headers."""
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2  # ELF64
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    for name, _type, _flags, _addr, offset, size in sections:
        if data[names_at + name:].split(b"\0", 1)[0] == b".GCC.command.line":
            return [s.decode() for s in data[offset:offset + size].split(b"\0") if s]
    raise AssertionError(f"{path}: no .GCC.command.line section")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the libraries as ELF files")
@pytest.mark.parametrize("level", LEVELS_HERE, ids=lambda lv: lv.name)
def test_each_object_was_compiled_for_its_level_only(level):
    """No object of a library was compiled with -march=native (GCC records it as the building CPU's
    name) or with another level's flags: every object's recorded flags are the level's."""
    if level.name not in native_mod.built_levels():
        pytest.skip(f"{level.name} is not built here")
    lines = recorded_switches(native_mod.built_levels()[level.name])
    assert lines
    for line in lines:
        marchs = [w for w in line.split() if w.startswith("-march=")]
        assert marchs == [f for f in level.cflags if f.startswith("-march=")], line
        assert all(f in line.split() for f in level.cflags), line


#: the instruction sets each x86-64 level's code was compiled for (the library's ge_isa())
X86_ISA = {"v2": "sse4.2", "v3": "sse4.2 avx avx2 fma f16c", "v4": "sse4.2 avx avx2 fma f16c avx512f avx512bw",
           "v4vnni": "sse4.2 avx avx2 fma f16c avx512f avx512bw avx512vnni"}


@pytest.mark.parametrize("level", level_params())
def test_each_level_the_cpu_runs_loads_and_passes_its_self_test(level):
    lib = native_mod.load_level(level)  # load() runs the self-test; a failure raises Unavailable
    assert lib.level == level
    if platform.machine() in ("x86_64", "AMD64"):
        assert lib.isa == X86_ISA[level]


# -- an OM compiled at one level runs at every level ------------------------------------------------

def small_model() -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def const(name, *shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(shape) * 0.3).ravel())

    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd"], ["c2"], pads=[1, 1, 1, 1], group=16, strides=[2, 2]),
        helper.make_node("Conv", ["c2", "w3", "b3"], ["c3"]),
        helper.make_node("MaxPool", ["c3"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["m"]),
        helper.make_node("Add", ["m", "bm"], ["a"]),
        helper.make_node("Softmax", ["a"], ["y"]),
    ]
    graph = helper.make_graph(nodes, "levels", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])],
                              [const("w1", 16, 8, 3, 3), const("b1", 16), const("wd", 16, 1, 3, 3),
                               const("w3", 24, 16, 1, 1), const("b3", 24), const("wm", 24 * 16, 10), const("bm", 10)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


RUN_AT_LEVEL = """
import json, sys
import numpy as np
from ge.core import api
model_id = api.load_from_file(sys.argv[1], "cpu")
tasks = [t.plan.kernel for t in api.model(model_id).default_context.handle]
y = api.execute(model_id, [np.load(sys.argv[2])])[0]
np.save(sys.argv[3], y)
print(json.dumps({"kernels": api.kernels(), "native": sum(k.uses_native for k in tasks), "tasks": len(tasks)}))
"""


COMPILE_AT_LEVEL = """
import sys
from ge.core import api
print(api.atc(sys.argv[1], sys.argv[2]).om_path)
"""


def at_level(level: str, script: str, *args) -> str:
    """The last line `script` prints, run in a process whose native kernels are `level`'s."""
    env = {k: v for k, v in os.environ.items() if k != "GE_NO_NATIVE"} | {"GE_NATIVE_LEVEL": level}
    r = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()[-1]


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """The model, its input, onnxruntime's output, and the OM compiled at a level (cached)."""
    d = tmp_path_factory.mktemp("levels")
    model = small_model()
    onnx.save(model, str(d / "m.onnx"))
    x = np.random.default_rng(1).standard_normal((2, 8, 16, 16)).astype(np.float32)
    np.save(d / "x.npy", x)
    oms = {}

    def om(level):
        if level not in oms:
            oms[level] = at_level(level, COMPILE_AT_LEVEL, d / "m.onnx", d / f"m_{level}")
        return oms[level]
    return d, om, ort_run(model, {"x": x})[0]


@pytest.mark.parametrize("compiled_at", ["lowest", "best"])
@pytest.mark.parametrize("level", level_params())
def test_an_om_runs_at_each_level_with_onnxruntimes_results(model_files, compiled_at, level):
    """Compiled at the lowest level this CPU runs or the best, an OM keeps its native plans at every
    level (the workspaces it plans fit every level's tiles) and gives onnxruntime's results."""
    compile_level = RUNNABLE[0] if compiled_at == "lowest" else RUNNABLE[-1]
    d, om, want = model_files
    out = d / f"y_{compile_level}_{level}.npy"
    report = json.loads(at_level(level, RUN_AT_LEVEL, om(compile_level), d / "x.npy", out))
    assert report["kernels"].startswith(f"native {level} (") and report["kernels"].endswith(f"GE_NATIVE_LEVEL={level}")
    # native: the three Convs in the blocked layout (the first from the NCHW input), its MaxPool, the
    # reorder out of it, the 2-row FusedMatMul (the GEMV) and Softmax
    assert (report["native"], report["tasks"]) == (7, 7), report
    np.testing.assert_allclose(np.load(out), want, rtol=1e-4, atol=1e-6)


def test_workspaces_are_planned_for_every_level():
    """The GEMM's workspace is what the widest of every level's tiles needs, whichever level plans it."""
    best_level()  # (skips where no level runs)
    libs = [native_mod.load_level(level) for level in RUNNABLE]
    for m, n, k in ((9, 45, 70), (37, 7, 300), (64, 3136, 576), (1000, 1, 2048)):
        for raw_a, gathered_b in ((True, False), (False, True), (True, True)):
            sizes = {lib.workspace_nbytes(m, n, k, raw_a, gathered_b) for lib in libs}
            assert len(sizes) == 1, (m, n, k, raw_a, gathered_b, sizes)
        assert len({lib.batch_workspace_nbytes(m, n, k) for lib in libs}) == 1


# -- what is said -----------------------------------------------------------------------------------

def test_an_install_without_the_kernels_warns(monkeypatch):
    monkeypatch.setattr(loader, "built_levels", lambda: {})
    with pytest.warns(RuntimeWarning, match="the native kernels are not built .*numpy plan"):
        native_mod.warn_if_not_built()


def reselect(monkeypatch):
    """native() selects again on its next call; the test's end restores this process's selection."""
    monkeypatch.setattr(loader, "_NATIVE", False)
    monkeypatch.setattr(loader, "_STATUS", loader._STATUS)


@pytest.mark.parametrize("env,want", [
    ({"GE_NO_NATIVE": "1"}, "numpy fallback: GE_NO_NATIVE is set"),
    ({"GE_NATIVE_LEVEL": "v9"}, "numpy fallback: GE_NATIVE_LEVEL=v9 is not a level of this machine"),
    ({"GE_NATIVE_LEVEL": "the lowest"}, "native {lowest} ("),
])
def test_status_says_what_runs_and_why(monkeypatch, env, want):
    monkeypatch.delenv("GE_NO_NATIVE", raising=False)
    monkeypatch.delenv("GE_NATIVE_LEVEL", raising=False)
    if env.get("GE_NATIVE_LEVEL") == "the lowest":  # the lowest level that runs here
        best_level()  # (skips where none does)
        env, want = {"GE_NATIVE_LEVEL": RUNNABLE[0]}, want.format(lowest=RUNNABLE[0])
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    reselect(monkeypatch)
    assert native_mod.status().startswith(want)
    assert (native_mod.native() is None) == want.startswith("numpy")


def test_a_refused_library_says_why(monkeypatch):
    monkeypatch.delenv("GE_NO_NATIVE", raising=False)
    monkeypatch.delenv("GE_NATIVE_LEVEL", raising=False)
    monkeypatch.setattr(native_mod.Native, "_works", lambda self: False)
    reselect(monkeypatch)
    best = best_level()
    assert native_mod.status() == f"numpy fallback: _native_{best} refused: it fails its self-test against numpy"
