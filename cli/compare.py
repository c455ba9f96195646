"""`ge compare`: the OM against its ONNX model, every output and every layer both sides have
(msquickcmp, `polygraphy run --compare`). Exit 0 when every output passes, 1 otherwise."""
from __future__ import annotations

import csv
import io
import json
import os

import click
from rich.table import Table

from ..core import api
from ..core.inspection.comparison import DEFAULT_ATOL, DEFAULT_RTOL
from ..formats.atomic import make_folder
from ..formats.tensors import write_text
from . import console
from .options import COMMANDS, GEAR_OPTIONS, device_option


@click.command("compare", short_help=COMMANDS["compare"],
               context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", "-m", "onnx_model", required=True, metavar="FILE.onnx", type=click.Path(dir_okay=False),
              help="the ONNX model (the reference: onnxruntime when installed, else onnx's reference evaluator)")
@click.option("--om", required=True, metavar="FILE.om", type=click.Path(dir_okay=False), help="the compiled OM")
@click.option("--input", "input_files", metavar="a.npy,b.bin",
              help="input files in the OM's input order (.npy, .npz, .bin, ONNX .pb, or onnx's test_data_set_N "
                   "folder, as ge run); seeded random data when omitted")
@click.option("--atol", type=float, default=DEFAULT_ATOL, show_default=True, help="absolute tolerance")
@click.option("--rtol", type=float, default=DEFAULT_RTOL, show_default=True, help="relative tolerance")
@click.option("--json", "json_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="write the results as JSON ('-' for stdout)")
@click.option("--output", "output_dir", metavar="DIR", type=click.Path(file_okay=False),
              help="write outputs.csv and layers.csv to DIR")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the random inputs")
@device_option
@GEAR_OPTIONS[0]
@GEAR_OPTIONS[1]
@GEAR_OPTIONS[2]
def compare(onnx_model, om, input_files, atol, rtol, json_file, output_dir, seed, device, dym_batch, dym_hw, dym_dims):
    """Compare an OM with its ONNX model, output by output and layer by layer.

    \b
      ge compare --model net.onnx --om out/net.om
      ge compare --model net.onnx --om out/net.om --input x.npy --json cmp.json --output cmp/
      ge compare --model net.onnx --om out/net_gears.om --dymBatch 4     # a gear model, at one gear
    """
    inputs = input_files.split(",") if input_files else None
    result = api.compare(onnx_model, om, inputs, atol=atol, rtol=rtol, device=device, seed=seed,
                         dym_batch=dym_batch, dym_hw=dym_hw, dym_dims=dym_dims)
    data = api.jsonable(result)
    if json_file == "-":
        console.echo(json.dumps(data, indent=2))
    else:
        render(data)
        if json_file:
            write_text(json_file, json.dumps(data, indent=2) + "\n")
    if output_dir:
        make_folder(output_dir, f"--output {output_dir}")
        for key in ("outputs", "layers"):
            write_text(os.path.join(output_dir, f"{key}.csv"), to_csv(data[key]))
    click.get_current_context().exit(0 if result["passed"] else 1)


def render(d: dict) -> None:
    out = console.out
    if "gear" in d:
        out.print(f"gear {','.join(map(str, d['gear']))}")
    out.print(f"reference: {d['reference']}, tolerance atol {d['atol']:g} + rtol {d['rtol']:g} * |reference|")
    keys = (("outputs", "Outputs"),) if d.get("outputs_only") else (("outputs", "Outputs"), ("layers", "Layers (worst first)"))
    for key, title in keys:
        rows = sorted(d[key], key=lambda r: (r["pass"], _num(r["cosine"])))
        table = Table(title=f"{title}: {sum(r['pass'] for r in rows)}/{len(rows)} pass", title_justify="left")
        for col in ("name", "op", "cosine", "max abs", "max rel", ""):
            if col != "op" or key == "layers":
                table.add_column(col, justify="right" if col in ("cosine", "max abs", "max rel") else "left")
        for r in rows:
            cells = [r["name"]] + ([r["op"]] if key == "layers" else []) + \
                [_fmt(r["cosine"], ".6f"), _fmt(r["max_abs"], ".3g"), _fmt(r["max_rel"], ".3g"),
                 "pass" if r["pass"] else "[red]FAIL[/red]"]
            table.add_row(*cells)
        out.print(table)
    if d.get("outputs_only"):
        out.print("outputs only: the OM's shapes are decided as it runs (control flow, sequences, ranges), "
                  "so no task names a layer")
        return
    bad = d["first_bad_layer"]
    out.print(f"first failing layer in graph order: [bold]{bad}[/bold]" if bad else "every layer passes")


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return buf.getvalue()


def _num(v) -> float:
    return float(v) if not isinstance(v, str) else float("-inf")


def _fmt(v, spec: str) -> str:
    return v if isinstance(v, str) else format(v, spec)
