"""Signal ops (speech front ends): DFT (17, 20), STFT, HannWindow, HammingWindow, BlackmanWindow,
MelWeightMatrix.

Complex values are ONNX's [..., 2] (real, imaginary) pairs; the planned output is viewed as complex and
numpy's FFT writes straight into it (`out=`). STFT frames are a strided view of the signal, windowed
into the workspace, then one batched FFT. Sizes that define output shapes (dft_length, axis, frame_step,
frame_length, window sizes, mel parameters) must be constants for infer().
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...model.ir import DTYPES, Meta
from ..planned import Scratch
from ..planned import PlannedKernel
from ..registry import register

FLOATS = (np.float32, np.float64)
COMPLEX = {np.dtype(np.float32): np.dtype(np.complex64), np.dtype(np.float64): np.dtype(np.complex128)}


def _int_const(k, i: int, what: str, default=None):
    if i >= len(k.inputs) or k.inputs[i] is None:
        if default is None:
            raise k.fail(f"input {i} ({what}) is missing")
        return default
    c = k.const(i, what)
    a = np.asarray(c)
    if a.size != 1:
        raise k.fail(f"{what} must be a scalar, got shape {a.shape}")
    return a.reshape(-1)[0].item()


def _as_complex(y: np.ndarray) -> np.ndarray:
    """The [..., 2] float output as a complex view [...]."""
    return y.view(COMPLEX[y.dtype])[..., 0]


def _signal(x: np.ndarray) -> np.ndarray:
    """[..., 1] real or [..., 2] complex input as a real or complex array [...]."""
    if x.shape[-1] == 1:
        return x[..., 0]
    x = np.ascontiguousarray(x)
    return x.view(COMPLEX[x.dtype])[..., 0]


class _Planned(PlannedKernel):
    """Output shape fixed in prepare(); compute() runs run() (PlannedKernel), needing no workspace."""


@register("DFT", since=17)
class DFT(_Planned):
    #: inputs read as constants: the hybrid executor builds the kernel on their values
    shape_inputs = ((1, "dft_length"), (2, "axis"))

    def prepare(self):
        xm = self.input_meta(0, "input")  # float32/float64 (float16 and bfloat16 come widened, float16.py)
        s = tuple(xm.shape)
        if len(s) < 2 or s[-1] not in (1, 2):
            raise self.fail(f"input has shape {s}; [..., signal, 1 or 2] expected")
        r = len(s)
        if self.opset >= 20:
            axis = _int_const(self, 2, "axis", -2)
        else:
            axis = int(self.attr("axis", 1))
        if not -r <= axis < r - 1 or axis % r == r - 1:
            raise self.fail(f"axis={axis} is out of range for input {s} (the last dim holds the complex parts)")
        self.axis = axis % r
        self.inverse = bool(int(self.attr("inverse", 0)))
        self.onesided = bool(int(self.attr("onesided", 0)))
        # inverse + onesided is the inverse real FFT: a half spectrum in, the real signal out ([..., 1])
        self.irfft = self.inverse and self.onesided
        if self.onesided and not self.irfft and s[-1] == 2:
            raise self.fail("onesided=1 needs a real input ([..., 1])")
        full = 2 * (s[self.axis] - 1) if self.irfft else s[self.axis]
        n = _int_const(self, 1, "dft_length", full) if len(self.inputs) > 1 and self.inputs[1] is not None \
            else full
        if n < 1:
            raise self.fail(f"dft_length={n} must be positive")
        self.n = int(n)
        bins = self.n // 2 + 1 if self.onesided and not self.irfft else self.n
        out = list(s)
        out[self.axis] = bins
        out[-1] = 1 if self.irfft else 2
        self.out_metas = [Meta(xm.dtype, tuple(out))]
        self.scratch = Scratch()

    def run(self, xs, ys, ws):
        sig = _signal(xs[0])
        ax = self.axis
        if self.irfft:
            np.copyto(ys[0][..., 0], np.fft.irfft(sig, n=self.n, axis=ax), casting="same_kind")
            return
        yc = _as_complex(ys[0])
        if self.onesided:
            np.fft.rfft(sig, n=self.n, axis=ax, out=yc)
        elif self.inverse:
            np.fft.ifft(sig, n=self.n, axis=ax, out=yc)
        else:
            np.fft.fft(sig, n=self.n, axis=ax, out=yc)


@register("STFT", since=17)
class STFT(_Planned):
    #: inputs read as constants: the hybrid executor builds the kernel on their values
    shape_inputs = ((1, "frame_step"), (3, "frame_length"))

    def prepare(self):
        xm = self.input_meta(0, "signal")  # float32/float64 (float16 and bfloat16 come widened, float16.py)
        s = tuple(xm.shape)
        if len(s) != 3 or s[-1] not in (1, 2):
            raise self.fail(f"signal has shape {s}; [batch, length, 1 or 2] expected")
        self.step = int(_int_const(self, 1, "frame_step"))
        wm = self.input_meta(2, "window", optional=True)
        fl = self.inputs[3] if len(self.inputs) > 3 else None
        if fl is not None:
            self.flen = int(_int_const(self, 3, "frame_length"))
        elif wm is not None:
            self.flen = int(wm.shape[0])
        else:
            raise self.fail("needs a window or a frame_length")
        if wm is not None and tuple(wm.shape) != (self.flen,):
            raise self.fail(f"window has shape {tuple(wm.shape)}, ({self.flen},) expected")
        if self.step < 1 or not 1 <= self.flen <= s[1]:
            raise self.fail(f"frame_step={self.step} and frame_length={self.flen} do not fit a signal of {s[1]}")
        self.onesided = bool(int(self.attr("onesided", 1)))
        if self.onesided and s[-1] == 2:
            raise self.fail("onesided=1 needs a real signal ([batch, length, 1])")
        self.frames = (s[1] - self.flen) // self.step + 1
        bins = self.flen // 2 + 1 if self.onesided else self.flen
        self.out_metas = [Meta(xm.dtype, (s[0], self.frames, bins, 2))]
        self.has_window = wm is not None
        self.complex_in = s[-1] == 2
        self.scratch = Scratch()
        self.scratch.add("f", (s[0], self.frames, self.flen), COMPLEX[xm.dtype] if self.complex_in else xm.dtype)

    def run(self, xs, ys, ws):
        sig = _signal(xs[0])  # [batch, length]
        b, st = sig.strides
        frames = as_strided(sig, (sig.shape[0], self.frames, self.flen), (b, st * self.step, st), writeable=False)
        f = self.views(ws)["f"]
        if self.has_window:
            np.multiply(frames, xs[2], out=f)
        else:
            np.copyto(f, frames)
        yc = _as_complex(ys[0])
        if self.onesided:
            np.fft.rfft(f, n=self.flen, axis=-1, out=yc)
        else:
            np.fft.fft(f, n=self.flen, axis=-1, out=yc)


class _Window(_Planned):
    #: inputs read as constants: the hybrid executor builds the kernel on their values
    shape_inputs = ((0, "size"),)

    def prepare(self):
        self.input_meta(0, "size")
        self.size = int(_int_const(self, 0, "size"))
        if self.size < 0:
            raise self.fail(f"size={self.size} is negative")
        odt = int(self.attr("output_datatype", 1))
        dt = DTYPES.get(odt)
        if dt is None:
            raise self.fail(f"output_datatype={odt} is not supported")
        self.periodic = int(self.attr("periodic", 1))
        self.out_metas = [Meta(dt, (self.size,))]
        self.scratch = Scratch()
        self.values = self.window(self.size).astype(dt)

    def window(self, size) -> np.ndarray:
        n = np.arange(size, dtype=np.float64)
        N = size if self.periodic else size - 1
        c = 2 * np.pi * n / N if N > 0 else np.zeros(size)
        return self.formula(c)

    def run(self, xs, ys, ws):
        np.copyto(ys[0], self.values)


@register("HannWindow", since=17)
class HannWindow(_Window):
    def formula(self, c):
        return 0.5 - 0.5 * np.cos(c)


@register("HammingWindow", since=17)
class HammingWindow(_Window):
    def formula(self, c):
        a0 = 25 / 46
        return a0 - (1 - a0) * np.cos(c)


@register("BlackmanWindow", since=17)
class BlackmanWindow(_Window):
    def formula(self, c):
        return 0.42 - 0.5 * np.cos(c) + 0.08 * np.cos(2 * c)


@register("MelWeightMatrix", since=17)
class MelWeightMatrix(_Planned):
    """[dft_length // 2 + 1, num_mel_bins] triangular filters on the mel scale, as ONNX's definition."""
    shape_inputs = ((0, "num_mel_bins"), (1, "dft_length"), (2, "sample_rate"), (3, "lower_edge_hertz"),
                    (4, "upper_edge_hertz"))

    def prepare(self):
        def num(i, what):
            if i >= len(self.inputs) or self.inputs[i] is None:
                raise self.fail(f"input {i} ({what}) is missing")
            a = np.asarray(self.const(i, what))
            if a.size != 1:
                raise self.fail(f"{what} must be a scalar, got shape {a.shape}")
            return a.reshape(-1)[0].item()

        mel, dft = int(num(0, "num_mel_bins")), int(num(1, "dft_length"))
        rate = int(num(2, "sample_rate"))
        lo, hi = float(num(3, "lower_edge_hertz")), float(num(4, "upper_edge_hertz"))
        if mel < 1 or dft < 1 or rate < 1 or not 0 <= lo < hi:
            raise self.fail(f"num_mel_bins={mel}, dft_length={dft}, sample_rate={rate}, edges [{lo}, {hi}] are invalid")
        odt = int(self.attr("output_datatype", 1))
        dt = DTYPES.get(odt)
        if dt is None:
            raise self.fail(f"output_datatype={odt} is not supported")
        spec = dft // 2 + 1
        to_mel = lambda hz: 2595 * math.log10(1 + hz / 700)  # noqa: E731
        lmel, hmel = to_mel(lo), to_mel(hi)
        step = (hmel - lmel) / (mel + 2)
        hz = 700 * (10 ** ((lmel + step * np.arange(mel + 2)) / 2595) - 1)
        bins = np.floor((dft + 1) * hz / rate).astype(np.int64)
        left, center, right = bins[:-2], bins[1:-1], bins[2:]
        j = np.arange(spec).reshape(-1, 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where((j >= left) & (j < center), (j - left) / np.maximum(center - left, 1), 0.0)
            down = np.where((j > center) & (j < right), (right - j) / np.maximum(right - center, 1), 0.0)
        w = np.where(j == center, 1.0, up + down)  # the peak of each triangle is 1
        self.values = w.astype(dt)
        self.out_metas = [Meta(dt, (spec, mel))]
        self.scratch = Scratch()

    def run(self, xs, ys, ws):
        np.copyto(ys[0], self.values)
