"""Range mode (`--input_shape "x:1~8,..."`): the memory a HybridModel needs inside its range,
planned at compile time so that a context allocates one arena and a run inside the range
allocates nothing."""
from __future__ import annotations

import numpy as np

from ..dynamic_model import DynamicModel
from ..runtime.hybrid import HybridModel
from .arena import Buffer, plan_arena


def plan_range(dyn: DynamicModel, max_inputs: list[np.ndarray], device) -> dict:
    """Range mode: the bytes every tensor needs at the largest input shapes and when it is alive,
    found by running the model once on them (zeros) at compile time; then one arena for them all and
    the submodels' FM and workspace (alive at their step), reusing memory between lifetimes.
    Returns the attrs {"capacities": {tensor: bytes}, "arena": {"size", "offsets", "lower_bound"}}."""
    model = HybridModel(dyn, device)
    try:
        ctx = model.default_context
        ctx.growable, ctx.trace = True, {}  # this run is what finds the capacities and lifetimes
        model.nn_execute(max_inputs)
        capacities = {name: int(s.capacity) for name, s in ctx.slots.items()}
        buffers = [Buffer(name, capacities[name], first, last) for name, (first, last) in ctx.trace.items()]
        for pos, step in enumerate(dyn.steps, 1):
            if step.kind == "submodel":
                sm, k = model.submodels[step.index], step.index
                buffers += [Buffer(f"submodel{k}:fm", sm.fm_size, pos, pos),
                            Buffer(f"submodel{k}:workspace", sm.workspace_size, pos, pos)]
    finally:
        model.unload()
    plan = plan_arena(buffers)
    return {"capacities": capacities,
            "arena": {"size": plan.size, "lower_bound": plan.lower_bound, "offsets": dict(plan.offsets)}}
