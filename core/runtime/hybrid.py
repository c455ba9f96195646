"""The hybrid executor: a dynamic root graph whose KNOWN clusters run as static submodels through
the V2 DavinciModel kernels and whose UNKNOWN nodes run the OpenVINO way (001_*: primitive_inst::execute).

Per unknown node, each execution:
  steady          a node without shape inputs whose last two runs had the same input shapes and
                  whose tensors all keep the views it last ran on (no buffer, dtype or shape moved)
                  is its kernel's prepared call (kernel.bound(), made on the first such run) alone;
  update_shape    only when an input shape (or the value of a shape input) changed since last time:
                  the signature is the inputs' (dtype, shape) pairs, read from their slots through a
                  per-node table of names and constants made at load, and the bytes of shape inputs;
  update_impl     the impl cache, keyed by node and that signature (counts hits, builds; the shape
                  values' arrays and the Metas are made from the signature only for a build);
                  ge's kernels are built for their input shapes, so most impls are shape-specialized
                  and the cache is what makes a repeated shape free; a kernel class that declares
                  itself `shape_agnostic` is built once per (node, dtypes, ranks) and serves every
                  new shape it can without a build (counted as agnostic_hits), the context asking it
                  directly once it serves the node (HybridContext._served: a generation loop's new
                  length every call), and asking for a plan of their own for shapes that repeat;
  update_weights  a kernel built for a new shape takes its packed weights from the model's
                  WeightPacks: it packs (weight_packs) only when its plan wants a layout not made
                  yet, and otherwise reuses the pack (weight_pack_hits);
  data-dependent  (NonZero, NonMaxSuppression ...: infer() cannot tell) compute() gives the outputs,
                  their shapes decide the allocation;
  realloc_if_needed  an output buffer grows only when the new shape needs more bytes than it holds;
  plan_memory   after a run that allocated (hybrid mode, the root), every tensor moves into one arena
                planned by lifetime for the most bytes it has held (HybridContext.plan_memory);
  empty output    skips the node;
  set arguments   a tensor's view is made only when its address or shape changed (the slot keeps it);
  counts          nodes_run, shape_updates and args_set are plain ints, folded into the context's
                  counters when a run (or a subgraph call) ends.
A KNOWN cluster's submodel gets new addresses (UpdateArgs) only when one of its tensors moved, and
runs its tasks' bound calls (run_inline) while nothing moved.
Per call, likewise: a model input is checked only when its dtype or shape differs from the last
call's, a tensor keeps its view while its buffer and shape hold, and a control-flow node makes
its subgraph calls once (each run tells them that the arrays they get may hold new values).
Range mode plans every buffer's capacity (an upper bound derived from shapes) at compile time, and
places the buffers (and the submodels' feature maps) in one arena by lifetime, as the static
planner does: a context allocates that arena once, a run inside the range allocates nothing, and a
tensor that would need more than its capacity is an error (Mini-Infer's capacity check, docs/design.md). A tensor
without a finite bound (attrs["growable"]) grows as in hybrid mode, each reallocation counted.
Control flow (If, Loop, Scan) is an unknown node whose kernel (core/kernels/ops/control_flow.py) calls
its subgraphs: each subgraph is a HybridModel of its own sharing the root's weights, packs and
static submodels, run in a child context of the calling context (made on first use, kept: its
impl cache and buffers serve every iteration). A body that is one static submodel is bound once and
a Loop or Scan iterates its tasks itself (hybrid_context.BoundBody); a dynamic body's call gives
views of its outputs, and a carried value coming back trades buffers with the output it is.
Several contexts may run at once, one per thread: each owns its tensors and a context of every
static submodel (its own args table, stream, feature maps and workspace); the impl cache is the
model's, shared, and builds each key once under a lock.

This module is the immutable part (HybridModel: weights, submodels, subgraphs, the impl cache);
the per-run state and the steps above are hybrid_context.py's HybridContext.
"""
from __future__ import annotations

import time
from collections import Counter

import numpy as np

from ..model.dynamic_model import HYBRID, STRING, DynamicModel, DynNode
from ..model.errors import GeError
from ..model.ir import Meta
from ..kernels import lookup
from ..kernels import backend as backends
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager
from .hybrid_context import HybridContext
from .impl_cache import DEFAULT_CACHE_SIZE, Impl, ImplCache  # noqa: F401  (DEFAULT_CACHE_SIZE: the manager's default)
from .known_subgraph import davinci_model_create
from .shared_weights import SharedWeightsModel

#: inputs whose *values* decide output shapes, beyond each kernel's `shape_inputs`
EXTRA_SHAPE_INPUTS = {"Resize": (1, 2, 3), "Upsample": (1,), "ReduceSum": (1,), "ReduceMean": (1,),
                      "ReduceMax": (1,), "ReduceMin": (1,), "ReduceProd": (1,), "ReduceL1": (1,), "ReduceL2": (1,),
                      "ReduceLogSum": (1,), "ReduceLogSumExp": (1,), "ReduceSumSquare": (1,)}
class HybridModel(SharedWeightsModel):
    """A DynamicModel (hybrid or range mode) loaded on a device: weights once, submodels created."""

    @property
    def shape_mode(self) -> str:
        return self.dyn.mode  # RANGE or HYBRID

    def __init__(self, dyn: DynamicModel, device, model_id: int = 0, root: "HybridModel | None" = None,
                 weights: ExternalWeightConfig | None = None, weight_manager: ExternalWeightManager | None = None,
                 cache_size: int = DEFAULT_CACHE_SIZE):
        self.timings: dict[str, float] = {}
        t0 = time.perf_counter()
        if root is None:
            super().__init__(dyn, device, model_id, weights, weight_manager)
            self.backend = backends.select()  # the implementation selection, once for the root's kernels and every submodel
        else:  # a control-flow subgraph: the root's weights, packs, backend and static submodels
            self.dyn, self.device, self.model_id, self.name = dyn, device, model_id, dyn.name
            self.inputs, self.outputs, self.external_weights = list(dyn.inputs), list(dyn.outputs), []
            self.weight_addr, self.placed, self.packs, self.backend = root.weight_addr, root.placed, root.packs, root.backend
            cache_size = root.cache.capacity
        self.cache = ImplCache(cache_size)  # the in-memory impl cache, shared by contexts
        self.consts = {w.name: device.view(self.weight_base(w) + w.offset, w.dtype, w.shape) for w in dyn.weights}
        self.consts.update(dyn.string_constants)  # on the host: strings have no device layout
        self.timings["init_weight_mem"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.submodels, self.subgraphs = ([], []) if root is None else (root.submodels, root.subgraphs)
        self.contexts: list[HybridContext] = []
        self.root = root
        if root is None:
            try:
                bodies = _loop_bodies(dyn)
                for k, m in enumerate(dyn.submodels):  # DavinciModelCreate, sharing the root's weights
                    backend = self.backend._replace(iterated=True) if k in bodies else self.backend
                    self.submodels.append(davinci_model_create(m, device, model_id, shared_weight_addr=self.weight_addr,
                                                               shared_files=self.file_bases, packs=self.packs,
                                                               backend=backend))
                # every subgraph's model exists before any is used: a node refers to them by index
                self.subgraphs.extend(HybridModel(sg, device, model_id, root=self) for sg in dyn.subgraphs)
            except BaseException:
                self.unload()
                raise
        self.timings["davinci_model_create"] = time.perf_counter() - t0
        self.shape_inputs = [self._shape_inputs(n) for n in dyn.nodes]
        self.grows = frozenset(dyn.attrs.get("growable", ()))  # range mode: tensors without a finite bound
        self.input_names, self.output_names = tuple(d.name for d in dyn.inputs), tuple(d.name for d in dyn.outputs)
        self.on_host = tuple(d.on_host for d in dyn.inputs)  # sequences, optionals, strings: kept as given
        # inputs only Loop and Scan nodes read, on the cpu device (host memory is its memory): their kernels
        # copy from them and never write them, so the caller's array may be passed on (HybridContext._lent)
        self.lendable = _lendable_inputs(dyn, self.submodels) if device.name == "cpu" else (False,) * len(dyn.inputs)
        # per node, each input as a run finds it: (tensor name, None, None), or (None, constant, its
        # (dtype, shape)) for a weight, or (None, None, None) when absent (decided once, not per run)
        self.args = [tuple((None, None, None) if not t else (t, None, None) if t not in self.consts
                           else (None, self.consts[t], (self.consts[t].dtype, self.consts[t].shape)) for t in n.inputs)
                     for n in dyn.nodes]
        # control flow: the op's semantics, built once per node (it runs subgraphs, not a planned kernel)
        self.flow = {k: lookup(n.op_type, n.domain, n.opset, n.name)(
            {**n.attrs}, [None] * len(n.inputs), opset=n.opset, name=n.name, num_outputs=len(n.outputs),
            backend=self.backend) for k, n in enumerate(dyn.nodes) if n.subgraphs}
        # sequence, optional and string ops: built once, they run on host values (core/kernels/ops/sequences.py,
        # strings.py, and the string variants of Equal, Cast, LabelEncoder...)
        self.host_ops = {}
        strings = _string_values(dyn)
        for k, n in enumerate(dyn.nodes):
            reads_strings = not n.subgraphs and any(t in strings for t in n.inputs + n.outputs)  # (control flow passes them)
            cls = lookup(n.op_type, n.domain, n.opset, n.name, strings=reads_strings)
            if getattr(cls, "host_values", False):
                self.host_ops[k] = cls({**n.attrs}, [None] * len(n.inputs), opset=n.opset, name=n.name,
                                       num_outputs=len(n.outputs), backend=self.backend)
        # hybrid mode, the root: the steps from each tensor's producer to its last reader (HybridContext.plan_memory)
        self.lifetimes = _lifetimes(dyn, self.submodels, self.host_ops) if root is None and dyn.mode == HYBRID else {}
        if root is None:
            self.default_context = self.create_context()

    def _shape_inputs(self, node: DynNode) -> tuple:
        cls = lookup(node.op_type, node.domain, node.opset, node.name)
        idx = {i for i, _ in getattr(cls, "shape_inputs", ())} | set(EXTRA_SHAPE_INPUTS.get(node.op_type, ()))
        return tuple(sorted(i for i in idx if i < len(node.inputs) and node.inputs[i]
                            and node.inputs[i] not in self.consts))

    def create_context(self, executor: str = "linear") -> "HybridContext":
        """A new per-run state: its own tensors, and its own context of every static submodel (their
        feature maps and workspace are the hybrid context's); the impl cache is the model's."""
        if executor != "linear":
            raise GeError(f"model '{self.name}' has dynamic shapes: it runs with the hybrid executor, "
                          f"not the '{executor}' executor")
        ctx = HybridContext(self)
        self.contexts.append(ctx)
        return ctx

    def destroy_context(self, ctx: "HybridContext") -> None:
        ctx.destroy()
        self.contexts.remove(ctx)

    def nn_execute(self, inputs, outputs=None, timeout: float | None = None) -> list[np.ndarray]:
        return self.default_context.execute(inputs, outputs, timeout)

    def unload(self) -> None:
        # a subgraph points back at its root (and a destroyed context lets go of its model): no
        # cycle is left, so the model and all it holds go as soon as the caller lets go (no gc pass)
        for ctx in getattr(self, "contexts", []):
            ctx.destroy()
        if getattr(self, "root", None) is not None:
            return  # a subgraph: the root owns weights, submodels and subgraphs
        for sg in self.subgraphs:
            sg.unload()
        self.subgraphs.clear()  # (in place: every subgraph holds this list too)
        for sm in self.submodels:
            sm.unload()
        self.submodels.clear()
        self.packs.clear()
        self.free_weights()

    def impl(self, index: int, node: DynNode, sig: tuple, counters: Counter, planned: bool = False) -> Impl:
        """update_impl: the cached kernel for these input shapes and shape values, else build one.
        `sig`: ((dtype, shape) or None per input, (index, bytes) per shape value), the key as the
        context has it (the inputs' Metas and the shape values' arrays are made only for a build).
        planned: a kernel built for these very shapes even where a shape-agnostic one serves them (a
        context asks when they come twice in a row: a plan of their own runs faster)."""
        key = (index, sig)
        cache = self.cache
        with cache.lock:  # one build per key, even when contexts ask at once
            found = cache.get(key)
            if found is not None and not (planned and found.family is not None):
                counters["cache_hits"] += 1
                return found
            metas = [None if t is None else Meta(t[0], tuple(t[1])) for t in sig[0]]
            shape_values = {i: np.frombuffer(b, sig[0][i][0]).reshape(sig[0][i][1]).copy() for i, b in sig[1]}
            impl = None if planned else self._agnostic(index, node, metas, shape_values, counters)
            if impl is None:  # (else a new shape served by the shape-agnostic kernel: nothing built)
                counters["cache_builds"] += 1
                impl = self._build(node, metas, shape_values, counters)
            impl.empty = impl.out_metas is not None and all(not o or 0 in m.shape
                                                            for o, m in zip(node.outputs, impl.out_metas))
            counters["cache_evictions"] += cache.put(key, impl)
            return impl

    def _agnostic(self, index: int, node: DynNode, metas: list, shape_values: dict, counters: Counter) -> Impl | None:
        """The shape-agnostic impl (001_*: dynamic_impl) of a kernel class that declares itself so:
        one kernel per (node, dtypes, ranks, absent inputs), the output shape from its
        agnostic_output_shape (given the shape values too, for a class with shape inputs: that kernel is
        built without them, its run() reads them). None when the class is not shape-agnostic, the node
        has a fused epilogue, or the kernel cannot serve these shapes (then they get a build)."""
        cls = lookup(node.op_type, node.domain, node.opset, node.name)
        if not cls.__dict__.get("shape_agnostic") or node.attrs.get(EPILOGUE):
            return None
        akey = (index, "agnostic", tuple(None if m is None else (m.dtype.str, len(m.shape)) for m in metas))
        base = self.cache.get(akey)
        if base is None:  # the first shape builds it (counted as the build it is)
            built = self._build(node, metas, shape_values, counters)
            counters["cache_builds"] += 1
            kernel = built.kernel
            if built.out_metas is not None and len(built.out_metas) == 1 \
                    and (not built.workspace or kernel.agnostic_without_workspace) \
                    and type(kernel).agnostic_output_shape is cls.agnostic_output_shape:  # (not a float16 adapter's)
                if shape_values:  # (the build above folded them in as constants)
                    kernel = self._build(node, metas, {}, counters).kernel
                counters["cache_evictions"] += self.cache.put(akey, Impl(kernel, built.out_metas, 0))
            return built
        shapes = [None if m is None else tuple(m.shape) for m in metas]
        try:
            shape = base.kernel.agnostic_output_shape(shapes, shape_values) if shape_values else \
                base.kernel.agnostic_output_shape(shapes)
        except (ValueError, GeError):
            return None  # let the kernel's own build name the node and the shapes
        counters["agnostic_hits"] += 1
        return Impl(base.kernel, [Meta(base.out_metas[0].dtype, shape)], 0,
                    family=tuple(None if m is None else (m.dtype, len(m.shape)) for m in metas))

    def _build(self, node: DynNode, metas: list, shape_values: dict, counters: Counter) -> Impl:
        consts = [self.consts.get(t) if t else None for t in node.inputs]
        for i, v in shape_values.items():
            consts[i] = v
        cls = lookup(node.op_type, node.domain, node.opset, node.name)
        packs, hits = self.packs.packs, self.packs.hits  # builds run under the cache lock: the deltas are this build's
        kernel = cls(node.attrs, metas, consts, opset=node.opset, name=node.name, num_outputs=len(node.outputs),
                     packs=self.packs, backend=self.backend).load()
        counters["weight_packs"] += self.packs.packs - packs
        counters["weight_pack_hits"] += self.packs.hits - hits
        try:
            out_metas = [Meta(np.dtype(m.dtype), tuple(int(d) for d in m.shape)) for m in kernel.infer()]
        except GeError:
            out_metas = None  # data-dependent: compute() tells the shapes at run time
        spec = node.attrs.get(EPILOGUE) if out_metas else None
        epilogue = Epilogue.unless_absorbed(kernel, spec, out_metas[0], node.opset, node.name) if spec else None
        return Impl(kernel, out_metas, int(kernel.workspace_nbytes()) if out_metas else 0, epilogue)


def _string_values(dyn: DynamicModel) -> set:
    """The names of a graph's string tensors: inputs, node outputs and constants of dtype object."""
    return ({d.name for d in dyn.inputs if d.dtype == STRING} | set(dyn.string_constants)
            | {o for n in dyn.nodes for o, t in zip(n.outputs, n.dtypes) if o and t == STRING})


def _loop_bodies(dyn: DynamicModel) -> set[int]:
    """The static submodels that are a whole Loop, Scan or SequenceMap body (their kernels are built
    with Backend.iterated)."""
    refs = {k for d in (dyn, *dyn.subgraphs) for n in d.nodes for key, k in dict(n.subgraphs).items() if key == "body"}
    return {sg.steps[0].index for k, sg in enumerate(dyn.subgraphs)
            if k in refs and not sg.nodes and len(sg.steps) == 1 and sg.steps[0].kind == "submodel"}


def _lifetimes(dyn: DynamicModel, submodels: list, host_ops: dict) -> dict[str, tuple[int, int]]:
    """{tensor: (first, last)}: the inputs from step 0, each step's outputs (and a node's workspace) from its
    position (1, 2, ...), to the last step reading it; a model output, and what a sequence, optional or
    string op reads (its host value may keep a view of it), to past the last step."""
    end = len(dyn.steps) + 1
    life = {d.name: [0, 0] for d in dyn.inputs if not d.on_host}
    for pos, step in enumerate(dyn.steps, 1):
        if step.kind == "node":
            node = dyn.nodes[step.index]
            reads, writes = node.inputs, (*node.outputs, f"{node.name}:workspace")
            last = end if step.index in host_ops else pos
        else:
            sm = submodels[step.index]
            reads, writes, last = [d.name for d in sm.inputs], [d.name for d in sm.outputs], pos
        for name in reads:
            if name in life:
                life[name][1] = max(life[name][1], last)
        for name in writes:
            if name:
                life.setdefault(name, [pos, pos])
    for d in dyn.outputs:
        if d.name in life:
            life[d.name][1] = end
    return {name: (first, last) for name, (first, last) in life.items()}


def _lendable_inputs(dyn: DynamicModel, submodels: list) -> tuple:
    """Per input of `dyn`: whether only Loop and Scan nodes read it (no other node, no static submodel, not
    an output of the model)."""
    only_loops: dict[str, bool] = {}
    for step in dyn.steps:
        if step.kind == "node":
            node = dyn.nodes[step.index]
            names, ok = node.inputs, node.domain == "" and node.op_type in ("Loop", "Scan")
        else:
            names, ok = [d.name for d in submodels[step.index].inputs], False
        for name in names:
            if name:
                only_loops[name] = only_loops.get(name, True) and ok
    outputs = {d.name for d in dyn.outputs}
    return tuple(not d.on_host and d.name not in outputs and only_loops.get(d.name, False) for d in dyn.inputs)
