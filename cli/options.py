"""Option groups shared by the subcommands, as decorators."""
from __future__ import annotations

import shlex
import sys

import click

DEVICES = ("cpu", "sim")
DEBUG_FLAG = "--debug"
META_DEBUG = "ge.debug"  # ctx.meta keys set by the `ge` group
META_ARGV = "ge.argv"


def device_option(f):
    return click.option("--device", type=click.Choice(DEVICES, case_sensitive=False), default="cpu",
                        show_default=True,
                        help="where the model runs: cpu (host memory) or sim (simulated NPU memory)")(f)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="print JSON instead of tables")(f)


def om_option(required: bool = True, help: str = "the offline model (.om) file"):
    def wrap(f):
        return click.option("--model", "-m", "model", required=required, metavar="FILE.om",
                            type=click.Path(dir_okay=False), help=help)(f)
    return wrap


def is_debug(ctx: click.Context | None = None) -> bool:
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(META_DEBUG))


def command_line(ctx: click.Context | None = None) -> str:
    """The `ge ...` command line as typed (recorded in the OM, as ATC records its own)."""
    ctx = ctx or click.get_current_context(silent=True)
    args = ctx.meta.get(META_ARGV) if ctx else None
    if args is None:
        args = sys.argv[1:]
    return shlex.join(["ge", *args])
