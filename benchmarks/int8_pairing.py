"""The twinned panels' pairing alone (csrc/qgemm.c's ge_qgemm_twin, which a load runs per int8 weight on
AVX2 builds without VNNI) on BERT-small int8's weights (vs_onnxruntime.py's bert_small_int8 row), per shape:

    python benchmarks/int8_pairing.py [--level v3] [--rounds 20]

Each MatMulInteger's weights packed as a load packs them (int8_native.pack_product), then Native.qtwin on
those panels timed alone, one thread, CPU time: per shape the median over weights of each weight's
fastest round, the sum over the model, and the quads left without a twin.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import vs_onnxruntime as vs  # noqa: E402


class PanelsSeen:
    """A Native whose qtwin keeps the panels it is given (pack_product's, before the pairing)."""

    def __init__(self, nat):
        self.nat, self.panels = nat, []

    def __getattr__(self, name):
        return getattr(self.nat, name)

    def qtwin(self, bp, k, n):
        self.panels.append((bp, k, n))
        return self.nat.qtwin(bp, k, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--level", default="v3", help="ge's native level (one with the twinned tile: v3, v4)")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    import numpy as np
    from onnx import numpy_helper
    from ge.core.kernels.native.loader import load_level
    from ge.core.kernels.ops.int8_native import pack_product
    nat = load_level(args.level)
    if not nat.qgemm_has_twins:
        parser.error(f"--level {args.level}: a build without the twinned tile")
    (row,) = [r for r in vs.full_rows() if r.key == "bert_small_int8"]
    model = vs.build_model(row, vs.load_samples())
    consts = {t.name: t for t in model.graph.initializer}
    seen = PanelsSeen(nat)
    for node in model.graph.node:
        if node.op_type == "MatMulInteger" and node.input[1] in consts:
            pack_product(seen, numpy_helper.to_array(consts[node.input[1]]))
    times, alone = {}, 0
    for bp, k, n in seen.panels:
        best = float("inf")
        for _ in range(args.rounds):
            t0 = time.thread_time()
            _, _, slot_q = nat.qtwin(bp, k, n)
            best = min(best, time.thread_time() - t0)
        times.setdefault(f"{k}x{n}", []).append(best)
        alone += int(np.count_nonzero(slot_q[0::2] == slot_q[1::2]))
    print(f"python benchmarks/int8_pairing.py --level {args.level} --rounds {args.rounds}: Native.qtwin, "
          f"CPU time, each weight's fastest round; CPU: {vs.cpu_name()}")
    for shape, ts in times.items():
        print(f"  {shape:<9} {len(ts):>2} weights  {1e3 * statistics.median(ts):.3f} ms a weight")
    total = sum(sum(ts) for ts in times.values())
    print(f"  all       {len(seen.panels):>2} weights  {1e3 * total:.2f} ms; quads alone: {alone}")


if __name__ == "__main__":
    main()
