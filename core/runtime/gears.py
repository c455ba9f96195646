"""Gears (ATC's --dynamic_batch_size / --dynamic_image_size / --dynamic_dims): one static plan per
gear, every gear reading one shared copy of the weights. A run picks the gear whose input shapes
match, or the one set beforehand (aclmdlSetDynamicBatchSize / SetDynamicHWSize / SetInputDynamicDims)."""
from __future__ import annotations

import numpy as np

from ..model.dynamic_model import GEARS, DynamicModel
from ..model.errors import GeError, ShapeError
from .davinci_model import DavinciModel
from .device import DeviceBuffer
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager
from .shared_weights import SharedWeightsModel


class GearModel(SharedWeightsModel):
    shape_mode = GEARS

    def __init__(self, dyn: DynamicModel, device, model_id: int = 0, weights: ExternalWeightConfig | None = None,
                 weight_manager: ExternalWeightManager | None = None):
        super().__init__(dyn, device, model_id, weights, weight_manager)
        self.gear_shapes = [{k: tuple(v) for k, v in g.items()} for g in dyn.attrs["gears"]]
        self.gear_values = [tuple(v) for v in dyn.attrs["gear_values"]]
        self.kind = dyn.attrs.get("gear_kind", "dynamic_dims")
        # a gear is initialised (kernels loaded) when it first runs: a 100-gear OM loads as fast as
        # its first gear, the one initialised here; its contexts take their feature maps from the
        # gear model's contexts, each one block for every gear (GE's one FM block)
        self.gears: list[DavinciModel | None] = [None] * len(dyn.submodels)
        self.contexts: list[_GearContext] = []
        self.selected: int | None = None
        self.last_gear: int | None = None
        try:
            self.default_context = self.create_context()
            self.timings = dict(self.gear(0).timings) if self.gears else {}
        except BaseException:
            self.unload()
            raise

    def work_size(self, executor: str = "linear") -> int:
        """Feature-map and workspace bytes of one context: the largest gear's, since one block serves
        every gear (gears never run at once in a context). ACL's work size."""
        return max((_work_size(m, executor) for m in self.dyn.submodels), default=0)

    def gear(self, k: int) -> DavinciModel:
        """Gear k's static model, initialised on first use; its default context works in the gear
        model's default block."""
        g = self.gears[k]
        if g is None:
            g = self.gears[k] = DavinciModel(self.dyn.submodels[k], self.device, self.model_id,
                                             shared_weight_addr=self.weight_addr, shared_files=self.file_bases,
                                             packs=self.packs, work_block=self.default_context.block).init()
        return g

    # -- ACL roles -------------------------------------------------------------------------------
    def set_dynamic_batch_size(self, batch: int) -> int:
        return self._select((int(batch),) * len(self.gear_values[0]), f"batch size {batch}")

    def set_dynamic_hw_size(self, h: int, w: int) -> int:
        return self._select((int(h), int(w)), f"image size {h},{w}")

    def set_input_dynamic_dims(self, dims) -> int:
        return self._select(tuple(int(d) for d in dims), f"dims {list(dims)}")

    def _select(self, values: tuple, what: str) -> int:
        if values not in self.gear_values:
            raise ShapeError(f"model '{self.name}' has no gear for {what}; its gears ({self.kind}): {self.gear_list()}")
        self.selected = self.gear_values.index(values)
        return self.selected

    def gear_list(self) -> str:
        return "; ".join(",".join(map(str, v)) for v in self.gear_values)

    def gear_for(self, inputs) -> int:
        """The gear matching the input shapes (the selected one wins when set)."""
        if self.selected is not None:
            return self.selected
        if isinstance(inputs, dict):
            shapes = {k: tuple(np.shape(v)) for k, v in inputs.items()}
        else:
            shapes = {d.name: tuple(np.shape(x)) for d, x in zip(self.inputs, inputs)
                      if not isinstance(x, DeviceBuffer)}
        for k, g in enumerate(self.gear_shapes):
            if all(shapes.get(name, shape) == shape for name, shape in g.items()):
                return k
        got = ", ".join(f"{k}:{list(v)}" for k, v in shapes.items())
        raise ShapeError(f"model '{self.name}': no gear matches the input shapes {got}; its gears ({self.kind}): "
                         f"{self.gear_list()}")

    def static_model(self, inputs=None) -> DavinciModel:
        return self.gear(self.gear_for(inputs) if inputs is not None else (self.selected or 0))

    # -- execution ------------------------------------------------------------------------------
    def nn_execute(self, inputs, outputs=None, timeout: float | None = None):
        result = self.default_context.execute(inputs, outputs, timeout)
        self.last_gear = self.default_context.stats["gear"]
        return result

    def create_context(self, executor: str = "linear") -> "_GearContext":
        ctx = _GearContext(self, executor, default=not self.contexts)
        self.contexts.append(ctx)
        return ctx

    def destroy_context(self, ctx: "_GearContext") -> None:
        ctx.destroy()
        self.contexts.remove(ctx)

    def unload(self) -> None:
        for ctx in self.contexts:
            ctx.destroy()
        self.contexts = []
        for g in self.gears:
            if g is not None:
                g.unload()
        self.gears = []
        self.free_weights()


def _work_size(m, executor: str) -> int:
    if executor != "linear" and m.dataflow is not None:  # the dataflow plan: workspaces among feature maps
        return m.dataflow.fm_size
    return m.memory_size


class _GearContext:
    """A gear model's execution context: one block of feature-map and workspace memory, the largest
    gear's, and in it a context of each gear that runs (made on first use; own I/O buffers, args
    table and stream). Each execution goes to the gear matching its inputs. The default context of
    the model is made of the gears' default contexts."""

    def __init__(self, model: GearModel, executor: str = "linear", default: bool = False):
        self.model, self.executor, self.stats = model, executor, {}
        self.block = model.device.malloc(max(model.work_size(executor), 1))
        self._gears_default = default and executor == "linear"
        self._contexts: dict[int, object] = {}

    def context(self, k: int):
        ctx = self._contexts.get(k)
        if ctx is None:
            g = self.model.gear(k)
            ctx = self._contexts[k] = (g.default_context if self._gears_default else
                                       g.create_context(executor=self.executor, work_block=self.block))
        return ctx

    def execute(self, inputs, outputs=None, timeout: float | None = None):
        if self.model is None:
            raise GeError("execution context destroyed (its model unloaded)")
        k = self.model.gear_for(inputs)
        ctx = self.context(k)
        result = ctx.execute(inputs, outputs, timeout)
        self.stats = dict(ctx.stats, gear=k)
        return result

    @property
    def device_bytes(self) -> int:
        """Device memory of this context: its one block, and each gear context's I/O and args table."""
        return self.model.work_size(self.executor) + sum(c.device_bytes for c in self._contexts.values())

    def destroy(self) -> None:
        for k, ctx in self._contexts.items():
            g = self.model.gears[k] if k < len(self.model.gears) else None
            if g is not None and ctx is not g.default_context and ctx in g.contexts:
                g.destroy_context(ctx)
        self._contexts = {}
        if self.block:
            self.model.device.free(self.block)
            self.block = 0
        self.model = None  # (it points back at its model, which holds it: no cycle once destroyed)
