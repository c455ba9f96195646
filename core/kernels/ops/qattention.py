"""QAttention (com.microsoft): onnxruntime's multi-head self-attention on a quantized input, as
onnxruntime.quantization.quantize_dynamic writes it for the transformers optimizer's Attention (its
input through DynamicQuantizeLinear).

Q, K and V come from one integer product, exact (float64 sums of integers, the int32 accumulator's
value): (input - input_zero_point) @ (weight - weight_zero_point) scaled to float32 by input_scale x
weight_scale (one, or per column) plus the bias. Then, in float32 as onnxruntime's CPU kernel:
scores = scale * Q K^T (scale 1/sqrt(head_size) unless the attribute gives one) plus the mask --
mask_index as key lengths [B], end and start positions [2B], a raw 0/1 mask [B, T] or [B, S, T]
(0 -> mask_filter_value) -- and, with unidirectional, the float32 lowest value on the future keys;
softmax over the keys; times V; heads joined. Optional output present = (K, V) [2, B, N, S, H].
Not supported (refused naming the node): past state, qkv_hidden_sizes, do_rotary.
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..planned import PlannedKernel, Scratch
from ..registry import register

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


@register("QAttention", domain="com.microsoft")
class QAttention(PlannedKernel):
    """input (uint8 [B, S, D]), weight (int8/uint8 [D, 3 * N * H]), bias [3NH], input_scale,
    weight_scale (one or [3NH]), mask_index, input_zero_point, weight_zero_point (one or [3NH]), past."""

    def prepare(self):
        xm, wm, bm = self.input_meta(0, "input"), self.input_meta(1, "weight"), self.input_meta(2, "bias")
        if xm.dtype != np.uint8 or len(xm.shape) != 3:
            raise self.fail(f"input has type {xm.dtype} and shape {tuple(xm.shape)}; uint8 [batch, sequence, hidden] expected")
        B, S, D = xm.shape
        if wm.dtype not in Q8 or len(wm.shape) != 2 or wm.shape[0] != D or wm.shape[1] % 3:
            raise self.fail(f"weight has type {wm.dtype} and shape {tuple(wm.shape)}; int8 or uint8 [{D}, 3 * hidden] expected")
        hidden = wm.shape[1] // 3
        self.heads = int(self.attr("num_heads", 0))
        if self.heads < 1 or hidden % self.heads:
            raise self.fail(f"num_heads={self.heads} does not divide the hidden size {hidden}")
        for key in ("qkv_hidden_sizes", "do_rotary", "past_present_share_buffer"):
            if self.attr(key) not in (None, 0, []):
                raise self.fail(f"attribute {key}={self.attr(key)} is not supported")
        if self.input_meta(8, "past", optional=True) is not None:
            raise self.fail("a past state (input 8) is not supported")
        self.check(bm, "bias", F32, (3 * hidden,))
        self.check(self.input_meta(3, "input_scale"), "input_scale", F32, (1,))
        self.check(self.input_meta(4, "weight_scale"), "weight_scale", F32, (1, 3 * hidden))
        self.check(self.input_meta(6, "input_zero_point", optional=True), "input_zero_point", np.dtype(np.uint8), (1,))
        self.check(self.input_meta(7, "weight_zero_point", optional=True), "weight_zero_point", wm.dtype, (1, 3 * hidden))
        mm = self.input_meta(5, "mask_index", optional=True)
        self.mask_kind = None if mm is None else self.mask_of(mm, B, S)
        self.B, self.S, self.D, self.N, self.H = B, S, D, self.heads, hidden // self.heads
        scale = float(self.attr("scale", 0.0))
        self.alpha = F32.type(scale if scale else 1.0 / math.sqrt(self.H))
        self.filter = F32.type(float(self.attr("mask_filter_value", -10000.0)))
        self.causal = bool(int(self.attr("unidirectional", 0)))
        self.out_metas = [Meta(F32, (B, S, hidden))]
        if self.num_outputs > 1:
            self.out_metas.append(Meta(F32, (2, B, self.N, S, self.H)))
        s = self.scratch = Scratch()
        s.add("a", (B * S, D), F64)
        s.add("acc", (B * S, 3 * hidden), F64)
        s.add("qkv", (B * S, 3 * hidden), F32)
        s.add("scores", (B, self.N, S, S), F32)
        s.add("mask", (B, 1, S, S), F32)
        s.add("context", (B, self.N, S, self.H), F32)

    def check(self, m, what, dtype, sizes):
        if m is not None and (m.dtype != dtype or math.prod(m.shape) not in sizes or len(m.shape) > 1):
            raise self.fail(f"{what} has type {m.dtype} and shape {tuple(m.shape)}; {np.dtype(dtype).name} with "
                            f"{' or '.join(map(str, sizes))} value(s) expected")

    def mask_of(self, m, B, S):
        if m.dtype != np.int32:
            raise self.fail(f"mask_index has type {m.dtype}; int32 expected")
        shape = tuple(m.shape)
        for kind, want in (("lengths", (B,)), ("positions", (2 * B,)), ("raw", (B, S)), ("raw3", (B, S, S))):
            if shape == want:
                return kind
        raise self.fail(f"mask_index has shape {shape}; ({B},), ({2 * B},), ({B}, {S}) or ({B}, {S}, {S}) expected")

    def fill_mask(self, mask_index, mask):
        """The additive mask [B, 1, S, T]: 0 where a key is attended, mask_filter_value where it is masked,
        the float32 lowest value on future keys (unidirectional)."""
        B, S = self.B, self.S
        mask.fill(0)
        keys = np.arange(S)
        if self.mask_kind in ("raw", "raw3"):
            raw = mask_index.reshape(B, 1, -1, S)
            np.copyto(mask, self.filter, where=raw <= 0)
        elif self.mask_kind is not None:
            ends = mask_index[:B].reshape(B, 1, 1, 1)
            masked = keys >= ends
            if self.mask_kind == "positions":
                masked = masked | (keys < np.minimum(mask_index[B:], S).reshape(B, 1, 1, 1))
            np.copyto(mask, self.filter, where=np.broadcast_to(masked, mask.shape))
        if self.causal:
            np.copyto(mask, np.finfo(F32).min, where=keys[None, :] > keys[:, None])

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xs = list(xs) + [None] * (9 - len(xs))
        B, S, N, H = self.B, self.S, self.N, self.H
        a, acc, qkv = v["a"], v["acc"], v["qkv"]
        x_zero = 0 if xs[6] is None else xs[6].reshape(-1)[0]
        np.subtract(xs[0].reshape(B * S, self.D), x_zero, out=a, dtype=F64)
        w = xs[1].astype(F64)
        if xs[7] is not None:
            w -= xs[7].astype(F64).reshape(-1)
        np.matmul(a, w, out=acc)  # integers below 2**53 at every partial sum: exact
        np.copyto(qkv, acc, casting="unsafe")
        np.multiply(qkv, xs[3].reshape(-1)[0] * xs[4].reshape(-1), out=qkv)
        np.add(qkv, xs[2], out=qkv)
        q, k, val = (qkv[:, j * N * H:(j + 1) * N * H].reshape(B, S, N, H).transpose(0, 2, 1, 3) for j in range(3))
        scores = v["scores"]
        np.matmul(q, k.transpose(0, 1, 3, 2), out=scores)
        np.multiply(scores, self.alpha, out=scores)
        if self.mask_kind is not None or self.causal:
            self.fill_mask(xs[5], v["mask"])
            np.add(scores, v["mask"], out=scores)
        np.subtract(scores, scores.max(axis=-1, keepdims=True), out=scores)
        np.exp(scores, out=scores)
        np.divide(scores, scores.sum(axis=-1, keepdims=True), out=scores)
        np.matmul(scores, val, out=v["context"])
        np.copyto(ys[0].reshape(B, S, N, H), v["context"].transpose(0, 2, 1, 3))
        if len(ys) > 1 and ys[1] is not None:
            np.copyto(ys[1][0], k)
            np.copyto(ys[1][1], val)
