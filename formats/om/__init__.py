"""The OM file (format v1, msgpack): GE's offline model layout — header with ModelFileHeader's
fields, a partition table, MODEL_DEF / TASK_INFO / WEIGHTS_DATA partitions. See docs/om-format.md."""
from .reader import header_info, read_om
from .schema import FORMAT_VERSION, MAGIC
from .writer import om_bytes, write_om

__all__ = ["read_om", "write_om", "om_bytes", "header_info", "FORMAT_VERSION", "MAGIC"]
