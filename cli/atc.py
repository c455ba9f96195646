"""`ge atc`: ATC's command line. --mode=0 compiles ONNX into an OM, --mode=1 dumps an OM as JSON,
--mode=6 displays an OM's info in ATC's banner format. Options take ATC's spelling, as
`--opt=value` or `--opt value` (dashed aliases such as --input-shape work too)."""
from __future__ import annotations

import json

import click
from rich.table import Table

from ..core.errors import GeError
from ..formats.tensors import write_text as _write_text
from ..core import api
from . import console
from .options import command_line

FRAMEWORKS = {0: "Caffe", 1: "MindSpore", 3: "TensorFlow", 5: "ONNX"}
ONNX = 5
MODES = {0: "compile an ONNX model into an OM", 1: "convert an OM into JSON", 6: "display OM info"}
STDOUT = "-"


@click.command("atc", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--mode", type=int, default=0, show_default=True,
              help="0: ONNX -> OM; 1: OM -> JSON (--om, --json FILE); 6: display OM info (--om)")
@click.option("--model", metavar="FILE.onnx", help="the ONNX model to compile (mode 0)")
@click.option("--output", metavar="PATH", help="the OM to write; ATC appends .om (mode 0)")
@click.option("--framework", type=int, default=ONNX, show_default=True,
              help="source framework; ge compiles ONNX only (5)")
@click.option("--soc_version", "--soc-version", "soc_version", default=api.DEFAULT_SOC, show_default=True,
              help="target SoC, recorded in the OM")
@click.option("--input_shape", "--input-shape", "input_shape", metavar='"name:d0,d1,...;name2:..."',
              help="static shapes for the model inputs (replaces symbolic dims)")
@click.option("--out_nodes", "--out-nodes", "out_nodes", metavar='"node:index;..."',
              help="use these node outputs (or tensor names) as the model outputs")
@click.option("--external_weight", "--external-weight", "external_weight", type=int, default=0, show_default=True,
              help="0: weights inside the OM; 1: one file per weight (weight_<sha256>); 2: one combined file "
                   "(<name>_weight_combined). Constants under 1 KiB stay inline")
@click.option("--external_weight_dir", "--external-weight-dir", "external_weight_dir", metavar="DIR",
              help="where the weight files go (default: <om dir>/weight/; loading elsewhere needs "
                   "`ge run --weight_dir`)")
@click.option("--dynamic_batch_size", "--dynamic-batch-size", "dynamic_batch_size", metavar='"1,2,4,8"',
              help="gears: batch sizes for the -1 dims of --input_shape (one static plan each)")
@click.option("--dynamic_image_size", "--dynamic-image-size", "dynamic_image_size", metavar='"h,w;h,w"',
              help="gears: image sizes for the two -1 dims of --input_shape")
@click.option("--dynamic_dims", "--dynamic-dims", "dynamic_dims", metavar='"d1,d2;d1,d2"',
              help="gears: one value per -1 dim of --input_shape, in order")
@click.option("--input_shape_range", "--input-shape-range", "input_shape_range", metavar='"x:[1~8,3,224,224]"',
              help="deprecated spelling of ranges (use --input_shape \"x:1~8,3,224,224\")")
@click.option("--static_model_ops_lower_limit", "--static-model-ops-lower-limit", "static_model_ops_lower_limit",
              type=int, default=None, help="smallest known-shape cluster compiled as a static submodel (default 4)")
@click.option("--om", metavar="FILE.om", help="the OM to read (modes 1 and 6)")
@click.option("--json", "json_out", is_flag=False, flag_value=STDOUT, default=None, metavar="[FILE]",
              help="mode 1: the JSON file to write; modes 0 and 6: print JSON instead of tables "
                   "(or write it to FILE)")
def atc(mode, model, output, framework, soc_version, input_shape, out_nodes, external_weight, external_weight_dir,
        dynamic_batch_size, dynamic_image_size, dynamic_dims, input_shape_range, static_model_ops_lower_limit, om,
        json_out):
    """Compile an ONNX model into an offline model (OM), or look inside an OM (ATC's modes 1 and 6).

    \b
      ge atc --model=net.onnx --framework=5 --output=out/net --input_shape="x:1,3,224,224"
      ge atc --model=net.onnx --output=out/net --external_weight=2
      ge atc --mode=1 --om out/net.om --json out/net.json
      ge atc --mode=6 --om out/net.om
    """
    if mode not in MODES:
        raise GeError(f"--mode={mode} is not supported; ge supports "
                      + ", ".join(f"{k} ({v})" for k, v in MODES.items()))
    if mode == 0:
        dynamic = {"dynamic_batch_size": dynamic_batch_size, "dynamic_image_size": dynamic_image_size,
                   "dynamic_dims": dynamic_dims, "input_shape_range": input_shape_range,
                   "static_model_ops_lower_limit": static_model_ops_lower_limit}
        _compile(model, output, framework, soc_version, input_shape, out_nodes, json_out, external_weight,
                 external_weight_dir, {k: v for k, v in dynamic.items() if v is not None})
    elif mode == 1:
        _om_to_json(om, json_out)
    else:
        _display(om, json_out)


# -- mode 0 -------------------------------------------------------------------------------------
def _compile(model, output, framework, soc_version, input_shape, out_nodes, json_out, external_weight=0,
             external_weight_dir=None, dynamic=None) -> None:
    if framework != ONNX:
        name = FRAMEWORKS.get(framework)
        what = f"{name} models" if name else "this framework"
        raise GeError(f"--framework={framework}: {what} are not supported; ge compiles ONNX models only "
                      f"(--framework={ONNX})")
    if not model:
        raise click.UsageError("--mode=0 needs --model (the ONNX file to compile)")
    if not output:
        raise click.UsageError("--mode=0 needs --output (the OM to write; .om is appended)")
    result = api.atc(model, output, input_shape=input_shape, out_nodes=out_nodes, soc_version=soc_version,
                     cmdline=command_line(), external_weight=external_weight, external_weight_dir=external_weight_dir,
                     dynamic=dynamic)
    data = api.jsonable(dict(result.summary, om=result.om_path))
    if json_out == STDOUT:
        console.echo(json.dumps(data, indent=2))
        return
    render_summary(data)
    if json_out:
        _write_text(json_out, json.dumps(data, indent=2) + "\n")
        console.out.print(f"summary JSON: {json_out}")
    console.out.print(f"OM written to [bold]{result.om_path}[/bold]")
    console.echo("ATC run success, welcome to the next use.")


def render_summary(s: dict) -> None:
    out = console.out
    out.print(f"[bold]{s.get('model', '?')}[/bold]  soc_version {s.get('soc_version', '?')}, "
              f"opset {s.get('opset', '?')}")
    if s.get("mode"):  # a dynamic model: root graph + static submodels
        p = s.get("partitions", {})
        out.print(f"dynamic shapes ({s['mode']}): {p.get('known', 0)} known cluster(s) as {p.get('submodels', 0)} "
                  f"static submodel(s), {p.get('unknown_nodes', 0)} unknown-shape node(s)"
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

    passes = s.get("passes") or {}
    if passes:
        table = Table(title="Passes", title_justify="left")
        table.add_column("pass / figure")
        table.add_column("result")
        for key, value in passes.items():
            if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
                for name, stats in value.items():
                    table.add_row(name, ", ".join(f"{k}={v}" for k, v in stats.items()) or "-")
            elif isinstance(value, dict):
                table.add_row(key, ", ".join(f"{k}={v}" for k, v in value.items()) or "-")
            else:
                table.add_row(key, str(value))
        out.print(table)
    out.print(f"compiled in {float(s.get('seconds', 0)):.3f} s")


# -- modes 1 and 6 ------------------------------------------------------------------------------
def _need_om(om, mode: int) -> str:
    if not om:
        raise click.UsageError(f"--mode={mode} needs --om (the OM file to read)")
    return om


def _om_to_json(om, json_out) -> None:
    om = _need_om(om, 1)
    if not json_out:
        raise click.UsageError("--mode=1 needs --json FILE (the JSON file to write; '-' for stdout)")
    text = json.dumps(api.om_to_json(om), indent=2)
    if json_out == STDOUT:
        console.echo(text)
        return
    _write_text(json_out, text + "\n")
    console.echo(f"OM {om} dumped to {json_out}")
    console.echo("ATC run success, welcome to the next use.")


def _display(om, json_out) -> None:
    info = api.model_info(_need_om(om, 6))
    if json_out == STDOUT:
        console.echo(json.dumps(info, indent=2))
        return
    if json_out:
        _write_text(json_out, json.dumps(info, indent=2) + "\n")
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
