"""ais_bench's InferSession, MultiDeviceSession and aclruntime used as scripts use them, in every
mode, each result compared with onnxruntime on the same ONNX model."""
from __future__ import annotations

import numpy as np
import pytest

from ge.core.acl import aclruntime
from ge.core.runtime.device import get_device
from ge.core.acl.ais_bench.interface import InferSession, MemorySummary, MultiDeviceSession

from .conftest import image

TOL = dict(rtol=1e-5, atol=1e-5)


def assert_conv(got, x, models):
    for g, want in zip(got, models.conv(x)):
        np.testing.assert_allclose(g, want, **TOL)


def test_static_script_as_users_write_it(models):
    session = InferSession(0, models.om["static"])
    x = image()
    outputs = session.infer([x])
    assert_conv(outputs, x, models)
    assert len(outputs) == 2 and all(isinstance(y, np.ndarray) for y in outputs)

    (inp,) = session.get_inputs()
    # aclFormat as aclmdlGetInputFormat says it: NCHW (0) for a 4-D ONNX input, ND (2) for outputs
    assert (inp.name, inp.shape, inp.size, inp.realsize, inp.format) == ("x", [1, 3, 8, 8], 768, 768, 0)
    assert all(d.format == 2 for d in session.get_outputs())
    assert inp.datatype.name == "float32" and str(inp.datatype) == "dtype.float32"
    numpy_types = [np.float32, np.float16, np.int8, np.int32, np.uint8]  # indexed by aclDataType, as scripts do
    assert numpy_types[inp.datatype] is np.float32 and {inp.datatype: "f32"}[aclruntime.dtype.float32] == "f32"
    assert [(o.name, o.shape, o.size) for o in session.get_outputs()] == [("logits", [1, 5], 20), ("prob", [1, 5], 20)]


def test_summary_times_are_numbers_and_pairs(models):
    session = InferSession(0, models.om["static"], loop=3)
    session.infer([image()])
    times = session.summary().exec_time_list
    assert len(times) == 3 and session.sumary().exec_time_list is times
    assert np.mean(times) > 0 and float(np.mean(times)) == pytest.approx(sum(times) / 3)
    for start, end in times:  # newer ais_bench: (start, end) in ms
        assert end >= start
    assert [end - start for start, end in times] == pytest.approx([float(t) for t in times])
    session.reset_summaryinfo()
    assert session.summary().exec_time_list == []
    session.infer([image()])
    session.reset_sumaryinfo()  # 2023's spelling
    assert session.sumary().exec_time_list == []
    assert len(MemorySummary.get_h2d_time_list()) > 0


def test_feeds_numpy_scalars_and_torch_like_tensors(models):
    class FakeTorchTensor:  # what ais_bench reads of a torch.Tensor: .numpy()
        def __init__(self, a):
            self.a = a

        def numpy(self):
            return self.a

    x = image(seed=3)
    session = InferSession(0, models.om["static"])
    assert_conv(session.infer([FakeTorchTensor(x)]), x, models)
    assert_conv(session.infer([np.asfortranarray(x)]), x, models)  # made contiguous first

    a = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    two = InferSession(0, models.om["two"])
    b = np.full((2, 3), np.float32(0.5))
    got = two.infer([a, b])
    for g, want in zip(got, models.two(a, b)):
        np.testing.assert_allclose(g, want, **TOL)
    with pytest.raises(RuntimeError, match=r"Check i:1 name:b in size:4 needsize:24 not match"):
        two.infer([a, np.float32(0.5)])  # a numpy scalar is one value, as in ais_bench
    with pytest.raises(RuntimeError, match=r"type:<class 'list'> invalid"):
        two.infer([a, [[0.5] * 3] * 2])


def test_fp16_input_refuses_float32_and_takes_float16(models):
    session = InferSession(0, models.om["fp16"])
    assert session.get_inputs()[0].datatype.name == "float16"
    x = image(seed=5)
    with pytest.raises(RuntimeError, match=r"^Check i:0 name:x in size:768 needsize:384 not match$"):
        session.infer([x])
    got = session.infer([x.astype(np.float16)])  # what ais_bench's users do
    for g, want in zip(got, models.conv(x.astype(np.float16).astype(np.float32))):
        np.testing.assert_allclose(g, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("batch", [1, 2, 4])
def test_dymbatch_on_a_gear_model(models, batch):
    session = InferSession(0, models.om["gears"])
    (inp,) = session.get_inputs()
    assert inp.shape == [-1, 3, 8, 8] and inp.size == 4 * 768  # the largest gear
    x = image((batch, 3, 8, 8), seed=batch)
    assert_conv(session.infer([x], mode="dymbatch"), x, models)
    assert session.get_inputs()[0].realsize == batch * 768
    assert session.get_outputs()[0].realsize == batch * 20 and session.get_max_dym_batchsize() == 4


def test_dymbatch_without_a_gear_says_which_gears(models):
    session = InferSession(0, models.om["gears"])
    with pytest.raises(RuntimeError, match=r"has no gear for batch size 3; its gears \(dynamic_batch_size\): 1; 2; 4"):
        session.infer([image((3, 3, 8, 8))], mode="dymbatch")
    with pytest.raises(RuntimeError, match="not a dymbatch model!"):
        InferSession(0, models.om["static"]).infer([image()], mode="dymbatch")


def test_dymhw_and_dymdims(models):
    x = image((1, 3, 6, 10), seed=7)
    assert_conv(InferSession(0, models.om["hw"]).infer([x], mode="dymhw"), x, models)
    y = image((2, 3, 6, 8), seed=8)
    dims = InferSession(0, models.om["dims"])
    assert_conv(dims.infer([y], mode="dymdims"), y, models)
    assert dims.get_inputs()[0].realsize == y.nbytes


@pytest.mark.parametrize("name,shape", [("range", (3, 3, 8, 8)), ("unknown", (2, 3, 7, 9))])
def test_dymshape_on_range_and_unknown_shape_models(models, name, shape):
    session = InferSession(0, models.om[name])
    x = image(shape, seed=9)
    assert_conv(session.infer([x], mode="dymshape", custom_sizes=10000), x, models)
    assert [o.size for o in session.get_outputs()] == [10000, 10000]
    with pytest.raises(RuntimeError, match=r"output 0 \('logits', float32 \[3, 5\]\) needs 60 bytes; --outputSize "
                                           r"gives 40"):
        session.infer([image((3, 3, 8, 8))], mode="dymshape", custom_sizes=[40, 40])


def test_out_array_false_gives_device_tensors(models):
    session = InferSession(0, models.om["static"])
    x = image(seed=11)
    tensors = session.infer([x], out_array=False)
    assert tensors[0].type == aclruntime.type.memory_device and tensors[0].device == 0
    with pytest.raises(RuntimeError, match="tensor is in npu. can't convert to numpy array"):
        np.array(tensors[0])
    for t in tensors:
        t.to_host()
    assert_conv([np.array(t) for t in tensors], x, models)


def test_infer_pipeline_each_feeds_its_own_shape(models):
    session = InferSession(0, models.om["range"])
    feeds = [[image((b, 3, 8, 8), seed=b)] for b in (1, 4, 2)]
    results = session.infer_pipeline(feeds, mode="dymshape", custom_sizes=1000)
    assert len(results) == 3
    for (x,), got in zip(feeds, results):
        assert_conv(got, x, models)


def test_infer_iteration_feeds_outputs_back(models):
    session = InferSession(0, models.om["two"])
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2))
    got = session.infer_iteration([a, b], in_out_list=[-1, 0], iteration_times=3)  # b <- last s
    want_b = b
    for _ in range(3):
        want = models.two(a, want_b)
        want_b = want[0]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, **TOL)
    with pytest.raises(RuntimeError, match="inputs' amount and length of in_out_list not matched!"):
        session.infer_iteration([a, b], in_out_list=[0], iteration_times=2)


def test_multi_device_session_runs_each_device(models):
    xs = {0: [[image(seed=20)]], 1: [[image(seed=21)], [image(seed=22)]]}
    session = MultiDeviceSession(models.om["static"])
    outputs = session.infer(xs)
    assert sorted(outputs) == [0, 1] and [len(outputs[0]), len(outputs[1])] == [1, 2]
    for device, feeds in xs.items():
        for (x,), got in zip(feeds, outputs[device]):
            assert_conv(got, x, models)
    assert [len(session.summary[d]) for d in (0, 1)] == [1, 2]


def test_aclruntime_as_scripts_use_it(models):
    options = aclruntime.session_options()
    options.loop = 2
    session = aclruntime.InferenceSession(models.om["static"], 1, options)
    x = image(seed=30)
    tensor = aclruntime.Tensor(x)
    tensor.to_device(1)
    names = [o.name for o in session.get_outputs()]
    outputs = session.run(names, [tensor])
    for t in outputs:
        t.to_host()
    assert_conv([np.array(t) for t in outputs], x, models)
    assert len(session.sumary().exec_time_list) == 2
    prob = session.run(["prob"], {"x": aclruntime.BaseTensor(x.__array_interface__["data"][0], x.nbytes)})
    prob[0].to_host()
    np.testing.assert_allclose(np.array(prob[0]), models.conv(x)[1], **TOL)
    with pytest.raises(RuntimeError, match=r"the model has no output 'nope' \(its outputs: logits, prob\)"):
        session.run(["nope"], [tensor])
    session.free_resource()
    with pytest.raises(RuntimeError, match="no loaded model"):
        session.run(names, [tensor])


def test_aclruntime_device_tensors_live_in_device_memory(models, monkeypatch):
    monkeypatch.setenv("GE_ACL_DEVICE", "sim")
    sim = get_device("sim:5")
    before, in_use = dict(sim.counters), sim.in_use
    x = image(seed=31)
    tensor = aclruntime.Tensor(x)
    tensor.to_device(5)
    assert sim.counters["h2d_count"] == before.get("h2d_count", 0) + 1 and sim.in_use == in_use + x.nbytes
    with pytest.raises(RuntimeError, match="tensor is in npu"):
        np.array(tensor)
    session = aclruntime.InferenceSession(models.om["static"], 5, aclruntime.session_options())
    (prob,) = session.run(["prob"], [tensor])
    d2h = sim.counters["d2h_count"]
    prob.to_host()
    assert sim.counters["d2h_count"] == d2h + 1
    np.testing.assert_allclose(np.array(prob), models.conv(x)[1], **TOL)
    session.free_resource()
    del tensor, prob
    assert sim.in_use == in_use  # a device tensor's memory goes with it


def test_bad_calls_name_what_is_wrong(models, tmp_path):
    with pytest.raises(RuntimeError, match=r"device:64 is invalid. valid value range is \[0, 63\]"):
        InferSession(64, models.om["static"])
    with pytest.raises(RuntimeError, match=r"model path:.*nothing.om is not a file"):
        InferSession(0, str(tmp_path / "nothing.om"))
    session = InferSession(0, models.om["static"])
    with pytest.raises(RuntimeError, match=r'wrong infer_mode:dynamic, only support "static","dymbatch"'):
        session.infer([image()], mode="dynamic")
    session.free_resource()
    with pytest.raises(RuntimeError, match="no loaded model"):
        session.infer([image()])
    InferSession.finalize()
