"""onnxruntime's dynamically quantized contrib ops (domain com.microsoft): DynamicQuantizeLSTM, which
onnxruntime.quantization.quantize_dynamic writes for an LSTM, and DynamicQuantizeMatMul, which
onnxruntime's graph optimizer fuses from quantize_dynamic's DynamicQuantizeLinear -> MatMulInteger
(into models saved optimized).

Both quantize float32 activations at run time as onnxruntime does (quantization.dynamic_quantize:
uint8 over the data's range with 0), multiply exactly in integers (the uint8 activations minus their
zero point times the int8/uint8 weights minus theirs, summed in float64, where every partial sum is
an integer below 2**53: the int32 accumulator's value) and scale the sum to float32 by activation
scale x weight scale (per output column, or one). So the integer parts are onnxruntime's exactly;
the float steps around them may round differently in the last place, and an LSTM state that lands
on a rounding boundary of the next step's quantization may then move by one quantization step.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from .integer_matmul import const_input
from ..planned import PlannedKernel, Scratch
from .quantization import dynamic_quantize
from .recurrent import LSTM
from ..registry import lookup, register

MS = "com.microsoft"
F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
Q8 = (np.dtype(np.uint8), np.dtype(np.int8))


def quantized_product(a: np.ndarray, bt: np.ndarray, scale: np.ndarray, out: np.ndarray, v: dict) -> None:
    """out = float32(the exact integer (quantized a - its zero point) @ bt) * (a's scale * scale): a
    [M, K] float32 quantized dynamically, bt [K, N] the integer weights minus their zero points (in
    float64), scale their scales ([N] or [1]). v: float64/uint8/float32 scratch "a", "q", "qt" of at
    least [M, K] and float64 "acc" of at least [M, N]."""
    m, k = a.shape
    q, qt, af, acc = v["q"][:m, :k], v["qt"][:m, :k], v["a"][:m, :k], v["acc"][:m, :bt.shape[1]]
    a_scale, a_zero = dynamic_quantize(a, q, qt)
    np.subtract(q, a_zero, out=af, dtype=F64)
    np.matmul(af, bt, out=acc)  # integers below 2**53 at every partial sum: exact
    np.copyto(out, acc, casting="unsafe")
    np.multiply(out, a_scale * scale, out=out)


@register("DynamicQuantizeLSTM", domain=MS)
class DynamicQuantizeLSTM(LSTM):
    """LSTM with quantized weights: X, W [D, I, 4H] and R [D, H, 4H] (int8 or uint8: onnxruntime's
    layout, the float op's transposed), B, sequence_lens, initial_h, initial_c, P, W_scale,
    W_zero_point, R_scale, R_zero_point (shape [D], per direction, or [D, 4H], per gate column).
    The input projection quantizes X over the steps any sequence runs; each step quantizes the
    previous hidden state over the batch (rows past their sequence's end as onnxruntime holds them:
    zeros when Y is an output). onnxruntime splits a batch of 2 or more over its threads, each part
    quantized on its own: its results then depend on its thread count, ge's are one thread's."""

    def meta(self, i: int, what: str, required: bool = False) -> Meta | None:
        m = super().meta(i, what, required)
        if i in (1, 2) and m is not None and len(m.shape) == 3:  # as the float LSTM's [D, 4H, K] to its checks
            return Meta(self.inputs[0].dtype if self.inputs[0] is not None else F32, (m.shape[0], m.shape[2], m.shape[1]))
        return m

    def native_plan(self) -> bool:
        return False  # the numpy loop, its two products quantized

    def prepare(self):
        super().prepare()
        if self.dtype != F32:
            raise self.fail(f"X has type {self.dtype}; float32 expected")
        D, G = self.D, 4 * self.H
        for wi, si, zi, what in ((1, 8, 9, "W"), (2, 10, 11, "R")):
            w = self.inputs[wi]
            if w.dtype not in Q8:
                raise self.fail(f"{what} has type {w.dtype}; int8 or uint8 expected")
            for i, kind, dtype in ((si, "scale", F32), (zi, "zero_point", w.dtype)):
                m = super().meta(i, f"{what}_{kind}", True)
                if m.dtype != dtype or tuple(m.shape) not in ((D,), (D, G)):
                    raise self.fail(f"{what}_{kind} has type {m.dtype} and shape {tuple(m.shape)}; {dtype} of "
                                    f"shape ({D},) or ({D}, {G}) expected")
        T, B, I, H = self.T, self.B, self.I, self.H
        s = self.scratch
        s.add("q", (T * B, max(I, H)), np.uint8)  # the quantized X, then each step's h
        s.add("qt", (T * B, max(I, H)), F32)
        s.add("a", (T * B, max(I, H)), F64)  # the same minus its zero point, for the float64 product
        s.add("acc", (T * B, G), F64)
        s.add("hz", (B, H), F32)  # h with the rows past their end as onnxruntime's Y holds them

    def pack(self):
        if all(const_input(self, i) is not None for i in (1, 2, 8, 9, 10, 11)) and \
                (self.meta(3, "B") is None or const_input(self, 3) is not None):
            weights = [const_input(self, i) for i in (1, 2, 3, 8, 9, 10, 11)]
            self.packed = self.shared_pack(("quantized",), self.pack_quantized, *weights)

    def pack_quantized(self, w, r, b, ws, wz, rs, rz) -> list[dict]:
        """Per direction: W and R minus their zero points in float64 ([K, 4H]: exact integers), their
        scales [4H] or [1] (float32), and the bias Wb + Rb."""
        G = 4 * self.H
        out = []
        for d in range(self.D):
            p = {"bias": None if b is None else np.asarray(b[d][:G]) + np.asarray(b[d][G:])}
            for name, q, scale, zero in (("wt", w, ws, wz), ("rt", r, rs, rz)):
                p[name] = np.asarray(q)[d].astype(F64) - np.asarray(zero)[d].astype(F64).reshape(-1)
                p[name + "_scale"] = np.asarray(scale, F32)[d].reshape(-1)
            out.append(p)
        return out

    def pack_run(self, xs) -> list[dict]:
        return self.pack_quantized(*[xs[i] if i < len(xs) else None for i in (1, 2, 3, 8, 9, 10, 11)])

    def project(self, x, p, xw, plan, v):
        rows = x.shape[0] if plan is None else int(max(plan[0].sum(axis=0).max(), 0)) * self.B
        quantized_product(x[:rows], p["wt"], p["wt_scale"], xw[:rows], v)
        xw[rows:] = 0  # steps no sequence runs: never read

    def recurrent_product(self, h, rt, out, v):
        rows = v.get("finished")  # the rows onnxruntime's Y has zeroed (it quantizes h from Y)
        if rows is not None and v["y"] is not None:
            h = v["hz"]
            np.copyto(h, v["h"])
            h[rows] = 0
        quantized_product(h, rt, v["rt_scale"], out, v)

    def direction(self, d, xs, p, plan, y, states, v):
        v["rt_scale"], v["y"], v["finished"] = p["rt_scale"], y, None
        super().direction(d, xs, p, plan, y, states, v)

    def step(self, d, xw_t, p, v, mask, yt):
        super().step(d, xw_t, p, v, mask, yt)
        if mask is not None:  # rows past their end from this step on: onnxruntime's Y rows are zeros
            v["finished"] = ~mask.reshape(-1)


@register("DynamicQuantizeMatMul", domain=MS)
class DynamicQuantizeMatMul(PlannedKernel):
    """A (float32), B (int8 or uint8), b_scale, b_zero_point, bias: DynamicQuantizeLinear of A
    (its uint8, scale and zero point) into MatMulIntegerToFloat, ge's kernels of both, as onnxruntime
    defines the op."""

    def prepare(self):
        am = self.input_meta(0, "A")
        if am.dtype != F32:
            raise self.fail(f"A has type {am.dtype}; float32 expected")
        self.quantize = lookup("DynamicQuantizeLinear", opset=11)({}, [am], name=f"{self.name}:quantize",
                                                                 backend=self.backend)
        aq, a_scale, a_zero = self.quantize.infer()
        b = [self.inputs[i] if i < len(self.inputs) else None for i in range(1, 5)]
        metas = [aq, b[0], a_scale, b[1], a_zero, b[2], b[3]]
        consts = [None, const_input(self, 1), None, const_input(self, 2), None, const_input(self, 3), const_input(self, 4)]
        self.matmul = lookup("MatMulIntegerToFloat", MS, 1)({}, metas, consts, name=self.name, packs=self.packs,
                                                            backend=self.backend)
        self.out_metas = self.matmul.infer()
        self.scratch = Scratch()
        self.scratch.add("aq", aq.shape, aq.dtype)
        self.scratch.add("a_scale", (), F32)
        self.scratch.add("a_zero", (), np.uint8)
        for name, k in (("quantize_ws", self.quantize), ("matmul_ws", self.matmul)):
            self.scratch.add(name, (max(1, k.workspace_nbytes()),), np.uint8)

    def pack(self):
        self.quantize.load()
        self.matmul.load()

    def run(self, xs, ys, ws):
        v = self.views(ws)
        xs = list(xs) + [None] * (5 - len(xs))
        aq, a_scale, a_zero = v["aq"], v["a_scale"], v["a_zero"]
        self.quantize.run([xs[0]], [aq, a_scale, a_zero], v["quantize_ws"])
        self.matmul.run([aq, xs[1], a_scale, xs[2], a_zero, xs[3], xs[4]], ys, v["matmul_ws"])
