"""ATC's --external_weight: move weights out of the OM (GE's Const -> FileConstant, docs/design.md).

Pure functions of a built model. Weights of at least INLINE_LIMIT bytes leave the inline WEIGHT
blob for external files; each file becomes a FILE_CONSTANT allocation, the image of that file in
device memory. Task arguments keep their (allocation, offset) form, so the runtime can place each
file on its own: load it, share it with another model, or take it from the user.

    mode 1: one file per distinct weight, weight_<sha256>, offset 0
    mode 2: one file <model>_weight_combined, distinct weights at 512-byte aligned offsets

A dynamic model (gears, ranges, unknown shapes) has one weight blob for its root and every
submodel; its weights go to one set of files the same way, each distinct weight once, and every
submodel gets a FILE_CONSTANT allocation for each file it reads.
"""
from __future__ import annotations

from ..model.dynamic_model import DynamicModel
from ..model.errors import GeError, GraphError
from ..model.ge_model import FILE_CONSTANT, WEIGHT_ID, Allocation, Arg, GeModel
from ..model.weight_files import (COMBINED, COMBINED_ALIGNMENT, INDIVIDUAL, INLINE, INLINE_LIMIT, MODES, WeightFilePlan,
                                  combined_name, individual_name)
from ..model.arena import align


def externalize(model: GeModel, mode: int) -> tuple[GeModel, list[WeightFilePlan]]:
    """The model with its large weights in external files, and the files to write."""
    if _inline(mode):
        return model, []
    layout = _Layout(model.weight_data, model.weights, mode, model.name)
    return layout.apply(model, own_blob=True), layout.plans


def externalize_dynamic(dyn: DynamicModel, mode: int) -> tuple[DynamicModel, list[WeightFilePlan]]:
    """A dynamic model with the large weights of its root, subgraphs and submodels in one set of
    external files (each distinct weight once), and the files to write."""
    if _inline(mode):
        return dyn, []
    descs = [*dyn.weights, *(w for sg in dyn.subgraphs for w in sg.weights), *(w for m in dyn.submodels for w in m.weights)]
    for w in descs:
        if w.file or w.allocation != WEIGHT_ID:
            raise GraphError(f"model '{dyn.name}': weight '{w.name}' is external already")
    layout = _Layout(dyn.weight_data, descs, mode, dyn.name)
    subgraphs = [sg.replace(weights=layout.root_descs(sg.weights)) for sg in dyn.subgraphs]
    submodels = [layout.apply(m, own_blob=False) for m in dyn.submodels]
    attrs = dict(dyn.attrs, external_weight=mode, external_weight_bytes=sum(p.nbytes for p in layout.plans))
    return dyn.replace(weights=layout.root_descs(dyn.weights), weight_data=layout.blob, attrs=attrs,
                       submodels=submodels, subgraphs=subgraphs,
                       weight_files={p.name: p.nbytes for p in layout.plans}), layout.plans


def _inline(mode: int) -> bool:
    if mode not in MODES:
        raise GeError(f"--external_weight={mode} is not supported; choose "
                      + ", ".join(f"{k} ({v})" for k, v in MODES.items()))
    return mode == INLINE


class _File:
    def __init__(self, name: str):
        self.name, self.nbytes = name, 0
        self.slots: dict = {}  # sha256 -> offset: identical weights share one copy
        self.pieces: list = []  # (offset, sha256, bytes) per slot


class _Layout:
    """Where each weight of one blob goes, keyed by its (offset, nbytes) in that blob: a slot of a
    file (large ones), or its new offset in the inline blob that keeps the small ones."""

    def __init__(self, weight_data, descs, mode: int, model_name: str):
        data = memoryview(weight_data).cast("B") if len(weight_data) else memoryview(b"")
        self.mode = mode
        self.files: dict[str, _File] = {}
        self.outside: dict[tuple, tuple[str, int, str]] = {}  # (offset, nbytes) -> (file, offset, sha256)
        self.inside: dict[tuple, int] = {}  # (offset, nbytes) -> offset in the new inline blob
        blob = bytearray()
        for w in descs:
            key = (w.offset, w.nbytes)
            if key in self.outside or key in self.inside:
                continue
            raw = data[w.offset:w.offset + w.nbytes]
            if w.nbytes >= INLINE_LIMIT:
                self.outside[key] = self._place(raw, model_name)
            else:
                offset = align(len(blob))
                blob.extend(bytes(offset - len(blob)))
                blob.extend(raw)
                self.inside[key] = offset
        blob.extend(bytes(align(len(blob)) - len(blob)))
        self.blob = bytes(blob)
        self.plans = [WeightFilePlan(f.name, f.nbytes, tuple(f.pieces)) for f in self.files.values()]

    def _place(self, raw, model_name: str) -> tuple[str, int, str]:
        """A file and offset: mode 1 a file per distinct weight, mode 2 one file of 512-byte slots."""
        import hashlib  # (OpenSSL's: loaded for external weights only)
        sha = hashlib.sha256(raw).hexdigest()
        name = individual_name(sha) if self.mode == INDIVIDUAL else combined_name(model_name)
        f = self.files.setdefault(name, _File(name))
        if sha not in f.slots:
            offset = align(f.nbytes, COMBINED_ALIGNMENT) if self.mode == COMBINED else 0
            f.slots[sha] = offset
            f.pieces.append((offset, sha, raw))
            f.nbytes = offset + len(raw)
        return name, f.slots[sha], sha

    def root_descs(self, weights) -> list:
        """A dynamic root's (or subgraph's) weight descs: an external one names its file and sits at
        `offset` of it; no allocation ids (the root has no allocation table)."""
        out = []
        for w in weights:
            key = (w.offset, w.nbytes)
            if key in self.outside:
                name, offset, sha = self.outside[key]
                out.append(w._replace(offset=offset, file=name, file_offset=offset, sha256=sha))
            else:
                out.append(w._replace(offset=self.inside[key]))
        return out

    def apply(self, model: GeModel, own_blob: bool) -> GeModel:
        """`model` reading its weights from the files (a FILE_CONSTANT allocation for each file it
        reads) and the new inline blob: its own (`own_blob`) or its dynamic root's."""
        ids: dict[str, int] = {}  # file -> its FILE_CONSTANT allocation in this model
        weights, moved = [], {}  # moved: (old offset, nbytes) -> (allocation, new offset)
        for w in model.weights:
            key = (w.offset, w.nbytes)
            if key in self.outside:
                name, offset, sha = self.outside[key]
                alloc = ids.setdefault(name, len(model.allocations) + len(ids))
                weights.append(w._replace(offset=offset, file=name, file_offset=offset, sha256=sha,
                                          allocation=alloc))
            else:
                alloc, offset = WEIGHT_ID, self.inside[key]
                weights.append(w._replace(offset=offset))
            moved[key] = (alloc, offset)
        allocations = [model.allocations[WEIGHT_ID]._replace(size=len(self.blob)), *model.allocations[1:]]
        allocations += [Allocation(alloc, FILE_CONSTANT, self.files[name].nbytes, file=name) for name, alloc in ids.items()]
        attrs = dict(model.attrs, weight_size=len(self.blob), external_weight=self.mode,
                     external_weight_bytes=sum(self.files[name].nbytes for name in ids))
        return model.replace(allocations=allocations, tasks=_remap_tasks(model.tasks, moved),
                             tensors=_remap_tensors(model.tensors, moved), weights=weights,
                             weight_data=self.blob if own_blob else b"", attrs=attrs)


def _remap_tasks(tasks: list, moved: dict) -> list:
    def remap(a: Arg | None, where: str) -> Arg | None:
        if a is None or a.allocation != WEIGHT_ID:
            return a
        key = (a.offset, a.meta.nbytes)
        if key not in moved:
            raise GraphError(f"{where}: WEIGHT argument at offset {a.offset} ({a.meta.nbytes} bytes) is not a weight")
        alloc, offset = moved[key]
        return a._replace(allocation=alloc, offset=offset)

    return [t._replace(inputs=tuple(remap(a, f"node '{t.node}'") for a in t.inputs),
                       outputs=tuple(remap(a, f"node '{t.node}'") for a in t.outputs)) for t in tasks]


def _remap_tensors(tensors: list, moved: dict) -> list:
    out = []
    for t in tensors:
        if t.allocation == WEIGHT_ID:
            if (t.offset, t.nbytes) not in moved:
                raise GraphError(f"tensor '{t.name}' at WEIGHT offset {t.offset} is not a weight")
            alloc, offset = moved[(t.offset, t.nbytes)]
            t = t._replace(allocation=alloc, offset=offset)
        out.append(t)
    return out
