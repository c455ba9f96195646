"""`ge run`: msame's and ais_bench's job, with their command lines as users write them. Load an OM
on a device, feed it inputs from files, a dataset folder, or zeros/random data, run it once or in
a timed loop, write the outputs. Options are parsed and results printed here; the steps are
ge.core.api's (inference.py, dataset.py, profiling.py). docs/run-options.md lists every msame and
ais_bench option and what ge does with it."""
from __future__ import annotations

import json
import os
import time

import click
import numpy as np
from rich.table import Table

from ..core import api
from ..core.api import inference
from ..core.errors import GeError
from ..core.ge_model import TensorDesc
from ..core.runtime.executors import EXECUTORS
from ..core.runtime.throughput import PHASES, percentiles
from ..formats.dataset import is_dataset
from ..formats.tensors import OUTPUT_FORMATS, load_inputs, save_outputs, write_text
from . import console
from .options import DEVICES, is_debug, json_option, om_option

DEFAULT_OUTPUT_DIR = "out"


class Switch(click.ParamType):
    """msame's and ais_bench's boolean values: true/false, 1/0, yes/no, t/f, y/n (any case)."""
    name = "true|false"
    WORDS = {"true": True, "t": True, "yes": True, "y": True, "1": True,
             "false": False, "f": False, "no": False, "n": False, "0": False}

    def convert(self, value, param, ctx):
        if isinstance(value, bool):
            return value
        try:
            return self.WORDS[str(value).lower()]
        except KeyError:
            self.fail(f"'{value}' is not true or false", param, ctx)


SWITCH = Switch()


def switch_option(*names, help: str):
    return click.option(*names, type=SWITCH, default=False, show_default=True, metavar="true|false", help=help)


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
def run(model, input_files, output, output_dir, outfmt, device, loop, duration, executor, contexts, seed, summary_json,
        verbose, stats, weight_dir, impl_cache_size, skip_weight_check, as_json, **opts):
    """Run an offline model as msame / ais_bench do: inputs from files, folders, zeros or random.

    \b
      ge run --model net.om --input x.bin --output out --outfmt TXT --loop 2     # msame
      ge run --model net.om --loop 100 --warmup_count 5 --output out --output_dirname r1   # ais_bench
      ge run --model net.om --input x.npy --output-dir out --device sim
      ge run --model net.om --input data/ --output out                          # a dataset folder
      ge run --model net.om --profile trace.json --loop 10
      ge run --model net.om --contexts 2 --loop 100 --executor parallel
    """
    _refuse(opts, output, output_dir, device)
    device, device_id = _device(device)
    verbose = verbose or is_debug()  # msame's --debug true prints the model's description
    folder = inference.output_folder(output, opts["output_dirname"]) if output else (output_dir or DEFAULT_OUTPUT_DIR)
    outfmt = (outfmt or ("BIN" if output else "NPY")).upper()
    profiler_dir, dump_dir = _profiler_and_dump(opts, output or folder)
    data_type = opts["pure_data_type"] or ("random" if seed is not None else "zero")
    seed = seed or 0
    sizes = inference.parse_output_sizes(opts["output_size"]) if opts["output_size"] else None
    warmup = opts["warmup_count"] if opts["warmup_count"] is not None else (1 if loop > 1 else 0)
    if opts["threads"]:  # for this run only: restored when the command ends
        click.get_current_context().with_resource(inference.threads(opts["threads"]))
    paths = [p.strip() for p in (input_files or "").split(",") if p.strip()]

    if opts["ray_address"]:  # the actors load the model; this process only reads its descs
        return _ray_dataset(model, paths, folder, outfmt, device, weight_dir, opts, summary_json, as_json)
    t0 = time.perf_counter()
    model_id = api.load_from_file(model, device, weight_dir=weight_dir, verify_weights=not skip_weight_check,
                                  impl_cache_size=impl_cache_size)
    load_ms = (time.perf_counter() - t0) * 1e3
    try:
        dm = api.model(model_id)
        inference.require_tensor_io(dm)
        gear_descs = _gear(model_id, opts)
        if opts["dym_shape_range"]:
            clash = [name for name, given in (("--input", paths), ("--dymShape", opts["dym_shape"]),
                                              ("--profiler/--profile", profiler_dir or opts["profile_json"]),
                                              ("--dump", dump_dir), ("--contexts", contexts > 1),
                                              ("--executor", executor != "linear")) if given]
            if clash:
                raise GeError(f"--dymShape_range times generated inputs at each of its shapes; it does not combine "
                              f"with {', '.join(clash)}")
            return _shape_range(model_id, opts["dym_shape_range"], loop, warmup, data_type, seed, as_json)
        if paths and is_dataset(paths):
            return _dataset(model_id, dm, model, device, device_id, paths, folder, outfmt, gear_descs, opts, sizes,
                            load_ms, summary_json, as_json, warmup, executor, contexts, profiler_dir, dump_dir, stats,
                            verbose)
        if paths and any(os.path.isdir(p) for p in paths):
            raise GeError(f"--input mixes folders and files ({', '.join(paths)}): give files, or one folder per input")
        in_descs = gear_descs or inference.input_descs(model_id, paths, opts["dym_shape"])
        if paths:
            inputs = load_inputs(paths, in_descs)
            sources = paths if len(paths) == len(in_descs) else [f"{paths[0]}[{d.name}]" for d in in_descs]
        else:
            inputs = inference.generated_inputs(in_descs, data_type, seed)
            sources = ["zeros" if data_type == "zero" else f"random (seed {seed})"] * len(in_descs)
        r = inference.run_inputs(model_id, inputs, executor=executor, loop=loop, warmup=warmup, duration=duration,
                                 contexts=contexts, profile=bool(profiler_dir or opts["profile_json"]), dump_dir=dump_dir,
                                 check_outputs=lambda ys: inference.check_outputs(ys, dm.outputs, sizes,
                                                                         opts["output_batchsize_axis"]))
        outputs, latencies, executions, parallel, trace, dumped = (
            r[k] for k in ("outputs", "latencies", "executions", "parallel", "trace", "dumped"))
        loop = loop if contexts > 1 else len(latencies)
        out_descs = [TensorDesc(d.name, y.dtype.name, tuple(y.shape), 0) for d, y in zip(dm.outputs, outputs)]
        timings = dict(dm.timings)
        memory = {"weights": dm.weight_bytes, "per_context": r["per_context"]}
        weight_files = [dict(f) for f in dm.external_weights]
        last_stats = {k: v for k, v in executions[-1].items() if k != "run"}
    finally:
        api.unload(model_id)

    om_name = os.path.splitext(os.path.basename(model))[0]
    files = save_outputs(outputs, folder, om_name, outfmt)  # only after a successful run
    batch = opts["batchsize"] or (int(in_descs[0].shape[0]) if in_descs and len(in_descs[0].shape) else 1)
    summary = inference.perf_summary(model, device, latencies, batch)
    summary.update(executor=executor, warmup=warmup, output_dir=folder)
    if device_id is not None:
        summary["device_id"] = device_id
    if opts["display_all_summary"]:
        timed = [e for e in executions if e["run"] != "warm-up"]
        summary.update({phase: percentiles([e[phase] for e in timed]) for phase in PHASES})
    if stats:
        summary["stats"] = executions
        summary["memory"] = memory
    if parallel:  # the figures are the N contexts': latency per execution, wall-clock throughput
        summary.update(latency_ms=parallel["latency_ms"], throughput=parallel["wall_throughput"],
                       throughput_mode=parallel)
    trace_files = _write_trace(trace, profiler_dir, opts["profile_json"], om_name)
    if trace is not None:
        summary["ops"] = trace["ops"]
    if trace_files:
        summary["trace"] = trace_files
    if dumped:
        summary["dump"] = {"folder": dump_dir, "files": len(dumped)}
    summary.update(load_ms=round(load_ms, 3),
                   inputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "source": s}
                           for d, s in zip(in_descs, sources)],
                   outputs=[{"name": d.name, "dtype": d.dtype, "shape": list(d.shape), "file": f}
                            for d, f in zip(out_descs, files)])
    if verbose:
        summary.update(init_timings_ms={k: v * 1e3 for k, v in timings.items()}, last_stats=last_stats,
                       external_weights=weight_files)
    if _report(summary, summary_json, as_json):
        return

    out = console.out
    where = _where(device, device_id)
    out.print(f"model [bold]{model}[/bold] loaded on [bold]{where}[/bold] in {load_ms:.2f} ms")
    io = Table(title="Inputs / outputs", title_justify="left")
    for col in ("", "name", "dtype", "shape", "file"):
        io.add_column(col, overflow="fold")
    for i, (d, s) in enumerate(zip(in_descs, sources)):
        io.add_row(f"input {i}", d.name, d.dtype, str(list(d.shape)), s)
    for i, (d, f) in enumerate(zip(out_descs, files)):
        io.add_row(f"output {i}", d.name, d.dtype, str(list(d.shape)), f)
    out.print(io)
    if verbose:
        _print_verbose(out, timings, weight_files, last_stats)
    if stats:
        out.print(_stats_table(executions))
        out.print(f"device memory: weights {memory['weights']} B (shared by every context), "
                  f"{memory['per_context']} B per context (feature maps, workspace, I/O, args table)")
    for line in msame_lines(latencies) if not parallel else ():
        out.print(line, highlight=False)
    lat = summary["latency_ms"]
    if loop > 1 and not parallel:
        t = Table(title=f"Latency (ms) over {loop} runs (after {warmup} warm-up), batch {batch}", title_justify="left")
        keys = ("min", "mean", "median", "p90", "p95", "p99", "max", "std")
        for col in (*keys, "throughput /s"):
            t.add_column(col, justify="right", overflow="fold")
        t.add_row(*(f"{lat[k]:.3f}" for k in keys), f"{summary['throughput']:.2f}")
        out.print(t)
        out.print(f"throughput = 1000 * batch ({batch}) / mean latency ms", highlight=False)
    if opts["display_all_summary"]:
        _print_phases(out, summary)
    if parallel:
        for line in ais_bench_lines(parallel):
            out.print(line, highlight=False)
    if trace is not None:
        out.print(op_table(trace["ops"]))
    for f in trace_files:
        out.print(f"trace written to {f} (open it in Perfetto or chrome://tracing)")
    if dumped:
        out.print(f"dump: {len(dumped)} tensor(s) written to {dump_dir}")
    if summary_json:
        out.print(f"summary written to {summary_json}")
    out.print(f"{len(files)} output(s) written to [bold]{folder}[/bold]")


def _refuse(opts: dict, output: str | None, output_dir: str | None, device: str) -> None:
    """Options nothing here can honour, or that contradict each other: one line each saying why."""
    if output and output_dir:
        raise GeError("--output (msame's timestamped folder) and --output-dir (exactly that folder) both say where "
                      "outputs go: give one")
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
    if opts["output_dirname"] is not None and not output:
        raise GeError("--output_dirname names a folder inside --output: give --output too")
    if opts["profiler"] and opts["dump"]:
        raise GeError("--profiler and --dump cannot both be true (as msame and ais_bench): profile or dump, one per "
                      "run")


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


def _where(device: str, device_id: int | None) -> str:
    return device if device_id is None else f"{device} (NPU id {device_id})"


def _profiler_and_dump(opts: dict, base: str) -> tuple[str | None, str | None]:
    """Where --profiler / --dump write (OUTPUT/profiler, OUTPUT/dump as msame), or the folders of
    --acl_json_path."""
    profiler_dir = os.path.join(base, "profiler") if opts["profiler"] else None
    dump_dir = os.path.join(base, "dump") if opts["dump"] else None
    if opts["acl_json_path"]:
        cfg = inference.read_acl_json(opts["acl_json_path"])
        profiler_dir, dump_dir = cfg["profiler"] or profiler_dir, cfg["dump"] or dump_dir
        if profiler_dir and dump_dir:
            raise GeError(f"{opts['acl_json_path']}: profiler and dump cannot both be on (one per run)")
    return profiler_dir, dump_dir


def _gear(model_id: int, opts: dict):
    if opts["dym_batch"] is not None or opts["dym_hw"] or opts["dym_dims"]:
        return inference.select_gear(model_id, opts["dym_batch"], opts["dym_hw"], opts["dym_dims"])
    return None


def _dataset(model_id, dm, model, device, device_id, paths, folder, outfmt, gear_descs, opts, sizes, load_ms,
             summary_json, as_json, warmup, executor, contexts, profiler_dir, dump_dir, stats, verbose) -> None:
    """--input DIR[,DIR2]: every sample of the folder(s) in turn, with a progress bar."""
    from rich.progress import Progress

    if contexts > 1 or executor != "linear":
        raise GeError("--contexts and --executor time one set of inputs; a dataset folder runs its samples in turn "
                      "(give one sample's files with --input)")
    descs = gear_descs or (inference.shaped_descs(dm.inputs, opts["dym_shape"]) if opts["dym_shape"] else None)

    def check(outputs):
        inference.check_outputs(outputs, dm.outputs, sizes, opts["output_batchsize_axis"])

    def run(progress=None):
        return api.run_dataset(model_id, paths, folder, outfmt, progress, descs=descs, check_outputs=check,
                               output_batch_axis=opts["output_batchsize_axis"], warmup=warmup,
                               prefetch=opts["pipeline"],
                               profile=bool(profiler_dir or opts["profile_json"]), dump_dir=dump_dir)

    if as_json:
        result = run()
    else:
        with Progress(console=console.out, transient=True) as bar:
            task = bar.add_task("samples", total=None)
            result = run(lambda done, total, stem: bar.update(task, completed=done, total=total))
    timings = dict(dm.timings)
    summary = {"model": model, "device": device, **({"device_id": device_id} if device_id is not None else {}),
               "warmup": warmup, "samples": result["samples"],
               "executions": result["executions"], "files_per_batch": result["files_per_batch"],
               "seconds": result["seconds"], "throughput": result["throughput"], "output_dir": folder,
               "load_ms": load_ms, "latency_ms": percentiles(result["latency_ms"])}
    if opts["display_all_summary"]:
        summary.update({phase: percentiles([e[phase] for e in result["stats"]]) for phase in PHASES})
    if stats:
        summary["stats"] = result["stats"]
    om_name = os.path.splitext(os.path.basename(model))[0]
    trace = {"traceEvents": result["trace"], "ops": result["ops"]} if "trace" in result else None
    trace_files = _write_trace(trace, profiler_dir, opts["profile_json"], om_name)
    if trace is not None:
        summary.update(ops=trace["ops"], trace=trace_files)
    if dump_dir:
        summary["dump"] = {"folder": dump_dir}
    summary["outputs"] = result["outputs"]
    if _report(summary, summary_json, as_json):
        return
    out = console.out
    out.print(f"model [bold]{model}[/bold] loaded on [bold]{_where(device, device_id)}[/bold] in {load_ms:.2f} ms")
    if verbose:
        _print_verbose(out, timings, [], {k: v for k, v in result["stats"][-1].items() if k != "run"})
    if stats:
        out.print(_stats_table(result["stats"]))
    for line in msame_lines(result["latency_ms"]):
        out.print(line, highlight=False)
    if opts["display_all_summary"]:
        _print_phases(out, summary)
    if trace is not None:
        out.print(op_table(trace["ops"]))
    for f in trace_files:
        out.print(f"trace written to {f} (open it in Perfetto or chrome://tracing)")
    if dump_dir:
        out.print(f"dump: every op's outputs of each sample written to {dump_dir}/<sample>/")
    if result["files_per_batch"] > 1:
        out.print(f"{result['files_per_batch']} files per execution (each holds part of the batch), "
                  f"{result['executions']} execution(s)")
    out.print(f"{result['samples']} sample(s) in {result['seconds']:.3f} s: {result['throughput']:.2f} samples/s "
              f"(wall time, reading and writing included); outputs written to [bold]{folder}[/bold]")


def _ray_dataset(model, paths, folder, outfmt, device, weight_dir, opts, summary_json, as_json) -> None:
    """--input DIR --ray [ADDRESS]: dataset mode on Ray actors (core/api/ray_dataset.py)."""
    from rich.progress import Progress

    from ge.core.api.ray_dataset import run_dataset_on_ray
    if not paths or not is_dataset(paths):
        raise GeError("--ray runs a dataset: give --input one folder (or one folder per input)")
    given = [name for name, on in (("--profiler/--profile", opts["profiler"] or opts["profile_json"]),
                                   ("--dump", opts["dump"]), ("--dymShape", opts["dym_shape"]),
                                   ("--dymShape_range", opts["dym_shape_range"]),
                                   ("--dymBatch/--dymHW/--dymDims", opts["dym_batch"] or opts["dym_hw"]
                                    or opts["dym_dims"])) if on]
    if given:
        raise GeError(f"--ray runs each sample as the model's inputs; it does not combine with {', '.join(given)}")
    address = None if opts["ray_address"] == "local" else opts["ray_address"]
    kwargs = dict(address=address, actors=opts["ray_actors"], device=device, weight_dir=weight_dir)
    if as_json:
        result = run_dataset_on_ray(model, paths, folder, outfmt, **kwargs)
    else:
        with Progress(console=console.out, transient=True) as bar:
            task = bar.add_task("samples on Ray", total=None)
            result = run_dataset_on_ray(model, paths, folder, outfmt, **kwargs,
                                        progress=lambda done, total, stem: bar.update(task, completed=done, total=total))
    summary = {k: v for k, v in result.items() if k != "outputs"}
    summary.update(model=model, device=device, output_dir=folder, ray=address or "local")
    summary["outputs"] = result["outputs"]
    if _report(summary, summary_json, as_json):
        return
    out = console.out
    t = Table(title=f"Ray actors ({summary['ray']})", title_justify="left")
    for col in ("actor", "samples", "compute ms", "samples/s (compute)"):
        t.add_column(col, justify="right", overflow="fold")
    for actor, a in result["actors"].items():
        t.add_row(actor, str(a["samples"]), f"{a['compute_ms']:.1f}", f"{a['throughput']:.1f}")
    out.print(t)
    out.print(f"{result['samples']} sample(s) in {result['seconds']:.3f} s: {result['throughput']:.2f} samples/s "
              f"(wall time: Ray's and the actors' start, reading and writing included); outputs written to "
              f"[bold]{folder}[/bold]")


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


def _shape_range(model_id, spec, loop, warmup, data_type, seed, as_json) -> None:
    """ais_bench's --dymShape_range: every shape timed; the one of best throughput named."""
    rows = inference.time_shapes(model_id, spec, loop, warmup, data_type, seed)
    best = max(rows, key=lambda r: r["throughput"])
    if as_json:
        console.echo(json.dumps(api.jsonable({"shapes": rows, "best": best["shape"]}), indent=2))
        return
    t = Table(title=f"--dymShape_range: {len(rows)} shape(s), {loop} run(s) each", title_justify="left")
    for col in ("shape", "mean ms", "throughput /s"):
        t.add_column(col, justify="left" if col == "shape" else "right", overflow="fold")
    for r in rows:
        t.add_row(r["shape"], f"{r['mean_ms']:.3f}", f"{r['throughput']:.2f}")
    console.out.print(t)
    console.out.print(f"best throughput: {best['shape']} ({best['throughput']:.2f} /s)", highlight=False)


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
