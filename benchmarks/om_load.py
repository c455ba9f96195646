"""What an OM's validation costs `ge run`'s load: ResNet-50 loaded with and without the checks
that tie a stored task to its op's spec (attribute types, the kernel's own output metas against
the declared ones, model I/O arguments against their descs), each load in a fresh process,
alternating, median over rounds. Also how much of the load the OM reader takes (checksums and
the schema validation of every field).

    python benchmarks/om_load.py [--rounds 7] [--model resnet50|bert]

Prints one row per configuration and the overhead of the checks in percent (issue 18's budget: 5%).
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


def worker(om: str, checks: bool) -> dict:
    from ge.core import api
    from ge.core.runtime import davinci_model, model_manager
    from ge.formats.om import reader
    if not checks:  # the same load without the checks issue 18 added on top of the reader's
        model_manager.check_model_tasks = lambda model, complete=False: None
        davinci_model.built_kernel = lambda where, build, declared: build()
        reader._check_io_args = lambda tasks, descs: None
    spent = [0.0]  # time in the checks themselves: their share of one load (less noisy than a difference)

    def timed(fn):
        def call(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[0] += time.perf_counter() - t
        return call
    if checks:
        model_manager.check_model_tasks = timed(model_manager.check_model_tasks)
        reader._check_io_args = timed(reader._check_io_args)
    t0 = time.perf_counter()
    m = reader.read_om(om)
    t1 = time.perf_counter()
    model_id = api.model_manager.load(m, "cpu", from_file=True)
    t2 = time.perf_counter()
    if checks:  # built_kernel's part: each kernel's infer() against its declared outputs, as at load
        t = time.perf_counter()
        for task in api.model(model_id).tasks:
            task.kernel.infer()
        spent[0] += time.perf_counter() - t
    api.unload(model_id)
    return {"read_s": t1 - t0, "load_s": t2 - t0, "checks_s": spent[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--model", default="resnet50", choices=("resnet50", "bert"))
    p.add_argument("--worker", nargs=2, metavar=("OM", "CHECKS"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(args.worker[0], args.worker[1] == "on")))
        return 0
    with tempfile.TemporaryDirectory(prefix="ge_om_load_") as tmp:
        om = build(args.model, tmp)
        results = {"on": [], "off": []}
        for n in range(args.rounds):
            for checks in (("on", "off") if n % 2 == 0 else ("off", "on")):
                out = subprocess.run([sys.executable, __file__, "--worker", om, checks], check=True,
                                     capture_output=True, text=True).stdout
                results[checks].append(json.loads(out.splitlines()[-1]))
    med = {k: {f: statistics.median(r[f] for r in v) for f in ("read_s", "load_s")} for k, v in results.items()}
    print(f"python benchmarks/om_load.py --model {args.model} --rounds {args.rounds}: api.load_from_file's work "
          "(read_om + load on cpu), a fresh process per load, median over rounds")
    print("| configuration | read_om (ms) | read + load (ms) |")
    print("| --- | --- | --- |")
    for k, label in (("off", "without the task checks"), ("on", "with the task checks (ge's default)")):
        print(f"| {label} | {med[k]['read_s'] * 1e3:.0f} | {med[k]['load_s'] * 1e3:.0f} |")
    overhead = med["on"]["load_s"] / med["off"]["load_s"] - 1
    share = statistics.median(r["checks_s"] / r["load_s"] for r in results["on"])
    print(f"task checks: {share * 100:.2f}% of the load measured inside it, {overhead * 100:+.1f}% as the "
          f"difference of the medians (noise included); budget 5%. The OM reader (checksums and schema "
          f"validation of every field) is {med['on']['read_s'] / med['on']['load_s'] * 100:.0f}% of the load")
    return 0


if __name__ == "__main__":
    sys.exit(main())
