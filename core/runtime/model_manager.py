"""ModelManager: loads models onto devices and hands out model ids (ACL's aclmdl* calls).

It is the session: its ExternalWeightManager lets models that use the same external weight file
on the same device share one copy of it."""
from __future__ import annotations

import itertools
import threading

import numpy as np

from ..errors import GeError
from ..ge_model import GeModel
from ..dynamic_model import GEARS, DynamicModel
from .davinci_model import DavinciModel
from .device import DeviceBuffer, get_device
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager


class ModelManager:
    def __init__(self):
        self._models: dict[int, DavinciModel] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self.weight_manager = ExternalWeightManager()

    def load(self, ge_model: GeModel, device: str = "cpu", weights: ExternalWeightConfig | None = None) -> int:
        """Load a GeModel (already read from an OM file or bytes) and return its model id.
        `weights` says where its external weight files come from (folder, user memory)."""
        with self._lock:
            model_id = next(self._ids)
        if isinstance(ge_model, DynamicModel):  # a root model with submodels: hybrid, range or gears
            model = load_dynamic(ge_model, get_device(device), model_id)
        else:
            model = DavinciModel(ge_model, get_device(device), model_id, weights=weights,
                                 weight_manager=self.weight_manager).init()
        with self._lock:
            self._models[model_id] = model
        return model_id

    def model(self, model_id: int) -> DavinciModel:
        try:
            return self._models[model_id]
        except KeyError:
            raise GeError(f"no loaded model with id {model_id}") from None

    def execute(self, model_id: int, inputs, outputs=None, timeout: float | None = None):
        if isinstance(inputs, (np.ndarray, DeviceBuffer)):  # one array is the only input, not a list of rows
            inputs = [inputs]
        return self.model(model_id).nn_execute(inputs, outputs, timeout)

    def unload(self, model_id: int) -> None:
        with self._lock:
            model = self._models.pop(model_id, None)
        if model is None:
            raise GeError(f"no loaded model with id {model_id}")
        model.unload()

    @property
    def model_ids(self) -> list[int]:
        return sorted(self._models)


def load_dynamic(dyn: DynamicModel, device, model_id: int = 0):
    from .gears import GearModel
    from .hybrid import HybridModel
    return GearModel(dyn, device, model_id) if dyn.mode == GEARS else HybridModel(dyn, device, model_id)
