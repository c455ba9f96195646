"""ge::FusedElementwise: a connected group of elementwise ops run as one task (passes/fuse_elementwise.py).

Attribute "steps": [[op_type, domain, attrs, refs], ...] in evaluation order. refs are the step's
inputs: i >= 0 is the node's input i, -(j + 1) the result of step j. Every step's result is read by
exactly one later step, the last step's is the node's output, and every step computes the output's
dtype and shape (operands may broadcast to it). Clip carries its bounds as attrs "min"/"max" (as an
epilogue does). The ops are those in CHAIN_OPS: their kernels are correct in place and need no
workspace, so the chain needs no memory but the output and, where branches meet, a few output-sized
slots of workspace.

Two plans, with results identical to the unfused tasks:
- native (csrc/eltwise.c): float32/64, int32/64 and float16 chains of the ops it lowers (Erf: its own
  vectorized erf, float32 and float16 only, the one the native Erf kernel runs), operands
  that are contiguous, scalars or broadcast along one run of dims (or so past a few leading dims, a
  call per index of those, each of PER_CALL elements or more: a blocked tensor's gate (N, C/16, 1, 1,
  16)); the output is walked in blocks that stay in L1, each step one IEEE operation per element as
  numpy's ufunc does it (a 1000-op chain on 16 floats: one call of a few microseconds); float16 blocks
  are converted as they are read and stored, the steps computed in float32 and each step's result
  rounded to float16, as its kernel rounds it;
- numpy: each step's own kernel (the one the unfused task would run), in place in the output or its slot.
"""
from __future__ import annotations

import math

import numpy as np

from ...model.ir import Meta
from ..base import Kernel
from ..epilogue import clip_bound
from ..fused import GE_DOMAIN
from ..float16 import ARITHMETIC_VIA_FLOAT32
from ..native import (EW_ABS, EW_ADD, EW_ADDC, EW_DIV, EW_ERF, EW_F16, EW_F32, EW_F64, EW_I32, EW_I64, EW_MAX, EW_MAXC,
                      EW_MIN, EW_MINC, EW_MUL, EW_MULC, EW_NEG, EW_RECIP, EW_ROUND, EW_SQRT, EW_SUB, CallCache,
                      CallSequence, broadcast_pattern)
from ..registry import lookup, register

#: (domain, op) -> its number of data inputs: the ops a chain may hold, those whose kernels are correct
#: with the output being an input (the numpy plan runs in place; not Gelu, whose formula reads x late;
#: a step's workspace, a float16 formula's converted blocks, follows the slots)
CHAIN_OPS = {
    ("", "Add"): 2, ("", "Sub"): 2, ("", "Mul"): 2, ("", "Div"): 2, ("", "Max"): 2, ("", "Min"): 2,
    ("", "Relu"): 1, ("", "LeakyRelu"): 1, ("", "Clip"): 1, ("", "HardSigmoid"): 1, ("", "HardSwish"): 1,
    ("", "Neg"): 1, ("", "Abs"): 1, ("", "Sqrt"): 1, ("", "Reciprocal"): 1, ("", "Sigmoid"): 1, ("", "Tanh"): 1,
    ("", "Exp"): 1, ("", "Log"): 1, ("", "Erf"): 1, (GE_DOMAIN, "Swish"): 1, (GE_DOMAIN, "HardSwish"): 1,
}
NATIVE_DTYPES = {np.dtype(np.float32): EW_F32, np.dtype(np.float64): EW_F64, np.dtype(np.int32): EW_I32,
                 np.dtype(np.int64): EW_I64, np.dtype(np.float16): EW_F16}
MAX_SLOTS = 16  # csrc/eltwise.c's scratch registers
#: the least elements of each call where a chain runs one call per index of its leading dims (an operand
#: varying along two runs of dims): about a microsecond of work, what a prepared call costs
PER_CALL = 1024
MAX_F16_OPERANDS = 32  # and a float16 chain's operands
_BINARY = {"Add": EW_ADD, "Sub": EW_SUB, "Mul": EW_MUL, "Div": EW_DIV, "Max": EW_MAX, "Min": EW_MIN}
_UNARY = {"Neg": EW_NEG, "Abs": EW_ABS, "Sqrt": EW_SQRT, "Reciprocal": EW_RECIP}
_FLOAT_ONLY = {EW_DIV, EW_SQRT, EW_RECIP}


def chain_label(steps) -> str:
    """What a chain computes, for summaries: its ops ("Add+Relu+Mul"), a long chain's first ones and length."""
    ops = [step[0] for step in steps]
    return "+".join(ops) if len(ops) <= 8 else "+".join(ops[:4]) + f"+... {len(ops)} ops"


@register("FusedElementwise", since=1, domain=GE_DOMAIN)
class FusedElementwise(Kernel):
    def prepare(self):
        steps = self.attr("steps")
        if type(steps) is not list or not steps:
            raise self.fail(f"attrs['steps'] must be a non-empty list, got {type(steps).__name__}")
        self.steps = []  # (kernel, refs, constant extra inputs)
        used = [0] * len(steps)
        for k, step in enumerate(steps):
            where = f"attrs['steps'][{k}]"
            if (type(step) is not list or len(step) != 4 or type(step[0]) is not str or type(step[1]) is not str
                    or type(step[2]) is not dict or type(step[3]) is not list):
                raise self.fail(f"{where} must be [op_type, domain, attrs, refs]")
            op, domain, attrs, refs = step
            arity = CHAIN_OPS.get((domain, op))
            if arity is None:
                raise self.fail(f"{where}: {domain + '::' if domain else ''}{op} cannot be fused into a chain")
            if len(refs) != arity or any(type(r) is not int or not -k <= r < len(self.inputs) for r in refs):
                raise self.fail(f"{where}: refs {refs} must be {arity} input indices (< {len(self.inputs)}) "
                                f"or earlier steps (-1..-{k})")
            for r in refs:
                if r < 0:
                    used[-r - 1] += 1
            self.steps.append(self._step_kernel(where, op, domain, dict(attrs), refs))
        if any(n != 1 for n in used[:-1]) or used[-1]:
            raise self.fail("attrs['steps']: every step but the last must be read by exactly one later step")
        out = self.steps[-1][0].infer()[0]
        for k, (kernel, _, _) in enumerate(self.steps):
            m = kernel.infer()[0]
            if m.dtype != out.dtype or tuple(m.shape) != tuple(out.shape):
                raise self.fail(f"attrs['steps'][{k}] ({kernel.op_type}) computes {np.dtype(m.dtype).name} "
                                f"{list(m.shape)}, the chain {np.dtype(out.dtype).name} {list(out.shape)} in place")
        self.out = Meta(np.dtype(out.dtype), tuple(out.shape))
        self.slot_of, self.n_slots = _slots([[r for r in refs if r < 0] for _, refs, _ in self.steps])
        self.slot_nbytes = -(-math.prod(self.out.shape) * self.out.dtype.itemsize // 64) * 64
        # the steps' own scratch (a float16 formula's converted blocks), after the slots: one step runs at a time
        self.step_nbytes = max(kernel.workspace_nbytes() for kernel, _, _ in self.steps)
        program = self._lower()
        if self.step_nbytes and program is None:  # its numpy plan would be the slower: keep the ops apart
            raise self.fail("a step needs workspace (a float16 formula): only a chain the native interpreter "
                            "runs may hold one")
        self.interpreted = program is not None  # csrc/eltwise.c runs it, on the native backend
        self.program = program if self.backend.lib is not None else None
        # not `uses_native`: that flags kernels that pack weights and share threads with OpenBLAS
        # (blas.kernel_state); the chain reads its operands in place, on the calling thread
        self.native = self.program is not None
        self.calls = CallCache()

    def _step_kernel(self, where, op, domain, attrs, refs):
        metas = [self.inputs[r] if r >= 0 else self.steps[-r - 1][0].infer()[0] for r in refs]
        if any(m is None for m in metas):
            raise self.fail(f"{where}: reads an absent input")
        extra = []
        if op == "Clip":
            if set(attrs) - {"min", "max"} or any(type(v) not in (int, float) for v in attrs.values()):
                raise self.fail(f"{where} (Clip): attrs must be the numbers 'min' and 'max'")
            extra = [clip_bound(attrs.pop(key, default), np.dtype(metas[0].dtype))
                     for key, default in (("min", -np.inf), ("max", np.inf))]
        if op == "Div" and np.dtype(metas[0].dtype).kind != "f":
            raise self.fail(f"{where}: an integer Div cannot run in place")
        cls = lookup(op, domain, self.opset, self.name)
        # float16 arithmetic: the op's own kernel (numpy's float16 loop, in place), not the float16 adapter's
        build = cls.unadapted if (domain, op) in ARITHMETIC_VIA_FLOAT32 else cls
        kernel = build(attrs, metas + [Meta(e.dtype, ()) for e in extra], [None] * len(metas) + extra,
                       opset=self.opset, name=f"{self.name}:{op}", backend=self.backend)
        return kernel, refs, extra

    def infer(self) -> list[Meta]:
        return [self.out]

    def workspace_nbytes(self) -> int:
        return self.n_slots * self.slot_nbytes + self.step_nbytes

    def load(self):
        for kernel, _, _ in self.steps:
            kernel.load()
        return super().load()

    def compute(self, *xs):
        y = np.empty(self.out.shape, self.out.dtype)
        n = self.workspace_nbytes()
        with np.errstate(all="ignore"):
            self.run(list(xs), [y], np.empty(n, np.uint8) if n else None)
        return [y]

    def run(self, xs, ys, ws):
        y = ys[0]
        if self.program is not None:  # the prepared call, or None where these arrays do not suit it
            call = self.calls.get((y, *xs), lambda: self._native_call(xs, y))
            if call is not None:
                call.run()
                return
        bufs = [y] + [ws[k * self.slot_nbytes:][:y.nbytes].view(y.dtype).reshape(y.shape) for k in range(self.n_slots)]
        scratch = ws[self.n_slots * self.slot_nbytes:] if self.step_nbytes else None
        results = []
        for (kernel, refs, extra), slot in zip(self.steps, self.slot_of):
            out = bufs[slot]
            kernel.run([xs[r] if r >= 0 else results[-r - 1] for r in refs] + extra, [out], scratch)
            results.append(out)

    def bound(self, xs, ys, ws):
        call = self._native_call(xs, ys[0]) if self.program is not None else None
        return super().bound(xs, ys, ws) if call is None else call.run

    def _native_call(self, xs, y):
        ops = [xs[i] for i in self.program.operands]
        if not y.flags.c_contiguous or not all(a.flags.c_contiguous and a.dtype == self.out.dtype for a in ops):
            return None
        if not self.lead:
            return self.program.call(self.backend.lib, ops, y)
        # one call per index of the leading dims where an operand varies along two runs of dims: a blocked
        # tensor's gate (N, C/16, 1, 1, 16) over (N, C/16, H, W, 16) (passes/nchwc_layout.py), per block
        # (N, C/16) a run of 16 repeated along H x W
        return CallSequence([self.program.call(self.backend.lib, [_at(a, index, y.ndim) for a in ops], y[index])
                             for index in np.ndindex(*y.shape[:self.lead])])

    # -- the native plan ------------------------------------------------------------------------------
    def _lower(self) -> "_Program | None":
        """The chain as csrc/eltwise.c's program, or None when an op, dtype or broadcast is not its."""
        dtype = self.out.dtype
        if dtype not in NATIVE_DTYPES:
            return None
        ops = []  # (opcode, dst value, a, b, param); values: ("x", input) or ("t", number)
        temps = iter(range(1 << 30))
        results = []
        for kernel, refs, extra in self.steps:
            args = [("x", r) if r >= 0 else results[-r - 1] for r in refs]
            lowered = _lower_step(kernel, args, extra, dtype, temps)
            if lowered is None:
                return None
            if dtype == np.float16:
                code, *rest = lowered[-1]
                lowered[-1] = (code | EW_ROUND, *rest)
            ops.extend(lowered)
            results.append(lowered[-1][1])
        inputs = sorted({v[1] for op in ops for v in (op[2], op[3]) if v is not None and v[0] == "x"})
        if dtype == np.float16 and len(inputs) > MAX_F16_OPERANDS:
            return None
        out = tuple(self.out.shape)
        self.lead = 0
        for lead in range(len(out)):  # the fewest leading dims to run a call per index of
            if lead and math.prod(out[lead:]) < PER_CALL:
                break
            patterns = [broadcast_pattern(self.inputs[i].shape[max(0, lead - len(out) + len(self.inputs[i].shape)):],
                                          out[lead:]) for i in inputs]
            if all(p is not None for p in patterns):
                self.lead = lead
                return _Program.allocate(ops, inputs, patterns, NATIVE_DTYPES[dtype], math.prod(out[lead:]))
        return None


def _at(a: np.ndarray, index: tuple, rank: int) -> np.ndarray:
    """The part of operand `a` (broadcast to `rank` dims) that the output's leading `index` reads."""
    missing = rank - a.ndim  # a's dims align with the output's last ones
    at = tuple(0 if a.shape[d - missing] == 1 else i for d, i in enumerate(index) if d >= missing)
    return a[at] if at else a  # (a 0-d array indexed by () would be a numpy scalar)


def _slots(reads: list[list[int]]) -> tuple[list[int], int]:
    """Per step, its buffer (0: the output, k: workspace slot k - 1), and the number of slots: a step
    reuses a buffer its inputs free (in place), the output first."""
    free, owner, slot_of, n = [0], {}, [], 0
    for k, refs in enumerate(reads):
        for r in refs:
            free.append(owner.pop(-r - 1))
        if k == len(reads) - 1:
            slot_of.append(0)  # every live result is an input of the last step: the output is free
            break
        if 0 in free:
            slot = 0
        elif free:
            slot = min(free)
        else:
            n += 1
            slot = n
            free.append(slot)
        free.remove(slot)
        owner[k] = slot
        slot_of.append(slot)
    return slot_of, n


def _lower_step(kernel, args, extra, dtype, temps):
    """A step as micro-ops, or None. Each micro-op is (opcode, dst, a, b, param)."""
    op, is_float = kernel.op_type, dtype.kind == "f"
    x = args[0]

    def new():
        return ("t", next(temps))

    if kernel.domain:
        return None
    if op in _BINARY:
        code = _BINARY[op]
        return None if code in _FLOAT_ONLY and not is_float else [(code, new(), args[0], args[1], 0.0)]
    if op in _UNARY:
        code = _UNARY[op]
        return None if code in _FLOAT_ONLY and not is_float else [(code, new(), x, None, 0.0)]
    if op == "Relu":
        return [(EW_MAXC, new(), x, None, 0.0)]
    if op == "Clip":
        lo, hi = (e.item() for e in extra)
        if not is_float and max(abs(lo), abs(hi)) >= 2 ** 53:  # not exact as a double
            return None
        t = new()
        return [(EW_MAXC, t, x, None, float(lo)), (EW_MINC, new(), t, None, float(hi))]
    if not is_float:
        return None
    c = lambda v: float(dtype.type(v))  # noqa: E731  (the kernels' typed constants)
    if op == "Erf":
        return [(EW_ERF, new(), x, None, 0.0)] if dtype.itemsize <= 4 else None  # float32 and float16
    if op == "LeakyRelu":
        t = new()
        return [(EW_MULC, t, x, None, c(kernel.alpha)), (EW_MAX if kernel.alpha <= 1 else EW_MIN, new(), t, x, 0.0)]
    if op in ("HardSigmoid", "HardSwish"):
        alpha, beta = (kernel.alpha, kernel.beta) if op == "HardSigmoid" else (1 / 6, 0.5)
        t1, t2, t3, t4 = new(), new(), new(), new()
        ops = [(EW_MULC, t1, x, None, c(alpha)), (EW_ADDC, t2, t1, None, c(beta)), (EW_MINC, t3, t2, None, 1.0),
               (EW_MAXC, t4, t3, None, 0.0)]
        return ops + [(EW_MUL, new(), t4, x, 0.0)] if op == "HardSwish" else ops
    return None


class _Program:
    """The lowered chain with registers: the operands (inputs read), scratch slots, the output last."""

    def __init__(self, code, param, operands, inner, period, n_regs, dtype_code, n):
        self.code, self.param, self.operands = code, param, operands
        self.inner, self.period, self.n_regs, self.dtype_code, self.n = inner, period, n_regs, dtype_code, n

    @classmethod
    def allocate(cls, ops, inputs, patterns, dtype_code, n):
        """Registers by linear scan: a temp's slot is free after its last read, the output first
        (a chain runs in place in the output block); None when it needs more than MAX_SLOTS."""
        ext = {i: r for r, i in enumerate(inputs)}
        last = {v: k for k, (_, _, a, b, _) in enumerate(ops) for v in (a, b) if v is not None and v[0] == "t"}
        OUT = -1
        reg, free, slots, rows = {}, [OUT], 0, []
        for k, (code, dst, a, b, p) in enumerate(ops):
            srcs = [("x", ext[v[1]]) if v[0] == "x" else ("s", reg[v]) for v in (a, a if b is None else b)]
            for v in {a, b} - {None}:
                if v[0] == "t" and last[v] == k:
                    free.append(reg.pop(v))
            if OUT in free or k == len(ops) - 1:  # at the last op every live temp is read by it: OUT is free
                r = OUT
            elif free:
                r = min(free)
            else:
                r, slots = slots, slots + 1
                free.append(r)
            free.remove(r)
            reg[dst] = r
            rows.append((code, r, srcs, p))
        if slots > MAX_SLOTS:
            return None
        n_ext = len(inputs)
        n_regs = n_ext + slots + 1

        def phys(kind, r):
            return r if kind == "x" else (n_regs - 1 if r == OUT else n_ext + r)
        code = np.array([[c, phys("s", d), phys(*srcs[0]), phys(*srcs[1])] for c, d, srcs, _ in rows], np.int32)
        param = np.array([p for *_, p in rows], np.float64)
        inner = np.array([p[0] for p in patterns] or [0], np.int64)
        period = np.array([p[1] for p in patterns] or [0], np.int64)
        return cls(code.reshape(-1), param, inputs, inner, period, n_regs, dtype_code, n)

    def call(self, lib, operands, y):
        return lib.eltwise_call(self.dtype_code, self.n, operands, self.inner, self.period, self.code, self.param,
                                self.n_regs, y)
