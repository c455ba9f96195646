"""`ge atc`: ATC's command line. --mode=0 compiles ONNX into an OM, --mode=1 dumps an OM as JSON,
--mode=3 pre-checks a model (--check_report), --mode=6 displays an OM's info in ATC's banner format.

Every option of ATC's parameter list is taken with ATC's spelling, as `--opt=value` or `--opt value`
(`-opt` and dashed aliases such as --input-shape too, as ATC takes them); what ge does with each is
core/atc/atc_options.py's table (docs/atc-options.md).
"""
from __future__ import annotations

import os
import re

import click

from ..core.atc import conversion
from ..core.atc.atc_options import OPTIONS, REFUSED
from ..core.jsonable import jsonable
from ..core.model.errors import GeError
from ..core.model.soc import DEFAULT_SOC, check_soc
from . import console
from .options import COMMANDS, command_line, log_option, spelled_option

FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", 5: "ONNX"}
ONNX = 5
MODES = {0: "compile an ONNX model into an OM", 1: "convert an OM into JSON", 3: "pre-check an ONNX model",
         6: "display OM info"}
STDOUT = "-"
DEFAULT_CHECK_REPORT = "check_result.json"


class AtcCommand(click.Command):
    """ATC's spellings: `-soc_version=X` is `--soc_version=X`, and `--h` is --help."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        fixed = []
        for a in args[:end]:
            if a in ("--h", "-h", "-help"):
                a = "--help"
            elif re.match(r"-[A-Za-z][\w-]+(=|$)", a):  # -soc_version=X; not a value such as -1,3,224,224
                a = "-" + a
            fixed.append(a)
        return super().parse_args(ctx, fixed + args[end:])


def atc_options(f):
    """One click option per entry of ATC's table (the names api.atc takes as keyword arguments)."""
    for opt in reversed(list(OPTIONS.values())):
        if opt.name == "log":  # the option all commands share
            f = log_option(f)
            continue
        extra = {"is_flag": False, "flag_value": opt.flag_value} if opt.flag_value else {}
        metavar = opt.metavar or ("FILE" if opt.path == "file" else "|".join(opt.values) if opt.values else "VALUE")
        kind = "" if opt.kind != REFUSED else "refused: "
        f = spelled_option(opt.name, default=None, metavar=metavar, help=kind + opt.what, **extra)(f)
    return f


@click.command("atc", cls=AtcCommand, short_help=COMMANDS["atc"],
               context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120})
@click.option("--mode", type=int, default=0, show_default=True,
              help="0: ONNX -> OM; 1: OM -> JSON (--om, --json FILE); 3: pre-check (--check_report); "
                   "6: display OM info (--om)")
@click.option("--model", "-m", metavar="FILE.onnx", help="the ONNX model to compile (modes 0 and 3)")
@click.option("--output", metavar="PATH", help="the OM to write; ATC appends .om (mode 0)")
@click.option("--framework", type=int, default=ONNX, show_default=True,
              help="source framework; ge converts ONNX models only (5)")
@spelled_option("soc_version", default=DEFAULT_SOC, show_default=True,
                help="target SoC, one of the names ATC knows (Ascend310P3, Ascend910B1, ...) or Ascend-sim; recorded "
                     "in the OM")
@spelled_option("input_shape", metavar='"name:d0,d1,...;name2:..."',
                help="static shapes for the model inputs (replaces symbolic dims)")
@spelled_option("out_nodes", metavar='"node:index;..."',
                help="use these node outputs (or tensor names) as the model outputs")
@spelled_option("insert_op_conf", metavar="FILE",
                help="ATC's AIPP config (static AIPP): the input becomes the raw image, preprocessed in the model")
@spelled_option("external_weight", type=int, default=0, show_default=True,
                help="0: weights inside the OM; 1: one file per weight (weight_<sha256>); 2: one combined file "
                     "(<name>_weight_combined). Constants under 1 KiB stay inline")
@spelled_option("external_weight_dir", metavar="DIR",
                help="where the weight files go (default: <om dir>/weight/; loading elsewhere needs "
                     "`ge run --weight_dir`)")
@spelled_option("dynamic_batch_size", metavar='"1,2,4,8"',
                help="gears (up to 100): batch sizes for the -1 dims of --input_shape (one static plan each)")
@spelled_option("dynamic_image_size", metavar='"h,w;h,w"',
                help="gears (up to 100): image sizes for the H,W -1 dims of --input_shape")
@spelled_option("dynamic_dims", metavar='"d1,d2;d1,d2"',
                help="gears (up to 100): one value per -1 dim of --input_shape, in order")
@spelled_option("input_shape_range", metavar='"x:[1~8,3,224,224]"',
                help="deprecated spelling of ranges (use --input_shape \"x:1~8,3,224,224\")")
@spelled_option("static_model_ops_lower_limit",
                type=int, default=None, help="smallest known-shape cluster compiled as a static submodel (default 4)")
@click.option("--om", metavar="FILE.om", help="the OM to read (modes 1 and 6)")
@click.option("--json", "json_out", is_flag=False, flag_value=STDOUT, default=None, metavar="[FILE]",
              help="mode 1: the JSON file to write; modes 0 and 6: print JSON instead of tables "
                   "(or write it to FILE)")
@click.option("--verbose", "-v", is_flag=True,
              help="mode 0: print the compile summary's tables (ops, memory, inputs/outputs, passes), as --log=info "
                   "does; ATC's lines only otherwise")
@spelled_option("check_report", default=None, metavar="FILE",
                help=f"mode 3: the pre-check report to write (default {DEFAULT_CHECK_REPORT})")
@atc_options
def atc(mode, model, output, framework, soc_version, input_shape, out_nodes, insert_op_conf, external_weight,
        external_weight_dir, dynamic_batch_size, dynamic_image_size, dynamic_dims, input_shape_range,
        static_model_ops_lower_limit, om, json_out, verbose, check_report, **options):
    """Compile an ONNX model into an offline model (OM), pre-check it, or look inside an OM (ATC's
    modes 0, 3, 1 and 6). Every ATC option is accepted: implemented where it means something on a
    CPU or the simulated NPU, checked and recorded in the OM where it tunes NPU hardware.

    \b
      ge atc --model=net.onnx --framework=5 --output=out/net --input_format=NCHW \\
             --input_shape="x:1,3,224,224" --log=error --soc_version=Ascend310P3
      ge atc --model=net.onnx --output=out/net --external_weight=2
      ge atc --mode=3 --model=net.onnx --framework=5 --check_report=check.json
      ge atc --mode=1 --om out/net.om --json out/net.json
      ge atc --mode=6 --om out/net.om
    """
    if mode not in MODES:
        raise GeError(f"--mode={mode} is not supported; ge supports "
                      + ", ".join(f"{k} ({v})" for k, v in MODES.items()))
    if mode in (0, 3):
        _check_framework(framework)
        if not model:
            raise click.UsageError(f"--mode={mode} needs --model (the ONNX file to {'compile' if mode == 0 else 'check'})")
    if mode == 0:
        dynamic = {"dynamic_batch_size": dynamic_batch_size, "dynamic_image_size": dynamic_image_size,
                   "dynamic_dims": dynamic_dims, "input_shape_range": input_shape_range,
                   "static_model_ops_lower_limit": static_model_ops_lower_limit}
        options = {k: v for k, v in options.items() if v is not None}
        _compile(model, output, soc_version, input_shape, out_nodes, json_out, external_weight,
                 external_weight_dir, {k: v for k, v in dynamic.items() if v is not None}, insert_op_conf, options,
                 verbose)
    elif mode == 3:
        check_soc(soc_version)
        _precheck(model, input_shape, out_nodes, check_report or DEFAULT_CHECK_REPORT)
    elif mode == 1:
        _om_to_json(om, json_out)
    else:
        _display(om, json_out)


def _check_framework(framework: int) -> None:
    if framework != ONNX:
        name = FRAMEWORKS.get(framework)
        what = f"{name} models are" if name else "this framework is"
        raise GeError(f"--framework={framework}: {what} not supported; ge converts ONNX models (--framework={ONNX})")


def _write_text(path: str, text: str) -> None:
    """--json's file, written atomically (formats.tensors: imported when a file is asked for, not by every compile)."""
    from ..formats.tensors import write_text
    write_text(path, text)


def _json_text(data) -> str:
    """--json's text (json imported here: compiling it is ~38 M instructions of a plain `ge atc` where
    the standard library has no cached bytecode, as in Python's container images)."""
    import json
    return json.dumps(data, indent=2)


# -- mode 0 -------------------------------------------------------------------------------------
def _compile(model, output, soc_version, input_shape, out_nodes, json_out, external_weight=0,
             external_weight_dir=None, dynamic=None, insert_op_conf=None, options=None, verbose=False) -> None:
    """ATC's lines (start, the OM written, success); the summary's tables too with --verbose or at
    --log=info|debug; the summary as JSON with --json."""
    if not output:
        raise click.UsageError("--mode=0 needs --output (the OM to write; .om is appended)")
    if output.endswith(("/", os.sep)):
        raise click.BadParameter(f"'{output}' is a folder; give the OM's path (ATC appends .om: --output "
                                 f"{os.path.join(output, 'net')} writes {os.path.join(output, 'net.om')})",
                                 param_hint="--output")
    if json_out and json_out != STDOUT and (json_out.endswith(("/", os.sep)) or os.path.isdir(json_out)):
        # checked before compiling: an error after the OM is written would leave it behind
        raise click.BadParameter(f"'{json_out}' is a folder; give the JSON file's name", param_hint="--json")
    options = dict(options or {})
    if json_out != STDOUT:
        console.echo("ATC start working now, please wait for a moment.")
    result = conversion.atc(model, output, input_shape=input_shape, out_nodes=out_nodes, soc_version=soc_version,
                            cmdline=command_line(), external_weight=external_weight,
                            external_weight_dir=external_weight_dir, dynamic=dynamic, insert_op_conf=insert_op_conf,
                            **options)
    shown = verbose or options.get("log") in ("info", "debug")
    data = jsonable(dict(result.summary, om=result.om_path)) if json_out or shown else None
    if json_out == STDOUT:
        console.echo(_json_text(data))
        return
    if shown:
        render_summary(data)
    if json_out:
        _write_text(json_out, _json_text(data) + "\n")
        console.echo(f"summary JSON: {json_out}")
    console.echo(f"OM written to {click.style(result.om_path, bold=True)}")
    if options.get("display_model_info") == "1":
        from ..core.inspection.om_info import model_info
        for line in display_lines(model_info(result.om_path)):
            console.echo(line)
    console.echo("ATC run success, welcome to the next use.")


# -- mode 3 -------------------------------------------------------------------------------------
def _precheck(model, input_shape, out_nodes, report_path) -> None:
    from ..core.atc.pre_check import precheck, write_check_report
    from ..core.shape_options import parse_shape_spec
    nodes = [n for n in (out_nodes or "").split(";") if n] or None
    result = precheck(model, parse_shape_spec(input_shape) or None, nodes)
    write_check_report(result, report_path)
    console.echo(f"pre-check of {model}: {result['nodes'] - result['failed']} of {result['nodes']} nodes "
                 f"supported; report written to {report_path}")
    for e in result["op_list"]:
        if e["result"] != "success":
            console.echo(f"  {e['op_name']} ({e['op_type']}): {console.one_line(e['reason'])}")
    console.echo("ATC run success, welcome to the next use." if result["result"] == "success" else
                 "ATC pre-check found unsupported nodes (see the report).")


def render_summary(s: dict) -> None:
    from rich.table import Table  # here: a plain `ge atc` prints no table and imports no rich
    out = console.out
    out.print(f"[bold]{s.get('model', '?')}[/bold]  soc_version {s.get('soc_version', '?')}, "
              f"opset {s.get('opset', '?')}")
    if s.get("mode"):  # a dynamic model: root graph + static submodels
        p = s.get("partitions", {})
        out.print(f"dynamic shapes ({s['mode']}): {p.get('known', 0)} known cluster(s) as {p.get('submodels', 0)} "
                  f"static submodel(s), {p.get('unknown_nodes', 0)} unknown-shape node(s)"
                  + (f", {p['subgraphs']} control-flow subgraph(s)" if p.get("subgraphs") else "")
                  + (f", gears {s['gears']}" if s.get("gears") else ""))

    ops = Table(title="Ops", title_justify="left")
    ops.add_column("op type")
    ops.add_column("count", justify="right")
    for op, n in s.get("ops", {}).items():
        ops.add_row(op, str(n))
    ops.add_section()
    ops.add_row("nodes", str(s.get("nodes", 0)))
    ops.add_row("tasks", str(s.get("tasks", 0)))
    ops.add_row("aliases (no task)", str(s.get("aliases", 0)))
    out.print(ops)

    mem = Table(title="Memory", title_justify="left")
    mem.add_column("region")
    mem.add_column("bytes", justify="right")
    mem.add_column("size", justify="right")
    mem.add_column("note")
    memory = s.get("memory", {})
    bound = int(s.get("feature_map_lower_bound", 0) or 0)
    for region, size in memory.items():
        note = ""
        if region == "FEATURE_MAP":
            ratio = f"{size / bound:.3f}" if bound else "-"
            note = f"lower bound {bound} B, ratio {ratio}"
        elif region == "WEIGHT":
            w = s.get("weights", {})
            inline = w.get("inline", {"count": w.get("count", 0), "bytes": w.get("bytes", 0)})
            note = f"{inline['count']} inline weights, {inline['bytes']} B of data"
        elif region == "FILE_CONSTANT":
            ext = s.get("weights", {}).get("external", {})
            note = f"{ext.get('count', 0)} weights in {ext.get('files', 0)} external files"
        mem.add_row(region, str(size), console.nbytes(size), note)
    out.print(mem)

    ext = s.get("external_weight") or {}
    if ext.get("paths"):
        n = len(ext.get("files", []))
        files = Table(title=f"External weights (--external_weight={ext.get('mode')}, {n} file{'s' * (n != 1)} "
                            f"in {ext.get('dir')})", title_justify="left")
        for col in ("id", "weight", "path", "offset", "size"):
            files.add_column(col, justify="right" if col in ("id", "offset", "size") else "left")
        for d in ext["paths"]:
            files.add_row(str(d["id"]), d["weight"], d["path"], str(d["offset"]), str(d["size"]))
        out.print(files)

    io = Table(title="Inputs / outputs", title_justify="left")
    for col in ("", "name", "dtype", "shape"):
        io.add_column(col)
    for role in ("inputs", "outputs"):
        for d in s.get(role, []):
            io.add_row(role[:-1], d["name"], d["dtype"], str(list(d["shape"])))
    out.print(io)

    rows = pass_rows(s.get("passes") or {})
    if rows:
        table = Table(title="Passes (what changed)", title_justify="left")
        table.add_column("pass")
        table.add_column("result")
        for row in rows:
            table.add_row(*row)
        out.print(table)
    rec = s.get("atc_options") or {}
    if rec.get("options"):
        kinds = {name: OPTIONS[name].kind for name in rec["options"] if name in OPTIONS}
        out.print("ATC options: " + ", ".join(f"--{k}={v} ({kinds.get(k, 'implemented')})"
                                              for k, v in rec["options"].items()))
    if rec.get("fusions_off"):
        out.print("fusions off: " + ", ".join(rec["fusions_off"]))
    out.print(f"compiled in {float(s.get('seconds', 0)):.3f} s")


def pass_rows(report: dict) -> list[tuple[str, str]]:
    """The passes' report as rows: the node count before and after, then each pass that changed
    something with its non-zero figures (the report's own totals repeat these and are left out)."""
    rows = []
    if "nodes_before" in report:
        rows.append(("nodes", f"{report['nodes_before']} -> {report.get('nodes_after', '?')}"))
    for name, figures in (report.get("passes") or {}).items():
        changed = ", ".join(f"{k}={v}" for k, v in figures.items() if v)
        if changed:
            rows.append((name, changed))
    return rows


# -- modes 1 and 6 ------------------------------------------------------------------------------
def _need_om(om, mode: int) -> str:
    if not om:
        raise click.UsageError(f"--mode={mode} needs --om (the OM file to read)")
    return om


def _om_to_json(om, json_out) -> None:
    om = _need_om(om, 1)
    if not json_out:
        raise click.UsageError("--mode=1 needs --json FILE (the JSON file to write; '-' for stdout)")
    from ..core.inspection.om_info import om_to_json
    text = _json_text(om_to_json(om))
    if json_out == STDOUT:
        console.echo(text)
        return
    _write_text(json_out, text + "\n")
    console.echo(f"OM {om} dumped to {json_out}")
    console.echo("ATC run success, welcome to the next use.")


def _display(om, json_out) -> None:
    from ..core.inspection.om_info import model_info
    info = model_info(_need_om(om, 6))
    if json_out == STDOUT:
        console.echo(_json_text(info))
        return
    if json_out:
        _write_text(json_out, _json_text(info) + "\n")
    for line in display_lines(info):
        console.echo(line)


def display_lines(i: dict) -> list[str]:
    """ATC's `--mode=6` banner."""
    return [
        "============ Display Model Info start ============",
        f"Original Atc command line: {i['atc_cmdline']}",
        f"system   info: atc_version[{i['atc_version']}], soc_version[{i['soc_version']}], "
        f"framework_type[{i['framework_type']}].",
        f"resource info: memory_size[{i['memory_size']} B], weight_size[{i['weight_size']} B], "
        f"stream_num[{i['stream_num']}], event_num[{i['event_num']}].",
        f"om       info: modeldef_size[{i['modeldef_size']} B], weight_data_size[{i['weight_data_size']} B], "
        f"task_info_size[{i['task_info_size']} B].",
        "============ Display Model Info end   ============",
    ]
