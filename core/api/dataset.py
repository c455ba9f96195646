"""Dataset runs (msame / ais_bench `--input DIR`): every sample of a folder through one loaded
model, outputs written as `OUT/<sample stem>_output_<i>.<fmt>` (each file atomically), and a
throughput summary. The Ray integration (issue 21) runs the same samples on a cluster."""
from __future__ import annotations

import time

import numpy as np

from ..errors import GeError
from ..ge_model import TensorDesc
from ...formats.dataset import discover
from ...formats.tensors import load_inputs, save_outputs
from .acl import execute, model


def run_dataset(model_id: int, paths: list[str], output_dir: str, fmt: str = "NPY", progress=None,
                descs=None, check_outputs=None) -> dict:
    """Run every sample; `progress(done, total, stem)` after each. `descs`: the input shapes to read
    the samples with (a gear set beforehand, ais_bench's --dymShape); by default the model's, or for
    a dynamic model the shapes each sample's .npy/.npz files declare. `check_outputs(outputs)` may
    refuse a sample's outputs before they are written. Returns {"samples", "seconds", "throughput"
    (samples per second of wall time, reading and writing included), "compute_ms" (the executions
    alone), "latency_ms" (each execution), "outputs": [paths per sample]}. A sample whose files do
    not fit the model stops the run with an error naming the file; its outputs are not written."""
    m = model(model_id)
    samples = discover(list(paths), [d.name for d in m.inputs])
    written, latencies = [], []
    start = time.perf_counter()
    dynamic = descs is None and any(d < 0 for desc in m.inputs for d in desc.shape)
    for k, sample in enumerate(samples):
        sample_descs = file_descs(m.inputs, sample.files) if dynamic else (descs or m.inputs)
        inputs = load_inputs(list(sample.files), sample_descs)
        t0 = time.perf_counter()
        outputs = execute(model_id, inputs)
        latencies.append((time.perf_counter() - t0) * 1e3)
        if check_outputs is not None:
            check_outputs(outputs)
        written.append(save_outputs(outputs, output_dir, sample.stem, fmt))
        if progress is not None:
            progress(k + 1, len(samples), sample.stem)
    seconds = time.perf_counter() - start
    return {"samples": len(samples), "seconds": seconds, "throughput": len(samples) / seconds if seconds else 0.0,
            "compute_ms": sum(latencies), "latency_ms": latencies, "outputs": written}


def file_descs(descs, files) -> list[TensorDesc]:
    """A dynamic model's input descs with the shapes a sample's .npy/.npz files declare (a raw .bin
    carries no shape)."""
    if any(not f.lower().endswith((".npy", ".npz")) for f in files):
        raise GeError(f"{files[0]}: the model has unknown input dims; give its samples as .npy or .npz (raw .bin "
                      "files carry no shape)")
    if len(files) == 1 and files[0].lower().endswith(".npz"):
        with np.load(files[0], allow_pickle=False) as z:
            shapes = [z[d.name].shape if d.name in z.files else tuple(d.shape) for d in descs]
    else:
        shapes = [np.load(f, mmap_mode="r", allow_pickle=False).shape for f in files]
    return [TensorDesc(d.name, d.dtype, tuple(s), 0) for d, s in zip(descs, shapes)]
