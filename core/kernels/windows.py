"""Spatial kernels (Conv, the pools, Resize, the norms over N, C, *spatial): the X/W and window
attributes, ONNX's auto_pad / pads resolution, and views of a padded input under one kernel tap."""
from __future__ import annotations

import numpy as np

from ..ir import Meta
from .planned import PlannedKernel


class SpatialKernel(PlannedKernel):
    """A planned kernel over NC[spatial] tensors."""

    # Conv and ConvTranspose: X and W, and the window attributes
    def x_and_w(self) -> tuple[Meta, Meta]:
        xm, wm = self.spatial_meta(0, "X"), self.spatial_meta(1, "W")
        if len(wm.shape) != len(xm.shape):
            raise self.fail(f"W has shape {tuple(wm.shape)}, X has shape {tuple(xm.shape)}: ranks differ")
        return xm, wm

    def kernel_of(self, wm: Meta) -> list:
        """W's spatial dims, which attribute kernel_shape (optional) must restate."""
        kernel = list(wm.shape[2:])
        ks = self.attrs.get("kernel_shape")
        if ks is not None and [int(v) for v in ks] != kernel:
            raise self.fail(f"kernel_shape {list(ks)} does not match W's shape {tuple(wm.shape)}")
        return kernel

    def strides_dilations(self, d: int) -> tuple[list, list]:
        strides, dil = self.ints("strides", d, 1), self.ints("dilations", d, 1)
        if any(s < 1 for s in strides) or any(v < 1 for v in dil):
            raise self.fail(f"strides {strides} and dilations {dil} must be positive")
        return strides, dil


def window_pads(k: SpatialKernel, in_sizes, kernel, strides, dilations, ceil_mode=False):
    """ONNX's auto_pad / pads resolution for Conv and the pools: (begin pads, end pads, output sizes)."""
    d = len(in_sizes)
    auto_pad = k.string("auto_pad", "NOTSET")
    dk = [(kk - 1) * dl + 1 for kk, dl in zip(kernel, dilations)]
    if auto_pad in ("NOTSET", ""):
        pads = k.ints("pads", 2 * d, 0)
        pb, pe = pads[:d], pads[d:]
        if any(p < 0 for p in pads):
            raise k.fail(f"negative pads {pads} are not supported")
        out = []
        for i in range(d):
            span = in_sizes[i] + pb[i] + pe[i] - dk[i]
            if span < 0:
                raise k.fail(f"kernel extent {dk[i]} is larger than the padded input {in_sizes[i] + pb[i] + pe[i]}"
                             f" on spatial axis {i}")
            o = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
            # a window must start inside the input or the begin padding
            if ceil_mode and (o - 1) * strides[i] >= in_sizes[i] + pb[i]:
                o -= 1
            out.append(o)
        return pb, pe, out
    if auto_pad == "VALID":
        out = []
        for i in range(d):
            span = in_sizes[i] - dk[i]
            if span < 0:
                raise k.fail(f"kernel extent {dk[i]} is larger than the input {in_sizes[i]} on spatial axis {i}")
            out.append((-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1)
        return [0] * d, [0] * d, out
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pb, pe, out = [], [], []
        for i in range(d):
            o = -(-in_sizes[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + dk[i] - in_sizes[i])
            small, big = total // 2, total - total // 2
            pb.append(small if auto_pad == "SAME_UPPER" else big)
            pe.append(big if auto_pad == "SAME_UPPER" else small)
            out.append(o)
        return pb, pe, out
    raise k.fail(f"auto_pad '{auto_pad}' is not supported")


def spatial_slices(ndim: int, axis: int, s: slice) -> tuple:
    return (slice(None),) * axis + (s,) + (slice(None),) * (ndim - axis - 1)


def zero_borders(xp: np.ndarray, pb, pe, value=0) -> None:
    """Fill the padding frame of a padded NC... buffer (the interior is copied separately)."""
    nd = xp.ndim
    for i, (b, e) in enumerate(zip(pb, pe)):
        if b:
            xp[spatial_slices(nd, 2 + i, slice(0, b))] = value
        if e:
            xp[spatial_slices(nd, 2 + i, slice(xp.shape[2 + i] - e, None))] = value


def kernel_position_view(xp: np.ndarray, pos, strides, dilations, out) -> np.ndarray:
    """The (N, C, *out) view of the inputs under one kernel position."""
    sl = tuple(slice(p * d, p * d + (o - 1) * s + 1, s) for p, d, s, o in zip(pos, dilations, strides, out))
    return xp[(slice(None), slice(None)) + sl]


def pool_window(k, spatial: list, dilations_and_ceil: bool = True) -> tuple:
    """A pooling window from a node's attributes: kernel_shape (required), strides, dilations and
    ceil_mode (when the op version has them), pads/auto_pad; checked. Returns (kernel, strides,
    dilations, pads at the beginnings, pads at the ends, output spatial shape)."""
    d = len(spatial)
    ks = k.attrs.get("kernel_shape")
    if ks is None:
        raise k.fail("attribute kernel_shape is required")
    kernel = [int(v) for v in ks]
    if len(kernel) != d or any(v < 1 for v in kernel):
        raise k.fail(f"kernel_shape {kernel} does not fit an input with {d} spatial dims")
    strides = k.ints("strides", d, 1)
    dil = k.ints("dilations", d, 1) if dilations_and_ceil else [1] * d
    ceil_mode = bool(int(k.attr("ceil_mode", 0))) if dilations_and_ceil else False
    if any(v < 1 for v in strides) or any(v < 1 for v in dil):
        raise k.fail(f"strides {strides} and dilations {dil} must be positive")
    pb, pe, out = window_pads(k, spatial, kernel, strides, dil, ceil_mode)
    if any(o <= 0 for o in out):
        raise k.fail(f"output spatial shape {out} is empty")
    return kernel, strides, dil, pb, pe, out
