"""Every ONNX backend test case (tests/conformance/cases.py) through ge on cpu and sim. A case
listed in expected_failures.txt must fail (strictly: one that passes turns this red until it is
taken off the list), any other must pass. A few cases of each value kind also go through the
command line and onnx's .pb files (`python -m tests.conformance --files` runs them all so)."""
from __future__ import annotations

import pytest

from tests.conformance.cases import all_cases, by_name
from tests.conformance.expected import EXPECTED_FILE, read_expected
from tests.conformance.runner import run_case
from tests.conformance.through_files import run_case_files

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


#: the value kinds that have a file form through ge run's .pb files: inputs and outputs of bfloat16,
#: float8, 4- and 2-bit types, strings (onnx's own test data of the "simple" kind too), sequences
#: and optionals (empty and not), and a model without inputs
THROUGH_FILES = ["test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_BFLOAT16", "test_cast_FLOAT8E4M3FN_to_FLOAT",
                 "test_cast_FLOAT_to_FLOAT8E5M2", "test_cast_e8m0_FLOAT8E8M0_to_FLOAT", "test_cast_INT4_to_INT8",
                 "test_cast_FLOAT_to_UINT4", "test_cast_INT2_to_FLOAT", "test_cast_FLOAT4E2M1_to_FLOAT",
                 "test_string_concat", "test_strnorm_model_monday_insensintive_upper_twodim",
                 "test_sequence_insert_at_back", "test_sequence_model1", "test_optional_get_element_optional_sequence",
                 "test_optional_has_element_empty_optional_input", "test_identity_opt", "test_constant"]


@pytest.mark.parametrize("name", THROUGH_FILES)
def test_onnx_backend_case_through_ge_atc_and_ge_run_files(name):
    result = run_case_files(by_name()[name])
    assert result.passed, f"{result.status}: {result.message}"
