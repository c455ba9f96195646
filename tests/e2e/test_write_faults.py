"""Full disks and I/O errors, as SQLite tests its journal: for every k, the k-th file creation,
write, rename or directory creation that a clean command makes fails (ENOSPC for every k,
EIO for every third), and the command must end in one error line naming the file (exit 1, no
traceback), leave no temporary file and nothing half-written (every file left is byte for byte the
clean run's or the one there before, or complete JSON where a file holds timings), and the same
command afterwards, in the same folder, must write what the clean run wrote. Covered: `ge atc` with
inline weights and both external weight modes (OM, weight files, meta.json), over an earlier
compile too, `ge atc --mode 1` (the OM as JSON), `ge run` with outputs, dumps, the profiler's
trace, a --profile trace and a --summary_json."""
from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from ge.cli.main import cli
from ge.core.acl.ais_bench.cli import main as ais_bench_main

from .dynamic_models import mlp

ERRNOS = (errno.ENOSPC, errno.EIO)


class Faults:
    """Counts the file-system calls ge's writers make (the k-th of them fails when `fail_at` is k):
    creating a file (os.open with O_CREAT: mkstemp's temporary files, the meta lock), writing to a
    file ge opened for writing (os.fdopen), os.replace, and creating a missing directory."""

    def __init__(self, monkeypatch, fail_at: int = 0, code: int = errno.ENOSPC):
        self.count, self.fail_at, self.code, self.failed = 0, fail_at, code, None
        real_open, real_fdopen = os.open, os.fdopen
        real_replace, real_makedirs = os.replace, os.makedirs

        def opened(path, flags, *a, **k):
            if flags & os.O_CREAT:
                self.tick("create", path, path)
            return real_open(path, flags, *a, **k)

        def fdopen(fd, mode="r", *a, **k):
            f = real_fdopen(fd, mode, *a, **k)
            return _CountedWrites(f, self) if "w" in mode or "a" in mode else f

        def replace(src, dst, *a, **k):
            self.tick("replace", dst, src, None, dst)
            return real_replace(src, dst, *a, **k)

        def makedirs(name, mode=0o777, exist_ok=False):
            if not os.path.isdir(name):
                self.tick("mkdir", name, name)
            return real_makedirs(name, mode, exist_ok)
        for name, fn in (("open", opened), ("fdopen", fdopen), ("replace", replace),
                         ("makedirs", makedirs)):
            monkeypatch.setattr(os, name, fn)

    def tick(self, what: str, target, *names) -> None:
        """`names`: the file names the real call's OSError carries (none for a write)."""
        self.count += 1
        if self.count == self.fail_at:
            self.failed = (what, target)
            raise OSError(self.code, os.strerror(self.code), *names)


class _CountedWrites:
    def __init__(self, f, faults: Faults):
        self._f, self._faults = f, faults

    def write(self, data):
        self._faults.tick("write", getattr(self._f, "name", "?"))
        return self._f.write(data)

    def __enter__(self):
        self._f.__enter__()
        return self

    def __exit__(self, *exc):
        return self._f.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._f, name)


def _files(folder) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(folder):
        for n in names:
            p = os.path.join(root, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, folder)] = f.read()
    return out


def _timed(name: str) -> bool:
    """A file whose bytes hold timings: complete JSON or CSV, never the same bytes twice."""
    return name.endswith((".json", ".csv"))


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("faults") / "mlp.onnx")
    onnx.save(mlp(), path)
    return path


def _run_ge(args) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], prog_name="ge")
    return result.exit_code, result.stderr if hasattr(result, "stderr") else result.output


def _run_ais_bench(args) -> tuple[int, str]:
    """`python3 -m ais_bench args` in this process: its exit code and stderr ([INFO] lines go to stdout)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = ais_bench_main([str(a) for a in args])
    return code, err.getvalue()


def _check_every_fault(monkeypatch, work, args, setup=None, run=_run_ge, error="error: "):
    """Run `args` clean in `work` (after `setup(work)`, which may leave files of an earlier run),
    then once per (k, errno) with the k-th call failing, checking what is left, then clean again in
    the same folder. `run`: the command (ge's CLI, or ais_bench's), whose one error line starts
    with `error`."""
    def fresh() -> dict:
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        if setup is not None:
            setup(work)
        return _files(work)
    fresh()
    with monkeypatch.context() as m:
        counter = Faults(m)
        code, err = run(args)
    assert code == 0, err
    clean, calls = _files(work), counter.count
    assert calls >= 3  # (one file: its create, a write, its rename)
    for code_ in ERRNOS:
        for k in range(1, calls + 1, 1 if code_ == errno.ENOSPC else 3):  # (EIO takes the same paths: a third)
            previous = fresh()
            with monkeypatch.context() as m:
                faults = Faults(m, k, code_)
                code, err = run(args)
            what = f"{faults.failed} failing with {errno.errorcode[code_]} (call {k} of {calls})"
            lines = [ln for ln in err.splitlines() if ln.strip()]
            assert code == 1 and len(lines) == 1 and lines[0].startswith(error), (what, err)
            assert os.strerror(code_) in lines[0], (what, lines)
            target = faults.failed[1]
            if isinstance(target, str):  # (a write names no file: the one being written)
                named = os.path.basename(target).split(".tmp")[0].lstrip(".").rsplit(".", 1)[0]
                assert named in lines[0] or os.path.basename(os.path.dirname(target)) in lines[0], (what, lines)
            left = _files(work)
            assert not [n for n in left if n.endswith(".tmp")], (what, sorted(left))
            for name, data in left.items():
                if _timed(name):
                    if name.endswith(".json"):
                        json.loads(data)  # complete
                else:  # what the clean run wrote, or what was there before: never a part
                    assert data in (clean.get(name), previous.get(name)), (what, name)
            code, err = run(args)  # again, in the same folder
            assert code == 0, (what, err)
            again = _files(work)
            assert set(again) == set(clean), (what, sorted(again), sorted(clean))
            assert all(again[n] == clean[n] for n in clean if not _timed(n)), what


@pytest.mark.parametrize("external", [0, 1, 2])
def test_atc_survives_a_failing_write_at_any_point(monkeypatch, tmp_path, onnx_path, external):
    work = str(tmp_path / "w")
    _check_every_fault(monkeypatch, work,
                       ["atc", "--model", onnx_path, "--output", os.path.join(work, "out", "m"),
                        "--input_shape", "x:4,16", "--external_weight", external])


@pytest.mark.parametrize("external", [1, 2])
def test_atc_over_an_earlier_compile_leaves_old_or_new_files_never_a_mix_that_loads(monkeypatch, tmp_path, onnx_path,
                                                                                     external):
    """The folder holds the OM and weights of the same model with other weights: after a fault each
    file is the old one or the new one, and an old OM beside a new combined weight file (the weights
    are written before the OM) is refused at load by the weights' sha256, naming the file."""
    other = mlp()
    for t in other.graph.initializer:
        t.CopyFrom(onnx.numpy_helper.from_array(onnx.numpy_helper.to_array(t) * 2, t.name))
    other_path = str(tmp_path / "other.onnx")
    onnx.save(other, other_path)
    work = str(tmp_path / "w")
    args = ["--output", os.path.join(work, "out", "m"), "--input_shape", "x:4,16", "--external_weight", external]

    def earlier(_):
        assert _run_ge(["atc", "--model", other_path, *args])[0] == 0
    _check_every_fault(monkeypatch, work, ["atc", "--model", onnx_path, *args], setup=earlier)
    earlier(work)
    combined = os.path.join(work, "out", "weight", "m_weight_combined")
    if external == 2:  # the new weights, the old OM: what a fault between the two leaves
        with open(combined, "r+b") as f:
            f.write(b"\x01")
        code, err = _run_ge(["run", "--model", os.path.join(work, "out", "m.om"), "--output_dir", tmp_path / "o"])
        assert code == 1 and "m_weight_combined" in err and "sha256" in err, err


def test_atc_json_survives_a_failing_write_at_any_point(monkeypatch, tmp_path, onnx_path):
    om = tmp_path / "om"
    assert _run_ge(["atc", "--model", onnx_path, "--output", om / "m", "--input_shape", "x:4,16"])[0] == 0
    work = str(tmp_path / "w")
    _check_every_fault(monkeypatch, work,
                       ["atc", "--mode", 1, "--om", om / "m.om", "--json", os.path.join(work, "m.json")])


@pytest.fixture(scope="module")
def om_and_input(tmp_path_factory, onnx_path):
    folder = tmp_path_factory.mktemp("faults_om")
    assert _run_ge(["atc", "--model", onnx_path, "--output", folder / "m", "--input_shape", "x:4,16"])[0] == 0
    np.save(folder / "x.npy", np.random.default_rng(0).standard_normal((4, 16)).astype(np.float32))
    return str(folder / "m.om"), str(folder / "x.npy")


@pytest.mark.parametrize("extra", [["--dump", "true"], ["--profiler", "true"]], ids=["dump", "profiler"])
def test_run_outputs_dumps_traces_and_summaries_survive_a_failing_write_at_any_point(monkeypatch, tmp_path,
                                                                                     om_and_input, extra):
    om, x = om_and_input
    work = str(tmp_path / "w")
    profile = ["--profile", os.path.join(work, "trace.json")] if "--profiler" in extra else []
    _check_every_fault(monkeypatch, work,
                       ["run", "--model", om, "--input", x, "--output", os.path.join(work, "out"),
                        "--output_dirname", "r", "--summary_json", os.path.join(work, "summary.json"), *extra, *profile])


@pytest.mark.parametrize("outfmt,extra", [("BIN", []), ("NPY", ["--dump", "true"]), ("TXT", ["--profiler", "true"])],
                         ids=["bin", "npy-dump", "txt-profiler"])
def test_ais_bench_outputs_dumps_traces_and_summary_survive_a_failing_write_at_any_point(monkeypatch, tmp_path,
                                                                                       om_and_input, outfmt, extra):
    om, x = om_and_input
    work = str(tmp_path / "w")
    _check_every_fault(monkeypatch, work,
                       ["--model", om, "--input", x, "--output", work, "--output_dirname", "r", "--outfmt", outfmt,
                        *extra], run=_run_ais_bench, error="[ERROR] ")
