"""Per-call cost of how api.execute takes its input arrays: a one-node MatMul over two user inputs
(attention-shaped, A [12,128,64] x B [12,64,128], float32), one thread, the caller's output array.

    python benchmarks/input_binding.py [--calls 600] [--rounds 3]

Per round and way of passing the inputs (the same arrays each call, two pairs in turn, a new pair
each call: the copies made before the timed call), the median api.execute time and its part
outside the MatMul task (its prepared native call timed around); onnxruntime's median beside it
(one intra-op thread) when it is installed. Medians, since the machine may be loaded: say the load.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

from ge.core import api
from ge.core.kernels import blas
from ge.core.runtime import context

F = TensorProto.FLOAT
A, B, Y = (12, 128, 64), (12, 64, 128), (12, 128, 128)


def one_matmul(tmp: str) -> str:
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["y"])], "mm",
                          [helper.make_tensor_value_info("a", F, A), helper.make_tensor_value_info("b", F, B)],
                          [helper.make_tensor_value_info("y", F, Y)])
    path = os.path.join(tmp, "mm.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    blas.set_local_threads(1)
    tmp = tempfile.mkdtemp()
    path = one_matmul(tmp)
    model_id = api.load_from_file(api.atc(path, os.path.join(tmp, "mm")).om_path)
    rng = np.random.default_rng(0)
    pairs = [[rng.standard_normal(A, np.float32), rng.standard_normal(B, np.float32)] for _ in range(2)]
    out = np.empty(Y, np.float32)
    in_task = [0.0]
    run = context.SunkTask.run

    def timed_run(task):
        t = time.perf_counter()
        run(task)
        in_task[0] += time.perf_counter() - t
    context.SunkTask.run = timed_run

    def ge_median(inputs_for) -> tuple[float, float]:
        totals, outside = [], []
        for i in range(args.calls):
            inputs, in_task[0] = inputs_for(i), 0.0
            t = time.perf_counter()
            api.execute(model_id, inputs, [out])
            total = time.perf_counter() - t
            totals.append(total)
            outside.append(total - in_task[0])
            if i < 4:  # the right results, whichever way the inputs came
                np.testing.assert_allclose(out, inputs[0] @ inputs[1], rtol=1e-4, atol=1e-4)
        return statistics.median(totals) * 1e6, statistics.median(outside) * 1e6

    ways = {"same arrays": lambda i: pairs[0], "two pairs in turn": lambda i: pairs[i % 2],
            "a new pair": lambda i: [x.copy() for x in pairs[i % 2]]}
    session = None
    try:
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        session = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except ImportError:
        pass
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; one thread; median of {args.calls} calls")
    for r in range(args.rounds):
        cells = []
        for name, inputs_for in ways.items():
            total, outside = ge_median(inputs_for)
            cells.append(f"{name} {total:.0f} us ({outside:.0f} outside the task)")
        if session is not None:
            times = []
            for i in range(args.calls):
                a, b = pairs[i % 2]
                t = time.perf_counter()
                session.run(None, {"a": a, "b": b})
                times.append(time.perf_counter() - t)
            cells.append(f"onnxruntime, two pairs in turn {statistics.median(times) * 1e6:.0f} us")
        print(f"round {r}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
