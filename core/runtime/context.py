"""ExecutionContext: the per-run state of a loaded model (Mini-Infer's ExecutionContext).

The DavinciModel (weights, kernels, task defs, memory plan) is immutable and shared; a context
owns its feature-map and workspace memory, default I/O buffers, args table, stream and the sunk
task list (the model handle) whose views point into its own memory. Several contexts of one
model can run at once from different threads.
"""
from __future__ import annotations

import numpy as np

from ..errors import GeError
from ..ge_model import FM_ID, WEIGHT_ID, WORKSPACE_ID
from .args_manager import ModelArgsManager


class SunkTask:
    """One task as the device holds it: a prepared kernel and views resolved from the args table."""
    __slots__ = ("plan", "xs", "ys", "ws")

    def __init__(self, plan):
        self.plan = plan
        self.xs = self.ys = self.ws = None

    def rebuild(self, table: np.ndarray, device, ws: np.ndarray | None) -> None:
        p = self.plan
        views = [device.view(int(addr), m.dtype, m.shape) for addr, m in zip(table[p.first_arg:p.first_arg + len(p.metas)], p.metas)]
        xs = iter(views[:p.num_present_inputs])
        self.xs = [next(xs) if present else None for present in p.present_inputs]
        self.ys = views[p.num_present_inputs:]
        self.ws = ws[:p.workspace] if p.workspace else None

    def run(self) -> None:
        p = self.plan
        p.kernel.run(self.xs, self.ys, self.ws)
        if p.epilogue is not None:  # fused activations, in place on the output
            p.epilogue(self.ys[0])


class ExecutionContext:
    def __init__(self, model):
        self.model = model
        self.device = device = model.device
        plan = model.ge_plan
        self._owned: list[int] = []
        self.fm_addr = self._malloc(plan.fm_size)
        self.ws_addr = self._malloc(plan.workspace_size)
        self.ws = device.view(self.ws_addr, np.uint8, (plan.workspace_size,))
        # planned I/O memory: used whenever a user buffer cannot be bound in place
        self.io_default = {a.id: self._malloc(a.size) for a in plan.io_allocations}
        self.args = ModelArgsManager(plan.args_layout, device, self._malloc(plan.args_layout.size * 8))
        self.stream = device.create_stream()
        self.handle = [SunkTask(t) for t in plan.tasks]  # DistributeTask: the sunk task list
        self.args.set_base(WEIGHT_ID, model.weight_addr)
        self.args.set_base(FM_ID, self.fm_addr)
        self.args.set_base(WORKSPACE_ID, self.ws_addr)
        for alloc, addr in self.io_default.items():
            self.args.set_base(alloc, addr)
        self._rebuild(self.args.update_for_execute())  # UpdateStaticModelArgsByFm
        self._bound: dict[int, int] = {}  # allocation -> user buffer address bound zero-copy
        self.stats: dict = {}

    # -- NnExecute -----------------------------------------------------------------------------
    def execute(self, inputs, outputs=None, timeout: float | None = None) -> list[np.ndarray]:
        plan, device = self.model.ge_plan, self.device
        before = dict(device.counters)
        inputs = plan.check_inputs(inputs)
        zero_copy = copied = 0
        for desc, x in zip(plan.inputs, inputs):  # CopyModelData
            if self._bind(desc.allocation, x):
                zero_copy += 1
            else:
                self._unbind(desc.allocation)
                device.memcpy_h2d(self.io_default[desc.allocation], x)
                copied += 1
        if outputs is None:
            outputs = [np.empty(d.shape, d.dtype) for d in plan.outputs]
        else:
            outputs = plan.check_outputs(outputs)
        pending = []
        for desc, y in zip(plan.outputs, outputs):
            if self._bind(desc.allocation, y):
                zero_copy += 1
            else:
                self._unbind(desc.allocation)
                pending.append((y, self.io_default[desc.allocation]))
        dirty = self.args.update_for_execute()
        self.stream.launch(lambda: self._run(dirty))  # rtModelExecute: the device walks the sunk tasks
        self.stream.synchronize(timeout)
        for y, addr in pending:  # CopyOutputData
            device.memcpy_d2h(y, addr)
            copied += 1
        after = device.counters
        self.stats = {k: after[k] - before.get(k, 0) for k in ("h2d_bytes", "h2d_count", "d2h_bytes", "d2h_count", "mallocs")}
        self.stats.update(args_bytes=self.args.bytes_written, views_rebuilt=int(len(dirty)), zero_copy_io=zero_copy,
                          copied_io=copied, tasks=len(self.handle))
        return outputs

    def _run(self, dirty) -> None:
        self._rebuild(dirty)
        task = None
        try:
            for task in self.handle:
                task.run()
        except GeError:
            raise
        except Exception as e:  # a kernel failed: name the node, keep the cause for --debug
            p = task.plan
            raise GeError(f"node '{p.name}' ({p.kernel.op_type}) failed at run time: {type(e).__name__}: {e}") from e

    def _rebuild(self, dirty) -> None:
        table = self.args.table
        for t in dirty:
            self.handle[t].rebuild(table, self.device, self.ws)

    def _bind(self, allocation: int, array: np.ndarray) -> bool:
        if not self.device.bindable(array):
            return False
        addr = self.device.bind_host(array)
        if self._bound.get(allocation, addr) != addr:
            self._unbind(allocation)
        self._bound[allocation] = addr
        self.args.set_base(allocation, addr)
        return True

    def _unbind(self, allocation: int) -> None:
        addr = self._bound.pop(allocation, None)
        if addr is not None:
            if addr not in self._bound.values():
                self.device.unbind(addr)
            self.args.set_base(allocation, self.io_default[allocation])

    # -- resources -----------------------------------------------------------------------------
    def _malloc(self, nbytes: int) -> int:
        addr = self.device.malloc(nbytes)
        self._owned.append(addr)
        return addr

    def destroy(self) -> None:
        for allocation in list(self._bound):
            self._unbind(allocation)
        self.stream.destroy()
        for addr in self._owned:
            self.device.free(addr)
        self._owned.clear()
