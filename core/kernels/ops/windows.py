"""Spatial kernels (Conv, the pools, Resize, the norms over N, C, *spatial): the X/W and window
attributes, ONNX's auto_pad / pads resolution, and views of a padded input under one kernel tap."""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..planned import PlannedKernel


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


def clamped_strides(strides, out, kernel, dilations) -> list[int]:
    """The strides a convolution's plans run by: a dim with one output position reads the same taps
    whatever its stride past the window's extent, so its stride is clamped there (still > 1, which the
    plans read as "not the input's size"): an absurd stride (2^31) cannot size the phase layout's loops
    and buffers."""
    return [s if o > 1 else min(s, (k - 1) * v + 2) for s, o, k, v in zip(strides, out, kernel, dilations)]


def window_pads(k: SpatialKernel, in_sizes, kernel, strides, dilations, ceil_mode=False, pool=False):
    """ONNX's auto_pad / pads resolution for Conv and the pools: (begin pads, end pads, output sizes).
    `pool`: the output sizes of onnxruntime's pools (pool_output_size), whose windows may be larger
    than the padded input."""
    d = len(in_sizes)
    auto_pad = k.string("auto_pad", "NOTSET")
    dk = [(kk - 1) * dl + 1 for kk, dl in zip(kernel, dilations)]
    if auto_pad in ("NOTSET", "", "VALID"):
        pads = k.ints("pads", 2 * d, 0) if auto_pad != "VALID" else [0] * (2 * d)
        pb, pe = pads[:d], pads[d:]
        if any(p < 0 for p in pads):
            raise k.fail(f"negative pads {pads} are not supported")
        if pool and any(b >= kk or e >= kk for b, e, kk in zip(pb, pe, kernel)):
            raise k.fail(f"pads {pads} must be smaller than kernel_shape {kernel} (as onnxruntime requires: "
                         f"a window would lie in the padding alone)")
        if pool:
            return pb, pe, [pool_output_size(k, i, in_sizes[i], pb[i], pe[i], dk[i], strides[i], ceil_mode)
                            for i in range(d)]
        out = []
        for i in range(d):
            span = in_sizes[i] + pb[i] + pe[i] - dk[i]
            if span < 0:
                raise k.fail(f"kernel extent {dk[i]} is larger than the padded input {in_sizes[i] + pb[i] + pe[i]}"
                             f" on spatial axis {i}")
            out.append(span // strides[i] + 1)
        return pb, pe, out
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


def pool_output_size(k: SpatialKernel, axis: int, size: int, begin: int, end: int, extent: int, stride: int,
                     ceil_mode: bool) -> int:
    """A pool's output size along one axis, as onnxruntime computes it: (padded size - window
    extent) / stride, rounded toward zero (not down: a window up to a stride larger than the padded
    input still gives one output, the pool of the part it covers: EfficientNet's AvgPool2d(320,
    ceil_mode=True) over a 7x7 map) or, with ceil_mode, up, but no window may start past the
    input and its begin padding; plus one. A size below zero is refused, zero is an empty output."""
    span = size + begin + end - extent
    if ceil_mode:
        out = -(-span // stride) + 1
        if (out - 1) * stride >= size + begin:
            out -= 1
    else:
        out = (span // stride if span >= 0 else -(-span // stride)) + 1
    if out < 0:
        raise k.fail(f"kernel extent {extent} is larger than the padded input {size + begin + end} on spatial axis "
                     f"{axis} by {-span}, twice the stride {stride} or more: no window fits")
    return out


def window_coverage(kernel, strides, dilations, pb, spatial, out) -> tuple[list, list]:
    """Per spatial axis: the kernel taps that read the input for some output (the others read only
    padding), and per output whether its window reads the input at all along that axis (a window
    larger than the input, or dilated over it, may not). Work and memory grow with the taps and
    the outputs, never with their product (a mutated model's 2^24 outputs by a 2^24 kernel)."""
    taps, covered = [], []
    for k, s, d, b, size, o in zip(kernel, strides, dilations, pb, spatial, out):
        b = max(int(b), 0)
        # tap j reads positions j*d - b + i*s (i = 0..o-1); only taps starting before the end can read
        j = np.arange(max(0, min(k, (size - 1 + b) // d + 1)) if size > 0 else 0, dtype=np.int64)
        start = j * d - b
        first = np.where(start >= 0, 0, (s - 1 - start) // s)  # the first output whose tap j is at >= 0
        taps.append([int(t) for t in np.flatnonzero((first < o) & (start + first * s < size))])
        # an output whose tap 0 lies inside the input is covered; one past the end is not; one whose
        # window starts in the front padding is covered when a later tap reaches the input
        cov = np.zeros(o, np.bool_)
        front = min(o, -(-b // s))
        cov[front:min(o, (size - 1 + b) // s + 1)] = size > 0
        if front and size > 0:
            behind = b - np.arange(front, dtype=np.int64) * s  # > 0: how far tap 0 is before position 0
            tap = -(-behind // d)
            cov[:front] = (tap < k) & (tap * d - behind < size)
        covered.append(cov)
    return taps, covered


def padded_extent(spatial, pb, out, strides, taps, dilations) -> list[int]:
    """Per axis, the size of a padded copy of the input that holds every window's taps that read
    the input (window_coverage's `taps`): a window may run past the end padding (ceil_mode, a kernel
    larger than the input), and taps that read padding alone are skipped, not padded for."""
    return [max(b + s, (o - 1) * st + (max(t) * d + 1 if t else 0))
            for s, b, o, st, t, d in zip(spatial, pb, out, strides, taps, dilations)]


def empty_windows(covered: list):
    """The outputs (a bool array of the output's spatial shape) whose window reads no input; None
    when every window reads some."""
    if all(c.all() for c in covered):
        return None
    full = covered[0]
    for c in covered[1:]:
        full = np.logical_and.outer(full, c)
    return ~full


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
    pb, pe, out = window_pads(k, spatial, kernel, strides, dil, ceil_mode, pool=True)
    return kernel, strides, dil, pb, pe, out
