"""A generated table (attribute_table.py, type_table.py) held as JSON text per op and decoded when the
op is first looked up: a process decodes only the ops its model has (decoding every op at import was
~20 M instructions of each `ge atc` and each load), and a string constant costs nothing to compile
where bytecode is not cached, where the same table as literals took 15-30 ms."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import SimpleNamespace


class JsonTable(Mapping):
    def __init__(self, texts: dict[str, str], decode: Callable):
        self._texts, self._decode, self._decoded = texts, decode, {}

    def __getitem__(self, key: str):
        value = self._decoded.get(key)
        if value is None:
            value = self._decoded[key] = self._decode(_loads(self._texts[key]))
        return value

    def __iter__(self):
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)


def _json_loads() -> Callable[[str], object]:
    """json.loads for the tables' texts (json.dumps's, ge's own): json's C scanner alone where Python has
    it. The json package is four modules, ~38 M instructions to compile in each process (`ge atc` and
    the load both look ops up) where the standard library has no cached bytecode, as in Python's
    container images; its scanner is one compiled extension. The context is json.loads's defaults."""
    try:
        from _json import make_scanner
    except ImportError:  # a Python without json's accelerator
        from json import loads
        return loads
    scan = make_scanner(SimpleNamespace(strict=True, object_hook=None, object_pairs_hook=None, parse_float=float,
                                        parse_int=int, parse_constant=float))
    return lambda text: scan(text, 0)[0]


_loads = _json_loads()
