"""aclruntime, the binding ais_bench's InferSession is written on, on ge's runtime: a session
loads its OM through ge's one ModelManager (ge.core.acl.models) on the device of its id, sets gears
and shapes through it, and runs there.

    import aclruntime                                  # PYTHONPATH=$(ge shim path)
    session = aclruntime.InferenceSession("net.om", 0, aclruntime.session_options())
    x = aclruntime.Tensor(array); x.to_device(0)
    y = session.run([d.name for d in session.get_outputs()], [x])[0]
    y.to_host(); numpy.array(y)

As aclruntime, an input is taken as its bytes: it must hold exactly the bytes the model's input
needs (its `realsize`: the selected gear's, the set shape's), which are then read as the model's
dtype ("Check i:0 name:x in size:... needsize:... not match" otherwise). Every execution's time
goes to `sumary().exec_time_list`, the copies' times to `MemorySummary`. A device tensor is an
allocation of that device (on `cpu` host memory, as the device's own memory is; on `sim` the
simulated NPU's, its copies counted).
"""
from __future__ import annotations

import ctypes
import enum
import functools
import os
import threading
import time
import weakref

import numpy as np

from . import device_name
from . import models as api
from . import inference
from .codes import FORMATS
from .descs import describe, recorded_formats
from .aipp import DYNAMIC_AIPP_INPUT, dynamic_aipp_data
from ..model.aipp_params import AippParams, ImageParams
from ..model.errors import GeError
from ..model.weight_files import default_weight_dir
from ..runtime.device import MAX_DEVICES, get_device as ge_device
from ..runtime.external_weight_manager import ExternalWeightConfig

MAX_DEVICE_ID = MAX_DEVICES - 1  # ge's devices, not aclruntime's 255: a larger id could never be set


class AclRuntimeError(GeError, RuntimeError):
    """What aclruntime raises (C++'s std::runtime_error reaches Python as RuntimeError)."""


def _runtime_errors(fn):
    """ge's errors reach the caller as aclruntime's RuntimeError, their message kept."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except AclRuntimeError:
            raise
        except GeError as e:
            raise AclRuntimeError(str(e)) from None
    return wrapped


class dtype(enum.IntEnum):
    """aclruntime's tensor data types (aclDataType's numbers); `.name` is numpy's spelling."""
    float32 = 0
    float16 = 1
    int8 = 2
    int32 = 3
    uint8 = 4
    int16 = 6
    uint16 = 7
    uint32 = 8
    int64 = 9
    uint64 = 10
    double = 11
    bool = 12

    def __str__(self) -> str:
        return f"dtype.{self.name}"

    @classmethod
    def of(cls, np_dtype) -> "dtype":
        name = np.dtype(np_dtype).name
        name = {"float64": "double"}.get(name, name)
        if name not in cls.__members__:
            raise AclRuntimeError(f"aclruntime has no data type for numpy's {name}")
        return cls[name]


class MemoryType(enum.IntEnum):
    """Where a Tensor's data is (aclruntime.type)."""
    memory_host = 0
    memory_device = 1
    memory_dvpp = 2

    def __str__(self) -> str:
        return f"type.{self.name}"


class session_options:
    """InferenceSession's options: `loop` executions per run, the log level, an acl.json."""

    def __init__(self):
        self.loop = 1
        self.log_level = 2
        self.acl_json_path = ""


class tensor_desc:
    """An input or output as aclruntime describes it: `shape` with -1 where dynamic, `size` the
    largest bytes it can take (a gear model's largest gear), `realsize` those of the gear or
    shape now set."""

    def __init__(self, name: str, datatype: dtype, shape: list, size: int, realsize: int, format: int = FORMATS["ND"]):
        self.name, self.datatype, self.shape, self.size, self.realsize, self.format = \
            name, datatype, shape, size, realsize, format

    def __repr__(self) -> str:
        return (f"tensor_desc(name={self.name!r}, datatype={self.datatype}, format={self.format}, "
                f"shape={self.shape}, size={self.size}, realsize={self.realsize})")


class ExecTime(float):
    """One execution in `exec_time_list`: its milliseconds as a number (older ais_bench: np.mean
    of the list) and its (start, end) in ms of wall-clock time as a pair (newer ais_bench)."""

    def __new__(cls, start: float, end: float):
        item = super().__new__(cls, end - start)
        item.start, item.end = start, end
        return item

    def __iter__(self):
        return iter((self.start, self.end))

    def __getitem__(self, i):
        return (self.start, self.end)[i]

    def __len__(self) -> int:
        return 2


class sumary:
    """A session's execution times (aclruntime's spelling)."""

    def __init__(self):
        self.exec_time_list: list[ExecTime] = []


class MemorySummary:
    """The host-to-device and device-to-host copy times (ms) of every run in this process."""
    H2D_time_list: list[float] = []
    D2H_time_list: list[float] = []

    def reset(self) -> None:
        MemorySummary.H2D_time_list.clear()
        MemorySummary.D2H_time_list.clear()


class BaseTensor:
    """`size` bytes at address `buf` (an ndarray's data, as ais_bench passes it)."""

    def __init__(self, buf: int, size: int):
        self.buf, self.size = int(buf), int(size)

    def bytes(self) -> np.ndarray:
        if self.size < 0 or (self.size and not self.buf):
            raise AclRuntimeError(f"BaseTensor: no memory at address {self.buf:#x} of {self.size} bytes")
        return np.frombuffer((ctypes.c_uint8 * self.size).from_address(self.buf), np.uint8).copy()


class Tensor:
    """A tensor on the host or on a device (`to_device(id)` / `to_host()`); numpy reads a host one.
    A device tensor's values live in that device's memory (an allocation freed with the tensor), so
    the copies are the device's, counted as its h2d and d2h."""

    def __init__(self, array):
        data = np.array(array, order="C", copy=True)
        dtype.of(data.dtype)
        self._data, self._device, self._free = data, -1, None

    @classmethod
    def on_device(cls, data: np.ndarray, device_id: int) -> "Tensor":
        """A device tensor holding `data`, as a model's output or a file's bytes land there (no h2d)."""
        t = cls.__new__(cls)
        t._data, t._device, t._free = data, -1, None
        t._place(device_id, counted=False)
        return t

    def _place(self, device_id: int, counted: bool) -> None:
        device_id = check_device_id(device_id)
        device = ge_device(device_name(device_id))
        data = np.ascontiguousarray(self._data)
        addr = device.malloc(data.nbytes)
        self._free = weakref.finalize(self, device.free, addr)
        view = device.view(addr, data.dtype, data.shape)
        if counted:
            device.memcpy_h2d(addr, data)
        else:
            np.copyto(view, data)
        self._data, self._device = view, device_id

    def to_device(self, device_id: int) -> None:
        self.to_host()
        self._place(device_id, counted=True)

    def to_host(self) -> None:
        if self._device < 0:
            return
        device = ge_device(device_name(self._device))
        self._data = device.copy_out(self._data)
        self._free()
        self._device, self._free = -1, None

    def __array__(self, dtype=None, copy=None):
        if self._device >= 0:
            raise AclRuntimeError("tensor is in npu. can't convert to numpy array")
        return self._data if dtype is None else self._data.astype(dtype)

    @property
    def data(self) -> np.ndarray:
        """The tensor's values wherever they are (ge's own reading, for a run's inputs)."""
        return self._data

    @property
    def shape(self) -> list:
        return list(self._data.shape)

    @property
    def dtype(self) -> dtype:
        return dtype.of(self._data.dtype)

    @property
    def device(self) -> int:
        return self._device

    @property
    def type(self) -> MemoryType:
        return MemoryType.memory_device if self._device >= 0 else MemoryType.memory_host

    def __repr__(self) -> str:
        return f"<Tensor>\nshape:\t{self.shape}\ndtype:\t{self.dtype}\ndevice:\t{self._device}"


def check_device_id(device_id) -> int:
    if isinstance(device_id, bool) or not isinstance(device_id, (int, np.integer)) or \
            not 0 <= int(device_id) <= MAX_DEVICE_ID:
        raise AclRuntimeError(f"device:{device_id} is invalid. valid value range is [0, {MAX_DEVICE_ID}]")
    return int(device_id)


_SESSIONS: "weakref.WeakSet[InferenceSession]" = weakref.WeakSet()
_SESSIONS_LOCK = threading.Lock()


class InferenceSession:
    """An OM loaded on device `device_id` (ge's "cpu:N", or "sim:N" with GE_ACL_DEVICE=sim)."""

    @_runtime_errors
    def __init__(self, model_path: str, device_id: int, options: session_options | None = None):
        self._options = options if options is not None else session_options()
        self.device_id = check_device_id(device_id)
        self.model_path = os.fspath(model_path)
        om = api.read_om(self.model_path)
        self.model_id = api.model_manager.load(om, device_name(self.device_id),
                                               ExternalWeightConfig(default_weight_dir(self.model_path)), from_file=True)
        self.model = api.model(self.model_id)
        try:
            inference.require_tensor_io(self.model)
            self._descs = describe(self.model, recorded_formats(om))  # as pyACL describes the model
        except BaseException:
            api.unload(self.model_id)
            raise
        self._shapes: list[tuple] | None = None  # the inputs' shapes of the gear or shape set
        self._custom_sizes: list[int] | None = None
        self._aipp: AippParams | None = None  # dynamic AIPP settings (aipp_set_*), applied by set_dym_aipp_info_set
        self._aipp_data: np.ndarray | None = None  # the ascend_dynamic_aipp_data input they make
        self._summary = sumary()
        with _SESSIONS_LOCK:
            _SESSIONS.add(self)

    # -- descriptions ------------------------------------------------------------------------------
    def get_inputs(self) -> list[tensor_desc]:
        """The model's own inputs (not a gear model's `ascend_mbatch_shape_data`)."""
        return [self._desc(d, d.nbytes if self._shapes is None else _nbytes(self._shapes[i], d.dtype))
                for i, d in enumerate(self._descs.inputs[:self._descs.num_real_inputs])]

    def get_outputs(self) -> list[tensor_desc]:
        gear = getattr(self.model, "selected", None)
        descs = []
        for i, d in enumerate(self._descs.outputs):
            real = d.nbytes if gear is None else _nbytes(self._descs.gear_outputs[gear][i], d.dtype)
            descs.append(self._desc(d, real, self._custom_sizes[i] if self._custom_sizes else None))
        return descs

    @staticmethod
    def _desc(d, realsize: int, custom: int | None = None) -> tensor_desc:
        """`custom`: set_custom_outsize's bytes, both the size and the real size."""
        return tensor_desc(d.name, dtype.of(d.dtype), list(d.dims), custom or d.nbytes, custom or realsize,
                           FORMATS[d.format])

    def input_shapes(self) -> list[tuple]:
        """The inputs' shapes now: those of the gear or shape set, else the model's (-1 where dynamic)."""
        return list(self._shapes) if self._shapes else [tuple(d.shape) for d in self.model.inputs]

    def options(self) -> session_options:
        return self._options

    # -- gears and shapes --------------------------------------------------------------------------
    @_runtime_errors
    def set_staticbatch(self) -> None:
        """No gear or shape set: a gear model runs the gear its inputs' shapes match."""
        self._shapes = None
        if hasattr(self.model, "selected"):
            self.model.selected = None

    @_runtime_errors
    def set_dynamic_batchsize(self, batch: int) -> None:
        self._set(inference.select_gear(self.model_id, batch=int(batch)))

    @_runtime_errors
    def set_dynamic_hw(self, height: int, width: int) -> None:
        """The image-size gear (ais_bench passes --dymHW's "H,W" in this order)."""
        self._set(inference.select_gear(self.model_id, hw=f"{int(height)},{int(width)}"))

    @_runtime_errors
    def set_dynamic_dims(self, dims: str) -> None:
        """The dims gear of a "name:d1,d2;name2:..." spec."""
        self._set(inference.select_gear(self.model_id, dims=dims))

    @_runtime_errors
    def set_dynamic_shape(self, shape: str) -> None:
        """The shapes of a model with ranges or unknown dims, "name:d1,d2;name2:..."."""
        self._set(inference.shaped_descs(self.model.inputs, shape, "dymShape"))

    def _set(self, descs) -> None:
        self._shapes = [tuple(d.shape) for d in descs]

    @_runtime_errors
    def set_custom_outsize(self, sizes) -> None:
        """The bytes of each output's buffer (a model with dynamic output shapes)."""
        sizes = [int(s) for s in sizes]
        if len(sizes) != len(self.model.outputs) or any(s <= 0 for s in sizes):
            raise AclRuntimeError(f"custom out sizes {sizes}: give a byte count above 0 for each of the model's "
                                  f"{len(self.model.outputs)} output(s)")
        self._custom_sizes = sizes

    def get_max_dym_batchsize(self) -> int:
        values = getattr(self.model, "gear_values", None)
        if not values:
            raise AclRuntimeError(f"model '{self.model_path}' has no batch gears")
        return max(v[0] for v in values)

    # -- dynamic AIPP (ais_bench's --aipp_config: one setting for every image of the batch) ----------
    @property
    def aipp_info_set(self) -> bool:
        """ge's: whether set_dym_aipp_info_set ran (the runs' feeds then leave out the AIPP input)."""
        return self._aipp_data is not None

    def get_dym_aipp_input_exist(self) -> bool:
        return DYNAMIC_AIPP_INPUT in [d.name for d in self.model.inputs]

    @_runtime_errors
    def check_dym_aipp_input_exist(self) -> None:
        if not self.get_dym_aipp_input_exist():
            raise AclRuntimeError(f"the model has no dynamic AIPP input ({DYNAMIC_AIPP_INPUT}): compile it with "
                                  "--insert_op_conf and aipp_mode: dynamic")

    def aipp_set_max_batch_size(self, batch: int) -> None:
        self._aipp = AippParams("", (0, 0), images=[ImageParams() for _ in range(int(batch))])

    def _images(self, **settings) -> None:
        for im in self._settings().images:
            for k, v in settings.items():
                setattr(im, k, v)

    def _settings(self) -> AippParams:
        if self._aipp is None:
            raise AclRuntimeError("call aipp_set_max_batch_size first")
        return self._aipp

    def aipp_set_input_format(self, input_format: str) -> None:
        self._settings().input_format = str(input_format)

    def aipp_set_src_image_size(self, size) -> None:
        self._settings().src_size = (int(size[0]), int(size[1]))

    def aipp_set_rbuv_swap_switch(self, switch: int) -> None:
        self._settings().rbuv_swap_switch = bool(switch)

    def aipp_set_ax_swap_switch(self, switch: int) -> None:
        self._settings().ax_swap_switch = bool(switch)

    def aipp_set_csc_params(self, params) -> None:
        """[switch, matrix r0c0 .. r2c2, output bias 0..2, input bias 0..2]."""
        p = [int(v) for v in params]
        s = self._settings()
        s.csc_switch, s.matrix = bool(p[0]), [p[1:4], p[4:7], p[7:10]]
        s.output_bias, s.input_bias = tuple(p[10:13]), tuple(p[13:16])

    def aipp_set_crop_params(self, params) -> None:
        """[switch, start w, start h, size w, size h]."""
        p = [int(v) for v in params]
        self._images(crop=bool(p[0]), crop_pos=(p[1], p[2]), crop_size=(p[3], p[4]))

    def aipp_set_padding_params(self, params) -> None:
        """[switch, top, bottom, left, right]."""
        p = [int(v) for v in params]
        self._images(padding=bool(p[0]), padding_size=tuple(p[1:5]))

    def aipp_set_dtc_pixel_mean(self, values) -> None:
        self._images(mean=tuple(float(int(v)) for v in values))

    def aipp_set_dtc_pixel_min(self, values) -> None:
        self._images(min=tuple(float(v) for v in values))

    def aipp_set_pixel_var_reci(self, values) -> None:
        self._images(var_reci=tuple(float(v) for v in values))

    @_runtime_errors
    def set_dym_aipp_info_set(self) -> int:
        """The settings checked against the model and kept for every run: from now on the feeds
        leave out the ascend_dynamic_aipp_data input."""
        self.check_dym_aipp_input_exist()
        self._aipp_data = dynamic_aipp_data(self.model_id, self._settings())
        return 0

    # -- runs -------------------------------------------------------------------------------------
    @_runtime_errors
    def run(self, output_names, feeds) -> list[Tensor]:
        """Run on `feeds` (Tensors, BaseTensors or arrays, in input order or by input name) `loop`
        times; the outputs named, as device Tensors."""
        if isinstance(feeds, dict):
            names = [d.name for d in self.model.inputs]
            unknown = [k for k in feeds if k not in names]
            if unknown or len(feeds) != len(names):
                raise AclRuntimeError(f"feeds {sorted(feeds)} do not name the model's inputs {names}")
            feeds = [feeds[n] for n in names]
        feeds = list(feeds)
        names = [d.name for d in self.model.inputs]
        if self._aipp_data is not None and len(feeds) == len(names) - 1:  # the AIPP settings fill their input
            feeds.insert(names.index(DYNAMIC_AIPP_INPUT), self._aipp_data)
        if len(feeds) != len(self.model.inputs):
            raise AclRuntimeError(f"{len(feeds)} input(s) given; the model has {len(self.model.inputs)}")
        arrays = [self._input(i, f) for i, f in enumerate(feeds)]
        outputs = self._execute(arrays)
        index = {d.name: i for i, d in enumerate(self.model.outputs)}
        missing = [n for n in output_names if n not in index]
        if missing:
            raise AclRuntimeError(f"the model has no output '{missing[0]}' (its outputs: {', '.join(index)})")
        return [Tensor.on_device(outputs[index[n]], self.device_id) for n in output_names]

    def _input(self, i: int, feed) -> np.ndarray:
        """Feed i as the model's input: its bytes, read as the input's dtype and shape."""
        d = self.model.inputs[i]
        if isinstance(feed, Tensor):
            data = feed.data
        elif isinstance(feed, BaseTensor):
            data = feed.bytes()
        else:
            data = np.asarray(feed)
        shape = self._shapes[i] if self._shapes else tuple(d.shape)
        want = np.dtype(d.dtype)
        if any(x < 0 for x in shape):  # no gear or shape set: the feed's own shape says it
            if data.dtype != want:
                raise AclRuntimeError(f"input {i} ('{d.name}') has dynamic dims {list(d.shape)}: a {data.dtype} feed "
                                      f"cannot say its shape as {want}; set a gear or shape first")
            return np.ascontiguousarray(data)
        need = _nbytes(shape, d.dtype)
        if data.nbytes != need:
            raise AclRuntimeError(f"Check i:{i} name:{d.name} in size:{data.nbytes} needsize:{need} not match")
        if data.dtype == want:
            return np.ascontiguousarray(data).reshape(shape)
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8).view(want).reshape(shape)

    def _execute(self, arrays: list[np.ndarray]) -> list[np.ndarray]:
        outputs = None
        ctx = getattr(self.model, "default_context", None)
        for _ in range(max(1, int(self._options.loop))):
            wall_ms = time.time() * 1e3
            t0 = time.perf_counter()
            outputs = api.execute(self.model_id, arrays)
            elapsed = (time.perf_counter() - t0) * 1e3
            stats = getattr(ctx, "stats", None) or {}
            h2d, d2h = stats.get("h2d_ms", 0.0), stats.get("d2h_ms", 0.0)
            start = wall_ms + h2d
            self._summary.exec_time_list.append(ExecTime(start, start + stats.get("compute_ms", elapsed)))
            MemorySummary.H2D_time_list.append(h2d)
            MemorySummary.D2H_time_list.append(d2h)
        if self._custom_sizes:
            inference.check_output_sizes(outputs, self._custom_sizes, self.model.outputs)
        return outputs

    @_runtime_errors
    def create_tensor_from_fileslist(self, desc: tensor_desc, files) -> Tensor:
        """A device tensor of `desc`'s dtype holding the files' bytes one after another (.npy: its data)."""
        parts = [np.load(f, allow_pickle=False).reshape(-1).view(np.uint8) if f.lower().endswith(".npy")
                 else np.fromfile(f, np.uint8) for f in files]
        data = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        if data.nbytes != desc.realsize:
            raise AclRuntimeError(f"files {list(files)} hold {data.nbytes} bytes; input '{desc.name}' needs "
                                  f"{desc.realsize}")
        return Tensor.on_device(data.view(np.dtype(desc.datatype.name)), self.device_id)

    def sumary(self) -> sumary:
        return self._summary

    def reset_sumaryinfo(self) -> None:
        self._summary.exec_time_list.clear()

    def free_resource(self) -> None:
        """Unload the model (later runs are refused)."""
        with _SESSIONS_LOCK:
            _SESSIONS.discard(self)
        if self.model_id is not None:
            api.unload(self.model_id)
            self.model_id = None

    @staticmethod
    def finalize() -> None:
        """Free every session's model (aclFinalize's part of ais_bench's finalize)."""
        with _SESSIONS_LOCK:
            sessions = list(_SESSIONS)
        for s in sessions:
            s.free_resource()

    def __repr__(self) -> str:
        return (f"<InferenceSession model {self.model_path!r} on device {self.device_id} "
                f"({device_name(self.device_id)})>\ninputs: {self.get_inputs()}\noutputs: {self.get_outputs()}")


def model(modelPath: str, deviceId: int = 0, options: session_options | None = None) -> InferenceSession:  # noqa: N803 (aclruntime's names)
    return InferenceSession(modelPath, deviceId, options)


def _nbytes(shape, dt) -> int:
    return int(np.prod([int(x) for x in shape], dtype=np.int64)) * np.dtype(dt).itemsize


type = MemoryType  # noqa: A001 (aclruntime.type, as the binding names it; defined last, after every use of type())
