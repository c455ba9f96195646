"""Rows @ constant weights through ge's native GEMM: Y = act(A @ W + bias + Z), float32.

MatMul, FusedMatMul and Gemm use it when B is a constant matrix (a layer's weights): W is packed
once at build, A's rows are read in place (any row stride, through FusedMatMul's perm_a when the
last axis stays last), and the bias (a constant addend over the columns), one residual addend of
the product's shape and a fused Relu/Clip or FusedMatMul's Gelu are applied by the GEMM as it
stores, instead of one pass over Y each.
"""
from __future__ import annotations

import math

import numpy as np

from ..ir import Meta
from .epilogue import ATTR as EPILOGUE, clamp_of
from .native import CallCache, native

#: fewer rows than this stay with numpy (a classifier's final Gemm at batch 1 is one row)
MIN_ROWS = 8


class NativeProduct:
    def __init__(self, kernel, nat, w: np.ndarray, rows: int, bias: np.ndarray | None, z_index: int | None, clamp,
                 gelu: bool = False):
        self.nat, self.clamp, self.gelu, self.z_index = nat, clamp, gelu, z_index
        self.perm = getattr(kernel, "perm_a", None)  # FusedMatMul's A comes through a transpose
        self.k, self.n = w.shape
        self.rows = rows
        self.bp = kernel.shared_pack(("native",), nat.pack_b, w)
        self.bias = None if bias is None else np.ascontiguousarray(bias, np.float32).reshape(self.n)
        self.ws_nbytes = nat.workspace_nbytes(rows, self.n, self.k, raw_a=True, gathered_b=False)
        self.calls = CallCache()

    def run(self, x: np.ndarray, y: np.ndarray, xs, ws: np.ndarray) -> None:
        """x: input A as the kernel receives it (its rows after perm_a have unit stride in K); y:
        contiguous (..., N). The prepared call is cached on the arrays themselves; when A or Z is
        not a view (a copy, new each run) the call is made anew each run."""
        z = None if self.z_index is None else xs[self.z_index]
        call = self.calls.get((x, y, z, ws), lambda: self._call(x, y, z, ws, copies=False))
        (call or self._call(x, y, z, ws, copies=True)).run()

    def _call(self, x, y, z, ws, copies: bool):
        a = x if self.perm is None else x.transpose(self.perm)
        a2 = a.reshape(self.rows, self.k)
        z2 = None if z is None else np.ascontiguousarray(z)
        if not copies and not (np.shares_memory(a2, x) and (z is None or z2 is z)):
            return None
        return self.nat.call(self.rows, self.n, self.k, y, self.n, a=a2, lda=a2.strides[0] // 4, bp=self.bp,
                             bias_n=self.bias, z=z2, ldz=self.n, clamp=self.clamp, gelu=self.gelu, ws=ws)


def native_product(kernel, a: Meta, w, addends, out_shape: tuple, gelu: bool = False) -> NativeProduct | None:
    """The native plan for rows(A) @ w when it applies: float32, w a constant 2-D matrix, each addend
    (index, meta, constant or None) either a constant bias over the columns or one tensor of the
    product's shape (a residual); else None (the kernel keeps its numpy plan). gelu: Gelu (erf
    form) is the activation, applied after the addends."""
    nat = native()
    if nat is None or w is None or w.ndim != 2 or a.dtype != np.float32 or w.dtype != np.float32 \
            or len(a.shape) < 2 or not out_shape:
        return None
    rows, n = math.prod(a.shape[:-1]), w.shape[1]
    if rows < MIN_ROWS:  # a matrix-vector product: BLAS's gemv streams W once, no blocks of rows to fill
        return None
    bias = z_index = None
    for i, m, const in addends:
        if const is not None and const.size == n and tuple(const.shape)[-1:] == (n,) and bias is None:
            bias = const
        elif const is None and tuple(m.shape) == tuple(out_shape) and z_index is None:
            z_index = i
        else:
            return None
    clamp = clamp_of(kernel.attrs.get(EPILOGUE))
    plan = NativeProduct(kernel, nat, w, rows, bias, z_index, clamp, gelu)
    kernel.absorbs_epilogue = clamp is not None
    kernel.uses_native = True
    return plan
