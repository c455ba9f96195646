"""The OM's checksums: `body_checksum` (format 1.9), xxh3_128 of the model data, and the sha256 of
the header (`header_checksum`) and, before 1.9, of the model data (`checksum`).

The body holds the inline weights (440 MB for BERT-base): sha256 reads them at 1.6 GB/s on one core
with SHA extensions, xxh3_128 at 29 GB/s (measured on this machine), so the check of a mapped file
costs about what faulting its pages in costs. It guards against corruption (a flipped bit, a truncated copy, an
edit made without re-signing), as sha256 did here: neither is a signature, anyone can recompute
either. External weight files keep their sha256 (named `weight_<sha256>`, as in GE).

A header's sha256 (a few KiB) comes from CPython's own sha256 module where it has one: hashlib
loads OpenSSL (15-20 ms of every process that reads or writes an OM), worth it for big data only."""
from __future__ import annotations

import xxhash

try:  # CPython's built-in sha256: _sha2 from 3.12, _sha256 before
    from _sha2 import sha256 as _sha256
except ImportError:
    try:
        from _sha256 import sha256 as _sha256
    except ImportError:  # another Python: hashlib's
        from hashlib import sha256 as _sha256


def body_digest():
    """A running xxh3_128 of model data: update(bytes-like) as it passes, digest() at the end."""
    return xxhash.xxh3_128()


def body_checksum(data) -> bytes:
    return xxhash.xxh3_128(data).digest()


def sha256(data) -> bytes:
    if len(data) < _BIG:
        return _sha256(data).digest()
    import hashlib  # a pre-1.9 body: OpenSSL's sha256 is 3-4x faster
    return hashlib.sha256(data).digest()


_BIG = 1 << 20
