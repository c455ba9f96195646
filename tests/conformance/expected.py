"""The one list of cases that fail today, each with its reason: `expected_failures.txt`, one case
a line as `name: category: first error`. The test suite fails on a listed case that passes (take
it off the list) as on an unlisted one that fails. `python -m tests.conformance --write-expected`
rewrites it from a full run."""
from __future__ import annotations

from pathlib import Path

from .summary import category

EXPECTED_FILE = Path(__file__).with_name("expected_failures.txt")
_HEADER = """\
# ONNX backend test cases ge fails today (tests/conformance): `name: category: first error`.
# A case listed here that passes, or a case not listed that fails, turns tests/conformance red.
# Regenerate after a fix: python -m tests.conformance --write-expected
"""


def read_expected(path: Path = EXPECTED_FILE) -> dict[str, str]:
    """{case name: reason}."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, reason = line.partition(": ")
            out[name] = reason
    return out


def write_expected(results, path: Path = EXPECTED_FILE) -> None:
    lines = [f"{r.name}: {category(r)}: {' '.join(r.message.split())}" for r in sorted(results, key=lambda r: r.name)
             if not r.passed]
    path.write_text(_HEADER + "\n".join(lines) + "\n")
