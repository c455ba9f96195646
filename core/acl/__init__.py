"""ACL's half: the runtime face that runs an OM, on ge's runtime. ge's own calls (models.py:
load, execute, memory and gears on one process-wide ModelManager; inference.py and runner.py: a
run as msame and ais_bench do it; dataset.py; profiling.py: traces and dumps), and what users'
client code calls on top of them. It never imports the compiler: a deployed runtime has no ATC.

pyACL (`acl`), ais_bench (`InferSession`, `python3 -m ais_bench`), `aclruntime` and the acllite
that users copy next to their scripts all run here unchanged. The modules users import by those
names live in `shim/` (`ge shim path` prints it; users put it first on PYTHONPATH, so that they
never shadow a real CANN install by accident); they only re-export what this package implements.

A device id N is ge's device "<kind>:N", each with its own memory, streams and counters; the kind
is `cpu` (device memory is host memory, pointers are real addresses) unless GE_ACL_DEVICE=sim
asks for the simulated NPU.
"""
from __future__ import annotations

import os

from ..model.collector import collector_paused

# (ge's runtime modules make objects that live as long as the process: imported without the
# collector's walks, 6 M instructions of a model's load process)
with collector_paused():
    from ..model.errors import DeviceError
    from ..runtime.device import DEVICE_NAMES


def device_kind() -> str:
    """cpu or sim, from GE_ACL_DEVICE (default cpu); anything else is an error naming it."""
    kind = os.environ.get("GE_ACL_DEVICE", "cpu").strip().lower() or "cpu"
    if kind not in DEVICE_NAMES:
        raise DeviceError(f"GE_ACL_DEVICE={os.environ['GE_ACL_DEVICE']!r} is no ge device: choose "
                          f"{' or '.join(DEVICE_NAMES)}")
    return kind


def device_name(device_id: int) -> str:
    """ge's device name for an ACL device id: "cpu:0", "sim:1" ..."""
    return f"{device_kind()}:{int(device_id)}"


def shim_path() -> str:
    """The folder holding the `acl`, `ais_bench` and `aclruntime` modules (`ge shim path`), for the
    front of a user's PYTHONPATH."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "shim")
