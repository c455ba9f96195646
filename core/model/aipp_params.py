"""AIPP's parameters, whichever mode gives them: the static config block (a node attribute) or the
dynamic input `ascend_dynamic_aipp_data`, whose bytes follow CANN's kAippDynamicPara: a 64-byte head
(format, CSC, swaps, source size) then one 96-byte block per batch image (crop, scaling, padding, mean
int16, min and var_reci float16, as the AIPP unit holds them). Their check against the model's input.
Shared by the compiler (compile/aipp.py), the kernel (kernels/ops/aipp.py) and the runtime face
(acl/aipp.py: pyACL's setters, --aipp_config), so that loading a model needs no kernel family it
does not run."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import GeError

#: CANN's format codes in the parameter bytes (CceAippInputFormat); acl.mdl.set_aipp_input_format
#: takes ACL's own numbering (ACL_FORMAT_CODES) and stores these
CCE_FORMAT_CODES = {"YUV420SP_U8": 1, "XRGB8888_U8": 2, "NC1HWC0DI_FP16": 3, "NC1HWC0DI_S8": 4, "RGB888_U8": 5,
                    "ARGB8888_U8": 6, "YUYV_U8": 7, "YUV422SP_U8": 8, "AYUV444_U8": 9, "YUV400_U8": 10,
                    "RAW10": 11, "RAW12": 12, "RAW16": 13, "RAW24": 14}
ACL_FORMAT_CODES = {"YUV420SP_U8": 1, "XRGB8888_U8": 2, "RGB888_U8": 3, "YUV400_U8": 4, "NC1HWC0DI_FP16": 5,
                    "NC1HWC0DI_S8": 6, "ARGB8888_U8": 7, "YUYV_U8": 8, "YUV422SP_U8": 9, "AYUV444_U8": 10,
                    "RAW10": 11, "RAW12": 12, "RAW16": 13, "RAW24": 14}
SUPPORTED_FORMATS = ("YUV420SP_U8", "XRGB8888_U8", "RGB888_U8", "YUV400_U8")
YUV_INPUTS = ("YUV420SP_U8", "YUV400_U8")
DYNAMIC_AIPP_INPUT = "ascend_dynamic_aipp_data"  # ACL_DYNAMIC_AIPP_NAME

HEAD = np.dtype({"names": ["input_format", "csc_switch", "rbuv_swap_switch", "ax_swap_switch", "batch_num",
                           "src_image_size_w", "src_image_size_h", "matrix", "output_bias", "input_bias"],
                 "formats": ["u1", "i1", "i1", "i1", "i1", "<i4", "<i4", ("<i2", 9), ("u1", 3), ("u1", 3)],
                 "offsets": [0, 1, 2, 3, 4, 8, 12, 16, 40, 43], "itemsize": 64})
BATCH = np.dtype({"names": ["crop", "scf", "padding", "rotate", "crop_pos", "crop_size", "scf_input", "scf_output",
                            "padding_size", "mean", "min", "var_reci"],
                  "formats": ["i1", "i1", "i1", "i1", ("<i4", 2), ("<i4", 2), ("<i4", 2), ("<i4", 2), ("<i4", 4),
                              ("<i2", 4), ("<f2", 4), ("<f2", 4)],
                  "offsets": [0, 1, 2, 3, 8, 16, 24, 32, 40, 56, 64, 72], "itemsize": 96})


def params_nbytes(batch: int) -> int:
    """The size of a dynamic AIPP input for `batch` images."""
    return HEAD.itemsize + BATCH.itemsize * batch


@dataclass
class ImageParams:
    """One batch image's settings (ACL's per-batch-index setters)."""
    crop: bool = False
    crop_pos: tuple = (0, 0)  # W, H
    crop_size: tuple = (0, 0)  # W, H
    scf: bool = False
    padding: bool = False
    padding_size: tuple = (0, 0, 0, 0)  # top, bottom, left, right
    mean: tuple = (0.0,) * 4
    min: tuple = (0.0,) * 4
    var_reci: tuple = (1.0,) * 4


@dataclass
class AippParams:
    """The settings of one AIPP input, whichever mode they come from."""
    input_format: str
    src_size: tuple  # W, H
    csc_switch: bool = False
    matrix: list = field(default_factory=lambda: [[0] * 3 for _ in range(3)])
    input_bias: tuple = (0, 0, 0)
    output_bias: tuple = (0, 0, 0)
    rbuv_swap_switch: bool = False
    ax_swap_switch: bool = False
    images: list = field(default_factory=list)  # ImageParams per batch index
    padding_value: float = 0.0

    @classmethod
    def from_config(cls, c: dict, batch: int, where: str = "AIPP config") -> "AippParams":
        """A static block (formats/aipp_config.AippConfig.as_dict(), completed by compile/aipp.py), its
        fields' types checked: an OM's record is read as untrusted as the text it came from."""
        _check_config(c, where)
        image = ImageParams(bool(c["crop"]), (c["load_start_pos_w"], c["load_start_pos_h"]),
                            (c["crop_size_w"], c["crop_size_h"]), False, bool(c["padding"]),
                            (c["top_padding_size"], c["bottom_padding_size"], c["left_padding_size"],
                             c["right_padding_size"]), tuple(c["mean"]), tuple(c["min"]), tuple(c["var_reci"]))
        return cls(c["input_format"], (c["src_image_size_w"], c["src_image_size_h"]), bool(c["csc_switch"]),
                   [list(r) for r in c["matrix"]], tuple(c["input_bias"]), tuple(c["output_bias"]),
                   bool(c["rbuv_swap_switch"]), bool(c["ax_swap_switch"]), [image] * batch, float(c["padding_value"]))

    @classmethod
    def from_bytes(cls, data: np.ndarray, batch: int, where: str) -> "AippParams":
        """The parameters set_input_aipp wrote (the first params_nbytes(batch) bytes of `data`)."""
        data = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        if data.size < params_nbytes(batch):
            raise GeError(f"{where}: {data.size} bytes of dynamic AIPP parameters, {params_nbytes(batch)} needed")
        head = data[:HEAD.itemsize].view(HEAD)[0]
        if head["input_format"] == 0 and head["batch_num"] == 0:
            raise GeError(f"{where}: the dynamic AIPP parameters are not set (acl.mdl.set_input_aipp, or "
                          f"--aipp_config, fills input '{DYNAMIC_AIPP_INPUT}')")
        names = {v: k for k, v in CCE_FORMAT_CODES.items()}
        fmt = names.get(int(head["input_format"]), f"format code {int(head['input_format'])}")
        if head["batch_num"] != batch:
            raise GeError(f"{where}: dynamic AIPP parameters for {int(head['batch_num'])} image(s), the model's batch "
                          f"is {batch}")
        blocks = data[HEAD.itemsize:params_nbytes(batch)].view(BATCH)
        images = [ImageParams(bool(b["crop"]), tuple(int(v) for v in b["crop_pos"]),
                              tuple(int(v) for v in b["crop_size"]), bool(b["scf"]), bool(b["padding"]),
                              tuple(int(v) for v in b["padding_size"]), tuple(float(v) for v in b["mean"]),
                              tuple(float(v) for v in b["min"]), tuple(float(v) for v in b["var_reci"]))
                  for b in blocks]
        return cls(fmt, (int(head["src_image_size_w"]), int(head["src_image_size_h"])), bool(head["csc_switch"]),
                   head["matrix"].reshape(3, 3).tolist(), tuple(int(v) for v in head["input_bias"]),
                   tuple(int(v) for v in head["output_bias"]), bool(head["rbuv_swap_switch"]),
                   bool(head["ax_swap_switch"]), images)

    def to_bytes(self) -> np.ndarray:
        """The dynamic AIPP input's bytes for these settings (mean rounds to int16, min and var_reci
        to float16, as the AIPP unit holds them)."""
        head = np.zeros(1, HEAD)
        head["input_format"] = CCE_FORMAT_CODES.get(self.input_format, 0)
        head["csc_switch"], head["rbuv_swap_switch"] = self.csc_switch, self.rbuv_swap_switch
        head["ax_swap_switch"], head["batch_num"] = self.ax_swap_switch, len(self.images)
        head["src_image_size_w"], head["src_image_size_h"] = self.src_size
        head["matrix"] = np.asarray(self.matrix).reshape(9)
        head["input_bias"], head["output_bias"] = self.input_bias, self.output_bias
        blocks = np.zeros(len(self.images), BATCH)
        for b, im in zip(blocks, self.images):
            b["crop"], b["scf"], b["padding"] = im.crop, im.scf, im.padding
            b["crop_pos"], b["crop_size"], b["padding_size"] = im.crop_pos, im.crop_size, im.padding_size
            b["mean"], b["min"], b["var_reci"] = np.round(im.mean), im.min, im.var_reci
        return np.concatenate([head.view(np.uint8), blocks.view(np.uint8)])

    def src_nbytes(self) -> int:
        w, h = self.src_size
        return {"YUV420SP_U8": w * h * 3 // 2, "RGB888_U8": w * h * 3, "XRGB8888_U8": w * h * 4,
                "YUV400_U8": w * h}.get(self.input_format, 0)

    def check(self, model_shape: tuple, capacity: int | None, where: str) -> None:
        """GeError unless these settings turn the raw images into the model's NCHW `model_shape`;
        `capacity`: the bytes the raw input holds per image (dynamic AIPP's max_src_image_size)."""
        n, ch, h, w = model_shape
        fmt = self.input_format
        if not fmt:
            raise GeError(f"{where}: the input format is not set")
        if fmt not in SUPPORTED_FORMATS:
            why = "is not supported by ge" if fmt in CCE_FORMAT_CODES else "is not an AIPP input format"
            raise GeError(f"{where}: input format {fmt} {why} (supported: {', '.join(SUPPORTED_FORMATS)})")
        want_c = 1 if fmt == "YUV400_U8" else 3
        if ch != want_c:
            raise GeError(f"{where}: {fmt} gives {want_c} channel(s), the model's input has {ch} "
                          f"(NCHW {list(model_shape)})")
        if self.csc_switch and fmt == "YUV400_U8":
            raise GeError(f"{where}: csc_switch needs 3 channels; YUV400_U8 has one")
        src_w, src_h = self.src_size
        if src_w <= 0 or src_h <= 0:
            raise GeError(f"{where}: the source image size {src_w}x{src_h} is not set (W x H)")
        if fmt == "YUV420SP_U8" and (src_h % 2 or src_w % 2):
            raise GeError(f"{where}: YUV420SP_U8 needs an even image size, got {src_w}x{src_h}")
        if capacity is not None and self.src_nbytes() > capacity:
            raise GeError(f"{where}: a {src_w}x{src_h} {fmt} image is {self.src_nbytes()} bytes, more than "
                          f"max_src_image_size {capacity}")
        same = all(im == self.images[0] for im in self.images)  # one setting for the batch: no index to name
        for b, im in enumerate(self.images):
            at = where if same else f"{where} (batch index {b})"
            if im.scf:
                raise GeError(f"{at}: ge does not implement AIPP resize (scf) (crop, CSC, channel swap, "
                              "normalization and padding are supported)")
            pads = im.padding_size if im.padding else (0, 0, 0, 0)
            out_h, out_w = h - pads[0] - pads[1], w - pads[2] - pads[3]
            if out_h <= 0 or out_w <= 0:
                raise GeError(f"{at}: padding {list(pads)} leaves no image inside the model's {h}x{w}")
            if im.crop:
                (x0, y0), (cw, chh) = im.crop_pos, im.crop_size
                if (chh, cw) != (out_h, out_w):
                    raise GeError(f"{at}: crop {cw}x{chh} plus padding {list(pads)} does not make the model's "
                                  f"{w}x{h} (W x H)")
                if fmt == "YUV420SP_U8" and (x0 % 2 or y0 % 2):
                    raise GeError(f"{at}: load_start_pos_w/h must be even for YUV420SP_U8 (got {x0}, {y0})")
                if x0 < 0 or y0 < 0 or y0 + chh > src_h or x0 + cw > src_w:
                    raise GeError(f"{at}: crop {cw}x{chh} at ({x0}, {y0}) leaves the source image {src_w}x{src_h}")
            elif (src_h, src_w) != (out_h, out_w):
                raise GeError(f"{at}: source image {src_w}x{src_h} plus padding {list(pads)} does not make the "
                              f"model's {w}x{h} (W x H); crop it (crop: true) or give the model's size")


#: a static block's fields by type, as formats/aipp_config.py parses them from text
_CONFIG_BOOLS = ("crop", "padding", "csc_switch", "rbuv_swap_switch", "ax_swap_switch")
_CONFIG_SIZES = ("src_image_size_w", "src_image_size_h", "load_start_pos_w", "load_start_pos_h", "crop_size_w",
                 "crop_size_h", "top_padding_size", "bottom_padding_size", "left_padding_size", "right_padding_size")
_CONFIG_LISTS = {"matrix": (3, 3), "input_bias": (3,), "output_bias": (3,), "mean": (4,), "min": (4,), "var_reci": (4,)}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(1 << 63) <= v < (1 << 63)


def _is_number(v) -> bool:
    return _is_int(v) or (isinstance(v, float) and np.isfinite(v))


def _check_config(c, where: str) -> None:
    """GeError naming the field unless `c` is a static block of the types its text form has."""
    if not isinstance(c, dict):
        raise GeError(f"{where}: the AIPP config is {type(c).__name__}, not a block of fields")

    def field(key):
        if key not in c:
            raise GeError(f"{where}: the AIPP config has no {key}")
        return c[key]
    if field("input_format") not in CCE_FORMAT_CODES:
        raise GeError(f"{where}: input_format {c['input_format']!r} is not an AIPP input format")
    bad = next((k for k in _CONFIG_BOOLS if not isinstance(field(k), bool)), None) or \
        next((k for k in _CONFIG_SIZES if not (_is_int(field(k)) and c[k] >= 0)), None)
    if bad is None and not _is_number(field("padding_value")):
        bad = "padding_value"
    for key, shape in _CONFIG_LISTS.items():
        v = field(key)
        rows = v if len(shape) == 2 else [v]
        if bad is None and not (isinstance(v, list) and len(v) == shape[0] and all(
                isinstance(r, list) and len(r) == shape[-1] and all(
                    (_is_int if key in ("matrix", "input_bias", "output_bias") else _is_number)(x) for x in r)
                for r in rows)):
            bad = key
    if bad is not None:
        raise GeError(f"{where}: the AIPP config's {bad} is {c[bad]!r}, not what the field holds")

