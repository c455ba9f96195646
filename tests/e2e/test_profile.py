"""api.profile: a Chrome trace with one event per task per execution (copies as their own events
on sim) and a per-op-type table."""
import json

import numpy as np
import onnx
import pytest

from ge.core import api
from ge.core.model.errors import GeError


@pytest.fixture(scope="module")
def om(samples, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("profile")
    path = str(tmp / "m.onnx")
    onnx.save(samples.tiny_cnn(), path)
    return api.atc(path, str(tmp / "m")).om_path


@pytest.mark.parametrize("device", ["cpu", "sim"])
def test_trace_has_every_task_of_every_run(om, device):
    model_id = api.load_from_file(om, device)
    try:
        n_tasks = len(api.model(model_id).ge_plan.tasks)
        p = api.profile(model_id, runs=3)
    finally:
        api.unload(model_id)
    events = [e for e in p["traceEvents"] if e["ph"] == "X"]
    tasks = [e for e in events if e["tid"] == 0]
    assert len(tasks) == 3 * n_tasks
    assert {e["args"]["run"] for e in tasks} == {0, 1, 2}
    assert all(e["dur"] >= 0 and e["ts"] >= 0 and e["args"]["op"] for e in tasks)
    copies = [e for e in events if e["tid"] == 1]
    if device == "sim":  # host arrays reach the simulated NPU's memory by copies, each an event
        assert {e["name"] for e in copies} >= {"H2D", "D2H"} and all(e["args"]["bytes"] > 0 for e in copies)
    assert sum(r["count"] for r in p["ops"]) == 3 * n_tasks
    assert abs(sum(r["share"] for r in p["ops"]) - 1) < 1e-3
    json.loads(json.dumps(p))  # a trace file as Perfetto reads it


def test_profile_refuses_zero_runs(om):
    model_id = api.load_from_file(om)
    try:
        with pytest.raises(GeError, match="at least one run"):
            api.profile(model_id, runs=0)
    finally:
        api.unload(model_id)
