"""`ge run`: msame's and ais_bench's job, with their command lines as users write them. Load an OM
on a device, feed it inputs from files, a dataset folder, or zeros/random data, run it once or in
a timed loop, write the outputs. Options are parsed and results printed here; the steps are
ge.core.api's (inference.py, dataset.py, profiling.py). docs/run-options.md lists every msame and
ais_bench option and what ge does with it."""
from __future__ import annotations

import json
from dataclasses import fields

import click
import numpy as np
from rich.progress import Progress
from rich.table import Table

from ..core import api
from ..core.api import inference, runner
from ..core.api.runner import DEFAULT_OUTPUT_DIR, RunOptions
from ..core.errors import GeError
from ..core.runtime.executors import EXECUTORS
from ..core.runtime.throughput import PHASES
from ..formats.tensors import OUTPUT_FORMATS, write_text
from . import console
from .options import DEVICES, is_debug, json_option, om_option, switch_option


def ais_bench_options(f):
    """ais_bench's and msame's options beyond ge's own (also msame's camelCase spellings)."""
    options = [
        click.option("--output_dirname", "--output-dirname", "output_dirname", metavar="NAME",
                     help="with --output: write into OUTPUT/NAME instead of a timestamped folder (ais_bench)"),
        click.option("--pure_data_type", "--pure-data-type", "pure_data_type",
                     type=click.Choice(inference.PURE_DATA_TYPES),
                     help="inputs when --input is omitted: zero (msame's and ais_bench's default) or seeded random "
                          "(the default once --seed is given)"),
        click.option("--warmup_count", "--warmup-count", "warmup_count", type=click.IntRange(min=0), metavar="N",
                     help="untimed runs before the timed ones [default: 1 with --loop > 1, else 0]"),
        click.option("--batchsize", "--batch_size", "--batch-size", "batchsize", type=click.IntRange(min=1),
                     metavar="N",
                     help="samples per execution in the throughput figures [default: the first input's dim 0]"),
        click.option("--dymBatch", "--dym_batch", "--dym-batch", "dym_batch", type=click.IntRange(min=1), metavar="N",
                     help="gear model: run the gear of batch size N"),
        click.option("--dymHW", "--dym_hw", "--dym-hw", "dym_hw", metavar="H,W",
                     help="gear model: run the gear of image size H,W"),
        click.option("--dymDims", "--dym_dims", "--dym-dims", "dym_dims", metavar='"in:1,600;in2:..."',
                     help="gear model: run the gear of these input shapes ('name:dims;...', or msame's every dim in "
                          "input order: 1,600,600,3,1,3)"),
        click.option("--dymShape", "--dym_shape", "--dym-shape", "dym_shape", metavar='"in:1,600;in2:..."',
                     help="dynamic-shape model: the input shapes of this run (read .bin inputs with them)"),
        click.option("--dymShape_range", "--dym_shape_range", "--dym-shape-range", "dym_shape_range",
                     metavar='"in:1,3,224~226;in2:1-2"',
                     help="dynamic-shape model: time every shape of these ranges (lo~hi, or a-b-c), name the fastest"),
        click.option("--outputSize", "--output_size", "--output-size", "output_size", metavar="BYTES,...",
                     help="the bytes of each output's buffer: an output that needs more is an error, as on ACL"),
        switch_option("--auto_set_dymshape_mode", "--auto-set-dymshape-mode", "auto_set_dymshape_mode",
                      help="dataset of a dynamic-shape model: each sample's shape from its .npy (ge always does so)"),
        switch_option("--auto_set_dymdims_mode", "--auto-set-dymdims-mode", "auto_set_dymdims_mode",
                      help="dataset of a gear model: each sample's gear from its .npy shapes (ge always does so)"),
        switch_option("--profiler", "profiler", help="per-task Chrome trace and per-op table into OUTPUT/profiler/"),
        click.option("--profile", "profile_json", metavar="FILE.json", type=click.Path(dir_okay=False),
                     help="write a per-task Chrome trace (Perfetto, chrome://tracing) of the timed runs to FILE"),
        switch_option("--dump", "dump", help="write every op's outputs (.npy) into OUTPUT/dump/<model>/"),
        switch_option("--dump_npy", "--dump-npy", "dump_npy", help="ais_bench: dumps as .npy (ge's dumps always are)"),
        click.option("--acl_json_path", "--acl-json-path", "acl_json_path", metavar="acl.json",
                     type=click.Path(dir_okay=False),
                     help="ACL config: its profiler output folder (\"switch\": \"on\") and dump_path are honoured"),
        switch_option("--profiler_rename", "--profiler-rename", "profiler_rename",
                      help="ais_bench: rename the profiler's folder (ge's trace file is named after the model)"),
        click.option("--output_batchsize_axis", "--output-batchsize-axis", "output_batchsize_axis",
                     type=click.IntRange(min=0), default=0, show_default=True, metavar="AXIS",
                     help="ais_bench: the outputs' batch axis (checked against every output's rank)"),
        click.option("--run_mode", "--run-mode", "run_mode", type=click.Choice(("array", "files", "tensor", "full")),
                     default="array", show_default=True,
                     help="ais_bench: how it stages inputs (host arrays, files, device tensors, all first); ge "
                          "reads each sample as it runs it: same results"),
        switch_option("--display_all_summary", "--display-all-summary", "display_all_summary",
                      help="also print H2D and D2H latency (ais_bench's full summary)"),
        click.option("--threads", "--thread", "threads", type=click.IntRange(min=1), metavar="N",
                     help="threads of the native kernels and OpenBLAS [default: every CPU]"),
        click.option("--npu_id", "--npu-id", "npu_id", type=click.IntRange(0, 255), metavar="ID",
                     help="ais_bench: the NPU whose power --energy_consumption reads (accepted, 0-255)"),
        switch_option("--pipeline", "pipeline",
                      help="dataset: read the next sample on a second thread while one runs (ais_bench)"),
        # refused where nothing here can honour them; kept so the error says why instead of "no such option"
        click.option("--aipp_config", "--aipp-config", "aipp_config", metavar="FILE", help="refused: dynamic AIPP"),
        switch_option("--energy_consumption", "--energy-consumption", "energy_consumption",
                      help="refused when true: there is no NPU power sensor"),
        click.option("--backend", "backend", metavar="NAME", help="refused: ais_bench's trtexec backend runs TensorRT"),
        switch_option("--perf", "perf", help="refused when true: trtexec's per-layer report (use --profiler true)"),
        switch_option("--divide_input", "--divide-input", "divide_input", help="refused when true: multi-device"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command("run", context_settings={"help_option_names": ["-h", "--help"]})
@om_option(help="the offline model (.om) to run")
@click.option("--input", "-i", "input_files", metavar="a.npy,b.bin|DIR[,DIR2]",
              help="input files, comma-separated, one per model input (.npy, .npz, raw .bin; one .npz may hold "
                   "every input); or dataset folders: a file per sample (msame, ais_bench). Zeros when omitted")
@click.option("--output", "-o", "output", metavar="DIR", type=click.Path(file_okay=False),
              help="msame/ais_bench layout: outputs into DIR/<YYYYMMDD_HHMMSS>/ (or DIR/<--output_dirname>/), BIN "
                   "unless --outfmt says otherwise")
@click.option("--output-dir", "--output_dir", "output_dir", metavar="DIR", type=click.Path(file_okay=False),
              help=f"outputs into exactly DIR, NPY unless --outfmt says otherwise [default: {DEFAULT_OUTPUT_DIR}]")
@click.option("--outfmt", type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
              help="output file format [default: BIN with --output, NPY otherwise]")
@click.option("--device", "-d", default="cpu", show_default=True, metavar="cpu|sim|ID",
              help="cpu (host memory), sim (simulated NPU memory), or an NPU id 0-255 as msame/ais_bench take it "
                   "(runs on the simulated NPU)")
@click.option("--loop", "-l", type=click.IntRange(min=1), default=1, show_default=True,
              help="timed runs of the same inputs")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="time runs for this long (at least --loop of them), as trtexec's --duration")
@click.option("--executor", type=click.Choice(EXECUTORS), default="linear", show_default=True,
              help="linear: the compiled order; dataflow: ready set at run time, one task at a time; "
                   "parallel: ready tasks at once on a thread pool")
@click.option("--contexts", type=click.IntRange(min=1), default=1, show_default=True,
              help="throughput mode: N contexts (own feature maps, shared weights) each run --loop times at once")
@click.option("--ray", "ray_address", is_flag=False, flag_value="local", metavar="[ADDRESS]",
              help="dataset folder: run the samples on Ray actors (a local Ray instance, or the cluster at "
                   "ADDRESS); same outputs as without it (pip install 'ge[ray]')")
@click.option("--ray-actors", "--ray_actors", "ray_actors", type=click.IntRange(min=1), default=2, show_default=True,
              help="with --ray: actors, each loading the model once")
@click.option("--seed", type=int, help="seed of random inputs (implies --pure_data_type random) [default: 0]")
@click.option("--summary-json", "--summary_json", "summary_json", metavar="FILE", type=click.Path(dir_okay=False),
              help="write the latency/throughput summary as JSON")
@click.option("--verbose", "-v", is_flag=True, help="show the model's init step timings and execution stats")
@click.option("--stats", is_flag=True,
              help="counters of every execution: H2D/D2H bytes, args bytes written, zero-copy vs copied I/O, "
                   "tasks, allocations; dynamic models: impl cache hits/builds/evictions, agnostic hits, weight packs/hits "
                   "(also under 'stats' in --summary-json)")
@click.option("--weight_dir", "--weight-dir", "weight_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="folder of the external weight files (default: <om dir>/weight/)")
@click.option("--impl_cache_size", "--impl-cache-size", "impl_cache_size", type=click.IntRange(min=0), metavar="N",
              help="unknown-shape and range models: impls kept per model, least recently used out first "
                   "(evictions in --stats) [default: 5000]")
@click.option("--skip_weight_check", "--skip-weight-check", "skip_weight_check", is_flag=True,
              help="do not check the sha256 of external weights (faster load; lengths are still checked)")
@ais_bench_options
@json_option
def run(input_files, device, summary_json, as_json, **opts):
    """Run an offline model as msame / ais_bench do: inputs from files, folders, zeros or random.

    \b
      ge run --model net.om --input x.bin --output out --outfmt TXT --loop 2     # msame
      ge run --model net.om --loop 100 --warmup_count 5 --output out --output_dirname r1   # ais_bench
      ge run --model net.om --input x.npy --output-dir out --device sim
      ge run --model net.om --input data/ --output out                          # a dataset folder
      ge run --model net.om --profile trace.json --loop 10
      ge run --model net.om --contexts 2 --loop 100 --executor parallel
    """
    _refuse(opts, device)
    device, device_id = _device(device)
    opts["verbose"] = opts["verbose"] or is_debug()  # msame's --debug true prints the model's description
    options = RunOptions(**{k: v for k, v in opts.items() if k in RUN_OPTIONS}, device=device, device_id=device_id,
                         inputs=[p.strip() for p in (input_files or "").split(",") if p.strip()])
    bar = None if as_json else _Bar("samples on Ray" if options.ray_address else "samples")
    try:
        result = runner.run(options, bar)
    finally:
        if bar is not None:
            bar.close()
    if result.kind == "shapes":
        return _print_shapes(result.summary, options.loop, as_json)
    if _report(result.summary, summary_json, as_json):
        return
    {"inputs": _print_inputs_run, "dataset": _print_dataset, "ray": _print_ray}[result.kind](result, options,
                                                                                           summary_json)


RUN_OPTIONS = {f.name for f in fields(RunOptions)}


class _Bar:
    """A dataset's progress bar, shown from its first sample on (the run calls it after each)."""

    def __init__(self, label: str):
        self.label, self.progress, self.task = label, None, None

    def __call__(self, done: int, total: int, stem: str) -> None:
        if self.progress is None:
            self.progress = Progress(console=console.out, transient=True)
            self.progress.start()
            self.task = self.progress.add_task(self.label, total=None)
        self.progress.update(self.task, completed=done, total=total)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def _print_inputs_run(result, o: RunOptions, summary_json: str | None) -> None:
    """One set of inputs: the I/O table, counters, latency and throughput figures."""
    summary, out = result.summary, console.out
    parallel, lat, batch = summary.get("throughput_mode"), summary["latency_ms"], summary["batch"]
    out.print(f"model [bold]{o.model}[/bold] loaded on [bold]{_where(o)}[/bold] in {result.load_ms:.2f} ms")
    io = Table(title="Inputs / outputs", title_justify="left")
    for col in ("", "name", "dtype", "shape", "file"):
        io.add_column(col, overflow="fold")
    for i, d in enumerate(summary["inputs"]):
        io.add_row(f"input {i}", d["name"], d["dtype"], str(d["shape"]), d["source"])
    for i, d in enumerate(summary["outputs"]):
        io.add_row(f"output {i}", d["name"], d["dtype"], str(d["shape"]), d["file"])
    out.print(io)
    if o.verbose:
        _print_verbose(out, result.timings, result.weight_files, result.last_stats)
    if o.stats:
        memory = summary["memory"]
        out.print(_stats_table(summary["stats"]))
        out.print(f"device memory: weights {memory['weights']} B (shared by every context), "
                  f"{memory['per_context']} B per context (feature maps, workspace, I/O, args table)")
    for line in msame_lines(result.latencies_ms) if not parallel else ():
        out.print(line, highlight=False)
    if summary["loop"] > 1 and not parallel:
        t = Table(title=f"Latency (ms) over {summary['loop']} runs (after {summary['warmup']} warm-up), batch {batch}",
                  title_justify="left")
        keys = ("min", "mean", "median", "p90", "p95", "p99", "max", "std")
        for col in (*keys, "throughput /s"):
            t.add_column(col, justify="right", overflow="fold")
        t.add_row(*(f"{lat[k]:.3f}" for k in keys), f"{summary['throughput']:.2f}")
        out.print(t)
        out.print(f"throughput = 1000 * batch ({batch}) / mean latency ms", highlight=False)
    if o.display_all_summary:
        _print_phases(out, summary)
    if parallel:
        for line in ais_bench_lines(parallel):
            out.print(line, highlight=False)
    if "ops" in summary:
        out.print(op_table(summary["ops"]))
    for f in summary.get("trace", []):
        out.print(f"trace written to {f} (open it in Perfetto or chrome://tracing)")
    if "dump" in summary:
        out.print(f"dump: {summary['dump']['files']} tensor(s) written to {summary['dump']['folder']}")
    if summary_json:
        out.print(f"summary written to {summary_json}")
    out.print(f"{len(summary['outputs'])} output(s) written to [bold]{summary['output_dir']}[/bold]")


def _refuse(opts: dict, device: str) -> None:
    """Options nothing here can honour: one line each saying why."""
    if opts["aipp_config"]:
        raise GeError("--aipp_config: dynamic AIPP (parameters set at run time) is not supported; compile static AIPP "
                      "into the model with ge atc --insert_op_conf")
    if opts["energy_consumption"]:
        raise GeError("--energy_consumption: there is no NPU power sensor to read (ais_bench reads npu-smi); ge "
                      "runs on the CPU or a simulated NPU")
    if opts["backend"]:
        raise GeError(f"--backend {opts['backend']}: ais_bench's backend runs another engine (trtexec: TensorRT); ge "
                      "runs the OM itself")
    if opts["perf"]:
        raise GeError("--perf: trtexec's per-layer report belongs to ais_bench's trtexec backend; ge's per-op profile "
                      "is --profiler true")
    if opts["divide_input"]:
        raise GeError("--divide_input: splitting inputs across several devices needs a multi-device run, which ge "
                      "does not do (one simulated NPU per process)")
    if "," in device:
        raise GeError(f"--device {device}: multi-device runs are not supported (one simulated NPU per process); run "
                      "one ge per device")


def _device(device: str) -> tuple[str, int | None]:
    """cpu/sim, or msame's and ais_bench's NPU id (0-255), which runs on the simulated NPU."""
    name = device.strip().lower()
    if name in DEVICES:
        return name, None
    try:
        device_id = int(name)
    except ValueError:
        raise click.BadParameter(f"'{device}' is not cpu, sim or an NPU id 0-255", param_hint="--device") from None
    if not 0 <= device_id <= 255:
        raise click.BadParameter(f"NPU id {device_id} is outside 0-255", param_hint="--device")
    return "sim", device_id


def _where(o: RunOptions) -> str:
    return o.device if o.device_id is None else f"{o.device} (NPU id {o.device_id})"


def _print_dataset(result, o: RunOptions, summary_json: str | None) -> None:
    """A dataset folder: latency, throughput and where the samples' outputs went."""
    summary, out = result.summary, console.out
    out.print(f"model [bold]{o.model}[/bold] loaded on [bold]{_where(o)}[/bold] in {result.load_ms:.2f} ms")
    if o.verbose:
        _print_verbose(out, result.timings, [], result.last_stats)
    if o.stats:
        out.print(_stats_table(summary["stats"]))
    for line in msame_lines(result.latencies_ms):
        out.print(line, highlight=False)
    if o.display_all_summary:
        _print_phases(out, summary)
    if "ops" in summary:
        out.print(op_table(summary["ops"]))
    for f in summary.get("trace", []):
        out.print(f"trace written to {f} (open it in Perfetto or chrome://tracing)")
    if "dump" in summary:
        out.print(f"dump: every op's outputs of each sample written to {summary['dump']['folder']}/<sample>/")
    if summary["files_per_batch"] > 1:
        out.print(f"{summary['files_per_batch']} files per execution (each holds part of the batch), "
                  f"{summary['executions']} execution(s)")
    out.print(f"{summary['samples']} sample(s) in {summary['seconds']:.3f} s: {summary['throughput']:.2f} samples/s "
              f"(wall time, reading and writing included); outputs written to [bold]{summary['output_dir']}[/bold]")


def _print_ray(result, o: RunOptions, summary_json: str | None) -> None:
    """A dataset on Ray actors: each actor's share."""
    summary, out = result.summary, console.out
    t = Table(title=f"Ray actors ({summary['ray']})", title_justify="left")
    for col in ("actor", "samples", "compute ms", "samples/s (compute)"):
        t.add_column(col, justify="right", overflow="fold")
    for actor, a in summary["actors"].items():
        t.add_row(actor, str(a["samples"]), f"{a['compute_ms']:.1f}", f"{a['throughput']:.1f}")
    out.print(t)
    out.print(f"{summary['samples']} sample(s) in {summary['seconds']:.3f} s: {summary['throughput']:.2f} samples/s "
              f"(wall time: Ray's and the actors' start, reading and writing included); outputs written to "
              f"[bold]{summary['output_dir']}[/bold]")


def _report(summary: dict, summary_json: str | None, as_json: bool) -> bool:
    """--summary-json FILE and --json (stdout) carry the same fields; True when --json printed them."""
    text = json.dumps(api.jsonable(summary), indent=2)
    if summary_json:
        write_text(summary_json, text + "\n")
    if as_json:
        console.echo(text)
    return as_json


def _print_phases(out, summary: dict) -> None:
    """ais_bench's --display_all_summary lines."""
    for phase, label in zip(PHASES, ("H2D_latency", "NPU_compute_time", "D2H_latency")):
        p = summary[phase]
        out.print(f"[INFO] {label} (ms): min = {p['min']:.4f}, max = {p['max']:.4f}, mean = {p['mean']:.4f}, "
                  f"median = {p['median']:.4f}, percentile(99%) = {p['p99']:.4f}", highlight=False)


def _print_shapes(summary: dict, loop: int, as_json: bool) -> None:
    """ais_bench's --dymShape_range: every shape's figures, the one of best throughput named."""
    if as_json:
        console.echo(json.dumps(api.jsonable(summary), indent=2))
        return
    rows = summary["shapes"]
    best = next(r for r in rows if r["shape"] == summary["best"])
    t = Table(title=f"--dymShape_range: {len(rows)} shape(s), {loop} run(s) each", title_justify="left")
    for col in ("shape", "mean ms", "throughput /s"):
        t.add_column(col, justify="left" if col == "shape" else "right", overflow="fold")
    for r in rows:
        t.add_row(r["shape"], f"{r['mean_ms']:.3f}", f"{r['throughput']:.2f}")
    console.out.print(t)
    console.out.print(f"best throughput: {best['shape']} ({best['throughput']:.2f} /s)", highlight=False)


def _print_verbose(out, timings, weight_files, last_stats) -> None:
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


def msame_lines(latencies_ms: list[float]) -> list[str]:
    """msame's summary: the mean over every run, and without the first when there are several."""
    if not latencies_ms:
        return []
    lines = [f"Inference average time: {float(np.mean(latencies_ms)):.6f} ms"]
    if len(latencies_ms) > 1:
        lines.append(f"Inference average time without first time: {float(np.mean(latencies_ms[1:])):.6f} ms")
    return lines


def op_table(ops: list[dict]) -> Table:
    t = Table(title="Time per op type", title_justify="left")
    for col in ("op", "count", "total ms", "mean us", "share"):
        t.add_column(col, justify="left" if col == "op" else "right", overflow="fold")
    for r in ops:
        t.add_row(r["op"], str(r["count"]), f"{r['total_ms']:.3f}", f"{r['mean_us']:.1f}", f"{r['share']:.1%}")
    return t


STATS_COLUMNS = ("h2d_bytes", "h2d_count", "d2h_bytes", "d2h_count", "args_bytes", "views_rebuilt", "zero_copy_inputs",
                 "copied_inputs", "zero_copy_outputs", "copied_outputs", "tasks", "allocations")


#: the hybrid executor's counters (dynamic shapes)
HYBRID_COLUMNS = ("h2d_bytes", "d2h_bytes", "allocations", "reallocs", "cache_hits", "cache_builds", "cache_evictions",
                  "agnostic_hits", "weight_packs", "weight_pack_hits", "shape_updates", "args_set", "skipped_empty", "data_dependent",
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
            f"*contexts({s['contexts']}): {s['throughput']:.2f} (ais_bench's formula: as if the contexts never "
            f"waited for each other)",
            f"[INFO] wall-clock throughput: {s['wall_throughput']:.2f} /s = {s['contexts']} contexts x {s['loop']} runs x "
            f"batch {s['batch']} / {s['wall_s']:.3f} s ({s['executor']} executor; ge's throughput figure)",
            f"[INFO] device memory: weights {mem['weights']} B shared + {s['contexts']} x {mem['per_context']} B per "
            f"context = {mem['total']} B",
            "[INFO] ------------------------------------------------------"]
