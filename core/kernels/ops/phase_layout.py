"""The phase layout: a padded input split by stride phase, each phase flattened, so that the inputs
under one kernel tap are a matrix with unit stride (the conv "taps" plan, the native fill and the
depthwise kernel read it)."""
from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .windows import spatial_slices


#: a 1-D layout of at most this many elements is filled through two precomputed index passes: the
#: few copies of the slicing fill cost microseconds of Python each, a small conv's whole run (a
#: streaming model's 1-D convs over a few frames: 4.7-7.5 us a fill, 0.8-3.8 us indexed)
INDEXED_FILL = 1 << 14


def phase_layout(nb, c, spatial, pb, strides, kernel, dil, out, dtype) -> "PhaseLayout":
    """PhaseLayout(...), one instance per geometry: a layout is read-only once built, the compiler plans
    each conv several times (shape inference, the model's kernel, the numpy plan's workspace) and a
    CNN repeats a few geometries."""
    return _layout(nb, c, tuple(spatial), tuple(pb), tuple(strides), tuple(kernel), tuple(dil), tuple(out),
                   np.dtype(dtype))


class PhaseLayout:
    """The padded input, split into its stride phases (prod(strides) of them; one for stride 1), each phase
    a dense (nb, C, *Sq) block with one slack row, so that the inputs under one kernel position are a view
    with unit stride along the flattened output.

    Coordinate u (padded) = q * s + r: phase r, position q. A kernel tap k reads phase (k*dil) % s at
    offset (k*dil) // s. Over the "flat" output index (o0 * prod(Sq[1:]) + o1 * prod(Sq[2:]) + ...) every
    tap is a contiguous run of L = O0 * prod(Sq[1:]) elements: the columns past O[d] in the inner dims
    are garbage that the consumer drops. Every element of the buffer is written (input or zero) on
    fill(), so the garbage is finite.
    """

    def __init__(self, nb, c, spatial, pb, strides, kernel, dil, out, dtype):
        self.nb, self.c, self.spatial, self.pb, self.strides = nb, c, list(spatial), list(pb), list(strides)
        self.kernel, self.dil, self.out = list(kernel), list(dil), list(out)
        d = len(spatial)
        offmax = [((k - 1) * v) // s for k, v, s in zip(kernel, dil, strides)]
        sq = [o + m for o, m in zip(out, offmax)]
        sq[0] += 1  # slack: the last run of a tap may spill into one more row
        self.sq = sq
        self.pst = [math.prod(sq[i + 1:]) for i in range(d)]  # element strides inside one phase
        self.phase_count = math.prod(strides)
        self.phase_shape = tuple(strides) + (nb, c) + tuple(sq)
        self.L = out[0] * self.pst[0]
        self.dense = math.prod(out)
        self.waste = self.L / self.dense
        self.itemsize = np.dtype(dtype).itemsize
        # fill plan per phase: the interior copied from x, the rest zeroed
        self.fill_plan = []
        for r in itertools.product(*[range(s) for s in strides]):
            dst, src, ok = [], [], True
            for i in range(d):
                s, p = strides[i], pb[i]
                q_lo = max(0, -((r[i] - p) // s))  # first q with q*s + r - p >= 0
                q_hi = min(sq[i], (spatial[i] - 1 + p - r[i]) // s + 1)  # past the last q inside x
                if q_hi <= q_lo:
                    ok = False
                    dst.append((0, 0))
                    src.append(slice(0, 0))
                    continue
                x0 = q_lo * s + r[i] - p
                dst.append((q_lo, q_hi))
                src.append(slice(x0, x0 + (q_hi - q_lo - 1) * s + 1, s))
            self.fill_plan.append((r, dst, src, ok))
        # kernel taps grouped by phase: (cols slices over the kernel dims, phase, element offset, counts,
        # element strides over the taps)
        self.groups = []
        for r in itertools.product(*[range(s) for s in strides]):
            ksl, cnt, kst, off = [], [], [], 0
            for i in range(d):
                ks = [k for k in range(kernel[i]) if (k * dil[i]) % strides[i] == r[i]]
                if not ks:
                    break
                g = math.gcd(dil[i], strides[i])
                kstep = strides[i] // g
                ksl.append(slice(ks[0], ks[-1] + 1, kstep))
                cnt.append(len(ks))
                kst.append((dil[i] // g) * self.pst[i])
                off += ((ks[0] * dil[i]) // strides[i]) * self.pst[i]
            else:
                self.groups.append((tuple(ksl), r, off, tuple(cnt), tuple(kst)))
        self.line_index = self._line_index() if d == 1 and math.prod(self.phase_shape) <= INDEXED_FILL else None
        self.taps = []
        for k in itertools.product(*[range(v) for v in kernel]):
            r = tuple((kk * v) % s for kk, v, s in zip(k, dil, strides))
            off = sum(((kk * v) // s) * p for kk, v, s, p in zip(k, dil, strides, self.pst))
            self.taps.append((k, r, off))

    def fill(self, ph: np.ndarray, x: np.ndarray) -> None:
        """Write the padded input into its phases: the input where it lands, zeros elsewhere."""
        if len(self.spatial) == 1:
            return self._fill_line(ph, x)
        for r, dst, src, ok in self.fill_plan:
            p = ph[r]
            if not ok:
                p[...] = 0
                continue
            for i, (lo, hi) in enumerate(dst):
                if lo:
                    p[spatial_slices(p.ndim, 2 + i, slice(0, lo))] = 0
                if hi < self.sq[i]:
                    p[spatial_slices(p.ndim, 2 + i, slice(hi, None))] = 0
            inner = (slice(None), slice(None)) + tuple(slice(lo, hi) for lo, hi in dst)
            np.copyto(p[inner], x[(slice(None), slice(None)) + tuple(src)])

    def _line_index(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For a small 1-D layout: the flat indices of ph that are padding, and those that take x, with
        the flat indices of x they take (phase r, position q holds the padded coordinate q * s + r)."""
        s, lines, sq, width = self.strides[0], self.nb * self.c, self.sq[0], self.spatial[0]
        u = np.arange(sq)[None, :] * s + np.arange(s)[:, None] - self.pb[0]  # (r, q): x's coordinate
        line = np.arange(lines)[None, :, None]
        dst = (np.arange(s)[:, None, None] * lines + line) * sq + np.arange(sq)[None, None, :]  # (r, line, q)
        src = line * width + np.clip(u, 0, width - 1)[:, None, :]
        inside = np.broadcast_to(((u >= 0) & (u < width))[:, None, :], dst.shape)
        return dst[~inside], dst[inside], src[inside]

    def _fill_line(self, ph: np.ndarray, x: np.ndarray) -> None:
        """fill() of a 1-D layout: small ones through their index (line_index); otherwise in at most
        seven copies whatever the stride (a loop over phases costs a few copies per phase, 128 phases
        for an STFT's hop): phase r, position q holds the padded coordinate u = q * s + r, so ph seen
        as (nb, C, sq, s) is the padded line in rows of s."""
        if self.line_index is not None and ph.shape == self.phase_shape and x.shape == (self.nb, self.c, self.spatial[0]) \
                and ph.flags.c_contiguous and x.flags.c_contiguous:  # (not a batch chunk's part of ph)
            zero, dst, src = self.line_index
            flat = ph.reshape(-1)
            flat[zero] = 0
            flat[dst] = x.reshape(-1)[src]
            return
        size = self.sq[0] * self.strides[0]
        rows = ph.transpose(1, 2, 3, 0)
        start = min(self.pb[0], size)
        end = min(self.pb[0] + x.shape[-1], size)
        _put_line(rows, 0, start, None)
        _put_line(rows, start, end, x[..., :end - start])
        _put_line(rows, end, size, None)

    def _flat(self, ph, r, off):
        p = ph[r].reshape(self.nb, self.c, -1)
        return p[:, :, off:]

    def group_views(self, ph, flat: bool):
        """Per phase group: (kernel-dims slices of cols, view (nb, C, *counts, L) or (nb, C, *counts, *out))."""
        isz = self.itemsize
        res = []
        for ksl, r, off, cnt, kst in self.groups:
            base = self._flat(ph, r, off)
            st = base.strides[:2] + tuple(k * isz for k in kst)
            if flat:
                v = as_strided(base, base.shape[:2] + cnt + (self.L,), st + (isz,), writeable=False)
            else:
                v = as_strided(base, base.shape[:2] + cnt + tuple(self.out),
                               st + tuple(p * isz for p in self.pst), writeable=False)
            res.append((ksl, v))
        return res

    def dense_view(self, flat: np.ndarray) -> np.ndarray:
        """The (nb, OC, *out) view of a (nb, OC, L) flat result without the garbage columns."""
        nb, oc = flat.shape[:2]
        full = flat.reshape((nb, oc, self.out[0]) + tuple(self.sq[1:]))
        return full[(slice(None), slice(None), slice(None)) + tuple(slice(0, o) for o in self.out[1:])]


def _put_line(rows: np.ndarray, a: int, b: int, src: np.ndarray | None) -> None:
    """Padded coordinates [a, b) of `rows` (..., q, r: u = q * s + r) := src (..., b - a), or zero:
    the partial first row, the whole rows (src split into rows of s: a view), the partial last row."""
    if b <= a:
        return
    s = rows.shape[-1]
    (qa, ra), (qb, rb) = divmod(a, s), divmod(b, s)
    if qa == qb:
        rows[..., qa, ra:rb] = 0 if src is None else src
        return
    done = 0
    if ra:
        rows[..., qa, ra:] = 0 if src is None else src[..., :s - ra]
        qa, done = qa + 1, s - ra
    if qb > qa:
        n = (qb - qa) * s
        rows[..., qa:qb, :] = 0 if src is None else src[..., done:done + n].reshape(src.shape[:-1] + (qb - qa, s))
        done += n
    if rb:
        rows[..., qb, :rb] = 0 if src is None else src[..., done:]


#: (a layout holds lists of its geometry, and a small 1-D one its fill indices: at most ~400 KB)
_layout = lru_cache(maxsize=128)(PhaseLayout)
