"""Small real models, where each op's work is microseconds and ge's per-task cost decides.

    python benchmarks/small_models.py [--rounds 3] [--only gpt2_s8,resnet8] [--single-thread] [--level v3]

Rows (--only takes their keys):
  gpt2_s8 gpt2_s32   samples.gpt2_style: a decoder as torch.onnx exports HuggingFace's GPT2LMHeadModel
                     (2 layers, hidden 256, 4 heads, vocab 2048): Gather embeddings, Conv1D as
                     Reshape/Gemm/Reshape, Split into q/k/v, heads by Shape/Slice/Concat/Reshape/
                     Transpose, the causal mask a Slice of a constant and a Where, gelu_new as its
                     tanh formula, LayerNormalization; seq 8 and 32
  bert_tiny_s16      a 4-layer BERT (hidden 256, 4 heads, samples' bert_style) at seq 16
  resnet8            samples.resnet8: a CIFAR ResNet-8 (16/32/64 channels, one basic block a stage) on a 32x32 image
  vad_16k            samples.silero_vad_style: a Silero-VAD-v5-style streaming model, one 32 ms frame (512
                     samples at 16 kHz) a call, the LSTM state it returns fed back as the next call's
                     (an If on the sample rate, an STFT conv, four convs, an LSTM step, a conv + sigmoid)
  gpt2_decode_p128   the GPT-2-style decoder's decoding step: seq 1 after 128 past tokens, its past
                     key/values in and the presents (129 tokens) out
  llama_decode_p128  samples.llama_style's decoding step (2 layers, hidden 256, 4 heads over 2 key/value
                     heads, rotary, SiLU MLP 688): seq 1 after 128 past tokens
  gpt2_generate      a generation loop as users run one: the GPT-2-style decoder exported with its past
                     length symbolic, compiled so (--input_shape with -1: ge's hybrid executor), each call's
                     presents fed back as the next call's past: the past grows a token a call from 128
                     (every call a new shape)
  gpt2_small_generate  the same loop at GPT-2 small's size (12 layers, hidden 768, vocab 50257), from 127
                     past tokens

Each engine runs in its own process (benchmarks/vs_onnxruntime.py's launcher and workers), in
alternating order, round after round. Beside the latency ratio, ge's time outside its kernels
(the executor's own cost): api.execute of the same loaded model with its sunk task lists emptied
(a dynamic model's: those of its static submodels, its own nodes and control flow still run).
--single-thread: one thread per engine, latencies in CPU time (see vs_onnxruntime.py).
--level: ge's native level (v3: as on an AVX2 machine), as in vs_onnxruntime.py.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402


def rows() -> list[vs.Row]:
    return [
        vs.Row("gpt2_s8", "GPT-2-style decoder, 2 layers, seq 8", "latency", ("gpt2_style", {"seq": 8}), "<= 1.0",
               runs=200),
        vs.Row("gpt2_s32", "GPT-2-style decoder, 2 layers, seq 32", "latency", ("gpt2_style", {"seq": 32}), "<= 1.0",
               runs=200),
        vs.Row("bert_tiny_s16", "tiny BERT, 4 layers, seq 16", "latency", ("bert_style", dict(layers=4, hidden=256, heads=4, intermediate=1024)), "<= 1.0", runs=200,
               seq=16),
        vs.Row("resnet8", "CIFAR ResNet-8, 32x32", "latency", ("resnet8", {}), "<= 1.0", runs=200),
        vs.Row("vad_16k", "Silero-VAD-style frame, 512 samples, state fed back", "latency", ("silero_vad_style", {}),
               "<= 1.5", runs=500, extra={"feedback": {1: "state"}}),
        vs.Row("gpt2_decode_p128", "GPT-2-style decoding step, seq 1, 128 past tokens", "latency",
               ("gpt2_style", {"seq": 1, "past": 128, "max_pos": 256}), "<= 1.0", runs=300),
        vs.Row("llama_decode_p128", "LLaMA-style decoding step (GQA 4/2 heads), seq 1, 128 past tokens", "latency",
               ("llama_style", {"seq": 1, "past": 128}), "<= 1.0", runs=300),
        vs.Row("gpt2_generate", "GPT-2-style generation, past growing a token a call from 128", "latency",
               ("gpt2_style", {"seq": 1, "past": 128, "max_pos": 512}), "<= 1.0", runs=150,
               extra={"feedback": {1 + k: f"past_key_values.{k // 2}.{('key', 'value')[k % 2]}" for k in range(4)},
                      "symbolic": {"past": "past"}}),
        vs.Row("gpt2_small_generate", "GPT-2-small-size generation, past growing a token a call from 127", "latency",
               ("gpt2_style", dict(vs.GPT2_SMALL, seq=1, past=127, max_pos=512)), "<= 1.0", runs=40,
               extra={"feedback": {1 + k: f"past_key_values.{k // 2}.{('key', 'value')[k % 2]}" for k in range(24)},
                      "symbolic": {"past": "past"}}),
    ]


def prepare(rows: list[vs.Row], tmp: str) -> dict:
    """Each row's ONNX file, seeded inputs (.npz) and ge's OM (static shapes): {key: job}."""
    import numpy as np
    import onnx
    from ge.core import api
    samples, jobs = vs.load_samples(), {}
    for row in rows:
        model = vs.build_model(row, samples)
        base = os.path.join(tmp, row.key)
        feeds = vs.feeds_for(model, samples, row.seq)
        np.savez(base + ".npz", **feeds)
        spec = ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
        if row.extra.get("symbolic"):  # the same model (its weights drawn alike) with these dims symbolic, -1 for ge
            model = getattr(samples, row.build[0])(**{**row.build[1], **row.extra["symbolic"]})
            spec = ";".join(f"{vi.name}:" + ",".join("-1" if d.dim_param else str(d.dim_value)
                                                     for d in vi.type.tensor_type.shape.dim) for vi in model.graph.input)
        onnx.save(model, base + ".onnx")
        om = api.atc(base + ".onnx", base, input_shape=spec).om_path
        jobs[row.key] = dict(onnx=base + ".onnx", npz=base + ".npz", om=om, kind="latency", runs=row.runs, nodes=1,
                             feedback=row.extra.get("feedback", {}))
    return jobs


# -- the worker: latency (vs_onnxruntime's worker), then the time outside kernels --------------------
def streaming_call(engine: str, job: dict, model_id=None):
    """A call that feeds outputs back as the next call's inputs (job["feedback"]: {output index: input
    name}, a stream's state), with the engine's public API; the session or model is this process's."""
    import numpy as np
    feeds = dict(np.load(job["npz"]))
    back = {int(k): v for k, v in job["feedback"].items()}
    if engine == "ge":
        from ge.core import api
        names = [d.name for d in api.model(model_id).inputs]

        def call():
            outs = api.execute(model_id, [feeds[n] for n in names])
            for k, name in back.items():
                feeds[name] = outs[k]
        return call
    import onnxruntime as ort
    session = ort.InferenceSession(job["onnx"], vs._ort_options(1 if job["single_thread"] else 2),
                                   providers=["CPUExecutionProvider"])

    def call():
        outs = session.run(None, feeds)
        for k, name in back.items():
            feeds[name] = outs[k]
    return call


def _sunk_task_lists(ctx) -> list:
    """Every ExecutionContext a context runs its static tasks in: itself (a static model's), or a hybrid
    context's submodel contexts and those of the child contexts its control flow made."""
    if hasattr(ctx, "handle"):
        return [ctx]
    found = list(ctx.sub_contexts.values())
    for child in ctx.children.values():
        found += _sunk_task_lists(child)
    return found


def ge_outside(job: dict) -> float:
    """The median api.execute of the model with its sunk task lists emptied: everything a call does but
    its static kernels (input checks and binding, output allocation and copy-out, args refresh, kernel
    state; a dynamic model's own nodes and control flow)."""
    import numpy as np
    from ge.core import api
    model_id = api.load_from_file(job["om"], "cpu")
    loaded = api.model(model_id)
    if job["feedback"]:
        call = streaming_call("ge", job, model_id)
    else:
        feeds = dict(np.load(job["npz"]))
        inputs = [feeds[d.name] for d in loaded.inputs]
        call = lambda: api.execute(model_id, inputs)  # noqa: E731
    for _ in range(4):  # binds the inputs, the outputs that keep coming back (context.STEADY runs) and the
        call()          # views, makes the control flow's contexts: as a timed call finds them
    contexts = _sunk_task_lists(loaded.default_context)
    tasks = [ctx.handle for ctx in contexts]  # held: their views keep the outputs bound to them as they were
    for ctx in contexts:
        ctx.handle = []
        if ctx._inline is not None:  # run_inline's calls bound by the warm-up (a static If/Loop body's)
            ctx._inline = ()
    seconds = vs._median_time(call, job["runs"], warmup=5, cpu_time=job["single_thread"])
    del tasks
    api.unload(model_id)
    return seconds


def streaming_latency(engine: str, job: dict) -> dict:
    """vs_onnxruntime's worker for a row whose outputs feed its inputs back: the median call."""
    model_id = None
    if engine == "ge":
        from ge.core import api
        if job["single_thread"]:
            from ge.core.kernels import blas
            blas.set_local_threads(1)
        model_id = api.load_from_file(job["om"], "cpu")
    call = streaming_call(engine, job, model_id)
    return {"value": vs._median_time(call, job["runs"], warmup=max(2, job["runs"] // 10), cpu_time=job["single_thread"])}


def worker(engine: str, job: dict) -> dict:
    result = streaming_latency(engine, job) if job["feedback"] else vs.worker(engine, job)
    if engine == "ge":
        result["outside"] = ge_outside(job)
    return result


def main(argv=None) -> int:
    parser = vs.platform_args(vs.rows_parser(__doc__, 3))
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
    launcher = vs.start_launcher(parser, args)
    try:
        with tempfile.TemporaryDirectory(prefix="ge_small_") as tmp:
            jobs = prepare(selected, tmp)
            vs.run_rounds(launcher, selected, jobs, args.rounds, args.single_thread, results, script=__file__)
    finally:
        launcher.close()
    table = vs.summarize(selected, results)
    print(f"python benchmarks/small_models.py{vs.platform_flags(args)} --rounds {args.rounds}"
          f"{' --only ' + args.only if only else ''}: {vs.conditions(results, args.single_thread)}; "
          "ge outside kernels = execute with no static tasks")
    print(vs.render(table))
    print("\n| workload | ge outside kernels, per call |\n| --- | --- |")
    for e in table:
        outside = statistics.median(r["ge"]["outside"] for r in e["rounds"]) * 1e3
        print(f"| {e['workload']} | {outside:.3f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
