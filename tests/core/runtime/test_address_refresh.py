"""Issue 4: incremental address refresh, frozen inputs, zero copy, known-node mode and the V2 calls."""
import threading

import numpy as np
import pytest

from ge.core.compile.build import build
from ge.core.model.errors import DeviceError, GeError
from ge.core.model.ge_model import FM_ID
from ge.core.model.ir import Graph, Node, Value
from ge.core.runtime import known_subgraph as v2
from ge.core.runtime.device import Event, get_device
from ge.core.runtime.model_manager import ModelManager

F32 = np.dtype(np.float32)
SHAPE = (4, 32)
W = np.linspace(-1, 1, 128, dtype=np.float32).reshape(SHAPE)


def chain_model():
    """y = relu(x + w) * x ; z = y + w: two outputs, x read by two tasks."""
    g = Graph(name="chain", nodes=[Node("Add", ["x", "w"], ["a"], name="add"), Node("Relu", ["a"], ["b"], name="relu"),
                                   Node("Mul", ["b", "x"], ["y"], name="mul"), Node("Add", ["y", "w"], ["z"], name="add2")],
              inputs=["x"], outputs=["y", "z"], values={n: Value(n, F32, SHAPE) for n in "xabyz"}, initializers={"w": W})
    return build(g)


def expected(x):
    y = np.maximum(x + W, 0) * x
    return y, y + W


@pytest.fixture(params=["cpu", "sim"])
def model(request):
    mm = ModelManager()
    model_id = mm.load(chain_model(), request.param)
    yield mm.model(model_id)
    mm.unload(model_id)


def device_io(model, x):
    """Inputs and outputs in the model's device memory (what qualifies for zero copy on sim)."""
    dev = model.device
    xb, yb, zb = dev.buffer(x.nbytes), dev.buffer(x.nbytes), dev.buffer(x.nbytes)
    dev.memcpy_h2d(xb.addr, x)
    return xb, [yb, zb]


def test_same_device_buffers_twice_write_no_args(model):
    x = np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32)
    xb, outs = device_io(model, x)
    model.nn_execute([xb], outs)
    model.nn_execute([xb], outs)
    s = model.default_context.stats
    assert (s["args_bytes"], s["views_rebuilt"], s["h2d_bytes"], s["d2h_bytes"]) == (0, 0, 0, 0)
    assert (s["zero_copy_inputs"], s["zero_copy_outputs"], s["copied_inputs"], s["copied_outputs"]) == (1, 2, 0, 0)
    for got, want in zip(outs, expected(x)):
        np.testing.assert_array_equal(got.view(F32, SHAPE), want)


def test_swapping_one_output_rewrites_only_its_entries(model):
    x = np.random.default_rng(1).standard_normal(SHAPE).astype(np.float32)
    xb, (yb, zb) = device_io(model, x)
    model.nn_execute([xb], [yb, zb])
    y2 = model.device.buffer(x.nbytes)
    model.nn_execute([xb], [y2, zb])
    s = model.default_context.stats
    # y is written by 'mul' and read by 'add2': two argument entries, 8 bytes each
    assert s["args_bytes"] == 16 and not s["full_refresh"] and s["views_rebuilt"] == 2
    np.testing.assert_array_equal(y2.view(F32, SHAPE), expected(x)[0])
    np.testing.assert_array_equal(zb.view(F32, SHAPE), expected(x)[1])
    # moving the input back and forth: frozen after it settles
    model.nn_execute([xb], [y2, zb])
    assert model.default_context.stats["args_bytes"] == 0


def test_zero_copy_and_copy_paths_are_both_correct(model):
    x = np.random.default_rng(2).standard_normal(SHAPE).astype(np.float32)
    dev = model.device
    if dev.name == "cpu":
        ys = model.nn_execute([x])  # contiguous host arrays bind in place
        assert model.default_context.stats["zero_copy_inputs"] == 1
        xf = np.asfortranarray(x)  # not C-contiguous: copied into planned memory
        ys_f = model.nn_execute([xf])
        assert model.default_context.stats["copied_inputs"] == 1
    else:
        ys = model.nn_execute([x])  # host memory on a device: always a copy
        assert model.default_context.stats["copied_inputs"] == 1
        big = dev.buffer(x.nbytes + 1024)  # device memory, but misaligned: a D2D copy
        dev.memcpy_h2d(big.addr + 4, x)
        from ge.core.runtime.device import DeviceBuffer
        ys_f = model.nn_execute([DeviceBuffer(dev, big.addr + 4, x.nbytes)])
        s = model.default_context.stats
        assert s["copied_inputs"] == 1 and s["d2d_bytes"] == x.nbytes
    for a, b, want in zip(ys, ys_f, expected(x)):
        np.testing.assert_array_equal(a, want)
        np.testing.assert_array_equal(b, want)


def test_known_node_runs_through_v2_calls_alone_with_moving_memory():
    dev = get_device("sim")
    before = dev.in_use
    model = v2.davinci_model_create(chain_model(), dev)
    plan = model.ge_plan
    with pytest.raises(GeError, match="workspaces not set"):
        v2.davinci_model_execute(model)
    rng = np.random.default_rng(3)
    owned = []

    def alloc(n):
        owned.append(dev.malloc(n))
        return owned[-1]

    for run in range(3):  # caller-owned memory moves every run
        fm, ws = alloc(max(plan.fm_size, 1)), alloc(max(plan.workspace_size, 1))
        v2.davinci_model_update_workspaces(model, fm, ws)
        x = rng.standard_normal(SHAPE).astype(np.float32)
        xa, ya, za = alloc(x.nbytes), alloc(x.nbytes), alloc(x.nbytes)
        dev.memcpy_h2d(xa, x)
        cost = v2.davinci_model_execute(model, [xa], [ya, za])
        assert cost["full_refresh"]  # feature-map bases moved: ret_up = by_fm
        for addr, want in zip((ya, za), expected(x)):
            got = np.empty(SHAPE, np.float32)
            dev.memcpy_d2h(got, addr)
            np.testing.assert_array_equal(got, want)
    # same addresses again: nothing to refresh
    assert v2.davinci_model_execute(model, [xa], [ya, za])["args_bytes"] == 0
    assert model.default_context.args.base[FM_ID] == fm
    weight = model.ge_plan.tasks[0]  # 'add' reads w from WEIGHT memory: its address is resolvable
    w_addr = v2.davinci_model_get_run_address(model, "WEIGHT", 0)
    np.testing.assert_array_equal(dev.view(w_addr, np.float32, SHAPE), W)
    with pytest.raises(GeError, match="outside WEIGHT memory"):
        v2.davinci_model_get_run_address(model, "WEIGHT", 1 << 30)
    model.unload()
    for a in owned:
        dev.free(a)
    assert dev.in_use == before


def test_streams_are_reused_across_loads():
    dev = get_device("sim")
    mm = ModelManager()
    first = mm.load(chain_model(), "sim")
    mm.unload(first)
    reused = dev.counters["streams_reused"]
    second = mm.load(chain_model(), "sim")
    assert dev.counters["streams_reused"] == reused + 1
    mm.unload(second)


def test_synchronize_timeout_is_an_error_not_a_hang():
    dev = get_device("sim")
    stream = dev.acquire_stream()
    gate = threading.Event()
    stream.launch(gate.wait)
    with pytest.raises(DeviceError, match="timed out after 0.05 s"):
        stream.synchronize(timeout=0.05)
    gate.set()
    stream.synchronize(timeout=5)
    dev.release_stream(stream)


def test_events_order_two_streams():
    dev = get_device("sim")
    a, b = dev.acquire_stream(), dev.acquire_stream()
    gate, seen = threading.Event(), []
    a.launch(gate.wait)
    a.launch(lambda: seen.append("a"))
    done = Event(dev)
    done.record(a)
    done.wait(b)  # b's next work waits for a's
    b.launch(lambda: seen.append("b"))
    assert not done.fired
    gate.set()
    b.synchronize(timeout=5)
    assert seen == ["a", "b"] and done.fired
    dev.release_stream(a)
    dev.release_stream(b)


def test_shrink_drops_the_host_model(model):
    assert model.ge_model is None and "shrink" in model.timings


def test_the_same_input_array_again_is_frozen_and_read_fresh(model):
    """An input array passed again is not bound again (no args written) but is still what the
    kernels read: its new contents on cpu (bound in place), copied again on sim; a device buffer
    in between and the array after it land where they should."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(SHAPE).astype(np.float32)
    model.nn_execute([x])
    for _ in range(2):
        x[...] = rng.standard_normal(SHAPE).astype(np.float32)
        got = model.nn_execute([x])
        for g, want in zip(got, expected(x)):
            np.testing.assert_array_equal(g, want)
        s = model.default_context.stats
        assert s["args_bytes"] == 0 and s["views_rebuilt"] == 0
        assert (s["zero_copy_inputs"], s["h2d_count"]) == ((1, 0) if model.device.name == "cpu" else (0, 1))
    xb, outs = device_io(model, 2 * x)
    model.nn_execute([xb], outs)
    for g, want in zip(outs, expected(2 * x)):
        np.testing.assert_array_equal(g.view(F32, SHAPE), want)
    got = model.nn_execute([x])
    for g, want in zip(got, expected(x)):
        np.testing.assert_array_equal(g, want)


def test_arrays_passed_in_turn_reuse_the_tasks_calls_and_read_what_they_hold():
    """Input arrays changing from run to run: two pairs in turn are bound, and the task over them
    comes back to the binding (views and prepared native call) it kept for each; a pair new to the
    inputs is copied into the planned buffers. Each run reads what it is given as it is now (an
    array mutated in place included): a call kept for other arrays would give wrong results."""
    s = (3, 32, 32)  # a batch of products big enough for the native GEMM's prepared batch call
    g = Graph(name="mm", nodes=[Node("MatMul", ["a", "b"], ["y"], name="mm")], inputs=["a", "b"], outputs=["y"],
              values={n: Value(n, F32, s) for n in "aby"})
    rng = np.random.default_rng(4)
    pairs = [[rng.standard_normal(s).astype(np.float32) for _ in "ab"] for _ in range(2)]
    outs = [np.empty(s, np.float32) for _ in range(2)]
    for device in ("cpu", "sim"):
        mm = ModelManager()
        model_id = mm.load(build(g), device)
        model = mm.model(model_id)
        task, calls = model.default_context.handle[0], {}
        for turn, i in enumerate([0, 1, 0, 1, 0, 1, "new", 0]):
            if i == "new":
                a, b = (rng.standard_normal(s).astype(np.float32) for _ in "ab")
                y = model.nn_execute([a, b])[0]
                if device == "cpu":
                    assert model.default_context.stats["copied_inputs"] == 2
            else:
                a, b = pairs[i]
                if turn in (4, 7):
                    a[...] = rng.standard_normal(s)  # the same array, other contents
                model.nn_execute([a, b], [outs[i]])
                y = outs[i]
            np.testing.assert_allclose(y, a @ b, rtol=1e-5, atol=1e-5)
            if 2 <= turn <= 5 and device == "cpu":  # both pairs bound in place: their calls come back
                assert calls.setdefault(i, task.call) is task.call
        mm.unload(model_id)
