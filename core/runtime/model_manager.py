"""ModelManager: loads models onto devices and hands out model ids (ACL's aclmdl* calls).

It is the session: its ExternalWeightManager lets models that use the same external weight file
on the same device share one copy of it.

`execute(model_id, ...)` is thread-safe: each caller gets its own outputs, bit-identical to a
single-thread run. A static model runs every caller on an execution context of its own (a
`ContextPool`): the model's default context for the first, and a new context for a caller that
finds every context busy, kept for later callers. The cost is memory, not waiting: one context
(feature maps, workspace, default I/O buffers, args table, stream) per call that ran at the same
time as others, held until unload; the weights and kernels are shared. A dynamic model (gears,
ranges, unknown shapes) keeps per-model state between calls (the selected gear, the impl
cache), so its calls take turns on a lock: correct, not parallel."""
from __future__ import annotations

import itertools
import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)

import numpy as np

from ..model.errors import GeError
from ..model.ge_model import GeModel
from ..model.dynamic_model import GEARS, DynamicModel
from .davinci_model import DavinciModel
from .loaded_model import LoadedModel
from .device import DeviceBuffer, get_device
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager
from .task_check import check_model_tasks


class ModelManager:
    def __init__(self):
        self._models: dict[int, LoadedModel] = {}
        self._ids = itertools.count(1)
        self._lock = _thread.allocate_lock()
        self._runners: dict[int, object] = {}  # model id -> how execute() runs it from several threads
        self.weight_manager = ExternalWeightManager()

    def load(self, ge_model: GeModel, device: str = "cpu", weights: ExternalWeightConfig | None = None,
             from_file: bool = False, impl_cache_size: int | None = None) -> int:
        """Load a GeModel (already read from an OM file or bytes) and return its model id.
        `weights` says where its external weight files come from (folder, user memory). Every
        task's attributes are checked against its op's schema before anything is built (`from_file`:
        as an OM states them, complete). `impl_cache_size`: the impls a model with unknown shapes
        keeps (LRU; default hybrid.DEFAULT_CACHE_SIZE)."""
        check_model_tasks(ge_model, complete=from_file)
        with self._lock:
            model_id = next(self._ids)
        if isinstance(ge_model, DynamicModel):  # a root model with submodels: hybrid, range or gears
            model = load_dynamic(ge_model, get_device(device), model_id, weights, self.weight_manager, impl_cache_size)
        else:
            model = DavinciModel(ge_model, get_device(device), model_id, weights=weights,
                                 weight_manager=self.weight_manager).init()
        model.aipp = tuple(ge_model.attrs.get("aipp", ())) if isinstance(ge_model.attrs, dict) else ()
        with self._lock:
            self._models[model_id] = model
            self._runners[model_id] = ContextPool(model) if model.concurrent else _TakeTurns(model)
        return model_id

    def model(self, model_id: int) -> LoadedModel:
        try:
            return self._models[model_id]
        except KeyError:
            raise GeError(f"no loaded model with id {model_id}") from None

    def execute(self, model_id: int, inputs, outputs=None, timeout: float | None = None):
        runner = self._runners.get(model_id)
        if runner is None:  # unknown, or unloaded meanwhile
            raise GeError(f"no loaded model with id {model_id}")
        if isinstance(inputs, (np.ndarray, DeviceBuffer)):  # one array is the only input, not a list of rows
            inputs = [inputs]
        return runner.execute(inputs, outputs, timeout)

    def unload(self, model_id: int) -> None:
        with self._lock:
            model = self._models.pop(model_id, None)
            self._runners.pop(model_id, None)
        if model is None:
            raise GeError(f"no loaded model with id {model_id}")
        model.unload()

    @property
    def model_ids(self) -> list[int]:
        return sorted(self._models)


def load_dynamic(dyn: DynamicModel, device, model_id: int = 0, weights: ExternalWeightConfig | None = None,
                 weight_manager: ExternalWeightManager | None = None, impl_cache_size: int | None = None):
    from .gears import GearModel
    from .hybrid import DEFAULT_CACHE_SIZE, HybridModel
    if dyn.mode == GEARS:
        return GearModel(dyn, device, model_id, weights, weight_manager)
    return HybridModel(dyn, device, model_id, weights=weights, weight_manager=weight_manager,
                       cache_size=DEFAULT_CACHE_SIZE if impl_cache_size is None else impl_cache_size)


class ContextPool:
    """A static model's execution contexts for concurrent callers: a caller borrows an idle one
    (the default context first) or creates one when all are busy; it is returned after the call."""

    def __init__(self, model: LoadedModel):
        self.model = model
        self._idle = [model.default_context]
        self._lock = _thread.allocate_lock()

    def execute(self, inputs, outputs=None, timeout: float | None = None):
        # an idle context without taking the lock: list.pop and list.append are atomic, and pop raises
        # rather than hand one context out twice (the lock is for making one)
        try:
            ctx = self._idle.pop()
        except IndexError:
            with self._lock:
                ctx = self.model.create_context()
        try:
            return ctx.execute(inputs, outputs, timeout)
        finally:
            self._idle.append(ctx)


class _TakeTurns:
    """A model whose calls share state (gear selection, impl caches): one call at a time."""

    def __init__(self, model):
        self.model = model
        self._lock = _thread.allocate_lock()

    def execute(self, inputs, outputs=None, timeout: float | None = None):
        with self._lock:
            return self.model.nn_execute(inputs, outputs, timeout)
