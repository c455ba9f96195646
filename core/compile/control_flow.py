"""Compile-time shapes of control flow: what a subgraph receives and what the node gives.

Each subgraph's inputs get the dtypes and shapes known at compile time (outer values as they are,
a Loop's iteration number and condition as scalars, a Scan's slices without their scan axis), and
the subgraph is inferred like any dynamic graph (dynamic_shapes.infer_dynamic, on a copy). Carried
state (Loop and Scan) is found by a fixpoint: the body is inferred with the initial values' shapes,
a dim the body's output does not keep becomes unknown, and again until nothing changes; a body
whose carried shapes stay as they enter compiles static. The node's outputs: an If output is static
when both branches agree, a dim they disagree on is unknown; a Loop's scan outputs have an unknown
leading dim (the trip count); a Scan's have the scan inputs' length.
An If branch that cannot run on the shapes it would get (a Silero-style VAD's 8 kHz branch given
the 16 kHz input: its LSTM meets a rank-5 X) is not a compile error: onnxruntime runs such a model
and fails only if that branch is taken. The branch is compiled with its inputs' dims unknown, so
its nodes check their shapes at run time, and the If's outputs are the other branch's. Only when
both branches refuse is the model refused (the error of the first).
The inferred input shapes are left on the subgraph's input Values: the builder compiles them so.
"""
from __future__ import annotations

import copy

import numpy as np

from ..model.log import Logger
from ..model.errors import GraphError, ShapeError, UnsupportedOpError
from ..model.ir import DTYPES, Graph, Node

log = Logger("ge.compile")

CONTROL_FLOW = ("If", "Loop", "Scan", "SequenceMap")  # the ops whose subgraphs ge compiles and runs
#: other domains' ops with subgraphs ge compiles and runs (FlexAttention's score and probability modifiers)
SUBGRAPH_OPS = {("ai.onnx.preview", "FlexAttention")}

#: how many times a carried shape may widen before it is taken as unknown rank
_MAX_WIDENING = 4


def control_flow_outputs(graph: Graph, node: Node, infer_graph) -> list[tuple]:
    """(dtype, shape) of each node output; shapes use None for unknown dims (None: unknown rank).
    `infer_graph(graph)` infers a graph in place (dynamic_shapes.infer_dynamic)."""
    outer = [_of(graph, i) for i in node.inputs]
    op = node.op_type
    if op == "FlexAttention":  # each modifier maps the (B, Hq, L, S) scores in the softmax precision to their shape
        (dtype, q), (_, k), (_, v) = outer[:3]
        scores = None if q is None or k is None else tuple(q[:3]) + (k[2],)
        work = node.attrs.get("softmax_precision")
        work = DTYPES[int(work)] if work is not None else np.dtype(np.float64 if dtype == np.float64 else np.float32)
        for key in ("score_mod", "prob_mod"):
            if key in node.attrs:
                body = node.attrs[key]
                captured = outer[len(outer) - body.captures:] if body.captures else []
                _infer(body, [(work, scores)] + captured, infer_graph)
        return [(outer[2][0], None if q is None or v is None else tuple(q[:3]) + (v[3],))]
    if op == "If":
        a, b = _if_branches(node, outer[1:], infer_graph)
        return [(da or db, _merge(sa, sb)) for (da, sa), (db, sb) in zip(a, b)]
    body = node.attrs["body"]
    k = body.captures
    captured = outer[len(outer) - k:] if k else []
    formal = outer[:len(outer) - k]
    if op == "SequenceMap":  # the body sees one element of each sequence, its outputs are sequences
        elements = [(d, None if graph.value(i).kind == "sequence" else s) for i, (d, s) in zip(node.inputs, formal)]
        return [(d, None) for d, _ in _infer(body, elements + captured, infer_graph)]
    if op == "Loop":
        carried = formal[2:]
        fixed = [(np.dtype(np.int64), ()), (np.dtype(np.bool_), ())]
        state, outs = _fixpoint(body, fixed, carried, [], captured, 1, infer_graph)
        scans = outs[1 + len(carried):]
        steps = _fixed_trip_count(graph, node)
        return state + [(d, None if s is None else (steps,) + tuple(s)) for d, s in scans]
    # Scan (opset 9+, or 8 with sequence_lens and a batch axis)
    m = int(node.attrs.get("num_scan_inputs", 1))
    if node_opset_below_9(graph):
        formal, batch = formal[1:], [s[0] if s else None for _, s in formal[-m:]]
        batch = batch[0] if batch else None
        states = [(d, None if s is None else tuple(s)[1:]) for d, s in formal[:len(formal) - m]]
        slices = [(d, None if s is None else tuple(s)[2:]) for d, s in formal[len(formal) - m:]]
        steps = [None if s is None or len(s) < 2 else s[1] for _, s in formal[len(formal) - m:]]
        state, outs = _fixpoint(body, [], states, slices, captured, 0, infer_graph)
        step = _common(steps)
        return ([(d, None if s is None else (batch,) + tuple(s)) for d, s in state]
                + [(d, None if s is None else (batch, step) + tuple(s)) for d, s in outs[len(states):]])
    states, scans = formal[:len(formal) - m], formal[len(formal) - m:]
    in_axes = [int(a) for a in node.attrs.get("scan_input_axes") or [0] * m]
    slices, steps = [], []
    for (d, s), a in zip(scans, in_axes):
        if s is None:
            slices.append((d, None))
            steps.append(None)
        else:
            a %= max(len(s), 1)
            slices.append((d, tuple(s[:a]) + tuple(s[a + 1:])))
            steps.append(s[a])
    state, outs = _fixpoint(body, [], states, slices, captured, 0, infer_graph)
    step = _common(steps)
    out_axes = [int(a) for a in node.attrs.get("scan_output_axes") or [0] * (len(outs) - len(states))]
    results = list(state)
    for (d, s), a in zip(outs[len(states):], out_axes):
        if s is None:
            results.append((d, None))
        else:
            a %= len(s) + 1
            results.append((d, tuple(s[:a]) + (step,) + tuple(s[a:])))
    return results


def _if_branches(node: Node, inputs: list, infer_graph) -> tuple[list, list]:
    """The outputs of the If's two branches; a branch that refuses its inputs' shapes is left to
    run time (its inputs' dims unknown) and stands in with the other's outputs."""
    keys = ("then_branch", "else_branch")
    outs, errors = [], []
    for key in keys:
        try:
            outs.append(_infer(node.attrs[key], inputs, infer_graph))
            errors.append(None)
        except UnsupportedOpError:  # no kernel: it could not run whichever branch is taken
            raise
        except (GraphError, ShapeError) as e:
            outs.append(None)
            errors.append(e)
    if all(errors):
        raise errors[0]
    for key, e in zip(keys, errors):
        if e is not None:
            log.warning("%s: its %s cannot run on these input shapes (%s); it is compiled to check its "
                        "shapes at run time and fails if taken", node, key, e)
            _set_inputs(node.attrs[key], [(d, None if s is None else (None,) * len(s)) for d, s in inputs])
    a, b = outs
    return a or b, b or a


def node_opset_below_9(graph: Graph) -> bool:
    return graph.opset.get("", 17) < 9


def _of(graph: Graph, name: str) -> tuple:
    if not name:
        return (None, None)
    if name in graph.initializers:
        a = graph.initializers[name]
        return (a.dtype, tuple(a.shape))
    v = graph.value(name)
    return (v.dtype, None if v.shape is None else tuple(v.shape))


def _fixed_trip_count(graph: Graph, node: Node):
    """A Loop's iteration count when the compiler knows it (else None): a constant trip count and a
    condition that cannot become false (absent or constant true, and the body passes it through or
    sets it to a constant true: PyTorch's `for i in range(n)`)."""
    trip, cond = (node.inputs + ["", ""])[:2]
    if trip not in graph.initializers or (cond and not _is_true(graph, cond)):
        return None
    body = node.attrs["body"]
    out = body.outputs[0] if body.outputs else ""
    producer = body.producers().get(out)
    if producer is not None and producer.op_type == "Identity" and producer.domain == "":
        out = producer.inputs[0]
        producer = body.producers().get(out)
    if out != body.inputs[1] and not _is_true(body, out) and not (
            producer is not None and producer.op_type == "Constant" and "value" in producer.attrs
            and np.asarray(producer.attrs["value"]).size == 1 and bool(np.asarray(producer.attrs["value"]).reshape(-1)[0])):
        return None
    return max(int(np.asarray(graph.initializers[trip]).reshape(-1)[0]), 0)


def _is_true(graph: Graph, name: str) -> bool:
    a = graph.initializers.get(name)
    return a is not None and a.size == 1 and bool(a.reshape(-1)[0])


def _fixpoint(body: Graph, fixed: list, carried: list, slices: list, captured: list, skip: int, infer_graph):
    """Carried input shapes the body keeps (dims it changes made unknown) and the body's outputs.
    `skip`: outputs before the carried ones (a Loop body's condition)."""
    state = [(d, None if s is None else tuple(s)) for d, s in carried]
    for _ in range(_MAX_WIDENING + 1):
        outs = _infer(body, fixed + state + slices + captured, infer_graph)
        after = outs[skip:skip + len(state)]
        widened = [(d0 or d1, _merge(s0, s1)) for (d0, s0), (d1, s1) in zip(state, after)]
        if widened == state:
            return state, outs
        state = widened
    state = [(d, None) for d, _ in state]
    return state, _infer(body, fixed + state + slices + captured, infer_graph)


def _infer(body: Graph, inputs: list, infer_graph) -> list[tuple]:
    """Set the subgraph's inputs to `inputs` (dtype, shape) and infer its outputs (on a copy)."""
    _set_inputs(body, inputs)
    trial = copy.deepcopy(body)
    infer_graph(trial)
    return [_of(trial, o) for o in trial.outputs]


def _set_inputs(body: Graph, inputs: list) -> None:
    for name, (dtype, shape) in zip(body.inputs, inputs):
        v = body.value(name)
        if dtype is not None:
            v.dtype = np.dtype(dtype)
        v.shape = None if shape is None else tuple(shape)


def _merge(a, b):
    """The shape both may have: equal dims (or symbols) kept, others unknown (None); different ranks: None."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def _known(d) -> bool:
    return isinstance(d, int) and d >= 0


def _common(dims: list):
    known = {d for d in dims if _known(d)}
    return known.pop() if len(known) == 1 else None
