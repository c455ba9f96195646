"""DynamicModel: the root model of an OM with dynamic shapes (GE's root graph + static submodels).

Plain data, like GeModel. Three modes:
- "hybrid": unknown dims or data-dependent shapes. `steps` interleave UNKNOWN nodes (run one by one
  by the hybrid executor) and KNOWN clusters (static GeModels run as V2 DavinciModel kernels).
- "range": as hybrid, but every input dim has a [lo, hi] range and every tensor a planned capacity
  (bytes at the largest shape): a run inside the range allocates nothing.
- "gears": one static GeModel per gear; no root nodes. The root's inputs and outputs are -1 in every
  dim the gears differ in (as ATC's descs), `attrs["gear_values"]` lists the gears (the values of the
  -1 dims), `attrs["gears"]` each gear's input shapes, and submodels[k] gear k's own IO descs.
Every weight (of root nodes and of every submodel) lives once in `weight_data`, or once in the
external weight files of `weight_files`; submodels carry no weight bytes of their own, their weight
descs are offsets into this shared blob or into those files.
Control flow (hybrid mode): If/Loop/Scan nodes are UNKNOWN nodes whose subgraphs are DynamicModels
in `subgraphs`, sharing the root's static submodels and weights.
"""
from __future__ import annotations

import numpy as np

from .ge_model import GeModel, Model, WeightDesc
from .record import record

HYBRID, RANGE, GEARS = "hybrid", "range", "gears"
MAX_GEARS = 100  # ATC's limit on the gears of one model
#: the dtype name of string tensors (arrays of Python str: host values, no layout)
STRING = "object"
MODES = (HYBRID, RANGE, GEARS)
UNKNOWN_DIM = -1  # a dim only known at run time, as ATC spells it


@record
class DynTensor:
    """A root input/output: dims are ints, -1 where unknown; `ranges` [[lo, hi]] per dim in range mode."""
    name: str
    dtype: str
    shape: tuple
    ranges: tuple = ()
    #: "tensor", or a value with no layout held on the host: "sequence" (a list of `dtype` arrays),
    #: "optional" (an array or None), "optional_sequence" (a list or None); their shape is (-2,)
    kind: str = "tensor"

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize

    @property
    def on_host(self) -> bool:
        """A value the hybrid executor holds on the host: not a tensor, or a string tensor."""
        return self.kind != "tensor" or self.dtype == STRING


def gear_descs(per_gear: list) -> list[DynTensor]:
    """The root's IO of a gears model from each gear's IO descs (lists of name/dtype/shape): a dim
    is -1 where the gears differ."""
    return [DynTensor(first.name, first.dtype, tuple(d if all(g[k].shape[j] == d for g in per_gear) else UNKNOWN_DIM
                                                    for j, d in enumerate(first.shape)))
            for k, first in enumerate(per_gear[0])]


@record
class DynNode:
    """An UNKNOWN-shape node, run by the hybrid executor."""
    name: str
    op_type: str
    domain: str
    opset: int
    attrs: dict
    inputs: tuple  # tensor names ("" for an absent optional input)
    outputs: tuple
    dtypes: tuple  # dtype name per output ("" when unknown before running)
    #: control flow: (attribute name, index into the root's `subgraphs`) per subgraph attribute
    subgraphs: tuple = ()
    #: per output, its kind when any output is not a tensor (see DynTensor.kind), else ()
    kinds: tuple = ()


KINDS = ("tensor", "sequence", "optional", "optional_sequence")


@record
class Cluster:
    """One partition of the root graph: what `ge inspect` shows (nodes, KNOWN/UNKNOWN and why)."""
    index: int
    kind: str  # "KNOWN" | "UNKNOWN"
    nodes: tuple  # node names, original graph
    reason: str  # why UNKNOWN (first node's reason), or "" for KNOWN
    submodel: int = -1  # its GeModel for KNOWN clusters


@record
class Step:
    """Execution order of the root graph: ("node", i) runs nodes[i]; ("submodel", j) runs submodels[j]."""
    kind: str
    index: int


class DynamicModel(Model):
    def __init__(self, name: str, mode: str, inputs: list[DynTensor], outputs: list[DynTensor], nodes: list[DynNode],
                 steps: list[Step], clusters: list[Cluster], submodels: list[GeModel],
                 weights: list[WeightDesc], weight_data: bytes | memoryview = b"", soc_version: str = "Ascend-sim",
                 opset: int = 17, atc_cmdline: str = "", attrs: dict | None = None,
                 subgraphs: list[DynamicModel] | None = None, weight_files: dict | None = None,
                 string_constants: dict | None = None):
        self.name, self.mode, self.inputs, self.outputs = name, mode, inputs, outputs
        self.nodes, self.steps, self.clusters, self.submodels = nodes, steps, clusters, submodels
        self.weights = weights  # the constants root nodes read (offsets into weight_data)
        self.weight_data = weight_data
        self.soc_version, self.opset, self.atc_cmdline = soc_version, opset, atc_cmdline
        #: gears, capacities (range), static_model_ops_lower_limit, ...
        self.attrs = {} if attrs is None else attrs
        #: the subgraphs of control-flow nodes (If branches, Loop and Scan bodies, nested ones too), each a
        #: hybrid DynamicModel whose steps run the root's `submodels` and whose weight descs point into the
        #: root's weight_data (their own `submodels`, `subgraphs` and weight_data are empty); the last
        #: attrs["captures"] inputs are the outer values the node captures. Root models only.
        self.subgraphs = [] if subgraphs is None else subgraphs
        #: --external_weight 1|2: the weight files the root and every submodel share, name -> bytes (root
        #: only); a weight desc with `file` lives at `offset` of that file, the others in weight_data
        self.weight_files = {} if weight_files is None else weight_files
        #: the string constants its nodes read (object arrays of str: no bytes in the weight blob)
        self.string_constants = {} if string_constants is None else string_constants

    @property
    def weight_size(self) -> int:
        return len(self.weight_data)

    @property
    def memory_size(self) -> int:
        """Work memory known at compile time: the largest submodel (gears), the one arena (range), or
        all submodels (hybrid: it allocates the rest at run time)."""
        sizes = [m.memory_size for m in self.submodels]
        if self.mode == GEARS:
            return max(sizes, default=0)
        if "arena" in self.attrs:  # range: submodels' FM and workspace live in the one arena
            return self.attrs["arena"]["size"]
        return sum(sizes) + sum(self.attrs.get("capacities", {}).values())
