"""`ge inspect X.om`: what was compiled — header, IO, memory regions, the allocation table, tasks
with their kernels and arguments, weights. The data comes from `api.inspect` (also for Python
users); this module only renders it."""
from __future__ import annotations

import json

import click
from rich.table import Table

from ..core import api
from . import console
from .options import json_option


@click.command("inspect", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("om", metavar="FILE.om", type=click.Path(dir_okay=False))
@json_option
def inspect(om, as_json):
    """Show what an OM holds: header, inputs/outputs, memory, allocations, tasks, weights."""
    data = api.inspect(om)
    if as_json:
        console.echo(json.dumps(data, indent=2))
        return
    render(data)


def _table(title: str, *columns: str, right: tuple = ()) -> Table:
    t = Table(title=title, title_justify="left")
    for c in columns:
        t.add_column(c, justify="right" if c in right else "left")
    return t


def render(d: dict) -> None:
    if "dynamic" in d:
        render_dynamic(d)
        return
    out = console.out
    h = d["header"]
    head = _table("Header", "field", "value")
    for key, value in h.items():
        if key == "partitions":
            continue
        head.add_row(key, str(value))
    out.print(head)
    parts = _table("Partitions", "type", "submodel", "offset", "size", right=("submodel", "offset", "size"))
    for p in h.get("partitions", []):
        parts.add_row(str(p["type"]), str(p["submodel"]), str(p["offset"]), str(p["size"]))
    out.print(parts)

    io = _table("Inputs / outputs", "", "name", "dtype", "shape", "bytes", "allocation", right=("bytes",))
    for role in ("inputs", "outputs"):
        for i, x in enumerate(d[role]):
            io.add_row(f"{role[:-1]} {i}", x["name"], x["dtype"], str(x["shape"]), str(x["bytes"]),
                       f"#{x['allocation']} {x['kind']}")
    out.print(io)
    for a in d.get("aipp", []):
        steps = [f"{a['input_format']} {a['raw_dtype']} {a['raw_shape']} -> {a['model_shape']}"]
        steps += [s for s, on in (("channel swap", a["rbuv_swap_switch"]), (f"crop {a['crop_size_w']}x{a['crop_size_h']} "
                  f"at ({a['load_start_pos_w']}, {a['load_start_pos_h']})", a["crop"]), ("CSC", a["csc_switch"]),
                  ("padding", a["padding"])) if on]
        out.print(f"AIPP on input '{a['input']}' (static): " + ", ".join(steps))

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

    alloc = _table("Allocation table", "tensor", "allocation", "offset", "size", "dtype", "shape", "first", "last",
                   "alias of", right=("offset", "size", "first", "last"))
    for t in d["allocations"]:
        alloc.add_row(t["tensor"], f"#{t['allocation']} {t['kind']}", str(t["offset"]), str(t["size"]), t["dtype"],
                      str(t["shape"]), str(t["first"]), str(t["last"]), t["alias_of"])
    out.print(alloc)

    tasks = _table("Tasks", "#", "node", "op", "kernel", "args (alloc#id+offset kind)", "workspace",
                   right=("#", "workspace"))
    for t in d["tasks"]:
        op = "+".join([t["op"], *t.get("epilogue", [])])
        ins = ", ".join(f"{a['ref']} {a['kind']}" for a in t["args"] if a["role"] == "in")
        outs = ", ".join(f"{a['ref']} {a['kind']}" for a in t["args"] if a["role"] == "out")
        tasks.add_row(str(t["index"]), t["node"], op, t["kernel"], f"{ins} -> {outs}", str(t["workspace"]))
    out.print(tasks)

    args = _table("Args table (one uint64 per slot in device memory)", "slot", "task", "node", "arg", "allocation",
                  "offset", "refresh", right=("slot", "task", "offset"))
    for a in d["args_table"]:
        args.add_row(str(a["slot"]), str(a["task"]), a["node"], a["arg"], f"#{a['allocation']} {a['kind']}",
                     str(a["offset"]), a["policy"] if a["refreshable"] else "fixed")
    out.print(args)

    weights = _table("Weights", "name", "dtype", "shape", "storage", "file", "offset", "bytes", "sha256",
                     right=("offset", "bytes"))
    for w in d["weights"]:
        weights.add_row(w["name"], w["dtype"], str(w["shape"]), w["storage"], w["file"] or "-", str(w["offset"]),
                        str(w["bytes"]), w["short_sha256"])
    out.print(weights)
    t = d["weight_totals"]
    out.print(f"weights (--external_weight={t['mode']}): inline {t['inline']['count']} ({t['inline']['bytes']} B), "
              f"in files {t['file']['count']} ({t['file']['bytes']} B) in {t['file']['files']} file{'s' * (t['file']['files'] != 1)} "
              f"({t['file']['file_bytes']} B)")


def render_dynamic(d: dict) -> None:
    """A dynamic OM: root (partitions, gears, ranges), then each static submodel."""
    out, dyn = console.out, d["dynamic"]
    out.print(f"[bold]{dyn['name']}[/bold]: dynamic model, mode {dyn['mode']}, {len(d['submodels'])} static "
              f"submodel(s), shared weights {dyn['weight_size']} B")
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
    if dyn["gears"]:
        gears = _table("Gears", "gear", "-1 dims", "input shapes", "memory", right=("memory",))
        for g in dyn["gears"]:
            gears.add_row(str(g["gear"]), ",".join(map(str, g["values"])),
                          "; ".join(f"{k}:{v}" for k, v in g["inputs"].items()), str(g["memory_size"]))
        out.print(gears)
    cap = dyn["planned_capacity"]
    if cap["tensors"]:
        out.print(f"range plan: {len(cap['tensors'])} tensors planned for the largest shapes, "
                  f"{cap['total']} B ({console.nbytes(cap['total'])}) in total")
    for k, sub in enumerate(d["submodels"]):
        out.print(f"[bold]submodel {k}[/bold]")
        render(dict(sub, header={"partitions": []}))
