"""Dataset inference on Ray (`pip install ge[ray]`): an OM loaded once per actor, batches of rows
through it. Nothing else in ge imports ray; this module imports it only where a cluster is used.

    import ray
    from ge.core.acl.ray_dataset import OmPredictor

    ray.init()                                     # or ray.init("ray://head:10001")
    images = ray.data.from_items([{"images": np.random.rand(3, 224, 224).astype(np.float32)}
                                  for _ in range(64)])
    scores = images.map_batches(OmPredictor, fn_constructor_kwargs={"om": "/shared/resnet50.om"},
                                compute=ray.data.ActorPoolStrategy(size=2),  # (concurrency=2 before Ray 2.51)
                                batch_size=16, batch_format="numpy")
    for row in scores.iter_rows():                 # columns: the model's output names (+ the
        print(row["output"].argmax())              # input batch's other columns, passed through)

Rows carry one sample per model input column, either without the batch axis ([3, 224, 224] for
a [N, 3, 224, 224] input) or with a batch axis of 1. The OM's path (and its weight folder) must be
readable where the actors run.
"""
from __future__ import annotations

import logging
import os
import time

import numpy as np

from ..model.errors import GeError
from .models import execute, gear_sizes, load_from_file, model, unload

INSTALL_HINT = "Ray is not installed: pip install 'ge[ray]' (or pip install 'ray[data]')"


class _ActorModel:
    """The OM an actor loads once, and unloads when Ray drops the actor."""

    def __init__(self, om: str, device: str = "cpu", weight_dir: str | None = None):
        self.model_id = load_from_file(om, device, weight_dir=weight_dir)
        m = model(self.model_id)
        self.inputs, self.outputs = list(m.inputs), list(m.outputs)

    def __del__(self):
        try:
            unload(self.model_id)
        except Exception:  # the interpreter may be shutting down
            pass


class OmPredictor(_ActorModel):
    """A Ray Data callable class: `ds.map_batches(OmPredictor, fn_constructor_kwargs={"om": path},
    compute=ray.data.ActorPoolStrategy(size=N), batch_size=B, batch_format="numpy")`. Each actor loads the OM once (weights read
    once per actor) and runs every batch through the model's context, in chunks of the model's
    batch: its static batch, or for a --dynamic_batch_size OM the largest gear that fits the rows
    left (the last chunk padded to the smallest gear that holds it, the padding dropped)."""

    def __init__(self, om: str, device: str = "cpu", weight_dir: str | None = None):
        super().__init__(om, device, weight_dir)
        self.batches = _batch_sizes(self.model_id, self.inputs)
        self.samples, self.seconds = 0, 0.0

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [d.name for d in self.inputs if d.name not in batch]
        if missing:
            raise GeError(f"the batch has no column for the model's inputs {missing} (columns: {sorted(batch)})")
        rows = [_rows(batch[d.name], d) for d in self.inputs]
        n = len(rows[0])
        t0 = time.perf_counter()
        results: list[list[np.ndarray]] = [[] for _ in self.outputs]
        start = 0
        while start < n:
            size = _chunk(self.batches, n - start)
            take = min(size, n - start)
            feeds = [_pad(r[start:start + take], size) for r in rows]
            for k, y in enumerate(execute(self.model_id, feeds)):
                results[k].append(y[:take])
            start += take
        self.samples, self.seconds = self.samples + n, self.seconds + time.perf_counter() - t0
        out = {k: v for k, v in batch.items() if k not in {d.name for d in self.inputs}}
        for d, parts in zip(self.outputs, results):
            out[d.name] = np.concatenate(parts) if parts else np.empty((0,) + tuple(d.shape[1:]), d.dtype)
        return out


def _batch_sizes(model_id: int, inputs) -> list[int]:
    """The batch sizes the model runs, ascending: its gears' or its static batch."""
    shapes = [tuple(d.shape) for d in inputs]
    if any(not s or s[0] < 0 for s in shapes):
        try:
            gears = gear_sizes(model_id)
        except GeError:
            raise GeError("OmPredictor needs a batch axis of static size or --dynamic_batch_size gears; this "
                          "model's inputs are " + ", ".join(f"{d.name}{list(d.shape)}" for d in inputs)) from None
        return sorted({next(iter(g["inputs"].values()))[0] for g in gears})
    return [shapes[0][0]]


def _chunk(sizes: list[int], left: int) -> int:
    """The largest batch the rows left fill, else the smallest (padded)."""
    fits = [s for s in sizes if s <= left]
    return max(fits) if fits else sizes[0]


def _rows(column: np.ndarray, desc) -> np.ndarray:
    """A column as [rows, *sample shape] (rows given with a batch axis of 1 lose it)."""
    column = np.asarray(column)
    sample = tuple(desc.shape[1:])
    if column.ndim == len(sample) + 2 and column.shape[1] == 1:
        column = column[:, 0]
    if column.ndim != len(sample) + 1 or any(s >= 0 and s != c for s, c in zip(sample, column.shape[1:])):
        raise GeError(f"column '{desc.name}': rows of shape {list(column.shape[1:])} do not fit the model's input "
                      f"{list(desc.shape)}")
    return np.ascontiguousarray(column, dtype=np.dtype(desc.dtype)) if column.dtype != desc.dtype else column


def _pad(rows: np.ndarray, size: int) -> np.ndarray:
    if len(rows) == size:
        return np.ascontiguousarray(rows)
    padded = np.zeros((size,) + rows.shape[1:], rows.dtype)
    padded[:len(rows)] = rows
    return padded


class SamplePredictor(_ActorModel):
    """Dataset mode's rows on an actor: each row names a sample's files; the actor reads them
    against the model's inputs and runs the sample alone, exactly as the local dataset mode does
    (so the outputs are bit-identical), returning the outputs as object columns and the actor's
    identity and compute time for the summary."""

    def __init__(self, om: str, device: str = "cpu", weight_dir: str | None = None):
        import socket
        super().__init__(om, device, weight_dir)
        self.dynamic = any(d < 0 for desc in self.inputs for d in desc.shape)
        self.actor = f"{socket.gethostname()}:{os.getpid()}"

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from ...formats.tensors import load_inputs
        from .dataset import file_descs
        n = len(batch["stem"])
        outputs = [np.empty(n, object) for _ in self.outputs]
        t0 = time.perf_counter()
        for r in range(n):
            files = [str(f) for f in batch["files"][r]]
            descs = file_descs(self.inputs, files) if self.dynamic else self.inputs
            for k, y in enumerate(execute(self.model_id, load_inputs(files, descs))):
                outputs[k][r] = y
        seconds = time.perf_counter() - t0
        out = {"index": batch["index"], "stem": batch["stem"],
               "actor": np.array([self.actor] * n), "seconds": np.full(n, seconds / max(n, 1))}
        out.update({f"output_{k}": col for k, col in enumerate(outputs)})
        return out


def run_dataset_on_ray(om: str, paths: list[str], output_dir: str, fmt: str = "NPY", *, address: str | None = None,
                       actors: int = 2, batch_size: int = 8, device: str = "cpu", weight_dir: str | None = None,
                       progress=None) -> dict:
    """`ge run --input DIR --ray [ADDRESS]`: dataset mode with the samples spread over `actors` Ray
    actors (a local Ray instance when `address` is None, else the cluster's; the OM, its weights and
    the dataset must be readable at the same paths on every node). Outputs are written by this
    process, in sample order, with the local mode's names and contents. Returns the local mode's
    summary plus "actors": {actor: {"samples", "compute_ms", "throughput"}} and "ray_start_s"."""
    for var, level in (("RAY_BACKEND_LOG_LEVEL", "fatal"), ("RAY_DATA_LOG_LEVEL", "ERROR")):
        os.environ.setdefault(var, level)  # ge prints its own progress and summary
    try:
        import ray
    except ImportError:
        raise GeError(INSTALL_HINT) from None
    from ...formats.dataset import discover
    from ...formats.tensors import save_outputs

    model_id = load_from_file(om, device, weight_dir=weight_dir)  # a bad OM fails here, before Ray starts
    try:
        m = model(model_id)
        input_names, n_outputs = [d.name for d in m.inputs], len(m.outputs)
    finally:
        unload(model_id)
    samples = discover(list(paths), input_names)
    start = time.perf_counter()
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level=logging.ERROR)
    ray_start = time.perf_counter() - start
    context = ray.data.DataContext.get_current()
    context.execution_options.preserve_order = True
    context.enable_progress_bars = False
    rows = [{"index": k, "stem": s.stem, "files": [str(f) for f in s.files]} for k, s in enumerate(samples)]
    blocks = max(1, min(len(rows), actors * 4))  # enough blocks and batches for every actor to get some
    batch_size = max(1, min(batch_size, -(-len(rows) // blocks)))
    results = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
        SamplePredictor, fn_constructor_kwargs={"om": om, "device": device, "weight_dir": weight_dir},
        compute=ray.data.ActorPoolStrategy(size=actors), batch_size=batch_size, batch_format="numpy")
    written, per_actor = [], {}
    for k, row in enumerate(results.iter_rows()):
        outputs = [np.asarray(row[f"output_{i}"]) for i in range(n_outputs)]
        written.append(save_outputs(outputs, output_dir, row["stem"], fmt))
        stats = per_actor.setdefault(str(row["actor"]), {"samples": 0, "compute_ms": 0.0})
        stats["samples"] += 1
        stats["compute_ms"] += float(row["seconds"]) * 1e3
        if progress is not None:
            progress(k + 1, len(samples), row["stem"])
    seconds = time.perf_counter() - start
    for stats in per_actor.values():
        stats["throughput"] = stats["samples"] / (stats["compute_ms"] / 1e3) if stats["compute_ms"] else 0.0
    return {"samples": len(samples), "seconds": seconds, "throughput": len(samples) / seconds if seconds else 0.0,
            "compute_ms": sum(s["compute_ms"] for s in per_actor.values()), "outputs": written,
            "actors": per_actor, "ray_start_s": ray_start}
