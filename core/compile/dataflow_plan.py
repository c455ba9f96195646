"""A memory plan safe for any schedule that respects data dependencies.

The linear plan reuses bytes between tensors whose lifetimes do not overlap in ONE order; run
ops in another order or at the same time and a buffer can be overwritten while an op still reads
it. Here two tensors may share bytes only when every access to one is a strict ancestor (in the
data-dependency graph) of the producer of the other. Each kernel workspace becomes its own buffer
with the same rule, so concurrent tasks never share scratch either.

Input: a built GeModel (its linear plan's arguments and tensor table); output: the dependency
graph and a feature-map offset for every argument that moves (a DataflowPlan, stored in the OM so
that the runtime never plans). Pure functions.
"""
from __future__ import annotations

import numpy as np

from ..model.errors import GraphError
from ..model.ge_model import (ARG_IN as IN, ARG_OUT as OUT, ARG_SCRATCH as SCRATCH, FEATURE_MAP, FM_ID, INPUT, OUTPUT,
                              WORKSPACE, DataflowPlan, GeModel, arg_rows)
from ..model.arena import Buffer, plan_arena

#: the all-pairs steps below work in blocks of rows of at most about this many bytes of temporaries
BLOCK_BYTES = 16 << 20
#: _live_roots' arguments per block: the roots live within a block are those live together plus those
#: its tasks make
ARGS_PER_BLOCK = 256


def plan_dataflow(model: GeModel) -> DataflowPlan:
    arg_alloc, arg_offset, arg_task, arg_role, arg_nbytes = arg_rows(model.tasks)
    alloc_kinds = [a.kind for a in model.allocations]
    tensors, fm_id = model.tensors, FM_ID
    n_tasks = int(arg_task.max()) + 1 if len(arg_task) else 0
    roots = [t for t in tensors if t.allocation == fm_id and not t.alias_of]

    # 1. which buffer each argument touches: a feature-map root, a model I/O, or its own workspace
    key: list = [None] * len(arg_alloc)  # None: weights (read-only, no ordering needed) and empty tensors
    fm_args, ws_nbytes = [], {}  # ws_nbytes: a task's workspace, its largest scratch argument
    for i, (alloc, task, role, nbytes) in enumerate(zip(arg_alloc.tolist(), arg_task.tolist(), arg_role.tolist(),
                                                        arg_nbytes.tolist())):
        kind = alloc_kinds[alloc]
        if nbytes == 0:
            continue  # an empty tensor touches no memory
        if kind == FEATURE_MAP:
            fm_args.append(i)
        elif kind in (INPUT, OUTPUT):
            key[i] = ("io", alloc)
        elif kind == WORKSPACE or role == SCRATCH:
            key[i] = ("ws", task)
            ws_nbytes[task] = max(ws_nbytes.get(task, 0), nbytes if role == SCRATCH else 0)
    fm_args = np.array(fm_args, np.int64)
    for i, r in zip(fm_args.tolist(), _live_roots(roots, arg_offset[fm_args], arg_task[fm_args], arg_role[fm_args])):
        key[i] = ("fm", r)

    # 2. data dependencies (read after write) and who touches what
    writer: dict = {}
    users: dict = {}  # buffer key -> the tasks touching it
    deps = [set() for _ in range(n_tasks)]
    for k, task, role in zip(key, arg_task.tolist(), arg_role.tolist()):
        if k is None:
            continue
        users.setdefault(k, set()).add(task)
        if role == IN and k in writer and writer[k] != task:
            deps[task].add(writer[k])
        elif role != IN:
            writer[k] = task

    # 3. place feature maps and workspaces: sharing only between buffers ordered by the graph
    buffers, producer, touching = [], [], []
    for k, tasks in users.items():
        if k[0] == "io":  # model I/O: not placed here
            continue
        touching.append(list(tasks))
        if k[0] == "fm":
            r = roots[k[1]]
            buffers.append(Buffer(f"fm{k[1]}", r.nbytes, r.first, r.last))
            producer.append(writer.get(k, r.first))
        elif k[0] == "ws":
            buffers.append(Buffer(f"ws{k[1]}", ws_nbytes[k[1]], k[1], k[1]))
            producer.append(k[1])
    # a and b may share bytes only when every task touching one is an ancestor of the other's producer
    # (nested calls: each packed matrix is freed as soon as the next one is made)
    conflicts = _conflicts(_after_all(_descendants(deps), touching), producer)
    arena = plan_arena(buffers, conflicts=conflicts, reuse=not model.attrs.get("disable_reuse_memory"))

    # 4. feature maps and workspaces re-pointed into the new arena; I/O and weights keep their place
    fm_offsets = [-1] * len(key)
    for i, k in enumerate(key):
        if k is None or k[0] == "io":
            continue
        if k[0] == "fm":
            fm_offsets[i] = arena.offsets[f"fm{k[1]}"] + (int(arg_offset[i]) - roots[k[1]].offset)
        else:
            fm_offsets[i] = arena.offsets[f"ws{k[1]}"]
    return DataflowPlan(tuple(tuple(sorted(d)) for d in deps), tuple(fm_offsets), arena.size, arena.lower_bound)


def _live_roots(roots: list, off: np.ndarray, task: np.ndarray, role: np.ndarray) -> list[int]:
    """The index in `roots` of the one feature-map root each argument (its offset, task and role)
    touches: the root holding that offset, live at that task. A task reads tensors made before it and
    writes its own (an output written over its input shares the input's bytes in the linear plan:
    both are live at that task). A block of arguments is tested against the roots live at some task of
    the block only (a root that matches is made by its last task or before and read up to its first or
    later): arguments come in task order, so the work grows with the arguments times the tensors live
    together, not times all tensors (a 20k-node graph: arguments x roots took 4 s)."""
    r_off = np.array([t.offset for t in roots], np.int64)
    r_end = r_off + np.array([t.nbytes for t in roots], np.int64)
    r_first = np.array([t.first for t in roots], np.int64)
    r_last = np.array([t.last for t in roots], np.int64)
    found = []
    rows = max(1, min(ARGS_PER_BLOCK, BLOCK_BYTES // 8 // max(1, len(roots))))  # ~8 boolean temporaries
    for start in range(0, len(off), rows):
        o, t, k = (a[start:start + rows, None] for a in (off, task, role))
        near = np.flatnonzero((r_first <= t.max()) & (r_last >= t.min()))
        first, last = r_first[near], r_last[near]
        made = np.where(k == IN, first < t, np.where(k == OUT, first == t, first <= t))
        hit = (r_off[near] <= o) & (o < r_end[near]) & made & (t <= last)
        counts = hit.sum(axis=1)
        bad = np.flatnonzero(counts != 1)
        if len(bad):
            j = bad[0]
            raise GraphError(f"task {int(t[j, 0])}: feature-map offset {int(o[j, 0])} matches {int(counts[j])} live tensors")
        found += near[hit.argmax(axis=1)].tolist()
    return found


def _descendants(deps: list) -> list[int]:
    """Row p: the tasks that run after task p in every schedule (its descendants through `deps`), as a
    Python int whose bytes (to_bytes, big-endian, _packed) are a row of bits packed as np.packbits packs
    them: task t is bit 0x80 >> (t & 7) of byte t >> 3 (20k tasks: 50 MB, as packed numpy rows, but an
    OR of two rows one operation, not numpy's two calls an edge). Tasks are in a topological order, so a
    task's row is complete before it is ORed, with its own bit, into its parents' rows."""
    n = len(deps)
    top = (n + 7) // 8 * 8 - 1  # task t's bit
    rows = [0] * n
    for t in range(n - 1, -1, -1):
        below = rows[t] | (1 << (top - t))
        for p in deps[t]:
            rows[p] |= below
    return rows


def _packed(rows: list[int], n: int) -> np.ndarray:
    """Rows of bits over n tasks as Python ints (_descendants) as np.packbits' rows of bytes."""
    width = (n + 7) // 8
    return np.frombuffer(b"".join(r.to_bytes(width, "big") for r in rows), np.uint8).reshape(len(rows), width)


def _after_all(descendants: list[int], touching: list) -> np.ndarray:
    """Row a, packed as np.packbits packs rows: the tasks after every task touching buffer a (the AND of
    their rows). Buffers x touching tasks x a row, where testing each pair of buffers on the rows of one
    and the other's producer took buffers x buffers x a row."""
    after = []
    for tasks in touching:
        row = descendants[tasks[0]]
        for t in tasks[1:]:
            row &= descendants[t]
        after.append(row)
    return _packed(after, len(descendants))


def _conflicts(after: np.ndarray, producer: list) -> np.ndarray:
    """Row a, bits packed as np.packbits packs them, bit b: may buffers a and b not share bytes? They
    may when one comes first: b's producer is after every task touching a (row a of _after_all), or
    the other way round. Boolean matrices only in blocks of rows (BLOCK_BYTES). Bits are picked by
    task, so the padding bits past the last task are never read as tasks."""
    width, producer = after.shape[1] * 8, np.array(producer, np.int64)
    out = np.empty((len(after), (len(after) + 7) // 8), np.uint8)
    rows = max(1, BLOCK_BYTES // max(1, width + 3 * len(after)))  # bytes of the temporaries a row of a block takes
    for start in range(0, len(after), rows):
        p = producer[start:start + rows]
        a_first = np.unpackbits(after[start:start + rows], axis=1)[:, producer]  # [a, b]
        b_first = np.right_shift(after[:, p >> 3], (7 - (p & 7)).astype(np.uint8))  # [b, a] in bit 0
        b_first &= 1
        a_first |= b_first.T
        out[start:start + rows] = np.packbits(a_first == 0, axis=1)
    return out
