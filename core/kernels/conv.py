"""Conv and ConvTranspose (NCHW, 1-D/2-D/3-D), plus the helpers the other spatial kernels share.

Conv picks one of three plans in prepare():
- "gemm": a pointwise conv (1x1, no padding): one GEMM per batch item, W[OC, C] @ X[C, H*W], straight
  into the output (a strided pointwise conv first gathers its input into the workspace);
- "depthwise": group == C with one input channel per group: a multiply-accumulate over the kernel
  positions, broadcasting the weights over the pixels, into the output;
- "im2col": pad once into the workspace, one copy of a strided view into the column matrix, one GEMM
  (batched over groups) into the output.
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
        owner = ws if ws.base is None else ws.base
        addr = ws.__array_interface__["data"][0]
        cache = getattr(self, "_view_cache", None)
        if cache is not None and cache[0] is owner and cache[1] == addr:
            return cache[2]
        if ws.nbytes < self.scratch.nbytes:
            raise self.fail(f"workspace of {ws.nbytes} bytes, {self.scratch.nbytes} needed")
        v = self.scratch.carve(ws)
        self._view_cache = (owner, addr, v)
        return v

    def compute(self, *xs):
        metas = [None if x is None else Meta(np.asarray(x).dtype, np.shape(x)) for x in xs]
        if any(m is not None and k is not None and (m.dtype != k.dtype or tuple(m.shape) != tuple(k.shape))
               for m, k in zip(metas, self.inputs)):
            other = type(self)(self.attrs, metas, self.consts, opset=self.opset, name=self.name,
                               num_outputs=self.num_outputs)
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


def window_view(xp: np.ndarray, kernel, strides, dilations, out, kernel_first=True) -> np.ndarray:
    """The (N, C, *kernel, *out) (or (N, C, *out, *kernel)) strided view of windows over a padded input."""
    sp = xp.strides[2:]
    kst = tuple(s * d for s, d in zip(sp, dilations))
    ost = tuple(s * t for s, t in zip(sp, strides))
    if kernel_first:
        return as_strided(xp, xp.shape[:2] + tuple(kernel) + tuple(out), xp.strides[:2] + kst + ost, writeable=False)
    return as_strided(xp, xp.shape[:2] + tuple(out) + tuple(kernel), xp.strides[:2] + ost + kst, writeable=False)


def kernel_position_view(xp: np.ndarray, pos, strides, dilations, out) -> np.ndarray:
    """The (N, C, *out) view of the inputs under one kernel position."""
    sl = tuple(slice(p * d, p * d + (o - 1) * s + 1, s) for p, d, s, o in zip(pos, dilations, strides, out))
    return xp[(slice(None), slice(None)) + sl]


# -- Conv --------------------------------------------------------------------------------------------
@register("Conv", since=1)
class Conv(SpatialKernel):
    def prepare(self):
        xm = self.spatial_meta(0, "X")
        wm = self.spatial_meta(1, "W")
        if len(wm.shape) != len(xm.shape):
            raise self.fail(f"W has shape {tuple(wm.shape)}, X has shape {tuple(xm.shape)}: ranks differ")
        n, c = xm.shape[:2]
        spatial = list(xm.shape[2:])
        d = len(spatial)
        oc, cg = wm.shape[:2]
        kernel = list(wm.shape[2:])
        ks = self.attrs.get("kernel_shape")
        if ks is not None and [int(v) for v in ks] != kernel:
            raise self.fail(f"kernel_shape {list(ks)} does not match W's shape {tuple(wm.shape)}")
        g = int(self.attr("group", 1))
        if g < 1 or c != cg * g or oc % g:
            raise self.fail(f"group={g} does not fit X with {c} channels and W of shape {tuple(wm.shape)}")
        strides = self.ints("strides", d, 1)
        dil = self.ints("dilations", d, 1)
        if any(s < 1 for s in strides) or any(v < 1 for v in dil):
            raise self.fail(f"strides {strides} and dilations {dil} must be positive")
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
        self.b_col = None if b is None else b.reshape((oc,) + (1,) * 1)

        pointwise = all(k == 1 for k in kernel) and not self.has_pad
        if pointwise:
            self.plan = "gemm"
            self.strided_pointwise = any(s != 1 for s in strides)
            if self.strided_pointwise:
                self.scratch.add("xs", (n, c) + tuple(out), dt)
            self.w_mat = None if w is None else w.reshape(g, self.ocg, cg) if g > 1 else w.reshape(oc, cg)
            return
        if g == c and cg == 1 and g > 1:
            self.plan = "depthwise"
            self.mult = oc // c
            self.padded_shape = (n, c) + tuple(s + b_ + e for s, b_, e in zip(spatial, pb, pe))
            if self.has_pad:
                self.scratch.add("xp", self.padded_shape, dt)
            self.scratch.add("tmp", (n, c, self.mult) + tuple(out), dt)
            self.positions = list(itertools.product(*[range(k) for k in kernel]))
            self.w_dw = None if w is None else self._dw_weights(w)
            return
        self.plan = "im2col"
        kg = cg * self.kp
        per_item = c * self.kp * self.p_out * dt.itemsize
        self.nb = max(1, min(n, COLS_LIMIT // max(per_item, 1)))
        self.padded_shape = (self.nb, c) + tuple(s + b_ + e for s, b_, e in zip(spatial, pb, pe))
        if self.has_pad:
            self.scratch.add("xp", self.padded_shape, dt)
        self.scratch.add("cols", (self.nb, c) + tuple(kernel) + tuple(out), dt)
        self.w_mat = None if w is None else (w.reshape(g, self.ocg, kg) if g > 1 else w.reshape(oc, kg))

    def _dw_weights(self, w):
        # (C, mult, *kernel) -> per kernel position, a (C, mult, 1, ...) array broadcasting over pixels
        wr = w.reshape((self.c, self.mult, self.kp))
        ones = (1,) * len(self.out)
        return [np.ascontiguousarray(wr[:, :, i]).reshape((self.c, self.mult) + ones) for i in range(self.kp)]

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        w = self.w_const if self.w_const is not None else xs[1]
        b = None
        if len(xs) > 2 and xs[2] is not None:
            b = self.b_col if self.b_col is not None else xs[2].reshape(self.oc, 1)
        v = self.views(ws) if self.scratch.items else {}
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
                if n == 1:
                    np.matmul(wm, x.reshape(self.c, self.p_out), out=y3[0])
                else:
                    np.matmul(wm, x.reshape(n, self.c, self.p_out), out=y3)
            else:
                np.matmul(wm, x.reshape(n, g, self.cg, self.p_out), out=y.reshape(n, g, self.ocg, self.p_out))
        elif self.plan == "depthwise":
            self._run_depthwise(x, w, y, v)
        else:
            self._run_im2col(x, w, y3, v)
        if b is not None:
            np.add(y3, b, out=y3)

    def _padded(self, x, v, b0=0, b1=None):
        if not self.has_pad:
            return x[b0:b1] if (b0 or b1 is not None) else x
        xp = v["xp"]
        nb = (b1 if b1 is not None else x.shape[0]) - b0
        xp = xp[:nb]
        zero_borders(xp, self.pb, self.pe)
        inner = (slice(None), slice(None)) + tuple(slice(p, p + s) for p, s in zip(self.pb, self.spatial))
        np.copyto(xp[inner], x[b0:b0 + nb])
        return xp

    def _run_depthwise(self, x, w, y, v):
        xp = self._padded(x, v)
        wd = self.w_dw if self.w_dw is not None else self._dw_weights(w)
        n, c, m = self.n, self.c, self.mult
        y5 = y.reshape((n, c, m) + tuple(self.out))
        tmp = v["tmp"]
        for i, pos in enumerate(self.positions):
            xv = kernel_position_view(xp, pos, self.strides, self.dil, self.out)
            xv = xv.reshape((n, c, 1) + tuple(self.out)) if m == 1 else xv[:, :, None]
            if i == 0:
                np.multiply(xv, wd[i], out=y5)
            else:
                np.multiply(xv, wd[i], out=tmp)
                np.add(y5, tmp, out=y5)

    def _run_im2col(self, x, w, y3, v):
        g, nb = self.g, self.nb
        kg = self.cg * self.kp
        wm = self.w_mat if self.w_mat is not None else (
            w.reshape(g, self.ocg, kg) if g > 1 else w.reshape(self.oc, kg))
        cols_all = v["cols"]
        for b0 in range(0, self.n, nb):
            b1 = min(self.n, b0 + nb)
            xp = self._padded(x, v, b0, b1)
            cols = cols_all[:b1 - b0]
            np.copyto(cols, window_view(xp, self.kernel, self.strides, self.dil, self.out))
            yb = y3[b0:b1]
            if g == 1:
                if b1 - b0 == 1:
                    np.matmul(wm, cols.reshape(self.c * self.kp, self.p_out), out=yb[0])
                else:
                    np.matmul(wm, cols.reshape(b1 - b0, self.c * self.kp, self.p_out), out=yb)
            else:
                np.matmul(wm, cols.reshape(b1 - b0, g, kg, self.p_out),
                          out=yb.reshape(b1 - b0, g, self.ocg, self.p_out))


# -- ConvTranspose -----------------------------------------------------------------------------------
@register("ConvTranspose", since=1)
class ConvTranspose(SpatialKernel):
    def prepare(self):
        xm = self.spatial_meta(0, "X")
        wm = self.spatial_meta(1, "W")
        if len(wm.shape) != len(xm.shape):
            raise self.fail(f"W has shape {tuple(wm.shape)}, X has shape {tuple(xm.shape)}: ranks differ")
        n, c = xm.shape[:2]
        spatial = list(xm.shape[2:])
        d = len(spatial)
        g = int(self.attr("group", 1))
        if wm.shape[0] != c or g < 1 or c % g:
            raise self.fail(f"W of shape {tuple(wm.shape)} and group={g} do not fit X with {c} channels")
        ocg = wm.shape[1]
        oc = ocg * g
        kernel = list(wm.shape[2:])
        ks = self.attrs.get("kernel_shape")
        if ks is not None and [int(v) for v in ks] != kernel:
            raise self.fail(f"kernel_shape {list(ks)} does not match W's shape {tuple(wm.shape)}")
        strides = self.ints("strides", d, 1)
        dil = self.ints("dilations", d, 1)
        if any(s < 1 for s in strides) or any(v < 1 for v in dil):
            raise self.fail(f"strides {strides} and dilations {dil} must be positive")
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
