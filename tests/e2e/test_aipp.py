"""Static AIPP (--insert_op_conf): ge's compiled preprocessing equals the same preprocessing done by
hand in numpy and fed to onnxruntime on the original model; every bad config is refused naming it."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.model.errors import GeError
from ge.formats.aipp_config import parse_aipp_config

rng = np.random.default_rng(0)


def model_path(tmp_path, c=3, h=8, w=10, dtype=TensorProto.FLOAT):
    """y = Conv1x1(x) + x: every channel and pixel reaches the output, mixed."""
    wt = rng.standard_normal((c, c, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, h, w])],
                          [numpy_helper.from_array(wt, "w")])
    path = str(tmp_path / "m.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def run_ge(tmp_path, path, conf: str, raw: np.ndarray, device="cpu"):
    cfg = tmp_path / "aipp.cfg"
    cfg.write_text(conf)
    om = api.atc(path, str(tmp_path / "m"), insert_op_conf=str(cfg)).om_path
    model_id = api.load_from_file(om, device)
    try:
        desc = api.model(model_id).inputs[0]
        assert (desc.name, desc.dtype, tuple(desc.shape)) == ("x", "uint8", raw.shape)
        return api.execute(model_id, [raw])[0], om
    finally:
        api.unload(model_id)


def run_ort(path, x):
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def nv12_to_yuv444(raw, h, w):
    y = raw[:, :h].astype(np.float32)
    uv = raw[:, h:].reshape(raw.shape[0], h // 2, w // 2, 2).astype(np.float32)
    uv = uv.repeat(2, axis=1).repeat(2, axis=2)
    return np.concatenate([y[..., None], uv], axis=3)


JPEG_YUV2RGB = """
    csc_switch: true
    matrix_r0c0: 256
    matrix_r0c1: 0
    matrix_r0c2: 359
    matrix_r1c0: 256
    matrix_r1c1: -88
    matrix_r1c2: -183
    matrix_r2c0: 256
    matrix_r2c1: 454
    matrix_r2c2: 0
    input_bias_0: 0
    input_bias_1: 128
    input_bias_2: 128
"""


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_yuv420sp_with_csc_and_normalization(tmp_path, device):
    path = model_path(tmp_path)
    conf = f"""# a camera's NV12 frame to the model's normalized RGB
aipp_op {{
    aipp_mode: static
    input_format : YUV420SP_U8
    src_image_size_w : 10
    src_image_size_h : 8
{JPEG_YUV2RGB}
    mean_chn_0: 104
    mean_chn_1: 117
    mean_chn_2: 123
    min_chn_0: 0.5
    var_reci_chn_0: 0.0171
    var_reci_chn_1: 0.0175
    var_reci_chn_2: 0.0174
}}"""
    raw = rng.integers(0, 256, (1, 12, 10), dtype=np.uint8)
    got, _ = run_ge(tmp_path, path, conf, raw, device)
    yuv = nv12_to_yuv444(raw, 8, 10)
    m = np.array([[256, 0, 359], [256, -88, -183], [256, 454, 0]], np.float32)
    rgb = np.clip(np.floor((yuv - [0, 128, 128]) @ m.T / 256), 0, 255)
    x = ((rgb - [104.5, 117, 123]) * [0.0171, 0.0175, 0.0174]).astype(np.float32)
    np.testing.assert_allclose(got, run_ort(path, x.transpose(0, 3, 1, 2).copy()), rtol=1e-5, atol=1e-5)


def test_rgb888_crop_swap_and_padding(tmp_path):
    path = model_path(tmp_path, h=8, w=10)
    conf = """aipp_op {
    aipp_mode: static
    input_format: RGB888_U8
    src_image_size_w: 16
    src_image_size_h: 12
    crop: true
    load_start_pos_w: 3
    load_start_pos_h: 2
    crop_size_w: 7
    crop_size_h: 6
    rbuv_swap_switch: true
    padding: true
    left_padding_size: 1
    right_padding_size: 2
    top_padding_size: 2
    bottom_padding_size: 0
    padding_value: -1.5
    var_reci_chn_1: 0.5
}"""
    raw = rng.integers(0, 256, (1, 12, 16, 3), dtype=np.uint8)
    got, om = run_ge(tmp_path, path, conf, raw)
    x = raw[:, 2:8, 3:10, ::-1].astype(np.float32) * [1, 0.5, 1]
    x = np.pad(x.transpose(0, 3, 1, 2), ((0, 0), (0, 0), (2, 0), (1, 2)), constant_values=-1.5).astype(np.float32)
    np.testing.assert_allclose(got, run_ort(path, x), rtol=1e-5, atol=1e-5)
    (record,) = api.inspect(om)["aipp"]
    assert record["input"] == "x" and record["raw_shape"] == [1, 12, 16, 3] and record["crop_size_w"] == 7


@pytest.mark.parametrize("ax_swap", [False, True])
def test_xrgb8888_and_yuv400(tmp_path, ax_swap):
    path = model_path(tmp_path)
    raw = rng.integers(0, 256, (1, 8, 10, 4), dtype=np.uint8)
    conf = f"aipp_op {{ aipp_mode: static input_format: XRGB8888_U8 ax_swap_switch: {str(ax_swap).lower()} }}"
    got, _ = run_ge(tmp_path, path, conf, raw)
    x = raw[..., :3] if ax_swap else raw[..., 1:]
    np.testing.assert_allclose(got, run_ort(path, x.transpose(0, 3, 1, 2).astype(np.float32)), rtol=1e-5, atol=1e-5)
    gray = model_path(tmp_path, c=1)
    raw = rng.integers(0, 256, (1, 8, 10, 1), dtype=np.uint8)
    got, _ = run_ge(tmp_path, gray, "aipp_op { input_format: YUV400_U8 mean_chn_0: 128 }", raw)
    np.testing.assert_allclose(got, run_ort(gray, raw.transpose(0, 3, 1, 2).astype(np.float32) - 128), atol=1e-5)


@pytest.mark.parametrize("text,match", [
    ("aipp_op { aipp_mode: dynamic input_format: RGB888_U8 }", "input_format is given at run time in dynamic AIPP"),
    ("aipp_op { aipp_mode: dynamic }", "dynamic AIPP needs max_src_image_size"),
    ("aipp_op { aipp_mode: dynamc }", "'dynamc' is not an AIPP mode"),
    ("aipp_op { input_format: RGB888_U8 max_src_image_size: 9 }", "max_src_image_size belongs to dynamic AIPP"),
    ("aipp_op { input_format: RAW10 }", "'RAW10' is not supported by ge"),
    ("aipp_op { input_format: BMP }", "'BMP' is not an AIPP input format"),
    ("aipp_op { input_format: RGB888_U8 crop_colour: 3 }", "crop_colour: unknown AIPP field"),
    ("aipp_op { input_format: RGB888_U8 resize: true }", "resize: ge does not implement AIPP resize"),
    ("aipp_op { input_format: RGB888_U8 matrix_r0c0: x }", "matrix_r0c0: 'x' is not an integer"),
    ("aipp_op { input_format: RGB888_U8 crop: maybe }", "crop: 'maybe' is not true or false"),
    ("aipp_op { csc_switch: true }", "input_format is required"),
    ("aipp_op { input_format: RGB888_U8 ", "is not closed"),
    ("input_format: RGB888_U8", "fields belong inside an 'aipp_op"),
    ("", "no aipp_op block"),
    ("aipp_op { input_format: YUV420SP_U8 crop: true load_start_pos_w: 3 }", "must be even"),
    ("aipp_op { input_format: RGB888_U8 left_padding_size: 2 }", "padding sizes are given but padding is false"),
    ("aipp_op { input_format: RGB888_U8 } aipp_op { input_format: RGB888_U8 }", "two aipp_op blocks for input 0"),
])
def test_bad_configs_are_refused_naming_the_field(text, match):
    with pytest.raises(GeError, match=match):
        parse_aipp_config(text, "aipp.cfg")


@pytest.mark.parametrize("conf,match", [
    ("aipp_op { input_format: RGB888_U8 src_image_size_w: 12 }", "source image 12x8 .* does not make the model's 10x8"),
    ("aipp_op { input_format: YUV400_U8 }", "YUV400_U8 gives 1 channel\\(s\\), the model's input has 3"),
    ("aipp_op { input_format: RGB888_U8 related_input_rank: 1 }", "related_input_rank 1, but the model has 1"),
    ("aipp_op { input_format: RGB888_U8 crop: true src_image_size_w: 12 src_image_size_h: 8 load_start_pos_w: 4 }",
     "leaves the source image"),
])
def test_configs_that_do_not_fit_the_model_write_nothing(tmp_path, conf, match):
    path = model_path(tmp_path)
    (tmp_path / "aipp.cfg").write_text(conf)
    with pytest.raises(GeError, match=match):
        api.atc(path, str(tmp_path / "m"), insert_op_conf=str(tmp_path / "aipp.cfg"))
    assert not (tmp_path / "m.om").exists()


def test_inspect_shows_the_aipp(tmp_path, capsys):
    from ge.cli.main import main
    path = model_path(tmp_path)
    (tmp_path / "aipp.cfg").write_text("aipp_op { input_format: RGB888_U8 rbuv_swap_switch: true }")
    om = api.atc(path, str(tmp_path / "m"), insert_op_conf=str(tmp_path / "aipp.cfg")).om_path
    with pytest.raises(SystemExit) as e:
        main(["inspect", om])
    assert e.value.code == 0
    assert "AIPP on input 'x' (static): RGB888_U8 uint8 [1, 8, 10, 3] -> [1, 3, 8, 10], channel swap" in capsys.readouterr().out


# -- AIPP on gear models: ATC applies static AIPP per gear, the raw image of each gear's batch and size --------
def gear_model_path(tmp_path, c=3):
    """model_path's Conv + Add with a free batch and image size."""
    wt = rng.standard_normal((c, c, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node("Add", ["c", "x"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, "h", "w"])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", c, "h", "w"])],
                          [numpy_helper.from_array(wt, "w")])
    path = str(tmp_path / "g.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


NORMALIZE = "aipp_op { input_format: RGB888_U8 rbuv_swap_switch: true mean_chn_0: 100 var_reci_chn_2: 0.5 }"


def preprocessed(raw):
    return ((raw[..., ::-1].astype(np.float32) - [100, 0, 0]) * [1, 1, 0.5]).transpose(0, 3, 1, 2).astype(np.float32)


def test_static_aipp_per_batch_gear(tmp_path, capsys):
    path = gear_model_path(tmp_path)
    (tmp_path / "aipp.cfg").write_text(NORMALIZE)
    om = api.atc(path, str(tmp_path / "m"), input_shape="x:-1,3,8,10", dynamic_batch_size="1,2,4",
                 insert_op_conf=str(tmp_path / "aipp.cfg")).om_path
    model_id = api.load_from_file(om)
    try:
        desc = api.model(model_id).inputs[0]
        assert (desc.name, desc.dtype, tuple(desc.shape)) == ("x", "uint8", (-1, 8, 10, 3))
        for batch in (4, 1, 2):
            raw = rng.integers(0, 256, (batch, 8, 10, 3), dtype=np.uint8)
            api.set_dynamic_batch_size(model_id, batch)
            got = api.execute(model_id, [raw])[0]
            np.testing.assert_allclose(got, run_ort(path, preprocessed(raw)), rtol=1e-5, atol=1e-5)
    finally:
        api.unload(model_id)
    data = api.inspect(om)
    assert [m["aipp"][0]["raw_shape"] for m in data["submodels"]] == [[1, 8, 10, 3], [2, 8, 10, 3], [4, 8, 10, 3]]
    from ge.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["inspect", om, "--section", "io"])  # each gear's inputs, outputs and AIPP; no header
    out = capsys.readouterr().out
    assert e.value.code == 0 and "Header" not in out and "submodel 2" in out
    assert "AIPP on input 'x' (static): RGB888_U8 uint8 [4, 8, 10, 3] -> [4, 3, 8, 10], channel swap" in out


def test_static_aipp_per_image_size_gear_yuv420sp(tmp_path):
    path = gear_model_path(tmp_path)
    (tmp_path / "aipp.cfg").write_text(f"aipp_op {{ input_format: YUV420SP_U8 {JPEG_YUV2RGB} }}")
    om = api.atc(path, str(tmp_path / "m"), input_shape="x:1,3,-1,-1", dynamic_image_size="8,10;4,6",
                 insert_op_conf=str(tmp_path / "aipp.cfg")).om_path
    model_id = api.load_from_file(om)
    try:
        for h, w in ((4, 6), (8, 10)):
            raw = rng.integers(0, 256, (1, h * 3 // 2, w), dtype=np.uint8)
            api.set_dynamic_hw_size(model_id, h, w)
            got = api.execute(model_id, [raw])[0]
            yuv = nv12_to_yuv444(raw, h, w) - [0, 128, 128]
            m = np.array([[256, 0, 359], [256, -88, -183], [256, 454, 0]], np.float32)
            rgb = np.clip(np.floor(yuv @ m.T / 256), 0, 255).astype(np.float32)
            np.testing.assert_allclose(got, run_ort(path, rgb.transpose(0, 3, 1, 2).copy()), rtol=1e-5, atol=1e-4)
    finally:
        api.unload(model_id)


@pytest.mark.parametrize("shape,gears,conf,match", [
    ("x:1,3,-1,-1", {"dynamic_image_size": "8,10;4,6"},
     "aipp_op { input_format: RGB888_U8 src_image_size_w: 10 src_image_size_h: 8 }",
     r"source image 10x8 .* does not make the model's 6x4 .*\(gear \[4, 6\]\)"),
    ("x:1~4,3,8,10", {}, NORMALIZE, "AIPP takes static shapes or gears"),
])
def test_aipp_that_does_not_fit_a_gear_or_a_range_is_refused(tmp_path, shape, gears, conf, match):
    path = gear_model_path(tmp_path)
    (tmp_path / "aipp.cfg").write_text(conf)
    with pytest.raises(GeError, match=match):
        api.atc(path, str(tmp_path / "m"), input_shape=shape, insert_op_conf=str(tmp_path / "aipp.cfg"), **gears)
    assert not (tmp_path / "m.om").exists()
