"""The hybrid executor's impls (update_impl's results): a kernel built for one node's input shapes,
and the cache of them a model's contexts share, least recently used first out."""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..kernels.epilogue import Epilogue
from ..model.errors import GeError

#: impls the cache keeps by default (OpenVINO CPU's runtime cache capacity); the least recently
#: used one goes when a new one comes in beyond it
DEFAULT_CACHE_SIZE = 5000


class Impl:
    """A cached kernel for one (node, input shapes, shape values): out_metas None = data-dependent;
    `empty`: every output the node has holds no element (the node is skipped); `family`: for a
    shape-agnostic kernel serving these shapes, the (dtype, rank) or None per input it serves (a
    context serves the node's next new shapes of that family from it directly: HybridContext._served)."""
    __slots__ = ("kernel", "out_metas", "workspace", "epilogue", "empty", "family")

    def __init__(self, kernel, out_metas: list | None, workspace: int, epilogue: Epilogue | None = None,
                 empty: bool = False, family: tuple | None = None):
        self.kernel, self.out_metas, self.workspace = kernel, out_metas, workspace
        self.epilogue = epilogue  # fused activations, in place on output 0
        self.empty, self.family = empty, family


class ImplCache:
    """The impl cache: least recently used first out beyond `capacity` entries (0: nothing kept).
    Callers hold `lock` around get and put: contexts of several threads share it."""

    def __init__(self, capacity: int = DEFAULT_CACHE_SIZE):
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise GeError(f"impl cache size must be an integer >= 0, got {capacity!r}")
        self.capacity = capacity
        self.lock = threading.Lock()
        self._entries: OrderedDict[tuple, Impl] = OrderedDict()

    def get(self, key: tuple) -> Impl | None:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
        return found

    def put(self, key: tuple, impl: Impl) -> int:
        """Keep `impl`; returns how many entries were evicted for it."""
        self._entries[key] = impl
        self._entries.move_to_end(key)
        evicted = 0
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
            evicted += 1
        return evicted

    def __len__(self) -> int:
        return len(self._entries)
