"""float16 exports against their float32 builds: ge fp16, ge fp32 and onnxruntime fp16 in one run.

    python benchmarks/float16_models.py [--only mobilenetv2,bert] [--rounds 5] [--runs 20]

The samples' float16 exports (samples/build_samples.py: mobilenetv2_fp16_style, bert_fp16_style,
onnxruntime's float16 converter with keep_io_types) and the float32 models they come from, compiled
by ge (cpu device); every engine on one thread (ge's native kernels and OpenBLAS, onnxruntime's
intra-op pool), latencies in CPU time of the process (steady on a shared machine). Rounds alternate
the engines' order; a round's figure is the median of its runs, the table shows the median over
rounds.

Then the error each fp16 engine makes against the float32 parent (onnxruntime's float32 run of it,
the same for both): the mean and the worst absolute difference over all outputs, ge's beside
onnxruntime's, and their ratio (issue 32: ge's at or below onnxruntime's). ge rounds each op's
output to float16 as the graph says; onnxruntime's CPU runs most fp16 ops in float32 between Casts.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

from ge.core import api
from ge.core.kernels import blas

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from samples_vs_onnxruntime import feeds_for, load_samples  # noqa: E402

MODELS = {"mobilenetv2": ("mobilenetv2_style", "mobilenetv2_fp16_style", None),
          "bert": ("bert_style", "bert_fp16_style", "input_ids:1,128;attention_mask:1,128")}


def cpu_ms(fn, runs: int) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times) * 1e3


def ort_run(path: str, feeds: dict, runs: int) -> tuple[float, list]:
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 1, 1
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    ms = cpu_ms(lambda: session.run(None, feeds), runs)
    outs = session.run(None, feeds)
    del session  # its threads must not spin while ge runs
    gc.collect()
    return ms, outs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default=",".join(MODELS))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    samples = load_samples()
    blas.set_local_threads(1)
    print(f"python benchmarks/float16_models.py --only {args.only} --rounds {args.rounds} --runs {args.runs}: "
          "one thread per engine, ms of CPU time, median over rounds")
    print(f"{'model':<13}{'ge fp16':>9}{'ge fp32':>9}{'ort fp16':>9}{'fp16/fp32':>11}{'fp16/ort':>10}"
          f"{'|fp16-fp32|':>13}{'|ge-ort| fp16':>15}")
    errors = {}
    with tempfile.TemporaryDirectory(prefix="ge_fp16_") as tmp:
        for key in args.only.split(","):
            fp32_name, fp16_name, spec = MODELS[key]
            ids, paths = {}, {}
            for tag, name in (("fp32", fp32_name), ("fp16", fp16_name)):
                paths[tag] = os.path.join(tmp, f"{name}.onnx")
                onnx.save(getattr(samples, name)(), paths[tag])
                om = api.atc(paths[tag], os.path.join(tmp, name), input_shape=spec).om_path
                ids[tag] = api.load_from_file(om, "cpu")
            model = onnx.load(paths["fp16"], load_external_data=False)
            shapes = {d.name: list(d.shape) for d in api.model(ids["fp16"]).inputs}
            feeds = feeds_for(model, shapes)
            inputs = {t: [feeds[d.name] for d in api.model(i).inputs] for t, i in ids.items()}
            figures = {"ge fp16": [], "ge fp32": [], "ort fp16": []}
            for r in range(args.rounds):
                order = list(figures) if r % 2 == 0 else list(figures)[::-1]
                for engine in order:
                    if engine == "ort fp16":
                        ms, ort_outs = ort_run(paths["fp16"], feeds, args.runs)
                    else:
                        mid = ids[engine[-4:]]
                        ms = cpu_ms(lambda: api.execute(mid, inputs[engine[-4:]]), args.runs)
                    figures[engine].append(ms)
            out16 = api.execute(ids["fp16"], inputs["fp16"])
            out32 = api.execute(ids["fp32"], inputs["fp32"])
            d32 = max(float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(out16, out32))
            dort = max(float(np.max(np.abs(np.asarray(a, np.float64) - b))) for a, b in zip(out16, ort_outs))
            med = {e: statistics.median(v) for e, v in figures.items()}
            print(f"{key:<13}{med['ge fp16']:>9.2f}{med['ge fp32']:>9.2f}{med['ort fp16']:>9.2f}"
                  f"{med['ge fp16'] / med['ge fp32']:>11.2f}{med['ge fp16'] / med['ort fp16']:>10.2f}"
                  f"{d32:>13.4g}{dort:>15.4g}", flush=True)
            parent = ort_run(paths["fp32"], {d.name: feeds[d.name] for d in api.model(ids["fp32"]).inputs}, 1)[1]
            errors[key] = (fp16_error(out16, parent), fp16_error(ort_outs, parent))
            for i in ids.values():
                api.unload(i)
    print("\nerror against the float32 parent (onnxruntime fp32), mean | worst absolute difference")
    print(f"{'model':<13}{'ge fp16':>22}{'ort fp16':>22}{'ge/ort mean':>13}{'ge/ort worst':>14}")
    for key, ((gm, gw), (om, ow)) in errors.items():
        print(f"{key:<13}{gm:>10.3g} | {gw:<9.3g}{om:>10.3g} | {ow:<9.3g}{gm / om:>13.2f}{gw / ow:>14.2f}")
    return 0


def fp16_error(outputs, parent) -> tuple[float, float]:
    """Mean and worst absolute difference over every output's elements."""
    diffs = np.concatenate([np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).ravel()
                            for a, b in zip(outputs, parent)])
    return float(diffs.mean()), float(diffs.max())


if __name__ == "__main__":
    sys.exit(main())
