"""pyACL (`import acl`) on ge: see ge.core.acl.pyacl and docs/acl.md. Put this folder's parent first
on PYTHONPATH: PYTHONPATH=$(ge shim path) python3 script.py"""
from ge.core.acl.pyacl import (app_log, create_data_buffer, create_tensor_desc, destroy_data_buffer,  # noqa: F401
                               destroy_tensor_desc, finalize, get_data_buffer_addr, get_data_buffer_size,
                               get_data_buffer_size_v2, get_recent_err_msg, get_soc_name, get_tensor_desc_dim,
                               get_tensor_desc_dim_v2, get_tensor_desc_element_count, get_tensor_desc_format,
                               get_tensor_desc_num_dims, get_tensor_desc_size, get_tensor_desc_type, init, mdl,
                               rt, update_data_buffer, util)
from ge.core.acl.pyacl import refuse as _refuse


def __getattr__(name: str):
    return _refuse(name)
