"""ge's ops on the blocked layout NCHW16c (passes/nchwc_layout.py gives a region of convolutions that
layout): a tensor [N][C][H][W] held as [N][ceil(C/16)][H][W][16], 16 channels innermost, the padding
channels finite (zeros from ReorderInput, act(0) from a conv: the next conv's zero weights ignore
them). The block is 16 on every machine, so an OM's blocked shapes do not depend on where it runs.

- ReorderInput: NCHW -> blocked (where a value enters a region);
- ReorderOutput (channels): blocked -> NCHW (where one leaves it: a reader outside, a model output);
- NchwcConv: a 2-D Conv of one group, or a depthwise one (group == channels, one output channel per
  group), X and Y (and FusedConv's residual Z, one group only) blocked, W and B as the Conv has them;
  the attributes are Conv's (its schema at the model's opset) and the fused epilogue;
- NchwcMaxPool: a 2-D MaxPool (no Indices) on blocked tensors, MaxPool's attributes;
- NchwcGlobalAveragePool (channels): blocked X -> its NCHW means (N, C, 1, 1);
- NchwcMul: blocked X times an NCHW gate S (N, C, 1, 1) per channel -> blocked Y (squeeze-excite).

Native plans: csrc/nchwc.c and csrc/nchwc_depthwise.c through nchwc.py (weights packed at load through
the pack cache; the kernel applies bias, Z and a one-step activation as it stores, Y may be Z),
csrc/nchwc_pool.c (the pools and NchwcMul's scale). The
numpy plans unblock into the workspace, run the NCHW op's numpy plan, and block the result."""
from __future__ import annotations

import numpy as np

from ...model.errors import GraphError
from ...model.ir import Meta
from . import nchwc
from ..backend import NUMPY
from ..epilogue import ATTR as EPILOGUE, native_act
from ..fused import GE_DOMAIN
from ..native import CallCache, run_for_threads
from .nchwc import NchwcConv as NativeNchwcConv, NchwcDepthwise as NativeNchwcDepthwise, reorder
from ..planned import PlannedKernel, Scratch
from ..registry import lookup, register
from ..schema import attribute_problem

#: channels per block, on every machine
BLOCK = 16


def blocked_shape(shape) -> tuple:
    """(n, ceil(c / BLOCK), *spatial, BLOCK) of an NCHW shape."""
    return nchwc.blocked_shape(tuple(shape), BLOCK)


def to_blocked(x: np.ndarray, y: np.ndarray) -> None:
    """NCHW x into blocked y, zeros in the padding channels (numpy)."""
    n, c = x.shape[:2]
    full, tail = divmod(c, BLOCK)
    channels_last = np.moveaxis(y, -1, 2)  # [n][cb][B][spatial]: a view of y
    np.copyto(channels_last[:, :full], x[:, :full * BLOCK].reshape(channels_last[:, :full].shape))
    if tail:
        np.copyto(channels_last[:, full, :tail], x[:, full * BLOCK:])
        channels_last[:, full, tail:] = 0


def from_blocked(x: np.ndarray, y: np.ndarray) -> None:
    """Blocked x into NCHW y (its padding channels dropped; numpy)."""
    c = y.shape[1]
    full, tail = divmod(c, BLOCK)
    channels_last = np.moveaxis(x, -1, 2)
    np.copyto(y[:, :full * BLOCK].reshape(channels_last[:, :full].shape), channels_last[:, :full])
    if tail:
        np.copyto(y[:, full * BLOCK:], channels_last[:, full, :tail])


class _Blocked(PlannedKernel):
    """Checks shared by the blocked ops: float32 4-D tensors, blocked ones of BLOCK channels."""

    def float32_meta(self, i: int, what: str, rank: int) -> Meta:
        m = self.input_meta(i, what)
        if m.dtype != np.float32 or len(m.shape) != rank:
            raise self.fail(f"input {i} ({what}) is {m.dtype} {tuple(m.shape)}, float32 of rank {rank} expected")
        return m

    def blocked_meta(self, i: int, what: str) -> Meta:
        m = self.float32_meta(i, what, 5)
        if m.shape[-1] != BLOCK:
            raise self.fail(f"input {i} ({what}) has shape {tuple(m.shape)}: blocks of {BLOCK} channels expected last")
        return m

    def channels_attr(self, blocks: int) -> int:
        """attrs['channels']: the NCHW channel count of a blocked X of `blocks` blocks (required, since the
        blocked shape rounds it up)."""
        c = self.attrs.get("channels")
        if type(c) is not int or not (blocks - 1) * BLOCK < c <= blocks * BLOCK:
            raise self.fail(f"attrs['channels'] must be an int in [{(blocks - 1) * BLOCK + 1}, {blocks * BLOCK}] "
                            f"(X has {blocks} blocks of {BLOCK}), got {c!r}")
        return c

    def native_lib(self):
        """The native library when this backend has one running the layout's block, else None."""
        nat = self.backend.lib
        return nat if nat is not None and nat.nchwc_block == BLOCK else None


class _Reorder(_Blocked):
    """NCHW <-> blocked: the native reorder, or numpy's copies through strided views."""
    to_blocked: bool

    def plan_reorder(self, out: Meta) -> None:
        self.out_metas = [out]
        self.scratch = Scratch()
        self.nat = self.native_lib()
        self.uses_native = self.nat is not None
        self.calls = CallCache()

    def _native(self, x, y) -> bool:
        return self.nat is not None and x.flags.c_contiguous and y.flags.c_contiguous

    def bound(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self._native(x, y):
            return run_for_threads(lambda: reorder(self.nat, x, y, self.to_blocked))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self._native(x, y):
            self.calls.get((x, y), lambda: reorder(self.nat, x, y, self.to_blocked)).run()
        else:
            (to_blocked if self.to_blocked else from_blocked)(x, y)


@register("ReorderInput", since=1, domain=GE_DOMAIN)
class ReorderInput(_Reorder):
    """NCHW X (float32, 4-D) -> blocked Y."""
    to_blocked = True

    def prepare(self):
        xm = self.float32_meta(0, "X", 4)
        self.plan_reorder(Meta(xm.dtype, blocked_shape(xm.shape)))


@register("ReorderOutput", since=1, domain=GE_DOMAIN)
class ReorderOutput(_Reorder):
    """Blocked X -> NCHW Y of `channels` channels (attribute, required: the blocked shape rounds it up)."""
    to_blocked = False

    def prepare(self):
        xm = self.blocked_meta(0, "X")
        c = self.channels_attr(xm.shape[1])
        self.plan_reorder(Meta(xm.dtype, (xm.shape[0], c) + tuple(xm.shape[2:4])))


@register("NchwcConv", since=1, domain=GE_DOMAIN)
class NchwcConv(_Blocked):
    """Y = conv(X, W) + B (+ Z), then the epilogue; X, Y, Z blocked, W (OC, C, kh, kw) and B (OC) as
    Conv's; group 1, or group == C == OC with W (C, 1, kh, kw) (depthwise: nchwc_depthwise.c, the
    channels in the vector lanes; FusedConv has no residual there). Y may be Z (output_over): the native
    kernel reads each element of Z before it writes it, the numpy plan unblocks Z first. A 4-D X is NCHW
    (group 1: a stem's few input channels, read in place; Y blocked all the same)."""
    output_over = 3

    def prepare(self):
        attrs = {k: v for k, v in self.attrs.items() if k != EPILOGUE}
        problem = attribute_problem("", "Conv", self.opset, attrs, complete=True)
        if problem:
            raise self.fail(problem)
        self.planar = len(self.input_meta(0, "X").shape) == 4
        xm = self.float32_meta(0, "X", 4) if self.planar else self.blocked_meta(0, "X")
        wm = self.float32_meta(1, "W", 4)
        n, cb, h, w = xm.shape[:4]
        oc, group = wm.shape[0], int(attrs.get("group", 1))
        self.depthwise = group != 1
        if self.planar and group != 1:
            raise self.fail(f"X is NCHW {tuple(xm.shape)} with attrs['group'] {group}: an NCHW X takes one group")
        if self.depthwise and (group != oc or wm.shape[1] != 1):
            raise self.fail(f"attrs['group'] is {group} with W of shape {tuple(wm.shape)}: the blocked convolution "
                            f"has one group or one channel per group (depthwise)")
        c = wm.shape[1] * group
        if self.planar and c != cb:
            raise self.fail(f"W has shape {tuple(wm.shape)}: {c} input channels, X (NCHW) has {cb}")
        if not self.planar and -(-c // BLOCK) != cb:
            raise self.fail(f"W has shape {tuple(wm.shape)} and attrs['group'] is {group}: {c} input channels, X has "
                            f"{cb} blocks of {BLOCK}")
        zm = self.inputs[3] if len(self.inputs) > 3 else None
        self.residual = zm is not None
        # the NCHW op this one computes, planned on numpy: its checks, its output, this op's numpy plan
        x_plain = Meta(xm.dtype, (n, c, h, w))
        y_plain = None
        if self.residual:
            zb = self.blocked_meta(3, "Z")
            y_plain = Meta(zb.dtype, (zb.shape[0], oc) + tuple(zb.shape[2:4]))
        metas = [x_plain, wm, self.input_meta(2, "B", optional=True)] + ([y_plain] if self.residual else [])
        self.nat = self.native_lib() if self.consts[1] is not None else None
        self.uses_native = self.nat is not None
        self.plain = _plain_kernel(self, "FusedConv" if self.residual else "Conv", GE_DOMAIN if self.residual else "",
                                   metas, geometry_only=self.uses_native)
        y = self.plain.out_metas[0]
        self.out_metas = [Meta(y.dtype, blocked_shape(y.shape))]
        if self.residual and tuple(zm.shape) != self.out_metas[0].shape:
            raise self.fail(f"input 3 (Z) has shape {tuple(zm.shape)}, {self.out_metas[0].shape} expected")
        self.scratch = Scratch()
        if self.uses_native:
            p = self.plain
            self.act = native_act(self.attrs.get(EPILOGUE))
            self.absorbs_epilogue = self.act is not None
            geometry = dict(strides=tuple(p.strides), pads=(p.pb[0], p.pb[1], p.pe[0], p.pe[1]), dilations=tuple(p.dil),
                            act=self.act)
            self.conv = (NativeNchwcDepthwise(self.nat, x_plain.shape, tuple(p.kernel), **geometry) if self.depthwise
                         else NativeNchwcConv(self.nat, x_plain.shape, oc, tuple(p.kernel), planar=self.planar,
                                              **geometry))
            self.calls = CallCache()
            return
        if not self.planar:
            self.scratch.add("x", x_plain.shape, np.float32)
        self.scratch.add("y", y.shape, np.float32)
        if self.residual:
            self.scratch.add("z", y.shape, np.float32)
        self.scratch.add("plain", (self.plain.workspace_nbytes(),), np.uint8)

    def pack(self):
        if self.uses_native:
            b = self.consts[2] if len(self.consts) > 2 else None
            key = ("nchwc_depthwise",) if self.depthwise else ("nchwc", self.nat.nchwc_group)
            self.conv.wp, self.conv.bias = self.shared_pack(key, self._pack, self.consts[1], b)
        else:
            self.plain.load()

    def _pack(self, w, b):
        self.conv.pack(np.asarray(w, np.float32), None if b is None else np.asarray(b, np.float32))
        return self.conv.wp, self.conv.bias

    def _call(self, x, y, z):
        return self.conv.call(x, y, z)

    def bound(self, xs, ys, ws):
        x, y, z = xs[0], ys[0], xs[3] if self.residual else None
        if self.uses_native and all(a.flags.c_contiguous for a in (x, y) + ((z,) if z is not None else ())):
            return run_for_threads(lambda: self._call(x, y, z))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, y, z = xs[0], ys[0], xs[3] if self.residual else None
        if self.uses_native:
            arrays = [np.ascontiguousarray(a) if a is not None else None for a in (x, z)]
            out = y if y.flags.c_contiguous else np.empty(y.shape, np.float32)
            self.calls.get((arrays[0], out, arrays[1]), lambda: self._call(arrays[0], out, arrays[1])).run()
            if out is not y:
                np.copyto(y, out)
            return
        v = self.views(ws)
        if not self.planar:
            from_blocked(x, v["x"])
        if self.residual:
            from_blocked(z, v["z"])  # before y is written: y may be z
        b = xs[2] if len(xs) > 2 else None
        self.plain.run([x if self.planar else v["x"], xs[1], b] + ([v["z"]] if self.residual else []), [v["y"]], v["plain"])
        to_blocked(v["y"], y)


@register("NchwcMaxPool", since=1, domain=GE_DOMAIN)
class NchwcMaxPool(_Blocked):
    """MaxPool (2-D, no Indices) of blocked X into blocked Y; the attributes are MaxPool's (its schema at
    the model's opset). The padding channels pool to themselves: finite stays finite."""

    def prepare(self):
        problem = attribute_problem("", "MaxPool", self.opset, self.attrs, complete=True)
        if problem:
            raise self.fail(problem)
        xm = self.blocked_meta(0, "X")
        if self.num_outputs != 1:
            raise self.fail(f"{self.num_outputs} outputs: the blocked MaxPool gives no Indices")
        n, cb, h, w, _ = xm.shape
        x_plain = Meta(xm.dtype, (n, cb * BLOCK, h, w))  # the padding channels too: pooled like the others
        self.plain = _plain_kernel(self, "MaxPool", "", [x_plain])
        y = self.plain.out_metas[0]
        self.out_metas = [Meta(y.dtype, blocked_shape(y.shape))]
        self.scratch = Scratch()
        self.nat = self.native_lib()
        # (the native pool gives -inf to a window without input, onnxruntime its lowest value: MaxPool's plan)
        self.uses_native = self.nat is not None and self.plain.empty is None
        if self.uses_native:
            p = self.plain
            self.window = (n * cb, h, w, *p.out, *p.kernel, *p.strides, *p.pb, *p.dil)
            self.calls = CallCache()
            return
        self.scratch.add("x", x_plain.shape, np.float32)
        self.scratch.add("y", y.shape, np.float32)
        self.scratch.add("plain", (self.plain.workspace_nbytes(),), np.uint8)

    def _native(self, x, y) -> bool:
        return self.uses_native and x.flags.c_contiguous and y.flags.c_contiguous

    def bound(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self._native(x, y):
            return run_for_threads(lambda: self.nat.nchwc_max_pool_call(x, y, self.window))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self._native(x, y):
            self.calls.get((x, y), lambda: self.nat.nchwc_max_pool_call(x, y, self.window)).run()
        elif self.uses_native:  # strided arrays: through contiguous copies
            out = np.empty(y.shape, np.float32)
            self.nat.nchwc_max_pool_call(np.ascontiguousarray(x), out, self.window).run()
            np.copyto(y, out)
        else:
            v = self.views(ws)
            from_blocked(x, v["x"])
            self.plain.run([v["x"]], [v["y"]], v["plain"])
            to_blocked(v["y"], y)


@register("NchwcGlobalAveragePool", since=1, domain=GE_DOMAIN)
class NchwcGlobalAveragePool(_Blocked):
    """GlobalAveragePool of blocked X into NCHW Y (N, channels, 1, 1): a region's last reader needs no
    ReorderOutput before its pool."""

    def prepare(self):
        xm = self.blocked_meta(0, "X")
        c = self.channels_attr(xm.shape[1])
        self.n, self.c, self.plane = xm.shape[0], c, xm.shape[2] * xm.shape[3]
        self.out_metas = [Meta(xm.dtype, (self.n, c, 1, 1))]
        self.scratch = Scratch()
        self.nat = self.native_lib()
        self.uses_native = self.nat is not None
        self.calls = CallCache()

    def _call(self, x, y):
        return self.nat.nchwc_mean_call(x, y, self.n, self.c, self.plane)

    def bound(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.uses_native and x.flags.c_contiguous and y.flags.c_contiguous:
            return run_for_threads(lambda: self._call(x, y))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, y = xs[0], ys[0]
        if self.uses_native and x.flags.c_contiguous and y.flags.c_contiguous:
            self.calls.get((x, y), lambda: self._call(x, y)).run()
            return
        means = x.reshape(self.n, -1, self.plane, BLOCK).mean(axis=2, dtype=np.float32)
        np.copyto(y[:, :, 0, 0], means.reshape(self.n, -1)[:, :self.c])


@register("NchwcMul", since=1, domain=GE_DOMAIN)
class NchwcMul(_Blocked):
    """Y = X * S per channel: X and Y blocked, S an NCHW gate (N, C, 1, 1) (MobileNetV3's squeeze-excite:
    its Mul of the blocked value by the gate its convs compute from the blocked GlobalAveragePool). The
    padding channels become zeros. Y may be X (output_over)."""
    output_over = 0

    def prepare(self):
        xm, sm = self.blocked_meta(0, "X"), self.float32_meta(1, "S", 4)
        n, cb = xm.shape[:2]
        c = sm.shape[1]
        if sm.shape[0] != n or tuple(sm.shape[2:]) != (1, 1) or -(-c // BLOCK) != cb:
            raise self.fail(f"input 1 (S) has shape {tuple(sm.shape)}: ({n}, C, 1, 1) with C in "
                            f"[{(cb - 1) * BLOCK + 1}, {cb * BLOCK}] expected (X has {cb} blocks of {BLOCK})")
        self.n, self.c, self.plane = n, c, xm.shape[2] * xm.shape[3]
        self.out_metas = [Meta(xm.dtype, tuple(xm.shape))]
        self.scratch = Scratch()
        self.nat = self.native_lib()
        self.uses_native = self.nat is not None
        self.calls = CallCache()
        if not self.uses_native:
            self.scratch.add("gate", (n, cb, 1, 1, BLOCK), np.float32)

    def _call(self, x, s, y):
        return self.nat.nchwc_scale_call(x, s, y, self.n, self.c, self.plane)

    def _native(self, xs, y) -> bool:
        return self.uses_native and all(a.flags.c_contiguous for a in (xs[0], xs[1], y))

    def bound(self, xs, ys, ws):
        if self._native(xs, ys[0]):
            x, s, y = xs[0], xs[1], ys[0]
            return run_for_threads(lambda: self._call(x, s, y))
        return super().bound(xs, ys, ws)

    def run(self, xs, ys, ws):
        x, s, y = xs[0], xs[1], ys[0]
        if self._native(xs, y):
            self.calls.get((x, s, y), lambda: self._call(x, s, y)).run()
            return
        if self.uses_native:  # strided arrays: through contiguous copies
            out = np.empty(y.shape, np.float32)
            self._call(np.ascontiguousarray(x), np.ascontiguousarray(s), out).run()
            np.copyto(y, out)
            return
        gate = self.views(ws)["gate"]
        gate[...] = 0
        gate.reshape(self.n, -1)[:, :self.c] = s.reshape(self.n, self.c)
        np.multiply(x, gate, out=y)


def _plain_kernel(k: _Blocked, op: str, domain: str, metas: list, geometry_only: bool = False):
    """The NCHW op a blocked one computes, planned on numpy with k's attributes (its checks, its output
    metas, k's numpy plan); its refusals name k. geometry_only (a Conv's, where k runs natively):
    Conv.geometry, without the numpy plan k never runs."""
    attrs = {key: v for key, v in k.attrs.items() if key != EPILOGUE}
    cls = lookup(op, domain, k.opset, k.name)
    build = cls.geometry if geometry_only else cls
    try:
        return build(attrs, metas, k.consts[:len(metas)], opset=k.opset, name=k.name, packs=k.packs, backend=NUMPY)
    except GraphError as e:
        raise k.fail(str(e).removeprefix(f"node '{k.name}' ({cls.op_type}): ")) from None
