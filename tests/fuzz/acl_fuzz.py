"""A seeded fuzzer of pyACL call sequences (issue 33: the pyACL layer is hostile ground).

Each case is a random sequence of calls — malloc/free/malloc_host/free_host, memcpy/memset (and
their async forms) with pointers that are live, freed, shifted past their allocation or foreign,
sizes that are zero, exact, one too many or absurd, arguments of the wrong type; data buffers and
datasets built from such pointers; load/unload, get_desc, execute and execute_async of a static
and a gear model with those datasets; streams created, synchronized and destroyed twice; dynamic
batch set to gears and non-gears; views of memory by ptr_to_numpy;
shapes set on datasets by tensor descs for a model with input ranges.

The oracle: no call raises, every call answers in pyACL's shape (`ret` an int, `(value, ret)`, a
bare value), a canary array that was never handed to acl is untouched (no write outside known
memory), and after the sequence the model still gives its reference outputs bit for bit.

    python -m tests.fuzz.acl_fuzz --cases 500 [--seed 1] [--steps 200] [--device cpu|sim]

runs a longer campaign; tests/fuzz/test_acl_fuzz.py runs a shorter one in the suite.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
from collections import Counter

import numpy as np

from ge.core.acl import pyacl as acl

H2D, D2H = 1, 2
INTERNAL_ERROR = 500000
GARBAGE = (None, "x", 1.5, -1, 2 ** 70, [], True)


class Case:
    def __init__(self, models: dict, seed: int, steps: int):
        self.rng = random.Random(seed)
        self.models, self.steps = models, steps
        self.dev: list[tuple[int, int]] = []  # (ptr, size), live or freed
        self.host: list[tuple[int, int]] = []
        self.arrays = [np.zeros(self.rng.choice((4, 64, 3072)), np.uint8) for _ in range(3)]
        self.buffers, self.datasets, self.streams, self.descs, self.model_ids = [], [], [0], [], []
        self.failures: list[str] = []
        self.codes: Counter = Counter()  # (call, ret): what the sequence reached

    # -- values the calls get -----------------------------------------------------------------
    def pointer(self):
        r, pools = self.rng.random(), self.dev + self.host + [(acl.util.numpy_to_ptr(a), a.nbytes)
                                                            for a in self.arrays]
        if r < 0.05:
            return self.rng.choice(GARBAGE)
        if r < 0.1:
            return self.rng.randrange(1 << 48)  # foreign
        ptr, size = self.rng.choice(pools)
        return ptr + (self.rng.choice((0, 0, 0, 1, size // 2, size, size + 8, -8)) if r < 0.5 else 0)

    def size(self, near=64):
        near = near if isinstance(near, int) and not isinstance(near, bool) and 0 < near < 1 << 20 else 64
        return self.rng.choice((0, 1, near, near, near + 1, near - 1, 1 << 40, -1, self.rng.choice(GARBAGE)))

    def pick(self, pool, garbage=True):
        if not pool or (garbage and self.rng.random() < 0.1):
            return self.rng.choice(GARBAGE + (0, 0x5A0000000))
        return self.rng.choice(pool)

    # -- the calls ----------------------------------------------------------------------------
    def op_malloc(self):
        size = self.rng.choice((1, 8, 64, 768, 3072, 4096, 1 << 40, 0, -5, "8"))
        ptr, ret = self.check("malloc", acl.rt.malloc(size, 0), pair=True)
        if ret == 0:
            self.dev.append((ptr, size))

    def op_malloc_host(self):
        size = self.rng.choice((1, 64, 3072, 0, 1 << 40))
        ptr, ret = self.check("malloc_host", acl.rt.malloc_host(size), pair=True)
        if ret == 0:
            self.host.append((ptr, size))

    def op_free(self):
        self.check("free", acl.rt.free(self.pointer()))

    def op_free_host(self):
        self.check("free_host", acl.rt.free_host(self.pointer()))

    def op_memcpy(self):
        n = self.size()
        kind = self.rng.choice((1, 2, 3, 0, 7))
        self.check("memcpy", acl.rt.memcpy(self.pointer(), self.size(n), self.pointer(), n, kind))

    def op_memcpy_async(self):
        n = self.size()
        self.check("memcpy_async", acl.rt.memcpy_async(self.pointer(), self.size(n), self.pointer(), n, 1,
                                                       self.pick(self.streams)))

    def op_memset(self):
        n = self.size()
        self.check("memset", acl.rt.memset(self.pointer(), self.size(n), self.rng.randrange(256), n))

    def op_view(self):
        view = acl.util.ptr_to_numpy(self.pointer(), (self.rng.choice((1, 4, 16, -1, 1 << 40)),),
                                     self.rng.choice((2, 11, 7, 99)))
        if view is not None and not isinstance(view, np.ndarray):
            self.failures.append(f"ptr_to_numpy gave {type(view).__name__}")
        elif view is not None and view.size and view.flags.writeable:
            view[0] = view[0]  # reading and writing the view is safe
        acl.util.ptr_to_bytes(self.pointer(), self.size(16))

    def op_buffer(self):
        b = acl.create_data_buffer(self.pointer(), self.size(768))
        if b:
            self.buffers.append(b)
        if self.rng.random() < 0.1:
            self.check("destroy_data_buffer", acl.destroy_data_buffer(self.pick(self.buffers)))

    def op_dataset(self):
        if self.rng.random() < 0.3 or not self.datasets:
            self.datasets.append(acl.mdl.create_dataset())
        for _ in range(self.rng.randrange(3)):
            self.check("add_dataset_buffer", acl.mdl.add_dataset_buffer(self.pick(self.datasets),
                                                                       self.pick(self.buffers)), pair=True)
        if self.rng.random() < 0.1:
            self.check("destroy_dataset", acl.mdl.destroy_dataset(self.pick(self.datasets)))

    def op_load(self):
        if self.rng.random() < 0.3 and self.model_ids:
            self.check("unload", acl.mdl.unload(self.pick(self.model_ids)))
            return
        path = self.rng.choice(list(self.models.values()) + ["/no/such.om"])
        model_id, ret = self.check("load_from_file", acl.mdl.load_from_file(path), pair=True)
        if ret == 0:
            self.model_ids.append(model_id)
            desc = acl.mdl.create_desc()
            self.check("get_desc", acl.mdl.get_desc(desc, model_id))
            self.descs.append(desc)

    def op_desc(self):
        desc, i = self.pick(self.descs), self.rng.choice((0, 1, 2, -1, 99))
        acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index(desc, i)
        self.check("get_input_dims", acl.mdl.get_input_dims(desc, i), pair=True)
        self.check("get_cur_output_dims", acl.mdl.get_cur_output_dims(desc, i), pair=True)
        self.check("get_input_index_by_name", acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data"),
                   pair=True)

    def op_ready(self):
        """Datasets as a model wants them (device buffers of the described sizes), now and then one
        buffer off by a little: so that executes run, and run on the edge."""
        if not self.descs:
            return
        k = self.rng.randrange(len(self.descs))
        desc = self.descs[k]
        for n, size_of in ((acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
            ds = acl.mdl.create_dataset()
            for i in range(n):
                size = size_of(desc, i)
                ptr, ret = acl.rt.malloc(max(size, 1), 0)
                if ret == 0:
                    self.dev.append((ptr, size))
                    if self.rng.random() < 0.1:
                        ptr, size = self.pointer(), self.size(size)
                    acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size))
            self.datasets.append(ds)
        ins, outs = self.datasets[-2:]
        model_id = self.model_ids[k]
        if acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [1, -1] and self.rng.random() < 0.8:  # the range model
            seq = self.rng.choice((1, 3, 8, 9))
            for i, dtype in enumerate((0, 9)):
                acl.mdl.set_dataset_tensor_desc(ins, acl.create_tensor_desc(dtype, [1, seq], 2), i)
        if self.rng.random() < 0.5:
            batch = self.rng.choice((1, 2, 4, 3))
            self.check("set_dynamic_batch_size", acl.mdl.set_dynamic_batch_size(model_id, ins, 1, batch))
        if self.rng.random() < 0.5:
            self.check("execute", acl.mdl.execute(model_id, ins, outs))
        else:
            stream = self.pick(self.streams, garbage=False)
            self.check("execute_async", acl.mdl.execute_async(model_id, ins, outs, stream))
            self.check("synchronize_stream", acl.rt.synchronize_stream(stream))

    def op_tensor_desc(self):
        """Shapes on a dataset (what a model with run-time shapes reads), right or wrong."""
        dtype = self.rng.choice((0, 9, 0, 9, 1, 99))
        dims = self.rng.choice(([1, self.rng.randrange(1, 10)], [1, 3], [], [2, 2, 2], [1, -1], [1, 1 << 40]))
        desc = acl.create_tensor_desc(dtype, dims, 2)
        self.check("set_dataset_tensor_desc", acl.mdl.set_dataset_tensor_desc(
            self.pick(self.datasets), self.pick([desc], garbage=True), self.rng.choice((0, 1, 2, -1))))
        acl.get_tensor_desc_size(desc), acl.get_tensor_desc_dim_v2(desc, self.rng.choice((0, 1, 5)))
        if self.rng.random() < 0.5:
            out = acl.mdl.get_dataset_tensor_desc(self.pick(self.datasets), self.rng.choice((0, 1)))
            acl.get_tensor_desc_num_dims(out), acl.get_tensor_desc_element_count(out)

    def op_gear(self):
        index, batch = self.rng.choice((1, 0, 2)), self.rng.choice((1, 2, 4, 3, 0))
        self.check("set_dynamic_batch_size", acl.mdl.set_dynamic_batch_size(
            self.pick(self.model_ids), self.pick(self.datasets), index, batch))

    def op_execute(self):
        args = (self.pick(self.model_ids), self.pick(self.datasets), self.pick(self.datasets))
        if self.rng.random() < 0.5:
            self.check("execute", acl.mdl.execute(*args))
        else:
            self.check("execute_async", acl.mdl.execute_async(*args, self.pick(self.streams)))

    def op_stream(self):
        r = self.rng.random()
        if r < 0.3:
            s, ret = self.check("create_stream", acl.rt.create_stream(), pair=True)
            if ret == 0:
                self.streams.append(s)
        elif r < 0.6:
            self.check("synchronize_stream", acl.rt.synchronize_stream(self.pick(self.streams)))
        else:
            self.check("destroy_stream", acl.rt.destroy_stream(self.pick(self.streams)))

    OPS = ("malloc", "malloc", "malloc_host", "free", "free_host", "memcpy", "memcpy", "memcpy_async", "memset",
           "view", "buffer", "buffer", "dataset", "dataset", "load", "desc", "gear", "execute", "execute", "stream",
           "ready", "ready", "tensor_desc", "tensor_desc")

    def check(self, name, result, pair=False):
        ok = (isinstance(result, tuple) and len(result) == 2 and isinstance(result[1], int)) if pair else \
            isinstance(result, int) and not isinstance(result, bool)
        if not ok:
            self.failures.append(f"{name} answered {result!r}")
            return (None, -1) if pair else -1
        ret = result[1] if pair else result
        self.codes[name, ret] += 1
        if ret == INTERNAL_ERROR:  # an exception acl did not expect: a gap in its checks
            self.failures.append(f"{name}: internal error: {acl.get_recent_err_msg()}")
        return result

    def run(self) -> list[str]:
        canary = np.arange(4096, dtype=np.uint8)
        before = canary.copy()
        for _ in range(self.steps):
            op = self.rng.choice(self.OPS)
            try:
                getattr(self, f"op_{op}")()
            except Exception as e:  # a pyACL call raised (the oracle forbids it)
                self.failures.append(f"{op} raised {type(e).__name__}: {e}")
        for s in self.streams[1:]:
            acl.rt.synchronize_stream(s)
            acl.rt.destroy_stream(s)
        for m in self.model_ids:
            acl.mdl.unload(m)
        for ptr, _ in self.dev:
            acl.rt.free(ptr)
        for ptr, _ in self.host:
            acl.rt.free_host(ptr)
        if not np.array_equal(canary, before):
            self.failures.append("memory never handed to acl was written")
        return self.failures


def reference_run(path: str, x: np.ndarray) -> np.ndarray:
    """The static model run cleanly through pyACL: (1, 5) logits."""
    model_id, ret = acl.mdl.load_from_file(path)
    desc = acl.mdl.create_desc()
    acl.mdl.get_desc(desc, model_id)
    ins, outs, ptrs = acl.mdl.create_dataset(), acl.mdl.create_dataset(), []
    for ds, n, size_of in ((ins, acl.mdl.get_num_inputs(desc), acl.mdl.get_input_size_by_index),
                           (outs, acl.mdl.get_num_outputs(desc), acl.mdl.get_output_size_by_index)):
        for i in range(n):
            ptr, _ = acl.rt.malloc(size_of(desc, i), 0)
            acl.mdl.add_dataset_buffer(ds, acl.create_data_buffer(ptr, size_of(desc, i)))
            ptrs.append(ptr)
    acl.rt.memcpy(ptrs[0], x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, H2D)
    assert acl.mdl.execute(model_id, ins, outs) == 0, acl.get_recent_err_msg()
    y = np.zeros((1, 5), np.float32)
    acl.rt.memcpy(acl.util.numpy_to_ptr(y), y.nbytes, ptrs[1], y.nbytes, D2H)
    for p in ptrs:
        acl.rt.free(p)
    acl.mdl.unload(model_id)
    return y


def campaign(models: dict, cases: int, seed: int = 0, steps: int = 150, device: str = "cpu",
             codes: Counter | None = None) -> list[str]:
    """Run `cases` sequences on a fresh context each; the failures, each naming its case. `codes`
    counts the (call, ret) pairs the sequences reached."""
    os.environ["GE_ACL_DEVICE"] = device
    acl.init()
    x = np.random.default_rng(seed).standard_normal((1, 3, 8, 8)).astype(np.float32)
    failures = []
    try:
        assert acl.rt.set_device(0) == 0
        want = reference_run(models["static"], x)
        for n in range(cases):
            ctx, _ = acl.rt.create_context(0)
            case = Case(models, seed * 100003 + n, steps)
            failures += [f"case {seed}:{n}: {f}" for f in case.run()]
            if codes is not None:
                codes.update(case.codes)
            acl.rt.destroy_context(ctx)
            acl.rt.set_device(0)
            if not np.array_equal(reference_run(models["static"], x), want):
                failures.append(f"case {seed}:{n}: the model's outputs changed after the sequence")
        acl.rt.reset_device(0)
    finally:
        acl.finalize()
    return failures


def seed_models(folder: str) -> dict:
    """The static and the gear model of tests/core/acl (a small CNN) and its range model, compiled into
    `folder`."""
    import onnx

    from ge.core import api
    from tests.core.acl.conftest import conv_net, positions_pair
    onnx.save(conv_net(), os.path.join(folder, "convnet.onnx"))
    onnx.save(positions_pair(), os.path.join(folder, "two.onnx"))
    src = os.path.join(folder, "convnet.onnx")
    return {"static": api.atc(src, os.path.join(folder, "static"), input_shape="x:1,3,8,8").om_path,
            "gears": api.atc(src, os.path.join(folder, "gears"), input_shape="x:-1,3,8,8",
                             dynamic_batch_size="1,2,4").om_path,
            "ranges": api.atc(os.path.join(folder, "two.onnx"), os.path.join(folder, "ranges"),
                              input_shape="a:1,1~8;b:1,1~8").om_path}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--device", choices=("cpu", "sim"), default="cpu")
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        failures = campaign(seed_models(folder), a.cases, a.seed, a.steps, a.device)
    for f in failures:
        print(f)
    print(f"{a.cases} sequences of {a.steps} calls: {len(failures)} failures", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
