"""ExecutionContext: the per-run state of a loaded model (Mini-Infer's ExecutionContext, docs/design.md).

The DavinciModel (weights, kernels, task defs, memory plan) is immutable and shared; a context
owns its feature-map and workspace memory, default I/O buffers, args table, stream and the sunk
task list (the model handle) whose views point into its own memory. Several contexts of one
model can run at once from different threads.
"""
from __future__ import annotations

import time
from collections import Counter
from functools import partial

import numpy as np

from ..model.errors import GeError
from ..model.ge_model import FM_ID, WORKSPACE_ID
from ..kernels.blas import kernel_state
from ..kernels.native import aligned_empty
from .args_manager import ModelArgsManager
from .device import Counts, DeviceBuffer
from .executors import LinearExecutor, TaskFailed, TracingExecutor, make_executor
from .output_pool import OutputPool

#: outputs ge allocates itself (execute without outputs) up to this size are copied out of the
#: planned buffers rather than bound in place (see ExecutionContext._fresh_outputs) unless the caller keeps
#: dropping them: binding a new array every call rebuilds the tasks that write it (a batched MatMul's
#: prepared call), which a 786 KiB output's copy undercuts by ~100 us a call; about even at 3 MiB, the
#: copy 40% slower at 12 MiB
COPY_OUT_MAX = 1 << 20
#: a host input array new to its input (not one of the last two runs'), up to this size, is copied into
#: its planned buffer rather than bound in place (see ExecutionContext._bind_input)
COPY_IN_MAX = 1 << 20
#: runs in a row an output's array must come back from the OutputPool (the caller dropped it each time)
#: before it is bound in place: a caller that holds each result until the next call (`y = run(x)` in a
#: loop) gets two arrays in turn, and binding them would move the writing tasks every call
STEADY = 2
COUNTERS = ("h2d_bytes", "h2d_count", "d2h_bytes", "d2h_count", "d2d_bytes", "args_bytes", "mallocs")
_COUNTER_KEYS = {kind: (f"{kind}_count", f"{kind}_bytes") for kind in ("h2d", "d2h", "d2d")}


class SunkTask:
    """One task as the device holds it: a prepared kernel and views resolved from argument addresses.
    It keeps the binding it last replaced, keyed by its addresses: a caller passing two input (or
    output) arrays in turn moves the task back and forth, and each move would rebuild the views and
    the kernel's prepared native call (a batched MatMul's: ~70 us on a loaded machine)."""
    __slots__ = ("plan", "xs", "ys", "ws", "call", "key", "earlier", "own_ws")

    def __init__(self, plan):
        self.plan = plan
        self.xs = self.ys = self.ws = self.call = self.key = self.earlier = None
        self.own_ws = aligned_empty(plan.own_workspace, np.uint8) if plan.own_workspace else None

    def bind(self, addrs, device, keep: bool = True) -> "SunkTask":
        """keep: keep the binding replaced (not when a fresh output array moved it: that one never
        comes back, and keeping it would hold the caller's last result alive)."""
        # Only where addresses are the memory's own (the CPU device's host pointers): the kept views hold
        # that memory, so no other buffer can start at those addresses while they are kept; the same
        # addresses are the same bytes, read as they are now (a simulated device's addresses may be reused).
        key = addrs.tobytes() if device.host_addresses else None
        earlier = self.earlier
        self.earlier = (self.key, self.xs, self.ys, self.ws, self.call) if key is not None and keep else None
        if key is not None and earlier is not None and earlier[0] == key:
            self.key, self.xs, self.ys, self.ws, self.call = earlier
            return self
        self.key = key
        p = self.plan
        views = device.views(addrs.tolist(), p.metas)
        if p.workspace:
            self.ws = views.pop()
        if self.own_ws is not None:
            self.ws = self.own_ws
        xs = iter(views[:p.num_present_inputs])
        self.xs = [next(xs) if present else None for present in p.present_inputs]
        ys = iter(views[p.num_present_inputs:])
        self.ys = [next(ys) if present else None for present in p.present_outputs]
        self.call = p.kernel.bound(self.xs, self.ys, self.ws)
        return self

    def run(self) -> None:
        p = self.plan
        self.call()
        if p.epilogue is not None:  # fused activations, in place on the output
            p.epilogue(self.ys[0])


def _run_quietly(task: SunkTask) -> None:
    with kernel_state(task.plan.kernel.uses_native):
        task.run()


class ExecutionContext:
    """`own_memory=False` is the known-node case: feature maps and workspace come from the caller
    (update_workspaces) and I/O addresses too (update_io); the context copies nothing itself.
    `work_block`: feature maps, then workspace, in that block of the caller's (gears: one block
    sized for the largest gear serves every gear's context); the context owns the rest."""

    def __init__(self, model, own_memory: bool = True, executor: str = "linear", work_block: int | None = None):
        self.model = model
        self.device = device = model.device
        plan = model.ge_plan
        self._owned: list[int] = []
        self.own_memory = own_memory
        self._keep_bindings = True  # whether a task moved by this run keeps the binding it replaces
        self.counters: Counter = Counts()  # this context's own copies and allocations
        if executor == "linear":  # the compile-time order and its memory plan
            layout, deps, self.fm_size, self.workspace_size = plan.args_layout, None, plan.fm_size, plan.workspace_size
        else:  # any order the dependencies allow: the dataflow plan (workspaces live among feature maps)
            dataflow, layout = plan.dataflow
            deps, self.fm_size, self.workspace_size = dataflow.deps, dataflow.fm_size, 0
        self.executor = make_executor(executor, deps)
        self.kernel_state = kernel_state(plan.uses_native)  # entered by one run at a time
        self.args = ModelArgsManager(layout, device, self._malloc(layout.size * 8))
        self.stream = device.acquire_stream()
        self.handle = [SunkTask(t) for t in plan.tasks]  # DistributeTask: the sunk task list
        for alloc, addr in model.weight_bases.items():  # WEIGHT and one FILE_CONSTANT per weight file
            self.args.set_base(alloc, addr)
        self.io_default: dict[int, int] = {}
        self.workspaces_set = False
        if own_memory:
            if work_block is None:
                self.update_workspaces(self._malloc(self.fm_size), self._malloc(self.workspace_size))
            else:  # a block the caller owns and sized for several plans (a gear model's contexts share one)
                self.update_workspaces(work_block, work_block + self.fm_size)
            # planned I/O memory: used whenever a user buffer cannot be bound in place
            self.io_default = {a.id: self._malloc(a.size) for a in plan.io_allocations}
            for alloc, addr in self.io_default.items():
                self.args.set_base(alloc, addr)
            self._rebuild(self.args.update_for_execute())  # UpdateStaticModelArgsByFm
        self._bound: dict[int, int] = {}  # allocation -> host buffer address bound zero-copy
        self._bound_input: dict[int, np.ndarray] = {}  # allocation -> the array bound there by the last run
        self._recent_inputs: dict[int, tuple] = {}  # allocation -> the small arrays the last two runs took
        self._io_views: dict[int, np.ndarray] = {}
        # outputs execute() allocates itself: the small ones copied out, the others bound (_fresh_outputs)
        self._bound_out = {i for i, d in enumerate(plan.outputs) if d.nbytes > COPY_OUT_MAX}
        self._out_pool = OutputPool(len(plan.outputs))  # those arrays, written again once the caller drops them
        self._came_back = [0] * len(plan.outputs)  # runs in a row each output's array came back (STEADY)
        self._pool_bound = [False] * len(plan.outputs)  # the pool's array bound in place by the last run
        self._caller_bound: set[int] = set()  # output allocations a caller's buffers were bound to
        self._last_run: tuple | None = None
        self.run_counts: dict = {}  # copies by the execute() under way (its stats)
        self.copy_trace: list | None = None  # (kind, start, seconds, nbytes) per copy, while observed
        self._own_executor = self.executor
        self._inline: tuple | None = None  # run_inline's task calls, while no task is rebound

    def observe(self, after_task=None, copies: list | None = None) -> None:
        """Watch this context's runs (the profiler's, ge compare's and dump's hook): after_task(index,
        task, seconds) is called after each task, run in the linear order; `copies` gets (kind, start,
        seconds, nbytes) per input or output copy. observe() with neither stops watching."""
        self.executor = TracingExecutor(after_task) if after_task is not None else self._own_executor
        self.copy_trace = copies
        self._inline = None

    # -- NnExecute -----------------------------------------------------------------------------
    def execute(self, inputs, outputs=None, timeout: float | None = None, launch: str = "sunk"):
        """Run once. Inputs/outputs are numpy arrays or DeviceBuffers; outputs are allocated
        (numpy) when not given. `launch="per_task"` launches every task from the host instead of
        executing the sunk task list (GE's per-task launch, which task sink replaces; for comparison only)."""
        if self.model is None:
            raise GeError("execution context destroyed (its model unloaded)")
        plan = self.model.ge_plan
        if not self.own_memory:
            raise GeError(f"model '{plan.name}' is a known-shape subgraph: run it through the V2 kernel calls")
        self.run_counts = {}  # this run's copies (_copy counts them here too)
        clock = time.perf_counter
        t0 = clock()
        inputs = plan.check_inputs(inputs)
        zero_copy_in, frozen = 0, self._bound_input
        for d, x in zip(plan.inputs, inputs):  # CopyModelData (the same array as last time: frozen, nothing to do)
            zero_copy_in += frozen.get(d.allocation) is x or self._bind_input(d.allocation, x)
        self._keep_bindings = outputs is not None or not self._bound_out  # (SunkTask.bind)
        if outputs is None:
            outputs, pending = self._fresh_outputs(plan)
        else:
            outputs = plan.check_outputs(outputs)
            self._out_pool.clear()  # (this run moves the tasks off the arrays it returned: counts stale)
            pending = [i for i, (d, y) in enumerate(zip(plan.outputs, outputs)) if not self._try_bind(d.allocation, y)]
            self._caller_bound.update(d.allocation for d in plan.outputs)
        dirty = self.args.update_for_execute()
        self.model.running_context = self  # GetRunAddress answers for the context that runs
        t1 = clock()
        if launch == "sunk":
            self.stream.launch(self._run, dirty)  # rtModelExecute: the device walks the sunk tasks
        else:
            self._launch_per_task()
        self.stream.synchronize(timeout)
        t2 = clock()
        self._copy_out(plan, outputs, pending)  # CopyOutputData
        if not self._caller_bound:
            self._out_pool.settle(outputs)
        if self.args.bytes_written:
            self.counters["args_bytes"] += self.args.bytes_written
            self.run_counts["args_bytes"] = self.args.bytes_written
        self._last_run = (self.run_counts, self.args.full_refresh, len(dirty), zero_copy_in, len(inputs), len(pending),
                          len(outputs), t0, t1, t2, clock())
        return outputs

    @property
    def stats(self) -> dict:
        """What the last execute() did: copies and bytes by kind, args bytes, allocations, zero-copy
        and copied I/O, tasks, views rebuilt, and the time of its three phases."""
        if self._last_run is None:
            return {}
        counts, full, rebuilt, zero_in, n_in, copied_out, n_out, t0, t1, t2, t3 = self._last_run
        stats = {k: counts.get(k, 0) for k in COUNTERS}
        stats.update(allocations=stats.pop("mallocs"), full_refresh=full, views_rebuilt=rebuilt, tasks=len(self.handle),
                     zero_copy_inputs=zero_in, copied_inputs=n_in - zero_in, zero_copy_outputs=n_out - copied_out,
                     copied_outputs=copied_out, h2d_ms=(t1 - t0) * 1e3, compute_ms=(t2 - t1) * 1e3,
                     d2h_ms=(t3 - t2) * 1e3)
        return stats

    def _io_view(self, d) -> np.ndarray:
        """The planned buffer of a model output (default I/O memory: fixed while the context lives)."""
        view = self._io_views.get(d.allocation)
        if view is None:
            view = self._io_views[d.allocation] = self.device.view(self.io_default[d.allocation], d.dtype, d.shape)
        return view

    # -- known-node mode (V2 kernels): the caller owns every address -----------------------------
    def update_workspaces(self, fm_addr: int, ws_addr: int) -> None:
        """UpdateHbmFmMemBases / UpdateExMemBase: feature maps and workspace move to these bases."""
        for what, addr, size in (("feature map", fm_addr, self.fm_size), ("workspace", ws_addr, self.workspace_size)):
            if size:
                self.device.block(addr, size)  # raises unless [addr, addr + size) is device memory
        self.args.set_base(FM_ID, fm_addr)
        self.args.set_base(WORKSPACE_ID, ws_addr)
        self.workspaces_set = True

    def update_io(self, inputs, outputs) -> None:
        """UpdateKnownNodeArgs: model inputs and outputs live at these device addresses."""
        plan = self.model.ge_plan
        for role, descs, addrs in (("inputs", plan.inputs, inputs), ("outputs", plan.outputs, outputs)):
            if len(addrs) != len(descs):
                raise GeError(f"model '{plan.name}' has {len(descs)} {role}, got {len(addrs)} addresses")
            for d, addr in zip(descs, addrs):
                self.device.block(int(addr), d.nbytes)
                self.args.set_base(d.allocation, int(addr))

    def launch(self) -> None:
        """Refresh what moved and execute the sunk task list on the stream (DavinciModelExecute)."""
        if not self.workspaces_set:
            raise GeError(f"model '{self.model.ge_plan.name}': workspaces not set (call update_workspaces first)")
        dirty = self.args.update_for_execute()
        self.model.running_context = self
        self.stream.launch(self._run, dirty)

    def run_inline(self) -> None:
        """launch() and synchronize() for a caller that runs this context once per iteration inside its
        own run (a static Loop/Scan body or If branch, whose caller holds the kernel state and bound its
        addresses once): while nothing moved and the stream runs work as it is launched, the tasks'
        bound calls (and epilogues) in a row, without launch's closure, the executor's loop and the
        kernel-state and args checks (~3 us of a 200-step Loop's 12 us per iteration)."""
        steps = self._inline
        if steps is None or self.args.moved():
            self.launch()
            self.stream.synchronize()
            if not self.stream.asynchronous and type(self.executor) is LinearExecutor:
                self._inline = tuple((t.call, t.plan.epilogue, t.ys[0] if t.ys else None) for t in self.handle)
            return
        self.device.counters["launches"] += 1
        self.model.running_context = self
        t = 0
        try:
            for t, (call, epilogue, y) in enumerate(steps):
                call()
                if epilogue is not None:
                    epilogue(y)
        except Exception as e:  # the message launch() gives
            p = self.handle[t].plan
            if isinstance(e, GeError):
                raise
            raise GeError(f"node '{p.name}' ({p.kernel.op_type}) failed at run time: {type(e).__name__}: {e}") from e

    def inline_calls(self, skip=()) -> tuple | None:
        """The calls run_inline makes, in a row (a fused epilogue as a call of its own), but those of
        the tasks in `skip`, for a caller that makes them itself many times while nothing can move (a
        Loop or Scan kernel iterating a bound static body within one run of its node); None until a
        run_inline bound them, while the context is observed, or when something moved."""
        if self._inline is None or self.args.moved():
            return None
        return tuple(c for t, (call, epilogue, y) in enumerate(self._inline) if t not in skip
                     for c in ((call,) if epilogue is None else (call, partial(epilogue, y))))

    # -- the device side -------------------------------------------------------------------------
    def _run(self, dirty) -> None:
        if dirty.size:
            self._rebuild(dirty)
        try:
            with self.kernel_state:  # once per execution (nothing, nested in a caller's)
                self.executor.run(self.handle)
        except TaskFailed as failed:  # a kernel failed: name the node, keep the cause for --debug
            if isinstance(failed.cause, GeError):
                raise failed.cause
            p = self.handle[failed.task].plan
            raise GeError(f"node '{p.name}' ({p.kernel.op_type}) failed at run time: "
                          f"{type(failed.cause).__name__}: {failed.cause}") from failed.cause

    def _rebuild(self, dirty) -> None:
        """Task views follow the args table in device memory: what it says is what kernels touch."""
        table = self.args.table
        self._inline = None  # tasks rebound: their calls are new
        for t in dirty:
            task = self.handle[t]
            first = task.plan.first_arg
            task.bind(table[first:first + len(task.plan.metas)], self.device, self._keep_bindings)

    def _launch_per_task(self) -> None:
        """Resolve each task's arguments on the host and launch it on its own, every run."""
        layout, base = self.args.layout, self.args.base
        for task in self.handle:
            first = task.plan.first_arg
            sl = slice(first, first + len(task.plan.metas))
            fresh = SunkTask(task.plan).bind(base[layout.allocation[sl]] + layout.offset[sl], self.device)
            self.stream.launch(partial(_run_quietly, fresh))

    # -- I/O binding: zero copy when the buffer qualifies, else a copy through planned memory ----
    def _bind_input(self, allocation: int, x) -> bool:
        """Bind x in place, or copy it into the planned buffer. Binding moves the tasks that read it,
        which rebuild their views and prepared native calls (a batched MatMul's: ~70 us) unless
        they kept those of the array (SunkTask.bind): the same array again is frozen (nothing moves,
        its current contents read), two arrays in turn are bound (the tasks' kept bindings), and a
        small array new to this input is copied (393 KiB: ~20 us) so the tasks keep their calls."""
        if self._bound_input.get(allocation) is x:  # bound by the last run and still there: frozen
            return True
        if isinstance(x, np.ndarray) and x.nbytes <= COPY_IN_MAX:
            recent = self._recent_inputs.get(allocation, ())
            self._recent_inputs[allocation] = (x,) + recent[:1]
            if recent and all(r is not x for r in recent):
                self._unbind(allocation)  # (the planned buffer again, where it was not already)
                self._copy("h2d", self.device.memcpy_h2d, x.nbytes, self.io_default[allocation], x)
                return False
        if self._try_bind(allocation, x):
            if not isinstance(x, DeviceBuffer):
                self._bound_input[allocation] = x
            return True
        if isinstance(x, DeviceBuffer):  # device memory we may not bind (misaligned, foreign)
            nbytes = self.model.ge_plan.allocation_sizes[allocation]
            self._copy("d2d", self.device.memcpy_d2d, nbytes, self.io_default[allocation], x.addr, nbytes)
        else:  # CopyInputForNoZeroCopy
            self._copy("h2d", self.device.memcpy_h2d, x.nbytes, self.io_default[allocation], x)
        return False

    def _fresh_outputs(self, plan) -> tuple[list, list[int]]:
        """Arrays for the outputs (the OutputPool's), and the indices of those copied out after the run.
        A small output is a copy of its planned buffer, which costs less than binding a new array and
        rebuilding the views of the tasks that write it (tens of microseconds, a tiny model's whole
        run); once the same array has come back STEADY runs in a row (a caller that drops the results
        before its next call) it is bound in place, and stays where the tasks already write. A large
        one is bound wherever it can be."""
        for allocation in self._caller_bound:  # a caller's buffers, bound by an earlier run
            self._unbind(allocation)
        self._caller_bound.clear()
        outputs, pending, came_back = [], [], self._came_back
        pool_bound = self._pool_bound
        for i, d in enumerate(plan.outputs):
            y, again = self._out_pool.take(i, d.shape, d.dtype)
            came_back[i] = came_back[i] + 1 if again else 0
            outputs.append(y)
            if again and pool_bound[i] and d.allocation in self._bound:  # where the tasks write already
                continue
            pool_bound[i] = (came_back[i] >= STEADY or i in self._bound_out) and self._try_bind(d.allocation, y)
            if pool_bound[i]:
                continue
            if d.allocation in self._bound:  # an array of the pool's the caller holds now: planned memory again
                self._unbind(d.allocation)
            pending.append(i)
        return outputs, pending

    def _copy_out(self, plan, outputs: list, pending: list[int]) -> None:
        """The outputs not bound zero-copy, out of their planned buffers."""
        for i in pending:
            d, y = plan.outputs[i], outputs[i]
            if isinstance(y, DeviceBuffer):
                self._copy("d2d", self.device.memcpy_d2d, d.nbytes, y.addr, self.io_default[d.allocation], d.nbytes)
            else:
                self._copy("d2h", self.device.copy_to_host, y.nbytes, y, self._io_view(d))

    def _copy(self, kind: str, copy, nbytes: int, *args):
        """copy(*args), counted (and timed for the profiler); returns what copy returns."""
        if self.copy_trace is None:
            result = copy(*args)
        else:  # the profiler's: (kind, start, seconds, bytes) per copy
            start = time.perf_counter()
            result = copy(*args)
            self.copy_trace.append((kind, start, time.perf_counter() - start, nbytes))
        count, size = _COUNTER_KEYS[kind]
        for counts in (self.counters, self.run_counts):
            counts[count] = counts.get(count, 0) + 1
            counts[size] = counts.get(size, 0) + nbytes
        return result

    def _try_bind(self, allocation: int, buf) -> bool:
        device = self.device
        self._bound_input.pop(allocation, None)
        if isinstance(buf, DeviceBuffer):
            if not device.owns(buf):
                self._unbind(allocation)
                return False
            self._release_host(allocation)
            self.args.set_base(allocation, buf.addr)
            return True
        if not device.bindable(buf):
            self._unbind(allocation)
            return False
        addr = buf.ctypes.data
        if self._bound.get(allocation) != addr:  # bound once per allocation, however many runs
            self._release_host(allocation)
            device.bind_host(buf)
            self._bound[allocation] = addr
        self.args.set_base(allocation, addr)
        return True

    def _release_host(self, allocation: int) -> None:
        addr = self._bound.pop(allocation, None)
        if addr is not None:
            self.device.unbind(addr)

    def _unbind(self, allocation: int) -> None:
        self._bound_input.pop(allocation, None)
        self._release_host(allocation)
        self.args.set_base(allocation, self.io_default[allocation])

    # -- resources -----------------------------------------------------------------------------
    @property
    def device_bytes(self) -> int:
        """Device memory this context owns: feature maps, workspace, default I/O, args table."""
        return self.counters["malloc_bytes"]

    def _malloc(self, nbytes: int) -> int:
        addr = self.device.malloc(nbytes)
        self._owned.append(addr)
        self.counters["mallocs"] += 1
        self.counters["malloc_bytes"] += nbytes
        return addr

    def destroy(self) -> None:
        for allocation in list(self._bound):
            self._release_host(allocation)
        self.device.release_stream(self.stream)
        for addr in self._owned:
            self.device.free(addr)
        self._owned.clear()
        self._out_pool.clear()
        self.model = None  # (it points back at its model, which holds it: no cycle once destroyed)
