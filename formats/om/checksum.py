"""The OM's checksums: `body_checksum` (format 1.9), xxh3_128 of the model data, and the sha256 of
the header (`header_checksum`) and, before 1.9, of the model data (`checksum`).

The body holds the inline weights (440 MB for BERT-base): sha256 reads them at 1.6 GB/s on one core
with SHA extensions, xxh3_128 at 29 GB/s (measured on this machine), so the check of a mapped file
costs about what faulting its pages in costs. It guards against corruption (a flipped bit, a truncated copy, an
edit made without re-signing), as sha256 did here: neither is a signature, anyone can recompute
either. External weight files keep their sha256 (named `weight_<sha256>`, as in GE)."""
from __future__ import annotations

import hashlib

import xxhash


def body_digest():
    """A running xxh3_128 of model data: update(bytes-like) as it passes, digest() at the end."""
    return xxhash.xxh3_128()


def body_checksum(data) -> bytes:
    return xxhash.xxh3_128(data).digest()


def sha256(data) -> bytes:
    return hashlib.sha256(data).digest()
