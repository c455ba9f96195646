"""Dynamic AIPP (aipp_mode: dynamic): the parameters come at run time through the
ascend_dynamic_aipp_data input. With parameters P, the dynamic model's outputs equal, bit for bit,
those of the same model compiled with static AIPP of P (whose transform test_aipp.py checks against
numpy + onnxruntime); per batch index P may differ. Given through ge's API, pyACL as users write it,
ge run and python -m ais_bench; bad parameters give a GeError naming the input or an ACL code."""
import numpy as np
import pytest

from ge.core import api
from ge.core.acl import pyacl as acl
from ge.core.acl.aipp import dynamic_aipp_data, read_aipp_params
from ge.core.acl.inference import select_gear
from ge.core.kernels.ops.aipp import transform
from ge.core.model.aipp_params import AippParams, ImageParams, params_nbytes
from ge.core.model.errors import GeError

from tests.core.acl import conftest as acl_conftest
from .test_aipp import JPEG_YUV2RGB, model_path

N, H, W = 2, 4, 6
MAX_SRC = 8 * 6 * 3  # an 8x6 RGB888 image
rng = np.random.default_rng(3)


@pytest.fixture(scope="module")
def dyn(tmp_path_factory):
    """The dynamic-AIPP OM of a batch-2 model, and the path of its ONNX."""
    tmp = tmp_path_factory.mktemp("dyn_aipp")
    path = model_path(tmp, h=H, w=W)
    _set_batch(path, N)
    cfg = tmp / "dyn.cfg"
    cfg.write_text(f"aipp_op {{\n  aipp_mode: dynamic\n  related_input_rank: 0\n  max_src_image_size: {MAX_SRC}\n}}\n")
    return api.atc(path, str(tmp / "dyn"), insert_op_conf=str(cfg)).om_path, path, tmp


def _set_batch(path, n):
    import onnx
    m = onnx.load(path)
    for v in (*m.graph.input, *m.graph.output):
        v.type.tensor_type.shape.dim[0].dim_value = n
    onnx.save(m, path)


@pytest.mark.parametrize("m", [[[66, 129, 25], [-38, -74, 112], [112, -94, -18]],  # float32 holds its sums
                               [[32000, -32000, 32000], [-32000, 32000, 31999], [1, 2, 3]]])  # it does not
def test_csc_is_the_units_integer_arithmetic(m):
    """CSC as ATC's formula in integers: ((M x) >> 8) + output_bias, saturated (RGB -> YUV here)."""
    img = rng.integers(0, 256, (5, 4, 3), dtype=np.uint8)
    p = AippParams("RGB888_U8", (4, 5), True, m, output_bias=(16, 128, 128), images=[ImageParams()])
    want = np.clip(((img.astype(np.int64) @ np.array(m).T) >> 8) + [16, 128, 128], 0, 255).transpose(2, 0, 1)
    assert 0 < want.mean() < 255
    np.testing.assert_array_equal(transform(img.reshape(-1), p, p.images[0], 3, np.dtype(np.float32)), want)


@pytest.fixture(scope="module")
def gears(dyn):
    """The same model with batch gears 1 and 2: one parameter input for both (the largest batch's)."""
    _, path, tmp = dyn
    return api.atc(path, str(tmp / "gears"), input_shape=f"x:-1,3,{H},{W}", dynamic_batch_size="1,2",
                   insert_op_conf=str(tmp / "dyn.cfg")).om_path


def test_batch_gears_read_the_first_images_parameters(dyn, gears):
    """Gear b runs the first b images' parameters (ACL's AIPP set holds the largest batch); each
    image equals the static build of its parameters."""
    _, path, tmp = dyn
    img = rng.integers(0, 256, (N, 6, 8, 3), dtype=np.uint8)
    crops = [(2, 1, 3), (0, 2, 10)]
    want = np.stack([static_run(tmp, path, RGB_CROP.format(x=x, y=y, m=m), img)[b] for b, (x, y, m) in enumerate(crops)])
    model_id = api.load_from_file(gears)
    try:
        assert [(d.name, tuple(d.shape)) for d in api.model(model_id).inputs] == \
            [("x", (-1, MAX_SRC)), ("ascend_dynamic_aipp_data", (params_nbytes(N),))]
        params = dynamic_aipp_data(model_id, rgb_params(crops))
        raw = np.zeros((N, MAX_SRC), np.uint8)
        raw.reshape(-1)[:img.size] = img.reshape(-1)
        np.testing.assert_array_equal(api.execute(model_id, [raw, params])[0], want)
        one = np.zeros((1, MAX_SRC), np.uint8)
        one.reshape(-1)[:img[0].size] = img[0].reshape(-1)
        np.testing.assert_array_equal(api.execute(model_id, [one, params])[0], want[:1])
        with pytest.raises(GeError, match=r"parameters for 1 image\(s\), the model's batch is 2 \(its largest "
                                          r"gear's: ACL's AIPP set takes the largest batch\)"):
            dynamic_aipp_data(model_id, rgb_params(crops[:1]))
    finally:
        api.unload(model_id)
    for k, sub in enumerate(api.inspect(gears)["submodels"]):  # each gear: its batch, the one parameter input
        (a,) = sub["aipp"]
        assert (a["mode"], a["raw_shape"], a["params_batch"]) == ("dynamic", [k + 1, MAX_SRC], N)


def test_pyacl_runs_a_batch_gear_with_dynamic_aipp(device, dyn, gears):
    _, path, tmp = dyn
    img = rng.integers(0, 256, (1, 6, 8, 3), dtype=np.uint8)
    crops = [(1, 0, 0), (2, 2, 255)]
    want = static_run(tmp, path, RGB_CROP.format(x=1, y=0, m=0), np.concatenate([img, img]))[:1]
    model_id, desc, in_ds, out_ds, in_ptrs, out_ptrs = acl_conftest.ready_model(gears)
    data = img.tobytes()
    assert acl.rt.memcpy(in_ptrs[0], len(data), acl.util.bytes_to_ptr(data), len(data), H2D) == 0
    aipp_set = acl.mdl.create_aipp(N)  # the largest batch, as ACL asks
    _set_rgb(aipp_set, crops)
    index, _ = acl.mdl.get_input_index_by_name(desc, "ascend_dynamic_aipp_data")
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, aipp_set) == 0
    gear_index, _ = acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")
    assert acl.mdl.set_dynamic_batch_size(model_id, in_ds, gear_index, 1) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    size = 3 * H * W * 4
    host, _ = acl.rt.malloc_host(size)
    assert acl.rt.memcpy(host, size, out_ptrs[0], size, D2H) == 0
    np.testing.assert_array_equal(acl.util.ptr_to_numpy(host, (1, 3, H, W), 11), want)
    assert acl.mdl.destroy_aipp(aipp_set) == 0 and acl.mdl.unload(model_id) == 0


def test_image_size_gears_take_parameters_that_fit_the_gear_run(dyn):
    """--dynamic_image_size with dynamic AIPP: the parameters fit one gear's image (set before the gear
    is known: any gear's), the gear that runs checks its own."""
    _, path, tmp = dyn
    om = api.atc(path, str(tmp / "hw"), input_shape=f"x:{N},3,-1,-1", dynamic_image_size=f"{H},{W};6,8",
                 insert_op_conf=str(tmp / "dyn.cfg")).om_path
    img = rng.integers(0, 256, (N, 6, 8, 3), dtype=np.uint8)
    raw = np.zeros((N, MAX_SRC), np.uint8)
    raw.reshape(-1)[:img.size] = img.reshape(-1)
    whole = AippParams("RGB888_U8", (8, 6), images=[ImageParams(mean=(5, 6, 7, 0))] * N)  # the 8x6 gear's
    static_cfg = tmp / "whole.cfg"
    static_cfg.write_text("aipp_op {\n  input_format: RGB888_U8\n  src_image_size_w: 8\n  src_image_size_h: 6\n"
                          "  mean_chn_0: 5\n  mean_chn_1: 6\n  mean_chn_2: 7\n}\n")
    static = api.atc(path, str(tmp / "whole"), input_shape=f"x:{N},3,6,8", insert_op_conf=str(static_cfg)).om_path
    static_id, model_id = api.load_from_file(static), api.load_from_file(om)
    try:
        want_whole = api.execute(static_id, [img])[0]
        want_crop = static_run(tmp, path, RGB_CROP.format(x=2, y=1, m=3), img)
        crop = dynamic_aipp_data(model_id, rgb_params([(2, 1, 3)] * N))
        params = dynamic_aipp_data(model_id, whole)
        select_gear(model_id, hw="6,8")
        np.testing.assert_array_equal(api.execute(model_id, [raw, params])[0], want_whole)
        with pytest.raises(GeError, match=r"dynamic AIPP of input 'x'|AIPP of input 'x': crop 6x4 plus padding"):
            api.execute(model_id, [raw, crop])  # the 4x6 gear's parameters on the 8x6 gear
        select_gear(model_id, hw=f"{H},{W}")
        np.testing.assert_array_equal(api.execute(model_id, [raw, crop])[0], want_crop)
        with pytest.raises(GeError, match=r"the parameters fit none of the gears' images: 4x6: crop 5x5"):
            dynamic_aipp_data(model_id, AippParams("RGB888_U8", (8, 6), images=[ImageParams(True, (0, 0), (5, 5))] * N))
    finally:
        api.unload(model_id)
        api.unload(static_id)


def static_run(tmp, path, conf: str, raw: np.ndarray) -> np.ndarray:
    """The model compiled with static AIPP of `conf`, run on the raw images."""
    cfg = tmp / "static.cfg"
    cfg.write_text(f"aipp_op {{\n{conf}\n}}\n")
    om = api.atc(path, str(tmp / "static"), insert_op_conf=str(cfg)).om_path
    model_id = api.load_from_file(om)
    try:
        return api.execute(model_id, [raw])[0]
    finally:
        api.unload(model_id)


RGB_CROP = """  input_format: RGB888_U8
  src_image_size_w: 8
  src_image_size_h: 6
  crop: true
  load_start_pos_w: {x}
  load_start_pos_h: {y}
  crop_size_w: 6
  crop_size_h: 4
  rbuv_swap_switch: true
  mean_chn_0: {m}
  mean_chn_1: 7
  min_chn_2: 0.5
  var_reci_chn_0: 0.25
  var_reci_chn_1: 2.0"""


def rgb_params(crops) -> AippParams:
    """RGB_CROP's settings, crop position and mean_chn_0 per batch index."""
    return AippParams("RGB888_U8", (8, 6), rbuv_swap_switch=True, images=[
        ImageParams(True, (x, y), (6, 4), mean=(m, 7, 0, 0), min=(0, 0, 0.5, 0), var_reci=(0.25, 2.0, 1, 1))
        for x, y, m in crops])


def test_inspect_and_io(dyn, capsys):
    om, _, _ = dyn
    model_id = api.load_from_file(om)
    try:
        ins = [(d.name, d.dtype, tuple(d.shape)) for d in api.model(model_id).inputs]
        assert ins == [("x", "uint8", (N, MAX_SRC)), ("ascend_dynamic_aipp_data", "uint8", (params_nbytes(N),))]
    finally:
        api.unload(model_id)
    (a,) = api.inspect(om)["aipp"]
    assert (a["mode"], a["input"], a["max_src_image_size"], a["params_input"], a["model_shape"]) == \
        ("dynamic", "x", MAX_SRC, "ascend_dynamic_aipp_data", [N, 3, H, W])
    from ge.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["inspect", om, "--section", "io"])
    assert e.value.code == 0
    assert (f"AIPP on input 'x' (dynamic): uint8 [{N}, {MAX_SRC}] -> [{N}, 3, {H}, {W}], max_src_image_size "
            f"{MAX_SRC}, parameters at run time in input 'ascend_dynamic_aipp_data'") in capsys.readouterr().out


def test_api_per_batch_params_equal_static_builds(dyn):
    """Each batch image with its own crop and mean: image b equals the static build of its parameters."""
    om, path, tmp = dyn
    img = rng.integers(0, 256, (N, 6, 8, 3), dtype=np.uint8)
    crops = [(2, 1, 3), (0, 2, 10)]
    want = [static_run(tmp, path, RGB_CROP.format(x=x, y=y, m=m), img)[b] for b, (x, y, m) in enumerate(crops)]
    model_id = api.load_from_file(om)
    try:
        raw = np.zeros((N, MAX_SRC), np.uint8)
        raw.reshape(-1)[:img.size] = img.reshape(-1)  # images packed at the source image's size
        got = api.execute(model_id, [raw, dynamic_aipp_data(model_id, rgb_params(crops))])[0]
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(got, np.stack(want))


def test_api_yuv420sp_csc_equals_static(dyn):
    om, path, tmp = dyn
    sh, sw = 6, 8
    raw_static = rng.integers(0, 256, (N, sh * 3 // 2, sw), dtype=np.uint8)
    conf = f"input_format: YUV420SP_U8\nsrc_image_size_w: {sw}\nsrc_image_size_h: {sh}\ncrop: true\n" \
           f"load_start_pos_w: 2\nload_start_pos_h: 2\ncrop_size_w: {W}\ncrop_size_h: {H}\n{JPEG_YUV2RGB}"
    want = static_run(tmp, path, conf, raw_static)
    matrix = [[256, 0, 359], [256, -88, -183], [256, 454, 0]]
    p = AippParams("YUV420SP_U8", (sw, sh), True, matrix, (0, 128, 128), images=[
        ImageParams(True, (2, 2), (W, H)) for _ in range(N)])
    model_id = api.load_from_file(om)
    try:
        raw = np.zeros((N, MAX_SRC), np.uint8)
        raw.reshape(-1)[:raw_static.size] = raw_static.reshape(-1)
        got = api.execute(model_id, [raw, dynamic_aipp_data(model_id, p)])[0]
    finally:
        api.unload(model_id)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("change,match", [
    (lambda p: setattr(p.images[1], "crop_pos", (3, 2)), r"input 'x'.*crop 6x4 at \(3, 2\) leaves the source image 8x6"),
    (lambda p: setattr(p, "src_size", (10, 8)), "240 bytes, more than max_src_image_size 144"),
    (lambda p: setattr(p, "input_format", "YUYV_U8"), "input format YUYV_U8 is not supported by ge"),
    (lambda p: setattr(p.images[0], "scf", True), "ge does not implement AIPP resize"),
    (lambda p: p.images.pop(), "parameters for 1 image"),
])
def test_api_bad_parameters_name_the_input(dyn, change, match):
    om, _, _ = dyn
    p = rgb_params([(0, 0, 0), (0, 0, 0)])
    change(p)
    model_id = api.load_from_file(om)
    try:
        with pytest.raises(GeError, match=match):
            dynamic_aipp_data(model_id, p)
        raw = np.zeros((N, MAX_SRC), np.uint8)
        with pytest.raises(GeError, match="input 'x'.*dynamic AIPP parameters are not set"):
            api.execute(model_id, [raw, np.zeros(params_nbytes(N), np.uint8)])
        if len(p.images) == N and p.input_format == "RGB888_U8":  # the same check when the bytes come unchecked
            with pytest.raises(GeError, match=match):
                api.execute(model_id, [raw, p.to_bytes()])
    finally:
        api.unload(model_id)


# -- pyACL, as users write it ---------------------------------------------------------------------
device = acl_conftest.device  # pyACL's init / set_device around a test
ACL_RGB888_U8, ACL_DATA_WITH_DYNAMIC_AIPP, ACL_DYNAMIC_AIPP_NODE = 3, 2, 3
H2D, D2H = 1, 2


def _set_rgb(aipp_set, crops):
    assert acl.mdl.set_aipp_input_format(aipp_set, ACL_RGB888_U8) == 0
    assert acl.mdl.set_aipp_src_image_size(aipp_set, 8, 6) == 0
    assert acl.mdl.set_aipp_rbuv_swap_switch(aipp_set, 1) == 0
    assert acl.mdl.set_aipp_csc_params(aipp_set, 0, *[0] * 15) == 0
    for b, (x, y, m) in enumerate(crops):
        assert acl.mdl.set_aipp_crop_params(aipp_set, 1, x, y, 6, 4, b) == 0
        assert acl.mdl.set_aipp_padding_params(aipp_set, 0, 0, 0, 0, 0, b) == 0
        assert acl.mdl.set_aipp_dtc_pixel_mean(aipp_set, m, 7, 0, 0, b) == 0
        assert acl.mdl.set_aipp_dtc_pixel_min(aipp_set, 0, 0, 0.5, 0, b) == 0
        assert acl.mdl.set_aipp_pixel_var_reci(aipp_set, 0.25, 2.0, 1.0, 1.0, b) == 0


def test_pyacl_create_aipp_set_input_aipp_execute(device, dyn):
    om, path, tmp = dyn
    img = rng.integers(0, 256, (N, 6, 8, 3), dtype=np.uint8)
    crops = [(1, 0, 0), (2, 2, 255)]
    want = np.stack([static_run(tmp, path, RGB_CROP.format(x=x, y=y, m=m), img)[b] for b, (x, y, m) in enumerate(crops)])
    model_id, desc, in_ds, out_ds, in_ptrs, out_ptrs = acl_conftest.ready_model(om)
    index, ret = acl.mdl.get_input_index_by_name(desc, "ascend_dynamic_aipp_data")
    assert (index, ret) == (1, 0)
    assert acl.mdl.get_aipp_type(model_id, 0) == (ACL_DATA_WITH_DYNAMIC_AIPP, 1, 0)
    assert acl.mdl.get_aipp_type(model_id, 1)[0::2] == (ACL_DYNAMIC_AIPP_NODE, 0)
    assert acl.mdl.get_first_aipp_info(model_id, 0)[1] == 145016  # ACL_ERROR_GE_AIPP_MODE_INVALID: it is dynamic
    data = img.tobytes()
    assert acl.rt.memcpy(in_ptrs[0], len(data), acl.util.bytes_to_ptr(data), len(data), H2D) == 0

    aipp_set = acl.mdl.create_aipp(N)
    _set_rgb(aipp_set, crops)
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, aipp_set) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    size = acl.mdl.get_output_size_by_index(desc, 0)
    host, _ = acl.rt.malloc_host(size)
    assert acl.rt.memcpy(host, size, out_ptrs[0], size, D2H) == 0
    np.testing.assert_array_equal(acl.util.ptr_to_numpy(host, (N, 3, H, W), 11), want)

    # bad parameters: ACL's codes, and nothing written
    assert acl.mdl.set_aipp_crop_params(aipp_set, 1, 3, 3, 6, 4, 0) == 0
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, aipp_set) == 100000  # the crop leaves the 8x6 image
    assert "crop 6x4 at (3, 3) leaves the source image 8x6" in acl.get_recent_err_msg()
    assert acl.mdl.set_aipp_crop_params(aipp_set, 1, 0, 0, 6, 4, 2) == 100000  # batch index 2 of 2
    assert acl.mdl.set_aipp_input_format(aipp_set, 99) == 100000
    assert acl.mdl.set_aipp_dtc_pixel_mean(aipp_set, 256, 0, 0, 0, 0) == 100000
    assert acl.mdl.set_aipp_src_image_size(aipp_set, 10, 8) == 0
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, aipp_set) == 100000  # 240 bytes > max_src_image_size
    assert acl.mdl.set_input_aipp(model_id, in_ds, 0, aipp_set) == 100000  # not the AIPP parameters' input
    assert acl.mdl.destroy_aipp(aipp_set) == 0
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, aipp_set) == 100000  # destroyed

    one = acl.mdl.create_aipp(1)  # the model's batch is 2
    _set_rgb(one, crops[:1])
    assert acl.mdl.set_input_aipp(model_id, in_ds, index, one) == 100000
    assert acl.mdl.create_aipp(0) == 0

    zeros = bytes(params_nbytes(N))  # the parameters never set: execute fails with a code, naming the input
    assert acl.rt.memcpy(in_ptrs[1], len(zeros), acl.util.bytes_to_ptr(zeros), len(zeros), H2D) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 507011
    assert "input 'x'" in acl.get_recent_err_msg() and "not set" in acl.get_recent_err_msg()
    assert acl.mdl.unload(model_id) == 0


# -- files: ais_bench's .config, ge run, python -m ais_bench --------------------------------------
AIS_CONFIG = """[aipp_op]
    input_format : RGB888_U8
    src_image_size_w : 8
    src_image_size_h : 6
    crop : 1
    load_start_pos_w : 2
    load_start_pos_h : 1
    crop_size_w : 6
    crop_size_h : 4
    rbuv_swap_switch : 1
    mean_chn_0 : 3
    mean_chn_1 : 7
    min_chn_2 : 0.5
    var_reci_chn_0 : 0.25
    var_reci_chn_1 : 2.0
"""


def test_ais_bench_config_reads_as_the_setters(tmp_path):
    path = tmp_path / "a.config"
    path.write_text(AIS_CONFIG)
    assert read_aipp_params(str(path), N) == rgb_params([(2, 1, 3)] * N)
    path.write_text(AIS_CONFIG.replace("crop : 1", "crop : 2"))
    with pytest.raises(GeError, match=r"a.config: crop: '2' is not 1 or 0"):
        read_aipp_params(str(path), N)
    path.write_text(AIS_CONFIG.replace("    input_format : RGB888_U8\n", ""))
    with pytest.raises(GeError, match="input_format is required"):
        read_aipp_params(str(path), N)


def _raw_file(folder, img) -> str:
    """The raw images as ais_bench's users write them: the bytes of the batch, packed (ndarray.tofile)."""
    folder.mkdir(exist_ok=True)
    raw = np.zeros((N, MAX_SRC), np.uint8)
    raw.reshape(-1)[:img.size] = img.reshape(-1)
    path = str(folder / "img.bin")
    raw.tofile(path)
    return path


def test_ge_run_and_ais_bench_aipp_config(dyn, tmp_path):
    """ge run --aipp_config and python -m ais_bench --aipp_config (files and a folder) give the static build's outputs."""
    import os
    import subprocess
    import sys
    from ge.cli.main import main
    from ge.core.acl import shim_path
    om, path, tmp = dyn
    img = rng.integers(0, 256, (N, 6, 8, 3), dtype=np.uint8)
    want = static_run(tmp, path, RGB_CROP.format(x=2, y=1, m=3), img)
    config = tmp_path / "actual.config"
    config.write_text(AIS_CONFIG)
    raw = _raw_file(tmp_path / "data", img)
    with pytest.raises(SystemExit) as e:
        main(["run", om, "--input", raw, "--aipp_config", str(config), "--output-dir", str(tmp_path / "run")])
    assert e.value.code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "run" / "dyn_output_0.npy"), want)
    from ge.core.acl.runner import RunOptions, run as ge_run
    with pytest.raises(GeError, match=r"^input 'ascend_dynamic_aipp_data' takes the dynamic AIPP parameters: give "
                                      r"them with --aipp_config FILE.config \(ais_bench's format\), or"):
        ge_run(RunOptions(om, inputs=[raw], output_dir=str(tmp_path / "none")))  # the parameters forgotten
    assert not (tmp_path / "none").exists()
    with pytest.raises(SystemExit) as e:  # a dataset folder: every sample with the same parameters
        main(["run", om, "--input", str(tmp_path / "data"), "--aipp_config", str(config), "--output-dir",
              str(tmp_path / "set"), "--outfmt", "NPY"])
    assert e.value.code == 0
    np.testing.assert_array_equal(np.load(tmp_path / "set" / "img_output_0.npy"), want)

    from ge.core.acl.ais_bench.interface import InferSession
    session = InferSession(0, om)
    try:
        assert session.get_dym_aipp_input_exist() and session.load_aipp_config_file(str(config), N) == 0
        np.testing.assert_array_equal(session.infer([np.fromfile(raw, np.uint8).reshape(N, MAX_SRC)])[0], want)
    finally:
        session.free_resource()

    env = dict(os.environ, PYTHONPATH=shim_path())
    r = subprocess.run([sys.executable, "-m", "ais_bench", "--model", om, "--input", str(tmp_path / "data"),
                        "--aipp_config", str(config), "--output", str(tmp_path / "ais"), "--output_dirname", "o"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(np.fromfile(tmp_path / "ais" / "o" / "img_0.bin", np.float32).reshape(want.shape),
                                  want)
    config.write_text(AIS_CONFIG.replace("load_start_pos_w : 2", "load_start_pos_w : 3"))
    r = subprocess.run([sys.executable, "-m", "ais_bench", "--model", om, "--input", str(tmp_path / "data"),
                        "--aipp_config", str(config)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 1
    assert "[ERROR] dynamic AIPP of input 'x': crop 6x4 at (3, 1) leaves the source image 8x6" in r.stderr


def test_a_static_config_read_from_an_om_is_checked_field_by_field():
    """An OM's ge::Aipp config is as untrusted as the text it came from: a field of the wrong type
    (a mutated record with valid checksums) is an error naming it, never another transform."""
    from ge.formats.aipp_config import parse_aipp_config
    from ge.core.compile.aipp import _completed
    good = _completed(parse_aipp_config("aipp_op {\n input_format: RGB888_U8\n}\n")[0], H, W)
    assert AippParams.from_config(good, 1).src_size == (W, H)
    for key, value, match in [("rbuv_swap_switch", 1 << 62, r"rbuv_swap_switch is 4611686018427387904"),
                              ("mean", [True, 0.0, 0.0, 0.0], r"mean is \[True"),
                              ("crop_size_w", -1, r"crop_size_w is -1"),
                              ("matrix", [[0] * 3] * 2, r"matrix is"),
                              ("input_format", "RGB", r"input_format 'RGB' is not an AIPP input format")]:
        with pytest.raises(GeError, match=rf"^AIPP of input 'x': (the AIPP config's )?{match}"):
            AippParams.from_config(dict(good, **{key: value}), 1, "AIPP of input 'x'")
    with pytest.raises(GeError, match=r"the AIPP config has no padding_value"):
        AippParams.from_config({k: v for k, v in good.items() if k != "padding_value"}, 1)
