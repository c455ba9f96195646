import acl

import constants as const


def check_ret(message, ret):
    if ret != const.ACL_SUCCESS:
        raise Exception("{} failed ret={}".format(message, ret))


def copy_data_host_to_device(host_ptr, size):
    device_ptr, ret = acl.rt.malloc(size, const.ACL_MEM_MALLOC_NORMAL_ONLY)
    check_ret("acl.rt.malloc", ret)
    ret = acl.rt.memcpy(device_ptr, size, host_ptr, size, const.ACL_MEMCPY_HOST_TO_DEVICE)
    check_ret("acl.rt.memcpy", ret)
    return device_ptr
