"""The direct convolution kernel (csrc/direct_conv.c, its wide tile) under two or more builds of the native
library, in one process, the builds' calls interleaved: a kernel change measured where separate processes
on a shared machine are not comparable (their figures drift 10-30% within minutes).

    .venv/bin/python benchmarks/direct_conv_builds.py --builds OLD.so NEW.so [--shapes 96x24x40x240,96x32x40x240]
                                                      [--reps 20]

A build is a _native_<level>.so (e.g. one built from an older commit: `git stash; GE_BUILD_LEVELS=v3 python
setup.py build_ext --inplace; cp core/kernels/_native_v3*.so /tmp/old.so; git stash pop`). Shapes are
CxOCxHxW of a 3x3 stride-1 convolution with its padding (DBNet's head: 96x24x40x240), run as ge's NCHW plan
runs it: the padded input in place, the weights packed for the wide tile. One thread; each build's least and
median CPU time of a call, and its largest difference from numpy's product. Not a test.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from ge.core.kernels import native
from ge.core.kernels.native.calls import set_threads


def layer(c: int, oc: int, h: int, w: int, rng):
    """The padded input, the taps' offsets into it, the weights (OC, C*9) and numpy's result."""
    pitch = w + 2
    x = np.zeros((c, h + 2, pitch), np.float32)
    x[:, 1:-1, 1:-1] = rng.standard_normal((c, h, w))
    koff = np.array([ci * (h + 2) * pitch + kh * pitch + kw for ci in range(c) for kh in range(3) for kw in range(3)],
                    np.int64)
    weights = (rng.standard_normal((oc, c * 9)) * 0.1).astype(np.float32)
    pixels = (np.arange(h)[:, None] * pitch + np.arange(w)[None, :]).ravel()
    expected = weights @ x.ravel()[koff[:, None] + pixels[None, :]]
    return x, koff, weights, expected


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--builds", nargs="+", required=True, metavar="LIB")
    ap.add_argument("--shapes", default="96x24x40x240,96x32x40x240,96x40x40x240")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    nats = [native.load(path) for path in args.builds]
    set_threads(1)
    rng = np.random.default_rng(0)
    print(f"load average {open('/proc/loadavg').read().split()[:3]}; builds: " +
          ", ".join(f"{i}: {p}" for i, p in enumerate(args.builds)))
    for shape in args.shapes.split(","):
        c, oc, h, w = map(int, shape.split("x"))
        x, koff, weights, expected = layer(c, oc, h, w, rng)
        calls, outputs = [], []
        for nat in nats:
            packed, y = nat.pack_direct(weights, True), np.zeros((oc, h * w), np.float32)
            outputs.append((y, packed))
            calls.append(nat.conv_direct_call(x.ctypes.data, koff, packed, y.ctypes.data, m=oc, k=c * 9, rows=h,
                                              width=w, pitch=w + 2, ldy=h * w, wide=True))
        times = [[] for _ in calls]
        for _ in range(args.reps):
            for call, ts in zip(calls, times):
                t0 = time.thread_time()
                call.run()
                ts.append(time.thread_time() - t0)
        print(f"{shape}: " + "; ".join(
            f"build {i} {min(ts) * 1e3:.2f} ms (median {statistics.median(ts) * 1e3:.2f}, "
            f"max diff {np.abs(y - expected).max():.1e})" for i, (ts, (y, _)) in enumerate(zip(times, outputs))))


if __name__ == "__main__":
    main()
