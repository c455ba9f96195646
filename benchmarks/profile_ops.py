"""Per-op profile of a compiled sample on the cpu device: time per task, summed by op type.

    python benchmarks/profile_ops.py [--model bert_style | --onnx model.onnx] [--input_shape "input_ids:1,128;attention_mask:1,128"]
                                     [--runs 50] [--tasks 10] [--clock wall|thread] [--host-only]

Walks the sunk task list itself, in order (so caches see what a real execution sees), timing
each task's kernel and epilogue; prints, per op type (fused epilogues as "MatMul+Add"), the
calls, the median total ms per execution and its share, then the slowest single tasks. The sum
is a little above one execution's latency (the timer's own cost per task).
--clock thread counts the CPU time of the calling thread only: steady while other processes load
the machine, exact for numpy kernels, but BLAS calls show only the caller's share of the work.
--host-only makes every native kernel call return at once (the results are garbage): what is left
is the host's cost per task (Python, argument checks, prepared-call lookup) and the numpy kernels.
--single-thread runs ge's kernels on one thread and counts its CPU time (steady on a loaded machine).
--vs-onnxruntime then lists every task beside onnxruntime's time for the same node, from
onnxruntime's own profiler (one thread with --single-thread, else two): inside the model, where
caches are cold and onnxruntime runs its blocked (NCHWc) layouts, not each layer alone. Its fused
nodes are matched to ge's tasks by the Conv they start from.
"""
from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx

from ge.core import api
from ge.core.kernels.blas import kernel_state

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from samples_vs_onnxruntime import feeds_for, load_samples  # noqa: E402

DEFAULT_SHAPES = {"bert_style": "input_ids:1,128;attention_mask:1,128"}


def label(task) -> str:
    p = task.plan
    steps = [k.op_type for k, _ in p.epilogue.steps] if p.epilogue is not None else []
    return "+".join([p.kernel.op_type] + steps)


def profile(ctx, runs: int, clock=time.perf_counter) -> list[list[float]]:
    """Seconds per task per run, running the whole task list in order each run."""
    handle = ctx.handle
    times = [[] for _ in handle]
    with kernel_state(ctx.model.ge_plan.uses_native):  # as an execution runs them
        for _ in range(runs + 1):  # the first run warms up
            for t, task in enumerate(handle):
                t0 = clock()
                task.run()
                times[t].append(clock() - t0)
    return [ts[1:] for ts in times]


def onnxruntime_node_us(model: onnx.ModelProto, feeds: dict, runs: int, threads: int) -> dict:
    """Median us per node of onnxruntime's own profile, keyed by ge's task names: a node onnxruntime
    fused (named after its output, "<value>_nchwc" in the blocked layout) counts for the Conv its chain
    of BatchNormalization, activations and residual Add starts from."""
    import json
    import onnxruntime as ort
    producer = {o: n for n in model.graph.node for o in n.output}

    def conv_of(value: str) -> str:
        n = producer.get(value)
        while n is not None and n.op_type in ("BatchNormalization", "Relu", "Clip", "HardSwish", "HardSigmoid", "Add"):
            ins = [producer.get(i) for i in n.input] if n.op_type == "Add" else [producer.get(n.input[0])]
            n = next((i for i in ins if i is not None and i.op_type in ("BatchNormalization", "Conv")), None) \
                if n.op_type == "Add" else ins[0]
        return n.name if n is not None else value

    with tempfile.TemporaryDirectory() as tmp:
        so = ort.SessionOptions()
        so.intra_op_num_threads, so.enable_profiling = threads, True
        so.profile_file_prefix = os.path.join(tmp, "ort")
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        for _ in range(runs + 1):
            sess.run(None, feeds)
        with open(sess.end_profiling()) as f:
            events = json.load(f)
    per_node = collections.defaultdict(list)
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node[e["name"][:-len("_kernel_time")]].append(e["dur"])
    out: dict[str, float] = collections.defaultdict(float)
    for name, durs in per_node.items():
        key = conv_of(name[:-len("_nchwc")]) if name.endswith("_nchwc") else name
        out[key] += statistics.median(durs[1:] or durs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bert_style")
    parser.add_argument("--onnx", default=None, help="profile this ONNX file instead of a sample (--model)")
    parser.add_argument("--input_shape", default=None)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--tasks", type=int, default=10, help="how many of the slowest tasks to list")
    parser.add_argument("--clock", choices=("wall", "thread"), default="wall")
    parser.add_argument("--host-only", action="store_true", help="native kernel calls do nothing")
    parser.add_argument("--single-thread", action="store_true", help="one thread, its CPU time")
    parser.add_argument("--vs-onnxruntime", action="store_true", help="every task beside onnxruntime's node")
    args = parser.parse_args()
    if args.single_thread:
        from ge.core.kernels import blas
        blas.set_local_threads(1)
        args.clock = "thread"
    model = onnx.load(args.onnx) if args.onnx else getattr(load_samples(), args.model)()
    spec = args.input_shape if args.input_shape is not None else "" if args.onnx else DEFAULT_SHAPES.get(args.model, "")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{args.model}.onnx")
        onnx.save(model, path)
        result = api.atc(path, os.path.join(tmp, args.model), input_shape=spec or None)
        if args.host_only:  # before the tasks are bound at load: a bound task may hold its call's run itself
            from ge.core.kernels.native import PreparedCall
            PreparedCall.run = lambda call: None
        model_id = api.load_from_file(result.om_path, "cpu")
        loaded = api.model(model_id)
        shapes = {d.name: list(d.shape) for d in loaded.inputs}
        feeds = feeds_for(model, shapes)
        ctx = loaded.default_context
        ctx.execute([feeds[d.name] for d in loaded.inputs])  # binds inputs, refreshes the views
        times = profile(ctx, args.runs, time.perf_counter if args.clock == "wall" else time.thread_time)
        api.unload(model_id)
    per_run = [sum(ts[r] for ts in times) for r in range(args.runs)]
    by_op: dict[str, list] = collections.defaultdict(lambda: [0, np.zeros(args.runs)])
    labels = [label(t) for t in ctx.handle]
    for lab, ts in zip(labels, times):
        by_op[lab][0] += 1
        by_op[lab][1] += ts
    total = statistics.median(per_run) * 1e3
    name = os.path.basename(args.onnx) if args.onnx else args.model
    print(f"{name} ({spec or 'declared shapes'}): {len(times)} tasks, {total:.2f} ms per execution "
          f"(sum of tasks, {args.clock} clock)")
    print(f"{'op':<28}{'calls':>6}{'ms':>9}{'share':>8}{'us/call':>10}")
    rows = sorted(((lab, n, float(np.median(acc)) * 1e3) for lab, (n, acc) in by_op.items()), key=lambda r: -r[2])
    for lab, n, ms in rows:
        print(f"{lab:<28}{n:>6}{ms:>9.3f}{ms / total:>8.1%}{ms / n * 1e3:>10.1f}")
    print("\nslowest tasks (median us):")
    slow = sorted(((statistics.median(ts) * 1e6, lab, t.plan.name) for ts, lab, t in zip(times, labels, ctx.handle)),
                  reverse=True)[:args.tasks]
    for us, lab, name in slow:
        print(f"{us:>9.1f}  {lab:<20} {name}")
    if args.vs_onnxruntime:
        ort_us = onnxruntime_node_us(model, feeds, args.runs, 1 if args.single_thread else 2)
        print(f"\nevery task beside onnxruntime's node (median us; onnxruntime's profiler, "
              f"{'one thread' if args.single_thread else 'two threads'})")
        print(f"{'task':<44}{'op':<22}{'plan':<12}{'ge':>9}{'ort':>9}{'ratio':>7}")
        for ts, lab, t in zip(times, labels, ctx.handle):
            nat = getattr(t.plan.kernel, "native", None)
            plan = getattr(nat, "kind", None) or getattr(t.plan.kernel, "plan", "") or ""
            us, o = statistics.median(ts) * 1e6, ort_us.get(t.plan.name)
            theirs = f"{o:>9.1f}{us / o:>7.2f}" if o else f"{'-':>9}"
            print(f"{t.plan.name:<44}{lab:<22}{str(plan):<12}{us:>9.1f}{theirs}")
        matched = sum(ort_us.get(t.plan.name, 0.0) for t in ctx.handle)
        print(f"onnxruntime: {sum(ort_us.values()) / 1e3:.2f} ms over its nodes, {matched / 1e3:.2f} ms of them "
              f"matched to ge's tasks (the rest: its layout reorders and nodes ge folds away)")


if __name__ == "__main__":
    sys.exit(main())
