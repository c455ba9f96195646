"""External weights on the full-size ResNet-50-style sample: ATC time, load time, OM size and
weight-file bytes for --external_weight 0, 1 and 2, in one run.

    python benchmarks/external_weights.py [--repeat 3] [--devices cpu,sim]

ATC time is api.atc from the ONNX file into a fresh folder (import, passes, build, externalize,
weight files, OM). Load time is api.load_from_file (read the OM, DavinciModel.init) followed by
unload; the first load of each mode is a warm-up, so the files are in the page cache for every mode
alike. Modes 1 and 2 load with the sha256 check on, and again with it off (verify_weights=False).
Medians over --repeat runs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import onnx

from ge.core import api

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from samples_vs_onnxruntime import load_samples  # noqa: E402


def median_s(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def load_s(om: str, device: str, repeat: int, verify: bool = True) -> float:
    def once():
        api.unload(api.load_from_file(om, device, verify_weights=verify))
    once()  # warm-up: page cache, kernel imports
    return median_s(once, repeat)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--devices", default="cpu,sim")
    args = parser.parse_args(argv)
    devices = [d for d in args.devices.split(",") if d]

    with tempfile.TemporaryDirectory() as tmp:
        onnx_path = os.path.join(tmp, "resnet50.onnx")
        onnx.save(load_samples().resnet50_style(), onnx_path)
        rows = []
        for mode in (0, 1, 2):
            runs = iter(range(10 ** 6))
            last = {}

            def compile_once():
                out = os.path.join(tmp, f"m{mode}_{next(runs)}", "resnet50")
                last["result"] = api.atc(onnx_path, out, external_weight=mode)
            atc = median_s(compile_once, args.repeat)
            result = last["result"]
            weight_dir = os.path.join(os.path.dirname(result.om_path), "weight")
            files = [f for f in os.listdir(weight_dir) if not f.startswith("meta.json")] if mode else []
            row = {"mode": mode, "atc s": atc, "OM bytes": os.path.getsize(result.om_path), "files": len(files),
                   "file bytes": sum(os.path.getsize(os.path.join(weight_dir, f)) for f in files)}
            for device in devices:
                row[f"load {device} ms"] = load_s(result.om_path, device, args.repeat) * 1e3
                if mode:
                    row[f"load {device} no-sha ms"] = load_s(result.om_path, device, args.repeat, verify=False) * 1e3
            rows.append(row)

    columns = ["mode", "atc s", "OM bytes", "files", "file bytes"]
    columns += [c for d in devices for c in (f"load {d} ms", f"load {d} no-sha ms")]
    print(f"ResNet-50-style (224x224, width 64), median of {args.repeat}; python {sys.version.split()[0]}")
    print(" | ".join(f"{c:>16}" for c in columns))
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c, "-")
            cells.append(f"{v:>16.3f}" if isinstance(v, float) else f"{v:>16}")
        print(" | ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
