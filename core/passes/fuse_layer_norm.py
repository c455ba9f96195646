"""Fuse LayerNorm written out (exports before opset 17) into one ge::LayerNormalization node.

Why: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add are nine tasks and about as many
passes over the activations for what the LayerNormalization kernel does in four.

Recognized: mean = ReduceMean(x, trailing axes, keepdims=1); d = Sub(x, mean);
var = ReduceMean(Pow(d, 2) or Mul(d, d), same axes); y = Div(d, Sqrt(Add(var, eps))); then,
optionally, Mul by a constant scale and Add of a constant bias that broadcast over the normalized
axes (either operand order). d is read only by the pattern, the other intermediates once each,
none is a graph output. The fused node is in ge's domain (kernels/fused.py): ONNX has
LayerNormalization from opset 17 only.
"""
from __future__ import annotations

import numpy as np

from ..model.ir import Graph, Node
from ..kernels.dtypes import is_float
from ..kernels.fused import GE_DOMAIN
from ._fusion import Matcher, fuse_at_reduce_means, known_dims
from ._util import set_initializer, unique_name


def fuse_layer_norm(graph: Graph, stats: dict | None = None) -> Graph:
    return fuse_at_reduce_means(graph, stats, _match, _layer_norm)


def _layer_norm(m: Matcher, mean: Node, match) -> Node:
    x, axis, eps, scale, bias, out, _ = match
    if scale is None:  # the kernel needs a Scale input: ones over the normalized axes
        dtype, shape = m.meta(x)
        scale = unique_name(m.graph, f"{mean.name or 'layer_norm'}_ones")
        set_initializer(m.graph, scale, np.ones(shape[axis:], dtype))
    inputs = [x, scale] + ([bias] if bias is not None else [])
    return Node("LayerNormalization", inputs, [out], {"axis": axis, "epsilon": eps},
                name=mean.name or f"{out}_layer_norm", domain=GE_DOMAIN)


def _match(m: Matcher, mean: Node):
    x = mean.inputs[0] if mean.inputs else ""
    dtype, shape = m.meta(x)
    if dtype is None or not is_float(dtype):
        return None
    axis = _trailing_axis(m, mean, len(shape))
    if axis is None or not known_dims(shape[axis:]):  # scale and bias are planned over the normalized dims
        return None
    sub = m.sole_consumer(mean)
    if sub is None or sub.op_type != "Sub" or sub.inputs != [x, mean.outputs[0]]:
        return None
    d = sub.outputs[0]
    readers = list({id(r): r for r in m.consumers.get(d, [])}.values())
    if not m.internal(d) or len(readers) != 2:
        return None
    square = next((r for r in readers if r.op_type in ("Pow", "Mul")), None)
    div = next((r for r in readers if r.op_type == "Div"), None)
    if square is None or div is None or div.inputs[0] != d:
        return None
    if square.op_type == "Pow" and (square.inputs[0] != d or _constant(m, square.inputs[1]) != 2.0):
        return None
    if square.op_type == "Mul" and square.inputs != [d, d]:
        return None
    var = m.sole_consumer(square)
    if var is None or var.op_type != "ReduceMean" or _trailing_axis(m, var, len(shape)) != axis:
        return None
    add = m.sole_consumer(var)
    eps = m.scalar_value(m.other_input(add, var.outputs[0])) if add is not None and add.op_type == "Add" else None
    sqrt = m.sole_consumer(add) if eps is not None else None
    if sqrt is None or sqrt.op_type != "Sqrt" or m.sole_consumer(sqrt) is not div or div.inputs[1] != sqrt.outputs[0]:
        return None
    group = [mean, sub, square, var, add, sqrt, div]
    out, scale, bias = div.outputs[0], None, None
    norm = shape[axis:]
    mul = m.sole_consumer(div)
    if mul is not None and mul.op_type == "Mul":
        scale = _affine_param(m, m.other_input(mul, out), norm, dtype)
        if scale is not None:
            group.append(mul)
            out = mul.outputs[0]
    after = m.sole_consumer(group[-1])
    if after is not None and after.op_type == "Add":
        bias = _affine_param(m, m.other_input(after, out), norm, dtype)
        if bias is not None:
            group.append(after)
            out = after.outputs[0]
    return x, axis, eps, scale, bias, out, group


def _trailing_axis(m: Matcher, reduce: Node, rank: int) -> int | None:
    """The first axis when a ReduceMean (keepdims=1) reduces the trailing axes axis..rank-1, else None."""
    if int(reduce.attrs.get("keepdims", 1)) != 1 or rank == 0:
        return None
    axes = reduce.attrs.get("axes")
    if len(reduce.inputs) > 1 and reduce.inputs[1]:
        if axes is not None or reduce.inputs[1] not in m.graph.initializers:
            return None
        axes = m.graph.initializers[reduce.inputs[1]].reshape(-1).tolist()
    if not axes:
        return None
    axes = sorted(int(a) % rank for a in axes)
    return axes[0] if axes == list(range(axes[0], rank)) else None


def _constant(m: Matcher, name: str) -> float | None:
    a = m.graph.initializers.get(name)
    return float(a.reshape(-1)[0]) if a is not None and a.size == 1 else None


def _affine_param(m: Matcher, name: str | None, norm: tuple, dtype) -> str | None:
    """A constant of the input's dtype broadcasting over the normalized axes, reshaped so that it
    has no more dims than they do (the kernel's requirement), else None."""
    a = m.graph.initializers.get(name) if name else None
    if a is None or a.dtype != dtype:
        return None
    shape = tuple(a.shape)
    while len(shape) > len(norm) and shape[0] == 1:
        shape = shape[1:]
    try:
        if len(shape) > len(norm) or np.broadcast_shapes(shape, norm) != norm:
            return None
    except ValueError:
        return None
    if shape != tuple(a.shape):
        if len(m.consumers.get(name, [])) != 1:
            return None  # another node reads it in its own shape
        set_initializer(m.graph, name, a.reshape(shape))
    return name
