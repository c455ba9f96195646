"""AIPP (ATC's `--insert_op_conf`): the model's input becomes the raw image the camera or decoder
delivers, and one ge::Aipp node (kernels/ops/aipp.py: the transform, the raw layouts) turns it into
the model's NCHW input. The raw input keeps the input's name and is uint8.

static   the config's parameters are the node's attribute; the raw input is the image's shape
         ([N, H*3/2, W] for YUV420SP_U8, [N, H, W, 3|4|1] for RGB888/XRGB8888/YUV400).
dynamic  (`aipp_mode: dynamic`) the raw input is [N, max_src_image_size] bytes and the parameters
         a new model input, `ascend_dynamic_aipp_data` (model/aipp_params.py's byte layout), that
         acl.mdl.set_input_aipp or `--aipp_config` fills at run time.
"""
from __future__ import annotations

import numpy as np

from ..kernels.fused import GE_DOMAIN
from ..model.aipp_params import DYNAMIC_AIPP_INPUT, AippParams, params_nbytes
from ..model.errors import GeError
from ..model.ir import Graph, Node, Value


def insert_aipp(graph: Graph, configs, params_batch: int | None = None) -> list[dict]:
    """Rewrite `graph` in place: each config's input becomes its raw image. Returns what was done,
    per input, for the OM's record (`ge inspect`). `params_batch`: a gear's dynamic AIPP parameters
    hold this many images (the largest gear's batch, the same input in every gear, as ACL sizes it),
    its batch the first of them; default the input's batch."""
    done = []
    for c in configs:
        name = _input_name(graph, c)
        done.append(_insert(graph, name, c, params_batch))
    return done


def aipp_inputs(graph: Graph, configs) -> list[str]:
    """The inputs the configs take (each config's related input)."""
    return [_input_name(graph, c) for c in configs]


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


def _insert(g: Graph, name: str, c, params_batch: int | None) -> dict:
    v = g.value(name)
    where = f"{c.source} (input '{name}')"
    if not v.is_static or len(v.shape) != 4:
        raise GeError(f"{where}: AIPP needs a static NCHW input, the input has shape {v.shape}")
    if v.dtype.kind != "f":
        raise GeError(f"{where}: AIPP produces float data, the model's input is {v.dtype}")
    n, ch, h, w = v.shape
    attrs = {"input": name, "shape": [n, ch, h, w], "dtype": v.dtype.name}
    if c.aipp_mode == "dynamic":
        if DYNAMIC_AIPP_INPUT in g.values:
            raise GeError(f"{where}: ge takes one dynamic AIPP input per model (input '{DYNAMIC_AIPP_INPUT}')")
        raw_shape, inputs = (n, c.max_src_image_size), [name, DYNAMIC_AIPP_INPUT]
        params_batch = params_batch or n
        attrs.update(max_src_image_size=c.max_src_image_size, params_batch=params_batch)
        g.values[DYNAMIC_AIPP_INPUT] = Value(DYNAMIC_AIPP_INPUT, np.dtype(np.uint8), (params_nbytes(params_batch),))
        g.inputs.append(DYNAMIC_AIPP_INPUT)
        done = {"input": name, "mode": "dynamic", "raw_dtype": "uint8", "raw_shape": list(raw_shape),
                "model_shape": [n, ch, h, w], "max_src_image_size": c.max_src_image_size,
                "params_input": DYNAMIC_AIPP_INPUT, "params_batch": params_batch, **c.as_dict()}
    else:
        config = _completed(c, h, w)
        AippParams.from_config(config, n).check((n, ch, h, w), None, where)
        sw, sh = config["src_image_size_w"], config["src_image_size_h"]
        raw_shape = {"YUV420SP_U8": (n, sh * 3 // 2, sw), "RGB888_U8": (n, sh, sw, 3),
                     "XRGB8888_U8": (n, sh, sw, 4), "YUV400_U8": (n, sh, sw, 1)}[c.input_format]
        inputs, attrs["config"] = [name], config
        done = {"input": name, "mode": "static", "raw_dtype": "uint8", "raw_shape": list(raw_shape),
                "model_shape": [n, ch, h, w], **config}
    internal = f"{name}:aipp/model_input"
    for node in g.nodes:  # the model reads the AIPP result; the raw image takes the input's name
        node.inputs = [internal if i == name else i for i in node.inputs]
    g.outputs = [internal if o == name else o for o in g.outputs]
    g.values[name] = Value(name, np.dtype(np.uint8), raw_shape)
    g.values[internal] = Value(internal, v.dtype, (n, ch, h, w))
    g.nodes.insert(0, Node("Aipp", inputs, [internal], attrs, name=f"{name}:aipp", domain=GE_DOMAIN))
    g.opset.setdefault(GE_DOMAIN, g.opset.get("", 17))  # see kernels/fused.py
    return done


def _completed(c, h: int, w: int) -> dict:
    """The static block with ATC's defaults filled in from the model's size: the crop (or, without
    one, the source image) is the model's image inside the padding."""
    d = c.as_dict()
    pads = (c.top_padding_size, c.bottom_padding_size, c.left_padding_size, c.right_padding_size) \
        if c.padding else (0, 0, 0, 0)
    out_h, out_w = h - pads[0] - pads[1], w - pads[2] - pads[3]
    if c.crop:
        d["crop_size_h"], d["crop_size_w"] = c.crop_size_h or out_h, c.crop_size_w or out_w
    d["src_image_size_h"] = c.src_image_size_h or (out_h if not c.crop else h)
    d["src_image_size_w"] = c.src_image_size_w or (out_w if not c.crop else w)
    return d
