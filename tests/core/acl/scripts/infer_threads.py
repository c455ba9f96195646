"""python3 infer_threads.py model.om inputs.npz outputs.npz: two devices at once, each thread with its
own context; a third thread borrows device 0's context with set_context."""
import sys
import threading

import acl
import numpy as np

from acl_net import Net, check_ret

model_path, inputs_path, outputs_path = sys.argv[1:4]
samples = np.load(inputs_path)["x"]  # [3, 1, 3, 8, 8]
check_ret("acl.init", acl.init())
results, errors = {}, []


def worker(device_id, index):
    try:
        net = Net(model_path, device_id, init=False)
        got, ret = acl.rt.get_device()
        assert ret == 0 and got == device_id, (got, ret)
        results[index] = net.forward([samples[index]])[0]
        if device_id == 0:  # a thread of its own runs on this context too
            def borrow():
                check_ret("acl.rt.set_context", acl.rt.set_context(net.context))
                results[2] = net.forward([samples[2]])[0]
            t = threading.Thread(target=borrow)
            t.start()
            t.join()
        net.release()
    except Exception as e:  # reported by the main thread
        errors.append(e)


threads = [threading.Thread(target=worker, args=(d, d)) for d in (0, 1)]
for t in threads:
    t.start()
for t in threads:
    t.join()
assert not errors, errors
check_ret("acl.finalize", acl.finalize())
np.save(outputs_path, np.stack([results[i] for i in range(3)]))
