"""CenterCropPad, Col2Im, DeformConv and MaxRoiPool.

CenterCropPad copies the centred overlap of input and output (the rest is zeros). Col2Im adds each
kernel position's columns into a strided view of the padded image: one add per kernel position.
DeformConv samples the input bilinearly at every (kernel tap, output pixel) shifted by its offset,
all taps of an offset group at once (four gathers, one per corner), scales by the mask and
contracts the sampled columns with the weights per group: an im2col whose columns move. MaxRoiPool
takes, per pooled bin, the max over the bin's pixels with one masked reduction over all bins.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..registry import register
from ..values import ints


@register("CenterCropPad", since=18)
class CenterCropPad(Kernel):
    """Each axis in `axes` cropped (centred, the extra element at the end) or zero-padded (centred,
    the extra zero at the end) to `shape`."""
    #: the shape input sets the output shape: a computed one runs on the dynamic path
    shape_inputs = ((1, "shape"),)

    def prepare(self):
        xm = self.input_meta(0, "input_data")
        self.input_meta(1, "shape")
        if xm.dtype.kind in "OUS":
            raise self.fail("string tensors run on the dynamic path only")
        rank = len(xm.shape)
        axes = self.attr("axes")
        axes = list(range(rank)) if axes is None else [int(a) for a in axes]
        if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
            raise self.fail(f"axes {axes} are out of range or repeated for rank {rank}")
        target = ints(self.const(1, "shape"))
        if len(target) != len(axes) or any(t < 0 for t in target):
            raise self.fail(f"shape {target} must give one size >= 0 per axis ({len(axes)})")
        out = list(xm.shape)
        src, dst = [slice(None)] * rank, [slice(None)] * rank
        for a, t in zip(axes, target):
            a %= rank
            d = xm.shape[a]
            out[a] = t
            lo = abs(d - t) // 2
            if t < d:
                src[a] = slice(lo, lo + t)
            elif t > d:
                dst[a] = slice(lo, lo + d)
        self.src, self.dst = tuple(src), tuple(dst)
        self.out = Meta(xm.dtype, tuple(out))

    def infer(self):
        return [self.out]

    def compute(self, x, shape=None):
        y = np.zeros(self.out.shape, x.dtype)
        y[self.dst] = x[self.src]
        return [y]


def _spatial_attrs(k: Kernel, d: int):
    strides = ints(k.attr("strides") or [1] * d)
    dil = ints(k.attr("dilations") or [1] * d)
    pads = ints(k.attr("pads") or [0] * (2 * d))
    if len(strides) != d or len(dil) != d or len(pads) != 2 * d:
        raise k.fail(f"strides {strides}, dilations {dil}, pads {pads}: {d}, {d} and {2 * d} values expected")
    if min(strides + dil, default=1) < 1 or min(pads, default=0) < 0:
        raise k.fail("strides and dilations must be >= 1, pads >= 0")
    return strides, dil, pads


@register("Col2Im", since=18)
class Col2Im(Kernel):
    """[N, C * prod(block), L] columns summed back into [N, C, *image_shape]."""
    shape_inputs = ((1, "image_shape"), (2, "block_shape"))

    def prepare(self):
        xm = self.input_meta(0, "input")
        image = ints(self.const(1, "image_shape"))
        block = ints(self.const(2, "block_shape"))
        d = len(image)
        if len(block) != d or d == 0 or min(block) < 1:
            raise self.fail(f"image_shape {image} and block_shape {block} must have one size >= 1 per spatial axis")
        strides, dil, pads = _spatial_attrs(self, d)
        if len(xm.shape) != 3:
            raise self.fail(f"input has shape {tuple(xm.shape)}; [N, C * prod(block_shape), L] expected")
        n, ck, length = xm.shape
        k = math.prod(block)
        if ck % k:
            raise self.fail(f"input's {ck} rows are not a multiple of prod(block_shape) = {k}")
        blocks = [(i + pads[j] + pads[j + d] - ((b - 1) * dl + 1)) // s + 1
                  for j, (i, b, dl, s) in enumerate(zip(image, block, dil, strides))]
        if min(blocks) < 1 or math.prod(blocks) != length:
            raise self.fail(f"input has {length} columns; the image, block, pads, strides and dilations give "
                            f"{blocks} = {math.prod(blocks)} blocks")
        self.geom = (n, ck // k, image, block, blocks, strides, dil, pads)
        self.out = Meta(xm.dtype, (n, ck // k) + tuple(image))

    def infer(self):
        return [self.out]

    def compute(self, x, image_shape=None, block_shape=None):
        n, c, image, block, blocks, strides, dil, pads = self.geom
        d = len(image)
        padded = np.zeros((n, c) + tuple(i + pads[j] + pads[j + d] for j, i in enumerate(image)), x.dtype)
        cols = x.reshape((n, c) + tuple(block) + tuple(blocks))
        for pos in itertools.product(*[range(b) for b in block]):  # one add per kernel position
            view = tuple(slice(p * dl, p * dl + (nb - 1) * s + 1, s)
                         for p, dl, nb, s in zip(pos, dil, blocks, strides))
            padded[(slice(None), slice(None)) + view] += cols[(slice(None), slice(None)) + pos]
        inner = tuple(slice(pads[j], pads[j] + image[j]) for j in range(d))
        return [padded[(slice(None), slice(None)) + inner].copy()]


def _bilinear(x: np.ndarray, ph: np.ndarray, pw: np.ndarray) -> np.ndarray:
    """x [N, C, H, W] sampled at real positions ph, pw [N, ...] (zeros outside): [N, C, ...]."""
    n, c, h, w = x.shape
    h0, w0 = np.floor(ph), np.floor(pw)
    fh, fw = ph - h0, pw - w0
    h0, w0 = h0.astype(np.int64), w0.astype(np.int64)
    bidx = np.arange(n).reshape((n,) + (1,) * (ph.ndim - 1))
    flat = x.reshape(n, c, h * w)
    out = 0
    for dh, dw, wt in ((0, 0, (1 - fh) * (1 - fw)), (0, 1, (1 - fh) * fw), (1, 0, fh * (1 - fw)), (1, 1, fh * fw)):
        hh, ww = h0 + dh, w0 + dw
        ok = (hh >= 0) & (hh < h) & (ww >= 0) & (ww < w)
        idx = np.where(ok, hh * w + ww, 0)
        v = flat[bidx, :, idx]  # [N, ..., C]
        out = out + np.moveaxis(v, -1, 1) * (wt * ok)[:, None]
    return out


@register("DeformConv", since=19)
class DeformConv(Kernel):
    """2-D deformable convolution: Y[n, o] = sum over taps and input channels of
    W[o, c, tap] * mask * X[n, c] sampled (bilinear, zeros outside) at the tap's position shifted by
    its offset, plus B."""

    def prepare(self):
        xm, wm, om = self.input_meta(0, "X"), self.input_meta(1, "W"), self.input_meta(2, "offset")
        bm, mm = self.input_meta(3, "B", True), self.input_meta(4, "mask", True)
        if len(xm.shape) != 4 or len(wm.shape) != 4:
            raise self.fail(f"X {tuple(xm.shape)} and W {tuple(wm.shape)}: ge runs 2-D DeformConv ([N, C, H, W])")
        n, c, h, w = xm.shape
        oc, icg, kh, kw = wm.shape
        kernel = ints(self.attr("kernel_shape") or [kh, kw])
        if kernel != [kh, kw]:
            raise self.fail(f"kernel_shape {kernel} does not match W {tuple(wm.shape)}")
        group, og = int(self.attr("group", 1)), int(self.attr("offset_group", 1))
        if group < 1 or c != icg * group or oc % group:
            raise self.fail(f"X has {c} channels, W {tuple(wm.shape)}: group={group} does not split them")
        if og < 1 or c % og:
            raise self.fail(f"offset_group={og} does not divide the {c} input channels")
        strides, dil, pads = _spatial_attrs(self, 2)
        oh = (h + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)) // strides[0] + 1
        ow = (w + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1)) // strides[1] + 1
        if tuple(om.shape) != (n, og * kh * kw * 2, oh, ow):
            raise self.fail(f"offset has shape {tuple(om.shape)}; {(n, og * kh * kw * 2, oh, ow)} expected")
        if mm is not None and tuple(mm.shape) != (n, og * kh * kw, oh, ow):
            raise self.fail(f"mask has shape {tuple(mm.shape)}; {(n, og * kh * kw, oh, ow)} expected")
        if bm is not None and tuple(bm.shape) != (oc,):
            raise self.fail(f"B has shape {tuple(bm.shape)}; ({oc},) expected")
        self.geom = (n, c, oc, group, og, kh, kw, oh, ow, strides, dil, pads)
        self.out = Meta(xm.dtype, (n, oc, oh, ow))

    def infer(self):
        return [self.out]

    def compute(self, x, wgt, offset, b=None, mask=None):
        n, c, oc, group, og, kh, kw, oh, ow, strides, dil, pads = self.geom
        ct = np.float64 if x.dtype == np.float64 else np.float32
        off = offset.astype(ct).reshape(n, og, kh, kw, 2, oh, ow)
        base_h = (np.arange(oh) * strides[0] - pads[0]).reshape(1, 1, 1, 1, oh, 1) \
            + (np.arange(kh) * dil[0]).reshape(1, 1, kh, 1, 1, 1)
        base_w = (np.arange(ow) * strides[1] - pads[1]).reshape(1, 1, 1, 1, 1, ow) \
            + (np.arange(kw) * dil[1]).reshape(1, 1, 1, kw, 1, 1)
        ph, pw = base_h + off[:, :, :, :, 0], base_w + off[:, :, :, :, 1]  # [n, og, kh, kw, oh, ow]
        m = None if mask is None else mask.astype(ct).reshape(n, og, kh, kw, oh, ow)
        cg = c // og
        xf = x.astype(ct)
        cols = np.empty((n, c, kh, kw, oh, ow), ct)
        for g in range(og):  # one bilinear gather of all taps per offset group
            s = _bilinear(xf[:, g * cg:(g + 1) * cg], ph[:, g], pw[:, g])
            cols[:, g * cg:(g + 1) * cg] = s if m is None else s * m[:, g, None]
        icg, ocg = c // group, oc // group
        cols = cols.reshape(n, group, icg * kh * kw, oh * ow)
        wg = wgt.astype(ct).reshape(group, ocg, icg * kh * kw)
        y = np.matmul(wg[None], cols).reshape(n, oc, oh, ow)
        if b is not None:
            y += b.astype(ct).reshape(1, oc, 1, 1)
        return [y.astype(x.dtype)]


@register("MaxRoiPool", since=1)
class MaxRoiPool(Kernel):
    """Per region of interest [batch, x1, y1, x2, y2] (scaled by spatial_scale, rounded), the max over
    each of pooled_shape bins (Caffe's RoI pooling; an empty bin is 0)."""

    def prepare(self):
        xm, rm = self.input_meta(0, "X"), self.input_meta(1, "rois")
        if len(xm.shape) != 4 or len(rm.shape) != 2 or rm.shape[1] != 5:
            raise self.fail(f"X {tuple(xm.shape)} and rois {tuple(rm.shape)}: [N, C, H, W] and [R, 5] expected")
        pooled = self.attr("pooled_shape")
        if pooled is None or len(pooled) != 2 or min(pooled) < 1:
            raise self.fail("attribute 'pooled_shape' must give two sizes >= 1")
        self.ph, self.pw = int(pooled[0]), int(pooled[1])
        self.scale = float(self.attr("spatial_scale", 1.0))
        self.out = Meta(xm.dtype, (rm.shape[0], xm.shape[1], self.ph, self.pw))

    def infer(self):
        return [self.out]

    def compute(self, x, rois):
        n, c, h, w = x.shape
        r = rois.astype(np.float64)
        b = r[:, 0].astype(np.int64)
        if len(b) and (b.min() < 0 or b.max() >= n):
            raise self.fail(f"a region's batch index is outside [0, {n})")
        v = r[:, 1:5] * self.scale
        x1, y1, x2, y2 = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64).T  # halves away from 0
        rh, rw = np.maximum(y2 - y1 + 1, 1), np.maximum(x2 - x1 + 1, 1)
        bh, bw = rh / self.ph, rw / self.pw

        def bounds(start, size, count, limit):
            i = np.arange(count)
            lo = np.clip(np.floor(i * size[:, None]).astype(np.int64) + start[:, None], 0, limit)
            hi = np.clip(np.ceil((i + 1) * size[:, None]).astype(np.int64) + start[:, None], 0, limit)
            return lo, hi  # [R, count]

        hlo, hhi = bounds(y1, bh, self.ph, h)
        wlo, whi = bounds(x1, bw, self.pw, w)
        hh, ww = np.arange(h), np.arange(w)
        in_h = (hh >= hlo[:, :, None]) & (hh < hhi[:, :, None])  # [R, ph, H]
        in_w = (ww >= wlo[:, :, None]) & (ww < whi[:, :, None])  # [R, pw, W]
        xs = x[b].astype(np.float64)  # [R, C, H, W]
        # max over W within each column bin, then over H within each row bin
        colmax = np.where(in_w[:, None, None], xs[:, :, :, None, :], -np.inf).max(axis=-1)  # [R, C, H, pw]
        y = np.where(in_h[:, None, :, :, None], colmax[:, :, None], -np.inf).max(axis=3)  # [R, C, ph, pw]
        y[np.isneginf(y)] = 0
        return [y.astype(x.dtype)]
