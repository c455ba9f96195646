"""An acl_net.py as users write it (Ascend samples style): a Net class over raw pyACL."""
import acl
import numpy as np

ACL_MEM_MALLOC_HUGE_FIRST = 0
ACL_MEMCPY_HOST_TO_DEVICE = 1
ACL_MEMCPY_DEVICE_TO_HOST = 2
ACL_SUCCESS = 0
NPY_TYPE = {0: (np.float32, 11), 1: (np.float16, 23), 3: (np.int32, 5), 9: (np.int64, 7)}


def check_ret(message, ret):
    if ret != ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


class Net(object):
    def __init__(self, model_path, device_id=0, init=True):
        self.device_id = device_id
        self.own_init = init
        if init:
            ret = acl.init()
            check_ret("acl.init", ret)
        ret = acl.rt.set_device(self.device_id)
        check_ret("acl.rt.set_device", ret)
        self.context, ret = acl.rt.create_context(self.device_id)
        check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        check_ret("acl.rt.create_stream", ret)

        self.model_id, ret = acl.mdl.load_from_file(model_path)
        check_ret("acl.mdl.load_from_file", ret)
        self.model_desc = acl.mdl.create_desc()
        ret = acl.mdl.get_desc(self.model_desc, self.model_id)
        check_ret("acl.mdl.get_desc", ret)
        self.input_dataset, self.input_data = self.prepare_dataset("input")
        self.output_dataset, self.output_data = self.prepare_dataset("output")

    def prepare_dataset(self, io_type):
        if io_type == "input":
            io_num = acl.mdl.get_num_inputs(self.model_desc)
            get_size = acl.mdl.get_input_size_by_index
        else:
            io_num = acl.mdl.get_num_outputs(self.model_desc)
            get_size = acl.mdl.get_output_size_by_index
        dataset = acl.mdl.create_dataset()
        datas = []
        for i in range(io_num):
            buffer_size = get_size(self.model_desc, i)
            buffer, ret = acl.rt.malloc(buffer_size, ACL_MEM_MALLOC_HUGE_FIRST)
            check_ret("acl.rt.malloc", ret)
            data_buffer = acl.create_data_buffer(buffer, buffer_size)
            _, ret = acl.mdl.add_dataset_buffer(dataset, data_buffer)
            if ret:
                acl.destroy_data_buffer(data_buffer)
                check_ret("acl.mdl.add_dataset_buffer", ret)
            datas.append({"buffer": buffer, "data": data_buffer, "size": buffer_size})
        return dataset, datas

    def forward(self, inputs, batch=None):
        for i, x in enumerate(inputs):
            x = np.ascontiguousarray(x)
            ptr = acl.util.bytes_to_ptr(x.tobytes())
            ret = acl.rt.memcpy(self.input_data[i]["buffer"], self.input_data[i]["size"], ptr, x.nbytes,
                                ACL_MEMCPY_HOST_TO_DEVICE)
            check_ret("acl.rt.memcpy", ret)
        if batch is not None:
            index, ret = acl.mdl.get_input_index_by_name(self.model_desc, "ascend_mbatch_shape_data")
            check_ret("acl.mdl.get_input_index_by_name", ret)
            ret = acl.mdl.set_dynamic_batch_size(self.model_id, self.input_dataset, index, batch)
            check_ret("acl.mdl.set_dynamic_batch_size", ret)
        ret = acl.mdl.execute(self.model_id, self.input_dataset, self.output_dataset)
        check_ret("acl.mdl.execute", ret)
        return self.get_result()

    def get_result(self):
        results = []
        for i, item in enumerate(self.output_data):
            dims, ret = acl.mdl.get_cur_output_dims(self.model_desc, i)
            check_ret("acl.mdl.get_cur_output_dims", ret)
            dtype, npy_type = NPY_TYPE[acl.mdl.get_output_data_type(self.model_desc, i)]
            nbytes = int(np.prod(dims["dims"])) * np.dtype(dtype).itemsize
            if i == 0:  # bytes_to_ptr: the device result copied into a bytes object
                host = bytes(item["size"])
                ret = acl.rt.memcpy(acl.util.bytes_to_ptr(host), item["size"], item["buffer"], item["size"],
                                    ACL_MEMCPY_DEVICE_TO_HOST)
                check_ret("acl.rt.memcpy", ret)
                out = np.frombuffer(host, dtype)[:nbytes // np.dtype(dtype).itemsize].reshape(dims["dims"])
            else:  # malloc_host + ptr_to_numpy
                host, ret = acl.rt.malloc_host(item["size"])
                check_ret("acl.rt.malloc_host", ret)
                ret = acl.rt.memcpy(host, item["size"], item["buffer"], item["size"], ACL_MEMCPY_DEVICE_TO_HOST)
                check_ret("acl.rt.memcpy", ret)
                out = acl.util.ptr_to_numpy(host, tuple(dims["dims"]), npy_type).copy()
                acl.rt.free_host(host)
            results.append(out)
        return results

    def release(self):
        for dataset, datas in ((self.input_dataset, self.input_data), (self.output_dataset, self.output_data)):
            for item in datas:
                acl.destroy_data_buffer(item["data"])
                acl.rt.free(item["buffer"])
            acl.mdl.destroy_dataset(dataset)
        check_ret("acl.mdl.unload", acl.mdl.unload(self.model_id))
        acl.mdl.destroy_desc(self.model_desc)
        check_ret("acl.rt.destroy_stream", acl.rt.destroy_stream(self.stream))
        check_ret("acl.rt.destroy_context", acl.rt.destroy_context(self.context))
        check_ret("acl.rt.reset_device", acl.rt.reset_device(self.device_id))
        if self.own_init:
            check_ret("acl.finalize", acl.finalize())
