"""python3 infer_spawn.py model.om inputs.npz outputs.npy: each sample in a spawned child process."""
import multiprocessing
import sys

import numpy as np


def infer(args):
    model_path, x = args
    from acl_net import Net
    net = Net(model_path)
    y = net.forward([x])[0]
    net.release()
    return y


if __name__ == "__main__":
    model_path, inputs_path, outputs_path = sys.argv[1:4]
    samples = np.load(inputs_path)["x"]
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        results = pool.map(infer, [(model_path, x) for x in samples])
    np.save(outputs_path, np.stack(results))
