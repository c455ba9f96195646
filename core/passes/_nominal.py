"""Nominal shapes: every value's shape when a dynamic graph's unknown input dims take a nominal size,
inferred by ge's kernels. For decisions of cost only (does a blocked region repay its reorders?),
which compare sizes within one graph, so any size that keeps their ratios serves; never for a
decision of meaning: what a rewrite may do is decided by the dims the graph proves.
"""
from __future__ import annotations

import math

from ..model.ir import Graph, Meta, subgraphs
from ._util import build_kernel

#: an unknown input dim's nominal size: the batch (axis 0) 1, any other dim 256 (an image side, a sequence)
NOMINAL_BATCH, NOMINAL_SIZE = 1, 256


def nominal_shapes(graph: Graph) -> dict[str, tuple[int, ...]]:
    """{value: its shape at the nominal input size}; a static value's own shape; absent where a kernel
    cannot tell (a shape computed from values, control flow, an unknown dtype) and after it."""
    metas: dict[str, Meta] = {}
    for name in graph.inputs:
        v = graph.values.get(name)
        if v is not None and v.kind == "tensor" and v.dtype is not None and v.shape is not None:
            metas[name] = Meta(v.dtype, tuple(d if isinstance(d, int) and d >= 0 else NOMINAL_BATCH if axis == 0
                                              else NOMINAL_SIZE for axis, d in enumerate(v.shape)))
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
                outs = build_kernel(graph, node, ins).infer()
            except Exception:  # (a value-dependent shape, an op that refuses the nominal sizes): unknown
                continue
            for name, m in zip(node.outputs, outs):
                if name:
                    metas[name] = Meta(m.dtype, tuple(int(d) for d in m.shape))
    return {name: m.shape for name, m in metas.items()}


class Sizes:
    """A graph's shapes for decisions of cost: a value's own where static, else its nominal shape
    (nominal_shapes, made when first asked); None where neither is known."""

    def __init__(self, graph: Graph):
        self.graph, self._nominal = graph, None

    def shape(self, name: str) -> tuple | None:
        a = self.graph.initializers.get(name)
        if a is not None:
            return tuple(a.shape)
        v = self.graph.values.get(name)
        if v is not None and v.is_static:
            return tuple(v.shape)
        if self._nominal is None:
            self._nominal = nominal_shapes(self.graph)
        return self._nominal.get(name)

    def numel(self, name: str) -> int | None:
        shape = self.shape(name)
        return None if shape is None else math.prod(shape)

    def alike(self, a: str, b: str) -> bool:
        """Of one shape as far as cost goes: equal nominal shapes (a dynamic graph's dims onnx could not
        relate, fresh symbols apiece, are related there), or, where a nominal shape is not known, equal
        shapes as the graph writes them."""
        sa, sb = self.shape(a), self.shape(b)
        if sa is None or sb is None:
            va, vb = self.graph.values.get(a), self.graph.values.get(b)
            return va is not None and vb is not None and va.shape is not None and tuple(va.shape) == tuple(vb.shape or ())
        return sa == sb
