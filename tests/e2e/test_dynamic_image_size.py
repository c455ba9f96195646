"""--dynamic_image_size gears (ATC) and --dymHW / aclmdlSetDynamicHWSize (run) on a small CNN:
one static plan per image size, each equal to onnxruntime."""
import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.model.errors import ShapeError

from .conftest import onnxruntime_outputs

SIZES = [(32, 32), (48, 64), (16, 24)]


@pytest.fixture(scope="module")
def cnn(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dym_hw")
    path = str(tmp / "cnn.onnx")
    model = samples.tiny_cnn()
    for dim, name in zip(model.graph.input[0].type.tensor_type.shape.dim[2:], ("h", "w")):
        dim.dim_param = name  # symbolic, so that onnxruntime takes every size as well
    del model.graph.value_info[:]
    onnx.save(model, path)
    result = api.atc(path, str(tmp / "cnn"), input_shape="image:1,3,-1,-1",
                     dynamic={"dynamic_image_size": ";".join(f"{h},{w}" for h, w in SIZES)})
    return path, result


def image(h, w, seed=0):
    return np.random.default_rng(seed + h * 1000 + w).standard_normal((1, 3, h, w)).astype(np.float32)


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_each_image_size_equals_onnxruntime(cnn, device):
    path, result = cnn
    assert result.model.attrs["gear_kind"] == "dynamic_image_size" and len(result.model.submodels) == len(SIZES)
    model_id = api.load_from_file(result.om_path, device)
    try:
        assert [g["values"] for g in api.gear_sizes(model_id)] == [list(s) for s in SIZES]
        for k, (h, w) in enumerate(SIZES + SIZES[:1]):  # picked by the input shape
            x = image(h, w)
            np.testing.assert_allclose(api.execute(model_id, {"image": x})[0],
                                       onnxruntime_outputs(path, {"image": x})[0], rtol=1e-4, atol=1e-5)
            assert api.model(model_id).last_gear == k % len(SIZES)
        assert api.set_dynamic_hw_size(model_id, 48, 64) == 1  # aclmdlSetDynamicHWSize
        x = image(48, 64, seed=1)
        np.testing.assert_allclose(api.execute(model_id, [x])[0], onnxruntime_outputs(path, {"image": x})[0],
                                   rtol=1e-4, atol=1e-5)
        with pytest.raises(ShapeError, match=r"no gear for image size 64,48; its gears \(dynamic_image_size\): "
                                             r"32,32; 48,64; 16,24"):
            api.set_dynamic_hw_size(model_id, 64, 48)
    finally:
        api.unload(model_id)


def test_no_gear_for_the_input_shape_lists_the_gears(cnn):
    model_id = api.load_from_file(cnn[1].om_path, "cpu")
    try:
        with pytest.raises(ShapeError, match=r"no gear matches the input shapes image:\[1, 3, 40, 40\]"):
            api.execute(model_id, {"image": image(40, 40)})
    finally:
        api.unload(model_id)


def test_cli_dym_hw_runs_the_gear_of_that_size(cnn, tmp_path):
    from click.testing import CliRunner

    from ge.cli.main import cli as main
    path, result = cnn
    x = image(16, 24, seed=2)
    np.save(tmp_path / "x.npy", x)
    runner = CliRunner()
    r = runner.invoke(main, ["run", "-m", result.om_path, "--dymHW", "16,24", "--input", str(tmp_path / "x.npy"),
                             "--output-dir", str(tmp_path / "out")])
    assert r.exit_code == 0, r.output
    out = next((tmp_path / "out").glob("*_output_0.npy"))
    np.testing.assert_allclose(np.load(out), onnxruntime_outputs(path, {"image": x})[0], rtol=1e-4, atol=1e-5)
    for bad, msg in (("16,16", "no gear for image size 16,16"), ("16x24", "--dymHW '16x24' is not H,W")):
        r = runner.invoke(main, ["run", "-m", result.om_path, "--dymHW", bad, "--output-dir", str(tmp_path / "o2")])
        assert r.exit_code == 1 and msg in r.output, r.output
