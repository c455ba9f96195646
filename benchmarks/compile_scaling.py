"""How `ge atc` scales with the graph: a ladder of n steps (MatMul by one shared weight, Add of the output
from `skip` steps back, Relu), compiled in a fresh process at each size, beside onnxruntime's session
creation of the same model (its graph optimizations included). A pass or plan that is quadratic in the
nodes shows as a time that grows faster than the sizes (the ladder's long skips keep many buffers live,
the memory plan's hard case; the shared weight has thousands of readers, the fusions' hard case).

    python benchmarks/compile_scaling.py [--steps 700,1400,2800,5600] [--skip 50]

Per size: nodes, `ge atc`'s wall time and peak RSS, onnxruntime's session creation's, and the ratio of
each time to the previous size's (about 2 when linear).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ORT_SESSION = ("import sys, onnxruntime as ort; "
               "ort.InferenceSession(sys.argv[1], providers=['CPUExecutionProvider'])")


def ladder(steps: int, skip: int) -> onnx.ModelProto:
    nodes, prev = [], ["x"]
    for i in range(steps):
        nodes += [helper.make_node("MatMul", [prev[-1], "w"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", prev[max(0, len(prev) - skip)]], [f"s{i}"]),
                  helper.make_node("Relu", [f"s{i}"], [f"r{i}"])]
        prev.append(f"r{i}")
    w = numpy_helper.from_array(np.eye(16, dtype=np.float32) * 0.5, "w")
    graph = helper.make_graph(nodes, "ladder", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info(prev[-1], TensorProto.FLOAT, [4, 16])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS in MiB) of one fresh process (its peak read by a wrapper process whose
    only child it is)."""
    wrapper = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
               "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", wrapper, *argv], check=True, capture_output=True, text=True)
    return time.perf_counter() - t0, int(out.stdout.split()[-1]) / 1024


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", default="700,1400,2800,5600", help="ladder sizes in steps (3 nodes each)")
    p.add_argument("--skip", type=int, default=50, help="how far back each Add reads")
    args = p.parse_args(argv)
    ge_cli = os.path.join(os.path.dirname(sys.executable), "ge")
    print("| nodes | ge atc | its peak RSS | onnxruntime session | its peak RSS | ge / onnxruntime | "
          "ge's growth | onnxruntime's growth |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    last = None
    with tempfile.TemporaryDirectory(prefix="ge_scaling_") as tmp:
        for steps in (int(s) for s in args.steps.split(",")):
            path = os.path.join(tmp, f"ladder{steps}.onnx")
            onnx.save(ladder(steps, args.skip), path)
            ge, ge_rss = timed([ge_cli, "atc", "--model", path, "--output", os.path.join(tmp, f"l{steps}"),
                                "--log=error"])
            ort, ort_rss = timed([sys.executable, "-c", ORT_SESSION, path])
            growth = f"{ge / last[0]:.2f} | {ort / last[1]:.2f}" if last else "| "
            print(f"| {3 * steps} | {ge:.2f} s | {ge_rss:.0f} MiB | {ort:.2f} s | {ort_rss:.0f} MiB | {ge / ort:.2f} | "
                  f"{growth} |", flush=True)
            last = (ge, ort)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
