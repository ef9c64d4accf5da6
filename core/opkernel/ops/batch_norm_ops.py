"""FusedBatchNormV3 and FusedBatchNormGradV3, following TensorFlow's ``nn_ops.cc``: specs,
shape functions, the gradients, and generic kernels written with other ops, so every
backend runs them (a backend may override with a fused kernel of its own).

Training (``is_training``): the per-channel mean and variance of x over every axis but the
channel's (N, H, W; NCHW's channel is axis 1), y = (x - mean) / sqrt(var + epsilon) *
scale + offset; ``batch_mean``/``batch_variance`` are the batch's statistics (the variance
Bessel-corrected, n / (n - 1)), or, with ``exponential_avg_factor`` f != 1, the running
values (1 - f) * mean + f * batch's; ``reserve_space_1``/``reserve_space_2`` keep the
batch mean and the uncorrected variance for the gradient.  Inference: the given mean and
variance normalize, and are returned as they are.  x may be half or bfloat16 (computed in
float32, as TensorFlow's CPU kernel: the statistics are float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._norm_grads import normalization_grad_grad

__all__ = ["register_generic_kernels", "register_gradients", "register_ops"]

_FORMATS = "{'NHWC', 'NCHW', 'NDHWC', 'NCDHW'}"


def _channel_axis(data_format: str, rank: int) -> int:
    return 1 if data_format.startswith("NC") else rank - 1


def _fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


# ---------------------------------------------------------------- shape functions


def _batch_norm_shape(c: InferenceContext) -> None:
    fmt = c.get_attr("data_format", "NHWC")
    rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
    x = c.with_rank(c.input(0), rank)
    channels = x.dims[_channel_axis(fmt, rank)].value if x.dims is not None else None
    training = c.get_attr("is_training", True)
    for i in range(1, 5):
        v = c.with_rank(c.input(i), 1)
        if i < 3 or not training:
            known = v.dims[0].value if v.dims is not None else None
            if channels is None:
                channels = known
            elif known is not None and known != channels:
                raise c.error(f"{c.input_label(i)} must have {channels} elements (the channels), got {known}")
    c.set_output(0, x)
    for i in range(1, 5):
        c.set_output(i, c.vector(channels))
    c.set_output(5, c.vector(0))


def _batch_norm_grad_shape(c: InferenceContext) -> None:
    fmt = c.get_attr("data_format", "NHWC")
    rank = 5 if fmt in ("NDHWC", "NCDHW") else 4
    dy = c.with_rank(c.input(0), rank)
    x = c.merge(dy, c.with_rank(c.input(1), rank))
    channels = x.dims[_channel_axis(fmt, rank)].value if x.dims is not None else None
    c.set_output(0, x)
    c.set_output(1, c.vector(channels))
    c.set_output(2, c.vector(channels))
    c.set_output(3, c.vector(0))
    c.set_output(4, c.vector(0))


# ---------------------------------------------------------------- specs


def register_ops() -> None:
    register_op("FusedBatchNormV3").input("x: T").input("scale: U").input("offset: U").input("mean: U").input(
        "variance: U"
    ).output("y: T").output("batch_mean: U").output("batch_variance: U").output("reserve_space_1: U").output(
        "reserve_space_2: U"
    ).output("reserve_space_3: U").attr("T: {half, bfloat16, float}").attr("U: {bfloat16, float}").attr(
        "epsilon: float = 0.0001"
    ).attr("exponential_avg_factor: float = 1").attr(f"data_format: {_FORMATS} = 'NHWC'").attr(
        "is_training: bool = true"
    ).set_shape_fn(_batch_norm_shape).doc(
        "Batch normalization over every axis but the channels' (see opkernel.ops.batch_norm_ops)."
    )
    register_op("FusedBatchNormGradV3").input("y_backprop: T").input("x: T").input("scale: float").input(
        "reserve_space_1: U"
    ).input("reserve_space_2: U").input("reserve_space_3: U").output("x_backprop: T").output(
        "scale_backprop: U"
    ).output("offset_backprop: U").output("reserve_space_4: U").output("reserve_space_5: U").attr(
        "T: {half, bfloat16, float}"
    ).attr("U: {float}").attr("epsilon: float = 0.0001").attr(f"data_format: {_FORMATS} = 'NHWC'").attr(
        "is_training: bool = true"
    ).set_shape_fn(_batch_norm_grad_shape).doc(
        "The gradients of FusedBatchNormV3 with respect to x, scale and offset."
    )


# ---------------------------------------------------------------- generic kernels


def _layout(op: str, x: Any, data_format: str) -> tuple[list[int], list[int], int]:
    """(the reduced axes, the shape a channel vector broadcasts as, the channel count)."""
    rank = x.ndim
    want = 5 if data_format in ("NDHWC", "NCDHW") else 4
    if rank != want:
        raise _fail(op, f"x must have rank {want} for data_format {data_format!r}, got shape {list(x.shape)}")
    axis = _channel_axis(data_format, rank)
    channels = int(x.shape[axis])
    return [d for d in range(rank) if d != axis], [channels if d == axis else 1 for d in range(rank)], channels


def _vector(op: str, name: str, v: Any, channels: int) -> None:
    if tuple(v.shape) != (channels,):
        raise _fail(op, f"{name} must have shape [{channels}] (the channels), got {list(v.shape)}")


def _fused_batch_norm_v3(x: Any, scale: Any, offset: Any, mean: Any, variance: Any, epsilon: float,
                         exponential_avg_factor: float, data_format: str, is_training: bool, **attrs: Any) -> Any:
    op = "FusedBatchNormV3"
    ops = _ops()
    axes, bshape, channels = _layout(op, x, data_format)
    _vector(op, "scale", scale, channels)
    _vector(op, "offset", offset, channels)
    if not is_training or exponential_avg_factor != 1:
        _vector(op, "mean", mean, channels)
        _vector(op, "variance", variance, channels)
    xf = ops.cast(x, DstT="float32") if x.dtype.name != "float32" else x
    eps = np.float32(epsilon)
    if is_training:
        m = ops.mean(xf, axes)
        centered = ops.sub(xf, ops.reshape(m, bshape))
        v = ops.mean(ops.square(centered), axes)
        n = int(np.prod([x.shape[d] for d in axes]))
        corrected = ops.mul(v, np.float32(n / max(n - 1, 1)))
        f = np.float32(exponential_avg_factor)
        if exponential_avg_factor != 1:
            keep = np.float32(1 - exponential_avg_factor)
            batch_mean = ops.add(ops.mul(mean, keep), ops.mul(m, f))
            batch_var = ops.add(ops.mul(variance, keep), ops.mul(corrected, f))
        else:
            batch_mean, batch_var = m, corrected
        inv = ops.rsqrt(ops.add(v, eps))
        reserve_1, reserve_2 = m, v
    else:
        centered = ops.sub(xf, ops.reshape(mean, bshape))
        inv = ops.rsqrt(ops.add(variance, eps))
        batch_mean, batch_var, reserve_1, reserve_2 = mean, variance, mean, variance
    y = ops.add(ops.mul(centered, ops.reshape(ops.mul(inv, scale), bshape)), ops.reshape(offset, bshape))
    if x.dtype.name != "float32":
        y = ops.cast(y, DstT=x.dtype)
    reserve_3 = ops.fill(np.array([0], np.int32), np.float32(0))
    return [y, batch_mean, batch_var, reserve_1, reserve_2, reserve_3]


def _fused_batch_norm_grad_v3(y_backprop: Any, x: Any, scale: Any, reserve_space_1: Any, reserve_space_2: Any,
                              reserve_space_3: Any, epsilon: float, data_format: str, is_training: bool,
                              **attrs: Any) -> Any:
    op = "FusedBatchNormGradV3"
    ops = _ops()
    if tuple(y_backprop.shape) != tuple(x.shape):
        raise _fail(op, f"y_backprop and x must have one shape, got {list(y_backprop.shape)} and {list(x.shape)}")
    axes, bshape, channels = _layout(op, x, data_format)
    for name, v in (("scale", scale), ("reserve_space_1", reserve_space_1), ("reserve_space_2", reserve_space_2)):
        _vector(op, name, v, channels)
    half = x.dtype.name != "float32"
    xf = ops.cast(x, DstT="float32") if half else x
    dy = ops.cast(y_backprop, DstT="float32") if half else y_backprop
    inv = ops.rsqrt(ops.add(reserve_space_2, np.float32(epsilon)))
    xhat = ops.mul(ops.sub(xf, ops.reshape(reserve_space_1, bshape)), ops.reshape(inv, bshape))
    offset_backprop = ops.sum(dy, axes)
    scale_backprop = ops.sum(ops.mul(dy, xhat), axes)
    k = ops.reshape(ops.mul(scale, inv), bshape)
    if is_training:
        n = np.float32(np.prod([x.shape[d] for d in axes]))
        mean_dy = ops.reshape(ops.real_div(offset_backprop, n), bshape)
        mean_dy_xhat = ops.reshape(ops.real_div(scale_backprop, n), bshape)
        dx = ops.mul(k, ops.sub(ops.sub(dy, mean_dy), ops.mul(xhat, mean_dy_xhat)))
    else:
        dx = ops.mul(dy, k)
    if half:
        dx = ops.cast(dx, DstT=x.dtype)
    empty = np.zeros(0, np.float32)  # TensorFlow's unused reserve spaces 4 and 5
    return [dx, scale_backprop, offset_backprop, ops.identity(empty), ops.identity(empty)]


def register_generic_kernels() -> None:
    register_kernel("FusedBatchNormV3", backend="*")(_fused_batch_norm_v3)
    register_kernel("FusedBatchNormGradV3", backend="*")(_fused_batch_norm_grad_v3)


# ---------------------------------------------------------------- gradients


def _fused_batch_norm_grad(op: Any, dy: Any, *_unused: Any) -> list[Any]:
    """TensorFlow's _FusedBatchNormV3Grad: FusedBatchNormGradV3 on the reserve spaces
    (training) or on the given mean and variance (inference)."""
    ops = _ops()
    x, scale, _, mean, variance = op.inputs
    training = op.get_attr("is_training")
    r1, r2 = (op.outputs[3], op.outputs[4]) if training else (mean, variance)
    dx, dscale, doffset, _, _ = ops.fused_batch_norm_grad_v3(
        dy, x, scale, r1, r2, op.outputs[5], epsilon=op.get_attr("epsilon"),
        data_format=op.get_attr("data_format"), is_training=training)
    return [dx, dscale, doffset, None, None]


def _fused_batch_norm_grad_grad(op: Any, gx: Any, gscale: Any, goffset: Any, *_unused: Any) -> list[Any]:
    """The gradient of FusedBatchNormGradV3, as TensorFlow's _FusedBatchNormGradGradV3
    defines it, written with other ops (so higher orders work).  Training: the
    statistics are recomputed from x (the reserve spaces, functions of x in the graph
    that made them, get no gradient), and the normalizations' second derivative
    (``_norm_grads``) runs over every axis but the channel's.  Inference: with
    r = rsqrt(variance + epsilon) and the given mean, dx = dy * scale * r,
    dscale = sum(dy * (x - mean) * r) and doffset = sum(dy) are linear in dy, and only
    dscale depends on x.  The mean and variance get no gradient in either mode, as in
    TensorFlow."""
    op_name = "FusedBatchNormGradV3"
    ops = _ops()
    dy, x, scale, r1, r2 = op.inputs[:5]
    fmt, training = op.get_attr("data_format"), op.get_attr("is_training")
    eps = float(op.get_attr("epsilon"))
    rank = len(x.shape)
    axis = _channel_axis(fmt, rank)
    axes = [d for d in range(rank) if d != axis]
    bshape = [-1 if d == axis else 1 for d in range(rank)]
    half = x.dtype.name != "float32"

    def f32(t: Any) -> Any:
        return None if t is None else ops.cast(t, DstT="float32") if half else t

    def per_channel(t: Any) -> Any:
        return None if t is None else ops.reshape(t, bshape)

    dyf, xf, gxf = f32(dy), f32(x), f32(gx)
    scale_b, gs_b, gb_b = per_channel(scale), per_channel(gscale), per_channel(goffset)
    if training:
        sizes = [x.shape[d] for d in axes]
        if any(s is None for s in sizes):
            raise _fail(op_name, f"its gradient needs the sizes of the normalized axes known, got shape {list(x.shape)}")
        d_dy, d_x, d_scale = normalization_grad_grad(dyf, xf, scale_b, eps, axes, float(np.prod(sizes)),
                                                     lambda v: ops.sum(v, axes), gxf, gs_b, gb_b)
    else:
        r = per_channel(ops.rsqrt(ops.add(r2, np.float32(eps))))
        xh = ops.mul(ops.sub(xf, per_channel(r1)), r)
        terms = [t for t in (None if gxf is None else ops.mul(gxf, ops.mul(scale_b, r)),
                             None if gs_b is None else ops.mul(gs_b, xh), gb_b) if t is not None]
        d_dy = ops.zeros_like(xf)
        for t in terms:
            d_dy = ops.add(d_dy, t)
        d_x = ops.mul(ops.mul(gs_b, dyf), r) if gs_b is not None else ops.zeros_like(xf)
        d_scale = ops.sum(ops.mul(ops.mul(gxf, dyf), r), axes) if gxf is not None else None
    if half:
        d_dy, d_x = ops.cast(d_dy, DstT=x.dtype), ops.cast(d_x, DstT=x.dtype)
    return [d_dy, d_x, d_scale if d_scale is not None else ops.zeros_like(scale), None, None, None]


def register_gradients() -> None:
    register_gradient("FusedBatchNormV3")(_fused_batch_norm_grad)
    register_gradient("FusedBatchNormGradV3")(_fused_batch_norm_grad_grad)
