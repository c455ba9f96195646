"""pyACL (`import acl`) on ge: see ge.core.acl.pyacl and docs/acl.md. Put this folder's parent first
on PYTHONPATH: PYTHONPATH=$(ge shim path) python3 script.py"""
from ge.core.acl.pyacl import (app_log, create_data_buffer, destroy_data_buffer, finalize,  # noqa: F401
                               get_data_buffer_addr, get_data_buffer_size, get_data_buffer_size_v2,
                               get_recent_err_msg, get_soc_name, init, mdl, refuse, rt, update_data_buffer, util)


def __getattr__(name: str):
    return refuse(name)
