"""The dataflow plan's all-pairs steps, checked against their plain definitions (blocks of rows included),
and a plan against exact offsets."""
import numpy as np
import pytest

from ge.core.compile import dataflow_plan
from ge.core.model.errors import GraphError
from ge.core.model.ge_model import (ARG_IN, ARG_OUT, ARG_SCRATCH, FEATURE_MAP, FM_ID, INPUT, OUTPUT, WEIGHT, WORKSPACE,
                                    Allocation, Arg, GeModel, TaskDef, TensorPlan)


@pytest.mark.parametrize("block", [1 << 20, 64])
@pytest.mark.parametrize("n", [7, 8, 9, 15, 17])
def test_conflicts_are_the_pairs_neither_ordered_before_the_other(monkeypatch, block, n):
    """Packed rows of task counts on and off a multiple of 8, against boolean matrices."""
    monkeypatch.setattr(dataflow_plan, "BLOCK_BYTES", block)
    rng = np.random.default_rng(n)
    deps = [set(rng.choice(t, size=min(t, 2), replace=False).tolist()) for t in range(n)]  # a topological order
    ancestors = np.zeros((n, n), bool)  # [t, p]: p runs before t in every schedule
    for t in range(n):
        for p in deps[t]:
            ancestors[t] |= ancestors[p]
            ancestors[t, p] = True
    descendants = dataflow_plan._descendants(deps)
    packed = dataflow_plan._packed(descendants, n)
    assert np.array_equal(np.unpackbits(packed, axis=1, count=n).astype(bool), ancestors.T)
    touching = [sorted({t, *rng.choice(n, size=rng.integers(0, 3)).tolist()}) for t in range(n)] + [[n - 1], [0]]
    producer = [min(tasks) for tasks in touching]
    touched = np.zeros((len(touching), n), bool)
    for a, tasks in enumerate(touching):
        touched[a, tasks] = True
    unordered = (touched[:, None, :] & ~ancestors[producer][None, :, :]).any(axis=2)
    got = dataflow_plan._conflicts(dataflow_plan._after_all(descendants, touching), producer)
    assert np.array_equal(np.unpackbits(got, axis=1, count=len(touching)).astype(bool), unordered & unordered.T)


def _chain_tensors(n: int) -> list[str]:
    return ["x", "a"] + [f"t{i}" for i in range(1, n - 1)] + ["y"]


def _chain(n: int, last_read_of_a: int) -> GeModel:
    """n tasks in a chain, x -> a -> t1 -> ... -> t(n-2) -> y, 64 bytes each, a also read by task
    `last_read_of_a` (one of 2 .. n-1); the linear plan gives every feature map bytes of its own."""
    fm = {"a": TensorPlan("a", FM_ID, 0, 64, "float32", (16,), 0, last_read_of_a)}
    fm.update((f"t{i}", TensorPlan(f"t{i}", FM_ID, 64 * i, 64, "float32", (16,), i, i + 1)) for i in range(1, n - 1))
    io = {"x": Arg(3, 0, "float32", (16,)), "y": Arg(4, 0, "float32", (16,))}
    arg = {**io, **{t.name: Arg(FM_ID, t.offset, "float32", (16,)) for t in fm.values()}}
    chain = _chain_tensors(n)
    tasks = [TaskDef(f"task{t}", "Relu", "", 17, {}, tuple(arg[i] for i in ins), (arg[chain[t + 1]],))
             for t, ins in enumerate([chain[t]] + ["a"] * (t == last_read_of_a) for t in range(n))]
    allocations = [Allocation(0, WEIGHT, 0), Allocation(FM_ID, FEATURE_MAP, 64 * (n - 1)), Allocation(2, WORKSPACE, 0),
                   Allocation(3, INPUT, 64, 0), Allocation(4, OUTPUT, 64, 0)]
    return GeModel("chain", [], [], allocations, list(fm.values()), tasks, [])


@pytest.mark.parametrize("n", [7, 8, 9, 15, 16, 17])
@pytest.mark.parametrize("last_read_of_a", ["last task", "third last task"])
def test_plan_reuses_bytes_only_after_their_last_reader(n, last_read_of_a):
    """A chain of n tasks whose first feature map, a, is read again by the last task (its bit past
    the last full byte for n not a multiple of 8: a is never free) or by the third last (t(n-2),
    made after that, takes a's bytes). The rest take turns in two slots: t(i+2) is made after ti's
    last reader, t(i+1) while ti is still read."""
    k = n - 1 if last_read_of_a == "last task" else n - 3
    plan = dataflow_plan.plan_dataflow(_chain(n, k))
    offset = {"x": -1, "y": -1, "a": 0, **{f"t{i}": 64 if i % 2 else 128 for i in range(1, n - 1)}}
    if k == n - 3:
        offset[f"t{n - 2}"] = 0
    chain = _chain_tensors(n)
    want = [offset[name] for t in range(n) for name in [chain[t]] + ["a"] * (t == k) + [chain[t + 1]]]
    assert plan.fm_offsets == tuple(want)
    assert plan.fm_size == 192
    assert plan.deps == tuple(() if t == 0 else (0, t - 1) if t == k else (t - 1,) for t in range(n))


@pytest.mark.parametrize("block", [1 << 20, 8])
@pytest.mark.parametrize("args_per_block", [256, 2])
def test_live_roots_finds_the_root_live_at_each_argument(monkeypatch, block, args_per_block):
    monkeypatch.setattr(dataflow_plan, "BLOCK_BYTES", block)
    monkeypatch.setattr(dataflow_plan, "ARGS_PER_BLOCK", args_per_block)
    # two roots sharing bytes 0..64 at different steps, one above them
    roots = [TensorPlan("a", 1, 0, 64, "float32", (16,), 0, 1, ""), TensorPlan("b", 1, 0, 64, "float32", (16,), 2, 3, ""),
             TensorPlan("c", 1, 64, 64, "float32", (16,), 1, 3, "")]
    off = np.array([0, 0, 32, 64, 0], np.int64)
    task = np.array([0, 1, 2, 3, 3], np.int64)
    role = np.array([ARG_OUT, ARG_IN, ARG_OUT, ARG_IN, ARG_SCRATCH], np.int64)
    assert dataflow_plan._live_roots(roots, off, task, role) == [0, 0, 1, 2, 1]
    with pytest.raises(GraphError, match="task 1: feature-map offset 200 matches 0 live tensors"):
        dataflow_plan._live_roots(roots, np.array([0, 200]), np.array([1, 1]), np.array([ARG_IN, ARG_IN]))


@pytest.mark.parametrize("args_per_block", [1, 3, 256])
def test_live_roots_of_a_long_chain_with_skips_in_blocks(monkeypatch, args_per_block):
    """A ladder's linear plan (t_i made by task i, read by task i + 1 and by task i + 5, each 64 bytes
    in one of 6 slots taken in turn): a block of arguments sees the roots made long before it."""
    monkeypatch.setattr(dataflow_plan, "ARGS_PER_BLOCK", args_per_block)
    n = 40
    roots = [TensorPlan(f"t{i}", FM_ID, 64 * (i % 6), 64, "float32", (16,), i, min(i + 5, n - 1), "")
             for i in range(n)]
    want, off, task, role = [], [], [], []
    for t in range(n):
        for r, k in [(t - 1, ARG_IN), (t - 5, ARG_IN), (t, ARG_OUT)]:
            if r >= 0:
                want.append(r), off.append(64 * (r % 6) + 8), task.append(t), role.append(k)
    got = dataflow_plan._live_roots(roots, np.array(off), np.array(task), np.array(role))
    assert got == want
