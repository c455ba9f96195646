"""Nominal shapes: every value's shape when a dynamic graph's unknown input dims take a nominal size,
inferred by ge's kernels, at two such sizes.

onnx's inference leaves most dims of an exported dynamic graph as fresh symbols (a Conv's output, a
Resize's, a MatMul's: `unk__54`), equal at run time but not by name, so a fusion that asks whether two
values have one shape, or whether an addend broadcasts to a product, cannot prove it. What such a
question decides is either cost (does a blocked region repay its reorders? is a gate's chain computed
per pixel?), or a rewrite whose fused kernel checks the shapes it is given at run time and names the
node when they do not hold (a FusedConv's residual, a FusedMatMul's addend): never a silent wrong value.
Two nominal runs answer them. The first gives every unknown batch dim (axis 0) 1 and every other one
256: exporters name one size differently in different inputs (`input_ids_0`, `attention_mask_0`), and
this run sees them equal, as they are in use: the evidence for cost. The second gives each distinct
unknown dim its own value (one per symbol, one per unnamed dim), so that independent dims cannot agree
by construction: a rewrite that needs shapes to agree needs them to at both runs, and where the second
cannot infer a value (the differently named dims meet in a broadcast) it is not made.
"""
from __future__ import annotations

import math

import numpy as np

from ..model.ir import Graph, Meta, subgraphs
from ._util import build_kernel

#: the nominal sizes of the k-th distinct unknown input dim (first met at axis 0: a batch; else an image
#: side, a sequence), (batch, batch step, size, size step) a run: the same for all, then one each
NOMINAL_SIZES = ((1, 0, 256, 0), (2, 2, 160, 16))


def nominal_shapes(graph: Graph, batch: int, batch_step: int, size: int, size_step: int) -> dict[str, tuple[int, ...]]:
    """{value: its shape when the inputs' k-th distinct unknown batch dim is batch + k * batch_step and
    the k-th other one size + k * size_step}; a static value's own shape; absent where a kernel cannot
    tell (a shape computed from values, control flow, an unknown dtype) and after it."""
    metas: dict[str, Meta] = {}
    chosen: dict = {}  # symbol (or an unnamed dim's own key) -> its value
    counts = [0, 0]  # distinct batch dims, other dims

    def value(d, axis: int, key) -> int:
        if isinstance(d, int) and d >= 0:
            return d
        key = d if isinstance(d, str) else key
        if key not in chosen:
            kind = int(axis != 0)
            chosen[key] = (batch + counts[0] * batch_step) if kind == 0 else (size + counts[1] * size_step)
            counts[kind] += 1
        return chosen[key]
    for name in graph.inputs:
        v = graph.values.get(name)
        if v is not None and v.kind == "tensor" and v.dtype is not None and v.shape is not None:
            metas[name] = Meta(v.dtype, tuple(value(d, axis, (name, axis)) for axis, d in enumerate(v.shape)))
    values: dict[str, np.ndarray] = {}  # the shapes' arithmetic (Shape -> Gather -> Concat -> Reshape) at these sizes
    for node in graph.nodes:  # (in graph order: a node whose inputs are not known yet is left unknown)
        if subgraphs(node):
            continue
        ins = []
        for name in node.inputs:
            if not name:
                ins.append(None)
            elif name in graph.initializers:
                a = graph.initializers[name]
                ins.append(Meta(a.dtype, a.shape))
            elif name in metas:
                ins.append(metas[name])
            else:
                break
        else:
            try:
                kernel = build_kernel(graph, node, ins, values)
                outs = kernel.infer()
                if all(m is None or not name or name in graph.initializers or name in values
                       or node.op_type in SHAPE_READERS for name, m in zip(node.inputs, ins)) \
                        and all(math.prod(m.shape) <= MAX_VALUE for m in outs):
                    arrays = [None if m is None else graph.initializers.get(name, values.get(name))
                              if name in graph.initializers or name in values else _any_values(m)
                              for name, m in zip(node.inputs, ins)]
                    values.update((name, np.asarray(a)) for name, a in zip(node.outputs, kernel.compute(*arrays)) if name)
            except Exception:  # (a value-dependent shape, an op that refuses the nominal sizes): unknown
                continue
            for name, m in zip(node.outputs, outs):
                if name:
                    metas[name] = Meta(m.dtype, tuple(int(d) for d in m.shape))
    return {name: m.shape for name, m in metas.items()}


#: ops whose outputs' values are those of their inputs' shapes alone
SHAPE_READERS = ("Shape", "Size")
#: the most elements of a value computed along (a Range of positions over a nominal sequence)
MAX_VALUE = 4096


def _any_values(m: Meta) -> np.ndarray:
    """An array of m's dtype and shape whose values no one reads (a Shape's input), holding no memory."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, m.dtype), m.shape, (0,) * len(m.shape))


class Sizes:
    """A graph's shapes beyond what it proves: a value's own where static, else its nominal shapes
    (nominal_shapes at both NOMINAL_SIZES, made when first asked)."""

    def __init__(self, graph: Graph):
        self.graph, self._nominal = graph, None

    def shapes(self, name: str) -> tuple:
        """The value's shape at each nominal run, None where a run cannot tell (a static value's own
        shape at both)."""
        a = self.graph.initializers.get(name)
        if a is not None:
            return (tuple(a.shape),) * 2
        v = self.graph.values.get(name)
        if v is not None and v.is_static:
            return (tuple(v.shape),) * 2
        if self._nominal is None:
            self._nominal = [nominal_shapes(self.graph, *sizes) for sizes in NOMINAL_SIZES]
        return tuple(n.get(name) for n in self._nominal)

    def numel(self, name: str) -> int | None:
        """Elements at the first run (a cost)."""
        shape = self.shapes(name)[0]
        return None if shape is None else math.prod(shape)

    def alike(self, a: str, b: str, proof: bool = False) -> bool:
        """Of one shape: for cost, equal at the first run (or written alike where it cannot tell);
        `proof`, for a rewrite that needs it, equal at both."""
        (a1, a2), (b1, b2) = self.shapes(a), self.shapes(b)
        if proof:
            return a1 is not None and a2 is not None and (a1, a2) == (b1, b2)
        if a1 is None or b1 is None:
            va, vb = self.graph.values.get(a), self.graph.values.get(b)
            return va is not None and vb is not None and va.shape is not None and tuple(va.shape) == tuple(vb.shape or ())
        return a1 == b1

    def broadcasts_into(self, c: str, y: str) -> bool:
        """c broadcasts to y without enlarging it at both runs: each of its dims (aligned right) 1 or y's."""
        return all(cs is not None and ys is not None and len(cs) <= len(ys)
                   and all(d == 1 or d == e for d, e in zip(cs[::-1], ys[::-1]))
                   for cs, ys in zip(self.shapes(c), self.shapes(y)))
