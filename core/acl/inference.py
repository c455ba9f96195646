"""A run as msame and ais_bench do it (`ge run`), step by step: the folder outputs go to, the
inputs (files, zeros or random), the gear or shape of a dynamic model, a timed loop after warm-up
runs, the output size check of `--outputSize`, and the settings of an acl.json. The command line
only parses options and prints; every step is here for Python callers too."""
from __future__ import annotations

import itertools
import json
import os
import re
import time
from contextlib import contextmanager

import numpy as np

from ..model.dynamic_model import GEARS
from ..model.errors import GeError, ShapeError
from ..model.ge_model import TensorDesc
from ..kernels import native
from ..kernels.blas import openblas_threads_local, set_local_threads
from ..runtime.throughput import run_contexts
from ...formats.dataset import test_data_set_files
from ...formats.tensors import load_inputs, random_inputs, save_outputs
from . import profiling
from .aipp import DYNAMIC_AIPP_INPUT, dynamic_aipp_data
from .models import model, set_dynamic_batch_size, set_dynamic_hw_size, set_input_dynamic_dims
from .dataset import file_descs
from ..shape_options import parse_shape_spec

PURE_DATA_TYPES = ("zero", "random")
MSAME_TIME_FORMAT = "%Y%m%d_%H%M%S"  # msame's Utils::TimeLine

#: ais_bench's options nothing in ge can honour, and why (the option's value fills {}); ge run and
#: `python3 -m ais_bench` refuse them alike
REFUSED = {
    "energy_consumption": "--energy_consumption: there is no NPU power sensor to read (ais_bench reads npu-smi); ge "
                          "runs on the CPU or a simulated NPU",
    "backend": "--backend {}: ais_bench's backend runs another engine (trtexec: TensorRT); ge runs the OM itself",
    "perf": "--perf: trtexec's per-layer report belongs to ais_bench's trtexec backend; ge's per-op profile is "
            "--profiler true",
    "divide_input": "--divide_input: splitting inputs across several devices needs a multi-device run, which ge does "
                    "not do (one simulated NPU per process)",
}


def output_folder(output: str, dirname: str | None = None, now: float | None = None,
                  time_format: str = MSAME_TIME_FORMAT) -> str:
    """msame's layout: OUTPUT/<YYYYMMDD_HHMMSS> (local time of the run; ais_bench's own is
    `time_format` "%Y_%m_%d-%H_%M_%S"), or OUTPUT/<dirname> as ais_bench's --output_dirname."""
    if dirname is not None:
        if not dirname or os.path.isabs(dirname) or ".." in dirname.replace("\\", "/").split("/"):
            raise GeError(f"--output_dirname '{dirname}': give a folder name inside --output")
        return os.path.join(output, dirname)
    return os.path.join(output, time.strftime(time_format, time.localtime(now)))


def require_tensor_io(dm) -> None:
    """aclruntime's sessions take and give tensors: a model whose inputs or outputs are sequences or
    optionals runs through ge run (.pb files) or the Python API (lists of arrays, None when empty)."""
    odd = [(what, d) for what, ds in (("input", dm.inputs), ("output", dm.outputs)) for d in ds
           if getattr(d, "kind", "tensor") != "tensor"]
    if odd:
        raise GeError(", ".join(f"{what} '{d.name}' is a {d.kind} of {d.dtype}" for what, d in odd)
                      + ": aclruntime's sessions take tensors only; run this model with ge run (ONNX .pb files) or "
                        "the Python API (ge.core.api.execute: a sequence is a list of arrays, an empty optional None)")


def aipp_inputs(model_id: int, aipp_config: str | None) -> dict:
    """ais_bench's --aipp_config FILE.config: {index of the model's ascend_dynamic_aipp_data input:
    its bytes for the file's settings}, the same every execution ({} without the option)."""
    if not aipp_config:
        return {}
    dm = model(model_id)
    names = [d.name for d in dm.inputs]
    if DYNAMIC_AIPP_INPUT not in names:
        raise GeError(f"--aipp_config {aipp_config}: model '{dm.name}' has no dynamic AIPP input (compile it with "
                      "--insert_op_conf and aipp_mode: dynamic)")
    return {names.index(DYNAMIC_AIPP_INPUT): dynamic_aipp_data(model_id, aipp_config)}


def zero_inputs(descs) -> list[np.ndarray]:
    """msame's and ais_bench's default inputs when none are given: every byte zero."""
    return [np.full(tuple(int(d) for d in desc.shape), "", object) if np.dtype(desc.dtype) == object  # strings: ""
            else np.zeros(tuple(int(d) for d in desc.shape), np.dtype(desc.dtype)) for desc in descs]


def generated_inputs(descs, data_type: str = "zero", seed: int = 0) -> list[np.ndarray]:
    """ais_bench's --pure_data_type: zeros, or seeded random data (integers in a safe index range)."""
    if data_type not in PURE_DATA_TYPES:
        raise GeError(f"pure data type '{data_type}' is not one of {', '.join(PURE_DATA_TYPES)}")
    return zero_inputs(descs) if data_type == "zero" else random_inputs(descs, seed)


def input_descs(model_id: int, files=(), dym_shape: str | None = None) -> list[TensorDesc]:
    """The concrete input shapes of a run: the model's own when static; for a dynamic model those
    --dymShape gives (ais_bench), else those the .npy/.npz files declare, else the first gear or the
    largest shape of each range."""
    dm = model(model_id)
    descs = list(dm.inputs)
    if dym_shape:
        return shaped_descs(descs, dym_shape)
    if not any(d < 0 for desc in descs for d in desc.shape):
        return descs
    gears = dm.shape_mode == GEARS
    if files:
        return file_descs(descs, list(files), dm.gear_list() if gears else "")
    if gears:
        return [TensorDesc(d.name, d.dtype, dm.gear_shapes[0][d.name], 0) for d in descs]
    if all(d.ranges for d in descs if any(x < 0 for x in d.shape)):
        return [TensorDesc(d.name, d.dtype, tuple(hi if x < 0 else x for x, (_, hi) in zip(d.shape, d.ranges))
                           if d.ranges else d.shape, 0) for d in descs]
    raise GeError(f"model '{dm.name}' has unknown input dims: give its inputs with --input or their shapes with "
                  "--dymShape")


def read_inputs(model_id: int, paths, dym_shape: str | None = None) -> list:
    """The inputs `ge run --input` reads from `paths` for this model (a file per input in order: .npy,
    .npz, .bin, ONNX .pb; or onnx's test_data_set_N folder), checked against its inputs: arrays,
    lists of arrays for sequences, None for an empty optional, as execute takes them."""
    paths = test_data_set_files([os.fspath(p) for p in paths])
    return load_inputs(paths, input_descs(model_id, paths, dym_shape))


def write_outputs(model_id: int, outputs, folder: str, name: str, fmt: str = "NPY") -> list[str]:
    """`outputs` of this model written as `ge run --outfmt` writes them: `folder/<name>_output_<i>.<fmt>`
    (PB: ONNX TensorProto, SequenceProto or OptionalProto files, named after the model's outputs)."""
    return save_outputs(outputs, folder, name, fmt, model(model_id).outputs)


def shaped_descs(descs, spec: str, option: str = "--dymShape") -> list[TensorDesc]:
    """The descs with the shapes of a "name:d1,d2;name2:..." spec, checked against the static dims."""
    shapes = parse_shape_spec(spec, option)
    names = [d.name for d in descs]
    unknown = [n for n in shapes if n not in names]
    if unknown:
        raise ShapeError(f"{option}: the model has no input '{unknown[0]}' (its inputs: {', '.join(names)})")
    out = []
    for d in descs:
        if d.name not in shapes:
            if any(x < 0 for x in d.shape):
                raise ShapeError(f"{option}: input '{d.name}' has unknown dims {list(d.shape)}; give its shape too")
            out.append(d)
            continue
        shape = shapes[d.name]
        if any(isinstance(x, tuple) or x < 0 for x in shape):
            raise ShapeError(f"{option}: input '{d.name}' needs a concrete shape, got {spec!r}")
        if tuple(d.shape) != (-2,) and (len(shape) != len(d.shape)
                                         or any(m >= 0 and m != x for m, x in zip(d.shape, shape))):
            raise ShapeError(f"{option}: shape {shape} of input '{d.name}' does not fit the model's {list(d.shape)}")
        out.append(TensorDesc(d.name, d.dtype, tuple(shape), 0))
    return out


def select_gear(model_id: int, batch: int | None = None, hw: str | None = None,
                dims: str | None = None) -> list[TensorDesc]:
    """msame's --dymBatch / --dymHW / --dymDims: set the gear (aclmdlSetDynamic*) and return its
    input descs. --dymDims is "name:d1,d2;..." (ais_bench) or every dim of every input in order,
    "1,600,600,3,1,3" (msame)."""
    dm = model(model_id)
    if batch is not None:
        k = set_dynamic_batch_size(model_id, batch)
    elif hw:
        try:
            h, w = (int(v) for v in hw.split(","))
        except ValueError:
            raise GeError(f"--dymHW '{hw}' is not H,W") from None
        k = set_dynamic_hw_size(model_id, h, w)
    elif dims:
        k = set_input_dynamic_dims(model_id, _gear_values(dm.inputs, dims))
    else:
        raise GeError("select_gear: give a batch size, an image size or dims")
    return [TensorDesc(d.name, d.dtype, dm.gear_shapes[k][d.name], 0) for d in dm.inputs]


def _gear_values(descs, dims: str) -> list[int]:
    """The -1 dims' values, in input order, of a --dymDims spec."""
    if ":" in dims:
        shapes = parse_shape_spec(dims, "--dymDims")
        return [v for d in descs for want, v in zip(d.shape, shapes.get(d.name, d.shape)) if want == -1]
    try:
        flat = [int(v) for v in dims.split(",") if v.strip()]
    except ValueError:
        raise GeError(f"--dymDims '{dims}' is neither 'name:d1,d2;...' nor a list of integers") from None
    rank = sum(len(d.shape) for d in descs)
    if len(flat) != rank:
        raise GeError(f"--dymDims '{dims}' gives {len(flat)} dims; the model's inputs have {rank} "
                      f"({'; '.join(f'{d.name}:{list(d.shape)}' for d in descs)})")
    it = iter(flat)
    shapes = [[next(it) for _ in d.shape] for d in descs]
    return [v for d, s in zip(descs, shapes) for want, v in zip(d.shape, s) if want == -1]


def timed_runs(ctx, inputs, loop: int = 1, warmup: int = 0, duration: float | None = None, trace=None,
               progress=None):
    """`warmup` untimed executions, then `loop` timed ones, or as many as fit in `duration` seconds
    (trtexec's --duration; at least `loop`). `trace` (profiling.TaskTrace on `ctx`) records the timed
    ones; `progress(done, total or None, "run")` after each. Returns (outputs of the last, latencies
    in ms, the counters of every execution with "run": "warm-up" or its index)."""
    if loop < 1 or warmup < 0 or (duration is not None and duration <= 0):
        raise GeError(f"loop {loop} / warm-up {warmup} / duration {duration}: run at least once, warm up zero or "
                      f"more times, for a duration above 0 s")
    executions = []
    for _ in range(warmup):
        ctx.execute(inputs)
        executions.append(dict(ctx.stats, run="warm-up"))
    if trace is not None:
        trace.discard()
    latencies, outputs = [], None
    end = time.perf_counter() + duration if duration else None
    i = 0
    while i < loop or (end is not None and time.perf_counter() < end):
        t = time.perf_counter()
        outputs = ctx.execute(inputs)
        seconds = time.perf_counter() - t
        latencies.append(seconds * 1e3)
        executions.append(dict(ctx.stats, run=i))
        if trace is not None:
            trace.executed(i, t, seconds)
        i += 1
        if progress is not None:
            progress(i, None if end is not None else loop, "run")
    return outputs, latencies, executions


def run_inputs(model_id: int, inputs, *, executor: str = "linear", loop: int = 1, warmup: int = 0,
               duration: float | None = None, contexts: int = 1, profile: bool = False, dump_dir: str | None = None,
               check_outputs=None, progress=None) -> dict:
    """One set of inputs run as `ge run` runs it, on any kind of model: timed on the default context
    (or one of `executor`), or in throughput mode on `contexts` new contexts at once (the default
    context then runs once, for the outputs, checked by `check_outputs(outputs)` before the
    contexts start); `profile`: the timed runs are traced (a context of the static model or gear
    that runs, in the linear order, an observer after each task); then dumped when asked. Returns
    outputs, latencies, executions (counters), parallel (the throughput summary or None), trace,
    dumped and per_context bytes."""
    dm = model(model_id)
    if profile and (executor != "linear" or contexts > 1):
        raise GeError("the profiler traces the timed runs of one context in the linear order: drop "
                      + ("--executor " + executor if executor != "linear" else f"--contexts {contexts}"))
    traced = profiling.traced_model(model_id, inputs) if profile else None
    ctx = (traced.create_context() if traced is not None else
           dm.default_context if executor == "linear" else dm.create_context(executor=executor))
    try:
        trace = profiling.TaskTrace(ctx) if traced is not None else None
        outputs, latencies, executions = timed_runs(
            ctx, inputs, *((1, 0, None) if contexts > 1 else (loop, warmup, duration)), trace, progress)
        per_context = getattr(ctx, "device_bytes", None)
        if traced is not None:  # (its outputs outlive the context)
            outputs = [np.array(y) for y in outputs]
    finally:
        if traced is not None:
            traced.destroy_context(ctx)
    if check_outputs is not None:
        check_outputs(outputs)
    parallel = run_contexts(dm, inputs, contexts, loop, executor, warmup=max(warmup, 1)) if contexts > 1 else None
    return {"outputs": outputs, "latencies": latencies, "executions": executions, "parallel": parallel,
            "trace": trace.result(traced, len(latencies)) if trace is not None else None,
            "dumped": profiling.dump(model_id, inputs, dump_dir) if dump_dir else [],
            "per_context": per_context}


def parse_output_sizes(spec: str) -> list[int]:
    try:
        sizes = [int(v) for v in spec.split(",")]
    except ValueError:
        raise GeError(f"--outputSize '{spec}' is not a comma-separated list of byte counts") from None
    if any(s <= 0 for s in sizes):
        raise GeError(f"--outputSize '{spec}': sizes are byte counts above 0")
    return sizes


def check_output_sizes(outputs, sizes: list[int], descs=()) -> None:
    """ais_bench's --outputSize: the bytes given for each output's buffer; an output that does not
    fit is an error, as ACL's execute fails on a too-small buffer."""
    if len(sizes) != len(outputs):
        raise GeError(f"--outputSize gives {len(sizes)} size(s); the model has {len(outputs)} output(s)")
    names = [d.name for d in descs] or [str(i) for i in range(len(outputs))]
    for i, (y, size, name) in enumerate(zip(outputs, sizes, names)):
        if isinstance(y, np.ndarray) and y.nbytes > size:  # (a sequence or an optional has no buffer)
            raise ShapeError(f"output {i} ('{name}', {y.dtype} {list(y.shape)}) needs {y.nbytes} bytes; --outputSize "
                             f"gives {size}")


def check_outputs(outputs, descs, sizes: list[int] | None, axis: int = 0) -> None:
    """A run's outputs against --outputSize (`sizes`) and --output_batchsize_axis (every output has it)."""
    if sizes is not None:
        check_output_sizes(outputs, sizes, descs)
    for i, (d, y) in enumerate(zip(descs, outputs)):
        if axis and isinstance(y, np.ndarray) and axis >= y.ndim:
            raise GeError(f"--output_batchsize_axis {axis}: output {i} ('{d.name}') has rank {y.ndim}")


def perf_summary(model_path: str, device: str, latencies_ms: list[float], batch: int) -> dict:
    """The latency figures of a timed loop and its throughput: 1000 * batch / mean latency ms."""
    lat = np.asarray(latencies_ms, dtype=np.float64)
    mean = float(lat.mean())
    return {
        "model": model_path,
        "device": device,
        "loop": len(latencies_ms),
        "latency_ms": {"min": float(lat.min()), "mean": mean, "median": float(np.median(lat)),
                       **{f"p{q}": float(np.percentile(lat, q)) for q in (90, 95, 99)},
                       "max": float(lat.max()), "std": float(lat.std())},
        "throughput": 1000.0 * batch / mean if mean > 0 else float("inf"),
        "batch": batch,
    }


@contextmanager
def threads(n: int):
    """Threads of the native kernels and of OpenBLAS for the runs made on this thread inside the
    block (ais_bench --threads); both counts are restored after it."""
    if n < 1:
        raise GeError(f"threads {n}: at least 1")
    native_before = native.threads()
    blas_before = set_local_threads(n)
    try:
        yield
    finally:
        native.set_threads(native_before)
        if blas_before is not None:
            openblas_threads_local(blas_before)


def dym_shape_range(spec: str) -> list[str]:
    """ais_bench's --dymShape_range: every shape spec it names. A dim is an integer, "lo~hi" (every
    value from lo to hi) or "a-b-c" (those values); 'x:1,3,224~226;y:1-2' gives 3 x 2 specs."""
    inputs = []
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        name, sep, dims = part.rpartition(":")
        if not sep or not name:
            raise GeError(f"--dymShape_range: '{part}' is not 'name:d1,d2,...'")
        choices = []
        for d in dims.split(","):
            d = d.strip()
            m = re.fullmatch(r"(\d+)~(\d+)", d)
            if m:
                lo, hi = int(m[1]), int(m[2])
                if hi < lo:
                    raise GeError(f"--dymShape_range: '{d}' of input '{name}' has its upper bound below its lower")
                choices.append(list(range(lo, hi + 1)))
            elif re.fullmatch(r"\d+(-\d+)*", d):
                choices.append([int(v) for v in d.split("-")])
            else:
                raise GeError(f"--dymShape_range: dim '{d}' of input '{name}' is not N, lo~hi or a-b-c")
        inputs.append((name, list(itertools.product(*choices))))
    combos = list(itertools.product(*(shapes for _, shapes in inputs)))
    if len(combos) > 4096:
        raise GeError(f"--dymShape_range names {len(combos)} shapes; at most 4096")
    return [";".join(f"{n}:{','.join(map(str, s))}" for (n, _), s in zip(inputs, combo)) for combo in combos]


def time_shapes(model_id: int, spec: str, loop: int = 1, warmup: int = 0, data_type: str = "zero",
                seed: int = 0) -> list[dict]:
    """ais_bench's --dymShape_range: every shape of `spec` (see dym_shape_range) run with generated
    inputs, `warmup` + `loop` times each: [{"shape", "mean_ms", "throughput"}] in spec order."""
    dm = model(model_id)
    rows = []
    for shape in dym_shape_range(spec):
        descs = shaped_descs(dm.inputs, shape, "--dymShape_range")
        _, latencies, _ = timed_runs(dm.default_context, generated_inputs(descs, data_type, seed), loop, warmup)
        batch = int(descs[0].shape[0]) if descs and descs[0].shape else 1
        mean = float(np.mean(latencies))
        rows.append({"shape": shape, "mean_ms": mean, "throughput": 1000.0 * batch / mean if mean else float("inf")})
    return rows


def profiler_and_dump(base: str, profiler: bool = False, dump: bool = False,
                      acl_json_path: str | None = None) -> tuple[str | None, str | None]:
    """Where --profiler / --dump write (BASE/profiler, BASE/dump as msame and ais_bench), or the
    folders an acl.json names (--acl_json_path); None for each that is off."""
    profiler_dir = os.path.join(base, "profiler") if profiler else None
    dump_dir = os.path.join(base, "dump") if dump else None
    if acl_json_path:
        cfg = read_acl_json(acl_json_path)
        profiler_dir, dump_dir = cfg["profiler"] or profiler_dir, cfg["dump"] or dump_dir
        if profiler_dir and dump_dir:
            raise GeError(f"{acl_json_path}: profiler and dump cannot both be on (one per run)")
    return profiler_dir, dump_dir


def read_acl_json(path: str) -> dict:
    """The profiler and dump settings of an acl.json (ais_bench --acl_json_path, msame's ./acl.json):
    {"profiler": output folder or None, "dump": dump folder or None}. Other keys are ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    except OSError as e:
        raise GeError(f"{path}: {e.strerror or e}") from None
    except ValueError as e:
        raise GeError(f"{path}: not JSON ({e})") from None
    if not isinstance(cfg, dict):
        raise GeError(f"{path}: an acl.json is a JSON object")
    out = {"profiler": None, "dump": None}
    prof = cfg.get("profiler")
    if prof is not None:
        if not isinstance(prof, dict) or prof.get("switch", "on") not in ("on", "off"):
            raise GeError(f"{path}: 'profiler' must be an object with \"switch\": \"on\" or \"off\"")
        if prof.get("switch", "on") == "on":
            out["profiler"] = _folder(path, prof, "output", "profiler")
    dump = cfg.get("dump")
    if dump is not None:
        if not isinstance(dump, dict):
            raise GeError(f"{path}: 'dump' must be an object")
        mode = dump.get("dump_mode", "output")
        if mode not in ("output", "input", "all"):
            raise GeError(f"{path}: dump.dump_mode '{mode}' is not output, input or all")
        if mode != "output":
            raise GeError(f"{path}: dump.dump_mode '{mode}': ge dumps each op's outputs (an op's inputs are its "
                          "producers' outputs); use \"output\"")
        out["dump"] = _folder(path, dump, "dump_path", "dump")
    return out


def _folder(path: str, section: dict, key: str, what: str) -> str:
    folder = section.get(key)
    if not isinstance(folder, str) or not folder:
        raise GeError(f"{path}: {what}.{key} must name a folder")
    return folder
