"""The CLI's two rich consoles (stdout for results, stderr for errors) and the one-line error form.

Both consoles resolve sys.stdout / sys.stderr when they print, so click's test runner and
redirections see their output. When stdout is not a terminal (a pipe, a file, a test) and COLUMNS
is not set, tables get a wide fixed width instead of rich's 80 columns, so cells are not cut.
Machine-readable output (JSON, ATC's banners) goes through `echo`, never through rich markup.
"""
from __future__ import annotations

import os
import sys

import click

from ..core.model.log import LEVELS, configure_later

_PIPE_WIDTH = 200


def _width(stream) -> int | None:
    if "COLUMNS" in os.environ:
        return None
    try:
        return None if stream.isatty() else _PIPE_WIDTH
    except (AttributeError, ValueError):
        return _PIPE_WIDTH


def __getattr__(name: str):
    """`out` and `err`, made at first use: rich is imported by the commands that print tables, not by
    `ge atc`, whose lines are plain (echo, error)."""
    if name not in ("out", "err"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from rich.console import Console
    console = Console(stderr=name == "err", highlight=False, width=_width(sys.stderr if name == "err" else sys.stdout),
                      soft_wrap=True)
    globals()[name] = console
    return console


def one_line(message: object) -> str:
    """A message on a single line: inner line breaks and runs of blanks become single spaces."""
    return " ".join(str(message).split())


def echo(text: str = "") -> None:
    """Plain text to stdout, exactly as given (no markup, no wrapping)."""
    click.echo(text)


def error(message: object, prefix: str = "error") -> None:
    """`<prefix>: <message>` as ONE line on stderr."""
    click.echo(f"{prefix}: {one_line(message)}", err=True)


def nbytes(n: int) -> str:
    """1234567 -> '1.18 MiB' (exact bytes are shown beside it where it matters)."""
    n = int(n)
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{n} B"


_HANDLER = "ge.cli"  # the name of the command line's handler of logger "ge"


def _stderr_handler():
    """A logging handler of ge's log records as `[LEVEL] logger: message` lines on the current stderr
    (resolved per record, as the consoles do), each line once per command: a conversion imports a model
    more than once (each gear, the data-dependent fallback) and a dataset reads many samples, but a fact
    is told once. (A class made when logging is imported: core/model/log.py says why that waits.)"""
    import logging

    class StderrHandler(logging.Handler):
        def __init__(self):
            super().__init__()
            self.said: set[str] = set()
            self.set_name(_HANDLER)

        def emit(self, record: logging.LogRecord) -> None:
            try:
                line = f"[{record.levelname}] {record.name}: {one_line(record.getMessage())}"
                if line not in self.said:
                    self.said.add(line)
                    click.echo(line, err=True)
            except Exception:  # pragma: no cover - logging must never break a command
                self.handleError(record)

    return StderrHandler()


def setup_logging(level: str = "warning", reset: bool = False) -> None:
    """ge's log on stderr at one of ATC's --log levels (the `--log` option of cli/options.py); `reset`
    at the start of a command. Done when logging is first used (core/model/log.py)."""
    def setup() -> None:
        import logging
        log = logging.getLogger("ge")
        handler = next((h for h in log.handlers if h.get_name() == _HANDLER), None)
        if handler is None:
            log.addHandler(_stderr_handler())
            log.propagate = False
        elif reset:  # a new command: what the last one said may be said again
            handler.said.clear()
        log.setLevel(LEVELS[level])
    configure_later(level, setup)
