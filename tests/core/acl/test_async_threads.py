"""execute_async, memcpy_async and callbacks on a stream; two devices and threads with their own
contexts; one model run from two threads at once, and unload waiting for a run; the simulated NPU (GE_ACL_DEVICE=sim): each against onnxruntime."""
import threading

import numpy as np
import pytest

from ge.core.acl import pyacl as acl
from ge.core.acl import models as api_acl
from ge.core.runtime.device import get_device

from .conftest import Models, ready_datasets, run_script


def _samples(n, seed):
    return np.random.default_rng(seed).standard_normal((n, 1, 3, 8, 8)).astype(np.float32)


@pytest.mark.parametrize("in_process", [False, True], ids=["subprocess", "in_process"])
def test_execute_async_with_callbacks(models, tmp_path, in_process):
    x = _samples(4, 7)
    np.savez(tmp_path / "in.npz", x=x)
    run_script("infer_async.py", models.static, tmp_path / "in.npz", tmp_path / "out.npy", in_process=in_process)
    got = np.load(tmp_path / "out.npy")
    for i in range(4):  # each callback saw its own execute's result: the stream kept the order
        np.testing.assert_allclose(got[i], Models.conv(x[i])[0], rtol=1e-5, atol=1e-6)


def test_two_devices_and_threads(models, tmp_path):
    x = _samples(3, 8)
    np.savez(tmp_path / "in.npz", x=x)
    before = get_device("cpu:1").counters["mallocs"]
    run_script("infer_threads.py", models.static, tmp_path / "in.npz", tmp_path / "out.npy", in_process=True)
    assert get_device("cpu:1").counters["mallocs"] > before  # device 1 is a device of its own
    got = np.load(tmp_path / "out.npy")
    for i in range(3):
        np.testing.assert_allclose(got[i], Models.conv(x[i])[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("script", ["infer_net.py", "infer_acllite.py"])
def test_on_the_simulated_npu(models, tmp_path, monkeypatch, script):
    x = np.random.default_rng(9).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    monkeypatch.setenv("GE_ACL_DEVICE", "sim")
    sim = get_device("sim:0")
    h2d = sim.counters["h2d_count"]
    run_script(script, models.gears, tmp_path / "in.npz", tmp_path / "out.npz", 2, in_process=True)
    assert sim.counters["h2d_count"] > h2d  # the inputs went to the simulated NPU's memory
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x)):
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-6)


def _run_in_threads(n, work):
    errors, threads = [], []
    for i in range(n):
        def body(i=i):
            try:
                work(i)
            except BaseException as e:  # reported on the test's thread
                errors.append(e)
        threads.append(threading.Thread(target=body))
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_one_static_model_runs_from_two_threads_at_once(device, models, monkeypatch):
    """Two threads execute one static model at the same time (each on a ge context of its own): a
    barrier inside execute passes only if both runs are under way together; both outputs are right."""
    model_id, ret = acl.mdl.load_from_file(models.static)
    assert ret == 0
    barrier, real = threading.Barrier(2, timeout=30), api_acl.model_manager.execute

    def meeting(*args, **kwargs):
        barrier.wait()  # raises BrokenBarrierError (an execute error) when the runs take turns
        return real(*args, **kwargs)
    monkeypatch.setattr(api_acl.model_manager, "execute", meeting)
    xs = _samples(2, 21)
    got = [None, None]

    def work(i):
        acl.rt.set_context(ctx)
        _, _, in_ds, out_ds, (x_ptr,), (y_ptr, _) = ready_datasets(model_id)
        assert acl.rt.memcpy(x_ptr, xs[i].nbytes, acl.util.numpy_to_ptr(xs[i]), xs[i].nbytes, 1) == 0
        assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
        y = np.empty((1, 5), np.float32)
        assert acl.rt.memcpy(acl.util.numpy_to_ptr(y), y.nbytes, y_ptr, y.nbytes, 2) == 0
        got[i] = y
    ctx, _ = acl.rt.get_context()
    _run_in_threads(2, work)
    for i in range(2):
        np.testing.assert_allclose(got[i], Models.conv(xs[i])[0], rtol=1e-5, atol=1e-6)
    assert acl.mdl.unload(model_id) == 0


def test_unload_waits_for_the_run_under_way(device, models, monkeypatch):
    model_id, _ = acl.mdl.load_from_file(models.static)
    _, _, in_ds, out_ds, _, _ = ready_datasets(model_id)
    started, release, real = threading.Event(), threading.Event(), api_acl.model_manager.execute

    def slow(*args, **kwargs):
        started.set()
        release.wait(30)
        return real(*args, **kwargs)
    monkeypatch.setattr(api_acl.model_manager, "execute", slow)
    ctx, _ = acl.rt.get_context()
    codes = {}

    def run(_):
        acl.rt.set_context(ctx)
        codes["execute"] = acl.mdl.execute(model_id, in_ds, out_ds)

    runner = threading.Thread(target=run, args=(0,))
    runner.start()
    assert started.wait(30)
    unloader = threading.Thread(target=lambda: codes.__setitem__("unload", acl.mdl.unload(model_id)))
    unloader.start()
    unloader.join(0.5)
    assert unloader.is_alive() and "unload" not in codes  # waiting for the run
    release.set()
    runner.join(30)
    unloader.join(30)
    assert codes == {"execute": 0, "unload": 0}
    assert acl.mdl.execute(model_id, in_ds, out_ds) != 0  # unloaded: a code, not a crash

