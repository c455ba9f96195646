"""Scalars stay scalars end to end: a 0-d input (Clip's min and max) and a 0-d initializer keep
shape [] from `.npy`, `.npz`, `.bin` and the API, on both devices, and the result matches
onnxruntime."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api


@pytest.fixture(scope="module")
def clip_model(tmp_path_factory):
    """y = Clip(x, lo, hi) * k, with lo and hi 0-d inputs and k a 0-d initializer."""
    d = tmp_path_factory.mktemp("scalar")
    graph = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]), helper.make_node("Mul", ["c", "k"], ["y"])], "scalars",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("hi", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(3.0, np.float32), "k")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = str(d / "clip.onnx")
    onnx.save(model, path)
    return path


X = np.array([[-2.0, -0.5, 0.0], [0.25, 1.5, 4.0]], np.float32)
LO, HI = np.array(-1.0, np.float32), np.array(1.0, np.float32)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_scalar_inputs_from_files_and_the_api(ge, clip_model, tmp_path, ort_run, device):
    expected = ort_run(clip_model, {"x": X, "lo": LO, "hi": HI})[0]
    ge("atc", "--model", clip_model, "--output", tmp_path / "clip", ok=True)
    om = str(tmp_path / "clip.om")
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "lo.npy", LO)
    np.savez(tmp_path / "hi.npz", hi=HI)
    HI.tofile(tmp_path / "hi.bin")
    for hi in ("hi.npz", "hi.bin"):
        out = tmp_path / f"out_{hi}"
        files = ",".join(str(tmp_path / f) for f in ("x.npy", "lo.npy", hi))
        ge("run", "--model", om, "--input", files, "--output-dir", out, "--device", device, ok=True)
        np.testing.assert_allclose(np.load(out / "clip_output_0.npy"), expected, rtol=1e-6)

    model_id = api.load_from_file(om, device)
    try:
        assert [list(d.shape) for d in api.model(model_id).inputs] == [[2, 3], [], []]
        for lo, hi in ((LO, HI), (np.float32(-1.0), np.float32(1.0))):  # 0-d arrays and numpy scalars
            y, = api.execute(model_id, [X, lo, hi])
            np.testing.assert_allclose(y, expected, rtol=1e-6)
    finally:
        api.unload(model_id)


def test_a_one_element_vector_is_not_a_scalar(ge, clip_model, tmp_path):
    ge("atc", "--model", clip_model, "--output", tmp_path / "clip", ok=True)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "lo.npy", LO.reshape(1))
    np.save(tmp_path / "hi.npy", HI)
    files = ",".join(str(tmp_path / f) for f in ("x.npy", "lo.npy", "hi.npy"))
    r = ge("run", "--model", tmp_path / "clip.om", "--input", files, "--output-dir", tmp_path / "out")
    assert r.exit_code != 0
    assert "input 'lo'" in r.stderr and "shape [1] does not match the model's []" in r.stderr
