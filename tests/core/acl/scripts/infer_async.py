"""python3 infer_async.py model.om inputs.npz outputs.npz: execute_async on a stream, a callback
thread (start_thread + subscribe_report + process_report) collecting each result, as the samples do."""
import sys

import acl
import numpy as np

from acl_net import ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, Net, check_ret

model_path, inputs_path, outputs_path = sys.argv[1:4]
samples = np.load(inputs_path)["x"]  # [n, 1, 3, 8, 8]: one execute per sample

net = Net(model_path)
exit_flag = [False]
results = {}


def process_callback(args_list):
    context, timeout = args_list
    acl.rt.set_context(context)
    while not exit_flag[0]:
        acl.rt.process_report(timeout)


def on_done(args):
    index, host = args  # runs after the execute before it: the device output is ready
    out = net.output_data[0]
    ret = acl.rt.memcpy(acl.util.bytes_to_ptr(host), len(host), out["buffer"], out["size"], ACL_MEMCPY_DEVICE_TO_HOST)
    check_ret("acl.rt.memcpy", ret)
    results[index] = np.frombuffer(host, np.float32).reshape(1, 5).copy()


tid, ret = acl.util.start_thread(process_callback, [net.context, 100])
check_ret("acl.util.start_thread", ret)
check_ret("acl.rt.subscribe_report", acl.rt.subscribe_report(tid, net.stream))
for i, x in enumerate(samples):
    inp = net.input_data[0]
    ptr = acl.util.numpy_to_ptr(np.ascontiguousarray(x))
    check_ret("acl.rt.memcpy_async", acl.rt.memcpy_async(inp["buffer"], inp["size"], ptr, x.nbytes,
                                                         ACL_MEMCPY_HOST_TO_DEVICE, net.stream))
    check_ret("acl.mdl.execute_async", acl.mdl.execute_async(net.model_id, net.input_dataset, net.output_dataset,
                                                             net.stream))
    check_ret("acl.rt.launch_callback", acl.rt.launch_callback(on_done, [i, bytes(net.output_data[0]["size"])], 1,
                                                               net.stream))
check_ret("acl.rt.synchronize_stream", acl.rt.synchronize_stream(net.stream))
check_ret("acl.rt.unsubscribe_report", acl.rt.unsubscribe_report(tid, net.stream))
exit_flag[0] = True
check_ret("acl.util.stop_thread", acl.util.stop_thread(tid))
net.release()
np.save(outputs_path, np.stack([results[i] for i in range(len(samples))]))
