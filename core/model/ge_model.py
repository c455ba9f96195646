"""GeModel: what the compiler produces, the OM file stores and the runtime loads.

Everything here is plain data (ints, strings, tuples, bytes), so the OM format can serialize it
field by field and a reader can validate it before trusting a single size or offset. The immutable
ones are records (named tuples, record.py), cheap to define at every import.

Memory is addressed GE's way (docs/design.md, Memory): a task argument is (allocation id, offset); the runtime
keeps an active base address per allocation and resolves arguments into the args table.
"""
from __future__ import annotations

import math
from operator import mul

import numpy as np

from .ir import Meta
from .record import record

# allocation kinds (GE's logical memory allocation types) and the region each lives in
WEIGHT, FEATURE_MAP, WORKSPACE, INPUT, OUTPUT = "WEIGHT", "FEATURE_MAP", "WORKSPACE", "INPUT", "OUTPUT"
# one per external weight file: the image of that file in device memory (GE's FileConstant memory)
FILE_CONSTANT = "FILE_CONSTANT"
ALLOCATION_KINDS = (WEIGHT, FEATURE_MAP, WORKSPACE, INPUT, OUTPUT, FILE_CONSTANT)
WEIGHT_KINDS = (WEIGHT, FILE_CONSTANT)  # fixed after load, read by kernels as constants
#: every planned tensor and workspace region starts at a multiple of this (a cache line; what numpy's
#: SIMD loops like)
ALIGNMENT = 64
# fixed ids of the three model-wide allocations; inputs, outputs and weight files follow
WEIGHT_ID, FM_ID, WORKSPACE_ID = 0, 1, 2


@record
class Allocation:
    """One logical allocation: a base address the runtime can move (GE's logical_mem_allocations_)."""
    id: int
    kind: str
    size: int
    io_index: int = -1  # which model input/output, for INPUT/OUTPUT
    file: str = ""  # the weight file (a plain name in the weight folder), for FILE_CONSTANT


@record
class TensorDesc:
    """A model input or output as the user sees it (GE's IO desc)."""
    name: str
    dtype: str
    shape: tuple
    allocation: int

    @property
    def meta(self) -> Meta:
        return Meta(_dtype(self.dtype), tuple(self.shape))

    @property
    def nbytes(self) -> int:
        return self.meta.nbytes


@record
class TensorPlan:
    """Where a tensor lives: one row of the logical allocation table. Aliases (Reshape...) share
    their root's bytes; `first`/`last` are the task steps that produce and last read it."""
    name: str
    allocation: int
    offset: int
    nbytes: int
    dtype: str
    shape: tuple
    first: int
    last: int
    alias_of: str = ""


_DTYPES: dict = {}  # dtype name -> np.dtype


def _dtype(name: str) -> np.dtype:
    """np.dtype(name), cached: np.dtype of a name is ~1 us, and a load asks for a few thousand (metas)."""
    dtype = _DTYPES.get(name)
    if dtype is None:
        dtype = _DTYPES[name] = np.dtype(name)
    return dtype


@record
class Arg:
    """A task argument: a tensor at (allocation, offset), seen with a dtype and shape."""
    allocation: int
    offset: int
    dtype: str
    shape: tuple

    @property
    def meta(self) -> Meta:
        return Meta(_dtype(self.dtype), tuple(self.shape))


@record
class TaskDef:
    """One kernel launch, fixed at compile time (GE's TaskDef). Inputs and outputs may be None
    (an absent optional input, an omitted optional output): positions are kept."""
    node: str
    op_type: str
    domain: str
    opset: int
    attrs: dict
    inputs: tuple  # of Arg | None
    outputs: tuple  # of Arg | None
    workspace: int = 0  # scratch bytes, at offset 0 of the WORKSPACE allocation

    @property
    def args(self) -> list[Arg]:
        """Arguments in args-table order: present inputs, present outputs, then the workspace."""
        scratch = [Arg(WORKSPACE_ID, 0, "uint8", (self.workspace,))] if self.workspace else []
        return [a for a in self.inputs + self.outputs if a is not None] + scratch


@record
class WeightDesc:
    """A constant at (allocation, offset) on the device. Inline ones live in the WEIGHT allocation
    (bytes in WEIGHTS_DATA); external ones in their file's FILE_CONSTANT allocation, at
    `file_offset` of `file` (== offset: the allocation is the file's image), checked by `sha256`."""
    name: str
    dtype: str
    shape: tuple
    offset: int
    nbytes: int
    file: str = ""
    file_offset: int = 0
    sha256: str = ""
    allocation: int = 0  # WEIGHT_ID, or the FILE_CONSTANT allocation of `file`


class WeightLayout:
    """WEIGHTS_DATA before it is one buffer: each weight's bytes at its offset in `nbytes` bytes,
    zeros between. `ge atc` streams it into the OM as it is (a weight is copied once, straight into
    the file); `join()` builds the one buffer that a model loaded without a file needs."""
    __slots__ = ("nbytes", "pieces")

    def __init__(self, nbytes: int, pieces: tuple):
        self.nbytes = nbytes
        self.pieces = pieces  # (offset, C-contiguous array), by offset

    def __len__(self) -> int:
        return self.nbytes

    def chunks(self):
        """The partition's bytes in file order: weights and the zero padding between them."""
        pos = 0
        for offset, a in self.pieces:
            if offset > pos:
                yield memoryview(bytes(offset - pos))
            yield memoryview(a.reshape(-1).view(np.uint8))
            pos = offset + a.nbytes
        if self.nbytes > pos:
            yield memoryview(bytes(self.nbytes - pos))

    def join(self) -> memoryview:
        """One read-only buffer, aligned as device memory (usable in place)."""
        raw = np.zeros(self.nbytes + ALIGNMENT, np.uint8)
        blob = raw[-raw.ctypes.data % ALIGNMENT:][:self.nbytes]
        for offset, a in self.pieces:
            blob[offset:offset + a.nbytes] = a.reshape(-1).view(np.uint8)
        blob.flags.writeable = False  # the OM's bytes: immutable, as read_om's are
        return memoryview(blob)


@record
class DataflowPlan:
    """The memory plan for any task order the data dependencies allow (the dataflow and parallel
    executors), made by the compiler (core/compile/dataflow_plan.py) and stored in the OM."""
    deps: tuple  # per task: the earlier tasks it waits for
    fm_offsets: tuple  # per argument (args-table order): its offset in the feature map, or -1 to keep its place
    fm_size: int  # feature maps and workspaces together
    lower_bound: int


# argument roles in the args table
ARG_IN, ARG_OUT, ARG_SCRATCH = 0, 1, 2
_ITEMSIZES: dict = {}  # dtype name -> its itemsize: np.dtype's, asked once per name (a Meta per argument costs more)


def arg_rows(tasks) -> tuple[np.ndarray, ...]:
    """Every task argument in args-table order, as int64 columns (allocation, offset, task, role, nbytes)."""
    args, task, role = [], [], []
    for t, td in enumerate(tasks):
        n_in = len(td.inputs) - td.inputs.count(None)
        n_out = len(td.outputs) - td.outputs.count(None)
        here = td.args
        args += here
        task += [t] * len(here)
        role += [ARG_IN] * n_in + [ARG_OUT] * n_out + [ARG_SCRATCH] * (len(here) - n_in - n_out)
    if not args:
        return tuple(np.empty(0, np.int64) for _ in range(5))
    alloc, offset, dtypes, shapes = zip(*args)  # (an Arg is a tuple of these)
    for dtype in set(dtypes).difference(_ITEMSIZES):
        _ITEMSIZES[dtype] = np.dtype(dtype).itemsize
    nbytes = list(map(mul, map(_ITEMSIZES.__getitem__, dtypes), map(math.prod, shapes)))
    return tuple(np.array(c, np.int64) for c in (alloc, offset, task, role, nbytes))


class Model:
    """What GeModel and DynamicModel share: plain mutable fields, set by their __init__ (not dataclasses,
    whose generated methods would be compiled at every import, the load's included)."""

    def replace(self, **changes):
        """A shallow copy with some fields changed, as dataclasses.replace."""
        unknown = sorted(set(changes) - set(vars(self)))
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field '{unknown[0]}'")
        import copy  # (here: ge atc replaces no model unless its weights go to files)
        new = copy.copy(self)
        vars(new).update(changes)
        return new


class GeModel(Model):
    def __init__(self, name: str, inputs: list[TensorDesc], outputs: list[TensorDesc], allocations: list[Allocation],
                 tensors: list[TensorPlan], tasks: list[TaskDef], weights: list[WeightDesc],
                 weight_data: bytes | memoryview | WeightLayout = b"", soc_version: str = "Ascend-sim", opset: int = 17,
                 atc_cmdline: str = "", attrs: dict | None = None, dataflow: DataflowPlan | None = None):
        self.name, self.inputs, self.outputs = name, inputs, outputs
        self.allocations, self.tensors, self.tasks, self.weights = allocations, tensors, tasks, weights
        #: inline WEIGHTS_DATA (empty when weights are external); a WeightLayout only between build(...,
        #: join_weights=False) and the OM writer
        self.weight_data = weight_data
        self.soc_version, self.opset, self.atc_cmdline = soc_version, opset, atc_cmdline
        self.attrs = {} if attrs is None else attrs  # memory_size, weight_size, lower_bound, ops, ...
        self.dataflow = dataflow

    def allocation(self, kind: str) -> Allocation:
        return next(a for a in self.allocations if a.kind == kind)

    @property
    def weight_size(self) -> int:
        """Bytes of the inline WEIGHT allocation (external weight files come on top)."""
        return self.allocations[WEIGHT_ID].size

    @property
    def weight_files(self) -> list[Allocation]:
        """The FILE_CONSTANT allocations, one per external weight file."""
        return [a for a in self.allocations if a.kind == FILE_CONSTANT]

    @property
    def memory_size(self) -> int:
        """Feature-map plus workspace bytes a context needs (ACL's work size)."""
        return self.allocations[FM_ID].size + self.allocations[WORKSPACE_ID].size
