"""`ge run` in one call (msame's and ais_bench's job), for Python callers as for the command line:
`run(RunOptions(...))` loads the OM, prepares its inputs (files, a dataset folder, zeros or random
data, a gear or a shape), runs them (a timed loop, contexts at once, Ray actors, or every shape of
a range), writes the outputs, traces and dumps, and returns the summary `ge run --json` prints.
The steps are inference.py's, dataset.py's and ray_dataset.py's; docs/run-options.md says what
each option does.

    from ge.core.acl.runner import RunOptions, run
    result = run(RunOptions("net.om", inputs=["data/"], output="out", output_dirname="r1"))
    result.summary["outputs"]    # msame's names: out/r1/<sample>_output_<i>.bin
"""
from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

import numpy as np

from ..model.errors import GeError
from ..model.ge_model import TensorDesc
from ..runtime.throughput import PHASES, percentiles
from ...formats.dataset import is_dataset, test_data_set_files
from ...formats.tensors import load_inputs, save_outputs, write_text
from . import inference
from .models import load_from_file, model as loaded_model, unload
from .dataset import run_dataset
from ..version import kernels

DEFAULT_OUTPUT_DIR = "out"


@dataclass
class RunOptions:
    """ge run's options under their command-line names (the CLI-only ones aside: --json,
    --summary-json, and the ais_bench options ge accepts and ignores or refuses)."""
    model: str
    inputs: list[str] = field(default_factory=list)  # one file per model input, or dataset folders
    output: str | None = None  # msame: outputs into output/<YYYYMMDD_HHMMSS>/ or output/<output_dirname>/
    output_dirname: str | None = None
    output_dir: str | None = None  # exactly this folder (DEFAULT_OUTPUT_DIR when neither is given)
    outfmt: str | None = None  # BIN with `output`, NPY otherwise
    device: str = "cpu"
    device_id: int | None = None  # msame's NPU id: recorded, the run is on `device`
    loop: int = 1
    duration: float | None = None
    executor: str = "linear"
    contexts: int = 1
    ray_address: str | None = None  # "local" or a cluster's address: the dataset's samples on Ray actors
    ray_actors: int = 2
    seed: int | None = None
    pure_data_type: str | None = None  # "zero" (default) or "random" (default once seed is given)
    warmup_count: int | None = None  # default: 1 when timed (loop > 1 or a duration), else 0
    batchsize: int | None = None  # default: the first input's dim 0
    dym_batch: int | None = None
    dym_hw: str | None = None
    dym_dims: str | None = None
    dym_shape: str | None = None
    dym_shape_range: str | None = None
    output_size: str | None = None
    profiler: bool = False
    profile_json: str | None = None
    dump: bool = False
    acl_json_path: str | None = None
    output_batchsize_axis: int = 0
    pipeline: bool = False
    threads: int | None = None
    weight_dir: str | None = None
    impl_cache_size: int | None = None
    skip_weight_check: bool = False
    stats: bool = False  # every execution's counters (and device memory) in the summary
    verbose: bool = False  # init step timings, last execution's counters, external weights in the summary
    display_all_summary: bool = False  # H2D / compute / D2H percentiles in the summary
    aipp_config: str | None = None  # ais_bench's .config: a dynamic AIPP model's parameters, not read from --input


@dataclass
class RunResult:
    """What a run did: `summary` is what `ge run --json` prints; the rest is for its tables."""
    kind: str  # "inputs", "dataset", "ray" or "shapes" (--dymShape_range: summary {"shapes", "best"})
    summary: dict
    load_ms: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)  # the model's init steps, seconds
    weight_files: list[dict] = field(default_factory=list)
    last_stats: dict = field(default_factory=dict)


def run(o: RunOptions, progress=None) -> RunResult:
    """Run as `ge run` does; `progress(done, total, stem)` after each sample of a dataset, or
    `progress(done, total, "run")` after each timed run (total None with a duration)."""
    _check(o)
    given = list(o.inputs)
    o = replace(o, inputs=test_data_set_files(given))  # onnx's test_data_set_N/: its input_K.pb files
    folder = inference.output_folder(o.output, o.output_dirname) if o.output else (o.output_dir or DEFAULT_OUTPUT_DIR)
    outfmt = (o.outfmt or ("BIN" if o.output else "NPY")).upper()
    profiler_dir, dump_dir = inference.profiler_and_dump(o.output or folder, o.profiler, o.dump, o.acl_json_path)
    s = _Settings(folder, outfmt, profiler_dir, dump_dir,
                  data_type=o.pure_data_type or ("random" if o.seed is not None else "zero"), seed=o.seed or 0,
                  sizes=inference.parse_output_sizes(o.output_size) if o.output_size else None,
                  warmup=o.warmup_count if o.warmup_count is not None else (1 if o.loop > 1 or o.duration else 0),
                  files_given=bool(given))
    with inference.threads(o.threads) if o.threads else nullcontext():
        if o.ray_address:  # the actors load the model; this process only reads its descs
            return _on_ray(o, s, progress)
        return _loaded(o, s, progress)


@dataclass
class _Settings:
    """What the options come to: where outputs, traces and dumps go, the generated data, warm-up."""
    folder: str
    outfmt: str
    profiler_dir: str | None
    dump_dir: str | None
    data_type: str
    seed: int
    sizes: list[int] | None
    warmup: int
    files_given: bool = False  # (a test_data_set folder of no input_K.pb gives no file, for a model of no input)


def _check(o: RunOptions) -> None:
    """Options that contradict each other: one line each saying why."""
    if isinstance(o.inputs, str):
        raise GeError(f"inputs {o.inputs!r}: give a list of paths (one file per model input, or dataset folders)")
    if o.output and o.output_dir:
        raise GeError("--output (msame's timestamped folder) and --output-dir (exactly that folder) both say where "
                      "outputs go: give one")
    if o.output_dirname is not None and not o.output:
        raise GeError("--output_dirname names a folder inside --output: give --output too")
    if o.profiler and o.dump:
        raise GeError("--profiler and --dump cannot both be true (as msame and ais_bench): profile or dump, one per "
                      "run")


def _loaded(o: RunOptions, s: _Settings, progress) -> RunResult:
    t0 = time.perf_counter()
    model_id = load_from_file(o.model, o.device, weight_dir=o.weight_dir, verify_weights=not o.skip_weight_check,
                              impl_cache_size=o.impl_cache_size)
    load_ms = (time.perf_counter() - t0) * 1e3
    try:
        dm = loaded_model(model_id)
        gear_descs = _gear(model_id, o)
        if o.dym_shape_range:
            return _shape_range(model_id, o, s)
        if o.inputs and is_dataset(o.inputs):
            return _dataset(model_id, dm, o, s, gear_descs, load_ms, progress)
        if o.inputs and any(os.path.isdir(p) for p in o.inputs):
            raise GeError(f"--input mixes folders and files ({', '.join(o.inputs)}): give files, or one folder per "
                          "input")
        done = _execute_inputs(model_id, dm, o, s, gear_descs, progress)
    finally:
        unload(model_id)
    return _inputs_result(o, s, done, load_ms)


def _gear(model_id: int, o: RunOptions):
    if o.dym_batch is not None or o.dym_hw or o.dym_dims:
        if not getattr(loaded_model(model_id), "gear_shapes", None):
            option = "--dymBatch" if o.dym_batch is not None else "--dymHW" if o.dym_hw else "--dymDims"
            raise GeError(f"{o.model}: {option} chooses a gear, but this model has none (compiled without "
                          "--dynamic_batch_size, --dynamic_image_size or --dynamic_dims)")
        return inference.select_gear(model_id, o.dym_batch, o.dym_hw, o.dym_dims)
    return None


def _execute_inputs(model_id: int, dm, o: RunOptions, s: _Settings, gear_descs, progress=None) -> dict:
    """One set of inputs (files, or generated data) run, timed, profiled or dumped as asked."""
    paths = list(o.inputs)
    in_descs = gear_descs or inference.input_descs(model_id, paths, o.dym_shape)
    fixed = inference.aipp_inputs(model_id, o.aipp_config)
    fed = [d for i, d in enumerate(in_descs) if i not in fixed]
    if len(paths) == len(fed) - 1 and any(d.name == inference.DYNAMIC_AIPP_INPUT for d in fed):
        raise GeError(f"input '{inference.DYNAMIC_AIPP_INPUT}' takes the dynamic AIPP parameters: give them with "
                      f"--aipp_config FILE.config (ais_bench's format), or the input's bytes as a file of their own")
    if paths or s.files_given:
        inputs = load_inputs(paths, fed)
        sources = paths if len(paths) == len(fed) else [f"{paths[0]}[{d.name}]" for d in fed]
    else:
        inputs = inference.generated_inputs(fed, s.data_type, s.seed)
        sources = ["zeros" if s.data_type == "zero" else f"random (seed {s.seed})"] * len(fed)
    for i in sorted(fixed):
        inputs.insert(i, fixed[i])
        sources.insert(i, o.aipp_config)
    r = inference.run_inputs(model_id, inputs, executor=o.executor, loop=o.loop, warmup=s.warmup, duration=o.duration,
                             contexts=o.contexts, profile=bool(s.profiler_dir or o.profile_json), dump_dir=s.dump_dir,
                             check_outputs=lambda ys: inference.check_outputs(ys, dm.outputs, s.sizes,
                                                                              o.output_batchsize_axis),
                             progress=progress)
    r.update(in_descs=in_descs, sources=sources, timings=dict(dm.timings),
             out_descs=[_described(d, y) for d, y in zip(dm.outputs, r["outputs"])], model_outputs=list(dm.outputs),
             memory={"weights": dm.weight_bytes, "per_context": r["per_context"]},
             weight_files=[dict(f) for f in dm.external_weights],
             last_stats={k: v for k, v in r["executions"][-1].items() if k != "run"})
    return r


def _described(desc, y) -> TensorDesc:
    """An output as the summary shows it: a tensor's dtype and shape; a sequence's length as its
    shape, () for an empty optional."""
    if isinstance(y, np.ndarray):
        return TensorDesc(desc.name, y.dtype.name, tuple(y.shape), 0)
    return TensorDesc(desc.name, f"{desc.kind.replace('_', ' of ')} of {desc.dtype}",
                      (len(y),) if isinstance(y, (list, tuple)) else (), 0)


def _inputs_result(o: RunOptions, s: _Settings, r: dict, load_ms: float) -> RunResult:
    """The outputs written (only after a successful run) and the summary of a run of one set of inputs."""
    om_name = os.path.splitext(os.path.basename(o.model))[0]
    files = save_outputs(r["outputs"], s.folder, om_name, s.outfmt, r["model_outputs"])
    in_descs, executions, parallel, trace = r["in_descs"], r["executions"], r["parallel"], r["trace"]
    batch = o.batchsize or (int(in_descs[0].shape[0]) if in_descs and len(in_descs[0].shape) else 1)
    summary = inference.perf_summary(o.model, o.device, r["latencies"], batch)
    summary.update(executor=o.executor, warmup=s.warmup, output_dir=s.folder)
    if o.device_id is not None:
        summary["device_id"] = o.device_id
    if o.display_all_summary:
        timed = [e for e in executions if e["run"] != "warm-up"]
        summary.update({phase: percentiles([e[phase] for e in timed]) for phase in PHASES})
    if o.stats:
        summary["stats"] = executions
        summary["memory"] = r["memory"]
    if parallel:  # the figures are the N contexts': latency per execution, wall-clock throughput
        summary.update(latency_ms=parallel["latency_ms"], throughput=parallel["wall_throughput"],
                       throughput_mode=parallel)
    trace_files = _write_trace(trace, s.profiler_dir, o.profile_json, om_name)
    if trace is not None:
        summary["ops"] = trace["ops"]
    if trace_files:
        summary["trace"] = trace_files
    if r["dumped"]:
        summary["dump"] = {"folder": s.dump_dir, "files": len(r["dumped"])}
    summary.update(load_ms=round(load_ms, 3),
                   inputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "source": src}
                           for d, src in zip(in_descs, r["sources"])],
                   outputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "file": f}
                            for d, f in zip(r["out_descs"], files)])
    if o.verbose:
        summary.update(init_timings_ms={k: v * 1e3 for k, v in r["timings"].items()}, last_stats=r["last_stats"],
                       external_weights=r["weight_files"], kernels=kernels())
    return RunResult("inputs", summary, load_ms, r["latencies"], r["timings"], r["weight_files"], r["last_stats"])


def _dataset(model_id: int, dm, o: RunOptions, s: _Settings, gear_descs, load_ms: float, progress) -> RunResult:
    """A dataset folder (or one per input): every sample in turn (dataset.py)."""
    if o.contexts > 1 or o.executor != "linear":
        raise GeError("--contexts and --executor time one set of inputs; a dataset folder runs its samples in turn "
                      "(give one sample's files with --input)")
    descs = gear_descs or (inference.shaped_descs(dm.inputs, o.dym_shape) if o.dym_shape else None)

    def check(outputs):
        inference.check_outputs(outputs, dm.outputs, s.sizes, o.output_batchsize_axis)

    result = run_dataset(model_id, list(o.inputs), s.folder, s.outfmt, progress, descs=descs, check_outputs=check,
                         output_batch_axis=o.output_batchsize_axis, warmup=s.warmup, prefetch=o.pipeline,
                         profile=bool(s.profiler_dir or o.profile_json), dump_dir=s.dump_dir,
                         fixed=inference.aipp_inputs(model_id, o.aipp_config))
    summary = {"model": o.model, "device": o.device, **({"device_id": o.device_id} if o.device_id is not None else {}),
               "warmup": s.warmup, "samples": result["samples"],
               "executions": result["executions"], "files_per_batch": result["files_per_batch"],
               "seconds": result["seconds"], "throughput": result["throughput"], "output_dir": s.folder,
               "load_ms": load_ms, "latency_ms": percentiles(result["latency_ms"])}
    if o.display_all_summary:
        summary.update({phase: percentiles([e[phase] for e in result["stats"]]) for phase in PHASES})
    if o.stats:
        summary["stats"] = result["stats"]
    om_name = os.path.splitext(os.path.basename(o.model))[0]
    trace = {"traceEvents": result["trace"], "ops": result["ops"]} if "trace" in result else None
    trace_files = _write_trace(trace, s.profiler_dir, o.profile_json, om_name)
    if trace is not None:
        summary.update(ops=trace["ops"], trace=trace_files)
    if s.dump_dir:
        summary["dump"] = {"folder": s.dump_dir}
    summary["outputs"] = result["outputs"]
    return RunResult("dataset", summary, load_ms, result["latency_ms"], dict(dm.timings),
                     last_stats={k: v for k, v in result["stats"][-1].items() if k != "run"})


def _on_ray(o: RunOptions, s: _Settings, progress) -> RunResult:
    """A dataset on Ray actors (ray_dataset.py)."""
    from .ray_dataset import run_dataset_on_ray
    if not o.inputs or not is_dataset(o.inputs):
        raise GeError("--ray runs a dataset: give --input one folder (or one folder per input)")
    given = [name for name, on in (("--profiler/--profile", o.profiler or o.profile_json), ("--dump", o.dump),
                                   ("--dymShape", o.dym_shape), ("--dymShape_range", o.dym_shape_range),
                                   ("--dymBatch/--dymHW/--dymDims", o.dym_batch or o.dym_hw or o.dym_dims)) if on]
    if given:
        raise GeError(f"--ray runs each sample as the model's inputs; it does not combine with {', '.join(given)}")
    address = None if o.ray_address == "local" else o.ray_address
    result = run_dataset_on_ray(o.model, list(o.inputs), s.folder, s.outfmt, address=address, actors=o.ray_actors,
                                device=o.device, weight_dir=o.weight_dir, progress=progress)
    summary = {k: v for k, v in result.items() if k != "outputs"}
    summary.update(model=o.model, device=o.device, output_dir=s.folder, ray=address or "local")
    summary["outputs"] = result["outputs"]
    return RunResult("ray", summary)


def _shape_range(model_id: int, o: RunOptions, s: _Settings) -> RunResult:
    """ais_bench's --dymShape_range: every shape timed with generated inputs; the one of best throughput named."""
    clash = [name for name, given in (("--input", o.inputs), ("--dymShape", o.dym_shape),
                                      ("--profiler/--profile", s.profiler_dir or o.profile_json),
                                      ("--dump", s.dump_dir), ("--contexts", o.contexts > 1),
                                      ("--executor", o.executor != "linear")) if given]
    if clash:
        raise GeError(f"--dymShape_range times generated inputs at each of its shapes; it does not combine "
                      f"with {', '.join(clash)}")
    rows = inference.time_shapes(model_id, o.dym_shape_range, o.loop, s.warmup, s.data_type, s.seed)
    best = max(rows, key=lambda r: r["throughput"])
    return RunResult("shapes", {"shapes": rows, "best": best["shape"]})


def _write_trace(trace, profiler_dir, profile_json, om_name) -> list[str]:
    if trace is None:
        return []
    text = json.dumps({"traceEvents": trace["traceEvents"]}) + "\n"
    files = [profile_json] if profile_json else []
    if profiler_dir:
        files.append(os.path.join(profiler_dir, f"{om_name}_trace.json"))
    for f in files:
        write_text(f, text)
    return files
