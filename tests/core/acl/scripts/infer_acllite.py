"""python3 infer_acllite.py model.om inputs.npz outputs.npz [batch] [load_type]: acllite, as users
use it (resource first, then the model; the model reused for a second execute)."""
import os
import sys

import numpy as np

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "acllite"))
from acllite_model import AclLiteModel  # noqa: E402
from acllite_resource import AclLiteResource  # noqa: E402

model_path, inputs_path, outputs_path = sys.argv[1:4]
batch = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else None
load_type = int(sys.argv[5]) if len(sys.argv) > 5 else 0
feeds = np.load(inputs_path)
resource = AclLiteResource()
resource.init()
model = AclLiteModel(model_path, load_type)
inputs = [feeds[k] for k in sorted(feeds.files)]
first = model.execute(inputs, batch)
second = model.execute(inputs, batch)  # the output dataset and the input buffers reused
assert all(np.array_equal(a, b) for a, b in zip(first, second))
resource.release()
np.savez(outputs_path, *second)
