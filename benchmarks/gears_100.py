"""ATC's limit of 100 gears, on the BERT-style sample (2 layers, hidden 128): one OM with 100
--dynamic_dims gears (batch 1..4 x sequence length 16..400 in steps of 16) against the same model
with 1 gear. What it shows: compile time per gear, OM and weight sizes (the gears share one copy
of the weights), load time and the loaded process's RSS, and the latency of a few gears beside
onnxruntime (intra_op_num_threads=2) on the same shapes.

    .venv/bin/python benchmarks/gears_100.py [--reps 20]

Not a test (tests/e2e/test_gears_100.py checks the results).
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import numpy as np
import onnx

from ge.core import api

from dynamic_shapes import median_ms, ort_ms, samples

GEARS = [(b, s) for b in range(1, 5) for s in range(16, 401, 16)]  # 4 x 25 = 100


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="ge_gears100_")
    path = os.path.join(tmp, "bert.onnx")
    onnx.save(samples().bert_style(layers=2, hidden=128, heads=2, intermediate=512, vocab=1000), path)
    shape = "input_ids:-1,-1;attention_mask:-1,-1"
    oms = {}
    for label, gears in (("1 gear", GEARS[:1]), ("100 gears", GEARS)):
        t = time.perf_counter()
        result = api.atc(path, os.path.join(tmp, label.replace(" ", "_")), input_shape=shape,
                         dynamic_dims=";".join(f"{b},{s},{b},{s}" for b, s in gears))
        seconds = time.perf_counter() - t
        oms[label] = result.om_path
        print(f"{label:>9}: compiled in {seconds:6.2f} s ({seconds / len(gears) * 1e3:5.0f} ms per gear), "
              f"OM {os.path.getsize(result.om_path) / 2**20:6.2f} MiB, shared weights "
              f"{result.model.weight_size / 2**20:5.2f} MiB")
    before = rss_mib()
    t = time.perf_counter()
    model_id = api.load_from_file(oms["100 gears"], "cpu")
    load_ms = (time.perf_counter() - t) * 1e3
    print(f"100 gears: loaded in {load_ms:.0f} ms, RSS +{rss_mib() - before:.1f} MiB "
          f"(peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB)")
    rng = np.random.default_rng(0)
    rows = []
    for b, s in ((1, 16), (2, 128), (4, 400)):
        feeds = {"input_ids": rng.integers(0, 1000, (b, s), dtype=np.int64),
                 "attention_mask": np.ones((b, s), np.int64)}
        ge = median_ms(lambda: api.execute(model_id, feeds), args.reps)
        rows.append((b, s, ge, feeds))
    api.unload(model_id)
    print(f"{'batch x seq':>12} {'ge ms':>8} {'ort ms':>8} {'ge/ort':>7}")
    for b, s, ge, feeds in rows:
        ort = ort_ms(path, feeds, args.reps)
        print(f"{f'{b} x {s}':>12} {ge:8.2f} {ort:8.2f} {ge / ort:7.2f}")


if __name__ == "__main__":
    main()
