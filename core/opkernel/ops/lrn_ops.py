"""Local response normalization: specs, kernels, shape functions and gradients of LRN
and LRNGrad, following TensorFlow's ``nn_ops.cc`` and ``lrn_op.cc``.

Over the last (depth) dimension of a 4-D input, with ``N[d] = bias + alpha * sum of
input[d']^2 for |d' - d| <= depth_radius``:

    LRN:     output[d] = input[d] * N[d] ** -beta
    LRNGrad: output[k] = g[k] * N[k] ** -beta
                         - 2 * alpha * beta * input[k] * sum over |j - k| <= r of g[j] * y[j] / N[j]

(LRNGrad's ``y`` is the LRN output it is given, as in TensorFlow's CPU kernel).  The
kernels are generic, composed of elementwise ops and a windowed sum of shifted
slices, so every backend runs them; half and bfloat16 are computed in float32.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..tensor import ops_module as _ops
from ._array_common import named_errors
from ..shapes import InferenceContext

_ATTRS = ("depth_radius: int = 5", "bias: float = 1.0", "alpha: float = 1.0", "beta: float = 0.5",
          "T: {half, bfloat16, float} = DT_FLOAT")


def _window_sum(x: Any, radius: int) -> Any:
    """sum of x[..., d'] over |d' - d| <= radius along the last of 4 dimensions (zeros past the ends)."""
    ops = _ops()
    depth = int(x.shape[3])
    r = min(radius, depth - 1)
    if r <= 0:
        return x
    padded = ops.pad(x, np.asarray([[0, 0], [0, 0], [0, 0], [r, r]], np.int64))
    size = np.asarray([*[int(d) for d in x.shape[:3]], depth], np.int64)
    total = ops.slice(padded, np.asarray([0, 0, 0, 0], np.int64), size)
    for k in range(1, 2 * r + 1):
        total = ops.add(total, ops.slice(padded, np.asarray([0, 0, 0, k], np.int64), size))
    return total


def _check(op: str, tensors: dict[str, Any], depth_radius: int) -> None:
    shapes = {name: [int(d) for d in t.shape] for name, t in tensors.items()}
    for name, shape in shapes.items():
        if len(shape) != 4:
            raise InvalidArgumentError(f"op {op!r}: {name} must be 4-dimensional, got shape {shape}", op=op)
    if len({tuple(s) for s in shapes.values()}) > 1:
        raise InvalidArgumentError(f"op {op!r}: the inputs must have one shape, got {shapes}", op=op)
    if depth_radius < 0:
        raise InvalidArgumentError(f"op {op!r}: depth_radius must be non-negative, got {depth_radius}", op=op)


def _widen(x: Any) -> Any:
    return _ops().cast(x, DstT="float32") if x.dtype.name in ("float16", "bfloat16") else x


def _norm(x: Any, depth_radius: int, bias: float, alpha: float) -> Any:
    ops = _ops()
    c = np.dtype(x.dtype.np).type
    return ops.add(ops.mul(_window_sum(ops.square(x), depth_radius), c(alpha)), c(bias))


def _lrn(input: Any, depth_radius: int, bias: float, alpha: float, beta: float) -> Any:
    _check("LRN", {"input": input}, depth_radius)
    ops, x = _ops(), _widen(input)
    c = np.dtype(x.dtype.np).type
    out = ops.mul(x, ops.pow(_norm(x, depth_radius, bias, alpha), c(-beta)))
    return out if out.dtype == input.dtype else ops.cast(out, DstT=input.dtype)


def _lrn_grad(input_grads: Any, input_image: Any, output_image: Any, depth_radius: int, bias: float, alpha: float,
              beta: float) -> Any:
    _check("LRNGrad", {"input_grads": input_grads, "input_image": input_image, "output_image": output_image},
           depth_radius)
    ops = _ops()
    g, x, y = _widen(input_grads), _widen(input_image), _widen(output_image)
    c = np.dtype(x.dtype.np).type
    norm = _norm(x, depth_radius, bias, alpha)
    spread = _window_sum(ops.real_div(ops.mul(g, y), norm), depth_radius)
    out = ops.sub(ops.mul(g, ops.pow(norm, c(-beta))), ops.mul(ops.mul(x, spread), c(2 * alpha * beta)))
    return out if out.dtype == input_grads.dtype else ops.cast(out, DstT=input_grads.dtype)


def _lrn_shape(c: InferenceContext) -> None:
    c.set_output(0, c.with_rank(c.input(0), 4))


def _lrn_grad_shape(c: InferenceContext) -> None:
    shape = c.with_rank(c.input(0), 4)
    for i in (1, 2):
        shape = c.merge(shape, c.with_rank(c.input(i), 4))
    c.set_output(0, shape)


def register_generic_kernels() -> None:
    register_kernel("LRN", backend="*")(named_errors("LRN")(_lrn))
    register_kernel("LRNGrad", backend="*")(named_errors("LRNGrad")(_lrn_grad))


def register_ops() -> None:
    builder = register_op("LRN").input("input: T").output("output: T")
    for attr in _ATTRS:
        builder = builder.attr(attr)
    builder.set_shape_fn(_lrn_shape).doc(
        "Local response normalization over the last dimension of a 4-D input: output = input / (bias + alpha * "
        "sum of input**2 over the depth_radius neighbours on each side and itself) ** beta."
    )
    builder = register_op("LRNGrad").input("input_grads: T").input("input_image: T").input("output_image: T").output(
        "output: T"
    )
    for attr in _ATTRS:
        builder = builder.attr(attr)
    builder.set_shape_fn(_lrn_grad_shape).doc(
        "The gradient of LRN.\n\ninput_grads: The gradient of LRN's output.\ninput_image: LRN's input.\n"
        "output_image: LRN's output."
    )


def _lrn_gradient(op: Any, grad: Any) -> list[Any]:
    attrs = {name: op.get_attr(name) for name in ("depth_radius", "bias", "alpha", "beta")}
    return [_ops().lrn_grad(grad, op.inputs[0], op.outputs[0], **attrs)]


def register_gradients() -> None:
    register_gradient("LRN")(_lrn_gradient)
    not_differentiable("LRNGrad")  # TensorFlow has no gradient for it either

