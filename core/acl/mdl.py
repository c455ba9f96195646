"""acl.mdl: models loaded through ge's one ModelManager (ge.core.api.model_manager) on the current
context's device, their descriptions, and execution of datasets.

execute binds each data buffer as a ge DeviceBuffer (zero copy where ge allows it; on `cpu` a host
range from acl.util binds in place too) after checking it against the description: an input whose
size differs from the model's, an output too small, a dataset with too few buffers, memory ge does
not know or of another device: an error code. A gear model runs the gear its
`ascend_mbatch_shape_data` buffer says (what set_dynamic_batch_size / set_dynamic_hw_size /
set_input_dynamic_dims wrote there), on buffers sized for its largest gear."""
from __future__ import annotations

import math
import os
import threading

import numpy as np

from .models import default_weight_dir, model_manager, query_size as _query_size, read_om
from ..model.errors import GeError
from ..runtime.device import DeviceBuffer, SimDevice
from ..runtime.external_weight_manager import ExternalWeightConfig
from ..model.collector import collector_paused
from . import handles, memory
from .codes import (ACL_DT_UNDEFINED, ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID,
                    ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID, ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID,
                    ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, ACL_ERROR_GE_LOAD_MODEL, ACL_ERROR_INVALID_PARAM,
                    ACL_ERROR_MODEL_NOT_DYNAMIC, ACL_ERROR_RT_MODEL_EXECUTE, ACL_FORMAT_UNDEFINED, DATA_TYPES, FORMATS,
                    acl_call, as_int, fail)
from .datasets import Dataset, buffer_of
from .descs import BATCH, HW, MBATCH_DTYPE, MBATCH_INPUT, ModelDescs, describe, recorded_formats
from .runtime import current_context, stream_of
from .tensor_descs import input_shape, record_output


class AclModel:
    """A model loaded through acl: its ge model id, device, descriptions, and the output dims of its last run.
    Runs of a static model from several threads go at once (ge gives each a context of its own); a gear
    or run-time-shape model's runs take turns (a gear is selected and run as one step). Unload waits for
    the runs under way, and a run after it is refused."""

    def __init__(self, model_id: int, device, descs: ModelDescs):
        self.model_id, self.device, self.descs = model_id, device, descs
        self.lock = threading.Lock()
        self.last_output_dims: tuple | None = None
        self._state = threading.Condition()
        self._runs = 0
        self.unloaded = False

    def run(self, work) -> None:
        with self._state:
            if self.unloaded:
                fail(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"model {self.model_id} was unloaded")
            self._runs += 1
        try:
            if self.descs.gear_kind or self.descs.dynamic:
                with self.lock:
                    work()
            else:
                work()
        finally:
            with self._state:
                self._runs -= 1
                self._state.notify_all()

    def close(self) -> None:
        """No run after this one; returns once the runs under way have ended."""
        with self._state:
            self.unloaded = True
            self._state.wait_for(lambda: self._runs == 0)


class ModelDesc:
    def __init__(self):
        self.model: AclModel | None = None

    @property
    def descs(self) -> ModelDescs:
        if self.model is None:
            fail(ACL_ERROR_INVALID_PARAM, "the model desc is empty: call acl.mdl.get_desc first")
        return self.model.descs


_models: dict[int, AclModel] = {}
_lock = threading.Lock()


def _model(model_id) -> AclModel:
    m = _models.get(as_int(model_id, "model_id"))
    if m is None:
        fail(ACL_ERROR_GE_EXEC_MODEL_ID_INVALID, f"no model loaded with id {model_id} (unloaded, or never loaded)")
    return m


def _load(om, weight_dir: str | None) -> int:
    device = current_context().device
    try:
        model_id = model_manager.load(om, f"{device.name}:{device.device_id}", ExternalWeightConfig(weight_dir),
                                      from_file=True)
    except GeError as e:
        fail(ACL_ERROR_GE_LOAD_MODEL, str(e))
    record = AclModel(model_id, device, describe(model_manager.model(model_id), recorded_formats(om)))
    with _lock:
        _models[model_id] = record
    return model_id


# -- load and unload ---------------------------------------------------------------------------
@acl_call("pair", 0)
def load_from_file(model_path):
    if not isinstance(model_path, str) or not os.path.isfile(model_path):
        fail(ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"{model_path!r}: no such model file")
    current_context()
    with collector_paused():
        return _load(read_om(model_path), default_weight_dir(model_path))


@acl_call("pair", 0)
def load_from_mem(model, model_size):
    data = memory.view(model, model_size).tobytes()
    current_context()
    with collector_paused():
        return _load(read_om(data), None)


@acl_call("ret")
def unload(model_id):
    m = _model(model_id)
    with _lock:
        _models.pop(m.model_id, None)
    m.close()
    model_manager.unload(m.model_id)


def query_size(model_path):
    """acl.mdl.query_size(path) -> (work size, weight size, ret)."""
    sizes, ret = _query(model_path)
    return (*sizes, ret) if ret == 0 else (0, 0, ret)


@acl_call("pair", (0, 0))
def _query(model_path):
    if not isinstance(model_path, str) or not os.path.isfile(model_path):
        fail(ACL_ERROR_GE_EXEC_MODEL_PATH_INVALID, f"{model_path!r}: no such model file")
    return _query_size(model_path)


# -- descriptions ------------------------------------------------------------------------------
@acl_call("bare", 0)
def create_desc():
    return handles.new(ModelDesc())


@acl_call("ret")
def get_desc(model_desc, model_id):
    handles.get(model_desc, ModelDesc).model = _model(model_id)


@acl_call("ret")
def destroy_desc(model_desc):
    handles.drop(model_desc, ModelDesc)


def _io(model_desc, index, role: str):
    descs = handles.get(model_desc, ModelDesc).descs
    items = descs.inputs if role == "input" else descs.outputs
    index = as_int(index, "index")
    if not 0 <= index < len(items):
        fail(ACL_ERROR_INVALID_PARAM, f"the model has {len(items)} {role}s, no {role} {index}")
    return items[index]


def _dims(name: str, dims) -> dict:
    return {"name": name, "dimCount": len(dims), "dims": list(dims)}


_NO_DIMS = {"name": "", "dimCount": 0, "dims": []}


@acl_call("bare", 0)
def get_num_inputs(model_desc):
    return len(handles.get(model_desc, ModelDesc).descs.inputs)


@acl_call("bare", 0)
def get_num_outputs(model_desc):
    return len(handles.get(model_desc, ModelDesc).descs.outputs)


@acl_call("bare", 0)
def get_input_size_by_index(model_desc, index):
    return _io(model_desc, index, "input").nbytes


@acl_call("bare", 0)
def get_output_size_by_index(model_desc, index):
    return _io(model_desc, index, "output").nbytes


@acl_call("pair", _NO_DIMS)
def get_input_dims(model_desc, index):
    d = _io(model_desc, index, "input")
    return _dims(d.name, d.dims)


@acl_call("pair", _NO_DIMS)
def get_output_dims(model_desc, index):
    d = _io(model_desc, index, "output")
    return _dims(d.name, d.dims)


@acl_call("pair", _NO_DIMS)
def get_cur_output_dims(model_desc, index):
    """The dims of the last run's output (the gear that ran; before any run: the description's)."""
    d = _io(model_desc, index, "output")
    last = handles.get(model_desc, ModelDesc).model.last_output_dims
    return _dims(d.name, d.dims if last is None else last[int(index)])


@acl_call("bare", ACL_DT_UNDEFINED)
def get_input_data_type(model_desc, index):
    return DATA_TYPES.get(_io(model_desc, index, "input").dtype, ACL_DT_UNDEFINED)


@acl_call("bare", ACL_DT_UNDEFINED)
def get_output_data_type(model_desc, index):
    return DATA_TYPES.get(_io(model_desc, index, "output").dtype, ACL_DT_UNDEFINED)


@acl_call("bare", ACL_FORMAT_UNDEFINED)
def get_input_format(model_desc, index):
    return FORMATS.get(_io(model_desc, index, "input").format, ACL_FORMAT_UNDEFINED)


@acl_call("bare", ACL_FORMAT_UNDEFINED)
def get_output_format(model_desc, index):
    return FORMATS.get(_io(model_desc, index, "output").format, ACL_FORMAT_UNDEFINED)


@acl_call("bare", "")
def get_input_name_by_index(model_desc, index):
    return _io(model_desc, index, "input").name


@acl_call("bare", "")
def get_output_name_by_index(model_desc, index):
    return _io(model_desc, index, "output").name


def _index_by_name(model_desc, name, role: str) -> int:
    descs = handles.get(model_desc, ModelDesc).descs
    items = descs.inputs if role == "input" else descs.outputs
    for i, d in enumerate(items):
        if d.name == name:
            return i
    fail(ACL_ERROR_INVALID_PARAM, f"the model has no {role} named {name!r}")


@acl_call("pair", 0)
def get_input_index_by_name(model_desc, name):
    return _index_by_name(model_desc, name, "input")


@acl_call("pair", 0)
def get_output_index_by_name(model_desc, name):
    return _index_by_name(model_desc, name, "output")


# -- gears -------------------------------------------------------------------------------------
@acl_call("pair", {"batchCount": 0, "batch": []})
def get_dynamic_batch(model_desc):
    descs = handles.get(model_desc, ModelDesc).descs
    batches = [v[0] for v in descs.gear_values] if descs.gear_kind == BATCH else []
    return {"batchCount": len(batches), "batch": batches}


@acl_call("pair", {"hwCount": 0, "hw": []})
def get_dynamic_hw(model_desc, index):
    descs = handles.get(model_desc, ModelDesc).descs
    hws = [list(v) for v in descs.gear_values] if descs.gear_kind == HW else []
    return {"hwCount": len(hws), "hw": hws}


@acl_call("pair", 0)
def get_input_dynamic_gear_count(model_desc, index):
    return len(handles.get(model_desc, ModelDesc).descs.gear_values)


@acl_call("pair", [])
def get_input_dynamic_dims(model_desc, index, gear_count):
    """Per gear, every real input's dims of that gear, flattened (aclmdlIODims)."""
    descs = handles.get(model_desc, ModelDesc).descs
    if as_int(gear_count, "gear_count") != len(descs.gear_values):
        fail(ACL_ERROR_INVALID_PARAM, f"gear_count {gear_count}: the model has {len(descs.gear_values)} gears")
    return [_dims("", [d for shape in gear for d in shape]) for gear in descs.gear_inputs]


def _set_gear(model_id, dataset, index, values: tuple, what: str) -> None:
    """Record the gear in the dataset's `ascend_mbatch_shape_data` buffer, as ACL does."""
    m = _model(model_id)
    descs = m.descs
    if not descs.gear_kind:
        fail(ACL_ERROR_MODEL_NOT_DYNAMIC, f"model {model_id} has no gears (it was not compiled with "
                                          "--dynamic_batch_size, --dynamic_image_size or --dynamic_dims)")
    index = as_int(index, "index")
    if index != descs.num_real_inputs:
        fail(ACL_ERROR_INVALID_PARAM, f"index {index} is not the model's {MBATCH_INPUT} input "
                                      f"({descs.num_real_inputs})")
    if values not in descs.gear_values:
        gears = "; ".join(",".join(map(str, v)) for v in descs.gear_values)
        fail(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID, f"the model has no gear for {what} (its gears: {gears})")
    buf = buffer_of(handles.get(dataset, Dataset), index, "input")
    data = np.asarray(values, MBATCH_DTYPE).view(np.uint8)
    if buf.size < data.nbytes:
        fail(ACL_ERROR_GE_DYNAMIC_INPUT_LENGTH_INVALID, f"the {MBATCH_INPUT} buffer holds {buf.size} bytes, "
                                                        f"the gear needs {data.nbytes}")
    target = memory.view(buf.addr, data.nbytes)
    target[...] = data


@acl_call("ret")
def set_dynamic_batch_size(model_id, dataset, index, batch):
    batch = as_int(batch, "batch_size")
    count = len(_model(model_id).descs.gear_values[0]) if _model(model_id).descs.gear_values else 1
    _set_gear(model_id, dataset, index, (batch,) * count, f"batch size {batch}")


@acl_call("ret")
def set_dynamic_hw_size(model_id, dataset, index, height, width):
    hw = (as_int(height, "height"), as_int(width, "width"))
    _set_gear(model_id, dataset, index, hw, f"image size {hw[0]}x{hw[1]}")


@acl_call("ret")
def set_input_dynamic_dims(model_id, dataset, index, dims):
    """`dims`: {'dimCount': n, 'name': '', 'dims': [every real input's dims, flattened]}."""
    m = _model(model_id)
    try:
        flat = [int(d) for d in dims["dims"]]
    except (TypeError, KeyError, ValueError):
        fail(ACL_ERROR_INVALID_PARAM, "dims must be {'dimCount': n, 'name': '', 'dims': [...]}")
    merged = [d for io in m.descs.inputs[:m.descs.num_real_inputs] for d in io.dims]
    if len(flat) != len(merged) or any(d != f for d, f in zip(merged, flat) if d != -1):
        fail(ACL_ERROR_INVALID_PARAM, f"dims {flat} do not fit the model's inputs {merged}")
    values = tuple(f for d, f in zip(merged, flat) if d == -1)
    _set_gear(model_id, dataset, index, values, f"dims {flat}")


# -- execution ---------------------------------------------------------------------------------
def _bind(buf, io, shape, device, role: str, i: int, typed: bool = False):
    """A data buffer as ge takes it: a DeviceBuffer, or (cpu) a typed view of host memory; `typed`:
    a typed view in any case (a model with run-time shapes reads the shape off its inputs)."""
    need = math.prod(shape) * np.dtype(io.dtype).itemsize  # the gear's bytes (a static model's: io.nbytes)
    if role == "input" and not typed and buf.size not in (need, io.nbytes):
        sizes = f"{io.nbytes} bytes" if need == io.nbytes else f"{need} bytes (this gear) or {io.nbytes} (the largest)"
        fail(ACL_ERROR_INVALID_PARAM, f"input {i} ('{io.name}'): a buffer of {buf.size} bytes, the model's input "
                                      f"is {sizes}")
    if role == "output" and buf.size < need:
        fail(ACL_ERROR_INVALID_PARAM, f"output {i} ('{io.name}'): a buffer of {buf.size} bytes, the model's "
                                      f"output needs {need}")
    r = memory.registry.find(buf.addr, need)
    if r.device is not None and not typed:
        if r.device is not device:
            fail(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{role} {i} ('{io.name}') is memory of {r.device.name}:"
                                                       f"{r.device.device_id}, the model runs on {device.name}:"
                                                       f"{device.device_id}")
        return DeviceBuffer(device, buf.addr, need)
    if r.device is not None and r.device is not device:
        fail(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{role} {i} ('{io.name}') is memory of another device")
    if r.device is None and isinstance(device, SimDevice):
        fail(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"{role} {i} ('{io.name}') is host memory; a model on the "
                                                   "simulated NPU takes device memory (acl.rt.malloc + memcpy)")
    view = r.view(buf.addr - r.addr, need)
    if role == "output" and not view.flags.writeable:
        fail(ACL_ERROR_GE_EXEC_MODEL_ADDR_INVALID, f"output {i} ('{io.name}') is read-only memory")
    return view.view(io.dtype).reshape(shape)


def _prepare(model_id, input_dataset, output_dataset):
    """Check the datasets against the model now; return the run (selecting its gear) for now or later."""
    m = _model(model_id)
    descs = m.descs
    ins, outs = handles.get(input_dataset, Dataset), handles.get(output_dataset, Dataset)
    n = descs.num_real_inputs
    if len(ins.buffers) != len(descs.inputs):
        fail(ACL_ERROR_INVALID_PARAM, f"the input dataset has {len(ins.buffers)} buffers, the model has "
                                      f"{len(descs.inputs)} inputs")
    if descs.dynamic:
        return _prepare_dynamic(m, ins, outs)
    gear = None
    in_shapes, out_shapes = [d.dims for d in descs.inputs[:n]], [d.dims for d in descs.outputs]
    if descs.gear_kind:
        mb = buffer_of(ins, n, "input")
        count = len(descs.gear_values[0])
        values = tuple(int(v) for v in memory.view(mb.addr, count * MBATCH_DTYPE.itemsize).view(MBATCH_DTYPE))
        if values not in descs.gear_values:
            fail(ACL_ERROR_GE_DYNAMIC_BATCH_SIZE_INVALID, f"the {MBATCH_INPUT} buffer says {list(values)}, which is "
                                                          "no gear of the model (set it with set_dynamic_batch_size, "
                                                          "set_dynamic_hw_size or set_input_dynamic_dims)")
        gear = descs.gear_values.index(values)
        in_shapes, out_shapes = descs.gear_inputs[gear], descs.gear_outputs[gear]
    inputs = [_bind(buffer_of(ins, i, "input"), descs.inputs[i], in_shapes[i], m.device, "input", i) for i in range(n)]
    outputs = [_bind(buffer_of(outs, i, "output"), d, out_shapes[i], m.device, "output", i)
               for i, d in enumerate(descs.outputs)]

    def work():
        try:
            if gear is not None:
                model_manager.model(m.model_id).set_input_dynamic_dims(descs.gear_values[gear])
            model_manager.execute(m.model_id, inputs, outputs)
        except GeError as e:
            fail(ACL_ERROR_RT_MODEL_EXECUTE, str(e))
        m.last_output_dims = tuple(tuple(d) for d in out_shapes)
    return lambda: m.run(work)


def _prepare_dynamic(m: AclModel, ins: Dataset, outs: Dataset):
    """A model with run-time shapes: each input's shape from its tensor desc on the input dataset;
    the outputs copied into their buffers (bounds-checked) and their shapes put on the output dataset."""
    descs = m.descs
    inputs = []
    for i, io in enumerate(descs.inputs):
        shape = input_shape(ins, i, io.name)
        buf = buffer_of(ins, i, "input")
        if buf.size < math.prod(shape) * np.dtype(io.dtype).itemsize:
            fail(ACL_ERROR_INVALID_PARAM, f"input {i} ('{io.name}'): a buffer of {buf.size} bytes for shape "
                                          f"{list(shape)}")
        inputs.append(_bind(buf, io, shape, m.device, "input", i, typed=True))
    targets = [buffer_of(outs, i, "output") for i in range(len(descs.outputs))]

    def work():
        try:
            results = model_manager.execute(m.model_id, inputs)
        except GeError as e:
            fail(ACL_ERROR_RT_MODEL_EXECUTE, str(e))
        for i, (io, y, buf) in enumerate(zip(descs.outputs, results, targets)):
            y = np.ascontiguousarray(y)
            if y.nbytes > buf.size:
                fail(ACL_ERROR_INVALID_PARAM, f"output {i} ('{io.name}') is {y.nbytes} bytes {list(y.shape)}, "
                                              f"its buffer holds {buf.size}")
            memory.view(buf.addr, y.nbytes)[...] = y.reshape(-1).view(np.uint8)
            record_output(outs, i, y.dtype.name, y.shape)
        m.last_output_dims = tuple(tuple(y.shape) for y in results)
    return lambda: m.run(work)


@acl_call("ret")
def execute(model_id, input_dataset, output_dataset):
    _prepare(model_id, input_dataset, output_dataset)()


@acl_call("ret")
def execute_async(model_id, input_dataset, output_dataset, stream):
    s = stream_of(stream)
    s.launch(_prepare(model_id, input_dataset, output_dataset))
