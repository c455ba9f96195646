"""ge's loggers, without `import logging` until a record can go somewhere.

`import logging` (with threading, traceback, string, weakref ...) costs each process ~10 M instructions
with bytecode cached, ~160 M where the standard library has none (Python's container images): each
module compiled from source. A `ge atc` that logs nothing at its level need not pay it.

`Logger(name)` stands for `logging.getLogger(name)`. A record goes to logging whenever it could go
somewhere: once the program has imported logging (it may have configured it), else when it passes the
level ge's command line asked for (`configure_later`) or, with none asked for, Python's default (the
root's WARNING and its last-resort handler). Below that level, with logging never imported, nothing
can have asked for the record: it is dropped without importing logging.
"""
from __future__ import annotations

import contextlib
import sys

#: ATC's --log levels as logging's numbers ("null": above CRITICAL, nothing)
LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "null": 60}
_WARNING = LEVELS["warning"]

#: (level, setup) of a configuration asked for before logging was imported: setup() runs at its first use
_pending: tuple | None = None


def configure_later(level: str, setup) -> None:
    """Set ge's log up at ATC's `level` by `setup()`: now if logging is imported or `level` is below
    WARNING (info and debug lines come from every part of ge, some of which log through logging
    itself when it is imported, the native loader's), else when a first record passes `level` (or
    logging is used otherwise, through `logger`)."""
    global _pending
    if "logging" in sys.modules or LEVELS[level] < _WARNING:
        _pending = None
        setup()
    else:
        _pending = (LEVELS[level], setup)


@contextlib.contextmanager
def later_while(level: int, setup):
    """In the block, `setup()` waits as configure_later's does: for a first record that passes `level` (or
    logging's first use), after the configuration asked for before (which is pending again after the
    block if neither ran)."""
    global _pending
    earlier = _pending

    def setups() -> None:
        if earlier is not None:
            earlier[1]()
        setup()
    _pending = (level, setups)
    try:
        yield
    finally:
        if _pending is not None and _pending[1] is setups:
            _pending = earlier


def logger(name: str):
    """logging.getLogger(name), with the configuration asked for before it applied first."""
    global _pending
    import logging
    if _pending is not None:
        setup, _pending = _pending[1], None
        setup()
    return logging.getLogger(name)


class Logger:
    """The logger `name` of logging, imported when a record is due (see the module)."""
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 (logging.Logger's name)
        if "logging" in sys.modules:
            return logger(self.name).isEnabledFor(level)
        return level >= (_pending[0] if _pending is not None else _WARNING)

    def _log(self, level: int, msg, args, kwargs) -> None:
        if self.isEnabledFor(level):
            # stacklevel: the record names the caller of debug() ... log(), not this module
            logger(self.name).log(level, msg, *args, stacklevel=3, **kwargs)

    def debug(self, msg, *args, **kwargs) -> None:
        self._log(LEVELS["debug"], msg, args, kwargs)

    def info(self, msg, *args, **kwargs) -> None:
        self._log(LEVELS["info"], msg, args, kwargs)

    def warning(self, msg, *args, **kwargs) -> None:
        self._log(_WARNING, msg, args, kwargs)

    def error(self, msg, *args, **kwargs) -> None:
        self._log(LEVELS["error"], msg, args, kwargs)

    def log(self, level: int, msg, *args, **kwargs) -> None:
        self._log(level, msg, args, kwargs)
