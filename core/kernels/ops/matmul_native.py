"""Products through ge's native GEMM, float32.

- NativeProduct, rows @ constant weights: Y = act(A @ W + bias + Z). MatMul, FusedMatMul and Gemm
  use it when B is a constant matrix (a layer's weights): W is packed once at build, A's rows are
  read in place (any row stride, through FusedMatMul's perm_a when the last axis stays last), and
  the bias (a constant addend over the columns), one residual addend of the product's shape and a
  fused activation (epilogue.native_act) or FusedMatMul's Gelu are applied by the GEMM as it
  stores, instead of one pass over Y each.
- NativeBatch, a batch of products of two tensors: Y[i] = act(alpha A[i] @ B[i] + bias[i] + Z[i])
  (attention's Q K^T, with its scale and mask, and P V). Every operand is read or written in place
  through its strides (FusedMatMul's perm_a, perm_b and perm_y are strides too), the products are
  spread over the threads one per item (a head's product is too small to share).
Both read float16 activations and write a float16 Y themselves (float16.Float16ViaFloat32 hands them
float16 arrays: csrc/gemm.c converts as it packs and rounds as it stores).
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..epilogue import ATTR as EPILOGUE, native_act
from ..native import GELU, Act, CallCache

#: fewer rows than this take the GEMV (a classifier's final Gemm at batch 1 is one row)
MIN_ROWS = 8


class NativeProduct:
    def __init__(self, kernel, nat, w: np.ndarray, rows: int, bias: np.ndarray | None, z_index: int | None,
                 act: Act | None):
        self.nat, self.act, self.z_index = nat, act, z_index
        self.perm = getattr(kernel, "perm_a", None)  # FusedMatMul's A comes through a transpose
        self.k, self.n = w.shape
        self.rows = rows
        self.w, self.bias_const = w, bias
        self.ws_nbytes = nat.workspace_nbytes(rows, self.n, self.k, raw_a=True, gathered_b=False)
        self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """A, and the residual with a float16 Y (the GEMM's Z has C's type)."""
        return frozenset([0] + ([self.z_index] if y_half and self.z_index is not None else []))

    def float16_outputs(self) -> bool:
        return True

    def pack(self, kernel) -> None:
        """W in the GEMM's B panels; the bias as float32."""
        self.bp = kernel.shared_pack(("native",), self.nat.pack_b, self.w)
        self.bias = None if self.bias_const is None else np.ascontiguousarray(self.bias_const, np.float32).reshape(self.n)

    def run(self, x: np.ndarray, y: np.ndarray, xs, ws: np.ndarray) -> None:
        """x: input A as the kernel receives it (its rows after perm_a have unit stride in K); y:
        contiguous (..., N). The prepared call is cached on the arrays themselves; when A or Z is
        not a view (a copy, new each run) the call is made anew each run."""
        z = None if self.z_index is None else xs[self.z_index]
        call = self.calls.get((x, y, z, ws), lambda: self._call(x, y, z, ws, copies=False))
        (call or self._call(x, y, z, ws, copies=True)).run()

    def builder(self, x, y, xs, ws):
        """What run() prepares once for these arrays, as a function; None where it copies each run."""
        z = None if self.z_index is None else xs[self.z_index]
        if self._call(x, y, z, ws, copies=False) is None:
            return None
        return lambda: self._call(x, y, z, ws, copies=False)

    def _call(self, x, y, z, ws, copies: bool):
        a = x if self.perm is None else x.transpose(self.perm)
        a2 = a.reshape(self.rows, self.k)
        z2 = None if z is None else np.ascontiguousarray(z)
        if not copies and not (np.shares_memory(a2, x) and (z is None or z2 is z)):
            return None
        return self.nat.call(self.rows, self.n, self.k, y, self.n, a=a2, lda=a2.strides[0] // a2.itemsize, bp=self.bp,
                             bias_n=self.bias, z=z2, ldz=self.n, act=self.act, ws=ws)


class NativeGemv:
    """NativeProduct's plan for fewer than MIN_ROWS rows: csrc/gemv.c's packed GEMV streams W once,
    packed at load in column panels (each x[k] broadcast once over a panel's outputs), where the GEMM
    would pack A and compute whole tiles of rows for one; a residual addend is added as the outputs
    are stored (a decoding step's attention output and MLP down projections)."""
    ws_nbytes = 0

    def __init__(self, kernel, nat, w: np.ndarray, rows: int, bias: np.ndarray | None, z_index: int | None,
                 act: Act | None):
        self.nat, self.act, self.rows, self.z_index = nat, act, rows, z_index
        self.k, self.n = w.shape
        self.w, self.bias_const = w, bias
        self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """Its rows (converted once per call), and the residual with a float16 Y (Z has Y's type)."""
        return frozenset([0] + ([self.z_index] if y_half and self.z_index is not None else []))

    def float16_outputs(self) -> bool:
        return True

    def pack(self, kernel) -> None:
        self.wp = kernel.shared_pack(("gemv_panels",), self.nat.gemv_pack, self.w)
        self.bias = None if self.bias_const is None else np.ascontiguousarray(self.bias_const, np.float32).reshape(self.n)

    def run(self, x: np.ndarray, y: np.ndarray, xs, ws) -> None:
        z = None if self.z_index is None else xs[self.z_index]
        call = self.calls.get((x, y, z), lambda: self._call(x, y, z, copies=False))
        (call or self._call(x, y, z, copies=True)).run()

    def builder(self, x, y, xs, ws):
        """What run() prepares once for these arrays, as a function; None where it copies each run."""
        z = None if self.z_index is None else xs[self.z_index]
        if self._call(x, y, z, copies=False) is None:
            return None
        return lambda: self._call(x, y, z, copies=False)

    def _call(self, x, y, z, copies: bool):
        """The prepared call; None without copies where x's rows or z would need one (a new call each run)."""
        a = x.reshape(self.rows, self.k)  # a copy when x's rows are not one stride apart
        if a.strides[1] != a.itemsize:
            a = np.ascontiguousarray(a)
        z2 = None if z is None else np.ascontiguousarray(z)
        if not copies and not (np.shares_memory(a, x) and (z is None or z2 is z)):
            return None
        return self.nat.gemv_panels_call(self.rows, a, a.strides[0] // a.itemsize, self.wp, self.k, self.n, y,
                                         self.n, bias=self.bias, z=z2, ldz=self.n, act=self.act)


def native_product(kernel, a: Meta, w, addends, out_shape: tuple, gelu: bool = False) -> NativeProduct | None:
    """The native plan for rows(A) @ w when it applies: float32, w a constant 2-D matrix, each addend
    (index, meta, constant or None) either a constant bias over the columns or one tensor of the
    product's shape (a residual); else None (the kernel keeps its numpy plan). gelu: Gelu (erf
    form) is the activation, applied after the addends."""
    nat = kernel.backend.lib
    if nat is None or w is None or w.ndim != 2 or a.dtype != np.float32 or w.dtype != np.float32 \
            or len(a.shape) < 2 or not out_shape:
        return None
    rows, n = math.prod(a.shape[:-1]), w.shape[1]
    bias = z_index = None
    for i, m, const in addends:
        if const is not None and const.size == n and tuple(const.shape)[-1:] == (n,) and bias is None:
            bias = const
        elif const is None and tuple(m.shape) == tuple(out_shape) and z_index is None:
            z_index = i
        else:
            return None
    if rows < MIN_ROWS and getattr(kernel, "perm_a", None) is not None:
        return None  # (numpy's gemv then)
    act, kernel.absorbs_epilogue = _activation(kernel, gelu)
    plan = (NativeGemv if rows < MIN_ROWS else NativeProduct)(kernel, nat, w, rows, bias, z_index, act)
    kernel.uses_native = True
    return plan


def _activation(kernel, gelu: bool) -> tuple[Act | None, bool]:
    """The GEMM's activation and whether it absorbs the node's epilogue: FusedMatMul's Gelu (the
    epilogue, if any, then runs after it), else the epilogue when native_act maps it."""
    if gelu:
        return GELU, False
    act = native_act(kernel.attrs.get(EPILOGUE))
    return act, act is not None


#: a batch of products this small per product stays with numpy (its calls would cost more than the
#: work), unless each is one row: csrc/gemm.c then reads B in place, nothing packed (a decoding step's
#: attention)
BATCH_MIN_MACS = 1 << 15


def _strides(shape) -> list:
    """C-contiguous strides of a shape, in elements."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def _view(shape, perm=None):
    """(shape, strides) of a contiguous tensor seen through a transpose."""
    st = _strides(shape)
    if perm is None:
        return list(shape), st
    return [shape[p] for p in perm], [st[p] for p in perm]


def _batch_offsets(shape, strides, batch_shape) -> np.ndarray:
    """Per index of batch_shape (C order), where an operand's matrix starts: its batch dims aligned
    right, a dim of size 1 (or a missing one) broadcast (stride 0)."""
    lead = len(shape) - 2
    st = [0] * (len(batch_shape) - lead) + [0 if shape[i] == 1 else strides[i] for i in range(lead)]
    offsets = np.zeros(1, np.int64)
    for d, s in zip(batch_shape, st):  # (an outer sum per dim: a meshgrid's cost, ~5 us a dim, at every build)
        offsets = (offsets[:, None] + np.arange(d, dtype=np.int64) * s).ravel()
    return offsets


class NativeBatch:
    """The batch of products of a MatMul or FusedMatMul whose operands are both computed: offsets of
    each product's operands (from the metas' contiguous strides through the perms), B gathered
    through (koff, noff), an addend (computed, or a constant: a decoding step's mask at a fixed
    length) as the GEMM's bias over columns or its Z."""

    def __init__(self, nat, a: Meta, b: Meta, perm_a, perm_b, inv_y, product: tuple, out_shape: tuple,
                 addends, alpha: float, act: Act | None):
        self.nat, self.act, self.alpha = nat, act, alpha
        (sa, ta), (sb, tb) = _view(tuple(a.shape), perm_a), _view(tuple(b.shape), perm_b)
        _, ty = _view(out_shape, inv_y)
        self.m, self.k, self.n = product[-2], sa[-1], product[-1]
        batch = product[:-2]
        self.lda, self.ldc = ta[-2], ty[-2]
        self.koff = np.arange(self.k, dtype=np.int64) * tb[-2]
        self.noff = np.arange(self.n, dtype=np.int64) * tb[-1]
        self.offsets = {"a": _batch_offsets(sa, ta, batch), "b": _batch_offsets(sb, tb, batch),
                        "c": _batch_offsets(product, ty, batch)}
        self.bias_index = self.z_index = None
        self.consts = {}  # constant addends by input index, read from here, not from the inputs
        for i, kind, shape, st, const in addends:
            self.offsets[kind] = _batch_offsets(shape, st, batch)
            if const is not None:
                self.consts[i] = np.ascontiguousarray(const, np.float32)
            if kind == "bias":
                self.bias_index = i
            else:
                self.z_index, self.ldz = i, st[-2]
        self.ws_nbytes = nat.batch_workspace_nbytes(self.m, self.n, self.k)
        self.calls = CallCache()

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """A, B, a computed bias over columns, and a computed Z with a float16 Y (the GEMM's Z has C's
        type)."""
        return frozenset([0, 1] + [i for i in (self.bias_index,) if i is not None and i not in self.consts] +
                         ([self.z_index] if y_half and self.z_index is not None and self.z_index not in self.consts
                          else []))

    def float16_outputs(self) -> bool:
        return True

    def _operands(self, a, xs) -> list:
        """A, B and the addends (bias, then Z, where present) as the call reads them."""
        return [a, xs[1]] + [self.consts.get(i, xs[i]) for i in (self.bias_index, self.z_index) if i is not None]

    def run(self, a: np.ndarray, y: np.ndarray, xs, ws: np.ndarray) -> None:
        """a, xs[1], the addends and y as the kernel receives them; each is read in place when
        C-contiguous (planned tensors are), else through a copy (then so is its call)."""
        arrays = self._operands(a, xs)
        if all(x.flags.c_contiguous for x in arrays):
            call = self.calls.get(tuple(arrays) + (y, ws), lambda: self._call(arrays, y, ws))
        else:
            call = self._call([np.ascontiguousarray(x) for x in arrays], y, ws)
        call.run()

    def builder(self, a, y, xs, ws):
        """What run() prepares once for these arrays, as a function; None where it copies each run."""
        arrays = self._operands(a, xs)
        if not all(x.flags.c_contiguous for x in arrays):
            return None
        return lambda: self._call(arrays, y, ws)

    def _call(self, arrays, y, ws):
        a, b, *rest = arrays
        bias = rest.pop(0) if self.bias_index is not None else None
        z = rest.pop(0) if self.z_index is not None else None
        return self.nat.batch_call(self.m, self.n, self.k, self.offsets, ws=ws, a=a, lda=self.lda, b=b,
                                   koff=self.koff, noff=self.noff, c=y, ldc=self.ldc, bias_n=bias, z=z,
                                   ldz=self.ldz if z is not None else 0, alpha=self.alpha, act=self.act)


def native_batch(kernel, a: Meta, b: Meta, perm_a=None, perm_b=None, inv_y=None, addends=(), alpha: float = 1.0,
                 gelu: bool = False) -> NativeBatch | None:
    """The native plan for a product of two tensors (A and B both computed), when it applies: float32,
    A's rows and Y's rows of unit stride (through the perms), each addend (index, meta) broadcasting
    to the product as a bias over its columns or as a tensor with unit-stride rows, and products big
    enough; else None (the kernel keeps its numpy plan). addends: (index, meta, constant value or
    None)."""
    nat = kernel.backend.lib
    if nat is None or a.dtype != np.float32 or b.dtype != np.float32 or len(a.shape) < 2 or len(b.shape) < 2:
        return None
    sa, ta = _view(tuple(a.shape), perm_a)
    product = tuple(kernel.out_metas[0].shape) if inv_y is None else \
        tuple(kernel.out_metas[0].shape[i] for i in inv_y)
    _, ty = _view(tuple(kernel.out_metas[0].shape), inv_y)
    m, k, n = product[-2], sa[-1], product[-1]
    if ta[-1] != 1 or ty[-1] != 1 or (m * n * k < BATCH_MIN_MACS and m > 1) or 0 in product:
        return None
    kinds = []
    for i, meta, const in addends:
        if const is not None and const.dtype != np.float32:
            return None
        shape = (1,) * (len(product) - len(meta.shape)) + tuple(meta.shape)
        st = [0 if d == 1 else s for d, s in zip(shape, _strides(shape))]
        if shape[-1] != n or st[-1] != 1:
            return None
        kind = "bias" if shape[-2] == 1 else "z"
        if kind in (kd for _, kd, _, _, _ in kinds):
            return None
        kinds.append((i, kind, shape, st, const))
    act, kernel.absorbs_epilogue = _activation(kernel, gelu)
    plan = NativeBatch(nat, a, b, perm_a, perm_b, inv_y, product, tuple(kernel.out_metas[0].shape), kinds, alpha, act)
    kernel.uses_native = True
    return plan
