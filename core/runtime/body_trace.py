"""A dynamic subgraph's runs replayed by their input shapes (a Loop body whose carried state grows).

When each step of a subgraph is a static submodel or a node whose impl its input shapes alone decide
(no shape value read from a computed tensor, no host value, no control flow, no data-dependent
output), the impls of a run follow from the subgraph's input (dtype, shape) pairs. The second run
with such inputs records its steps' impls (a trace; inputs met once, as by one long run, cost a
set's entry, not a trace); a later run with the same ones replays it: per node the output buffers,
the views and the kernel, without the signature, its comparison and the impl cache's lookup that
HybridContext._run_node makes (a growing-state Loop's body meets each shape once a run: its nodes
never reach their steady path, and every run of the Loop meets the same shapes).
The traces hold their impls, so a context keeps at most as many traces as the impl cache may hold
entries, and none when it keeps none. (The context is passed to each call, not held: a context holds
its traces, and a cycle would outlive its model's unload until a garbage collection.)"""
from __future__ import annotations

import numpy as np

from ..model.errors import GeError


class BodyTraces:
    def __init__(self, ctx):  # a HybridContext of a subgraph
        model, dyn = ctx.model, ctx.model.dyn
        self.capacity = model.cache.capacity
        self.enabled = self.capacity > 0 and bool(dyn.steps) and all(
            s.kind == "submodel" or (s.index not in model.host_ops and not dyn.nodes[s.index].subgraphs
                                     and not model.shape_inputs[s.index]) for s in dyn.steps)
        self.inputs = [d.name for d, read in zip(dyn.inputs, ctx._reads) if read]
        # per step: its index, and for a node the node and its inputs as (name, constant) pairs
        self.steps = [(s.index, None, None) if s.kind != "node" else
                      (s.index, dyn.nodes[s.index], tuple((name, const) for name, const, _ in model.args[s.index]))
                      for s in dyn.steps]
        self.seen: set[tuple] = set()
        self.traces: dict[tuple, tuple] = {}

    def clear(self) -> None:
        self.seen.clear()
        self.traces.clear()

    def key(self, ctx) -> tuple | None:
        """The (dtype, shape) of each input the subgraph reads, once run_nested has placed them; None
        when the run cannot be traced (a host value among them, or the subgraph is not traceable)."""
        if not self.enabled or ctx.host:
            return None
        return tuple([(s.dtype, s.shape) for s in map(ctx.slots.__getitem__, self.inputs)])

    def replay(self, ctx, key: tuple) -> bool:
        """Run the steps as the trace of these inputs says; False when there is none (the caller runs
        them one by one, then record())."""
        trace = self.traces.get(key)
        if trace is None:
            return False
        ran = 0
        for index, node, impl, args, outs, memos in trace:
            if node is None:
                ctx._run_submodel(index)
                continue
            try:
                for checks, states, call, y in memos:  # the step as it ran on these very buffers
                    for slot, data in checks:
                        if slot.data is not data:
                            break
                    else:
                        for slot, dtype, shape, array in states:
                            slot.dtype, slot.shape, slot.array = dtype, shape, array
                        call()
                        if impl.epilogue is not None:
                            impl.epilogue(y)
                        break
                else:
                    ran += self._run(ctx, node, impl, args, outs, memos)
                    continue
            except GeError:
                raise
            except Exception as e:  # as _run_steps names a failing node
                raise GeError(f"node '{node.name}' ({node.op_type}) failed at run time: {type(e).__name__}: {e}") from e
            ran += 1
        ctx.nodes_run += ran
        return True

    @staticmethod
    def _run(ctx, node, impl, args, outs, memos: list) -> bool:
        """A traced step on buffers it has no memo for: its output views, its kernel's run, and a memo
        of it (its slots and their buffers, their states after it, the kernel's call bound to those
        views) for the next replay on the same buffers (two kept: a carried value's buffers trade
        places every iteration, so the same trace meets two sets by turns). False: it had nothing to
        compute."""
        slots, tensor_view = ctx.slots, ctx._tensor_view
        ys = [tensor_view(name, dtype, shape) if name else None for name, dtype, shape in outs]
        if impl.empty:
            ctx.counters["skipped_empty"] += 1
            return False
        xs, used = [], []
        for name, const in args:
            if name is None:
                xs.append(const)
            else:
                s = slots[name]
                xs.append(ctx._view(s))
                used.append(s)
        ws, wname = None, f"{node.name}:workspace"
        if impl.workspace:
            ws = tensor_view(wname, np.dtype(np.uint8), (impl.workspace,))
        impl.kernel.run(xs, ys, ws)
        if impl.epilogue is not None:
            impl.epilogue(ys[0])
        written = [slots[name] for name, _, _ in outs if name] + ([slots[wname]] if impl.workspace else [])
        if len(memos) > 1:
            memos.pop(0)
        memos.append((tuple((s, s.data) for s in used + written), tuple((s, s.dtype, s.shape, s.array) for s in written),
                      impl.kernel.bound(xs, ys, ws), ys[0] if ys else None))
        return True

    def record(self, ctx, key: tuple) -> None:
        """The impls the run just made chose, as the trace of these inputs (met before)."""
        if key not in self.seen:
            if len(self.seen) >= self.capacity:
                self.seen.clear()
            self.seen.add(key)
            return
        states, steps = ctx.states, []
        for index, node, args in self.steps:
            if node is None:
                steps.append((index, None, None, None, None, None))
                continue
            impl = states[index].impl
            if impl is None or impl.out_metas is None:  # data-dependent: its values decide the shapes after it
                self.enabled = False
                self.traces.clear()
                return
            outs = tuple((o, m.dtype, m.shape) for o, m in zip(node.outputs, impl.out_metas))
            steps.append((index, node, impl, args, outs, []))
        if len(self.traces) >= self.capacity:
            self.traces.clear()
        self.traces[key] = tuple(steps)
