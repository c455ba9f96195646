"""float16 <-> float32 conversion per element: numpy's cast beside ge's native conversion
(csrc/convert.c, what the float16 adapter of core/kernels/float16.py uses) at each level this CPU runs.

    python benchmarks/float16_convert.py [--sizes 4096,65536,1048576,16777216] [--repeats 30]

For each size and direction: the best of --repeats calls, in ns per element, numpy's astype into a
preallocated array (np.copyto) and each native level with 1 thread and with every core. Rounds of
all the candidates alternate, so a load spike on a shared machine moves them alike.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from ge.core.kernels import native as native_mod


def best_ns(fn, n: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter_ns()
        fn()
        best = min(best, time.perf_counter_ns() - t)
    return best / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="4096,65536,1048576,16777216")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    flags = native_mod.cpu_flags()
    libs = {name: native_mod.load_level(name) for name in native_mod.built_levels()
            if flags is None or next(lv for lv in native_mod.native_levels.levels_for(__import__("platform").machine())
                                     if lv.name == name).needs <= flags}
    cores = native_mod.default_threads()
    print(f"ns per element (best of {args.repeats}); native: 1 thread / {cores} threads")
    print(f"{'direction':<12} {'elements':>10} {'numpy':>7} " + " ".join(f"{n:>14}" for n in libs))
    for n in (int(s) for s in args.sizes.split(",")):
        h = np.random.default_rng(0).standard_normal(n).astype(np.float16)
        f, h2 = h.astype(np.float32), np.empty(n, np.float16)
        for direction, src, dst, method in (("f16->f32", h, np.empty(n, np.float32), "half_to_float"),
                                            ("f32->f16", f, h2, "float_to_half")):
            cells = [best_ns(lambda: np.copyto(dst, src, casting="unsafe"), n, args.repeats)]
            for lib in libs.values():
                for t in (1, cores):
                    native_mod.set_threads(t)
                    call = getattr(lib, method)
                    cells.append(best_ns(lambda: call(src, dst), n, args.repeats))
            native = " ".join(f"{cells[1 + 2 * i]:>6.3f}/{cells[2 + 2 * i]:<7.3f}" for i in range(len(libs)))
            print(f"{direction:<12} {n:>10} {cells[0]:>7.3f} {native}")


if __name__ == "__main__":
    main()
