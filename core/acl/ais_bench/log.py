"""ais_bench's log: "[INFO] ..." lines on stdout, as its logging.basicConfig sets them up."""
from __future__ import annotations

import logging
import sys

logger = logging.getLogger("ge.ais_bench")
logger.propagate = False
logger.setLevel(logging.INFO)


class _Stdout(logging.StreamHandler):
    """Writes to whatever sys.stdout is at the time (a test's capture, a redirected stream)."""

    def __init__(self):
        super().__init__()
        self.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))

    @property
    def stream(self):
        return sys.stdout

    @stream.setter
    def stream(self, _):
        pass


if not logger.handlers:
    logger.addHandler(_Stdout())
