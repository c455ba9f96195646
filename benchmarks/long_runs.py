"""Long runs: does resident memory stay flat when a server loads, runs and unloads models for days?

For a static MobileNetV2, a range BERT-small, a gear BERT-small (batch 1, 2, 4) and a hybrid
model with a data-dependent shape (Conv -> NonZero -> Gather), each in a fresh process:
- `--loads` cycles of load, one execution, unload: the RSS slope in MiB per 1000 loads after
  warm-up (the first quarter), and how much of a loaded model's RSS is still held after its
  unload (`kept`, median over the cycles);
- `--runs` executions of one loaded model: the RSS slope in MiB per 1000 runs after warm-up.
`--trim` also calls glibc's malloc_trim(0) after each unload, to show what the allocator keeps.

    python benchmarks/long_runs.py [--loads 200] [--runs 3000] [--models static,range,gears,hybrid] [--trim]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "samples"))

BERT_SEQ = 16


def nonzero_model() -> onnx.ModelProto:
    """image [1, 3, 16, 16] -> Conv 3x3 (4) -> Relu -> NonZero -> the nonzero positions gathered
    from a [16, 64] table: an output whose shape only the data decides."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    table = rng.standard_normal((16, 64)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["image", "w"], ["c"], "conv", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"], "relu"),
             helper.make_node("NonZero", ["r"], ["nz"], "nonzero"),
             helper.make_node("Gather", ["table", "nz"], ["out"], "gather", axis=0)]
    graph = helper.make_graph(nodes, "nonzero", [helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(table, "table")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def build(kind: str, folder: str) -> str:
    """Compile the model of `kind` into `folder`; the OM's path."""
    import build_samples
    from ge.core import api
    onnx_model, options = {
        "static": (build_samples.mobilenetv2_style, {"input_shape": "image:1,3,224,224"}),
        "range": (build_samples.bert_style, {"input_shape_range": "input_ids:[1,1~64];attention_mask:[1,1~64]"}),
        "gears": (build_samples.bert_style, {"input_shape": f"input_ids:-1,{BERT_SEQ};attention_mask:-1,{BERT_SEQ}",
                                             "dynamic_batch_size": "1,2,4"}),
        "hybrid": (nonzero_model, {"static_model_ops_lower_limit": 1}),
    }[kind]
    path = os.path.join(folder, f"{kind}.onnx")
    onnx.save(onnx_model(), path)
    return api.atc(path, os.path.join(folder, kind), **options).om_path


def feeds(kind: str, k: int) -> dict:
    rng = np.random.default_rng(k)
    if kind == "static":
        return {"image": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)}
    if kind == "hybrid":
        return {"image": rng.standard_normal((1, 3, 16, 16)).astype(np.float32)}
    batch, seq = ((1, 1 + k % 64) if kind == "range" else ((1, 2, 4)[k % 3], BERT_SEQ))  # shapes vary run to run
    return {"input_ids": rng.integers(0, 1000, (batch, seq), dtype=np.int64), "attention_mask": np.ones((batch, seq), np.int64)}


def slope(values: list[float]) -> float:
    """MiB per 1000 steps of a least-squares line through `values` (MiB), after the first quarter."""
    ys = np.asarray(values[len(values) // 4:])
    return float(np.polyfit(np.arange(len(ys)), ys, 1)[0] * 1000) if len(ys) > 1 else 0.0


def worker(kind: str, om: str, loads: int, runs: int, trim: bool) -> dict:
    from ge.core import api
    from ge.core.runtime.davinci_model import host_rss
    malloc_trim = ctypes.CDLL(None).malloc_trim if trim else (lambda pad: None)
    mib = lambda: host_rss() / 2 ** 20  # noqa: E731
    after_load, after_unload, kept = [], [], []
    for k in range(loads):
        before = mib()
        model_id = api.load_from_file(om)
        api.execute(model_id, feeds(kind, k))
        loaded = mib()
        api.unload(model_id)
        malloc_trim(0)
        after_load.append(loaded)
        after_unload.append(mib())
        kept.append((after_unload[-1] - before) / max(loaded - before, 1e-9))
    model_id = api.load_from_file(om)
    during = []
    for k in range(runs):
        api.execute(model_id, feeds(kind, k))
        if k % 10 == 9:
            during.append(mib())
    api.unload(model_id)
    return {"model": kind, "trim": trim, "loads": loads, "runs": runs, "rss_first": after_unload[0],
            "rss_last": after_unload[-1], "rss_loaded": float(np.median(after_load)),
            "load_slope": slope(after_unload), "kept": float(np.median(kept)),
            "run_slope": slope(during) / 10 if during else 0.0}  # (sampled every 10 runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=200)
    ap.add_argument("--runs", type=int, default=3000)
    ap.add_argument("--models", default="static,range,gears,hybrid")
    ap.add_argument("--trim", action="store_true", help="also measure with malloc_trim(0) after each unload")
    ap.add_argument("--worker", nargs=3, metavar=("KIND", "OM", "TRIM"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        kind, om, trim = args.worker
        print(json.dumps(worker(kind, om, args.loads, args.runs, trim == "1")))
        return
    print(f"{'model':8} {'trim':5} {'loads':>6} {'MiB/1000 loads':>15} {'kept':>6} {'runs':>6} {'MiB/1000 runs':>14} "
          f"{'RSS loaded':>11} {'RSS first->last unloaded':>25}")
    with tempfile.TemporaryDirectory() as folder:
        for kind in args.models.split(","):
            om = build(kind, folder)
            for trim in (False, True) if args.trim else (False,):
                cmd = [sys.executable, __file__, "--loads", str(args.loads), "--runs", str(args.runs),
                       "--worker", kind, om, "1" if trim else "0"]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                print(f"{kind:8} {'yes' if trim else 'no':5} {r['loads']:6} {r['load_slope']:15.2f} {r['kept']:6.0%} "
                      f"{r['runs']:6} {r['run_slope']:14.2f} {r['rss_loaded']:8.0f} MiB "
                      f"{r['rss_first']:14.0f} -> {r['rss_last']:.0f} MiB")


if __name__ == "__main__":
    main()
