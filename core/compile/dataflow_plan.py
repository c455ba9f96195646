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
from .arena import Buffer, plan_arena


def plan_dataflow(model: GeModel) -> DataflowPlan:
    arg_alloc, arg_offset, arg_task, arg_role, arg_nbytes = arg_rows(model.tasks)
    alloc_kinds = [a.kind for a in model.allocations]
    tensors, fm_id = model.tensors, FM_ID
    n_tasks = int(arg_task.max()) + 1 if len(arg_task) else 0
    roots = [t for t in tensors if t.allocation == fm_id and not t.alias_of]
    r_off = np.array([t.offset for t in roots], np.int64)
    r_end = r_off + np.array([t.nbytes for t in roots], np.int64)
    r_first = np.array([t.first for t in roots], np.int64)
    r_last = np.array([t.last for t in roots], np.int64)

    # 1. which buffer each argument touches: a feature-map root, a model I/O, or its own workspace
    key = []
    for alloc, off, task, role, nbytes in zip(arg_alloc.tolist(), arg_offset.tolist(), arg_task.tolist(),
                                              arg_role.tolist(), arg_nbytes.tolist()):
        kind = alloc_kinds[alloc]
        if nbytes == 0:
            key.append(None)  # an empty tensor touches no memory
        elif kind == FEATURE_MAP:
            # a task reads tensors made before it and writes its own (an output written over its input
            # shares the input's bytes in the linear plan: both are live at that task)
            made = r_first < task if role == IN else r_first == task if role == OUT else r_first <= task
            hit = np.flatnonzero((r_off <= off) & (off < r_end) & made & (task <= r_last))
            if len(hit) != 1:
                raise GraphError(f"task {task}: feature-map offset {off} matches {len(hit)} live tensors")
            key.append(("fm", int(hit[0])))
        elif kind in (INPUT, OUTPUT):
            key.append(("io", alloc))
        elif kind == WORKSPACE or role == SCRATCH:
            key.append(("ws", task))
        else:
            key.append(None)  # weights: read-only, no ordering needed

    # 2. data dependencies (read after write) and who touches what
    writer: dict = {}
    users: dict = {}
    deps = [set() for _ in range(n_tasks)]
    for k, task, role in zip(key, arg_task.tolist(), arg_role.tolist()):
        if k is None:
            continue
        users[k] = users.get(k, 0) | (1 << task)
        if role == IN and k in writer and writer[k] != task:
            deps[task].add(writer[k])
        elif role != IN:
            writer[k] = task
    ancestors = [0] * n_tasks
    for t in range(n_tasks):  # tasks are in a topological order
        for p in deps[t]:
            ancestors[t] |= ancestors[p] | (1 << p)

    # 3. place feature maps and workspaces: sharing only between buffers ordered by the graph
    buffers, producer = [], {}
    for k in users:
        if k[0] == "fm":
            r = roots[k[1]]
            buffers.append(Buffer(f"fm{k[1]}", r.nbytes, r.first, r.last))
            producer[buffers[-1].name] = (writer.get(k, r.first), users[k])
        elif k[0] == "ws":
            nbytes = int(max(arg_nbytes[(arg_task == k[1]) & (arg_role == SCRATCH)]))
            buffers.append(Buffer(f"ws{k[1]}", nbytes, k[1], k[1]))
            producer[buffers[-1].name] = (k[1], users[k])

    def conflicts(a: Buffer, b: Buffer) -> bool:
        (pa, ua), (pb, ub) = producer[a.name], producer[b.name]
        return (ua & ~ancestors[pb]) != 0 and (ub & ~ancestors[pa]) != 0

    arena = plan_arena(buffers, conflicts=conflicts, reuse=not model.attrs.get("disable_reuse_memory"))

    # 4. feature maps and workspaces re-pointed into the new arena; I/O and weights keep their place
    fm_offsets = [-1] * len(key)
    for i, k in enumerate(key):
        if k is None or k[0] == "io":
            continue
        if k[0] == "fm":
            fm_offsets[i] = arena.offsets[f"fm{k[1]}"] + (int(arg_offset[i]) - int(r_off[k[1]]))
        else:
            fm_offsets[i] = arena.offsets[f"ws{k[1]}"]
    return DataflowPlan(tuple(tuple(sorted(d)) for d in deps), tuple(fm_offsets), arena.size, arena.lower_bound)
