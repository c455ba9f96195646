"""How `ge run` shows a run (core/acl/runner.py's RunResult): --json and --summary-json, or tables
and msame's and ais_bench's summary lines; and the progress bar of a dataset or a long loop."""
from __future__ import annotations

import json
import time

import numpy as np
from rich.progress import Progress
from rich.table import Table

from ..core import api
from ..core.acl.runner import RunOptions, RunResult
from ..core.runtime.throughput import PHASES
from ..formats.tensors import write_text
from . import console


def render(result: RunResult, o: RunOptions, summary_json: str | None, as_json: bool) -> None:
    if result.kind == "shapes":
        return _print_shapes(result.summary, o.loop, as_json)
    if _report(result.summary, summary_json, as_json):
        return
    {"inputs": _print_inputs_run, "dataset": _print_dataset, "ray": _print_ray}[result.kind](result, o, summary_json)


class ProgressBar:
    """The progress of a dataset's samples or of a timed loop (the run calls it after each), on
    stderr and only on a terminal, shown once the run has taken SHOW_AFTER seconds (a short run
    shows none); it disappears when the run ends."""
    SHOW_AFTER = 1.0

    def __init__(self, label: str):
        self.label, self.progress, self.task = label, None, None
        self.started = None

    def __call__(self, done: int, total: int | None, stem: str) -> None:
        if self.progress is None:
            now = time.perf_counter()
            self.started = self.started or now
            if not console.err.is_terminal or now - self.started < self.SHOW_AFTER:
                return
            self.progress = Progress(console=console.err, transient=True)
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
    _print_trace(out, summary)
    if "dump" in summary:
        out.print(f"dump: {summary['dump']['files']} tensor(s) written to {summary['dump']['folder']}")
    if summary_json:
        out.print(f"summary written to {summary_json}")
    out.print(f"{len(summary['outputs'])} output(s) written to [bold]{summary['output_dir']}[/bold]")


def _print_trace(out, summary: dict) -> None:
    """--profiler / --profile: the per-op table and the trace files."""
    if "ops" in summary:
        out.print(op_table(summary["ops"]))
    for f in summary.get("trace", []):
        out.print(f"trace written to {f} (open it in Perfetto or chrome://tracing)")


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
    _print_trace(out, summary)
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
        out.print(phase_line(label, summary[phase]), highlight=False)


def phase_line(label: str, p: dict) -> str:
    return (f"[INFO] {label} (ms): min = {p['min']:.4f}, max = {p['max']:.4f}, mean = {p['mean']:.4f}, "
            f"median = {p['median']:.4f}, percentile(99%) = {p['p99']:.4f}")


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
    out.print(f"kernels: {api.kernels()}", highlight=False)
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
    mem = s["memory"]
    return ["[INFO] -----------------Performance Summary------------------",
            phase_line("H2D_latency", s["h2d_ms"]), phase_line("NPU_compute_time", s["compute_ms"]),
            phase_line("D2H_latency", s["d2h_ms"]),
            f"[INFO] throughput 1000*batchsize.mean({s['batch']})/NPU_compute_time.mean({s['compute_ms']['mean']:.4f})"
            f"*contexts({s['contexts']}): {s['throughput']:.2f} (ais_bench's formula: as if the contexts never "
            f"waited for each other)",
            f"[INFO] wall-clock throughput: {s['wall_throughput']:.2f} /s = {s['contexts']} contexts x {s['loop']} runs x "
            f"batch {s['batch']} / {s['wall_s']:.3f} s ({s['executor']} executor; ge's throughput figure)",
            f"[INFO] device memory: weights {mem['weights']} B shared + {s['contexts']} x {mem['per_context']} B per "
            f"context = {mem['total']} B",
            "[INFO] ------------------------------------------------------"]
