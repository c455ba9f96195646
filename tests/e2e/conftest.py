"""Sample models (built by samples/build_samples.py) compiled with ge and checked against onnxruntime."""
import importlib.util
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="session")
def samples():
    spec = importlib.util.spec_from_file_location("build_samples", os.path.join(ROOT, "samples", "build_samples.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def onnxruntime_outputs(model_path, feeds):
    session = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def make_feeds(model: onnx.ModelProto, shapes: dict, seed=0) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = shapes.get(vi.name) or [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            if "mask" in vi.name:
                mask = np.ones(shape, np.int64)
                mask[..., shape[-1] * 3 // 4:] = 0  # padded tail, as a real batch has
                feeds[vi.name] = mask
            else:
                feeds[vi.name] = rng.integers(0, 100, shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds
