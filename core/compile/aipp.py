"""Static AIPP (ATC's `--insert_op_conf`): the model's input becomes the raw image the camera or
decoder delivers, and the model's first tasks do what the NPU's AIPP unit does, in its order:
channel swap -> crop -> colour-space conversion (CSC) -> normalization -> padding, then the layout
change to the model's NCHW and its dtype.

The raw input keeps the input's name and is uint8:
    YUV420SP_U8   [N, H*3/2, W]   NV12: the Y plane, then interleaved U,V rows (NV21: rbuv_swap_switch)
    RGB888_U8     [N, H, W, 3]
    XRGB8888_U8   [N, H, W, 4]    X first (RGBX with ax_swap_switch); X is dropped
    YUV400_U8     [N, H, W, 1]
CSC follows ATC's formulas: from YUV, out = (M (in - input_bias)) >> 8; to YUV (from RGB),
out = ((M in) >> 8) + output_bias; the result saturates to [0, 255] as the 8-bit unit's does.
Normalization: (x - mean_chn_i - min_chn_i) * var_reci_chn_i, per output channel. The steps are
ordinary ONNX ops in the graph (Slice, Gather, MatMul, Pad ...), compiled like the rest of it.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GeError
from ..model.ir import Graph, Node, Value

F32 = np.dtype(np.float32)
YUV_INPUTS = ("YUV420SP_U8", "YUV400_U8")


def insert_aipp(graph: Graph, configs) -> list[dict]:
    """Rewrite `graph` in place: each config's input becomes its raw image. Returns what was done,
    per input, for the OM's record (`ge inspect`)."""
    done = []
    for c in configs:
        name = _input_name(graph, c)
        done.append(_insert(graph, name, c))
    return done


def _input_name(graph: Graph, c) -> str:
    if c.related_input_name:
        if c.related_input_name not in graph.inputs:
            raise GeError(f"{c.source}: related_input_name '{c.related_input_name}' is not a model input "
                          f"({', '.join(graph.inputs)})")
        return c.related_input_name
    if c.related_input_rank >= len(graph.inputs):
        raise GeError(f"{c.source}: related_input_rank {c.related_input_rank}, but the model has "
                      f"{len(graph.inputs)} input(s)")
    return graph.inputs[c.related_input_rank]


def _insert(g: Graph, name: str, c) -> dict:
    v = g.value(name)
    where = f"{c.source} (input '{name}')"
    if not v.is_static or len(v.shape) != 4:
        raise GeError(f"{where}: AIPP needs a static NCHW input, the input has shape {v.shape}")
    n, ch, h, w = v.shape
    want_c = 1 if c.input_format == "YUV400_U8" else 3
    if ch != want_c:
        raise GeError(f"{where}: {c.input_format} gives {want_c} channel(s), the model's input has {ch} "
                      f"(NCHW {list(v.shape)})")
    if v.dtype.kind != "f":
        raise GeError(f"{where}: AIPP produces float data, the model's input is {v.dtype}")
    if c.csc_switch and c.input_format == "YUV400_U8":
        raise GeError(f"{where}: csc_switch needs 3 channels; YUV400_U8 has one")
    pads = (c.top_padding_size, c.bottom_padding_size, c.left_padding_size, c.right_padding_size) if c.padding \
        else (0, 0, 0, 0)
    out_h, out_w = h - pads[0] - pads[1], w - pads[2] - pads[3]  # before padding
    if out_h <= 0 or out_w <= 0:
        raise GeError(f"{where}: padding {list(pads)} leaves no image inside the model's {h}x{w}")
    crop_h = (c.crop_size_h or out_h) if c.crop else None
    crop_w = (c.crop_size_w or out_w) if c.crop else None
    src_h = c.src_image_size_h or (out_h if not c.crop else h)
    src_w = c.src_image_size_w or (out_w if not c.crop else w)
    if c.crop:
        if (crop_h, crop_w) != (out_h, out_w):
            raise GeError(f"{where}: crop {crop_w}x{crop_h} plus padding {list(pads)} does not make the model's "
                          f"{w}x{h} (W x H)")
        if c.load_start_pos_h + crop_h > src_h or c.load_start_pos_w + crop_w > src_w:
            raise GeError(f"{where}: crop {crop_w}x{crop_h} at ({c.load_start_pos_w}, {c.load_start_pos_h}) leaves "
                          f"the source image {src_w}x{src_h}")
    elif (src_h, src_w) != (out_h, out_w):
        raise GeError(f"{where}: source image {src_w}x{src_h} plus padding {list(pads)} does not make the model's "
                      f"{w}x{h} (W x H); crop it (crop: true) or give the model's size")
    if c.input_format == "YUV420SP_U8" and (src_h % 2 or src_w % 2):
        raise GeError(f"{where}: YUV420SP_U8 needs an even image size, got {src_w}x{src_h}")

    b = _Builder(g, name)
    raw_shape = {"YUV420SP_U8": (n, src_h * 3 // 2, src_w), "RGB888_U8": (n, src_h, src_w, 3),
                 "XRGB8888_U8": (n, src_h, src_w, 4), "YUV400_U8": (n, src_h, src_w, 1)}[c.input_format]
    model_dtype = v.dtype
    internal = b.fresh("model_input")
    for node in g.nodes:  # the model reads the AIPP result; the raw image takes the input's name
        node.inputs = [internal if i == name else i for i in node.inputs]
    g.outputs = [internal if o == name else o for o in g.outputs]
    g.values[name] = Value(name, np.dtype(np.uint8), raw_shape)

    x = b.op("Cast", [name], to=1)
    if c.input_format == "YUV420SP_U8":  # NV12 -> YUV444: each U,V pair covers a 2x2 block of Y
        y = b.op("Slice", [x, b.ints([0]), b.ints([src_h]), b.ints([1])])
        y = b.op("Unsqueeze", [y, b.ints([3])])
        uv = b.op("Slice", [x, b.ints([src_h]), b.ints([src_h * 3 // 2]), b.ints([1])])
        uv = b.op("Reshape", [uv, b.ints([n, src_h // 2, 1, src_w // 2, 1, 2])])
        uv = b.op("Expand", [uv, b.ints([n, src_h // 2, 2, src_w // 2, 2, 2])])
        uv = b.op("Reshape", [uv, b.ints([n, src_h, src_w, 2])])
        x = b.op("Concat", [y, uv], axis=3)
    elif c.input_format == "XRGB8888_U8":
        first = 0 if c.ax_swap_switch else 1  # RGBX keeps X last
        x = b.op("Slice", [x, b.ints([first]), b.ints([first + 3]), b.ints([3])])
    if c.rbuv_swap_switch and want_c == 3:  # R<->B, or U<->V
        order = [0, 2, 1] if c.input_format == "YUV420SP_U8" else [2, 1, 0]
        x = b.op("Gather", [x, b.ints(order)], axis=3)
    if c.crop:
        x = b.op("Slice", [x, b.ints([c.load_start_pos_h, c.load_start_pos_w]),
                           b.ints([c.load_start_pos_h + crop_h, c.load_start_pos_w + crop_w]), b.ints([1, 2])])
    if c.csc_switch:
        m = b.const(np.array(c.matrix, np.float32).T)  # x @ M^T: one output channel per matrix row
        if c.input_format in YUV_INPUTS:
            x = b.op("Sub", [x, b.const(np.array(c.input_bias, np.float32))])
            x = b.op("Floor", [b.op("Div", [b.op("MatMul", [x, m]), b.const(np.float32(256))])])
        else:
            x = b.op("Floor", [b.op("Div", [b.op("MatMul", [x, m]), b.const(np.float32(256))])])
            x = b.op("Add", [x, b.const(np.array(c.output_bias, np.float32))])
        x = b.op("Clip", [x, b.const(np.float32(0)), b.const(np.float32(255))])
    offset = np.array([c.mean[i] + c.min[i] for i in range(want_c)], np.float32)
    scale = np.array(c.var_reci[:want_c], np.float32)
    if offset.any():
        x = b.op("Sub", [x, b.const(offset)])
    if (scale != 1).any():
        x = b.op("Mul", [x, b.const(scale)])
    x = b.op("Transpose", [x], perm=[0, 3, 1, 2])
    if any(pads):
        x = b.op("Pad", [x, b.ints([0, 0, pads[0], pads[2], 0, 0, pads[1], pads[3]]),
                         b.const(np.float32(c.padding_value))])
    if model_dtype != F32:
        x = b.op("Cast", [x], to=10 if model_dtype == np.float16 else 11)
    b.op("Identity", [x], out=internal)
    g.values[internal] = Value(internal, model_dtype, (n, ch, h, w))
    return {"input": name, "raw_dtype": "uint8", "raw_shape": list(raw_shape), "model_shape": [n, ch, h, w],
            **c.as_dict()}


class _Builder:
    """Nodes and constants of one input's AIPP steps, named after the input."""

    def __init__(self, g: Graph, name: str):
        self.g, self.prefix, self.k = g, f"{name}:aipp", 0

    def fresh(self, what: str) -> str:
        self.k += 1
        return f"{self.prefix}/{what}{self.k}"

    def const(self, a) -> str:
        t = self.fresh("const")
        self.g.initializers[t] = np.asarray(a)
        return t

    def ints(self, values) -> str:
        return self.const(np.array(values, np.int64))

    def op(self, op_type: str, inputs: list, out: str | None = None, **attrs) -> str:
        out = out or self.fresh(op_type.lower())
        self.g.nodes.insert(self._position(), Node(op_type, list(inputs), [out], attrs, name=f"{out}:{op_type}"))
        return out

    def _position(self) -> int:
        """AIPP nodes go before the model's (the graph is re-sorted by the passes anyway)."""
        return sum(1 for n in self.g.nodes if n.name.startswith(self.prefix + "/"))
