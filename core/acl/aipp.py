"""Dynamic AIPP at run time: the parameters of a model compiled with `aipp_mode: dynamic`
(model/aipp_params.py holds the parameter bytes, kernels/ops/aipp.py the transform). Three ways to give them, one
check (AippParams.check against the model's AIPP record):

    pyACL       acl.mdl.create_aipp(batch), the set_aipp_* setters, acl.mdl.set_input_aipp(model_id,
                dataset, index, aipp_set) into the `ascend_dynamic_aipp_data` buffer; error codes
    files       ais_bench's `--aipp_config FILE.config` ([aipp_op] with `key : value` lines; the same
                settings for every image of the batch), for ge run and python -m ais_bench
    Python API  dynamic_aipp_data(model_id, params_or_path): the input array to pass to execute
"""
from __future__ import annotations

import configparser
from dataclasses import replace

import numpy as np

from ..model.aipp_params import ACL_FORMAT_CODES, DYNAMIC_AIPP_INPUT, AippParams, ImageParams
from ..model.errors import GeError
from . import handles, memory
from .codes import (ACL_ERROR_GE_AIPP_MODE_INVALID, ACL_ERROR_GE_AIPP_NOT_EXIST,
                    ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID, ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, ACL_ERROR_FAILURE, ACL_ERROR_INVALID_PARAM, acl_call,
                    as_int, fail)
from .datasets import Dataset, buffer_of
from .models import model_manager

# aclmdlInputAippType
ACL_DATA_WITHOUT_AIPP, ACL_DATA_WITH_STATIC_AIPP, ACL_DATA_WITH_DYNAMIC_AIPP, ACL_DYNAMIC_AIPP_NODE = 0, 1, 2, 3
ACL_INVALID_NODE_INDEX = 0xFFFFFFFF


# -- the model's side ----------------------------------------------------------------------------
def dynamic_record(model_id: int) -> dict | None:
    """The record of the model's dynamic AIPP input, or None."""
    return next((a for a in model_manager.model(model_id).aipp if a.get("mode") == "dynamic"), None)


def params_batch(record: dict) -> int:
    """How many images the parameters hold: the batch, a gear model's largest (each gear reads the first)."""
    return record.get("params_batch", record["model_shape"][0])


def checked(record: dict, params: AippParams) -> AippParams:
    """`params` if they fit the model's AIPP input, else GeError naming it."""
    where = f"dynamic AIPP of input '{record['input']}'"
    batch = params_batch(record)
    if len(params.images) != batch:
        raise GeError(f"{where}: parameters for {len(params.images)} image(s), the model's batch is {batch}"
                      + (" (its largest gear's: ACL's AIPP set takes the largest batch)"
                         if batch != record["model_shape"][0] else ""))
    shapes = record.get("gear_model_shapes") or [record["model_shape"]]
    problems = []
    for shape in shapes:  # a gear model: they must fit some gear's image (the gear that runs checks its own)
        try:
            params.check(tuple(shape), record["max_src_image_size"], where)
            return params
        except GeError as e:
            problems.append(str(e))
    raise GeError(problems[0] if len(set(problems)) == 1 else
                  f"{where}: the parameters fit none of the gears' images: " + "; ".join(
                      f"{'x'.join(map(str, s[2:]))}: {p.split(': ', 1)[-1]}" for s, p in zip(shapes, problems)))


def dynamic_aipp_data(model_id: int, params) -> np.ndarray:
    """The `ascend_dynamic_aipp_data` input (uint8) for `params`: an AippParams, or the path of an
    ais_bench .config file (its settings for every image of the batch)."""
    record = dynamic_record(model_id)
    if record is None:
        raise GeError(f"model '{model_manager.model(model_id).name}' has no dynamic AIPP input (compile it with "
                      "--insert_op_conf and aipp_mode: dynamic)")
    if not isinstance(params, AippParams):
        params = read_aipp_params(str(params), params_batch(record))
    return checked(record, params).to_bytes()


# -- ais_bench's .config -------------------------------------------------------------------------
_SWITCHES = ("crop", "padding", "csc_switch", "rbuv_swap_switch", "ax_swap_switch")
_INTS = ("src_image_size_w", "src_image_size_h", "load_start_pos_w", "load_start_pos_h", "crop_size_w",
         "crop_size_h", "top_padding_size", "bottom_padding_size", "left_padding_size", "right_padding_size",
         *(f"matrix_r{r}c{c}" for r in range(3) for c in range(3)), *(f"input_bias_{i}" for i in range(3)),
         *(f"output_bias_{i}" for i in range(3)), *(f"mean_chn_{i}" for i in range(4)))
#: ais_bench's spelling of the padding sizes -> ATC's
_PADDING = {f"padding_size_{s}": f"{s}_padding_size" for s in ("top", "bottom", "left", "right")}
_FLOATS = (*(f"min_chn_{i}" for i in range(4)), *(f"var_reci_chn_{i}" for i in range(4)))


def read_aipp_params(path: str, batch: int) -> AippParams:
    """ais_bench's --aipp_config file: an [aipp_op] section; input_format, src_image_size_w and
    src_image_size_h are required; switches are 1 or 0 (true/false too); padding sizes spelled as
    ais_bench (padding_size_top) or ATC (top_padding_size). No resize: ais_bench sets none."""
    cfg = configparser.ConfigParser(delimiters=(":", "="), comment_prefixes=("#", ";"), strict=False)
    try:
        with open(path, encoding="utf-8") as f:
            cfg.read_file(f)
    except OSError as e:
        raise GeError(f"{path}: {e.strerror or e}") from None
    except (configparser.Error, UnicodeDecodeError) as e:
        raise GeError(f"{path}: not an ais_bench AIPP config ({str(e).splitlines()[0]})") from None
    if not cfg.has_section("aipp_op"):
        raise GeError(f"{path}: no [aipp_op] section")
    values = {}
    for key, raw in cfg.items("aipp_op"):
        where = f"{path}: {key}"
        key = _PADDING.get(key, key)
        raw = raw.strip()
        if key == "input_format":
            values[key] = raw
        elif key in _SWITCHES:
            if raw.lower() not in ("0", "1", "true", "false"):
                raise GeError(f"{where}: '{raw}' is not 1 or 0")
            values[key] = raw.lower() in ("1", "true")
        elif key in _INTS or key in _FLOATS:
            try:
                values[key] = int(raw) if key in _INTS else float(raw)
            except ValueError:
                raise GeError(f"{where}: '{raw}' is not {'an integer' if key in _INTS else 'a number'}") from None
        else:
            raise GeError(f"{where}: unknown AIPP field")
    missing = [k for k in ("input_format", "src_image_size_w", "src_image_size_h") if k not in values]
    if missing:
        raise GeError(f"{path}: {missing[0]} is required")
    if values["input_format"] not in ACL_FORMAT_CODES:
        raise GeError(f"{path}: input_format '{values['input_format']}' is not an AIPP input format")
    v = lambda k, d=0: values.get(k, d)  # noqa: E731 - the file's value or ATC's default
    image = ImageParams(v("crop", False), (v("load_start_pos_w"), v("load_start_pos_h")),
                        (v("crop_size_w"), v("crop_size_h")), False, v("padding", False),
                        tuple(v(f"{s}_padding_size") for s in ("top", "bottom", "left", "right")),
                        tuple(v(f"mean_chn_{i}") for i in range(4)), tuple(v(f"min_chn_{i}", 0.0) for i in range(4)),
                        tuple(v(f"var_reci_chn_{i}", 1.0) for i in range(4)))
    return AippParams(values["input_format"], (v("src_image_size_w"), v("src_image_size_h")), v("csc_switch", False),
                      [[v(f"matrix_r{r}c{c}") for c in range(3)] for r in range(3)],
                      tuple(v(f"input_bias_{i}") for i in range(3)), tuple(v(f"output_bias_{i}") for i in range(3)),
                      v("rbuv_swap_switch", False), v("ax_swap_switch", False),
                      [replace(image) for _ in range(batch)])


# -- pyACL ---------------------------------------------------------------------------------------
class AippSet:
    """aclmdlAIPP: the settings set_input_aipp writes (as aclmdlCreateAIPP: nothing set, var_reci 1)."""

    def __init__(self, batch: int):
        self.params = AippParams("", (0, 0), images=[ImageParams() for _ in range(batch)])


def _range(value, lo, hi, what: str, kind=int):
    if kind is int:
        value = as_int(value, what)
    elif isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        fail(ACL_ERROR_INVALID_PARAM, f"{what} must be a number, got {type(value).__name__}")
    if not lo <= value <= hi:
        fail(ACL_ERROR_INVALID_PARAM, f"{what} {value} is outside [{lo}, {hi}]")
    return kind(value)


def _image(aipp_set, batch_index) -> ImageParams:
    images = handles.get(aipp_set, AippSet).params.images
    b = as_int(batch_index, "batch_index")
    if not 0 <= b < len(images):
        fail(ACL_ERROR_INVALID_PARAM, f"batch_index ({b}) is greater than or equal to batch_number ({len(images)})")
    return images[b]


@acl_call("bare", 0)
def create_aipp(batch_size):
    """A handle, or 0 (aclmdlCreateAIPP's nullptr) for a batch size of 0."""
    batch = as_int(batch_size, "batch_size")
    if not 0 < batch <= 127:  # batchNum is an int8 in the parameter bytes
        fail(ACL_ERROR_INVALID_PARAM, f"batch_size {batch} must be in [1, 127]")
    return handles.new(AippSet(batch))


@acl_call("ret")
def destroy_aipp(aipp_set):
    handles.drop(aipp_set, AippSet)


@acl_call("ret")
def set_aipp_input_format(aipp_set, input_format):
    names = {v: k for k, v in ACL_FORMAT_CODES.items()}
    code = as_int(input_format, "input_format")
    if code not in names:
        fail(ACL_ERROR_INVALID_PARAM, f"unsupported inputFormat[{code}]")
    handles.get(aipp_set, AippSet).params.input_format = names[code]


@acl_call("ret")
def set_aipp_csc_params(aipp_set, csc_switch, r0c0, r0c1, r0c2, r1c0, r1c1, r1c2, r2c0, r2c1, r2c2,
                        output_bias_r0, output_bias_r1, output_bias_r2, input_bias_r0, input_bias_r1, input_bias_r2):
    p = handles.get(aipp_set, AippSet).params
    switch = _range(csc_switch, 0, 1, "csc_switch")
    if switch:
        m = [_range(x, -32677, 32676, "csc matrix") for x in (r0c0, r0c1, r0c2, r1c0, r1c1, r1c2, r2c0, r2c1, r2c2)]
        out = tuple(_range(x, 0, 255, "csc output bias") for x in (output_bias_r0, output_bias_r1, output_bias_r2))
        inp = tuple(_range(x, 0, 255, "csc input bias") for x in (input_bias_r0, input_bias_r1, input_bias_r2))
        p.matrix, p.output_bias, p.input_bias = [m[0:3], m[3:6], m[6:9]], out, inp
    p.csc_switch = bool(switch)


@acl_call("ret")
def set_aipp_rbuv_swap_switch(aipp_set, rbuv_swap_switch):
    handles.get(aipp_set, AippSet).params.rbuv_swap_switch = bool(_range(rbuv_swap_switch, 0, 1, "rbuv_swap_switch"))


@acl_call("ret")
def set_aipp_ax_swap_switch(aipp_set, ax_swap_switch):
    handles.get(aipp_set, AippSet).params.ax_swap_switch = bool(_range(ax_swap_switch, 0, 1, "ax_swap_switch"))


@acl_call("ret")
def set_aipp_src_image_size(aipp_set, src_image_size_w, src_image_size_h):
    p = handles.get(aipp_set, AippSet).params
    p.src_size = (_range(src_image_size_w, 2, 4096, "src_image_size_w"),
                  _range(src_image_size_h, 1, 4096, "src_image_size_h"))


@acl_call("ret")
def set_aipp_scf_params(aipp_set, scf_switch, scf_input_size_w, scf_input_size_h, scf_output_size_w,
                        scf_output_size_h, batch_index):
    im = _image(aipp_set, batch_index)
    switch = _range(scf_switch, 0, 1, "scf_switch")
    if switch:  # recorded; set_input_aipp refuses it (ge has no AIPP resize)
        for v, hi, what in ((scf_input_size_w, 4096, "scf_input_size_w"), (scf_input_size_h, 4096, "scf_input_size_h"),
                            (scf_output_size_w, 1920, "scf_output_size_w"),
                            (scf_output_size_h, 4096, "scf_output_size_h")):
            _range(v, 16, hi, what)
    im.scf = bool(switch)


@acl_call("ret")
def set_aipp_crop_params(aipp_set, crop_switch, crop_start_pos_w, crop_start_pos_h, crop_size_w, crop_size_h,
                         batch_index):
    im = _image(aipp_set, batch_index)
    switch = _range(crop_switch, 0, 1, "crop_switch")
    if switch:
        im.crop_pos = (_range(crop_start_pos_w, 0, 4095, "crop_start_pos_w"),
                       _range(crop_start_pos_h, 0, 4095, "crop_start_pos_h"))
        im.crop_size = (_range(crop_size_w, 1, 4096, "crop_size_w"), _range(crop_size_h, 1, 4096, "crop_size_h"))
    im.crop = bool(switch)


@acl_call("ret")
def set_aipp_padding_params(aipp_set, padding_switch, padding_size_top, padding_size_bottom, padding_size_left,
                            padding_size_right, batch_index):
    im = _image(aipp_set, batch_index)
    switch = _range(padding_switch, 0, 1, "padding_switch")
    if switch:
        im.padding_size = tuple(_range(v, 0, 32, what) for v, what in (
            (padding_size_top, "padding_size_top"), (padding_size_bottom, "padding_size_bottom"),
            (padding_size_left, "padding_size_left"), (padding_size_right, "padding_size_right")))
    im.padding = bool(switch)


@acl_call("ret")
def set_aipp_dtc_pixel_mean(aipp_set, chn0, chn1, chn2, chn3, batch_index):
    im = _image(aipp_set, batch_index)
    im.mean = tuple(float(_range(v, 0, 255, "dtc_pixel_mean")) for v in (chn0, chn1, chn2, chn3))


@acl_call("ret")
def set_aipp_dtc_pixel_min(aipp_set, chn0, chn1, chn2, chn3, batch_index):
    im = _image(aipp_set, batch_index)
    im.min = tuple(_range(v, 0.0, 255.0, "dtc_pixel_min", float) for v in (chn0, chn1, chn2, chn3))


@acl_call("ret")
def set_aipp_pixel_var_reci(aipp_set, chn0, chn1, chn2, chn3, batch_index):
    im = _image(aipp_set, batch_index)
    im.var_reci = tuple(_range(v, -65504.0, 65504.0, "dtc_pixel_var_reci", float) for v in (chn0, chn1, chn2, chn3))


def _loaded(model_id):
    try:
        return model_manager.model(as_int(model_id, "model_id"))
    except GeError as e:
        fail(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, str(e))


def _input_names(m) -> list:
    return [d.name for d in m.inputs]


@acl_call("ret")
def set_input_aipp(model_id, dataset, index, aipp_set):
    """aclmdlSetInputAIPP: `index` is the `ascend_dynamic_aipp_data` input; the settings are checked
    against the model (batch, max_src_image_size, crop and padding against its input) and written into
    that input's buffer of `dataset`."""
    m = _loaded(model_id)
    p = handles.get(aipp_set, AippSet).params
    index = as_int(index, "index")
    names = _input_names(m)
    if not 0 <= index < len(names) or names[index] != DYNAMIC_AIPP_INPUT:
        fail(ACL_ERROR_INVALID_PARAM, f"index {index} is not the model's {DYNAMIC_AIPP_INPUT} input")
    record = dynamic_record(int(model_id))
    try:
        data = checked(record, p).to_bytes()
    except GeError as e:
        fail(ACL_ERROR_INVALID_PARAM, str(e))
    buf = buffer_of(handles.get(dataset, Dataset), index, "input")
    if buf.size < data.nbytes:
        fail(ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID, f"the {DYNAMIC_AIPP_INPUT} buffer holds {buf.size} bytes, "
                                                        f"the parameters need {data.nbytes}")
    memory.view(buf.addr, data.nbytes)[...] = data


def _aipp_type(m, index: int) -> tuple[int, int]:
    names = _input_names(m)
    if not 0 <= index < len(names):
        fail(ACL_ERROR_INVALID_PARAM, f"index {index}: the model has {len(names)} inputs")
    for a in m.aipp:
        if a["input"] == names[index]:
            if a.get("mode") == "dynamic":
                return ACL_DATA_WITH_DYNAMIC_AIPP, names.index(a["params_input"])
            return ACL_DATA_WITH_STATIC_AIPP, ACL_INVALID_NODE_INDEX
    if names[index] == DYNAMIC_AIPP_INPUT:
        return ACL_DYNAMIC_AIPP_NODE, ACL_INVALID_NODE_INDEX
    return ACL_DATA_WITHOUT_AIPP, ACL_INVALID_NODE_INDEX


@acl_call("pair", (ACL_DATA_WITHOUT_AIPP, ACL_INVALID_NODE_INDEX))
def aipp_type_of(model_id, index):
    return _aipp_type(_loaded(model_id), as_int(index, "index"))


def get_aipp_type(model_id, index):
    """aclmdlGetAippType: (type, dynamic_attached_data_index, ret)."""
    (kind, attached), ret = aipp_type_of(model_id, index)
    return kind, attached, ret


@acl_call("ret")
def set_aipp_by_input_index(model_id, dataset, index, aipp_set):
    """aclmdlSetAIPPByInputIndex: `index` is the preprocessed input; its dynamic AIPP input takes the settings."""
    kind, attached = _aipp_type(_loaded(model_id), as_int(index, "index"))
    if kind != ACL_DATA_WITH_DYNAMIC_AIPP:
        fail(ACL_ERROR_FAILURE, f"input {index} has no dynamic AIPP linked")
    ret = set_input_aipp(model_id, dataset, attached, aipp_set)
    if ret:
        fail(ret, f"set_input_aipp: index {attached}")


@acl_call("pair", None)
def get_first_aipp_info(model_id, index):
    """aclmdlGetFirstAippInfo: a static AIPP input's settings (aclAippInfo's fields)."""
    m = _loaded(model_id)
    kind, _ = _aipp_type(m, as_int(index, "index"))
    if kind == ACL_DATA_WITH_DYNAMIC_AIPP:
        fail(ACL_ERROR_GE_AIPP_MODE_INVALID, f"input {index}'s AIPP is dynamic: only static AIPP has fixed settings")
    if kind != ACL_DATA_WITH_STATIC_AIPP:
        fail(ACL_ERROR_GE_AIPP_NOT_EXIST, f"input {index} is not configured with AIPP")
    a = next(r for r in m.aipp if r["input"] == _input_names(m)[int(index)])
    info = {"inputFormat": ACL_FORMAT_CODES[a["input_format"]], "srcImageSizeW": a["src_image_size_w"],
            "srcImageSizeH": a["src_image_size_h"], "cropSwitch": int(a["crop"]), "loadStartPosW": a["load_start_pos_w"],
            "loadStartPosH": a["load_start_pos_h"], "cropSizeW": a["crop_size_w"], "cropSizeH": a["crop_size_h"],
            "resizeSwitch": 0, "resizeOutputW": 0, "resizeOutputH": 0, "paddingSwitch": int(a["padding"]),
            "leftPaddingSize": a["left_padding_size"], "rightPaddingSize": a["right_padding_size"],
            "topPaddingSize": a["top_padding_size"], "bottomPaddingSize": a["bottom_padding_size"],
            "cscSwitch": int(a["csc_switch"]), "rbuvSwapSwitch": int(a["rbuv_swap_switch"]),
            "axSwapSwitch": int(a["ax_swap_switch"]), "singleLineMode": 0,
            **{f"matrixR{r}C{c}": a["matrix"][r][c] for r in range(3) for c in range(3)},
            **{f"outputBias{i}": a["output_bias"][i] for i in range(3)},
            **{f"inputBias{i}": a["input_bias"][i] for i in range(3)},
            **{f"meanChn{i}": a["mean"][i] for i in range(4)}, **{f"minChn{i}": a["min"][i] for i in range(4)},
            **{f"varReciChn{i}": a["var_reci"][i] for i in range(4)}, "shapeCount": 1}
    return info
