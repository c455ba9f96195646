"""The acl_net.py Net class, as users write it, against onnxruntime: in a child process with
PYTHONPATH=$(ge shim path) and in this process; static, fp16-input and dynamic-batch models."""
import numpy as np
import pytest

from .conftest import Models, run_script


@pytest.mark.parametrize("in_process", [False, True], ids=["subprocess", "in_process"])
def test_net_runs_a_static_model(models, tmp_path, in_process):
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    out = run_script("infer_net.py", models.static, tmp_path / "in.npz", tmp_path / "out.npz", in_process=in_process)
    assert out == ""  # the shim prints nothing on stdout
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x)):
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch", [1, 2, 4])
def test_net_dynamic_batch_through_mbatch_input(models, tmp_path, batch):
    x = np.random.default_rng(batch).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    run_script("infer_net.py", models.gears, tmp_path / "in.npz", tmp_path / "out.npz", batch, in_process=True)
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x)):
        assert got[f"arr_{k}"].shape == (batch, 5)  # get_cur_output_dims: the gear that ran
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-6)


def test_net_fp16_input(models, tmp_path):
    x = np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float16)
    np.savez(tmp_path / "in.npz", x=x)
    run_script("infer_net.py", models.fp16, tmp_path / "in.npz", tmp_path / "out.npz", in_process=True)
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x.astype(np.float32))):
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-5)
