"""The Python face of the native library: `Native` wraps each exported kernel in a method that packs
weights or prepares a call (its struct filled from numpy arrays), with the activation (Act) a kernel
applies as it stores. The structs, constants and signatures are abi.py's, generated from csrc/abi.h.

Operands, as csrc/gemm.c documents: A row-major or prepacked (weights, once at load); B gathered
through offset tables, B[k, n] = b[koff[k] + noff[n]] (a plain matrix, or a convolution's input,
so that im2col is the packing), or prepacked."""
from __future__ import annotations

import ctypes
import functools
import math
import os
from typing import Callable

import numpy as np

from .abi import (ACT_CLAMP, ACT_GELU, ACT_NONE, EW_F16, EW_F32, EW_F64, EW_I32, EW_I64, EW_ROUND, HALF_A, HALF_B,
                  HALF_BIAS, HALF_C, SIGNATURES, Activation, CallBatch, Compare, ConvDirect, ConvTransposeArgs, ConvNchwc,
                  Depthwise, DepthwiseNchwc, Eltwise, GemmArgs, GemmBatch, MaxPool2d, NchwcMaxPool, NchwcMean, NchwcReorder,
                  NchwcScale, PhaseFill, QAdd, QDepthwise, QGemm, QOut, QOUT_S8, QOUT_U8, QPATH_BYTES, QuantizeRun,
                  ROWS_LAYER_NORM, RoundTrip, ConcatBlocks, GatherBlocks, Nearest2d, Nms, Rows, StepCopy, StepLoop)
from ...host_pages import HUGE, mapped_bytes
from ...model.record import record
from .calls import PreparedCall, threads

ALIGN = 64
_ptr = ctypes.c_void_p
GEMM_SLOTS = 16  # the threads one GEMM's workspace has room for (its B panels are per thread)
_QDW_GEOMETRY = ("channels", "height", "width", "pt", "pl", "kh", "kw", "sh", "sw", "dh", "dw", "oh", "ow")


def aligned_empty(n: int, dtype=np.float32) -> np.ndarray:
    """A 1-D array of n elements whose data starts on a 64-byte boundary; from 2 MB up a mapping of its
    own on huge pages (host_pages.py: packed weights are read once per inference, a TLB miss per 4 KB)."""
    dtype = np.dtype(dtype)
    if n * dtype.itemsize >= HUGE:
        return mapped_bytes(n * dtype.itemsize).view(dtype)
    raw = np.empty(n * dtype.itemsize + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + n * dtype.itemsize].view(dtype)


def _addr(a) -> int | None:
    return None if a is None else a.ctypes.data


#: eltwise.c's dtype codes
_EW_DTYPES = {np.dtype(np.float32): EW_F32, np.dtype(np.float16): EW_F16, np.dtype(np.float64): EW_F64,
              np.dtype(np.int32): EW_I32, np.dtype(np.int64): EW_I64}


def _call_table(calls: list[PreparedCall]) -> tuple:
    """csrc/abi.h's CallFn and argument arrays of prepared calls: fn[i](args[i]) is calls[i].run()."""
    fns = (_ptr * len(calls))(*(ctypes.cast(c.fn, _ptr).value for c in calls))
    args = (_ptr * len(calls))(*(ctypes.addressof(c.keep[0]) for c in calls))
    return fns, args


@record
class Act:
    """The activation a native kernel applies as it stores (csrc/abi.h documents code, a and b):
    Act(ACT_CLAMP, lo, hi), Act(ACT_HARDSIGMOID, alpha, beta), Act(ACT_SWISH, alpha), ..."""
    code: int
    a: float = 0.0
    b: float = 0.0


GELU = Act(ACT_GELU)


def _activation(act: Act | None) -> "Activation":
    return Activation(*act) if act is not None else Activation(ACT_NONE, 0.0, 0.0)


class Native:
    def __init__(self, lib: ctypes.CDLL):
        for name, (args, res) in SIGNATURES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        self.lib = lib
        self.mr, self.nr = lib.ge_mr(), lib.ge_nr()
        # the NCHWc layout's channels per block, and the blocks of output channels per panel of its weights (nchwc.py)
        self.nchwc_block, self.nchwc_group = lib.ge_nchwc_block(), lib.ge_nchwc_group()
        self.level, self.isa = lib.ge_level().decode(), lib.ge_isa().decode().strip()
        self.cache_sizes(0, 0)  # the blockings sized to this CPU's caches (csrc/caches.h)
        # the int8 product on AMX tiles where the build (v4vnni), the CPU and Linux allow it; GE_NO_AMX=1: vpdpbusd
        self.qgemm_use_amx(not os.environ.get("GE_NO_AMX"))

    # -- float16 <-> float32 (csrc/convert.c: numpy's results, bit for bit) ---------------------------
    def half_to_float(self, src: np.ndarray, dst: np.ndarray) -> None:
        """dst[...] = src as float32: src float16, dst float32, both C-contiguous, one size."""
        assert src.dtype == np.float16 and dst.dtype == np.float32 and src.size == dst.size
        self.lib.ge_half_to_float(src.ctypes.data, dst.ctypes.data, src.size, threads())

    def float_to_half(self, src: np.ndarray, dst: np.ndarray) -> None:
        """dst[...] = src rounded to float16 (to nearest even): src float32, dst float16, C-contiguous."""
        assert src.dtype == np.float32 and dst.dtype == np.float16 and src.size == dst.size
        self.lib.ge_float_to_half(src.ctypes.data, dst.ctypes.data, src.size, threads())

    def scale_rows(self, w: np.ndarray, s: np.ndarray, out: np.ndarray) -> None:
        """out[i] = w[i] * s[i] computed in float64 and rounded to float32 (numpy's multiply with
        dtype=float64 into a float32 out, bit for bit): w and out float32 (rows, cols), s float64 (rows,),
        all C-contiguous."""
        assert w.dtype == out.dtype == np.float32 and s.dtype == np.float64 and w.ndim == 2
        assert w.shape == out.shape and s.shape == w.shape[:1] and w.flags.c_contiguous and out.flags.c_contiguous
        s = np.ascontiguousarray(s)
        self.lib.ge_scale_rows(w.ctypes.data, s.ctypes.data, w.shape[0], w.shape[1], out.ctypes.data)

    # -- packing (weights, once) -------------------------------------------------------------------
    def pack_a(self, a: np.ndarray) -> np.ndarray:
        """A (M, K) float32, any row stride, into the micro-kernel's row blocks."""
        m, k = a.shape
        a = np.ascontiguousarray(a, np.float32) if a.strides[1] != 4 else a
        out = aligned_empty(self.lib.ge_packed_a_floats(m, k))
        self.lib.ge_pack_a(a.ctypes.data, a.strides[0] // 4, m, k, out.ctypes.data, threads())
        return out

    def pack_b(self, b: np.ndarray) -> np.ndarray:
        """B (K, N) float32 (any strides) into the micro-kernel's column panels."""
        k, n = b.shape
        koff = np.arange(k, dtype=np.int64) * (b.strides[0] // 4)
        noff = np.arange(n, dtype=np.int64) * (b.strides[1] // 4)
        out = aligned_empty(self.lib.ge_packed_b_floats(k, n))
        self.lib.ge_pack_b(b.ctypes.data, koff.ctypes.data, noff.ctypes.data, k, n, out.ctypes.data, threads())
        return out

    def workspace_nbytes(self, m: int, n: int, k: int, raw_a: bool, gathered_b: bool) -> int:
        """Scratch for one call: the packed A (raw A) and the packed panels of B (gathered B), for
        up to GEMM_SLOTS threads whatever this machine has: the OM plans it, and a machine with
        more cores than the compiling one must still find it big enough."""
        return 4 * self.lib.ge_workspace_floats(m, n, k, int(raw_a), int(gathered_b), GEMM_SLOTS) + ALIGN

    # -- the product ---------------------------------------------------------------------------------
    def call(self, m, n, k, c, ldc, *, a=None, lda=0, ap=None, b=None, koff=None, noff=None, bp=None,
             bias_m=None, bias_n=None, z=None, ldz=0, act: Act | None = None, flat=None, ws=None,
             alpha=1.0, half: int = 0) -> PreparedCall:
        """The call c[m, n] = act(alpha A @ B + bias_m[:, None] + bias_n + z), prepared: run() it as often
        as its buffers stay put. act: the activation (Act), or None. flat:
        (pitch, width), C's columns are a convolution's flat columns (see csrc/gemm.c). Arrays are
        passed by address: a, b, c, z are the base arrays (or addresses) the leading dimensions, in
        elements, refer to. float16 arrays a, b, c (with z) and bias_n are read and written as
        float16 (csrc/half.h); half: the HALF_* bits of operands passed as addresses."""
        if ws is None:  # the packing scratch; a NULL pointer would crash the process
            raise ValueError("the native GEMM needs its workspace (workspace_nbytes)")
        ws_addr = ws.ctypes.data
        args = GemmArgs(m, n, k, _ptr_of(a), lda, _addr(ap), _ptr_of(b), _addr(koff), _addr(noff), _addr(bp),
                        _ptr_of(c), ldc, _addr(bias_m), _addr(bias_n), _ptr_of(z), ldz, _activation(act),
                        min(threads(), GEMM_SLOTS), ws_addr + -ws_addr % ALIGN, *(flat or (0, 0)), alpha,
                        half | _half_bits(a=a, b=b, c=c, bias_n=bias_n))
        return PreparedCall(self.lib.ge_gemm_args, args, (a, ap, b, koff, noff, bp, c, bias_m, bias_n, z, ws))

    def gemv_call(self, rows: int, x: np.ndarray, lda: int, w: np.ndarray, y: np.ndarray, ldc: int, *, bias=None,
                  act: Act | None = None) -> PreparedCall:
        """y[r, n] = act(bias[n] + x[r] . w[n]) for r < rows (csrc/gemv.c): w C-contiguous (N, K), x's
        rows lda elements apart, y's ldc; prepared. For few rows: the weights are read once, in order. x,
        w and y may be float16 (x converted once per call, w a block of rows at a time, y rounded once
        as stored)."""
        n, k = w.shape
        args = GemmArgs(rows, n, k, _ptr_of(x), lda, None, None, None, None, _addr(w), _ptr_of(y), ldc, None,
                        _addr(bias), None, 0, _activation(act), threads(), None, 0, 0, 1.0,
                        _half_bits(a=x, b=w, c=y))
        return PreparedCall(self.lib.ge_gemv, args, (x, w, y, bias))

    def gemv_pack(self, w: np.ndarray) -> np.ndarray:
        """A MatMul's constant W (K, N) in the packed GEMV's column panels (csrc/gemv.c), once at load; read
        through its strides (a Gemm's transB weights: no transposed copy of them first)."""
        w = np.asarray(w, np.float32)
        if not w.flags.aligned or any(s % 4 for s in w.strides):
            w = np.ascontiguousarray(w)
        k, n = w.shape
        out = aligned_empty(self.lib.ge_gemv_packed_floats(k, n))
        self.lib.ge_gemv_pack(w.ctypes.data, k, n, w.strides[0] // 4, w.strides[1] // 4, out.ctypes.data)
        return out

    def gemv_panels_call(self, rows: int, x: np.ndarray, lda: int, wp: np.ndarray, k: int, n: int, y: np.ndarray,
                         ldc: int, *, bias=None, z=None, ldz: int = 0, act: Act | None = None) -> PreparedCall:
        """y[r] = act(x[r] @ W + z[r] + bias) for r < rows, W (K, N) packed by gemv_pack into wp; x's rows
        lda elements apart, y's ldc, z's (a residual of y's type, optional, may be y itself) ldz;
        prepared. x and y may be float16 (x converted once per call, y rounded once as stored)."""
        args = GemmArgs(rows, n, k, _ptr_of(x), lda, None, None, None, None, _addr(wp), _ptr_of(y), ldc, None,
                        _addr(bias), _ptr_of(z), ldz, _activation(act), threads(), None, 0, 0, 1.0,
                        _half_bits(a=x, c=y))
        return PreparedCall(self.lib.ge_gemv_panels, args, (x, wp, y, bias, z))

    def row_means_call(self, w: np.ndarray, y: np.ndarray) -> PreparedCall:
        """y[n] = the mean of w[n] for w C-contiguous (N, K) (GlobalAveragePool's planes; float32 or
        float16, as gemv_call's w and y), prepared: each block of rows summed as it streams by."""
        n, k = w.shape
        args = GemmArgs(1, n, k, None, 0, None, None, None, None, _addr(w), _ptr_of(y), n, None, None, None, 0,
                        _activation(None), threads(), None, 0, 0, 1.0 / k, _half_bits(b=w, c=y))
        return PreparedCall(self.lib.ge_gemv, args, (w, y))

    def batch_workspace_nbytes(self, m: int, n: int, k: int) -> int:
        """Scratch for batch_call: one single-threaded GEMM's (raw A, gathered B) per thread slot."""
        return 4 * GEMM_SLOTS * self.lib.ge_workspace_floats(m, n, k, 1, 1, 1) + ALIGN

    def batch_call(self, m, n, k, offsets: dict, *, ws, **operands) -> PreparedCall:
        """A batch of products of one shape (call()'s operands: the first product's; raw A, gathered B),
        offsets: {"a", "b", "c", "bias", "z"} -> int64 arrays, in elements, of where each product's
        operand starts from the first's (missing: all zero); prepared. ws: batch_workspace_nbytes."""
        first = self.call(m, n, k, ws=ws, **operands)
        batch = max(len(v) for v in offsets.values())
        args = GemmBatch(first.keep[0], batch, *(_addr(offsets.get(key)) for key in ("a", "b", "c", "bias", "z")))
        return PreparedCall(self.lib.ge_gemm_batch, args, (first, offsets))

    def pack_direct(self, w: np.ndarray, wide: bool) -> np.ndarray:
        """W (M, K) for the direct convolution's wide or tall tile: panels of P output channels, k-major
        inside (wp[p, k, j] = W[p * P + j, k], zeros past M)."""
        return _channel_panels(w, self.lib.ge_direct_panel(int(wide), w.shape[0]))

    def pack_pixels(self, w: np.ndarray) -> np.ndarray:
        """W (M, K) for the pixels convolution (csrc/conv_pixels.c): pack_direct's layout in blocks of
        its R output channels."""
        return _channel_panels(w, self.lib.ge_pixels_block())

    def conv_direct_call(self, x: int, koff: np.ndarray, wp: np.ndarray, y: int, *, m, k, rows, width, pitch,
                         ldy, wide, bias=None, z: int | None = None, act: Act | None = None,
                         half_y: bool = False, pixels: bool = False, half_x: bool = False) -> PreparedCall:
        """y[ch * ldy + oy * width + ox] = act(bias[ch] + z[...] + sum_k wp[k, ch] * x[koff[k] + oy * pitch
        + ox]) for ch < m (the direct convolution of csrc/direct_conv.c, or with pixels that of
        csrc/conv_pixels.c, its weights from pack_pixels; x, y, z are addresses), prepared.
        half_y: y and z are float16; half_x: x is float16 (the pixels convolution only)."""
        assert pixels or not half_x
        args = ConvDirect(x, _addr(koff), _addr(wp), y, _addr(bias), z, k, m, rows, width, pitch, ldy,
                          _activation(act), threads(), int(wide), (HALF_C if half_y else 0) | (HALF_B if half_x else 0))
        return PreparedCall(self.lib.ge_conv_pixels if pixels else self.lib.ge_conv_direct, args, (koff, wp, bias))

    def depthwise_call(self, x: int, w: np.ndarray, bias, y: int, *, channels, mult, spatial, out, kernel, strides,
                       dilations, pads, act: Act | None = None, x_half: bool = False,
                       half_y: bool = False) -> PreparedCall:
        """The depthwise convolution of one batch item (csrc/depthwise.c): x (channels, *spatial) at address
        x, float16 when x_half; y (channels * mult, *out) at address y, float16 when half_y; w (channels *
        mult, kh * kw) and bias float32; pads: the two at the beginnings; prepared."""
        args = Depthwise(x, w.ctypes.data, _addr(bias), y, channels, mult, *spatial, *out, *kernel, *strides,
                         *dilations, *pads, _activation(act), threads(), int(x_half), HALF_C if half_y else 0)
        return PreparedCall(self.lib.ge_depthwise, args, (w, bias))

    def conv_transpose_call(self, x: np.ndarray, wp: np.ndarray, bias, y: np.ndarray, *, kernel,
                            act: Act | None = None) -> PreparedCall:
        """A 2-D ConvTranspose whose kernel is its stride, one group (csrc/conv_transpose.c): x (N, C, H, W)
        and y (N, OC, H kh, W kw) float32, C-contiguous; wp the weights W (C, OC, kh, kw) as (kh, C, OC, kw),
        bias (OC,) or None; prepared."""
        n, c, h, w = x.shape
        args = ConvTransposeArgs(x.ctypes.data, wp.ctypes.data, _addr(bias), y.ctypes.data, n, c, h, w, y.shape[1],
                                 *kernel, _activation(act), threads())
        return PreparedCall(self.lib.ge_conv_transpose, args, (x, wp, bias, y))

    def per_item_calls(self, calls: list[PreparedCall], items: int) -> list[PreparedCall]:
        """Prepared calls of a batch's `items` (in item order; workspace-free kernels whose struct holds
        a thread count: the direct, pixels and depthwise convolutions), as they should run: where the
        items share out evenly over the threads, one job of the pool with a call per item (each
        thread takes whole items, its share of the batch in every layer, so an image's layers stay on
        the core that wrote their inputs, and no item's work is split: csrc/abi.h CallBatch); else
        as they are, each split over the threads."""
        n = threads()
        if n < 2 or items < n or items % n or len(calls) < 2:
            return calls
        for call in calls:
            call.keep[0].threads = 1  # each runs alone on its thread
        fns, args = _call_table(calls)
        batch = CallBatch(ctypes.addressof(fns), ctypes.addressof(args), len(calls), n)
        return [PreparedCall(self.lib.ge_call_batch, batch, (fns, args, tuple(calls)))]

    def step_loop(self, calls: list[PreparedCall], feeds: list, outs: list, back: list, counter: np.ndarray | None,
                  cond: np.ndarray | None) -> PreparedCall | None:
        """A loop over a static body's iterations in one call (csrc/loop.c; set its struct's start and stop,
        then run_checked() gives the iteration after the last one run): `calls` its tasks' prepared calls,
        `feeds` (input view, rows: iteration t's value rows[t]), `outs` (rows, output view: rows[t] takes
        it), `back` (input view, output view) copied each iteration; `counter` an int64 input taking the
        iteration number, `cond` a bool output ending the loop when false. None when a copy is not
        one block of bytes (a strided slice, another dtype or shape)."""
        copies = []
        for dst, src, dst_rows, src_rows in ([(v, r, False, True) for v, r in feeds] + [(r, v, True, False) for r, v in outs]
                                             + [(v, o, False, False) for v, o in back]):
            d, s = (dst[0, ...] if dst_rows else dst), (src[0, ...] if src_rows else src)
            if d.shape != s.shape or d.dtype != s.dtype or not (d.flags.c_contiguous and s.flags.c_contiguous):
                return None
            copies.append((d.ctypes.data, s.ctypes.data, d.nbytes, dst.strides[0] if dst_rows else 0,
                           src.strides[0] if src_rows else 0))
        if (counter is not None and (counter.dtype != np.int64 or counter.size != 1)) \
                or (cond is not None and (cond.dtype != np.bool_ or cond.size != 1)):
            return None
        fns, args = _call_table(calls)
        # abi.h's StepCopy array as int64 rows (its five fields are 64 bits: StepCopy's size is checked at load;
        # building ctypes structs took ~15% more)
        table = np.array(copies or [(0,) * 5], np.int64)
        assert table.itemsize * table.shape[1] == ctypes.sizeof(StepCopy)
        loop = StepLoop(ctypes.addressof(fns), ctypes.addressof(args), len(calls), table.ctypes.data,
                        len(feeds), len(outs), len(back), _addr(counter), _addr(cond), 0, 0)
        return PreparedCall(self.lib.ge_step_loop, loop, (fns, args, table, tuple(calls), feeds, outs, back, counter, cond))

    def max_pool_fits(self, x_shape, y_shape, **window) -> bool:
        """Whether ge_max_pool2d's row buffers hold this pool's rows (else keep the numpy plan)."""
        return bool(self.lib.ge_max_pool_fits(ctypes.byref(_max_pool_args(0, 0, x_shape, y_shape, **window))))

    def max_pool_call(self, x: np.ndarray, y: np.ndarray, inv_counts=None, **window) -> PreparedCall:
        """A 2-D MaxPool of x (N, C, H, W) into y (N, C, OH, OW), both C-contiguous float32 or both
        float16, prepared. window: kernel, strides, dilations, pads (at the beginnings), 2 ints each.
        inv_counts: an AveragePool instead, (1 / the windows' counts per output row: OH float32s, the
        same per output column: OW float32s), which the caller keeps alive."""
        assert x.dtype == y.dtype and x.dtype in (np.float32, np.float16)
        args = _max_pool_args(x.ctypes.data, y.ctypes.data, x.shape, y.shape, **window, half=x.dtype == np.float16,
                              inv_counts=inv_counts)
        return PreparedCall(self.lib.ge_max_pool2d, args, (x, y))

    def phase_fill_call(self, x: np.ndarray, ph: np.ndarray, lay) -> PreparedCall:
        """phase_layout.PhaseLayout.fill(ph, x) for a 2-D layout (zeros outside x), prepared; a float16 x
        is converted a row at a time as it is laid out."""
        used = sum(1 << i for i in {r0 * lay.strides[1] + r1 for _, (r0, r1), _ in lay.taps})  # the phases read
        x_half = x.dtype == np.float16
        args = PhaseFill(x.ctypes.data, ph.ctypes.data, lay.nb * lay.c, *lay.spatial, *lay.strides, *lay.pb,
                         *lay.sq, used, threads(), int(x_half))
        return PreparedCall(self.lib.ge_phase_fill, args, (x, ph))

    def rows_call(self, x: np.ndarray, y: np.ndarray, rows: int, cols: int, *, kind=ROWS_LAYER_NORM, scale=None,
                  bias=None, eps=0.0, x_trip=None, y_trip=None) -> PreparedCall:
        """Per row of `cols` floats: ROWS_SOFTMAX, ROWS_LAYER_NORM (x - mean) / sqrt(var + eps) * scale
        + bias or ROWS_RMS_NORM x / sqrt(mean(x * x) + eps) * scale (scale, bias: `cols` floats or
        None), prepared. x and y float16 (any length): converted a row at a time, computed in
        float32, rounded once. x_trip, y_trip (ROWS_SOFTMAX, float32): (scale, zero point, lo, hi,
        is_signed) of a QuantizeLinear then DequantizeLinear that x is read through, y stored through."""
        half = x.dtype == np.float16
        assert y.dtype == x.dtype
        trips = [RoundTrip(t[0], t[1], 1, t[2], t[3], int(t[4])) if t else RoundTrip() for t in (x_trip, y_trip)]
        args = Rows(x.ctypes.data, _addr(scale), _addr(bias), y.ctypes.data, rows, cols, eps, kind, threads(),
                    int(half), *trips)
        return PreparedCall(self.lib.ge_rows, args, (x, y, scale, bias))

    def nearest_call(self, x: np.ndarray, y: np.ndarray, rows: np.ndarray, cols: np.ndarray, *, planes: int, ih: int,
                     iw: int, unit: int, repeat: int = 0) -> PreparedCall:
        """Resize nearest of C-contiguous x (planes, ih, iw elements of `unit` bytes) into y (planes,
        len(rows), len(cols) elements): y[p, i, j] = x[p, rows[i], cols[j]]; rows and cols int64 and in
        range; repeat > 0 when cols[j] == j // repeat. Prepared."""
        assert rows.dtype == cols.dtype == np.int64 and x.nbytes == planes * ih * iw * unit
        assert y.nbytes == planes * len(rows) * len(cols) * unit
        args = Nearest2d(x.ctypes.data, y.ctypes.data, rows.ctypes.data, cols.ctypes.data, planes, ih, iw,
                         len(rows), len(cols), unit, repeat, threads())
        return PreparedCall(self.lib.ge_nearest2d, args, (x, y, rows, cols))

    def concat_call(self, xs: list[np.ndarray], y: np.ndarray, outer: int) -> PreparedCall:
        """Concat of C-contiguous xs into C-contiguous y along the axis after the first `outer` elements'
        worth of leading dims (each x: outer blocks of x.nbytes // outer bytes), prepared."""
        n = len(xs)
        sizes = [x.nbytes // outer if outer else 0 for x in xs]
        assert y.nbytes == outer * sum(sizes) and all(x.dtype == y.dtype for x in xs)
        src = (ctypes.c_void_p * n)(*[x.ctypes.data for x in xs])
        block = (ctypes.c_int64 * n)(*sizes)
        offset = (ctypes.c_int64 * n)(*[sum(sizes[:k]) for k in range(n)])
        args = ConcatBlocks(ctypes.addressof(src), y.ctypes.data, ctypes.addressof(block),
                            ctypes.addressof(offset), n, outer, sum(sizes))
        return PreparedCall(self.lib.ge_concat, args, (tuple(xs), y, src, block, offset))

    def gather_call(self, x: np.ndarray, y: np.ndarray, idx: np.ndarray, *, outer: int, dim: int,
                    block: int) -> PreparedCall:
        """Gather of C-contiguous x (outer, dim blocks of `block` bytes) by int64 idx into y (outer,
        idx.size blocks), prepared; its fn returns 1 when an index is out of [-dim, dim)."""
        assert idx.dtype == np.int64 and idx.flags.c_contiguous and x.nbytes == outer * dim * block
        assert y.nbytes == outer * idx.size * block
        args = GatherBlocks(x.ctypes.data, y.ctypes.data, idx.ctypes.data, outer, dim, idx.size, block)
        return PreparedCall(self.lib.ge_gather, args, (x, y, idx))

    def nms_call(self, boxes: np.ndarray, scores: np.ndarray, max_out: np.ndarray | None, iou: np.ndarray | None,
                 score_threshold: np.ndarray | None, out: np.ndarray, center: int) -> PreparedCall:
        """NonMaxSuppression of C-contiguous float32 boxes [batch, n, 4] by scores [batch, classes, n] into
        int64 out (rows of 3), the scalars (int64 max_out, float32 iou and score_threshold, or None) read at
        each run, prepared; its run_checked() returns the rows written or an NMS_* error (csrc/abi.h)."""
        (batch, n, _), classes = boxes.shape, scores.shape[1]
        assert boxes.dtype == scores.dtype == np.float32 and out.dtype == np.int64 and out.flags.c_contiguous
        args = Nms(boxes.ctypes.data, scores.ctypes.data, _addr(max_out), _addr(iou), _addr(score_threshold),
                   out.ctypes.data, out.size // 3, batch, classes, n, center)
        return PreparedCall(self.lib.ge_nms, args, (boxes, scores, max_out, iou, score_threshold, out))

    def nchwc_pack(self, w: np.ndarray, cin: int, ocp: int, group: int, wp: np.ndarray) -> None:
        """Conv weights w (oc, c, kh, kw) float32, C-contiguous, into wp: NchwcConv's panels of up to `group`
        of the ocp output channels, [ceil(c / cin)][kh][kw][cin][the panel's channels], zeros past c and oc
        (csrc/nchwc.c's ge_nchwc_pack)."""
        oc, c, kh, kw = w.shape
        assert w.dtype == wp.dtype == np.float32 and w.flags.c_contiguous and wp.flags.c_contiguous
        assert wp.size == -(-c // cin) * cin * kh * kw * ocp
        self.lib.ge_nchwc_pack(w.ctypes.data, oc, c, kh * kw, cin, ocp, group, wp.ctypes.data)

    def nchwc_conv_call(self, x: np.ndarray, wp: np.ndarray, bias: np.ndarray, y: np.ndarray, *, geometry: tuple,
                        z: np.ndarray | None = None, act: Act | None = None) -> PreparedCall:
        """The convolution in the blocked layout (csrc/nchwc.c; nchwc.py plans it): x, y, z float32 blocked
        tensors, wp and bias packed; geometry: ConvNchwc's batch .. planar, in order; prepared."""
        args = ConvNchwc(x.ctypes.data, wp.ctypes.data, bias.ctypes.data, _addr(z), y.ctypes.data, *geometry,
                         _activation(act), threads())
        return PreparedCall(self.lib.ge_nchwc_conv, args, (x, wp, bias, z, y))

    def nchwc_depthwise_call(self, x: np.ndarray, wp: np.ndarray, bias: np.ndarray, y: np.ndarray, *,
                             geometry: tuple, z: np.ndarray | None = None, act: Act | None = None) -> PreparedCall:
        """The depthwise convolution in the blocked layout (csrc/nchwc_depthwise.c; nchwc.py plans it): x, y,
        z float32 blocked tensors, wp and bias packed; geometry: DepthwiseNchwc's batch .. dw, in order;
        prepared."""
        args = DepthwiseNchwc(x.ctypes.data, wp.ctypes.data, bias.ctypes.data, _addr(z), y.ctypes.data, *geometry,
                              _activation(act), threads())
        return PreparedCall(self.lib.ge_nchwc_depthwise, args, (x, wp, bias, z, y))

    def nchwc_reorder_call(self, x: np.ndarray, y: np.ndarray, batch: int, channels: int, plane: int,
                           to_blocked: bool) -> PreparedCall:
        """NCHW x into the blocked y (to_blocked), or the blocked x into NCHW y, float32, prepared."""
        args = NchwcReorder(x.ctypes.data, y.ctypes.data, batch, channels, plane, int(to_blocked), threads())
        return PreparedCall(self.lib.ge_nchwc_reorder, args, (x, y))

    def nchwc_max_pool_call(self, x: np.ndarray, y: np.ndarray, window: tuple) -> PreparedCall:
        """MaxPool of the blocked x into the blocked y (float32, nchwc_pool.c); window: NchwcMaxPool's
        planes .. dw, in order; prepared."""
        args = NchwcMaxPool(x.ctypes.data, y.ctypes.data, *window, threads())
        return PreparedCall(self.lib.ge_nchwc_max_pool, args, (x, y))

    def nchwc_mean_call(self, x: np.ndarray, y: np.ndarray, batch: int, channels: int, plane: int) -> PreparedCall:
        """The plane means of the blocked x into NCHW y [batch][channels] (float32, nchwc_pool.c), prepared."""
        args = NchwcMean(x.ctypes.data, y.ctypes.data, batch, channels, plane, threads())
        return PreparedCall(self.lib.ge_nchwc_mean, args, (x, y))

    def nchwc_scale_call(self, x: np.ndarray, scale: np.ndarray, y: np.ndarray, batch: int, channels: int,
                         plane: int) -> PreparedCall:
        """The blocked x times the NCHW gate scale [batch][channels] per channel into the blocked y (may be x;
        float32, nchwc_pool.c), prepared."""
        args = NchwcScale(x.ctypes.data, scale.ctypes.data, y.ctypes.data, batch, channels, plane, threads())
        return PreparedCall(self.lib.ge_nchwc_scale, args, (x, scale, y))

    def eltwise_call(self, dtype_code: int, n: int, operands: list, inner: np.ndarray, period: np.ndarray,
                     code: np.ndarray, param: np.ndarray, n_regs: int, y: np.ndarray) -> PreparedCall:
        """A fused elementwise chain over n elements of y (csrc/eltwise.c documents the program:
        code int32 (ops, 4), param float64 (ops,), operands' addresses with their broadcast), prepared."""
        ext = np.array([a.ctypes.data for a in operands] or [0], np.uint64)
        args = Eltwise(n, dtype_code, len(operands), n_regs, len(param), ext.ctypes.data, inner.ctypes.data,
                       period.ctypes.data, code.ctypes.data, param.ctypes.data, y.ctypes.data)
        return PreparedCall(self.lib.ge_eltwise, args, (ext, inner, period, code, param, tuple(operands), y))

    def unary_call(self, opcode: int, x: np.ndarray, y: np.ndarray) -> PreparedCall:
        """y = op(x) for contiguous float32 or float16 x and y (float16: converted a block at a time,
        computed in float32, rounded once), as eltwise.c's one-step chain, prepared."""
        half = x.dtype == np.float16
        assert y.dtype == x.dtype and x.size == y.size and x.dtype in (np.float16, np.float32)
        code = np.array([opcode | (EW_ROUND if half else 0), 1, 0, 0], np.int32)
        contiguous = np.zeros(1, np.int64)
        return self.eltwise_call(EW_F16 if half else EW_F32, x.size, [x], contiguous, contiguous, code,
                                 np.zeros(1), 2, y)

    def binary_call(self, opcode: int, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> PreparedCall | None:
        """y = a op b (EW_ADD..EW_DIV) with numpy's broadcasting, for contiguous float32 or float16
        arrays of one dtype (int32 and int64: Add, Sub, Mul, wrapping), as eltwise.c's one-step chain (an
        operand constant along runs of the output, a squeeze-excite gate [N,C,1,1], in one vector loop
        per run), prepared; None when an operand's broadcast is not one run of dims (broadcast_pattern)."""
        half = y.dtype == np.float16
        assert a.dtype == b.dtype == y.dtype and y.dtype in _EW_DTYPES and y.dtype != np.float64
        patterns = [broadcast_pattern(x.shape, y.shape) for x in (a, b)]
        if None in patterns:
            return None
        inner, period = (np.array(p, np.int64) for p in zip(*patterns))
        code = np.array([opcode | (EW_ROUND if half else 0), 2, 0, 1], np.int32)
        return self.eltwise_call(_EW_DTYPES[y.dtype], y.size, [a, b], inner, period, code, np.zeros(1), 3, y)

    def compare_call(self, op: int, a: np.ndarray, b: np.ndarray, y: np.ndarray) -> PreparedCall | None:
        """y = a op b (CMP_LT..CMP_EQ) into bool y, for contiguous float32/64 or int32/64 a and b of one
        dtype, each of y's size or one value (csrc/eltwise.c ge_compare), prepared; None for another
        broadcast or dtype."""
        if not (a.dtype == b.dtype and a.dtype in _EW_DTYPES and a.dtype != np.float16 and y.dtype == np.bool_
                and all(x.flags.c_contiguous and x.size in (1, y.size) for x in (a, b, y))):
            return None
        args = Compare(a.ctypes.data, b.ctypes.data, y.ctypes.data, y.size, int(a.size > 1), int(b.size > 1),
                       _EW_DTYPES[a.dtype], op)
        return PreparedCall(self.lib.ge_compare, args, (a, b, y))

    # -- int8 (csrc/qgemm.c) ----------------------------------------------------------------------
    def qpack(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Weights W (K, N) int8 or uint8 (any strides) into the int8 product's panels, uint8 ones as
        w - 128; returns (panels, sums over K per column, int32)."""
        k, n = w.shape
        flip = w.dtype == np.uint8
        w = np.ascontiguousarray(w)
        out = aligned_empty(self.lib.ge_qgemm_packed_bytes(k, n), np.int8)
        sums = np.empty(n, np.int32)
        self.lib.ge_qgemm_pack(w.ctypes.data, n, k, n, int(flip), out.ctypes.data, sums.ctypes.data)
        return out, sums

    def qpack_pairs(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """qpack's weights as int16 pairs of k (QPATH_PAIRS, builds where qgemm_has_pairs)."""
        k, n = w.shape
        w = np.ascontiguousarray(w)
        out = aligned_empty(self.lib.ge_qgemm_packed_bytes(k, n), np.int16)
        sums = np.empty(n, np.int32)
        self.lib.ge_qgemm_pack_pairs(w.ctypes.data, n, k, n, int(w.dtype == np.uint8), out.ctypes.data,
                                     sums.ctypes.data)
        return out, sums

    def qpairs_fit(self, rows: np.ndarray) -> bool:
        """int8_native.pairs_fit_int16 of rows (weight index, K; int8 or uint8, any strides), in C."""
        (n, k), (si, sk) = rows.shape, rows.strides
        return bool(self.lib.ge_qgemm_pairs_fit(rows.ctypes.data, si, sk, n, k, int(rows.dtype == np.uint8)))

    def qrest_quads(self, rows: np.ndarray, width: int) -> int:
        """How many quads qsplit(rows, width) would give a rest (len of its fix_q), without splitting
        (csrc/qgemm.c's ge_qgemm_rest_quads); 0: every pair of k fits int16."""
        (n, k), (si, sk) = rows.shape, rows.strides
        count = self.lib.ge_qgemm_rest_quads(rows.ctypes.data, si, sk, n, k, int(rows.dtype == np.uint8), width)
        if count < 0:
            raise MemoryError("ge_qgemm_rest_quads: no memory for a group's quads")
        return count

    def qsplit(self, rows: np.ndarray, width: int) -> tuple[np.ndarray, tuple, np.ndarray]:
        """Weights rows (weight index, K; int8 or uint8, any strides) split so that every pair of k fits
        int16 (csrc/qgemm.c's ge_qgemm_split): (main, int8 in rows' memory order, as packed; the rest's
        (fix_start, fix_q, fix_b) per group of `width` weight indices; the whole weights' sums over K)."""
        (n, k), (si, sk) = rows.shape, rows.strides
        groups, quads = -(-n // width), -(-k // 4)
        main = np.empty((n, k), np.int8, order="F" if rows.strides[0] < rows.strides[1] else "C")
        sums, start = np.empty(n, np.int32), np.empty(groups + 1, np.int64)
        fix_q, fix_b = np.zeros(groups * quads, np.int32), np.empty((groups * quads, width, 4), np.int8)  # (C zeroes the used quads)
        slots = self.lib.ge_qgemm_split(rows.ctypes.data, si, sk, n, k, int(rows.dtype == np.uint8), width, main.ctypes.data,
                                        main.strides[0], main.strides[1], sums.ctypes.data, start.ctypes.data,
                                        fix_q.ctypes.data, fix_b.ctypes.data)
        if slots < 0:
            raise MemoryError("ge_qgemm_split: no memory for a row of rests")
        return main, (start, fix_q[:slots].copy(), fix_b[:slots].copy()), sums

    def qtwin(self, bp: np.ndarray, k: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """qpack's panels bp of (k, n) weights (k a multiple of 4, every pair of k in int16) regrouped in
        twins of quads (csrc/qgemm.c's ge_qgemm_twin): (slots, twin_start, twin_q) for qgemm_call, or None
        where the build has no twinned tile (qgemm_has_twins) or k is not a multiple of 4."""
        if not self.qgemm_has_twins or k % 4:
            return None
        panels, nr = -(-n // self.qgemm_nr), self.qgemm_nr
        start, quad = np.empty(panels + 1, np.int64), np.empty(2 * panels * (k // 4), np.int32)
        slots = self.lib.ge_qgemm_twin(bp.ctypes.data, k, n, start.ctypes.data, quad.ctypes.data)
        if slots < 0:
            return None
        out = aligned_empty(slots * nr * 4, np.int8)  # (sized by the pairing: no room for the worst case, no copy)
        self.lib.ge_qgemm_twin_fill(bp.ctypes.data, k, n, start.ctypes.data, quad.ctypes.data, out.ctypes.data)
        return out, start, quad[:slots].copy()

    @property
    def qgemm_has_twins(self) -> bool:
        """The build adds two quads' vpmaddubsw sums in int16 over twinned panels (qtwin): AVX2 without VNNI."""
        return bool(self.lib.ge_qgemm_has_twins())

    @property
    def qgemm_has_pairs(self) -> bool:
        """The build has QPATH_PAIRS (x86-64 without VNNI: AVX2 or SSE): int8 products as int16 pairs
        (vpmaddwd), or as bytes (vpmaddubsw) on weights whose pairs fit int16."""
        return bool(self.lib.ge_qgemm_has_pairs())

    def cache_sizes(self, l1d: int, l2: int) -> tuple[int, int]:
        """Size the blockings to an L1d and L2 of these bytes (0: this CPU's, as the C library reports
        them); the sizes in use, at most those they were tuned on (48 KB, 2 MB)."""
        self.lib.ge_cache_sizes(l1d, l2)
        self.caches = (self.lib.ge_cache_size(1), self.lib.ge_cache_size(2))
        return self.caches

    def qgemm_use_amx(self, want: bool) -> bool:
        """Turn the int8 product's AMX blocks on (where the build, the CPU and Linux allow: then True)
        or off (vpdpbusd: GE_NO_AMX=1 at load)."""
        self.qgemm_amx = bool(self.lib.ge_qgemm_set_amx(int(want)))
        return self.qgemm_amx

    @property
    def qgemm_nr(self) -> int:
        """The int8 product's panel width (columns)."""
        return self.lib.ge_qgemm_nr()

    @property
    def qgemm_mr(self) -> int:
        """The int8 product's tile height (rows)."""
        return self.lib.ge_qgemm_mr()

    def qgemm_workspace_nbytes(self, k: int) -> int:
        return self.lib.ge_qgemm_workspace_bytes(k, GEMM_SLOTS) + ALIGN

    def qgemm_call(self, m, n, k, *, a: int, lda: int, c: int, ldc: int, out: "QOut", zu: int, zs, sum_s, ws,
                   bp=None, b: int | None = None, koff=None, noff=None, b_flip=False, path: int = QPATH_BYTES,
                   a16=None, fix=None, twins=None, keep=()) -> PreparedCall:
        """C[i * ldc + j] = out(sum_k (U - zu)(S - zs)) (csrc/qgemm.c): rows a (addresses), either
        u8 activations over prepacked weights bp, or (bp None) s8 weights over the u8 (b_flip: int8)
        activation gathered at b[koff[k] + noff[n]]; prepared. zs: int32 per weight index or None.
        path QPATH_PAIRS: bp packed by qpack_pairs, a16 the int16 weight rows or the (m, 4 ceil(k / 4))
        int16 scratch the activation rows are widened into. fix: split weights' rest quads (fix_start,
        fix_q, fix_b: int8_native.rest_quads) or None. twins: (twin_start, twin_q) of qtwin, bp its slots."""
        ws_addr = ws.ctypes.data
        fix = fix or (None, None, None)
        twins = twins or (None, None)
        args = QGemm(m, n, k, a, lda, int(bp is None), _addr(bp), b, _addr(koff), _addr(noff), int(b_flip), zu,
                     _addr(zs), _addr(sum_s), c, ldc, out, min(threads(), GEMM_SLOTS), ws_addr + -ws_addr % ALIGN,
                     path, _addr(a16), *map(_addr, fix), *map(_addr, twins))
        return PreparedCall(self.lib.ge_qgemm, args, (bp, koff, noff, zs, sum_s, ws, a16, *fix, *twins) + tuple(keep))

    def qdepthwise_workspace_nbytes(self, geometry: dict) -> int:
        """Scratch of qdepthwise_call with this geometry (its keyword arguments but x, y, out, w, wsum, wf)."""
        args = QDepthwise(None, None, None, None, *(geometry[f] for f in _QDW_GEOMETRY), 0, 0, None, QOut(), 1, None)
        return GEMM_SLOTS * self.lib.ge_qdepthwise_slot_bytes(ctypes.byref(args)) + ALIGN

    def qdepthwise_path(self, geometry: dict, out_kind: int) -> int:
        """The path (QDW_*) ge_qdepthwise takes for this geometry, its outputs requantized into bytes
        (out_kind QOUT_U8 or QOUT_S8, their whole range: a QLinearConv's) or not (QOUT_I32: ConvInteger's)."""
        lo, hi = {QOUT_U8: (0, 255), QOUT_S8: (-128, 127)}.get(out_kind, (0, 0))
        out = QOut(kind=out_kind, lo=lo, hi=hi)
        args = QDepthwise(None, None, None, None, *(geometry[f] for f in _QDW_GEOMETRY), 0, 0, None, out, 1, None)
        return self.lib.ge_qdepthwise_path(ctypes.byref(args))

    def qdepthwise_call(self, x: int, w: np.ndarray, wsum: np.ndarray, wf: np.ndarray, y: int, *, geometry: dict,
                        zx: int, x_flip: bool, out: "QOut", ws: np.ndarray, keep=()) -> PreparedCall:
        """The int8 depthwise convolution of one batch item (csrc/qgemm.c), prepared. geometry: channels,
        height, width, pt, pl (the begin pads), kh, kw, sh, sw, dh, dw, oh, ow; wf: w as float32 in
        blocks of nchwc_block channels (ops/nchwc.py depthwise_weights)."""
        ws_addr = ws.ctypes.data
        args = QDepthwise(x, w.ctypes.data, wsum.ctypes.data, wf.ctypes.data, *(geometry[f] for f in _QDW_GEOMETRY),
                          zx, int(x_flip), y, out, threads(), ws_addr + -ws_addr % ALIGN)
        return PreparedCall(self.lib.ge_qdepthwise, args, (w, wsum, wf, ws) + tuple(keep))

    def qadd_call(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, lo: int, hi: int) -> PreparedCall:
        """QLinearAdd of two C-contiguous 8-bit tensors of c's shape, or one of them a single value (its
        factors set on .keep[0])."""
        args = QAdd(a.ctypes.data, b.ctypes.data, c.ctypes.data, c.size, 0.0, 0.0, 0.0, lo, hi,
                    int(c.dtype == np.int8), threads(), int(a.size != 1 or c.size == 1), int(b.size != 1 or c.size == 1))
        return PreparedCall(self.lib.ge_qadd, args, (a, b, c))

    def dynamic_quantize(self, x: np.ndarray, y: np.ndarray, scale: np.ndarray | None, zp: np.ndarray | None) -> None:
        """DynamicQuantizeLinear of a C-contiguous float32 x into y (uint8), scale and zp (or None)."""
        self.dynamic_quantize_call(x, y, scale, zp)()

    def dynamic_quantize_call(self, x: np.ndarray, y: np.ndarray, scale: np.ndarray | None,
                              zp: np.ndarray | None) -> Callable[[], None]:
        """dynamic_quantize prepared: the addresses read once (the caller keeps the arrays alive)."""
        return functools.partial(self.lib.ge_dynamic_quantize, x.ctypes.data, x.size, y.ctypes.data, _addr(scale),
                                 _addr(zp))

    def quantize_call(self, mode: int, x: np.ndarray, y: np.ndarray, scale: float, zp: float, lo: int, hi: int,
                      is_signed: bool) -> PreparedCall:
        """QuantizeLinear (QR_QUANTIZE, float32 x to int8 or uint8 y), DequantizeLinear (QR_DEQUANTIZE) or
        both in turn (QR_ROUND_TRIP, float32 to float32), per tensor; x and y C-contiguous, of one size."""
        args = QuantizeRun(x.ctypes.data, y.ctypes.data, y.size, scale, zp, lo, hi, int(is_signed), mode, threads())
        return PreparedCall(self.lib.ge_quantize_run, args, (x, y))

    def gemm(self, m, n, k, c, ldc, **operands) -> None:
        """One call (see call())."""
        self.call(m, n, k, c, ldc, **operands).run()

    def _works(self) -> bool:
        # fixed operands without numpy.random (its import, 20-30 ms, is part of every load): sines
        # of distinct arguments, no two rows or columns alike
        a = np.sin(np.arange(37 * 70, dtype=np.float32) * 0.7).reshape(37, 70)
        b = np.cos(np.arange(70 * 45, dtype=np.float32) * 1.3).reshape(70, 45)
        bias = np.sin(np.arange(45, dtype=np.float32) * 2.9)
        c = np.empty((37, 45), np.float32)
        ws = np.empty(self.workspace_nbytes(37, 45, 70, True, False), np.uint8)
        self.gemm(37, 45, 70, c, 45, a=a, lda=70, bp=self.pack_b(b), bias_n=bias, act=Act(ACT_CLAMP, 0.0, 1.0), ws=ws)
        ok = np.allclose(c, np.clip(a @ b + bias, 0, 1), rtol=1e-4, atol=1e-5)
        koff = np.arange(70, dtype=np.int64) * 45
        noff = np.arange(45, dtype=np.int64)
        ws = np.empty(self.workspace_nbytes(37, 45, 70, False, True), np.uint8)
        self.gemm(37, 45, 70, c, 45, ap=self.pack_a(a), b=b, koff=koff, noff=noff, ws=ws)
        ok = ok and np.allclose(c, a @ b, rtol=1e-4, atol=1e-5)
        # the direct convolution, both tiles (register transposes): 37 channels of 45 pixels, a 1x1 conv of 70
        for wide in (False, True):
            self.conv_direct_call(b.ctypes.data, koff, self.pack_direct(a, wide), c.ctypes.data, m=37, k=70, rows=1,
                                  width=45, pitch=45, ldy=45, wide=wide, bias=bias[:37].copy()).run()
            ok = ok and np.allclose(c, a @ b + bias[:37, None], rtol=1e-4, atol=1e-5)
        self.conv_direct_call(b.ctypes.data, koff, self.pack_pixels(a), c.ctypes.data, m=37, k=70, rows=1, width=45,
                              pitch=45, ldy=45, wide=False, bias=bias[:37].copy(), pixels=True).run()
        return ok and np.allclose(c, a @ b + bias[:37, None], rtol=1e-4, atol=1e-5)


def _max_pool_args(x: int, y: int, x_shape, y_shape, *, kernel, strides, dilations, pads, half=False,
                   inv_counts=None) -> MaxPool2d:
    (n, c, h, w), (oh, ow) = x_shape, y_shape[2:]
    inv = [None, None] if inv_counts is None else [a.ctypes.data for a in inv_counts]
    return MaxPool2d(x, y, *inv, n * c, h, w, oh, ow, *kernel, *strides, *dilations, *pads, threads(), int(half))


def broadcast_pattern(shape: tuple, out: tuple) -> tuple[int, int] | None:
    """(inner, period) of an operand of `shape` read at every element of `out` (csrc/abi.h's Eltwise):
    (0, 0) contiguous, else element i reads operand[(i // inner) % period]; None when its dims that
    vary are not one run."""
    shape, out = tuple(shape), tuple(out)
    if shape == out:
        return 0, 0
    shape = (1,) * (len(out) - len(shape)) + shape
    varying = [d for d, (s, o) in enumerate(zip(shape, out)) if s != 1]
    if not varying:
        return 1, 1
    first, last = varying[0], varying[-1]
    if any(shape[d] != out[d] for d in range(first, last + 1)):
        return None
    return math.prod(out[last + 1:]), math.prod(out[first:last + 1])


def _channel_panels(w: np.ndarray, size: int) -> np.ndarray:
    """W (M, K) in panels of `size` rows, k-major inside (wp[p, k, j] = W[p * size + j, k], zeros past M)."""
    (m, k), panels = w.shape, -(-w.shape[0] // size)
    padded = np.zeros((panels * size, k), np.float32)
    padded[:m] = w
    out = aligned_empty(panels * k * size)
    out.reshape(panels, k, size)[:] = padded.reshape(panels, size, k).transpose(0, 2, 1)
    return out


def _half_bits(**operands) -> int:
    """The HALF_* bits of the float16 arrays among a GEMM's operands a, b, c, bias_n."""
    bits = {"a": HALF_A, "b": HALF_B, "c": HALF_C, "bias_n": HALF_BIAS}
    return sum(bits[k] for k, x in operands.items() if isinstance(x, np.ndarray) and x.dtype == np.float16)


def _ptr_of(x):
    if x is None or isinstance(x, int):
        return x
    return x.ctypes.data
