"""ONNX's own backend test cases run through ge (`python -m tests.conformance`; tests in
test_conformance.py)."""
