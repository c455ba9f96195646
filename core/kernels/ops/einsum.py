"""Einsum: the equation is parsed once (labels, ellipsis broadcasting, implicit output) into an explicit
numpy equation.

Two operands whose labels are each either batch (both inputs and the output), kept (one input and the
output) or contracted (both inputs, not the output) are one batched GEMM: each operand is a transposed
view (copied into the workspace only when the grouped dims cannot be a view) [batch, M, K] @ [batch, K, N],
written straight into the output when its label order is batch, M, N (attention's "bhid,bhjd->bhij"),
else into the workspace and transposed into it. Anything else (traces, diagonals, labels summed inside
one operand, three or more operands) is one np.einsum call with its contraction path fixed in prepare().
"""
from __future__ import annotations

import math
import string

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...model.ir import Meta
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register
from ..values import text, view_as


def _viewable(shape, dtype, perm, new_shape) -> bool:
    """Whether a C-contiguous array of `shape`, transposed by `perm`, reshapes to `new_shape` as a view."""
    itemsize = np.dtype(dtype).itemsize
    strides = [itemsize * math.prod(shape[k + 1:]) for k in range(len(shape))]
    fake = as_strided(np.zeros(1, dtype), shape, strides, writeable=False)  # never read
    return view_as(fake.transpose(perm), new_shape) is not None

@register("Einsum", since=12)
class Einsum(PlannedKernel):
    def prepare(self):
        eq = self.attr("equation")
        if eq is None:
            raise self.fail("attribute 'equation' is required")
        self.equation = text(eq)
        metas = list(self.inputs)
        if not metas or any(m is None for m in metas):
            raise self.fail("needs at least one input, and no input may be missing")
        # the inputs' one type T (float16 and bfloat16 come widened, float16.py); integers wrap in T
        dt = metas[0].dtype
        self.eq, shape = self.parse(self.equation, [tuple(m.shape) for m in metas])
        self.out_metas = [Meta(dt, shape)]
        self.scratch = Scratch()
        self.mm = self.matmul_plan([tuple(m.shape) for m in metas], shape, dt) if len(metas) == 2 else None
        if self.mm is None:
            # the contraction order, once (one operand: a plain np.einsum, nothing to order)
            dummies = [np.broadcast_to(np.zeros((), dt), m.shape) for m in metas]
            self.path = np.einsum_path(self.eq, *dummies, optimize="greedy")[0] if len(metas) > 1 else False

    def matmul_plan(self, shapes, out_shape, dt):
        """The batched-GEMM form of a two-operand equation, or None."""
        lhs, rhs = self.eq.split("->")
        terms = lhs.split(",")
        used = set(self.eq)
        free = [c for c in string.ascii_letters if c not in used]
        n_ell = max([len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes)] + [0])
        ell = free[:n_ell]

        def expand(term, rank):
            k = rank - len(term.replace("...", ""))
            return list(term.replace("...", "".join(ell[n_ell - k:]) if k else "")) if "..." in term else list(term)

        a, b = expand(terms[0], len(shapes[0])), expand(terms[1], len(shapes[1]))
        o = list(rhs.replace("...", "".join(ell))) if "..." in rhs else list(rhs)
        if len(o) != len(out_shape) or any(len(set(x)) != len(x) for x in (a, b, o)):
            return None  # diagonals, or broadcast dims summed away
        sa, sb = dict(zip(a, shapes[0])), dict(zip(b, shapes[1]))
        batch = [c for c in o if c in sa and c in sb]
        m = [c for c in o if c in sa and c not in sb]
        n = [c for c in o if c in sb and c not in sa]
        k = [c for c in a if c in sb and c not in o]
        if set(a) != set(batch + m + k) or set(b) != set(batch + k + n):
            return None  # a label summed inside one operand
        if any(sa[c] != sb[c] for c in k) or any(sa[c] != sb[c] and 1 not in (sa[c], sb[c]) for c in batch):
            return None
        perm_a = [a.index(c) for c in batch + m + k]
        perm_b = [b.index(c) for c in batch + k + n]
        mm, kk, nn = math.prod(sa[c] for c in m), math.prod(sa[c] for c in k), math.prod(sb[c] for c in n)
        shape_a = tuple(sa[c] for c in batch) + (mm, kk)
        shape_b = tuple(sb[c] for c in batch) + (kk, nn)
        bsz = tuple(max(sa[c], sb[c]) for c in batch)
        full = bsz + tuple(sa[c] for c in m) + tuple(sb[c] for c in n)
        order = batch + m + n
        perm_o = [order.index(c) for c in o]
        plan = {"perm_a": perm_a, "perm_b": perm_b, "shape_a": shape_a, "shape_b": shape_b,
                "res": bsz + (mm, nn), "full": full, "perm_o": perm_o, "direct": perm_o == sorted(perm_o)}
        for x, shp, perm, new in (("a", shapes[0], perm_a, shape_a), ("b", shapes[1], perm_b, shape_b)):
            plan["copy_" + x] = not _viewable(shp, dt, perm, new)
            if plan["copy_" + x]:
                self.scratch.add(x, tuple(shp[p] for p in perm), dt)
        if not plan["direct"]:
            self.scratch.add("y", bsz + (mm, nn), dt)
        return plan

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

    def operand(self, x, name, v):
        p = self.mm
        t = x.transpose(p["perm_" + name])
        if p["copy_" + name]:
            np.copyto(v[name], t)
            t = v[name]
        return t.reshape(p["shape_" + name])

    def run(self, xs, ys, ws):
        p = self.mm
        if p is None:
            np.einsum(self.eq, *xs, out=ys[0], optimize=self.path)
            return
        v = self.views(ws)
        a, b = self.operand(xs[0], "a", v), self.operand(xs[1], "b", v)
        if p["direct"]:
            np.matmul(a, b, out=ys[0].reshape(p["res"]))
        else:
            y = v["y"]
            np.matmul(a, b, out=y)
            np.copyto(ys[0], y.reshape(p["full"]).transpose(p["perm_o"]))
