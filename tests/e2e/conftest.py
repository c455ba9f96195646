"""Sample models (built by samples/build_samples.py) compiled with ge and checked against onnxruntime."""
import importlib.util
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from ge.core import api

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_sample_script(name: str):
    """samples/<name>.py as a module (the samples folder is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "samples", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def samples():
    return load_sample_script("build_samples")


def run_om(om_path, device, feeds):
    """Load the OM on `device`, execute it once on `feeds`, unload it: its outputs."""
    model_id = api.load_from_file(om_path, device)
    try:
        return api.execute(model_id, feeds)
    finally:
        api.unload(model_id)


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
