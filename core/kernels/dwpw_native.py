"""The native plan of ge::DepthwisePointwise (conv.py): csrc/dwpw.c, one job over (batch item, band of
output rows). Each item computes its band's depthwise rows for every channel into its thread's band
buffer, then projects them with a single-threaded GEMM straight into Y: the depthwise output (the
block's expanded channels) never leaves the cache."""
from __future__ import annotations

import numpy as np

from .native import Act, CallCache, Native

#: the band buffer (one item's depthwise rows of every channel) stays about this size: in the L2
#: cache beside the input rows it reads and the GEMM's panels
BAND_BYTES = 128 << 10


def band_rows(channels: int, oh: int, ow: int, nr: int) -> int:
    """Output rows per band: as many as BAND_BYTES holds, fewer when that makes whole GEMM panels
    of nr columns (a tail panel costs a full one) without halving the band."""
    most = max(1, min(oh, BAND_BYTES // (channels * ow * 4)))
    for rows in range(most, most // 2, -1):
        if rows * ow % nr == 0:
            return rows
    return most


class NativeDepthwisePointwise:
    kind = "depthwise-pointwise"

    def __init__(self, k, nat: Native, act_d: Act | None, act_p: Act | None):
        dw, pw = k.dw, k.pw
        self.nat, self.act_d, self.act_p = nat, act_d, act_p
        self.c, self.oc = dw.c, pw.oc
        self.oh, self.ow = dw.out
        self.window = dict(kernel=tuple(dw.kernel), strides=tuple(dw.strides), dilations=tuple(dw.dil),
                           pads=tuple(dw.pb))
        self.band = band_rows(self.c, self.oh, self.ow, nat.nr)
        self.koff = np.arange(self.c, dtype=np.int64) * (self.band * self.ow)
        self.noff = np.arange(self.band * self.ow, dtype=np.int64)
        k.scratch.add("dwpw", (nat.dwpw_workspace_nbytes(channels=self.c, oc=self.oc, band=self.band, ow=self.ow),),
                      np.uint8)
        self.calls = CallCache()

    def pack(self, k, wd: np.ndarray, bd, wp: np.ndarray, bp) -> None:
        self.wd = np.ascontiguousarray(wd, np.float32).reshape(self.c, -1)  # a view when float32 already
        self.bd = None if bd is None else np.ascontiguousarray(bd, np.float32)
        self.wp = k.shared_pack(("native-dwpw",), lambda w: self.nat.pack_a(
            np.asarray(w, np.float32).reshape(self.oc, self.c)), wp)
        self.bp = None if bp is None else np.ascontiguousarray(bp, np.float32)

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: np.ndarray | None) -> None:
        ws = v["dwpw"]
        self.calls.get((x, y, z, ws), lambda: self.nat.dwpw_call(
            x, y, z, wd=self.wd, bd=self.bd, act_d=self.act_d, wp=self.wp, bp=self.bp, act_p=self.act_p,
            band=self.band, koff=self.koff, noff=self.noff, ws=ws, **self.window)).run()
