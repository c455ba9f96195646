"""`ge shim path` and the opt-in shim: the folder printed and nothing else, `import acl` only with it
on PYTHONPATH, in spawned child processes too."""
import os
import subprocess
import sys

import numpy as np
from click.testing import CliRunner

from ge.cli.main import cli
from ge.core.acl import shim_path

from .conftest import Models, run_script


def test_ge_shim_path_prints_the_folder_only():
    result = CliRunner().invoke(cli, ["shim", "path"])
    assert result.exit_code == 0
    assert result.output == shim_path() + "\n"
    assert os.path.isfile(os.path.join(result.output.strip(), "acl", "__init__.py"))


def test_acl_is_not_importable_without_the_shim():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", "import acl"], env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "No module named 'acl'" in done.stderr


def test_refused_parts_name_themselves():
    done = subprocess.run([sys.executable, "-c", "import acl; acl.op"], env=dict(os.environ, PYTHONPATH=shim_path()),
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "acl.op: single-op execution (acl.op) is not supported by ge" in done.stderr


def test_spawned_children_run_acl(models, tmp_path):
    x = np.random.default_rng(13).standard_normal((2, 1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = run_script("infer_spawn.py", models.static, tmp_path / "in.npz", tmp_path / "out.npy")
    assert out == ""
    got = np.load(tmp_path / "out.npy")
    for i in range(2):
        np.testing.assert_allclose(got[i], Models.conv(x[i])[0], rtol=1e-5, atol=1e-6)


def test_the_readme_script_runs_unchanged(models, tmp_path):
    """README's pyACL section: its infer.py, as written there, with PYTHONPATH=$(ge shim path)."""
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")).read()
    start = readme.index("```python\n# infer.py")
    script = readme[start + len("```python\n"):readme.index("```\n", start + 10)]
    (tmp_path / "infer.py").write_text(script)
    x = np.random.default_rng(14).standard_normal((1, 3, 8, 8)).astype(np.float32)
    x.tofile(tmp_path / "input.bin")
    done = subprocess.run([sys.executable, "infer.py", models.static, "input.bin", "output.bin"], cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=shim_path()), capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    got = np.fromfile(tmp_path / "output.bin", np.float32).reshape(1, 5)
    np.testing.assert_allclose(got, Models.conv(x)[0], rtol=1e-5, atol=1e-6)
