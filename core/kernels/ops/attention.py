"""Attention (opset 23, 24, 25): scaled dot-product attention with masks, grouped-query heads and
a KV cache.

Q, K and V are taken as [batch, heads, seq, head_size] (3-D inputs are split into heads by
q_num_heads / kv_num_heads and joined back at the end). The additive bias [.., q_seq, total_seq]
is built once from attn_mask (boolean: allowed or -inf; numeric: added; padded to the total
length with -inf), the causal frontier (bottom-right aligned: key j is seen by query i when
j <= i + offset, the offset being the past length or nonpad_kv_seqlen - q_seq), the sliding window
(opset 25) and the padding of nonpad_kv_seqlen (opset 24). Grouped-query attention does not
repeat K and V: Q is viewed as [batch, kv_heads, group, seq, head_size] and every product
broadcasts over the group. A query row whose every key is masked gives zeros, not NaN.
Every step is evaluated in the input's own type, as the spec's function body: float16 and bfloat16
(ml_dtypes' arithmetic) too, unless softmax_precision names another type for the softmax.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta, dtype_from_onnx
from ..base import Kernel
from ..registry import register


def _bfloat16():
    import ml_dtypes  # numpy's bfloat16 comes with ml_dtypes (as a bfloat16 model's inputs do)
    return ml_dtypes.bfloat16


def softmax_rows(s: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; a row that is all -inf gives zeros (no NaN)."""
    m = s.max(axis=-1, keepdims=True)
    m[np.isneginf(m)] = 0
    e = np.exp(s - m)
    total = e.sum(axis=-1, keepdims=True)
    total[total == 0] = 1
    e /= total
    return e


@register("Attention", since=23)
class Attention(Kernel):
    #: opset 24 adds nonpad_kv_seqlen, opset 25 the sliding window (and refuses head counts on 4-D inputs)
    window = False

    def input(self, i):
        return self.inputs[i] if i < len(self.inputs) else None

    def prepare(self):
        q, k, v = (self.input(i) for i in range(3))
        if q is None or k is None or v is None:
            raise self.fail("inputs Q, K and V are required")
        rank = len(q.shape)
        if rank not in (3, 4) or len(k.shape) != rank or len(v.shape) != rank:
            raise self.fail(f"Q {tuple(q.shape)}, K {tuple(k.shape)}, V {tuple(v.shape)}: all 3-D or all 4-D expected")
        qh, kvh = self.attr("q_num_heads"), self.attr("kv_num_heads")
        if rank == 3:
            if qh is None or kvh is None:
                raise self.fail("3-D inputs need attributes q_num_heads and kv_num_heads")
            qh, kvh = int(qh), int(kvh)
            for m, what, h in ((q, "Q", qh), (k, "K", kvh), (v, "V", kvh)):
                if h <= 0 or m.shape[2] % h:
                    raise self.fail(f"{what} hidden size {m.shape[2]} is not a multiple of its {h} heads")
            b, sq = q.shape[:2]
            self.q4 = (b, sq, qh, q.shape[2] // qh)
            self.k4 = (b, k.shape[1], kvh, k.shape[2] // kvh)
            self.v4 = (b, v.shape[1], kvh, v.shape[2] // kvh)
            q4 = (b, qh, sq, self.q4[3])
            k4 = (b, kvh, k.shape[1], self.k4[3])
            v4 = (b, kvh, v.shape[1], self.v4[3])
        else:
            if self.window and (qh is not None or kvh is not None):
                raise self.fail("q_num_heads and kv_num_heads must not be given with 4-D inputs")
            q4, k4, v4 = tuple(q.shape), tuple(k.shape), tuple(v.shape)
        b, qh, sq, d = q4
        _, kvh, skv, dk = k4
        if k4[0] != b or v4[0] != b or v4[1] != kvh or v4[2] != skv or dk != d:
            raise self.fail(f"Q {q4}, K {k4}, V {v4} (as [batch, heads, seq, head_size]) do not match")
        if kvh == 0 or qh % kvh:
            raise self.fail(f"{qh} query heads are not a multiple of {kvh} key/value heads")
        past_k, past_v = self.input(4), self.input(5)
        if (past_k is None) != (past_v is None):
            raise self.fail("past_key and past_value must be given together")
        past = 0
        if past_k is not None:
            past = past_k.shape[2] if len(past_k.shape) == 4 else -1
            if (tuple(past_k.shape) != (b, kvh, past, d) or len(past_v.shape) != 4
                    or tuple(past_v.shape) != (b, kvh, past, v4[3])):
                raise self.fail(f"past_key {tuple(past_k.shape)} / past_value {tuple(past_v.shape)} do not match "
                                f"K {k4} and V {v4}")
        self.nonpad = self.input(6) is not None
        if self.nonpad:
            if past_k is not None:
                raise self.fail("nonpad_kv_seqlen cannot be combined with past_key/past_value")
            if tuple(self.input(6).shape) != (b,):
                raise self.fail(f"nonpad_kv_seqlen has shape {tuple(self.input(6).shape)}, ({b},) expected")
        total = past + skv
        mask = self.input(3)
        if mask is not None:
            ms = tuple(mask.shape)
            try:
                np.broadcast_shapes(ms[:-1] + (total,), (b, qh, sq, total))
            except ValueError:
                raise self.fail(f"attn_mask {ms} does not broadcast to {(b, qh, sq, total)}") from None
            if len(ms) > 4 or not ms or ms[-1] > total:
                raise self.fail(f"attn_mask {ms} does not broadcast to {(b, qh, sq, total)}")
        self.rank, self.shapes = rank, (q4, k4, v4)
        self.past, self.total = past, total
        self.dtype = np.dtype(q.dtype)
        self.scale = self.attr("scale")
        self.causal = bool(int(self.attr("is_causal", 0)))
        self.softcap = float(self.attr("softcap", 0.0))
        self.mode = int(self.attr("qk_matmul_output_mode", 0))
        if self.mode not in (0, 1, 2, 3):
            raise self.fail(f"qk_matmul_output_mode={self.mode} must be 0, 1, 2 or 3")
        precision = self.attr("softmax_precision")
        self.softmax_dtype = None
        if precision is not None:
            if int(precision) not in (1, 10, 11, 16):
                raise self.fail(f"softmax_precision={precision} must be 1, 10, 11 or 16 (a float type)")
            self.softmax_dtype = np.dtype(_bfloat16() if int(precision) == 16 else dtype_from_onnx(int(precision)))
        self.left = int(self.attr("left_window_size", -1)) if self.window else -1
        self.right = int(self.attr("right_window_size", -1)) if self.window else -1
        if self.left < -1 or self.right < -1:
            raise self.fail(f"left_window_size={self.left}, right_window_size={self.right}: -1 or >= 0 expected")
        y = (b, sq, qh * v4[3]) if rank == 3 else (b, qh, sq, v4[3])
        self.metas = [Meta(self.dtype, y), Meta(self.dtype, (b, kvh, total, d)),
                      Meta(np.dtype(v.dtype), (b, kvh, total, v4[3])), Meta(self.dtype, (b, qh, sq, total))]

    def infer(self):
        return self.metas[:self.num_outputs]

    def bias(self, mask, nonpad, dt) -> np.ndarray | None:
        """The additive bias, broadcastable to [batch, q_heads, q_seq, total] (None: no bias)."""
        (b, _, sq, _), total = self.shapes[0], self.total
        bias = None
        if mask is not None:
            pad = total - mask.shape[-1]
            if mask.dtype == np.bool_:
                bias = np.where(mask, dt.type(0), dt.type(-np.inf))
            else:
                bias = mask.astype(dt)
            if pad:
                bias = np.concatenate([bias, np.full(bias.shape[:-1] + (pad,), -np.inf, dt)], axis=-1)
        # the frontier offset per batch: [batch, 1, 1, 1] (external cache) or a scalar
        offset = (nonpad.reshape(b, 1, 1, 1).astype(np.int64) - sq) if nonpad is not None else self.past
        i = np.arange(sq).reshape(sq, 1)
        j = np.arange(total).reshape(1, total)
        allowed = None
        if self.causal:
            allowed = j <= i + offset
        if self.left >= 0 or self.right >= 0:
            diff = (i + offset) - j
            if self.left >= 0:
                allowed = diff <= self.left if allowed is None else allowed & (diff <= self.left)
            if self.right >= 0:
                allowed = -diff <= self.right if allowed is None else allowed & (-diff <= self.right)
        if nonpad is not None:
            kept = j < nonpad.reshape(b, 1, 1, 1)
            allowed = kept if allowed is None else allowed & kept
        if allowed is not None:
            extra = np.where(allowed, dt.type(0), dt.type(-np.inf))
            bias = extra if bias is None else bias + extra
        return bias

    def compute(self, q, k, v, mask=None, past_k=None, past_v=None, nonpad=None):
        (b, qh, sq, d), (_, kvh, _, _), (_, _, _, dv) = self.shapes
        dt = self.dtype
        if self.rank == 3:
            q = q.reshape(self.q4).transpose(0, 2, 1, 3)
            k = k.reshape(self.k4).transpose(0, 2, 1, 3)
            v = v.reshape(self.v4).transpose(0, 2, 1, 3)
        present_k = k if past_k is None else np.concatenate([past_k, k], axis=2)
        present_v = v if past_v is None else np.concatenate([past_v, v], axis=2)
        scale = float(self.scale) if self.scale is not None else 1.0 / np.sqrt(d)
        root = dt.type(np.sqrt(scale))
        g = qh // kvh  # query heads per key/value head: Q as [b, kvh, g, sq, d]
        q5 = (q.astype(dt) * root).reshape(b, kvh, g, sq, d)
        kt = (present_k.astype(dt) * root).swapaxes(-1, -2)[:, :, None]
        scores = np.matmul(q5, kt).astype(dt, copy=False).reshape(b, qh, sq, self.total)  # bfloat16 products come back as float32
        qk = scores if self.mode == 0 else None
        if self.softcap > 0:
            scores = np.tanh(scores / dt.type(self.softcap)) * dt.type(self.softcap)
        if self.mode == 1:
            qk = scores
        bias = self.bias(mask, nonpad, dt)
        if bias is not None:
            scores = scores + bias
        if self.mode == 2:
            qk = scores
        if self.softmax_dtype is not None:
            scores = scores.astype(self.softmax_dtype)
        p = softmax_rows(scores)
        if bias is not None:  # rows whose every key is masked attend nothing
            dead = np.isneginf(bias.max(axis=-1, keepdims=True))
            if dead.any():
                p = np.where(dead, p.dtype.type(0), p)
        if self.mode == 3:
            qk = p
        # probabilities are rounded to the input type before the product with V, as the spec's body
        p = p.astype(self.dtype).astype(dt).reshape(b, kvh, g, sq, self.total)
        y = np.matmul(p, present_v.astype(dt)[:, :, None]).astype(dt, copy=False).reshape(b, qh, sq, dv)
        if self.rank == 3:
            y = y.transpose(0, 2, 1, 3).reshape(b, sq, qh * dv)
        outs = [y.astype(self.dtype), present_k, present_v, np.asarray(qk).astype(self.dtype)]
        return outs[:self.num_outputs]


@register("Attention", since=25)
class Attention25(Attention):
    window = True
