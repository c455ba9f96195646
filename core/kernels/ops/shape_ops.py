"""Shape ops: Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout (inference), Shape, Size,
Constant, ConstantOfShape, Range, EyeLike.

The first six only reinterpret input 0 (`alias = True`): the compiler makes their output a view of
the input; their `run` (a plain copy into the planned output, whose shape is already known) is only
used when an alias has to become a copy. Shape-defining inputs (Reshape's shape, the axes of
Squeeze/Unsqueeze from opset 13, ConstantOfShape's shape, Range's bounds) must be constants for
`infer`; `compute` always reads them from its arguments (constant folding).
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ...model.ir import dtype_from_onnx
from ..base import copyto
from ..registry import register
from .shape_kernel import ShapeKernel
from ..values import ints


# -- helpers shared with tensor_ops ------------------------------------------------------------------

class AliasKernel(ShapeKernel):
    """Output 0 is input 0 with another shape: a view. `run` copies (alias turned into a copy)."""
    alias = True

    def run(self, xs, ys, ws):
        copyto(ys[0], xs[0].reshape(ys[0].shape))

    def bound(self, xs, ys, ws):
        """run()'s copy itself where run() is only that, the input seen in the output's shape once (the
        reshape of a contiguous array is a view of it): a task's Squeeze or Reshape copy, a Loop body's
        every iteration."""
        if type(self).run is AliasKernel.run and xs[0].flags.c_contiguous:
            return partial(copyto, ys[0], xs[0].reshape(ys[0].shape))
        return super().bound(xs, ys, ws)


# -- alias ops ------------------------------------------------------------------------------------------

@register("Reshape", since=5)
class Reshape(AliasKernel):
    shape_inputs = ((1, "shape"),)

    def prepare(self):
        self.allowzero = int(self.attr("allowzero", 0))
        if self.allowzero not in (0, 1):
            raise self.fail(f"allowzero must be 0 or 1, got {self.allowzero}")

    def target(self, in_shape, shape) -> tuple:
        shape = ints(shape)
        out, infer_at = [], -1
        for i, s in enumerate(shape):
            if s == -1:
                if infer_at >= 0:
                    raise self.fail(f"shape {shape} has more than one -1")
                infer_at = i
                out.append(1)
            elif s == 0 and not self.allowzero:
                if i >= len(in_shape):
                    raise self.fail(f"shape {shape}: 0 at position {i} copies a dim the input {tuple(in_shape)} lacks")
                out.append(int(in_shape[i]))
            elif s < 0:
                raise self.fail(f"shape {shape} has the invalid dim {s}")
            else:
                out.append(s)
        total = math.prod(in_shape)
        if infer_at >= 0:
            known = math.prod(out)
            if known == 0 or total % known:
                raise self.fail(f"cannot reshape {tuple(in_shape)} to {shape}")
            out[infer_at] = total // known
        if math.prod(out) != total:
            raise self.fail(f"cannot reshape {tuple(in_shape)} ({total} elements) to {shape}")
        return tuple(out)

    def compute(self, x, shape):
        return [x.reshape(self.target(x.shape, shape))]

    def infer(self):
        from ...model.ir import Meta
        shape = self.const(1, "shape")
        return [Meta(self.inputs[0].dtype, self.target(self.inputs[0].shape, shape))]


@register("Flatten")
class Flatten(AliasKernel):
    def prepare(self):
        self.axis = int(self.attr("axis", 1))

    def compute(self, x):
        r = x.ndim
        if not -r <= self.axis <= r:
            raise self.fail(f"axis {self.axis} is out of range for rank {r}")
        a = self.axis + r if self.axis < 0 else self.axis
        return [x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:]))]


@register("Squeeze")
class Squeeze(AliasKernel):
    """Squeeze-1/11: axes as an attribute (absent: every dim of size 1)."""

    def prepare(self):
        axes = self.attr("axes")
        self.axes_attr = None if axes is None else ints(axes)

    def squeeze(self, x, axes):
        if axes is None or len(axes) == 0:
            return x.reshape(tuple(d for d in x.shape if d != 1))
        axes = self.norm_axes(axes, x.ndim)
        for a in axes:
            if x.shape[a] != 1:
                raise self.fail(f"cannot squeeze axis {a} of size {x.shape[a]} (shape {x.shape})")
        return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))

    def compute(self, x, axes=None):
        return [self.squeeze(x, self.axes_attr)]


@register("Squeeze", since=13)
class Squeeze13(Squeeze):
    """Squeeze-13: axes as an optional input."""
    shape_inputs = ((1, "axes"),)

    def compute(self, x, axes=None):
        return [self.squeeze(x, None if axes is None else ints(axes))]


@register("Unsqueeze")
class Unsqueeze(AliasKernel):
    """Unsqueeze-1/11: axes as a required attribute."""
    from_input = False

    def prepare(self):
        if not self.from_input:
            axes = self.attr("axes")
            if axes is None:
                raise self.fail("attribute 'axes' is required")
            self.axes_attr = ints(axes)

    def unsqueeze(self, x, axes):
        if len(axes) == 0:
            raise self.fail("axes is empty")
        rank = x.ndim + len(axes)
        axes = set(self.norm_axes(axes, rank))
        dims = iter(x.shape)
        return x.reshape(tuple(1 if i in axes else next(dims) for i in range(rank)))

    def compute(self, x, axes=None):
        return [self.unsqueeze(x, self.axes_attr)]


@register("Unsqueeze", since=13)
class Unsqueeze13(Unsqueeze):
    """Unsqueeze-13: axes as a required input."""
    from_input = True
    shape_inputs = ((1, "axes"),)

    def prepare(self):
        if not self.has_input(1):
            raise self.fail("input 1 (axes) is required")

    def compute(self, x, axes):
        return [self.unsqueeze(x, ints(axes))]


@register("Identity")
class Identity(AliasKernel):
    def compute(self, x):
        return [x]

    def run(self, xs, ys, ws):
        copyto(ys[0], xs[0])

    def bound(self, xs, ys, ws):
        """The copy itself (a Loop body's Identity outputs run every iteration)."""
        return partial(copyto, ys[0], xs[0])


@register("Dropout")
class Dropout(AliasKernel):
    """Inference: output = input; the optional mask is all True (x's dtype, all ones, before opset 10).
    Training mode (a true `training_mode` input, opset 12): each element is kept with probability
    1 - ratio and scaled by 1 / (1 - ratio), the mask saying which; a `seed` makes the draw the same
    every run, without one each run draws anew. With a used mask, or a training_mode that is not a
    constant False, the node is not an alias (the instance's `alias` is False): a task writes it."""
    reads_outputs = True  # a used mask makes it a task, not an alias

    def prepare(self):
        if self.num_outputs > 1 and not (self.outputs and self.outputs[1] is None):  # a used mask
            self.alias = False
        ratio = self.attr("ratio", 0.5)
        if not 0 <= float(ratio) < 1:
            raise self.fail(f"ratio must be in [0, 1), got {ratio}")
        self.ratio = float(ratio)
        mode_given = len(self.inputs) > 2 and self.inputs[2] is not None
        mode = self.const_or_none(2)
        if mode_given and (mode is None or bool(np.asarray(mode).reshape(-1)[0])):
            self.alias = False
        seed = self.attr("seed")
        self.seed = None if seed is None else int(seed)
        self.rng = np.random.default_rng()

    def mask_dtype(self, x_dtype):
        return np.dtype(np.bool_) if self.opset >= 10 else np.dtype(x_dtype)

    def _ratio(self, ratio) -> float:
        if ratio is None:
            return self.ratio
        r = float(np.asarray(ratio).reshape(-1)[0])
        if not 0 <= r < 1:
            raise self.fail(f"ratio must be in [0, 1), got {r}")
        return r

    def _keep(self, x, ratio, training_mode):
        """The mask of kept elements, or None when every element is kept (inference, ratio 0)."""
        if training_mode is None or not bool(np.asarray(training_mode).reshape(-1)[0]):
            return None
        r = self._ratio(ratio)
        if r == 0:
            return None
        if self.seed is not None:  # a seeded node draws the same mask every run (numpy's seeded uniform, as onnx's reference)
            return np.random.RandomState(self.seed).uniform(0, 1, x.shape) >= r
        return self.rng.random(x.shape) >= r

    def compute(self, x, ratio=None, training_mode=None):
        ys = [np.empty(x.shape, x.dtype)] + ([np.empty(x.shape, self.mask_dtype(x.dtype))]
                                              if self.num_outputs > 1 else [])
        self.run([x, ratio, training_mode], ys, None)
        return ys

    def run(self, xs, ys, ws):
        x = xs[0].reshape(ys[0].shape)
        keep = self._keep(x, xs[1] if len(xs) > 1 else None, xs[2] if len(xs) > 2 else None)
        if keep is None:
            np.copyto(ys[0], x)
        else:
            np.multiply(x, keep, out=ys[0], casting="unsafe")
            np.divide(ys[0], 1 - self._ratio(xs[1] if len(xs) > 1 else None), out=ys[0], casting="unsafe")
        if len(ys) > 1 and ys[1] is not None:
            if keep is None:
                ys[1].fill(1)
            else:
                np.copyto(ys[1], keep, casting="unsafe")


# -- shape queries and generators ------------------------------------------------------------

@register("Shape")
class Shape(ShapeKernel):
    """Shape-1/13/15 (start/end, clamped like Python slicing)."""
    shape_agnostic = True  # (run reads the input's own shape: a decoder's past, a new length every call)

    def agnostic_output_shape(self, shapes):
        return (len(range(len(shapes[0]))[self.slice]),)

    def prepare(self):
        start, end = self.attr("start", 0), self.attr("end")
        self.slice = slice(int(start), None if end is None else int(end))

    def compute(self, x):
        return [np.array(x.shape[self.slice], np.int64)]

    def run(self, xs, ys, ws):
        ys[0][...] = xs[0].shape[self.slice]


@register("Size")
class Size(ShapeKernel):
    def compute(self, x):
        return [np.array(x.size, np.int64)]

    def run(self, xs, ys, ws):
        ys[0][...] = xs[0].size


@register("Constant")
class Constant(ShapeKernel):
    """value (tensor), sparse_value (as the importer densifies it), value_float(s), value_int(s).
    Strings are not supported."""

    def prepare(self):
        given = [k for k in self.attrs if k.startswith("value") or k == "sparse_value"]
        if len(given) != 1:
            raise self.fail(f"needs exactly one value attribute, got {given or 'none'}")
        key = given[0]
        v = self.attrs[key]
        if key == "value" or (key == "sparse_value" and isinstance(v, np.ndarray)):
            self.value = self.tensor_attr(key, v)
        elif key == "value_float":
            self.value = np.array(v, np.float32)
        elif key == "value_floats":
            self.value = np.array(list(v), np.float32).reshape(-1)
        elif key == "value_int":
            self.value = np.array(v, np.int64)
        elif key == "value_ints":
            self.value = np.array(list(v), np.int64).reshape(-1)
        else:
            raise self.fail(f"attribute '{key}' is not supported")

    def compute(self):
        return [self.value.copy()]

    def run(self, xs, ys, ws):
        np.copyto(ys[0], self.value)


@register("ConstantOfShape", since=9)
class ConstantOfShape(ShapeKernel):
    shape_inputs = ((0, "shape"),)

    def prepare(self):
        v = self.attr("value")
        v = np.zeros(1, np.float32) if v is None else self.tensor_attr("value", v)
        if v.size != 1:
            raise self.fail(f"value must have one element, got shape {v.shape}")
        self.value = v.reshape(())

    def compute(self, shape):
        dims = ints(shape)
        if any(d < 0 for d in dims):
            raise self.fail(f"negative dim in shape {dims}")
        return [np.full(dims, self.value, self.value.dtype)]

    def run(self, xs, ys, ws):
        ys[0].fill(self.value)


@register("Range", since=11)
class Range(ShapeKernel):
    shape_inputs = ((0, "start"), (1, "limit"), (2, "delta"))
    shape_agnostic = True  # (run counts from the values it is given: a decoder's positions, past to past + seq)

    def agnostic_output_shape(self, shapes, values=None):
        values = values or {}
        return (self._count(*(values.get(i, c) for i, c in enumerate(self.consts[:3])))[0],)

    def _count(self, start, limit, delta) -> tuple:
        """(how many elements, start, delta) as ints or floats of start's kind."""
        dtype = np.asarray(start).dtype
        start, limit, delta = (np.asarray(v, dtype).reshape(-1)[0] for v in (start, limit, delta))
        if delta == 0:
            raise self.fail("delta is 0")
        if dtype.kind in "iu":
            s, l, d = int(start), int(limit), int(delta)
            return max(-((s - l) // d), 0), s, d
        return max(math.ceil(float(limit - start) / float(delta)), 0), float(start), float(delta)

    def compute(self, start, limit, delta):
        n, s, d = self._count(start, limit, delta)
        work = np.int64 if isinstance(s, int) else np.float64
        return [(s + np.arange(n, dtype=work) * d).astype(np.asarray(start).dtype)]


@register("EyeLike", since=9)
class EyeLike(ShapeKernel):
    def prepare(self):
        self.k = int(self.attr("k", 0))
        dt = self.attr("dtype")
        self.dtype = None if dt is None else dtype_from_onnx(int(dt), f"node '{self.name}' (EyeLike) dtype")
        if self.inputs and self.inputs[0] is not None and len(self.inputs[0].shape) != 2:
            raise self.fail(f"input must be 2-D, got shape {self.inputs[0].shape}")

    def compute(self, x):
        if x.ndim != 2:
            raise self.fail(f"input must be 2-D, got shape {x.shape}")
        return [np.eye(x.shape[0], x.shape[1], self.k, dtype=self.dtype or x.dtype)]

    def run(self, xs, ys, ws):
        y = ys[0]
        y.fill(0)
        k = self.k
        part = y[:, k:] if k >= 0 else y[-k:, :]
        if part.size:
            np.fill_diagonal(part, 1)
