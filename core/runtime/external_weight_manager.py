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
import _thread  # (threading.Lock and threading.local without threading: 1600 lines compiled at each start without bytecode)

from ..model.errors import DeviceError, GeError
from .weight_loader import WeightCheck, copy_to_device, open_weight_file, verify_file


class ExternalWeightConfig:
    __slots__ = ("weight_dir", "user_memory", "verify")

    def __init__(self, weight_dir: str | None = None, user_memory: dict | None = None, verify: bool = True):
        self.weight_dir = weight_dir  # folder of the weight files; None: the caller's default
        self.user_memory = {}  # file name -> (device address, size in bytes)
        self.verify = verify  # sha256 of every weight; lengths are always checked
        for name, buf in dict(user_memory or {}).items():
            if hasattr(buf, "addr") and hasattr(buf, "nbytes"):  # a DeviceBuffer
                buf = (buf.addr, buf.nbytes)
            try:
                addr, size = (int(v) for v in buf)
            except (TypeError, ValueError):
                raise GeError(f"external weight memory for '{name}' must be (address, size) or a DeviceBuffer, "
                              f"got {buf!r}") from None
            self.user_memory[name] = (addr, size)


class _Loaded:
    __slots__ = ("addr", "nbytes", "path", "refs", "verified")

    def __init__(self, addr: int, nbytes: int, path: str, refs: int, verified: set):
        self.addr, self.nbytes, self.path, self.refs = addr, nbytes, path, refs
        self.verified = verified  # WeightChecks whose sha256 was checked


class ExternalWeightManager:
    def __init__(self):
        self._files: dict[tuple, _Loaded] = {}
        self._lock = _thread.allocate_lock()  # held while a file loads: a second user waits, then shares

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


class PlacedFiles:
    """The device memory of one model's weight files (PreProcessFileConstants): per file its
    address and where it came from; `keys` are what it holds in the session's manager."""

    def __init__(self):
        self.bases: dict = {}  # file name -> device address
        self.sources: dict = {}  # file name -> "user" | "file" | "shared"
        self.keys: list = []

    def release(self, manager: "ExternalWeightManager") -> None:
        for key in self.keys:  # user memory is the user's: never freed here
            manager.release(key)
        self.keys.clear()


def place_weight_files(model_name: str, device, files: list[tuple[str, int, list[WeightCheck]]],
                       config: ExternalWeightConfig, manager: ExternalWeightManager) -> PlacedFiles:
    """Device memory for each (file name, bytes, weights in it): the user's buffer when one was set
    for that file (it wins, as in GE), else the session's copy of the file, loaded once in chunks and
    shared by every model using it. On failure nothing stays acquired."""
    unknown = sorted(set(config.user_memory) - {name for name, _, _ in files})
    if unknown:
        raise GeError(f"model '{model_name}': external weight memory was given for '{unknown[0]}', which the "
                      f"model does not use (its weight files: {', '.join(n for n, _, _ in files) or 'none'})")
    placed = PlacedFiles()
    try:
        for name, nbytes, checks in files:
            if name in config.user_memory:
                addr, source = _user_memory(model_name, device, name, nbytes, config.user_memory[name]), "user"
            elif config.weight_dir is None:
                raise GeError(f"model '{model_name}' keeps its weights in external files (e.g. '{name}'): load it "
                              "with their folder (weight_dir) or with device memory for each file")
            else:
                key, addr, shared = manager.acquire(device, config.weight_dir, name, nbytes, checks, config.verify)
                placed.keys.append(key)
                source = "shared" if shared else "file"
            placed.bases[name], placed.sources[name] = addr, source
    except BaseException:
        placed.release(manager)
        raise
    return placed


def _user_memory(model_name: str, device, name: str, nbytes: int, given: tuple) -> int:
    """aclmdlSetExternalWeightAddress: the user's device buffer already holds the file's bytes."""
    addr, size = given
    if size < nbytes:
        raise GeError(f"model '{model_name}': the memory given for weight file '{name}' is {size} bytes, "
                      f"the file needs {nbytes}")
    try:
        device.block(addr, nbytes)
    except DeviceError:
        raise GeError(f"model '{model_name}': the memory given for weight file '{name}' ({addr:#x}, {size} bytes) "
                      f"is not {device.name} device memory") from None
    return addr
