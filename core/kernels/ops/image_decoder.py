"""ImageDecoder: an encoded image (BMP, JPEG, JPEG 2000, PNG, PNM, TIFF, WebP bytes) to its pixels,
[H, W, 3] RGB or BGR or [H, W, 1] grayscale, uint8. The size is in the bytes, so the node runs on
the dynamic path (a host kernel). Decoding is Pillow's, an optional dependency (`pip install
ge[image]`): onnx made the cases' expected pixels with it, so they match exactly.
"""
from __future__ import annotations

import io

import numpy as np

from ..base import HostKernel
from ..registry import register
from ..values import text

FORMATS = ("RGB", "BGR", "Grayscale")


@register("ImageDecoder", since=20)
class ImageDecoder(HostKernel):
    no_layout = "the decoded image's size is in its bytes"

    def prepare(self):
        self.format = text(self.attr("pixel_format", "RGB"))
        if self.format not in FORMATS:
            raise self.fail(f"pixel_format '{self.format}' must be one of {', '.join(FORMATS)}")
        try:
            from PIL import Image
        except ImportError:
            raise self.fail("decoding images needs Pillow, an optional dependency of ge: "
                            "pip install 'ge[image]' (or pip install pillow)") from None
        self.image = Image

    def compute(self, encoded):
        data = np.asarray(encoded)
        if data.dtype != np.uint8 or data.ndim != 1:
            raise self.fail(f"encoded_stream must be a 1-D uint8 tensor, got {data.dtype} {list(data.shape)}")
        try:
            with self.image.open(io.BytesIO(data.tobytes())) as img:
                pixels = np.asarray(img.convert("L" if self.format == "Grayscale" else "RGB"))
        except Exception as e:  # Pillow's many error types: unknown format, truncated, corrupt data
            raise self.fail(f"cannot decode the image ({type(e).__name__}: {e})") from None
        if self.format == "Grayscale":
            return [np.ascontiguousarray(pixels[..., None])]
        return [np.ascontiguousarray(pixels[..., ::-1] if self.format == "BGR" else pixels)]
