"""ais_bench's performance summary: the lines it logs on stdout after a run and the
`<output>/<dirname>_summary.json` it writes beside the outputs' folder (the files each sample
read and wrote, under "filesinfo")."""
from __future__ import annotations

import json
import os

from ...runtime.throughput import percentiles
from ....formats.tensors import write_text
from .log import logger

PERCENTILE = 99


class Summary:
    def __init__(self):
        self.infodict: dict = {"filesinfo": {}}
        self.npu_compute_time_list: list[float] = []
        self.h2d_latency_list: list[float] = []
        self.d2h_latency_list: list[float] = []
        self.batchsizes: list[int] = []  # per run, when each run's shape says it (auto shape/dims modes)

    def add_sample(self, sample_id: int, infiles, outfiles) -> None:
        self.infodict["filesinfo"][sample_id] = {"infiles": list(infiles), "outfiles": list(outfiles)}

    def report(self, batchsize, output_prefix: str | None, args: list[str], display_all_summary: bool = False) -> dict:
        """Log the summary; write `<output_prefix>_summary.json` when outputs are written."""
        if self.batchsizes:
            batchsize = sum(self.batchsizes) / len(self.batchsizes)
        npu, h2d, d2h = (_stats(v) for v in (self.npu_compute_time_list, self.h2d_latency_list, self.d2h_latency_list))
        throughput = 1000 * batchsize / npu["mean"] if npu["mean"] else 0
        self.infodict.update(args=args, NPU_compute_time=npu, H2D_latency=h2d, D2H_latency=d2h,
                             npu_compute_time_list=[float(v) for v in self.npu_compute_time_list],
                             throughput=throughput, pid=os.getpid())
        logger.info("-----------------Performance Summary------------------")
        rows = [("H2D_latency", h2d), ("NPU_compute_time", npu), ("D2H_latency", d2h)]
        for name, s in rows if display_all_summary else rows[1:2]:
            logger.info(f"{name} (ms): min = {s['min']}, max = {s['max']}, mean = {s['mean']}, median = {s['median']}, "
                        f"percentile({PERCENTILE}%) = {s[f'percentile({PERCENTILE}%)']}")
        logger.info(f"throughput 1000*batchsize.mean({batchsize})/NPU_compute_time.mean({npu['mean']}): {throughput}")
        logger.info("------------------------------------------------------")
        if output_prefix is not None:
            write_text(output_prefix + "_summary.json", json.dumps(self.infodict))
        return self.infodict


def _stats(values: list[float]) -> dict:
    """min, max, mean, median and percentile(99%) as ais_bench names them (all 0 for no values)."""
    s = percentiles(values) if len(values) else dict.fromkeys(("min", "max", "mean", "median", "p99"), 0.0)
    s[f"percentile({PERCENTILE}%)"] = s.pop("p99")
    return s
