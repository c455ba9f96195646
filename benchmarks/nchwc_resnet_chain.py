"""ResNet-50's convolutions after the stem (the 16 bottleneck blocks: 52 convs, their residual Adds and
Relus), run in order as a model runs them, three ways: ge's NCHW plans (core/kernels/ops/conv_native.py,
FusedConv over its residual as the planner places it), the blocked kernel (core/kernels/ops/nchwc.py) with
one reorder in and one out, and onnxruntime on the same graph (its NCHWc transformer, one thread).
Unlike benchmarks/nchwc_layers.py, each conv finds the caches as the one before left them (outputs in
three buffers per shape, reused in turn, as an arena reuses memory), and the blocked layout pays its
reorders once for the whole chain: what wiring the kernel in for this region
would give, before the stem, the pool and the classifier.

    .venv/bin/python benchmarks/nchwc_resnet_chain.py [--batch 1 8] [--rounds 3] [--reps 3]
    .venv/bin/python benchmarks/nchwc_resnet_chain.py --per-layer RUNS [--threads 2] [--batch 1]
    .venv/bin/python benchmarks/nchwc_resnet_chain.py --builds OLD.so NEW.so [--rounds 10] [--batch 1]

One thread each, CPU time of the calling thread, engines interleaved per round; the median run.
--per-layer: each conv beside onnxruntime's node, in wall time (its profiler's), the least of the runs.
--builds: builds of the native library (a _native_<level>.so each, e.g. one built from an older
commit) in one process, each conv's median CPU time per build. Not a test."""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
from onnx import helper

from ge.core.kernels import native
from ge.core.kernels.blas import set_local_threads
from ge.core.kernels.ops.nchwc import NchwcConv, blocked_empty, reorder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nchwc_layers import GeConv, native_act, one_native_thread, ort_session  # noqa: E402

STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]  # (width, blocks, stride of the first), v1.5


def chain_convs():
    """(name, C, OC, kernel, stride, role) in order; role: "a"/"b" (Relu), "down" (none), "c" (residual + Relu)."""
    convs, c = [], 64
    for si, (width, blocks, stride) in enumerate(STAGES):
        for bi in range(blocks):
            s = stride if bi == 0 else 1
            name = f"layer{si + 1}.{bi}"
            convs += [(f"{name}.conv1", c, width, 1, 1, "a"), (f"{name}.conv2", width, width, 3, s, "b")]
            if bi == 0:
                convs.append((f"{name}.down", c, 4 * width, 1, s, "down"))
            convs.append((f"{name}.conv3", width, 4 * width, 1, 1, "c"))
            c = 4 * width
    return convs


class Chain:
    def __init__(self, nat, batch, profile=False, threads=1):
        rng = np.random.default_rng(0)
        self.x = rng.standard_normal((batch, 64, 56, 56)).astype(np.float32)
        self.ge_steps, self.nchwc_steps, self.names, self.rings = [], [], [], {}
        nodes, inits = [], {}
        block_in, cur = "x", "x"  # onnx names
        ge_in = ge_cur = self.x  # ge's buffers
        blk = nat.nchwc_block
        self.xb = blocked_empty(self.x.shape, blk)
        nb_in = nb_cur = self.xb  # the blocked kernel's buffers
        down = nb_down = ge_down = None
        for name, c, oc, k, s, role in chain_convs():
            w = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
            b = (rng.standard_normal(oc) * 0.1).astype(np.float32)
            p = k // 2
            attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4}
            act = None if role == "down" else "Relu"
            src, ge_src, nb_src = (block_in, ge_in, nb_in) if role in ("a", "down") else (cur, ge_cur, nb_cur)
            x_shape = ge_src.shape
            inits[f"{name}.w"], inits[f"{name}.b"] = w, b
            nodes.append(helper.make_node("Conv", [src, f"{name}.w", f"{name}.b"], [f"{name}.y"], name, **attrs))
            self.names.append(name)
            conv = NchwcConv(nat, x_shape, oc, (k, k), strides=(s, s), pads=(p,) * 4, act=native_act(act))
            conv.pack(w, b)
            ge = GeConv(name, x_shape, w, b, attrs, act, role == "c")
            if role == "c":  # over Z: the downsample's output, or the block's input (this conv its last reader)
                z, ge_z, nb_z = (down, ge_down, nb_down) if down else (block_in, ge_in, nb_in)
                nodes += [helper.make_node("Add", [f"{name}.y", z], [f"{name}.sum"]),
                          helper.make_node("Relu", [f"{name}.sum"], [f"{name}.out"])]
                self.ge_steps.append((ge, ge_src, ge_z, ge_z))
                self.nchwc_steps.append(conv.call(nb_src, nb_z, nb_z))
                block_in = cur = f"{name}.out"
                ge_in = ge_cur = ge_z
                nb_in = nb_cur = nb_z
                down = ge_down = nb_down = None
                continue
            ge_y = self.buffer(ge.y_shape, lambda: np.empty(ge.y_shape, np.float32))
            nb_y = self.buffer(("blocked",) + ge.y_shape, lambda: blocked_empty(ge.y_shape, blk))
            self.ge_steps.append((ge, ge_src, ge_y, None))
            self.nchwc_steps.append(conv.call(nb_src, nb_y, None))
            if role == "down":
                down, ge_down, nb_down = f"{name}.y", ge_y, nb_y
                continue
            nodes.append(helper.make_node("Relu", [f"{name}.y"], [f"{name}.r"]))
            cur, ge_cur, nb_cur = f"{name}.r", ge_y, nb_y
        self.ge_out = ge_cur
        self.out = np.empty(ge_cur.shape, np.float32)
        self.to_blocked = reorder(nat, self.x, self.xb, True)
        self.from_blocked = reorder(nat, nb_cur, self.out, False)
        self.sess = ort_session(nodes, [helper.make_tensor_value_info("x", 1, self.x.shape)], cur, inits, profile, threads)
        want = self.sess.run(None, {"x": self.x})[0]
        self.run_ge()
        self.run_nchwc()
        scale = np.abs(want).max()
        for plan, got in (("ge", self.ge_out), ("nchwc", self.out)):
            err = np.abs(got - want).max() / scale
            assert err <= 1e-4, (plan, err)

    def buffer(self, key, make):
        """The next of three buffers per shape, in turn: at most three of one shape are live at once, and
        reusing them keeps the chain's memory in the caches as an arena does (one buffer per tensor
        would write every output into memory not touched since the last run)."""
        ring = self.rings.setdefault(key, [[make() for _ in range(3)], 0])
        ring[1] = (ring[1] + 1) % 3
        return ring[0][ring[1]]

    def run_ge(self):
        for conv, x, y, z in self.ge_steps:
            conv.run(x, y, z)

    def run_nchwc(self):
        self.to_blocked.run()
        for call in self.nchwc_steps:
            call.run()
        self.from_blocked.run()

    def run_ort(self):
        self.sess.run(None, {"x": self.x})

    def run_blocked_timed(self, clock, times: dict) -> None:
        """The blocked chain once (its two reorders included), each conv's time by `clock` appended to
        times[its name]."""
        self.to_blocked.run()
        for name, call in zip(self.names, self.nchwc_steps):
            t = clock()
            call.run()
            times[name].append(clock() - t)
        self.from_blocked.run()

    def per_layer(self, runs):
        """Each conv's least wall time of `runs` in µs, blocked (each call timed in the chain) and onnxruntime's
        node (its profiler, which times wall too; the session built with profile=True), runs of each
        interleaved. The least, not the median: on a shared machine wall times include other processes'
        turns, and the least of many runs is each side's time without them."""
        ours = {name: [] for name in self.names}
        for _ in range(runs):
            self.run_ort()
            self.run_blocked_timed(time.perf_counter, ours)
        theirs = {name: [] for name in self.names}
        for event in json.load(open(self.sess.end_profiling())):
            node = event.get("args", {}).get("op_name") == "Conv" and event["name"].rsplit(".", 1)[0]
            if event.get("cat") == "Node" and node in theirs:
                theirs[node].append(event["dur"] * 1e-6)
        return [(name, min(ours[name]) * 1e6, min(theirs[name][1:]) * 1e6)
                for name in self.names]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="for --per-layer: threads of each engine")
    ap.add_argument("--per-layer", type=int, metavar="RUNS", default=0,
                    help="each conv beside onnxruntime's node instead (wall time, the least of RUNS chains)")
    ap.add_argument("--builds", nargs="+", metavar="LIB",
                    help="builds of the native library (_native_<level>.so files) compared in one process instead: "
                         "their chains interleaved (--rounds of them), each conv's median CPU time per build")
    args = ap.parse_args()
    if args.builds:
        return compare_builds(args.builds, args.batch, args.rounds)
    nat = one_native_thread()
    if args.per_layer:
        native.set_threads(args.threads)
        return per_layer(nat, args.batch, args.per_layer, args.threads)
    print(f"{'batch':>5s} {'ge ms':>8s} {'nchwc ms':>8s} {'ort ms':>8s} {'nchwc/ge':>8s} {'nchwc/ort':>9s} {'ge/ort':>6s}")
    for batch in args.batch:
        chain = Chain(nat, batch)
        times = {"ge": [], "nchwc": [], "ort": []}
        for _ in range(args.rounds):
            for engine, fn in (("ge", chain.run_ge), ("nchwc", chain.run_nchwc), ("ort", chain.run_ort)):
                fn()
                for _ in range(args.reps):
                    t = time.thread_time()
                    fn()
                    times[engine].append(time.thread_time() - t)
        med = {e: statistics.median(ts) * 1e3 for e, ts in times.items()}
        print(f"{batch:5d} {med['ge']:8.1f} {med['nchwc']:8.1f} {med['ort']:8.1f} {med['nchwc'] / med['ge']:8.2f} "
              f"{med['nchwc'] / med['ort']:9.2f} {med['ge'] / med['ort']:6.2f}")


def conv_kinds():
    return {name: f"{k}x{k}" + (f"s{s}" if s > 1 else "") for name, _, _, k, s, _ in chain_convs()}


def compare_builds(paths, batches, rounds):
    """Each conv's median CPU time under each build, their chains run in turn with onnxruntime's (one
    thread): two builds compared in the same conditions, which separate processes on a shared machine
    are not (their figures move 5% from one run to the next)."""
    nats = [native.load(p) for p in paths]
    native.set_threads(1)
    set_local_threads(1)
    print(f"load average {open('/proc/loadavg').read().split()[:3]}; builds: " +
          ", ".join(f"{i}: {p}" for i, p in enumerate(paths)))
    kinds = conv_kinds()
    for batch in batches:
        chains = [Chain(nat, batch) for nat in nats]
        per = [{name: [] for name in chain.names} for chain in chains]
        totals = [[] for _ in range(len(chains) + 1)]
        for _ in range(rounds):
            for chain, times, total in zip(chains, per, totals):
                start = time.thread_time()
                chain.run_blocked_timed(time.thread_time, times)
                total.append(time.thread_time() - start)
            start = time.thread_time()
            chains[0].run_ort()
            totals[-1].append(time.thread_time() - start)
        print(f"\nbatch {batch}: µs, median CPU time of {rounds} chains")
        print(f"{'conv':18s} {'kind':>6s} " + " ".join(f"{'build ' + str(i):>8s}" for i in range(len(paths))) +
              f" {'last/0':>6s}")
        sums = {}
        for name in chains[0].names:
            meds = [statistics.median(times[name]) * 1e6 for times in per]
            for kind in (kinds[name], "all"):
                sums[kind] = [a + b for a, b in zip(sums.get(kind, [0.0] * len(meds)), meds)]
            print(f"{name:18s} {kinds[name]:>6s} " + " ".join(f"{m:8.0f}" for m in meds) + f" {meds[-1] / meds[0]:6.3f}")
        for kind, meds in sorted(sums.items()):
            print(f"{'sum ' + kind:25s} " + " ".join(f"{m:8.0f}" for m in meds) + f" {meds[-1] / meds[0]:6.3f}")
        print("chains, ms: " + ", ".join(f"build {i} {statistics.median(t) * 1e3:.1f}" for i, t in
                                        enumerate(totals[:-1])) + f", onnxruntime {statistics.median(totals[-1]) * 1e3:.1f}")


def per_layer(nat, batches, runs, threads):
    for batch in batches:
        rows = Chain(nat, batch, profile=True, threads=threads).per_layer(runs)
        print(f"\nbatch {batch}, {threads} thread(s): µs, least wall time of {runs} chains (onnxruntime's from its "
              "profiler)")
        print(f"{'conv':18s} {'kind':>9s} {'nchwc':>8s} {'ort':>8s} {'nchwc/ort':>9s}")
        kinds = conv_kinds()
        sums = {}
        for name, ours, theirs in rows:
            print(f"{name:18s} {kinds[name]:>9s} {ours:8.0f} {theirs:8.0f} {ours / theirs:9.2f}")
            total = sums.setdefault(kinds[name], [0.0, 0.0])
            total[0], total[1] = total[0] + ours, total[1] + theirs
        total = [sum(t[0] for t in sums.values()), sum(t[1] for t in sums.values())]
        for kind, (ours, theirs) in sorted(sums.items()) + [("all", total)]:
            print(f"{'sum ' + kind:18s} {'':>9s} {ours:8.0f} {theirs:8.0f} {ours / theirs:9.2f}")


if __name__ == "__main__":
    main()
