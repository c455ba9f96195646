"""A dynamic subgraph's runs replayed by their input shapes (a Loop body whose carried state grows).

When each step of a subgraph is a static submodel or a node whose impl its input shapes alone decide
(no shape value read from a computed tensor, no host value, no control flow, no data-dependent
output), the impls of a run follow from the subgraph's input (dtype, shape) pairs. The second run
with such inputs records its steps' impls (a trace; inputs met once, as by one long run, cost a
set's entry, not a trace); a later run with the same ones replays it: per node the output buffers,
the views and the kernel, without the signature, its comparison and the impl cache's lookup that
HybridContext._run_node makes (a growing-state Loop's body meets each shape once a run: its nodes
never reach their steady path, and every run of the Loop meets the same shapes). A Loop's run
from the start of an earlier one (the same input shapes and buffers) is that run again, call for call:
LoopTape records it once and replays its calls in a row, without run_nested's layers.
The traces hold their impls, so a context keeps at most as many traces as the impl cache may hold
entries, and none when it keeps none. (The context is passed to each call, not held: a context holds
its traces, and a cycle would outlive its model's unload until a garbage collection.)"""
from __future__ import annotations

import operator

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
        # a Loop's runs taped (LoopTape): the steps' calls can be taped when every step is a node
        self.tapeable = self.enabled and all(s.kind == "node" for s in dyn.steps)
        self.tapes: list[LoopTape] = []  # the last two made (a state's buffers trade places: two starts take turns)
        self.recording: LoopTape | None = None  # the tape the node's run in progress appends its iterations to

    def clear(self) -> None:
        self.seen.clear()
        self.traces.clear()
        self.tapes.clear()
        self.recording = None

    def key(self, ctx) -> tuple | None:
        """The (dtype, shape) of each input the subgraph reads, once run_nested has placed them; None
        when the run cannot be traced (a host value among them, or the subgraph is not traceable)."""
        if not self.enabled or ctx.host:
            return None
        return tuple([(s.dtype, s.shape) for s in map(ctx.slots.__getitem__, self.inputs)])

    def replay(self, ctx, key: tuple, log: list | None = None) -> bool:
        """Run the steps as the trace of these inputs says; False when there is none (the caller runs
        them one by one, then record()). `log`: a list to append each call made to, with its node (a
        Loop's iteration being taped)."""
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
                        if log is not None:
                            log.append((_with_epilogue(call, impl.epilogue, y), node))
                        break
                else:
                    if self._run(ctx, node, impl, args, outs, memos):
                        ran += 1
                        if log is not None:
                            _, _, call, y = memos[-1]
                            log.append((_with_epilogue(call, impl.epilogue, y), node))
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
                self.enabled = self.tapeable = False
                self.clear()
                return
            outs = tuple((o, m.dtype, m.shape) for o, m in zip(node.outputs, impl.out_metas))
            steps.append((index, node, impl, args, outs, []))
        if len(self.traces) >= self.capacity:
            self.traces.clear()
        self.traces[key] = tuple(steps)

    # -- a Loop's run taped ------------------------------------------------------------------------
    def tape(self, ctx) -> "LoopTape | None":
        """The tape of a Loop run from the start `ctx` holds now (its first iteration's inputs placed);
        None when there is none (the run about to start is recorded) or the inputs cannot be traced."""
        key = self.key(ctx)
        if key is None:
            return None
        slots = tuple(ctx.slots.values())
        for tape in self.tapes:
            if tape.fits(key, slots):
                return tape
        tape = self.recording = LoopTape(key, slots, ctx.counters["allocations"])
        self.tapes = [tape, *self.tapes[:1]]
        return None

    def note(self, ctx, log: list | None, results: list) -> None:
        """The iteration run_nested just ran, appended to the tape being recorded: its calls (`log`, None
        when it was not a replay of the trace), its slots' states after it, its outputs' views. The
        recording ends at an iteration that is not a replay, allocated a buffer (a new buffer is never
        in the start a tape is checked against: the tape is dropped), gives a condition that is not
        one value (the kernel names it), or past the traces' capacity."""
        tape = self.recording
        cond = results[0] if results else None
        if log is None or ctx.counters["allocations"] != tape.allocations or len(tape.entries) >= self.capacity \
                or type(cond) is not np.ndarray or cond.size != 1:
            self.recording = None
            if ctx.counters["allocations"] != tape.allocations and tape in self.tapes:
                self.tapes.remove(tape)
            return
        tape.entries.append((tuple(log), tuple([(s.addr, s.capacity, s.data, s.dtype, s.shape, s.array)
                                                for s in tape.slots]), tuple(results)))

    def run_loop(self, ctx, tape: "LoopTape", limit: int | None, put, check, where: str) -> tuple | None:
        """Iterations 0, 1, ... of a Loop as `tape` recorded them, on the inputs ctx.loop_tape placed:
        each iteration's calls in a row (its number written into the body's input first, when read),
        `put(t, outputs)` (the kernel's scan outputs), until the body's condition is false, `limit`
        iterations ran or the tape ends; then the slots as that iteration left them. (iterations run,
        the last one's output views), None when the tape holds no iteration. A tape that ends before
        the loop does goes on being recorded."""
        entries, counter = tape.entries, None
        if ctx._reads[0]:  # the iteration number: the slot run_nested copies it into, of the same buffer
            counter = ctx._view(ctx.slots[ctx.model.dyn.inputs[0].name])
        stop = len(entries) if limit is None else min(limit, len(entries))
        if not stop:  # (a recording that ended at its first iteration): recorded again
            tape.allocations, self.recording = ctx.counters["allocations"], tape
            return None
        t, going, ran = 0, True, 0
        try:
            while t < stop:
                calls, _, outs = entries[t]
                if check is not None:
                    check()
                if counter is not None:
                    counter[()] = t
                try:
                    for call, node in calls:
                        call()
                except GeError as e:  # as a subgraph call names what failed in it
                    raise type(e)(f"{where}: {e}") from e
                except Exception as e:  # as run_nested names a failing node
                    raise GeError(f"{where}: node '{node.name}' ({node.op_type}) failed at run time: "
                                  f"{type(e).__name__}: {e}") from e
                ran += len(calls)
                t += 1  # (before the kernel's put, which may fail: the slots as this iteration left them)
                if put is not None:
                    put(t - 1, outs)
                if not outs[0]:
                    going = False
                    break
        finally:
            if t:
                for s, state in zip(tape.slots, entries[t - 1][1]):
                    s.addr, s.capacity, s.data, s.dtype, s.shape, s.array = state
            ctx.nodes_run += ran
            ctx._fold_counts()
        produced = ctx._produced
        produced.clear()
        for d, view in zip(ctx.model.dyn.outputs, outs):
            produced[id(view)] = ctx.slots[d.name]  # (the kernel's next call passes them back: traded, not copied)
        if going and t == len(entries) and (limit is None or t < limit):  # the loop goes on: so does the tape
            tape.allocations, self.recording = ctx.counters["allocations"], tape
        return t, list(outs)


class LoopTape:
    """A Loop's run of a traced body from one start (the (dtype, shape) of the inputs it reads, every
    slot's buffer): per iteration (its calls with their nodes, every slot's state after it, its outputs'
    views). The run is decided by its start: each step's impl by its input shapes (the trace), each
    buffer by the shapes and the buffers before (a carried value trades buffers with its output, a
    tensor grows only past its capacity); only the condition reads values, and it only ends the run.
    So a run from the same start makes the same calls on the same buffers, iteration after iteration."""
    __slots__ = ("key", "slots", "start", "allocations", "entries")

    def __init__(self, key: tuple, slots: tuple, allocations: int):
        self.key, self.slots, self.allocations = key, slots, allocations
        self.start = tuple([s.data for s in slots])
        self.entries: list[tuple] = []

    def fits(self, key: tuple, slots: tuple) -> bool:
        return key == self.key and len(slots) == len(self.slots) and all(map(operator.is_, slots, self.slots)) \
            and all(s.data is data for s, data in zip(slots, self.start))


def _with_epilogue(call, epilogue, y):
    """A step's call, then its epilogue on its output, as one call."""
    if epilogue is None:
        return call

    def both() -> None:
        call()
        epilogue(y)
    return both
