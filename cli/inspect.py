"""`ge inspect X.om`: what was compiled — header, IO, memory regions, the allocation table, tasks
with their kernels and arguments, weights. The data comes from `api.inspect` (also for Python
users); this module only renders it."""
from __future__ import annotations

import json

import click
from rich.table import Table

from ..core import api
from . import console
from .options import COMMANDS, json_option

SECTION_NAMES = tuple(api.INSPECT_SECTIONS)


def _section_data(d: dict, section: str) -> dict:
    if section not in SECTION_NAMES:
        raise click.UsageError(f"--section {section}: one of {', '.join(SECTION_NAMES)}")
    return api.inspect_section(d, section)


@click.command("inspect", short_help=COMMANDS["inspect"],
               context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("om", metavar="FILE.om", type=click.Path(dir_okay=False))
@json_option
@click.option("--section", metavar="NAME", help="print one section: " + ", ".join(SECTION_NAMES))
@click.option("--plot", metavar="FILE.svg|.png", type=click.Path(dir_okay=False),
              help="draw the memory plan (offset against step, a box per tensor, coloured by region, the lower "
                   "bound marked)")
def inspect(om, as_json, section, plot):
    """Show what an OM holds: header, inputs/outputs, memory, allocations, tasks, weights.

    \b
      ge inspect out/net.om
      ge inspect out/net.om --section tasks
      ge inspect out/net.om --plot plan.svg
    """
    if plot:
        api.plot_memory(om, plot)
        console.out.print(f"memory plan drawn to {plot}")
        return
    data = api.inspect(om)
    if as_json:
        console.echo(json.dumps(data if not section else {section: _section_data(data, section)}, indent=2))
        return
    render(data, section)


def _table(title: str, *columns: str, right: tuple = ()) -> Table:
    """Cells wrap (fold) rather than being cut: at 80 columns a long name takes two lines, and no
    digit of a number is ever lost to an ellipsis."""
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left", overflow="fold")
    return t


def render(d: dict, section: str | None = None) -> None:
    if section is not None and section not in SECTIONS:
        raise click.UsageError(f"--section {section}: one of {', '.join(SECTIONS)}")
    if "dynamic" in d:
        if section is None:
            render_dynamic(d)
        else:
            render_dynamic_section(d, section)
        return
    for name, show in SECTIONS.items():
        if section in (None, name):
            show(d, console.out)


def _header(d, out):
    head = _table("Header", "field", "value")
    for key, value in d["header"].items():
        if key != "partitions":
            head.add_row(key, str(value))
    out.print(head)
    parts = _table("Partitions", "type", "submodel", "offset", "size", right=("submodel", "offset", "size"))
    for p in d["header"].get("partitions", []):
        parts.add_row(str(p["type"]), str(p["submodel"]), str(p["offset"]), str(p["size"]))
    out.print(parts)
    render_atc_options(d, out)


def render_atc_options(d: dict, out) -> None:
    """The SoC the OM was compiled for and the ATC options it records (what ge made of them)."""
    soc = d.get("soc") or {}
    if soc.get("family"):
        out.print(f"SoC {soc['soc_version']}: {soc['family']}, {soc['aicore_num'] or 'no fixed number of'} AI Cores")
    rec = d.get("atc_options") or {}
    if rec.get("options") or len(rec) > 1:
        table = _table("ATC options", "option", "value")
        for name, value in rec.get("options", {}).items():
            table.add_row(f"--{name}", str(value))
        for key, value in rec.items():
            if key != "options":
                table.add_row(f"({key})", json.dumps(value))
        out.print(table)


def _io(d, out):
    io = _table("Inputs / outputs", "", "name", "dtype", "shape", "bytes", "allocation", right=("bytes",))
    for role in ("inputs", "outputs"):
        for i, x in enumerate(d[role]):
            io.add_row(f"{role[:-1]} {i}", x["name"], x["dtype"], str(x["shape"]), str(x["bytes"]),
                       f"#{x['allocation']} {x['kind']}")
    out.print(io)
    for a in d.get("aipp", []):
        if a.get("mode") == "dynamic":
            out.print(f"AIPP on input '{a['input']}' (dynamic): {a['raw_dtype']} {a['raw_shape']} -> "
                      f"{a['model_shape']}, max_src_image_size {a['max_src_image_size']}, parameters at run time "
                      f"in input '{a['params_input']}'")
            continue
        steps = [f"{a['input_format']} {a['raw_dtype']} {a['raw_shape']} -> {a['model_shape']}"]
        steps += [s for s, on in (("channel swap", a["rbuv_swap_switch"]), (f"crop {a['crop_size_w']}x{a['crop_size_h']} "
                  f"at ({a['load_start_pos_w']}, {a['load_start_pos_h']})", a["crop"]), ("CSC", a["csc_switch"]),
                  ("padding", a["padding"])) if on]
        out.print(f"AIPP on input '{a['input']}' (static): " + ", ".join(steps))


def _memory(d, out):
    mem = _table("Memory regions", "region", "size", "", right=("size", ""))
    for region, r in d["memory"].items():
        mem.add_row(region, str(r["size"]), console.nbytes(r["size"]))
    out.print(mem)
    bound = d.get("feature_map_lower_bound", 0)
    fm = d["memory"].get("FEATURE_MAP", {}).get("size", 0)
    if bound:
        out.print(f"feature-map lower bound {bound} B, planned {fm} B, ratio {fm / bound:.3f}")
    logical = _table("Logical allocations", "id", "kind", "size", "io index", right=("id", "size", "io index"))
    for a in d["logical_allocations"]:
        logical.add_row(str(a["id"]), a["kind"], str(a["size"]), "" if a["io_index"] < 0 else str(a["io_index"]))
    out.print(logical)


def _allocations(d, out):
    alloc = _table("Allocation table", "tensor", "allocation", "offset", "size", "dtype", "shape", "first", "last",
                   "alias of", "quantization", right=("offset", "size", "first", "last"))
    for t in d["allocations"]:
        alloc.add_row(t["tensor"], f"#{t['allocation']} {t['kind']}", str(t["offset"]), str(t["size"]), t["dtype"],
                      str(t["shape"]), str(t["first"]), str(t["last"]), t["alias_of"], t.get("quantization", ""))
    out.print(alloc)


def _tasks(d, out):
    tasks = _table("Tasks", "#", "node", "op", "kernel", "args (alloc#id+offset kind)", "workspace",
                   right=("#", "workspace"))
    for t in d["tasks"]:
        op = t["label"]
        ins = ", ".join(f"{a['ref']} {a['kind']}" for a in t["args"] if a["role"] == "in")
        outs = ", ".join(f"{a['ref']} {a['kind']}" for a in t["args"] if a["role"] == "out")
        kernel = t["kernel"] + (f": {t['int8_product']}" if t.get("int8_product") else "")  # (quant_info.int8_products)
        tasks.add_row(str(t["index"]), t["node"], op, kernel, f"{ins} -> {outs}", str(t["workspace"]))
    out.print(tasks)


def _args(d, out):
    args = _table("Args table (one uint64 per slot in device memory)", "slot", "task", "node", "arg", "allocation",
                  "offset", "refresh", right=("slot", "task", "offset"))
    for a in d["args_table"]:
        args.add_row(str(a["slot"]), str(a["task"]), a["node"], a["arg"], f"#{a['allocation']} {a['kind']}",
                     str(a["offset"]), a["policy"] if a["refreshable"] else "fixed")
    out.print(args)


def _weights(d, out):
    quantized = any(w.get("quantization") for w in d["weights"])
    weights = _table("Weights", "name", "dtype", "shape", "storage", "file", "offset", "bytes", "sha256",
                     *(("quantization",) if quantized else ()), right=("offset", "bytes"))
    for w in d["weights"]:
        weights.add_row(w["name"], w["dtype"], str(w["shape"]), w["storage"], w["file"] or "-", str(w["offset"]),
                        str(w["bytes"]), w["short_sha256"], *((w.get("quantization", ""),) if quantized else ()))
    out.print(weights)
    t = d["weight_totals"]
    out.print(f"weights (--external_weight={t['mode']}): inline {t['inline']['count']} ({t['inline']['bytes']} B), "
              f"in files {t['file']['count']} ({t['file']['bytes']} B) in {t['file']['files']} file{'s' * (t['file']['files'] != 1)} "
              f"({t['file']['file_bytes']} B)")


#: what each section prints, in the order a full `ge inspect` prints them
SECTIONS = {"header": _header, "io": _io, "memory": _memory, "allocations": _allocations, "tasks": _tasks,
            "args": _args, "weights": _weights}


def _subgraphs(subgraphs: list, out) -> None:
    """Control flow: each subgraph, whose it is, what it takes (captured outer values marked) and
    how it runs: static submodels (KNOWN) and nodes of the hybrid executor (UNKNOWN)."""
    table = _table("Control-flow subgraphs", "#", "of", "inputs (captured*)", "outputs", "runs as", right=("#",))
    for sg in subgraphs:
        first_captured = len(sg["inputs"]) - sg["captures"]
        ins = ", ".join(f"{t['name']}{'*' if j >= first_captured else ''}{t['shape']}" for j, t in enumerate(sg["inputs"]))
        outs = ", ".join(f"{t['name']}{t['shape']}" for t in sg["outputs"])
        runs = "; ".join(f"submodel {c['submodel']} ({len(c['nodes'])} nodes)" if c["kind"] == "KNOWN"
                         else ", ".join(c["nodes"]) for c in sg["clusters"]) or "-"
        owner = f"{sg.get('graph', '?')}: {sg.get('node', '?')} ({sg.get('op_type', '?')}).{sg.get('attribute', '?')}"
        table.add_row(str(sg["index"]), owner, ins or "-", outs, runs)
    out.print(table)


def _dyn_nodes(title: str, nodes: list, out) -> None:
    """The nodes the hybrid executor runs, each output's dtype (what --precision_mode made of it)."""
    table = _table(title, "node", "op", "outputs")
    for n in nodes:
        table.add_row(n["name"], n["op_type"], ", ".join(f"{o['name']}: {o['dtype'] or '?'}" for o in n["outputs"]))
    out.print(table)


def render_dynamic(d: dict) -> None:
    """A dynamic OM: root (partitions, gears, ranges), then each static submodel."""
    out, dyn = console.out, d["dynamic"]
    out.print(f"[bold]{dyn['name']}[/bold]: dynamic model, mode {dyn['mode']}, {len(d['submodels'])} static "
              f"submodel(s), shared weights {dyn['weight_size']} B")
    files = dyn.get("weight_files", {})
    if files:
        out.print("external weight files shared by the root and every submodel: "
                  + ", ".join(f"{name} ({size} B)" for name, size in files.items()), highlight=False)
    _header(d, out)
    render_atc_options(dyn, out)
    io = _table("Root inputs / outputs", "", "name", "dtype", "shape", "range")
    for role in ("inputs", "outputs"):
        for x in dyn[role]:
            io.add_row(role[:-1], x["name"], x["dtype"], str(x["shape"]), ",".join(x.get("ranges", [])) or "-")
    out.print(io)
    if dyn["clusters"]:
        parts = _table(f"Partitions (static_model_ops_lower_limit={dyn['static_model_ops_lower_limit']})",
                       "#", "kind", "submodel", "nodes", "why", right=("#",))
        for c in dyn["clusters"]:
            nodes = ", ".join(c["nodes"][:4]) + (f" ... ({len(c['nodes'])} nodes)" if len(c["nodes"]) > 4 else "")
            parts.add_row(str(c["index"]), c["kind"], "-" if c["submodel"] < 0 else str(c["submodel"]), nodes,
                          c["reason"] or "static shapes")
        out.print(parts)
    if dyn["nodes"]:
        _dyn_nodes("Hybrid executor's nodes", dyn["nodes"], out)
    if dyn["gears"]:
        gears = _table("Gears", "gear", "-1 dims", "input shapes", "output shapes", "memory", right=("memory",))
        for g in dyn["gears"]:
            gears.add_row(str(g["gear"]), ",".join(map(str, g["values"])),
                          "; ".join(f"{k}:{v}" for k, v in g["inputs"].items()),
                          "; ".join(f"{k}:{v}" for k, v in g["outputs"].items()), str(g["memory_size"]))
        out.print(gears)
    if d.get("subgraphs"):
        _subgraphs(d["subgraphs"], out)
        for sg in d["subgraphs"]:
            if sg["nodes"]:
                _dyn_nodes(f"Subgraph {sg['index']}'s hybrid nodes", sg["nodes"], out)
    cap = dyn["planned_capacity"]
    if cap["tensors"]:
        out.print(f"range plan: {len(cap['tensors'])} tensors planned at their upper bounds, "
                  f"{cap['total']} B ({console.nbytes(cap['total'])}) in total")
    if cap.get("growable"):
        out.print(f"growable (no finite bound, reallocated at run time): {', '.join(cap['growable'])}")
    for k, sub in enumerate(d["submodels"]):  # (their partitions are in the table above, as submodel k + 1)
        out.print(f"[bold]submodel {k}[/bold]")
        for name, show in SECTIONS.items():
            if name != "header":
                show(sub, out)


def render_dynamic_section(d: dict, section: str) -> None:
    """One section of a dynamic OM: the root's header, else that section of each static submodel."""
    out = console.out
    if section == "header":
        _header(d, out)
        render_atc_options(d["dynamic"], out)
        return
    for k, sub in enumerate(d["submodels"]):
        out.print(f"[bold]submodel {k}[/bold]")
        SECTIONS[section](sub, out)
