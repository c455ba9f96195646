"""An OM loaded from a file on cpu runs on its weights in place: the weight partition the reader
maps is the WEIGHT allocation (no device copy), the pages of packed weights leave the resident set,
and results are those of the sim device, which copies. Bytes and sim loads copy as before."""
from __future__ import annotations

import mmap
import os

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.model.ge_model import WEIGHT_ID
from ge.core.runtime.device import get_device


@pytest.fixture(scope="module")
def om(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mapped")
    model = samples.resnet50_style(image=32, width=8, blocks=(1, 1, 1, 1), classes=10)
    path = os.path.join(tmp, "r.onnx")
    onnx.save(model, path)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    return api.atc(path, os.path.join(tmp, "r")).om_path, x


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_cpu_runs_on_the_mapped_weights(om, backend, default_backend):
    path, x = om
    default_backend(backend)
    cpu = get_device("cpu")
    before = cpu.in_use
    model_id = api.load_from_file(path, "cpu")
    model = api.model(model_id)
    try:
        assert model.mapped_weights is not None
        assert cpu.in_use - before == model.default_context.device_bytes  # no allocation for the weights
        weights = cpu.bytes_at(model.weight_bases[WEIGHT_ID], model.weight_size)
        assert not weights.flags.writeable  # a read-only file mapping
        first = api.execute(model_id, [x])[0]
        model.mapped_weights.release()  # drop every page: the next run reads them from the file again
        again = api.execute(model_id, [x])[0]
        np.testing.assert_array_equal(first, again)
        sim_id = api.load_from_file(path, "sim")
        try:
            assert api.model(sim_id).mapped_weights is None
            np.testing.assert_array_equal(api.execute(sim_id, [x])[0], first)
        finally:
            api.unload(sim_id)
    finally:
        api.unload(model_id)
    assert cpu.in_use == before
    with pytest.raises(Exception):  # the binding went with the model
        cpu.bytes_at(model.weight_bases[WEIGHT_ID], model.weight_size)


def test_bytes_are_copied_unless_aligned_and_results_agree(om):
    path, x = om
    with open(path, "rb") as f:
        data = f.read()
    expected = None
    for source in (path, data):
        model_id = api.load_from_file(source, "cpu") if source is path else api.load_from_mem(source, "cpu")
        try:
            y = api.execute(model_id, [x])[0]
            expected = y if expected is None else expected
            np.testing.assert_array_equal(y, expected)
        finally:
            api.unload(model_id)


def test_release_keeps_the_bytes(tmp_path):
    """madvise(DONTNEED) on a read-only file mapping only drops pages: they read back unchanged."""
    from ge.core.runtime.mapped_weights import PAGE, MappedWeights
    path = tmp_path / "w.bin"
    payload = np.random.default_rng(1).integers(0, 255, 8 * PAGE + 100, dtype=np.uint8)
    path.write_bytes(b"\0" * 64 + payload.tobytes())
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    data = memoryview(mm)[64:]
    cpu = get_device("cpu")
    assert MappedWeights.usable(cpu, data)
    assert not MappedWeights.usable(cpu, memoryview(bytearray(payload.tobytes())))  # writeable: copied
    w = MappedWeights(cpu, data)
    try:
        before = cpu.bytes_at(w.addr, payload.nbytes).copy()
        w.release(10, 5 * PAGE)
        w.release()
        np.testing.assert_array_equal(cpu.bytes_at(w.addr, payload.nbytes), before)
        np.testing.assert_array_equal(before, payload)
    finally:
        w.unbind()
