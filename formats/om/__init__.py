"""The OM file (format v1, msgpack): GE's offline model layout — header with ModelFileHeader's
fields, a partition table, MODEL_DEF / TASK_INFO / WEIGHTS_DATA partitions. See docs/om-format.md.

The writer is imported when first asked for (write_om, om_bytes): loading an OM needs only the
reader, and the writer's atomic file writing pulls in tempfile, shutil and random."""
from .reader import header_info, read_om
from .schema import FORMAT_VERSION, MAGIC

__all__ = ["read_om", "write_om", "om_bytes", "header_info", "FORMAT_VERSION", "MAGIC"]


def __getattr__(name: str):
    if name in ("write_om", "om_bytes"):
        from . import writer
        return getattr(writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
