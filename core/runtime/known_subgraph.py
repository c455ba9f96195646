"""A static model as a known-shape subgraph: the V2 runtime's DavinciModel kernels.

Inside a larger (dynamic) execution, the caller owns every address: it hands the model its
feature-map and workspace memory (UpdateWorkspaces), the device addresses of its inputs and
outputs (UpdateArgs), and asks where weights live (GetRunAddress). The model copies nothing:
only its args table is refreshed, incrementally, before each execution.
"""
from __future__ import annotations

from ..model.errors import GeError
from ..model.ge_model import GeModel
from .context import ExecutionContext
from .davinci_model import DavinciModel
from .device import Device


def davinci_model_create(ge_model: GeModel, device: Device, model_id: int = 0,
                         shared_weight_addr: int | None = None, packs=None, backend=None,
                         shared_files: dict | None = None) -> DavinciModel:
    """DavinciModelCreate: load with known_node set (weights loaded, no feature maps of its own).
    `shared_weight_addr`: the root model already holds the weights there (one copy for all), and
    `shared_files` its external weight files (name -> address); `packs`: its WeightPacks, so that
    weights are packed once for all its plans."""
    return DavinciModel(ge_model, device, model_id, known_node=True, shared_weight_addr=shared_weight_addr,
                        shared_files=shared_files, packs=packs, backend=backend).init()


def davinci_model_update_workspaces(model: DavinciModel, feature_map: int, workspace: int,
                                    ctx: ExecutionContext | None = None) -> None:
    """DavinciModelUpdateWorkspaces: UpdateHbmFmMemBases + UpdateExMemBase. `ctx`: one of the
    model's contexts (create_context(own_memory=False)), so that several callers each run the
    model on their own memory; the default context when not given."""
    (ctx or model.default_context).update_workspaces(feature_map, workspace)


def davinci_model_update_args(model: DavinciModel, inputs: list[int], outputs: list[int],
                              ctx: ExecutionContext | None = None) -> None:
    """DavinciModelUpdateArgs: UpdateKnownNodeArgs with the device addresses of inputs and outputs."""
    (ctx or model.default_context).update_io(inputs, outputs)


def davinci_model_execute(model: DavinciModel, inputs: list[int] | None = None, outputs: list[int] | None = None,
                          timeout: float | None = None, ctx: ExecutionContext | None = None) -> dict:
    """DavinciModelExecute: refresh the addresses that moved, run the sunk tasks, wait. Returns
    what the refresh cost (args bytes, whether it was full, views rebuilt)."""
    ctx = ctx or model.default_context
    if inputs is not None or outputs is not None:
        davinci_model_update_args(model, inputs or [], outputs or [], ctx)
    ctx.launch()
    ctx.stream.synchronize(timeout)
    return {"args_bytes": ctx.args.bytes_written, "full_refresh": ctx.args.full_refresh}


def davinci_model_get_run_address(model: DavinciModel, mem_type: str, offset: int = 0, index: int = 0,
                                  ctx: ExecutionContext | None = None) -> int:
    """DavinciModelGetRunAddress: the current device address of (memory type, offset) in the
    context that runs: `ctx`, else the context the model last executed in (each caller of a
    submodel runs it in a context of its own, on its own feature maps), else its default context.
    E.g. ("WEIGHT", weight offset) for a downstream kernel that reads a weight directly, or
    ("FEATURE_MAP", offset) for a tensor of that run. `index` picks among several allocations of
    one type (one per external weight file)."""
    ctx = ctx or model.running_context or model.default_context
    plan, base = model.ge_plan, ctx.args.base
    matches = [i for i, kind in enumerate(plan.allocation_kinds) if kind == mem_type.upper()]
    if index >= len(matches):
        raise GeError(f"model '{plan.name}' has no {mem_type} memory #{index} (kinds: {sorted(set(plan.allocation_kinds))})")
    alloc = matches[index]
    if not 0 <= offset < max(plan.allocation_sizes[alloc], 1):
        raise GeError(f"offset {offset} is outside {mem_type} memory of {plan.allocation_sizes[alloc]} bytes")
    return int(base[alloc]) + offset
