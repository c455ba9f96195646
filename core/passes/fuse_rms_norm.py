"""Fuse RMSNorm written out (LLaMA's, T5's, as torch.onnx exports them) into one ge::RMSNormalization.

Why: Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul are seven tasks for what one native row pass
does (ReduceMean alone is a numpy reduction whose per-call cost is tens of microseconds on a
decode step's single row).

Recognized, from the ReduceMean(keepdims=1) over trailing axes:
    xf = x, or Cast(x, to=float32) read only by the pattern
    ms = ReduceMean(Pow(xf, 2) or Mul(xf, xf));  s = Sqrt(Add(ms, eps))
    n = Mul(xf, Reciprocal(s)) or Mul(xf, Div(1, s)) or Div(xf, s)  (operands in either order)
then, optionally, Mul by a constant weight broadcasting over the normalized axes and, when xf is a
Cast from float16 that only the pattern reads, the Cast back to float16, in either order (HF:
`weight * h.to(input_dtype)`). With both Casts the fused node reads x and computes in float32 (the
native rows convert a float16 row as they read it) and rounds once: where the export rounds x * inv
to float16 before the weight's Mul, the fused result differs from it by at most a float16 rounding
step. A Cast without its Cast back stays a Cast (so does one from bfloat16: the fused node reads its
float32 output). Every other intermediate is read only by the pattern and is no graph output (x
itself may be read elsewhere, as the residual is).
"""
from __future__ import annotations

import numpy as np

from ..model.ir import DTYPES, Graph, Node
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher, fuse_at_reduce_means, known_dims
from ._util import set_initializer, unique_name
from .fuse_layer_norm import _affine_param, _constant, _trailing_axis

#: the types ge::RMSNormalization takes (float16 computed in float32)
KERNEL_TYPES = (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64))


def fuse_rms_norm(graph: Graph, stats: dict | None = None) -> Graph:
    return fuse_at_reduce_means(graph, stats, _match, _rms_norm)


def _rms_norm(m: Matcher, mean: Node, match) -> Node:
    x, axis, eps, weight, out, _ = match
    return Node("RMSNormalization", [x] + ([weight] if weight else []), [out], {"axis": axis, "epsilon": eps},
                name=mean.name or f"{out}_rms_norm", domain=GE_DOMAIN)


def _match(m: Matcher, mean: Node):
    square = m.sole_producer(mean.inputs[0], mean) if mean.inputs else None
    if square is None:
        return None
    xf = square.inputs[0] if square.inputs else ""
    if square.op_type == "Pow":
        if len(square.inputs) != 2 or _constant(m, square.inputs[1]) != 2.0:
            return None
    elif square.op_type != "Mul" or square.inputs != [xf, xf]:
        return None
    dtype, shape = m.meta(xf)
    if dtype is None or dtype not in KERNEL_TYPES:  # (`None in KERNEL_TYPES`: numpy reads None as float64)
        return None
    axis = _trailing_axis(m, mean, len(shape))
    if axis is None or not known_dims(shape[axis:]):  # the weight is checked against the normalized dims
        return None
    add = m.sole_consumer(mean)
    eps = m.scalar_value(m.other_input(add, mean.outputs[0])) if add is not None and add.op_type == "Add" else None
    sqrt = m.sole_consumer(add) if eps is not None else None
    if sqrt is None or sqrt.op_type != "Sqrt":
        return None
    group = [square, mean, add, sqrt]
    after = m.sole_consumer(sqrt)
    if after is None:
        return None
    if after.op_type == "Div" and after.inputs == [xf, sqrt.outputs[0]]:
        scaled = after
    else:
        one_over = after.op_type == "Div" and after.inputs[1:] == [sqrt.outputs[0]] and _constant(m, after.inputs[0]) == 1.0
        if after.op_type != "Reciprocal" and not one_over:
            return None
        group.append(after)
        scaled = m.sole_consumer(after)
        if scaled is None or scaled.op_type != "Mul" or m.other_input(scaled, after.outputs[0]) != xf:
            return None
    group.append(scaled)
    x, out, weight = xf, scaled.outputs[0], None
    only_pattern = {id(r) for r in m.consumers.get(xf, [])} == {id(square), id(scaled)}
    cast_in = _cast_to_float32(m, xf) if only_pattern else None  # a Cast read elsewhere too stays
    for _ in range(2):  # the weight's Mul and the Cast back, in either order
        nxt = m.sole_consumer(group[-1])
        if nxt is None:
            break
        if cast_in is not None and x == xf and nxt.op_type == "Cast" and \
                _cast_type(nxt) == m.meta(cast_in.inputs[0])[0]:
            group.append(nxt)
            x, out = cast_in.inputs[0], nxt.outputs[0]
            continue
        w = _weight(m, m.other_input(nxt, out), shape[axis:], m.meta(out)[0]) \
            if weight is None and nxt.op_type == "Mul" else None
        if w is None:
            break
        group.append(nxt)
        weight, out = w, nxt.outputs[0]
    if x != xf:  # the Cast and its Cast back go: the fused node reads x and writes x's type
        group.insert(0, cast_in)
    return x, axis, eps, weight, out, group


def _cast_to_float32(m: Matcher, xf: str) -> Node | None:
    """The Cast(x, to=float32) producing xf from float16, else None."""
    cast = m.producers.get(xf)
    if cast is None or cast.op_type != "Cast" or cast.domain != "" or m.removed(cast) or not m.internal(xf):
        return None
    return cast if _cast_type(cast) == np.float32 and m.meta(cast.inputs[0])[0] == np.float16 else None


def _cast_type(cast: Node) -> np.dtype | None:
    return DTYPES.get(int(cast.attrs.get("to", 0)))  # None for a type ge does not know: no match


def _weight(m: Matcher, name: str | None, norm: tuple, dtype) -> str | None:
    """A constant of `dtype` broadcasting over the normalized axes, as an initializer of exactly
    their shape (the native rows read a whole row of it), else None."""
    name = _affine_param(m, name, norm, dtype)
    if name is None or m.graph.initializers[name].shape == norm:
        return name
    full = unique_name(m.graph, f"{name}_rows")
    set_initializer(m.graph, full, np.ascontiguousarray(np.broadcast_to(m.graph.initializers[name], norm)))
    return full
