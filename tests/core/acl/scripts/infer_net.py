"""python3 infer_net.py model.om inputs.npz outputs.npz [batch]: the Net class on one sample."""
import sys

import numpy as np

from acl_net import Net

model_path, inputs_path, outputs_path = sys.argv[1:4]
batch = int(sys.argv[4]) if len(sys.argv) > 4 else None
feeds = np.load(inputs_path)
net = Net(model_path)
outputs = net.forward([feeds[k] for k in sorted(feeds.files)], batch=batch)
net.release()
np.savez(outputs_path, *outputs)
