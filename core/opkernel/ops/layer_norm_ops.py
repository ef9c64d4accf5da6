"""FusedLayerNorm and FusedLayerNormGrad: layer normalization over the last axis in one op
each way (opkernel's own ops; TensorFlow and Keras compose it from moments and
elementwise ops, which is what the oracle compares these with).

Forward: y = (x - mean) * rsqrt(var + epsilon) * scale + offset, mean and the
uncorrected variance over the last axis of x, ``scale`` and ``offset`` vectors of the
last axis' size.  Gradient: with xhat = (x - mean) * rstd and g = dy * scale,
dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), dscale = sum(dy * xhat) and
doffset = sum(dy) over every axis but the last.  The gradient op recomputes the
statistics from x (one pass over a row) rather than keeping them as outputs.  half and
bfloat16 compute in float32, as TensorFlow's fused normalizations do.  The gradient op's
own gradient is written with other ops, so higher orders work.

Registered with the built-in op library (``opkernel.ops._builtin``).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import Tensor, ops_module as _ops
from ._norm_grads import normalization_grad_grad

__all__ = ["check_layer_norm", "register_gradients", "register_ops"]

_FLOATS = "{half, bfloat16, float, double}"


def check_layer_norm(op: str, x_shape: tuple[int, ...], scale_shape: tuple[int, ...], offset_shape: tuple[int, ...] | None,
                     epsilon: float) -> int:
    """The size of the normalized (last) axis, after the checks every backend's kernel
    shares: x has rank >= 1; scale (and offset) are vectors of that size; epsilon > 0."""
    if len(x_shape) < 1:
        raise InvalidArgumentError(f"op {op!r}: x must have rank >= 1 (its last axis is normalized), got a scalar", op=op)
    c = int(x_shape[-1])
    for name, shape in (("scale", scale_shape), ("offset", offset_shape)):
        if shape is not None and tuple(shape) != (c,):
            raise InvalidArgumentError(f"op {op!r}: {name} must be a vector of the last axis' size {c}, got shape "
                                       f"{list(shape)}", op=op)
    if not epsilon > 0:
        raise InvalidArgumentError(f"op {op!r}: epsilon must be positive, got {epsilon!r}", op=op)
    return c


def _layer_norm_shape(c: InferenceContext) -> None:
    x = c.with_rank_at_least(c.input(0), 1)
    last = c.dim(x, -1) if x.rank is not None else c.unknown_dim()
    for i in (1, 2):
        v = c.with_rank(c.input(i), 1)
        last = c.merge(last, c.dim(v, 0))
    c.set_output(0, x if x.rank is None else c.replace_dim(x, -1, last))


def _layer_norm_grad_shape(c: InferenceContext) -> None:
    x = c.merge(c.with_rank_at_least(c.input(0), 1), c.with_rank_at_least(c.input(1), 1))
    scale = c.with_rank(c.input(2), 1)
    last = c.merge(c.dim(x, -1), c.dim(scale, 0)) if x.rank is not None else c.dim(scale, 0)
    c.set_output(0, x if x.rank is None else c.replace_dim(x, -1, last))
    c.set_output(1, c.vector(last))
    c.set_output(2, c.vector(last))


def register_ops() -> None:
    register_op("FusedLayerNorm").input("x: T").input("scale: T").input("offset: T").output("y: T").attr(
        f"T: {_FLOATS}"
    ).attr("epsilon: float = 0.001").set_shape_fn(_layer_norm_shape).doc(
        "Layer normalization over the last axis in one op: y = (x - mean) * rsqrt(var + epsilon) * "
        "scale + offset, with the mean and uncorrected variance of each row (Keras's "
        "LayerNormalization(axis=-1); its default epsilon is 1e-3, torch's 1e-5).\n\n"
        "x: rank >= 1; its last axis is normalized.\n"
        "scale: the last axis' size.\n"
        "offset: the last axis' size.\n"
        "epsilon: added to the variance, > 0."
    )
    register_op("FusedLayerNormGrad").input("y_backprop: T").input("x: T").input("scale: T").output(
        "x_backprop: T"
    ).output("scale_backprop: T").output("offset_backprop: T").attr(f"T: {_FLOATS}").attr(
        "epsilon: float = 0.001"
    ).set_shape_fn(_layer_norm_grad_shape).doc(
        "The gradients of FusedLayerNorm with respect to x, scale and offset, from the output's "
        "gradient and the forward op's x and scale (the statistics are computed again).\n\n"
        "y_backprop: the gradient of y, x's shape.\n"
        "x: the forward op's input.\n"
        "scale: the forward op's scale."
    )


def _layer_norm_grad(op: Any, grad: Tensor) -> list[Any]:
    x, scale, _ = op.inputs
    dx, dscale, doffset = _ops().fused_layer_norm_grad(grad, x, scale, epsilon=op.get_attr("epsilon"))
    return [dx, dscale, doffset]


def _layer_norm_grad_grad(op: Any, gx: Tensor | None, gs: Tensor | None, gb: Tensor | None) -> list[Any]:
    """The gradient of FusedLayerNormGrad, written with other ops (so it has gradients of
    its own): the normalizations' second derivative (``_norm_grads``) over the last axis,
    the scale's gradient summed over the rows."""
    ops = _ops()
    dy, x, scale = op.inputs
    if x.shape[-1] is None:
        raise InvalidArgumentError("op 'FusedLayerNormGrad': its gradient needs the normalized axis' size known",
                                   op="FusedLayerNormGrad")
    lead = list(range(len(x.shape) - 1))

    def sum_rows(v: Any) -> Any:
        return ops.sum(v, lead) if lead else v

    d_dy, d_x, d_scale = normalization_grad_grad(dy, x, scale, op.get_attr("epsilon"), [len(x.shape) - 1],
                                                 float(x.shape[-1]), sum_rows, gx, gs, gb)
    return [d_dy, d_x, d_scale if d_scale is not None else ops.zeros_like(scale)]


def register_gradients() -> None:
    register_gradient("FusedLayerNorm")(_layer_norm_grad)
    register_gradient("FusedLayerNormGrad")(_layer_norm_grad_grad)
