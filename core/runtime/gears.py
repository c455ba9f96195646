"""Gears (ATC's --dynamic_batch_size / --dynamic_image_size / --dynamic_dims): one static plan per
gear, every gear reading one shared copy of the weights. A run picks the gear whose input shapes
match, or the one set beforehand (aclmdlSetDynamicBatchSize / SetDynamicHWSize / SetInputDynamicDims)."""
from __future__ import annotations

import numpy as np

from ..dynamic_model import DynamicModel
from ..errors import ShapeError
from .davinci_model import DavinciModel
from .device import DeviceBuffer
from .shared_weights import SharedWeightsModel

MAX_GEARS = 100


class GearModel(SharedWeightsModel):
    def __init__(self, dyn: DynamicModel, device, model_id: int = 0):
        super().__init__(dyn, device, model_id)
        self.gear_shapes = [{k: tuple(v) for k, v in g.items()} for g in dyn.attrs["gears"]]
        self.gear_values = [tuple(v) for v in dyn.attrs["gear_values"]]
        self.kind = dyn.attrs.get("gear_kind", "dynamic_dims")
        # a gear is initialised (kernels loaded, its context's memory allocated) when it first runs:
        # a 100-gear OM loads as fast as its first gear, the one initialised here
        self.gears: list[DavinciModel | None] = [None] * len(dyn.submodels)
        try:
            self.timings = dict(self.gear(0).timings) if self.gears else {}
        except BaseException:
            self.unload()
            raise
        self.selected: int | None = None
        self.last_gear: int | None = None

    def gear(self, k: int) -> DavinciModel:
        """Gear k's static model, initialised on first use."""
        g = self.gears[k]
        if g is None:
            g = self.gears[k] = DavinciModel(self.dyn.submodels[k], self.device, self.model_id,
                                             shared_weight_addr=self.weight_addr, packs=self.packs).init()
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

    # -- execution ------------------------------------------------------------------------------
    def nn_execute(self, inputs, outputs=None, timeout: float | None = None):
        k = self.gear_for(inputs)
        self.last_gear = k
        return self.gear(k).nn_execute(inputs, outputs, timeout)

    @property
    def default_context(self):
        return _GearContext(self)

    def create_context(self, executor: str = "linear"):
        return _GearContext(self, executor)

    def unload(self) -> None:
        for g in self.gears:
            if g is not None:
                g.unload()
        self.gears = []
        self.free_weights()


class _GearContext:
    """ExecutionContext-like face for `ge run`: each execution goes to the matching gear."""

    def __init__(self, model: GearModel, executor: str = "linear"):
        self.model, self.executor, self.stats = model, executor, {}
        self._contexts: dict[int, object] = {}

    def execute(self, inputs, outputs=None, timeout: float | None = None):
        k = self.model.gear_for(inputs)
        ctx = self._contexts.get(k)
        if ctx is None:
            g = self.model.gear(k)
            ctx = self._contexts[k] = g.default_context if self.executor == "linear" else g.create_context(executor=self.executor)
        result = ctx.execute(inputs, outputs, timeout)
        self.stats = dict(ctx.stats, gear=k)
        return result
