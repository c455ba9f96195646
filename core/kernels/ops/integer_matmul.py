"""The integer matrix product shared by MatMulInteger, QLinearMatMul (quantization.py) and the
com.microsoft QGemm and MatMulIntegerToFloat (qlinear_contrib.py): on the native backend, the int8
kernel over constant weights packed once (int8_native.NativeIntProduct, the store step each
subclass's native_out); else operands centered on their zero points in float64 (exact for
int8/uint8 products of any practical K), then one BLAS product."""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from .int8_native import NativeIntProduct
from ..planned import PlannedKernel, Scratch

F64 = np.dtype(np.float64)


def input_meta(k: PlannedKernel, i: int, what: str) -> Meta | None:
    """Input i's meta; `what` "" marks an optional input (a zero point)."""
    return k.input_meta(i, what, optional=not what)


def const_input(k: PlannedKernel, i: int):
    return k.consts[i] if i < len(k.consts) else None


def quantized_operand(k, i: int, what: str, zp_index: int, zp_shape_ok, per) -> tuple:
    """Meta, zero point meta and broadcast shape for an 8-bit operand."""
    m = input_meta(k, i, what)
    if m.dtype not in (np.uint8, np.int8):
        raise k.fail(f"{what} has type {m.dtype}; uint8 or int8 expected")
    zm = input_meta(k, zp_index, "")
    if zm is not None:
        if zm.dtype != m.dtype:
            raise k.fail(f"the zero point of {what} has type {zm.dtype}, {what} has {m.dtype}")
        if math.prod(zm.shape) != 1 and not zp_shape_ok(tuple(zm.shape)):
            raise k.fail(f"the zero point of {what} has shape {tuple(zm.shape)}: a scalar or {per} expected")
    return m, zm


class IntegerMatMul(PlannedKernel):
    """(A - a_zp) @ (B - b_zp) as a float64 GEMM, numpy matmul broadcasting; subclasses requantize."""
    A, AZ, B, BZ = 0, 2, 1, 3
    qn: NativeIntProduct | None = None  # the native plan

    def prepare_matmul(self):
        am, azm = quantized_operand(self, self.A, "A", self.AZ, lambda s: len(s) == 1 and s[0] == self._m(), "one per row of A")
        bm, bzm = quantized_operand(self, self.B, "B", self.BZ, lambda s: len(s) == 1 and s[0] == self._n(), "one per column of B")
        ash, bsh = tuple(am.shape), tuple(bm.shape)
        if not ash or not bsh:
            raise self.fail(f"A {ash} and B {bsh} must have rank >= 1")
        ka, kb = ash[-1], (bsh[0] if len(bsh) == 1 else bsh[-2])
        if ka != kb:
            raise self.fail(f"A {ash} and B {bsh}: inner dims {ka} and {kb} differ")
        try:
            batch = np.broadcast_shapes(ash[:-2], bsh[:-2])
        except ValueError:
            raise self.fail(f"the batch dims of A {ash} and B {bsh} do not broadcast") from None
        out = tuple(batch) + ((ash[-2],) if len(ash) > 1 else ()) + ((bsh[-1],) if len(bsh) > 1 else ())
        self.ash, self.bsh, self.out = ash, bsh, out
        self.az_shape = (-1, 1) if azm is not None and math.prod(azm.shape) != 1 else ()
        self.bz_shape = (-1,) if bzm is not None and math.prod(bzm.shape) != 1 else ()
        self.has_az, self.has_bz = azm is not None, bzm is not None
        self.scratch = Scratch()
        self.scratch.add("a", ash, F64)
        self.scratch.add("acc", out, F64)
        b, bz = const_input(self, self.B), const_input(self, self.BZ)
        self.b64 = None  # B centered once by pack() when B (and its zero point) are constants
        self.b_is_const = b is not None and (bzm is None or bz is not None)
        if not self.b_is_const:
            self.scratch.add("b", bsh, F64)

    def plan_native(self, ok: bool = True) -> None:
        """Take the native plan when the backend has it, B is a constant matrix and A has one zero
        point (and the subclass says its store step can run natively: `ok`); it replaces the workspace."""
        nat = self.backend.lib
        if nat is None or not ok or not self.b_is_const or len(self.bsh) != 2 or len(self.ash) < 2 or self.az_shape:
            return
        self.scratch = Scratch()
        self.qn = NativeIntProduct(self, nat, math.prod(self.ash[:-1]), self.ash[-1], self.bsh[-1],
                                   self.inputs[self.A].dtype)
        self.uses_native = True

    def b_matrix(self) -> np.ndarray:
        """The constant B as the product reads it, (K, N)."""
        return const_input(self, self.B)

    def native_out(self, keep: list):
        """The native store step (int8_native.qout); subclasses with a native plan define it."""
        raise NotImplementedError

    def run_native(self, xs, ys, v, scale_a=None) -> None:
        self.qn.run(xs[self.A], xs[self.AZ] if self.has_az else None, ys[0], v, self.qout, self.qout_keep, scale_a)

    def pack(self):
        if self.qn is not None:
            self.qn.pack(self, self.b_matrix(), const_input(self, self.BZ))
            self.qout_keep = []
            self.qout = self.native_out(self.qout_keep)
            return
        if self.b_is_const:
            bsh = self.bsh
            self.b64 = self.shared_pack(("center", self.bz_shape), lambda b, bz: self.center(
                b, bz, self.bz_shape, np.empty(bsh, F64)), const_input(self, self.B), const_input(self, self.BZ))

    def _m(self):
        m = self.inputs[self.A]
        return m.shape[-2] if m is not None and len(m.shape) > 1 else -1

    def _n(self):
        m = self.inputs[self.B]
        return m.shape[-1] if m is not None and len(m.shape) > 1 else -1

    @staticmethod
    def center(x, z, zshape, out) -> np.ndarray:
        if z is None:
            np.copyto(out, x, casting="unsafe")
        else:
            np.subtract(x, np.asarray(z).reshape(zshape), out=out, dtype=F64)
        return out

    def accumulate(self, xs, v) -> np.ndarray:
        a = self.center(xs[self.A], xs[self.AZ] if self.has_az else None, self.az_shape, v["a"])
        b = self.b64 if self.b64 is not None else \
            self.center(xs[self.B], xs[self.BZ] if self.has_bz else None, self.bz_shape, v["b"])
        acc = v["acc"]
        np.matmul(a, b, out=acc)
        return acc
