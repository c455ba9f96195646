"""`ge run`: msame's job. Load an OM on a device, feed it inputs from files (or seeded random
data), run it once or in a timed loop, write the outputs as <om name>_output_<i>.<npy|bin|txt>."""
from __future__ import annotations

import json
import os
import time

import click
import numpy as np
from rich.table import Table

from ..core.runtime.executors import EXECUTORS
from ..core.runtime.throughput import run_contexts
from ..formats.tensors import OUTPUT_FORMATS, load_inputs, random_inputs, save_outputs, write_text
from ..core.errors import GeError
from ..core.ge_model import TensorDesc
from ..core import api
from . import console
from .options import device_option, json_option, om_option


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@om_option(help="the offline model (.om) to run")
@click.option("--input", "input_files", metavar="a.npy,b.bin",
              help="input files, comma-separated, one per model input in order (.npy, .npz, raw .bin); "
                   "a single .npz may hold every input; random seeded data when omitted")
@click.option("--output", "output_dir", default="out", show_default=True, metavar="DIR",
              type=click.Path(file_okay=False), help="directory for the output files")
@click.option("--outfmt", type=click.Choice(OUTPUT_FORMATS, case_sensitive=False), default="NPY",
              show_default=True, help="output file format")
@device_option
@click.option("--loop", type=click.IntRange(min=1), default=1, show_default=True,
              help="timed runs; with N > 1 one warm-up run comes first")
@click.option("--executor", type=click.Choice(EXECUTORS), default="linear", show_default=True,
              help="linear: the compiled order; dataflow: ready set at run time, one task at a time; "
                   "parallel: ready tasks at once on a thread pool")
@click.option("--contexts", type=click.IntRange(min=1), default=1, show_default=True,
              help="throughput mode: N contexts (own feature maps, shared weights) each run --loop times at once")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the random inputs")
@click.option("--summary-json", "--summary_json", "summary_json", metavar="FILE", type=click.Path(dir_okay=False),
              help="write the latency/throughput summary as JSON")
@click.option("--verbose", "-v", is_flag=True, help="show the model's init step timings and execution stats")
@click.option("--stats", is_flag=True,
              help="counters of every execution: H2D/D2H bytes, args bytes written, zero-copy vs copied I/O, "
                   "tasks, allocations; dynamic models: impl cache hits/builds, agnostic hits, weight packs/hits "
                   "(also under 'stats' in --summary-json)")
@click.option("--weight_dir", "--weight-dir", "weight_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="folder of the external weight files (default: <om dir>/weight/)")
@click.option("--skip_weight_check", "--skip-weight-check", "skip_weight_check", is_flag=True,
              help="do not check the sha256 of external weights (faster load; lengths are still checked)")
@click.option("--dymBatch", "dym_batch", type=int, metavar="N", help="gear model: run the gear of batch size N")
@click.option("--dymHW", "dym_hw", metavar="H,W", help="gear model: run the gear of image size H,W")
@click.option("--dymDims", "dym_dims", metavar='"in:1,600;in2:..."',
              help="gear model: run the gear whose input shapes these are")
@json_option
def run(model, input_files, output_dir, outfmt, device, loop, executor, contexts, seed, summary_json, verbose, stats,
        weight_dir, skip_weight_check, dym_batch, dym_hw, dym_dims, as_json):
    """Run an offline model (msame): inputs from files or random, outputs to DIR.

    \b
      ge run --model net.om --input x.npy --output out
      ge run --model net.om --device sim --loop 100 --summary-json perf.json
      ge run --model net.om --weight_dir /data/weights
      ge run --model net.om --contexts 2 --loop 100 --executor parallel
    """
    device = device.lower()
    outfmt = outfmt.upper()
    t0 = time.perf_counter()
    model_id = api.load_from_file(model, device, weight_dir=weight_dir, verify_weights=not skip_weight_check)
    load_ms = (time.perf_counter() - t0) * 1e3
    try:
        dm = api.model(model_id)
        in_descs, out_descs = list(dm.inputs), list(dm.outputs)
        if dym_batch is not None or dym_hw or dym_dims:
            in_descs = _select_gear(model_id, dm, dym_batch, dym_hw, dym_dims)
        elif any(d < 0 for d in _dims(in_descs)):
            in_descs = _concrete_descs(dm, in_descs, input_files)
        if input_files:
            paths = [p.strip() for p in input_files.split(",") if p.strip()]
            inputs = load_inputs(paths, in_descs)
            sources = paths if len(paths) == len(in_descs) else [f"{paths[0]}[{d.name}]" for d in in_descs]
        else:
            inputs = random_inputs(in_descs, seed)
            sources = [f"random (seed {seed})"] * len(in_descs)
        ctx = dm.default_context if executor == "linear" else dm.create_context(executor=executor)
        executions = []  # counters of every execution, warm-up first
        if loop > 1:
            ctx.execute(inputs)  # warm-up
            executions.append(dict(ctx.stats, run="warm-up"))
        latencies = []
        for i in range(loop):
            t = time.perf_counter()
            outputs = ctx.execute(inputs)
            latencies.append((time.perf_counter() - t) * 1e3)
            executions.append(dict(ctx.stats, run=i))
        parallel = run_contexts(dm, inputs, contexts, loop, executor) if contexts > 1 else None
        out_descs = [TensorDesc(d.name, y.dtype.name, tuple(y.shape), 0) for d, y in zip(out_descs, outputs)]
        timings = dict(dm.timings)
        memory = {"weights": dm.weight_bytes, "per_context": getattr(ctx, "device_bytes", None)}
        weight_files = [dict(f) for f in dm.external_weights]
        last_stats = {k: v for k, v in executions[-1].items() if k != "run"}
    finally:
        api.unload(model_id)

    om_name = os.path.splitext(os.path.basename(model))[0]
    files = save_outputs(outputs, output_dir, om_name, outfmt)  # only after a successful run
    batch = int(in_descs[0].shape[0]) if in_descs and len(in_descs[0].shape) else 1
    summary = perf_summary(model, device, latencies, batch)
    summary["executor"] = executor
    if stats:
        summary["stats"] = executions
        summary["memory"] = memory
    if parallel:
        summary["throughput_mode"] = parallel
    if summary_json:
        write_text(summary_json, json.dumps(api.jsonable(summary), indent=2) + "\n")

    if as_json:
        data = dict(summary, load_ms=round(load_ms, 3),
                    inputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "source": s}
                            for d, s in zip(in_descs, sources)],
                    outputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "file": f}
                             for d, f in zip(out_descs, files)])
        if verbose:
            data.update(init_timings_ms={k: v * 1e3 for k, v in timings.items()}, last_stats=last_stats,
                        external_weights=weight_files)
        console.echo(json.dumps(api.jsonable(data), indent=2))
        return

    out = console.out
    out.print(f"model [bold]{model}[/bold] loaded on [bold]{device}[/bold] in {load_ms:.2f} ms")
    io = Table(title="Inputs / outputs", title_justify="left")
    for col in ("", "name", "dtype", "shape", "file"):
        io.add_column(col)
    for i, (d, s) in enumerate(zip(in_descs, sources)):
        io.add_row(f"input {i}", d.name, d.dtype, str(list(d.shape)), s)
    for i, (d, f) in enumerate(zip(out_descs, files)):
        io.add_row(f"output {i}", d.name, d.dtype, str(list(d.shape)), f)
    out.print(io)
    if verbose:
        steps = Table(title="DavinciModel init", title_justify="left")
        steps.add_column("step")
        steps.add_column("ms", justify="right")
        for step, seconds in timings.items():
            steps.add_row(step, f"{seconds * 1e3:.3f}")
        steps.add_section()
        steps.add_row("total", f"{sum(timings.values()) * 1e3:.3f}")
        out.print(steps)
        if weight_files:
            wt = Table(title="External weight files", title_justify="left")
            for col in ("file", "bytes", "device memory"):
                wt.add_column(col, justify="right" if col == "bytes" else "left")
            for f in weight_files:
                wt.add_row(f["file"], str(f["nbytes"]), {"file": "loaded", "shared": "shared with a loaded model",
                                                         "user": "user memory"}[f["source"]])
            out.print(wt)
        st = Table(title="Last execution", title_justify="left")
        st.add_column("counter")
        st.add_column("value", justify="right")
        for k, v in last_stats.items():
            st.add_row(k, str(v))
        out.print(st)
    if stats:
        out.print(_stats_table(executions))
        out.print(f"device memory: weights {memory['weights']} B (shared by every context), "
                  f"{memory['per_context']} B per context (feature maps, workspace, I/O, args table)")
    lat = summary["latency_ms"]
    if loop == 1:
        out.print(f"inference time: {lat['mean']:.3f} ms")
    else:
        t = Table(title=f"Latency over {loop} runs (after 1 warm-up), batch {batch}", title_justify="left")
        for col in ("min ms", "mean ms", "median ms", "p99 ms", "throughput /s"):
            t.add_column(col, justify="right")
        t.add_row(*(f"{lat[k]:.3f}" for k in ("min", "mean", "median", "p99")), f"{summary['throughput']:.2f}")
        out.print(t)
    if parallel:
        for line in ais_bench_lines(parallel):
            out.print(line, highlight=False)
    if summary_json:
        out.print(f"summary written to {summary_json}")
    out.print(f"{len(files)} output(s) written to [bold]{output_dir}[/bold]")


def _dims(descs) -> list[int]:
    return [d for desc in descs for d in desc.shape]


def _select_gear(model_id, dm, batch, hw, dims) -> list:
    """msame's --dymBatch / --dymHW / --dymDims: pick a gear; its shapes are the inputs' shapes."""
    if batch is not None:
        k = api.set_dynamic_batch_size(model_id, batch)
    elif hw:
        h, _, w = hw.partition(",")
        try:
            k = api.set_dynamic_hw_size(model_id, int(h), int(w))
        except ValueError:
            raise GeError(f"--dymHW '{hw}' is not H,W") from None
    else:
        shapes = api.parse_shape_spec(dims, "--dymDims")
        values = [v for d in dm.inputs for want, v in zip(d.shape, shapes.get(d.name, d.shape)) if want == -1]
        k = api.set_input_dynamic_dims(model_id, values)
    return [TensorDesc(d.name, d.dtype, dm.gear_shapes[k][d.name], 0) for d in dm.inputs]


def _concrete_descs(dm, descs, input_files) -> list:
    """Random inputs of a dynamic model take the largest shape of a range, or the first gear."""
    if input_files:  # the files' own shapes (.npy / .npz headers)
        paths = [p.strip() for p in input_files.split(",") if p.strip()]
        if any(not p.endswith((".npy", ".npz")) for p in paths):
            raise GeError(f"model '{dm.name}' has unknown input dims: give its inputs as .npy or .npz (raw .bin "
                          "files carry no shape)")
        if len(paths) == 1 and paths[0].endswith(".npz"):
            with np.load(paths[0]) as z:
                shapes = [z[d.name].shape if d.name in z else d.shape for d in descs]
        else:
            shapes = [np.load(p, mmap_mode="r").shape for p in paths]
        return [TensorDesc(d.name, d.dtype, tuple(s), 0) for d, s in zip(descs, shapes)]
    if getattr(dm, "gear_shapes", None):
        return [TensorDesc(d.name, d.dtype, dm.gear_shapes[0][d.name], 0) for d in descs]
    if all(d.ranges for d in descs if any(x < 0 for x in d.shape)):
        return [TensorDesc(d.name, d.dtype, tuple(hi if x < 0 else x for x, (_, hi) in zip(d.shape, d.ranges))
                           if d.ranges else d.shape, 0) for d in descs]
    raise GeError(f"model '{dm.name}' has unknown input dims: give its inputs with --input")


STATS_COLUMNS = ("h2d_bytes", "h2d_count", "d2h_bytes", "d2h_count", "args_bytes", "views_rebuilt", "zero_copy_inputs",
                 "copied_inputs", "zero_copy_outputs", "copied_outputs", "tasks", "allocations")


#: the hybrid executor's counters (dynamic shapes)
HYBRID_COLUMNS = ("h2d_bytes", "d2h_bytes", "allocations", "reallocs", "cache_hits", "cache_builds", "agnostic_hits",
                  "weight_packs", "weight_pack_hits", "shape_updates", "args_set", "skipped_empty", "data_dependent",
                  "submodel_launches", "nodes_run")


def _stats_table(executions: list[dict], limit: int = 12) -> Table:
    t = Table(title="Per-execution counters", title_justify="left")
    t.add_column("run")
    columns = HYBRID_COLUMNS if executions and "cache_hits" in executions[0] else STATS_COLUMNS
    for col in columns:
        t.add_column(col.replace("_", " "), justify="right")
    shown = executions if len(executions) <= limit else executions[:limit - 1] + executions[-1:]
    for e in shown:
        t.add_row(str(e["run"]), *(str(e.get(c, "")) for c in columns))
    return t


def ais_bench_lines(s: dict) -> list[str]:
    """The throughput summary in ais_bench's words."""
    def row(label, p):
        return (f"[INFO] {label} (ms): min = {p['min']:.4f}, max = {p['max']:.4f}, mean = {p['mean']:.4f}, "
                f"median = {p['median']:.4f}, percentile(99%) = {p['p99']:.4f}")
    mem = s["memory"]
    return ["[INFO] -----------------Performance Summary------------------",
            row("H2D_latency", s["h2d_ms"]), row("NPU_compute_time", s["compute_ms"]), row("D2H_latency", s["d2h_ms"]),
            f"[INFO] throughput 1000*batchsize.mean({s['batch']})/NPU_compute_time.mean({s['compute_ms']['mean']:.4f})"
            f"*contexts({s['contexts']}): {s['throughput']:.2f}",
            f"[INFO] wall-clock throughput: {s['wall_throughput']:.2f} /s ({s['contexts']} contexts x {s['loop']} runs, "
            f"{s['executor']} executor)",
            f"[INFO] device memory: weights {mem['weights']} B shared + {s['contexts']} x {mem['per_context']} B per "
            f"context = {mem['total']} B",
            "[INFO] ------------------------------------------------------"]


def perf_summary(model: str, device: str, latencies_ms: list[float], batch: int) -> dict:
    lat = np.asarray(latencies_ms, dtype=np.float64)
    mean = float(lat.mean())
    return {
        "model": model,
        "device": device,
        "loop": len(latencies_ms),
        "latency_ms": {"min": float(lat.min()), "mean": mean, "median": float(np.median(lat)),
                       "p99": float(np.percentile(lat, 99))},
        "throughput": 1000.0 * batch / mean if mean > 0 else float("inf"),
        "batch": batch,
    }
