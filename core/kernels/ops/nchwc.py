"""Convolution in the blocked layout NCHW16c (csrc/nchwc.c): tensors [N][ceil(C/16)][H][W][16] with 16
channels innermost (zeros past C), on every native level (Native.nchwc_block; one AVX-512 vector, two
AVX2 ones), so that a tensor's size in this layout does not depend on the machine.
The weights are the vector operand, packed once (panels of output blocks, [icb][kh][kw][16 in][the
panel's output channels]), the input is read in
place a broadcast at a time, and the output is already the next convolution's input: a chain of
convolutions in this layout packs nothing per call (onnxruntime's MLAS runs CNNs this way).

NchwcConv plans one 2-D Conv (group 1) on blocked tensors, with bias, a residual Z in the same layout
and the activation the kernel applies as it stores; NchwcDepthwise the same for a depthwise Conv (group ==
channels, one output channel per group: csrc/nchwc_depthwise.c, the channels in the vector lanes); `reorder` converts NCHW <-> blocked. blocked.py's
ops run them (passes/nchwc_layout.py); benchmarks/nchwc_layers.py measures the kernel against ge's NCHW
plans and onnxruntime (docs/design-notes.md, "NCHWc")."""
from __future__ import annotations

import numpy as np

from ..native import Act, Native, PreparedCall, aligned_empty


def blocked_shape(shape: tuple, block: int) -> tuple:
    """The blocked layout's shape of an NCHW shape (n, c, h, w): (n, ceil(c / block), h, w, block)."""
    n, c, *spatial = shape
    return (n, -(-c // block), *spatial, block)


def blocked_empty(shape: tuple, block: int) -> np.ndarray:
    """An aligned float32 tensor of the blocked layout for NCHW `shape`. Its padding channels (past C)
    hold what the kernels write there: zeros from `reorder`, act(0) from NchwcConv (zero weights and
    bias); finite either way, and the next conv's zero weights ignore them."""
    bshape = blocked_shape(shape, block)
    return aligned_empty(int(np.prod(bshape))).reshape(bshape)


def reorder(nat: Native, x: np.ndarray, y: np.ndarray, to_blocked: bool) -> PreparedCall:
    """NCHW x -> blocked y (to_blocked), or blocked x -> NCHW y; both float32 and C-contiguous, prepared."""
    plain = x if to_blocked else y
    assert x.dtype == y.dtype == np.float32 and x.flags.c_contiguous and y.flags.c_contiguous
    n, c = plain.shape[:2]
    return nat.nchwc_reorder_call(x, y, n, c, int(np.prod(plain.shape[2:])), to_blocked)


def _out_size(size: int, kernel: int, stride: int, pad: int, dilation: int) -> int:
    """An output dimension of a convolution (pad: both ends' sum)."""
    return (size + pad - dilation * (kernel - 1) - 1) // stride + 1


def depthwise_weights(weight: np.ndarray, block: int) -> np.ndarray:
    """A depthwise convolution's W (c, 1, kh, kw) as float32 [ceil(c / block)][kh][kw][block], zeros
    past the channels (the blocked depthwise convolution's, and the int8 one's on AVX2 builds)."""
    c, _, kh, kw = weight.shape
    cb = -(-c // block)
    padded = np.zeros((cb * block, kh, kw), np.float32)
    padded[:c] = weight.reshape(c, kh, kw)
    wp = aligned_empty(padded.size)
    wp.reshape(cb, kh, kw, block)[...] = padded.reshape(cb, block, kh, kw).transpose(0, 2, 3, 1)
    return wp


def _padded_bias(bias: np.ndarray | None, size: int) -> np.ndarray:
    """The bias over `size` output channels (whole blocks), zeros past the real ones."""
    padded = np.zeros(size, np.float32)
    if bias is not None:
        padded[:len(bias)] = bias
    return padded


def _check_operands(x, y, z, x_shape, y_shape, block, planar: bool = False) -> None:
    shapes = x_shape if planar else blocked_shape(x_shape, block), blocked_shape(y_shape, block)
    assert x.shape == shapes[0] and y.shape == shapes[1] and (z is None or z.shape == shapes[1])
    assert all(a.dtype == np.float32 and a.flags.c_contiguous for a in (x, y) + ((z,) if z is not None else ()))


class NchwcConv:
    """A 2-D Conv of one group on blocked tensors: y = act(conv(x, w) + bias + z). planar: x is NCHW, not
    blocked (a stem's few input channels, MLAS's NCHW-input kernel: its output blocked without a reorder)."""

    def __init__(self, nat: Native, x_shape: tuple, oc: int, kernel: tuple, *, strides=(1, 1), pads=(0, 0, 0, 0),
                 dilations=(1, 1), act: Act | None = None, planar: bool = False):
        self.nat, self.block, self.act, self.planar = nat, nat.nchwc_block, act, planar
        n, c, h, w = x_shape
        kh, kw = kernel
        (sh, sw), (dh, dw) = strides, dilations
        oh, ow = _out_size(h, kh, sh, pads[0] + pads[2], dh), _out_size(w, kw, sw, pads[1] + pads[3], dw)
        self.x_shape, self.y_shape, self.oc, self.kernel = tuple(x_shape), (n, oc, oh, ow), oc, (kh, kw)
        b = self.block
        self.geometry = (n, 1 if planar else -(-c // b), -(-oc // b), h, w, oh, ow, kh, kw, sh, sw, pads[0], pads[1],
                         dh, dw, c, oc, int(planar))

    def pack(self, weight: np.ndarray, bias: np.ndarray | None) -> None:
        """W (oc, c, kh, kw) into panels of up to nchwc_group blocks of output channels, each
        [icb][kh][kw][ic][its blocks x B oc] (planar: [1][kh][kw][c][...]), and the bias into ocb * B
        floats; zeros past the channels (so the padding channels of Y hold act(0))."""
        b, group, (_, icb, ocb, *_) = self.block, self.nat.nchwc_group, self.geometry
        oc, c, kh, kw = weight.shape
        cin = c if self.planar else b  # input channels per block
        # straight from the weight into place: an intermediate padded copy doubled the page faults of
        # a load, which are most of a small model's packing time
        self.wp = aligned_empty(ocb * b * icb * cin * kh * kw)
        self.nat.nchwc_pack(np.ascontiguousarray(weight, np.float32), cin, ocb * b, group * b, self.wp)
        self.bias = _padded_bias(bias, ocb * b)

    def call(self, x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None) -> PreparedCall:
        """The conv of blocked x into blocked y (+ blocked z, which may be y), prepared."""
        _check_operands(x, y, z, self.x_shape, self.y_shape, self.block, self.planar)
        return self.nat.nchwc_conv_call(x, self.wp, self.bias, y, geometry=self.geometry, z=z, act=self.act)


class NchwcDepthwise:
    """A 2-D depthwise Conv (group == channels, channel multiplier 1: MobileNets') on blocked tensors:
    y = act(depthwise(x, w) + bias + z), the channels in the vector lanes. The interface of NchwcConv."""

    def __init__(self, nat: Native, x_shape: tuple, kernel: tuple, *, strides=(1, 1), pads=(0, 0, 0, 0),
                 dilations=(1, 1), act: Act | None = None):
        self.nat, self.block, self.act = nat, nat.nchwc_block, act
        n, c, h, w = x_shape
        kh, kw = kernel
        (sh, sw), (dh, dw) = strides, dilations
        oh, ow = _out_size(h, kh, sh, pads[0] + pads[2], dh), _out_size(w, kw, sw, pads[1] + pads[3], dw)
        self.x_shape, self.y_shape, self.oc, self.kernel = tuple(x_shape), (n, c, oh, ow), c, (kh, kw)
        self.geometry = (n, -(-c // self.block), h, w, oh, ow, kh, kw, sh, sw, pads[0], pads[1], dh, dw)

    def pack(self, weight: np.ndarray, bias: np.ndarray | None) -> None:
        """W (c, 1, kh, kw) into [cb][kh][kw][B] and the bias into cb * B floats; zeros past the channels
        (so the padding channels of Y hold act(0), plus Z's)."""
        self.wp = depthwise_weights(weight, self.block)
        self.bias = _padded_bias(bias, self.geometry[1] * self.block)

    def call(self, x: np.ndarray, y: np.ndarray, z: np.ndarray | None = None) -> PreparedCall:
        """The depthwise conv of blocked x into blocked y (+ blocked z, which may be y), prepared."""
        _check_operands(x, y, z, self.x_shape, self.y_shape, self.block)
        return self.nat.nchwc_depthwise_call(x, self.wp, self.bias, y, geometry=self.geometry, z=z, act=self.act)
