"""`ge`: the command line (ATC's `atc`, msame's `run`, and `inspect`).

Errors: a GeError prints `error: <message>` as one line on stderr and exits 1; click usage errors
exit 2; any other exception prints `internal error: <type>: <message> (...)` and exits 1.
`--debug` (before or after the subcommand) adds the traceback.
"""
from __future__ import annotations

import sys
import traceback

import click

from ..core.errors import GeError
from . import console
from .options import DEBUG_FLAG, SWITCH_WORDS, META_ARGV as _META_ARGV, META_DEBUG as _META_DEBUG


class GeGroup(click.Group):
    """The `ge` group: takes `--debug` anywhere on the line and turns exceptions into one-line errors."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_META_ARGV] = list(args)
        end = args.index("--") if "--" in args else len(args)
        kept, i = [], 0
        while i < end:  # --debug, or msame's and ais_bench's --debug true|false (--debug=false)
            flag, _, value = args[i].partition("=")
            if flag != DEBUG_FLAG:
                kept.append(args[i])
            elif value:
                ctx.meta[_META_DEBUG] = _switch(value)
            elif i + 1 < end and args[i + 1].lower() in SWITCH_WORDS:
                i += 1
                ctx.meta[_META_DEBUG] = _switch(args[i])
            else:
                ctx.meta[_META_DEBUG] = True
            i += 1
        return super().parse_args(ctx, kept + args[end:])

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort, BrokenPipeError):
            raise
        except GeError as e:
            _report(ctx, e, "error")
        except OSError as e:  # a file the user named is missing or not writable
            _report(ctx, e, "error")
        except Exception as e:
            _report(ctx, e, "internal error", internal=True)
        ctx.exit(1)


def _switch(value: str) -> bool:
    try:
        return SWITCH_WORDS[value.lower()]
    except KeyError:
        raise click.UsageError(f"--debug '{value}': give true or false") from None


def _report(ctx: click.Context, e: BaseException, prefix: str, internal: bool = False) -> None:
    debug = bool(ctx.meta.get(_META_DEBUG))
    if debug:
        traceback.print_exception(type(e), e, e.__traceback__, file=sys.stderr)
    if isinstance(e, OSError) and not isinstance(e, GeError) and e.filename is not None:
        message = f"{e.filename}: {e.strerror or e}"
    else:
        message = str(e) or type(e).__name__
    if internal:
        message = f"{type(e).__name__}: {message}"
        if not debug:
            message += " (run with --debug for the traceback)"
    console.error(message, prefix)


def _show_version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from ..core import api
    click.echo(f"ge {api.version()}\nkernels: {api.kernels()}")
    ctx.exit()


@click.group(cls=GeGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="show tracebacks of errors (also accepted after the subcommand)")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="show ge's version and what runs its kernels (the native level, or the numpy fallback and why)")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """ge: compile ONNX models into offline models (OM) and run them on a CPU or a simulated NPU.

    \b
      ge atc --model=net.onnx --framework=5 --output=net --input_shape="x:1,3,224,224"
      ge run --model net.om --input x.npy --output out --loop 10
      ge inspect net.om
    """
    if debug:
        ctx.meta[_META_DEBUG] = True


def _register() -> None:
    from .atc import atc
    from .compare import compare
    from .inspect import inspect
    from .run import run
    from .shim import shim
    for command in (atc, run, inspect, compare, shim):
        cli.add_command(command)


_register()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (`ge = "ge.cli.main:main"`)."""
    cli.main(args=argv, prog_name="ge")


if __name__ == "__main__":  # pragma: no cover
    main()
