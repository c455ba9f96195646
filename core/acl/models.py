"""ACL's model and memory calls (aclmdlLoadFromFile, aclmdlExecute, aclrtMalloc ...) on one
process-wide ModelManager. This is the runtime's face: it reads OMs and never imports the compiler.

External weights (docs/external-weights.md):

    model_id = api.load_from_file("out/model.om", weight_dir="elsewhere/weight")
    buf = api.malloc(size, "sim"); api.memcpy_h2d(buf, file_bytes)
    model_id = api.load_from_file("out/model.om", "sim", weight_memory={"model_weight_combined": buf})
"""
from __future__ import annotations

from ..model.collector import collector_paused

with collector_paused():  # (acl/__init__ says why)
    from ..model.dynamic_model import GEARS, DynamicModel
    from ..model.errors import GeError
    from ..runtime.device import DeviceBuffer, get_device
    from ..runtime.external_weight_manager import ExternalWeightConfig
    from ..runtime.model_manager import ModelManager
    from ..model.weight_files import default_weight_dir
    from ...formats.om import read_om


# -- the runtime, ACL style: one process-wide ModelManager -------------------------------------
model_manager = ModelManager()


def load_from_file(path: str, device: str = "cpu", *, weight_dir: str | None = None,
                   weight_memory: dict | None = None, verify_weights: bool = True,
                   impl_cache_size: int | None = None) -> int:
    """aclmdlLoadFromFile(WithConfig). External weight files are read from `weight_dir`
    (ACL_MDL_WEIGHT_PATH_PTR; default `<om dir>/weight/`), except those given in
    `weight_memory` as {file name: DeviceBuffer or (address, size)} already holding the file's
    bytes (aclmdlSetExternalWeightAddress), which ge uses in place and never frees.
    `verify_weights=False` skips the sha256 check (lengths are always checked). Static, gear,
    range and unknown-shape models alike. `impl_cache_size`: how many impls a model with unknown
    shapes or ranges keeps (least recently used out first; 0 keeps none; default 5000)."""
    config = ExternalWeightConfig(weight_dir or default_weight_dir(path), weight_memory or {}, verify_weights)
    with collector_paused():
        return model_manager.load(read_om(path), device, config, from_file=True, impl_cache_size=impl_cache_size)


def load_from_mem(data: bytes, device: str = "cpu", *, weight_dir: str | None = None,
                  weight_memory: dict | None = None, verify_weights: bool = True,
                  impl_cache_size: int | None = None) -> int:
    """aclmdlLoadFromMem: as load_from_file, but an OM in memory has no folder of its own, so a
    model with external weights needs `weight_dir` or `weight_memory`."""
    config = ExternalWeightConfig(weight_dir, weight_memory or {}, verify_weights)
    with collector_paused():
        return model_manager.load(read_om(bytes(data)), device, config, from_file=True, impl_cache_size=impl_cache_size)


def malloc(nbytes: int, device: str = "cpu") -> DeviceBuffer:
    """aclrtMalloc: device memory, e.g. to hand a model its external weights."""
    return get_device(device).buffer(nbytes)


def memcpy_h2d(buffer: DeviceBuffer, data) -> None:
    """aclrtMemcpy host -> device into the start of `buffer`."""
    import numpy as np
    host = np.frombuffer(data, np.uint8) if isinstance(data, (bytes, bytearray, memoryview)) else np.asarray(data)
    if host.nbytes > buffer.nbytes:
        raise GeError(f"memcpy_h2d: {host.nbytes} bytes do not fit a device buffer of {buffer.nbytes}")
    buffer.device.memcpy_h2d(buffer.addr, host)


def free(buffer: DeviceBuffer) -> None:
    """aclrtFree."""
    buffer.device.free(buffer.addr)


def query_size(path: str, gear: int | None = None) -> tuple[int, int]:
    """(work size, weight size) in bytes, as aclmdlQuerySize. A gear model's work size is its
    largest gear's (one context holds one block for all its gears); `gear` asks for one gear's."""
    m = read_om(path)
    if gear is None:
        return m.memory_size, m.weight_size
    gears = m.submodels if isinstance(m, DynamicModel) and m.mode == GEARS else []
    if not 0 <= gear < len(gears):
        raise GeError(f"{path}: gear {gear} does not exist (the model has {len(gears)} gears)")
    return gears[gear].memory_size, m.weight_size


def execute(model_id: int, inputs, outputs=None, timeout: float | None = None):
    return model_manager.execute(model_id, inputs, outputs, timeout)


def unload(model_id: int) -> None:
    model_manager.unload(model_id)


def set_dynamic_batch_size(model_id: int, batch: int) -> int:
    """aclmdlSetDynamicBatchSize: run the gear of this batch size (a gear model); returns its index."""
    return _gear_model(model_id).set_dynamic_batch_size(batch)


def set_dynamic_hw_size(model_id: int, height: int, width: int) -> int:
    """aclmdlSetDynamicHWSize: run the gear of this image size."""
    return _gear_model(model_id).set_dynamic_hw_size(height, width)


def set_input_dynamic_dims(model_id: int, dims) -> int:
    """aclmdlSetInputDynamicDims: run the gear whose -1 dims take these values (in order)."""
    return _gear_model(model_id).set_input_dynamic_dims(dims)


def gear_sizes(model_id: int) -> list[dict]:
    """Per gear: its -1 dim values, input shapes and work memory (aclmdlGetDynamicBatch & co)."""
    m = _gear_model(model_id)
    return [{"values": list(v), "inputs": {k: list(s) for k, s in shapes.items()}, "memory_size": g.memory_size}
            for v, shapes, g in zip(m.gear_values, m.gear_shapes, m.dyn.submodels)]


def _gear_model(model_id: int):
    m = model_manager.model(model_id)
    if m.shape_mode != GEARS:
        raise GeError(f"model {model_id} ('{m.name}') has no gears (compile it with --dynamic_batch_size, "
                      "--dynamic_image_size or --dynamic_dims)")
    return m


def model(model_id: int):
    """The loaded DavinciModel (descs, contexts, timings)."""
    return model_manager.model(model_id)


def soc_info(model_id: int) -> dict:
    """What the simulated NPU reports while it runs this model (aclrtGetSocName and its AI Core
    count): the SoC the model was compiled for (--soc_version)."""
    from ..model.soc import soc_info as describe
    m = model_manager.model(model_id)
    return describe(m.soc_version)


