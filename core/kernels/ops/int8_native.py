"""The native plans of the int8 ops (csrc/qgemm.c through native.py): exact int32 accumulation of
u8 x s8 products, the zero points, the bias and the requantization (or the scale to float32) applied
as the kernel stores, bytes identical to the numpy plans (quantization.py, qlinear_contrib.py).

- NativeIntProduct: rows of an 8-bit activation (..., M, K) with a per-tensor zero point @ constant
  8-bit weights (K, N) packed once at load, per-column zero points and scales (MatMulInteger,
  QLinearMatMul, QGemm, MatMulIntegerToFloat).
- NativeIntConv: a 2-D convolution, group 1 (W @ the input gathered through offset tables, no
  im2col) or depthwise (ge_qdepthwise), on the input padded with its zero point (ConvInteger,
  QLinearConv).
"""
from __future__ import annotations

import numpy as np

from ...model.record import record
from ..native import (ACT_NONE, QDW_COLUMN_PAIRS, QDW_FLOAT, QDW_ROW_PAIRS, QOUT_S8, QOUT_U8, QPATH_BYTES,
                      QPATH_PAIRS, Act, Activation, CallCache, QOut)
from .nchwc import depthwise_weights
from .windows import clamped_strides


def qout(kind: int, keep: list, *, bias=None, scale=None, scale_a=None, fbias=None, zy=0, lo=0, hi=0,
         act: Act | None = None) -> QOut:
    """The store step (csrc/abi.h's QOut); the arrays it points to are appended to `keep`. act: the
    activation of a float32 output (native.Act)."""
    arrays = [None if a is None else np.ascontiguousarray(a, t).reshape(-1)
              for a, t in ((bias, np.int32), (scale, np.float32), (fbias, np.float32))]
    keep.extend(arrays)
    bias, scale, fbias = arrays
    addr = lambda a: None if a is None else a.ctypes.data  # noqa: E731
    return QOut(kind, addr(bias), addr(scale), int(scale is not None and scale.size > 1), scale_a, addr(fbias),
                int(zy), int(lo), int(hi), Activation(*(act or (ACT_NONE, 0.0, 0.0))))


def pairs_fit_int16(rows: np.ndarray) -> bool:
    """Whether vpmaddubsw is exact on these weights: rows (weight index, K) as packed (int8, uint8 ones
    as w - 128), k paired 0-1, 2-3, ...; a pair's two products with any u8 x lie in [255 (min(w0, 0) +
    min(w1, 0)), 255 (max(w0, 0) + max(w1, 0))], which fits int16 when the positive parts add up to at
    most 128 and the negative ones to at least -128 (so 127 and 1 fit, 127 and 2 do not). Weights lie
    in [-128, 127], so a pair's sum passes 128 (-128) only when both are positive (negative): the
    pair's sum decides, one int16 add over half the weights (an odd K's last weight pairs with 0 and
    always fits)."""
    rows = np.asarray(rows)
    k2 = rows.shape[-1] // 2 * 2
    if k2 == 0 or rows.size == 0:
        return True
    s = np.add(rows[..., 0:k2:2], rows[..., 1:k2:2], dtype=np.int16)
    if rows.dtype == np.uint8:
        s -= 256
    return bool(s.max() <= 128 and s.min() >= -128)


#: the share of weight quads with a rest (split weights) above which int16 pairs are faster than
#: vpmaddubsw plus the rest's quads, by whether the weights are the product's rows (a convolution) or
#: its panels (measured at v3, one thread: 128x512 @ 512x2048 runs bytes 85-91, pairs 65, split with
#: a rest in half the quads 46 GMAC/s; 1x1 convolutions with a rest in 22-37% of quads 2-12% faster
#: split than as pairs, in 59-76% 10-14% slower)
SPLIT_AT_MOST = {True: 0.4, False: 0.2}


@record
class ProductPlan:
    """How the int8 product runs over given weights (product_plan): path (QPATH_*), fits (every pair of
    k in int16), share (the share of quads with a rest when split), main (the weights to pack, int8
    (weight index, K) as packed, with every pair in int16; None: the weights as they are), the
    rest's quads (fix_start, fix_q, fix_b as abi.h's QGemm takes them; None when not split) and the
    whole weights' sums over K per weight index (int32; None when not split)."""
    path: int
    fits: bool
    share: float = 0.0
    main: np.ndarray | None = None
    fix: tuple | None = None
    sums: np.ndarray | None = None


def packed_values(rows: np.ndarray) -> np.ndarray:
    """Weights as the kernel packs them, int16: int8 as they are, uint8 as w - 128."""
    rows = np.asarray(rows)
    return rows.astype(np.int16) - (128 if rows.dtype == np.uint8 else 0)


def centred(rows: np.ndarray) -> np.ndarray:
    """Weights as the kernel packs them, int8: int8 ones as they are, uint8 ones as w - 128 (the sign
    bit flipped, a new array), int16 ones (packed_values) narrowed."""
    rows = np.asarray(rows)
    if rows.dtype == np.uint8:
        return np.bitwise_xor(rows, 0x80).view(np.int8)
    return rows.astype(np.int8, copy=False)


def product_plan(nat, rows: np.ndarray, weights_are_rows: bool) -> ProductPlan:
    """The path for weights `rows` (weight index, K; int8, uint8 or packed_values) with library `nat`:
    where the build has the choice (no VNNI: the AVX2 builds, v3 and v4, and the SSE one, v2),
    vpmaddubsw on weights whose every pair fits int16; else vpmaddubsw on split weights (Native.qsplit)
    where few quads have a rest (SPLIT_AT_MOST); else int16 pairs. Other builds take the bytes as they
    are (vpdpbusd and portable C are exact on any pair). weights_are_rows: the weights are the
    product's rows (a convolution: groups of the tile's rows), else its panels."""
    if rows.dtype == np.int16:  # (packed_values: as int8)
        rows = centred(rows)
    if nat is None or not nat.qgemm_has_pairs:
        return ProductPlan(QPATH_BYTES, pairs_fit_int16(rows) if nat is None else nat.qpairs_fit(rows))
    # the quads with a rest counted first: weights that take int16 pairs are not split for nothing
    width = nat.qgemm_mr if weights_are_rows else nat.qgemm_nr
    rests = nat.qrest_quads(rows, width)
    if not rests:
        return ProductPlan(QPATH_BYTES, True)
    share = rests / max(1, -(-rows.shape[0] // width) * -(-rows.shape[1] // 4))
    if share > SPLIT_AT_MOST[weights_are_rows]:
        return ProductPlan(QPATH_PAIRS, False, share)
    main, fix, sums = nat.qsplit(rows, width)
    return ProductPlan(QPATH_BYTES, False, share, main, fix, sums)


#: the share of quads left alone (twinned with zeros) above which twinned panels are not taken: a twin
#: costs 0.86 of two quads' time in the plain tile (measured at v3, one thread, BERT-small's int8
#: products 128x512 @ 512x512, @ 512x2048 and 128x2048 @ 2048x512: 12-17% faster, with 0.2-1.1% alone),
#: a quad alone 1.7 of one (the break-even near 16%)
TWINS_ALONE_AT_MOST = 0.1


def twin_panels(nat, bp: np.ndarray, k: int, n: int) -> tuple | None:
    """Prepacked panels bp of (k, n) weights (every pair of k in int16) in twins of quads (Native.qtwin:
    their vpmaddubsw sums added in int16, one vpmaddwd for two quads of K), or None where the build has
    no twinned tile, k is not a multiple of 4, or too many quads have no twin (TWINS_ALONE_AT_MOST)."""
    twins = nat.qtwin(bp, k, n)
    if twins is None:
        return None
    slot_q = twins[2]
    alone = np.count_nonzero(slot_q[0::2] == slot_q[1::2])  # (a quad alone fills both slots of its twin)
    return twins if alone <= TWINS_ALONE_AT_MOST * (len(slot_q) - alone) else None


def pack_product(nat, b: np.ndarray) -> tuple:
    """Constant (K, N) 8-bit weights b (any strides) packed for the int8 product with library `nat`:
    (plan (product_plan's), panels, sums over K per column, twins: (twin_start, twin_q) when the panels
    are twinned (twin_panels), else None)."""
    plan = product_plan(nat, b.T, weights_are_rows=False)
    if plan.path == QPATH_PAIRS:
        return (plan,) + nat.qpack_pairs(b) + (None,)
    if plan.main is None:
        bp, sums = nat.qpack(b)
    else:
        bp, _ = nat.qpack(np.ascontiguousarray(plan.main.T))  # (the sums are the whole weights')
        sums = plan.sums
    twins = twin_panels(nat, bp, *b.shape)
    return (plan, bp, sums, None) if twins is None else (plan, twins[0], sums, twins[1:])


#: the AMX tiles' block of rows (csrc/qgemm.c's AMX_ROWS) and its step of K: ge_qgemm runs a product over
#: prepacked weights on AMX when it has a whole block of rows and a step of K
AMX_ROWS, AMX_K = 32, 64


def on_amx(nat, rows: int, k: int) -> bool:
    """Whether a product of `rows` activation rows over prepacked (K, N) weights runs on AMX tiles."""
    return nat is not None and nat.qgemm_amx and rows >= AMX_ROWS and k >= AMX_K


def product_kernel(nat, plan: ProductPlan, amx: bool = False, twins: bool = False) -> str:
    """What an int8 product runs on with library `nat` (None: the numpy plans) by its plan (product_plan's);
    amx: the product runs on AMX tiles (on_amx); twins: its panels are twinned (pack_product's)."""
    if nat is None:
        return "numpy float64 (exact)"
    if amx:
        return f"tdpbusd (AMX) on blocks of {AMX_ROWS} rows, vpdpbusd (AVX-512 VNNI) on the rest"
    if not nat.qgemm_has_pairs:
        return "vpdpbusd (AVX-512 VNNI)" if "vnni" in nat.isa.lower() else "portable C"
    v = "v" if "avx" in nat.isa.lower() else ""  # (the SSE build, x86-64 v2: the same instructions on 128 bits)
    if plan.path == QPATH_PAIRS:
        return f"{v}pmaddwd on int16 pairs (weight pairs overflow {v}pmaddubsw's int16 in {plan.share:.0%} of quads)"
    twinned = ", quads of K in twins (one vpmaddwd for two)" if twins else ""
    if plan.fits:
        return f"{v}pmaddubsw (every weight pair fits int16{twinned})"
    return f"{v}pmaddubsw on weights split to fit int16 (the rest in {plan.share:.1%} of quads{twinned})"


def depthwise_kernel(nat, path: int | None) -> str:
    """What an int8 depthwise convolution runs on with `nat` by its path (Native.qdepthwise_path: the
    layer's geometry and output decide it; the numpy plans when nat is None)."""
    if nat is None:
        return "depthwise: numpy float64 (exact)"
    isa = nat.isa.lower()
    if path == QDW_COLUMN_PAIRS:
        return "depthwise: 3x3 on int16 column pairs by 16 channels, " + (
            "vpdpwssd on zmm" if "vnni" in isa else "vpmaddwd on zmm" if "avx512" in isa else "vpmaddwd")
    if path == QDW_ROW_PAIRS:
        return "depthwise: 3x3 rows of int16 pairs a channel at a time, vpmaddwd"
    if path == QDW_FLOAT:
        return "depthwise: float32 FMA by 16 channels (exact)"
    return "depthwise: taps in pairs, " + ("vpdpwssd (AVX-512 VNNI)" if "vnni" in isa else "vpmaddwd on int16 pairs"
                                           if "avx2" in isa else "pmaddwd on int16 pairs" if "sse4" in isa else "portable C")


def depthwise_geometry(x_shape, w_shape, y_shape, attrs: dict) -> dict:
    """ge_qdepthwise's geometry (Native.qdepthwise_path's argument) of a 2-D depthwise convolution from its
    shapes and attributes, as NativeIntConv has it from the Conv's (its strides clamped as the Conv's);
    the pads, which do not enter the choice, left 0."""
    (_, c, h, w), (kh, kw), (oh, ow) = x_shape, w_shape[2:], y_shape[2:]
    dh, dw = (int(d) for d in attrs.get("dilations", (1, 1)))
    sh, sw = clamped_strides([int(s) for s in attrs.get("strides", (1, 1))], (oh, ow), (kh, kw), (dh, dw))
    return dict(channels=c, height=h, width=w, pt=0, pl=0, kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, oh=oh, ow=ow)


def requant_kind(dtype) -> int:
    return QOUT_U8 if np.dtype(dtype) == np.uint8 else QOUT_S8


def weight_zero_points(wz, n: int, w_dtype) -> np.ndarray | None:
    """The s8 operand's zero points per weight index (uint8 weights are packed as w - 128), None when all 0."""
    z = np.zeros(n, np.int32) if wz is None else np.broadcast_to(np.asarray(wz).astype(np.int32).reshape(-1), (n,))
    if np.dtype(w_dtype) == np.uint8:
        z = z - 128
    return None if not z.any() else np.ascontiguousarray(z, np.int32)


def activation_zero_point(az, a_dtype) -> int:
    """The u8 operand's zero point (int8 activations have their sign bit flipped: + 128)."""
    z = 0 if az is None else int(np.asarray(az).reshape(-1)[0])
    return z + 128 if np.dtype(a_dtype) == np.int8 else z


class NativeIntProduct:
    """A (rows, K) 8-bit @ constant B (K, N) 8-bit into C (rows, N); the kernel's workspace is `scratch`."""

    def __init__(self, kernel, nat, rows: int, k: int, n: int, a_dtype):
        self.nat, self.rows, self.k, self.n = nat, rows, k, n
        self.a_signed = np.dtype(a_dtype) == np.int8
        kernel.scratch.add("q", (nat.qgemm_workspace_nbytes(k),), np.uint8)
        if self.a_signed:  # the rows are read as uint8: a flipped copy
            kernel.scratch.add("a8", (rows, k), np.uint8)
        if nat.qgemm_has_pairs:  # QPATH_PAIRS widens the rows into it (the path is chosen by the weights, at pack)
            kernel.scratch.add("a16", (rows, -(-k // 4) * 4), np.int16)
        self.calls = CallCache()

    def pack(self, kernel, b: np.ndarray, bz) -> None:
        """b: the (K, N) weights (any strides), bz their zero point(s)."""
        self.plan, self.bp, self.sums, self.twins = kernel.shared_pack(("qgemm", "plan"), lambda b: pack_product(self.nat, b), b)
        self.path = self.plan.path
        self.zs = weight_zero_points(bz, self.n, b.dtype)

    def run(self, a: np.ndarray, az, y: np.ndarray, v: dict, out: QOut, keep=(), scale_a=None) -> None:
        """a: the activation (..., K) as the kernel receives it, az its zero point (array or None);
        y: C-contiguous (..., N); out: the store step (built once per kernel, `keep` its arrays);
        scale_a: the array out.scale_a points to (a run-time scale), or None."""
        a2 = a.reshape(self.rows, self.k)
        if self.a_signed:
            rows = source = v["a8"]
            np.bitwise_xor(a2.view(np.uint8), 0x80, out=rows)
        elif a2.flags.c_contiguous:  # the key holds `a`: its reshape is a new object at every run, at a's address
            rows, source = a2, a
        else:
            rows = source = np.ascontiguousarray(a2)
        call = self.calls.get((source, y, v["q"], scale_a), lambda: self._call(rows, y, v, out, keep, scale_a))
        # the zero point changes from run to run (DynamicQuantizeLinear's); scale_a's buffer is in the key
        call.keep[0].zu = (0 if az is None else int(az.item(0))) + (128 if self.a_signed else 0)
        call.run()

    def _call(self, rows, y, v, out, keep, scale_a):
        call = self.nat.qgemm_call(
            self.rows, self.n, self.k, a=rows.ctypes.data, lda=self.k, c=y.ctypes.data, ldc=self.n, out=out, zu=0,
            zs=self.zs, sum_s=self.sums, ws=v["q"], bp=self.bp, path=self.path,
            a16=v["a16"] if self.path == QPATH_PAIRS else None, fix=self.plan.fix, twins=self.twins,
            keep=(rows, y, scale_a) + tuple(keep))
        if scale_a is not None:
            call.keep[0].out.scale_a = scale_a.ctypes.data
        return call


class NativeIntConv:
    """A 2-D convolution of 8-bit x (N, C, H, W) and constant 8-bit w, group 1 (the int8 product, W @
    the input gathered through offset tables; padded first, when the conv pads, into a uint8 copy) or
    depthwise (ge_qdepthwise pads each channel itself). A 1-D one comes as the 2-D one of height 1 (its
    geometry; x, y and w as they are: the same bytes)."""

    def __init__(self, kernel, nat, conv, x_dtype, w_dtype):
        self.nat = nat
        self.x_signed = np.dtype(x_dtype) == np.int8
        self.n, self.c, self.oc = conv.n, conv.c, conv.oc
        self.depthwise = conv.g > 1
        (h, w), (kh, kw), (sh, sw), (dh, dw) = conv.spatial, conv.kernel, conv.strides, conv.dil
        self.oh, self.ow = conv.out
        self.kdim = (1 if self.depthwise else self.c) * kh * kw
        self.plane, self.w_shape = (h, w), (self.oc, 1 if self.depthwise else self.c, kh, kw)
        self.x_dtype = np.dtype(x_dtype)
        self.calls = CallCache()
        if self.depthwise:
            self.geometry = dict(channels=self.c, height=h, width=w, pt=conv.pb[0], pl=conv.pb[1], kh=kh, kw=kw,
                                 sh=sh, sw=sw, dh=dh, dw=dw, oh=self.oh, ow=self.ow)
            kernel.scratch.add("dw", (nat.qdepthwise_workspace_nbytes(self.geometry),), np.uint8)
            return
        self.pads = (conv.pb, conv.pe)
        self.padded = conv.has_pad  # then x is copied, padded with its zero point, as uint8 (int8 flipped)
        hp, wp = h + conv.pb[0] + conv.pe[0], w + conv.pb[1] + conv.pe[1]
        pitch, plane = (wp, hp * wp) if self.padded else (w, h * w)
        if self.padded:
            kernel.scratch.add("xp", (self.c, hp, wp), np.uint8)
        taps = np.array([i * dh * pitch + j * dw for i in range(kh) for j in range(kw)], np.int64)
        self.koff = (np.arange(self.c, dtype=np.int64)[:, None] * plane + taps[None, :]).reshape(-1)
        self.noff = (np.arange(self.oh, dtype=np.int64)[:, None] * (sh * pitch)
                     + np.arange(self.ow, dtype=np.int64)[None, :] * sw).reshape(-1)
        kernel.scratch.add("q", (nat.qgemm_workspace_nbytes(self.kdim),), np.uint8)

    def pack(self, kernel, w: np.ndarray, wz) -> None:
        oc, w = self.oc, np.asarray(w).reshape(self.w_shape)
        if self.depthwise:  # centred int16 weights and their sums
            z = np.zeros(oc, np.int16) if wz is None else \
                np.broadcast_to(np.asarray(wz).astype(np.int16).reshape(-1), (oc,))
            self.wc = kernel.shared_pack(("qdepthwise",), lambda w: np.ascontiguousarray(
                w.reshape(oc, -1).astype(np.int16) - z[:, None]), w)
            self.wsum = self.wc.sum(axis=1, dtype=np.int32)
            self.wf = kernel.shared_pack(("qdepthwise", "float32"), lambda w: depthwise_weights(
                self.wc.reshape(w.shape), self.nat.nchwc_block), w)  # (the AVX2 builds compute in float32)
            return

        def pack_rows(w):  # s8 rows (QPATH_PAIRS: int16) padded to a multiple of 4 of K, uint8 weights as w - 128
            w2 = np.asarray(w).reshape(oc, self.kdim)
            plan = product_plan(self.nat, w2, weights_are_rows=True)
            rows = np.empty((oc, -(-self.kdim // 4) * 4), np.int16 if plan.path == QPATH_PAIRS else np.int8)
            rows[:, self.kdim:] = 0  # (only the padding: the weights are written over the rest)
            if plan.main is not None:
                rows[:, :self.kdim] = plan.main
                return plan, rows, plan.sums
            rows[:, :self.kdim] = packed = centred(w2)
            return plan, rows, packed.sum(axis=1, dtype=np.int32)
        self.plan, self.rows, self.sums = kernel.shared_pack(("qconv", "plan"), pack_rows, w)
        self.path = self.plan.path
        self.zs = weight_zero_points(wz, oc, w.dtype)

    def run(self, x: np.ndarray, xz, y: np.ndarray, v: dict, out: QOut, keep=()) -> None:
        zu = activation_zero_point(xz, self.x_dtype)
        calls = self.calls.get((x, y, v.get("xp"), v.get("q"), v.get("dw")), lambda: self._calls(x, y, v, out, keep))
        for b, call in enumerate(calls):
            if self.depthwise:
                call.keep[0].zx = zu
            else:
                if self.padded:
                    self._fill(x[b], v["xp"], zu)
                call.keep[0].zu = zu
            call.run()

    def _fill(self, xb, xp, zu) -> None:
        """xp = xb padded with its zero point, as uint8 (int8 flipped)."""
        (pt, pl), _ = self.pads
        (h, w), xb = self.plane, xb.reshape(self.c, *self.plane)
        xp[:, :pt] = zu
        xp[:, pt + h:] = zu
        xp[:, pt:pt + h, :pl] = zu
        xp[:, pt:pt + h, pl + w:] = zu
        inner = xp[:, pt:pt + h, pl:pl + w]
        if self.x_signed:
            np.bitwise_xor(xb.view(np.uint8), 0x80, out=inner)
        else:
            np.copyto(inner, xb)

    def _calls(self, x, y, v, out, keep) -> list:
        calls = []
        per_out = self.oc * self.oh * self.ow * y.itemsize
        for b in range(self.n):
            yb = y.ctypes.data + b * per_out
            if self.depthwise:
                calls.append(self.nat.qdepthwise_call(
                    x[b].ctypes.data, self.wc, self.wsum, self.wf, yb, geometry=self.geometry, zx=0, x_flip=self.x_signed,
                    out=out, ws=v["dw"], keep=(x, y) + tuple(keep)))
                continue
            src = v["xp"] if self.padded else x[b]
            calls.append(self.nat.qgemm_call(
                self.oc, self.oh * self.ow, self.kdim, a=self.rows.ctypes.data, lda=self.rows.shape[1], c=yb,
                ldc=self.oh * self.ow, out=out, zu=0, zs=self.zs, sum_s=self.sums, ws=v["q"], b=src.ctypes.data,
                koff=self.koff, noff=self.noff, b_flip=self.x_signed and not self.padded, path=self.path,
                a16=self.rows if self.path == QPATH_PAIRS else None, fix=self.plan.fix,
                keep=(x, src, y, self.rows) + tuple(keep)))
        return calls
