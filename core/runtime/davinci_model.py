"""DavinciModel: a GeModel loaded on a device, with GE's Init steps and NnExecute
(docs/design.md).

Init builds the immutable part (weights in device memory, prepared kernels, the args layout:
a `LoadedPlan`) and one default ExecutionContext; `create_context()` makes more, which share
everything but their per-run memory. Shrink drops the host-side GeModel afterwards.
"""
from __future__ import annotations

import os
import time
from functools import cached_property

import numpy as np

from ..model.errors import FormatError, GeError, ShapeError
from ..model.ge_model import (FEATURE_MAP, FM_ID, INPUT, OUTPUT, WEIGHT_ID, WORKSPACE, Allocation, DataflowPlan, GeModel,
                              TaskDef, TensorDesc)
from ..model.record import record
from ..kernels import Kernel, lookup
from ..kernels import backend as backends
from ..kernels.backend import Backend
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue
from .args_manager import ArgsLayout
from .context import ExecutionContext
from .device import DeviceBuffer
from .external_weight_manager import ExternalWeightConfig, ExternalWeightManager, place_weight_files
from .loaded_model import STATIC, LoadedModel
from .mapped_weights import PAGE, MappedWeights
from .task_check import built_kernel, task_label
from .weight_loader import WeightCheck



#: constants smaller than this are copied out of mapped weights for their kernel (see _const)
SMALL_CONST = 64 << 10


@record
class TaskPlan:
    """A task ready to sink: its kernel (built once, shared by contexts) and argument layout."""
    name: str
    kernel: Kernel
    epilogue: Epilogue | None
    first_arg: int
    metas: tuple
    present_inputs: tuple  # bool per kernel input: False where an optional input is absent
    num_present_inputs: int
    present_outputs: tuple  # bool per kernel output: False where an optional output is omitted
    workspace: int
    #: scratch the native kernel needs beyond what the OM plans (an OM compiled at another native level,
    #: or where ge's native kernels are not built): each context gives the task bytes of its own
    own_workspace: int = 0


class LoadedPlan:
    """Everything a context needs, immutable and shared (Mini-Infer's InferencePlan)."""

    def __init__(self, name: str, inputs: tuple, outputs: tuple, tasks: tuple, args_layout: ArgsLayout, fm_size: int,
                 workspace_size: int, io_allocations: tuple, allocation_sizes: tuple, allocation_kinds: tuple,
                 dataflow_plan: DataflowPlan | None):
        self.name, self.inputs, self.outputs, self.tasks, self.args_layout = name, inputs, outputs, tasks, args_layout
        self.fm_size, self.workspace_size, self.io_allocations = fm_size, workspace_size, io_allocations
        self.allocation_sizes, self.allocation_kinds = allocation_sizes, allocation_kinds
        self.dataflow_plan = dataflow_plan  # the compiler's plan for the dataflow and parallel executors

    @cached_property
    def uses_native(self) -> bool:
        """Some kernel runs on ge's native GEMM (then numpy's BLAS runs single-threaded: blas.kernel_state)."""
        return any(t.kernel.uses_native for t in self.tasks)

    @cached_property
    def dataflow(self) -> tuple[DataflowPlan, ArgsLayout]:
        """The dependency graph and the args layout of the memory plan safe for any order it allows."""
        p = self.dataflow_plan
        if p is None:
            raise GeError(f"model '{self.name}' has no dataflow plan (an OM from an older ge): recompile it "
                          "to run it with the dataflow or parallel executor")
        lay = self.args_layout
        moved = np.asarray(p.fm_offsets, np.int64) >= 0
        allocation = np.where(moved, FM_ID, lay.allocation)
        offset = np.where(moved, np.asarray(p.fm_offsets, np.int64), lay.offset.astype(np.int64))
        return p, ArgsLayout.with_places(allocation, offset, lay.task, lay.role, lay.nbytes, lay.policy)

    @cached_property
    def _input_layouts(self) -> tuple:
        return tuple((tuple(d.shape), np.dtype(d.dtype)) for d in self.inputs)

    def check_inputs(self, inputs) -> list:
        layouts = self._input_layouts
        if type(inputs) is list and len(inputs) == len(layouts):  # the common case: arrays as the model wants them
            for (shape, dtype), x in zip(layouts, inputs):
                if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:
                    break
            else:
                return inputs  # (read, never changed, by the context)
        if isinstance(inputs, dict):
            missing = [d.name for d in self.inputs if d.name not in inputs]
            extra = sorted(set(inputs) - {d.name for d in self.inputs})
            if missing or extra:
                raise ShapeError(f"model '{self.name}': inputs {missing} missing" if missing else
                                 f"model '{self.name}': unknown inputs {extra} (expects {[d.name for d in self.inputs]})")
            inputs = [inputs[d.name] for d in self.inputs]
        inputs = list(inputs)
        if len(inputs) != len(self.inputs):
            raise ShapeError(f"model '{self.name}' expects {len(self.inputs)} inputs "
                             f"({', '.join(d.name for d in self.inputs)}), got {len(inputs)}")
        for i, ((shape, dtype), x) in enumerate(zip(layouts, inputs)):
            if type(x) is not np.ndarray or x.dtype != dtype or x.shape != shape:  # else as the model wants it
                d = self.inputs[i]
                inputs[i] = _check(d, x if isinstance(x, DeviceBuffer) else np.asarray(x), "input")
        return inputs

    def check_outputs(self, outputs) -> list:
        outputs = list(outputs)
        if len(outputs) != len(self.outputs):
            raise ShapeError(f"model '{self.name}' has {len(self.outputs)} outputs, got {len(outputs)} buffers")
        for d, y in zip(self.outputs, outputs):
            if not isinstance(y, DeviceBuffer) and not (isinstance(y, np.ndarray) and y.flags.writeable):
                raise ShapeError(f"output '{d.name}': the output buffer must be a writeable numpy array or a DeviceBuffer")
            _check(d, y, "output")
        return outputs


def host_rss() -> int:
    """Resident host memory of this process in bytes (0 where /proc is not available)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _check(desc: TensorDesc, x, role: str):
    if isinstance(x, DeviceBuffer):  # untyped device memory, as aclDataBuffer: only its size is known
        if x.nbytes < desc.nbytes:
            raise ShapeError(f"{role} '{desc.name}': device buffer of {x.nbytes} bytes, the model needs {desc.nbytes}")
        return x
    if x.dtype != np.dtype(desc.dtype):
        raise ShapeError(f"{role} '{desc.name}': dtype {x.dtype} does not match the model's {desc.dtype}")
    if tuple(x.shape) != tuple(desc.shape):
        raise ShapeError(f"{role} '{desc.name}': shape {list(x.shape)} does not match the model's {list(desc.shape)}")
    return x


class DavinciModel(LoadedModel):
    shape_mode = STATIC
    concurrent = True  # every concurrent caller on a context of its own (model_manager.ContextPool)

    def __init__(self, ge_model: GeModel, device, model_id: int = 0, known_node: bool = False,
                 weights: ExternalWeightConfig | None = None, weight_manager: ExternalWeightManager | None = None,
                 shared_weight_addr: int | None = None, packs=None, backend: Backend | None = None,
                 work_block: int | None = None, shared_files: dict | None = None):
        self.ge_model: GeModel | None = ge_model
        self.backend = backend if backend is not None else backends.select()  # the implementation selection, once per model
        self.packs = packs  # a root model's WeightPacks (gears, submodels): weights packed once for all
        # submodels of a dynamic OM read one shared weight blob loaded by their root model
        self.shared_weight_addr = shared_weight_addr
        self.shared_files = shared_files or {}  # and its external weight files: file name -> address
        # SetKnownNode: a known-shape subgraph whose feature maps, workspace and I/O addresses
        # come from its caller (see known_subgraph.py); otherwise a standalone model
        self.known_node = known_node
        self.work_block = work_block  # the default context's feature maps and workspace, owned by the caller
        self.device = device
        self.model_id = model_id
        self.name = ge_model.name
        self.timings: dict[str, float] = {}
        self.host_rss: dict[str, int] = {"before_init": host_rss()}  # resident host bytes after each step
        self.contexts: list[ExecutionContext] = []
        self.running_context: ExecutionContext | None = None  # the one that executed last (GetRunAddress)
        self._owned: list[int] = []
        self.weight_addr = 0
        self.mapped_weights: MappedWeights | None = None  # the OM's weights in place (no copy), on cpu
        self.weight_config = weights or ExternalWeightConfig()
        self.weight_manager = weight_manager or ExternalWeightManager()  # a private one: nothing to share with
        self.weight_bases: dict[int, int] = {}  # WEIGHT and FILE_CONSTANT allocation id -> device address
        self.external_weights: list[dict] = []  # per weight file: where its device memory came from
        self._shared: list[tuple] = []  # what this model holds in the weight manager

    # -- Init, step by step --------------------------------------------------------------------
    def init(self) -> "DavinciModel":
        # GE's InitFixedFeatureMap, InitRuntimeResource and TransAllVarData have nothing to do here:
        # every feature-map base can move (no fixed feature maps), streams and the model handle are
        # per context (ExecutionContext), and ONNX inference graphs have no variables.
        steps = [self.init_runtime_params, self.init_weight_mem, self.pre_process_file_constants,
                 self.init_io_nodes, self.init_nodes, self.do_task_sink, self.shrink]
        try:
            for step in steps:
                t0 = time.perf_counter()
                step()
                self.timings[step.__name__] = time.perf_counter() - t0
                self.host_rss[step.__name__] = host_rss()
        except BaseException:
            self.unload()
            raise
        return self

    def init_runtime_params(self) -> None:
        m = self.ge_model
        self.inputs = tuple(m.inputs)
        self.outputs = tuple(m.outputs)
        self.fm_size = m.allocation(FEATURE_MAP).size
        self.workspace_size = m.allocation(WORKSPACE).size
        self.weight_size = m.weight_size
        self.soc_version = m.soc_version

    def init_weight_mem(self) -> None:
        m = self.ge_model
        if self.shared_weight_addr is not None:
            self.weight_addr = self.weight_bases[WEIGHT_ID] = self.shared_weight_addr
            return
        if m.weight_data is not None and len(m.weight_data) and len(m.weight_data) != self.weight_size:
            raise FormatError(f"model '{self.name}': weight data is {len(m.weight_data)} bytes, "
                              f"the model declares {self.weight_size}")
        if MappedWeights.usable(self.device, m.weight_data):  # cpu: the mapped partition is the weight memory
            self.mapped_weights = MappedWeights(self.device, m.weight_data)
            self.mapped_weights.release()  # the pages the reader's checksum touched
            self.weight_addr = self.weight_bases[WEIGHT_ID] = self.mapped_weights.addr
            return
        self.weight_addr = self._malloc(self.weight_size)
        self.weight_bases[WEIGHT_ID] = self.weight_addr
        if m.weight_data is not None and len(m.weight_data):
            self.device.memcpy_h2d(self.weight_addr, np.frombuffer(m.weight_data, np.uint8))

    def pre_process_file_constants(self) -> None:
        """Give each external weight file (a FILE_CONSTANT allocation) its device memory: the
        user's buffer when one was set for that file (it wins, as in GE), else the session's copy
        of the file, loaded once in chunks and shared by every model using it. Mode 2's single
        file is one allocation and one chunked copy; mode 1 has one of each per file. A submodel of
        a dynamic OM reads the files its root model placed."""
        files = self.ge_model.weight_files
        if self.shared_weight_addr is not None:
            bases, sources = self.shared_files, dict.fromkeys(self.shared_files, "shared")
            for a in files:
                self._weight_checks(a)  # bounds, as for a file of its own
        else:
            placed = place_weight_files(self.name, self.device, [(a.file, a.size, self._weight_checks(a)) for a in files],
                                        self.weight_config, self.weight_manager)
            self._shared, bases, sources = placed.keys, placed.bases, placed.sources
        for a in files:
            if a.file not in bases:
                raise FormatError(f"model '{self.name}': weight file '{a.file}' is not one of its root model's")
            self.weight_bases[a.id] = bases[a.file]
            self.external_weights.append({"file": a.file, "allocation": a.id, "nbytes": a.size, "addr": bases[a.file],
                                          "source": sources[a.file]})

    def _weight_checks(self, a: Allocation) -> list[WeightCheck]:
        """The weights mapped into file allocation `a` (MapNodeAddressesToCombinedWeight), bounds checked."""
        checks = []
        for w in self.ge_model.weights:
            if w.allocation != a.id:
                continue
            if w.file != a.file or w.file_offset != w.offset or w.offset + w.nbytes > a.size:
                raise FormatError(f"model '{self.name}': weight '{w.name}' at offset {w.file_offset} + {w.nbytes} bytes "
                                  f"of '{w.file}' does not fit weight file '{a.file}' ({a.size} bytes)")
            checks.append(WeightCheck(w.name, w.offset, w.nbytes, w.sha256))
        return checks

    def init_io_nodes(self) -> None:
        self.io_allocations = tuple(a for a in self.ge_model.allocations if a.kind in (INPUT, OUTPUT))

    def init_nodes(self) -> None:
        tasks, first = [], 0
        for k, td in enumerate(self.ge_model.tasks):
            metas = tuple(a.meta for a in td.args)
            # the present inputs' and outputs' metas, in args-table order (TaskDef.args), by position
            present = iter(metas)
            ins, outs = ([None if a is None else next(present) for a in args] for args in (td.inputs, td.outputs))
            kernel = self._kernel(td, self.backend, k, ins, outs)
            # a native plan of this machine's level may need more scratch than the one the OM was compiled
            # with (an AVX2 machine's int8 products: more than AVX-512 VNNI's): its own, not the numpy plan
            need = kernel.workspace_nbytes()
            own_workspace = need if kernel.uses_native and need > td.workspace else 0
            if not own_workspace and need > td.workspace:  # an OM from a ge whose kernel needed less
                raise FormatError(f"model '{self.name}': node '{td.node}' ({td.op_type}) needs "
                                  f"{need} bytes of workspace, the OM plans {td.workspace}; "
                                  "recompile the model with this ge")
            kernel.load()
            if kernel.uses_native and self.mapped_weights is not None:
                self._release_packed(td, ins)
            tasks.append(TaskPlan(td.node, kernel, self._epilogue(td, kernel), first, metas,
                                  tuple(a is not None for a in td.inputs), sum(a is not None for a in td.inputs),
                                  tuple(a is not None for a in td.outputs), td.workspace, own_workspace))
            first += len(metas)
        self.tasks = tuple(tasks)

    def _release_packed(self, td: TaskDef, ins: list) -> None:
        """The task's kernel has packed its weights: their mapped pages leave the resident set
        (read again from the file if anything still reads them). ins: the inputs' metas. A weight
        under a page (a scale, a zero point: most of an int8 model's) holds no whole page to drop."""
        for a, m in zip(td.inputs, ins):
            if a is not None and a.allocation == WEIGHT_ID and m.nbytes >= PAGE:
                self.mapped_weights.release(a.offset, m.nbytes)

    def do_task_sink(self) -> None:
        """InitTaskInfo (args layout) and DistributeTask into the default context's model handle."""
        m = self.ge_model
        self.ge_plan = LoadedPlan(self.name, self.inputs, self.outputs, self.tasks, ArgsLayout.of(m),
                                  self.fm_size, self.workspace_size, self.io_allocations,
                                  tuple(a.size for a in m.allocations), tuple(a.kind for a in m.allocations),
                                  m.dataflow)
        self.default_context = self.create_context(own_memory=not self.known_node, work_block=self.work_block)

    def shrink(self) -> None:
        """Everything needed is on the device or in the plan: drop the host-side GeModel."""
        self.ge_model = None

    # -- execution -----------------------------------------------------------------------------
    def create_context(self, own_memory: bool = True, executor: str = "linear",
                       work_block: int | None = None) -> ExecutionContext:
        """A new per-run state (feature maps, args table, stream) sharing this model's weights;
        `work_block`: its feature maps and workspace there (the caller's memory), not its own."""
        ctx = ExecutionContext(self, own_memory, executor, work_block)
        self.contexts.append(ctx)
        return ctx

    def destroy_context(self, ctx: ExecutionContext) -> None:
        ctx.destroy()
        self.contexts.remove(ctx)
        if self.running_context is ctx:
            self.running_context = None

    def nn_execute(self, inputs, outputs=None, timeout: float | None = None) -> list[np.ndarray]:
        return self.default_context.execute(inputs, outputs, timeout)

    def static_model(self, inputs=None) -> "DavinciModel":
        return self

    def unload(self) -> None:
        for ctx in self.contexts:  # (a destroyed context lets go of its model: no cycle left)
            ctx.destroy()
        self.contexts.clear()
        for addr in self._owned:
            self.device.free(addr)
        self._owned.clear()
        if self.mapped_weights is not None:
            self.mapped_weights.unbind()
            self.mapped_weights = None
        for key in self._shared:  # user memory is the user's: never freed here
            self.weight_manager.release(key)
        self._shared = []

    @property
    def weight_bytes(self) -> int:
        """Device bytes holding this model's weights: inline plus external weight files."""
        return self.weight_size + sum(self.ge_plan.allocation_sizes[a] for a in self.weight_bases if a != WEIGHT_ID)

    @property
    def work_size(self) -> int:
        return self.fm_size + self.workspace_size

    # -- helpers -------------------------------------------------------------------------------
    def _malloc(self, nbytes: int) -> int:
        addr = self.device.malloc(nbytes)
        self._owned.append(addr)
        return addr

    def _kernel(self, td: TaskDef, backend: Backend, k: int, ins: list, outs: list) -> Kernel:
        """The task's kernel, planned on `backend`; constant inputs are views of weight memory.
        ins, outs: the inputs' and outputs' metas (None where absent). A stored task the op refuses,
        or whose declared outputs the op does not compute, is a FormatError naming the task (task_check.py)."""
        consts = [None if a is None or a.allocation not in self.weight_bases
                  else self._const(a, m) for a, m in zip(td.inputs, ins)]
        cls = lookup(td.op_type, td.domain, td.opset, td.node)
        return built_kernel(task_label(self.name, k, td.node, td.op_type),
                            lambda: cls(td.attrs, ins, consts, outputs=outs, opset=td.opset, name=td.node,
                                        num_outputs=len(td.outputs), packs=self.packs, backend=backend), outs)

    def _const(self, a, m):
        """A constant input (its Arg and Meta) as its kernel sees it: a view of weight memory, except a
        small weight of mapped weights (a bias, a scale), which is the kernel's own copy, so that running
        the kernel does not bring back the pages its packed weights left (a fault maps a whole folio)."""
        view = self.device.view(self.weight_bases[a.allocation] + a.offset, m.dtype, m.shape)
        if self.mapped_weights is not None and a.allocation == WEIGHT_ID and view.nbytes < SMALL_CONST:
            return view.copy()
        return view

    def _epilogue(self, td: TaskDef, kernel) -> Epilogue | None:
        spec = td.attrs.get(EPILOGUE)
        if not spec:  # (output 0 may be omitted: an RNN's Y when only Y_h is read)
            return None
        return Epilogue.unless_absorbed(kernel, spec, td.outputs[0].meta, td.opset, td.node)
