"""A generated table (attribute_table.py, type_table.py) held as JSON text per op and decoded when the
op is first looked up: a process decodes only the ops its model has (decoding every op at import was
~20 M instructions of each `ge atc` and each load), and a string constant costs nothing to compile
where bytecode is not cached, where the same table as literals took 15-30 ms."""
from __future__ import annotations

from collections.abc import Callable, Mapping


class JsonTable(Mapping):
    def __init__(self, texts: dict[str, str], decode: Callable):
        self._texts, self._decode, self._decoded = texts, decode, {}

    def __getitem__(self, key: str):
        value = self._decoded.get(key)
        if value is None:
            import json  # (at the first lookup: a module the first import need not pay)
            value = self._decoded[key] = self._decode(json.loads(self._texts[key]))
        return value

    def __iter__(self):
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)
