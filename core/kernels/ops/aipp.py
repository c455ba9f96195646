"""ge::Aipp: ATC's AIPP preprocessing as one op, from a raw uint8 image to the model's NCHW input.
The one transform both AIPP modes run (compile/aipp.py inserts the node); they differ only in
where the parameters come from:
    static   the node's `config` attribute (the --insert_op_conf block, fixed at conversion);
    dynamic  a second input, `ascend_dynamic_aipp_data`: the bytes acl.mdl.set_input_aipp (or
             `--aipp_config`) writes at run time (model/aipp_params.py: their layout and checks).

Per image, in the AIPP unit's order: channel swap -> crop -> colour-space conversion (CSC) ->
normalization -> padding, then NCHW in the model's dtype. CSC follows ATC's formulas: from YUV,
out = (M (in - input_bias)) >> 8; to YUV (from RGB), out = ((M in) >> 8) + output_bias; saturated to
[0, 255] as the 8-bit unit's is. Normalization: (x - mean_chn_i - min_chn_i) * var_reci_chn_i.

Raw images (the static input keeps these shapes; the dynamic input is [N, max_src_image_size]
bytes, image b at byte b * src_bytes, src_bytes being the format's size of the source image):
    YUV420SP_U8   H*3/2 rows of W: the Y plane, then interleaved U,V rows (NV21: rbuv_swap_switch)
    RGB888_U8     H, W, 3
    XRGB8888_U8   H, W, 4        X first (RGBX with ax_swap_switch); X is dropped
    YUV400_U8     H, W, 1
"""
from __future__ import annotations

import numpy as np

from ...model.aipp_params import YUV_INPUTS, AippParams, ImageParams
from ...model.errors import GeError
from ...model.ir import Meta
from ..base import Kernel
from ..fused import GE_DOMAIN
from ..registry import register


def transform(raw: np.ndarray, p: AippParams, im: ImageParams, channels: int, dtype: np.dtype) -> np.ndarray:
    """One image: the raw bytes (at least p.src_nbytes()) -> [C, H, W] of `dtype`."""
    w, h = p.src_size
    fmt = p.input_format
    if fmt == "YUV420SP_U8":  # NV12 -> YUV444: each U,V pair covers a 2x2 block of Y
        x = np.empty((h, w, 3), np.uint8)
        x[:, :, 0] = raw[:h * w].reshape(h, w)
        x.reshape(h // 2, 2, w // 2, 2, 3)[..., 1:] = raw[h * w:h * w * 3 // 2].reshape(h // 2, 1, w // 2, 1, 2)
    else:
        x = raw[:p.src_nbytes()].reshape(h, w, {"RGB888_U8": 3, "XRGB8888_U8": 4, "YUV400_U8": 1}[fmt])
        if fmt == "XRGB8888_U8":
            first = 0 if p.ax_swap_switch else 1  # RGBX keeps X last
            x = x[:, :, first:first + 3]
    if p.rbuv_swap_switch and channels == 3:  # R<->B, or U<->V
        x = x[:, :, [0, 2, 1] if fmt == "YUV420SP_U8" else [2, 1, 0]]
    if im.crop:
        (x0, y0), (cw, chh) = im.crop_pos, im.crop_size
        x = x[y0:y0 + chh, x0:x0 + cw]
    x = x.transpose(2, 0, 1)  # planar from here: [C, H, W]
    if p.csc_switch:  # the unit's integer arithmetic done in floats, exactly; >> 8 is floor(/ 256)
        m = np.asarray(p.matrix, np.float64)
        # every partial sum is an integer of at most 255 * sum|M row|: exact in float32 below 2^24
        exact = np.float32 if np.abs(m).sum(axis=1).max() * 255 < 2 ** 24 else np.float64
        y = x.astype(exact)
        if fmt in YUV_INPUTS:
            y -= np.asarray(p.input_bias, exact)[:, None, None]
        y = (m.astype(exact) @ y.reshape(3, -1)).reshape(y.shape)
        np.floor(np.divide(y, exact(256), out=y), out=y)
        if fmt not in YUV_INPUTS:
            y += np.asarray(p.output_bias, exact)[:, None, None]
        x = np.clip(y, 0, 255, out=y).astype(np.float32, copy=False)
    else:
        x = x.astype(np.float32)
    x -= np.array([im.mean[i] + im.min[i] for i in range(channels)], np.float32)[:, None, None]
    x *= np.array(im.var_reci[:channels], np.float32)[:, None, None]
    if im.padding and any(im.padding_size):
        top, bottom, left, right = im.padding_size
        x = np.pad(x, ((0, 0), (top, bottom), (left, right)), constant_values=np.float32(p.padding_value))
    return x.astype(dtype, copy=False)


@register("Aipp", since=1, domain=GE_DOMAIN)
class Aipp(Kernel):
    """raw (uint8) [, ascend_dynamic_aipp_data (uint8)] -> Y, the model's NCHW input. Attributes:
    `input` (the model input's name, for messages), `shape` (Y's NCHW), `dtype` (Y's), `config` (the
    static block; absent in dynamic mode), `max_src_image_size` and `params_batch` (dynamic mode: how
    many images the parameters hold, a gear model's largest batch)."""

    def prepare(self):
        self.where = f"AIPP of input '{self.attr('input', '?')}'"
        self.shape = tuple(int(d) for d in self.attr("shape"))
        self.dtype = np.dtype(self.attr("dtype"))
        self.dynamic = len(self.inputs) > 1 and self.inputs[1] is not None
        if self.dynamic:  # (a gear's parameters may hold more images than it runs: the first are its)
            self.capacity = int(self.attr("max_src_image_size"))
            self.params_batch = int(self.attr("params_batch", self.shape[0]))
            self.static_params = None
        else:
            self.capacity = None
            self.static_params = AippParams.from_config(self.attr("config"), self.shape[0], self.where)
            self.static_params.check(self.shape, None, self.where)

    def infer(self):
        return [Meta(self.dtype, self.shape)]

    def params(self, xs) -> AippParams:
        if not self.dynamic:
            return self.static_params
        p = AippParams.from_bytes(xs[1], self.params_batch, self.where)
        p.check(self.shape, self.capacity, self.where)
        return p

    def compute(self, *xs):
        y = np.empty(self.shape, self.dtype)
        self.run(xs, [y], None)
        return [y]

    def run(self, xs, ys, ws):
        p = self.params(xs)
        n, ch = self.shape[:2]
        step = p.src_nbytes()
        raw = np.ascontiguousarray(xs[0]).reshape(-1)  # static: one image per batch row; dynamic: packed
        if raw.size < step * n:
            raise GeError(f"{self.where}: {raw.size} bytes hold fewer than {n} {p.src_size[0]}x{p.src_size[1]} "
                          f"{p.input_format} image(s)")
        for b in range(n):  # per batch image: ACL's parameters may differ per batch index
            np.copyto(ys[0][b], transform(raw[b * step:(b + 1) * step], p, p.images[b], ch, self.dtype))
