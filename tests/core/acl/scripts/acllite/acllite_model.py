"""acllite's model half: load, one output dataset reused by every execute, inputs copied to the
device each time, the mbatch input looked up on every execute, outputs through bytes_to_ptr."""
import acl
import numpy as np

import acllite_utils as utils
import constants as const
from acllite_resource import resource_list

DTYPES = {const.ACL_FLOAT: np.float32, const.ACL_FLOAT16: np.float16, const.ACL_INT32: np.int32,
          const.ACL_INT64: np.int64}


class AclLiteModel(object):
    def __init__(self, model_path, load_type=0):
        self._run_mode, ret = acl.rt.get_run_mode()
        utils.check_ret("acl.rt.get_run_mode", ret)
        self._copy_policy = const.ACL_MEMCPY_DEVICE_TO_DEVICE
        if self._run_mode == const.ACL_HOST:
            self._copy_policy = const.ACL_MEMCPY_DEVICE_TO_HOST
        if load_type == 0:
            self._model_id, ret = acl.mdl.load_from_file(model_path)
        else:
            with open(model_path, "rb") as f:
                om_bytes = f.read()
            self._model_id, ret = acl.mdl.load_from_mem(acl.util.bytes_to_ptr(om_bytes), len(om_bytes))
        utils.check_ret("acl.mdl.load_from_file", ret)
        self._model_desc = acl.mdl.create_desc()
        ret = acl.mdl.get_desc(self._model_desc, self._model_id)
        utils.check_ret("acl.mdl.get_desc", ret)
        self._input_num = acl.mdl.get_num_inputs(self._model_desc)
        self._output_size = acl.mdl.get_num_outputs(self._model_desc)
        self._input_buffer = [{"addr": None, "size": 0} for _ in range(self._input_num)]
        self._input_dataset = None
        self._gen_output_dataset()
        self._is_destroyed = False
        resource_list.register(self)

    def _gen_output_dataset(self):
        dataset = acl.mdl.create_dataset()
        for i in range(self._output_size):
            size = acl.mdl.get_output_size_by_index(self._model_desc, i)
            buf, ret = acl.rt.malloc(size, const.ACL_MEM_MALLOC_NORMAL_ONLY)
            utils.check_ret("acl.rt.malloc", ret)
            dataset_buffer = acl.create_data_buffer(buf, size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, dataset_buffer)
            utils.check_ret("acl.mdl.add_dataset_buffer", ret)
        self._output_dataset = dataset

    def _gen_input_dataset(self, input_list):
        dynamic_idx, ret = acl.mdl.get_input_index_by_name(self._model_desc, "ascend_mbatch_shape_data")
        if ret == const.ACL_SUCCESS:
            data_len = acl.mdl.get_input_size_by_index(self._model_desc, dynamic_idx)
            buf, ret = acl.rt.malloc(data_len, const.ACL_MEM_MALLOC_NORMAL_ONLY)
            utils.check_ret("acl.rt.malloc", ret)
            input_list.append({"data": buf, "size": data_len})
        if len(input_list) != self._input_num:
            return const.FAILED
        self._input_dataset = acl.mdl.create_dataset()
        for i, item in enumerate(input_list):
            if isinstance(item, np.ndarray):
                size = item.size * item.itemsize
                if "bytes_to_ptr" in dir(acl.util):
                    ptr = acl.util.bytes_to_ptr(item.tobytes())
                else:
                    ptr = acl.util.numpy_to_ptr(item)
                data = self._copy_input_to_device(ptr, size, i)
            else:
                data, size = item["data"], item["size"]
            dataset_buffer = acl.create_data_buffer(data, size)
            _, ret = acl.mdl.add_dataset_buffer(self._input_dataset, dataset_buffer)
            utils.check_ret("acl.mdl.add_dataset_buffer", ret)
        return const.SUCCESS

    def _copy_input_to_device(self, input_ptr, size, index):
        item = self._input_buffer[index]
        if item["addr"] is None:
            item["addr"] = utils.copy_data_host_to_device(input_ptr, size)
            item["size"] = size
        else:
            ret = acl.rt.memcpy(item["addr"], item["size"], input_ptr, size, const.ACL_MEMCPY_HOST_TO_DEVICE)
            utils.check_ret("acl.rt.memcpy", ret)
        return item["addr"]

    def execute(self, input_list, batch=None):
        if self._gen_input_dataset(list(input_list)) == const.FAILED:
            return None
        if batch is not None:
            index, ret = acl.mdl.get_input_index_by_name(self._model_desc, "ascend_mbatch_shape_data")
            utils.check_ret("acl.mdl.get_input_index_by_name", ret)
            ret = acl.mdl.set_dynamic_batch_size(self._model_id, self._input_dataset, index, batch)
            utils.check_ret("acl.mdl.set_dynamic_batch_size", ret)
        ret = acl.mdl.execute(self._model_id, self._input_dataset, self._output_dataset)
        utils.check_ret("acl.mdl.execute", ret)
        self._release_dataset(self._input_dataset, free_mbatch=True)
        self._input_dataset = None
        return self._output_dataset_to_numpy()

    def _output_dataset_to_numpy(self):
        results = []
        for i in range(acl.mdl.get_dataset_num_buffers(self._output_dataset)):
            buf = acl.mdl.get_dataset_buffer(self._output_dataset, i)
            data = acl.get_data_buffer_addr(buf)
            size = int(acl.get_data_buffer_size(buf))
            dims, ret = acl.mdl.get_cur_output_dims(self._model_desc, i)
            utils.check_ret("acl.mdl.get_cur_output_dims", ret)
            dtype = DTYPES[acl.mdl.get_output_data_type(self._model_desc, i)]
            host = np.zeros(size // np.dtype(dtype).itemsize, dtype).tobytes()
            ret = acl.rt.memcpy(acl.util.bytes_to_ptr(host), len(host), data, size, self._copy_policy)
            utils.check_ret("acl.rt.memcpy", ret)
            count = int(np.prod(dims["dims"]))
            results.append(np.frombuffer(host, dtype)[:count].reshape(dims["dims"]).copy())
        return results

    def _release_dataset(self, dataset, free_mbatch=False):
        num = acl.mdl.get_dataset_num_buffers(dataset)
        for i in range(num):
            buf = acl.mdl.get_dataset_buffer(dataset, i)
            if free_mbatch and i == self._input_num - 1 and num > len([b for b in self._input_buffer if b["addr"]]):
                acl.rt.free(acl.get_data_buffer_addr(buf))
            acl.destroy_data_buffer(buf)
        acl.mdl.destroy_dataset(dataset)

    def destroy(self):
        if self._is_destroyed:
            return
        self._release_dataset(self._output_dataset)
        for item in self._input_buffer:
            if item["addr"] is not None:
                acl.rt.free(item["addr"])
        acl.mdl.unload(self._model_id)
        acl.mdl.destroy_desc(self._model_desc)
        self._is_destroyed = True
