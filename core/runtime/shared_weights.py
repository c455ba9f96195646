"""The part gears and the hybrid executor share: a DynamicModel whose weights are on the device
once, read by every static plan it holds (GE's root model with per-submodel partitions)."""
from __future__ import annotations

import numpy as np

from ..dynamic_model import DynamicModel
from ..kernels.packs import WeightPacks


class SharedWeightsModel:
    def __init__(self, dyn: DynamicModel, device, model_id: int = 0):
        self.dyn, self.device, self.model_id, self.name = dyn, device, model_id, dyn.name
        self.inputs, self.outputs = list(dyn.inputs), list(dyn.outputs)
        self.external_weights: list = []
        self.weight_addr = device.malloc(max(len(dyn.weight_data), 1))
        if len(dyn.weight_data):
            device.memcpy_h2d(self.weight_addr, np.frombuffer(dyn.weight_data, np.uint8))
        # the weights packed for a kernel's plan, shared by every plan that reads them (gears,
        # static submodels, the hybrid executor's impls): packed once, not once per plan
        self.packs = WeightPacks()

    def free_weights(self) -> None:
        self.packs.clear()
        if self.weight_addr:
            self.device.free(self.weight_addr)
            self.weight_addr = 0

    @property
    def weight_bytes(self) -> int:
        return len(self.dyn.weight_data)
