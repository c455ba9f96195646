"""Gear models through pyACL: image-size and dims gears set in the dataset's
ascend_mbatch_shape_data buffer, descriptions of the largest gear with -1 where gears differ, the
gear that ran in get_cur_output_dims; against onnxruntime."""
import numpy as np
import pytest

from ge.core.acl import pyacl as acl

from .conftest import Models, ready_model

H2D, D2H = 1, 2


def _dims(dims):
    return {"dimCount": len(dims), "name": "", "dims": dims}


def _put(ptr, x):
    assert acl.rt.memcpy(ptr, x.nbytes, acl.util.bytes_to_ptr(x.tobytes()), x.nbytes, H2D) == 0


def _get(ptr, desc, i):
    dims, ret = acl.mdl.get_cur_output_dims(desc, i)
    assert ret == 0
    host, ret = acl.rt.malloc_host(acl.mdl.get_output_size_by_index(desc, i))
    size = acl.mdl.get_output_size_by_index(desc, i)
    assert acl.rt.memcpy(host, size, ptr, size, D2H) == 0
    y = acl.util.ptr_to_numpy(host, tuple(dims["dims"]), 11).copy()
    assert acl.rt.free_host(host) == 0
    return y


@pytest.mark.parametrize("hw", [(8, 8), (16, 12)])
def test_dynamic_image_size(device, models, hw):
    model_id, desc, in_ds, out_ds, (x_ptr, _), out_ptrs = ready_model(models.hw)
    assert acl.mdl.get_input_dims(desc, 0)[0]["dims"] == [1, 3, -1, -1]
    assert acl.mdl.get_input_size_by_index(desc, 0) == 3 * 16 * 12 * 4  # the largest gear's
    assert acl.mdl.get_input_format(desc, 0) == 0  # NCHW, as --input_format said
    info, ret = acl.mdl.get_dynamic_hw(desc, -1)
    assert ret == 0 and info == {"hwCount": 2, "hw": [[8, 8], [16, 12]]}
    x = np.random.default_rng(12).standard_normal((1, 3, *hw)).astype(np.float32)
    _put(x_ptr, x)
    assert acl.mdl.set_dynamic_hw_size(model_id, in_ds, 1, *hw) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    for i, want in enumerate(Models.conv(x)):
        np.testing.assert_allclose(_get(out_ptrs[i], desc, i), want, rtol=1e-5, atol=1e-6)
    assert acl.mdl.unload(model_id) == 0


@pytest.mark.parametrize("seq", [3, 5])
def test_dynamic_dims(device, models, seq):
    model_id, desc, in_ds, out_ds, (a_ptr, b_ptr, _), (y_ptr,) = ready_model(models.dims)
    assert acl.mdl.get_num_inputs(desc) == 3  # a, b and ascend_mbatch_shape_data, last
    assert acl.mdl.get_input_name_by_index(desc, 2) == "ascend_mbatch_shape_data"
    assert acl.mdl.get_input_data_type(desc, 1) == 9  # int64
    count, ret = acl.mdl.get_input_dynamic_gear_count(desc, -1)
    gears, ret = acl.mdl.get_input_dynamic_dims(desc, -1, count)
    assert [g["dims"] for g in gears] == [[1, 3, 1, 3], [1, 5, 1, 5]]
    rng = np.random.default_rng(seq)
    a, b = rng.standard_normal((1, seq)).astype(np.float32), rng.integers(0, 9, (1, seq))
    _put(a_ptr, a)
    _put(b_ptr, b)
    assert acl.mdl.set_input_dynamic_dims(model_id, in_ds, 2, _dims([1, seq, 1, seq])) == 0
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 0
    want = Models.positions(a, b)[0]
    np.testing.assert_allclose(_get(y_ptr, desc, 0), want, rtol=1e-6)
    assert acl.mdl.set_input_dynamic_dims(model_id, in_ds, 2, _dims([1, 4, 1, 4])) == 145013  # no such gear
    assert acl.mdl.set_input_dynamic_dims(model_id, in_ds, 2, _dims([2, 3, 1, 3])) == 100000  # a static dim changed
    assert acl.mdl.unload(model_id) == 0


@pytest.mark.parametrize("seq", [2, 7])
def test_a_range_model_through_tensor_descs(device, models, seq):
    model_id, desc, in_ds, out_ds, (a_ptr, b_ptr), (y_ptr,) = ready_model(models.ranges)
    assert acl.mdl.get_num_inputs(desc) == 2  # no gear input
    assert acl.mdl.get_input_dims(desc, 1) == ({"name": "b", "dimCount": 2, "dims": [1, -1]}, 0)
    assert acl.mdl.get_input_size_by_index(desc, 1) == 8 * 8  # int64 at the range's upper end
    assert acl.mdl.execute(model_id, in_ds, out_ds) == 100000  # no shapes given
    assert "set it with acl.mdl.set_dataset_tensor_desc" in acl.get_recent_err_msg()
    rng = np.random.default_rng(seq)
    a, b = rng.standard_normal((1, seq)).astype(np.float32), rng.integers(0, 9, (1, seq))
    for i, (x, ptr, dtype) in enumerate(((a, a_ptr, 0), (b, b_ptr, 9))):
        _put(ptr, x)
        assert acl.mdl.set_dataset_tensor_desc(in_ds, acl.create_tensor_desc(dtype, [1, seq], 2), i) == 0
    stream, _ = acl.rt.create_stream()
    assert acl.mdl.execute_async(model_id, in_ds, out_ds, stream) == 0
    assert acl.rt.synchronize_stream(stream) == 0
    out = acl.mdl.get_dataset_tensor_desc(out_ds, 0)
    dims = [acl.get_tensor_desc_dim(out, k) for k in range(acl.get_tensor_desc_num_dims(out))]
    assert dims == [1, seq] and acl.get_tensor_desc_size(out) == seq * 4 and acl.get_tensor_desc_type(out) == 0
    assert acl.mdl.get_cur_output_dims(desc, 0)[0]["dims"] == [1, seq]
    np.testing.assert_allclose(_get(y_ptr, desc, 0), Models.positions(a, b)[0], rtol=1e-6)
    acl.mdl.set_dataset_tensor_desc(in_ds, acl.create_tensor_desc(0, [1, 9], 2), 0)  # past the range
    acl.mdl.set_dataset_tensor_desc(in_ds, acl.create_tensor_desc(9, [1, 9], 2), 1)
    assert acl.mdl.execute(model_id, in_ds, out_ds) != 0
    assert acl.rt.destroy_stream(stream) == 0 and acl.mdl.unload(model_id) == 0


def test_run_mode_before_init():
    assert acl.rt.get_run_mode() == (1, 0)  # ACL_HOST: acllite asks at import, before acl.init
