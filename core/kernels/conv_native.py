"""Conv through ge's native GEMM (native.py): per batch item and group, Y = clamp(W @ columns + bias).

The columns are never built: the GEMM reads them from the input through offset tables while it
packs its panels (B[k, n] = src[koff[k] + noff[n]]), so im2col costs no memory traffic of its own.
- pointwise (1x1, no padding): the source is X itself; stride 1 gives contiguous columns written
  straight into Y;
- otherwise the padded input is laid out once in its stride phases (conv.PhaseLayout), where every
  kernel tap is a unit-stride run. "flat" columns run over the phase rows, padding columns included,
  so every panel is one contiguous copy per row; the result lands in the workspace and one pass
  drops the padding columns. When those columns would waste too much work (small images), "dense"
  columns gather the output pixels themselves and the result is written straight into Y.
W is packed once, at build. Bias, Relu and Clip are applied by the GEMM as it stores (the kernel
absorbs a Relu/Clip epilogue the compiler fused onto the Conv).
"""
from __future__ import annotations

import math

import numpy as np

from .native import Native

#: flat columns while padding columns add at most this much work; dense (gathered) columns beyond
FLAT_WASTE = 1.15


class NativeConv:
    def __init__(self, k, nat: Native, w: np.ndarray, b: np.ndarray | None, clamp):
        from .conv import PhaseLayout  # conv imports this module
        self.nat, self.clamp = nat, clamp
        self.n, self.g, self.cg, self.ocg, self.oc = k.n, k.g, k.cg, k.ocg, k.oc
        self.kdim = k.cg * k.kp
        self.w_packed = k.shared_pack(("native", k.g), lambda w: [nat.pack_a(wg) for wg in
                                                               w.reshape(k.g, k.ocg, self.kdim)], w)
        self.bias = None if b is None else np.ascontiguousarray(b, np.float32).reshape(k.g, k.ocg)
        self.pointwise = all(v == 1 for v in k.kernel) and not k.has_pad
        itemsize = 4
        if self.pointwise:  # columns straight from X
            self.lay = None
            plane = math.prod(k.spatial)
            xst = [math.prod(k.spatial[i + 1:]) for i in range(len(k.spatial))]
            self.koff = np.arange(k.cg, dtype=np.int64) * plane
            self.noff = _grid(k.out, [s * st for s, st in zip(k.strides, xst)])
            self.group_step, self.item_step = k.cg * plane * itemsize, k.c * plane * itemsize
            self.flat = False
        else:
            lay = self.lay = PhaseLayout(k.n, k.c, k.spatial, k.pb, k.strides, k.kernel, k.dil, k.out, np.float32)
            plane = math.prod(lay.sq)
            phase_elems = k.n * k.c * plane
            strides_shape = tuple(k.strides)
            tap_off = np.array([np.ravel_multi_index(r, strides_shape) * phase_elems + off for _, r, off in lay.taps],
                               np.int64)
            self.koff = (np.arange(k.cg, dtype=np.int64)[:, None] * plane + tap_off[None, :]).ravel()
            self.flat = lay.waste <= FLAT_WASTE
            self.noff = np.arange(lay.L, dtype=np.int64) if self.flat else _grid(k.out, lay.pst)
            self.group_step, self.item_step = k.cg * plane * itemsize, k.c * plane * itemsize
            k.scratch.add("ph", lay.phase_shape, np.float32)
            if self.flat and lay.L != lay.dense:  # padding columns: the result goes through the workspace
                k.scratch.add("yflat", (k.n, k.oc, lay.L), np.float32)
        self.columns = len(self.noff)
        k.scratch.add("gemm", (nat.workspace_nbytes(k.ocg, self.columns, self.kdim, raw_a=False, gathered_b=True),),
                      np.uint8)

    def run(self, x: np.ndarray, y: np.ndarray, v: dict) -> None:
        if self.lay is not None:
            self.lay.fill(v["ph"], x)
            src = v["ph"].ctypes.data
        else:
            src = x.ctypes.data
        yflat = v.get("yflat")
        out = yflat if yflat is not None else y
        out_addr, ncols = out.ctypes.data, self.columns
        out_item, out_group = self.oc * ncols * 4, self.ocg * ncols * 4
        for i in range(self.n):
            for gi in range(self.g):
                self.nat.gemm(self.ocg, ncols, self.kdim, out_addr + i * out_item + gi * out_group, ncols,
                              ap=self.w_packed[gi], b=src + i * self.item_step + gi * self.group_step,
                              koff=self.koff, noff=self.noff,
                              bias_m=None if self.bias is None else self.bias[gi], clamp=self.clamp, ws=v["gemm"])
        if yflat is not None:
            np.copyto(y, self.lay.dense_view(yflat))


def _grid(out, steps) -> np.ndarray:
    """Offsets of the output pixels (C order) for per-axis element steps."""
    grids = np.meshgrid(*[np.arange(o, dtype=np.int64) * s for o, s in zip(out, steps)], indexing="ij")
    return sum(grids).ravel() if grids else np.zeros(1, np.int64)
