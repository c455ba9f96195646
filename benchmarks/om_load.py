"""What an OM's validation costs `ge run`'s load (issue 18's budget: 5% on ResNet-50): the model
loaded by `api.load_from_file` in a fresh process per load, configurations alternating, median
over rounds; ge as it is, ge without the load-time task checks, and optionally another ge (a
checkout before the validation) as the baseline. Inside each load, the time spent decoding the
records with their cross-references (formats/om/reader.py `_model`) and checking the tasks
against their ops (core/runtime/task_check.py) is measured and given as a share of the load,
which the machine's noise does not blur as it does a difference of two medians.

    python benchmarks/om_load.py [--rounds 7] [--model resnet50|bert] [--baseline /path/to/python]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def build(model: str, folder: str) -> str:
    sys.path.insert(0, os.path.join(HERE, "..", "samples"))
    import build_samples
    import onnx
    from ge.core import api
    onnx_model = build_samples.resnet50_style() if model == "resnet50" else build_samples.bert_style()
    path = os.path.join(folder, f"{model}.onnx")
    onnx.save(onnx_model, path)
    shape = "" if model == "resnet50" else "input_ids:1,128;attention_mask:1,128"
    return api.atc(path, os.path.join(folder, model), input_shape=shape or None).om_path


def worker(om: str, config: str) -> dict:
    """One load in this process. config "on": ge as it is, timing its validation; "off": without
    the load-time task checks; "baseline": whatever ge this interpreter imports, untouched."""
    from ge.core import api
    from ge.formats.om import reader
    spent = {"decode_s": 0.0, "checks_s": 0.0}

    def timed(fn, key):
        def call(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[key] += time.perf_counter() - t
        return call
    if config != "baseline":
        from ge.core.runtime import davinci_model, model_manager
        if config == "off":
            model_manager.check_model_tasks = lambda model, complete=False: None
            davinci_model.built_kernel = lambda where, build, declared: build()
        else:  # the records decoded and cross-referenced (reader._model), the tasks against their ops
            reader._model = timed(reader._model, "decode_s")
            model_manager.check_model_tasks = timed(model_manager.check_model_tasks, "checks_s")
    t0 = time.perf_counter()
    model_id = api.load_from_file(om)
    t1 = time.perf_counter()
    if config == "on":  # built_kernel's part: each kernel's infer() against its declared outputs, as at load
        t = time.perf_counter()
        for task in api.model(model_id).tasks:
            task.kernel.infer()
        spent["checks_s"] += time.perf_counter() - t
    api.unload(model_id)
    return {"load_s": t1 - t0, **spent}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--model", default="resnet50", choices=("resnet50", "bert"))
    p.add_argument("--baseline", metavar="PYTHON", default=None,
                   help="also load with this interpreter's ge (e.g. a checkout before the validation)")
    p.add_argument("--worker", nargs=2, metavar=("OM", "CONFIG"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return 0
    configs = {"off": sys.executable, "on": sys.executable}
    if args.baseline:
        configs["baseline"] = args.baseline
    with tempfile.TemporaryDirectory(prefix="ge_om_load_") as tmp:
        om = build(args.model, tmp)
        results = {k: [] for k in configs}
        for n in range(args.rounds):
            order = list(configs) if n % 2 == 0 else list(configs)[::-1]
            for config in order:
                out = subprocess.run([configs[config], __file__, "--worker", om, config], check=True,
                                     capture_output=True, text=True).stdout
                results[config].append(json.loads(out.splitlines()[-1]))
    load = {k: statistics.median(r["load_s"] for r in v) for k, v in results.items()}
    print(f"python benchmarks/om_load.py --model {args.model} --rounds {args.rounds}: api.load_from_file (read_om "
          "+ load on cpu), a fresh process per load, median over rounds")
    print("| configuration | load (ms) |")
    print("| --- | --- |")
    labels = {"baseline": f"baseline ({args.baseline})", "off": "without the load-time task checks",
              "on": "ge as it is (records, cross-references, task checks)"}
    for k in configs:
        print(f"| {labels[k]} | {load[k] * 1e3:.0f} |")
    on = results["on"]
    decode = statistics.median(r["decode_s"] / r["load_s"] for r in on)
    checks = statistics.median(r["checks_s"] / r["load_s"] for r in on)
    print(f"validation measured inside each load: decoding the records with their cross-references "
          f"{decode * 100:.2f}%, checking the tasks against their ops {checks * 100:.2f}%, together "
          f"{(decode + checks) * 100:.2f}% of the load (budget 5%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
