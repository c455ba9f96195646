"""Quantized samples: build_samples.py's models quantized by onnxruntime's own tool, the way users
deploy them (onnxruntime is needed here only, to build the samples; ge runs them without it).

    python samples/quantize_samples.py --out samples/models      # tiny_cnn_int8_qdq.onnx (+ its input)

Forms (each a function returning the quantized ModelProto):
  qdq(model, calibration)        quantize_static, QuantFormat.QDQ, int8 activations and per-channel int8
                                 weights (onnxruntime's defaults): DequantizeLinear/QuantizeLinear around
                                 float ops, which ge fuses into quantized kernels (core/passes/fuse_qdq.py)
  qoperator(model, calibration)  quantize_static, QuantFormat.QOperator: QLinearConv, QLinearAdd, QGemm...
  dynamic(model)                 quantize_dynamic: int8 weights, activations quantized at run time
                                 (DynamicQuantizeLinear + MatMulInteger), as for BERT
`calibration` is a list of feeds (dicts of arrays) the activation ranges are measured on.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent


def _build_samples():
    spec = importlib.util.spec_from_file_location("build_samples", HERE / "build_samples.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _quiet_root_logger():
    """onnxruntime's quantizer warns on the root logger for every 1-D weight it cannot quantize per
    channel (LayerNorm's: 'Axis 1 is out-of-range'), which it then quantizes per tensor, as intended."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _static(model: onnx.ModelProto, calibration: list[dict], fmt: str) -> onnx.ModelProto:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.feeds = iter(calibration)

        def get_next(self):
            return next(self.feeds, None)

    with tempfile.TemporaryDirectory() as tmp:
        src, pre, out = (os.path.join(tmp, n) for n in ("model.onnx", "pre.onnx", "int8.onnx"))
        onnx.save(model, src)
        quant_pre_process(src, pre, skip_symbolic_shape=True)  # BatchNormalization into Conv, as recommended
        with _quiet_root_logger():
            quantize_static(pre, out, Reader(), quant_format=QuantFormat.QDQ if fmt == "qdq" else QuantFormat.QOperator,
                            per_channel=True)
        return onnx.load(out)


def qdq(model: onnx.ModelProto, calibration: list[dict]) -> onnx.ModelProto:
    return _static(model, calibration, "qdq")


def qoperator(model: onnx.ModelProto, calibration: list[dict]) -> onnx.ModelProto:
    return _static(model, calibration, "qoperator")


def dynamic(model: onnx.ModelProto) -> onnx.ModelProto:
    from onnxruntime.quantization import quantize_dynamic
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "model.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(model, src)
        quantize_dynamic(src, out)
        return onnx.load(out)


def calibration_images(shape: Sequence[int], n: int = 4, seed: int = 0, name: str = "image") -> list[dict]:
    """n seeded N(0, 1) images: the samples' own input distribution."""
    return [{name: np.random.default_rng(seed + i).standard_normal(shape).astype(np.float32)} for i in range(n)]


def tiny_cnn_int8_qdq(seed: int = 0) -> onnx.ModelProto:
    """build_samples.tiny_cnn, static int8 in QDQ form (per-channel weights)."""
    return qdq(_build_samples().tiny_cnn(seed=seed), calibration_images((1, 3, 32, 32), seed=seed))


BUILDERS = {"tiny_cnn_int8_qdq": tiny_cnn_int8_qdq}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, build in BUILDERS.items():
        model = build(seed=args.seed)
        path = args.out / f"{name}.onnx"
        onnx.save(model, str(path))
        np.save(args.out / f"{name}_input.npy", calibration_images((1, 3, 32, 32), n=1, seed=args.seed + 100)[0]["image"])
        print(f"{path}  {path.stat().st_size / 1e3:.1f} KB  {len(model.graph.node)} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
