"""LoadedModel: what every kind of loaded model is to the model manager and to the drivers (ge run,
the API, pyACL, ais_bench, profiling), so that none of them asks which class it holds.

    DavinciModel   static: one plan; each concurrent caller on an execution context of its own
    GearModel      gears: one static plan per gear, chosen per run (set_dynamic_* or the input shapes)
    HybridModel    range or hybrid: shapes known at run time (capacities planned, or reallocated)

Each keeps its immutable part (weights, kernels, plans) apart from its per-run state (contexts)."""
from __future__ import annotations

STATIC = "static"  # the other shape modes are dynamic_model's GEARS, RANGE and HYBRID


class LoadedModel:
    """A model loaded on a device. Besides what is below, each has: model_id, name, device, inputs
    and outputs (TensorDescs; -1 where a dim is decided at run time), soc_version (the SoC it was
    compiled for), default_context, timings."""

    #: how its shapes are decided: STATIC, or dynamic_model.GEARS, RANGE or HYBRID
    shape_mode: str = STATIC
    #: nn_execute may run from several threads at once, each on a context of its own (else calls
    #: share per-model state, the selected gear or the impl cache, and take turns)
    concurrent: bool = False
    #: the OM's AIPP records (`ge inspect`'s "aipp"), one per preprocessed input; set at load
    aipp: tuple = ()

    def create_context(self, executor: str = "linear"):
        """A new per-run state (feature maps, workspace, args, stream): contexts run at the same time."""
        raise NotImplementedError

    def destroy_context(self, ctx) -> None:
        raise NotImplementedError

    def nn_execute(self, inputs, outputs=None, timeout: float | None = None):
        """Run once on the default context: inputs and outputs as numpy arrays or DeviceBuffers."""
        raise NotImplementedError

    def unload(self) -> None:
        """Free the model's device memory and contexts at once."""
        raise NotImplementedError

    @property
    def weight_bytes(self) -> int:
        raise NotImplementedError

    def static_model(self, inputs=None):
        """The static model (a DavinciModel) that runs these inputs — the model itself, or a gear
        model's gear for them (the one selected, else the first when no inputs are given) — or None
        when its shapes are only known as it runs."""
        return None
