"""Upsample (opsets 7-9) and Resize-10: scales only, asymmetric coordinates, nearest = floor.

Both are Resize with their old input layout mapped onto Resize-11's (X, roi, scales, sizes):
pre-opset-11 exports (model-zoo YOLOv3, SSD, FCN at opsets 9-10) use them.
"""
from __future__ import annotations

import numpy as np

from ..ir import Meta
from .registry import register
from .resize import Resize


class _ScalesOnly(Resize):
    def prepare(self):
        mode = self.attrs.get("mode", "nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if self.opset < 9 and self.op_type == "Upsample":  # opset 7: scales is an attribute
            if "scales" not in self.attrs:
                raise self.fail("attribute scales is required")
            scales = np.asarray(self.attrs["scales"], np.float32)
        else:
            scales = self.const(1, "scales")
        self.attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
        self.inputs = [self.inputs[0], None, Meta(np.dtype(np.float32), (len(scales),))]
        self.consts = [None, None, np.asarray(scales, np.float32)]
        super().prepare()


@register("Upsample", since=7)
class Upsample(_ScalesOnly):
    pass


@register("Resize", since=10)
class Resize10(_ScalesOnly):
    pass
