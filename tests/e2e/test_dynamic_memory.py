"""Hybrid mode's memory plan (HybridContext.plan_memory): after a run that allocated, the root's
tensors move into one arena planned for the bytes each has held and the steps it lives, so tensors
never alive together share bytes; a run inside those sizes allocates nothing, a larger one grows
and is planned again. Outputs equal onnxruntime's whatever the shapes' order."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api

from .conftest import onnxruntime_outputs


def _residual_net() -> onnx.ModelProto:
    """Elementwise steps whose early values are read late (x by the Add, a by the last Add), a
    reduction, and a NonZero whose output size only the values tell: x (N, 16, L) symbolic."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Mul", ["a", "two"], ["b"]),
        helper.make_node("Add", ["b", "x"], ["c"]),
        helper.make_node("Sigmoid", ["c"], ["d"]),
        helper.make_node("Transpose", ["d"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Transpose", ["t"], ["u"], perm=[0, 2, 1]),
        helper.make_node("Add", ["u", "a"], ["y"]),
        helper.make_node("ReduceSum", ["c", "axes"], ["z"], keepdims=0),
        helper.make_node("Greater", ["x", "half"], ["g"]),
        helper.make_node("NonZero", ["g"], ["nz"]),
    ]
    graph = helper.make_graph(
        nodes, "residual",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, "L"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, "L"]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 16]),
         helper.make_tensor_value_info("nz", TensorProto.INT64, [3, None])],
        [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0]),
         helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]),
         helper.make_tensor("axes", TensorProto.INT64, [1], [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def loaded(tmp_path):
    path = str(tmp_path / "residual.onnx")
    onnx.save(_residual_net(), path)
    om = api.atc(path, str(tmp_path / "residual"), input_shape="x:-1,16,-1").om_path
    model_id = api.load_from_file(om, "cpu")
    yield path, model_id, api.model(model_id)
    api.unload(model_id)


def _run(path, model_id, n, length, seed=0):
    """Random inputs, but for seed None: all above 0.5, the most NonZero can give for the shape."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, 16, length)) if seed is not None else rng.uniform(1, 2, (n, 16, length))).astype(np.float32)
    got = api.execute(model_id, [x])
    for g, e in zip(got, onnxruntime_outputs(path, {"x": x})):
        assert g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _planned(ctx, model):
    """(name, first, last, address, capacity) of every tensor in the arena."""
    return [(name, *model.lifetimes[name], s.addr, s.capacity) for name, s in ctx.slots.items() if s.planned]


def test_tensors_never_alive_together_share_the_arena(loaded):
    path, model_id, model = loaded
    ctx = model.default_context
    _run(path, model_id, 2, 40, seed=None)
    assert ctx.counters["memory_plans"] == 1
    planned = _planned(ctx, model)
    assert {name for name, *_ in planned} >= {"x", "a", "c", "t", "u", "y", "z"}  # (b joined the Add's chain)
    for i, (n1, f1, l1, a1, c1) in enumerate(planned):  # alive together: disjoint bytes
        for n2, f2, l2, a2, c2 in planned[i + 1:]:
            if f1 <= l2 and f2 <= l1:
                assert a1 + c1 <= a2 or a2 + c2 <= a1, (n1, n2)
    total = sum(c for *_, c in planned)
    assert ctx._owned[ctx._arena] < total  # shared: less than a buffer each
    _run(path, model_id, 2, 40, seed=1)  # in the arena now
    _run(path, model_id, 2, 40, seed=2)  # steady
    assert ctx.counters["memory_plans"] == 1


def test_a_run_inside_the_planned_sizes_allocates_nothing(loaded):
    path, model_id, model = loaded
    ctx = model.default_context
    _run(path, model_id, 3, 64, seed=None)
    allocations = ctx.counters["allocations"]
    for n, length, seed in ((3, 64, 1), (1, 10, 2), (2, 64, 3), (3, 1, 4)):
        _run(path, model_id, n, length, seed)
    assert ctx.counters["allocations"] == allocations
    assert ctx.counters["memory_plans"] == 1


def test_a_data_dependent_size_grows_too(loaded):
    path, model_id, model = loaded
    ctx = model.default_context
    _run(path, model_id, 2, 40, seed=0)  # about a third of x above 0.5
    _run(path, model_id, 2, 40, seed=None)  # all of it: NonZero's output grows
    assert ctx.counters["memory_plans"] == 2
    _run(path, model_id, 2, 40, seed=3)
    assert ctx.counters["memory_plans"] == 2


def test_a_larger_run_grows_and_is_planned_again(loaded):
    path, model_id, model = loaded
    ctx = model.default_context
    _run(path, model_id, 1, 8)
    _run(path, model_id, 4, 100, seed=None)  # larger: grown into buffers of their own, then planned again
    assert ctx.counters["memory_plans"] == 2
    assert all(s.planned for name, s in ctx.slots.items() if name in model.lifetimes)
    allocations = ctx.counters["allocations"]
    for n, length, seed in ((1, 8, 2), (4, 100, 3), (2, 50, 4)):
        _run(path, model_id, n, length, seed)
    assert ctx.counters["allocations"] == allocations
    assert len(ctx._owned) == 1  # the arena alone: the grown buffers were freed


def test_outputs_into_the_callers_buffers(loaded):
    path, model_id, model = loaded
    x = np.random.default_rng(5).standard_normal((2, 16, 12)).astype(np.float32)
    expected = onnxruntime_outputs(path, {"x": x})
    for _ in range(3):
        ys = [np.empty_like(e) for e in expected]
        got = model.default_context.execute([x], ys)
        for g, y, e in zip(got, ys, expected):
            assert g is y
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_a_dim_growing_call_after_call_grows_the_tensors_a_few_times(loaded):
    """A decoder's past grows by one token a call: a tensor that grows again takes half its size ahead, so
    the tensors grow and the arena is planned a few times over 50 calls, not at every call."""
    path, model_id, model = loaded
    ctx = model.default_context
    for length in range(10, 60):
        _run(path, model_id, 1, length, seed=None)
    assert ctx.counters["memory_plans"] <= 6  # (10 -> 15 -> 22 -> 33 -> 49 -> 73)
    assert ctx.counters["reallocs"] <= 6 * len(model.lifetimes)


def test_a_shape_input_whose_value_moves_in_the_same_buffer_is_seen(tmp_path):
    """A Reshape's target is a shape input: its node is steady (and replayed) while the target's values
    hold, and a new value in the same buffer (the same target array, refilled) takes the step-by-step
    path: each call's output has the shape asked for, whichever path ran."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Reshape", ["r", "s"], ["y"]),
             helper.make_node("Neg", ["y"], ["z"])]
    graph = helper.make_graph(nodes, "reshape_by_input", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 24]),
                                                          helper.make_tensor_value_info("s", TensorProto.INT64, [3])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    path = str(tmp_path / "r.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "r"), input_shape="x:-1,24;s:3").om_path, "cpu")
    try:
        x = np.random.default_rng(0).standard_normal((2, 24)).astype(np.float32)
        s = np.array([2, 4, 6], np.int64)
        for target in ([2, 4, 6], [2, 4, 6], [2, 4, 6], [4, 2, 6], [4, 2, 6], [4, 2, 6], [2, 4, 6], [8, 3, 2]):
            s[...] = target  # (the same array: its buffer keeps its view, its values move)
            z = api.execute(model_id, {"x": x, "s": s})[0]
            np.testing.assert_array_equal(z, -np.maximum(x, 0).reshape(target))
        ctx = api.model(model_id).default_context
        for _ in range(3):  # the same value again: steady, then replayed (the value checked before the call)
            np.testing.assert_array_equal(api.execute(model_id, {"x": x, "s": s})[0], -np.maximum(x, 0).reshape(8, 3, 2))
        assert ctx._replay is not None
        s[...] = [3, 8, 2]  # a new value under the replay: the Reshape's step and those after it step by step
        np.testing.assert_array_equal(api.execute(model_id, {"x": x, "s": s})[0], -np.maximum(x, 0).reshape(3, 8, 2))
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_a_large_input_or_the_same_array_again_is_read_in_place(tmp_path, device):
    """On the cpu device the root reads an input from the caller's array when it is the last call's array,
    larger than COPY_IN_MAX, or of a new shape and larger than NEW_SHAPE_BIND_MIN (a generation loop's
    past: nothing copied in; changes the caller makes to it between calls are read), and copies any other
    into a buffer of its own; the sim device (its memory is not the host's) copies."""
    from ge.core.runtime.context import COPY_IN_MAX
    from ge.core.runtime.hybrid_context import NEW_SHAPE_BIND_MIN
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Mul", ["r", "two"], ["y"])]
    graph = helper.make_graph(nodes, "bind", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])])
    path = str(tmp_path / "bind.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "bind"), input_shape="x:-1,64").om_path, device)
    try:
        ctx = api.model(model_id).default_context
        rng = np.random.default_rng(0)
        big = rng.standard_normal((COPY_IN_MAX // 256 + 1, 64)).astype(np.float32)  # just over COPY_IN_MAX
        small = rng.standard_normal((3, 64)).astype(np.float32)
        mid = rng.standard_normal((NEW_SHAPE_BIND_MIN // 256 + 2, 64)).astype(np.float32)  # (and a row less: over it too)
        for x, copied in ((small, True), (small, device == "sim"), (big, device == "sim"), (big, device == "sim"),
                          (small.copy(), True), (big, device == "sim"), (mid, device == "sim"), (mid.copy(), True),
                          (mid[:-1].copy(), device == "sim"), (small.copy(), True)):
            np.testing.assert_array_equal(api.execute(model_id, [x])[0], np.maximum(x, 0) * 2)
            assert (ctx.stats["h2d_bytes"] > 0) == copied
        big[0, :] = 5.0  # the caller's array changed in place: read as it is now
        np.testing.assert_array_equal(api.execute(model_id, [big])[0], np.maximum(big, 0) * 2)
    finally:
        api.unload(model_id)


def test_replayed_runs_write_the_arrays_the_caller_let_go_of(tmp_path):
    """A replayed run writes its outputs into the last run's arrays when the caller has dropped them,
    and into new ones when the caller still holds them (or anything made from them)."""
    nodes = [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    path = str(tmp_path / "two.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    model_id = api.load_from_file(api.atc(path, str(tmp_path / "two"), input_shape="x:-1,8").om_path, "cpu")
    try:
        x = np.random.default_rng(7).standard_normal((3, 8)).astype(np.float32)
        for _ in range(4):  # steady: replayed from here on
            api.execute(model_id, [x])
        assert api.model(model_id).default_context._replay is not None
        first = api.execute(model_id, [x])
        held, kept = first[0], first[0].copy()
        address = first[1].__array_interface__["data"][0]
        del first  # the caller keeps y only
        x *= 2  # (the same array, new values: the run is replayed)
        second = api.execute(model_id, [x])
        assert second[0] is not held and np.array_equal(held, kept)  # a held array is never written again
        assert second[1].__array_interface__["data"][0] == address  # the dropped z's array written again
        np.testing.assert_array_equal(second[0], np.maximum(x, 0))
        np.testing.assert_array_equal(second[1], -x)
    finally:
        api.unload(model_id)
