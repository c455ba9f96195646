"""Hugging Face's EfficientNet head: AvgPool2d(kernel_size=hidden_dim, ceil_mode=True) -- a kernel
(and stride) of 320 over the last feature map, 2x2 or 7x7, one output: the mean of the map, as
onnxruntime and PyTorch give it. Compiled static (`ge atc`) and with unknown batch and image dims
(`ge run` shapes it at run time), through the CLI's files as through the API."""
import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ge.cli.main import cli as main
from ge.core import api

from .conftest import onnxruntime_outputs


def _efficientnet_head(channels=16, classes=10, kernel=320):
    """A stride-2 stem conv with SiLU, a 1x1 expansion, the pooler, Flatten and the classifier."""
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("Conv", ["pixel_values", "stem"], ["c0"], kernel_shape=[3, 3], strides=[2, 2],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["c0"], ["g0"]), helper.make_node("Mul", ["c0", "g0"], ["a0"]),
             helper.make_node("Conv", ["a0", "expand"], ["c1"], kernel_shape=[1, 1]),
             helper.make_node("Sigmoid", ["c1"], ["g1"]), helper.make_node("Mul", ["c1", "g1"], ["a1"]),
             helper.make_node("AveragePool", ["a1"], ["pooled"], kernel_shape=[kernel, kernel],
                              strides=[kernel, kernel], ceil_mode=1, name="/pooler/AveragePool"),
             helper.make_node("Flatten", ["pooled"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc", "fc_b"], ["logits"], transB=1)]
    inits = [numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "stem"),
             numpy_helper.from_array((rng.standard_normal((channels, 8, 1, 1)) * 0.3).astype(np.float32), "expand"),
             numpy_helper.from_array(rng.standard_normal((classes, channels)).astype(np.float32), "fc"),
             numpy_helper.from_array(rng.standard_normal(classes).astype(np.float32), "fc_b")]
    graph = helper.make_graph(nodes, "efficientnet_head",
                              [helper.make_tensor_value_info("pixel_values", T.FLOAT, ["batch", 3, "height", "width"])],
                              [helper.make_tensor_value_info("logits", T.FLOAT, ["batch", classes])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def model_path(tmp_path):
    path = str(tmp_path / "effnet.onnx")
    onnx.save(_efficientnet_head(), path)
    return path


def _images(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("image", [4, 14])  # feature maps of 2x2 and 7x7
@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_static_compile_pools_the_whole_map(model_path, tmp_path, image, device):
    result = api.atc(model_path, str(tmp_path / "static"), input_shape=f"pixel_values:2,3,{image},{image}")
    x = _images((2, 3, image, image))
    model_id = api.load_from_file(result.om_path, device)
    try:
        (got,) = api.execute(model_id, {"pixel_values": x})
    finally:
        api.unload(model_id)
    (expected,) = onnxruntime_outputs(model_path, {"pixel_values": x})
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_dynamic_batch_and_image_pool_at_run_time(model_path, tmp_path):
    result = api.atc(model_path, str(tmp_path / "dynamic"), input_shape="pixel_values:-1,3,-1,-1")
    model_id = api.load_from_file(result.om_path, "cpu")
    try:
        for k, shape in enumerate([(1, 3, 4, 4), (3, 3, 14, 14), (2, 3, 13, 9), (1, 3, 1, 1)]):
            x = _images(shape, seed=k)
            (got,) = api.execute(model_id, {"pixel_values": x})
            (expected,) = onnxruntime_outputs(model_path, {"pixel_values": x})
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5, err_msg=str(shape))
    finally:
        api.unload(model_id)


def test_cli_atc_static_and_run_dynamic(model_path, tmp_path):
    runner = CliRunner()
    static, dynamic = str(tmp_path / "s"), str(tmp_path / "d")
    r = runner.invoke(main, ["atc", "--model", model_path, "--framework", "5", "--output", static,
                             "--input_shape", "pixel_values:1,3,14,14"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["atc", "--model", model_path, "--framework", "5", "--output", dynamic,
                             "--input_shape", "pixel_values:-1,3,-1,-1"])
    assert r.exit_code == 0, r.output
    x = _images((1, 3, 14, 14))
    np.save(tmp_path / "x.npy", x)
    (expected,) = onnxruntime_outputs(model_path, {"pixel_values": x})
    for om, out in ((static, "out_s"), (dynamic, "out_d")):
        r = runner.invoke(main, ["run", "-m", om + ".om", "--input", str(tmp_path / "x.npy"),
                                 "--output-dir", str(tmp_path / out)])
        assert r.exit_code == 0, r.output
        (path,) = (tmp_path / out).glob("*.npy")
        np.testing.assert_allclose(np.load(path), expected, rtol=1e-4, atol=1e-5)
