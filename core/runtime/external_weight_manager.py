"""External weights at load: where they come from, and the session-level manager that shares them.

`ExternalWeightConfig` is ACL's model config for weights: the weight folder
(ACL_MDL_WEIGHT_PATH_PTR), device memory the user already filled per file
(aclmdlSetExternalWeightAddress; it wins over the folder, as in GE) and whether to check sha256.

`ExternalWeightManager` (one per ModelManager, GE's session-level ExternalWeightManager) loads
each weight file once per device and hands the same device memory to every model that uses it,
counting references; the memory is freed when the last of those models unloads. A file is known
by its identity on disk (device, inode, size, mtime), so the same file reached through another
path or folder name is still shared, and a file replaced on disk is loaded afresh.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from ..errors import GeError
from .weight_loader import WeightCheck, copy_to_device, open_weight_file, verify_file


@dataclass(frozen=True)
class ExternalWeightConfig:
    weight_dir: str | None = None  # folder of the weight files; None: the caller's default
    user_memory: dict = field(default_factory=dict)  # file name -> (device address, size in bytes)
    verify: bool = True  # sha256 of every weight; lengths are always checked

    def __post_init__(self):
        memory = {}
        for name, buf in dict(self.user_memory or {}).items():
            if hasattr(buf, "addr") and hasattr(buf, "nbytes"):  # a DeviceBuffer
                buf = (buf.addr, buf.nbytes)
            try:
                addr, size = (int(v) for v in buf)
            except (TypeError, ValueError):
                raise GeError(f"external weight memory for '{name}' must be (address, size) or a DeviceBuffer, "
                              f"got {buf!r}") from None
            memory[name] = (addr, size)
        object.__setattr__(self, "user_memory", memory)


@dataclass
class _Loaded:
    addr: int
    nbytes: int
    path: str
    refs: int
    verified: set  # WeightChecks whose sha256 was checked


class ExternalWeightManager:
    def __init__(self):
        self._files: dict[tuple, _Loaded] = {}
        self._lock = threading.Lock()  # held while a file loads: a second user waits, then shares

    def acquire(self, device, folder: str, name: str, nbytes: int, checks: list[WeightCheck],
                verify: bool = True) -> tuple[tuple, int, bool]:
        """(key for release, device address, whether it was already loaded) of weight file `name`."""
        shown, fd = open_weight_file(folder, name, nbytes)
        try:
            st = os.fstat(fd)
            key = (device, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            with self._lock:
                entry = self._files.get(key)
                if entry is not None:
                    unchecked = [c for c in checks if c not in entry.verified] if verify else []
                    if unchecked:  # this model names weights the first user did not check
                        verify_file(fd, shown, nbytes, unchecked)
                        entry.verified.update(unchecked)
                    entry.refs += 1
                    return key, entry.addr, True
                addr = device.malloc(nbytes)
                try:
                    copy_to_device(device, addr, fd, shown, nbytes, checks, verify)
                except BaseException:
                    device.free(addr)
                    raise
                self._files[key] = _Loaded(addr, nbytes, shown, 1, set(checks) if verify else set())
                return key, addr, False
        finally:
            os.close(fd)

    def release(self, key: tuple) -> None:
        with self._lock:
            entry = self._files.get(key)
            if entry is None:
                return
            entry.refs -= 1
            if entry.refs == 0:
                del self._files[key]
                key[0].free(entry.addr)

    def loaded(self) -> list[dict]:
        """The files on the devices now: path, device, address, bytes, users."""
        with self._lock:
            return [{"path": e.path, "device": key[0].name, "addr": e.addr, "nbytes": e.nbytes, "refs": e.refs}
                    for key, e in self._files.items()]
