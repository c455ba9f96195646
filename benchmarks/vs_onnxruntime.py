"""ge against onnxruntime on every row of issue 12's table, each engine in its own process.

    python benchmarks/vs_onnxruntime.py [--rounds 5] [--only resnet50_b1,two_node] [--json out.json]
    python benchmarks/vs_onnxruntime.py --quick        # small models, one round: a smoke test
    python benchmarks/vs_onnxruntime.py --single-thread --only mobilenetv3_b1   # on a loaded machine
    python benchmarks/vs_onnxruntime.py --level v3     # ge at another native level, beside onnxruntime
    python benchmarks/vs_onnxruntime.py --as-avx2-cpu  # both engines as on an AVX2 CPU without AVX-512

Models are built here from samples/build_samples.py (random weights) and compiled once by ge
(cpu device). Then, round after round, every row is measured by a fresh process per engine (ge,
then onnxruntime with 2 intra-op threads, or the other way round on alternate rounds), so neither
engine's threads, caches or heap see the other's. A latency row's figure per round is the median
of its timed runs; the table shows, per engine, the median over rounds, their ratio ge /
onnxruntime (lower is better) and the range of the rounds' own ratios (how noisy the machine was).

Rows (--only takes their keys):
  resnet50_b1 resnet50_b8 mobilenetv2_b1 mobilenetv2_b2 mobilenetv2_b8 mobilenetv3_b1 pplcnet_b1 vit_b16_b1
  bert_base bert_small    latency of one inference (ms); pplcnet_b1 is PP-LCNet as paddle2onnx writes
                          it at opset 11 (HardSwish as Div(Mul(x, Clip(x + 3, 0, 6)), 6))
  mobilenetv2_qdq mobilenetv2_qdq_b2 mobilenetv2_qop bert_small_int8
                          the int8 models onnxruntime's quantizer writes (quantize_static QDQ at batch 1
                          and 2, QOperator, quantize_dynamic): latency (ms); where their float32 builds
                          (mobilenetv2_b1, mobilenetv2_b2, bert_small) ran too, lines under the table
                          give ge int8 / ge float32. `--only int8` runs all of these
  dbnet_160x960 dbnet_640x480 crnn_b1 crnn_b2 yolov8n
                          latency of issue 31's real-model shapes (samples/build_samples.py, random weights):
                          a PaddleOCR DBNet detector and CRNN recogniser (paddle2onnx, opset 11), a YOLOv8n
                          detector (torch.onnx)
  dbnet_dynamic           the 160x960 DBNet with its input's N, H and W symbolic, as PaddleOCR exports its
                          detectors, compiled so (--input_shape x:-1,3,-1,-1: ge's hybrid executor) and fed
                          1 x 3 x 160 x 960: latency (ms)
  gpt2_prefill gpt2_decode llama_decode
                          mid-size transformers as torch.onnx exports them (samples' gpt2_style at GPT-2
                          small's size: prefill of 128 tokens, a decoding step after 127; llama_style at
                          8 layers, hidden 1024, GQA 16/4 heads: a decoding step after 128): latency (ms)
  whisper_tiny whisper_cls whisper_cls_b2 whisper_cls_qdq whisper_cls_qdq_b2
                          Whisper-tiny's encoder as torch.onnx exports HuggingFace's (samples'
                          whisper_encoder_style: Conv1d stem with Erf Gelu, 1500 positions, 6 heads), and
                          the audio classifier on it (mean-pooled, 10 classes) in float32 and quantized by
                          quantize_static (QDQ, batch 1 and 2): latency (ms)
  chain_1000              1000 tiny elementwise ops (Add/Relu, [1, 16]): latency / 1000 (us per node)
  two_node                a 2-node model (Add, Mul on [1, 16]): latency of one call (us)
  compile_load            BERT-base: ge's api.atc + api.load_from_file vs onnxruntime's session creation (s)
  rss_resnet50            peak RSS (getrusage maxrss) of a fresh process that loads ResNet-50 (ge: its OM,
                          onnxruntime: the ONNX file) and runs it once (MiB); load time beside it

--level runs ge's workers at one native level (v2, v3, v4, v4vnni on x86-64, as GE_NATIVE_LEVEL; numpy:
the numpy plans, as GE_NO_NATIVE=1) instead of the best this CPU runs: how ge does on an AVX2 machine
next to onnxruntime on the same one (onnxruntime keeps its own dispatch, the best this CPU has). A level
this CPU cannot run is refused, naming what it lacks. The table's title says the level and the CPU.
--as-avx2-cpu runs both engines' workers as on an AVX2 CPU without AVX-512, VNNI or AMX (x86-64-v3, most
laptops and cloud machines) on an AVX-512 one: the features masked from CPUID by Linux's CPUID faulting
(tests/platforms/avx2_cpu.py), so onnxruntime's MLAS and numpy choose their AVX2 kernels and ge its v3 ones,
all at this CPU's speed: the comparison an AVX2 machine gives, which --level v3 alone does not.

--single-thread runs both engines on one thread (ge's native kernels, onnxruntime's intra-op pool)
and times the latency rows by the process's CPU time instead of the clock: when other processes
share the cores, wall-clock latencies of 2-thread runs mostly measure the scheduler, CPU time of
one thread stays close to the unloaded figure (cache and memory contention remain).

Every call is the public one: ge's `api.execute(model_id, inputs)` (outputs allocated by the call,
as onnxruntime's `run` does), onnxruntime's `InferenceSession.run(None, feeds)`.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
ENGINES = ("ge", "onnxruntime")


# -- what is measured ---------------------------------------------------------------------------
@dataclass
class Row:
    key: str
    label: str
    kind: str            # latency | per_node | per_call | compile_load | rss
    build: tuple         # (builder name in build_samples or in this file, kwargs)
    target: str
    runs: int = 20       # timed runs per process (latency kinds)
    nodes: int = 1       # per_node: the latency is divided by this
    seq: int = 128       # BERT inputs [1, seq]
    extra: dict = field(default_factory=dict)

    @property
    def unit(self) -> str:
        return {"latency": "ms", "per_node": "us", "per_call": "us", "compile_load": "s", "rss": "MiB"}[self.kind]

    @property
    def scale(self) -> float:  # seconds (or bytes) -> unit
        return {"latency": 1e3, "per_node": 1e6, "per_call": 1e6, "compile_load": 1.0, "rss": 1.0 / 2**20}[self.kind]


BERT_BASE = dict(layers=12, hidden=768, heads=12, intermediate=3072, vocab=30522, max_pos=512)
BERT_SMALL = dict(layers=4, hidden=512, heads=8, intermediate=2048, vocab=30522, max_pos=512)  # L-4 H-512 A-8
GPT2_SMALL = dict(layers=12, hidden=768, heads=12, vocab=50257, max_pos=256)  # GPT-2 small's size (124M)
LLAMA_MID = dict(seq=1, past=128, layers=8, hidden=1024, heads=16, kv_heads=4, intermediate=2816, vocab=32000)
WHISPER_CLS = {"classes": 10}  # Whisper-tiny's encoder, mean-pooled, a linear head (an audio classifier)


def full_rows() -> list[Row]:
    return [
        Row("resnet50_b1", "ResNet-50 batch 1", "latency", ("resnet50_style", {}), "<= 1.0", runs=20),
        Row("resnet50_b8", "ResNet-50 batch 8", "latency", ("resnet50_style", {"batch": 8}), "<= 1.0", runs=6),
        Row("mobilenetv2_b1", "MobileNetV2 batch 1", "latency", ("mobilenetv2_style", {}), "<= 1.2", runs=40),
        Row("mobilenetv2_b2", "MobileNetV2 batch 2", "latency", ("mobilenetv2_style", {"batch": 2}), "<= 1.0",
            runs=25),
        Row("mobilenetv2_b8", "MobileNetV2 batch 8", "latency", ("mobilenetv2_style", {"batch": 8}), "<= 1.0",
            runs=12),
        Row("mobilenetv3_b1", "MobileNetV3-Large batch 1", "latency", ("mobilenetv3_style", {}), "<= 1.0", runs=40),
        Row("pplcnet_b1", "PP-LCNet x1.0 (paddle2onnx, opset 11) batch 1", "latency", ("pplcnet_style", {}), "<= 1.0",
            runs=40),
        Row("vit_b16_b1", "ViT-B/16 batch 1", "latency", ("vit_style", {}), "<= 1.0", runs=10),
        Row("bert_base", "BERT-base seq 128 batch 1", "latency", ("bert_style", BERT_BASE), "<= 1.0", runs=15),
        Row("bert_small", "BERT-small seq 128 batch 1", "latency", ("bert_style", BERT_SMALL), "<= 1.0", runs=30),
        Row("mobilenetv2_qdq", "MobileNetV2 int8 QDQ (quantize_static) batch 1", "latency",
            ("quantized", {"form": "qdq", "model": "mobilenetv2_style"}), "<= 1.0", runs=40),
        Row("mobilenetv2_qdq_b2", "MobileNetV2 int8 QDQ (quantize_static) batch 2", "latency",
            ("quantized", {"form": "qdq", "model": "mobilenetv2_style", "kwargs": {"batch": 2}}), "<= 1.0", runs=25),
        Row("mobilenetv2_qop", "MobileNetV2 int8 QOperator batch 1", "latency",
            ("quantized", {"form": "qoperator", "model": "mobilenetv2_style"}), "<= 1.0", runs=40),
        Row("bert_small_int8", "BERT-small int8 dynamic (quantize_dynamic) seq 128", "latency",
            ("quantized", {"form": "dynamic", "model": "bert_style", "kwargs": BERT_SMALL}), "<= 1.0", runs=30),
        Row("dbnet_160x960", "OCR detector (DBNet, PP-LCNet) 160x960", "latency",
            ("dbnet_style", {"height": 160, "width": 960}), "<= 1.0", runs=10),
        Row("dbnet_640x480", "OCR detector (DBNet, PP-LCNet) 640x480", "latency", ("dbnet_style", {}), "<= 1.0",
            runs=10),
        Row("dbnet_dynamic", "OCR detector (DBNet, PP-LCNet) 160x960, dynamic N, H, W", "latency",
            ("dbnet_style", {"height": 160, "width": 960}), "<= 1.0", runs=10,
            extra={"input_shape": "x:-1,3,-1,-1"}),
        Row("crnn_b1", "OCR recogniser (PP-LCNet + BiLSTM) 48x320 batch 1", "latency", ("crnn_lcnet_style", {}),
            "<= 1.0", runs=30),
        Row("crnn_b2", "OCR recogniser (PP-LCNet + BiLSTM) 48x320 batch 2", "latency",
            ("crnn_lcnet_style", {"batch": 2}), "<= 1.0", runs=20),
        Row("yolov8n", "YOLOv8n-style detector 640x640", "latency", ("yolov8_style", {}), "<= 1.0", runs=8),
        Row("gpt2_prefill", "GPT-2-small-size decoder prefill seq 128", "latency",
            ("gpt2_style", dict(GPT2_SMALL, seq=128)), "<= 1.0", runs=8),
        Row("gpt2_decode", "GPT-2-small-size decoding step, 127 past tokens", "latency",
            ("gpt2_style", dict(GPT2_SMALL, seq=1, past=127)), "<= 1.0", runs=30),
        Row("llama_decode", "LLaMA-style decoding step (8 layers, hidden 1024, GQA 16/4), 128 past tokens",
            "latency", ("llama_style", LLAMA_MID), "<= 1.0", runs=30),
        Row("whisper_tiny", "Whisper-tiny-style encoder (4 layers, d 384), 80 x 3000 frames", "latency",
            ("whisper_encoder_style", {}), "<= 1.0", runs=5),
        Row("whisper_cls", "Whisper-tiny-style classifier batch 1", "latency",
            ("whisper_encoder_style", WHISPER_CLS), "<= 1.0", runs=5),
        Row("whisper_cls_b2", "Whisper-tiny-style classifier batch 2", "latency",
            ("whisper_encoder_style", dict(WHISPER_CLS, batch=2)), "<= 1.0", runs=3),
        Row("whisper_cls_qdq", "Whisper-tiny-style classifier int8 QDQ (quantize_static) batch 1", "latency",
            ("quantized", {"form": "qdq", "model": "whisper_encoder_style", "kwargs": WHISPER_CLS}), "<= 1.0", runs=5),
        Row("whisper_cls_qdq_b2", "Whisper-tiny-style classifier int8 QDQ (quantize_static) batch 2", "latency",
            ("quantized", {"form": "qdq", "model": "whisper_encoder_style", "kwargs": dict(WHISPER_CLS, batch=2)}),
            "<= 1.0", runs=3),
        Row("chain_1000", "1000 tiny elementwise ops, per node", "per_node", ("chain", {"n": 1000}),
            "<= onnxruntime's", runs=200, nodes=1000),
        Row("two_node", "a 2-node model, per call", "per_call", ("two_node", {}), "<= 2x", runs=3000),
        Row("compile_load", "compile + load, BERT-base", "compile_load", ("bert_style", BERT_BASE), "<= 2x"),
        Row("rss_resnet50", "peak RSS, load ResNet-50 + run", "rss", ("resnet50_style", {}), "<= 250 MiB"),
    ]


#: each int8 row's float32 build (the same model before quantization, same batch): the table's last
#: lines compare ge with itself, int8 against float32, where both rows ran
FP32_OF = {"mobilenetv2_qdq": "mobilenetv2_b1", "mobilenetv2_qdq_b2": "mobilenetv2_b2",
           "mobilenetv2_qop": "mobilenetv2_b1", "bert_small_int8": "bert_small", "whisper_cls_qdq": "whisper_cls",
           "whisper_cls_qdq_b2": "whisper_cls_b2"}
#: --only int8: the int8 rows and their float32 builds
GROUPS = {"int8": ["mobilenetv2_b1", "mobilenetv2_b2", "bert_small", "mobilenetv2_qdq", "mobilenetv2_qdq_b2",
                   "mobilenetv2_qop", "bert_small_int8", "whisper_cls", "whisper_cls_b2", "whisper_cls_qdq",
                   "whisper_cls_qdq_b2"]}


def quick_rows() -> list[Row]:
    """The same rows on models small enough for a smoke test (seconds, not minutes)."""
    cnn = {"image": 32}
    bert = dict(layers=1, hidden=32, heads=2, intermediate=64, vocab=50, max_pos=32)
    whisper = dict(mels=8, frames=64, layers=1, hidden=32, heads=2, ffn=64)
    sizes = {
        "resnet50_b1": ("resnet50_style", dict(cnn, width=8, blocks=(1, 1, 1, 1), classes=10)),
        "resnet50_b8": ("resnet50_style", dict(cnn, width=8, blocks=(1, 1, 1, 1), classes=10, batch=2)),
        "mobilenetv2_b1": ("mobilenetv2_style", dict(cnn, width_mult=0.25, classes=10)),
        "mobilenetv2_b2": ("mobilenetv2_style", dict(cnn, width_mult=0.25, classes=10, batch=2)),
        "mobilenetv2_b8": ("mobilenetv2_style", dict(cnn, width_mult=0.25, classes=10, batch=2)),
        "mobilenetv3_b1": ("mobilenetv3_style", dict(cnn, width_mult=0.25, classes=10)),
        "pplcnet_b1": ("pplcnet_style", dict(cnn, scale=0.25, classes=10)),
        "vit_b16_b1": ("vit_style", dict(image=32, layers=1, hidden=32, heads=2, mlp=64, classes=10)),
        "bert_base": ("bert_style", bert), "bert_small": ("bert_style", bert),
        "mobilenetv2_qdq": ("quantized", {"form": "qdq", "model": "mobilenetv2_style", "kwargs": dict(cnn, width_mult=0.25, classes=10)}),
        "mobilenetv2_qdq_b2": ("quantized", {"form": "qdq", "model": "mobilenetv2_style",
                                             "kwargs": dict(cnn, width_mult=0.25, classes=10, batch=2)}),
        "mobilenetv2_qop": ("quantized", {"form": "qoperator", "model": "mobilenetv2_style",
                                          "kwargs": dict(cnn, width_mult=0.25, classes=10)}),
        "bert_small_int8": ("quantized", {"form": "dynamic", "model": "bert_style", "kwargs": bert}),
        "dbnet_160x960": ("dbnet_style", dict(height=64, width=96, scale=0.25, neck=32)),
        "dbnet_640x480": ("dbnet_style", dict(height=64, width=64, scale=0.25, neck=32)),
        "dbnet_dynamic": ("dbnet_style", dict(height=64, width=96, scale=0.25, neck=32)),
        "crnn_b1": ("crnn_lcnet_style", dict(width=64, scale=0.25, hidden=16, classes=50)),
        "crnn_b2": ("crnn_lcnet_style", dict(batch=2, width=64, scale=0.25, hidden=16, classes=50)),
        "yolov8n": ("yolov8_style", dict(image=64, width=0.125, classes=8)),
        "gpt2_prefill": ("gpt2_style", dict(seq=8, layers=1, hidden=32, heads=2, vocab=50, max_pos=32)),
        "gpt2_decode": ("gpt2_style", dict(seq=1, past=7, layers=1, hidden=32, heads=2, vocab=50, max_pos=32)),
        "llama_decode": ("llama_style", dict(seq=1, past=7, layers=1, hidden=32, heads=4, kv_heads=2, intermediate=64,
                                             vocab=50, max_pos=32)),
        "whisper_tiny": ("whisper_encoder_style", whisper),
        "whisper_cls": ("whisper_encoder_style", dict(whisper, classes=4)),
        "whisper_cls_b2": ("whisper_encoder_style", dict(whisper, classes=4, batch=2)),
        "whisper_cls_qdq": ("quantized", {"form": "qdq", "model": "whisper_encoder_style",
                                          "kwargs": dict(whisper, classes=4)}),
        "whisper_cls_qdq_b2": ("quantized", {"form": "qdq", "model": "whisper_encoder_style",
                                             "kwargs": dict(whisper, classes=4, batch=2)}),
        "chain_1000": ("chain", {"n": 20}), "two_node": ("two_node", {}),
        "compile_load": ("bert_style", bert),
        "rss_resnet50": ("resnet50_style", dict(cnn, width=8, blocks=(1, 1, 1, 1), classes=10)),
    }
    rows = []
    for row in full_rows():
        row.build = sizes[row.key]
        row.runs = min(row.runs, 5)
        row.seq = 8
        if row.kind == "per_node":
            row.nodes = row.build[1]["n"]
        rows.append(row)
    return rows


# -- models ---------------------------------------------------------------------------------------
def load_samples():
    spec = importlib.util.spec_from_file_location("build_samples", os.path.join(HERE, "..", "samples", "build_samples.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_model(nodes, inits, width: int):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    inits = [numpy_helper.from_array(np.asarray(a, np.float32), name) for name, a in inits]
    graph = helper.make_graph(nodes, "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def chain(n: int = 1000, width: int = 16):
    """x -> Add(w0) -> Relu -> Add(w2) -> Relu -> ...: n nodes, n/2 of them Add (each its own weight)."""
    import numpy as np
    from onnx import helper
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"t{i}"
        if i % 2:
            nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu{i}"))
        else:
            inits.append((f"w{i}", 0.01 * rng.standard_normal(width)))
            nodes.append(helper.make_node("Add", [prev, f"w{i}"], [out], name=f"add{i}"))
        prev = out
    return _tiny_model(nodes, inits, width)


def two_node(width: int = 16):
    """y = (x + a) * b on [1, width]: the smallest model with more than one task."""
    from onnx import helper
    nodes = [helper.make_node("Add", ["x", "a"], ["t"], name="add"), helper.make_node("Mul", ["t", "b"], ["y"], name="mul")]
    return _tiny_model(nodes, [("a", [0.5] * width), ("b", [2.0] * width)], width)


def quantized(form: str, model: str, kwargs: dict | None = None):
    """A sample quantized by onnxruntime's tool (samples/quantize_samples.py): form qdq, qoperator or
    dynamic; static forms are calibrated on 4 seeded images of the model's input shape."""
    spec = importlib.util.spec_from_file_location("quantize_samples", os.path.join(HERE, "..", "samples", "quantize_samples.py"))
    quantize = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(quantize)
    fp32 = getattr(load_samples(), model)(**(kwargs or {}))
    if form == "dynamic":
        return quantize.dynamic(fp32)
    first = fp32.graph.input[0]
    shape = [d.dim_value for d in first.type.tensor_type.shape.dim]
    return getattr(quantize, form)(fp32, quantize.calibration_images(shape, name=first.name))


def build_model(row: Row, samples):
    name, kwargs = row.build
    return (globals()[name] if name in ("chain", "two_node", "quantized") else getattr(samples, name))(**kwargs)


def feeds_for(model, samples, seq: int) -> dict:
    """Seeded inputs: the samples' rules (BERT: token ids, an all-ones mask at batch 1)."""
    import numpy as np
    from onnx import TensorProto
    if any(vi.type.tensor_type.elem_type == TensorProto.INT64 for vi in model.graph.input):
        return samples.sample_inputs(model, batch=1, seq=seq)
    rng = np.random.default_rng(0)
    return {vi.name: rng.standard_normal([d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
            for vi in model.graph.input}


def symbolic_dims(model, keep: tuple[int, ...] = (1,)):
    """The model as an exporter with dynamic axes writes it: its inputs' and outputs' dims symbolic but
    for the axes in `keep` (the channels), no value_info."""
    for value in list(model.graph.input) + list(model.graph.output):
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            if axis not in keep:
                dim.dim_param = f"{value.name}_{axis}"
    del model.graph.value_info[:]
    return model


def prepare(rows: list[Row], tmp: str) -> dict:
    """Each row's ONNX file, inputs (.npz) and, but for compile_load, ge's OM: {key: job}."""
    import numpy as np
    import onnx
    from ge.core import api
    samples = load_samples()
    built: dict = {}
    jobs = {}
    for row in rows:
        t0 = time.perf_counter()
        key = row.build[0] + repr(row.build[1]) + repr(row.extra.get("input_shape"))
        if key not in built:
            model = build_model(row, samples)
            base = os.path.join(tmp, f"{row.key}")
            feeds = feeds_for(model, samples, row.seq)
            np.savez(base + ".npz", **feeds)
            # a dynamic row: the model with symbolic dims, compiled with them (ge's hybrid executor), fed the
            # sample's shape
            if "input_shape" in row.extra:
                model = symbolic_dims(model)
            onnx.save(model, base + ".onnx")
            spec = row.extra.get("input_shape") or ";".join(f"{k}:{','.join(map(str, v.shape))}" for k, v in feeds.items())
            om = None
            if row.kind != "compile_load":
                om = api.atc(base + ".onnx", base, input_shape=spec).om_path
            built[key] = dict(onnx=base + ".onnx", npz=base + ".npz", spec=spec, om=om)
            del model
        job = dict(built[key], kind=row.kind, runs=row.runs, nodes=row.nodes, out=os.path.join(tmp, f"{row.key}_worker"))
        if row.kind != "compile_load" and job["om"] is None:  # built for compile_load first
            job["om"] = api.atc(job["onnx"], job["out"], input_shape=job["spec"]).om_path
        jobs[row.key] = job
        print(f"  prepared {row.key:<16}({time.perf_counter() - t0:.1f} s)", file=sys.stderr, flush=True)
    return jobs


# -- the worker: one engine, one row, one process -------------------------------------------------
def _median_time(fn, runs: int, warmup: int, cpu_time: bool = False) -> float:
    for _ in range(warmup):
        fn()
    clock = time.process_time if cpu_time else time.perf_counter
    times = []
    for _ in range(runs):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def _ort_options(threads: int = 2):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return options


def worker(engine: str, job: dict) -> dict:
    """Measure one row with one engine in this (fresh) process; returns {"value": ..., ...}."""
    import resource
    import numpy as np
    feeds = dict(np.load(job["npz"]))
    kind = job["kind"]
    single = job.get("single_thread", False)
    if engine == "ge":
        from ge.core import api
        if single:  # ge's native kernels and OpenBLAS, for calls from this thread
            from ge.core.kernels import blas
            blas.set_local_threads(1)
        if kind == "compile_load":
            from ge.core.atc import conversion  # noqa: F401  (imported on first use: not timed)
            from ge.core.kernels.registry import supported_ops
            supported_ops()  # imports every kernel family: module imports are not timed, onnxruntime's neither
            t0 = time.perf_counter()
            om = api.atc(job["onnx"], job["out"], input_shape=job["spec"]).om_path
            t1 = time.perf_counter()
            model_id = api.load_from_file(om, "cpu")
            t2 = time.perf_counter()
            api.unload(model_id)
            return {"value": t2 - t0, "compile_s": t1 - t0, "load_s": t2 - t1}
        t0 = time.perf_counter()
        model_id = api.load_from_file(job["om"], "cpu")
        load_s = time.perf_counter() - t0
        inputs = [feeds[d.name] for d in api.model(model_id).inputs]
        run = lambda: api.execute(model_id, inputs)  # noqa: E731
    else:
        import onnxruntime as ort
        t0 = time.perf_counter()
        session = ort.InferenceSession(job["onnx"], _ort_options(1 if single else 2), providers=["CPUExecutionProvider"])
        load_s = time.perf_counter() - t0
        if kind == "compile_load":
            return {"value": load_s}
        run = lambda: session.run(None, feeds)  # noqa: E731
    if kind == "rss":
        run()
        return {"value": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "vm_hwm": _vm_hwm(),
                "load_s": load_s}
    value = _median_time(run, job["runs"], warmup=max(2, job["runs"] // 10), cpu_time=single)
    return {"value": value / job["nodes"], "load_s": load_s}


def _vm_hwm() -> int | None:
    """This process's peak RSS since exec (Linux), beside getrusage's."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))
    except (OSError, StopIteration, ValueError):
        return None


class Launcher:
    """Starts the workers from a small process of its own. Linux keeps a process's peak RSS
    (getrusage's ru_maxrss) across fork and exec, so a worker started by this script once it has
    built and compiled the models would report this script's peak, not its own."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--launcher"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, argv: list[str]) -> dict:
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def launcher_loop() -> int:
    for line in sys.stdin:
        proc = subprocess.run(json.loads(line), capture_output=True, text=True)
        print(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}), flush=True)
    return 0


def measure(launcher: Launcher, engine: str, job: dict, script: str = __file__) -> dict:
    """One engine on one job in a fresh process: `script --worker ENGINE JOB` (this file's worker, or
    another benchmark's that prints the same JSON line)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    proc = launcher.run([sys.executable, os.path.abspath(script), "--worker", engine, json.dumps(job)])
    if proc["returncode"]:
        raise SystemExit(f"{engine} worker failed on {job['onnx']}:\n{proc['stderr']}")
    return dict(json.loads(proc["stdout"].strip().splitlines()[-1]), loadavg=load)


def run_rounds(launcher: Launcher, rows: list[Row], jobs: dict, rounds: int, single_thread: bool, results: dict,
               script: str = __file__) -> None:
    """Every row measured by both engines `rounds` times, which engine goes first alternating;
    results[row.key] gets one {engine: figures} per round (script: whose worker measures, see measure)."""
    for job in jobs.values():
        job["single_thread"] = single_thread
    for n in range(rounds):
        for i, row in enumerate(rows):
            order = ENGINES if (n + i) % 2 == 0 else ENGINES[::-1]
            results[row.key].append({engine: measure(launcher, engine, jobs[row.key], script) for engine in order})
        print(f"  round {n + 1}/{rounds} done", file=sys.stderr, flush=True)


def conditions(results: dict, single_thread: bool) -> str:
    """How the figures were taken, for the table's title line."""
    from ge.core.kernels import native
    loads = [r[e]["loadavg"] for rs in results.values() for r in rs for e in ENGINES if r[e]["loadavg"] is not None]
    threads = "one thread per engine, latencies in CPU time" if single_thread else "onnxruntime with 2 intra-op threads"
    return (f"each engine in its own process, {threads}; median over rounds, ratio ge / onnxruntime (lower is better)"
            + (f"; 1-min load average {min(loads):.1f}-{max(loads):.1f}" if loads else "")
            + f"; ge's kernels: {native.status()}; CPU: {cpu_name()}"
            + (" posing as an AVX2 CPU without AVX-512 (CPUID masked)" if "ge-avx2-cpuid" in os.environ.get("LD_PRELOAD", "") else ""))


def cpu_name() -> str:
    """The CPU's model as /proc/cpuinfo names it (else platform's)."""
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine()


def use_level(level: str) -> None:
    """ge at `level` in this process and every worker it starts (before ge's kernels load, and before the
    Launcher starts): a native level (GE_NATIVE_LEVEL) or "numpy" (GE_NO_NATIVE=1)."""
    os.environ.pop("GE_NO_NATIVE", None)
    os.environ.pop("GE_NATIVE_LEVEL", None)
    os.environ.update({"GE_NO_NATIVE": "1"} if level == "numpy" else {"GE_NATIVE_LEVEL": level})


def level_refused(level: str) -> str | None:
    """Why this CPU cannot run native level `level` (as ge's loader says), or None."""
    from ge.core.kernels import native
    try:
        native.load_level(level)
    except native.Unavailable as exc:
        return str(exc)
    return None


# -- the table ------------------------------------------------------------------------------------
def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MiB":
        return f"{value:.0f} MiB"
    return f"{value:.3g} {unit}" if value < 10 else f"{value:.1f} {unit}"


def summarize(rows: list[Row], results: dict) -> list[dict]:
    table = []
    for row in rows:
        per_round = results[row.key]
        ge = statistics.median(r["ge"]["value"] for r in per_round) * row.scale
        ort = statistics.median(r["onnxruntime"]["value"] for r in per_round) * row.scale
        ratios = [r["ge"]["value"] / r["onnxruntime"]["value"] for r in per_round]
        entry = dict(key=row.key, workload=row.label, unit=row.unit, ge=ge, onnxruntime=ort, ratio=ge / ort,
                     ratio_min=min(ratios), ratio_max=max(ratios), target=row.target, rounds=per_round)
        if row.kind == "compile_load":
            entry["ge_compile_s"] = statistics.median(r["ge"]["compile_s"] for r in per_round)
            entry["ge_load_s"] = statistics.median(r["ge"]["load_s"] for r in per_round)
        if row.kind == "rss":
            entry["ge_load_s"] = statistics.median(r["ge"]["load_s"] for r in per_round)
            entry["onnxruntime_load_s"] = statistics.median(r["onnxruntime"]["load_s"] for r in per_round)
        table.append(entry)
    return table


def render(table: list[dict]) -> str:
    lines = ["| workload | ge | onnxruntime | ge / onnxruntime | rounds' ratios | target |",
             "| --- | --- | --- | --- | --- | --- |"]
    for e in table:
        ge, ort = _fmt(e["ge"], e["unit"]), _fmt(e["onnxruntime"], e["unit"])
        if "ge_compile_s" in e:
            ge += f" ({e['ge_compile_s']:.2f} + {e['ge_load_s']:.2f})"
        if "onnxruntime_load_s" in e:
            ge += f" (load {e['ge_load_s'] * 1e3:.0f} ms)"
            ort += f" (load {e['onnxruntime_load_s'] * 1e3:.0f} ms)"
        lines.append(f"| {e['workload']} | {ge} | {ort} | {e['ratio']:.2f} | "
                     f"{e['ratio_min']:.2f}-{e['ratio_max']:.2f} | {e['target']} |")
    return "\n".join(lines)


def int8_vs_fp32(table: list[dict]) -> list[str]:
    """ge's int8 rows against ge's float32 builds of the same models in this run (FP32_OF)."""
    ge = {e["key"]: e for e in table}
    return [f"ge int8 / ge float32, {ge[k]['workload']}: {ge[k]['ge']:.3g} / {ge[f]['ge']:.3g} {ge[k]['unit']} = "
            f"{ge[k]['ge'] / ge[f]['ge']:.2f}" for k, f in FP32_OF.items() if k in ge and f in ge]


def rows_parser(doc: str, rounds: int | None, rounds_help: str = "rounds per row") -> argparse.ArgumentParser:
    """The arguments of every script that runs rows through run_rounds (this one, recurrent.py,
    small_models.py): --rounds, --only and --single-thread, the script's docstring as its help."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=doc)
    parser.add_argument("--rounds", type=int, default=rounds, help=rounds_help)
    parser.add_argument("--only", default="", help="comma-separated row keys (default: every row)")
    parser.add_argument("--single-thread", action="store_true",
                        help="one thread per engine, latencies in CPU time (a loaded machine)")
    return parser


def platform_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """--level and --as-avx2-cpu: the CPU the workers run as (see start_launcher)."""
    parser.add_argument("--level", default=None,
                        help="ge's native level (v2, v3, ...; numpy: none); default: the best this CPU runs")
    parser.add_argument("--as-avx2-cpu", action="store_true",
                        help="both engines as on an AVX2 CPU without AVX-512 (CPUID masked, see the docstring)")
    return parser


def start_launcher(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Launcher:
    """The Launcher, its workers in the environment --level and --as-avx2-cpu ask for (what they
    cannot have is a usage error naming what the CPU lacks)."""
    if args.as_avx2_cpu:
        sys.path.insert(0, os.path.dirname(HERE))
        from tests.platforms import avx2_cpu
        reason = avx2_cpu.unavailable()
        if reason:
            parser.error(f"--as-avx2-cpu: {reason}")
        if args.level in ("v4", "v4vnni"):
            parser.error(f"--level {args.level}: an AVX2 CPU has no AVX-512")
        os.environ.update(avx2_cpu.environment())
        args.level = args.level or "v3"  # what ge's loader picks there (this process reads the real CPU)
    if args.level:
        use_level(args.level)
    launcher = Launcher()
    refused = args.level and args.level != "numpy" and level_refused(args.level)
    if refused:
        launcher.close()
        parser.error(f"--level {args.level}: {refused}")
    return launcher


def platform_flags(args: argparse.Namespace) -> str:
    """--single-thread, --level and --as-avx2-cpu as given, for the table's command line."""
    return ("".join(f" --{flag}" for flag in ("single-thread", "as-avx2-cpu") if getattr(args, flag.replace("-", "_")))
            + (f" --level {args.level}" if args.level else ""))


def main(argv=None) -> int:
    parser = platform_args(rows_parser(__doc__, None, "rounds per row (default 5; 1 with --quick)"))
    parser.add_argument("--quick", action="store_true", help="small models and few runs: a smoke test")
    parser.add_argument("--json", default=None, help="also write every round's figures here")
    parser.add_argument("--worker", nargs=2, metavar=("ENGINE", "JOB"), help=argparse.SUPPRESS)
    parser.add_argument("--launcher", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        engine, job = args.worker
        print(json.dumps(worker(engine, json.loads(job))))
        return 0
    if args.launcher:
        return launcher_loop()

    rows = quick_rows() if args.quick else full_rows()
    only = [r for k in args.only.split(",") if k for r in GROUPS.get(k, [k])]
    unknown = set(only) - {r.key for r in rows}
    if unknown:
        parser.error(f"unknown rows {sorted(unknown)}; choose from {', '.join(r.key for r in rows)}")
    rows = [r for r in rows if not only or r.key in only]
    rounds = args.rounds or (1 if args.quick else 5)
    results: dict = {r.key: [] for r in rows}
    launcher = start_launcher(parser, args)  # first, while this process is small
    try:
        with tempfile.TemporaryDirectory(prefix="ge_vs_ort_") as tmp:
            jobs = prepare(rows, tmp)
            run_rounds(launcher, rows, jobs, rounds, args.single_thread, results)
    finally:
        launcher.close()
    table = summarize(rows, results)
    print(f"python benchmarks/vs_onnxruntime.py{' --quick' if args.quick else ''}"
          f"{platform_flags(args)} --rounds {rounds}"
          f"{' --only ' + args.only if only else ''}: {conditions(results, args.single_thread)}")
    print(render(table))
    for line in int8_vs_fp32(table):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "quick": args.quick, "rows": table}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
