"""`ge run`: msame's and ais_bench's job, with their command lines as users write them. Load an OM
on a device, feed it inputs from files, a dataset folder, or zeros/random data, run it once or in
a timed loop, write the outputs. The options are declared and parsed here, the run is
ge.core.acl.runner.run (the same for Python callers), run_report.py prints it.
docs/run-options.md lists every msame and ais_bench option and what ge does with it."""
from __future__ import annotations

from dataclasses import fields

import click

from ..core.acl import inference, runner
from ..core.acl.runner import DEFAULT_OUTPUT_DIR, RunOptions
from ..core.model.errors import GeError
from ..core.runtime.executors import EXECUTORS
from ..formats.dataset import is_dataset
from ..formats.tensors import OUTPUT_FORMATS
from .options import COMMANDS, DEVICES, GEAR_OPTIONS, is_debug, json_option, om_option, spelled_option, switch_option
from .run_report import ProgressBar, render


#: `--debug` is the `ge` group's (taken anywhere on the line): what it does for `ge run`
DEBUG_HELP = ("--debug [true|false] (msame's and ais_bench's, anywhere on the line): print an error's traceback, and "
              "the model's load steps and counters as --verbose does.")


def ais_bench_options(f):
    """ais_bench's and msame's options beyond ge's own (also msame's camelCase spellings)."""
    options = [
        spelled_option("output_dirname", metavar="NAME",
                       help="with --output: write into OUTPUT/NAME instead of a timestamped folder (ais_bench)"),
        spelled_option("pure_data_type",
                       type=click.Choice(inference.PURE_DATA_TYPES),
                       help="inputs when --input is omitted: zero (msame's and ais_bench's default) or seeded random "
                            "(the default once --seed is given)"),
        spelled_option("warmup_count", type=click.IntRange(min=0), metavar="N",
                       help="untimed runs before the timed ones [default: 1 with --loop > 1, else 0]"),
        click.option("--batchsize", "--batch_size", "--batch-size", "batchsize", type=click.IntRange(min=1),
                     metavar="N",
                     help="samples per execution in the throughput figures [default: the first input's dim 0]"),
        *GEAR_OPTIONS,
        spelled_option("dym_shape", "--dymShape", metavar='"in:1,600;in2:..."',
                       help="dynamic-shape model: the input shapes of this run (read .bin inputs with them)"),
        click.option("--dymShape_range", "--dym_shape_range", "--dym-shape-range", "dym_shape_range",
                     metavar='"in:1,3,224~226;in2:1-2"',
                     help="dynamic-shape model: time every shape of these ranges (lo~hi, or a-b-c), name the fastest"),
        spelled_option("output_size", "--outputSize", metavar="BYTES,...",
                       help="the bytes of each output's buffer: an output that needs more is an error, as on ACL"),
        switch_option("--auto_set_dymshape_mode", "--auto-set-dymshape-mode", "auto_set_dymshape_mode",
                      help="dataset of a dynamic-shape model: each sample's shape from its .npy (ge always does so)"),
        switch_option("--auto_set_dymdims_mode", "--auto-set-dymdims-mode", "auto_set_dymdims_mode",
                      help="dataset of a gear model: each sample's gear from its .npy shapes (ge always does so)"),
        switch_option("--profiler", "profiler", help="trace the timed runs: a per-task Chrome trace and a per-op table "
                                                     "into OUTPUT/profiler/"),
        click.option("--profile", "profile_json", metavar="FILE.json", type=click.Path(dir_okay=False),
                     help="write a per-task Chrome trace (Perfetto, chrome://tracing) of the timed runs to FILE"),
        switch_option("--dump", "dump", help="write every op's outputs (.npy) of one run into OUTPUT/dump/ (OUTPUT: "
                                             "--output's or --output-dir's folder; a dataset's into OUTPUT/dump/<sample>/)"),
        switch_option("--dump_npy", "--dump-npy", "dump_npy", help="ais_bench: dumps as .npy (ge's dumps always are)"),
        spelled_option("acl_json_path", metavar="acl.json",
                       type=click.Path(dir_okay=False),
                       help="ACL config: its profiler output folder (\"switch\": \"on\") and dump_path are honoured"),
        switch_option("--profiler_rename", "--profiler-rename", "profiler_rename",
                      help="ais_bench: rename the profiler's folder (ge's trace file is named after the model)"),
        spelled_option("output_batchsize_axis",
                       type=click.IntRange(min=0), default=0, show_default=True, metavar="AXIS",
                       help="ais_bench: the outputs' batch axis (checked against every output's rank)"),
        spelled_option("run_mode", type=click.Choice(("array", "files", "tensor", "full")),
                       default="array", show_default=True,
                       help="ais_bench: how it stages inputs (host arrays, files, device tensors, all first); ge "
                            "reads each sample as it runs it: same results"),
        switch_option("--display_all_summary", "--display-all-summary", "display_all_summary",
                      help="also print H2D and D2H latency (ais_bench's full summary)"),
        click.option("--threads", "--thread", "threads", type=click.IntRange(min=1), metavar="N",
                     help="threads of the native kernels and OpenBLAS [default: every CPU]"),
        spelled_option("npu_id", type=click.IntRange(0, 255), metavar="ID",
                       help="ais_bench: the NPU whose power --energy_consumption reads (accepted, 0-255)"),
        switch_option("--pipeline", "pipeline",
                      help="dataset: read the next sample on a second thread while one runs (ais_bench)"),
        spelled_option("aipp_config", metavar="FILE",
                       help="ais_bench: a dynamic AIPP model's parameters (.config, [aipp_op]); --input gives its "
                            "other inputs"),
        # refused where nothing here can honour them; kept so the error says why instead of "no such option"
        switch_option("--energy_consumption", "--energy-consumption", "energy_consumption",
                      help="refused when true: there is no NPU power sensor"),
        click.option("--backend", "backend", metavar="NAME", help="refused: ais_bench's trtexec backend runs TensorRT"),
        switch_option("--perf", "perf", help="refused when true: trtexec's per-layer report (use --profiler true)"),
        switch_option("--divide_input", "--divide-input", "divide_input", help="refused when true: multi-device"),
    ]
    for option in reversed(options):
        f = option(f)
    return f


@click.command("run", short_help=COMMANDS["run"], epilog=DEBUG_HELP,
               context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("model_file", metavar="[FILE.om]", required=False, type=click.Path(dir_okay=False))
@om_option(required=False, help="the offline model (.om) to run (or give it as the argument, as ge inspect takes it)")
@click.option("--input", "-i", "input_files", metavar="a.npy,b.bin|DIR[,DIR2]",
              help="input files, comma-separated, one per model input (.npy, .npz, raw .bin, ONNX .pb; one .npz may "
                   "hold every input), or onnx's test_data_set_N folder of input_K.pb; or dataset folders: a file per "
                   "sample (msame, ais_bench), or a folder of test_data_set_N. Zeros when omitted")
@click.option("--output", "-o", "output", metavar="DIR", type=click.Path(file_okay=False),
              help="msame/ais_bench layout: outputs into DIR/<YYYYMMDD_HHMMSS>/ (or DIR/<--output_dirname>/), BIN "
                   "unless --outfmt says otherwise")
@click.option("--output-dir", "--output_dir", "output_dir", metavar="DIR", type=click.Path(file_okay=False),
              help=f"outputs into exactly DIR, NPY unless --outfmt says otherwise [default: {DEFAULT_OUTPUT_DIR}]")
@click.option("--outfmt", type=click.Choice(OUTPUT_FORMATS, case_sensitive=False),
              help="output file format; PB: ONNX TensorProto/SequenceProto/OptionalProto, the only form of "
                   "sequence and optional outputs [default: BIN with --output, NPY otherwise]")
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
@spelled_option("weight_dir", metavar="DIR", type=click.Path(file_okay=False),
                help="folder of the external weight files (default: <om dir>/weight/)")
@spelled_option("impl_cache_size", type=click.IntRange(min=0), metavar="N",
                help="unknown-shape and range models: impls kept per model, least recently used out first "
                     "(evictions in --stats) [default: 5000]")
@spelled_option("skip_weight_check", is_flag=True,
                help="do not check the sha256 of external weights (faster load; lengths are still checked)")
@ais_bench_options
@json_option
def run(model_file, input_files, device, summary_json, as_json, **opts):
    """Run an offline model as msame / ais_bench do: inputs from files, folders, zeros or random.

    \b
      ge run net.om --input x.npy --loop 100
      ge run --model net.om --input x.bin --output out --outfmt TXT --loop 2     # msame
      ge run --model net.om --loop 100 --warmup_count 5 --output out --output_dirname r1   # ais_bench
      ge run --model net.om --input x.npy --output-dir out --device sim
      ge run --model net.om --input data/ --output out                          # a dataset folder
      ge run --model net.om --profile trace.json --loop 10
      ge run --model net.om --contexts 2 --loop 100 --executor parallel
    """
    opts["model"] = _model(model_file, opts["model"])
    _refuse(opts, device)
    device, device_id = _device(device)
    opts["verbose"] = opts["verbose"] or is_debug()  # msame's --debug true prints the model's description
    options = RunOptions(**{k: v for k, v in opts.items() if k in RUN_OPTIONS}, device=device, device_id=device_id,
                         inputs=[p.strip() for p in (input_files or "").split(",") if p.strip()])
    dataset = bool(options.inputs) and is_dataset(options.inputs)
    bar = None if as_json else ProgressBar("samples on Ray" if options.ray_address else "samples" if dataset
                                           else "timed runs")
    try:
        result = runner.run(options, bar)
    finally:
        if bar is not None:
            bar.close()
    render(result, options, summary_json, as_json)


RUN_OPTIONS = {f.name for f in fields(RunOptions)}


def _model(argument: str | None, option: str | None) -> str:
    """The OM, given as the argument or as msame's --model (once)."""
    if argument and option and argument != option:
        raise click.UsageError(f"the model is given twice: --model {option} and the argument '{argument}'")
    if not (argument or option):
        raise click.UsageError("give the model to run: ge run FILE.om (or --model FILE.om)")
    return argument or option


def _refuse(opts: dict, device: str) -> None:
    for name, why in inference.REFUSED.items():
        if opts[name]:
            raise GeError(why.format(opts[name]))
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
