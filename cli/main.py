"""`ge`: the command line (ATC's `atc`, msame's `run`, `inspect`, `compare`, and `shim` for ACL client code).

Errors, every one a single line on stderr: a GeError prints `error: <message>` and exits 1; a usage
error (an unknown option, a missing or invalid value) prints `error: <message> (see `ge CMD --help`)`
and exits 2; any other exception prints `internal error: <type>: <message> (...)` and exits 1.
`--debug` (before or after the subcommand) adds the traceback.
"""
from __future__ import annotations

import errno
import importlib
import sys

import click

from ..core.model.errors import GeError
from . import console
from .options import COMMANDS, DEBUG_FLAG, SWITCH_WORDS, META_ARGV as _META_ARGV, META_DEBUG as _META_DEBUG


class GeGroup(click.Group):
    """The `ge` group: takes `--debug` anywhere on the line and turns exceptions into one-line errors.
    Its subcommands (options.COMMANDS) are imported when one runs: `ge --help` lists them from that
    table, so neither it nor `ge --version` imports onnx, the compiler or the kernels."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        return getattr(importlib.import_module(f"{__package__}.{name}"), name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, COMMANDS[name]) for name in self.list_commands(ctx)])

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

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True, **extra):
        """click's main, with its errors as one `error:` line (click prints a usage block)."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # `ge` alone: the help, as click shows it
            e.show()
            sys.exit(e.exit_code)
        except click.UsageError as e:
            hint = f" (see `{e.ctx.command_path} --help`)" if e.ctx is not None else ""
            console.error(e.format_message() + hint)
            sys.exit(e.exit_code)
        except click.ClickException as e:
            console.error(e.format_message())
            sys.exit(e.exit_code)
        except click.Abort:
            console.error("aborted")
            sys.exit(1)
        except OSError as e:  # a closed pipe (`ge ... | head`): nothing more to say
            if e.errno != errno.EPIPE:
                raise
            sys.exit(1)
        sys.exit(code or 0)  # (invoke returns nothing: a number here is ctx.exit's code)

    def invoke(self, ctx: click.Context):
        try:
            super().invoke(ctx)
            return None
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
        import traceback
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
    from ..core.version import kernels, version
    click.echo(f"ge {version()}\nkernels: {kernels()}")
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
    console.setup_logging(reset=True)  # ge's warnings as `[WARNING] ...` lines on stderr (atc's --log sets the level)


def main(argv: list[str] | None = None) -> None:
    """The command line in this process: ends in SystemExit with the exit code (callers may catch it)."""
    cli.main(args=argv, prog_name="ge")


#: subcommands whose process ends without the interpreter's teardown (entry_point)
FAST_EXIT = frozenset({"atc"})


def entry_point() -> None:
    """Console-script entry point (`ge = "ge.cli.main:entry_point"`): main(); after `ge atc` the process
    then ends as soon as its streams, log handlers and atexit functions are done, skipping the
    interpreter's teardown of every module and object (30-60 ms of a small model's `ge atc`, whose
    files are written, fsynced and closed by then). Its modules are imported first, without the cyclic
    garbage collector, and frozen: they live until that exit, and the compile's collections no longer
    walk them (3% of a small model's `ge atc`, by instructions). The compile then makes objects that
    mostly live until the end (the graph, its plans): a youngest generation of 20,000 objects instead of
    700 spares 2-13 M instructions of collections (QOperator MobileNetV2 13 M), at most that many more objects
    waiting for one."""
    subcommand = _subcommand(sys.argv[1:])
    fast_exit = subcommand in FAST_EXIT
    if fast_exit:
        import gc
        gc.disable()
        try:
            importlib.import_module(f"{__package__}.{subcommand}")
        except Exception:  # noqa: S110 (main() meets it again, and reports it as its errors)
            pass
        gc.freeze()
        gc.set_threshold(20_000)  # (the older generations' thresholds as they are)
        gc.enable()
    try:
        main()
    except SystemExit as e:
        code = e.code or 0
        if type(code) is not int or not fast_exit:
            raise  # (a message as the code: Python prints it)
    else:  # pragma: no cover - click's main always exits
        code = 0
    import atexit
    import os
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe: nothing more to say
        code = code or 1
    logging = sys.modules.get("logging")  # (not imported: no handler to flush, core/model/log.py)
    if logging is not None:
        logging.shutdown()
    atexit._run_exitfuncs()
    os._exit(code)


def _subcommand(args: list[str]) -> str | None:
    return next((a for a in args if not a.startswith("-")), None)


if __name__ == "__main__":  # pragma: no cover
    entry_point()
