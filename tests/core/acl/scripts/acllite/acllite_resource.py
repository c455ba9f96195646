"""acllite's resource half: acl.init, the device, a context and a stream; models register to be
released before the device is reset."""
import acl

import acllite_utils as utils


class _ResourceList(object):
    def __init__(self):
        self.resources = []

    def register(self, resource):
        self.resources.append(resource)

    def destroy(self):
        for resource in reversed(self.resources):
            resource.destroy()
        self.resources = []


resource_list = _ResourceList()


class AclLiteResource(object):
    def __init__(self, device_id=0):
        self.device_id = device_id
        self.context = None
        self.stream = None
        self.run_mode = None

    def init(self):
        ret = acl.init()
        utils.check_ret("acl.init", ret)
        ret = acl.rt.set_device(self.device_id)
        utils.check_ret("acl.rt.set_device", ret)
        self.context, ret = acl.rt.create_context(self.device_id)
        utils.check_ret("acl.rt.create_context", ret)
        self.stream, ret = acl.rt.create_stream()
        utils.check_ret("acl.rt.create_stream", ret)
        self.run_mode, ret = acl.rt.get_run_mode()
        utils.check_ret("acl.rt.get_run_mode", ret)

    def release(self):
        resource_list.destroy()
        if self.stream:
            acl.rt.destroy_stream(self.stream)
        if self.context:
            acl.rt.destroy_context(self.context)
        acl.rt.reset_device(self.device_id)
        acl.finalize()
