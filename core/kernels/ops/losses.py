"""Training losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.

Both pick, per sample position, the (log-)probability of its target class with one
take_along_axis over the class axis; ignored positions (target == ignore_index) weigh 0. A float16
input is evaluated in float32 (log-softmax and sums) and the results rounded once.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..dtypes import working_dtype
from ..registry import register
from ..values import text

REDUCTIONS = ("none", "sum", "mean")


class _PickedLoss(Kernel):
    """The shared spec: input [N, C, d1...], target [N, d1...], optional weight [C]."""
    what = ("input", "target", "weight")

    def prepare(self):
        xn, tn, wn = self.what
        xm = self.inputs[0] if self.inputs else None
        tm = self.inputs[1] if len(self.inputs) > 1 else None
        if xm is None or tm is None:
            raise self.fail(f"inputs {xn} and {tn} are required")
        xs, ts = tuple(xm.shape), tuple(tm.shape)
        if len(xs) < 2 or ts != xs[:1] + xs[2:]:
            raise self.fail(f"{xn} {xs} and {tn} {ts} do not match: [N, C, d1...] and [N, d1...] expected")
        wm = self.inputs[2] if len(self.inputs) > 2 else None
        if wm is not None and tuple(wm.shape) != xs[1:2]:
            raise self.fail(f"{wn} has shape {tuple(wm.shape)}; ({xs[1]},) expected")
        self.reduction = text(self.attr("reduction", "mean"))
        if self.reduction not in REDUCTIONS:
            raise self.fail(f"reduction '{self.reduction}' must be one of {', '.join(REDUCTIONS)}")
        ignore = self.attr("ignore_index")
        self.ignore = None if ignore is None else int(ignore)
        self.dtype = xm.dtype
        self.loss_meta = Meta(xm.dtype, ts if self.reduction == "none" else ())

    def loss(self, logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None) -> np.ndarray:
        """The reduced loss of log-probabilities logp [N, C, ...] (in the working dtype)."""
        n, c = logp.shape[:2]
        x3 = logp.reshape(n, c, -1)
        t2 = target.reshape(n, -1)
        valid = t2 != self.ignore if self.ignore is not None else np.ones(t2.shape, bool)
        idx = np.where(valid, t2, 0)
        if idx.size and (idx.min() < 0 or idx.max() >= c):
            bad = int(idx[(idx < 0) | (idx >= c)][0])
            raise self.fail(f"target value {bad} is out of range for {c} classes"
                            + ("" if self.ignore is None else f" (ignore_index={self.ignore})"))
        loss = -np.take_along_axis(x3, idx[:, None, :], axis=1)[:, 0, :]
        w = valid.astype(x3.dtype) if weight is None else weight.astype(x3.dtype)[idx] * valid
        loss *= w
        if self.reduction == "none":
            return loss.reshape(target.shape).astype(self.dtype)
        total = loss.sum()
        if self.reduction == "mean":
            total = total / w.sum()
        return np.asarray(total, dtype=self.dtype)


@register("NegativeLogLikelihoodLoss", since=12)
class NegativeLogLikelihoodLoss(_PickedLoss):
    """loss[n, d...] = -input[n, target[n, d...], d...] * weight[target], then reduced."""

    def infer(self):
        return [self.loss_meta]

    def compute(self, x, target, weight=None):
        wt = working_dtype(x.dtype)
        return [self.loss(x.astype(wt, copy=False), target, weight)]


@register("SoftmaxCrossEntropyLoss", since=12)
class SoftmaxCrossEntropyLoss(_PickedLoss):
    """NegativeLogLikelihoodLoss of log_softmax(scores) over the class axis; the second output (if
    the node has it) is that log_softmax."""
    what = ("scores", "labels", "weights")

    def infer(self):
        metas = [self.loss_meta]
        if self.num_outputs > 1:
            metas.append(Meta(self.dtype, tuple(self.inputs[0].shape)))
        return metas

    def compute(self, scores, labels, weights=None):
        x = scores.astype(working_dtype(scores.dtype))
        x = x - x.max(axis=1, keepdims=True)
        logp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))
        out = [self.loss(logp, labels, weights)]
        if self.num_outputs > 1:
            out.append(logp.astype(self.dtype))
        return out
