"""The native plan of ge::DepthwisePointwise and ge::ExpandDepthwisePointwise (conv.py): csrc/dwpw.c, one
job over (batch item, band of output rows). Each item computes its band's depthwise rows for every
channel into its thread's band buffer (first expanding the input rows they read, with the expansion),
then projects them with a single-threaded GEMM straight into Y: the depthwise input and output (the
block's expanded channels) never leave the cache."""
from __future__ import annotations

import numpy as np

from .native import Act, CallCache, Native

#: the band buffer (one item's depthwise rows of every channel) stays about this size: in the L2
#: cache beside the input rows it reads and the GEMM's panels
BAND_BYTES = 128 << 10
#: with the expansion, the band buffer and the expanded rows it reads: larger bands, fewer rows
#: expanded twice (MobileNetV2's 144 channels at 56x56: bands of 9 rows, 11 expanded)
EXPAND_BAND_BYTES = 640 << 10


def rows_read(band: int, stride: int, kernel: int, dilation: int, height: int) -> int:
    """The most input rows a band of output rows reads."""
    return min(height, (band - 1) * stride + (kernel - 1) * dilation + 1)


def band_rows(channels: int, oh: int, ow: int, nr: int, expand: tuple | None = None) -> int:
    """Output rows per band: as many as the budget holds (expand: (h, w, stride, kernel, dilation) of
    the rows the expansion makes per band), fewer when that makes whole GEMM panels of nr columns (a
    tail panel costs a full one) without halving the band."""
    def nbytes(rows):
        more = 0 if expand is None else rows_read(rows, *expand[2:], expand[0]) * expand[1]
        return 4 * channels * (rows * ow + more)
    budget = BAND_BYTES if expand is None else EXPAND_BAND_BYTES
    most = next((rows for rows in range(oh, 0, -1) if nbytes(rows) <= budget), 1)
    for rows in range(most, most // 2, -1):
        if rows * ow % nr == 0:
            return rows
    return most


class NativeDepthwisePointwise:
    """k: the fused kernel, its Convs k.ex (the expansion, or None), k.dw and k.pw."""
    kind = "depthwise-pointwise"

    def __init__(self, k, nat: Native, act_d: Act | None, act_p: Act | None, act_e: Act | None = None):
        ex, dw, pw = k.ex, k.dw, k.pw
        self.nat, self.act_d, self.act_p, self.act_e = nat, act_d, act_p, act_e
        self.c, self.oc = dw.c, pw.oc
        self.oh, self.ow = dw.out
        self.window = dict(kernel=tuple(dw.kernel), strides=tuple(dw.strides), dilations=tuple(dw.dil),
                           pads=tuple(dw.pb))
        h, w = dw.spatial
        expand = None if ex is None else (h, w, dw.strides[0], dw.kernel[0], dw.dil[0])
        self.band = band_rows(self.c, self.oh, self.ow, nat.nr, expand)
        self.koff = np.arange(self.c, dtype=np.int64) * (self.band * self.ow)
        self.noff = np.arange(self.band * self.ow, dtype=np.int64)
        self.expand = None
        sizes = None
        if ex is not None:
            self.kind = "expand-depthwise-pointwise"
            self.cin = ex.c
            rows_in = rows_read(self.band, *expand[2:], h)
            self.expand = dict(act=act_e, rows_in=rows_in, ekoff=np.arange(self.cin, dtype=np.int64) * (h * w),
                               enoff=np.arange(rows_in * w, dtype=np.int64))
            sizes = dict(cin=self.cin, rows_in=rows_in, w=w)
        k.scratch.add("dwpw", (nat.dwpw_workspace_nbytes(channels=self.c, oc=self.oc, band=self.band, ow=self.ow,
                                                         expand=sizes),), np.uint8)
        self.calls = CallCache()

    def pack(self, k, wd: np.ndarray, bd, wp: np.ndarray, bp, we: np.ndarray | None = None, be=None) -> None:
        pack = lambda rows, cols: lambda w: self.nat.pack_a(np.asarray(w, np.float32).reshape(rows, cols))  # noqa: E731
        self.wd = np.ascontiguousarray(wd, np.float32).reshape(self.c, -1)  # a view when float32 already
        self.bd = None if bd is None else np.ascontiguousarray(bd, np.float32)
        self.wp = k.shared_pack(("native-dwpw",), pack(self.oc, self.c), wp)
        self.bp = None if bp is None else np.ascontiguousarray(bp, np.float32)
        if self.expand is not None:
            self.expand["we"] = k.shared_pack(("native-dwpw",), pack(self.c, self.cin), we)
            self.expand["be"] = None if be is None else np.ascontiguousarray(be, np.float32)

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: np.ndarray | None) -> None:
        ws = v["dwpw"]
        self.calls.get((x, y, z, ws), lambda: self.nat.dwpw_call(
            x, y, z, wd=self.wd, bd=self.bd, act_d=self.act_d, wp=self.wp, bp=self.bp, act_p=self.act_p,
            band=self.band, koff=self.koff, noff=self.noff, ws=ws, expand=self.expand, **self.window)).run()
