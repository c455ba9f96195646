"""Small real models, where each op's work is microseconds and ge's per-task cost decides.

    python benchmarks/small_models.py [--rounds 3] [--only gpt2_s8,resnet8] [--single-thread]

Rows (--only takes their keys):
  gpt2_s8 gpt2_s32   a GPT-2-style decoder as torch.onnx exports HuggingFace's GPT2Model + LM head
                     (2 layers, hidden 256, 4 heads, vocab 2048): Gather embeddings, Conv1D as
                     Reshape/Gemm/Reshape, Split into q/k/v, heads by Shape/Slice/Concat/Reshape/
                     Transpose, the causal mask a Slice of a constant and a Where, gelu_new as its
                     tanh formula, LayerNormalization; seq 8 and 32
  bert_tiny_s16      a 4-layer BERT (hidden 256, 4 heads, samples' bert_style) at seq 16
  resnet8            a CIFAR ResNet-8 (16/32/64 channels, one basic block a stage) on a 32x32 image

Each engine runs in its own process (benchmarks/vs_onnxruntime.py's launcher and workers), in
alternating order, round after round. Beside the latency ratio, each engine's time outside its
kernels: one call's latency minus the sum of its kernels' times (ge: api.execute's latency minus
each sunk task timed as it runs in order, benchmarks/profile_ops.py; onnxruntime: its profiler's
model_run minus its per-node kernel times).
--single-thread: one thread per engine, latencies in CPU time (see vs_onnxruntime.py).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402


def rows() -> list[vs.Row]:
    return [
        vs.Row("gpt2_s8", "GPT-2-style decoder, 2 layers, seq 8", "latency", ("gpt2_style", {"seq": 8}), "<= 1.0",
               runs=200),
        vs.Row("gpt2_s32", "GPT-2-style decoder, 2 layers, seq 32", "latency", ("gpt2_style", {"seq": 32}), "<= 1.0",
               runs=200),
        vs.Row("bert_tiny_s16", "tiny BERT, 4 layers, seq 16", "latency", ("bert_tiny", {}), "<= 1.0", runs=200,
               seq=16),
        vs.Row("resnet8", "CIFAR ResNet-8, 32x32", "latency", ("resnet8", {}), "<= 1.0", runs=200),
    ]


# -- models ---------------------------------------------------------------------------------------
def gpt2_style(seq: int, layers: int = 2, hidden: int = 256, heads: int = 4, vocab: int = 2048,
               max_pos: int = 128, seed: int = 0):
    """GPT2LMHeadModel as torch.onnx writes it (opset 17): input_ids [1, seq] -> logits [1, seq, vocab]."""
    import numpy as np
    samples = vs.load_samples()
    g = samples.GraphBuilder("gpt2_style", seed, 17)
    ids = g.input("input_ids", samples.INT64, [1, seq])
    head_dim = hidden // heads
    wte = g.normal([vocab, hidden], 0.02)

    def conv1d(x: str, fin: int, fout: int, name: str) -> str:
        """transformers' Conv1D: addmm(bias, x.view(-1, fin), W).view(*x.shape[:-1], fout)."""
        with g.scope(name):
            lead = g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([-1])])
            flat = g.op("Reshape", [x, g.const([-1, fin])])
            y = g.op("Gemm", [flat, g.param(f"{name}.weight", g.normal([fin, fout], 0.02)),
                              g.param(f"{name}.bias", g.normal([fout], 0.02))], alpha=1.0, beta=1.0)
            return g.op("Reshape", [y, g.op("Concat", [lead, g.const([fout])], axis=0)])

    def split_heads(x: str, perm) -> str:
        lead = g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([-1])])
        shape = g.op("Concat", [lead, g.const([heads, head_dim])], axis=0)
        return g.op("Transpose", [g.op("Reshape", [x, shape])], perm=list(perm))

    def attention(x: str, name: str) -> str:
        causal = np.tril(np.ones((max_pos, max_pos), bool)).reshape(1, 1, max_pos, max_pos)
        with g.scope(name):
            q = g.op("Split", [conv1d(x, hidden, 3 * hidden, f"{name}.c_attn"), g.const([hidden] * 3)], axis=2)
            split = g.nodes[-1]  # three outputs: q, k, v
            k, v = f"{split.name}_output_1", f"{split.name}_output_2"
            split.output.extend([k, v])
            q, k, v = split_heads(q, [0, 2, 1, 3]), split_heads(k, [0, 2, 3, 1]), split_heads(v, [0, 2, 1, 3])
            w = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(math.sqrt(head_dim)))])
            q_len = g.op("Gather", [g.op("Shape", [q]), g.const([2])], axis=0)
            k_len = g.op("Gather", [g.op("Shape", [k]), g.const([3])], axis=0)
            bias = g.param(f"{name}.bias", causal)
            mask = g.op("Slice", [bias, g.op("Sub", [k_len, q_len]), k_len, g.const([2])])
            mask = g.op("Slice", [mask, g.const([0]), k_len, g.const([3])])
            w = g.op("Where", [mask, w, g.const(np.float32(np.finfo(np.float32).min))])
            a = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [w], axis=-1), v])], perm=[0, 2, 1, 3])
            lead = g.op("Slice", [g.op("Shape", [a]), g.const([0]), g.const([-2])])
            a = g.op("Reshape", [a, g.op("Concat", [lead, g.const([hidden])], axis=0)])
            return conv1d(a, hidden, hidden, f"{name}.c_proj")

    def gelu_new(x: str) -> str:
        """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
        cube = g.op("Mul", [g.const(np.float32(0.044715)), g.op("Pow", [x, g.const(np.float32(3.0))])])
        inner = g.op("Mul", [g.const(np.float32(math.sqrt(2.0 / math.pi))), g.op("Add", [x, cube])])
        half = g.op("Mul", [g.const(np.float32(0.5)), x])
        return g.op("Mul", [half, g.op("Add", [g.const(np.float32(1.0)), g.op("Tanh", [inner])])])

    with g.scope("transformer"):
        seq_len = g.op("Gather", [g.op("Shape", [ids]), g.const(1)], axis=0)
        positions = g.unsqueeze(g.op("Range", [g.const(0), seq_len, g.const(1)]), [0])
        h = g.op("Add", [g.op("Gather", [g.param("wte", wte), ids], axis=0),
                         g.op("Gather", [g.param("wpe", g.normal([max_pos, hidden], 0.01)), positions], axis=0)])
        for i in range(layers):
            name = f"h.{i}"
            with g.scope(name):
                h = g.op("Add", [attention(g.layer_norm(h, hidden, name=f"{name}.ln_1", eps=1e-5), f"{name}.attn"), h])
                m = conv1d(g.layer_norm(h, hidden, name=f"{name}.ln_2", eps=1e-5), hidden, 4 * hidden,
                           f"{name}.mlp.c_fc")
                h = g.op("Add", [conv1d(gelu_new(m), 4 * hidden, hidden, f"{name}.mlp.c_proj"), h])
        h = g.layer_norm(h, hidden, name="ln_f", eps=1e-5)
    g.op("MatMul", [h, g.param("lm_head.weight", np.ascontiguousarray(wte.T))], out="logits")
    g.output("logits", samples.FLOAT, [1, seq, vocab])
    return g.build()


def bert_tiny():
    return vs.load_samples().bert_style(layers=4, hidden=256, heads=4, intermediate=1024)


def resnet8(classes: int = 10, seed: int = 0):
    """He et al.'s CIFAR ResNet with n=1: conv 16, three stages of one basic block (16, 32, 64)."""
    samples = vs.load_samples()
    g = samples.GraphBuilder("resnet8", seed, 17)
    x = g.conv_bn_relu(g.input("image", samples.FLOAT, [1, 3, 32, 32]), 3, 16, 3, conv="conv1", bn="bn1")
    cin = 16
    for stage, planes in enumerate((16, 32, 64)):
        stride, name = (1 if stage == 0 else 2), f"layer{stage + 1}.0"
        y = g.conv_bn_relu(x, cin, planes, 3, stride=stride, conv=f"{name}.conv1", bn=f"{name}.bn1")
        y = g.conv_bn(y, planes, planes, 3, conv=f"{name}.conv2", bn=f"{name}.bn2")
        if stride != 1 or cin != planes:
            x = g.conv_bn(x, cin, planes, 1, stride=stride, conv=f"{name}.downsample.0", bn=f"{name}.downsample.1")
        with g.scope(name):
            x = g.relu(g.add(y, x))
        cin = planes
    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    g.gemm(x, cin, classes, name="fc", out="logits")
    g.output("logits", samples.FLOAT, [1, classes])
    return g.build()


def prepare(rows: list[vs.Row], tmp: str) -> dict:
    """Each row's ONNX file, seeded inputs (.npz) and ge's OM (static shapes): {key: job}."""
    import numpy as np
    import onnx
    from ge.core import api
    samples, jobs = vs.load_samples(), {}
    for row in rows:
        name, kwargs = row.build
        model = globals()[name](**kwargs)
        base = os.path.join(tmp, row.key)
        onnx.save(model, base + ".onnx")
        if name == "gpt2_style":  # token ids below the vocabulary
            feeds = {"input_ids": np.random.default_rng(0).integers(0, 2048, (1, kwargs["seq"]), dtype=np.int64)}
        else:
            feeds = vs.feeds_for(model, samples, row.seq)
        np.savez(base + ".npz", **feeds)
        spec = ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
        om = api.atc(base + ".onnx", base, input_shape=spec).om_path
        jobs[row.key] = dict(onnx=base + ".onnx", npz=base + ".npz", om=om, kind="latency", runs=row.runs, nodes=1)
    return jobs


# -- the worker: latency (vs_onnxruntime's worker), then the time outside kernels --------------------
def onnxruntime_outside(job: dict) -> float:
    """A profiled session's median model_run minus its nodes' median kernel times (one profile: both
    pay the profiler)."""
    import numpy as np
    import onnxruntime as ort
    feeds = dict(np.load(job["npz"]))
    with tempfile.TemporaryDirectory() as tmp:
        options = vs._ort_options(1 if job["single_thread"] else 2)
        options.enable_profiling, options.profile_file_prefix = True, os.path.join(tmp, "ort")
        session = ort.InferenceSession(job["onnx"], options, providers=["CPUExecutionProvider"])
        for _ in range(job["runs"] + 1):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    runs = [e["dur"] for e in events if e.get("cat") == "Session" and e["name"] == "model_run"][1:]
    per_node: dict = {}
    for e in events:
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
            per_node.setdefault(e["name"], []).append(e["dur"])
    return (statistics.median(runs) - sum(statistics.median(d[1:] or d) for d in per_node.values())) / 1e6


def ge_outside(job: dict, latency: float) -> float:
    """The latency of api.execute minus its sunk tasks' median times, each task timed as it runs in order
    (benchmarks/profile_ops.py; the clock's own cost per task counts as kernel time)."""
    import numpy as np
    from ge.core import api
    from profile_ops import profile
    feeds = dict(np.load(job["npz"]))
    model_id = api.load_from_file(job["om"], "cpu")
    loaded = api.model(model_id)
    ctx = loaded.default_context
    ctx.execute([feeds[d.name] for d in loaded.inputs])  # binds inputs, refreshes the views
    times = profile(ctx, job["runs"], time.thread_time if job["single_thread"] else time.perf_counter)
    api.unload(model_id)
    return latency - sum(statistics.median(ts) for ts in times)


def worker(engine: str, job: dict) -> dict:
    result = vs.worker(engine, job)
    result["outside"] = ge_outside(job, result["value"]) if engine == "ge" else onnxruntime_outside(job)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="", help="comma-separated row keys (default: every row)")
    parser.add_argument("--single-thread", action="store_true",
                        help="one thread per engine, latencies in CPU time (a loaded machine)")
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "JOB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        engine, job = args.worker
        print(json.dumps(worker(engine, json.loads(job))))
        return 0
    only = [k for k in args.only.split(",") if k]
    selected = [r for r in rows() if not only or r.key in only]
    if not selected or len(selected) < len(only):
        parser.error(f"unknown rows in {only}; choose from {', '.join(r.key for r in rows())}")
    results: dict = {r.key: [] for r in selected}
    launcher = vs.Launcher()
    try:
        with tempfile.TemporaryDirectory(prefix="ge_small_") as tmp:
            jobs = prepare(selected, tmp)
            for job in jobs.values():
                job["single_thread"] = args.single_thread
            for n in range(args.rounds):
                for i, row in enumerate(selected):
                    order = vs.ENGINES if (n + i) % 2 == 0 else vs.ENGINES[::-1]
                    results[row.key].append({e: vs.measure(launcher, e, jobs[row.key], script=__file__) for e in order})
                print(f"  round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    finally:
        launcher.close()
    table = vs.summarize(selected, results)
    print(f"python benchmarks/small_models.py{' --single-thread' if args.single_thread else ''} --rounds {args.rounds}"
          f"{' --only ' + args.only if only else ''}: each engine in its own process; median over rounds, "
          "ratio ge / onnxruntime; outside kernels = latency - summed kernel times (per call)")
    print(vs.render(table))
    print("\n| workload | ge outside kernels | onnxruntime outside kernels |\n| --- | --- | --- |")
    for e in table:
        outside = {eng: statistics.median(r[eng]["outside"] for r in e["rounds"]) * 1e3
                   for eng in vs.ENGINES}
        print(f"| {e['workload']} | {outside['ge']:.3f} ms | {outside['onnxruntime']:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
