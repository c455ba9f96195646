"""The part gears and the hybrid executor share: a DynamicModel whose weights are on the device
once, read by every static plan it holds (GE's root model with per-submodel partitions). With
external weights (--external_weight 1|2) the root places each weight file once (from the weight
folder, the session's copy, or the user's memory) and every gear and submodel reads that copy."""
from __future__ import annotations

import numpy as np

from ..model.dynamic_model import DynamicModel
from ..kernels.packs import WeightPacks
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager, PlacedFiles, place_weight_files
from .loaded_model import LoadedModel
from .weight_loader import WeightCheck


class SharedWeightsModel(LoadedModel):
    def __init__(self, dyn: DynamicModel, device, model_id: int = 0, weights: ExternalWeightConfig | None = None,
                 weight_manager: ExternalWeightManager | None = None):
        self.dyn, self.device, self.model_id, self.name = dyn, device, model_id, dyn.name
        self.inputs, self.outputs = list(dyn.inputs), list(dyn.outputs)
        self.weight_manager = weight_manager or ExternalWeightManager()
        self.placed = PlacedFiles()
        self.weight_addr = device.malloc(max(len(dyn.weight_data), 1))
        if len(dyn.weight_data):
            device.memcpy_h2d(self.weight_addr, np.frombuffer(dyn.weight_data, np.uint8))
        try:
            self.placed = place_weight_files(dyn.name, device, _file_checks(dyn), weights or ExternalWeightConfig(),
                                             self.weight_manager)
        except BaseException:
            self.free_weights()
            raise
        self.external_weights = [{"file": name, "nbytes": nbytes, "addr": self.placed.bases[name],
                                  "source": self.placed.sources[name]} for name, nbytes in dyn.weight_files.items()]
        # the weights packed for a kernel's plan, shared by every plan that reads them (gears,
        # static submodels, the hybrid executor's impls): packed once, not once per plan
        self.packs = WeightPacks()

    @property
    def soc_version(self) -> str:
        return self.dyn.soc_version

    @property
    def file_bases(self) -> dict:
        """External weight file name -> its device address, for the submodels' FILE_CONSTANT allocations."""
        return self.placed.bases

    def weight_base(self, w) -> int:
        """Device address that a root weight desc's offset is relative to."""
        return self.placed.bases[w.file] if w.file else self.weight_addr

    def free_weights(self) -> None:
        if getattr(self, "packs", None) is not None:
            self.packs.clear()
        self.placed.release(self.weight_manager)
        if self.weight_addr:
            self.device.free(self.weight_addr)
            self.weight_addr = 0

    @property
    def weight_bytes(self) -> int:
        return len(self.dyn.weight_data) + sum(self.dyn.weight_files.values())


def _file_checks(dyn: DynamicModel) -> list[tuple[str, int, list[WeightCheck]]]:
    """(file, bytes, the weights in it) per external weight file, over the root, its subgraphs and
    every submodel (each distinct range once)."""
    checks: dict[str, dict] = {name: {} for name in dyn.weight_files}
    descs = [*dyn.weights, *(w for sg in dyn.subgraphs for w in sg.weights), *(w for m in dyn.submodels for w in m.weights)]
    for w in descs:
        if w.file:
            checks[w.file].setdefault((w.offset, w.nbytes, w.sha256), WeightCheck(w.name, w.offset, w.nbytes, w.sha256))
    return [(name, nbytes, list(checks[name].values())) for name, nbytes in dyn.weight_files.items()]
