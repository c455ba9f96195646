"""The kernel, pass, runtime, end-to-end and ONNX conformance tests again at the levels most users'
CPUs run (v2, v3: AVX2 without AVX-512), with the OpenBLAS kernels such CPUs get (OPENBLAS_CORETYPE),
when the suite itself runs another (v3, where this CPU can pose as an AVX2 one, as one in every respect:
tests/platforms/avx2_cpu.py masks AVX-512 and VNNI from CPUID, so numpy, OpenBLAS and onnxruntime, the
tests' oracle, pick their AVX2 kernels), and on the numpy plans alone (GE_NO_NATIVE=1), each in a fresh
pytest process: the suite itself runs at one level (the best, or GE_NATIVE_LEVEL's), and a result the
instruction set changes (vector widths, FMA contraction, the int8 products) must pass at each, as on the
machines that run only those (issue 29). Levels this CPU cannot run are skipped, naming the features it
lacks. The runs start as soon as the session is collected and go beside the suite's own tests, all at
once (each mostly one Python thread). Left out of them: Ray's tests (Ray does not depend on the level,
and a Ray instance per run would only add minutes) and test_native_levels.py (it loads every level
itself, whatever the process's)."""
import concurrent.futures
import os
import pickle
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from ge.core.kernels import native

from tests.core.kernels.levels import LEVELS_HERE, skip_reason
from tests.platforms import avx2_cpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PARTS = ["tests/core/kernels", "tests/core/passes", "tests/core/runtime", "tests/e2e", "tests/conformance"]
LEFT_OUT = ["tests/e2e/test_ray.py", "tests/core/kernels/test_native_levels.py"]  # (see above)
OWN = native.native().level if native.native() is not None else None  # what this suite runs at


#: the levels rerun (x86-64; elsewhere every level of the machine). v4 is left to the suite's own run on
#: AVX-512 machines: CI's 20 minutes on 2 cores hold the suite and three reruns, not four
RERUN = ("v2", "v3")
#: the OpenBLAS kernels (numpy's, behind ge's large products) a CPU of that level gets: its products
#: round as on such a machine, not as this one's AVX-512 kernels do
BLAS_CORES = {"v2": "Nehalem", "v3": "Haswell"}


def runs() -> list:
    """The RERUN levels but this suite's own (skipped where they cannot run here), then the numpy plans."""
    params = []
    for lv in LEVELS_HERE:
        if lv.name not in RERUN and lv.name.startswith("v"):
            continue
        reason = "the suite itself runs at this level" if lv.name == OWN else skip_reason(lv)
        env = {"GE_NATIVE_LEVEL": lv.name}
        if lv.name in BLAS_CORES:
            env["OPENBLAS_CORETYPE"] = BLAS_CORES[lv.name]
        if lv.name == "v3" and not reason and avx2_cpu.unavailable() is None:
            env.update({k: v for k, v in avx2_cpu.environment().items() if k in ("LD_PRELOAD", "GLIBC_TUNABLES")})
        params.append(pytest.param(env, id=lv.name,
                                   marks=[pytest.mark.skip(reason=reason)] if reason else []))
    params.append(pytest.param({"GE_NO_NATIVE": "1"}, id="numpy",
                               marks=[pytest.mark.skip(reason="the suite itself runs the numpy plans")]
                               if OWN is None else []))
    return params


CLEAN = {k: v for k, v in os.environ.items() if k not in ("GE_NATIVE_LEVEL", "GE_NO_NATIVE", "OPENBLAS_CORETYPE")}


_pool: concurrent.futures.ThreadPoolExecutor | None = None
_started: dict = {}  # a run's environment (sorted items) -> its future
_children: list = []  # the pytest processes started, to stop them if the suite stops first
_files: list = []  # the files handed to them, removed at the session's end
_lock = threading.Lock()


def run(env: dict) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", *PARTS, *(f"--ignore={s}" for s in LEFT_OUT), "-x",
           "-p", "no:cacheprovider", "-W", "ignore"]
    # its output goes to files, read once it ends: a thread reading pipes while the suite runs would
    # allocate beside the tests that trace this process's allocations (tracemalloc sees every thread)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        with _lock:
            if _pool is None:  # the session has ended
                return subprocess.CompletedProcess(cmd, -1, "", "not run: the session ended first")
            child = subprocess.Popen(cmd, cwd=ROOT, env=CLEAN | env, stdout=out, stderr=err)
            _children.append(child)
        child.wait()
        out.seek(0), err.seek(0)
        return subprocess.CompletedProcess(cmd, child.returncode, out.read(), err.read())


def start(items: list) -> None:
    """Start this session's selected runs that are not skipped, all at once, as soon as the session is
    collected (tests/conftest.py): they go beside the suite's own tests (mostly one Python thread), not
    after them, which CI's 20 minutes could not hold. All at once, not one per core: on 2 cores, the
    third run started when one of the first two ended and then ran alone on one core for minutes, the
    other idle, after the suite's own tests had ended."""
    global _pool
    selected = {item.callspec.id for item in items if item.path == Path(__file__)}
    envs = [p.values[0] for p in runs() if not p.marks and p.id in selected]
    if envs:
        _pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(envs))
        cases = _node_cases_made_once()
        _started.update({tuple(sorted(e.items())): _pool.submit(run, e | cases) for e in envs})


def _node_cases_made_once() -> dict:
    """The environment that hands the runs onnx's node cases as this process made them (collected
    here already, for tests/conformance and the kernels' node cases): each run would spend ~15 s of
    the cores making the same again."""
    from tests.conformance.cases import NODE_CASES_FILE, onnx_node_cases
    with tempfile.NamedTemporaryFile("wb", prefix="ge-onnx-node-cases-", suffix=".pickle", delete=False) as f:
        pickle.dump(onnx_node_cases(), f, protocol=pickle.HIGHEST_PROTOCOL)
    _files.append(f.name)
    return {NODE_CASES_FILE: f.name}


def stop() -> None:
    """At the session's end: runs still going (the suite stopped early) are killed, not waited for."""
    global _pool
    with _lock:
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None
        for child in _children:
            if child.poll() is None:
                child.kill()
        for path in _files:
            os.remove(path)
        _files.clear()


@pytest.mark.parametrize("env", runs())
def test_kernels_and_e2e_pass_at(env):
    r = _started[tuple(sorted(env.items()))].result()
    print(f"{' '.join(f'{k}={v}' for k, v in env.items())}: {(r.stdout.strip().splitlines() or [''])[-1]}")  # (-rP)
    if "LD_PRELOAD" in env:  # the run did see an AVX2 CPU
        probe = subprocess.run([sys.executable, "-c", "import numpy._core._multiarray_umath as m; "
                                "print(m.__cpu_features__['AVX512F'], m.__cpu_features__['AVX2'])"],
                               env=CLEAN | env, capture_output=True, text=True)
        assert probe.stdout.split() == ["False", "True"], probe.stdout + probe.stderr
    assert r.returncode == 0, f"{' '.join(f'{k}={v}' for k, v in env.items())} pytest {' '.join(PARTS)}:\n" + \
        "\n".join(r.stdout.splitlines()[-60:]) + r.stderr[-3000:]
    if env.get("GE_NATIVE_LEVEL"):  # the run did take the level asked for
        probe = subprocess.run([sys.executable, "-c", "from ge.core.kernels import native; print(native.status())"],
                               cwd=ROOT, env=CLEAN | env, capture_output=True, text=True)
        assert probe.stdout.startswith(f"native {env['GE_NATIVE_LEVEL']} ("), probe.stdout + probe.stderr
