"""Public entry points from 8 threads at once: api.execute on one model id (static: a context per
concurrent caller; gears: calls take turns), the dataset, compare and profile paths. Every caller
gets its own outputs, bit-identical to a single-thread run of the same inputs."""
from __future__ import annotations

import os
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ge.core import api

from tests.fuzz.om_fuzz import seed_onnx

THREADS = 8
RUNS = 25  # per thread


def in_threads(fn, n: int = THREADS) -> list:
    """fn(k) for k in range(n), all started together; their results (an exception is re-raised)."""
    results, errors = [None] * n, []
    start = threading.Barrier(n)

    def worker(k):
        try:
            start.wait()
            results[k] = fn(k)
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def inputs_of(k: int, run: int, shape=(2, 3, 8, 8)) -> list[np.ndarray]:
    return [np.random.default_rng(1000 * k + run).standard_normal(shape).astype(np.float32)]


@pytest.fixture(scope="module")
def cnn_om(tmp_path_factory):
    d = tmp_path_factory.mktemp("cnn")
    onnx.save(seed_onnx(), str(d / "m.onnx"))
    return api.atc(str(d / "m.onnx"), str(d / "m")).om_path, str(d / "m.onnx")


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_execute_on_one_model_id_from_8_threads_is_bit_identical(cnn_om, device):
    om, _ = cnn_om
    model_id = api.load_from_file(om, device)
    try:
        expected = {(k, r): api.execute(model_id, inputs_of(k, r)) for k in range(THREADS) for r in range(RUNS)}

        def calls(k):
            return [api.execute(model_id, inputs_of(k, r)) for r in range(RUNS)]

        got = in_threads(calls)
        for k in range(THREADS):
            for r in range(RUNS):
                for g, e in zip(got[k][r], expected[k, r]):
                    assert g.tobytes() == e.tobytes(), f"thread {k} run {r} got another caller's outputs"
        assert 1 <= len(api.model(model_id).contexts) <= THREADS  # a context per concurrent caller, reused
    finally:
        api.unload(model_id)


def test_a_gear_model_from_8_threads_takes_turns_and_stays_correct(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=1)], "g", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "g.onnx"))
    om = api.atc(str(tmp_path / "g.onnx"), str(tmp_path / "g"), input_shape="x:-1,4",
                 dynamic={"dynamic_batch_size": "1,2,4"}).om_path
    model_id = api.load_from_file(om)
    try:
        batch = {k: (1, 2, 4)[k % 3] for k in range(THREADS)}
        feeds = {(k, r): np.random.default_rng(10 * k + r).standard_normal((batch[k], 4)).astype(np.float32)
                 for k in range(THREADS) for r in range(RUNS)}
        expected = {key: api.execute(model_id, [v])[0] for key, v in feeds.items()}
        got = in_threads(lambda k: [api.execute(model_id, [feeds[k, r]])[0] for r in range(RUNS)])
        for k in range(THREADS):
            for r in range(RUNS):
                assert got[k][r].tobytes() == expected[k, r].tobytes()
    finally:
        api.unload(model_id)


def test_dataset_runs_from_8_threads_write_their_own_correct_outputs(cnn_om, tmp_path):
    om, _ = cnn_om
    model_id = api.load_from_file(om)
    try:
        for k in range(THREADS):
            os.makedirs(tmp_path / f"in{k}")
            for r in range(3):
                np.save(tmp_path / f"in{k}" / f"s{r}.npy", inputs_of(k, r)[0])
        expected = {(k, r): api.execute(model_id, inputs_of(k, r))[0] for k in range(THREADS) for r in range(3)}
        in_threads(lambda k: api.run_dataset(model_id, [str(tmp_path / f"in{k}")], str(tmp_path / f"out{k}")))
        for k in range(THREADS):
            for r in range(3):
                got = np.load(tmp_path / f"out{k}" / f"s{r}_output_0.npy")
                assert got.tobytes() == expected[k, r].tobytes()
    finally:
        api.unload(model_id)


def test_compare_and_profile_from_8_threads(cnn_om):
    om, onnx_path = cnn_om
    reports = in_threads(lambda k: api.compare(onnx_path, om, seed=k))
    assert all(r["passed"] for r in reports)
    model_id = api.load_from_file(om)
    try:
        expected = [api.execute(model_id, inputs_of(k, 0)) for k in range(THREADS)]

        def profile_and_execute(k):
            if k % 2:
                return api.profile(model_id, inputs_of(k, 0), runs=3)
            return [api.execute(model_id, inputs_of(k, 0)) for _ in range(RUNS)]

        results = in_threads(profile_and_execute)
        for k in range(0, THREADS, 2):
            assert all(out[0].tobytes() == expected[k][0].tobytes() for out in results[k])
        for k in range(1, THREADS, 2):
            assert results[k]["runs"] == 3 and results[k]["ops"]
        assert len(api.model(model_id).contexts) <= THREADS  # profile's own contexts are gone
    finally:
        api.unload(model_id)
