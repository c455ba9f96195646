"""Recurrent ops: RNN, GRU, LSTM (directions forward / reverse / bidirectional, sequence_lens,
initial states, activations with alpha/beta, clip, layout 0 and 1, GRU's linear_before_reset, LSTM's
peepholes and input_forget).

Per direction, the input projection of every time step is one GEMM before the loop:
XW[T, B, G*H] = X @ W^T + (Wb + Rb). The loop runs over time steps (the recurrence is sequential):
one GEMM H @ R^T into the gate buffer, then the gate activations as ufuncs on [B, H] slices, all in
workspace buffers. The reverse direction with sequence_lens runs on a per-batch reversed copy of X
(and its Y is reversed back), so that every batch item starts at its own last valid step; steps past
a batch item's length leave its state unchanged and write zeros to Y, as onnxruntime does.

With ge's native kernels, float32 with the default activations (Sigmoid, Tanh, Tanh) runs its loop
natively: the projection of both directions is one GEMM here, then one call of csrc/recurrent.c
runs every step of every direction (the product on R, packed once at load, the gates vectorized,
sequence_lens by per-item step indices, no reversed copies). Other activations and float64 keep the
numpy loop: they are rare in exported models, and the numpy loop handles every activation.
"""
from __future__ import annotations

import numpy as np

from ...model.ir import Meta
from ..native import (REC_GRU, REC_LSTM, REC_RNN, CallCache, PreparedCall, Recurrent as NativeRecurrent,
                      RecurrentDirection, threads)
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register
from ..values import text

FLOATS = (np.float32, np.float64)
PACKED_BATCH = 2  # from this batch on, the native step's product runs on the GEMM (R^T packed), below on the GEMV
GEMV_ROWS = 4  # up to this many rows (steps x batch), the native projection runs on the GEMV (a VAD's one step)


# -- activations: in place on a view, with a same-shaped temporary -----------------------------------

def _sigmoid(a, alpha, beta, t):
    np.negative(a, out=a)
    np.exp(a, out=a)
    np.add(a, 1, out=a)
    np.reciprocal(a, out=a)


def _tanh(a, alpha, beta, t):
    np.tanh(a, out=a)


def _relu(a, alpha, beta, t):
    np.maximum(a, 0, out=a)


def _affine(a, alpha, beta, t):
    np.multiply(a, alpha, out=a)
    np.add(a, beta, out=a)


def _leaky_relu(a, alpha, beta, t):
    np.multiply(a, alpha, out=t)
    np.copyto(a, t, where=a < 0)


def _thresholded_relu(a, alpha, beta, t):
    np.copyto(a, 0, where=a <= alpha)


def _scaled_tanh(a, alpha, beta, t):
    np.multiply(a, beta, out=a)
    np.tanh(a, out=a)
    np.multiply(a, alpha, out=a)


def _hard_sigmoid(a, alpha, beta, t):
    np.multiply(a, alpha, out=a)
    np.add(a, beta, out=a)
    np.clip(a, 0, 1, out=a)


def _elu(a, alpha, beta, t):
    np.exp(a, out=t)
    np.subtract(t, 1, out=t)
    np.multiply(t, alpha, out=t)
    np.copyto(a, t, where=a < 0)


def _softsign(a, alpha, beta, t):
    np.abs(a, out=t)
    np.add(t, 1, out=t)
    np.divide(a, t, out=a)


def _softplus(a, alpha, beta, t):
    np.logaddexp(a, 0, out=a)


#: lower-case name -> (function, uses alpha, uses beta, default alpha, default beta), as onnxruntime
ACTIVATIONS = {
    "sigmoid": (_sigmoid, 0, 0, 0.0, 0.0), "tanh": (_tanh, 0, 0, 0.0, 0.0), "relu": (_relu, 0, 0, 0.0, 0.0),
    "affine": (_affine, 1, 1, 0.0, 0.0), "leakyrelu": (_leaky_relu, 1, 0, 0.01, 0.0),
    "thresholdedrelu": (_thresholded_relu, 1, 0, 0.0, 0.0), "scaledtanh": (_scaled_tanh, 1, 1, 0.0, 0.0),
    "hardsigmoid": (_hard_sigmoid, 1, 1, 0.2, 0.5), "elu": (_elu, 1, 0, 1.0, 0.0),
    "softsign": (_softsign, 0, 0, 0.0, 0.0), "softplus": (_softplus, 0, 0, 0.0, 0.0),
}


class Activation:
    def __init__(self, fn, alpha, beta, dtype):
        self.fn, self.alpha, self.beta = fn, dtype.type(alpha), dtype.type(beta)

    def __call__(self, a, t):
        self.fn(a, self.alpha, self.beta, t)


class _Recurrent(PlannedKernel):
    GATES = 1
    DEFAULT_ACTIVATIONS = ("Tanh",)
    N_STATE_OUT = 1  # Y_h (LSTM: Y_h, Y_c)

    # -- prepare -----------------------------------------------------------------------------------
    def meta(self, i: int, what: str, required: bool = False) -> Meta | None:
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None and required:
            raise self.fail(f"input {i} ({what}) is missing")
        return m

    def expect(self, m: Meta | None, shape: tuple, what: str):
        if m is not None and tuple(m.shape) != tuple(shape):
            raise self.fail(f"{what} has shape {tuple(m.shape)}, {tuple(shape)} expected")

    def prepare(self):
        xm, wm, rm = self.meta(0, "X", True), self.meta(1, "W", True), self.meta(2, "R", True)
        dt = xm.dtype  # float32/float64 (float16 and bfloat16 come widened, float16.py; T binds W, R, B...)
        self.layout = int(self.attr("layout", 0)) if self.opset >= 14 else 0
        if self.layout not in (0, 1):
            raise self.fail(f"layout={self.layout}, 0 or 1 expected")
        if len(xm.shape) != 3:
            raise self.fail(f"X has shape {tuple(xm.shape)}, rank 3 expected")
        if self.layout == 0:
            T, B, I = xm.shape
        else:
            B, T, I = xm.shape
        direction = text(self.attr("direction", "forward"))
        if direction not in ("forward", "reverse", "bidirectional"):
            raise self.fail(f"direction '{direction}' is not one of forward, reverse, bidirectional")
        D = 2 if direction == "bidirectional" else 1
        self.reverse = [False, True] if D == 2 else [direction == "reverse"]
        hs = self.attr("hidden_size")
        H = int(hs) if hs is not None else (rm.shape[-1] if len(rm.shape) == 3 else 0)
        if H < 1:
            raise self.fail(f"hidden_size={hs} must be positive")
        G = self.GATES
        self.expect(wm, (D, G * H, I), "W")
        self.expect(rm, (D, G * H, H), "R")
        self.expect(self.meta(3, "B"), (D, 2 * G * H), "B")
        lm = self.meta(4, "sequence_lens")
        if lm is not None:
            self.expect(lm, (B,), "sequence_lens")
        state = (D, B, H) if self.layout == 0 else (B, D, H)
        self.expect(self.meta(5, "initial_h"), state, "initial_h")
        self.T, self.B, self.I, self.H, self.D, self.dtype = T, B, I, H, D, dt
        self.clip = self.attr("clip")
        self.clip = None if self.clip is None else dt.type(float(self.clip))
        self.acts = self.parse_activations(D, dt)
        self.prepare_extra()
        y = (T, D, B, H) if self.layout == 0 else (B, T, D, H)
        self.out_metas = ([Meta(dt, y)] + [Meta(dt, state)] * self.N_STATE_OUT)[:max(1, self.num_outputs)]
        self.packed = None  # the weights, packed once by pack() when constant
        lens = self.consts[4] if len(self.consts) > 4 else None
        self.lens_known = lens is not None
        self.lens_const = None if lens is None else self.lens_plan(lens)
        store = (T, B) if self.layout == 0 else (B, T)
        s = Scratch()
        self.native = self.native_plan()
        if self.native:
            self.lens32 = None if self.lens_const is None else np.asarray(lens).astype(np.int32).reshape(-1)
            self.uses_native, self.calls = True, CallCache()
            s.add("xw", (T * B, D * G * H), dt)
            s.add("xw_ws", (self.backend.lib.workspace_nbytes(T * B, D * G * H, I, True, False),), np.uint8)
            s.add("rec", (D, -(-self.backend.lib.lib.ge_recurrent_workspace_floats(self.KIND, B, H) // 16) * 16), dt)
            if lm is not None and lens is None:
                s.add("lens", (B,), np.int32)
            self.scratch = s
            return
        s.add("xw", store + (G * H,), dt)
        for name in ("h", "hn", "t0", "t1") + self.EXTRA_BUFFERS:
            s.add(name, (B, H), dt)
        if lm is not None and any(self.reverse):
            s.add("xr", store + (I,), dt)
            s.add("yr", store + (H,), dt)
            s.add("yb", store + (H,), dt)
        self.scratch = s

    EXTRA_BUFFERS: tuple = ()

    def prepare_extra(self):
        pass

    def native_plan(self) -> bool:
        """Whether csrc/recurrent.c runs the loop: native kernels, float32, the default activations
        (any other activation, and float64, stays on the numpy loop)."""
        return (self.backend.lib is not None and self.dtype == np.float32
                and all(name.lower() == default.lower() for d in range(self.D)
                        for name, default in zip(self.act_names[d], self.DEFAULT_ACTIVATIONS)))

    def parse_activations(self, D, dt) -> list[list[Activation]]:
        n = len(self.DEFAULT_ACTIVATIONS)
        names = self.attr("activations")
        names = list(self.DEFAULT_ACTIVATIONS) * D if names is None else [text(a) for a in names]
        if D == 1 and len(names) == 2 * n:  # RNN's schema default lists both directions' (onnxruntime takes the first)
            names = names[:n]
        if len(names) != n * D:
            raise self.fail(f"{len(names)} activations given, {n * D} expected ({n} per direction)")
        alphas = [float(a) for a in self.attr("activation_alpha", [])]
        betas = [float(b) for b in self.attr("activation_beta", [])]
        out = []
        for name in names:
            spec = ACTIVATIONS.get(name.lower())
            if spec is None:
                raise self.fail(f"activation '{name}' is not supported ({', '.join(sorted(ACTIVATIONS))})")
            fn, ua, ub, da, db = spec
            alpha = alphas.pop(0) if ua and alphas else da
            beta = betas.pop(0) if ub and betas else db
            out.append(Activation(fn, alpha, beta, dt))
        self.act_names = [names[d * n:(d + 1) * n] for d in range(D)]
        return [out[d * n:(d + 1) * n] for d in range(D)]

    # -- weights -----------------------------------------------------------------------------------
    def pack(self):
        """Constant weights packed once, and shared by the kernels built for other shapes."""
        if all(self.consts[i] is not None for i in (1, 2)) and (self.meta(3, "B") is None or self.consts[3] is not None):
            weights = [self.consts[i] if i < len(self.consts) else None for i in (1, 2, 3)]
            if self.native:
                self.packed = self.shared_pack(self.pack_layout() + ("native",), self.pack_native, *weights)
            else:
                self.packed = self.shared_pack(self.pack_layout(), self.pack_weights, *weights)

    def pack_native(self, w, r, b) -> dict:
        """For csrc/recurrent.c, whatever the shape (kernels built for other shapes share it): W's
        rows [D*G*H, I] (the GEMV's: up to GEMV_ROWS rows of X) and W^T of every direction side by
        side packed for the native GEMM (one product projects X for all directions, the biases in
        its epilogue); per direction R's rows (the GEMV's), R^T packed for the GEMM (GRU's
        linear_before_reset 0 in two: its h~ product is a step of its own), GRU's Rbh. Rows are
        views of the weights where they are contiguous float32."""
        lib, H, D = self.backend.lib, self.H, self.D
        per = self.pack_weights(w, r, b)
        bias = None if per[0]["bias"] is None else np.concatenate([p["bias"] for p in per])
        dirs = []
        for d, p in enumerate(per):
            rows = np.ascontiguousarray(r[d], np.float32)
            if self.GATES == 3 and not self.lbr:
                panels, panels_h = lib.pack_b(rows[:2 * H].T), lib.pack_b(rows[2 * H:].T)
            else:
                panels, panels_h = lib.pack_b(rows.T), None
            dirs.append({"rows": rows, "rp": panels, "rp_h": panels_h, "rbh": p.get("rbh")})
        w_rows = np.ascontiguousarray(w, np.float32).reshape(D * self.GATES * H, self.I)
        return {"w_rows": w_rows, "wp": lib.pack_b(w_rows.T), "bias": bias, "dirs": dirs}

    def pack_weights(self, w, r, b) -> list[dict]:
        """Per direction: W^T [I, G*H], R^T [H, G*H] (C-contiguous) and the bias added to XW."""
        GH = self.GATES * self.H
        out = []
        for d in range(self.D):
            p = {"wt": np.ascontiguousarray(np.asarray(w[d]).T), "rt": np.ascontiguousarray(np.asarray(r[d]).T)}
            if b is not None:
                p["wb"], p["rb"] = np.asarray(b[d][:GH]), np.asarray(b[d][GH:])
            self.pack_extra(p)
            out.append(p)
        return out

    def pack_extra(self, p: dict) -> None:
        p["bias"] = None if "wb" not in p else p["wb"] + p["rb"]

    def pack_run(self, xs) -> list[dict]:
        """The weights of this run, packed (weights that are not constants)."""
        return self.pack_weights(xs[1], xs[2], xs[3])

    def pack_layout(self) -> tuple:
        """What pack() depends on besides W, R, B (whose shapes give D, G and H)."""
        return ()

    # -- sequence lengths ----------------------------------------------------------------------------
    def lens_plan(self, lens):
        """None when every sequence is full, else (mask [T, B, 1], reversal rows over [T * B], the
        empty sequences [B] (whose final states are zeros, as onnxruntime's))."""
        lens = np.asarray(lens).astype(np.int64).reshape(-1)
        if lens.size and (lens.min() < 0 or lens.max() > self.T):
            raise self.fail(f"sequence_lens values in [{int(lens.min())}, {int(lens.max())}], not within [0, {self.T}]")
        if np.all(lens == self.T):
            return None
        t = np.arange(self.T, dtype=np.int64).reshape(-1, 1)
        mask = (t < lens).reshape(self.T, self.B, 1)
        src = np.where(t < lens, lens - 1 - t, t)  # [T, B]: the step that processing step t reads
        b = np.arange(self.B, dtype=np.int64)
        rows = src * self.B + b if self.layout == 0 else (b * self.T).reshape(-1, 1) + src.T
        return mask, rows.reshape(-1).astype(np.intp), lens == 0  # rows of X in its storage order ([T, B] or [B, T])

    # -- run -------------------------------------------------------------------------------------------
    def outputs_by_position(self, ys):
        """(Y, [Y_h, (Y_c)]), positional; None (or a missing tail) for absent outputs."""
        n = len(self.out_metas)
        ys = list(ys) + [None] * (n - len(ys))
        return ys[0], ys[1:]

    def run(self, xs, ys, ws):
        if self.native:
            return self.run_native(list(xs) + [None] * (8 - len(xs)), ys, self.views(ws))
        v = dict(self.views(ws))  # a private copy: commit() swaps buffers in it
        xs = list(xs) + [None] * (8 - len(xs))
        y, states = self.outputs_by_position(ys)
        packed = self.packed if self.packed is not None else self.pack_run(xs)
        if xs[4] is None:
            plan = None
        else:
            plan = self.lens_const if self.lens_known else self.lens_plan(xs[4])
        self.prepare_run(xs, v)
        with np.errstate(over="ignore", under="ignore", invalid="ignore"):
            for d in range(self.D):
                self.direction(d, xs, packed[d], plan, y, states, v)

    def prepare_run(self, xs, v) -> None:
        pass

    # -- the native loop (csrc/recurrent.c) ----------------------------------------------------------
    KIND = REC_RNN  # csrc/abi.h's REC_RNN, REC_GRU, REC_LSTM

    def bound(self, xs, ys, ws):
        """The native calls themselves when nothing changes between runs (constant weights and
        sequence_lens, contiguous operands): a VAD's one step per call is a few microseconds."""
        xs = list(xs) + [None] * (8 - len(xs))
        operands = [xs[0], xs[5], xs[6], None if self.GATES != 4 or self.p_const is not None else xs[7]]
        if not self.native or self.packed is None or (xs[4] is not None and not self.lens_known) or \
                not all(a is None or a.flags.c_contiguous for a in operands):
            return super().bound(xs, ys, ws)
        calls = self.native_calls_for(xs, ys, self.views(ws))
        (project, projection_args), (recur, recurrence_args) = [(c.fn, c.ref) for c in calls]

        def run(keep=calls):  # holds the calls' arrays
            project(projection_args)
            recur(recurrence_args)
        return run

    def run_native(self, xs, ys, v):
        for call in self.native_calls_for(xs, ys, v):
            call.run()

    def native_calls_for(self, xs, ys, v) -> tuple:
        """The projection's and the recurrence's prepared calls on these buffers (cached while they stay)."""
        packed = self.packed if self.packed is not None else self.pack_native(xs[1], xs[2], xs[3])
        lens = self.lens32
        if xs[4] is not None and not self.lens_known:
            self.lens_plan(xs[4])  # checks the values
            lens = v["lens"]
            np.copyto(lens, xs[4].reshape(-1), casting="unsafe")
        y, states = self.outputs_by_position(ys)
        states = list(states) + [None] * (2 - len(states))
        h0, c0 = [None if a is None else np.ascontiguousarray(a) for a in xs[5:7]]
        peep = None if self.GATES != 4 else self.p_const if self.p_const is not None else xs[7]
        peep = None if peep is None else np.ascontiguousarray(peep)
        x = np.ascontiguousarray(xs[0])
        key = (x, v["xw"], v["rec"], y, states[0], states[1], h0, c0, peep, lens, packed["bias"], *packed["dirs"][0].values())
        return self.calls.get(key, lambda: self.native_calls(x, packed, v, lens, y, states, h0, c0, peep))

    def native_calls(self, x, packed, v, lens, y, states, h0, c0, peep):
        """The projection of every step (the native GEMM) and ge_recurrent, for these buffers."""
        T, B, I, H, D, GH = self.T, self.B, self.I, self.H, self.D, self.GATES * self.H
        lib = self.backend.lib
        if T * B <= GEMV_ROWS:
            projection = lib.gemv_call(T * B, x, I, packed["w_rows"], v["xw"], D * GH, bias=packed["bias"])
        else:
            projection = lib.call(T * B, D * GH, I, v["xw"], D * GH, a=x, lda=I, bp=packed["wp"], bias_n=packed["bias"],
                                  ws=v["xw_ws"])
        if self.layout == 0:  # X, Y [T, (D,) B, ...], states [D, B, H]
            x_step, x_batch, y_step, y_batch, state_batch, y_dir, state_dir = B * D * GH, D * GH, D * B * H, H, H, B * H, B * H
        else:  # X, Y [B, T, (D,) ...], states [B, D, H]
            x_step, x_batch, y_step, y_batch, state_batch, y_dir, state_dir = D * GH, T * D * GH, D * H, T * D * H, D * H, H, H

        def at(a, offset):  # the address of a's float `offset`, or None
            return None if a is None else a.ctypes.data + 4 * offset

        dirs, gemm = [], B >= PACKED_BATCH  # the step's product on the GEMM (else the GEMV)
        for d, q in enumerate(packed["dirs"]):
            dirs.append(RecurrentDirection(
                at(v["xw"], d * GH), at(q["rows"], 0), at(q["rp"] if gemm else None, 0),
                at(q["rp_h"] if gemm else None, 0), at(q["rbh"], 0),
                at(peep, d * 3 * H), at(h0, d * state_dir), at(c0, d * state_dir), at(y, d * y_dir),
                at(states[0], d * state_dir), at(states[1], d * state_dir), at(v["rec"][d], 0), int(self.reverse[d])))
        args = NativeRecurrent(self.KIND, int(getattr(self, "lbr", 0)), int(getattr(self, "input_forget", 0)),
                               int(self.clip is not None), 0.0 if self.clip is None else float(self.clip), D,
                               threads(), T, B, H, x_step, x_batch, y_step, y_batch, state_batch,
                               None if lens is None else lens.ctypes.data, (RecurrentDirection * 2)(*dirs))
        return projection, PreparedCall(lib.lib.ge_recurrent, args, (packed, v, lens, y, states, h0, c0, peep))

    def state_view(self, a, d):
        if a is None:
            return None
        return a[d] if self.layout == 0 else a[:, d]

    def at(self, a, t):
        """Step t of an array in storage order ([T, B, ...] or [B, T, ...])."""
        return a[t] if self.layout == 0 else a[:, t]

    def direction(self, d, xs, p, plan, y, states, v):
        T, B, I, H = self.T, self.B, self.I, self.H
        rev = self.reverse[d]
        x = xs[0]
        gathered = rev and plan is not None  # per-batch reversal: work on a reversed copy of X
        if gathered:
            np.take(x.reshape(T * B, I), plan[1], axis=0, out=v["xr"].reshape(T * B, I))
            x = v["xr"]
        xw = v["xw"]
        self.project(x.reshape(T * B, I), p, xw.reshape(T * B, self.GATES * H), plan, v)  # every step's input projection
        if p["bias"] is not None:
            np.add(xw, p["bias"], out=xw)
        yd = yfinal = None
        if y is not None:
            yd = y[:, d] if self.layout == 0 else y[:, :, d]
            if gathered:
                yd, yfinal = v["yr"], yd
        self.init_states(d, xs, v)
        order = range(T - 1, -1, -1) if rev and not gathered else range(T)
        for t in order:  # the recurrence: one GEMM per step
            self.step(d, self.at(xw, t), p, v, None if plan is None else plan[0][t],
                      None if yd is None else self.at(yd, t))
        if yfinal is not None:
            np.take(v["yr"].reshape(T * B, H), plan[1], axis=0, out=v["yb"].reshape(T * B, H))
            np.copyto(yfinal, v["yb"])
        self.final_states(d, states, v)
        if plan is not None and plan[2].any():
            for a in states:
                if a is not None:
                    self.state_view(a, d)[plan[2]] = 0

    def project(self, x, p, xw, plan, v) -> None:
        """xw = x @ W^T: the input projection of every step ([T * B, I] -> [T * B, G * H])."""
        np.matmul(x, p["wt"], out=xw)

    def recurrent_product(self, h, rt, out, v) -> None:
        """out = h @ R^T (one step's product on the recurrence weights, `rt` a part of them)."""
        np.matmul(h, rt, out=out)

    def init_states(self, d, xs, v):
        h0 = self.state_view(xs[5], d)
        if h0 is None:
            v["h"].fill(0)
        else:
            np.copyto(v["h"], h0)

    def final_states(self, d, states, v):
        if states and states[0] is not None:
            np.copyto(self.state_view(states[0], d), v["h"])

    def commit(self, v, names, mask, yt):
        """Take the new states (`hn`, ...) into the state buffers; Y[t] = new h (0 past a sequence end)."""
        if mask is None:
            for new, old in names:
                v[new], v[old] = v[old], v[new]
            if yt is not None:
                np.copyto(yt, v["h"])
            return
        for new, old in names:
            np.copyto(v[old], v[new], where=mask)
        if yt is not None:
            np.multiply(v["hn"], mask, out=yt)

    def apply_clip(self, a):
        if self.clip is not None:
            np.clip(a, -self.clip, self.clip, out=a)


@register("RNN", since=7)
class RNN(_Recurrent):
    """H_t = f(X_t W^T + H_{t-1} R^T + Wb + Rb)."""
    GATES = 1
    KIND = REC_RNN
    DEFAULT_ACTIVATIONS = ("Tanh",)

    def step(self, d, xw_t, p, v, mask, yt):
        hn = v["hn"]
        self.recurrent_product(v["h"], p["rt"], hn, v)
        np.add(hn, xw_t, out=hn)
        self.apply_clip(hn)
        self.acts[d][0](hn, v["t0"])
        self.commit(v, [("hn", "h")], mask, yt)


@register("GRU", since=7)
class GRU(_Recurrent):
    """Gates z, r, h: z = f(.), r = f(.), h~ = g(X Wh^T + (r * H) Rh^T + Rbh + Wbh)
    (linear_before_reset: g(X Wh^T + r * (H Rh^T + Rbh) + Wbh)); H = (1 - z) * h~ + z * H."""
    GATES = 3
    KIND = REC_GRU
    DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh")

    def prepare_extra(self):
        self.lbr = int(self.attr("linear_before_reset", 0))

    def pack_layout(self):
        return (self.lbr,)

    def pack_extra(self, p):
        H = self.H
        rt = p.pop("rt")
        p["rt_zr"], p["rt_h"] = np.ascontiguousarray(rt[:, :2 * H]), np.ascontiguousarray(rt[:, 2 * H:])
        if "wb" not in p:
            p["bias"], p["rbh"] = None, None
            return
        bias = p["wb"] + p["rb"]
        if self.lbr:  # Rbh is added inside the reset product
            bias[2 * H:] = p["wb"][2 * H:]
            p["rbh"] = p["rb"][2 * H:]
        else:
            p["rbh"] = None
        p["bias"] = bias

    def step(self, d, xw_t, p, v, mask, yt):
        H = self.H
        h, hn, t0, zr = v["h"], v["hn"], v["t0"], v["zr"]
        np.matmul(h, p["rt_zr"], out=zr)
        np.add(zr, xw_t[:, :2 * H], out=zr)
        self.apply_clip(zr)
        f, gact = self.acts[d]
        z, r = zr[:, :H], zr[:, H:]
        f(z, t0)
        f(r, t0)
        if self.lbr:
            np.matmul(h, p["rt_h"], out=hn)
            if p["rbh"] is not None:
                np.add(hn, p["rbh"], out=hn)
            np.multiply(hn, r, out=hn)
        else:
            np.multiply(r, h, out=t0)
            np.matmul(t0, p["rt_h"], out=hn)
        np.add(hn, xw_t[:, 2 * H:], out=hn)
        self.apply_clip(hn)
        gact(hn, t0)
        # H = h~ + z * (H - h~)
        np.subtract(h, hn, out=t0)
        np.multiply(t0, z, out=t0)
        np.add(hn, t0, out=hn)
        self.commit(v, [("hn", "h")], mask, yt)

    def prepare(self):
        super().prepare()
        if not self.native:
            self.scratch.add("zr", (self.B, 2 * self.H), self.dtype)


@register("LSTM", since=7)
class LSTM(_Recurrent):
    """Gates i, o, f, c (W, R, B in that order), peepholes P = [Pi, Po, Pf]:
    i = f(. + Pi * C), f = f(. + Pf * C) (or 1 - i with input_forget), c~ = g(.), C' = f * C + i * c~,
    o = f(. + Po * C'), H' = o * h(C')."""
    GATES = 4
    KIND = REC_LSTM
    DEFAULT_ACTIVATIONS = ("Sigmoid", "Tanh", "Tanh")
    N_STATE_OUT = 2
    EXTRA_BUFFERS = ("c", "cn")

    def prepare_extra(self):
        D, B, H = self.D, self.B, self.H
        state = (D, B, H) if self.layout == 0 else (B, D, H)
        self.expect(self.meta(6, "initial_c"), state, "initial_c")
        self.expect(self.meta(7, "P"), (D, 3 * H), "P")
        self.input_forget = int(self.attr("input_forget", 0))
        p = self.consts[7] if len(self.consts) > 7 else None
        self.has_p = self.meta(7, "P") is not None
        self.p_const = None if p is None else np.asarray(p)

    def init_states(self, d, xs, v):
        super().init_states(d, xs, v)
        c0 = self.state_view(xs[6], d)
        if c0 is None:
            v["c"].fill(0)
        else:
            np.copyto(v["c"], c0)

    def final_states(self, d, states, v):
        super().final_states(d, states, v)
        if len(states) > 1 and states[1] is not None:
            np.copyto(self.state_view(states[1], d), v["c"])

    def prepare(self):
        super().prepare()
        if not self.native:
            self.scratch.add("g", (self.B, 4 * self.H), self.dtype)

    def prepare_run(self, xs, v):
        v["P"] = self.p_const if self.p_const is not None else xs[7]

    def step(self, d, xw_t, p, v, mask, yt):
        H = self.H
        g, h, c, hn, cn, t0, t1 = v["g"], v["h"], v["c"], v["hn"], v["cn"], v["t0"], v["t1"]
        self.recurrent_product(h, p["rt"], g, v)
        np.add(g, xw_t, out=g)
        gi, go, gf, gc = g[:, :H], g[:, H:2 * H], g[:, 2 * H:3 * H], g[:, 3 * H:]
        fa, ga, ha = self.acts[d]
        P = v["P"]
        if P is not None:
            np.multiply(c, P[d, :H], out=t0)
            np.add(gi, t0, out=gi)
            np.multiply(c, P[d, 2 * H:], out=t0)
            np.add(gf, t0, out=gf)
        self.apply_clip(gi)
        fa(gi, t0)
        if self.input_forget:
            np.subtract(1, gi, out=gf)
        else:
            self.apply_clip(gf)
            fa(gf, t0)
        self.apply_clip(gc)
        ga(gc, t0)
        # C' = f * C + i * c~
        np.multiply(gf, c, out=cn)
        np.multiply(gi, gc, out=t0)
        np.add(cn, t0, out=cn)
        if P is not None:
            np.multiply(cn, P[d, H:2 * H], out=t0)
            np.add(go, t0, out=go)
        self.apply_clip(go)
        fa(go, t0)
        np.copyto(t1, cn)
        ha(t1, t0)
        np.multiply(go, t1, out=hn)
        self.commit(v, [("hn", "h"), ("cn", "c")], mask, yt)
