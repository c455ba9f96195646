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
from dataclasses import dataclass, field

from ..errors import GeError, GraphError
from ..ge_model import FILE_CONSTANT, WEIGHT_ID, Allocation, Arg, GeModel
from ..weight_files import (COMBINED, COMBINED_ALIGNMENT, INDIVIDUAL, INLINE, INLINE_LIMIT, MODES, WeightFilePlan,
                            combined_name, individual_name)
from .arena import align


def externalize(model: GeModel, mode: int) -> tuple[GeModel, list[WeightFilePlan]]:
    """The model with its large weights in external files, and the files to write."""
    if mode not in MODES:
        raise GeError(f"--external_weight={mode} is not supported; choose "
                      + ", ".join(f"{k} ({v})" for k, v in MODES.items()))
    if mode == INLINE:
        return model, []
    data = memoryview(model.weight_data).cast("B") if len(model.weight_data) else memoryview(b"")
    files = _place([w for w in model.weights if w.nbytes >= INLINE_LIMIT], data, mode, model.name,
                   first_id=len(model.allocations))

    home = {name: f for f in files.values() for name in f.weights}
    blob = bytearray()  # the inline blob keeps only the small constants, packed again
    weights, moved = [], {}  # moved: (old offset, nbytes) -> (allocation, new offset)
    for w in model.weights:
        f = home.get(w.name)
        if f is not None:
            offset, sha = f.weights[w.name]
            weights.append(dataclasses.replace(w, offset=offset, file=f.name, file_offset=offset, sha256=sha,
                                               allocation=f.allocation))
            moved[(w.offset, w.nbytes)] = (f.allocation, offset)
        else:
            offset = align(len(blob))
            blob.extend(bytes(offset - len(blob)))
            blob.extend(data[w.offset:w.offset + w.nbytes])
            weights.append(dataclasses.replace(w, offset=offset))
            moved[(w.offset, w.nbytes)] = (WEIGHT_ID, offset)
    blob.extend(bytes(align(len(blob)) - len(blob)))

    allocations = [dataclasses.replace(model.allocations[WEIGHT_ID], size=len(blob)), *model.allocations[1:]]
    allocations += [Allocation(f.allocation, FILE_CONSTANT, f.nbytes, file=f.name) for f in files.values()]
    plans = [WeightFilePlan(f.name, f.nbytes, tuple(f.pieces)) for f in files.values()]
    attrs = dict(model.attrs, weight_size=len(blob), external_weight=mode,
                 external_weight_bytes=sum(p.nbytes for p in plans))
    return dataclasses.replace(model, allocations=allocations, tasks=_remap_tasks(model.tasks, moved),
                               tensors=_remap_tensors(model.tensors, moved), weights=weights,
                               weight_data=bytes(blob), attrs=attrs), plans


@dataclass
class _File:
    name: str
    allocation: int
    nbytes: int = 0
    slots: dict = field(default_factory=dict)  # sha256 -> offset: identical weights share one copy
    weights: dict = field(default_factory=dict)  # weight name -> (offset, sha256)
    pieces: list = field(default_factory=list)  # (offset, sha256, bytes) per slot


def _place(outside: list, data: memoryview, mode: int, model_name: str, first_id: int) -> dict[str, _File]:
    """Files and offsets: mode 1 a file per distinct weight, mode 2 one file of 512-byte slots."""
    files: dict[str, _File] = {}
    for w in outside:
        raw = data[w.offset:w.offset + w.nbytes]
        sha = hashlib.sha256(raw).hexdigest()
        name = individual_name(sha) if mode == INDIVIDUAL else combined_name(model_name)
        f = files.setdefault(name, _File(name, first_id + len(files)))
        if sha not in f.slots:
            offset = align(f.nbytes, COMBINED_ALIGNMENT) if mode == COMBINED else 0
            f.slots[sha] = offset
            f.pieces.append((offset, sha, raw))
            f.nbytes = offset + w.nbytes
        f.weights[w.name] = (f.slots[sha], sha)
    return files


def _remap_tasks(tasks: list, moved: dict) -> list:
    def remap(a: Arg | None, where: str) -> Arg | None:
        if a is None or a.allocation != WEIGHT_ID:
            return a
        key = (a.offset, a.meta.nbytes)
        if key not in moved:
            raise GraphError(f"{where}: WEIGHT argument at offset {a.offset} ({a.meta.nbytes} bytes) is not a weight")
        alloc, offset = moved[key]
        return dataclasses.replace(a, allocation=alloc, offset=offset)

    return [dataclasses.replace(t, inputs=tuple(remap(a, f"node '{t.node}'") for a in t.inputs),
                                outputs=tuple(remap(a, f"node '{t.node}'") for a in t.outputs)) for t in tasks]


def _remap_tensors(tensors: list, moved: dict) -> list:
    out = []
    for t in tensors:
        if t.allocation == WEIGHT_ID:
            if (t.offset, t.nbytes) not in moved:
                raise GraphError(f"tensor '{t.name}' at WEIGHT offset {t.offset} is not a weight")
            alloc, offset = moved[(t.offset, t.nbytes)]
            t = dataclasses.replace(t, allocation=alloc, offset=offset)
        out.append(t)
    return out
