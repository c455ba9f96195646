"""Issue 6: linear, dataflow and parallel executors; memory safety; many contexts, many threads."""
import threading
from collections import deque

import numpy as np
import pytest

from ge.core.compile.build import build
from ge.core.model.ge_model import FM_ID
from ge.core.model.ir import Graph, Node, Value
from ge.core.runtime.executors import DataflowExecutor, TaskFailed
from ge.core.runtime.model_manager import ModelManager

F32 = np.dtype(np.float32)
SHAPE = (64, 64)


def branches_model():
    """Two independent branches joined at the end. In the linear order A, B, C, D the tensor `c`
    (step 2) reuses the bytes of `a` (dead after step 1): safe in that order, wrong for any
    schedule that runs C before A or B finishes."""
    nodes = [Node("Sigmoid", ["x"], ["a"], name="A"), Node("Neg", ["a"], ["b"], name="B"),
             Node("Exp", ["x"], ["c"], name="C"), Node("Add", ["b", "c"], ["y"], name="D")]
    g = Graph(name="branches", nodes=nodes, inputs=["x"], outputs=["y"],
              values={n: Value(n, F32, SHAPE) for n in "xabcy"})
    return build(g)


def expected(x):
    return -1 / (1 + np.exp(-x)) + np.exp(x)


class LifoDataflow(DataflowExecutor):
    """A legal dataflow order that is not the linear one: the newest ready task first."""

    def run(self, tasks):
        pending, ready = list(self.pending), deque(self.initial)
        while ready:
            t = ready.pop()
            tasks[t].run()
            for s in self.successors[t]:
                pending[s] -= 1
                if pending[s] == 0:
                    ready.append(s)


@pytest.fixture(params=["cpu", "sim"])
def model(request):
    mm = ModelManager()
    model_id = mm.load(branches_model(), request.param)
    yield mm.model(model_id)
    mm.unload(model_id)


def test_linear_plan_reuses_across_branches_and_dataflow_plan_does_not(model):
    tensors = {t.name: t for t in branches_model().tensors}  # the linear plan, as compiled
    assert tensors["a"].allocation == tensors["c"].allocation == FM_ID
    assert tensors["a"].offset == tensors["c"].offset  # the hazard exists in the linear plan
    dataflow, layout = model.ge_plan.dataflow
    assert dataflow.deps == ((), (0,), (), (1, 2))
    offsets = {}
    for i, (task, role) in enumerate(zip(layout.task, layout.role)):
        offsets[(int(task), int(role))] = int(layout.offset[i])
    assert offsets[(0, 1)] != offsets[(2, 1)]  # A's output a and C's output c no longer share bytes


def test_another_legal_order_breaks_the_linear_plan_but_not_the_dataflow_plan(model):
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    deps = model.ge_plan.dataflow[0].deps
    linear_ctx = model.create_context(executor="linear")
    linear_ctx.executor = LifoDataflow(deps)  # C runs first, then A overwrites c's bytes
    wrong = linear_ctx.execute([x])[0]
    assert not np.allclose(wrong, expected(x))  # the test can see the bug
    safe_ctx = model.create_context(executor="dataflow")
    safe_ctx.executor = LifoDataflow(deps)
    # (ge's Sigmoid and numpy's formula differ by an ulp; -sigmoid + exp cancels near 0: an absolute bound too)
    np.testing.assert_allclose(safe_ctx.execute([x])[0], expected(x), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("executor", ["linear", "dataflow", "parallel"])
def test_executors_agree_bit_for_bit(model, executor):
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    reference = model.nn_execute([x])[0]
    ctx = model.create_context(executor=executor)
    for _ in range(20):
        np.testing.assert_array_equal(ctx.execute([x])[0], reference)


def test_dataflow_records_per_task_timings(model):
    ctx = model.create_context(executor="dataflow")
    ctx.execute([np.ones(SHAPE, np.float32)])
    order = [t for t, _ in ctx.executor.timings]
    assert sorted(order) == [0, 1, 2, 3] and order[-1] == 3 and all(s >= 0 for _, s in ctx.executor.timings)


@pytest.mark.parametrize("executor", ["linear", "dataflow", "parallel"])
def test_a_failing_kernel_names_its_node(model, executor):
    from ge.core.model.errors import GeError
    ctx = model.create_context(executor=executor)
    x = np.ones(SHAPE, np.float32)
    ctx.execute([x])  # views built; C's arguments will not move again

    class Failing:
        plan = ctx.handle[2].plan

        def run(self):
            raise ValueError("boom")

    ctx.handle[2] = Failing()
    with pytest.raises(GeError, match="node 'C' \\(Exp\\) failed at run time: ValueError: boom"):
        ctx.execute([x])


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_four_threads_with_their_own_contexts(device):
    mm = ModelManager()
    model = mm.model(mm.load(branches_model(), device))
    failures = []

    def worker(seed: int, executor: str) -> None:
        ctx = model.create_context(executor=executor)
        rng = np.random.default_rng(seed)
        for _ in range(100):
            x = rng.standard_normal(SHAPE).astype(np.float32)
            y = ctx.execute([x])[0]
            if not np.allclose(y, expected(x), rtol=1e-5, atol=1e-6):
                failures.append(seed)

    threads = [threading.Thread(target=worker, args=(i, ("linear", "dataflow", "parallel", "linear")[i])) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mm.unload(model.model_id)
    assert not failures


def test_contexts_cost_feature_maps_not_weights():
    g = Graph(name="w", nodes=[Node("MatMul", ["x", "w"], ["y"], name="mm")], inputs=["x"], outputs=["y"],
              values={"x": Value("x", F32, (8, 256)), "y": Value("y", F32, (8, 256))},
              initializers={"w": np.ones((256, 256), np.float32)})
    mm = ModelManager()
    model = mm.model(mm.load(build(g), "sim"))
    dev = model.device
    before = dev.in_use
    ctx = model.create_context()
    per_context = dev.in_use - before
    io = sum(model.ge_plan.allocation_sizes[a.id] for a in model.ge_plan.io_allocations)
    assert per_context == ctx.fm_size + ctx.workspace_size + io + ctx.args.layout.size * 8
    assert per_context < model.weight_size  # the 256 KiB of weights are shared, not copied
    mm.unload(model.model_id)


def test_unloading_one_model_leaves_the_others_running():
    mm = ModelManager()
    a, b = mm.load(branches_model(), "sim"), mm.load(branches_model(), "cpu")
    x = np.ones(SHAPE, np.float32)
    mm.unload(a)
    np.testing.assert_allclose(mm.execute(b, [x])[0], expected(x), rtol=1e-6, atol=1e-6)
    assert mm.model_ids == [b]
    mm.unload(b)
