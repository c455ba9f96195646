"""The `acl` module as pyACL users import it: top-level calls, and the rt, mdl and util
namespaces (modules, so that `dir(acl.util)` lists what is there). acl.media (DVPP), acl.op
(single-op execution) and acl.prof (profiling) are refused by name."""
from __future__ import annotations

import logging
import types

from . import aipp, callbacks, datasets, mdl as _mdl, memory, runtime, tensor_descs, util as _util
from .codes import NotSupportedByGe, recent_error

_app_log = logging.getLogger("acl.app")
REFUSED = {"media": "DVPP (image and video processing: acl.media)",
           "op": "single-op execution (acl.op)",
           "prof": "profiling (acl.prof); ge run --profile traces ge's own runs"}


def _namespace(name: str, functions: dict) -> types.ModuleType:
    module = types.ModuleType(name)
    for k, fn in functions.items():
        setattr(module, k, fn)
    return module


def app_log(log_level, message) -> None:
    """Into Python logging ("acl.app"): ACL_DEBUG 0 .. ACL_ERROR 3; never stdout."""
    levels = {0: logging.DEBUG, 1: logging.INFO, 2: logging.WARNING, 3: logging.ERROR}
    _app_log.log(levels.get(log_level, logging.INFO), "%s", message)


def get_recent_err_msg() -> str:
    return recent_error()


rt = _namespace("acl.rt", {
    **{k: getattr(runtime, k) for k in (
        "set_device", "reset_device", "get_device", "get_device_count", "get_run_mode", "synchronize_device",
        "create_context", "destroy_context", "set_context", "get_context", "create_stream", "destroy_stream",
        "synchronize_stream")},
    **{k: getattr(memory, k) for k in (
        "malloc", "free", "malloc_host", "free_host", "memcpy", "memcpy_async", "memset", "memset_async",
        "get_mem_info")},
    **{k: getattr(callbacks, k) for k in ("subscribe_report", "unsubscribe_report", "launch_callback",
                                          "process_report")},
})
mdl = _namespace("acl.mdl", {
    **{k: getattr(_mdl, k) for k in dir(_mdl) if not k.startswith("_") and callable(getattr(_mdl, k))
       and getattr(getattr(_mdl, k), "__module__", "") == _mdl.__name__ and k[0].islower()},
    **{k: getattr(datasets, k) for k in ("create_dataset", "destroy_dataset", "add_dataset_buffer",
                                         "get_dataset_num_buffers", "get_dataset_buffer")},
    **{k: getattr(aipp, k) for k in (
        "create_aipp", "destroy_aipp", "set_aipp_input_format", "set_aipp_csc_params", "set_aipp_rbuv_swap_switch",
        "set_aipp_ax_swap_switch", "set_aipp_src_image_size", "set_aipp_scf_params", "set_aipp_crop_params",
        "set_aipp_padding_params", "set_aipp_dtc_pixel_mean", "set_aipp_dtc_pixel_min", "set_aipp_pixel_var_reci",
        "set_input_aipp", "set_aipp_by_input_index", "get_aipp_type", "get_first_aipp_info")},
    "set_dataset_tensor_desc": tensor_descs.set_dataset_tensor_desc,
    "get_dataset_tensor_desc": tensor_descs.get_dataset_tensor_desc,
})
util = _namespace("acl.util", {
    **{k: getattr(_util, k) for k in ("numpy_to_ptr", "numpy_contiguous_to_ptr", "bytes_to_ptr", "ptr_to_bytes",
                                      "ptr_to_numpy")},
    "start_thread": callbacks.start_thread, "stop_thread": callbacks.stop_thread,
})
init, finalize, get_soc_name = runtime.init, runtime.finalize, runtime.get_soc_name
create_data_buffer, destroy_data_buffer, update_data_buffer = (
    datasets.create_data_buffer, datasets.destroy_data_buffer, datasets.update_data_buffer)
get_data_buffer_addr, get_data_buffer_size = datasets.get_data_buffer_addr, datasets.get_data_buffer_size
get_data_buffer_size_v2 = datasets.get_data_buffer_size
(create_tensor_desc, destroy_tensor_desc, get_tensor_desc_type, get_tensor_desc_format, get_tensor_desc_num_dims,
 get_tensor_desc_dim, get_tensor_desc_dim_v2, get_tensor_desc_element_count, get_tensor_desc_size) = (
    tensor_descs.create_tensor_desc, tensor_descs.destroy_tensor_desc, tensor_descs.get_tensor_desc_type,
    tensor_descs.get_tensor_desc_format, tensor_descs.get_tensor_desc_num_dims, tensor_descs.get_tensor_desc_dim,
    tensor_descs.get_tensor_desc_dim_v2, tensor_descs.get_tensor_desc_element_count, tensor_descs.get_tensor_desc_size)


def refuse(name: str):
    """A module __getattr__ for the parts of pyACL ge does not provide."""
    if name in REFUSED:
        raise NotSupportedByGe(f"acl.{name}: {REFUSED[name]} is not supported by ge, which runs offline models "
                               "(acl.rt, acl.mdl, acl.util); see docs/acl.md")
    raise AttributeError(f"module 'acl' has no attribute {name!r}")


def __getattr__(name: str):
    return refuse(name)

