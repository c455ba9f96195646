"""Conv through ge's native kernels (native.py): per batch item and group, Y = act(W @ columns + bias
(+ Z)) on the direct convolution kernel or the GEMM; a 2-D depthwise Conv on the depthwise kernel.

The columns are never built: both kernels read the input through an offset per step of K
(koff[k]: the channel's plane and the kernel tap), so im2col costs no memory traffic of its own.
The source:
- pointwise (1x1, stride 1, no padding): X itself;
- otherwise the padded input, laid out once in its stride phases (phase_layout.PhaseLayout), where every
  kernel tap of an output row is a unit-stride run.
The kernel (`kind`):
- "direct" / "direct-wide" (1-D and 2-D; see use_direct): output channels in the vector lanes,
  each block of output pixels a run of the source broadcast from place, no padding column
  computed; the two tiles are csrc/direct_conv.c's tall and wide ones;
- "pixels" (1-D and 2-D; see use_pixels): the other way around, csrc/conv_pixels.c: output pixels
  in the lanes, read from the source's runs in place, the weights broadcast, Y stored from the
  registers; for a short K, a 1x1 kernel over a large plane, a first conv of few channels;
- "gemm" (pointwise), "gemm-flat", "gemm-dense": the GEMM packs its panels of columns from the
  source (B[k, n] = src[koff[k] + noff[n]]). "flat" columns run over the phase rows, padding
  columns included, so every panel is one contiguous copy per row, and the GEMM drops the padding
  columns as it stores into Y (3-D: the result lands in the workspace and one pass drops them);
  when those columns would add too many panels of work, "dense" columns gather the output pixels.
W is packed once, at build. Bias, FusedConv's residual Z and the activation the compiler fused onto
the Conv (epilogue.native_act: Relu, Clip, HardSwish, HardSigmoid, Sigmoid, Tanh, Swish, LeakyRelu, Gelu)
are applied as Y is stored: the kernel absorbs the epilogue.
float16 (float16.Float16ViaFloat32): the GEMM, the direct and the depthwise kernel write a float16 Y
(and read a float16 Z) themselves, and X is read as float16 by the GEMM's packing (pointwise), by the
pixels kernel (pointwise, a vector converted as it is loaded), by the 2-D phase fill, or by the
depthwise kernel; only the direct kernel's pointwise X (read a broadcast scalar at a time) is given in
float32.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from ..native import HALF_B, HALF_C, Act, CallCache, CallSequence, Native
from .phase_layout import phase_layout

#: flat columns while their panels are at most this many times the dense columns'; dense (gathered) beyond
FLAT_WASTE = 1.15
#: The direct kernel (output channels in the vector lanes, pixels broadcast, the input read in place)
#: runs every 1-D or 2-D conv whose kernel has more than one tap: no packing pass, no padding or tail
#: columns computed. A 1x1 conv's direct kernel reads the input a plane apart per step of K (a page
#: each, where the GEMM's packing reads runs), so it takes the direct kernel only where the GEMM's
#: panels of nr pixels would compute this many times the pixels (a 7x7 output: 64 for 49).
DIRECT_WASTE = 1.2
#: ... and from this waste on where the conv reduces channels (K >= M): the GEMM packs each panel of B
#: (K x nr) for ceil(M / mr) blocks of rows, few of them here, where the direct kernel packs nothing
#: (single-threaded, 14x14 planes, 196 pixels in 224 columns: ResNet-50's 1024 -> 256 6.5% and 1024 -> 512
#: 4.5% faster direct, MobileNetV2/V3's 384 -> 64 .. 672 -> 112 10-12%; expanding ones 1-4% slower direct)
DIRECT_WASTE_REDUCING = 1.1
#: the direct kernel's wide tile (4 vectors of channels x 6 pixels) from this K on, for kernels of
#: several taps; else the tall one (2 x 14): its transposes into Y cost less per pixel, and a 1x1
#: kernel's rows of K lie a plane (a page) apart, so each one read should feed as many pixels as it can.
#: Output rows narrower than DIRECT_WIDE_ROW take the tall tile too: a row of 7 is one block of 7
#: there, two of 4 and 3 in the wide tile (measured 5-8% slower)
DIRECT_WIDE_K = 256
DIRECT_WIDE_ROW = 8
#: The pixels kernel (csrc/conv_pixels.c: the weights broadcast, output pixels in the vector lanes,
#: the input read in place and Y written from the registers, nothing packed or transposed) runs convs
#: over runs (output rows, or a pointwise conv's plane) of at least PIXELS_RUN pixels with
#: - a short K, up to PIXELS_K steps (pointwise convs of 16-32 channels over 112x112, a network's first
#:   conv): there the GEMM's packing and stores and the direct kernel's transposes are much of the work;
#: - a 1x1 kernel over at least PIXELS_PLANE output pixels, any K (single-threaded, in the model:
#:   MobileNetV2's projections at 56x56 and 28x28 15-35% faster than the GEMM, ResNet-50's 1x1 convs
#:   at 56x56 and 28x28 5-10%), or over PIXELS_GEMM_PLANE where the direct kernel would not take it
#:   (14x14: MobileNetV2/V3's expanding convs 5-15% faster than the GEMM, ResNet-50's 256 -> 1024 0-3%;
#:   the direct kernel keeps the reducing ones, 10-15% faster there, and 7x7 planes);
#: - at most PIXELS_FIRST_C input channels, any kernel (ResNet-50's 7x7 conv1, K = 147: 15% faster
#:   than the direct kernel);
#: - 2-D, at most PIXELS_NARROW_M output channels and a kernel of several taps, at AVX-512's tiles (blocks
#:   of PIXELS_NARROW_BLOCK channels): the direct kernel's tall tile would hold one or two vectors of
#:   channels (24 of 32 lanes used for 24) by 14 pixels, fewer useful FMAs per load than the pixels
#:   tile's 8 channels by 48 pixels (DBNet's head, 96 -> 24 over 40 x 240, one thread on a Zen 4: the
#:   wide tile 8.1-11.6 ms, the tall one 6.3-7.9, pixels 6.2-6.4, onnxruntime 5.8-6.3; 32 -> 32 over
#:   80 x 80 1.82, 1.59, 1.45). AVX2's tiles (blocks of 4 channels, a direct tile of 2 or 3 vectors by 6
#:   or 4 pixels) run those faster direct (96 -> 24: 5.4-6.9 against 7.8; 128 -> 16: 6.3 against 8.5).
PIXELS_K = 32
PIXELS_RUN = 48
PIXELS_PLANE = 784
PIXELS_GEMM_PLANE = 196
PIXELS_FIRST_C = 4
PIXELS_NARROW_M = 32
PIXELS_NARROW_BLOCK = 8


class NativeConv:
    """A dense (not depthwise) Conv, any group count, on the direct kernel or the native GEMM."""

    def __init__(self, k, nat: Native, act: Act | None, residual: bool = False):
        self.nat, self.act, self.residual = nat, act, residual
        self.n, self.g, self.cg, self.ocg, self.oc = k.n, k.g, k.cg, k.ocg, k.oc
        self.kdim = k.cg * k.kp
        self.pointwise = all(v == 1 for v in k.kernel) and not k.has_pad and all(s == 1 for s in k.strides)
        self.pixels = use_pixels(k, nat.nr, self.pointwise, nat.lib.ge_pixels_block())
        self.direct = self.pixels or (use_direct(k, nat.nr, self.pointwise) and not strided_beyond_l2(k, nat.caches[1]))
        self.wide = self.direct and not self.pixels and use_wide(k, self.kdim, nat.lib.ge_direct_panel(0, k.ocg))
        self.dense = math.prod(k.out)
        self.calls = CallCache()
        self.flat = False
        if self.pointwise:  # columns straight from X
            self.lay = None
            plane = math.prod(k.spatial)
            self.koff = np.arange(k.cg, dtype=np.int64) * plane
            self.noff = np.arange(plane, dtype=np.int64)
        else:
            lay = self.lay = phase_layout(k.n, k.c, k.spatial, k.pb, k.strides, k.kernel, k.dil, k.out, np.float32)
            plane = math.prod(lay.sq)
            self.koff = (np.arange(k.cg, dtype=np.int64)[:, None] * plane + tap_offsets(lay)[None, :]).ravel()
            k.scratch.add("ph", lay.phase_shape, np.float32)
        self.group_step, self.item_step = k.cg * plane, k.c * plane  # elements of the source
        # the GEMM's scratch either way: a machine whose vector width makes the other choice (DIRECT_WASTE
        # counts panels of nr pixels) must find the OM's workspace big enough for it
        gemm_columns = math.prod(k.spatial) if self.pointwise else max(self.lay.L, self.dense)
        k.scratch.add("gemm", (nat.workspace_nbytes(k.ocg, gemm_columns, self.kdim, raw_a=False, gathered_b=True),),
                      np.uint8)
        if self.direct:  # Y written by the kernel, output rows `pitch` apart in the source
            self.kind = "pixels" if self.pixels else "direct-wide" if self.wide else "direct"
            two_d = self.lay is not None and len(k.out) == 2
            self.rows, self.width = (k.out[0], k.out[1]) if two_d else (1, self.dense)
            self.pitch = self.lay.pst[0] if two_d else self.dense
            self.flat_map, self.writes_y, self.absorbs = None, True, act is not None
            return
        if not self.pointwise:
            panels = lambda columns: -(-columns // nat.nr)  # the GEMM's work is in panels of nr columns
            self.flat = panels(lay.L) <= panels(lay.dense) * FLAT_WASTE
            self.noff = np.arange(lay.L, dtype=np.int64) if self.flat else _grid(k.out, lay.pst)
            if self.flat and lay.L != lay.dense and len(k.out) != 2:  # 3-D padding columns: through the workspace
                k.scratch.add("yflat", (k.n, k.oc, lay.L), np.float32)
        self.kind = "gemm" if self.pointwise else "gemm-flat" if self.flat else "gemm-dense"
        # 2-D flat columns with padding ones: the GEMM writes Y through the (pitch, width) map
        self.flat_map = (lay.pst[0], k.out[1]) if self.flat and lay.L != lay.dense and len(k.out) == 2 else None
        self.columns = len(self.noff)
        # a residual Z is added by the GEMM when it writes Y itself; through the workspace, by the
        # pass that drops the padding columns, and the activation (after Z) is then the runtime's
        self.writes_y = not k.scratch.items.get("yflat")
        self.absorbs = act is not None and (self.writes_y or not residual)
        if not self.absorbs:
            self.act = None

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """X when the GEMM packs it, the pixels kernel reads it in place or the native (2-D) phase fill
        lays it out; Z with a float16 Y."""
        lay = self.lay
        reads_x = (not self.direct or self.pixels) if lay is None else len(lay.spatial) == 2
        return frozenset(([0] if reads_x else []) + ([3] if y_half and self.residual else []))

    def float16_outputs(self) -> bool:
        return self.writes_y

    def pack(self, k, w: np.ndarray, b: np.ndarray | None) -> None:
        """W per group in the layout of the direct or pixels kernel's tile or of the GEMM's A panels."""
        nat = self.nat
        pack = nat.pack_pixels if self.pixels else (lambda wg: nat.pack_direct(wg, self.wide)) if self.direct \
            else nat.pack_a
        key = ("native-pixels", k.g) if self.pixels else ("native-direct", self.wide, k.g) if self.direct \
            else ("native", k.g)
        self.w_packed = k.shared_pack(key, lambda w: [pack(wg) for wg in w.reshape(k.g, k.ocg, self.kdim)], w)
        self.bias = None if b is None else np.ascontiguousarray(b, np.float32).reshape(k.g, k.ocg)

    def builder(self, x: np.ndarray, y: np.ndarray, v: dict, z: np.ndarray | None = None):
        """run()'s calls for these arrays as one, to prepare once (Kernel.bound), or None where run()
        has steps of its own (Y through the workspace, a strided Z)."""
        if "yflat" in v or (z is not None and not z.flags.c_contiguous):
            return None
        return lambda: CallSequence(self._calls(x, v.get("ph"), y, v.get("gemm"), z))

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: np.ndarray | None = None) -> None:
        ph, out = v.get("ph"), v.get("yflat", y)
        gz = z if out is y else None  # Z for the kernel: only when it writes Y itself
        ws = v.get("gemm")
        if gz is not None and not gz.flags.c_contiguous:  # a copy: new each run, so are its calls
            calls = self._calls(x, ph, out, ws, np.ascontiguousarray(gz))
        else:
            calls = self.calls.get((x, ph, out, ws, gz), lambda: self._calls(x, ph, out, ws, gz))
        for call in calls:
            call.run()
        if out is not y:
            if z is None:
                np.copyto(y, self.lay.dense_view(out))
            else:
                np.add(self.lay.dense_view(out), z, out=y)

    def _calls(self, x, ph, out, ws, z) -> list:
        """The phase fill (unless pointwise), then one direct conv or GEMM per batch item and group:
        W[group] @ the group's columns of the item (+ Z)."""
        src = x if ph is None else ph
        base, out_addr = src.ctypes.data, out.ctypes.data
        ld = self.dense if self.direct or self.flat_map else self.columns  # the elements of one output channel
        out_item, out_group = self.oc * ld * out.itemsize, self.ocg * ld * out.itemsize
        half_y = out.dtype == np.float16
        half = (HALF_B if src.dtype == np.float16 else 0) | (HALF_C if half_y else 0)
        assert z is None or z.dtype == out.dtype
        fill = [] if ph is None else [fill_call(self.nat, self.lay, x, ph)]
        calls = []
        for i in range(self.n):
            for gi in range(self.g):
                x_at = base + (i * self.item_step + gi * self.group_step) * src.itemsize
                y_at = out_addr + i * out_item + gi * out_group
                z_at = None if z is None else z.ctypes.data + i * out_item + gi * out_group
                bias = None if self.bias is None else self.bias[gi]
                if self.direct:
                    calls.append(self.nat.conv_direct_call(
                        x_at, self.koff, self.w_packed[gi], y_at, m=self.ocg, k=self.kdim, rows=self.rows,
                        width=self.width, pitch=self.pitch, ldy=ld, wide=self.wide, bias=bias, z=z_at, act=self.act,
                        half_y=half_y, pixels=self.pixels, half_x=src.dtype == np.float16))
                else:
                    calls.append(self.nat.call(
                        self.ocg, self.columns, self.kdim, y_at, ld, ap=self.w_packed[gi], b=x_at, koff=self.koff,
                        noff=self.noff, bias_m=bias, z=z_at, ldz=ld, act=self.act, flat=self.flat_map, ws=ws,
                        half=half))
        if self.direct:  # no workspace: the batch's items may run at once, a thread each (the GEMM's share one)
            calls = self.nat.per_item_calls(calls, self.n)
        return fill + calls


class NativeConvGemv:
    """A 1x1 Conv (one group, no padding or strides, no residual) on a 1x1 plane (a squeeze-excite
    block's): y[item] = act(W @ x[item] + bias) for all items in one GEMV (csrc/gemv.c), reading
    W [Cout, Cin] as it is, once."""
    kind = "gemv"

    @staticmethod
    def applies(k, residual: bool) -> bool:
        return k.g == 1 and not residual and not k.has_pad and math.prod(k.spatial) == 1 and \
            all(v == 1 for v in tuple(k.kernel) + tuple(k.strides))

    def __init__(self, k, nat: Native, act: Act | None):
        self.nat, self.act, self.n, self.c, self.oc = nat, act, k.n, k.c, k.oc
        self.absorbs = act is not None
        self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        return frozenset([0])  # its items, converted once per call

    def float16_outputs(self) -> bool:
        return True

    def pack(self, k, w: np.ndarray, b: np.ndarray | None) -> None:
        self.w = np.ascontiguousarray(w, np.float32).reshape(self.oc, self.c)  # a view when W is float32 already
        self.bias = None if b is None else np.ascontiguousarray(b, np.float32).reshape(self.oc)

    def builder(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None):
        return lambda: self.nat.gemv_call(self.n, x, self.c, self.w, y, self.oc, bias=self.bias, act=self.act)

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None) -> None:
        self.calls.get((x, y), self.builder(x, y, v)).run()


class NativeConvColumn:
    """A Conv with one output pixel per item (one group, no residual; a streaming model's convs over
    the last frame or two): each item's one window, padding zeros included, gathered into a column of
    K = C * taps by two precomputed index passes, then y[item] = act(W @ column + bias) for all items
    in one GEMV (csrc/gemv.c) reading W [Cout, C * taps] as it is stored. The phase fill and the
    direct kernel's tiles of pixels cost several times that for one pixel (a VAD's 64 -> 64 and
    64 -> 128 convs over one frame: 7-8 us each, 2-3 us here)."""
    kind = "gemv-column"

    @staticmethod
    def applies(k, residual: bool) -> bool:
        return k.g == 1 and not residual and k.p_out == 1

    def __init__(self, k, nat: Native, act: Act | None):
        self.nat, self.act, self.n, self.oc, self.kdim = nat, act, k.n, k.oc, k.c * k.kp
        self.absorbs = act is not None
        self.calls = CallCache()
        # per (item, channel, tap): the input element the window reads there, or padding (output
        # position 0's window starts at -pads)
        taps = np.array(list(itertools.product(*[range(v) for v in k.kernel])), np.int64).reshape(k.kp, len(k.kernel))
        pos = taps * np.array(k.dil) - np.array(k.pb)
        inside = np.all((pos >= 0) & (pos < np.array(k.spatial)), axis=1)
        at = np.ravel_multi_index(tuple(np.clip(pos, 0, np.array(k.spatial) - 1).T), tuple(k.spatial))
        lines = np.arange(k.n * k.c, dtype=np.int64)[:, None]  # (item, channel) pairs
        src, dst = lines * math.prod(k.spatial) + at[None, :], lines * k.kp + np.arange(k.kp)[None, :]
        inside = np.broadcast_to(inside[None, :], src.shape)
        self.zero, self.dst, self.src = dst[~inside], dst[inside], src[inside]
        k.scratch.add("column", (k.n, self.kdim), np.float32)

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        return frozenset()  # (the float16 adapter hands X over in float32)

    def float16_outputs(self) -> bool:
        return False

    def pack(self, k, w: np.ndarray, b: np.ndarray | None) -> None:
        self.w = np.ascontiguousarray(w, np.float32).reshape(self.oc, self.kdim)  # a view when W is float32 already
        self.bias = None if b is None else np.ascontiguousarray(b, np.float32).reshape(self.oc)

    def builder(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None):
        return lambda: CallSequence(self._calls(x, y, v["column"]))

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None) -> None:
        for call in self.calls.get((x, y, v["column"]), lambda: self._calls(x, y, v["column"])):
            call.run()

    def _calls(self, x, y, column) -> list:
        return [_ColumnGather(self, x, column),
                self.nat.gemv_call(self.n, column, self.kdim, self.w, y, self.oc, bias=self.bias, act=self.act)]


class _ColumnGather:
    """NativeConvColumn's gather as a call: the windows of x into the columns (zeros at padding)."""

    def __init__(self, plan: NativeConvColumn, x: np.ndarray, column: np.ndarray):
        self.plan, self.x, self.column = plan, x, column.reshape(-1)

    def run(self) -> None:
        p, flat = self.plan, self.column
        flat[p.zero] = 0
        flat[p.dst] = self.x.reshape(-1)[p.src]  # (x read anew each run: a copy when it is not contiguous)


def use_pixels(k, nr: int, pointwise: bool, block: int) -> bool:
    """The pixels kernel for this conv (by shape, see PIXELS_K; block: its channels per block, the
    native level's; not when the backend's `direct` forces the direct kernel or the GEMM)."""
    if k.backend.direct != "auto" or not (pointwise or len(k.out) <= 2):
        return False
    run = math.prod(k.out) if pointwise else k.out[-1]
    one_tap = all(v == 1 for v in k.kernel)
    plane = math.prod(k.out)
    large = plane >= PIXELS_PLANE or plane >= PIXELS_GEMM_PLANE and not use_direct(k, nr, pointwise)
    narrow = not one_tap and len(k.out) == 2 and k.ocg <= PIXELS_NARROW_M and block == PIXELS_NARROW_BLOCK
    return run >= PIXELS_RUN and (k.cg * math.prod(k.kernel) <= PIXELS_K or k.cg <= PIXELS_FIRST_C or
                                  one_tap and large or narrow)


def use_wide(k, kdim: int, tall_panel: int) -> bool:
    """The direct kernel's wide tile for this conv (DIRECT_WIDE_K, DIRECT_WIDE_ROW), and only for more
    output channels than the tall tile's panel holds (tall_panel: the level's): with fewer it would fill
    one or two of its vectors for 6 pixels where the tall tile fills them for 14 (AVX-512)."""
    return any(v > 1 for v in k.kernel) and kdim >= DIRECT_WIDE_K and k.out[-1] >= DIRECT_WIDE_ROW and \
        k.ocg > tall_panel


def use_direct(k, nr: int, pointwise: bool) -> bool:
    """The direct kernel for this conv (the backend's `direct`: "auto", or "always"/"never" where it can run)."""
    choice = k.backend.direct
    if choice == "never" or not (pointwise or len(k.out) <= 2):
        return False
    pixels = math.prod(k.out)
    several_taps = any(v > 1 for v in k.kernel)
    waste = -(-pixels // nr) * nr / pixels
    return choice == "always" or several_taps or waste > DIRECT_WASTE or \
        (waste > DIRECT_WASTE_REDUCING and k.cg * math.prod(k.kernel) >= k.ocg)


def strided_beyond_l2(k, l2: int) -> bool:
    """A strided 1-D conv whose input outgrows the L2 takes the GEMM (unless the backend says "always"):
    the direct kernel reads the whole input once per group of output channels, from memory once it no
    longer fits, where the GEMM packs each panel of columns once. Whisper's conv2 (384 -> 384, k 3,
    stride 2, 3000 samples: 4.6 MB), one thread: 21.3 -> 14.5 ms at v3 (onnxruntime 14.6), 10.2 -> 8.8 at
    v4vnni; 768 -> 768 85.7 -> 56.8 at v3; inputs within the L2 ran level or the direct kernel 3-4% ahead."""
    return k.backend.direct != "always" and len(k.out) == 1 and any(s > 1 for s in k.strides) \
        and k.c * math.prod(k.spatial) * 4 > l2


class NativeDepthwise:
    """A 2-D depthwise Conv (group == C, any channel multiplier) through the native depthwise kernel
    (csrc/depthwise.c): per output channel, the sum over kernel taps of weight x the input read in
    place or from the channel's stride phases laid out as it goes, with bias and the fused activation,
    written straight into Y. No workspace."""
    kind = "depthwise"

    def __init__(self, k, nat: Native, act: Act | None):
        self.nat, self.act, self.n, self.c, self.oc = nat, act, k.n, k.c, k.oc
        self.spatial, self.out, self.kernel = tuple(k.spatial), tuple(k.out), tuple(k.kernel)
        self.strides, self.dilations, self.pads = tuple(k.strides), tuple(k.dil), tuple(k.pb)
        self.absorbs = act is not None
        self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """X: the kernel converts it as it reads it."""
        return frozenset([0])

    def float16_outputs(self) -> bool:
        return True

    def pack(self, k, w: np.ndarray, b: np.ndarray | None) -> None:
        self.w = np.ascontiguousarray(w, np.float32).reshape(k.oc, k.kp)  # a view when W is float32 already
        self.bias = None if b is None else np.ascontiguousarray(b, np.float32)

    def builder(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None):
        return lambda: CallSequence(self._calls(x, y))

    def run(self, x: np.ndarray, y: np.ndarray, v: dict, z: None = None) -> None:  # no residual: one group only
        for call in self.calls.get((x, y), lambda: self._calls(x, y)):
            call.run()

    def _calls(self, x, y) -> list:
        """One call per batch item (per_item_calls: one job of them where the items share out evenly)."""
        item_in, item_out = self.c * math.prod(self.spatial) * x.itemsize, self.oc * math.prod(self.out) * y.itemsize
        calls = [self.nat.depthwise_call(x.ctypes.data + i * item_in, self.w, self.bias, y.ctypes.data + i * item_out,
                                         channels=self.c, mult=self.oc // self.c, spatial=self.spatial, out=self.out,
                                         kernel=self.kernel, strides=self.strides, dilations=self.dilations,
                                         pads=self.pads, act=self.act, x_half=x.dtype == np.float16,
                                         half_y=y.dtype == np.float16)
                 for i in range(self.n)]
        return self.nat.per_item_calls(calls, self.n)


class _NumpyFill:
    """PhaseLayout.fill as a call (1-D and 3-D layouts; the native fill is 2-D)."""

    def __init__(self, lay, x, ph):
        self.lay, self.x, self.ph = lay, x, ph

    def run(self) -> None:
        self.lay.fill(self.ph, self.x)


def tap_offsets(lay) -> np.ndarray:
    """Per kernel tap, where its run starts in the phase layout, from the start of channel 0's plane
    of its phase (phases are (nb, c, *sq) blocks, in C order over the strides)."""
    phase_elems = lay.nb * lay.c * math.prod(lay.sq)
    return np.array([np.ravel_multi_index(r, tuple(lay.strides)) * phase_elems + off for _, r, off in lay.taps],
                    np.int64)


def fill_call(nat: Native, lay, x: np.ndarray, ph: np.ndarray):
    """The fill of the phase layout: native for 2-D, numpy's otherwise."""
    return nat.phase_fill_call(x, ph, lay) if len(lay.spatial) == 2 else _NumpyFill(lay, x, ph)


def _grid(out, steps) -> np.ndarray:
    """Offsets of the output pixels (C order) for per-axis element steps."""
    grids = np.meshgrid(*[np.arange(o, dtype=np.int64) * s for o, s in zip(out, steps)], indexing="ij")
    return sum(grids).ravel() if grids else np.zeros(1, np.int64)
