"""ATC's --external_weight: move weights out of the OM (the seed's Const -> FileConstant).

A pure function of a built GeModel. Weights of at least INLINE_LIMIT bytes leave the inline
WEIGHT blob for external files; each file becomes a FILE_CONSTANT allocation, the image of that
file in device memory. Task arguments keep their (allocation, offset) form, so the runtime can
place each file on its own: load it, share it with another model, or take it from the user.

    mode 1: one file per distinct weight, weight_<sha256>, offset 0
    mode 2: one file <model>_weight_combined, distinct weights at 512-byte aligned offsets
"""
from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from ..errors import GeError, GraphError
from ..ge_model import FILE_CONSTANT, WEIGHT_ID, Allocation, Arg, GeModel, WeightDesc
from ..weight_files import (COMBINED, COMBINED_ALIGNMENT, INDIVIDUAL, INLINE, INLINE_LIMIT, MODES, combined_name,
                            individual_name)
from .arena import align


@dataclass(frozen=True)
class WeightFilePlan:
    """One file to write: `pieces` are (offset, sha256, bytes) of its distinct weights, by
    offset; the gaps between them are zeros."""
    name: str
    nbytes: int
    pieces: tuple


def externalize(model: GeModel, mode: int) -> tuple[GeModel, list[WeightFilePlan]]:
    """The model with its large weights in external files, and the files to write."""
    if mode not in MODES:
        raise GeError(f"--external_weight={mode} is not supported; choose "
                      + ", ".join(f"{k} ({v})" for k, v in MODES.items()))
    if mode == INLINE:
        return model, []
    data = memoryview(model.weight_data).cast("B") if len(model.weight_data) else memoryview(b"")
    outside = [w for w in model.weights if w.nbytes >= INLINE_LIMIT]
    if not outside:
        return dataclasses.replace(model, attrs=dict(model.attrs, external_weight=mode)), []

    first_file_id = len(model.allocations)
    files: dict[str, list] = {}  # file name -> [allocation id, size, {sha: offset}, pieces]
    placed: dict[str, tuple[str, int, str]] = {}  # weight name -> (file, offset, sha256)
    for w in outside:
        raw = data[w.offset:w.offset + w.nbytes]
        sha = hashlib.sha256(raw).hexdigest()
        name = individual_name(sha) if mode == INDIVIDUAL else combined_name(model.name)
        f = files.setdefault(name, [first_file_id + len(files), 0, {}, []])
        if sha not in f[2]:  # identical weights share one copy (file in mode 1, slot in mode 2)
            offset = align(f[1], COMBINED_ALIGNMENT) if mode == COMBINED else 0
            f[2][sha] = offset
            f[3].append((offset, sha, raw))
            f[1] = offset + w.nbytes
        placed[w.name] = (name, f[2][sha], sha)

    # the inline blob keeps only the small constants, packed again
    blob = bytearray()
    weights, moved = [], {}  # moved: (old offset, nbytes) -> (allocation, offset)
    for w in model.weights:
        if w.name in placed:
            name, offset, sha = placed[w.name]
            alloc = files[name][0]
            weights.append(dataclasses.replace(w, offset=offset, file=name, file_offset=offset, sha256=sha,
                                               allocation=alloc))
        else:
            offset = align(len(blob))
            blob.extend(bytes(offset - len(blob)))
            blob.extend(data[w.offset:w.offset + w.nbytes])
            alloc = WEIGHT_ID
            weights.append(dataclasses.replace(w, offset=offset))
        moved[(w.offset, w.nbytes)] = (alloc, offset)
    blob.extend(bytes(align(len(blob)) - len(blob)))

    allocations = [dataclasses.replace(model.allocations[WEIGHT_ID], size=len(blob)), *model.allocations[1:]]
    allocations += [Allocation(alloc, FILE_CONSTANT, size, file=name) for name, (alloc, size, _, _) in files.items()]

    def remap(a: Arg | None, where: str) -> Arg | None:
        if a is None or a.allocation != WEIGHT_ID:
            return a
        key = (a.offset, a.meta.nbytes)
        if key not in moved:
            raise GraphError(f"{where}: WEIGHT argument at offset {a.offset} ({a.meta.nbytes} bytes) is not a weight")
        alloc, offset = moved[key]
        return dataclasses.replace(a, allocation=alloc, offset=offset)

    tasks = [dataclasses.replace(t, inputs=tuple(remap(a, f"node '{t.node}'") for a in t.inputs),
                                 outputs=tuple(remap(a, f"node '{t.node}'") for a in t.outputs))
             for t in model.tasks]
    tensors = []
    for t in model.tensors:
        if t.allocation == WEIGHT_ID:
            alloc, offset = moved.get((t.offset, t.nbytes), (None, None))
            if alloc is None:
                raise GraphError(f"tensor '{t.name}' at WEIGHT offset {t.offset} is not a weight")
            t = dataclasses.replace(t, allocation=alloc, offset=offset)
        tensors.append(t)

    plans = [WeightFilePlan(name, size, tuple(pieces)) for name, (_, size, _, pieces) in files.items()]
    attrs = dict(model.attrs, weight_size=len(blob), external_weight=mode,
                 external_weight_bytes=sum(p.nbytes for p in plans))
    return dataclasses.replace(model, allocations=allocations, tasks=tasks, tensors=tensors, weights=weights,
                               weight_data=bytes(blob), attrs=attrs), plans
