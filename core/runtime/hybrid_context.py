"""HybridContext: the per-run state of a HybridModel (hybrid.py, the immutable part): its tensors'
buffers (Slots, grown by realloc_if_needed), each unknown node's state (its impl, views, last
input signature), a context of every static submodel, and the child contexts its control-flow
subgraphs run in. One per thread; hybrid.py says what a run does per node."""
from __future__ import annotations

import math
import operator
import time
from collections import Counter
from functools import partial

import numpy as np

from ..model.arena import Buffer, plan_arena
from ..model.dynamic_model import RANGE, STRING, DynNode
from ..model.errors import DeviceError, GeError, ShapeError
from ..model.ir import Meta
from ..kernels.blas import kernel_state
from ..kernels.epilogue import ATTR as EPILOGUE, Epilogue
from ..kernels.native.calls import prepared_calls, threads
from ..kernels.ops.control_flow import If
from .body_trace import BodyTraces
from .context import COPY_IN_MAX
from .device import Counts, DeviceBuffer
from .impl_cache import Impl
from .output_pool import OutputPool
from .known_subgraph import davinci_model_update_args, davinci_model_update_workspaces

#: an input array of a new shape from this size up is read in place, not copied in (_bind_input): below it
#: a copy costs what binding (then a buffer of its own again when the shape holds) does
NEW_SHAPE_BIND_MIN = 64 << 10
#: what a context counts of its runs (its `counters`, ge run --verbose's hybrid figures)
COUNTERS = ("allocations", "reallocs", "alloc_bytes", "memory_plans", "cache_hits", "cache_builds", "cache_evictions", "agnostic_hits",
            "weight_packs",
            "weight_pack_hits", "shape_updates", "args_set",
            "skipped_empty", "data_dependent", "submodel_launches", "nodes_run", "h2d_bytes", "d2h_bytes", "subgraph_runs")


class Slot:
    """A tensor's device buffer: `capacity` bytes at `addr` (`data`, their bytes), currently seen as
    dtype/shape; `array`, its view as such (made when first asked for, dropped when the buffer or the
    shape changes): a tensor keeps one view for as long as its shape holds, not a new one every run,
    and a new view is an ndarray on `data`, one call (the device's view() looks the address up: ~3 us
    more a view, and a Loop body whose shapes change makes ~10 views an iteration). `planned`: the
    bytes are the context's arena's (plan_memory), not an allocation of the tensor's own; None: they
    are the caller's input array, bound in place (HybridContext._bind_input)."""
    __slots__ = ("addr", "capacity", "data", "dtype", "shape", "array", "planned")

    def __init__(self, addr: int, capacity: int, data: np.ndarray, planned: bool = False):
        self.addr, self.capacity, self.data, self.planned = addr, capacity, data, planned
        self.dtype: np.dtype | None = None
        self.shape: tuple | None = None
        self.array: np.ndarray | None = None


class NodeState:
    """`steady`: (slot, its view) of every tensor buffer the node's last run used, when that run's impl
    was chosen by input shapes alone, had outputs, and had the input shapes of the run before: while
    each slot still holds that very view (realloc_if_needed drops it on any change of buffer, dtype
    or shape), the impl, views and outputs are those of the last run, and a run is the kernel's
    prepared call alone (`call`: kernel.bound() on those views, made when the views were first found
    unchanged; a node whose views change every run never prepares one). `values`: a node with shape
    inputs (a Reshape's computed target, a Slice's starts) is steady only while their values hold too:
    (view, its bytes) of each, checked at every steady run (a buffer keeps its view when new values
    come into it)."""
    __slots__ = ("sig", "impl", "xs", "ys", "ws", "call", "steady", "values")

    def __init__(self):
        self.sig = self.impl = None
        self.xs = self.ys = self.ws = self.call = self.steady = self.values = None


class _StaticBody:
    """A subgraph that is one static submodel (a static Loop or Scan body, a static branch), run
    with its inputs and outputs bound once: a call copies the inputs into their buffers (all but
    the very arrays the last call copied: a Loop's captured values), launches the submodel's tasks
    and returns views of its output buffers, valid until the next call (the control-flow kernels
    copy what they keep); no address moves between calls."""

    @classmethod
    def of(cls, ctx: "HybridContext") -> "_StaticBody | None":
        index = _one_submodel(ctx.model)
        return None if index is None else cls(ctx, index)

    def __init__(self, ctx: "HybridContext", index: int):
        dyn, sm = ctx.model.dyn, ctx.model.submodels[index]
        self.name, self.sm, self.sub, self.counters = dyn.name, sm, ctx.sub_contexts[index], ctx.counters
        ins = [ctx.realloc_if_needed(d.name, np.dtype(d.dtype), tuple(d.shape)) for d in sm.inputs]
        outs = [ctx.realloc_if_needed(d.name, np.dtype(d.dtype), tuple(d.shape)) for d in sm.outputs]
        davinci_model_update_args(sm, [s.addr for s in ins], [s.addr for s in outs], self.sub)
        views = {d.name: ctx._view(s) for d, s in zip(list(sm.inputs) + list(sm.outputs), ins + outs)}
        self.count = len(dyn.inputs)
        self.inputs = [(k, d.name, views[d.name]) for k, d in enumerate(dyn.inputs) if d.name in views]  # those it reads
        self.last: list = [None] * self.count
        self.outputs = [views[d.name] for d in dyn.outputs]
        self.produced = {id(v) for v in self.outputs}  # an output passed back in changed since: copied
        self._plan: tuple | None = None  # bound_plan's, with the task calls it was made for
        self.loop: tuple | None = None  # BoundBody.native_loop's last: (its key, the native loop or None)

    def __call__(self, arrays: list) -> list[np.ndarray]:
        if len(arrays) != self.count:
            raise ShapeError(f"subgraph '{self.name}' takes {self.count} inputs, got {len(arrays)}")
        last = self.last
        for k, name, view in self.inputs:
            x = arrays[k]
            if x is last[k] and id(x) not in self.produced:  # the same array as the last call's (a Loop's captured values)
                continue
            a = x if type(x) is np.ndarray else np.asarray(x)
            if a.shape != view.shape or a.dtype != view.dtype:
                raise ShapeError(f"static subgraph '{self.name}': input '{name}' is {a.dtype} {list(a.shape)}, it "
                                 f"was compiled for {view.dtype} {list(view.shape)}")
            view[...] = a
            last[k] = x
        self.sub.run_inline()  # davinci_model_execute's refresh and run, without its report of the refresh
        self.counters["submodel_launches"] += 1
        return list(self.outputs)  # views, valid until the next call

    def forget_inputs(self) -> None:
        """A new run of the calling node: the arrays it passes may be the same ones (a tensor's view
        lives as long as its shape) with other values."""
        self.last = [None] * self.count

    def bound_plan(self) -> tuple[tuple | None, list]:
        """(its tasks' calls in a row, None before its tasks were first bound; the views to read its
        outputs in) for a kernel iterating it: an Identity task copying a body input or output into
        another body output is left out and that output read at its source, when no other task
        reads the copy and none writes the source after it (exported bodies pass their condition
        through and give a state also as a scan output: two copies an iteration)."""
        calls = self.sub.inline_calls()
        if calls is None:
            return None, list(self.outputs)
        key = tuple(t.call for t in self.sub.handle)  # (the same calls: the same bindings)
        if self._plan is None or len(self._plan[0]) != len(key) or not all(map(operator.is_, self._plan[0], key)):
            skip, outputs = _elided_copies(self.sub.handle, [v for _, _, v in self.inputs], self.outputs)
            self._plan = (key, self.sub.inline_calls(skip) if skip else calls, outputs)
        return self._plan[1], list(self._plan[2])


def _one_submodel(model) -> int | None:
    """The index of the static submodel a subgraph is, when it is one (no node, one submodel step,
    the subgraph's outputs among the submodel's and the submodel's inputs among the subgraph's)."""
    dyn = model.dyn
    if dyn.nodes or len(dyn.steps) != 1 or dyn.steps[0].kind != "submodel":
        return None
    sm = model.submodels[dyn.steps[0].index]
    if not ({d.name for d in dyn.outputs} <= {d.name for d in sm.outputs}
            and {d.name for d in sm.inputs} <= {d.name for d in dyn.inputs}):
        return None  # not exactly the subgraph: the step-by-step path runs (and names what is missing)
    return dyn.steps[0].index


class BoundBody:
    """A static body bound for a Loop or Scan kernel that iterates it itself (control_flow.py's
    bound_body): `inputs`, one writable view per body input (None where the body does not read
    it); `outputs`, views of its output buffers; run(), one iteration on what the inputs hold,
    checked as a subgraph call is (the deadline; an error names the node and the subgraph).
    `calls`: its tasks' calls in a row (_StaticBody.bound_plan), None until a first run bound them,
    False when its tasks run another way (observed: each run is run_inline's); `runs`: how many ran.
    Once the calls are bound and the run has no deadline, `run` is `_tight`'s closure: the calls
    alone (a kernel reads b.run each iteration: ~0.3 us less of an RNN cell's ~2.7). No closure
    holds the body itself (a cycle would keep its context until a collection: unload frees at once)."""

    def __init__(self, body: _StaticBody, caller: "HybridContext", node: DynNode, key: str):
        self.inputs = [None] * body.count
        for k, _, view in body.inputs:
            self.inputs[k] = view
        self.calls, self.outputs = body.bound_plan()
        self.sub, self.caller, self.where = body.sub, caller, f"node '{node.name}' ({node.op_type})"
        self.key, self.lib, self._runs, self.body = key, body.sm.backend.lib, [0], body  # (_runs: the closures' count)
        self._tight()

    @property
    def runs(self) -> int:
        return self._runs[0]

    def run(self) -> None:
        deadline = self.caller.deadline
        if deadline is not None and time.perf_counter() > deadline[0]:
            raise DeviceError(f"{self.where}: the run took longer than its timeout of {deadline[1]} s")
        calls = self.calls
        if calls is None:  # the first run binds the tasks' calls (run_inline's path; every task runs)
            self._run_inline()
            self.calls = self.sub.inline_calls()
            if self.calls is None:  # (observed, or its tasks run another way: each run as a call's)
                self.calls = False
            self._tight()
        elif calls is False:
            self._run_inline()
        else:
            try:
                for c in calls:
                    c()
            except Exception:  # run again the way that names the failing node (the body's inputs hold)
                self._run_inline()
        self._runs[0] += 1

    def native_loop(self, feeds: list, outs: list, back: list, counter=None, cond=None):
        """Iterations in one native call (csrc/loop.c), with the copies control_flow.py's Python iteration
        makes around the body's calls (Native.step_loop says which): a function (start, stop) -> the
        iteration after the last one run. None when a call is not a prepared native one (numpy's, an
        epilogue), the calls are not bound yet, a copy is not one block, or the run has a deadline
        (checked each iteration). The body keeps the last one made, for the same calls and arrays
        (a Loop's run after run: building one is ~30 us of ctypes)."""
        if not self.calls or self.lib is None or self.caller.deadline is not None:
            return None
        key = (self.calls, threads(), counter, cond, *(a for pairs in (feeds, outs, back) for pair in pairs for a in pair))
        last = self.body.loop
        if last is not None and len(last[0]) == len(key) and all(map(operator.is_, last[0], key)):
            loop = last[1]
        else:
            loop = self._step_loop(feeds, outs, back, counter, cond)
            self.body.loop = (key, loop)  # (holding the arrays: no address can be recycled under the key)
        if loop is None:
            return None
        args, runs = loop.keep[0], self._runs

        def run(start: int, stop: int) -> int:
            args.start, args.stop = start, stop
            end = loop.run_checked()
            runs[0] += end - start
            return end
        return run

    def _step_loop(self, feeds: list, outs: list, back: list, counter, cond):
        prepared = []
        for c in self.calls:
            p = prepared_calls(c)
            if p is None:
                return None
            prepared += p
        return self.lib.step_loop(prepared, feeds, outs, back, counter, cond)

    def _run_inline(self) -> None:
        _run_named(self.sub, self.where, self.key)

    def _tight(self) -> None:
        """`run` as the bound calls alone, once they are bound, when no deadline needs checking."""
        calls = self.calls
        if not calls or self.caller.deadline is not None:
            return
        runs, again = self._runs, partial(_run_named, self.sub, self.where, self.key)

        def run() -> None:
            try:
                for c in calls:
                    c()
            except Exception:  # run again the way that names the failing node (the body's inputs hold)
                again()
            runs[0] += 1
        self.run = run


def _run_named(sub, where: str, key: str) -> None:
    """A body's tasks run as a subgraph call runs them, an error naming the node and the subgraph."""
    try:
        sub.run_inline()
    except GeError as e:
        raise type(e)(f"{where} subgraph '{key}': {e}") from e


class HybridContext:
    def __init__(self, model):  # a HybridModel (hybrid.py)
        self.model, self.device = model, model.device
        dyn = model.dyn
        self.slots: dict[str, Slot] = {}
        self.counters: Counter = Counts()
        # counted per node as plain ints, folded into `counters` when a run ends
        self.nodes_run = self.shape_updates = self.args_set = 0
        self.states = [NodeState() for _ in dyn.nodes]
        self._last_run: tuple | None = None  # (counters before, counters after, its four times): stats
        self._checked: list = [None] * len(dyn.inputs)  # each input's (dtype, shape) as last checked
        self._in_slots: list = [None] * len(dyn.inputs)  # each input's Slot, once it has one (on_host: never)
        self._given: list = [None] * len(dyn.inputs)  # each input's array of the last call (_lent, _bind_input)
        self._kernel_state = kernel_state()  # entered by one run at a time
        self._flow_calls: dict[int, tuple] = {}  # control flow: each node's subgraph calls, made once
        self._bound: list[BoundBody] = []  # control flow: the bodies bound by the node running (their runs)
        self._owned: dict[int, int] = {}  # address -> bytes
        self.growable = dyn.mode != RANGE
        self._replay: tuple | None = None  # the steps of the last run as a steady run makes them (_replay_steps)
        arena = dyn.attrs.get("arena")
        base = self._malloc(arena["size"]) if arena else 0  # range mode: one allocation per context
        # each hybrid context runs each submodel its steps name in a context of its own (own args,
        # stream, FM bases); a subgraph's context runs only its own
        self.sub_contexts = {}
        for k in sorted({s.index for s in dyn.steps if s.kind == "submodel"}):
            sm = model.submodels[k]
            sub = self.sub_contexts[k] = sm.create_context(own_memory=False)
            fm, ws = (base + arena["offsets"][f"submodel{k}:{r}"] if arena else self._malloc(n)
                      for r, n in (("fm", sm.fm_size), ("workspace", sm.workspace_size)))
            davinci_model_update_workspaces(sm, fm, ws, sub)  # the caller owns FM and workspace
        # each submodel's inputs and outputs as (name, dtype, shape)
        # and the addresses its context was last given (None: none yet)
        self._sub_io = {k: [*([(d.name, np.dtype(d.dtype), tuple(d.shape)) for d in descs]
                              for descs in (model.submodels[k].inputs, model.submodels[k].outputs)), None]
                        for k in self.sub_contexts}
        self._arena: int | None = None  # hybrid mode: the address of the tensors' arena (plan_memory), once planned
        self.children: dict[int, HybridContext] = {}  # control flow: a context per subgraph, made when first run
        self.deadline: tuple | None = None  # (perf_counter time, timeout) the run in progress must end by
        self.static_body: _StaticBody | bool | None = None  # a subgraph that is one static submodel: its bound runner
        self._last_inputs: list = [_HOST] * len(dyn.inputs)  # run_nested: the arrays its inputs hold (none yet)
        self._produced: dict[int, Slot] = {}  # run_nested: the slots of the views its last call gave, by id
        read = {d.name for d in dyn.outputs}
        for step in dyn.steps:
            read.update(dyn.nodes[step.index].inputs if step.kind == "node"
                        else (d.name for d in model.submodels[step.index].inputs))
        self._reads = [d.name in read for d in dyn.inputs]  # run_nested: an input nothing reads is not copied in
        self.traces = BodyTraces(self)  # run_nested: a subgraph's runs replayed by their input shapes
        #: sequence and optional values (lists of arrays, an array or None): no layout, held on the host
        self.host: dict[str, object] = {}
        for name, nbytes in dyn.attrs.get("capacities", {}).items():  # range mode: planned for the max shape
            addr = base + arena["offsets"][name] if arena else self._malloc(nbytes)
            self.slots[name] = Slot(addr, int(nbytes), self.device.bytes_at(addr, int(nbytes)))
        # (29 instance attributes at most (29 now): from the 30th on, CPython 3.11 gives the instance a dict of its
        # own keys, and every self.x of a call reads ~17 instructions slower)

    @property
    def planned_bytes(self) -> int:
        """Bytes the range plan laid out ahead: its arena, else its tensors' capacities (0: no plan)."""
        attrs = self.model.dyn.attrs
        return attrs["arena"]["size"] if attrs.get("arena") else sum(attrs.get("capacities", {}).values())

    # -- one execution ---------------------------------------------------------------------------
    def execute(self, inputs, outputs=None, timeout: float | None = None) -> list[np.ndarray]:
        """One run; `timeout` (seconds) bounds its control flow: a Loop or Scan iteration, an If
        branch starting past it is a DeviceError (a trip count of 2^58 is a valid model, not a hang)."""
        if self.model is None:
            raise GeError("execution context destroyed (its model unloaded)")
        counters = self.counters
        before = dict(counters)
        t0 = time.perf_counter()
        self.deadline = None if timeout is None else (t0 + timeout, timeout)
        replay = self._replay
        if replay is None or not self._replay_inputs(inputs, replay):
            replay = self._copy_inputs(inputs)
        t1 = time.perf_counter()
        with self._kernel_state:
            try:
                ran = 0 if replay is None else self._replay_steps(replay[0])
                if ran < len(self.model.dyn.steps):
                    self._replay = replay = None
                    self._run_steps(ran)
                    self._replay = self._steady_replay()
            finally:
                self._fold_counts()
        t2 = time.perf_counter()
        planned = self.model.lifetimes and counters["allocations"] != before.get("allocations", 0)
        if replay is not None and outputs is None:  # the outputs the replay's steps leave, in their views
            results, pool = [], replay[4]
            for k, view in enumerate(replay[2]):  # into the last run's arrays where the caller let go of them
                results.append(pool.take(k, view.shape, view.dtype)[0])  # (a new array's pages fault in as it is
                np.copyto(results[k], view)  # written: GPT-2 small's presents, 9.6 MB, 4.2 ms, a kept array's 1.5)
            pool.settle(results)  # (no local names an array here: settle counts the caller's references)
            self.device.count_copies("d2h", len(results), replay[3][1])
            counters["d2h_bytes"] += replay[3][1]
        else:
            results = self._copy_outputs(outputs)
        if planned:  # this run allocated: the next one finds its tensors in an arena planned for their sizes
            self.plan_memory()
        self._last_run = (before, dict(counters), t0, t1, t2, time.perf_counter())
        return results

    def _replay_inputs(self, inputs, replay: tuple) -> bool:
        """The inputs copied into the views `replay`'s steps read, when they are the arrays of its
        run's dtypes and shapes (False: execute's checks and copies name what differs)."""
        if type(inputs) is not dict:
            return False
        ndarray = np.ndarray
        for name, view, shape, dtype, bound in replay[1]:
            x = inputs.get(name)
            if bound:  # the caller's array of the last run, read in place: only that very array again
                if x is not view:
                    return False
                continue
            if type(x) is not ndarray or x.shape != shape or (x.dtype is not dtype and x.dtype != dtype):
                return False
            view[...] = x  # (x's dtype: a copy, no cast)
        nbytes = replay[3][0]
        self.device.count_copies("h2d", len(replay[1]), nbytes)
        self.counters["h2d_bytes"] += nbytes
        return True

    def _copy_inputs(self, inputs) -> tuple | None:
        """The inputs checked and copied into their tensors' buffers; the replay, unless an input's
        view changed (a new shape: the last run's steps are not this run's)."""
        copies, h2d, in_slots, replay, lendable = 0, 0, self._in_slots, self._replay, self.model.lendable
        for k, x in enumerate(self._check_inputs(inputs)):
            if lendable[k] and self._lent(k, x):
                continue
            if self._bind_input(k, x):
                continue
            slot = in_slots[k]  # (a tensor keeps its Slot and its view: no look-up by name)
            view = None if slot is None else slot.array
            if view is None or view.shape != x.shape or view.dtype != x.dtype:
                replay = self._replay = None
                name = self.model.input_names[k]
                if self.model.on_host[k]:
                    self.host[name] = x
                    continue
                slot = in_slots[k] = self.realloc_if_needed(name, x.dtype, x.shape)
                view = self._view(slot)
            view[...] = x  # (x's dtype: a copy, no cast)
            copies, h2d = copies + 1, h2d + x.nbytes
        self.device.count_copies("h2d", copies, h2d)
        self.counters["h2d_bytes"] += h2d
        return replay

    def _bind_input(self, k: int, x) -> bool:
        """Input k read in place from the caller's array, as the static context binds one
        (ExecutionContext._bind_input): the root of a hybrid model on the cpu device, an array of one
        aligned block that is the last call's, larger than COPY_IN_MAX (a decoder's past: 9.4 MB of
        GPT-2 small's a call, 1.5 ms copied) or of a new shape and larger than NEW_SHAPE_BIND_MIN (a
        generation loop's past, a token longer every call: 24 of 0.6 MB a token at GPT-2 small's size,
        where the tensor's view is new anyway). Its slot holds the caller's bytes (planned None: never
        freed, nor moved by plan_memory), made device memory by bind_host for the static submodels
        that read it by address; a later array that is neither gives the slot a buffer of its own.
        False: copied in."""
        if not self.model.lifetimes or self.device.name != "cpu" or self.model.on_host[k]:
            return False
        given, self._given[k] = self._given[k], x
        slot = self._in_slots[k]
        if slot is not None and slot.planned is None and slot.array is x:  # bound at the last call: nothing to do
            return True
        bind = type(x) is np.ndarray and (x is given or x.nbytes > COPY_IN_MAX or x.nbytes > NEW_SHAPE_BIND_MIN and (
            slot is None or x.shape != slot.shape)) and x.flags.c_contiguous and x.flags.aligned and x.nbytes > 0
        if slot is not None and slot.planned is None:  # bound to another array: released
            self.device.unbind(slot.addr)
            slot.capacity, slot.shape, slot.array, slot.planned = 0, None, None, False
            slot.addr = 0
        if not bind:
            return False
        addr = self.device.bind_host(x)
        if slot is None:
            name = self.model.input_names[k]
            slot = self._in_slots[k] = self.slots[name] = Slot(addr, x.nbytes, None)
        elif slot.planned is False and slot.addr:
            self._free(slot.addr)
        slot.addr, slot.capacity, slot.data, slot.planned = addr, x.nbytes, x.reshape(-1).view(np.uint8), None
        slot.dtype, slot.shape, slot.array = x.dtype, x.shape, x
        self._replay = None
        return True

    def _lent(self, k: int, x: np.ndarray) -> bool:
        """Input k, which only Loop and Scan nodes read, passed to them as the caller's array (a host
        value: no copy in) when it is the array of the last call or larger than COPY_IN_MAX (a Scan's
        native loop is kept for the same arrays: a new one costs ~30 us of ctypes, as a copy of ~600 KB
        does); False: copied into its tensor. One block of aligned bytes only (the native loop's rows)."""
        given, self._given[k] = self._given[k], x
        name = self.model.input_names[k]
        if (x is given or x.nbytes > COPY_IN_MAX) and x.flags.c_contiguous and x.flags.aligned:
            self.host[name] = x
            return True
        self.host.pop(name, None)
        return False

    def _copy_outputs(self, outputs) -> list:
        """Each output copied into a new array, or into the caller's buffer for it (`outputs`)."""
        device, counters = self.device, self.counters
        results, copies, copied, d2h, host, slots = [], 0, 0, 0, self.host, self.slots
        for k, name in enumerate(self.model.output_names):
            if host and name in host:
                results.append(_host_copy(host[name]))
                continue
            slot = slots[name]
            if outputs is None:  # a new array: copy_out's copy, counted with the others after the loop
                y = (slot.array if slot.array is not None else self._view(slot)).copy()
                copies, copied = copies + 1, copied + y.nbytes
            else:
                y = outputs[k]
                if tuple(y.shape) != tuple(slot.shape) or y.dtype != slot.dtype:
                    raise ShapeError(f"output '{name}' is {slot.dtype} {list(slot.shape)}; the buffer given is "
                                     f"{y.dtype} {list(y.shape)}")
                device.copy_to_host(y, self._view(slot))
            d2h += y.nbytes
            results.append(y)
        device.count_copies("d2h", copies, copied)
        counters["d2h_bytes"] += d2h
        return results

    @property
    def stats(self) -> dict:
        """What the last execute() did: the COUNTERS' increments, its steps, the time of its three phases."""
        if self._last_run is None:
            return {}
        before, after, t0, t1, t2, t3 = self._last_run
        stats = {k: after.get(k, 0) - before.get(k, 0) for k in COUNTERS}
        stats.update(h2d_ms=(t1 - t0) * 1e3, compute_ms=(t2 - t1) * 1e3, d2h_ms=(t3 - t2) * 1e3,
                     tasks=len(self.model.dyn.steps))
        return stats

    def forget_inputs(self) -> None:
        """Before a control-flow node's run calls this subgraph: the arrays its calls pass are taken as
        unchanged from call to call within that run only (between runs the caller's tensors, the same
        views, hold new values)."""
        self._last_inputs = [_HOST] * len(self._last_inputs)
        self._produced.clear()
        self.traces.recording = None  # (a Loop's tape is made within one run of the node)
        if self.static_body:
            self.static_body.forget_inputs()

    def run_nested(self, arrays: list) -> list[np.ndarray]:
        """A subgraph's run inside its caller's run (whose floating-point state and BLAS threads
        already hold): inputs in, steps, views of the outputs (valid until the next call); the
        caller keeps the statistics. An input that is an output of the last call (a Loop's carried
        value) takes that output's buffer, which takes the input's (no copy, in hybrid mode)."""
        if self.static_body is None:
            self.static_body = _StaticBody.of(self) or False
        if self.static_body:
            return self.static_body(arrays)
        copied = self._place_inputs(arrays)
        traces = self.traces
        key = traces.key(self)
        # a Loop's run being taped: the calls replayed (a tape writes no input but the iteration number)
        log = [] if traces.recording is not None and not copied else None
        try:
            if key is None or not traces.replay(self, key, log):
                log = None
                self._run_steps()
                if key is not None:
                    traces.record(self, key)
        finally:
            self._fold_counts()
        results, produced = [], self._produced
        produced.clear()
        for d in self.model.dyn.outputs:
            if d.name in self.host:
                results.append(self.host[d.name])
                continue
            slot = self.slots[d.name]
            results.append(self._view(slot))  # a view, valid until the next call (control_flow.py)
            produced[id(slot.array)] = slot
        if traces.recording is not None:
            traces.note(self, log, results)
        return results

    def _place_inputs(self, arrays: list) -> bool:
        """run_nested's inputs into their tensors: a value the last call gave back traded for the
        output it is, the same array as the last call's left in place, any other copied in. True
        when an input but the first (a Loop's iteration number) was copied or is a host value."""
        device, dyn = self.device, self.model.dyn
        if len(arrays) != len(dyn.inputs):
            raise ShapeError(f"subgraph '{dyn.name}' takes {len(dyn.inputs)} inputs, got {len(arrays)}")
        last, produced, reads, copied = self._last_inputs, self._produced, self._reads, False
        for k, (d, x) in enumerate(zip(dyn.inputs, arrays)):
            if not reads[k]:  # (a Loop's iteration number, a body that does not use it)
                continue
            out = produced.get(id(x))
            if out is not None and out.array is x:  # an output of the last call (a Loop's carried value)
                if self.growable:  # its buffer becomes the input's, the input's the output's: no copy
                    slot = self.slots.get(d.name)
                    if slot is not None and slot is not out:
                        _swap(slot, out)
                        self.host.pop(d.name, None)
                        last[k] = _HOST
                        continue
            elif x is last[k]:  # the same array as the last call's (a Loop's captured values): already in place
                continue
            copied = copied or k > 0
            if x is None or isinstance(x, list) or d.on_host:
                self.host[d.name] = x
                last[k] = _HOST  # never the next call's array: a later tensor is copied in
                continue
            self.host.pop(d.name, None)
            a = np.asarray(x)
            device.copy_from_host(self._view(self.realloc_if_needed(d.name, a.dtype, a.shape)), a)
            last[k] = _HOST if out is not None else x
        return copied

    def loop_tape(self, arrays: list):
        """The tape (body_trace.py's LoopTape) of an earlier Loop run of this subgraph from the same
        start as the one whose first iteration's inputs (`arrays`) it places; None: none fits (one is
        recorded as the kernel's iterations make their calls) or the body is no traced dynamic one."""
        if self.static_body is None:
            self.static_body = _StaticBody.of(self) or False
        if self.static_body or not self.growable or not self.traces.tapeable:
            return None
        self._place_inputs(arrays)
        return self.traces.tape(self)

    def _fold_counts(self) -> None:
        counters = self.counters
        counters["nodes_run"] += self.nodes_run
        if self.shape_updates or self.args_set:  # (none, in a steady run)
            counters["shape_updates"] += self.shape_updates
            counters["args_set"] += self.args_set
            self.shape_updates = self.args_set = 0
        self.nodes_run = 0

    def _run_steps(self, start: int = 0) -> None:
        dyn = self.model.dyn
        for step in dyn.steps[start:] if start else dyn.steps:
            if step.kind == "node":
                try:
                    self._run_node(step.index)
                except GeError:
                    raise
                except Exception as e:  # a kernel failed: name the node, keep the cause for --debug
                    node = dyn.nodes[step.index]
                    raise GeError(f"node '{node.name}' ({node.op_type}) failed at run time: "
                                  f"{type(e).__name__}: {e}") from e
            else:
                self._run_submodel(step.index)

    def _steady_replay(self) -> tuple | None:
        """The run that just ended as a replay makes it again, when it was a steady run: every node ran
        its prepared call (its steady path) but an If with a static branch, and no value was on the
        host; else None. (steps, inputs, outputs, (h2d, d2h) bytes, output pool): a step per step of the
        model, (call, epilogue, its output) for a node, (None, index, (its inputs, its outputs' slots and
        shapes)) for such an If, (None, index, None) for a submodel; each input's (name, view, shape,
        dtype, read in place); each output's view; the arrays the replayed runs return (OutputPool)."""
        model, dyn, slots = self.model, self.model.dyn, self.slots
        if self.host or model.root is not None:
            return None
        replay = []
        for step in dyn.steps:
            k = step.index
            if step.kind != "node":
                replay.append((None, k, None))
                continue
            st = self.states[k]
            if st.call is not None and k not in model.host_ops:
                call = st.call if st.values is None else partial(_guarded, st.call, st.values)
                replay.append((call, st.impl.epilogue, st.ys[0] if st.ys else None))
                continue
            flow = self._flow_calls.get(k)
            if flow is None or flow[3] is None:
                return None
            ins = [const if name is None else slots[name] for name, const, _ in model.args[k]]
            outs = tuple((slots[name], slots[name].shape) for name in dyn.nodes[k].outputs)
            replay.append((None, k, (ins, outs)))
        ins = tuple((name, slot.array, slot.shape, slot.dtype, slot.planned is None)
                    for name, slot in zip(model.input_names, self._in_slots))
        outs = tuple(self._view(slots[name]) for name in model.output_names)
        return tuple(replay), ins, outs, (sum(v.nbytes for _, v, _, _, bound in ins if not bound),
                                          sum(v.nbytes for v in outs)), OutputPool(len(outs))

    def _replay_steps(self, replay: tuple) -> int:
        """The last run's steps as its steady run made them (_steady_replay): each node's prepared call
        and epilogue without its checks, an If's branch, a submodel's launch. Valid while every tensor
        keeps its view: the inputs keep theirs (execute drops the replay when one moves) and the other
        shapes follow from theirs but an If's outputs, which are checked: a branch that gives another
        shape ends the replay after it. Returns how many steps ran (the rest run step by step)."""
        dyn, calls = self.model.dyn, 0
        t = 0
        try:
            for t, (call, epilogue, y) in enumerate(replay):
                if call is not None:
                    if call() is False:  # a shape input's value moved (_guarded): this step on, step by step
                        self.nodes_run += calls
                        return t
                    if epilogue is not None:
                        epilogue(y)
                    calls += 1
                elif y is None:
                    self._run_submodel(epilogue)
                else:
                    ins, outs = y
                    self._run_control_flow(epilogue, dyn.nodes[epilogue], ins)
                    for slot, shape in outs:
                        if slot.shape is not shape:  # (another shape: the steps after it run step by step)
                            self.nodes_run += calls
                            return t + 1
        except GeError:
            raise
        except Exception as e:  # as _run_steps names a failing node
            node = dyn.nodes[dyn.steps[t].index]
            raise GeError(f"node '{node.name}' ({node.op_type}) failed at run time: {type(e).__name__}: {e}") from e
        self.nodes_run += calls
        return len(replay)

    def _check_inputs(self, inputs) -> list[np.ndarray]:
        dyn, on_host = self.model.dyn, self.model.on_host
        if isinstance(inputs, dict):
            try:
                inputs = [inputs[name] for name in self.model.input_names]
            except KeyError:
                missing = [d.name for d in dyn.inputs if d.name not in inputs]
                raise ShapeError(f"model '{dyn.name}': inputs {missing} missing") from None
        if len(inputs) != len(dyn.inputs):
            raise ShapeError(f"model '{dyn.name}' expects {len(dyn.inputs)} inputs, got {len(inputs)}")
        checked = self._checked
        for x, last in zip(inputs, checked):  # the common case: arrays as the last call's
            if type(x) is not np.ndarray or last is None or x.shape != last[1] or \
                    (x.dtype is not last[0] and x.dtype != last[0]):
                break
        else:
            return inputs
        inputs = [x if type(x) is np.ndarray and not on_host else _host_input(d, x) if on_host else
                  x.view(x.dtype, x.shape) if isinstance(x, DeviceBuffer) else np.asarray(x)
                  for d, x, on_host in zip(dyn.inputs, inputs, on_host)]
        for i, (d, x, on_host) in enumerate(zip(dyn.inputs, inputs, on_host)):
            if on_host or (x.dtype, x.shape) == checked[i]:  # (the checks read dtype and shape only)
                continue
            if x.dtype != np.dtype(d.dtype):
                raise ShapeError(f"input '{d.name}': dtype {x.dtype} does not match the model's {d.dtype}")
            if d.shape != (-2,) and (len(x.shape) != len(d.shape)
                                     or any(s >= 0 and s != v for s, v in zip(d.shape, x.shape))):
                raise ShapeError(f"input '{d.name}': shape {list(x.shape)} does not match the model's "
                                 f"{list(d.shape)} (-1: any size)")
            for k, (lo, hi) in enumerate(d.ranges):
                if x.shape[k] < lo or (hi >= 0 and x.shape[k] > hi):
                    raise ShapeError(f"input '{d.name}': dim {k} is {x.shape[k]}, outside the range "
                                     f"{lo}~{hi if hi >= 0 else ''} compiled into the model")
            checked[i] = (x.dtype, x.shape)
        return inputs

    # -- UNKNOWN nodes ---------------------------------------------------------------------------
    def _run_node(self, index: int) -> None:
        model, st = self.model, self.states[index]
        if index in model.host_ops or (self.host and any(t in self.host for t in model.dyn.nodes[index].inputs)):
            return self._run_host_node(index, model.dyn.nodes[index])
        steady = st.steady
        if steady is not None:
            for slot, view in steady:
                if slot.array is not view:
                    st.steady = st.call = None
                    break
            else:  # the views of its last run: the kernel's prepared call (made on the second such run)
                if st.values is None or _values_hold(st.values):
                    if st.call is None:
                        st.call = st.impl.kernel.bound(st.xs, st.ys, st.ws)
                    st.call()
                    if st.impl.epilogue is not None:
                        st.impl.epilogue(st.ys[0])
                    self.nodes_run += 1
                    return
                st.steady = st.call = None
        node, slots = model.dyn.nodes[index], self.slots
        ins, metas = [], []  # each input's Slot, constant or None, and its (dtype, shape): the signature
        for name, const, meta in model.args[index]:
            if name is None:
                ins.append(const)
                metas.append(meta)
                continue
            s = slots.get(name)
            if s is None or s.shape is None:
                s = self._slot(name, node)  # (names what nothing produced)
            ins.append(s)
            metas.append((s.dtype, s.shape))
        if node.subgraphs:
            return self._run_control_flow(index, node, ins)
        shape_inputs = model.shape_inputs[index]
        sig = (tuple(metas), tuple((i, self._view(ins[i]).tobytes()) for i in shape_inputs) if shape_inputs else ())
        changed = sig != st.sig
        counters = self.counters
        if changed:  # update_shape: only when an input shape (or shape value) changed
            self.shape_updates += 1
            impl = st.impl
            served = None if impl is None or impl.family is None else self._served(impl, node, metas, ins, shape_inputs)
            st.impl = served if served is not None else model.impl(index, node, sig, counters)
            st.sig = sig
        elif st.impl.family is not None:  # a shape the agnostic kernel served, twice in a row: its own plan
            st.impl = model.impl(index, node, sig, counters, planned=True)
        impl = st.impl
        if impl.out_metas is None:  # data-dependent: the values decide the shapes
            return self._run_data_dependent(node, st, ins)
        outs = [self.realloc_if_needed(o, m.dtype, m.shape) if o else None
                for o, m in zip(node.outputs, impl.out_metas)]
        if impl.empty:
            counters["skipped_empty"] += 1  # an empty output: nothing to compute
            return
        ws = self.realloc_if_needed(f"{node.name}:workspace", np.dtype(np.uint8), (impl.workspace,)) \
            if impl.workspace else None
        view = self._view  # (a slot keeps its view while its buffer and shape hold: most are made already)
        xs, ys, wv = [view(s) for s in ins], [view(s) for s in outs], view(ws)
        if st.xs is None or wv is not st.ws or any(map(operator.is_not, xs, st.xs)) \
                or any(map(operator.is_not, ys, st.ys)):  # set arguments: an address or a shape changed
            self.args_set += 1
        st.xs, st.ys, st.ws, st.call = xs, ys, wv, None
        if not changed:  # (the views and shape values of two runs in a row)
            st.steady = tuple((s, s.array) for s in ins + outs + [ws] if type(s) is Slot)
            st.values = tuple((xs[i], b) for i, b in sig[1]) if shape_inputs else None
        impl.kernel.run(xs, ys, wv)
        if impl.epilogue is not None:
            impl.epilogue(ys[0])
        self.nodes_run += 1

    def _served(self, last, node: DynNode, metas: list, ins: list, shape_inputs) -> "Impl | None":
        """New input shapes of a node whose last impl was its shape-agnostic kernel's (last.family), of
        that family's dtypes and ranks: that kernel with its output shape for them, straight from it
        (no impl cache key, lookup or entry: a decoder's attention sees a new length every call); None
        when they are of another family or the kernel cannot serve them (model.impl decides)."""
        for m, f in zip(metas, last.family):
            if m is None or f is None:
                if m is not f:
                    return None
            elif len(m[1]) != f[1] or (m[0] is not f[0] and m[0] != f[0]):
                return None
        shapes = [None if m is None else m[1] for m in metas]
        try:
            shape = last.kernel.agnostic_output_shape(shapes, {i: self._view(ins[i]) for i in shape_inputs}) \
                if shape_inputs else last.kernel.agnostic_output_shape(shapes)
        except (ValueError, GeError):
            return None
        self.counters["agnostic_hits"] += 1
        served = Impl(last.kernel, [Meta(last.out_metas[0].dtype, shape)], 0, family=last.family)
        served.empty = not node.outputs[0] or 0 in shape
        return served

    def _run_data_dependent(self, node: DynNode, st: NodeState, ins: list) -> None:
        """A node whose outputs' shapes only its values tell (NonZero, NonMaxSuppression...): compute()
        gives the outputs, their shapes decide the allocation."""
        self.counters["data_dependent"] += 1
        impl = st.impl
        results = impl.kernel.compute(*[self._view(s) for s in ins])
        spec = node.attrs.get(EPILOGUE)
        if spec and not impl.kernel.absorbs_epilogue:  # rare: a fused producer whose shape only its values tell
            results = list(results)
            results[0] = np.array(results[0])
            Epilogue(spec, Meta(results[0].dtype, results[0].shape), node.opset, node.name)(results[0])
        for out, r in zip(node.outputs, results):
            if out:
                r = np.asarray(r)
                slot = self.realloc_if_needed(out, r.dtype, r.shape)
                np.copyto(self._view(slot), r, casting="unsafe")
        st.xs = None
        self.nodes_run += 1

    # -- sequences and optionals: host values -------------------------------------------------------
    def _run_host_node(self, index: int, node: DynNode) -> None:
        """A sequence or optional op, or a node reading such a value (Identity, control flow): its
        inputs as they are (arrays, lists, None), its outputs kept as they come (an array in its slot)."""
        xs = [self._host_arg(t, node) for t in node.inputs]
        if node.subgraphs:
            return self._run_control_flow(index, node, xs)
        kernel = self.model.host_ops.get(index)
        if kernel is not None:
            results = kernel.compute(*xs)
        elif node.op_type == "Identity" and node.domain == "":
            results = [xs[0]]
        else:
            t = next(t for t in node.inputs if t in self.host)
            raise GeError(f"node '{node.name}' ({node.op_type}) reads '{t}', a sequence, optional or string "
                          f"value; the op takes numeric tensors only")
        self._keep(node.outputs, results)
        self.nodes_run += 1

    def _host_arg(self, t: str, node: DynNode):
        if not t:
            return None
        if t in self.host:  # on the host: no device buffer, nothing for a range plan to place
            return self.host[t]
        return self.model.consts[t] if t in self.model.consts else self._view(self._slot(t, node))

    def _keep(self, names, results, made=()) -> None:
        """Outputs of a node: sequences and optionals to the host, arrays to their slots (not copied
        when it is there already: the outputs `made` in their buffers, _output_buffer)."""
        host = self.host
        for out, r in zip(names, results):
            if not out:
                continue
            if type(r) is not np.ndarray or r.dtype == object:  # (most are arrays: one check for them)
                if r is None or isinstance(r, list) or (isinstance(r, np.ndarray) and r.dtype == object):
                    host[out] = r
                    continue
                r = np.asarray(r)
            if host:
                host.pop(out, None)
            view = self._tensor_view(out, r.dtype, r.shape)
            if r is not view and not (out in made and _is_view_of(r, view)):
                view[...] = r  # (np.copyto's cost twice over: the view has r's dtype)

    # -- control flow: If, Loop, Scan run their subgraphs ----------------------------------------------
    def _run_control_flow(self, index: int, node: DynNode, ins: list) -> None:
        """The node's kernel (core/kernels/ops/control_flow.py) drives; each subgraph call runs the
        subgraph's model in this context's child context for it, on the arrays it is given."""
        flow = self.model.flow[index]
        calls = self._flow_calls.get(index)
        if calls is None:
            calls = self._flow_calls[index] = self._subgraph_calls(index, node, flow)
        bodies, templates, children, branches = calls
        if branches is not None:  # an If: the branch taken, launched directly when it is a static one
            b = flow.branch(self._view(ins[0]))
            if branches[b] is not None:
                return self._run_static_if(index, node, b, branches[b])
        launches = 0  # the children's submodel launches, counted once for the node, not per call
        for child in children:
            child.forget_inputs()
            launches -= child.counters["submodel_launches"]
        try:
            made = set()  # the outputs made in their tensors' buffers: kept without a copy when they are those

            def allocate(k: int, dtype, shape) -> np.ndarray:
                made.add(node.outputs[k])
                return self._output_buffer(node.outputs[k], dtype, shape)
            results = flow.execute([self._view(s) for s in ins], bodies, templates, allocate)
        finally:
            for child in children:
                launches += child.counters["submodel_launches"]
            self.counters["submodel_launches"] += launches
            if self._bound:  # the bound bodies' runs: each one subgraph run, one launch
                runs = sum(b.runs for b in self._bound)
                self._bound.clear()
                self.counters["submodel_launches"] += runs
                self.counters["subgraph_runs"] += runs
        self._keep(node.outputs, results, made)
        self.nodes_run += 1

    def _output_buffer(self, name: str, dtype, shape) -> np.ndarray:
        """Where a control-flow kernel makes an output: the tensor's own buffer (_keep then copies
        nothing), or a new array for an output nobody reads or a tensor that cannot grow to it."""
        if not name or not (self.growable or name in self.model.grows):
            return np.empty(shape, dtype)
        self.host.pop(name, None)
        return self._view(self.realloc_if_needed(name, np.dtype(dtype), tuple(shape)))

    def _subgraph_calls(self, index: int, node: DynNode, flow) -> tuple[list, list, list, tuple | None]:
        """What a control-flow node's runs need, the same every run: a call per subgraph attribute,
        the compiled (dtype, shape) of its outputs, the child contexts the calls run in."""
        refs = dict(node.subgraphs)
        # (an op whose subgraphs are optional, FlexAttention's modifiers, gets None for an absent one)
        bodies = [self._subgraph_call(node, key, refs[key]) if key in refs else None for key in flow.bodies]
        templates = [(np.dtype(t.dtype), t.shape if t.shape != (-2,) else None)
                     for t in self.model.subgraphs[next(refs[key] for key in flow.bodies if key in refs)].outputs]
        children = [self.children[k] for k in {refs[key] for key in flow.bodies if key in refs}]
        return bodies, templates, children, self._static_branches(index, node, flow)

    def _static_branches(self, index: int, node: DynNode, flow) -> tuple | None:
        """An If whose outputs all have names: per branch, (its key, its submodel, the child context's
        context of it) when the branch is one static submodel, which _run_static_if launches on the
        node's own tensors, else None (the kernel's execute calls it); None when neither branch is."""
        if not isinstance(flow, If) or not all(node.outputs):
            return None
        refs, branches = dict(node.subgraphs), []
        for b, key in enumerate(flow.bodies):
            branches.append(self._static_branch(index, node, b, self.children[refs[key]], key))
        return None if branches == [None, None] else tuple(branches)

    def _static_branch(self, index: int, node: DynNode, b: int, child: "HybridContext", key: str) -> tuple | None:
        k = _one_submodel(child.model)
        if k is None:
            return None
        sm, dyn = child.model.submodels[k], child.model.dyn
        outputs = {d.name: j for j, d in enumerate(dyn.outputs)}
        if len(dyn.outputs) != len(node.outputs) or set(outputs) != {d.name for d in sm.outputs}:
            return None  # (a submodel output that is no node output, or one given twice)
        captured = {d.name: name for d, name in zip(dyn.inputs, node.inputs[1:])}
        if any(not captured.get(d.name) or captured[d.name] in self.model.consts for d in sm.inputs):
            return None  # (a value without a tensor's buffer: the subgraph call copies it in)
        # its inputs and outputs as the node's tensors (a captured value is the caller's tensor)
        self._sub_io[(index, b)] = [[(captured[d.name], np.dtype(d.dtype), tuple(d.shape)) for d in sm.inputs],
                                    [(node.outputs[outputs[d.name]], np.dtype(d.dtype), tuple(d.shape))
                                     for d in sm.outputs], None]
        return key, sm, child.sub_contexts[k]

    def _run_static_if(self, index: int, node: DynNode, b: int, branch: tuple) -> None:
        """An If's static branch without a subgraph call: launched on the node's tensors as a submodel
        step is (its inputs the captured tensors' buffers, its outputs the node's outputs' buffers:
        nothing copied in or out)."""
        key, sm, sub = branch
        if self.deadline is not None:
            self._check_deadline(node)
        try:
            self._launch(sm, sub, (index, b))
        except GeError as e:  # as a subgraph call names it
            raise type(e)(f"node '{node.name}' ({node.op_type}) subgraph '{key}': {e}") from e
        self.counters["subgraph_runs"] += 1
        self.nodes_run += 1

    def _check_deadline(self, node: DynNode) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline[0]:
            raise DeviceError(f"node '{node.name}' ({node.op_type}): the run took longer than its timeout of "
                              f"{self.deadline[1]} s")

    def _subgraph_call(self, node: DynNode, key: str, k: int):
        child = self.children.get(k)
        if child is None:
            child = self.children[k] = self.model.subgraphs[k].create_context()
        run, counters = child.run_nested, self.counters

        def call(arrays: list) -> list:
            self._check_deadline(node)
            child.deadline = self.deadline  # (its own control flow, nested)
            try:
                outs = run(arrays)
            except GeError as e:  # the inner node's message, and whose subgraph it is in
                raise type(e)(f"node '{node.name}' ({node.op_type}) subgraph '{key}': {e}") from e
            counters["subgraph_runs"] += 1
            return outs

        def bound() -> BoundBody | None:
            """The body bound for a Loop or Scan that iterates it itself (control_flow.py)."""
            if child.static_body is None:
                child.static_body = _StaticBody.of(child) or False
            if not child.static_body:
                return None
            child.static_body.forget_inputs()  # what the kernel writes into the views passes by the call's check
            b = BoundBody(child.static_body, self, node, key)
            self._bound.append(b)  # its runs are counted when the node's run ends (and it is let go)
            return b

        def loop_tape(limit: int | None, arrays: list, put) -> tuple | None:
            """A Loop's iterations replayed from its body's tape (HybridContext.loop_tape); errors named
            as a call's (a failing step) or as the kernel's own (a scan output's shape, the deadline)."""
            child.deadline = self.deadline
            try:
                tape = child.loop_tape(arrays)
            except GeError as e:
                raise type(e)(f"node '{node.name}' ({node.op_type}) subgraph '{key}': {e}") from e
            if tape is None:
                return None
            check = None if self.deadline is None else partial(self._check_deadline, node)
            ran = child.traces.run_loop(child, tape, limit, put, check, f"node '{node.name}' ({node.op_type}) "
                                        f"subgraph '{key}'")
            if ran is not None:
                counters["subgraph_runs"] += ran[0]
            return ran
        call.bound, call.loop_tape = bound, loop_tape
        return call

    # -- KNOWN clusters: the V2 DavinciModel kernels ---------------------------------------------------
    def _run_submodel(self, index: int) -> None:
        self._launch(self.model.submodels[index], self.sub_contexts[index], index)

    def _launch(self, sm, sub, key) -> None:
        """A static submodel's run in its context `sub` on this context's tensors (`_sub_io[key]`):
        new addresses (UpdateArgs) only when one moved, then its tasks' bound calls."""
        io = self._sub_io[key]
        ins, outs = io[0], io[1]
        in_addrs = []
        for name, dtype, shape in ins:
            slot = self.slots.get(name)
            if slot is None or slot.shape != shape or slot.dtype != dtype:
                got = "nothing" if slot is None else f"{slot.dtype} {list(slot.shape)}"
                raise ShapeError(f"static submodel '{sm.name}': input '{name}' is {got}, it was compiled for "
                                 f"{dtype} {list(shape)}")
            in_addrs.append(slot.addr)
        out_addrs = [self.realloc_if_needed(name, dtype, shape).addr for name, dtype, shape in outs]
        if (in_addrs, out_addrs) != io[2]:  # UpdateArgs only when an address moved
            davinci_model_update_args(sm, in_addrs, out_addrs, sub)
            io[2] = (in_addrs, out_addrs)
        sub.run_inline()  # Execute: its tasks' bound calls while nothing moved (this run holds the kernel state)
        self.counters["submodel_launches"] += 1

    # -- memory ----------------------------------------------------------------------------------
    def realloc_if_needed(self, name: str, dtype, shape) -> Slot:
        """The tensor's buffer, grown only when the new shape needs more bytes than it holds."""
        slot = self.slots.get(name)
        if slot is not None and slot.shape == shape and slot.dtype == dtype:  # as last time: nothing to decide
            return slot
        dtype, shape = np.dtype(dtype), tuple(map(int, shape))
        nbytes = math.prod(shape) * dtype.itemsize
        if slot is None or nbytes > slot.capacity:
            if not self.growable and name not in self.model.grows:
                have = "no planned buffer" if slot is None else f"a planned capacity of {slot.capacity} bytes"
                raise ShapeError(f"tensor '{name}' needs {nbytes} bytes for {dtype} {list(shape)} but has {have}, "
                                 f"its upper bound in the range plan")
            if slot is not None and self.growable:  # a tensor growing again (a subgraph's in a loop, a decoder's past
                # from call to call): room ahead, so that it grows a few times, not at each size in turn (nor
                # is the root planned again after each: plan_memory); a subgraph's twice, the root's half again
                nbytes = max(nbytes, 2 * slot.capacity if self.model.root is not None else slot.capacity * 3 // 2)
            addr = self._malloc(nbytes)
            data = self.device.bytes_at(addr, nbytes)
            if slot is None:
                slot = self.slots[name] = Slot(addr, nbytes, data)
            else:
                if slot.planned is False and slot.addr:
                    self._free(slot.addr)
                slot.addr, slot.capacity, slot.data, slot.planned = addr, nbytes, data, False
                self.counters["reallocs"] += 1
        slot.dtype, slot.shape, slot.array = dtype, shape, None
        return slot

    def plan_memory(self) -> None:
        """Hybrid mode, the root's tensors moved into one arena planned (plan_arena, as the compiler plans a
        static model's) for the bytes each has held and the steps it lives (HybridModel.lifetimes): tensors
        never alive together share bytes, so a run finds its activations in a footprint like a static
        model's instead of a buffer per tensor (DBNet 160x960 with symbolic N, H, W, one thread: 24.5 ms
        as one buffer each, 21.7 planned; the static model's plan without its fusions 20.3). execute()
        plans after a run that allocated; a later run inside these sizes allocates nothing, a larger one
        grows what it must into buffers of its own, and is planned again after it (each tensor at the
        most it has held)."""
        lifetimes, slots = self.model.lifetimes, self.slots
        placed = [(name, s) for name, s in slots.items() if name in lifetimes and s.planned is not None]
        plan = plan_arena([Buffer(name, s.capacity, *lifetimes[name]) for name, s in placed])
        base = self._malloc(plan.size)
        for name, s in placed:
            if s.planned is False:
                self._free(s.addr)
            s.addr = base + plan.offsets[name]
            s.data, s.array, s.planned = self.device.bytes_at(s.addr, s.capacity), None, True
        if self._arena is not None:
            self._free(self._arena)
        self._arena, self._replay = base, None
        self.counters["memory_plans"] += 1

    def _tensor_view(self, name: str, dtype, shape) -> np.ndarray:
        """realloc_if_needed and _view in one call: most often the view the tensor kept from the last run."""
        slot = self.slots.get(name)
        if slot is not None and slot.array is not None and slot.shape == shape and slot.dtype == dtype:
            return slot.array
        return self._view(self.realloc_if_needed(name, dtype, shape))

    def _slot(self, name: str, node: DynNode) -> Slot:
        slot = self.slots.get(name)
        if slot is None or slot.shape is None:
            raise GeError(f"node '{node.name}' ({node.op_type}) reads '{name}', which nothing has produced")
        return slot

    def _view(self, s):
        if not isinstance(s, Slot):
            return s
        if s.array is None:
            s.array = np.ndarray(s.shape, s.dtype, s.data)
        return s.array

    def _malloc(self, nbytes: int) -> int:
        addr = self.device.malloc(max(int(nbytes), 1))
        self._owned[addr] = max(int(nbytes), 1)
        self.counters["allocations"] += 1
        self.counters["alloc_bytes"] += int(nbytes)
        return addr

    @property
    def device_bytes(self) -> int:
        """Device memory this context holds now: its tensors (the range arena) and its submodels'
        feature maps and workspace."""
        return sum(self._owned.values())

    def _free(self, addr: int) -> None:
        del self._owned[addr]
        self.device.free(addr)

    def destroy(self) -> None:
        for k, sub in getattr(self, "sub_contexts", {}).items():
            sm = self.model.submodels[k]
            if sub in sm.contexts:
                sm.destroy_context(sub)
        self.sub_contexts = {}
        for k, child in getattr(self, "children", {}).items():
            sg = self.model.subgraphs[k]
            if child in sg.contexts:
                sg.destroy_context(child)
        self.children = {}
        self._flow_calls = {}  # (its calls hold this context)
        for addr in self._owned:
            self.device.free(addr)
        for s in self.slots.values():
            if s.planned is None:  # a caller's input array, bound
                self.device.unbind(s.addr)
        self._owned.clear()
        self.slots.clear()
        self._in_slots = self._given = []
        self.host.clear()
        self.static_body = None
        self.traces.clear()  # (its views hold buffers, as the replay's calls do)
        self._replay = self._arena = None
        self.model = None  # (it points back at its model, which holds it: no cycle once destroyed)


_HOST = object()  # run_nested: this input held a host value last time


def _elided_copies(tasks, inputs: list, outputs: list) -> tuple[set, list]:
    """_StaticBody.bound_plan's Identity tasks to leave out, and the output views with theirs read at
    their sources."""
    read_at = list(outputs)
    skip = set()
    for t, task in enumerate(tasks):
        p = task.plan
        if p.kernel.op_type != "Identity" or p.epilogue is not None or not task.xs or not task.ys \
                or task.xs[0] is None or task.ys[0] is None:
            continue
        x, y = task.xs[0], task.ys[0]
        j = next((j for j, o in enumerate(outputs) if _is_view_of(o, y)), None)
        source = next((v for v in (*inputs, *outputs) if _is_view_of(v, x)), None)
        if j is None or source is None or source.shape != y.shape or source.dtype != y.dtype:
            continue
        if any(a is not None and np.may_share_memory(a, y) for k, o in enumerate(tasks) if k != t for a in o.xs):
            continue  # another task reads the copy
        if any(a is not None and np.may_share_memory(a, x) for o in tasks[t + 1:] for a in o.ys):
            continue  # a later task writes the source
        read_at[j] = source
        skip.add(t)
    return skip, read_at


def _values_hold(values: tuple) -> bool:
    """Each shape input still holds the bytes it held (NodeState.values)."""
    for view, held in values:
        if view.tobytes() != held:
            return False
    return True


def _guarded(call, values: tuple):
    """A replayed node with shape inputs: its call while their values hold, else False (nothing run)."""
    if not _values_hold(values):
        return False
    call()


def _is_view_of(a: np.ndarray, b: np.ndarray) -> bool:
    """The same bytes seen the same way."""
    return (a.dtype == b.dtype and a.shape == b.shape and a.strides == b.strides
            and a.__array_interface__["data"][0] == b.__array_interface__["data"][0])


def _swap(a: Slot, b: Slot) -> None:
    """Two tensors trade buffers (and views): a carried value moves from a body's output to its input."""
    a.addr, a.capacity, a.data, a.dtype, a.shape, a.array, b.addr, b.capacity, b.data, b.dtype, b.shape, b.array = \
        b.addr, b.capacity, b.data, b.dtype, b.shape, b.array, a.addr, a.capacity, a.data, a.dtype, a.shape, a.array


def _host_input(d, x):
    """A model input that is a sequence (a list of arrays of its dtype) or an optional (None when
    empty), checked and copied: the caller may change its arrays after the run."""
    where = f"input '{d.name}'"
    if x is None:
        if d.kind.startswith("optional"):
            return None
        raise ShapeError(f"{where} is a {d.kind}; None is only an empty optional")
    if d.kind in ("sequence", "optional_sequence"):
        if not isinstance(x, (list, tuple)):
            raise ShapeError(f"{where} is a {d.kind}: give a list of {d.dtype} arrays, got {type(x).__name__}")
        items = [np.array(t) for t in x]
        bad = next((a.dtype for a in items if a.dtype != np.dtype(d.dtype)), None)
        if bad is not None:
            raise ShapeError(f"{where}: a sequence of {d.dtype} tensors, got one of {bad}")
        return items
    a = np.array(x)
    if d.dtype == STRING:
        return _string_input(where, d, a)
    if a.dtype != np.dtype(d.dtype):
        raise ShapeError(f"{where}: dtype {a.dtype} does not match the model's {d.dtype}")
    return a


def _string_input(where: str, d, a: np.ndarray) -> np.ndarray:
    """A string tensor input: numpy str ('U') or object arrays of str (bytes: UTF-8), as an object
    array of str of the model's rank and fixed dims."""
    if a.dtype.kind == "U":
        a = a.astype(object)
    elif a.dtype == object:
        try:
            a = np.array([s.decode() if type(s) is bytes else s for s in a.flat], object).reshape(a.shape)
        except UnicodeDecodeError:
            raise ShapeError(f"{where}: a bytes element is not UTF-8 text") from None
        bad = next((s for s in a.flat if type(s) is not str), None)
        if bad is not None:
            raise ShapeError(f"{where} is a string tensor; element {bad!r} ({type(bad).__name__}) is not a str")
    else:
        raise ShapeError(f"{where} is a string tensor: give a numpy str or object array of str, got {a.dtype}")
    if d.shape != (-2,) and (a.ndim != len(d.shape) or any(m >= 0 and m != n for m, n in zip(d.shape, a.shape))):
        raise ShapeError(f"{where}: shape {list(a.shape)} does not match the model's {list(d.shape)}")
    return a


def _host_copy(v):
    """An output that is a sequence or optional, given to the caller as its own copy."""
    return None if v is None else [np.array(t) for t in v] if isinstance(v, list) else np.array(v)
