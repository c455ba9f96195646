"""Bad calls return pyACL's error codes (and say why in acl.get_recent_err_msg()), never raise and
never crash; the process stays healthy: the model runs correctly after all of them."""
import numpy as np
import pytest

from ge.core.acl import pyacl as acl
from ge.core.api import model_manager
from ge.core.acl.codes import NotSupportedByGe

from .conftest import Models, ready_model

H2D, D2H = 1, 2


def _run(model_id, in_ds, out_ds, in_ptr, out_ptr, x):
    assert acl.rt.memcpy(in_ptr, x.nbytes, acl.util.numpy_to_ptr(x), x.nbytes, H2D) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    y = np.zeros((1, 5), np.float32)
    assert acl.rt.memcpy(acl.util.numpy_to_ptr(y), y.nbytes, out_ptr, y.nbytes, D2H) == 0
    return y


def _fails(ret, code, words):
    assert ret == code, (ret, acl.get_recent_err_msg())
    assert words in acl.get_recent_err_msg()


def test_bad_memory_calls(device):
    ptr, ret = acl.rt.malloc(64, 0)
    assert ret == 0
    host = np.zeros(32, np.float32)
    hp = acl.util.numpy_to_ptr(host)
    _fails(acl.rt.memcpy(ptr, 64, hp, 65, H2D), 100000, "larger than dest_max")
    _fails(acl.rt.memcpy(ptr, 128, hp, 128, H2D), 107000, "is not memory allocated through acl")  # past its end
    assert acl.rt.memcpy(ptr, 128, hp, 64, H2D) == 0  # an overstated dest_max: the 64 bytes copied fit
    _fails(acl.rt.memcpy(ptr + 8, 64, hp, 64, H2D), 107000, "not memory")  # runs past the allocation
    _fails(acl.rt.memcpy(ptr, 64, 0xDEAD000, 64, H2D), 107000, "0xdead000")  # foreign
    _fails(acl.rt.memcpy(ptr, 64, hp, 64, 9), 100000, "aclrtMemcpyKind")
    _fails(acl.rt.memset(ptr, 64, 0, 65), 100000, "larger than max_count")
    _fails(acl.rt.memset(ptr, 65, 0, 65), 107000, "not memory")
    assert acl.rt.memset(ptr, 64, 0x7F, 64) == 0
    assert acl.util.ptr_to_numpy(ptr, (64,), 2).tolist() == [0x7F] * 64
    assert acl.util.ptr_to_numpy(ptr, (17,), 11) is None  # 68 bytes of a 64-byte allocation
    assert acl.rt.free(ptr) == 0
    _fails(acl.rt.free(ptr), 207002, "not a live allocation")  # double free
    _fails(acl.rt.memcpy(hp, 64, ptr, 64, D2H), 107000, "not memory")  # freed
    _fails(acl.rt.free(hp), 207002, "not a live allocation")  # not acl.rt.malloc's
    _fails(acl.rt.free_host(hp), 100000, "malloc_host")
    _fails(acl.rt.malloc(0, 0)[1], 100000, "must be positive")
    _fails(acl.rt.malloc("64", 0)[1], 100000, "must be an int")
    assert acl.util.ptr_to_bytes(0x10, 4) == b""


def test_bad_handles_and_devices(device):
    _fails(acl.rt.set_device(999), 107001, "device id 999")
    _fails(acl.rt.destroy_stream(12345), 107017, "not a live AclStream")
    stream, ret = acl.rt.create_stream()
    assert ret == 0 and acl.rt.destroy_stream(stream) == 0
    _fails(acl.rt.synchronize_stream(stream), 107017, "not a live AclStream")  # destroyed
    _fails(acl.rt.destroy_stream(stream), 107017, "not a live AclStream")
    _fails(acl.rt.set_context(77), 107017, "AclContext")
    assert acl.init() == 100002
    assert acl.get_data_buffer_addr(5) == 0 and acl.mdl.get_dataset_num_buffers(5) == 0
    assert acl.mdl.get_num_inputs(acl.mdl.create_desc()) == 0  # a desc never filled
    _fails(acl.rt.process_report(1), 100035, "not subscribed")
    _fails(acl.rt.launch_callback(print, [], 1, 0), 107015, "no thread is subscribed")
    with pytest.raises(NotSupportedByGe, match="DVPP.*not supported by ge"):
        acl.media  # noqa: B018


def test_bad_model_calls_leave_the_process_healthy(device, models):
    model_id, desc, in_ds, out_ds, (in_ptr,), (out_ptr, _) = ready_model(models.static)
    x = np.random.default_rng(11).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = Models.conv(x)[0]
    _fails(acl.mdl.load_from_file("/no/such.om")[1], 145002, "no such model file")
    _fails(acl.mdl.execute(model_id + 1000, in_ds, out_ds), 145003, "no model loaded")
    _fails(acl.mdl.get_desc(desc, model_id + 1000), 145003, "no model loaded")
    _fails(acl.mdl.get_input_index_by_name(desc, "ascend_mbatch_shape_data")[1], 100000, "no input named")
    _fails(acl.mdl.set_dynamic_batch_size(model_id, in_ds, 1, 2), 100019, "has no gears")
    assert acl.mdl.get_input_dims(desc, 7) == ({"name": "", "dimCount": 0, "dims": []}, 100000)
    empty = acl.mdl.create_dataset()
    _fails(acl.mdl.execute(model_id, empty, out_ds), 100000, "has 0 buffers, the model has 1 inputs")
    short = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(short, acl.mdl.get_dataset_buffer(out_ds, 0))
    _fails(acl.mdl.execute(model_id, in_ds, short), 100000, "needs one for output 1")
    small, ret = acl.rt.malloc(100, 0)
    wrong = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(wrong, acl.create_data_buffer(small, 100))
    _fails(acl.mdl.execute(model_id, wrong, out_ds), 100000, "a buffer of 100 bytes, the model's input is 768 bytes")
    freed, _ = acl.rt.malloc(768, 0)
    acl.rt.free(freed)
    gone = acl.mdl.create_dataset()
    acl.mdl.add_dataset_buffer(gone, acl.create_data_buffer(freed, 768))
    _fails(acl.mdl.execute(model_id, gone, out_ds), 107000, "not memory")
    np.testing.assert_allclose(_run(model_id, in_ds, out_ds, in_ptr, out_ptr, x), want, rtol=1e-5, atol=1e-6)
    stats = model_manager.model(model_id).default_context.stats
    assert stats["zero_copy_inputs"] == 1 and stats["zero_copy_outputs"] == 2  # the data buffers, bound in place
    assert acl.mdl.unload(model_id) == 0
    _fails(acl.mdl.unload(model_id), 145003, "no model loaded")
    _fails(acl.mdl.execute(model_id, in_ds, out_ds), 145003, "no model loaded")
    model_id, *_ = acl.mdl.load_from_file(models.static)  # and again, after all that
    np.testing.assert_allclose(_run(model_id, in_ds, out_ds, in_ptr, out_ptr, x), want, rtol=1e-5, atol=1e-6)
    assert acl.mdl.unload(model_id) == 0


def test_bad_gear_calls(device, models):
    model_id, desc, in_ds, out_ds, (x_ptr, mb_ptr), _ = ready_model(models.gears)
    _fails(acl.mdl.set_dynamic_batch_size(model_id, in_ds, 1, 3), 145013, "no gear for batch size 3")
    _fails(acl.mdl.set_dynamic_batch_size(model_id, in_ds, 0, 2), 100000, "not the model's ascend_mbatch_shape_data")
    assert acl.rt.memset(mb_ptr, 8, 0, 8) == 0  # nothing set: the buffer says batch 0
    _fails(acl.mdl.execute(model_id, in_ds, out_ds), 145013, "which is no gear")
    assert acl.mdl.set_dynamic_batch_size(model_id, in_ds, 1, 4) == 0
    assert acl.util.ptr_to_numpy(mb_ptr, (1,), 7).tolist() == [4]  # recorded in the buffer, as ACL does
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    assert acl.mdl.get_cur_output_dims(desc, 0)[0]["dims"] == [4, 5]
    assert acl.mdl.unload(model_id) == 0


def test_an_unknown_device_kind_is_a_code_naming_it(monkeypatch):
    monkeypatch.setenv("GE_ACL_DEVICE", "npu")
    acl.init()
    try:
        _fails(acl.rt.set_device(3), 107000, "GE_ACL_DEVICE='npu' is no ge device: choose cpu or sim")
    finally:
        acl.finalize()
