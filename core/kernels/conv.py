"""Conv and ConvTranspose (NCHW, 1-D/2-D/3-D), plus the helpers the other spatial kernels share.

Conv picks a plan in prepare():
- "native": float32 with constant weights, when ge's native kernels are built (conv_native.py):
  the direct convolution or the GEMM, both reading the input in place (no im2col) and applying
  bias, a residual and a fused Relu/Clip as they store; a 2-D depthwise conv runs the native
  depthwise kernel. The numpy plans below are the fallback and serve the other cases:
- "gemm": a pointwise conv (1x1, no padding): one GEMM per batch item, W[OC, C] @ X[C, H*W], straight
  into the output (a strided pointwise conv first gathers its input into the workspace);
- "taps" (float32, one group, C >= 32): the padded input is laid out once in the workspace, split into
  its stride phases (PhaseLayout) so that the inputs under one kernel tap are a (C, L) matrix with unit
  stride: one accumulating GEMM per tap, W_tap[OC, C] @ X_tap[C, L], through cblas (no im2col at all),
  then one pass drops the padding columns and adds the bias;
- "depthwise": group == C with one input channel per group: per block of channels, im2col columns
  (cache-sized) and one batched matmul over the channels of the block;
- "im2col": the general case (groups, few channels, small images): per phase group one copy of a
  strided view into the column matrix, then one GEMM (batched over groups) into the output.
With a bias, the GEMMs accumulate onto an output pre-filled with it (cheaper than adding it after).
ConvTranspose is a GEMM (W^T @ X) into workspace columns, scattered into the output with one add per
kernel position.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..ir import Meta
from .base import Kernel
from .blas import cblas
from .conv_native import NativeConv, NativeDepthwise
from .epilogue import ATTR as EPILOGUE, clamp_of
from .fused import GE_DOMAIN
from .native import native
from .registry import register

ALIGN = 64
#: im2col columns are built for at most this many bytes of batch items at a time
COLS_LIMIT = 64 << 20


# -- shared helpers ---------------------------------------------------------------------------------
class Scratch:
    """A workspace layout: named, 64-byte aligned typed regions carved out of the uint8 `ws`."""

    def __init__(self):
        self.nbytes = 0
        self.items: dict[str, tuple[int, tuple, np.dtype]] = {}

    def add(self, name: str, shape, dtype) -> None:
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        off = (self.nbytes + ALIGN - 1) // ALIGN * ALIGN
        self.items[name] = (off, shape, dtype)
        self.nbytes = off + math.prod(shape) * dtype.itemsize

    def carve(self, ws: np.ndarray) -> dict[str, np.ndarray]:
        out = {}
        for name, (off, shape, dtype) in self.items.items():
            n = math.prod(shape) * dtype.itemsize
            out[name] = ws[off:off + n].view(dtype).reshape(shape)
        return out


class SpatialKernel(Kernel):
    """Base of the kernels here: a planned `run`, and `compute`/`infer` derived from it.

    Subclasses set self.out_metas and self.scratch in prepare() and implement run(). The views of
    the workspace are cached per workspace buffer (the check is on the buffer object and address,
    and the cache holds a reference, so a recycled address cannot alias a stale view)."""

    out_metas: list[Meta]
    scratch: Scratch

    def infer(self):
        return list(self.out_metas)

    def workspace_nbytes(self) -> int:
        return self.scratch.nbytes

    def views(self, ws) -> dict[str, np.ndarray]:
        if not self.scratch.items:
            return {}
        cache = getattr(self, "_view_cache", None)
        if cache is not None and cache[3] is ws:  # the same array as last run (a task's bound view)
            return cache[2]
        owner, addr = ws if ws.base is None else ws.base, _addr(ws)
        if cache is not None and cache[0] is owner and cache[1] == addr:
            return cache[2]
        if ws.nbytes < self.scratch.nbytes:
            raise self.fail(f"workspace of {ws.nbytes} bytes, {self.scratch.nbytes} needed")
        v = self.scratch.carve(ws)
        self.derive(v)
        self._view_cache = (owner, addr, v, ws)
        return v

    def derive(self, v: dict) -> None:
        """Add views (or call arguments) derived from the workspace views; cached with them."""

    def compute(self, *xs):
        other = self.built_for(xs)
        if other is not self:
            return other.compute(*xs)
        xs = [None if x is None else np.ascontiguousarray(x) for x in xs]
        ys = [np.empty(m.shape, m.dtype) for m in self.out_metas]
        ws = np.empty(self.scratch.nbytes, np.uint8) if self.scratch.nbytes else None
        self.run(xs, ys, ws)
        return ys

    # attribute helpers
    def ints(self, key, n, default):
        v = self.attrs.get(key)
        if v is None:
            return [default] * n
        v = [int(a) for a in v]
        if len(v) != n:
            raise self.fail(f"attribute {key} has {len(v)} values, {n} expected")
        return v

    def string(self, key, default):
        v = self.attrs.get(key, default)
        return v.decode() if isinstance(v, bytes) else str(v)

    def spatial_meta(self, index: int, what: str, min_rank: int = 3) -> Meta:
        m = self.inputs[index] if index < len(self.inputs) else None
        if m is None:
            raise self.fail(f"input {index} ({what}) is missing")
        if len(m.shape) < min_rank:
            raise self.fail(f"input {index} ({what}) has shape {tuple(m.shape)}, rank >= {min_rank} expected")
        return m

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


# -- the phase layout: a padded input split by stride phase, each phase flattened ----------------------
class PhaseLayout:
    """The padded input, split into its stride phases (prod(strides) of them; one for stride 1), each phase
    a dense (nb, C, *Sq) block with one slack row, so that the inputs under one kernel position are a view
    with unit stride along the flattened output.

    Coordinate u (padded) = q * s + r: phase r, position q. A kernel tap k reads phase (k*dil) % s at
    offset (k*dil) // s. Over the "flat" output index (o0 * prod(Sq[1:]) + o1 * prod(Sq[2:]) + ...) every
    tap is a contiguous run of L = O0 * prod(Sq[1:]) elements: the columns past O[d] in the inner dims
    are garbage that the consumer drops. Every element of the buffer is written (input or zero) on
    fill(), so the garbage is finite.
    """

    def __init__(self, nb, c, spatial, pb, strides, kernel, dil, out, dtype):
        self.nb, self.c, self.spatial, self.pb, self.strides = nb, c, list(spatial), list(pb), list(strides)
        self.kernel, self.dil, self.out = list(kernel), list(dil), list(out)
        d = len(spatial)
        offmax = [((k - 1) * v) // s for k, v, s in zip(kernel, dil, strides)]
        sq = [o + m for o, m in zip(out, offmax)]
        sq[0] += 1  # slack: the last run of a tap may spill into one more row
        self.sq = sq
        self.pst = [math.prod(sq[i + 1:]) for i in range(d)]  # element strides inside one phase
        self.phase_count = math.prod(strides)
        self.phase_shape = tuple(strides) + (nb, c) + tuple(sq)
        self.L = out[0] * self.pst[0]
        self.dense = math.prod(out)
        self.waste = self.L / self.dense
        self.itemsize = np.dtype(dtype).itemsize
        # fill plan per phase: the interior copied from x, the rest zeroed
        self.fill_plan = []
        for r in itertools.product(*[range(s) for s in strides]):
            dst, src, ok = [], [], True
            for i in range(d):
                s, p = strides[i], pb[i]
                q_lo = max(0, -((r[i] - p) // s))  # first q with q*s + r - p >= 0
                q_hi = min(sq[i], (spatial[i] - 1 + p - r[i]) // s + 1)  # past the last q inside x
                if q_hi <= q_lo:
                    ok = False
                    dst.append((0, 0))
                    src.append(slice(0, 0))
                    continue
                x0 = q_lo * s + r[i] - p
                dst.append((q_lo, q_hi))
                src.append(slice(x0, x0 + (q_hi - q_lo - 1) * s + 1, s))
            self.fill_plan.append((r, dst, src, ok))
        # kernel taps grouped by phase: (cols slices over the kernel dims, phase, element offset, counts,
        # element strides over the taps)
        self.groups = []
        for r in itertools.product(*[range(s) for s in strides]):
            ksl, cnt, kst, off = [], [], [], 0
            for i in range(d):
                ks = [k for k in range(kernel[i]) if (k * dil[i]) % strides[i] == r[i]]
                if not ks:
                    break
                g = math.gcd(dil[i], strides[i])
                kstep = strides[i] // g
                ksl.append(slice(ks[0], ks[-1] + 1, kstep))
                cnt.append(len(ks))
                kst.append((dil[i] // g) * self.pst[i])
                off += ((ks[0] * dil[i]) // strides[i]) * self.pst[i]
            else:
                self.groups.append((tuple(ksl), r, off, tuple(cnt), tuple(kst)))
        self.taps = []
        for k in itertools.product(*[range(v) for v in kernel]):
            r = tuple((kk * v) % s for kk, v, s in zip(k, dil, strides))
            off = sum(((kk * v) // s) * p for kk, v, s, p in zip(k, dil, strides, self.pst))
            self.taps.append((k, r, off))

    def fill(self, ph: np.ndarray, x: np.ndarray) -> None:
        """Write the padded input into its phases: the input where it lands, zeros elsewhere."""
        for r, dst, src, ok in self.fill_plan:
            p = ph[r]
            if not ok:
                p[...] = 0
                continue
            for i, (lo, hi) in enumerate(dst):
                if lo:
                    p[spatial_slices(p.ndim, 2 + i, slice(0, lo))] = 0
                if hi < self.sq[i]:
                    p[spatial_slices(p.ndim, 2 + i, slice(hi, None))] = 0
            inner = (slice(None), slice(None)) + tuple(slice(lo, hi) for lo, hi in dst)
            np.copyto(p[inner], x[(slice(None), slice(None)) + tuple(src)])

    def _flat(self, ph, r, off):
        p = ph[r].reshape(self.nb, self.c, -1)
        return p[:, :, off:]

    def group_views(self, ph, flat: bool):
        """Per phase group: (kernel-dims slices of cols, view (nb, C, *counts, L) or (nb, C, *counts, *out))."""
        isz = self.itemsize
        res = []
        for ksl, r, off, cnt, kst in self.groups:
            base = self._flat(ph, r, off)
            st = base.strides[:2] + tuple(k * isz for k in kst)
            if flat:
                v = as_strided(base, base.shape[:2] + cnt + (self.L,), st + (isz,), writeable=False)
            else:
                v = as_strided(base, base.shape[:2] + cnt + tuple(self.out),
                               st + tuple(p * isz for p in self.pst), writeable=False)
            res.append((ksl, v))
        return res

    def dense_view(self, flat: np.ndarray) -> np.ndarray:
        """The (nb, OC, *out) view of a (nb, OC, L) flat result without the garbage columns."""
        nb, oc = flat.shape[:2]
        full = flat.reshape((nb, oc, self.out[0]) + tuple(self.sq[1:]))
        return full[(slice(None), slice(None), slice(None)) + tuple(slice(0, o) for o in self.out[1:])]


#: the "taps" plan: at least this many input channels (the K of each GEMM), at most this much waste
TAPS_MIN_C = 32
TAPS_WASTE = 1.15
#: depthwise: the im2col columns of a block of channels take about this much (they stay in the L2 cache)
DW_BLOCK_BYTES = 512 << 10


# -- Conv --------------------------------------------------------------------------------------------
@register("Conv", since=1)
class Conv(SpatialKernel):
    #: FusedConv: input 3 (Z, the output's shape) is added to the result, before the epilogue
    residual = False

    def prepare(self):
        xm, wm = self.x_and_w()
        n, c = xm.shape[:2]
        spatial = list(xm.shape[2:])
        d = len(spatial)
        oc, cg = wm.shape[:2]
        kernel = self.kernel_of(wm)
        g = int(self.attr("group", 1))
        if g < 1 or c != cg * g or oc % g:
            raise self.fail(f"group={g} does not fit X with {c} channels and W of shape {tuple(wm.shape)}")
        strides, dil = self.strides_dilations(d)
        pb, pe, out = window_pads(self, spatial, kernel, strides, dil)
        if any(o <= 0 for o in out):
            raise self.fail(f"output spatial shape {out} is empty")
        bm = self.inputs[2] if len(self.inputs) > 2 else None
        if bm is not None and tuple(bm.shape) != (oc,):
            raise self.fail(f"B has shape {tuple(bm.shape)}, ({oc},) expected")
        dt = xm.dtype
        self.out_metas = [Meta(dt, (n, oc) + tuple(out))]
        self.n, self.c, self.oc, self.g, self.cg, self.ocg = n, c, oc, g, cg, oc // g
        self.spatial, self.kernel, self.strides, self.dil, self.pb, self.pe, self.out = \
            spatial, kernel, strides, dil, pb, pe, out
        self.p_out = math.prod(out)
        self.kp = math.prod(kernel)
        self.has_pad = any(pb) or any(pe)
        self.scratch = Scratch()
        w = self.consts[1] if len(self.consts) > 1 else None
        b = self.consts[2] if len(self.consts) > 2 else None
        self.w_const = w
        self.b_col = None if b is None else b.reshape(oc, 1)

        nat = native()
        depthwise = g == c and cg == 1 and g > 1
        if nat is not None and dt == np.float32 and w is not None and (not depthwise or d == 2):
            self.plan = "native"
            clamp = clamp_of(self.attrs.get(EPILOGUE))
            self.native = NativeDepthwise(self, nat, w, b, clamp) if depthwise else \
                NativeConv(self, nat, w, b, clamp, self.residual)
            self.absorbs_epilogue = self.native.absorbs
            self.uses_native = True
            return
        if all(k == 1 for k in kernel) and not self.has_pad:
            self.plan = "gemm"
            self.strided_pointwise = any(s != 1 for s in strides)
            if self.strided_pointwise:
                self.scratch.add("xs", (n, c) + tuple(out), dt)
            self.w_mat = None if w is None else w.reshape(g, self.ocg, cg) if g > 1 else w.reshape(oc, cg)
            return
        if g == c and cg == 1 and g > 1:
            self.plan = "depthwise"
            self.mult = oc // c
            self.lay = PhaseLayout(n, c, spatial, pb, strides, kernel, dil, out, dt)
            self.scratch.add("ph", self.lay.phase_shape, dt)
            self.scratch.add("acc", (n, oc, self.lay.L), dt)
            self.cb = max(1, min(c, DW_BLOCK_BYTES // (self.kp * self.lay.L * dt.itemsize)))
            self.scratch.add("cols", (self.cb,) + tuple(kernel) + (self.lay.L,), dt)
            self.w3 = None if w is None else w.reshape(c, self.mult, self.kp)
            return
        if self._taps_fit(n, c, g, dt, pb, strides, kernel, dil, out, spatial):
            self.plan = "taps"
            self.scratch.add("ph", self.lay.phase_shape, dt)
            self.scratch.add("yflat", (n, oc, self.lay.L), dt)
            if w is None:
                self.scratch.add("wt", (self.kp, oc, c), dt)
            self.wt = None if w is None else self.shared_pack(("taps",), self._pack_taps, w)  # shared across shapes
            return
        self.plan = "im2col"
        kg = cg * self.kp
        per_item = c * self.kp * self.p_out * dt.itemsize
        self.nb = max(1, min(n, COLS_LIMIT // max(per_item, 1)))
        self.lay = PhaseLayout(self.nb, c, spatial, pb, strides, kernel, dil, out, dt)
        self.scratch.add("ph", self.lay.phase_shape, dt)
        self.scratch.add("cols", (self.nb, c) + tuple(kernel) + tuple(out), dt)
        self.w_mat = None if w is None else (w.reshape(g, self.ocg, kg) if g > 1 else w.reshape(oc, kg))

    def _taps_fit(self, n, c, g, dt, pb, strides, kernel, dil, out, spatial) -> bool:
        """One accumulating GEMM per kernel tap straight from the padded input (no im2col): for float32,
        one group, enough channels for a GEMM with K = C, and little waste in the flat layout."""
        if cblas().sgemm is None or dt != np.float32 or g != 1 or self.kp == 1 or c < TAPS_MIN_C:
            return False
        self.lay = PhaseLayout(n, c, spatial, pb, strides, kernel, dil, out, dt)
        return self.lay.waste <= TAPS_WASTE

    def _pack_taps(self, w):
        # (OC, C, *k) -> (taps, OC, C): tap t's weights as one contiguous GEMM operand
        return np.ascontiguousarray(np.moveaxis(w.reshape(self.oc, self.c, self.kp), 2, 0))

    def derive(self, v):
        if self.plan == "im2col":
            v["_groups"] = self.lay.group_views(v["ph"], False)
        if self.plan == "depthwise":
            v["_groups"] = self.lay.group_views(v["ph"], True)
        if self.plan == "taps":
            lay, isz = self.lay, self.inputs[0].dtype.itemsize
            wt = self.wt if self.wt is not None else v["wt"]
            ph, yflat = v["ph"], v["yflat"]
            ldb = math.prod(lay.sq)
            bl = cblas()
            calls = []
            for b in range(self.n):
                c_ptr = yflat[b].ctypes.data
                for t, (_, r, off) in enumerate(lay.taps):
                    calls.append((bl.ROW_MAJOR, bl.NO_TRANS, bl.NO_TRANS, self.oc, lay.L, self.c, 1.0,
                                  wt[t].ctypes.data, self.c, ph[r][b].ctypes.data + off * isz, ldb,
                                  0.0 if t == 0 else 1.0, c_ptr, lay.L))
            v["_calls"] = calls

    def _run_taps(self, x, w, b, y, v):
        self.lay.fill(v["ph"], x)
        if self.wt is None:
            np.copyto(v["wt"], np.moveaxis(w.reshape(self.oc, self.c, self.kp), 2, 0))
        sgemm = cblas().sgemm
        for args in v["_calls"]:
            sgemm(*args)
        self._store(v["yflat"], b, y)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if not y.flags.c_contiguous:  # the plans write through reshaped views of the output
            tmp = np.empty(y.shape, y.dtype)
            self.run(xs, [tmp], ws)
            np.copyto(y, tmp)
            return
        if not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        v = self.views(ws) if self.scratch.items else {}
        if self.plan == "native":  # first: the per-task cost of a model's every Conv
            self.native.run(x, y, v, xs[3] if self.residual else None)
            return
        w = self.w_const if self.w_const is not None else xs[1]
        b = None
        if len(xs) > 2 and xs[2] is not None:
            b = self.b_col if self.b_col is not None else xs[2].reshape(self.oc, 1)
        n, oc, g = self.n, self.oc, self.g
        y3 = y.reshape(n, oc, self.p_out)
        if self.plan == "gemm":
            if self.strided_pointwise:
                xsub = v["xs"]
                np.copyto(xsub, x[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in self.strides)])
                x = xsub
            wm = self.w_mat if self.w_mat is not None else (
                w.reshape(g, self.ocg, self.cg) if g > 1 else w.reshape(oc, self.cg))
            if g == 1:
                self._gemm(wm, x.reshape(n, self.c, self.p_out), y3, b)
            else:
                np.matmul(wm, x.reshape(n, g, self.cg, self.p_out), out=y.reshape(n, g, self.ocg, self.p_out))
                if b is not None:
                    np.add(y3, b, out=y3)
        elif self.plan == "taps":
            self._run_taps(x, w, b, y, v)
        elif self.plan == "depthwise":
            self._run_depthwise(x, w, b, y, v)
        else:
            self._run_im2col(x, w, b, y, v)
        if self.residual:
            np.add(y, xs[3], out=y)

    def _run_depthwise(self, x, w, b, y, v):
        """Per block of channels: the block's im2col columns (kept in cache), then one batched matmul
        (C_block x (mult x taps) @ (taps x L)) into the flat accumulator; then the store pass."""
        lay = self.lay
        lay.fill(v["ph"], x)
        c, m, cb, kp, L = self.c, self.mult, self.cb, self.kp, lay.L
        w3 = self.w3 if self.w3 is not None else w.reshape(c, m, kp)
        cols, acc = v["cols"], v["acc"]
        for i in range(self.n):
            for c0 in range(0, c, cb):
                c1 = min(c, c0 + cb)
                k = c1 - c0
                cc = cols[:k]
                for ksl, gv in v["_groups"]:
                    np.copyto(cc[(slice(None),) + ksl], gv[i, c0:c1])
                np.matmul(w3[c0:c1], cc.reshape(k, kp, L), out=acc[i, c0 * m:c1 * m].reshape(k, m, L))
        self._store(acc, b, y)

    def _store(self, flat, b, y):
        """y = the dense part of a flat (nb, OC, L) result, plus the bias, in one pass."""
        dense = self.lay.dense_view(flat)
        if b is not None:
            np.add(dense, b.reshape((self.oc,) + (1,) * len(self.out)), out=y)
        else:
            np.copyto(y, dense)

    def _gemm(self, wm, xm, ym, b):
        """ym[i] = wm @ xm[i] (+ b) for stacks xm (k, K, N), ym (k, M, N). With a bias and cblas, the
        output is first filled with the bias and the GEMM accumulates onto it (beta = 1): cheaper than
        a separate pass adding the bias to the result."""
        k, m, nn = ym.shape
        kk = xm.shape[1]
        bl = cblas()
        if (b is not None and bl.sgemm is not None and ym.dtype == np.float32 and wm.dtype == np.float32
                and wm.flags.c_contiguous and xm.flags.c_contiguous and ym.flags.c_contiguous):
            np.copyto(ym, b)
            wp, xp, yp = _addr(wm), _addr(xm), _addr(ym)
            for i in range(k):
                bl.sgemm(bl.ROW_MAJOR, bl.NO_TRANS, bl.NO_TRANS, m, nn, kk, 1.0, wp, kk, xp + i * kk * nn * 4, nn,
                         1.0, yp + i * m * nn * 4, nn)
            return
        if k == 1:
            np.matmul(wm, xm[0], out=ym[0])
        else:
            np.matmul(wm, xm, out=ym)
        if b is not None:
            np.add(ym, b, out=ym)

    def _run_im2col(self, x, w, b, y, v):
        g, nb, lay = self.g, self.nb, self.lay
        kg = self.cg * self.kp
        ck = self.c * self.kp
        wm = self.w_mat if self.w_mat is not None else (
            w.reshape(g, self.ocg, kg) if g > 1 else w.reshape(self.oc, kg))
        ph, cols_all = v["ph"], v["cols"]
        for b0 in range(0, self.n, nb):
            b1 = min(self.n, b0 + nb)
            k = b1 - b0
            lay.fill(ph[(slice(None),) * len(self.strides) + (slice(0, k),)] if k < nb else ph, x[b0:b1])
            cols = cols_all[:k]
            for ksl, view in v["_groups"]:
                np.copyto(cols[(slice(None), slice(None)) + ksl], view[:k])
            dst = y[b0:b1].reshape(k, self.oc, self.p_out)
            if g == 1:
                self._gemm(wm, cols.reshape(k, ck, self.p_out), dst, b)
            else:
                np.matmul(wm, cols.reshape(k, g, kg, self.p_out), out=dst.reshape(k, g, self.ocg, self.p_out))
                if b is not None:
                    np.add(dst, b, out=dst)


def _addr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@register("FusedConv", since=1, domain=GE_DOMAIN)
class FusedConv(Conv):
    """Conv(X, W, B) + Z, Z a tensor of the output's shape (a residual), then the node's epilogue:
    passes.fuse_conv_add. The native GEMM adds Z as it stores; the numpy plans add it after."""
    residual = True

    def prepare(self):
        super().prepare()
        z = self.inputs[3] if len(self.inputs) > 3 else None
        out = self.out_metas[0]
        if z is None or z.dtype != out.dtype or tuple(z.shape) != tuple(out.shape):
            got = "missing" if z is None else f"{z.dtype} {tuple(z.shape)}"
            raise self.fail(f"input 3 (Z) is {got}, {out.dtype} {tuple(out.shape)} expected")
        if self.g != 1:
            raise self.fail(f"group={self.g}: a residual is fused into one-group convolutions only")


# -- ConvTranspose -----------------------------------------------------------------------------------
@register("ConvTranspose", since=1)
class ConvTranspose(SpatialKernel):
    def prepare(self):
        xm, wm = self.x_and_w()
        n, c = xm.shape[:2]
        spatial = list(xm.shape[2:])
        d = len(spatial)
        g = int(self.attr("group", 1))
        if wm.shape[0] != c or g < 1 or c % g:
            raise self.fail(f"W of shape {tuple(wm.shape)} and group={g} do not fit X with {c} channels")
        ocg = wm.shape[1]
        oc = ocg * g
        kernel = self.kernel_of(wm)
        strides, dil = self.strides_dilations(d)
        opad = self.ints("output_padding", d, 0)
        dk = [(k - 1) * dl + 1 for k, dl in zip(kernel, dil)]
        full = [s * (i - 1) + op + e for s, i, op, e in zip(strides, spatial, opad, dk)]
        auto_pad = self.string("auto_pad", "NOTSET")
        oshape = self.attrs.get("output_shape")
        if oshape is not None:
            oshape = [int(v) for v in oshape]
            if len(oshape) == d + 2:
                oshape = oshape[2:]
            if len(oshape) != d:
                raise self.fail(f"output_shape {oshape} does not have {d} spatial dims")
        elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            oshape = [i * s for i, s in zip(spatial, strides)]
        if auto_pad not in ("NOTSET", "", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise self.fail(f"auto_pad '{auto_pad}' is not supported")
        if oshape is not None:
            pb, pe = [], []
            for f, o in zip(full, oshape):
                total = f - o
                if auto_pad == "SAME_UPPER":
                    pb.append(total // 2)
                    pe.append(total - total // 2)
                else:
                    pb.append(total - total // 2)
                    pe.append(total // 2)
            out = oshape
        elif auto_pad == "VALID":
            pb, pe, out = [0] * d, [0] * d, full
        else:
            pads = self.ints("pads", 2 * d, 0)
            pb, pe = pads[:d], pads[d:]
            out = [f - b_ - e for f, b_, e in zip(full, pb, pe)]
        if any(o <= 0 for o in out):
            raise self.fail(f"output spatial shape {out} is empty")
        bm = self.inputs[2] if len(self.inputs) > 2 else None
        if bm is not None and tuple(bm.shape) != (oc,):
            raise self.fail(f"B has shape {tuple(bm.shape)}, ({oc},) expected")
        dt = xm.dtype
        self.n, self.c, self.g, self.cg, self.oc, self.ocg = n, c, g, c // g, oc, ocg
        self.spatial, self.kernel, self.out = spatial, kernel, out
        self.kp, self.p_in = math.prod(kernel), math.prod(spatial)
        self.out_metas = [Meta(dt, (n, oc) + tuple(out))]
        self.scratch = Scratch()
        self.scratch.add("cols", (n, oc) + tuple(kernel) + tuple(spatial), dt)
        # one scatter-add per kernel position: output slice <- columns slice (clipped to the output)
        self.scatter = []
        for pos in itertools.product(*[range(k) for k in kernel]):
            ysl, csl = [], []
            for i in range(d):
                off = pos[i] * dil[i] - pb[i]  # output coordinate of input 0
                s = strides[i]
                i0 = max(0, -(off // s))  # the first input landing at or after output 0
                i1 = min(spatial[i], (out[i] - 1 - off) // s + 1) if out[i] - 1 - off >= 0 else 0
                if i1 <= i0:
                    break
                o0 = off + i0 * s
                ysl.append(slice(o0, o0 + (i1 - i0 - 1) * s + 1, s))
                csl.append(slice(i0, i1))
            else:
                self.scatter.append(((slice(None), slice(None)) + tuple(ysl),
                                     (slice(None), slice(None)) + tuple(pos) + tuple(csl)))
        w = self.consts[1] if len(self.consts) > 1 else None
        self.w_t = None if w is None else self._wt(w)
        b = self.consts[2] if len(self.consts) > 2 else None
        self.b_b = None if b is None else b.reshape((oc,) + (1,) * d)

    def _wt(self, w):
        # (C, OCg, *k) -> (G, OCg*kp, Cg), a transposed view
        return w.reshape(self.g, self.cg, self.ocg * self.kp).transpose(0, 2, 1)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        wt = self.w_t if self.w_t is not None else self._wt(xs[1])
        cols = self.views(ws)["cols"]
        n, g = self.n, self.g
        if g == 1:
            np.matmul(wt[0], x.reshape(n, self.c, self.p_in), out=cols.reshape(n, self.oc * self.kp, self.p_in))
        else:
            np.matmul(wt, x.reshape(n, g, self.cg, self.p_in),
                      out=cols.reshape(n, g, self.ocg * self.kp, self.p_in))
        if len(xs) > 2 and xs[2] is not None:
            b = self.b_b if self.b_b is not None else xs[2].reshape((self.oc,) + (1,) * len(self.out))
            np.copyto(y, b)
        else:
            y[...] = 0
        for ysl, csl in self.scatter:
            yv = y[ysl]
            np.add(yv, cols[csl], out=yv)
