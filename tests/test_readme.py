"""The README's promises that a reader acts on: its Python API example runs as written, its links
point inside the repository, its dependency list is pyproject's."""
from __future__ import annotations

import os
import re
import tomllib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return f.read()


def test_the_python_api_example_runs_as_written(tmp_path, monkeypatch):
    """Run from a folder holding the repository's samples/ (its paths are relative to the clone)."""
    code = re.search(r"## Python API\n.*?```python\n(.*?)```", readme(), re.S)[1]
    os.symlink(os.path.join(ROOT, "samples"), tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    names: dict = {}
    exec(compile(code, "README.md (Python API)", "exec"), names)
    x = np.load(tmp_path / "samples" / "models" / "tiny_cnn_input.npy")
    assert names["probs"].shape == (1, 10) and names["report"]["passed"]
    assert names["summary"]["samples"] == 2 and sorted(os.listdir(tmp_path / "out" / "results")) == [
        "first_output_0.npy", "second_output_0.npy"]
    assert names["check"]["result"] == "success" and names["trace"]["runs"] == 10
    assert x.shape == (1, 3, 32, 32)


def test_links_stay_inside_the_repository():
    text = readme()
    targets = re.findall(r"\]\(([^)#]+)[^)]*\)", text) + re.findall(r"`(\.\./[^`]+)`", text)
    outside = [t for t in targets if not t.startswith(("http://", "https://"))
               and not os.path.exists(os.path.normpath(os.path.join(ROOT, t)))]
    assert not outside and not re.findall(r"\.\./shared|/work/", text), outside


def test_the_dependency_list_is_pyproject_s():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    line = re.search(r"Runtime dependencies: (.*?);", readme(), re.S)[1]
    for dep in deps:
        name = re.match(r"[A-Za-z0-9_.-]+", dep)[0]
        assert name in line, f"README's dependency list lacks {name}"
