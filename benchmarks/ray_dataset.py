"""Dataset inference locally vs on Ray (issue 21): images/s of `api.run_dataset` and of
`run_dataset_on_ray` with 1 and 2 actors over the same folder, and Ray's fixed cost (starting a
local instance, starting the actors), so a user can see when a cluster pays.

    python benchmarks/ray_dataset.py [--images 64] [--model mobilenetv2_style]

On one machine Ray only adds cost for a small model (each actor is a process that loads the OM,
samples travel through Ray's object store); it pays once the samples spread over several nodes.
To use a cluster: `ray start --head` on one node and `ray start --address=HEAD:6379` on the others,
then `ge run --model M.om --input DIR --output OUT --ray HEAD:6379` from any of them; the OM, its
weight folder and DIR must be readable at the same paths on every node (a shared file system).
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import ray

from ge.core import api
from ge.core.acl.ray_dataset import run_dataset_on_ray

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from samples_vs_onnxruntime import load_samples  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--model", default="mobilenetv2_style")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model = getattr(load_samples(), args.model)()
        onnx.save(model, os.path.join(tmp, "m.onnx"))
        om = api.atc(os.path.join(tmp, "m.onnx"), os.path.join(tmp, "m")).om_path
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        data = os.path.join(tmp, "images")
        os.makedirs(data)
        rng = np.random.default_rng(0)
        for i in range(args.images):
            np.save(os.path.join(data, f"img{i:05d}.npy"), rng.standard_normal(shape).astype(np.float32))

        model_id = api.load_from_file(om)
        local = api.run_dataset(model_id, [data], os.path.join(tmp, "local"))
        api.unload(model_id)
        t0 = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray_start = time.perf_counter() - t0
        rows = [("local dataset mode", local["throughput"], f"({local['seconds']:.1f} s)")]
        for actors in (1, 2):
            r = run_dataset_on_ray(om, [data], os.path.join(tmp, f"ray{actors}"), actors=actors)
            per_actor = ", ".join(f"{a['throughput']:.0f}" for a in r["actors"].values())
            rows.append((f"Ray, {actors} actor{'s' * (actors > 1)}", r["throughput"],
                         f"({r['seconds']:.1f} s with the actors' start; compute-only images/s per actor: {per_actor})"))
        ray.shutdown()
    print(f"{args.model}, {args.images} images of {shape}; Ray start (local instance): {ray_start:.1f} s")
    for name, throughput, note in rows:
        print(f"  {name:22s} {throughput:8.1f} images/s  {note}")


if __name__ == "__main__":
    main()
