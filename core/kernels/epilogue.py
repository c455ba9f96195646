"""Epilogue: activations fused into their producer, applied in place to its output.

The compiler records them as node attribute "ge.epilogue" = [[op_type, attrs], ...] (Clip's
bounds as attrs "min"/"max"; a step of ge's own domain, such as Swish for Mul(x, Sigmoid(x)), as
[op_type, attrs, "ge"]); this class is the one place that turns such a list into kernels, for the
runtime and for the fusion pass alike. Only kernels flagged `in_place` that need no workspace
qualify. A native kernel applies a one-step epilogue itself as it stores its output when
native_act() maps the step to one of its activations.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GraphError
from ..model.ir import Meta
from .fused import GE_DOMAIN
from .native import (ACT_CLAMP, ACT_GELU, ACT_GELU_TANH, ACT_HARDSIGMOID, ACT_HARDSWISH, ACT_LEAKY_RELU, ACT_SIGMOID, ACT_SWISH,
                     ACT_TANH, Act)
from .registry import lookup

ATTR = "ge.epilogue"


class Epilogue:
    def __init__(self, spec, meta: Meta, opset: int = 17, name: str = ""):
        self.steps = []  # (kernel, constant extra inputs)
        for op_type, attrs, domain in map(_step, spec):
            attrs, extra = dict(attrs), []
            if op_type == "Clip":  # the bounds travel as attrs; the opset-11 kernel takes them as inputs
                extra = [clip_bound(attrs.pop(key, default), meta.dtype) for key, default in (("min", -np.inf), ("max", np.inf))]
            cls = lookup(op_type, domain, opset, name)
            kernel = cls(attrs, [meta] + [Meta(e.dtype, ()) for e in extra], [None] + extra, outputs=[meta],
                         opset=opset, name=f"{name}:{op_type}")
            if not cls.in_place or kernel.workspace_nbytes():
                raise GraphError(f"node '{name}': {op_type} cannot be applied in place as an epilogue")
            self.steps.append((kernel, extra))

    def __call__(self, y: np.ndarray) -> None:
        for kernel, extra in self.steps:
            kernel.run([y, *extra], [y], None)

    @classmethod
    def unless_absorbed(cls, kernel, spec, meta: Meta, opset: int = 17, name: str = "") -> "Epilogue | None":
        """The epilogue the runtime applies after `kernel`: None without one, or when the kernel
        applies it itself."""
        return cls(spec, meta, opset, name) if spec and not kernel.absorbs_epilogue else None

    @classmethod
    def supports(cls, op_type: str, attrs: dict, dtype, opset: int = 17, domain: str = "") -> bool:
        try:
            cls([[op_type, attrs, domain]], Meta(np.dtype(dtype), (1,)), opset)
            return True
        except GraphError:
            return False


def _step(entry) -> tuple[str, dict, str]:
    """(op_type, attrs, domain) of an epilogue entry [op_type, attrs] or [op_type, attrs, domain]."""
    return entry[0], entry[1], entry[2] if len(entry) > 2 else ""


def native_act(spec) -> Act | None:
    """The native kernels' activation equal to the epilogue when it is one step they apply as they
    store (Relu, Clip, HardSigmoid, HardSwish, Sigmoid, Tanh, LeakyRelu, Gelu (exact), ge's Swish and
    its Gelu's tanh form), else None."""
    if not spec or len(spec) != 1:
        return None
    op_type, attrs, domain = _step(spec[0])
    attrs = dict(attrs)
    value = lambda key, default: float(attrs.get(key, default))  # noqa: E731
    if domain == GE_DOMAIN:
        ge_acts = {"Swish": Act(ACT_SWISH, value("alpha", 1.0)), "HardSwish": Act(ACT_HARDSWISH)}
        if op_type == "Gelu" and _approximate(attrs) == "tanh":  # fuse_gelu's tanh form (GPT-2's gelu_new)
            return Act(ACT_GELU_TANH)
        return ge_acts.get(op_type)
    if domain:
        return None
    if op_type == "Relu":
        return Act(ACT_CLAMP, 0.0, float("inf"))
    if op_type == "Clip":
        return Act(ACT_CLAMP, value("min", -np.inf), value("max", np.inf))
    if op_type == "HardSigmoid":
        return Act(ACT_HARDSIGMOID, value("alpha", 0.2), value("beta", 0.5))
    if op_type == "LeakyRelu":
        return Act(ACT_LEAKY_RELU, value("alpha", 0.01))
    simple = {"HardSwish": ACT_HARDSWISH, "Sigmoid": ACT_SIGMOID, "Tanh": ACT_TANH}
    if op_type in simple:
        return Act(simple[op_type])
    if op_type == "Gelu" and _approximate(attrs) == "none":
        return Act(ACT_GELU)
    return None


def _approximate(attrs: dict) -> str:
    """Gelu's approximate attribute as a str ("none" by default)."""
    value = attrs.get("approximate", "none")
    return value.decode() if isinstance(value, bytes) else value


def clip_bound(value, dtype: np.dtype) -> np.ndarray:
    """A Clip bound as a scalar of the clipped dtype (an integer one saturated to its range)."""
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        value = min(max(value, info.min), info.max)
    return np.array(value).astype(dtype)
