"""The ops of recent transformer and state-space models: RMSNormalization, RotaryEmbedding, Swish,
SwiGLU, TensorScatter (a KV-cache write), LinearAttention and CausalConvWithState.

Each is whole-array numpy: per-row statistics with keepdims reductions, rotations on the two halves
(or the even/odd lanes) of the head, cache writes as one fancy-index assignment. LinearAttention is
a recurrence, so it steps over time (one batched einsum per step, as an RNN steps), and
CausalConvWithState sums one shifted view per tap.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..registry import register
from ..values import text


def _stats_dtype(dtype) -> np.dtype:
    """float32 statistics for the 16-bit floats (stash_type 1), float64 for float64."""
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


@register("RMSNormalization", since=23)
class RMSNormalization(Kernel):
    """Y = X / sqrt(mean(X^2 over axes [axis, rank)) + epsilon) * scale."""

    def prepare(self):
        xm, sm = self.input_meta(0, "X"), self.input_meta(1, "scale")
        shape = tuple(xm.shape)
        axis = int(self.attr("axis", -1))
        if not -len(shape) <= axis < len(shape):
            raise self.fail(f"axis={axis} is out of range for X of rank {len(shape)}")
        self.axes = tuple(range(axis % len(shape), len(shape)))
        try:
            np.broadcast_shapes(tuple(sm.shape), shape[self.axes[0]:])
        except ValueError:
            raise self.fail(f"scale {tuple(sm.shape)} does not broadcast to the normalized shape "
                            f"{shape[self.axes[0]:]}") from None
        if int(self.attr("stash_type", 1)) != 1:
            raise self.fail(f"stash_type={self.attr('stash_type')} is not supported (1: float32 statistics)")
        self.eps = float(self.attr("epsilon", 1e-5))
        self.out = Meta(sm.dtype, shape)

    def infer(self):
        return [self.out]

    def compute(self, x, scale):
        st = _stats_dtype(x.dtype)
        xf = x.astype(st)
        ms = np.mean(np.square(xf), axis=self.axes, keepdims=True)
        y = xf * (1 / np.sqrt(ms + st.type(self.eps)))
        return [(y * scale.astype(st)).astype(self.out.dtype)]


@register("RotaryEmbedding", since=23)
class RotaryEmbedding(Kernel):
    """Rotates the first rotary_embedding_dim lanes of each head by the (cos, sin) of its position:
    the two halves (or, interleaved, the even and odd lanes) are the real and imaginary parts."""

    def prepare(self):
        xm, cm, sm = self.input_meta(0, "X"), self.input_meta(1, "cos_cache"), self.input_meta(2, "sin_cache")
        pm = self.input_meta(3, "position_ids", optional=True)
        shape = tuple(xm.shape)
        heads = self.attr("num_heads")
        if len(shape) == 4:
            b, h, s, d = shape
        elif len(shape) == 3:
            if not heads or shape[2] % int(heads):
                raise self.fail(f"3-D X {shape} needs num_heads dividing its hidden size (num_heads={heads})")
            b, s, h, d = shape[0], shape[1], int(heads), shape[2] // int(heads)
        else:
            raise self.fail(f"X has shape {shape}; 3-D or 4-D expected")
        rot = int(self.attr("rotary_embedding_dim", 0)) or d
        if rot > d or rot % 2:
            raise self.fail(f"rotary_embedding_dim={rot} must be even and at most the head size {d}")
        if pm is not None:
            if tuple(pm.shape) != (b, s):
                raise self.fail(f"position_ids has shape {tuple(pm.shape)}; ({b}, {s}) expected")
            want = "(positions, %d)" % (rot // 2)
            ok = len(cm.shape) == 2 and cm.shape[1] == rot // 2
        else:
            want = f"({b}, {s}, {rot // 2})"
            ok = tuple(cm.shape) == (b, s, rot // 2)
        if not ok or tuple(sm.shape) != tuple(cm.shape):
            raise self.fail(f"cos_cache {tuple(cm.shape)} / sin_cache {tuple(sm.shape)}: {want} expected")
        self.bshd = (b, s, h, d)
        self.four_d = len(shape) == 4
        self.rot = rot
        self.interleaved = bool(int(self.attr("interleaved", 0)))
        self.out = Meta(xm.dtype, shape)

    def infer(self):
        return [self.out]

    def compute(self, x, cos, sin, position_ids=None):
        b, s, h, d = self.bshd
        if position_ids is not None:
            if position_ids.size and (position_ids.min() < 0 or position_ids.max() >= cos.shape[0]):
                raise self.fail(f"position_ids has values outside [0, {cos.shape[0]})")
            cos, sin = cos[position_ids], sin[position_ids]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]  # [b, s, 1, rot/2]
        xs = x.transpose(0, 2, 1, 3) if self.four_d else x.reshape(b, s, h, d)  # [b, s, h, d]
        y = xs.copy()
        r = self.rot
        if self.interleaved:
            x1, x2 = xs[..., 0:r:2], xs[..., 1:r:2]
            y[..., 0:r:2] = cos * x1 - sin * x2
            y[..., 1:r:2] = sin * x1 + cos * x2
        else:
            x1, x2 = xs[..., :r // 2], xs[..., r // 2:r]
            y[..., :r // 2] = cos * x1 - sin * x2
            y[..., r // 2:r] = sin * x1 + cos * x2
        return [y.transpose(0, 2, 1, 3) if self.four_d else y.reshape(x.shape)]


@register("Swish", since=24)
class Swish(Kernel):
    """y = x * sigmoid(alpha * x)."""

    def prepare(self):
        xm = self.input_meta(0, "X")
        self.alpha = float(self.attr("alpha", 1.0))
        self.out = Meta(xm.dtype, tuple(xm.shape))

    def infer(self):
        return [self.out]

    def compute(self, x):
        return [swish(x, self.alpha)]


def swish(x: np.ndarray, alpha: float) -> np.ndarray:
    """x * sigmoid(alpha * x) in x's type (the sigmoid rounded to it first, as onnx's definition)."""
    t = x.dtype.type
    sig = (t(1) / (t(1) + np.exp(t(-alpha) * x))).astype(x.dtype)
    return (x * sig).astype(x.dtype)


@register("SwiGLU", since=28)
class SwiGLU(Kernel):
    """Y = Swish_alpha(A) * B, A and B of one shape and type (no broadcasting)."""

    def prepare(self):
        am, bm = self.input_meta(0, "A"), self.input_meta(1, "B")
        if tuple(bm.shape) != tuple(am.shape):
            raise self.fail(f"A {tuple(am.shape)} and B {tuple(bm.shape)} must have one shape")
        self.alpha = float(self.attr("alpha", 1.0))
        self.out = Meta(am.dtype, tuple(am.shape))

    def infer(self):
        return [self.out]

    def compute(self, a, b):
        return [(swish(a, self.alpha) * b).astype(a.dtype)]


@register("TensorScatter", since=24)
class TensorScatter(Kernel):
    """present = past_cache with `update` written along `axis` from write_indices[batch] on
    (linear: must fit; circular: wrapping around max_sequence_length)."""

    def prepare(self):
        cm, um = self.input_meta(0, "past_cache"), self.input_meta(1, "update")
        wm = self.input_meta(2, "write_indices", optional=True)
        cs, us = tuple(cm.shape), tuple(um.shape)
        rank = len(cs)
        axis = int(self.attr("axis", -2))
        if not -rank <= axis < rank or axis % rank == 0:
            raise self.fail(f"axis={axis} must name a non-batch axis of past_cache {cs}")
        self.axis = axis % rank
        if len(us) != rank or any(u != c for i, (u, c) in enumerate(zip(us, cs)) if i != self.axis) \
                or us[self.axis] > cs[self.axis]:
            raise self.fail(f"update {us} does not fit past_cache {cs} along axis {self.axis}")
        if wm is not None and tuple(wm.shape) != cs[:1]:
            raise self.fail(f"write_indices has shape {tuple(wm.shape)}; ({cs[0]},) expected")
        self.mode = text(self.attr("mode", "linear"))
        if self.mode not in ("linear", "circular"):
            raise self.fail(f"mode '{self.mode}' must be linear or circular")
        self.out = Meta(cm.dtype, cs)

    def infer(self):
        return [self.out]

    def compute(self, cache, update, write_indices=None):
        present = cache.copy()
        b, cap, n = cache.shape[0], cache.shape[self.axis], update.shape[self.axis]
        start = np.zeros(b, np.int64) if write_indices is None else write_indices.astype(np.int64)
        pos = start[:, None] + np.arange(n)  # [batch, n]: where each update row goes
        if self.mode == "circular":
            pos %= max(cap, 1)
        elif pos.size and (pos.min() < 0 or pos.max() >= cap):
            raise self.fail(f"write_indices {start.tolist()} + {n} updates exceed max_sequence_length {cap} "
                            f"(mode linear)")
        dst = np.moveaxis(present, self.axis, 1)  # a view: [batch, cap, ...]
        src = np.moveaxis(update, self.axis, 1)
        # the axes between batch and the sequence axis follow the batch's indices
        dst[np.arange(b)[:, None], pos] = src
        return [present]


@register("LinearAttention", since=27)
class LinearAttention(Kernel):
    """Recurrent linear attention over 3-D [batch, time, heads * size] inputs: per step the state
    [batch, kv_heads, d_k, d_v] decays by exp(decay) (gated rules), is corrected toward the value
    by beta (delta rules) and accumulates k v^T; the output is scale * q . state. Evaluated in
    float32, the output in the inputs' type, the state in past_state's."""
    RULES = ("linear", "gated", "delta", "gated_delta")

    def prepare(self):
        qm, km, vm = self.input_meta(0, "query"), self.input_meta(1, "key"), self.input_meta(2, "value")
        for m, what in ((qm, "query"), (km, "key"), (vm, "value")):
            if len(m.shape) != 3:
                raise self.fail(f"{what} has shape {tuple(m.shape)}; [batch, time, heads * size] expected")
        self.rule = text(self.attr("update_rule", "gated_delta"))
        if self.rule not in self.RULES:
            raise self.fail(f"update_rule '{self.rule}' must be one of {', '.join(self.RULES)}")
        qh, kvh = self.attr("q_num_heads"), self.attr("kv_num_heads")
        if qh is None or kvh is None:
            raise self.fail("attributes q_num_heads and kv_num_heads are required")
        qh, kvh = int(qh), int(kvh)
        if qh <= 0 or kvh <= 0 or qh % kvh:
            raise self.fail(f"q_num_heads={qh} must be a positive multiple of kv_num_heads={kvh}")
        b, t = qm.shape[:2]
        if qm.shape[2] % qh or km.shape[2] % kvh or vm.shape[2] % kvh:
            raise self.fail(f"query {tuple(qm.shape)}, key {tuple(km.shape)}, value {tuple(vm.shape)} do not split "
                            f"into {qh} / {kvh} heads")
        dk, dv = qm.shape[2] // qh, vm.shape[2] // kvh
        if tuple(km.shape) != (b, t, kvh * dk) or vm.shape[:2] != (b, t):
            raise self.fail(f"key {tuple(km.shape)} / value {tuple(vm.shape)} do not match query {tuple(qm.shape)}")
        self.gated, self.delta = self.rule in ("gated", "gated_delta"), self.rule in ("delta", "gated_delta")
        sm, dm, bm = (self.input_meta(i, w, optional=True) for i, w in ((3, "past_state"), (4, "decay"), (5, "beta")))
        if self.gated != (dm is not None):
            raise self.fail(f"update_rule '{self.rule}' {'needs' if self.gated else 'takes no'} decay input")
        if self.delta != (bm is not None):
            raise self.fail(f"update_rule '{self.rule}' {'needs' if self.delta else 'takes no'} beta input")
        if dm is not None and (len(dm.shape) != 3 or tuple(dm.shape[:2]) != (b, t)
                               or dm.shape[2] not in (kvh, kvh * dk)):
            raise self.fail(f"decay has shape {tuple(dm.shape)}; ({b}, {t}, {kvh} or {kvh * dk}) expected")
        if bm is not None and (len(bm.shape) != 3 or tuple(bm.shape[:2]) != (b, t) or bm.shape[2] not in (kvh, 1)):
            raise self.fail(f"beta has shape {tuple(bm.shape)}; ({b}, {t}, {kvh} or 1) expected")
        if sm is not None and tuple(sm.shape) != (b, kvh, dk, dv):
            raise self.fail(f"past_state has shape {tuple(sm.shape)}; {(b, kvh, dk, dv)} expected")
        self.dims = (b, t, qh, kvh, dk, dv)
        scale = float(self.attr("scale", 0.0))
        self.scale = scale if scale else 1.0 / np.sqrt(dk)
        self.metas = [Meta(qm.dtype, (b, t, qh * dv)), Meta(sm.dtype if sm is not None else qm.dtype, (b, kvh, dk, dv))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, q, k, v, past=None, decay=None, beta=None):
        b, t, qh, kvh, dk, dv = self.dims
        f = np.float32
        g = qh // kvh
        q4 = q.astype(f).reshape(b, t, kvh, g, dk)
        k4 = k.astype(f).reshape(b, t, kvh, dk)
        v4 = v.astype(f).reshape(b, t, kvh, dv)
        state = np.zeros((b, kvh, dk, dv), f) if past is None else past.astype(f)
        gate = None if decay is None else np.exp(decay.astype(f).reshape(b, t, kvh, -1))  # [b, t, kvh, 1|dk]
        bt = None if beta is None else beta.astype(f).reshape(b, t, -1, 1)  # [b, t, kvh|1, 1]
        out = np.empty((b, t, kvh, g, dv), f)
        for i in range(t):  # the recurrence: one batched step per time index
            kt, vt = k4[:, i], v4[:, i]
            if gate is not None:
                state = state * gate[:, i, :, :, None]
            if bt is not None:
                vt = bt[:, i] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
            state = state + kt[..., :, None] * vt[..., None, :]
            out[:, i] = np.einsum("bhgd,bhdm->bhgm", q4[:, i], state) * f(self.scale)
        y = out.reshape(b, t, qh * dv).astype(self.metas[0].dtype)
        return [y, state.astype(self.metas[1].dtype)][:self.num_outputs]


@register("CausalConvWithState", since=27)
class CausalConvWithState(Kernel):
    """A depthwise causal 1-D convolution over [batch, channels, length] whose left context is
    past_state (zeros without it); present_state is the last kernel-1 steps of that padded input.
    activation silu/swish is applied in float32."""

    def prepare(self):
        xm, wm = self.input_meta(0, "input"), self.input_meta(1, "weight")
        if len(xm.shape) != 3:
            raise self.fail(f"input has shape {tuple(xm.shape)}; [batch, channels, length] expected")
        b, c, n = xm.shape
        if len(wm.shape) != 3 or wm.shape[:2] != (c, 1) or wm.shape[2] < 1:
            raise self.fail(f"weight has shape {tuple(wm.shape)}; ({c}, 1, k) expected")
        k = wm.shape[2]
        bm, sm = self.input_meta(2, "bias", optional=True), self.input_meta(3, "past_state", optional=True)
        if bm is not None and tuple(bm.shape) != (c,):
            raise self.fail(f"bias has shape {tuple(bm.shape)}; ({c},) expected")
        if sm is not None and tuple(sm.shape) != (b, c, k - 1):
            raise self.fail(f"past_state has shape {tuple(sm.shape)}; {(b, c, k - 1)} expected")
        self.activation = text(self.attr("activation", "none"))
        if self.activation not in ("none", "silu", "swish"):
            raise self.fail(f"activation '{self.activation}' must be none, silu or swish")
        self.k = k
        self.metas = [Meta(xm.dtype, (b, c, n)), Meta(xm.dtype, (b, c, k - 1))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def compute(self, x, w, bias=None, past=None):
        b, c, n = x.shape
        k = self.k
        pad = np.zeros((b, c, k - 1), x.dtype) if past is None else past.astype(x.dtype)
        padded = np.concatenate([pad, x], axis=2)
        acc_t = np.float64 if x.dtype == np.float64 else np.float32
        acc = np.zeros((b, c, n), acc_t)
        wf = w.astype(acc_t)[:, 0, :]  # [c, k]
        for j in range(k):  # one shifted view per tap
            acc += padded[:, :, j:j + n] * wf[:, j:j + 1]
        if bias is not None:
            acc += bias.astype(acc_t)[:, None]
        y = acc.astype(x.dtype)
        if self.activation != "none":
            yf = y.astype(np.float32)
            y = (yf / (1 + np.exp(-yf))).astype(x.dtype)
        return [y, padded[:, :, n:].copy()][:self.num_outputs]
