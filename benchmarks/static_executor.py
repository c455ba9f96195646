"""Host cost of one execution: the sunk task list vs launching every task from the host.

    python benchmarks/static_executor.py [--runs 50]

On a chain of 1,000 small ops and on the ResNet-50-style sample: microseconds per node for
ge's sunk path (address refresh only, the device walks prepared tasks), ge's per-task-launch
mode (each task's arguments resolved and launched from the host every run: GE's per-task launch,
which task sink replaces) and onnxruntime on the same model. Then the host memory that Shrink() gives back after
loading the ResNet-50-style sample.
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
from onnx import TensorProto, helper, numpy_helper

from ge.core import api
from ge.core.runtime.davinci_model import host_rss

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from samples_vs_onnxruntime import load_samples, onnxruntime_ms  # noqa: E402


def chain(n: int = 1000, width: int = 16) -> onnx.ModelProto:
    """x -> Add(w0) -> Mul(w1) -> Add(w2) -> ...: n tasks (compiled with fuse_elementwise off, which
    would make them one: this measures the cost per task)."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        w = numpy_helper.from_array((1 + 0.001 * rng.standard_normal(width)).astype(np.float32), f"w{i}")
        inits.append(w)
        nodes.append(helper.make_node("Mul" if i % 2 else "Add", [prev, f"w{i}"], [f"t{i}"], name=f"op{i}"))
        prev = f"t{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def median_us(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(times)


def per_node(name: str, model: onnx.ModelProto, tmp: str, runs: int, unfused: bool = False) -> None:
    path = os.path.join(tmp, f"{name}.onnx")
    onnx.save(model, path)
    switch = None
    if unfused:
        switch = os.path.join(tmp, "switch.json")
        with open(switch, "w") as f:
            f.write('{"Switch": {"UBFusion": {"fuse_elementwise": "off"}}}')
    om = api.atc(path, os.path.join(tmp, name), fusion_switch_file=switch).om_path
    model_id = api.load_from_file(om, "cpu")
    ctx = api.model(model_id).default_context
    tasks = len(ctx.handle)
    feeds = {vi.name: np.random.default_rng(0).standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim])
             .astype(np.float32) for vi in model.graph.input}
    inputs = list(feeds.values())
    outputs = [np.empty(d.shape, d.dtype) for d in api.model(model_id).outputs]
    sunk = median_us(lambda: ctx.execute(inputs, outputs), runs)
    per_task = median_us(lambda: ctx.execute(inputs, outputs, launch="per_task"), runs)
    api.unload(model_id)
    onnxrt = onnxruntime_ms(path, feeds, runs) * 1e3
    print(f"{name:<16}{tasks:>7}{sunk / tasks:>14.2f}{per_task / tasks:>18.2f}{onnxrt / tasks:>13.2f}"
          f"{per_task / sunk:>15.2f}", flush=True)


def shrink_savings(samples, tmp: str) -> None:
    path = os.path.join(tmp, "resnet50_style.onnx")
    onnx.save(samples.resnet50_style(), path)
    om = api.atc(path, os.path.join(tmp, "resnet50_style")).om_path
    gc.collect()
    for device in ("cpu", "sim"):
        model_id = api.load_from_file(om, device)
        gc.collect()
        # the caller's reference to the GeModel lives until load returns: measure after that
        before, after = api.model(model_id).host_rss["do_task_sink"], host_rss()
        print(f"shrink on {device}: host RSS {before / 2**20:.1f} MiB before, {after / 2**20:.1f} MiB after "
              f"({(before - after) / 2**20:.1f} MiB released; weights {api.model(model_id).weight_size / 2**20:.1f} MiB)")
        api.unload(model_id)
        gc.collect()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    samples = load_samples()
    print(f"{'model':<16}{'tasks':>7}{'sunk us/node':>14}{'per-task us/node':>18}{'ort us/node':>13}"
          f"{'per-task/sunk':>15}")
    with tempfile.TemporaryDirectory() as tmp:
        per_node("chain_1000", chain(), tmp, args.runs, unfused=True)
        per_node("resnet50_style", samples.resnet50_style(), tmp, max(5, args.runs // 5))
        shrink_savings(samples, tmp)


if __name__ == "__main__":
    sys.exit(main())
