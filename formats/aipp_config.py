"""ATC's AIPP configuration file (`--insert_op_conf`): one `aipp_op { key: value ... }` block per
model input it preprocesses, in protobuf text format (`#` comments, `key: value` or `key : value`).

`aipp_mode: static` (the default) fixes the parameters here; `aipp_mode: dynamic` gives only the
input (related_input_rank/name) and max_src_image_size, the largest raw image in bytes: the
parameters come at run time (acl.mdl.set_input_aipp, `--aipp_config`). Every field of ATC's
template is known here; a field ge cannot honour is refused naming it, as is any field the template
does not have.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.model.errors import GeError

INPUT_FORMATS = ("YUV420SP_U8", "XRGB8888_U8", "RGB888_U8", "YUV400_U8")
#: input formats of ATC's template that ge refuses (camera RAW and packed 4:2:2 formats)
UNSUPPORTED_FORMATS = ("NC1HWC0DI_FP16", "NC1HWC0DI_S8", "ARGB8888_U8", "YUYV_U8", "YUV422SP_U8", "AYUV444_U8",
                       "RAW10", "RAW12", "RAW16", "RAW24", "RGB16", "RGB20", "RGB24", "RGB8_IR", "RGB16_IR", "RGB24_IR")

_INTS = ("related_input_rank", "src_image_size_w", "src_image_size_h", "load_start_pos_w", "load_start_pos_h",
         "crop_size_w", "crop_size_h", "left_padding_size", "right_padding_size", "top_padding_size",
         "bottom_padding_size", "max_src_image_size", "resize_output_w", "resize_output_h",
         *(f"matrix_r{r}c{c}" for r in range(3) for c in range(3)),
         *(f"input_bias_{i}" for i in range(3)), *(f"output_bias_{i}" for i in range(3)))
_FLOATS = ("padding_value", *(f"{k}_chn_{i}" for k in ("mean", "min", "var_reci") for i in range(4)))
_BOOLS = ("crop", "padding", "csc_switch", "rbuv_swap_switch", "ax_swap_switch", "resize", "support_rotation",
          "single_line_mode")
_STRINGS = ("aipp_mode", "input_format", "related_input_name")
#: fields of the template whose effect ge does not implement; given a non-default value, refused
_REFUSED = {"resize": False, "support_rotation": False, "single_line_mode": False}

_MEAN_DEFAULT, _MIN_DEFAULT, _VAR_DEFAULT = 0.0, 0.0, 1.0


@dataclass
class AippConfig:
    """One aipp_op block, with ATC's defaults for what it does not say."""
    source: str  # where it came from, for messages: "<file> aipp_op #k"
    aipp_mode: str = "static"
    max_src_image_size: int = 0  # dynamic AIPP: the largest raw image, in bytes
    input_format: str = ""
    related_input_rank: int = 0
    related_input_name: str = ""
    src_image_size_w: int = 0  # 0: the model input's width
    src_image_size_h: int = 0
    crop: bool = False
    load_start_pos_w: int = 0
    load_start_pos_h: int = 0
    crop_size_w: int = 0  # 0: the model input's width (minus padding)
    crop_size_h: int = 0
    padding: bool = False
    left_padding_size: int = 0
    right_padding_size: int = 0
    top_padding_size: int = 0
    bottom_padding_size: int = 0
    padding_value: float = 0.0
    csc_switch: bool = False
    rbuv_swap_switch: bool = False
    ax_swap_switch: bool = False
    matrix: list = field(default_factory=lambda: [[0] * 3 for _ in range(3)])
    input_bias: list = field(default_factory=lambda: [0, 0, 0])
    output_bias: list = field(default_factory=lambda: [0, 0, 0])
    mean: list = field(default_factory=lambda: [_MEAN_DEFAULT] * 4)
    min: list = field(default_factory=lambda: [_MIN_DEFAULT] * 4)
    var_reci: list = field(default_factory=lambda: [_VAR_DEFAULT] * 4)
    given: set = field(default_factory=set, repr=False)  # the fields the block sets

    def as_dict(self) -> dict:
        """The settings as `ge inspect` shows them."""
        return {k: v for k, v in vars(self).items() if k not in ("source", "aipp_mode", "given")}


_TOKEN = re.compile(r'\s*(?:(#[^\n]*)|(\{)|(\})|("(?:[^"\\]|\\.)*")|([A-Za-z_][A-Za-z0-9_]*)\s*:\s*|([^\s{}#]+))')


def parse_aipp_config(text: str, path: str = "aipp config") -> list[AippConfig]:
    """The aipp_op blocks of an ATC AIPP configuration, checked field by field."""
    configs, pos, block = [], 0, None
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise GeError(f"{path}: cannot read '{text[pos:pos + 20].strip()}' (line {text.count(chr(10), 0, pos) + 1})")
        pos = m.end()
        comment, opening, closing, quoted, key, bare = m.groups()
        line = text.count("\n", 0, m.start()) + 1
        if comment:
            continue
        if bare == "aipp_op" or (bare and bare.startswith("aipp_op")):
            if block is not None:
                raise GeError(f"{path}: line {line}: aipp_op inside aipp_op")
            block = AippConfig(f"{path} aipp_op #{len(configs)}")
            rest = text[pos:].lstrip()
            if not rest.startswith("{"):
                raise GeError(f"{path}: line {line}: 'aipp_op' must open a block with '{{'")
            pos = len(text) - len(rest) + 1
            continue
        if closing:
            if block is None:
                raise GeError(f"{path}: line {line}: '}}' without an aipp_op block")
            configs.append(_checked(block))
            block = None
            continue
        if opening or block is None:
            raise GeError(f"{path}: line {line}: fields belong inside an 'aipp_op {{ ... }}' block")
        if key is None:
            raise GeError(f"{path}: line {line}: expected 'field: value', got '{quoted or bare}'")
        vm = _TOKEN.match(text, pos)
        value = None if vm is None else (vm.group(4) or vm.group(6))
        if value is None:
            raise GeError(f"{path}: line {line}: field '{key}' has no value")
        pos = vm.end()
        _set(block, key, value.strip('"'), f"{path}: line {line}: {key}")
    if block is not None:
        raise GeError(f"{path}: the last aipp_op block is not closed with '}}'")
    if not configs:
        raise GeError(f"{path}: no aipp_op block")
    ranks = [c.related_input_rank for c in configs]
    if len(set(ranks)) != len(ranks):
        raise GeError(f"{path}: two aipp_op blocks for input {ranks[0] if ranks.count(ranks[0]) > 1 else ranks[-1]} "
                      "(related_input_rank)")
    return configs


def _set(c: AippConfig, key: str, raw: str, where: str) -> None:
    c.given.add(key)
    if key in _INTS:
        try:
            v = int(raw)
        except ValueError:
            raise GeError(f"{where}: '{raw}' is not an integer") from None
        if key.startswith("matrix_"):
            c.matrix[int(key[8])][int(key[10])] = v
        elif key.startswith(("input_bias_", "output_bias_")):
            getattr(c, key[:-2])[int(key[-1])] = v
        else:
            if v < 0:
                raise GeError(f"{where}: {v} must not be negative")
            setattr(c, key, v)
    elif key in _FLOATS:
        try:
            v = float(raw)
        except ValueError:
            raise GeError(f"{where}: '{raw}' is not a number") from None
        if key == "padding_value":
            c.padding_value = v
        else:
            getattr(c, key.rsplit("_chn_", 1)[0])[int(key[-1])] = v
    elif key in _BOOLS:
        if raw not in ("true", "false", "1", "0"):
            raise GeError(f"{where}: '{raw}' is not true or false")
        v = raw in ("true", "1")
        if key in _REFUSED and v != _REFUSED[key]:
            raise GeError(f"{where}: ge does not implement AIPP {key} (static crop, CSC, channel swap, "
                          "normalization and padding are supported)")
        if key not in _REFUSED:
            setattr(c, key, v)
    elif key in _STRINGS:
        if key == "aipp_mode" and raw not in ("static", "dynamic"):
            raise GeError(f"{where}: '{raw}' is not an AIPP mode (static or dynamic)")
        if key == "input_format" and raw not in INPUT_FORMATS:
            why = "is not supported by ge" if raw in UNSUPPORTED_FORMATS else "is not an AIPP input format"
            raise GeError(f"{where}: '{raw}' {why} (supported: {', '.join(INPUT_FORMATS)})")
        setattr(c, key, raw)
    elif key in ("input_edge_idx", "raw_rgbir_to_f16_n", "cpadding_value"):
        raise GeError(f"{where}: ge does not implement this AIPP field")
    else:
        raise GeError(f"{where}: unknown AIPP field")


#: what a dynamic block may say: which input, and the largest raw image (the rest comes at run time)
_DYNAMIC_FIELDS = {"aipp_mode", "related_input_rank", "related_input_name", "max_src_image_size"}


def _checked(c: AippConfig) -> AippConfig:
    if c.aipp_mode == "dynamic":
        extra = sorted(c.given - _DYNAMIC_FIELDS)
        if extra:
            raise GeError(f"{c.source}: {extra[0]} is given at run time in dynamic AIPP (the block says only "
                          "aipp_mode, related_input_rank or related_input_name, and max_src_image_size)")
        if not c.max_src_image_size:
            raise GeError(f"{c.source}: dynamic AIPP needs max_src_image_size (the largest raw image, in bytes)")
        return c
    if "max_src_image_size" in c.given:
        raise GeError(f"{c.source}: max_src_image_size belongs to dynamic AIPP (aipp_mode: dynamic)")
    if not c.input_format:
        raise GeError(f"{c.source}: input_format is required")
    if c.input_format == "YUV420SP_U8" and c.crop and (c.load_start_pos_w % 2 or c.load_start_pos_h % 2):
        raise GeError(f"{c.source}: load_start_pos_w/h must be even for YUV420SP_U8 "
                      f"(got {c.load_start_pos_w}, {c.load_start_pos_h})")
    if not c.padding and any((c.left_padding_size, c.right_padding_size, c.top_padding_size,
                              c.bottom_padding_size)):
        raise GeError(f"{c.source}: padding sizes are given but padding is false")
    if not c.crop and any((c.load_start_pos_w, c.load_start_pos_h, c.crop_size_w, c.crop_size_h)):
        raise GeError(f"{c.source}: crop positions or sizes are given but crop is false")
    return c


def read_aipp_config(path: str) -> list[AippConfig]:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except OSError as e:
        raise GeError(f"{path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise GeError(f"{path}: not a text file") from None
    return parse_aipp_config(text, path)
