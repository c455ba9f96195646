#!/usr/bin/env python3
"""Build the sample ONNX models used by ge's demos, tests and benchmarks.

Every builder returns an ``onnx.ModelProto`` that passes
``onnx.checker.check_model(model, full_check=True)`` and runs in onnxruntime.
Weights come from ``np.random.default_rng(seed)``, so a given seed always
gives the same bytes.  The graphs are written the way ``torch.onnx.export``
writes them (unfused BatchNormalization, Clip-as-ReLU6 with constant inputs,
Shape/Gather/Unsqueeze/Concat/Reshape chains for dynamic shapes, Constant
nodes for small scalars), because that is what ATC-style compilers are fed.

    resnet50_style     ResNet-50 v1.5 (torchvision): bottlenecks, projection shortcuts
    mobilenetv2_style  MobileNetV2 (torchvision): inverted residuals, depthwise convs, ReLU6
    mobilenetv3_style  MobileNetV3-Large (torchvision): depthwise 3x3/5x5, HardSwish, squeeze-excite
    pplcnet_style      PP-LCNet x1.0 (PaddleClas) as paddle2onnx writes it at opset 11: HardSwish decomposed
    vit_style          ViT-B/16 (torchvision): patch-embedding conv, pre-norm encoder, Gelu (opset 20)
    bert_style         BERT encoder (HuggingFace): dynamic "batch"/"seq", attention mask, Erf-GELU
    tiny_cnn           a ~40 KB CNN, the README demo model (samples/models/tiny_cnn.onnx)
    mobilenetv2_fp16_style, bert_fp16_style   float16 exports of the two (float16_of)
    gpt2_style         GPT-2 decoder + LM head (HuggingFace): Split heads, causal Where, tanh-GELU;
                       past=N: the decoding step with past key/values
    resnet8            CIFAR ResNet-8: 32x32 image, three basic blocks
    silero_vad_style   Silero VAD v5: a streaming frame, an If on the sample rate, LSTM state in and out
    llama_style        a LLaMA-style decoding step (HuggingFace): RMSNorm, rotary, grouped-query attention, SiLU MLP
    dbnet_style        PaddleOCR text detector (paddle2onnx): PP-LCNet, RSE-FPN with Resize, DB head with ConvTranspose
    crnn_lcnet_style   PaddleOCR text recogniser (paddle2onnx): PP-LCNet, bidirectional LSTMs, CTC head
    yolov8_style       Ultralytics YOLOv8n (torch.onnx): SiLU as x * Sigmoid(x), C2f, SPPF, DFL head

Usage::

    python samples/build_samples.py --out DIR [--only name[,name]] [--seed N] [--no-inputs]

writes DIR/<name>.onnx and a seeded sample input next to it
(DIR/<name>_input.npy for single-input models, DIR/<name>_inputs.npz otherwise).
The file is also importable by path (tests use importlib); it is not a package.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import sys
from pathlib import Path
from typing import Callable, Iterator, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PRODUCER_NAME = "ge.samples"
PRODUCER_VERSION = "1"

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64

Dim = int | str  # a static size, or a symbolic dim_param such as "batch"


# --------------------------------------------------------------------------- #
# Graph builder
# --------------------------------------------------------------------------- #
class GraphBuilder:
    """Appends nodes/initializers in topological order and names them like torch.onnx.

    Node names are ``/<innermost scope, dots as slashes>/<OpType>`` (deduplicated) and
    outputs ``<node name>_output_0``.
    ``self.m2`` keeps a rough estimate of each CNN tensor's second moment E[x^2],
    split into a non-negative part (post-ReLU) and a zero-mean symmetric part,
    because ReLU halves only the latter.  ``batch_norm`` divides by it, so the
    running statistics look calibrated (as in a trained network in eval mode)
    and activations stay O(1) through 50 layers of random weights.
    """

    def __init__(self, name: str, seed: int, opset: int, doc: str = ""):
        self.name = name
        self.opset = opset
        self.doc = doc
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.m2: dict[str, tuple[float, float]] = {}  # name -> (non-negative part, symmetric part)
        self._scopes: list[str] = []
        self._used: dict[str, int] = {}
        self._relu6_bounds: tuple[str, str] | None = None

    # ---- naming ---------------------------------------------------------- #
    @contextlib.contextmanager
    def scope(self, name: str) -> Iterator[None]:
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    def _unique(self, base: str) -> str:
        n = self._used.get(base, 0)
        self._used[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    # ---- graph I/O, parameters, constants -------------------------------- #
    def input(self, name: str, elem_type: int, shape: Sequence[Dim]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))
        self.m2[name] = (0.0, 1.0)
        return name

    def output(self, name: str, elem_type: int, shape: Sequence[Dim]) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, elem_type, list(shape)))

    def param(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, shape: Sequence[int], std: float, mean: float = 0.0) -> np.ndarray:
        return (mean + std * self.rng.standard_normal(tuple(shape))).astype(np.float32)

    def uniform(self, shape: Sequence[int], low: float, high: float) -> np.ndarray:
        return self.rng.uniform(low, high, tuple(shape)).astype(np.float32)

    def const(self, value, dtype=None) -> str:
        """A Constant node (how torch.onnx emits scalars and shape pieces)."""
        arr = np.asarray(value, dtype=dtype)
        if dtype is None:
            if arr.dtype.kind == "f":
                arr = arr.astype(np.float32)
            elif arr.dtype.kind in "iu":
                arr = arr.astype(np.int64)
        return self.op("Constant", [], value=numpy_helper.from_array(arr))

    # ---- generic node ---------------------------------------------------- #
    def op(self, op_type: str, inputs: Sequence[str], *, out: str | None = None, **attrs) -> str:
        scope = self._scopes[-1].replace(".", "/") + "/" if self._scopes else ""
        node_name = self._unique(f"/{scope}{op_type}")
        output = out if out is not None else f"{node_name}_output_0"
        self.nodes.append(helper.make_node(op_type, list(inputs), [output], name=node_name, **attrs))
        return output

    def unsqueeze(self, x: str, axes: Sequence[int]) -> str:
        if self.opset >= 13:
            return self.op("Unsqueeze", [x, self.const(list(axes))])
        return self.op("Unsqueeze", [x], axes=list(axes))

    # ---- CNN pieces ------------------------------------------------------ #
    def energy(self, x: str) -> float:
        """Estimated E[x^2] of a CNN activation."""
        return sum(self.m2.get(x, (0.0, 1.0)))

    def conv(self, x: str, cin: int, cout: int, k: int, *, stride: int = 1, group: int = 1,
             name: str) -> str:
        """Bias-free Conv with He-normal (fan_in) weights, 'same' padding for odd k."""
        fan_in = cin // group * k * k
        w = self.param(f"{name}.weight", self.normal([cout, cin // group, k, k], math.sqrt(2.0 / fan_in)))
        pad = k // 2
        with self.scope(name):
            y = self.op("Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride],
                        pads=[pad] * 4, dilations=[1, 1], group=group)
        self.m2[y] = (0.0, 2.0 * self.energy(x))  # He init: E[y^2] = fan_in * (2 / fan_in) * E[x^2]
        return y

    def batch_norm(self, x: str, c: int, *, name: str, eps: float = 1e-5) -> str:
        """Eval-mode BatchNormalization with plausible trained statistics."""
        # running_var = E[x^2] / u with E[u] = 1, so the output scale is right on average
        # (E[1/u] != 1 would compound over 50 BatchNorms)
        var = (self.energy(x) / self.rng.uniform(0.75, 1.25, c)).astype(np.float32)
        mean = self.normal([c], 0.1) * np.sqrt(var)
        gamma = self.normal([c], 0.1, mean=1.0)
        beta = self.normal([c], 0.1)
        ins = [x] + [self.param(f"{name}.{p}", a) for p, a in
                     (("weight", gamma), ("bias", beta), ("running_mean", mean), ("running_var", var))]
        with self.scope(name):
            y = self.op("BatchNormalization", ins, epsilon=eps, momentum=0.9)
        self.m2[y] = (0.0, math.fsum(float(a) ** 2 + float(b) ** 2 for a, b in zip(gamma, beta)) / c)
        return y

    def relu(self, x: str) -> str:
        y = self.op("Relu", [x])
        pos, sym = self.m2.get(x, (0.0, 1.0))
        self.m2[y] = (pos + sym / 2, 0.0)
        return y

    def relu6(self, x: str) -> str:
        """ReLU6 as PyTorch exports it for opset >= 11: Clip(x, min, max) with constant inputs."""
        if self._relu6_bounds is None:
            self._relu6_bounds = (self.const(np.float32(0.0)), self.const(np.float32(6.0)))
        y = self.op("Clip", [x, *self._relu6_bounds])
        pos, sym = self.m2.get(x, (0.0, 1.0))
        self.m2[y] = (pos + sym / 2, 0.0)
        return y

    def add(self, a: str, b: str) -> str:
        y = self.op("Add", [a, b])
        (pa, sa), (pb, sb) = self.m2.get(a, (0.0, 1.0)), self.m2.get(b, (0.0, 1.0))
        self.m2[y] = (pa + pb, sa + sb)
        return y

    def conv_bn(self, x, cin, cout, k, *, stride=1, group=1, conv: str, bn: str) -> str:
        return self.batch_norm(self.conv(x, cin, cout, k, stride=stride, group=group, name=conv), cout, name=bn)

    def conv_bn_relu(self, x, cin, cout, k, *, stride=1, group=1, conv: str, bn: str) -> str:
        y = self.conv_bn(x, cin, cout, k, stride=stride, group=group, conv=conv, bn=bn)
        with self.scope(conv):
            return self.relu(y)

    def conv_bn_relu6(self, x, cin, cout, k, *, stride=1, group=1, conv: str, bn: str) -> str:
        y = self.conv_bn(x, cin, cout, k, stride=stride, group=group, conv=conv, bn=bn)
        with self.scope(conv):
            return self.relu6(y)

    def max_pool(self, x: str, k: int, stride: int, pad: int) -> str:
        y = self.op("MaxPool", [x], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        # the max of n = k*k ReLU'd N(0,1) samples has E[max^2] ~ (1 + 2 ln n) * E[relu^2]
        self.m2[y] = (self.energy(x) * (1 + 2 * math.log(k * k)), 0.0)
        return y

    def global_avg_pool(self, x: str) -> str:
        y = self.op("GlobalAveragePool", [x])
        self.m2[y] = self.m2.get(x, (0.0, 1.0))
        return y

    def gemm(self, x: str, fin: int, fout: int, *, name: str, w_std: float | None = None,
             out: str | None = None) -> str:
        """nn.Linear as Gemm(transB=1); PyTorch's default U(+-1/sqrt(fin)) init unless w_std given."""
        bound = 1.0 / math.sqrt(fin)
        w = self.normal([fout, fin], w_std) if w_std else self.uniform([fout, fin], -bound, bound)
        b = self.uniform([fout], -bound, bound)
        with self.scope(name):
            return self.op("Gemm", [x, self.param(f"{name}.weight", w), self.param(f"{name}.bias", b)],
                           out=out, alpha=1.0, beta=1.0, transB=1)

    # ---- transformer pieces ---------------------------------------------- #
    def linear(self, x: str, fin: int, fout: int, *, name: str, std: float = 0.02,
               out: str | None = None) -> str:
        """nn.Linear as torch exports it for 3-D inputs: MatMul(x, W^T) + bias (W^T stored [fin, fout])."""
        w = self.param(f"{name}.weight", self.normal([fin, fout], std))
        b = self.param(f"{name}.bias", self.normal([fout], std))
        with self.scope(name):
            return self.op("Add", [self.op("MatMul", [x, w]), b], out=out)

    def layer_norm(self, x: str, dim: int, *, name: str, eps: float = 1e-12, out: str | None = None) -> str:
        """LayerNormalization (opset >= 17), or the ReduceMean/Sub/Pow/Sqrt/Div decomposition before it."""
        gamma = self.param(f"{name}.weight", self.normal([dim], 0.02, mean=1.0))
        beta = self.param(f"{name}.bias", self.normal([dim], 0.02))
        with self.scope(name):
            if self.opset >= 17:
                return self.op("LayerNormalization", [x, gamma, beta], out=out, axis=-1, epsilon=eps)
            mean = self.op("ReduceMean", [x], axes=[-1], keepdims=1)
            centered = self.op("Sub", [x, mean])
            var = self.op("ReduceMean", [self.op("Pow", [centered, self.const(np.float32(2.0))])],
                          axes=[-1], keepdims=1)
            std = self.op("Sqrt", [self.op("Add", [var, self.const(np.float32(eps))])])
            normed = self.op("Div", [centered, std])
            return self.op("Add", [self.op("Mul", [normed, gamma]), beta], out=out)

    def dims(self, x: str, axes: Sequence[int]) -> list[str]:
        """Runtime sizes of x along axes, each as a 1-element int64 tensor: Shape -> Gather -> Unsqueeze."""
        shape = self.op("Shape", [x])
        return [self.unsqueeze(self.op("Gather", [shape, self.const(a)], axis=0), [0]) for a in axes]

    # ---- finish ---------------------------------------------------------- #
    def build(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                  initializer=self.initializers, doc_string=self.doc)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER_NAME,
                                  producer_version=PRODUCER_VERSION,
                                  ir_version=helper.find_min_ir_version_for(opsets))
        model.doc_string = self.doc
        return model


def _check_opset(opset: int, minimum: int) -> None:
    if opset < minimum:
        raise ValueError(f"opset {opset} is not supported here (need >= {minimum})")


def _signature(fn_name: str, **kwargs) -> str:
    return f"{fn_name}(" + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()) + ")"


# --------------------------------------------------------------------------- #
# ResNet-50 (He et al. 2015; torchvision v1.5: stride on the 3x3 conv)
# --------------------------------------------------------------------------- #
def _bottleneck(g: GraphBuilder, x: str, cin: int, planes: int, stride: int, name: str) -> tuple[str, int]:
    cout = planes * 4  # expansion
    with g.scope(name):
        out = g.conv_bn_relu(x, cin, planes, 1, conv=f"{name}.conv1", bn=f"{name}.bn1")
        out = g.conv_bn_relu(out, planes, planes, 3, stride=stride, conv=f"{name}.conv2", bn=f"{name}.bn2")
        out = g.conv_bn(out, planes, cout, 1, conv=f"{name}.conv3", bn=f"{name}.bn3")
        shortcut = x
        if stride != 1 or cin != cout:  # projection shortcut
            shortcut = g.conv_bn(x, cin, cout, 1, stride=stride,
                                 conv=f"{name}.downsample.0", bn=f"{name}.downsample.1")
        return g.relu(g.add(out, shortcut)), cout


def resnet50_style(batch: int = 1, image: int = 224, width: int = 64,
                   blocks: Sequence[int] = (3, 4, 6, 3), classes: int = 1000,
                   opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """ResNet-50: image [batch, 3, image, image] float32 -> logits [batch, classes]."""
    _check_opset(opset, 11)
    doc = _signature("resnet50_style", batch=batch, image=image, width=width, blocks=tuple(blocks),
                     classes=classes, opset=opset, seed=seed)
    g = GraphBuilder("resnet50_style", seed, opset, doc)
    x = g.input("image", FLOAT, [batch, 3, image, image])

    x = g.conv_bn_relu(x, 3, width, 7, stride=2, conv="conv1", bn="bn1")
    with g.scope("maxpool"):
        x = g.max_pool(x, 3, stride=2, pad=1)

    cin = width
    for stage, n_blocks in enumerate(blocks):
        planes = width * 2 ** stage
        for i in range(n_blocks):
            stride = 2 if stage > 0 and i == 0 else 1
            x, cin = _bottleneck(g, x, cin, planes, stride, name=f"layer{stage + 1}.{i}")

    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    g.gemm(x, cin, classes, name="fc", out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# MobileNetV2 (Sandler et al. 2018; torchvision layout and names)
# --------------------------------------------------------------------------- #
# expansion t, output channels c, repeats n, first stride s
_MOBILENETV2_SETTINGS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                         (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]


def _make_divisible(v: float, divisor: int = 8) -> int:
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def _inverted_residual(g: GraphBuilder, x: str, cin: int, cout: int, stride: int, t: int, name: str) -> str:
    hidden = int(round(cin * t))
    with g.scope(name):
        y, i = x, 0
        if t != 1:  # 1x1 expand
            y = g.conv_bn_relu6(y, cin, hidden, 1, conv=f"{name}.conv.0.0", bn=f"{name}.conv.0.1")
            i = 1
        # 3x3 depthwise
        y = g.conv_bn_relu6(y, hidden, hidden, 3, stride=stride, group=hidden,
                            conv=f"{name}.conv.{i}.0", bn=f"{name}.conv.{i}.1")
        # 1x1 linear projection (no activation)
        y = g.conv_bn(y, hidden, cout, 1, conv=f"{name}.conv.{i + 1}", bn=f"{name}.conv.{i + 2}")
        if stride == 1 and cin == cout:
            y = g.add(x, y)
        return y


def mobilenetv2_style(batch: int = 1, image: int = 224, width_mult: float = 1.0, classes: int = 1000,
                      opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV2: image [batch, 3, image, image] float32 -> logits [batch, classes]."""
    _check_opset(opset, 11)
    doc = _signature("mobilenetv2_style", batch=batch, image=image, width_mult=width_mult,
                     classes=classes, opset=opset, seed=seed)
    g = GraphBuilder("mobilenetv2_style", seed, opset, doc)
    x = g.input("image", FLOAT, [batch, 3, image, image])

    cin = _make_divisible(32 * width_mult)
    last_channel = _make_divisible(1280 * max(1.0, width_mult))
    x = g.conv_bn_relu6(x, 3, cin, 3, stride=2, conv="features.0.0", bn="features.0.1")
    idx = 1
    for t, c, n, s in _MOBILENETV2_SETTINGS:
        cout = _make_divisible(c * width_mult)
        for i in range(n):
            x = _inverted_residual(g, x, cin, cout, s if i == 0 else 1, t, name=f"features.{idx}")
            cin, idx = cout, idx + 1
    x = g.conv_bn_relu6(x, cin, last_channel, 1, conv=f"features.{idx}.0", bn=f"features.{idx}.1")

    x = g.global_avg_pool(x)
    x = g.op("Reshape", [x, g.const([batch, -1])])  # torch: x.reshape(x.shape[0], -1), shapes folded
    g.gemm(x, last_channel, classes, name="classifier.1", out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# BERT encoder (Devlin et al. 2018; HuggingFace BertModel as torch.onnx exports it)
# --------------------------------------------------------------------------- #
def _extended_attention_mask(g: GraphBuilder, mask: str, style: str) -> str:
    """[batch, seq] int64 1/0 mask -> additive float mask [batch, 1, 1, seq]."""
    with g.scope("get_extended_attention_mask"):
        if style == "where":  # masked_fill(mask == 0, finfo(float32).min)
            is_pad = g.op("Equal", [mask, g.const(0)])
            add = g.op("Where", [is_pad, g.const(np.finfo(np.float32).min), g.const(np.float32(0.0))])
            return g.unsqueeze(add, [1, 2])
        if style == "sub_mul":  # (1.0 - mask[:, None, None, :].float()) * -10000.0
            m = g.op("Cast", [g.unsqueeze(mask, [1, 2])], to=FLOAT)
            return g.op("Mul", [g.op("Sub", [g.const(np.float32(1.0)), m]), g.const(np.float32(-10000.0))])
    raise ValueError(f"mask_style must be 'where' or 'sub_mul', not {style!r}")


def _split_heads(g: GraphBuilder, x: str, heads: int, head_dim: int, perm: Sequence[int]) -> str:
    """x.view(b, s, heads, head_dim).permute(perm), with b and s read from Shape at run time."""
    b, s = g.dims(x, [0, 1])
    shape = g.op("Concat", [b, s, g.const([heads]), g.const([head_dim])], axis=0)
    return g.op("Transpose", [g.op("Reshape", [x, shape])], perm=list(perm))


def _self_attention(g: GraphBuilder, x: str, mask: str, hidden: int, heads: int, name: str) -> str:
    head_dim = hidden // heads
    with g.scope(f"{name}.self"):
        q = _split_heads(g, g.linear(x, hidden, hidden, name=f"{name}.self.query"), heads, head_dim, [0, 2, 1, 3])
        k = _split_heads(g, g.linear(x, hidden, hidden, name=f"{name}.self.key"), heads, head_dim, [0, 2, 3, 1])
        v = _split_heads(g, g.linear(x, hidden, hidden, name=f"{name}.self.value"), heads, head_dim, [0, 2, 1, 3])
        scores = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(math.sqrt(head_dim)))])
        probs = g.op("Softmax", [g.op("Add", [scores, mask])], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        b, s = g.dims(ctx, [0, 1])
        ctx = g.op("Reshape", [ctx, g.op("Concat", [b, s, g.const([hidden])], axis=0)])
    with g.scope(f"{name}.output"):
        y = g.linear(ctx, hidden, hidden, name=f"{name}.output.dense")
        return g.layer_norm(g.op("Add", [y, x]), hidden, name=f"{name}.output.LayerNorm")


def _gelu_erf(g: GraphBuilder, x: str, name: str) -> str:
    """x * 0.5 * (1 + erf(x / sqrt(2))), exactly as torch.onnx writes F.gelu."""
    with g.scope(name):
        erf = g.op("Erf", [g.op("Div", [x, g.const(np.float32(math.sqrt(2.0)))])])
        y = g.op("Mul", [x, g.op("Add", [erf, g.const(np.float32(1.0))])])
        return g.op("Mul", [y, g.const(np.float32(0.5))])


def _encoder_layer(g: GraphBuilder, x: str, mask: str, hidden: int, heads: int, intermediate: int,
                   name: str, out: str | None) -> str:
    with g.scope(name):
        x = _self_attention(g, x, mask, hidden, heads, name=f"{name}.attention")
        h = g.linear(x, hidden, intermediate, name=f"{name}.intermediate.dense")
        h = _gelu_erf(g, h, name=f"{name}.intermediate.intermediate_act_fn")
        y = g.linear(h, intermediate, hidden, name=f"{name}.output.dense")
        return g.layer_norm(g.op("Add", [y, x]), hidden, name=f"{name}.output.LayerNorm", out=out)


def bert_style(layers: int = 4, hidden: int = 256, heads: int = 4, intermediate: int = 1024,
               vocab: int = 1000, max_pos: int = 512, opset: int = 17, seed: int = 0,
               mask_style: str = "where") -> onnx.ModelProto:
    """BERT encoder.

    Inputs  input_ids, attention_mask: int64 [batch, seq] (symbolic dims).
    Outputs last_hidden_state [batch, seq, hidden], pooler_output [batch, hidden].
    opset >= 13; below 17 LayerNormalization is written out as ReduceMean/Sub/Pow/Sqrt/Div.
    mask_style "where": Where(Equal(mask, 0), finfo.min, 0); "sub_mul": (1 - mask) * -10000.
    Weights, biases, LayerNorm beta ~ N(0, 0.02); LayerNorm gamma ~ N(1, 0.02).
    """
    _check_opset(opset, 13)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if layers < 1:
        raise ValueError("layers must be >= 1")
    doc = _signature("bert_style", layers=layers, hidden=hidden, heads=heads, intermediate=intermediate,
                     vocab=vocab, max_pos=max_pos, opset=opset, seed=seed, mask_style=mask_style)
    g = GraphBuilder("bert_style", seed, opset, doc)
    input_ids = g.input("input_ids", INT64, ["batch", "seq"])
    attention_mask = g.input("attention_mask", INT64, ["batch", "seq"])

    with g.scope("embeddings"):
        word = g.param("embeddings.word_embeddings.weight", g.normal([vocab, hidden], 0.02))
        position = g.param("embeddings.position_embeddings.weight", g.normal([max_pos, hidden], 0.02))
        token_type = g.param("embeddings.token_type_embeddings.weight", g.normal([2, hidden], 0.02))

        seq_len = g.op("Gather", [g.op("Shape", [input_ids]), g.const(1)], axis=0)  # int64 scalar
        position_ids = g.unsqueeze(g.op("Range", [g.const(0), seq_len, g.const(1)]), [0])  # [1, seq]
        token_type_ids = g.op("ConstantOfShape", [g.op("Shape", [input_ids])],
                              value=numpy_helper.from_array(np.zeros([1], np.int64)))

        x = g.op("Add", [g.op("Gather", [word, input_ids], axis=0),
                         g.op("Gather", [token_type, token_type_ids], axis=0)])
        x = g.op("Add", [x, g.op("Gather", [position, position_ids], axis=0)])
        x = g.layer_norm(x, hidden, name="embeddings.LayerNorm")

    mask = _extended_attention_mask(g, attention_mask, mask_style)
    for i in range(layers):
        x = _encoder_layer(g, x, mask, hidden, heads, intermediate, name=f"encoder.layer.{i}",
                           out="last_hidden_state" if i == layers - 1 else None)

    with g.scope("pooler"):
        first_token = g.op("Gather", [x, g.const(0)], axis=1)  # hidden_states[:, 0]
        g.op("Tanh", [g.linear(first_token, hidden, hidden, name="pooler.dense")], out="pooler_output")

    g.output("last_hidden_state", FLOAT, ["batch", "seq", hidden])
    g.output("pooler_output", FLOAT, ["batch", hidden])
    return g.build()


# --------------------------------------------------------------------------- #
# tiny CNN: the README demo model
# --------------------------------------------------------------------------- #
def tiny_cnn(opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """image [1, 3, 32, 32] float32 -> probs [1, 10] (Softmax over 10 classes); ~10k parameters."""
    _check_opset(opset, 11)
    g = GraphBuilder("tiny_cnn", seed, opset, _signature("tiny_cnn", opset=opset, seed=seed))
    x = g.input("image", FLOAT, [1, 3, 32, 32])

    x = g.conv_bn_relu(x, 3, 16, 3, conv="stem.conv", bn="stem.bn")                   # 16x32x32
    x = g.conv_bn_relu(x, 16, 16, 3, group=16, conv="dw.conv", bn="dw.bn")            # depthwise
    with g.scope("pool"):
        x = g.max_pool(x, 2, stride=2, pad=0)                                          # 16x16x16
    with g.scope("block"):                                                             # basic residual block
        y = g.conv_bn_relu(x, 16, 16, 3, conv="block.conv1", bn="block.bn1")
        y = g.conv_bn(y, 16, 16, 3, conv="block.conv2", bn="block.bn2")
        x = g.relu(g.add(x, y))
    x = g.conv_bn_relu(x, 16, 32, 3, stride=2, conv="down.conv", bn="down.bn")         # 32x8x8

    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    logits = g.gemm(x, 32, 10, name="fc", w_std=0.5)  # large enough for a confident-looking top-1
    g.op("Softmax", [logits], out="probs", axis=1)
    g.output("probs", FLOAT, [1, 10])
    return g.build()


# --------------------------------------------------------------------------- #
# detection: CNN backbone -> box decoding -> NonMaxSuppression -> Gather of kept boxes
# --------------------------------------------------------------------------- #
def detection_style(image: int = 32, max_boxes: int = 50, iou: float = 0.4, score: float = 0.7,
                    opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """image [1, 3, image, image] -> kept_boxes [N, 4], kept_scores [N]: N depends on the data.
    The backbone and box decoding have static shapes (a KNOWN partition); NonMaxSuppression and
    what follows it do not (UNKNOWN)."""
    _check_opset(opset, 13)
    g = GraphBuilder("detection_style", seed, opset,
                     _signature("detection_style", image=image, max_boxes=max_boxes, iou=iou, score=score,
                                opset=opset, seed=seed))
    x = g.input("image", FLOAT, [1, 3, image, image])
    x = g.conv_bn_relu(x, 3, 16, 3, stride=2, conv="stem.conv", bn="stem.bn")
    x = g.conv_bn_relu(x, 16, 32, 3, stride=2, conv="body.conv", bn="body.bn")
    cells = (image // 4) ** 2
    head = g.conv(x, 32, 5, 1, name="head.conv")                         # [1, 5, h, w]: 4 deltas + 1 logit
    head = g.op("Transpose", [g.op("Reshape", [head, g.const([1, 5, cells])])], perm=[0, 2, 1])  # [1, cells, 5]
    deltas = g.op("Slice", [head, g.const([0]), g.const([4]), g.const([2])])
    logits = g.op("Slice", [head, g.const([4]), g.const([5]), g.const([2])])
    side = image // 4
    cy, cx = np.meshgrid((np.arange(side) + 0.5) / side, (np.arange(side) + 0.5) / side, indexing="ij")
    half = 0.5 / side * 3
    anchors = np.stack([cy - half, cx - half, cy + half, cx + half], -1).reshape(1, cells, 4).astype(np.float32)
    boxes = g.op("Add", [g.param("anchors", anchors), g.op("Mul", [deltas, g.const(0.1)])])  # [1, cells, 4]
    scores = g.op("Transpose", [g.op("Sigmoid", [logits])], perm=[0, 2, 1])                  # [1, 1, cells]
    selected = g.op("NonMaxSuppression", [boxes, scores, g.const([max_boxes]), g.const([iou]), g.const([score])])
    index = g.op("Gather", [selected, g.const(2)], axis=1)                                  # [N] box indices
    g.op("Gather", [g.op("Squeeze", [boxes, g.const([0])]), index], out="kept_boxes", axis=0)
    g.op("Gather", [g.op("Reshape", [scores, g.const([-1])]), index], out="kept_scores", axis=0)
    g.output("kept_boxes", FLOAT, ["detections", 4])
    g.output("kept_scores", FLOAT, ["detections"])
    return g.build()


# GoogLeNet's Inception blocks (torchvision config): in, 1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5" (a
# 3x3 in torchvision), pool projection. Four independent branches: what the parallel executor overlaps.
INCEPTION_BLOCKS = (("3a", 192, 64, 96, 128, 16, 32, 32), ("3b", 256, 128, 128, 192, 32, 96, 64), "pool",
                    ("4a", 480, 192, 96, 208, 16, 48, 64), ("4b", 512, 160, 112, 224, 24, 64, 64),
                    ("4c", 512, 128, 128, 256, 24, 64, 64))


def _inception(g: GraphBuilder, x: str, spec: tuple) -> tuple[str, int]:
    name, cin, c1, r3, c3, r5, c5, pp = spec
    with g.scope(f"inception{name}"):
        b1 = g.conv_bn_relu(x, cin, c1, 1, conv=f"inception{name}.branch1.conv", bn=f"inception{name}.branch1.bn")
        b2 = g.conv_bn_relu(x, cin, r3, 1, conv=f"inception{name}.branch2.0.conv", bn=f"inception{name}.branch2.0.bn")
        b2 = g.conv_bn_relu(b2, r3, c3, 3, conv=f"inception{name}.branch2.1.conv", bn=f"inception{name}.branch2.1.bn")
        b3 = g.conv_bn_relu(x, cin, r5, 1, conv=f"inception{name}.branch3.0.conv", bn=f"inception{name}.branch3.0.bn")
        b3 = g.conv_bn_relu(b3, r5, c5, 3, conv=f"inception{name}.branch3.1.conv", bn=f"inception{name}.branch3.1.bn")
        b4 = g.max_pool(x, 3, stride=1, pad=1)
        b4 = g.conv_bn_relu(b4, cin, pp, 1, conv=f"inception{name}.branch4.1.conv", bn=f"inception{name}.branch4.1.bn")
        return g.op("Concat", [b1, b2, b3, b4], axis=1), c1 + c3 + c5 + pp


def inception_style(batch: int = 1, image: int = 224, blocks: int = len(INCEPTION_BLOCKS), classes: int = 1000,
                    opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """GoogLeNet-style: stem, then Inception blocks of four parallel branches joined by Concat."""
    _check_opset(opset, 11)
    g = GraphBuilder("inception_style", seed, opset,
                     _signature("inception_style", batch=batch, image=image, blocks=blocks, classes=classes,
                                opset=opset, seed=seed))
    x = g.input("image", FLOAT, [batch, 3, image, image])
    x = g.conv_bn_relu(x, 3, 64, 7, stride=2, conv="conv1.conv", bn="conv1.bn")
    with g.scope("maxpool1"):
        x = g.max_pool(x, 3, stride=2, pad=1)
    x = g.conv_bn_relu(x, 64, 64, 1, conv="conv2.conv", bn="conv2.bn")
    x = g.conv_bn_relu(x, 64, 192, 3, conv="conv3.conv", bn="conv3.bn")
    with g.scope("maxpool2"):
        x = g.max_pool(x, 3, stride=2, pad=1)
    c = 192
    for spec in INCEPTION_BLOCKS[:blocks]:
        if spec == "pool":
            with g.scope("maxpool3"):
                x = g.max_pool(x, 3, stride=2, pad=1)
        else:
            x, c = _inception(g, x, spec)
    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    g.gemm(x, c, classes, name="fc", out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# MobileNetV3-Large (Howard et al. 2019; torchvision layout and names), also the
# PP-LCNet family's pieces: depthwise convs, HardSwish, squeeze-excite with HardSigmoid
# --------------------------------------------------------------------------- #
# kernel, expanded channels, output channels, squeeze-excite, activation ("RE" Relu, "HS" HardSwish), stride
_MOBILENETV3_LARGE = [(3, 16, 16, False, "RE", 1), (3, 64, 24, False, "RE", 2), (3, 72, 24, False, "RE", 1),
                      (5, 72, 40, True, "RE", 2), (5, 120, 40, True, "RE", 1), (5, 120, 40, True, "RE", 1),
                      (3, 240, 80, False, "HS", 2), (3, 200, 80, False, "HS", 1), (3, 184, 80, False, "HS", 1),
                      (3, 184, 80, False, "HS", 1), (3, 480, 112, True, "HS", 1), (3, 672, 112, True, "HS", 1),
                      (5, 672, 160, True, "HS", 2), (5, 960, 160, True, "HS", 1), (5, 960, 160, True, "HS", 1)]


def _hardswish(g: GraphBuilder, x: str) -> str:
    y = g.op("HardSwish", [x])
    g.m2[y] = (g.energy(x) / 3, 0.0)  # E[hardswish(x)^2] = 0.33 for x ~ N(0, 1)
    return y


def _activation(g: GraphBuilder, x: str, kind: str) -> str:
    return g.relu(x) if kind == "RE" else _hardswish(g, x)


def _squeeze_excite(g: GraphBuilder, x: str, c: int, name: str) -> str:
    """torchvision's SqueezeExcitation: GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv ->
    HardSigmoid -> Mul with x (the 1x1 convs carry biases)."""
    squeeze = _make_divisible(c // 4)
    with g.scope(name):
        s = g.global_avg_pool(x)
        for i, (cin, cout) in enumerate(((c, squeeze), (squeeze, c))):
            bound = 1.0 / math.sqrt(cin)
            w = g.param(f"{name}.fc{i + 1}.weight", g.normal([cout, cin, 1, 1], math.sqrt(2.0 / cin)))
            b = g.param(f"{name}.fc{i + 1}.bias", g.uniform([cout], -bound, bound))
            with g.scope(f"{name}.fc{i + 1}"):
                s = g.op("Conv", [s, w, b], kernel_shape=[1, 1], strides=[1, 1], pads=[0] * 4, dilations=[1, 1],
                         group=1)
            if i == 0:
                s = g.op("Relu", [s])
        # torch's F.hardsigmoid: relu6(x + 3) / 6
        scale = g.op("HardSigmoid", [s], alpha=1.0 / 6, beta=0.5)
        y = g.op("Mul", [x, scale])
    g.m2[y] = tuple(0.4 * v for v in g.m2.get(x, (0.0, 1.0)))
    return y


def mobilenetv3_style(batch: int = 1, image: int = 224, width_mult: float = 1.0, classes: int = 1000,
                      opset: int = 17, seed: int = 0) -> onnx.ModelProto:
    """MobileNetV3-Large: image [batch, 3, image, image] float32 -> logits [batch, classes].
    Inverted residuals with 3x3 and 5x5 depthwise convs, Relu or HardSwish, squeeze-excite
    (HardSigmoid gates), a HardSwish head; BatchNormalization unfused, as torch exports it."""
    _check_opset(opset, 14)  # HardSwish
    doc = _signature("mobilenetv3_style", batch=batch, image=image, width_mult=width_mult, classes=classes,
                     opset=opset, seed=seed)
    g = GraphBuilder("mobilenetv3_style", seed, opset, doc)
    x = g.input("image", FLOAT, [batch, 3, image, image])

    cin = _make_divisible(16 * width_mult)
    x = g.conv_bn(x, 3, cin, 3, stride=2, conv="features.0.0", bn="features.0.1")
    with g.scope("features.0"):
        x = _hardswish(g, x)
    for idx, (k, exp, cout, se, act, stride) in enumerate(_MOBILENETV3_LARGE, start=1):
        exp, cout = _make_divisible(exp * width_mult), _make_divisible(cout * width_mult)
        name = f"features.{idx}"
        with g.scope(name):
            y, i = x, 0
            if exp != cin:  # 1x1 expand
                y = g.conv_bn(y, cin, exp, 1, conv=f"{name}.block.0.0", bn=f"{name}.block.0.1")
                y, i = _activation(g, y, act), 1
            y = g.conv_bn(y, exp, exp, k, stride=stride, group=exp, conv=f"{name}.block.{i}.0",
                          bn=f"{name}.block.{i}.1")
            y = _activation(g, y, act)
            if se:
                y = _squeeze_excite(g, y, exp, name=f"{name}.block.{i + 1}")
                i += 1
            y = g.conv_bn(y, exp, cout, 1, conv=f"{name}.block.{i + 1}.0", bn=f"{name}.block.{i + 1}.1")
            if stride == 1 and cin == cout:
                y = g.add(x, y)
        x, cin = y, cout
    last_conv = 6 * cin
    idx = len(_MOBILENETV3_LARGE) + 1
    x = g.conv_bn(x, cin, last_conv, 1, conv=f"features.{idx}.0", bn=f"features.{idx}.1")
    with g.scope(f"features.{idx}"):
        x = _hardswish(g, x)

    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    last_channel = _make_divisible(1280 * width_mult)
    x = g.gemm(x, last_conv, last_channel, name="classifier.0")
    with g.scope("classifier.1"):
        x = g.op("HardSwish", [x])
    g.gemm(x, last_channel, classes, name="classifier.3", out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# PP-LCNet (Cui et al. 2021; PaddleClas layout) as paddle2onnx writes it
# --------------------------------------------------------------------------- #
# kernel, input channels, output channels, stride, squeeze-excite (x1.0, before the scale)
_PPLCNET_BLOCKS = [(3, 16, 32, 1, False), (3, 32, 64, 2, False), (3, 64, 64, 1, False), (3, 64, 128, 2, False),
                   (3, 128, 128, 1, False), (3, 128, 256, 2, False)] + [(5, 256, 256, 1, False)] * 5 + \
                  [(5, 256, 512, 2, True), (5, 512, 512, 1, True)]


def _paddle_hardswish(g: GraphBuilder, x: str) -> str:
    """paddle's hard_swish as paddle2onnx maps it: HardSwish from opset 14, before it (its Opset7
    mapper, PaddleOCR's and PaddleClas's usual --opset_version 11) Div(Mul(x, Clip(Add(x, 3), 0, 6)), 6)
    with scalar Constant nodes (the Clip's bounds as inputs from opset 11, attributes before)."""
    if g.opset >= 14:
        return _hardswish(g, x)
    shifted = g.op("Add", [x, g.const(np.float32(3.0))])
    if g.opset >= 11:
        gate = g.op("Clip", [shifted, g.const(np.float32(0.0)), g.const(np.float32(6.0))])
    else:
        gate = g.op("Clip", [shifted], min=0.0, max=6.0)
    y = g.op("Div", [g.op("Mul", [x, gate]), g.const(np.float32(6.0))])
    g.m2[y] = (g.energy(x) / 3, 0.0)
    return y


def _pplcnet_conv_bn(g: GraphBuilder, x: str, cin: int, cout: int, k: int, *, stride: int = 1, group: int = 1,
                     name: str) -> str:
    """PaddleClas's ConvBNLayer: bias-free Conv, BatchNorm, Hardswish."""
    y = g.conv_bn(x, cin, cout, k, stride=stride, group=group, conv=f"{name}.conv", bn=f"{name}.bn")
    with g.scope(name):
        return _paddle_hardswish(g, y)


def _pplcnet_se(g: GraphBuilder, x: str, c: int, name: str) -> str:
    """PaddleClas's SEModule: GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv -> HardSigmoid (paddle's
    nn.Hardsigmoid: slope 0.1666667, offset 0.5) -> Mul(x, gate)."""
    with g.scope(name):
        s = g.global_avg_pool(x)
        for i, (cin, cout) in enumerate(((c, c // 4), (c // 4, c))):
            bound = 1.0 / math.sqrt(cin)
            w = g.param(f"{name}.conv{i + 1}.weight", g.normal([cout, cin, 1, 1], math.sqrt(2.0 / cin)))
            b = g.param(f"{name}.conv{i + 1}.bias", g.uniform([cout], -bound, bound))
            s = g.op("Conv", [s, w, b], kernel_shape=[1, 1], strides=[1, 1], pads=[0] * 4, dilations=[1, 1], group=1)
            if i == 0:
                s = g.op("Relu", [s])
        y = g.op("Mul", [x, g.op("HardSigmoid", [s], alpha=0.1666667, beta=0.5)])
    g.m2[y] = tuple(0.4 * v for v in g.m2.get(x, (0.0, 1.0)))
    return y


def pplcnet_style(batch: int = 1, image: int = 224, scale: float = 1.0, classes: int = 1000, opset: int = 11,
                  seed: int = 0) -> onnx.ModelProto:
    """PP-LCNet (PaddleClas, the backbone of PaddleOCR's and PaddleDetection's light models): image
    [batch, 3, image, image] float32 -> logits [batch, classes]. Depthwise-separable blocks (3x3 and
    5x5 depthwise convs, HardSwish after every conv), squeeze-excite in the last two, a bias-free 1x1
    "last conv" to 1280 with HardSwish, a Linear head (MatMul + Add). Written as paddle2onnx writes
    it: BatchNormalization unfused, and at the default opset 11 HardSwish decomposed (_paddle_hardswish)."""
    _check_opset(opset, 9)
    doc = _signature("pplcnet_style", batch=batch, image=image, scale=scale, classes=classes, opset=opset, seed=seed)
    g = GraphBuilder("pplcnet_style", seed, opset, doc)
    x = g.input("x", FLOAT, [batch, 3, image, image])
    x = _pplcnet_conv_bn(g, x, 3, _make_divisible(16 * scale), 3, stride=2, name="conv1")
    for idx, (k, cin, cout, stride, se) in enumerate(_PPLCNET_BLOCKS):
        cin, cout = _make_divisible(cin * scale), _make_divisible(cout * scale)
        name = f"blocks.{idx}"
        x = _pplcnet_conv_bn(g, x, cin, cin, k, stride=stride, group=cin, name=f"{name}.dw_conv")
        if se:
            x = _pplcnet_se(g, x, cin, name=f"{name}.se")
        x = _pplcnet_conv_bn(g, x, cin, cout, 1, name=f"{name}.pw_conv")
    cin = _make_divisible(_PPLCNET_BLOCKS[-1][2] * scale)
    x = g.global_avg_pool(x)
    x = g.conv(x, cin, 1280, 1, name="last_conv")
    with g.scope("last_conv"):
        x = _paddle_hardswish(g, x)
    x = g.op("Flatten", [x], axis=1)
    bound = 1.0 / math.sqrt(1280)
    w = g.param("fc.weight", g.uniform([1280, classes], -bound, bound))  # paddle's Linear: [in, out]
    b = g.param("fc.bias", g.uniform([classes], -bound, bound))
    with g.scope("fc"):
        g.op("Add", [g.op("MatMul", [x, w]), b], out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# ViT (Dosovitskiy et al. 2020; torchvision vit_b_16 layout and names)
# --------------------------------------------------------------------------- #
def _vit_attention(g: GraphBuilder, x: str, tokens: int, hidden: int, heads: int, name: str) -> str:
    head_dim = hidden // heads
    batch_first = [-1, tokens, heads, head_dim]  # static shapes, as torch exports them with fixed inputs
    with g.scope(name):
        def split(t: str, perm: list[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, g.const(batch_first)])], perm=perm)
        q = split(g.linear(x, hidden, hidden, name=f"{name}.q"), [0, 2, 1, 3])
        k = split(g.linear(x, hidden, hidden, name=f"{name}.k"), [0, 2, 3, 1])
        v = split(g.linear(x, hidden, hidden, name=f"{name}.v"), [0, 2, 1, 3])
        scores = g.op("Mul", [g.op("MatMul", [q, k]), g.const(np.float32(1.0 / math.sqrt(head_dim)))])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, g.const([-1, tokens, hidden])])
        return g.linear(ctx, hidden, hidden, name=f"{name}.out_proj")


def _gelu(g: GraphBuilder, x: str, name: str) -> str:
    """Gelu (opset >= 20), or torch's Erf decomposition before it."""
    if g.opset >= 20:
        with g.scope(name):
            return g.op("Gelu", [x])
    return _gelu_erf(g, x, name)


def vit_style(batch: int = 1, image: int = 224, patch: int = 16, layers: int = 12, hidden: int = 768,
              heads: int = 12, mlp: int = 3072, classes: int = 1000, opset: int = 20,
              seed: int = 0) -> onnx.ModelProto:
    """ViT-B/16 by default: image [batch, 3, image, image] float32 -> logits [batch, classes].
    A patch-embedding Conv (patch x patch, stride patch), a class token, learned position
    embeddings, pre-norm encoder layers (LayerNormalization, attention, an MLP with Gelu), the
    class token's final LayerNorm and a linear head. opset >= 17; below 20 Gelu is torch's Erf form."""
    _check_opset(opset, 17)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if image % patch:
        raise ValueError(f"image ({image}) must be a multiple of patch ({patch})")
    doc = _signature("vit_style", batch=batch, image=image, patch=patch, layers=layers, hidden=hidden, heads=heads,
                     mlp=mlp, classes=classes, opset=opset, seed=seed)
    g = GraphBuilder("vit_style", seed, opset, doc)
    x = g.input("image", FLOAT, [batch, 3, image, image])
    tokens = (image // patch) ** 2 + 1

    fan_in = 3 * patch * patch
    w = g.param("conv_proj.weight", g.normal([hidden, 3, patch, patch], math.sqrt(1.0 / fan_in)))
    b = g.param("conv_proj.bias", g.normal([hidden], 0.02))
    with g.scope("conv_proj"):
        x = g.op("Conv", [x, w, b], kernel_shape=[patch, patch], strides=[patch, patch], pads=[0] * 4,
                 dilations=[1, 1], group=1)
    x = g.op("Transpose", [g.op("Reshape", [x, g.const([batch, hidden, tokens - 1])])], perm=[0, 2, 1])
    cls = g.param("class_token", g.normal([1, 1, hidden], 0.02))
    cls = g.op("Expand", [cls, g.const([batch, 1, hidden])])
    x = g.op("Concat", [cls, x], axis=1)
    with g.scope("encoder"):
        x = g.op("Add", [x, g.param("encoder.pos_embedding", g.normal([1, tokens, hidden], 0.02))])
    for i in range(layers):
        name = f"encoder.layers.encoder_layer_{i}"
        with g.scope(name):
            y = g.layer_norm(x, hidden, name=f"{name}.ln_1", eps=1e-6)
            x = g.op("Add", [x, _vit_attention(g, y, tokens, hidden, heads, name=f"{name}.self_attention")])
            y = g.layer_norm(x, hidden, name=f"{name}.ln_2", eps=1e-6)
            y = _gelu(g, g.linear(y, hidden, mlp, name=f"{name}.mlp.0"), name=f"{name}.mlp.1")
            x = g.op("Add", [x, g.linear(y, mlp, hidden, name=f"{name}.mlp.3")])
    x = g.layer_norm(x, hidden, name="encoder.ln", eps=1e-6)
    x = g.op("Gather", [x, g.const(0)], axis=1)  # the class token: x[:, 0]
    g.gemm(x, hidden, classes, name="heads.head", out="logits")
    g.output("logits", FLOAT, [batch, classes])
    return g.build()


def whisper_encoder_style(batch: int = 1, mels: int = 80, frames: int = 3000, layers: int = 4, hidden: int = 384,
                          heads: int = 6, ffn: int = 1536, classes: int | None = None, seed: int = 0) -> onnx.ModelProto:
    """Whisper-tiny's encoder by default, as torch.onnx writes HuggingFace's WhisperEncoder (opset 17):
    input_features [batch, mels, frames] float32 -> last_hidden_state [batch, frames / 2, hidden]. Two
    Conv1d (k 3, the second stride 2) with biases, each followed by F.gelu's Erf form, a Transpose and
    the sinusoidal position table added, pre-norm layers (LayerNormalization; q, k and v projections,
    k's without bias, q scaled by head_dim^-0.5 before Reshape/Transpose into heads, SDPA's split scale
    as two Muls by 1.0 on q and K^T, MatMul, Softmax, MatMul, heads merged by Transpose/Reshape,
    out_proj; an MLP fc1 -> Gelu -> fc2; residual Adds) and a final LayerNormalization. With `classes`,
    the classifier that fine-tunes it: the mean over positions and a linear head -> logits [batch,
    classes]."""
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if frames % 2:
        raise ValueError(f"frames ({frames}) must be even (the second conv halves them)")
    doc = _signature("whisper_encoder_style", batch=batch, mels=mels, frames=frames, layers=layers, hidden=hidden,
                     heads=heads, ffn=ffn, **({} if classes is None else {"classes": classes}), seed=seed)
    g = GraphBuilder("whisper_encoder_style", seed, 17, doc)
    x = g.input("input_features", FLOAT, [batch, mels, frames])
    positions, head_dim = frames // 2, hidden // heads

    def conv1d(x: str, cin: int, stride: int, name: str) -> str:
        w = g.param(f"{name}.weight", g.normal([hidden, cin, 3], math.sqrt(1.0 / (3 * cin))))
        b = g.param(f"{name}.bias", g.normal([hidden], 0.02))
        with g.scope(name):
            y = g.op("Conv", [x, w, b], dilations=[1], group=1, kernel_shape=[3], pads=[1, 1], strides=[stride])
        return _gelu_erf(g, y, name)

    def split(t: str) -> str:
        return g.op("Reshape", [t, g.const([batch, positions, -1, head_dim])])

    def attention(x: str, name: str) -> str:  # (in torch.onnx's order of nodes)
        with g.scope(name):
            q = g.op("Mul", [g.linear(x, hidden, hidden, name=f"{name}.q_proj"), g.const(np.float32(head_dim ** -0.5))])
            q = g.op("Transpose", [split(q)], perm=[0, 2, 1, 3])
            with g.scope(f"{name}.k_proj"):
                k = g.op("MatMul", [x, g.param(f"{name}.k_proj.weight", g.normal([hidden, hidden], 0.02))])
            k = split(k)
            v = g.op("Transpose", [split(g.linear(x, hidden, hidden, name=f"{name}.v_proj"))], perm=[0, 2, 1, 3])
            k = g.op("Transpose", [k], perm=[0, 2, 3, 1])
            q, k = (g.op("Mul", [t, g.const(np.float32(1.0))]) for t in (q, k))
            p = g.op("Softmax", [g.op("MatMul", [q, k])], axis=-1)
            ctx = g.op("Reshape", [g.op("MatMul", [p, v]), g.const([batch, -1, positions, head_dim])])
            ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), g.const([batch, positions, -1])])
            return g.linear(ctx, hidden, hidden, name=f"{name}.out_proj")

    with g.scope("enc"):
        x = conv1d(conv1d(x, mels, 1, "enc.conv1"), hidden, 2, "enc.conv2")
        t = np.arange(positions, dtype=np.float64)[:, None] * np.exp(-math.log(10000) / (hidden // 2 - 1)
                                                                      * np.arange(hidden // 2))[None, :]
        table = np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)
        x = g.op("Add", [g.op("Transpose", [x], perm=[0, 2, 1]), g.param("enc.embed_positions.weight", table)])
        for i in range(layers):
            name = f"enc.layers.{i}"
            with g.scope(name):
                x = g.op("Add", [x, attention(g.layer_norm(x, hidden, name=f"{name}.self_attn_layer_norm", eps=1e-5),
                                              f"{name}.self_attn")])
                y = g.linear(g.layer_norm(x, hidden, name=f"{name}.final_layer_norm", eps=1e-5), hidden, ffn,
                             name=f"{name}.fc1")
                y = g.linear(_gelu_erf(g, y, f"{name}.activation_fn"), ffn, hidden, name=f"{name}.fc2")
                x = g.op("Add", [x, y])
        out = "last_hidden_state" if classes is None else None
        x = g.layer_norm(x, hidden, name="enc.layer_norm", eps=1e-5, out=out)
    if classes is None:
        g.output("last_hidden_state", FLOAT, [batch, positions, hidden])
    else:
        pooled = g.op("ReduceMean", [x], axes=[1], keepdims=0)
        g.gemm(pooled, hidden, classes, name="classifier", out="logits")
        g.output("logits", FLOAT, [batch, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# float16 exports: the float32 samples as onnxruntime's float16 converter writes them
# --------------------------------------------------------------------------- #
def float16_of(model: onnx.ModelProto, sort: bool = True) -> onnx.ModelProto:
    """`model` converted by onnxruntime's `float16.convert_float_to_float16` with keep_io_types (what
    engineers deploying fp16 run): float16 weights and activations, float32 inputs and outputs with
    Casts at the boundary, the ops the converter keeps in float32 behind Casts. The converter
    appends its input Casts after the nodes that read them, which onnx's checker refuses (onnxruntime
    and ge run it); `sort` puts them in topological order. onnxruntime is a sample-building
    dependency only: imported here, never by ge."""
    from onnxruntime.transformers.float16 import convert_float_to_float16
    converted = convert_float_to_float16(model, keep_io_types=True)
    if sort:
        graph = converted.graph
        ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
        pending, ordered = list(graph.node), []
        while pending:
            runnable = [n for n in pending if all(i in ready for i in n.input)]
            if not runnable:
                raise ValueError(f"{model.graph.name}: the converted graph has a cycle")
            for n in runnable:
                ready.update(n.output)
            ordered += runnable
            pending = [n for n in pending if all(n is not r for r in runnable)]
        del graph.node[:]
        graph.node.extend(ordered)
    return converted


def mobilenetv2_fp16_style(seed: int = 0, **kwargs) -> onnx.ModelProto:
    """mobilenetv2_style(**kwargs) as a float16 export (float16_of): float32 image in, float32 logits out."""
    return float16_of(mobilenetv2_style(seed=seed, **kwargs))


def bert_fp16_style(seed: int = 0, **kwargs) -> onnx.ModelProto:
    """bert_style(**kwargs) as a float16 export (float16_of): int64 ids and mask in, float32 outputs."""
    return float16_of(bert_style(seed=seed, **kwargs))


# --------------------------------------------------------------------------- #
# small models: GPT-2-style decoder, CIFAR ResNet-8
# --------------------------------------------------------------------------- #
def gpt2_style(seq: Dim = 8, layers: int = 2, hidden: int = 256, heads: int = 4, vocab: int = 2048,
               max_pos: int = 128, past: Dim | None = None, seed: int = 0) -> onnx.ModelProto:
    """GPT2LMHeadModel (HuggingFace) as torch.onnx writes it, opset 17: input_ids [1, seq] -> logits
    [1, seq, vocab]. Conv1D as Reshape/Gemm/Reshape, Split into q/k/v, heads by Shape/Slice/Concat/
    Reshape/Transpose, the causal mask a Slice of a constant and a Where, gelu_new as its tanh
    formula (Pow), LayerNormalization; the LM head shares the token embedding's values. seq may be
    symbolic ("seq"): a dynamic model. past (a length, or symbolic "past"): the decoding step with
    the key/value cache, inputs past_key_values.{i}.key/value [1, heads, past, head_dim] concatenated
    before the new keys and values (positions from past on) and given back as present.{i}.key/value."""
    doc = _signature("gpt2_style", seq=seq, layers=layers, hidden=hidden, heads=heads, vocab=vocab,
                     max_pos=max_pos, **({} if past is None else {"past": past}), seed=seed)
    g = GraphBuilder("gpt2_style", seed, 17, doc)
    ids = g.input("input_ids", INT64, [1, seq])
    head_dim = hidden // heads
    if isinstance(past, int) and isinstance(seq, int) and past + seq > max_pos:
        raise ValueError(f"gpt2_style: past {past} + seq {seq} tokens exceed max_pos {max_pos}")
    total = None if past is None else (past + seq if isinstance(past, int) and isinstance(seq, int) else "total")
    pasts = [] if past is None else [(g.input(f"past_key_values.{i}.key", FLOAT, [1, heads, past, head_dim]),
                                      g.input(f"past_key_values.{i}.value", FLOAT, [1, heads, past, head_dim]))
                                     for i in range(layers)]
    wte = g.normal([vocab, hidden], 0.02)

    def conv1d(x: str, fin: int, fout: int, name: str) -> str:
        """transformers' Conv1D: addmm(bias, x.view(-1, fin), W).view(*x.shape[:-1], fout)."""
        with g.scope(name):
            lead = g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([-1])])
            flat = g.op("Reshape", [x, g.const([-1, fin])])
            y = g.op("Gemm", [flat, g.param(f"{name}.weight", g.normal([fin, fout], 0.02)),
                              g.param(f"{name}.bias", g.normal([fout], 0.02))], alpha=1.0, beta=1.0)
            return g.op("Reshape", [y, g.op("Concat", [lead, g.const([fout])], axis=0)])

    def split_heads(x: str, perm) -> str:
        lead = g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([-1])])
        shape = g.op("Concat", [lead, g.const([heads, head_dim])], axis=0)
        return g.op("Transpose", [g.op("Reshape", [x, shape])], perm=list(perm))

    def attention(x: str, name: str, layer: int) -> str:
        causal = np.tril(np.ones((max_pos, max_pos), bool)).reshape(1, 1, max_pos, max_pos)
        with g.scope(name):
            q = g.op("Split", [conv1d(x, hidden, 3 * hidden, f"{name}.c_attn"), g.const([hidden] * 3)], axis=2)
            split = g.nodes[-1]  # three outputs: q, k, v
            k, v = f"{split.name}_output_1", f"{split.name}_output_2"
            split.output.extend([k, v])
            if pasts:  # torch.cat((past_key, key), dim=-2), the present returned, then key.transpose(-1, -2)
                q, k, v = split_heads(q, [0, 2, 1, 3]), split_heads(k, [0, 2, 1, 3]), split_heads(v, [0, 2, 1, 3])
                k = g.op("Concat", [pasts[layer][0], k], axis=2, out=f"present.{layer}.key")
                v = g.op("Concat", [pasts[layer][1], v], axis=2, out=f"present.{layer}.value")
                k = g.op("Transpose", [k], perm=[0, 1, 3, 2])
            else:
                q, k, v = split_heads(q, [0, 2, 1, 3]), split_heads(k, [0, 2, 3, 1]), split_heads(v, [0, 2, 1, 3])
            w = g.op("Div", [g.op("MatMul", [q, k]), g.const(np.float32(math.sqrt(head_dim)))])
            q_len = g.op("Gather", [g.op("Shape", [q]), g.const([2])], axis=0)
            k_len = g.op("Gather", [g.op("Shape", [k]), g.const([3])], axis=0)
            bias = g.param(f"{name}.bias", causal)
            mask = g.op("Slice", [bias, g.op("Sub", [k_len, q_len]), k_len, g.const([2])])
            mask = g.op("Slice", [mask, g.const([0]), k_len, g.const([3])])
            w = g.op("Where", [mask, w, g.const(np.float32(np.finfo(np.float32).min))])
            a = g.op("Transpose", [g.op("MatMul", [g.op("Softmax", [w], axis=-1), v])], perm=[0, 2, 1, 3])
            lead = g.op("Slice", [g.op("Shape", [a]), g.const([0]), g.const([-2])])
            a = g.op("Reshape", [a, g.op("Concat", [lead, g.const([hidden])], axis=0)])
            return conv1d(a, hidden, hidden, f"{name}.c_proj")

    def gelu_new(x: str) -> str:
        """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
        cube = g.op("Mul", [g.const(np.float32(0.044715)), g.op("Pow", [x, g.const(np.float32(3.0))])])
        inner = g.op("Mul", [g.const(np.float32(math.sqrt(2.0 / math.pi))), g.op("Add", [x, cube])])
        half = g.op("Mul", [g.const(np.float32(0.5)), x])
        return g.op("Mul", [half, g.op("Add", [g.const(np.float32(1.0)), g.op("Tanh", [inner])])])

    with g.scope("transformer"):
        seq_len = g.op("Gather", [g.op("Shape", [ids]), g.const(1)], axis=0)
        start = g.const(0) if not pasts else g.op("Gather", [g.op("Shape", [pasts[0][0]]), g.const(2)], axis=0)
        end = seq_len if not pasts else g.op("Add", [start, seq_len])
        positions = g.unsqueeze(g.op("Range", [start, end, g.const(1)]), [0])
        h = g.op("Add", [g.op("Gather", [g.param("wte", wte), ids], axis=0),
                         g.op("Gather", [g.param("wpe", g.normal([max_pos, hidden], 0.01)), positions], axis=0)])
        for i in range(layers):
            name = f"h.{i}"
            with g.scope(name):
                h = g.op("Add", [attention(g.layer_norm(h, hidden, name=f"{name}.ln_1", eps=1e-5), f"{name}.attn", i), h])
                m = conv1d(g.layer_norm(h, hidden, name=f"{name}.ln_2", eps=1e-5), hidden, 4 * hidden,
                           f"{name}.mlp.c_fc")
                h = g.op("Add", [conv1d(gelu_new(m), 4 * hidden, hidden, f"{name}.mlp.c_proj"), h])
        h = g.layer_norm(h, hidden, name="ln_f", eps=1e-5)
    g.op("MatMul", [h, g.param("lm_head.weight", np.ascontiguousarray(wte.T))], out="logits")
    g.output("logits", FLOAT, [1, seq, vocab])
    for i in range(len(pasts)):
        g.output(f"present.{i}.key", FLOAT, [1, heads, total, head_dim])
        g.output(f"present.{i}.value", FLOAT, [1, heads, total, head_dim])
    return g.build()


def llama_style(seq: Dim = 1, past: Dim = 128, layers: int = 2, hidden: int = 256, heads: int = 4, kv_heads: int = 2,
                intermediate: int = 688, vocab: int = 2048, max_pos: int = 256, seed: int = 0) -> onnx.ModelProto:
    """A LLaMA-style decoder's step with its key/value cache, as torch.onnx writes HuggingFace's
    LlamaForCausalLM (opset 17): input_ids [1, seq] after `past` tokens, past_key_values.{i}.key/value
    [1, kv_heads, past, head_dim] in, logits and present.{i}.key/value out. RMSNorm as Pow/ReduceMean/
    Add/Sqrt/Reciprocal/Mul, bias-free projections, rotary embeddings (cos/sin tables gathered at the
    positions, rotate_half by Slice/Neg/Concat), grouped-query attention (the keys and values
    repeated to the heads by Unsqueeze/Expand/Reshape), the causal mask a Slice of a constant added
    before Softmax, a SiLU-gated MLP (x * Sigmoid(x))."""
    if isinstance(past, int) and isinstance(seq, int) and past + seq > max_pos:
        raise ValueError(f"llama_style: past {past} + seq {seq} tokens exceed max_pos {max_pos}")
    doc = _signature("llama_style", seq=seq, past=past, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     intermediate=intermediate, vocab=vocab, max_pos=max_pos, seed=seed)
    g = GraphBuilder("llama_style", seed, 17, doc)
    hd, rep = hidden // heads, heads // kv_heads
    total = past + seq if isinstance(past, int) and isinstance(seq, int) else "total"
    ids = g.input("input_ids", INT64, [1, seq])
    pasts = [(g.input(f"past_key_values.{i}.key", FLOAT, [1, kv_heads, past, hd]),
              g.input(f"past_key_values.{i}.value", FLOAT, [1, kv_heads, past, hd])) for i in range(layers)]
    inv = 1.0 / 10000 ** (np.arange(0, hd, 2) / hd)
    angles = np.concatenate([np.outer(np.arange(max_pos), inv)] * 2, axis=1)
    cos_table, sin_table = g.param("rotary.cos", np.cos(angles).astype(np.float32)), g.param("rotary.sin", np.sin(angles).astype(np.float32))
    mask_table = g.param("causal_mask", np.triu(np.full((max_pos, max_pos), np.finfo(np.float32).min, np.float32), 1))

    def rms_norm(x: str, name: str) -> str:
        with g.scope(name):
            var = g.op("ReduceMean", [g.op("Pow", [x, g.const(np.float32(2.0))])], axes=[-1], keepdims=1)
            scale = g.op("Reciprocal", [g.op("Sqrt", [g.op("Add", [var, g.const(np.float32(1e-6))])])])
            return g.op("Mul", [g.param(f"{name}.weight", g.normal([hidden], 0.02, mean=1.0)), g.op("Mul", [x, scale])])

    def proj(x: str, fin: int, fout: int, name: str) -> str:
        return g.op("MatMul", [x, g.param(f"{name}.weight", g.normal([fin, fout], 0.02))])

    def heads_of(x: str, n: int) -> str:  # [1, seq, n * hd] -> [1, n, seq, hd]
        return g.op("Transpose", [g.op("Reshape", [x, g.const([1, -1, n, hd])])], perm=[0, 2, 1, 3])

    def rotary(x: str, cos: str, sin: str) -> str:
        x1 = g.op("Slice", [x, g.const([0]), g.const([hd // 2]), g.const([3])])
        x2 = g.op("Slice", [x, g.const([hd // 2]), g.const([hd]), g.const([3])])
        rotated = g.op("Concat", [g.op("Neg", [x2]), x1], axis=-1)
        return g.op("Add", [g.op("Mul", [x, cos]), g.op("Mul", [rotated, sin])])

    def repeat_kv(x: str) -> str:  # [1, kv, T, hd] -> [1, heads, T, hd]
        if rep == 1:
            return x
        t = g.op("Gather", [g.op("Shape", [x]), g.const(2)], axis=0)
        shape = g.op("Concat", [g.const([1, kv_heads, rep]), g.unsqueeze(t, [0]), g.const([hd])], axis=0)
        expanded = g.op("Expand", [g.unsqueeze(x, [2]), shape])
        return g.op("Reshape", [expanded, g.op("Concat", [g.const([1, heads]), g.unsqueeze(t, [0]), g.const([hd])], axis=0)])

    with g.scope("model"):
        start = g.op("Gather", [g.op("Shape", [pasts[0][0]]), g.const(2)], axis=0)
        end = g.op("Add", [start, g.op("Gather", [g.op("Shape", [ids]), g.const(1)], axis=0)])
        positions = g.op("Range", [start, end, g.const(1)])
        cos = g.unsqueeze(g.op("Gather", [cos_table, positions], axis=0), [0, 1])
        sin = g.unsqueeze(g.op("Gather", [sin_table, positions], axis=0), [0, 1])
        mask = g.op("Slice", [mask_table, g.unsqueeze(start, [0]), g.unsqueeze(end, [0]), g.const([0])])
        mask = g.op("Slice", [mask, g.const([0]), g.unsqueeze(end, [0]), g.const([1])])
        h = g.op("Gather", [g.param("embed_tokens.weight", g.normal([vocab, hidden], 0.02)), ids], axis=0)
        for i in range(layers):
            name = f"layers.{i}"
            with g.scope(name):
                x = rms_norm(h, f"{name}.input_layernorm")
                q = rotary(heads_of(proj(x, hidden, hidden, f"{name}.self_attn.q_proj"), heads), cos, sin)
                k = rotary(heads_of(proj(x, hidden, kv_heads * hd, f"{name}.self_attn.k_proj"), kv_heads), cos, sin)
                v = heads_of(proj(x, hidden, kv_heads * hd, f"{name}.self_attn.v_proj"), kv_heads)
                k = g.op("Concat", [pasts[i][0], k], axis=2, out=f"present.{i}.key")
                v = g.op("Concat", [pasts[i][1], v], axis=2, out=f"present.{i}.value")
                scores = g.op("Div", [g.op("MatMul", [q, g.op("Transpose", [repeat_kv(k)], perm=[0, 1, 3, 2])]),
                                      g.const(np.float32(math.sqrt(hd)))])
                probs = g.op("Softmax", [g.op("Add", [scores, mask])], axis=-1)
                a = g.op("Transpose", [g.op("MatMul", [probs, repeat_kv(v)])], perm=[0, 2, 1, 3])
                a = g.op("Reshape", [a, g.const([1, -1, hidden])])
                h = g.op("Add", [h, proj(a, hidden, hidden, f"{name}.self_attn.o_proj")])
                x = rms_norm(h, f"{name}.post_attention_layernorm")
                gate = proj(x, hidden, intermediate, f"{name}.mlp.gate_proj")
                up = proj(x, hidden, intermediate, f"{name}.mlp.up_proj")
                act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
                h = g.op("Add", [h, proj(act, intermediate, hidden, f"{name}.mlp.down_proj")])
        h = rms_norm(h, "norm")
    g.op("MatMul", [h, g.param("lm_head.weight", g.normal([hidden, vocab], 0.02))], out="logits")
    g.output("logits", FLOAT, [1, seq, vocab])
    for i in range(layers):
        g.output(f"present.{i}.key", FLOAT, [1, kv_heads, total, hd])
        g.output(f"present.{i}.value", FLOAT, [1, kv_heads, total, hd])
    return g.build()


def _vad_branch(tag: str, rng: np.random.Generator, filter_length: int, hidden: int) -> onnx.GraphProto:
    """One sample rate's half of silero_vad_style: outer values `input` and `state`, outputs
    {tag}/output [1, 1] and {tag}/stateN [2, 1, hidden]."""
    hop, bins = filter_length // 2, filter_length // 2 + 1
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def c(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), f"{tag}/{name}"))
        return f"{tag}/{name}"

    def n(op: str, ins: Sequence[str], n_out: int = 1, **attrs):
        name = f"/{tag}/{op}_{len(nodes)}"
        outs = [f"{name}_output_{i}" for i in range(n_out)]
        nodes.append(helper.make_node(op, list(ins), outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def w(*shape: int) -> np.ndarray:  # unit-variance outputs for unit-variance inputs
        return (rng.standard_normal(shape) / math.sqrt(math.prod(shape[1:]))).astype(np.float32)

    def bias(size: int) -> np.ndarray:
        return (0.1 * rng.standard_normal(size)).astype(np.float32)

    def untyped_branch(name: str, op: str, x: str, *axes) -> onnx.GraphProto:
        out = f"/{tag}/{name}_output_0"
        ins = [x] + ([c(f"{name}_axes", list(axes))] if axes else [])
        return helper.make_graph([helper.make_node(op, ins, [out], name=f"/{tag}/{name}")], f"{tag}_{name}", [],
                                 [helper.make_value_info(out, onnx.TypeProto())])

    # the STFT: a reflect pad, the Fourier basis as a strided Conv, the magnitude of (real, imag)
    x = n("Pad", ["input", c("pads", np.array([0, 0, 0, filter_length // 4], np.int64))], mode="reflect")
    x = n("Conv", [n("Unsqueeze", [x, c("ax1", np.array([1], np.int64))]), c("forward_basis", w(2 * bins, 1, filter_length))],
          strides=[hop])
    real = n("Slice", [x, c("lo", np.array([0], np.int64)), c("mid", np.array([bins], np.int64)), c("ax_c", np.array([1], np.int64))])
    imag = n("Slice", [x, f"{tag}/mid", c("hi", np.array([2 * bins], np.int64)), f"{tag}/ax_c"])
    two = c("two", np.float32(2))
    x = n("Sqrt", [n("Add", [n("Pow", [real, two]), n("Pow", [imag, two])])])
    for i, (cin, cout, stride) in enumerate(((bins, 128, 1), (128, 64, 2), (64, 64, 2), (64, hidden, 1))):
        x = n("Relu", [n("Conv", [x, c(f"encoder.{i}.weight", w(cout, cin, 3)), c(f"encoder.{i}.bias", bias(cout))],
                         kernel_shape=[3], pads=[1, 1], strides=[stride])])
    # the decoder's x.squeeze(-1) and LSTMCell's "unbatched input?" test, as the exporter writes them
    last = n("Equal", [n("Gather", [n("Shape", [x]), c("minus1", np.array([-1], np.int64))], axis=0), c("one", np.array([1], np.int64))])
    x = n("If", [last], then_branch=untyped_branch("squeeze", "Squeeze", x, -1), else_branch=untyped_branch("keep", "Identity", x))
    rank2 = n("Equal", [n("Size", [n("Shape", [x])]), c("two_i", np.int64(2))])
    x = n("If", [n("Not", [rank2])], then_branch=untyped_branch("batch", "Unsqueeze", x, 0),
          else_branch=untyped_branch("same", "Identity", x))
    ax0 = c("ax0", np.array([0], np.int64))
    h0 = n("Unsqueeze", [n("Gather", ["state", c("i0", np.int64(0))], axis=0), ax0])
    c0 = n("Unsqueeze", [n("Gather", ["state", c("i1", np.int64(1))], axis=0), ax0])
    _, hn, cn = n("LSTM", [n("Unsqueeze", [x, ax0]), c("rnn.W", w(1, 4 * hidden, hidden)), c("rnn.R", w(1, 4 * hidden, hidden)),
                           c("rnn.B", bias(8 * hidden)[None]), "", h0, c0], 3, hidden_size=hidden)
    state = n("Concat", [hn, cn], axis=0)
    h = n("Unsqueeze", [n("Squeeze", [hn, ax0]), c("ax_last", np.array([-1], np.int64))])
    y = n("Sigmoid", [n("Conv", [n("Relu", [h]), c("decoder.weight", w(1, hidden, 1)), c("decoder.bias", bias(1))],
                      kernel_shape=[1])])
    y = n("Squeeze", [y, f"{tag}/ax_last"])
    nodes.append(helper.make_node("Identity", [y], [f"{tag}/output"], name=f"/{tag}/output"))
    nodes.append(helper.make_node("Identity", [state], [f"{tag}/stateN"], name=f"/{tag}/stateN"))
    return helper.make_graph(nodes, tag, [], [helper.make_tensor_value_info(f"{tag}/output", FLOAT, [1, 1]),
                                              helper.make_tensor_value_info(f"{tag}/stateN", FLOAT, [2, 1, hidden])], inits)


def silero_vad_style(hidden: int = 128, seed: int = 0) -> onnx.ModelProto:
    """Silero VAD v5 as torch.onnx writes it (opset 16), one streaming frame a call: input [1, samples]
    (512 at 16 kHz, 256 at 8 kHz; symbolic, as each branch is sized for its own), state [2, 1, hidden] (the LSTM's h and c, fed back call after
    call), sr (int64 scalar) -> output [1, 1] (speech probability), stateN [2, 1, hidden]. An If on
    sr == 16000 picks a branch; each branch is an STFT (reflect Pad, the basis as a strided Conv, the
    magnitude), four Conv+Relu (strides 1, 2, 2, 1; 128, 64, 64, hidden channels), the exporter's two
    shape Ifs (squeeze(-1), LSTMCell's unbatched test), an LSTM step from the state, and a 1x1 Conv +
    Sigmoid on its relu'd h."""
    rng = np.random.default_rng(seed)
    b16, b8 = _vad_branch("16k", rng, 256, hidden), _vad_branch("8k", rng, 128, hidden)
    doc = _signature("silero_vad_style", hidden=hidden, seed=seed)
    nodes = [helper.make_node("Constant", [], ["sr16k"], name="/Constant", value=numpy_helper.from_array(np.int64(16000))),
             helper.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="/Equal"),
             helper.make_node("If", ["is16k"], ["output", "stateN"], name="/If", then_branch=b16, else_branch=b8)]
    graph = helper.make_graph(nodes, "silero_vad_style", [
        helper.make_tensor_value_info("input", FLOAT, [1, "samples"]),
        helper.make_tensor_value_info("state", FLOAT, [2, 1, hidden]),
        helper.make_tensor_value_info("sr", INT64, [])],
        [helper.make_tensor_value_info("output", FLOAT, [1, 1]),
         helper.make_tensor_value_info("stateN", FLOAT, [2, 1, hidden])], doc_string=doc)
    opsets = [helper.make_opsetid("", 16)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name=PRODUCER_NAME, producer_version=PRODUCER_VERSION,
                              ir_version=helper.find_min_ir_version_for(opsets))
    model.doc_string = doc
    return model


def resnet8(classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """He et al.'s CIFAR ResNet with n=1: conv 16, three stages of one basic block (16, 32, 64)."""
    g = GraphBuilder("resnet8", seed, 17, _signature("resnet8", classes=classes, seed=seed))
    x = g.conv_bn_relu(g.input("image", FLOAT, [1, 3, 32, 32]), 3, 16, 3, conv="conv1", bn="bn1")
    cin = 16
    for stage, planes in enumerate((16, 32, 64)):
        stride, name = (1 if stage == 0 else 2), f"layer{stage + 1}.0"
        y = g.conv_bn_relu(x, cin, planes, 3, stride=stride, conv=f"{name}.conv1", bn=f"{name}.bn1")
        y = g.conv_bn(y, planes, planes, 3, conv=f"{name}.conv2", bn=f"{name}.bn2")
        if stride != 1 or cin != planes:
            x = g.conv_bn(x, cin, planes, 1, stride=stride, conv=f"{name}.downsample.0", bn=f"{name}.downsample.1")
        with g.scope(name):
            x = g.relu(g.add(y, x))
        cin = planes
    x = g.op("Flatten", [g.global_avg_pool(x)], axis=1)
    g.gemm(x, cin, classes, name="fc", out="logits")
    g.output("logits", FLOAT, [1, classes])
    return g.build()


# --------------------------------------------------------------------------- #
# real-model shapes of issue 31: a PaddleOCR-style text detector (DBNet) and recogniser (CRNN),
# and a YOLOv8n-style detector, each with the op patterns their exporters write
# --------------------------------------------------------------------------- #
def _hsig_hardswish(g: GraphBuilder, x: str) -> str:
    """paddle2onnx's hard_swish: Mul(x, HardSigmoid(x, 1/6, 0.5))."""
    y = g.op("Mul", [x, g.op("HardSigmoid", [x], alpha=1.0 / 6, beta=0.5)])
    g.m2[y] = (g.energy(x) / 3, 0.0)
    return y


def _conv_bias(g: GraphBuilder, x: str, cin: int, cout: int, k: int, *, name: str, stride: int = 1,
               group: int = 1, gain: float = 2.0) -> str:
    """Conv with a bias (BatchNorm folded in by the exporter): He-normal weights scaled by gain."""
    fan_in = cin // group * k * k
    w = g.param(f"{name}.weight", g.normal([cout, cin // group, k, k], math.sqrt(gain / fan_in)))
    b = g.param(f"{name}.bias", g.normal([cout], 0.1))
    with g.scope(name):
        y = g.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4,
                 dilations=[1, 1], group=group)
    g.m2[y] = (0.0, gain * g.energy(x))
    return y


def _se_hardsigmoid(g: GraphBuilder, x: str, c: int, name: str, slope: float) -> str:
    """Squeeze-excite: GlobalAveragePool -> 1x1 conv -> Relu -> 1x1 conv -> HardSigmoid -> Mul."""
    with g.scope(name):
        s = g.global_avg_pool(x)
        s = g.op("Relu", [_conv_bias(g, s, c, c // 4, 1, name=f"{name}.conv1")])
        s = _conv_bias(g, s, c // 4, c, 1, name=f"{name}.conv2")
        y = g.op("Mul", [x, g.op("HardSigmoid", [s], alpha=slope, beta=0.5)])
    g.m2[y] = tuple(0.4 * v for v in g.m2.get(x, (0.0, 1.0)))
    return y


def _lcnet_block(g: GraphBuilder, x: str, cin: int, cout: int, k: int, stride, se: bool, name: str) -> str:
    """PP-LCNet's depthwise-separable block: dw conv + BN + hardswish, [SE], pw conv + BN + hardswish."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    fan_in = k * k
    w = g.param(f"{name}.dw.weight", g.normal([cin, 1, k, k], math.sqrt(2.0 / fan_in)))
    with g.scope(f"{name}.dw"):
        y = g.op("Conv", [x, w], kernel_shape=[k, k], strides=[sh, sw], pads=[k // 2] * 4, dilations=[1, 1],
                 group=cin)
    g.m2[y] = (0.0, 2.0 * g.energy(x))
    with g.scope(f"{name}.dw"):
        y = _hsig_hardswish(g, g.batch_norm(y, cin, name=f"{name}.dw.bn"))
    if se:
        y = _se_hardsigmoid(g, y, cin, f"{name}.se", 1.0 / 6)
    y = g.conv_bn(y, cin, cout, 1, conv=f"{name}.pw", bn=f"{name}.pw.bn")
    with g.scope(f"{name}.pw"):
        return _hsig_hardswish(g, y)


def _lcnet_backbone(g: GraphBuilder, x: str, blocks, scale: float, stem_stride) -> tuple[list[str], list[int]]:
    """The stem conv and the blocks: (the outputs of each stage, their channels)."""
    c = _make_divisible(16 * scale)
    sh, sw = (stem_stride, stem_stride) if isinstance(stem_stride, int) else stem_stride
    w = g.param("stem.weight", g.normal([c, 3, 3, 3], math.sqrt(2.0 / 27)))
    with g.scope("stem"):
        y = g.op("Conv", [x, w], kernel_shape=[3, 3], strides=[sh, sw], pads=[1] * 4, dilations=[1, 1], group=1)
        g.m2[y] = (0.0, 2.0)
        x = _hsig_hardswish(g, g.batch_norm(y, c, name="stem.bn"))
    stages, channels = [], []
    for s, stage in enumerate(blocks):
        for i, (k, cin, cout, stride, se) in enumerate(stage):
            cout = _make_divisible(cout * scale)
            x = _lcnet_block(g, x, c, cout, k, stride, se, f"stage{s}.{i}")
            c = cout
        stages.append(x)
        channels.append(c)
    return stages, channels


# PP-LCNet's stages for detection (strides 4, 8, 16, 32 after the stride-2 stem)
_LCNET_DET = [[(3, 16, 32, 1, False), (3, 32, 64, 2, False), (3, 64, 64, 1, False)],
              [(3, 64, 128, 2, False), (3, 128, 128, 1, False)],
              [(3, 128, 256, 2, False)] + [(5, 256, 256, 1, False)] * 5,
              [(5, 256, 512, 2, True), (5, 512, 512, 1, True)]]


def _upsample(g: GraphBuilder, x: str, factor: int) -> str:
    """Resize(nearest) by an integer factor, as paddle2onnx and torch.onnx write F.upsample: scales input."""
    y = g.op("Resize", [x, g.const(np.zeros(0, np.float32)), g.const(np.array([1, 1, factor, factor], np.float32))],
             mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    g.m2[y] = g.m2.get(x, (0.0, 1.0))
    return y


def _conv_transpose_2x2(g: GraphBuilder, x: str, cin: int, cout: int, name: str, gain: float = 2.0) -> str:
    w = g.param(f"{name}.weight", g.normal([cin, cout, 2, 2], math.sqrt(gain / cin / g.energy(x))))
    b = g.param(f"{name}.bias", g.normal([cout], 0.1))
    with g.scope(name):
        y = g.op("ConvTranspose", [x, w, b], kernel_shape=[2, 2], strides=[2, 2], pads=[0] * 4, dilations=[1, 1],
                 group=1)
    g.m2[y] = (0.0, gain)
    return y


def dbnet_style(batch: int = 1, height: int = 640, width: int = 480, scale: float = 0.75, neck: int = 96,
                seed: int = 0) -> onnx.ModelProto:
    """A PaddleOCR text detector (DBNet) as paddle2onnx writes it at opset 11: x [batch, 3, height,
    width] -> maps [batch, 1, height, width] (sizes multiples of 32). A PP-LCNet backbone (depthwise-
    separable blocks, hardswish as Mul(x, HardSigmoid(x)), squeeze-excite with HardSigmoid gates), an
    RSE-FPN neck (1x1 convs with residual SE, Resize(nearest) top-down with Add, 3x3 convs, Resize up
    to 1/4 and Concat) and the DB head (3x3 conv, BN, Relu, two 2x2 stride-2 ConvTranspose, Sigmoid)."""
    doc = _signature("dbnet_style", batch=batch, height=height, width=width, scale=scale, neck=neck, seed=seed)
    g = GraphBuilder("dbnet_style", seed, 11, doc)
    x = g.input("x", FLOAT, [batch, 3, height, width])
    stages, channels = _lcnet_backbone(g, x, _LCNET_DET, scale, 2)

    def rse(x: str, cin: int, cout: int, k: int, name: str) -> str:  # conv, then x + SE(x)
        y = g.conv(x, cin, cout, k, name=f"{name}.conv")
        with g.scope(name):
            return g.add(y, _se_hardsigmoid(g, y, cout, f"{name}.se", 0.2))

    ins = [rse(s, c, neck, 1, f"neck.ins_conv.{i}") for i, (s, c) in enumerate(zip(stages, channels))]
    for i in (2, 1, 0):  # top-down: in4 += up(in5), ...
        with g.scope(f"neck.td.{i}"):
            ins[i] = g.add(ins[i], _upsample(g, ins[i + 1], 2))
    outs = [rse(v, neck, neck // 4, 3, f"neck.inp_conv.{i}") for i, v in enumerate(ins)]
    with g.scope("neck"):
        fused = g.op("Concat", [_upsample(g, outs[3], 8), _upsample(g, outs[2], 4), _upsample(g, outs[1], 2),
                                outs[0]], axis=1)
    g.m2[fused] = (0.0, sum(map(g.energy, outs)) / len(outs))
    y = g.conv_bn_relu(fused, neck, neck // 4, 3, conv="head.conv1", bn="head.bn1")
    y = _conv_transpose_2x2(g, y, neck // 4, neck // 4, "head.conv2")
    y = g.relu(g.batch_norm(y, neck // 4, name="head.bn2"))
    y = _conv_transpose_2x2(g, y, neck // 4, 1, "head.conv3", gain=4.0)  # logits of a few units: maps not all 0 or 1
    g.op("Sigmoid", [y], out="maps")
    g.output("maps", FLOAT, [batch, 1, height, width])
    return g.build()


# PP-LCNet's stages for recognition (PaddleOCR's PPLCNetV3 rec config): strides (2, 1) keep the width
_LCNET_REC = [[(3, 16, 32, 1, False)],
              [(3, 32, 64, 1, False), (3, 64, 64, 1, False)],
              [(3, 64, 128, (2, 1), False), (3, 128, 128, 1, False)],
              [(3, 128, 256, (1, 2), False)] + [(5, 256, 256, 1, False)] * 4,
              [(5, 256, 512, (2, 1), True), (5, 512, 512, 1, True), (5, 512, 512, (2, 1), False),
               (5, 512, 512, 1, False)]]


def crnn_lcnet_style(batch: int = 1, height: int = 48, width: int = 320, scale: float = 0.95, hidden: int = 48,
                     classes: int = 6625, seed: int = 0) -> onnx.ModelProto:
    """A PaddleOCR text recogniser (PP-LCNet backbone + bidirectional LSTM + CTC head) as paddle2onnx
    writes it at opset 11: x [batch, 3, height, width] -> probs [batch, width / 8, classes]. The
    backbone halves the height more often than the width; an AvgPool closes the height, then
    Squeeze/Transpose to [T, batch, C], two bidirectional LSTMs (Y [T, 2, batch, hidden] ->
    Transpose/Reshape), Transpose back, MatMul + Add, Softmax."""
    doc = _signature("crnn_lcnet_style", batch=batch, height=height, width=width, scale=scale, hidden=hidden,
                     classes=classes, seed=seed)
    g = GraphBuilder("crnn_lcnet_style", seed, 11, doc)
    x = g.input("x", FLOAT, [batch, 3, height, width])
    stages, channels = _lcnet_backbone(g, x, _LCNET_REC, scale, 2)
    y, c = stages[-1], channels[-1]
    pool_h = height // 16
    y = g.op("AveragePool", [y], kernel_shape=[pool_h, 2], strides=[pool_h, 2], pads=[0] * 4)
    with g.scope("neck"):
        seq = g.op("Transpose", [g.op("Squeeze", [y], axes=[2])], perm=[2, 0, 1])  # [T, batch, C]
        fin = c
        for layer in range(2):
            bound = 1.0 / math.sqrt(hidden)
            w = g.param(f"lstm.{layer}.W", g.uniform([2, 4 * hidden, fin], -bound, bound))
            r = g.param(f"lstm.{layer}.R", g.uniform([2, 4 * hidden, hidden], -bound, bound))
            b = g.param(f"lstm.{layer}.B", g.uniform([2, 8 * hidden], -bound, bound))
            zeros = g.param(f"lstm.{layer}.init", np.zeros([2, batch, hidden], np.float32))
            lstm = g.op("LSTM", [seq, w, r, b, "", zeros, zeros], hidden_size=hidden, direction="bidirectional")
            seq = g.op("Reshape", [g.op("Transpose", [lstm], perm=[0, 2, 1, 3]), g.const([0, 0, -1])])
            fin = 2 * hidden
        seq = g.op("Transpose", [seq], perm=[1, 0, 2])  # [batch, T, 2 hidden]
    bound = 1.0 / math.sqrt(fin)
    w = g.param("head.fc.weight", g.uniform([fin, classes], -bound, bound))
    b = g.param("head.fc.bias", g.uniform([classes], -bound, bound))
    with g.scope("head"):
        logits = g.op("Add", [g.op("MatMul", [seq, w]), b])
        g.op("Softmax", [logits], out="probs", axis=2)
    g.output("probs", FLOAT, [batch, width // 8, classes])
    return g.build()


def yolov8_style(batch: int = 1, image: int = 640, width: float = 0.25, depth: float = 0.33, classes: int = 80,
                 seed: int = 0) -> onnx.ModelProto:
    """Ultralytics YOLOv8 (n at width 0.25, depth 0.33) as torch.onnx writes it at opset 17 after the
    BatchNorms are folded: images [batch, 3, image, image] -> output0 [batch, 4 + classes, anchors].
    Conv + SiLU as Mul(x, Sigmoid(x)); C2f blocks (1x1 conv, Split in two, bottlenecks, Concat, 1x1
    conv); SPPF (three chained 5x5 MaxPools, Concat); a PAN neck with Resize(nearest) and Concat;
    the decoupled Detect head with DFL (Reshape, Transpose, Softmax, 1x1 Conv) and box decoding."""
    doc = _signature("yolov8_style", batch=batch, image=image, width=width, depth=depth, classes=classes,
                     seed=seed)
    g = GraphBuilder("yolov8_style", seed, 17, doc)
    ch = lambda c: _make_divisible(min(c, 1024) * width)  # noqa: E731
    reps = lambda n: max(round(n * depth), 1)  # noqa: E731

    def conv(x: str, cin: int, cout: int, k: int, name: str, stride: int = 1) -> str:
        y = _conv_bias(g, x, cin, cout, k, name=f"{name}.conv", stride=stride)
        with g.scope(name):
            out = g.op("Mul", [y, g.op("Sigmoid", [y])])
        g.m2[out] = (g.energy(y) / 2, 0.0)
        return out

    def c2f(x: str, cin: int, cout: int, n: int, shortcut: bool, name: str) -> str:
        c = cout // 2
        y = conv(x, cin, 2 * c, 1, f"{name}.cv1")
        with g.scope(name):
            first = g.op("Split", [y, g.const([c, c])], axis=1)
            split = g.nodes[-1]
            second = f"{split.name}_output_1"
            split.output.append(second)
        parts = [first, second]
        for i in range(n):
            h = conv(conv(parts[-1], c, c, 3, f"{name}.m.{i}.cv1"), c, c, 3, f"{name}.m.{i}.cv2")
            if shortcut:
                with g.scope(f"{name}.m.{i}"):
                    h = g.add(parts[-1], h)
            parts.append(h)
        with g.scope(name):
            cat = g.op("Concat", parts, axis=1)
        g.m2[cat] = (1.0, 0.0)
        return conv(cat, (2 + n) * c, cout, 1, f"{name}.cv2")

    x = g.input("images", FLOAT, [batch, 3, image, image])
    x = conv(x, 3, ch(64), 3, "model.0", 2)
    x = conv(x, ch(64), ch(128), 3, "model.1", 2)
    x = c2f(x, ch(128), ch(128), reps(3), True, "model.2")
    x = conv(x, ch(128), ch(256), 3, "model.3", 2)
    p3 = c2f(x, ch(256), ch(256), reps(6), True, "model.4")
    x = conv(p3, ch(256), ch(512), 3, "model.5", 2)
    p4 = c2f(x, ch(512), ch(512), reps(6), True, "model.6")
    x = conv(p4, ch(512), ch(1024), 3, "model.7", 2)
    x = c2f(x, ch(1024), ch(1024), reps(3), True, "model.8")
    y = conv(x, ch(1024), ch(512), 1, "model.9.cv1")  # SPPF
    with g.scope("model.9"):
        pools = [y]
        for _ in range(3):
            pools.append(g.max_pool(pools[-1], 5, 1, 2))
        y = g.op("Concat", pools, axis=1)
    g.m2[y] = (1.0, 0.0)
    p5 = conv(y, 4 * ch(512), ch(1024), 1, "model.9.cv2")
    with g.scope("model.11"):
        x = g.op("Concat", [_upsample(g, p5, 2), p4], axis=1)
    h4 = c2f(x, ch(1024) + ch(512), ch(512), reps(3), False, "model.12")
    with g.scope("model.14"):
        x = g.op("Concat", [_upsample(g, h4, 2), p3], axis=1)
    o3 = c2f(x, ch(512) + ch(256), ch(256), reps(3), False, "model.15")
    x = conv(o3, ch(256), ch(256), 3, "model.16", 2)
    with g.scope("model.17"):
        x = g.op("Concat", [x, h4], axis=1)
    o4 = c2f(x, ch(256) + ch(512), ch(512), reps(3), False, "model.18")
    x = conv(o4, ch(512), ch(512), 3, "model.19", 2)
    with g.scope("model.20"):
        x = g.op("Concat", [x, p5], axis=1)
    o5 = c2f(x, ch(512) + ch(1024), ch(1024), reps(3), False, "model.21")

    reg_max = 16
    c2, c3 = max(16, ch(256) // 4, reg_max * 4), max(ch(256), min(classes, 100))
    levels, anchors, strides = [], [], []
    for i, (f, cin) in enumerate(((o3, ch(256)), (o4, ch(512)), (o5, ch(1024)))):
        name, stride = "model.22", 8 * 2 ** i
        box = conv(conv(f, cin, c2, 3, f"{name}.cv2.{i}.0"), c2, c2, 3, f"{name}.cv2.{i}.1")
        box = _conv_bias(g, box, c2, 4 * reg_max, 1, name=f"{name}.cv2.{i}.2", gain=1.0)
        cls = conv(conv(f, cin, c3, 3, f"{name}.cv3.{i}.0"), c3, c3, 3, f"{name}.cv3.{i}.1")
        cls = _conv_bias(g, cls, c3, classes, 1, name=f"{name}.cv3.{i}.2", gain=1.0)
        with g.scope(name):
            levels.append(g.op("Reshape", [g.op("Concat", [box, cls], axis=1),
                                           g.const([batch, 4 * reg_max + classes, -1])]))
        side = image // stride
        yy, xx = np.meshgrid(np.arange(side) + 0.5, np.arange(side) + 0.5, indexing="ij")
        anchors.append(np.stack([xx.ravel(), yy.ravel()]))
        strides.append(np.full(side * side, stride, np.float32))
    with g.scope("model.22"):
        cat = g.op("Concat", levels, axis=2)
        box = g.op("Split", [cat, g.const([4 * reg_max, classes])], axis=1)
        split = g.nodes[-1]
        cls = f"{split.name}_output_1"
        split.output.append(cls)
        n = sum(a.shape[1] for a in anchors)
        with g.scope("model.22.dfl"):
            d = g.op("Transpose", [g.op("Reshape", [box, g.const([batch, 4, reg_max, n])])], perm=[0, 2, 1, 3])
            d = g.op("Softmax", [d], axis=1)
            proj = g.param("model.22.dfl.conv.weight", np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1))
            d = g.op("Conv", [d, proj], kernel_shape=[1, 1], strides=[1, 1], pads=[0] * 4, dilations=[1, 1], group=1)
            d = g.op("Reshape", [d, g.const([batch, 4, n])])
        lt = g.op("Slice", [d, g.const([0]), g.const([2]), g.const([1])])
        rb = g.op("Slice", [d, g.const([2]), g.const([4]), g.const([1])])
        grid = g.param("anchors", np.concatenate(anchors, 1).astype(np.float32)[None])
        x1y1, x2y2 = g.op("Sub", [grid, lt]), g.op("Add", [grid, rb])
        centre = g.op("Div", [g.op("Add", [x1y1, x2y2]), g.const(np.float32(2.0))])
        wh = g.op("Sub", [x2y2, x1y1])
        boxes = g.op("Mul", [g.op("Concat", [centre, wh], axis=1), g.param("strides", np.concatenate(strides)[None])])
        g.op("Concat", [boxes, g.op("Sigmoid", [cls])], out="output0", axis=1)
    g.output("output0", FLOAT, [batch, 4 + classes, n])
    return g.build()


# --------------------------------------------------------------------------- #
# sample inputs, CLI
# --------------------------------------------------------------------------- #
BUILDERS: dict[str, Callable[..., onnx.ModelProto]] = {
    "resnet50_style": resnet50_style,
    "mobilenetv2_style": mobilenetv2_style,
    "mobilenetv3_style": mobilenetv3_style,
    "pplcnet_style": pplcnet_style,
    "bert_style": bert_style,
    "tiny_cnn": tiny_cnn,
    "inception_style": inception_style,
    "vit_style": vit_style,
    "whisper_encoder_style": whisper_encoder_style,
    "detection_style": detection_style,
    "mobilenetv2_fp16_style": mobilenetv2_fp16_style,
    "bert_fp16_style": bert_fp16_style,
    "gpt2_style": gpt2_style,
    "resnet8": resnet8,
    "silero_vad_style": silero_vad_style,
    "llama_style": llama_style,
    "dbnet_style": dbnet_style,
    "crnn_lcnet_style": crnn_lcnet_style,
    "yolov8_style": yolov8_style,
}


def sample_inputs(model: onnx.ModelProto, seed: int = 0, batch: int = 1, seq: int = 16) -> dict[str, np.ndarray]:
    """Seeded feeds for a model built here: N(0, 1) images; token ids in [0, vocab) and
    attention masks with right padding (row 0 unpadded) for BERT; symbolic dims -> batch/seq; a VAD
    frame of 512 samples at sr 16000."""
    rng = np.random.default_rng(seed)
    symbols = {"batch": batch, "seq": seq, "samples": 512}  # (samples: a 16 kHz VAD frame)
    feeds: dict[str, np.ndarray] = {}
    for inp in model.graph.input:
        shape = [d.dim_value if d.HasField("dim_value") else symbols[d.dim_param]
                 for d in inp.type.tensor_type.shape.dim]
        if inp.type.tensor_type.elem_type == FLOAT:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif inp.name == "input_ids":
            vocab = next(t.dims[0] for t in model.graph.initializer  # (quantized: "..._quantized")
                         if t.name.startswith(("embeddings.word_embeddings.weight", "wte", "embed_tokens")) and len(t.dims) == 2)
            feeds[inp.name] = rng.integers(0, vocab, shape, dtype=np.int64)
        elif inp.name == "sr":  # silero_vad_style's sample rate
            feeds[inp.name] = np.array(16000 if shape == [] else [16000] * math.prod(shape), np.int64).reshape(shape)
        elif inp.name == "attention_mask":
            n, s = shape
            lengths = [s] + [int(rng.integers(max(1, s // 2), s + 1)) for _ in range(n - 1)]
            feeds[inp.name] = (np.arange(s)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
        else:
            raise ValueError(f"no sample-input rule for {inp.name!r}")
    return feeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="models: " + ", ".join(BUILDERS))
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument("--only", default=",".join(BUILDERS),
                        help="comma-separated subset of models (default: all)")
    parser.add_argument("--seed", type=int, default=0, help="weight/input seed (default 0)")
    parser.add_argument("--no-inputs", action="store_true", help="do not write sample inputs")
    args = parser.parse_args(argv)

    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in BUILDERS]
    if unknown or not names:
        parser.error(f"unknown model(s) {unknown}; choose from {', '.join(BUILDERS)}")

    args.out.mkdir(parents=True, exist_ok=True)
    for name in names:
        model = BUILDERS[name](seed=args.seed)
        onnx.checker.check_model(model, full_check=True)
        path = args.out / f"{name}.onnx"
        path.write_bytes(model.SerializeToString())
        n_params = sum(int(np.prod(t.dims)) for t in model.graph.initializer)
        print(f"{path}  {path.stat().st_size / 1e6:.2f} MB  {len(model.graph.node)} nodes  "
              f"{n_params / 1e6:.2f} M params")
        if not args.no_inputs:
            feeds = sample_inputs(model, seed=args.seed)
            if len(feeds) == 1:
                inp_path = args.out / f"{name}_input.npy"
                np.save(inp_path, next(iter(feeds.values())))
            else:
                inp_path = args.out / f"{name}_inputs.npz"
                np.savez(inp_path, **feeds)
            print(f"{inp_path}  ({', '.join(f'{k} {list(v.shape)}' for k, v in feeds.items())})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
