"""execute_async, memcpy_async and callbacks on a stream; two devices and threads with their own
contexts; the simulated NPU (GE_ACL_DEVICE=sim): each against onnxruntime."""
import numpy as np
import pytest

from ge.core.runtime.device import get_device

from .conftest import Models, run_script


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
