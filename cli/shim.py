"""`ge shim path`: the folder holding the `acl`, `ais_bench` and `aclruntime` modules that run ACL
client code on ge. Opt-in: put it first on PYTHONPATH, `PYTHONPATH=$(ge shim path) python3 infer.py`."""
from __future__ import annotations

import click

from ..core.acl import shim_path


@click.group("shim", context_settings={"help_option_names": ["-h", "--help"]})
def shim() -> None:
    """The modules ACL client code imports (acl, ais_bench, aclruntime), for PYTHONPATH."""


@shim.command("path")
def path() -> None:
    """Print the shim folder and nothing else: PYTHONPATH=$(ge shim path) python3 infer.py"""
    click.echo(shim_path())
