"""MatMul (numpy semantics: broadcast batch dims, 1-D operands) and Gemm, as BLAS calls into the output."""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..fused import GE_DOMAIN
from .matmul_native import native_batch, native_product
from ..native import run_for_threads
from ..registry import lookup, register


class _Planned(Kernel):
    """compute() runs the planned path into fresh arrays; infer() returns what prepare() derived.
    `native`: the native GEMM plan (matmul_native.py): NativeProduct when B is constant weights,
    NativeBatch when both operands are computed, else None."""

    out_metas: list[Meta]
    ws_nbytes = 0
    native = None

    def use_native(self, a: Meta, w, addends=(), gelu: bool = False) -> None:
        self.native = native_product(self, a, w, addends, tuple(self.out_metas[0].shape), gelu)
        if self.native is not None:
            self.ws_nbytes = self.native.ws_nbytes

    def use_native_batch(self, **how) -> None:
        """The native plan for A @ B with both computed (how: native_batch's arguments)."""
        self.native = native_batch(self, self.inputs[0], self.inputs[1], **how)
        if self.native is not None:
            self.ws_nbytes = self.native.ws_nbytes

    def pack(self):
        if hasattr(self.native, "pack"):  # NativeProduct: constant weights (NativeBatch has none)
            self.native.pack(self)

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        reads = getattr(self.native, "float16_inputs", None)
        return reads(y_half) if reads is not None else frozenset()

    def float16_outputs(self) -> bool:
        writes = getattr(self.native, "float16_outputs", None)
        return writes is not None and writes()

    def planned(self, xs, ws) -> bool:
        """Whether the native plan is for these operands: there is one, they have the shapes it was made
        for and its workspace is given (a shape-agnostic instance is handed other shapes, and none)."""
        return self.native is not None and (ws is not None or not self.ws_nbytes) and \
            xs[0].shape == self.inputs[0].shape and (len(xs) < 2 or xs[1] is None or xs[1].shape == self.inputs[1].shape)

    def agnostic_product(self, sa: tuple, sb: tuple) -> tuple:
        """The product's shape for operands of other shapes (sa, sb: as multiplied, through the perms)
        when this instance can serve them: both computed, and single-row products (a decoding step's
        attention over a growing past), which numpy's matmul runs as fast as the native batch's call
        (a gemv per product) with nothing planned; else ValueError (the executor builds a kernel)."""
        if any(c is not None for c in self.consts[:2]) or len(sa) < 2 or len(sb) < 2:
            raise ValueError("not a product of two computed matrices")
        product = matmul_shape(self, sa, sb)
        if product[-2] != 1:
            raise ValueError("products of several rows are planned per shape")
        return product

    def run_native(self, a, y, xs, ws) -> bool:
        """Run the native plan when it is for these operands and Y is contiguous; False: use the numpy
        plan."""
        if not y.flags.c_contiguous or not self.planned(xs, ws):
            return False
        self.native.run(a, y, xs, ws)
        return True

    def bound(self, xs, ys, ws):
        """The native plan's prepared call itself where run() would make or find the same call every
        time (the views of a bound task stay): no per-call checks and CallCache lookup."""
        build = None
        if ys[0].flags.c_contiguous and self.planned(xs, ws):
            build = self.native.builder(xs[0], ys[0], xs, ws)
        return super().bound(xs, ys, ws) if build is None else run_for_threads(build)

    def infer(self):
        return list(self.out_metas)

    def workspace_nbytes(self):
        return self.ws_nbytes

    def compute(self, *xs):
        other = self.built_for(xs)
        if other is not self:
            return other.compute(*xs)
        self.load()
        ys = [np.empty(m.shape, m.dtype) for m in self.out_metas]
        ws = np.empty(self.ws_nbytes, np.uint8) if self.ws_nbytes else None
        self.run([None if x is None else np.asarray(x) for x in xs], ys, ws)
        return ys

    def meta(self, i, what):
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None:
            raise self.fail(f"input {i} ({what}) is missing")
        return m


def matmul_shape(k: Kernel, sa: tuple, sb: tuple) -> tuple:
    """numpy's matmul output shape (1-D operands promoted and the unit dim dropped), or a GraphError."""
    if not sa or not sb:
        raise k.fail(f"MatMul needs operands of rank >= 1, got shapes {sa} and {sb}")
    a2 = sa if len(sa) > 1 else (1,) + sa
    b2 = sb if len(sb) > 1 else sb + (1,)
    if a2[-1] != b2[-2]:
        raise k.fail(f"shapes {sa} and {sb} do not match: {a2[-1]} != {b2[-2]}")
    try:
        batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    except ValueError:
        raise k.fail(f"batch dimensions of {sa} and {sb} do not broadcast") from None
    out = tuple(batch) + (a2[-2], b2[-1])
    if len(sa) == 1:
        out = out[:-2] + out[-1:]
    if len(sb) == 1:
        out = out[:-1]
    return out


@register("MatMul", since=1)
class MatMul(_Planned):
    shape_agnostic = agnostic_without_workspace = True  # (single-row products of other shapes: agnostic_product)

    def agnostic_output_shape(self, shapes):
        return self.agnostic_product(*shapes[:2])

    def prepare(self):
        a, b = self.meta(0, "A"), self.meta(1, "B")  # of one type T
        sa, sb = tuple(a.shape), tuple(b.shape)
        self.out_metas = [Meta(a.dtype, matmul_shape(self, sa, sb))]
        # a stack of rows times one matrix: one GEMM over all rows
        self.flatten = len(sa) > 2 and len(sb) == 2
        self.b_const = self.consts[1] if len(self.consts) > 1 else None
        if self.b_const is not None:
            self.use_native(a, self.b_const)
        elif self.consts[0] is None:
            self.use_native_batch()

    def run(self, xs, ys, ws):
        a = xs[0]
        b = self.b_const if self.b_const is not None else xs[1]
        y = ys[0]
        if self.run_native(a, y, xs, ws):
            return
        if self.flatten and y.flags.c_contiguous:  # (reshape copies A when its rows are not one stride)
            np.matmul(a.reshape(-1, a.shape[-1]), b, out=y.reshape(-1, y.shape[-1]))
        else:
            np.matmul(a, b, out=y)


@register("FusedMatMul", since=1, domain=GE_DOMAIN)
class FusedMatMul(_Planned):
    """Y = transpose(alpha * (A' @ B') + C1 + C2 ..., perm_y), A' = transpose(A, perm_a), B'
    likewise (passes.fuse_matmul). The transposes are strided views BLAS reads or writes directly;
    alpha and the addends (inputs 2..., any tensors broadcasting to the product: a bias, a mask, a
    residual) are applied in place while the product is hot in cache. A and B have rank >= 2;
    perms keep the unit-stride axis among the last two, so that numpy hands every matrix to BLAS
    without a copy."""
    shape_agnostic = agnostic_without_workspace = True  # (single-row products of other shapes: agnostic_product)

    def agnostic_output_shape(self, shapes):
        if self.gelu is not None:
            raise ValueError("a product with its Gelu is planned per shape")
        product = self.agnostic_product(_permuted(shapes[0], self.perm_a), _permuted(shapes[1], self.perm_b))
        if any(np.broadcast_shapes(tuple(s), product) != product for s in shapes[2:]):
            raise ValueError("an addend does not broadcast to the product")
        return _permuted(product, self.perm_y)

    def prepare(self):
        a, b = self.meta(0, "A"), self.meta(1, "B")
        if a.dtype != b.dtype:
            raise self.fail(f"A is {a.dtype}, B is {b.dtype}: the types must match")
        self.perm_a, self.perm_b = self._perm("perm_a", a), self._perm("perm_b", b)
        sa, sb = _permuted(a.shape, self.perm_a), _permuted(b.shape, self.perm_b)
        if len(sa) < 2 or len(sb) < 2:
            raise self.fail(f"A and B must have rank >= 2, got shapes {sa} and {sb}")
        product = matmul_shape(self, sa, sb)
        self.perm_y = self._perm("perm_y", Meta(a.dtype, product), inverse=True)
        self.inv_y = None if self.perm_y is None else tuple(int(i) for i in np.argsort(self.perm_y))
        self.out_metas = [Meta(a.dtype, _permuted(product, self.perm_y))]
        self.alpha = float(self.attr("alpha", 1.0))
        self.alpha_t = a.dtype.type(self.alpha)
        for i, cm in enumerate(self.inputs[2:], start=2):
            if cm is None:
                raise self.fail(f"input {i} (an addend) is missing")
            if cm.dtype != a.dtype:
                raise self.fail(f"addend {i} is {cm.dtype}, A is {a.dtype}: the types must match")
            try:
                if np.broadcast_shapes(tuple(cm.shape), product) != product:
                    raise ValueError
            except ValueError:
                raise self.fail(f"addend {i} of shape {tuple(cm.shape)} does not broadcast to {product}") from None
        self.b_const = self.consts[1] if len(self.consts) > 1 else None
        if self.b_const is not None and self.perm_b is not None:
            self.b_const = self.b_const.transpose(self.perm_b)
        self.addends = [(i, c) for i, c in enumerate(self.consts[2:len(self.inputs)], start=2)]
        # A's rows keep unit stride through perm_a when its last axis stays last (PyTorch's seq-first
        # attention transposes x before the packed QKV projection): then a stack of rows times one
        # matrix is one GEMM over all rows (numpy would otherwise run one small product per leading
        # index), and the native plan reads them in place
        rows_of_a = self.perm_a is None or self.perm_a[-1] == len(sa) - 1
        self.flatten = rows_of_a and self.inv_y is None and len(sa) > 2 and len(sb) == 2
        self.gelu = self._activation(product)
        if self.b_const is not None and rows_of_a and self.inv_y is None and self.alpha == 1.0:
            self.use_native(Meta(a.dtype, sa), self.b_const, [(i, self.inputs[i], c) for i, c in self.addends],
                            self.gelu is not None)
        elif self.b_const is None and self.consts[0] is None:
            self.use_native_batch(perm_a=self.perm_a, perm_b=self.perm_b, inv_y=self.inv_y, alpha=self.alpha,
                                  addends=[(i, self.inputs[i], c) for i, c in self.addends], gelu=self.gelu is not None)
        if self.gelu is not None:  # the numpy plan (also the fallback): the product in the workspace, Gelu into Y
            self.ws_nbytes = max(self.ws_nbytes, self.out_metas[0].nbytes + self.gelu.workspace_nbytes())

    def _activation(self, product):
        """The Gelu kernel for attribute activation="Gelu" (passes.fuse_matmul), else None."""
        act = self.attr("activation")
        if act is None:
            return None
        act = act.decode() if isinstance(act, bytes) else act
        if act != "Gelu" or self.inv_y is not None:
            raise self.fail(f"activation={act!r}: only 'Gelu', on a product written as it is (no perm_y)")
        m = Meta(self.out_metas[0].dtype, product)
        return lookup("Gelu", GE_DOMAIN, 1, self.name)({}, [m], outputs=[m], name=f"{self.name}:Gelu", backend=self.backend)

    def _perm(self, key, m, inverse=False):
        """The attribute as a tuple; the matrix view it makes (through its inverse for perm_y, which
        views Y as the product) must keep the tensor's unit-stride last axis among its last two."""
        perm = self.attr(key)
        if perm is None:
            return None
        perm = tuple(int(p) for p in perm)
        r = len(m.shape)
        view = tuple(int(i) for i in np.argsort(perm)) if inverse and sorted(perm) == list(range(r)) else perm
        if sorted(perm) != list(range(r)) or r < 2 or (r - 1) not in view[-2:]:
            raise self.fail(f"{key}={list(perm)} is not a permutation of rank {r} whose matrix view keeps "
                            f"the last axis among the last two")
        return perm

    def run(self, xs, ys, ws):
        if self.run_native(xs[0], ys[0], xs, ws):
            return
        a = xs[0] if self.perm_a is None else xs[0].transpose(self.perm_a)
        if self.b_const is not None:
            b = self.b_const
        else:
            b = xs[1] if self.perm_b is None else xs[1].transpose(self.perm_b)
        y = ys[0] if self.inv_y is None else ys[0].transpose(self.inv_y)
        if self.gelu is not None:  # the product goes to the workspace, Gelu writes Y
            out, y = y, ws[:y.nbytes].view(y.dtype).reshape(y.shape)
        if self.flatten and y.flags.c_contiguous:  # (reshape copies A when its rows are not one stride)
            np.matmul(a.reshape(-1, a.shape[-1]), b, out=y.reshape(-1, y.shape[-1]))
        else:
            np.matmul(a, b, out=y)
        if self.alpha != 1.0:
            np.multiply(y, self.alpha_t, out=y)
        for i, c in self.addends:
            np.add(y, c if c is not None else xs[i], out=y)
        if self.gelu is not None:
            self.gelu.run([y], [out], ws[y.nbytes:])


def _permuted(shape, perm) -> tuple:
    shape = tuple(shape)
    return shape if perm is None else tuple(shape[p] for p in perm)


@register("Gemm", since=1)
class Gemm(_Planned):
    def prepare(self):
        a, b = self.meta(0, "A"), self.meta(1, "B")
        if len(a.shape) != 2 or len(b.shape) != 2:
            raise self.fail(f"A and B must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
        self.ta, self.tb = int(self.attr("transA", 0)), int(self.attr("transB", 0))
        m, ka = a.shape[::-1] if self.ta else a.shape
        kb, n = b.shape[::-1] if self.tb else b.shape
        if ka != kb:
            raise self.fail(f"A{'^T' if self.ta else ''} {(m, ka)} and B{'^T' if self.tb else ''} {(kb, n)} do not match")
        self.alpha = float(self.attr("alpha", 1.0))
        self.beta = float(self.attr("beta", 1.0))
        self.out_metas = [Meta(a.dtype, (m, n))]
        cm = self.inputs[2] if len(self.inputs) > 2 else None
        if cm is None and self.opset < 11:
            raise self.fail("input C is required before opset 11")
        self.has_c = cm is not None and self.beta != 0.0
        if cm is not None:
            try:
                if np.broadcast_shapes(tuple(cm.shape), (m, n)) != (m, n):
                    raise ValueError
            except ValueError:
                raise self.fail(f"C of shape {tuple(cm.shape)} does not broadcast to {(m, n)}") from None
        b_const = self.consts[1] if len(self.consts) > 1 else None
        self.b_view = None if b_const is None else (b_const.T if self.tb else b_const)
        c_const = self.consts[2] if len(self.consts) > 2 else None
        self.c_scaled = None  # beta * C when C is constant: pack()
        if self.has_c and c_const is None and self.beta != 1.0:
            self.ws_nbytes = int(np.prod(cm.shape, dtype=np.int64)) * a.dtype.itemsize
            self.c_shape = tuple(cm.shape)
        self.alpha_t = a.dtype.type(self.alpha)
        self.beta_t = a.dtype.type(self.beta)
        if not self.ta and self.alpha == 1.0 and (not self.has_c or self.beta == 1.0):
            self.use_native(a, self.b_view, [(2, cm, c_const)] if self.has_c else [])

    def pack(self):
        super().pack()
        c_const = self.consts[2] if len(self.consts) > 2 else None
        if self.has_c and c_const is not None:
            c, dt = np.asarray(c_const), self.out_metas[0].dtype
            beta = dt.type(self.beta)
            self.c_scaled = c if self.beta == 1.0 else \
                self.shared_pack(("beta*C", self.beta, dt.str), lambda c: (c * beta).astype(dt), c)

    def run(self, xs, ys, ws):
        if self.run_native(xs[0], ys[0], xs, ws):
            return
        a = xs[0].T if self.ta else xs[0]
        b = self.b_view if self.b_view is not None else (xs[1].T if self.tb else xs[1])
        y = ys[0]
        np.matmul(a, b, out=y)
        if self.alpha != 1.0:
            np.multiply(y, self.alpha_t, out=y)
        if self.has_c:
            c = self.c_scaled
            if c is None:
                c = xs[2]
                if self.beta != 1.0:
                    tmp = ws[:self.ws_nbytes].view(y.dtype).reshape(self.c_shape)
                    np.multiply(c, self.beta_t, out=tmp)
                    c = tmp
            np.add(y, c, out=y)
