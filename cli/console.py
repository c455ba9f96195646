"""The CLI's two rich consoles (stdout for results, stderr for errors) and the one-line error form.

Both consoles resolve sys.stdout / sys.stderr when they print, so click's test runner and
redirections see their output. When stdout is not a terminal (a pipe, a file, a test) and COLUMNS
is not set, tables get a wide fixed width instead of rich's 80 columns, so cells are not cut.
Machine-readable output (JSON, ATC's banners) goes through `echo`, never through rich markup.
"""
from __future__ import annotations

import logging
import os
import sys

import click
from rich.console import Console

_PIPE_WIDTH = 200


def _width(stream) -> int | None:
    if "COLUMNS" in os.environ:
        return None
    try:
        return None if stream.isatty() else _PIPE_WIDTH
    except (AttributeError, ValueError):
        return _PIPE_WIDTH


out = Console(highlight=False, width=_width(sys.stdout))
err = Console(stderr=True, highlight=False, width=_width(sys.stderr))


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


class _StderrHandler(logging.Handler):
    """ge's log records as `[LEVEL] logger: message` lines on the current stderr (resolved per record,
    as the consoles do)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"[{record.levelname}] {record.name}: {one_line(record.getMessage())}", err=True)
        except Exception:  # pragma: no cover - logging must never break a command
            self.handleError(record)


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "null": logging.CRITICAL + 10}


def setup_logging(level: str = "warning") -> None:
    """ge's log on stderr at one of ATC's --log levels (the `--log` option of cli/options.py)."""
    log = logging.getLogger("ge")
    if not any(isinstance(h, _StderrHandler) for h in log.handlers):
        log.addHandler(_StderrHandler())
        log.propagate = False
    log.setLevel(_LEVELS[level])
