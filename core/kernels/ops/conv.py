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

from ...model.ir import Meta
from ..blas import cblas
from .conv_native import NativeConv, NativeConvColumn, NativeConvGemv, NativeDepthwise
from ..epilogue import ATTR as EPILOGUE, native_act
from ..fused import GE_DOMAIN
from ..native import CallCache, run_for_threads
from .phase_layout import phase_layout
from ..planned import Scratch, address
from ..registry import register
from .windows import SpatialKernel, clamped_strides, window_pads

#: im2col columns are built for at most this many bytes of batch items at a time
COLS_LIMIT = 64 << 20


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
    #: set by geometry(): prepare() checks and sets the geometry and output metas, and plans nothing to run
    geometry_only = False

    @classmethod
    def geometry(cls, *args, **kwargs) -> "Conv":
        """An instance for its checks, geometry and output metas only, where a kernel that runs natively
        reads them and never its numpy plan (a native blocked conv's NCHW twin, an int8 conv's float64
        one): the plan's phase layouts were a third of such a kernel's build, at compile and at load.
        Float32/float64 only (no float16 adapter stands in for cls)."""
        conv = object.__new__(cls)
        conv.geometry_only = True
        conv.__init__(*args, **kwargs)
        return conv

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
        strides = clamped_strides(strides, out, kernel, dil)
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
        if self.geometry_only:
            self.plan = None
            return

        nat = self.backend.lib
        depthwise = g == c and cg == 1 and g > 1
        if nat is not None and dt == np.float32 and w is not None and (not depthwise or d == 2):
            self.plan = "native"
            act = native_act(self.attrs.get(EPILOGUE))
            self.native = NativeDepthwise(self, nat, act) if depthwise else \
                NativeConvGemv(self, nat, act) if NativeConvGemv.applies(self, self.residual) else \
                NativeConvColumn(self, nat, act) if NativeConvColumn.applies(self, self.residual) else \
                NativeConv(self, nat, act, self.residual)
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
            self.lay = phase_layout(n, c, spatial, pb, strides, kernel, dil, out, dt)
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
            self.wt = None
            return
        self.plan = "im2col"
        kg = cg * self.kp
        per_item = c * self.kp * self.p_out * dt.itemsize
        self.nb = max(1, min(n, COLS_LIMIT // max(per_item, 1)))
        self.lay = phase_layout(self.nb, c, spatial, pb, strides, kernel, dil, out, dt)
        self.scratch.add("ph", self.lay.phase_shape, dt)
        self.scratch.add("cols", (self.nb, c) + tuple(kernel) + tuple(out), dt)
        self.w_mat = None if w is None else (w.reshape(g, self.ocg, kg) if g > 1 else w.reshape(oc, kg))

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        reads = getattr(self.native, "float16_inputs", None) if self.plan == "native" else None
        return reads(y_half) if reads is not None else frozenset()

    def float16_outputs(self) -> bool:
        writes = getattr(self.native, "float16_outputs", None) if self.plan == "native" else None
        return writes is not None and writes()

    def pack(self):
        w, b = self.w_const, self.consts[2] if len(self.consts) > 2 else None
        if self.plan == "native":
            self.native.pack(self, w, b)
        elif self.plan == "taps" and w is not None:
            self.wt = self.shared_pack(("taps",), self._pack_taps, w)  # shared across shapes

    def _taps_fit(self, n, c, g, dt, pb, strides, kernel, dil, out, spatial) -> bool:
        """One accumulating GEMM per kernel tap straight from the padded input (no im2col): for float32,
        one group, enough channels for a GEMM with K = C, and little waste in the flat layout."""
        if cblas().sgemm is None or dt != np.float32 or g != 1 or self.kp == 1 or c < TAPS_MIN_C:
            return False
        self.lay = phase_layout(n, c, spatial, pb, strides, kernel, dil, out, dt)
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

    def bound(self, xs, ys, ws):
        """The native plan's prepared calls themselves where run() would find the same ones every time."""
        x, y = xs[0], ys[0]
        build = None
        if self.plan == "native" and x.flags.c_contiguous and y.flags.c_contiguous:
            build = self.native.builder(x, y, self.views(ws) if self.scratch.items else {},
                                        xs[3] if self.residual else None)
        return super().bound(xs, ys, ws) if build is None else run_for_threads(build)

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
        if self.residual and np.may_share_memory(y, xs[3]):  # Y over Z: the numpy plans write Y before adding Z
            self.run(xs[:3] + [xs[3].copy()], ys, ws)
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
            wp, xp, yp = address(wm), address(xm), address(ym)
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


@register("FusedConv", since=1, domain=GE_DOMAIN)
class FusedConv(Conv):
    """Conv(X, W, B) + Z, Z a tensor of the output's shape (a residual), then the node's epilogue:
    passes.fuse_conv_add. The native kernels add Z as they store; the numpy plans add it after. Y may be
    Z itself (the planner writes a block's output over its residual, as onnxruntime's fused Conv does)."""
    residual = True
    output_over = 3

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
        strides = clamped_strides(strides, out, kernel, dil)
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
        # kernel == stride, no dilation, padding or output padding (DBNet's and U-Nets' 2x2 stride-2
        # upsampling): every output element is one tap's, so each tap's columns are stored with the bias
        # instead of added onto a filled output (half the passes over Y)
        self.disjoint = all(k == s and dl == 1 and b_ == 0 and o == i * s for k, s, dl, b_, o, i
                            in zip(kernel, strides, dil, pb, out, spatial))
        w = self.consts[1] if len(self.consts) > 1 else None
        self.w_t = None if w is None else self._wt(w)
        b = self.consts[2] if len(self.consts) > 2 else None
        self.b_b = None if b is None else b.reshape((oc,) + (1,) * d)
        self.plan = "numpy"
        has_b = len(self.inputs) > 2 and self.inputs[2] is not None
        if self.disjoint and d == 2 and g == 1 and dt == np.float32 and self.backend.lib is not None and \
                w is not None and (not has_b or b is not None):
            # csrc/conv_transpose.c: each output one tap's sum, stored once with the bias and activation (as
            # the GEMM and the scatter of its columns, DBNet's 2x2 upsampling was 1.4x onnxruntime's at v3)
            self.plan, self.uses_native = "native", True
            self.act = native_act(self.attrs.get(EPILOGUE))
            self.absorbs_epilogue = self.act is not None
            self.scratch = Scratch()
            self.calls = CallCache()

    def pack(self):
        if self.plan == "native":
            w, b = self.consts[1], self.consts[2] if len(self.consts) > 2 else None
            self.wp = self.shared_pack(("stride_taps",), lambda w: np.ascontiguousarray(
                np.asarray(w, np.float32).transpose(2, 0, 1, 3)), w)
            self.bias = None if b is None else np.ascontiguousarray(b, np.float32)

    def _native_call(self, x, y):
        return self.backend.lib.conv_transpose_call(x, self.wp, self.bias, y, kernel=tuple(self.kernel), act=self.act)

    def bound(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.plan == "native" and x.flags.c_contiguous and y.flags.c_contiguous:
            return run_for_threads(lambda: self._native_call(x, y))
        return super().bound(xs, ys, ws)

    def _wt(self, w):
        # (C, OCg, *k) -> (G, OCg*kp, Cg), a transposed view
        return w.reshape(self.g, self.cg, self.ocg * self.kp).transpose(0, 2, 1)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.plan == "native":
            x, out = np.ascontiguousarray(x), y if y.flags.c_contiguous else np.empty(y.shape, y.dtype)
            self.calls.get((x, out), lambda: self._native_call(x, out)).run()
            if out is not y:
                np.copyto(y, out)
            return
        wt = self.w_t if self.w_t is not None else self._wt(xs[1])
        cols = self.views(ws)["cols"]
        n, g = self.n, self.g
        if g == 1:
            np.matmul(wt[0], x.reshape(n, self.c, self.p_in), out=cols.reshape(n, self.oc * self.kp, self.p_in))
        else:
            np.matmul(wt, x.reshape(n, g, self.cg, self.p_in),
                      out=cols.reshape(n, g, self.ocg * self.kp, self.p_in))
        b = None
        if len(xs) > 2 and xs[2] is not None:
            b = self.b_b if self.b_b is not None else xs[2].reshape((self.oc,) + (1,) * len(self.out))
        if self.disjoint:
            for ysl, csl in self.scatter:
                if b is None:
                    np.copyto(y[ysl], cols[csl])
                else:
                    np.add(cols[csl], b, out=y[ysl])
            return
        if b is not None:
            np.copyto(y, b)
        else:
            y[...] = 0
        for ysl, csl in self.scatter:
            yv = y[ysl]
            np.add(yv, cols[csl], out=yv)
