"""Einsum: the equation is parsed once (labels, ellipsis broadcasting, implicit output) into an explicit
numpy equation; the contraction order (np.einsum_path, greedy) is fixed in prepare(), so run() is one
np.einsum call with the precomputed path writing into the planned output."""
from __future__ import annotations

import numpy as np

from ..ir import Meta
from .conv import Scratch, SpatialKernel
from .registry import register
from .shape_ops import text

TYPES = (np.float16, np.float32, np.float64, np.int32, np.int64, np.uint32, np.uint64)


@register("Einsum", since=12)
class Einsum(SpatialKernel):
    def prepare(self):
        eq = self.attr("equation")
        if eq is None:
            raise self.fail("attribute 'equation' is required")
        self.equation = text(eq)
        metas = list(self.inputs)
        if not metas or any(m is None for m in metas):
            raise self.fail("needs at least one input, and no input may be missing")
        dt = metas[0].dtype
        if any(m.dtype != dt for m in metas):
            raise self.fail(f"inputs have different types {[str(m.dtype) for m in metas]}")
        if dt not in TYPES:
            raise self.fail(f"input type {dt} is not supported ({', '.join(np.dtype(t).name for t in TYPES)})")
        self.eq, shape = self.parse(self.equation, [tuple(m.shape) for m in metas])
        self.out_metas = [Meta(dt, shape)]
        self.scratch = Scratch()
        # the contraction order, once (one operand: a plain np.einsum, nothing to order)
        dummies = [np.broadcast_to(np.zeros((), dt), m.shape) for m in metas]
        self.path = np.einsum_path(self.eq, *dummies, optimize="greedy")[0] if len(metas) > 1 else False

    def parse(self, equation: str, shapes: list[tuple]) -> tuple[str, tuple]:
        eq = "".join(equation.split())
        lhs, arrow, rhs = eq.partition("->")
        terms = lhs.split(",")
        if len(terms) != len(shapes):
            raise self.fail(f"equation '{equation}' has {len(terms)} operand(s) but the node has {len(shapes)} input(s)")
        sizes: dict[str, int] = {}
        counts: dict[str, int] = {}
        ell_shapes = []
        for i, (term, shape) in enumerate(zip(terms, shapes)):
            if term.count("...") > 1 or "." in term.replace("...", ""):
                raise self.fail(f"operand {i} '{term}' of equation '{equation}' has a malformed ellipsis")
            labels = term.replace("...", "")
            if not all(c.isascii() and c.isalpha() for c in labels):
                raise self.fail(f"operand {i} '{term}' of equation '{equation}' has a label that is not a letter")
            n_ell = len(shape) - len(labels)
            if n_ell < 0 or (n_ell > 0 and "..." not in term):
                raise self.fail(f"operand {i} '{term}' does not match input {i} of rank {len(shape)}")
            head = term.index("...") if "..." in term else len(labels)
            dims = list(shape[:head]) + list(shape[head + n_ell:])
            ell_shapes.append(tuple(shape[head:head + n_ell]))
            for c, d in zip(labels, dims):
                counts[c] = counts.get(c, 0) + 1
                old = sizes.get(c)
                if old is not None and old != d and 1 not in (old, d):
                    raise self.fail(f"label '{c}' has sizes {old} and {d} in equation '{equation}' "
                                    f"(input shapes {[list(s) for s in shapes]})")
                sizes[c] = d if old is None or old == 1 else old
        try:
            ell = np.broadcast_shapes(*ell_shapes)
        except ValueError:
            raise self.fail(f"the ellipsis dims {ell_shapes} of equation '{equation}' do not broadcast") from None
        if not arrow:
            # implicit output: the broadcast dims, then the labels seen once, in alphabetical order
            rhs = ("..." if any("..." in t for t in terms) else "") + \
                "".join(sorted(c for c, k in counts.items() if k == 1))
        out_labels = rhs.replace("...", "")
        if rhs.count("...") > 1 or "." in out_labels:
            raise self.fail(f"the output '{rhs}' of equation '{equation}' has a malformed ellipsis")
        for c in out_labels:
            if c not in sizes:
                raise self.fail(f"output label '{c}' of equation '{equation}' is not in any input")
        if len(set(out_labels)) != len(out_labels):
            raise self.fail(f"the output '{rhs}' of equation '{equation}' repeats a label")
        shape = []
        for part in rhs.split("..."):
            shape.extend(sizes[c] for c in part)
            shape.extend(ell)
        shape = shape[:len(shape) - len(ell)]
        return f"{lhs}->{rhs}", tuple(int(d) for d in shape)

    def run(self, xs, ys, ws):
        np.einsum(self.eq, *xs, out=ys[0], optimize=self.path)
