"""Devices, contexts and streams (acl.init, acl.rt.set_device ... synchronize_stream).

A device id N is ge's device "<cpu|sim>:N" (ge.core.acl.device_name), each with its own memory.
A context belongs to one device; each thread has its own current context (set_device makes the
device's default context current, create_context a new one, set_context any, from any thread).
A stream is an in-order queue drained by a worker thread: execute_async, memcpy_async and
launch_callback queue work on it, synchronize_stream waits for it and reports its first failure.
Stream 0 is the current context's default stream."""
from __future__ import annotations

import threading

from ..runtime.device import MAX_DEVICES, Device, Stream, get_device as ge_device
from ..model.soc import DEFAULT_SOC
from . import device_name, handles
from .codes import (ACL_ERROR_RT_CONTEXT_NULL, ACL_ERROR_RT_INVALID_DEVICEID, ACL_ERROR_RT_INVALID_HANDLE,
                    ACL_ERROR_RT_MODEL_EXECUTE, ACL_ERROR_REPEAT_FINALIZE, ACL_ERROR_REPEAT_INITIALIZE, ACL_HOST,
                    AclError, acl_call, as_int, fail)


class AclStream:
    def __init__(self, context: "AclContext"):
        self.context = context
        self.queue = Stream(context.device, asynchronous=True)
        self.subscriber: int | None = None  # the thread that runs its callbacks (subscribe_report)
        self.live = True

    def launch(self, work) -> None:
        self.queue.launch(work)

    def synchronize(self) -> None:
        try:
            self.queue.synchronize()
        except AclError:
            raise
        except Exception as e:  # a failure of queued work (an execute_async): reported here, as ACL does
            raise AclError(ACL_ERROR_RT_MODEL_EXECUTE, f"work queued on the stream failed: {e}") from e

    def destroy(self) -> None:
        self.live = False
        self.queue.destroy()


class AclContext:
    def __init__(self, device_id: int):
        self.device_id = device_id
        self.device: Device = ge_device(device_name(device_id))
        self.streams: list[AclStream] = []
        self._default: AclStream | None = None

    @property
    def default_stream(self) -> AclStream:
        if self._default is None:
            self._default = AclStream(self)
        return self._default

    def all_streams(self) -> list[AclStream]:
        return self.streams + ([self._default] if self._default is not None else [])

    def destroy(self) -> None:
        for s in self.all_streams():
            try:
                s.synchronize()
            except AclError:
                pass  # its failure was the caller's to collect; the stream goes anyway
            s.destroy()
        self.streams, self._default = [], None


class _State:
    def __init__(self):
        self.initialized = False
        self.lock = threading.Lock()
        self.defaults: dict[int, list] = {}  # device id -> [default context handle, set_device count]
        self.thread = threading.local()  # .context: this thread's current context handle


state = _State()


def _device_id(device_id) -> int:
    device_id = as_int(device_id, "device_id")
    if not 0 <= device_id < MAX_DEVICES:
        fail(ACL_ERROR_RT_INVALID_DEVICEID, f"device id {device_id} does not exist (0 .. {MAX_DEVICES - 1})")
    return device_id


def current_context() -> AclContext:
    """This thread's current context, or ACL_ERROR_RT_CONTEXT_NULL (no set_device / set_context yet)."""
    handle = getattr(state.thread, "context", None)
    ctx = handles.lookup(handle)
    if not isinstance(ctx, AclContext):
        fail(ACL_ERROR_RT_CONTEXT_NULL, "no current context in this thread: call acl.rt.set_device or "
                                        "acl.rt.set_context first")
    return ctx


def stream_of(stream) -> AclStream:
    """A stream handle (0 or None: the current context's default stream)."""
    if stream is None or (isinstance(stream, int) and stream == 0):
        return current_context().default_stream
    s = handles.get(stream, AclStream, ACL_ERROR_RT_INVALID_HANDLE)
    if not s.live:
        fail(ACL_ERROR_RT_INVALID_HANDLE, f"stream {stream:#x} was destroyed")
    return s


def launch(stream, work) -> None:
    stream_of(stream).launch(work)


# -- acl ---------------------------------------------------------------------------------------
@acl_call("ret")
def init(config_path=None):
    with state.lock:
        if state.initialized:
            fail(ACL_ERROR_REPEAT_INITIALIZE, "acl.init was called already in this process")
        state.initialized = True


@acl_call("ret")
def finalize():
    with state.lock:
        if not state.initialized:
            fail(ACL_ERROR_REPEAT_FINALIZE, "acl.finalize without acl.init (or called twice)")
        state.initialized = False


def get_soc_name() -> str:
    return DEFAULT_SOC


# -- devices -----------------------------------------------------------------------------------
@acl_call("ret")
def set_device(device_id):
    device_id = _device_id(device_id)
    with state.lock:
        entry = state.defaults.get(device_id)
        if entry is None:
            entry = state.defaults[device_id] = [handles.new(AclContext(device_id)), 0]
        entry[1] += 1
    state.thread.context = entry[0]


@acl_call("ret")
def reset_device(device_id):
    device_id = _device_id(device_id)
    with state.lock:
        entry = state.defaults.get(device_id)
        if entry is None:
            return
        entry[1] -= 1
        if entry[1] > 0:
            return
        del state.defaults[device_id]
    handles.drop(entry[0], AclContext).destroy()
    if getattr(state.thread, "context", None) == entry[0]:
        state.thread.context = None


@acl_call("pair", -1)
def get_device():
    return current_context().device_id


@acl_call("pair", 0)
def get_device_count():
    return MAX_DEVICES


@acl_call("pair", ACL_HOST)
def get_run_mode():
    """ACL_HOST: the application runs on the host, models on the device (what acllite expects)."""
    return ACL_HOST


@acl_call("ret")
def synchronize_device():
    ctx = current_context()
    for c in handles.live(AclContext):
        if c.device is ctx.device:
            for s in c.all_streams():
                s.synchronize()


# -- contexts ----------------------------------------------------------------------------------
@acl_call("pair", 0)
def create_context(device_id):
    handle = handles.new(AclContext(_device_id(device_id)))
    state.thread.context = handle
    return handle


@acl_call("ret")
def destroy_context(context):
    handles.drop(context, AclContext, ACL_ERROR_RT_INVALID_HANDLE).destroy()
    if getattr(state.thread, "context", None) == context:
        state.thread.context = None


@acl_call("ret")
def set_context(context):
    handles.get(context, AclContext, ACL_ERROR_RT_INVALID_HANDLE)
    state.thread.context = int(context)


@acl_call("pair", 0)
def get_context():
    current_context()
    return state.thread.context


# -- streams -----------------------------------------------------------------------------------
@acl_call("pair", 0)
def create_stream():
    ctx = current_context()
    s = AclStream(ctx)
    ctx.streams.append(s)
    return handles.new(s)


@acl_call("ret")
def destroy_stream(stream):
    s = handles.get(stream, AclStream, ACL_ERROR_RT_INVALID_HANDLE)
    handles.drop(stream, AclStream)
    if s in s.context.streams:
        s.context.streams.remove(s)
    try:
        s.synchronize()
    finally:
        s.destroy()


@acl_call("ret")
def synchronize_stream(stream):
    stream_of(stream).synchronize()
