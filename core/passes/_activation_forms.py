"""The forms exporters write the activations of mobile convnets in, recognized as the one activation
they compute: fuse_activation makes that its producer's epilogue step.

What the exporters write (read in their sources):
- paddle2onnx, hard_swish below opset 14 (its Opset7 mapper; PaddleOCR and PaddleClas export at 11):
  Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6), scalar Constant nodes, the Clip's bounds inputs from
  opset 11 on, attributes before; relu6 -> Clip(x, 0, 6); hard_sigmoid and nn.Hardsigmoid ->
  HardSigmoid(alpha=slope, beta=offset) (slope 0.2, or 0.1666667); swish -> Mul(x, Sigmoid(Mul(x, beta))).
- tf2onnx: Relu6 -> Clip (attributes below opset 11, constant inputs from 11). Keras' MobileNetV3:
  hard_sigmoid(x) = ReLU(6)(x + 3) * (1 / 6), hard_swish(x) = Multiply([x, hard_sigmoid(x)]) (either
  order), so Mul(x, Mul(Clip(Add(x, 3), 0, 6), 0.16666667)); hand-written Keras layers also write
  x * relu6(x + 3) / 6, x * relu6(x + 3) * (1 / 6) and relu6 as Maximum(Minimum(x, 6), 0).
- torch.onnx: silu -> Mul(x, Sigmoid(x)); hardswish below opset 14 -> Mul(x, HardSigmoid(x; 1/6, 1/2));
  relu6 -> Clip(x, 0, 6), or Relu followed by a Clip with only a max (opset 9-10: attribute max,
  11-12: Clip(r, '', 6)) or by Clip(r, 0, 6), depending on the version; modules written
  x * F.relu6(x + 3) / 6 (timm-era MobileNetV3 ports) -> Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6).

Every one of them is x passed through a chain of one-input steps with scalar constants (Add, Sub, Mul,
Div by a constant, Clip, Relu, Min or Max with a constant, HardSigmoid, a final Sigmoid), or x times
such a chain of x, maybe scaled after the product. A chain folds into one function: Ramp, clamp(a * x
+ b, lo, hi) (a > 0), or sigmoid(a * x + b); FORMS says which Ramps are which activation. The
constants are compared with a tolerance of the tensor's precision (1e-6 relative, float16's half ulp
for float16 tensors), so results stay within rounding of the unfused ops'.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.ir import Node
from ..kernels.fused import GE_DOMAIN
from ..model.record import record
from ._fusion import Matcher

INF = math.inf


@record
class Ramp:
    """clamp(a * x + b, lo, hi) with a > 0, or sigmoid(a * x + b) when sigmoid (then lo, hi unused)."""
    a: float = 1.0
    b: float = 0.0
    lo: float = -INF
    hi: float = INF
    sigmoid: bool = False

    def shift(self, c: float) -> Ramp:
        return self._replace(b=self.b + c, lo=self.lo + c, hi=self.hi + c)

    def scale(self, c: float) -> Ramp | None:
        if not c > 0:
            return None
        return self._replace(a=self.a * c, b=self.b * c, lo=self.lo * c, hi=self.hi * c)

    def clamp(self, lo: float, hi: float) -> Ramp | None:
        if math.isnan(lo) or math.isnan(hi):
            return None
        lo, hi = max(self.lo, lo), min(self.hi, hi)
        return self._replace(lo=lo, hi=hi) if lo <= hi else None


#: f followed by op(x, c) for a scalar constant c (Sub and Div: x first)
SCALAR_STEPS = {
    "Add": lambda f, c: f.shift(c), "Sub": lambda f, c: f.shift(-c), "Mul": lambda f, c: f.scale(c),
    "Div": lambda f, c: f.scale(1 / c) if c else None, "Min": lambda f, c: f.clamp(-INF, c),
    "Max": lambda f, c: f.clamp(c, INF),
}


def _hardswish(opset: int) -> list:
    """ONNX's HardSwish from opset 14, ge's own before it (the same function)."""
    return ["HardSwish", {}] if opset >= 14 else ["HardSwish", {}, GE_DOMAIN]


#: (x * f(x)?, f a sigmoid?, the parameters f must have, the epilogue step of f (or of x * f(x)))
FORMS = [
    (False, False, dict(a=1.0, b=0.0, lo=0.0, hi=INF), lambda f, opset: ["Relu", {}]),
    (False, False, dict(a=1.0, b=0.0), lambda f, opset: ["Clip", {"min": f.lo, "max": f.hi}]),
    (False, False, dict(lo=0.0, hi=1.0), lambda f, opset: ["HardSigmoid", {"alpha": f.a, "beta": f.b}]),
    (False, True, dict(a=1.0, b=0.0), lambda f, opset: ["Sigmoid", {}]),
    (True, False, dict(a=1 / 6, b=0.5, lo=0.0, hi=1.0), lambda f, opset: _hardswish(opset)),
    (True, True, dict(b=0.0), lambda f, opset: ["Swish", {"alpha": f.a}, GE_DOMAIN]),
]


def step_of(f: Ramp, gated: bool, rtol: float, opset: int) -> list | None:
    """The epilogue step computing f(x) (x * f(x) when gated), or None when FORMS has none."""
    for form_gated, sigmoid, params, step in FORMS:
        if form_gated == gated and sigmoid == f.sigmoid and all(
                _close(getattr(f, k), v, rtol) for k, v in params.items()):
            return step(f, opset)
    return None


def _close(value: float, target: float, rtol: float) -> bool:
    if math.isinf(target):
        return value == target
    return abs(value - target) <= rtol * max(abs(target), 1.0)


def rtol_of(dtype) -> float:
    """How far an exporter's constant may be from the exact one: its rounding to the tensor's dtype
    (float16: 1/6 is 0.16663), else 1e-6 (paddle's slope 0.1666667)."""
    return 2.0 ** -11 if np.dtype(dtype) == np.float16 else 1e-6


class Chains:
    """Chains of one-input steps over a graph's tensors (see the module doc)."""

    def __init__(self, m: Matcher):
        self.m = m

    def after(self, f: Ramp, node: Node, x: str, rank: int) -> Ramp | None:
        """f followed by node applied to x (node's data input), or None when node is no such step."""
        if node.domain != "" or f.sigmoid or len([o for o in node.outputs if o]) != 1 or len(node.outputs) != 1:
            return None
        op, ins = node.op_type, node.inputs
        if op in SCALAR_STEPS:
            c = self._scalar(self.m.other_input(node, x), rank)
            if c is None or (op in ("Sub", "Div") and ins[0] != x):
                return None
            return SCALAR_STEPS[op](f, c)
        if not ins or ins[0] != x or x in ins[1:]:
            return None
        if op == "Relu":
            return f.clamp(0.0, INF)
        if op == "Clip":
            bounds = self._clip_bounds(node, rank)
            return None if bounds is None else f.clamp(*bounds)
        if op == "HardSigmoid":
            g = f.scale(float(node.attrs.get("alpha", 0.2)))
            return None if g is None else g.shift(float(node.attrs.get("beta", 0.5))).clamp(0.0, 1.0)
        if op == "Sigmoid" and f.lo == -INF and f.hi == INF:
            return f._replace(sigmoid=True)
        return None

    def prefixes(self, first: Node, x: str, rank: int):
        """(f, nodes) for each chain that starts at `first` (reading x): first, first and its
        reader, ... as long as each step's output has that one reader and is no graph output."""
        f, nodes, node = Ramp(), [], first
        while node is not None:
            f = self.after(f, node, x, rank)
            if f is None:
                return
            nodes.append(node)
            yield f, list(nodes)
            x = node.outputs[0]
            node = self.m.sole_consumer(node)

    def _scalar(self, name: str | None, rank: int) -> float | None:
        """A constant of one element that broadcasts to x without changing its shape."""
        a = self.m.graph.initializers.get(name) if name else None
        return None if a is None or a.size != 1 or a.ndim > rank else float(a.reshape(-1)[0])

    def _clip_bounds(self, node: Node, rank: int) -> tuple[float, float] | None:
        bounds = []
        for key, idx, default in (("min", 1, -INF), ("max", 2, INF)):
            name = node.inputs[idx] if len(node.inputs) > idx else ""
            if name:
                value = self._scalar(name, rank)
                if value is None:
                    return None
            else:  # absent; below opset 11 the bound is an attribute
                value = float(node.attrs.get(key, default))
            bounds.append(value)
        return bounds[0], bounds[1]
