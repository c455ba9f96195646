"""Every ONNX backend test case (tests/conformance/cases.py) through ge on cpu and sim. A case
listed in expected_failures.txt must fail (strictly: one that passes turns this red until it is
taken off the list), any other must pass."""
from __future__ import annotations

import pytest

from tests.conformance.cases import all_cases, by_name
from tests.conformance.expected import EXPECTED_FILE, read_expected
from tests.conformance.runner import run_case

EXPECTED = read_expected()


@pytest.mark.parametrize("name", [c.name for c in all_cases()])
def test_onnx_backend_case(name):
    result = run_case(by_name()[name])
    if name in EXPECTED:
        if result.passed:
            pytest.fail(f"{name} passes now: take it off {EXPECTED_FILE.name}")
        pytest.xfail(EXPECTED[name])
    assert result.passed, f"{result.status}: {result.message}"


def test_expected_failures_name_real_cases():
    stale = sorted(set(EXPECTED) - set(by_name()))
    assert not stale, f"{EXPECTED_FILE.name} lists cases onnx does not define: {stale}"


def test_all_of_onnx_cases_are_collected():
    kinds = {c.kind for c in all_cases()}
    assert kinds == {"node", "simple", "pytorch-converted", "pytorch-operator"}
    assert len(all_cases()) >= 2024
