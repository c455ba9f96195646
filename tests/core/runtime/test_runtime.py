"""The runtime on hand-built GeModels: results, address refresh, zero copy, contexts, errors."""
import numpy as np
import pytest

from ge.core.compile.build import build
from ge.core.model.errors import ShapeError
from ge.core.model.ge_model import FM_ID
from ge.core.model.ir import Graph, Node, Value
from ge.core.runtime.device import get_device
from ge.core.runtime.model_manager import ModelManager

F32 = np.dtype(np.float32)
W = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)


def small_model():
    """y = relu(x + w) + x, and x itself as a second output (an Identity copy task)."""
    g = Graph(name="small", nodes=[Node("Add", ["x", "w"], ["a"], name="add"), Node("Relu", ["a"], ["b"], name="relu"),
                                   Node("Add", ["b", "x"], ["y"], name="add2")],
              inputs=["x"], outputs=["y", "x"], values={n: Value(n, F32, (2, 3)) for n in "xaby"},
              initializers={"w": W})
    return build(g)


def expected(x):
    return np.maximum(x + W, 0) + x


@pytest.fixture(params=["cpu", "sim"])
def loaded(request):
    mm = ModelManager()
    model_id = mm.load(small_model(), request.param)
    yield mm.model(model_id)
    mm.unload(model_id)


def test_results(loaded):
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 3
    y, x_copy = loaded.nn_execute([x])
    np.testing.assert_array_equal(y, expected(x))
    np.testing.assert_array_equal(x_copy, x)


@pytest.mark.parametrize("copy_out_max", [0, 1 << 20])
def test_outputs_ge_allocates_are_bound_or_copied_by_size(loaded, monkeypatch, copy_out_max):
    """Outputs the caller does not give are new arrays each run: a small one is copied out of the
    planned buffer, a large one bound in place; either way each run's results are its own."""
    from ge.core.runtime import context
    monkeypatch.setattr(context, "COPY_OUT_MAX", copy_out_max)
    ctx = loaded.create_context()  # a context sorts the outputs by size as it is created
    x = np.ones((2, 3), np.float32)
    first = ctx.execute([x])
    first[0][...] = 0  # the caller's own array: nothing ge holds
    second = ctx.execute([x])
    assert second[0] is not first[0]
    np.testing.assert_array_equal(second[0], expected(x))
    stats = ctx.stats
    if loaded.device.name == "cpu":  # (sim copies host arrays whatever their size)
        copied = copy_out_max > 0
        assert (stats["copied_outputs"], stats["zero_copy_outputs"]) == ((2, 0) if copied else (0, 2))
        assert stats["views_rebuilt"] == (0 if copied else 2)  # a bound output moves each run: its writer's views


def test_outputs_the_caller_drops_come_back_and_are_bound_in_place(loaded):
    """A caller that drops each run's outputs before the next gets the same arrays again, bound in
    place once they keep coming back (context.STEADY): no copies, nothing rebuilt, each run's values."""
    from ge.core.runtime import context
    ctx = loaded.create_context()
    ids = set()
    for k in range(context.STEADY + 3):
        x = np.full((2, 3), float(k), np.float32)
        y, x_copy = ctx.execute([x])
        np.testing.assert_array_equal(y, expected(x))
        np.testing.assert_array_equal(x_copy, x)
        ids.add(id(y))
        del y, x_copy
    assert len(ids) == 1
    stats = ctx.stats
    if loaded.device.name == "cpu":  # (sim copies host arrays)
        assert (stats["copied_outputs"], stats["zero_copy_outputs"], stats["views_rebuilt"]) == (0, 2, 0)


def test_outputs_the_caller_holds_are_never_written_again(loaded):
    """An output array the caller keeps, or keeps a view or a memoryview of, is its own: later runs
    write new arrays, whether the kept one was copied into or bound in place."""
    from ge.core.runtime import context
    ctx = loaded.create_context()
    for k in range(context.STEADY + 1):  # bound in place from here on
        ctx.execute([np.full((2, 3), -1.0, np.float32)])
    x1 = np.full((2, 3), 1.0, np.float32)
    kept = ctx.execute([x1])[0]
    row = ctx.execute([x1])[0][0]
    memory = memoryview(ctx.execute([x1])[0])
    for k in range(context.STEADY + 2):
        ctx.execute([np.full((2, 3), 5.0 + k, np.float32)])
    for k in range(context.STEADY + 1):  # bound in place again, the caller keeping it through a run
        last = ctx.execute([x1])[0]      # with its own buffers (which moves the tasks off it)
    ctx.execute([x1], [np.empty((2, 3), np.float32), np.empty((2, 3), np.float32)])
    for k in range(context.STEADY + 2):
        ctx.execute([np.full((2, 3), 9.0 + k, np.float32)])
    np.testing.assert_array_equal(last, expected(x1))
    want = expected(x1)
    np.testing.assert_array_equal(kept, want)
    np.testing.assert_array_equal(row, want[0])
    np.testing.assert_array_equal(np.asarray(memory), want)


def test_an_output_fed_back_as_the_next_input(loaded):
    """A stream's state: each run's output is the next run's input (held by the caller meanwhile)."""
    ctx = loaded.create_context()
    x = want = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    for _ in range(6):
        x = ctx.execute([x])[0]
        want = expected(want)
        np.testing.assert_array_equal(x, want)


def test_moved_output_buffer_receives_the_results(loaded):
    """The args table drives execution: a new output address must be where results land."""
    x = np.ones((2, 3), np.float32)
    first = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    loaded.nn_execute([x], first)
    np.testing.assert_array_equal(first[0], expected(x))
    second = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    x2 = np.full((2, 3), -2.0, np.float32)
    loaded.nn_execute([x2], second)
    np.testing.assert_array_equal(second[0], expected(x2))
    np.testing.assert_array_equal(first[0], expected(x))  # the old buffer was not written again


def test_outputs_of_our_own_after_the_callers_leave_the_callers_alone(loaded):
    """A run without outputs after one with the caller's buffers unbinds them: the results land in
    new arrays, the caller's buffers keep the earlier run's; and the caller's buffers bind again."""
    x, x2 = np.ones((2, 3), np.float32), np.full((2, 3), -2.0, np.float32)
    given = [np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32)]
    loaded.nn_execute([x], given)
    ours = loaded.nn_execute([x2])
    np.testing.assert_array_equal(ours[0], expected(x2))
    np.testing.assert_array_equal(given[0], expected(x))
    loaded.nn_execute([x2], given)
    np.testing.assert_array_equal(given[0], expected(x2))
    np.testing.assert_array_equal(ours[0], expected(x2))


def test_same_buffers_twice_write_no_args(loaded):
    x = np.ones((2, 3), np.float32)
    outs = [np.empty((2, 3), np.float32), np.empty((2, 3), np.float32)]
    loaded.nn_execute([x], outs)
    loaded.nn_execute([x], outs)
    stats = loaded.default_context.stats
    assert stats["args_bytes"] == 0 and stats["views_rebuilt"] == 0 and stats["allocations"] == 0
    if loaded.device.name == "cpu":
        assert (stats["zero_copy_inputs"], stats["zero_copy_outputs"], stats["h2d_bytes"]) == (1, 2, 0)
    else:
        assert (stats["copied_inputs"], stats["copied_outputs"]) == (1, 2)
        assert stats["h2d_bytes"] == x.nbytes and stats["d2h_bytes"] == 2 * x.nbytes


def test_input_errors_name_the_input(loaded):
    with pytest.raises(ShapeError, match="input 'x': shape \\[3, 2\\] does not match the model's \\[2, 3\\]"):
        loaded.nn_execute([np.ones((3, 2), np.float32)])
    with pytest.raises(ShapeError, match="input 'x': dtype float64 does not match the model's float32"):
        loaded.nn_execute([np.ones((2, 3))])
    with pytest.raises(ShapeError, match="expects 1 inputs \\(x\\), got 2"):
        loaded.nn_execute([np.ones((2, 3), np.float32)] * 2)


def test_contexts_share_weights_and_run_independently(loaded):
    ctx = loaded.create_context()
    a, b = np.full((2, 3), 3.0, np.float32), np.full((2, 3), -5.0, np.float32)
    ya = loaded.nn_execute([a])[0]
    yb = ctx.execute([b])[0]
    np.testing.assert_array_equal(ya, expected(a))
    np.testing.assert_array_equal(yb, expected(b))
    assert ctx.args.base[FM_ID] != loaded.default_context.args.base[FM_ID]  # own feature maps


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_unload_frees_device_memory(device):
    dev = get_device(device)
    before = dev.in_use
    mm = ModelManager()
    model_id = mm.load(small_model(), device)
    assert dev.in_use > before
    mm.unload(model_id)
    assert dev.in_use == before


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_an_omitted_middle_output_keeps_its_place(device):
    """["y", "", "inv"]: the task keeps a placeholder, so InvStdDev lands in output 2, not in Mean's place."""
    g = Graph(name="ln", nodes=[Node("LayerNormalization", ["x", "s"], ["y", "", "inv"], name="ln", attrs={"axis": -1})],
              inputs=["x"], outputs=["y", "inv"],
              values={"x": Value("x", F32, (2, 3)), "y": Value("y", F32, (2, 3)), "inv": Value("inv", F32, (2, 1))},
              initializers={"s": np.ones(3, np.float32)})
    m = build(g)
    assert m.tasks[0].outputs[1] is None and len(m.tasks[0].args) == 5  # x, s, y, inv, workspace
    mm = ModelManager()
    model_id = mm.load(m, device)
    x = np.array([[1, 2, 4], [0, -3, 9]], np.float32)
    y, inv = mm.model(model_id).nn_execute([x])
    mm.unload(model_id)
    want_inv = 1 / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-5)
    np.testing.assert_allclose(y, (x - x.mean(axis=1, keepdims=True)) * want_inv, rtol=1e-5, atol=1e-6)


def test_an_om_planning_too_little_workspace_is_refused_at_load(default_backend):
    """An OM from a ge whose kernel needed less scratch: a clear error at load, not a failed run (a
    native plan takes scratch of its own instead: tests/e2e/test_native_portability.py)."""
    from ge.core.model.errors import FormatError
    default_backend("numpy")
    g = Graph(name="ws", nodes=[Node("Conv", ["x", "w"], ["y"], name="conv", attrs={"pads": [1, 1, 1, 1]})],
              inputs=["x"], outputs=["y"], values={"x": Value("x", F32, (1, 4, 8, 8)), "y": Value("y", F32, (1, 4, 8, 8))},
              initializers={"w": np.ones((4, 4, 3, 3), np.float32)})
    m = build(g)
    assert m.tasks[0].workspace > 0
    m.tasks[0] = m.tasks[0]._replace(workspace=8)
    with pytest.raises(FormatError, match="node 'conv' \\(Conv\\) needs \\d+ bytes of workspace, the OM plans 8; recompile"):
        ModelManager().load(m, "cpu")
