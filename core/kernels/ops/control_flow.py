"""If, Loop, Scan, SequenceMap and FlexAttention: the ops' semantics, given their subgraphs as callables.

A control-flow node's subgraphs are submodels the runtime compiled and loaded; a kernel cannot run
them itself (kernels sit below the runtime), so `execute(xs, bodies)` takes each subgraph as a
function from its input arrays to its output arrays. The inputs `xs` are the node's: its ONNX
inputs followed by the outer-scope values its subgraphs read (`captures` of them), which every
call passes on as the subgraph's last inputs. A body's outputs may be views of its own buffers,
valid until its next call (a static body hands them out without a copy): a kernel writes each scan
output into its stacked result as it comes, and its own results may be such views too (the caller
copies them into the node's outputs at once).

A body the runtime runs as one static submodel also offers `body.bound()`: the views
its inputs are copied into and its outputs are read from (fixed while the node runs) and `run()`,
its tasks alone. Loop and Scan iterate such a body without a call per iteration: they copy the
scan slices and the carried state straight into its input views and each scan output straight
into its slice of the stacked result, and check shapes once, before the first iteration (a
Scan's step then costs its kernels and a few copies, not a subgraph call).

Output shapes depend on running the subgraphs (a branch taken, a trip count, a condition), so
infer() raises: the compiler routes these nodes to the hybrid executor.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...model.ir import CAPTURES, DTYPES, Graph, Meta
from ..base import Kernel, copyto as _copyto  # (a bound Loop or Scan makes two or three an iteration)
from ..registry import register

Body = Callable[[list], list]

#: iterations a native loop runs in one call (csrc/loop.c; the signals wait while it runs)
_NATIVE_CHUNK = 1 << 16


def bound_body(body: Body, count: int, values: list, n_outputs: int):
    """The body bound, when the runtime binds it and `values` (one per body input: an array, or
    None for one the caller writes per iteration) fit its input views exactly; those values are
    copied in. The runtime's object (core/runtime/hybrid_context.py's BoundBody) has `inputs`, a
    writable view per body input (None where the body does not read it), `outputs`, views of its
    output buffers, and `run()`, one iteration on what the input views hold. None: the body runs
    call by call (that path names what does not fit)."""
    bind = getattr(body, "bound", None)
    b = bind() if bind is not None else None
    if b is None or len(b.inputs) != count or len(b.outputs) != n_outputs:
        return None
    for view, x in zip(b.inputs, values):
        if view is not None and x is not None and not _fits(x, view):
            return None
    for view, x in zip(b.inputs, values):
        if view is not None and x is not None:
            np.copyto(view, x)
    return b


def _fits(x, view: np.ndarray) -> bool:
    return type(x) is np.ndarray and x.shape == view.shape and x.dtype == view.dtype


class ControlFlow(Kernel):
    #: the attributes holding subgraphs, in the order execute() takes them
    bodies: tuple = ()

    def prepare(self) -> None:
        graphs = [v for v in self.attrs.values() if isinstance(v, Graph)]
        self.captures = int(self.attrs.get(CAPTURES, graphs[0].captures if graphs else 0))
        if not 0 <= self.captures <= len(self.inputs):
            raise self.fail(f"{self.captures} captured outer values for {len(self.inputs)} inputs")
        self.formal = len(self.inputs) - self.captures
        self.check()

    def check(self) -> None:
        """The op's attribute and input-count checks."""

    def infer(self):  # the static path cannot plan it: the hybrid one runs it (ValueDependentError)
        raise self.value_dependent("control flow: its output shapes come from running its subgraphs")

    def compute(self, *xs):
        raise self.fail("control flow runs its subgraphs as submodels; it has no standalone compute")

    def execute(self, xs: Sequence[np.ndarray | None], bodies: Sequence[Body], templates=(),
                allocate: Callable | None = None) -> list[np.ndarray]:
        """The node's outputs. `bodies`: one callable per attribute in `self.bodies`; `templates`:
        (dtype, shape or None) of the body's outputs as compiled, which give a scan output its
        per-iteration shape when there is no iteration (when they do not know it: dry_run);
        `allocate(k, dtype, shape)`: an array to make output k in (the runtime's buffer of that
        output, so a stacked result is written where it stays, no copy after; np.empty without)."""
        raise NotImplementedError

    def split(self, xs):
        """(formal inputs, captured values)."""
        xs = list(xs)
        return xs[:self.formal], xs[self.formal:]

    def scalar(self, x: np.ndarray | None, what: str):
        a = np.asarray(x)
        if a.size != 1:
            raise self.fail(f"{what} must hold one value, got shape {list(a.shape)}")
        return a.item()

    @staticmethod
    def known(templates) -> bool:
        return all(t[1] is not None and all(d is not None and d >= 0 for d in t[1]) for t in templates)

    @staticmethod
    def dry_run(body: Body, inputs: list, templates: list) -> list:
        """The per-iteration (dtype, shape) of a body that ran no iteration, from one run on the
        inputs it would have had (zeros for slices); the compiled templates when that run fails."""
        try:
            return [(np.asarray(o).dtype, np.shape(o)) for o in body(inputs)]
        except Exception:
            return templates


class Stacked:
    """A scan output: the per-iteration parts written as they come into one result stacked along a
    new `axis` (negative: from the end of the result), no part kept. `steps`: how many parts come
    (a Scan's, whose `reverse` output stacks the last part first); without it (a Loop's) the room
    grows by doubling, from `expected` parts when that is not too big."""

    FIRST_BYTES = 1 << 20  # at most this much room made before the parts come

    def __init__(self, kernel: ControlFlow, axis: int, what: str, steps: int | None = None,
                 reverse: bool = False, expected: int | None = None):
        self.kernel, self.axis, self.what = kernel, axis, what
        self.steps, self.reverse, self.expected = steps, reverse, expected
        self.buffer = self.shape = self.lead = None

    def put(self, t: int, part) -> None:
        """The part of iteration `t` (iterations come in order, from 0)."""
        part = np.asarray(part)
        if self.buffer is None:
            self.shape, self.lead = part.shape, (slice(None),) * self._axis(part.ndim)
            room = self.steps or self.first_room(self.expected, part.nbytes)
            self.buffer = self._allocate(part.dtype, room)
        elif part.shape != self.shape:
            raise self.kernel.fail(f"{self.what} has shape {list(part.shape)} at iteration {t} but "
                                   f"{list(self.shape)} at iteration 0; scan outputs must keep their shape")
        if self.steps is None and t == self.buffer.shape[len(self.lead)]:  # full: twice the room
            grown = self._allocate(self.buffer.dtype, 2 * t)
            grown[self.lead + (slice(0, t),)] = self.buffer
            self.buffer = grown
        if self.lead:
            self.buffer[self.lead + (self.steps - 1 - t if self.reverse else t,)] = part
        else:  # axis 0 (a Loop's)
            self.buffer[self.steps - 1 - t if self.reverse else t] = part

    @classmethod
    def first_room(cls, expected: int | None, nbytes: int) -> int:
        """Parts of `nbytes` made room for before they come: `expected` of them (16 when unknown), at
        most as many as FIRST_BYTES holds, unless that is fewer than 16."""
        return min(expected or 16, max(16, cls.FIRST_BYTES // max(nbytes, 1)))

    def result(self, n: int, template) -> np.ndarray:
        """The result of `n` iterations (`steps` of them, when given); `template` (dtype, shape or
        None) gives it its per-iteration shape and dtype when there was no iteration."""
        if self.buffer is None:
            shape = tuple(0 if d is None or d < 0 else d for d in (template[1] or ()))
            a = self._axis(len(shape))
            return np.zeros(shape[:a] + (0,) + shape[a:], template[0])
        return self.buffer if self.steps is not None else self.buffer[self.lead + (slice(0, n),)]

    def _axis(self, rank: int) -> int:
        return _stack_axis(self.kernel, self.axis, rank, self.what)

    def _allocate(self, dtype, count: int) -> np.ndarray:
        a = len(self.lead)
        return np.empty(self.shape[:a] + (count,) + self.shape[a:], dtype)


@register("If", since=1)
class If(ControlFlow):
    bodies = ("then_branch", "else_branch")

    def check(self) -> None:
        if self.formal != 1:
            raise self.fail(f"takes one input (cond), got {self.formal}")

    def execute(self, xs, bodies, templates=(), allocate=None):
        return bodies[self.branch(xs[0])](list(xs[1:]))  # (its one formal input, cond; the rest are captured values)

    def branch(self, cond) -> int:
        """The branch `cond` takes: 0 then_branch, 1 else_branch (the runtime's direct call of two
        static branches asks this too)."""
        return 0 if self.scalar(cond, "cond") else 1


@register("Loop", since=1)
class Loop(ControlFlow):
    """Inputs (M, cond, v_initial...): runs the body while i < M (when M is given) and cond (when
    given, then the body's first output); outputs the final carried values, then each scan output
    stacked over the iterations (a new axis 0)."""
    bodies = ("body",)

    def check(self) -> None:
        if self.formal < 2:
            raise self.fail(f"takes at least 2 inputs (M, cond), got {self.formal}")
        self.carried = self.formal - 2

    def execute(self, xs, bodies, templates=(), allocate=None):
        (trip, cond, *carried), captured = self.split(xs)
        body, n = bodies[0], self.carried
        limit = None if trip is None else int(self.scalar(trip, "input M (trip count)"))
        go = True if cond is None else bool(self.scalar(cond, "input cond"))
        if go and (limit is None or limit > 0):  # (a negative trip count runs no iteration)
            fast = self.bound_loop(body, limit, carried, captured, allocate)
            if fast is not None:
                return fast
        scans = [Stacked(self, 0, f"scan output {k}", expected=limit) for k in range(self.num_outputs - n)]
        i, going = 0, _constant(True)  # one array while it holds: a body copies it in once
        tape = getattr(body, "loop_tape", None)  # (a runtime's body: test doubles are plain functions)
        if tape is not None and go and (limit is None or limit > 0):
            def put(t: int, outs: list) -> None:
                for scan, part in zip(scans, outs[1 + n:]):
                    scan.put(t, part)
            ran = tape(limit, [np.array(0, np.int64), going, *carried, *captured], put if scans else None)
            if ran is not None:  # iterations the runtime replayed (their scan outputs put): on from there
                i, outs = ran
                go, carried = self.carried_on(outs)
        while go and (limit is None or i < limit):
            outs = body([np.array(i, np.int64), going, *carried, *captured])
            go, carried = self.carried_on(outs)
            for scan, part in zip(scans, outs[1 + n:]):
                scan.put(i, part)
            i += 1
        templates = list(templates[1 + n:]) + [(np.float32, None)] * len(scans)
        if not i and scans and not self.known(templates[:len(scans)]):
            templates = self.dry_run(body, [np.array(0, np.int64), np.array(True), *carried, *captured],
                                     [None] * (1 + n) + templates)[1 + n:]
        return carried + [scan.result(i, t) for scan, t in zip(scans, templates)]

    def carried_on(self, outs: list) -> tuple[bool, list]:
        """An iteration's outputs: whether the loop goes on (its condition), and the state it carries."""
        n = self.carried
        if len(outs) < 1 + n:
            raise self.fail(f"body gives {len(outs)} outputs; it needs cond and {n} carried values")
        # (the state: arrays, lists (sequences) or None (empty optionals) as they come)
        return bool(self.scalar(outs[0], "the body's cond output")), outs[1:1 + n]

    def bound_loop(self, body: Body, limit: int | None, carried: list, captured: list, allocate=None) -> list | None:
        """The loop on a bound static body (None: it is not one, or the values do not fit it): the
        iteration number and the carried state written into its input views, the state copied from
        its outputs back into them after each iteration, each scan output into its slice of a
        stacked result that doubles when full."""
        n, n_scans = self.carried, self.num_outputs - self.carried
        b = bound_body(body, 2 + n + len(captured), [None, None, *carried, *captured], 1 + n + n_scans)
        if b is None:
            return None
        i_view, cond_view = b.inputs[0], b.inputs[1]
        going, state = b.outputs[0], b.outputs[1:1 + n]
        if (i_view is not None and not (i_view.size == 1 and i_view.dtype.kind in "iu")) or going.size != 1 \
                or (cond_view is not None and cond_view.size != 1):
            return None  # odd declarations: the call-by-call path checks them
        back = []  # (input view, output view) of each carried value the body reads
        for view, out in zip(b.inputs[2:2 + n], state):
            if view is not None:
                if out.shape != view.shape or out.dtype != view.dtype:
                    return None  # state whose shape changes: not one static body
                back.append((view, out))
        if cond_view is not None:
            cond_view[...] = True  # (an iteration runs only while the condition holds)
        parts = b.outputs[1 + n:]
        room = Stacked.first_room(limit, max((p.nbytes for p in parts), default=1))
        allocate = allocate or _empty  # (room for the whole result, when the trip count is its length)
        stacks = [allocate(n + k, p.dtype, (room,) + p.shape) for k, p in enumerate(parts)]
        i = 0
        while limit is None or i < limit:
            if i == room:  # full: twice the room
                room *= 2
                stacks = [_grown(a, room) for a in stacks]
            stop = room if limit is None else min(limit, room)
            i = _iterate(b, i, stop, [], list(zip(stacks, parts)), back, i_view, going)
            if not going:
                break
        return list(state) + [a[:i] for a in stacks]


def _iterate(b, start: int, stop: int, feeds: list, outs: list, back: list, counter=None, cond=None) -> int:
    """Iterations start .. stop - 1 of a bound body (bound_body's); the iteration after the last one run
    (fewer when `cond` turns false). Each iteration t: t into `counter` (the iteration number's view),
    rows[t] into each (view, rows) of `feeds`, the body's run, its output into rows[t] of each (rows,
    output) of `outs`, then, unless `cond` (the body's condition output) is false, each (view, output)
    of `back`. In one native call when the body's run is its prepared native calls (b.native_loop);
    the first run of a body binds them."""
    native = getattr(b, "native_loop", None)  # (a body the runtime binds; test doubles have run() alone)
    t = start
    while t < stop:
        loop = native(feeds, outs, back, counter, cond) if native is not None else None
        if loop is not None:
            while t < stop:  # (in chunks: Ctrl-C still stops a runaway loop between them)
                t = loop(t, min(stop, t + _NATIVE_CHUNK))
                if cond is not None and not cond:
                    break
            return t
        t = _python_steps(b, t, t + 1 if native is not None and t == start else stop, feeds, outs, back, counter, cond)
        if cond is not None and not cond:
            break
    return t


def _python_steps(b, start: int, stop: int, feeds: list, outs: list, back: list, counter, cond) -> int:
    """_iterate's iterations in Python."""
    copyto = _copyto
    for t in range(start, stop):
        if counter is not None:
            counter.fill(t)
        for view, rows in feeds:
            copyto(view, rows[t])
        b.run()  # (read each time: a runtime body makes it its bound calls alone after the first)
        for rows, part in outs:
            copyto(rows[t, ...], part)
        if cond is not None and not cond:
            return t + 1
        for view, out in back:
            copyto(view, out)
    return stop


def _stack_axis(kernel: Kernel, axis: int, rank: int, what: str) -> int:
    """The axis (negative: from the end) a result of parts of `rank` is stacked along, checked."""
    a = axis + rank + 1 if axis < 0 else axis
    if not 0 <= a <= rank:
        raise kernel.fail(f"{what}: axis {axis} is out of range for a result of rank {rank + 1}")
    return a


def _empty(k: int, dtype, shape) -> np.ndarray:
    return np.empty(shape, dtype)


def _grown(a: np.ndarray, room: int) -> np.ndarray:
    grown = np.empty((room,) + a.shape[1:], a.dtype)
    grown[:len(a)] = a
    return grown


def _constant(value) -> np.ndarray:
    a = np.array(value)
    a.flags.writeable = False
    return a


class _ScanBase(ControlFlow):
    bodies = ("body",)

    def check(self) -> None:
        self.m = int(self.attrs.get("num_scan_inputs", 0))
        if self.m < 1:
            raise self.fail(f"num_scan_inputs must be >= 1, got {self.m}")

    def directions(self, key: str, count: int) -> list[int]:
        d = [int(x) for x in (self.attrs.get(key) or [0] * count)]
        if len(d) != count or any(x not in (0, 1) for x in d):
            raise self.fail(f"{key} {d} must list {count} values, each 0 (forward) or 1 (reverse)")
        return d

    def axes(self, key: str, ranks: list[int]) -> list[int]:
        given = self.attrs.get(key)
        a = [int(x) for x in given] if given else [0] * len(ranks)
        if len(a) != len(ranks):
            raise self.fail(f"{key} {a} must list {len(ranks)} axes")
        for k, (x, r) in enumerate(zip(a, ranks)):
            if not -r <= x < r:
                raise self.fail(f"{key}[{k}] = {x} is out of range for rank {r}")
        return [x % r for x, r in zip(a, ranks)]

    def scan(self, states, scans, captured, body, in_axes, in_dirs, out_axes, out_dirs, templates, allocate=None):
        """The opset-9 algorithm: states carried, each scan input sliced along its axis."""
        lengths = {np.shape(x)[a] for x, a in zip(scans, in_axes)}
        if len(lengths) != 1:
            raise self.fail(f"scan inputs have different lengths {sorted(lengths)} along their scan axes")
        steps = lengths.pop()
        n = len(states)
        if steps:
            fast = self.bound_scan(states, scans, captured, body, steps, in_axes, in_dirs, out_axes, out_dirs, allocate)
            if fast is not None:
                return fast
        outputs = [Stacked(self, a, f"scan output {k}", steps, reverse=bool(d))
                   for k, (a, d) in enumerate(zip(out_axes, out_dirs))]
        lead = [(slice(None),) * a for a in in_axes]  # a slice is a view: the body copies it in
        for t in range(steps):
            slices = [x[pre + (steps - 1 - t if d else t,)] for x, pre, d in zip(scans, lead, in_dirs)]
            outs = body([*states, *slices, *captured])
            states = [np.asarray(o) for o in outs[:n]]
            for out, part in zip(outputs, outs[n:]):
                out.put(t, part)
        if not steps and out_axes and not self.known(templates[:len(out_axes)]):
            slices = [np.zeros(np.shape(x)[:a] + np.shape(x)[a + 1:], np.asarray(x).dtype) for x, a in zip(scans, in_axes)]
            templates = self.dry_run(body, [*states, *slices, *captured], [None] * n + templates)[n:]
        return list(states) + [out.result(steps, t) for out, t in zip(outputs, templates)]

    def bound_scan(self, states, scans, captured, body, steps, in_axes, in_dirs, out_axes, out_dirs,
                   allocate=None) -> list | None:
        """The scan on a bound static body (None: it is not one, or the values do not fit it): each
        scan input seen with its scan axis first (reversed where its direction is 1), its slice of
        a step copied into the body's input view; each scan output into its slice of the result,
        seen likewise; the state copied from the body's outputs back into its input views."""
        n, m = len(states), len(scans)
        b = bound_body(body, n + m + len(captured), [*states, *([None] * m), *captured], n + len(out_axes))
        if b is None:
            return None
        feeds = []  # (input view, the scan input with its scan axis first, in the order of the steps)
        for x, a, d, view in zip(scans, in_axes, in_dirs, b.inputs[n:n + m]):
            if view is None:
                continue
            # (the array itself when its axis is 0: a body keeps its native loop while the arrays are the same)
            x = np.moveaxis(np.asarray(x), a, 0) if a else np.asarray(x)
            if x.shape[1:] != view.shape or x.dtype != view.dtype:
                return None
            feeds.append((view, x[::-1] if d else x))
        back = []
        for view, out in zip(b.inputs[:n], b.outputs[:n]):
            if view is not None:
                if out.shape != view.shape or out.dtype != view.dtype:
                    return None  # state whose shape changes: not one static body
                back.append((view, out))
        results, stacks = [], []  # each scan output's result, and its steps' slices in the order of the steps
        for k, (part, a, d) in enumerate(zip(b.outputs[n:], out_axes, out_dirs)):
            a = _stack_axis(self, a, part.ndim, f"scan output {k}")
            result = (allocate or _empty)(n + k, part.dtype, part.shape[:a] + (steps,) + part.shape[a:])
            slices = np.moveaxis(result, a, 0) if a else result
            results.append(result)
            stacks.append((slices[::-1] if d else slices, part))
        _iterate(b, 0, steps, feeds, stacks, back)
        return list(b.outputs[:n]) + results


@register("Scan", since=9)
class Scan(_ScanBase):
    """Inputs (initial states..., scan inputs...): the body runs once per slice along each scan
    input's axis (scan_input_axes, reversed where scan_input_directions is 1); states are carried,
    scan outputs stacked along scan_output_axes (reversed where scan_output_directions is 1)."""

    def execute(self, xs, bodies, templates=(), allocate=None):
        formal, captured = self.split(xs)
        if self.m > len(formal):
            raise self.fail(f"num_scan_inputs {self.m} exceeds its {len(formal)} inputs")
        n = len(formal) - self.m
        states, scans = formal[:n], formal[n:]
        n_out = self.num_outputs - n
        in_axes = self.axes("scan_input_axes", [np.ndim(x) for x in scans])
        in_dirs = self.directions("scan_input_directions", self.m)
        out_dirs = self.directions("scan_output_directions", n_out)
        templates = list(templates[n:]) + [(np.float32, None)] * n_out
        out_axes = [int(a) for a in self.attrs.get("scan_output_axes") or [0] * n_out]
        if len(out_axes) != n_out:
            raise self.fail(f"scan_output_axes {out_axes} must list {n_out} axes")
        return self.scan(states, scans, captured, bodies[0], in_axes, in_dirs, out_axes, out_dirs, templates, allocate)


@register("Scan", since=8)
class Scan8(_ScanBase):
    """Opset 8: inputs (sequence_lens?, initial states..., scan inputs...) with a batch axis 0 on
    every input and output; the scan axis is 1 (directions: per scan input). A batch item shorter
    than the others (sequence_lens) leaves its scan outputs zero past its length."""

    def execute(self, xs, bodies, templates=(), allocate=None):
        (lens, *formal), captured = self.split(xs)
        n = len(formal) - self.m
        if n < 0:
            raise self.fail(f"num_scan_inputs {self.m} exceeds its {len(formal)} inputs")
        states, scans = formal[:n], formal[n:]
        batch = np.shape(scans[0])[0]
        steps = np.shape(scans[0])[1]
        lengths = [steps] * batch if lens is None else [int(v) for v in np.asarray(lens).reshape(-1)]
        if len(lengths) != batch or any(not 0 <= v <= steps for v in lengths):
            raise self.fail(f"sequence_lens {lengths} must give one length in [0, {steps}] per batch item")
        dirs = self.directions("directions", self.m)
        n_out = self.num_outputs - n
        templates = list(templates[n:]) + [(np.float32, None)] * n_out
        per_item = []
        for b in range(batch):
            item = self.scan([s[b] for s in states], [x[b, :lengths[b]] for x in scans], captured, bodies[0],
                             [0] * self.m, dirs, [0] * n_out, [0] * n_out, templates)
            item[:n] = [np.array(x) for x in item[:n]]  # the next item's run reuses the body's buffers
            for k in range(n, n + n_out):  # zeros past a short item's length
                pad = steps - item[k].shape[0]
                if pad:
                    item[k] = np.concatenate([item[k], np.zeros((pad,) + item[k].shape[1:], item[k].dtype)])
            per_item.append(item)
        return [np.stack([p[k] for p in per_item]) for k in range(n + n_out)]


@register("SequenceMap", since=17)
class SequenceMap(ControlFlow):
    """Inputs (input_sequence, additional_inputs...): the body runs once per element of the first
    sequence, given the i-th element of each sequence input and each tensor input whole; output k
    is the sequence of the body's k-th outputs."""
    bodies = ("body",)

    def check(self) -> None:
        if self.formal < 1:
            raise self.fail("takes at least one input (input_sequence)")

    def execute(self, xs, bodies, templates=(), allocate=None):
        formal, captured = self.split(xs)
        if not isinstance(formal[0], list):
            raise self.fail("input 0 (input_sequence) must be a sequence")
        n = len(formal[0])
        bad = next((k for k, x in enumerate(formal) if isinstance(x, list) and len(x) != n), None)
        if bad is not None:
            raise self.fail(f"input {bad} holds {len(formal[bad])} tensors; input_sequence holds {n}")
        results: list[list] = [[] for _ in range(self.num_outputs)]
        for i in range(n):
            outs = bodies[0]([x[i] if isinstance(x, list) else x for x in formal] + captured)
            if len(outs) != self.num_outputs:
                raise self.fail(f"body gives {len(outs)} outputs; the node has {self.num_outputs}")
            for column, o in zip(results, outs):
                column.append(np.array(o))
        return results


_PREVIEW = "ai.onnx.preview"
_SOFTMAX_TYPES = (1, 10, 16, 11)  # ONNX's FLOAT, FLOAT16, BFLOAT16, DOUBLE (by code: no ml_dtypes for bfloat16)


@register("FlexAttention", since=1, domain=_PREVIEW)
class FlexAttention(ControlFlow):
    """Attention with optional modifier subgraphs: scores = (Q sqrt(scale)) (K sqrt(scale))^T in the
    inputs' type, then in the softmax precision score_mod, softmax over the keys, prob_mod, and
    probs V, cast back to V's type. A query head h reads K/V head h // (Hq / Hkv) (GQA). Without
    modifiers it is a plain kernel (compute); with them the hybrid executor runs it, each modifier
    a compiled subgraph (rank-4 in, the same shape out)."""
    bodies = ("score_mod", "prob_mod")

    def check(self) -> None:
        metas = self.inputs[:3]
        if self.formal != 3:
            raise self.fail(f"{self.formal} inputs; FlexAttention takes Q, K and V")
        precision = self.attr("softmax_precision")
        if precision is not None and int(precision) not in _SOFTMAX_TYPES:
            raise self.fail(f"softmax_precision {precision} must be FLOAT, FLOAT16, BFLOAT16 or DOUBLE")
        if any(m is None for m in metas):  # built by the runtime from its attributes alone
            return
        q, k, v = metas
        if any(len(m.shape) != 4 for m in metas):
            raise self.fail(f"Q, K and V must be rank 4, got {[list(m.shape) for m in metas]}")
        if not q.dtype == k.dtype == v.dtype or q.dtype.kind != "f" and q.dtype.name != "bfloat16":
            raise self.fail(f"Q, K and V must share one float type, got {q.dtype}, {k.dtype}, {v.dtype}")
        if k.shape[3] != q.shape[3] or k.shape[:3] != v.shape[:3] or k.shape[0] != q.shape[0]:
            raise self.fail(f"Q {list(q.shape)}, K {list(k.shape)} and V {list(v.shape)} do not line up: "
                            f"(B, Hq, L, E), (B, Hkv, S, E), (B, Hkv, S, Ev)")
        if k.shape[1] <= 0 or q.shape[1] % k.shape[1]:
            raise self.fail(f"{q.shape[1]} query heads are not a multiple of {k.shape[1]} key/value heads")

    def infer(self):
        if any(isinstance(v, Graph) for v in self.attrs.values()) or self.captures:
            return super().infer()
        q, _, v = self.inputs[:3]
        return [Meta(v.dtype, tuple(q.shape[:3]) + (v.shape[3],))]

    def compute(self, *xs):
        return self.execute(xs, [None, None])

    def execute(self, xs, bodies, templates=(), allocate=None):
        (q, k, v), captured = self.split(xs)
        q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
        score_mod, prob_mod = bodies
        heads = q.shape[1] // k.shape[1]
        if heads > 1:
            k, v = np.repeat(k, heads, axis=1), np.repeat(v, heads, axis=1)
        scale = self.attr("scale")
        scale = 1.0 / np.sqrt(q.shape[3]) if scale is None else float(scale)
        root = np.array(np.sqrt(np.float32(scale)), q.dtype)
        work = self.softmax_type(q.dtype)
        scores = np.matmul(q * root, np.swapaxes(k * root, -1, -2)).astype(work)
        if score_mod is not None:
            scores = self.modified(score_mod, scores, captured, "score_mod")
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        probs = scores / scores.sum(axis=-1, keepdims=True)
        if prob_mod is not None:
            probs = self.modified(prob_mod, probs, captured, "prob_mod")
        return [np.matmul(probs, v.astype(work)).astype(v.dtype)]

    def softmax_type(self, dtype: np.dtype) -> np.dtype:
        precision = self.attr("softmax_precision")
        if precision is not None:
            return DTYPES[int(precision)]
        return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)

    def modified(self, body: Body, x: np.ndarray, captured: list, key: str) -> np.ndarray:
        (y,) = body([x] + list(captured))
        y = np.asarray(y)
        if y.shape != x.shape:
            raise self.fail(f"{key} gave shape {list(y.shape)} for its input of shape {list(x.shape)}")
        return y.astype(x.dtype, copy=False)
