"""`python3 -m ais_bench ...`: ais_bench's command line on ge, its options parsed as its argparse
parses them (unknown options and bad values: usage and exit 2), run as its infer process runs
them: an InferSession on device `--device`, the gear or shape of --dymBatch/--dymHW/--dymDims/
--dymShape, warm-up runs, then every execution of the inputs (files.py pairs and batches them,
dataset.py's batching), outputs in `<output>/<output_dirname or %Y_%m_%d-%H_%M_%S>/` and the
performance summary on stdout (summary.py). An error is one "[ERROR] ..." line on stderr and exit 1.
docs/ais_bench.md lists every option.
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import multiprocessing
import os
import sys
import time
import traceback
from concurrent.futures import ProcessPoolExecutor

from ...model.errors import GeError
from ...model.ge_model import TensorDesc
from ...runtime.device import MAX_DEVICES
from .. import dataset, inference, profiling
from ..aipp import DYNAMIC_AIPP_INPUT
from ....formats.tensors import write_text
from . import files
from .interface import InferSession, MemorySummary
from .log import logger
from .summary import Summary

TIME_FORMAT = "%Y_%m_%d-%H_%M_%S"  # ais_bench's output folder without --output_dirname
MAX_DEVICE_ID = MAX_DEVICES - 1  # ge's devices (ais_bench says 255): a larger id could never be set


def str2bool(v):
    if isinstance(v, bool):
        return v
    if v.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if v.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError("Boolean value expected true, 1, false, 0 with case insensitive.")


def check_positive_integer(value):
    ivalue = int(value)
    if ivalue <= 0:
        raise argparse.ArgumentTypeError(f"{value} is an invalid positive int value")
    return ivalue


def check_nonnegative_integer(value):
    ivalue = int(value)
    if ivalue < 0:
        raise argparse.ArgumentTypeError(f"{value} is an invalid nonnegative int value")
    return ivalue


def check_device_range_valid(value):
    ids = [int(v) for v in value.split(",")]
    for i in ids:
        if not 0 <= i <= MAX_DEVICE_ID:
            where = f"{i} of device:{value}" if "," in value else f"device:{value}"
            raise argparse.ArgumentTypeError(f"{where} is invalid. valid value range is [0, {MAX_DEVICE_ID}]")
    return ids if "," in value else ids[0]


def parser() -> argparse.ArgumentParser:
    """ais_bench's options, their names, short forms, types, choices and defaults."""
    p = argparse.ArgumentParser()
    add = p.add_argument
    add("--model", "-m", required=True, help="the path of the om model")
    add("--input", "-i", default=None, help="input file or dir")
    add("--output", "-o", default=None, help="inference data output path: results go to a subdirectory named by "
        "the current date under it")
    add("--output_dirname", type=str, default=None, help="the output subdirectory's name (with --output)")
    add("--outfmt", default="BIN", choices=["NPY", "BIN", "TXT"], help="output file format (NPY or BIN or TXT)")
    add("--loop", "-l", type=check_positive_integer, default=1, help="the round of the PureInfer.")
    add("--debug", type=str2bool, default=False, help="debug switch, print model information")
    add("--device", "-d", type=check_device_range_valid, default=0,
        help=f"the NPU device ID to use. valid value range is [0, {MAX_DEVICE_ID}]")
    add("--dymBatch", dest="dym_batch", type=int, default=0, help="dynamic batch size param, such as --dymBatch 2")
    add("--dymHW", dest="dym_hw", type=str, default=None, help='dynamic image size param, such as --dymHW "300,500"')
    add("--dymDims", dest="dym_dims", type=str, default=None,
        help='dynamic dims param, such as --dymDims "data:1,600;img_info:1,600"')
    add("--dymShape", "--dym-shape", dest="dym_shape", type=str, default=None,
        help='dynamic shape param, such as --dymShape "data:1,600;img_info:1,600"')
    add("--outputSize", dest="output_size", type=str, default=None, help="output size for dynamic shape mode")
    add("--auto_set_dymshape_mode", type=str2bool, default=False, help="auto_set_dymshape_mode")
    add("--auto_set_dymdims_mode", type=str2bool, default=False, help="auto_set_dymdims_mode")
    add("--batchsize", type=check_positive_integer, default=None, help="batch size of input tensor")
    add("--pure_data_type", type=str, default="zero", choices=["zero", "random"],
        help="null data type for pure inference(zero or random)")
    add("--profiler", type=str2bool, default=False, help="profiler switch")
    add("--dump", type=str2bool, default=False, help="dump switch")
    add("--acl_json_path", type=str, default=None, help="acl json path for profiling or dump")
    add("--output_batchsize_axis", type=check_nonnegative_integer, default=0,
        help="splitting axis number when outputing tensor results, such as --output_batchsize_axis 1")
    add("--run_mode", type=str, default="array", choices=["array", "files", "tensor", "full"], help="run mode")
    add("--display_all_summary", type=str2bool, default=False, help="display all summary include h2d d2h info")
    add("--warmup_count", "--warmup-count", type=check_nonnegative_integer, default=1,
        help="warmup count before inference")
    add("--dymShape_range", dest="dym_shape_range", type=str, default=None,
        help='dynamic shape range, such as --dymShape_range "data:1,600~700;img_info:1,600-700"')
    add("--aipp_config", type=str, default=None, help="file type: .config, to set actual aipp params before infer")
    add("--energy_consumption", type=str2bool, default=False, help="obtain power consumption data for model inference")
    add("--npu_id", type=check_device_range_valid, default=0, help=f"the NPU ID to use. valid value range is [0, {MAX_DEVICE_ID}]")
    add("--backend", type=str, default=None, help="backend trtexec")
    add("--perf", type=str2bool, default=False, help="perf switch")
    add("--pipeline", type=str2bool, default=False, help="pipeline switch")
    add("--profiler_rename", type=str2bool, default=True, help="profiler rename switch")
    add("--dump_npy", type=str2bool, default=False, help="dump data convert to npy")
    add("--divide_input", type=str2bool, default=False,
        help="input datas need to be divided to match multi devices or not, --device should be list, default False")
    add("--thread", "--threads", dest="thread", type=check_positive_integer, default=1,
        help="number of thread for computing. need to set --pipeline when setting thread number to be more than one.")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)  # usage and exit 2, as ais_bench's argparse
    try:
        check(args)
        if args.dym_shape_range and not args.dym_shape:
            shape_range_run(args)
        elif isinstance(args.device, list):
            multidevice_run(args)
        else:
            infer_run(args)
    except GeError as e:
        if args.debug:
            traceback.print_exc()
        print(f"[ERROR] {e}", file=sys.stderr)
        return 1
    return 0


def check(args) -> None:
    """ais_bench's own checks of option pairs, then what ge refuses, each with its reason."""
    if args.profiler and args.dump:
        raise GeError("parameter --profiler cannot be true at the same time as parameter --dump, please check them!")
    if (args.profiler or args.dump) and args.output is None:
        raise GeError("when dump or profiler, miss output path, please check them!")
    if args.output is None and args.output_dirname is not None:
        raise GeError("parameter --output_dirname cann't be used alone. Please use it together with the parameter "
                      "--output!")
    if args.thread > 1 and not args.pipeline:
        raise GeError("need to set --pipeline when setting thread number to be more than one.")
    for name, why in inference.REFUSED.items():
        if getattr(args, name):
            raise GeError(why.format(getattr(args, name)))
    if args.profiler and args.warmup_count and args.input is not None:
        logger.info("profiler mode with input change warmup_count to 0")
        args.warmup_count = 0


def init_inference_session(args) -> InferSession:
    """The session with the gear or shape of the options, --batchsize found, --outputSize set."""
    session = InferSession(args.device, args.model, None, args.debug, args.loop)
    logger.info(f"load model {args.model} success")
    logger.info("create model description success")
    if args.dym_batch:
        session.set_dynamic_batchsize(args.dym_batch)
    elif args.dym_hw is not None:
        try:
            h, w = (int(v) for v in args.dym_hw.split(","))
        except ValueError:
            raise GeError(f"--dymHW '{args.dym_hw}' is not H,W") from None
        session.set_dynamic_hw(h, w)
    elif args.dym_dims is not None:
        session.set_dynamic_dims(args.dym_dims)
    elif args.dym_shape is not None:
        session.set_dynamic_shape(args.dym_shape)
    else:
        session.set_staticbatch()
    if args.batchsize is None:
        args.batchsize = get_batchsize(session, args)
        logger.info(f"try get model batchsize:{args.batchsize}")
    if args.aipp_config is not None:
        session.check_dym_aipp_input_exist()
        session.load_aipp_config_file(args.aipp_config, args.batchsize)
    if args.output_size is not None:
        session.set_custom_outsize(inference.parse_output_sizes(args.output_size))
    logger.debug(f"session info:{session.session}")
    return session


def get_batchsize(session: InferSession, args) -> int:
    """ais_bench's: the first input's dim 0, or what --dymBatch, --dymDims or --dymShape gives it."""
    first = session.get_inputs()[0]
    batch = first.shape[0] if first.shape else 1
    if args.dym_batch:
        return args.dym_batch
    spec = args.dym_dims if args.dym_dims is not None else args.dym_shape
    for item in (spec or "").split(";"):
        name, _, dims = item.rpartition(":")
        if name == first.name and dims:
            batch = int(dims.split(",")[0])
    return batch


def infer_run(args) -> float:
    """One device's run; its throughput."""
    logger.setLevel(logging.DEBUG if args.debug else logging.INFO)
    session = init_inference_session(args)
    try:
        output_prefix = None
        if args.output is not None:
            output_prefix = inference.output_folder(args.output, args.output_dirname, time_format=TIME_FORMAT)
            logger.info(f"output path:{output_prefix}")
        observe = _Observer(session, *inference.profiler_and_dump(args.output or ".", args.profiler, args.dump,
                                                                  args.acl_json_path))
        summary = Summary()
        if args.input:
            _files_run(session, args, summary, output_prefix, observe)
        else:
            _pure_run(session, args, summary, output_prefix, observe)
        observe.finish()
        summary.npu_compute_time_list = list(session.summary().exec_time_list)
        summary.h2d_latency_list = MemorySummary.get_h2d_time_list()
        summary.d2h_latency_list = MemorySummary.get_d2h_time_list()
        return summary.report(args.batchsize, output_prefix, sys.argv, args.display_all_summary)["throughput"]
    finally:
        model_id = session.session.model_id
        session.free_resource()
        logger.info(f"unload model success, model Id is {model_id}")


def _warmup(session: InferSession, args, inputs, auto) -> None:
    session.set_loop_count(1)
    for _ in range(args.warmup_count):
        auto(inputs)
        session.run(inputs, out_array=True)
    session.set_loop_count(args.loop)
    session.reset_summaryinfo()
    MemorySummary.reset()
    logger.info(f"warm up {args.warmup_count} done")


class _Observer:
    """--profiler / --dump (or an acl.json's): after each execution, a traced run of its inputs
    (one Chrome trace, PROFILER/<om>_trace.json) or every op's outputs (DUMP/<stem>/)."""

    def __init__(self, session: InferSession, profiler_dir: str | None, dump_dir: str | None):
        self.model_id = session.session.model_id
        self.om_name = os.path.splitext(os.path.basename(session.model_path))[0]
        self.profiler_dir, self.dump_dir = profiler_dir, dump_dir
        self.events: list[dict] = []
        self.origin = time.perf_counter()

    def __call__(self, inputs, stem: str) -> None:
        if self.profiler_dir:
            trace = profiling.profile(self.model_id, inputs, runs=1, warmup=0, origin=self.origin)
            self.events += [dict(e, args=dict(e["args"], sample=stem)) for e in trace["traceEvents"] if e["ph"] == "X"]
        if self.dump_dir:
            profiling.dump(self.model_id, inputs, os.path.join(self.dump_dir, stem))

    def finish(self) -> None:
        if self.profiler_dir:
            path = os.path.join(self.profiler_dir, f"{self.om_name}_trace.json")
            write_text(path, json.dumps({"traceEvents": profiling.trace_meta() + self.events}) + "\n")
            logger.info(f"profiler trace:{path}")
        if self.dump_dir:
            logger.info(f"dump path:{self.dump_dir}")


def _pure_run(session: InferSession, args, summary: Summary, output_prefix, observe: _Observer) -> None:
    """No --input: zeros or random data of the inputs' shapes (ais_bench's pure inference)."""
    descs, shapes = _fed(session)
    unknown = [d.name for d, s in zip(descs, shapes) if any(x < 0 for x in s)]
    if unknown:
        raise GeError(f"input(s) {', '.join(unknown)} have dynamic dims and no --input: give their shapes "
                      "(--dymBatch, --dymHW, --dymDims or --dymShape) or input files")
    inputs = inference.generated_inputs([TensorDesc(d.name, d.datatype.name, s, 0) for d, s in zip(descs, shapes)],
                                        args.pure_data_type)
    _warmup(session, args, inputs, lambda _: None)
    outputs = session.run(inputs, out_array=True)
    observe(inputs, files.PURE_INFER_STEM)
    if output_prefix is not None:
        written = files.write_outputs(outputs, output_prefix, files.PURE_INFER_STEM, args.outfmt)
        summary.add_sample(0, [files.PURE_INFER_STEM] * len(descs), written)


def _files_run(session: InferSession, args, summary: Summary, output_prefix, observe: _Observer) -> None:
    """Every execution of the --input files, outputs split back per sample (the padding's dropped)."""
    descs, shapes = _fed(session)
    samples = files.samples(args.input.split(","), [d.name for d in descs])
    auto = args.auto_set_dymshape_mode or args.auto_set_dymdims_mode
    known = not auto and all(x >= 0 for s in shapes for x in s)
    read_as = [TensorDesc(d.name, d.datatype.name, s, 0) for d, s in zip(descs, shapes)] if known else None
    model_inputs = [d for d in session.session.model.inputs if d.name in {x.name for x in descs}]
    per_batch, groups, load = dataset.batched(model_inputs, samples, read_as)

    def set_shape(inputs) -> None:  # --auto_set_dymshape_mode / --auto_set_dymdims_mode: each run its own shape
        if not auto:
            return
        spec = ";".join(f"{d.name}:{','.join(map(str, x.shape))}" for d, x in zip(descs, inputs))
        (session.set_dynamic_shape if args.auto_set_dymshape_mode else session.set_dynamic_dims)(spec)

    _warmup(session, args, load(groups[0]), set_shape)
    for g, group in enumerate(groups):
        inputs = load(group)
        set_shape(inputs)
        if auto:
            summary.batchsizes.append(inputs[0].shape[0] if inputs[0].ndim else 1)
        outputs = session.run(inputs, out_array=True)
        observe(inputs, group[0].stem)
        if output_prefix is None:
            continue
        for k, per_sample in enumerate(dataset.split_outputs(outputs, len(group), per_batch,
                                                             args.output_batchsize_axis)):
            sample = group[k]
            written = files.write_outputs(per_sample, output_prefix, sample.stem, args.outfmt)
            summary.add_sample(g * per_batch + k, sample.files, written)


def _fed(session: InferSession) -> tuple[list, list]:
    """The inputs the run feeds and their shapes: all but the dynamic AIPP input once --aipp_config set it."""
    pairs = [(d, s) for d, s in zip(session.get_inputs(), session.session.input_shapes())
             if not (session.session.aipp_info_set and d.name == DYNAMIC_AIPP_INPUT)]
    return [d for d, _ in pairs], [s for _, s in pairs]


def shape_range_run(args) -> None:
    """--dymShape_range: every shape it names timed with generated inputs; the best one named."""
    session = InferSession(args.device, args.model, None, args.debug, args.loop)
    try:
        rows = inference.time_shapes(session.session.model_id, args.dym_shape_range, args.loop, args.warmup_count,
                                     args.pure_data_type)
    finally:
        session.free_resource()
    for r in rows:
        logger.info(f"dymShape:{r['shape']} NPU_compute_time.mean:{r['mean_ms']} throughput:{r['throughput']}")
    best = max(rows, key=lambda r: r["throughput"])
    logger.info(f"the best shape:{best['shape']} throughput:{best['throughput']}")


def multidevice_run(args) -> None:
    """--device 0,1,...: a process per device, each on its share of the input files, its outputs in
    <output>/<dirname>/device<N>/ (ais_bench's split and layout); every device's throughput and their sum."""
    devices = args.device
    splits = _split_inputs(args, len(devices)) if args.input else [None] * len(devices)
    dirname = args.output_dirname or time.strftime(TIME_FORMAT)
    jobs = [argparse.Namespace(**{**vars(args), "device": d, "input": splits[i],
                                  "output_dirname": os.path.join(dirname, f"device{d}")})
            for i, d in enumerate(devices)]
    logger.info(f"multidevice:{devices} run begin")
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        results = list(pool.map(_timed_run, jobs))
    for i, (throughput, start, end) in enumerate(results):
        print(f"i:{i} device_{devices[i]} throughput:{throughput} start_time:{start} end_time:{end}")
    logger.info(f"summary throughput:{sum(r[0] for r in results)}")


def _timed_run(args) -> tuple[float, float, float]:
    start = time.time()
    return infer_run(args), start, time.time()


def _split_inputs(args, jobs: int) -> list[str]:
    """ais_bench's split of --input over `jobs` devices: each input's files in `jobs` consecutive
    parts, device j taking part j of every input (as a comma list of files)."""
    inputs = args.input.split(",")
    listed = inputs if os.path.isfile(inputs[0]) else [f for d in inputs for f in files.folder_files(d)]
    session = InferSession(args.device[0], args.model, None, args.debug, 1)
    n = len(session.get_inputs())
    session.free_resource()
    per_input = math.ceil(len(listed) / n)
    shares: list[list[str]] = [[] for _ in range(jobs)]
    for k in range(0, len(listed), per_input):
        chunk = listed[k:k + per_input]
        size = math.ceil(len(chunk) / jobs)
        for j in range(jobs):
            shares[j] += chunk[j * size:(j + 1) * size]
    return [",".join(share) for share in shares]
