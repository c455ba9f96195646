"""ImageDecoder through ge atc + run: images encoded by Pillow in the test, decoded back on cpu and
sim (exact pixels for lossless formats); without Pillow, ge atc refuses the node naming the extra."""
import io
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper
from PIL import Image

from ge.core import api
from ge.core.model.errors import GeError


def decoder_model(tmp_path, pixel_format="RGB"):
    node = helper.make_node("ImageDecoder", ["data"], ["pixels"], pixel_format=pixel_format, name="decode")
    g = helper.make_graph([node, helper.make_node("Cast", ["pixels"], ["f"], to=T.FLOAT),
                           helper.make_node("ReduceSum", ["f"], ["total"], keepdims=0)], "img",
                          [helper.make_tensor_value_info("data", T.UINT8, ["n"])],
                          [helper.make_tensor_value_info("pixels", T.UINT8, None),
                           helper.make_tensor_value_info("total", T.FLOAT, None)])
    path = str(tmp_path / "img.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def encoded(pixels: np.ndarray, fmt: str) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format=fmt)
    return np.frombuffer(buf.getvalue(), np.uint8)


@pytest.mark.parametrize("pixel_format", ["RGB", "BGR", "Grayscale"])
def test_images_of_two_sizes_decode_exactly(tmp_path, pixel_format):
    path = decoder_model(tmp_path, pixel_format)
    om = api.atc(path, str(tmp_path / "img"), input_shape={"data": [-1]}).om_path
    rng = np.random.default_rng(0)
    for device in ("cpu", "sim"):
        model_id = api.load_from_file(om, device)
        try:
            for (h, w), fmt in (((5, 7), "PNG"), ((3, 2), "BMP"), ((4, 4), "TIFF")):
                rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
                expected = {"RGB": rgb, "BGR": rgb[..., ::-1],
                            "Grayscale": np.asarray(Image.fromarray(rgb).convert("L"))[..., None]}[pixel_format]
                pixels, total = api.execute(model_id, [encoded(rgb, fmt)])
                np.testing.assert_array_equal(pixels, expected)
                assert total == expected.astype(np.float32).sum()
            with pytest.raises(GeError, match=r"node 'decode' \(ImageDecoder\): cannot decode the image "
                                              r"\(UnidentifiedImageError"):
                api.execute(model_id, [np.arange(20, dtype=np.uint8)])
        finally:
            api.unload(model_id)


def test_without_pillow_ge_atc_names_the_node_and_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # import PIL fails as if it were not installed
    with pytest.raises(GeError, match=r"node 'decode' \(ImageDecoder\): decoding images needs Pillow, an optional "
                                      r"dependency of ge: pip install 'ge\[image\]'"):
        api.atc(decoder_model(tmp_path), str(tmp_path / "img"), input_shape={"data": [-1]})
    assert not (tmp_path / "img.om").exists()
