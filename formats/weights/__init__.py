"""External weight files (ATC --external_weight): the writer (one file per weight or one combined
file, written by 8 threads, atomically, deduplicated by sha256) and meta.json (hash -> file and
offset, updated under an exclusive file lock). Reading them at load is the runtime's job
(ge.core.runtime.weight_loader); the name rules both sides share are in ge.core.model.weight_files."""
from .meta import read_meta, update_meta
from .writer import THREADS, WrittenFile, write_weight_files

__all__ = ["write_weight_files", "WrittenFile", "read_meta", "update_meta", "THREADS"]
