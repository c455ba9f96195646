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
        slots, view, tensor_view = ctx.slots, ctx._view, ctx._tensor_view
        ran = 0
        for index, node, impl, args, outs in trace:
            if node is None:
                ctx._run_submodel(index)
                continue
            try:
                ys = [tensor_view(name, dtype, shape) if name else None for name, dtype, shape in outs]
                if impl.empty:
                    ctx.counters["skipped_empty"] += 1
                    continue
                xs = []
                for name, const in args:
                    if name is None:
                        xs.append(const)
                    else:
                        s = slots[name]
                        xs.append(s.array if s.array is not None else view(s))
                ws = tensor_view(f"{node.name}:workspace", np.dtype(np.uint8), (impl.workspace,)) \
                    if impl.workspace else None
                impl.kernel.run(xs, ys, ws)
                if impl.epilogue is not None:
                    impl.epilogue(ys[0])
            except GeError:
                raise
            except Exception as e:  # as _run_steps names a failing node
                raise GeError(f"node '{node.name}' ({node.op_type}) failed at run time: {type(e).__name__}: {e}") from e
            ran += 1
        ctx.nodes_run += ran
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
                steps.append((index, None, None, None, None))
                continue
            impl = states[index].impl
            if impl is None or impl.out_metas is None:  # data-dependent: its values decide the shapes after it
                self.enabled = False
                self.traces.clear()
                return
            outs = tuple((o, m.dtype, m.shape) for o, m in zip(node.outputs, impl.out_metas))
            steps.append((index, node, impl, args, outs))
        if len(self.traces) >= self.capacity:
            self.traces.clear()
        self.traces[key] = tuple(steps)
