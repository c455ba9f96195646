"""The dataflow plan's all-pairs steps, checked against their plain definitions (blocks of rows included)."""
import numpy as np
import pytest

from ge.core.compile import dataflow_plan
from ge.core.model.errors import GraphError
from ge.core.model.ge_model import ARG_IN, ARG_OUT, ARG_SCRATCH, TensorPlan


@pytest.mark.parametrize("block", [1 << 20, 64])
def test_any_and_is_any_of_the_rows_anded(monkeypatch, block):
    monkeypatch.setattr(dataflow_plan, "BLOCK_BYTES", block)
    rng = np.random.default_rng(0)
    a, b = rng.random((37, 70)) < 0.05, rng.random((23, 70)) < 0.5
    assert np.array_equal(dataflow_plan._any_and(a, b), (a[:, None, :] & b[None, :, :]).any(axis=2))


@pytest.mark.parametrize("block", [1 << 20, 8])
def test_live_roots_finds_the_root_live_at_each_argument(monkeypatch, block):
    monkeypatch.setattr(dataflow_plan, "BLOCK_BYTES", block)
    # two roots sharing bytes 0..64 at different steps, one above them
    roots = [TensorPlan("a", 1, 0, 64, "float32", (16,), 0, 1, ""), TensorPlan("b", 1, 0, 64, "float32", (16,), 2, 3, ""),
             TensorPlan("c", 1, 64, 64, "float32", (16,), 1, 3, "")]
    off = np.array([0, 0, 32, 64, 0], np.int64)
    task = np.array([0, 1, 2, 3, 3], np.int64)
    role = np.array([ARG_OUT, ARG_IN, ARG_OUT, ARG_IN, ARG_SCRATCH], np.int64)
    assert dataflow_plan._live_roots(roots, off, task, role) == [0, 0, 1, 2, 1]
    with pytest.raises(GraphError, match="task 1: feature-map offset 200 matches 0 live tensors"):
        dataflow_plan._live_roots(roots, np.array([0, 200]), np.array([1, 1]), np.array([ARG_IN, ARG_IN]))
