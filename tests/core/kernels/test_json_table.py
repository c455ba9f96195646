"""json_table.py: the generated tables' texts decode as json.loads decodes them (json_table decodes
with json's C scanner alone, not importing json)."""
from __future__ import annotations

import json

from ge.core.kernels import attribute_table, type_table
from ge.core.kernels.json_table import _loads


def test_every_entry_decodes_as_json_loads():
    for table in (attribute_table.TABLE, *type_table.TABLE.values()):
        for op, text in table._texts.items():
            assert repr(_loads(text)) == repr(json.loads(text)), op


def test_values_json_loads_decodes():
    text = '{"a": [NaN, -Infinity, 1e5, -2, "\\u00e9\\n", null, true, false], "b": {}}'
    assert repr(_loads(text)) == repr(json.loads(text))
