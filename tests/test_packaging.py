"""Packaging: every code folder is installed under ge.*, and nothing else is."""
import os
import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_package_folder_is_listed_in_pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = set()
    for top in ("cli", "core", "formats"):
        for folder, _, files in os.walk(os.path.join(ROOT, top)):
            shim = os.path.join(ROOT, "core", "acl", "shim")  # the opt-in modules (acl ...): package data
            if "__init__.py" in files and not folder.startswith(shim):
                found.add("ge." + os.path.relpath(folder, ROOT).replace(os.sep, "."))
    assert found == listed
