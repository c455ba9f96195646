"""The `ge` group: error handling (one line, exit codes), --debug, the installed console script,
and the package layout (everything under ge.*)."""
from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest

from ge.core import api
from ge.core.kernels import native, native_levels


def test_help_and_version(ge):
    r = ge("--help", ok=True)
    for name in ("atc", "run", "inspect", "--debug"):
        assert name in r.stdout
    r = ge("--version", ok=True)
    assert r.stdout.strip() == f"ge {api.version()}\nkernels: {api.kernels()}"


def _expected_selection(asked=None) -> str:
    """What native.choose_level picks on this machine (its CPU flags, the levels built), as a regex."""
    levels = native_levels.levels_for(platform.machine())
    try:
        level, why = native.choose_level(levels, native.built_levels(), native.cpu_flags(), asked)
    except native.Unavailable as e:
        return re.escape(f"kernels: numpy fallback: {e}")
    return rf"kernels: native {level.name} \([a-z0-9_. ]+; blocked for \d+ KB L1d, \d+ KB L2\), {re.escape(why)}"


@pytest.mark.parametrize("env", [{}, {"GE_NATIVE_LEVEL": "v3"}, {"GE_NO_NATIVE": "1"}])
def test_version_says_which_native_level_runs(tmp_path, env):
    """A fresh process's selection, as choose_level makes it from this machine's CPU and build."""
    clean = {k: v for k, v in os.environ.items() if k not in ("GE_NO_NATIVE", "GE_NATIVE_LEVEL")}
    r = subprocess.run([sys.executable, "-m", "ge.cli.main", "--version"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120, env=clean | env)
    want = (re.escape("kernels: numpy fallback: GE_NO_NATIVE is set") if "GE_NO_NATIVE" in env
            else _expected_selection(env.get("GE_NATIVE_LEVEL")))
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0] == f"ge {api.version()}" and re.fullmatch(want, lines[1]), r.stdout


def test_usage_errors_exit_2(ge):
    assert ge("frobnicate").exit_code == 2
    assert ge("run", "--no-such-option").exit_code == 2
    assert ge("run").exit_code == 2  # --model is required
    assert ge("run", "--model", "x.om", "--loop", "0").exit_code == 2


@pytest.mark.parametrize("where", ["before", "after"])
def test_debug_shows_the_traceback(ge, tmp_path, where):
    bad = tmp_path / "bad.om"
    bad.write_bytes(b"garbage" * 10)
    args = ["--debug", "inspect", bad] if where == "before" else ["inspect", bad, "--debug"]
    r = ge(*args)
    assert r.exit_code == 1
    assert "Traceback (most recent call last)" in r.stderr
    assert "FormatError" in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: ") and "bad.om" in r.stderr
    r = ge("inspect", bad)
    assert "Traceback" not in r.stderr


def test_unexpected_exception_is_an_internal_error(ge, compiled, monkeypatch, error_line):
    def boom(path):
        raise RuntimeError("boom\nsecond line")
    monkeypatch.setattr(api, "inspect", boom)
    r = ge("inspect", compiled["small"])
    assert r.exit_code == 1
    line = error_line(r, "internal error: ")
    assert line == "internal error: RuntimeError: boom second line (run with --debug for the traceback)"
    r = ge("--debug", "inspect", compiled["small"])
    assert r.exit_code == 1 and "Traceback" in r.stderr and "RuntimeError: boom" in r.stderr


def test_multi_line_error_messages_become_one_line(ge, compiled, monkeypatch, error_line):
    from ge.core.model.errors import GraphError

    def fail(path):
        raise GraphError("first\n  second\tthird")
    monkeypatch.setattr(api, "inspect", fail)
    assert error_line(ge("inspect", compiled["small"])) == "error: first second third"


def test_console_script_end_to_end(ge_script, models, tmp_path, ort_run):
    """The installed `ge` script in a fresh process: compile, run, inspect, and a one-line error. (An
    install without a C compiler also warns as ge is imported: not this test's subject.)"""
    env = dict(os.environ, COLUMNS="200", PYTHONWARNINGS="ignore::RuntimeWarning:ge.core.kernels.native")

    def sh(*args):
        return subprocess.run([ge_script, *map(str, args)], capture_output=True, text=True, cwd=tmp_path, env=env,
                              timeout=300)

    r = sh("atc", f"--model={models['small']}", "--framework=5", "--output=net")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "net.om").is_file() and "ATC run success" in r.stdout
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    r = sh("run", "--model", "net.om", "--input", "x.npy", "--device", "sim")
    assert r.returncode == 0, r.stderr
    np.testing.assert_allclose(np.load(tmp_path / "out" / "net_output_0.npy"), ort_run(models["small"], {"x": x})[0],
                               rtol=1e-4, atol=1e-5)
    r = sh("inspect", "net.om", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["header"]["atc_cmdline"] == \
        f"ge atc --model={models['small']} --framework=5 --output=net"
    r = sh("atc", "--mode=6", "--om", "net.om")
    assert "Original Atc command line: ge atc" in r.stdout
    (tmp_path / "broken.onnx").write_bytes(b"\x00\x01broken")
    r = sh("atc", "--model", "broken.onnx", "--output", "broken")
    assert r.returncode == 1
    assert r.stderr.strip().count("\n") == 0 and r.stderr.startswith("error: ") and "broken.onnx" in r.stderr
    assert not (tmp_path / "broken.om").exists()
    assert sh("atc", "--model").returncode == 2
    r = sh("--debug", "atc", "--model", "broken.onnx", "--output", "broken")
    assert r.returncode == 1 and "Traceback" in r.stderr


@pytest.mark.parametrize("arg", ["", "net", "--output=net", "a b", "it's", "$HOME", "x;y", "é", "ü b", "a\nb",
                                 "--input_shape=image:1,3,224,224", "/tmp/m-1_2.onnx", "@%+=:,./-"])
def test_recorded_command_line_quotes_as_shlex(arg):
    """The OM's atc_cmdline quotes each argument as shlex.quote does (options.py quotes without shlex)."""
    import shlex
    from ge.cli.options import _quoted
    assert _quoted(arg) == shlex.quote(arg)


def test_python_m_main(models, tmp_path):
    r = subprocess.run([sys.executable, "-m", "ge.cli.main", "--version"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("ge ")


@pytest.mark.parametrize("name", ["core", "cli", "formats"])
def test_only_ge_namespace_is_installed(tmp_path, name):
    r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr
    r = subprocess.run([sys.executable, "-c", f"import ge.{name}"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    assert r.returncode == 0, r.stderr
