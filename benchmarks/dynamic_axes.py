"""A model exported with dynamic axes and compiled so (ge's hybrid executor) against the same model
compiled static: what the unknown dims cost.

    python benchmarks/dynamic_axes.py [--only dbnet_160x960,bert_small] [--calls 30] [--shared-names]

For each latency row of vs_onnxruntime.py: its model with every input dim symbolic but the channels of
an image input (axis 1 of a 4-D float input), as an exporter with dynamic axes writes it
(each input's dims named apart, as vs_onnxruntime.symbolic_dims names them; --shared-names: one name
per axis, as exporters given one name per dynamic axis write them), compiled with -1 for those dims, and the model
compiled static for the row's shapes; both loaded in this process, one thread, their calls alternating
(each call timed by the thread's CPU time), fed the row's inputs. Prints the medians, their ratio and
whether the outputs agree.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402  (the rows and their models)

DEFAULT_ROWS = "dbnet_160x960,crnn_b1,yolov8n,mobilenetv2_b1,mobilenetv2_b8,bert_small"


def dynamic_model(model, shared: bool):
    """The model with its inputs' dims symbolic but an image input's channels, and the spec of -1 for them."""
    from onnx import TensorProto
    keep = {vi.name: (1,) if vi.type.tensor_type.elem_type == TensorProto.FLOAT and
            len(vi.type.tensor_type.shape.dim) == 4 else () for vi in model.graph.input}
    spec = ";".join(f"{vi.name}:" + ",".join(str(d.dim_value) if axis in keep[vi.name] else "-1"
                                             for axis, d in enumerate(vi.type.tensor_type.shape.dim))
                    for vi in model.graph.input)
    for vi in model.graph.input:
        for axis, d in enumerate(vi.type.tensor_type.shape.dim):
            if axis not in keep[vi.name]:
                d.dim_param = f"dim{axis}" if shared else f"{vi.name}_{axis}"
    for vi in model.graph.output:
        for d in vi.type.tensor_type.shape.dim:
            d.dim_param = d.dim_param or "out"
    del model.graph.value_info[:]
    return model, spec


def compare(row, samples, tmp: str, calls: int, shared: bool) -> tuple[float, float, float]:
    """(static ms, dynamic ms, largest output difference)."""
    import numpy as np
    import onnx
    from ge.core import api
    model = vs.build_model(row, samples)
    feeds = vs.feeds_for(model, samples, row.seq)
    static = os.path.join(tmp, f"{row.key}_static.onnx")
    onnx.save(model, static)
    spec = ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
    dyn, dyn_spec = dynamic_model(model, shared)
    dynamic = os.path.join(tmp, f"{row.key}_dynamic.onnx")
    onnx.save(dyn, dynamic)
    ids = [api.load_from_file(api.atc(path, path[:-5], input_shape=s).om_path, "cpu")
           for path, s in ((static, spec), (dynamic, dyn_spec))]
    inputs = [[feeds[d.name] for d in api.model(i).inputs] for i in ids]
    outs = [api.execute(i, x) for i, x in zip(ids, inputs)]
    diff = max(float(np.abs(a.astype(np.float64) - b).max()) for a, b in zip(*outs))
    times: list[list[float]] = [[], []]
    for k in range(2 + calls):
        for i, x, spent in zip(ids, inputs, times):
            start = time.thread_time()
            api.execute(i, x)
            if k >= 2:
                spent.append(time.thread_time() - start)
    for i in ids:
        api.unload(i)
    return statistics.median(times[0]) * 1e3, statistics.median(times[1]) * 1e3, diff


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=DEFAULT_ROWS, help="comma-separated latency rows of vs_onnxruntime.py")
    parser.add_argument("--calls", type=int, default=20, help="calls per build and row")
    parser.add_argument("--shared-names", action="store_true", help="one symbol per axis across the inputs")
    args = parser.parse_args()
    from ge.core.kernels import blas
    blas.set_local_threads(1)
    rows = {row.key: row for row in vs.full_rows()}
    unknown = [k for k in args.only.split(",") if k not in rows or rows[k].kind != "latency"]
    if unknown:
        raise SystemExit(f"not latency rows of vs_onnxruntime.py: {', '.join(unknown)}")
    samples = vs.load_samples()
    print(f"python benchmarks/dynamic_axes.py --only {args.only} --calls {args.calls}"
          f"{' --shared-names' if args.shared_names else ''}: one thread, CPU time, calls alternating")
    print("| workload | static | dynamic axes | dynamic / static | largest difference |\n| --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory(prefix="ge_dynamic_axes_") as tmp:
        for key in args.only.split(","):
            s, d, diff = compare(rows[key], samples, tmp, args.calls, args.shared_names)
            print(f"| {rows[key].label} | {s:.2f} ms | {d:.2f} ms | {d / s:.2f} | {diff:.2g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
