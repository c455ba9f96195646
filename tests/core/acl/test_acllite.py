"""An acllite-style AclLiteResource / AclLiteModel pair (a small copy of acllite's structure, as
users copy it next to their code) on ge, against onnxruntime."""
import numpy as np
import pytest

from .conftest import Models, run_script


@pytest.mark.parametrize("load_type", [0, 1], ids=["load_from_file", "load_from_mem"])
def test_acllite_static_model(models, tmp_path, load_type):
    x = np.random.default_rng(5).standard_normal((1, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    run_script("infer_acllite.py", models.static, tmp_path / "in.npz", tmp_path / "out.npz", "-", load_type,
               in_process=True)
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x)):
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("in_process", [False, True], ids=["subprocess", "in_process"])
def test_acllite_dynamic_batch(models, tmp_path, in_process):
    x = np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    run_script("infer_acllite.py", models.gears, tmp_path / "in.npz", tmp_path / "out.npz", 2, in_process=in_process)
    got = np.load(tmp_path / "out.npz")
    for k, want in enumerate(Models.conv(x)):
        np.testing.assert_allclose(got[f"arr_{k}"], want, rtol=1e-5, atol=1e-6)
