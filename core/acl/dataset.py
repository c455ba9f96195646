"""Dataset runs (msame / ais_bench `--input DIR`): every sample of a folder through one loaded
model, outputs written as `OUT/<sample stem>_output_<i>.<fmt>` (each file atomically), and a
throughput summary. The Ray integration (issue 21) runs the same samples on a cluster."""
from __future__ import annotations

import os
import time
from contextlib import nullcontext

import numpy as np

from ..model.errors import GeError
from ..model.ge_model import TensorDesc
from ...formats.dataset import discover
from ...formats.tensors import HEADER_PARSE, declared_shape, load_inputs, load_npy, save_outputs
from . import profiling
from .models import execute, model


def run_dataset(model_id: int, paths: list[str], output_dir: str, fmt: str = "NPY", progress=None,
                descs=None, check_outputs=None, output_batch_axis: int = 0, warmup: int = 0,
                prefetch: bool = False, profile: bool = False, dump_dir: str | None = None,
                fixed: dict | None = None) -> dict:
    """Run every sample; `progress(done, total, stem)` after each execution. `descs`: the input
    shapes to read the samples with (a gear set beforehand, ais_bench's --dymShape); by default the
    model's, or for a dynamic model the shapes each sample's .npy/.npz files declare.
    As ais_bench, files holding a fraction of a static input's batch (a batch-8 model, batch-1
    files) are stacked along axis 0, `batch` files per execution (the last group padded with its
    first sample), and each output is split back along `output_batch_axis` into one per sample.
    `check_outputs(outputs)` may refuse an execution's outputs before they are written. `warmup`
    untimed executions of the first sample's inputs come first (ais_bench's --warmup_count).
    `prefetch` reads the next sample on a second thread while one runs (ais_bench's --pipeline).
    `profile` adds a traced run of every sample (result["trace"]: one timeline, each task event
    tagged with its sample; result["ops"]: the per-op table); `dump_dir` a run that writes every
    op's outputs into dump_dir/<sample>/ (profiling.py). Both are static models' only.
    `fixed`: {input index: array} the same for every execution, read from no file (the dynamic AIPP
    parameters of --aipp_config).
    Returns {"samples", "executions", "files_per_batch", "seconds", "throughput" (samples per
    second of wall time, reading and writing included), "compute_ms" (the executions alone),
    "latency_ms" and "stats" (each execution's time and counters), "outputs": [paths per sample]}
    (+ "trace", "ops" when profiled). A sample whose files do not fit
    the model stops the run with an error naming the file; its outputs are not written."""
    m = model(model_id)
    fixed = fixed or {}
    fed = [d for i, d in enumerate(m.inputs) if i not in fixed]
    samples = discover(list(paths), [d.name for d in fed])
    per_batch, groups, load_fed = batched(fed, samples, descs and [d for i, d in enumerate(descs) if i not in fixed])

    def load(group):
        inputs = load_fed(group)
        for i in sorted(fixed):
            inputs.insert(i, fixed[i])
        return inputs

    written, latencies, stats, events = [], [], [], []
    start = time.perf_counter()
    if prefetch:
        from concurrent.futures import ThreadPoolExecutor  # (made for a prefetching run only)
    with ThreadPoolExecutor(1, thread_name_prefix="ge-prefetch") if prefetch else nullcontext() as pool:
        pending = pool.submit(load, groups[0]) if pool else None
        for g, group in enumerate(groups):
            inputs = pending.result() if pool else load(group)
            if pool and g + 1 < len(groups):  # the next sample is read while this one runs
                pending = pool.submit(load, groups[g + 1])
            if profile:
                for e in profiling.profile(model_id, inputs, runs=1, warmup=0, origin=start)["traceEvents"]:
                    if e["ph"] == "X":
                        events.append(dict(e, args=dict(e["args"], sample=group[0].stem)))
            if dump_dir is not None:
                profiling.dump(model_id, inputs, os.path.join(dump_dir, group[0].stem))
            for _ in range(warmup if g == 0 else 0):
                execute(model_id, inputs)
            t0 = time.perf_counter()
            outputs = execute(model_id, inputs)
            latencies.append((time.perf_counter() - t0) * 1e3)
            stats.append(dict(getattr(getattr(m, "default_context", None), "stats", None) or {}, run=g))
            if check_outputs is not None:
                check_outputs(outputs)
            for k, per_sample in enumerate(split_outputs(outputs, len(group), per_batch, output_batch_axis)):
                written.append(save_outputs(per_sample, output_dir, group[k].stem, fmt, m.outputs))
            if progress is not None:
                progress(g * per_batch + len(group), len(samples), group[-1].stem)
    seconds = time.perf_counter() - start
    return {"samples": len(samples), "executions": len(latencies), "files_per_batch": per_batch, "seconds": seconds,
            "throughput": len(samples) / seconds if seconds else 0.0, "compute_ms": sum(latencies),
            "latency_ms": latencies, "stats": stats, "outputs": written,
            **({"trace": profiling.trace_meta() + events, "ops": profiling.op_table(events)} if profile else {})}


def batched(model_inputs, samples, descs=None):
    """How a dataset's samples go to executions: (files per execution, the groups of samples each
    execution takes, load(group) -> that execution's input arrays). `descs` as run_dataset's; a
    group shorter than files per execution (the last) is padded with its first sample."""
    dynamic = descs is None and any(d < 0 for desc in model_inputs for d in desc.shape)
    descs = list(descs or model_inputs)
    per_batch = 1 if dynamic else files_per_batch(samples[0].files, descs)
    part = [TensorDesc(d.name, d.dtype, (d.shape[0] // per_batch, *d.shape[1:]), 0) for d in descs]

    def load(group) -> list[np.ndarray]:
        if per_batch == 1:
            return load_inputs(list(group[0].files), file_descs(model_inputs, group[0].files) if dynamic else descs)
        loaded = [load_inputs(list(s.files), part) for s in group + group[:1] * (per_batch - len(group))]
        return [np.concatenate([x[j] for x in loaded], axis=0) for j in range(len(descs))]

    return per_batch, [samples[i:i + per_batch] for i in range(0, len(samples), per_batch)], load


def files_per_batch(files, descs) -> int:
    """How many samples one execution takes: k when each file holds 1/k of its input (k > 1
    dividing the input's dim 0, the same k for every input), else 1."""
    ks = set()
    for f, d in zip(files, descs):
        nbytes = _file_nbytes(f, d)
        want = d.nbytes
        if nbytes is None or nbytes == 0 or want % nbytes or not d.shape or d.shape[0] % (want // nbytes):
            return 1
        ks.add(want // nbytes)
    return ks.pop() if len(ks) == 1 and len(files) == len(descs) else 1


def _file_nbytes(path: str, desc) -> int | None:
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".bin":
            return os.path.getsize(path)
        if ext == ".npy":
            x = load_npy(path, mmap_mode="r")
            return int(np.prod(x.shape)) * np.dtype(desc.dtype).itemsize
    except (OSError, ValueError):
        return None  # reading it later names the problem
    return None


def split_outputs(outputs, samples: int, per_batch: int, axis: int = 0) -> list[list]:
    """The outputs of one execution, one list per sample of its group."""
    if per_batch == 1:
        return [list(outputs)]
    parts = []
    for i, y in enumerate(outputs):
        if axis >= y.ndim or y.shape[axis] % per_batch:
            raise GeError(f"output {i} {list(y.shape)} does not split into {per_batch} samples along axis {axis} "
                          "(--output_batchsize_axis)")
        parts.append(np.split(y, per_batch, axis=axis))
    return [[p[k] for p in parts] for k in range(samples)]


def file_descs(descs, files, gears: str = "") -> list[TensorDesc]:
    """A dynamic model's input descs with the shapes a sample's .npy/.npz files declare (a raw .bin
    carries no shape). `gears`: a gear model's gear list, named when a .bin leaves the gear open."""
    raw = next((f for f in files if not f.lower().endswith((".npy", ".npz", ".pb"))), None)
    if raw is not None:
        dims = ", ".join(f"'{d.name}' {list(d.shape)}" for d in descs if any(x < 0 for x in d.shape))
        how = (f"choose the gear with --dymBatch, --dymHW or --dymDims (its gears: {gears})" if gears else
               "give the input shapes with --dymShape")
        raise GeError(f"{raw}: a raw .bin file carries no shape and the model's inputs have unknown dims ({dims}): "
                      f"{how}, or give the inputs as .npy, .npz or .pb files")
    if len(files) == 1 and files[0].lower().endswith(".npz"):
        with HEADER_PARSE, load_npy(files[0]) as z:  # (its members' headers are parsed as they are read)
            shapes = [z[d.name].shape if d.name in z.files else tuple(d.shape) for d in descs]
    else:
        shapes = [declared_shape(f, d) for f, d in zip(files, descs)]
    return [TensorDesc(d.name, d.dtype, tuple(s), 0) if getattr(d, "kind", "tensor") == "tensor" else d
            for d, s in zip(descs, shapes)]
