"""Option groups shared by the subcommands, as decorators."""
from __future__ import annotations

import re
import sys

import click

#: the `ge` subcommands, each in the module of its name, with the line `ge --help` shows for it (also
#: its short_help): `ge --help` and `ge --version` import none of them
COMMANDS = {
    "atc": "Compile ONNX into an OM, pre-check a model, or look inside an OM (ATC).",
    "compare": "Compare an OM with its ONNX model, output by output, layer by layer.",
    "inspect": "Show what an OM holds: header, I/O, memory, tasks, weights.",
    "run": "Run an OM as msame / ais_bench do (files, folders, zeros, random).",
    "shim": "Where the acl, ais_bench and aclruntime modules for ACL client code are (ge shim path).",
}
DEVICES = ("cpu", "sim")
DEBUG_FLAG = "--debug"
META_DEBUG = "ge.debug"  # ctx.meta keys set by the `ge` group
META_ARGV = "ge.argv"


#: msame's and ais_bench's boolean values: true/false, 1/0, yes/no, t/f, y/n (any case)
SWITCH_WORDS = {"true": True, "t": True, "yes": True, "y": True, "1": True,
                "false": False, "f": False, "no": False, "n": False, "0": False}


class Switch(click.ParamType):
    """An option taking one of SWITCH_WORDS (msame's `--debug true`, ais_bench's `--profiler 1`)."""
    name = "true|false"

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            return value
        try:
            return SWITCH_WORDS[str(value).lower()]
        except KeyError:
            self.fail(f"'{value}' is not true or false", param, ctx)


SWITCH = Switch()


def switch_option(*names, help: str):
    return click.option(*names, type=SWITCH, default=False, show_default=True, metavar="true|false", help=help)


def spelled_option(name: str, *spellings: str, **kwargs):
    """An option spelled --name_with_underscores and --name-with-dashes (as ATC, msame and ais_bench
    take theirs), after any other `spellings` (msame's camelCase); its value is the parameter `name`."""
    dashed = [f"--{name.replace('_', '-')}"] if "_" in name else []
    return click.option(*spellings, f"--{name}", *dashed, name, **kwargs)


#: msame's gear choice (`ge run`, `ge compare`)
GEAR_OPTIONS = (
    spelled_option("dym_batch", "--dymBatch", type=click.IntRange(min=1), metavar="N",
                   help="gear model: run the gear of batch size N"),
    spelled_option("dym_hw", "--dymHW", metavar="H,W", help="gear model: run the gear of image size H,W"),
    spelled_option("dym_dims", "--dymDims", metavar='"in:1,600;in2:..."',
                   help="gear model: run the gear of these input shapes ('name:dims;...', or msame's every dim in "
                        "input order: 1,600,600,3,1,3)"),
)


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


LOG_LEVELS = ("debug", "info", "warning", "error", "null")  # ATC's --log


def log_option(f):
    """ATC's `--log=debug|info|warning|error|null`: ge's log on stderr at that level (warning by default)."""
    def apply(ctx, param, value):
        from . import console
        console.setup_logging(value or "warning")
        return value
    return click.option("--log", type=click.Choice(LOG_LEVELS), default=None, callback=apply, is_eager=True,
                        help="ge's log on stderr at this level: debug, info (what each step did and its time), "
                             "warning (the default), error, null")(f)


def is_debug(ctx: click.Context | None = None) -> bool:
    ctx = ctx or click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(META_DEBUG))


def command_line(ctx: click.Context | None = None) -> str:
    """The `ge ...` command line as typed (recorded in the OM, as ATC records its own)."""
    ctx = ctx or click.get_current_context(silent=True)
    args = ctx.meta.get(META_ARGV) if ctx else None
    if args is None:
        args = sys.argv[1:]
    return " ".join(map(_quoted, ["ge", *args]))


def _quoted(arg: str) -> str:
    """shlex.quote(arg), the argument as a POSIX shell reads it back, without importing shlex: that
    was ~14 M instructions of every `ge atc` where the standard library has no cached bytecode
    (Python's container images delete it)."""
    if not arg:
        return "''"
    if re.search(r"[^\w@%+=:,./-]", arg, re.ASCII) is None:
        return arg
    return "'" + arg.replace("'", "'\"'\"'") + "'"
