"""The Kernel contract: one small class per ONNX op (as in onnx's reference evaluator).

A kernel object has two phases, and the compiler only ever sees the first:
- **planned** (construction, `prepare()`): from the node's attributes, its input metas (dtype +
  static shape), the values of its shape-carrying constant inputs (Reshape's shape, axes, pads)
  and a Backend (backend.py: the native kernels or the numpy plans, chosen by the caller, never a
  global), it checks the op and decides its output metas (`infer()`), whether it is an alias, and
  its plan and workspace (`workspace_nbytes()`). This is the op's spec: shape inference, constant
  folding and the builder use it, and no weight is read or packed here. Before prepare(), the
  framework checks the input types against the type constraints of the op's ONNX schema
  (type_constraints.py): prepare() checks only where ge implements fewer types than the schema.
- **loaded** (`load()`, by the runtime at model load): weights are packed into the layouts the
  plan wants (`pack()`), native calls prepared. Then the kernel is immutable and may be shared by
  several execution contexts. compute() loads a kernel on first use (constant folding evaluates
  ops; that is not packing weights into an OM).

- `compute(*xs)` is the reference path: plain numpy, allocates its results. The compiler uses
  it for constant folding and, through `infer`, for shapes.
- `run(xs, ys, ws)` is the planned path: it writes into the `ys` views (planned memory; None at
  an omitted optional output, as xs holds None at an absent optional input) and may use `ws`, a
  uint8 scratch view of `workspace_nbytes()` bytes. No Python loop over elements, pixels or channels. The default copies `compute`'s results into `ys`; hot ops override it.
  The runtime calls it with numpy's floating-point errors ignored (np.errstate is set once per
  execution, not per kernel: it costs microseconds).
- `upper_bound()` states the largest output metas when the values decide them (infer() raises
  ValueDependentError): NonZero of an [N, 4] input is at most [2, 4N]. Range plans size buffers by it.
- `infer()` returns the output metas; the default evaluates `compute` on zeros (and on the
  constant inputs), which is exact for every op whose output shape depends only on input
  shapes and constant values. Ops override it where that is cheap.
- Weight packs: a kernel that copies constant weights into another layout does it in pack(),
  through `self.shared_pack(layout, pack, *weights)`. Built with a pack cache (`packs`, the hybrid
  executor's WeightPacks, shared by the kernels of one model), a kernel built for another shape
  reuses the pack when the layout key is the same; without one (the static path) it just packs.
  The layout key names whatever the result depends on besides the weights (and the op type).
  Packs are read-only. A layout that is a view of the weight (a reshape) needs no pack.
- Shape-agnostic kernels (`shape_agnostic`, below): the hybrid executor serves every new shape of
  the same dtypes and ranks with the instance built for the first, its output shape given by
  `agnostic_output_shape`, and only when that instance's workspace_nbytes() is 0 or its class runs
  other shapes without one (`agnostic_without_workspace`).
"""
from __future__ import annotations

from functools import partial
from typing import Callable, Sequence

import numpy as np

from ..model.errors import GraphError, ValueDependentError
from ..model.ir import Meta
from . import backend as backends
from .backend import Backend
from .packs import WeightPacks
from .type_constraints import input_type_problem

#: np.copyto without its __array_function__ dispatch (numpy's C function: ~0.25 us a call for ~0.9),
#: for the copies made per call or per iteration (a bound Identity or Reshape, a Loop's state)
copyto = getattr(np.copyto, "_implementation", np.copyto)


class Kernel:
    op_type: str = ""
    domain: str = ""
    since: int = 1
    #: True when the output is input 0 reinterpreted with another shape (no task, no copy)
    alias: bool = False
    #: set by prepare() when every output is a contiguous part of input 0 (a Split along an axis with
    #: only dims of 1 before it): the byte offset of each output in input 0; the compiler makes them
    #: views of the input (no task, no copy), as `alias` does for one output
    part_offsets: list[int] | None = None
    #: True when run() is correct with ys[0] being xs[0] and no workspace: such an op can be fused
    #: into its producer as an epilogue applied in place
    in_place: bool = False
    #: the input whose bytes output 0 may take (the memory planner gives them when this task is that
    #: input's last reader): run() is correct with ys[0] being xs[output_over]; None: never
    output_over: int | None = None
    #: True when run() reads nothing of the shapes the kernel was built for (only xs, ys, the
    #: dtypes and attributes), needs no workspace, and has one output whose shape
    #: agnostic_output_shape() gives: one instance serves every shape of the same dtypes and ranks
    #: (the hybrid executor's shape-agnostic impl). Set only on classes checked to be so (the
    #: executor reads it from the class itself: subclasses restate it); an instance that needs a
    #: workspace (e.g. float16 evaluated in float32 blocks) is not used so. A class with shape inputs
    #: (Slice's bounds) is built without their values for this and takes them as agnostic_output_shape's
    #: `values` ({input index: array}); its run() reads them from xs.
    shape_agnostic: bool = False
    #: a shape-agnostic class whose workspace serves only the shapes it was built for (a native plan's
    #: scratch) and whose run() needs none for the others it serves
    agnostic_without_workspace: bool = False
    #: set by prepare() when run() applies the node's fused epilogue ("ge.epilogue") itself, so the
    #: runtime must not apply it again (epilogue.Epilogue.unless_absorbed)
    absorbs_epilogue: bool = False
    #: set by prepare() when the kernel runs on ge's native kernels (its backend has them and its
    #: plan uses them); built with backend.NUMPY it takes a numpy plan instead
    uses_native: bool = False
    #: True when the kernel reads `self.outputs`, the node's output metas (which outputs are omitted,
    #: an output's size); the others see None there, so that a plan made with the output metas and one
    #: made without are one (the compiler plans a node with and without them: passes/_util.KernelMemo)
    reads_outputs: bool = False
    loaded: bool = False

    def agnostic_output_shape(self, shapes: Sequence[tuple | None]) -> tuple:
        """A shape-agnostic kernel's output shape for these input shapes (None: an absent input), asked
        of the instance built for the first shape (its attributes): the broadcast of the present ones
        unless the class says otherwise. Raises ValueError when they do not broadcast, or the instance
        cannot serve them (the executor then builds a kernel for them)."""
        return tuple(int(d) for d in np.broadcast_shapes(*[tuple(s) for s in shapes if s is not None]))

    #: installed by float16.py (imported with every kernel family): the class that builds a float16
    #: instance of an op numpy computes slowly in float16 as its float32 kernel behind conversions
    float16_adapter = None

    def __new__(cls, *args, **kwargs):
        adapter = Kernel.float16_adapter
        if adapter is not None and cls is not adapter:
            inputs = args[1] if len(args) > 1 else kwargs.get("inputs", ())
            if adapter.applies(cls, inputs):
                return adapter(cls, *args, **kwargs)  # not a `cls`: its __init__ is not called again
        return super().__new__(cls)

    @classmethod
    def unadapted(cls, *args, **kwargs) -> "Kernel":
        """This class's own kernel even where float16_adapter would take its float16 instances (a fused
        chain's float16 Add/Sub/Mul/Div step, whose numpy float16 loop rounds each result as the
        adapter does, and needs no workspace to run in place)."""
        kernel = super().__new__(cls)
        kernel.__init__(*args, **kwargs)
        return kernel

    @property
    def planned_class(self) -> type["Kernel"]:
        """The class that plans this op for other input metas (built_for)."""
        return type(self)

    def __init__(self, attrs: dict, inputs: Sequence[Meta | None], consts: Sequence[np.ndarray | None] = (),
                 outputs: Sequence[Meta] | None = None, opset: int = 17, name: str = "", num_outputs: int | None = None,
                 packs: WeightPacks | None = None, backend: Backend | None = None):
        self.packs = packs
        self.backend = backend if backend is not None else backends.select()
        self.attrs = attrs
        self.inputs = list(inputs)
        self.consts = list(consts) + [None] * (len(self.inputs) - len(consts))
        self.outputs = list(outputs) if outputs is not None and self.reads_outputs else None
        self.opset = opset
        self.name = name
        #: how many outputs the node declares (Split, Dropout's mask, MaxPool's indices depend on it)
        self.num_outputs = num_outputs if num_outputs is not None else (len(outputs) if outputs is not None else 1)
        # the schema's type constraints, checked once for every op here; prepare() checks what ge
        # implements of them where that is narrower
        problem = input_type_problem(self.domain, self.op_type, opset, [getattr(m, "dtype", None) for m in self.inputs])
        if problem is not None:
            raise self.fail(problem)
        self.prepare()

    # -- hooks for subclasses --------------------------------------------------------------
    def prepare(self) -> None:
        """Parse attributes, decide the plan, output metas and workspace layout. Called once, at
        construction; reads no weight."""

    def pack(self) -> None:
        """Pack constant weights for the plan (through shared_pack). Called once, by load()."""

    def float16_inputs(self, y_half: bool) -> frozenset[int]:
        """The inputs this float32 kernel's plan reads as float16 itself, converting as it loads them,
        when handed float16 arrays there (float16.Float16ViaFloat32 then converts no whole tensor for
        them); y_half: its outputs float16 too (see float16_outputs). None by default."""
        return frozenset()

    def float16_outputs(self) -> bool:
        """Whether this float32 kernel's plan writes float16 outputs itself, rounding each value once as
        it stores it (after its absorbed epilogue), when handed float16 arrays there."""
        return False

    def load(self) -> "Kernel":
        """The loaded phase: weights packed. Idempotent; returns the kernel."""
        if not self.loaded:
            self._packing = True
            try:
                self.pack()
            finally:
                self._packing = False
            self.loaded = True
        return self

    def compute(self, *xs: np.ndarray | None) -> list[np.ndarray]:
        raise NotImplementedError

    def run(self, xs: Sequence[np.ndarray | None], ys: Sequence[np.ndarray], ws: np.ndarray | None) -> None:
        for y, r in zip(ys, self.compute(*xs)):
            if y is not None:
                np.copyto(y, r, casting="unsafe")

    def bound(self, xs: Sequence[np.ndarray | None], ys: Sequence[np.ndarray], ws: np.ndarray | None) -> Callable[[], None]:
        """run(xs, ys, ws) prepared for these arrays: the runtime binds a task's views once and calls
        this every run until they change (a kernel with a prepared native call returns that call)."""
        return partial(self.run, xs, ys, ws)

    def workspace_nbytes(self) -> int:
        return 0

    def infer(self) -> list[Meta]:
        xs = [c if c is not None else (None if m is None else np.zeros(m.shape, m.dtype))
              for m, c in zip(self.inputs, self.consts)]
        return [Meta(np.asarray(r).dtype, tuple(np.shape(r))) for r in self.compute(*xs)]

    def upper_bound(self) -> list[Meta | None]:
        """The largest output metas, for a kernel built with its inputs at their largest shapes
        whose infer() cannot tell its outputs (the values decide: NonZero, NonMaxSuppression,
        computed slice bounds...): a range plan's capacities. None for an output without a finite
        bound (the range plan makes its buffer growable). Ops override it where a bound exists."""
        return [None] * self.num_outputs

    # -- helpers ------------------------------------------------------------------------------
    def shared_pack(self, layout: tuple, pack: Callable, *weights: np.ndarray | None):
        """pack(*weights): constant weights in the layout this kernel's plan wants, shared through
        the pack cache when the kernel has one (same weights, same op and layout key: one pack)."""
        if not getattr(self, "_packing", False):
            raise RuntimeError(f"{type(self).__name__}: weights are packed in pack() (load), never while planning")
        if self.packs is None:
            return pack(*weights)
        return self.packs.get(weights, (self.domain, self.op_type) + tuple(layout), pack)

    def attr(self, key: str, default=None):
        return self.attrs.get(key, default)

    def built_for(self, xs) -> "Kernel":
        """This kernel when xs (arrays or None) have the dtypes and shapes it was built for, else one
        built for theirs: compute() of a planned kernel on other inputs."""
        metas = [None if x is None else Meta(np.asarray(x).dtype, np.shape(x)) for x in xs]
        if any(m is not None and k is not None and (m.dtype != k.dtype or tuple(m.shape) != tuple(k.shape))
               for m, k in zip(metas, self.inputs)):
            return self.planned_class(self.attrs, metas, self.consts, opset=self.opset, name=self.name,
                              num_outputs=self.num_outputs, backend=self.backend).load()
        return self

    def fail(self, message: str) -> GraphError:
        return GraphError(f"node '{self.name}' ({self.op_type}): {message}")

    def value_dependent(self, message: str) -> ValueDependentError:
        """The error of a node whose output shape its input values decide (the hybrid path runs it)."""
        return ValueDependentError(f"node '{self.name}' ({self.op_type}): {message}")

    def input_meta(self, i: int, what: str, optional: bool = False) -> Meta | None:
        """Input i's meta; None for an absent optional input, a missing required one fails naming it."""
        m = self.inputs[i] if i < len(self.inputs) else None
        if m is None and not optional:
            raise self.fail(f"input {i} ({what}) is missing")
        return m

    def const(self, index: int, what: str) -> np.ndarray:
        """The value of a constant input the kernel needs at build time (e.g. Reshape's shape)."""
        if index >= len(self.consts) or self.consts[index] is None:
            raise self.value_dependent(f"input {index} ({what}) must be a constant; computed {what} needs "
                                       f"dynamic shapes")
        return self.consts[index]


class HostKernel(Kernel):
    """A kernel of values with no static layout (sequences, optionals, string tensors): the hybrid
    executor calls compute() with its inputs as they are (arrays, lists, None) and keeps what it
    returns on the host. infer() always raises, so such a node never joins a static submodel;
    construction sees the attributes only (inputs are None), so prepare() checks just those."""
    host_values = True
    #: what infer()'s refusal says about the values
    no_layout = "sequence and optional values have no static layout"

    def infer(self):
        raise self.value_dependent(self.no_layout)
