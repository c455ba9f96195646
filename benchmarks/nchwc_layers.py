"""The blocked-layout convolution (core/kernels/ops/nchwc.py, csrc/nchwc.c) against ge's NCHW plan of the
same conv (core/kernels/ops/conv_native.py) and onnxruntime's single Conv session (which runs it in its
own NCHWc layout, with reorders around it), on ResNet-50's convs and MobileNetV2's pointwise convs:

    .venv/bin/python benchmarks/nchwc_layers.py [--batch 1 8] [--only resnet|mobilenet] [--rounds 3] [--reps 5]
                                                [--filter 3x3] [--cold]

One thread each, CPU time of the calling thread, all engines in one process (one thread each: no
pool spins beside another), interleaved per layer and round; each figure is the median call.
Repeated alone a conv finds its weights in the caches; inside a model they come from memory (ResNet-50's
97 MB are read once per inference) while its input was just written: --cold evicts the caches before
each call and touches the input (and Z) again.
Columns: `ge` the NCHW plan (its kind in `plan`), `nchwc` the blocked kernel on blocked tensors (what
a conv costs inside a region of the blocked layout), `+reorder` the same with the reorders of its
input and output (a region of one conv), `ort` onnxruntime. Each layer carries its ResNet epilogue
(Relu; the expanding 1x1 convs a residual Add before it, written over Z as the model does) or
MobileNetV2's (Clip 0..6 on the expanding ones). ResNet's 3-channel conv1 is left out: the blocked
kernel would pad its 3 channels to a block (MLAS runs it on an NCHW input; ge would keep its NCHW plan
and reorder its output). Not a test."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

from ge.core.model.ir import Meta
from ge.core.kernels import lookup, native
from ge.core.kernels.blas import set_local_threads
from ge.core.kernels.epilogue import ATTR as EPILOGUE, Epilogue
from ge.core.kernels.ops.nchwc import NchwcConv, blocked_empty, reorder

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conv_layers import RESNET50  # noqa: E402

# MobileNetV2's pointwise convs (name, count, C, H, OC): expanding ones (OC > C) end in Clip(0, 6)
MOBILENETV2_PW = [
    ("pw 32->16 @112", 1, 32, 112, 16), ("pw 16->96 @112", 1, 16, 112, 96), ("pw 96->24 @56", 1, 96, 56, 24),
    ("pw 24->144 @56", 2, 24, 56, 144), ("pw 144->24 @56", 1, 144, 56, 24), ("pw 144->32 @28", 1, 144, 28, 32),
    ("pw 32->192 @28", 3, 32, 28, 192), ("pw 192->32 @28", 2, 192, 28, 32), ("pw 192->64 @14", 1, 192, 14, 64),
    ("pw 64->384 @14", 4, 64, 14, 384), ("pw 384->64 @14", 3, 384, 14, 64), ("pw 384->96 @14", 1, 384, 14, 96),
    ("pw 96->576 @14", 3, 96, 14, 576), ("pw 576->96 @14", 2, 576, 14, 96), ("pw 576->160 @7", 1, 576, 7, 160),
    ("pw 160->960 @7", 3, 160, 7, 960), ("pw 960->160 @7", 2, 960, 7, 160), ("pw 960->320 @7", 1, 960, 7, 320),
    ("pw 320->1280 @7", 1, 320, 7, 1280),
]
CLOCK = time.thread_time


def ort_session(nodes, inputs, output, inits, profile=False, threads=1) -> ort.InferenceSession:
    """onnxruntime on `threads` threads for the graph of `nodes` (inits: name -> array); profile: its profiler on."""
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(output, 1, None)],
                              [numpy_helper.from_array(a, n) for n, a in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.enable_profiling = profile
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


class GeConv:
    """ge's NCHW plan of one Conv (FusedConv with a residual Z; Y may be Z), loaded as a model loads it,
    its activation (Relu or Clip 0..6) its fused epilogue."""

    def __init__(self, name, x_shape, w, b, attrs, act, residual):
        op, domain = ("FusedConv", "ge") if residual else ("Conv", "")
        self.w, self.b = w, b
        metas = [Meta(np.dtype(np.float32), x_shape), Meta(w.dtype, w.shape), Meta(b.dtype, b.shape)]
        cls = lookup(op, domain, 17)
        kattrs = dict(attrs, **({EPILOGUE: [[act, {"min": 0.0, "max": 6.0} if act == "Clip" else {}]]} if act else {}))
        out = lookup("Conv", "", 17)(attrs, metas, [None, w, b], opset=17, name=name).infer()[0]  # Y's meta, Z's too
        metas += [out] * residual
        consts = [None, w, b] + [None] * residual
        self.kernel = cls(kattrs, metas, consts, outputs=[out], opset=17, name=name).load()
        self.epilogue = Epilogue.unless_absorbed(self.kernel, kattrs.get(EPILOGUE), out, 17, name)
        nbytes = self.kernel.workspace_nbytes()
        self.ws = np.empty(nbytes, np.uint8) if nbytes else None
        self.y_shape = tuple(out.shape)
        nat_plan = getattr(self.kernel, "native", None)
        self.plan = getattr(nat_plan, "kind", None) or getattr(self.kernel, "plan", "")

    def run(self, x, y, z=None):
        self.kernel.run([x, self.w, self.b] + ([] if z is None else [z]), [y], self.ws)
        if self.epilogue is not None:
            self.epilogue(y)


class Layer:
    """One conv built three ways, on the same input and weights."""

    def __init__(self, nat, name, count, n, c, h, oc, k, s, p, *, residual=False, act="Relu"):
        self.name, self.count = name, count
        rng = np.random.default_rng(0)
        x = rng.standard_normal((n, c, h, h)).astype(np.float32)
        w = (rng.standard_normal((oc, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32) * 0.1
        attrs = {"kernel_shape": [k, k], "strides": [s, s], "pads": [p] * 4}
        self.conv = NchwcConv(nat, x.shape, oc, (k, k), strides=(s, s), pads=(p,) * 4, act=native_act(act))
        self.conv.pack(w, b)
        z = rng.standard_normal(self.conv.y_shape).astype(np.float32) if residual else None

        # onnxruntime: Conv (+ Add) (+ activation), one thread
        nodes, out = [helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs)], "c"
        inputs, self.feeds = [helper.make_tensor_value_info("x", 1, x.shape)], {"x": x}
        if residual:
            nodes.append(helper.make_node("Add", ["c", "z"], ["a"]))
            inputs.append(helper.make_tensor_value_info("z", 1, z.shape))
            self.feeds["z"], out = z, "a"
        inits = {"w": w, "b": b}
        if act:
            clip = {f"clip{v}": np.array(v, np.float32) for v in (0, 6)} if act == "Clip" else {}
            nodes.append(helper.make_node(act, [out] + list(clip), ["y"]))
            inits.update(clip)
            out = "y"
        self.sess = ort_session(nodes, inputs, out, inits)
        want = self.sess.run(None, self.feeds)[0]

        # ge's NCHW plan: Conv, or FusedConv with Z (its output written over Z, as the model's plan does)
        self.ge = GeConv(name, x.shape, w, b, attrs, act, residual)
        self.plan = self.ge.plan
        self.x, self.y, self.z = x, np.empty(self.conv.y_shape, np.float32), z

        # the blocked kernel: Y over Z too
        blk = nat.nchwc_block
        self.xb, self.yb = blocked_empty(x.shape, blk), blocked_empty(self.conv.y_shape, blk)
        self.y_out = np.empty(self.conv.y_shape, np.float32)
        self.to_blocked = reorder(nat, x, self.xb, True)
        self.from_blocked = reorder(nat, self.yb, self.y_out, False)
        self.conv_call = self.conv.call(self.xb, self.yb, self.yb if residual else None)
        self.z_in = None if z is None else reorder(nat, z, self.yb, True)
        self.check(want)
        self.times = {e: [] for e in ENGINES}
        zs = [self.y] if residual else []  # ge's Y is Z, the blocked kernel's too
        self.warm = {"ge": [x] + zs, "nchwc": [self.xb] + ([self.yb] if residual else []),
                     "+reorder": [x] + ([self.yb] if residual else []), "ort": list(self.feeds.values())}

    def check(self, want):
        """Each of ge's two plans against onnxruntime, from Z afresh (both write over it)."""
        if self.z is not None:
            np.copyto(self.y, self.z)
            self.z_in.run()
        self.run_ge()
        self.to_blocked.run()
        self.conv_call.run()
        self.from_blocked.run()
        scale = np.abs(want).max()
        for plan, got in (("ge", self.y), ("nchwc", self.y_out)):
            assert np.abs(got - want).max() <= 1e-4 * scale, (self.name, plan, np.abs(got - want).max() / scale)

    def run_ge(self):
        self.ge.run(self.x, self.y, self.y if self.z is not None else None)

    def run_nchwc(self):
        self.conv_call.run()

    def run_reordered(self):
        self.to_blocked.run()
        self.conv_call.run()
        self.from_blocked.run()

    def run_ort(self):
        self.sess.run(None, self.feeds)


ENGINES = ("ge", "nchwc", "+reorder", "ort")


def native_act(act):
    return {None: None, "Relu": native.Act(native.ACT_CLAMP, 0.0, float("inf")),
            "Clip": native.Act(native.ACT_CLAMP, 0.0, 6.0)}[act]


def timed(fn, reps, warm=None) -> list[float]:
    """CPU times of reps calls; warm: the arrays a model's previous ops would have left in the caches,
    touched after evicting everything else (--cold), so that the weights come from memory."""
    fn()
    out = []
    for _ in range(reps):
        if warm is not None:
            _EVICT.sum()
            for a in warm:
                a.sum()
        t = CLOCK()
        fn()
        out.append(CLOCK() - t)
    return out


_EVICT = np.ones(1 << 24, np.float32)  # 64 MB: twice the L3


def layers_for(nat, only, batch, flt):
    rows = []
    if only in (None, "resnet"):
        for name, count, c, h, oc, k, s, p, _ in RESNET50:
            if c == 3:
                continue  # conv1: see the docstring
            expanding = k == 1 and s == 1 and oc == 4 * c and name != "1x1 64->256 @56" or \
                name == "1x1 64->256 @56"  # layer1's 4: 3 blocks' conv3 and the downsample, counted as residual
            downsample = "s2" in name and k == 1
            rows.append(("resnet", name, count, batch, c, h, oc, k, s, p, expanding and not downsample,
                         None if downsample else "Relu"))
    if only in (None, "mobilenet"):
        for name, count, c, h, oc in MOBILENETV2_PW:
            rows.append(("mobilenet", name, count, batch, c, h, oc, 1, 1, 0, False, "Clip" if oc > c else None))
    return [(family, Layer(nat, name, count, n, c, h, oc, k, s, p, residual=res, act=act))
            for family, name, count, n, c, h, oc, k, s, p, res, act in rows if not flt or flt in name]


def one_native_thread():
    """The native library, its kernels and numpy's BLAS on one thread; exits when the kernels do not run.
    Prints what runs and the machine's load, which the figures depend on."""
    nat = native.native()
    if nat is None:
        sys.exit(f"the native kernels do not run: {native.status()}")
    native.set_threads(1)
    set_local_threads(1)
    print(f"{native.status()}; block {nat.nchwc_block}; load average {open('/proc/loadavg').read().split()[:3]}")
    return nat


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--only", choices=["resnet", "mobilenet"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--filter", default="")
    ap.add_argument("--cold", action="store_true", help="weights cold, input (and Z) warm, as inside a model")
    args = ap.parse_args()
    nat = one_native_thread()
    for batch in args.batch:
        layers = layers_for(nat, args.only, batch, args.filter)
        for _ in range(args.rounds):
            for _, layer in layers:
                for engine, fn in zip(ENGINES, (layer.run_ge, layer.run_nchwc, layer.run_reordered, layer.run_ort)):
                    layer.times[engine] += timed(fn, args.reps, layer.warm[engine] if args.cold else None)
        for family in ("resnet", "mobilenet"):
            rows = [layer for f, layer in layers if f == family]
            if rows:
                table(f"{'ResNet-50 convs' if family == 'resnet' else 'MobileNetV2 pointwise convs'}, batch {batch} "
                      f"(µs, median CPU time of one thread{'; weights cold' if args.cold else ''})", rows)


def table(title, layers):
    print(f"\n{title}")
    print(f"{'layer':22s} {'n':>2s} {'plan':>11s} " + " ".join(f"{e:>8s}" for e in ENGINES) +
          f" {'nchwc/ort':>9s} {'nchwc/ge':>8s} {'+r/ort':>6s}")
    totals = dict.fromkeys(ENGINES, 0.0)
    for layer in layers:
        med = {e: statistics.median(layer.times[e]) * 1e6 for e in ENGINES}
        for e in ENGINES:
            totals[e] += layer.count * med[e]
        print(f"{layer.name:22s} {layer.count:2d} {layer.plan:>11s} " + " ".join(f"{med[e]:8.0f}" for e in ENGINES) +
              f" {med['nchwc'] / med['ort']:9.2f} {med['nchwc'] / med['ge']:8.2f} {med['+reorder'] / med['ort']:6.2f}")
    print(f"{'weighted total':22s} {'':2s} {'':>11s} " + " ".join(f"{totals[e]:8.0f}" for e in ENGINES) +
          f" {totals['nchwc'] / totals['ort']:9.2f} {totals['nchwc'] / totals['ge']:8.2f}"
          f" {totals['+reorder'] / totals['ort']:6.2f}")


if __name__ == "__main__":
    main()
