"""Specs, shape functions and gradients of the neural-network ops.

Activations, softmax and the cross-entropy losses, BiasAdd, Conv2D and its two
backprop ops, and max/average pooling with their gradient ops, following
TensorFlow's ``nn_ops.cc``.  The window arithmetic (``window_output_size``,
``spatial_attr``, ``explicit_padding``) is public so that backends compute
exactly the geometry the shape functions promise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import shape_fns
from ..autodiff import is_unit_gradient, is_zero_gradient
from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import Dimension, InferenceContext, TensorShape
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import constant, mat_mul_grads, unbroadcast
from .math_ops import UNARY_GRAD_RULES

__all__ = [
    "FUSED_ACTIVATIONS",
    "SELU_ALPHA",
    "SELU_SCALE",
    "conv_groups",
    "explicit_padding",
    "register_gradients",
    "register_ops",
    "spatial_attr",
    "window_output_size",
]

SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717

_FLOATS = "{half, bfloat16, float, double}"
_PADDING = "padding: {'SAME', 'VALID'}"
_PADDING_EXPLICIT = "padding: {'SAME', 'VALID', 'EXPLICIT'}"
_EXPLICIT_PADDINGS = "explicit_paddings: list(int) = []"
_DATA_FORMAT = "data_format: {'NHWC', 'NCHW'} = 'NHWC'"
#: How SparseSoftmaxCrossEntropyLoss reduces the per-example losses (torch's ``reduction``).
LOSS_REDUCTION_ATTR = "reduction: {'mean', 'sum'} = 'mean'"

#: The activations FusedMatMul offers (a subset of TensorFlow's _FusedMatMul fused_ops).
FUSED_ACTIVATIONS = ("Identity", "Relu", "Relu6", "Elu", "Sigmoid", "Tanh")
FUSED_ACTIVATION_ATTR = "activation: {" + ", ".join(f"'{a}'" for a in FUSED_ACTIVATIONS) + "} = 'Identity'"


# ------------------------------------------------------------ window geometry


def window_output_size(
    input_size: int, filter_size: int, dilation: int, stride: int, padding: str, pads: tuple[int, int] = (0, 0)
) -> tuple[int, int, int]:
    """TensorFlow's ``GetWindowedOutputSizeVerbose``: ``(output size, padding
    before, padding after)`` of one spatial dimension.

    ``SAME``: ``out = ceil(in / stride)``, padding total
    ``max((out - 1) * stride + effective_filter - in, 0)``, the smaller half
    before.  ``VALID``: no padding.  ``EXPLICIT``: ``pads``.  Raises ValueError
    for non-positive strides/dilations/filter size or a negative output size.
    """
    if stride < 1:
        raise ValueError(f"strides must be > 0, got {stride}")
    if dilation < 1:
        raise ValueError(f"dilations must be > 0, got {dilation}")
    if filter_size < 1:  # an empty window would give an output made of nothing (TensorFlow refuses it too)
        raise ValueError(f"the filter's spatial size must be > 0, got {filter_size}")
    effective = (filter_size - 1) * dilation + 1
    if padding == "VALID":
        before = after = 0
        out = _c_div(input_size - effective + stride, stride)
    elif padding == "SAME":
        out = (input_size + stride - 1) // stride
        total = max((out - 1) * stride + effective - input_size, 0)
        before, after = total // 2, total - total // 2
    elif padding == "EXPLICIT":
        before, after = pads
        out = _c_div(input_size + before + after - effective + stride, stride)
    else:
        raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}")
    if out < 0:
        raise ValueError(
            f"computed output size would be negative: {out} [input size {input_size}, "
            f"effective filter size {effective}, stride {stride}, padding {before}+{after}]"
        )
    return out, before, after


def _c_div(a: int, b: int) -> int:
    """a / b rounded toward zero, as C's integer division in TensorFlow's GetWindowedOutputSize:
    a window that overhangs the input by less than a stride gives an empty output, not an error."""
    q = abs(a) // b
    return q if a >= 0 else -q


def spatial_attr(values: Sequence[int], data_format: str, name: str) -> tuple[int, int]:
    """The (height, width) entries of a 4-element ``strides``/``ksize``/``dilations``
    attr laid out as ``data_format``; every entry must be positive and the batch
    and depth entries 1.  Raises ValueError."""
    if len(values) != 4:
        raise ValueError(f"attr '{name}' must specify 4 dimensions, got {list(values)}")
    if any(v < 1 for v in values):
        raise ValueError(f"attr '{name}' must be positive, got {list(values)}")
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    c = 3 if data_format == "NHWC" else 1
    if values[0] != 1 or values[c] != 1:
        raise ValueError(
            f"attr '{name}' must be 1 in the batch and depth dimensions ({data_format} layout), got {list(values)}"
        )
    return int(values[h]), int(values[w])


def explicit_padding(
    padding: str, explicit_paddings: Sequence[int], data_format: str, pool_window: tuple[int, int] | None = None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from ``explicit_paddings`` (pairs per
    dimension of ``data_format``) when ``padding`` is ``EXPLICIT``; zeros
    otherwise.  Raises ValueError as TensorFlow's ``CheckValidPadding`` does and,
    for a pool (``pool_window``: its (height, width)), as its pools do for padding
    as wide as the window (pooling_ops_common.cc): so no window pools padding alone."""
    if padding != "EXPLICIT":
        if len(explicit_paddings):
            raise ValueError(
                f"attr 'explicit_paddings' must be empty unless padding is 'EXPLICIT', got {list(explicit_paddings)}"
            )
        return (0, 0), (0, 0)
    if len(explicit_paddings) != 8:
        raise ValueError(
            f"attr 'explicit_paddings' must have 8 values (a pair per dimension) when padding is 'EXPLICIT', "
            f"got {list(explicit_paddings)}"
        )
    if any(p < 0 for p in explicit_paddings):
        raise ValueError(f"attr 'explicit_paddings' must be non-negative, got {list(explicit_paddings)}")
    pairs = [tuple(explicit_paddings[i : i + 2]) for i in range(0, 8, 2)]
    h, w, c = (1, 2, 3) if data_format == "NHWC" else (2, 3, 1)
    if pairs[0] != (0, 0) or pairs[c] != (0, 0):
        raise ValueError(f"attr 'explicit_paddings' must not pad the batch or depth dimension, got {list(explicit_paddings)}")
    ph, pw = (int(pairs[h][0]), int(pairs[h][1])), (int(pairs[w][0]), int(pairs[w][1]))
    if pool_window is not None:
        kh, kw = pool_window
        for side, pad, k in (("top", ph[0], kh), ("bottom", ph[1], kh), ("left", pw[0], kw), ("right", pw[1], kw)):
            if pad >= k:
                raise ValueError(f"{side} padding {pad} must be smaller than the window size {k}")
    return ph, pw


def conv_groups(x_shape: Sequence[int], f_shape: Sequence[int]) -> int:
    """How many groups a Conv2D's channels form (NHWC ``x_shape``, HWIO ``f_shape``): as in
    TensorFlow, an input depth that is a multiple of the filter's in_channels makes a
    grouped convolution, each slice of in_channels input channels convolved with its own
    slice of the output channels.  1 otherwise (the geometry check then reports any
    mismatch).  Raises ValueError when the output channels do not split into the groups."""
    c, fc, oc = int(x_shape[3]), int(f_shape[2]), int(f_shape[3])
    if fc == c or fc <= 0 or c < fc or c % fc:  # c < fc: no groups (0 of them for an empty depth)
        return 1
    groups = c // fc
    if oc % groups:
        raise ValueError(f"output depth {oc} must be evenly divisible by the number of groups {groups} "
                         f"(input depth {c}, filter in_channels {fc})")
    return groups


# ------------------------------------------------------------ shape functions


def _layout(fmt: str) -> tuple[int, int, int, int]:
    """Axes (batch, height, width, depth) of a 4-D tensor in ``fmt``."""
    return (0, 1, 2, 3) if fmt == "NHWC" else (0, 2, 3, 1)


def _make_4d(c: InferenceContext, fmt: str, n: Dimension, h: Dimension, w: Dimension, d: Dimension) -> TensorShape:
    return c.make_shape([n, h, w, d] if fmt == "NHWC" else [n, d, h, w])


def _checked(c: InferenceContext, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as e:
        raise c.error(str(e)) from None


def _windowed_dim(
    c: InferenceContext, size: Dimension, k: Dimension | int, dilation: int, stride: int, padding: str, pads: tuple[int, int]
) -> Dimension:
    in_size, k_size = c.value(size), c.value(k)
    if in_size is None or k_size is None:
        _checked(c, window_output_size, 1, 1, dilation, stride, padding, pads)  # still validate the attrs
        return c.unknown_dim()
    return c.make_dim(_checked(c, window_output_size, in_size, k_size, dilation, stride, padding, pads)[0])


def _conv2d_shape(c: InferenceContext, grouped: bool = True) -> None:
    """Conv2D's output shape; ``grouped``: an input depth that is a multiple of the filter's
    in_channels is a grouped convolution (see conv_groups), as in TensorFlow's shape function."""
    fmt = c.get_attr("data_format")
    x = c.with_rank(c.input(0), 4)
    f = c.with_rank(c.input(1), 4)
    sh, sw = _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    dh, dw = _checked(c, spatial_attr, c.get_attr("dilations"), fmt, "dilations")
    padding = c.get_attr("padding")
    ph, pw = _checked(c, explicit_padding, padding, c.get_attr("explicit_paddings"), fmt)
    bn, bh, bw, bd = _layout(fmt)
    depth, f_depth, f_out = c.value(c.dim(x, bd)), c.value(c.dim(f, 2)), c.value(c.dim(f, 3))
    if not (grouped and depth is not None and f_depth is not None
            and _checked(c, conv_groups, (0, 0, 0, depth), (0, 0, f_depth, f_out or depth)) > 1):
        c.merge(c.dim(x, bd), c.dim(f, 2))
    oh = _windowed_dim(c, c.dim(x, bh), c.dim(f, 0), dh, sh, padding, ph)
    ow = _windowed_dim(c, c.dim(x, bw), c.dim(f, 1), dw, sw, padding, pw)
    c.set_output(0, _make_4d(c, fmt, c.dim(x, bn), oh, ow, c.dim(f, 3)))


def _shape_from_sizes(c: InferenceContext, i: int) -> TensorShape:
    return c.with_rank(c.make_shape_from_shape_tensor(i), 4)


@shape_fns.output_size_from("input_sizes")
def _conv2d_backprop_input_shape(c: InferenceContext) -> None:
    fmt = c.get_attr("data_format")
    sizes = c.input_tensor(0)
    _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    _checked(c, spatial_attr, c.get_attr("dilations"), fmt, "dilations")
    _checked(c, explicit_padding, c.get_attr("padding"), c.get_attr("explicit_paddings"), fmt)
    c.with_rank(c.input(1), 4)
    dy = c.with_rank(c.input(2), 4)
    length = c.value(c.dim(c.with_rank(c.input(0), 1), 0))
    if length == 2:  # just (height, width): batch and depth come from out_backprop and filter
        h, w = (None, None) if sizes is None else (int(v) for v in np.asarray(sizes).reshape(-1))
        bn = _layout(fmt)[0]
        c.set_output(0, _make_4d(c, fmt, c.dim(dy, bn), c.make_dim(h), c.make_dim(w), c.dim(c.input(1), 2)))
        return
    c.set_output(0, _shape_from_sizes(c, 0))


@shape_fns.output_size_from("filter_sizes")
def _conv2d_backprop_filter_shape(c: InferenceContext) -> None:
    fmt = c.get_attr("data_format")
    _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    _checked(c, spatial_attr, c.get_attr("dilations"), fmt, "dilations")
    _checked(c, explicit_padding, c.get_attr("padding"), c.get_attr("explicit_paddings"), fmt)
    c.with_rank(c.input(0), 4)
    c.with_rank(c.input(2), 4)
    c.set_output(0, _shape_from_sizes(c, 1))


def _pool_output(c: InferenceContext, x: TensorShape) -> TensorShape:
    fmt = c.get_attr("data_format", "NHWC")  # the *WithArgmax ops have no data_format: NHWC
    if fmt not in ("NHWC", "NCHW"):
        raise c.error(f"data_format {fmt!r} is not supported; use 'NHWC' or 'NCHW'")
    x = c.with_rank(x, 4)
    kh, kw = _checked(c, spatial_attr, c.get_attr("ksize"), fmt, "ksize")
    sh, sw = _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    padding = c.get_attr("padding")
    ph, pw = _checked(c, explicit_padding, padding, c.get_attr("explicit_paddings", ()), fmt, (kh, kw))
    bn, bh, bw, bd = _layout(fmt)
    oh = _windowed_dim(c, c.dim(x, bh), kh, 1, sh, padding, ph)
    ow = _windowed_dim(c, c.dim(x, bw), kw, 1, sw, padding, pw)
    return _make_4d(c, fmt, c.dim(x, bn), oh, ow, c.dim(x, bd))


def _pool_shape(c: InferenceContext) -> None:
    c.set_output(0, _pool_output(c, c.input(0)))


def _max_pool_grad_shape(c: InferenceContext) -> None:
    out = _pool_output(c, c.input(0))
    c.merge(c.input(1), out)
    c.merge(c.input(2), out)
    c.set_output(0, c.with_rank(c.input(0), 4))


def _max_pool_grad_grad_shape(c: InferenceContext) -> None:
    out = _pool_output(c, c.input(0))
    c.merge(c.input(0), c.input(2))
    c.set_output(0, c.merge(c.input(1), out))


def _max_pool_with_argmax_shape(c: InferenceContext) -> None:
    out = _pool_output(c, c.input(0))
    c.set_output(0, out)
    c.set_output(1, out)


def _max_pool_grad_grad_with_argmax_shape(c: InferenceContext) -> None:
    out = _pool_output(c, c.input(0))
    c.merge(c.input(0), c.input(1))
    c.set_output(0, c.merge(c.input(2), out))


@shape_fns.output_size_from("orig_input_shape")
def _avg_pool_grad_shape(c: InferenceContext) -> None:
    _checked(c, spatial_attr, c.get_attr("ksize"), c.get_attr("data_format"), "ksize")
    _checked(c, spatial_attr, c.get_attr("strides"), c.get_attr("data_format"), "strides")
    c.with_rank(c.input(1), 4)
    c.set_output(0, _shape_from_sizes(c, 0))


def _channel_axis(c: InferenceContext, x: TensorShape) -> int:
    return 1 if c.get_attr("data_format") == "NCHW" else -1


def _bias_add_shape(c: InferenceContext) -> None:
    x = c.with_rank_at_least(c.input(0), 2)
    bias = c.with_rank(c.input(1), 1)
    if not c.rank_known(x):
        c.set_output(0, c.unknown_shape())
        return
    axis = _channel_axis(c, x)
    c.set_output(0, c.replace_dim(x, axis, c.merge(c.dim(x, axis), c.dim(bias, 0))))


def _fused_conv2d_shape(c: InferenceContext) -> None:
    _conv2d_shape(c, grouped=False)
    out = c.output(0)
    bias = c.with_rank(c.input(2), 1)
    axis = 1 if c.get_attr("data_format") == "NCHW" else 3
    c.set_output(0, c.replace_dim(out, axis, c.merge(c.dim(out, axis), c.dim(bias, 0))))


def _fused_mat_mul_shape(c: InferenceContext) -> None:
    shape_fns.matmul_shape(c)
    bias = c.with_rank(c.input(2), 1)
    c.set_output(0, c.matrix(c.dim(c.output(0), 0), c.merge(c.dim(c.output(0), 1), c.dim(bias, 0))))


def _bias_add_grad_shape(c: InferenceContext) -> None:
    x = c.with_rank_at_least(c.input(0), 2)
    c.set_output(0, c.vector(c.dim(x, _channel_axis(c, x))))


def _xent_shape(c: InferenceContext) -> None:
    # TensorFlow's rule: features and labels broadcast against each other to a matrix
    # (labels of [classes] serve every example).
    both = c.with_rank(c.broadcast(c.input(0), c.input(1)), 2)
    c.set_output(0, c.vector(c.dim(both, 0)))
    c.set_output(1, both)


def _sparse_xent_shape(c: InferenceContext) -> None:
    features = c.with_rank(c.input(0), 2)
    labels = c.with_rank(c.input(1), 1)
    batch = c.merge(c.dim(features, 0), c.dim(labels, 0))
    c.set_output(0, c.vector(batch))
    c.set_output(1, c.replace_dim(features, 0, batch))


def _sparse_xent_loss_shape(c: InferenceContext) -> None:
    _sparse_xent_shape(c)
    c.set_output(0, c.scalar())  # reduced over the batch


# ------------------------------------------------------------ specs


def _activation(name: str, types: str, doc: str) -> None:
    register_op(name).input("features: T").output("activations: T").attr(f"T: {types}").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc(doc)


_CONV_DOC = (
    "strides: The stride of the sliding window for each dimension of input, in data_format order; "
    "batch and depth strides must be 1.\n"
    "padding: The type of padding algorithm to use ('SAME': output size ceil(in / stride), "
    "'VALID': no padding, 'EXPLICIT': explicit_paddings).\n"
    "explicit_paddings: With padding 'EXPLICIT', (before, after) pairs for each dimension in "
    "data_format order; batch and depth pairs must be 0.\n"
    "data_format: 'NHWC' ([batch, height, width, channels]) or 'NCHW' ([batch, channels, height, width]).\n"
    "dilations: The dilation factor for each dimension of input, in data_format order; "
    "batch and depth dilations must be 1.\n"
    "use_cudnn_on_gpu: Accepted for compatibility; backends choose their own algorithm."
)

_POOL_DOC = (
    "ksize: The size of the window for each dimension of the input, in data_format order; "
    "batch and depth entries must be 1.\n"
    "strides: The stride of the sliding window for each dimension of the input.\n"
    "padding: The type of padding algorithm to use.\n"
    "data_format: 'NHWC' ([batch, height, width, channels]) or 'NCHW' ([batch, channels, height, width])."
)


_ARGMAX_POOL_DOC = (
    "ksize: The size of the window for each dimension of the input (NHWC order); batch and depth "
    "entries must be 1.\n"
    "strides: The stride of the sliding window for each dimension of the input.\n"
    "padding: The type of padding algorithm to use.\n"
    "include_batch_in_index: Whether argmax's flat indices count the batch dimension."
)


def _argmax_pool_op(name: str, targmax: str) -> Any:
    """TensorFlow's *WithArgmax pooling ops: NHWC, no data_format and no explicit padding."""
    return _pool_attrs(register_op(name), explicit=False).attr(targmax).attr(
        "include_batch_in_index: bool = false"
    ).attr("T: realnumbertype")


def _conv_op(name: str, types: str) -> Any:
    return (
        register_op(name)
        .attr(f"T: {types}")
        .attr("strides: list(int)")
        .attr("use_cudnn_on_gpu: bool = true")
        .attr(_PADDING_EXPLICIT)
        .attr(_EXPLICIT_PADDINGS)
        .attr(_DATA_FORMAT)
        .attr("dilations: list(int) = [1, 1, 1, 1]")
    )


def _pool_attrs(builder: Any, explicit: bool) -> Any:
    builder = builder.attr("ksize: list(int) >= 4").attr("strides: list(int) >= 4")
    if explicit:
        return builder.attr(_PADDING_EXPLICIT).attr(_EXPLICIT_PADDINGS)
    return builder.attr(_PADDING)


def register_ops() -> None:
    """Neural-network op specs."""
    _activation("Relu", "{realnumbertype, qint8}", "Computes rectified linear: max(features, 0).")
    register_op("ReluGrad").input("gradients: T").input("features: T").output("backprops: T").attr(
        "T: realnumbertype"
    ).set_shape_fn(shape_fns.merge_all_inputs).doc(
        "Computes rectified linear gradients for a Relu operation: gradients * (features > 0).\n\n"
        "gradients: The backpropagated gradients to the corresponding Relu operation.\n"
        "features: The features passed as input to the corresponding Relu operation, or its output.\n"
        "backprops: The same shape as gradients and features."
    )
    _activation("Relu6", "realnumbertype", "Computes rectified linear 6: min(max(features, 0), 6).")
    _activation(
        "Elu", _FLOATS, "Computes the exponential linear function: features if > 0, exp(features) - 1 otherwise."
    )
    _activation(
        "Selu",
        _FLOATS,
        "Computes the scaled exponential linear function: scale * features if > 0, "
        "scale * alpha * (exp(features) - 1) otherwise, with alpha = 1.6732632423543772848170429916717 "
        "and scale = 1.0507009873554804934193349852946.",
    )
    _activation("Softplus", _FLOATS, "Computes softplus: log(exp(features) + 1).")

    register_op("Softmax").input("logits: T").output("softmax: T").attr(f"T: {_FLOATS}").set_shape_fn(
        shape_fns.unchanged_shape_with_rank_at_least(1)
    ).doc(
        "Computes softmax activations over the last dimension: exp(logits) / sum(exp(logits), -1).\n\n"
        "logits: A non-empty tensor of rank >= 1."
    )
    register_op("LogSoftmax").input("logits: T").output("logsoftmax: T").attr(f"T: {_FLOATS}").set_shape_fn(
        shape_fns.unchanged_shape_with_rank_at_least(1)
    ).doc(
        "Computes log softmax activations over the last dimension: logits - log(sum(exp(logits), -1)).\n\n"
        "logits: A non-empty tensor of rank >= 1."
    )
    register_op("SoftmaxCrossEntropyWithLogits").input("features: T").input("labels: T").output("loss: T").output(
        "backprop: T"
    ).attr(f"T: {_FLOATS}").set_shape_fn(_xent_shape).doc(
        "Computes softmax cross entropy cost and gradients to backpropagate.\n\n"
        "features: batch_size x num_classes matrix of logits.\n"
        "labels: batch_size x num_classes matrix, a probability distribution per row "
        "(broadcast against features).\n"
        "loss: Per example loss (batch_size vector).\n"
        "backprop: backpropagated gradients (batch_size x num_classes matrix): softmax(features) - labels."
    )
    register_op("SparseSoftmaxCrossEntropyWithLogits").input("features: T").input("labels: Tlabels").output(
        "loss: T"
    ).output("backprop: T").attr(f"T: {_FLOATS}").attr("Tlabels: {int32, int64} = DT_INT64").set_shape_fn(
        _sparse_xent_shape
    ).doc(
        "Computes softmax cross entropy cost and gradients to backpropagate, with class indices as labels.\n\n"
        "features: batch_size x num_classes matrix of logits.\n"
        "labels: batch_size vector with values in [0, num_classes): the index of the true class.\n"
        "loss: Per example loss (batch_size vector).\n"
        "backprop: backpropagated gradients (batch_size x num_classes matrix)."
    )
    register_op("SparseSoftmaxCrossEntropyLoss").input("features: T").input("labels: Tlabels").output(
        "loss: T"
    ).output("backprop: T").attr(f"T: {_FLOATS}").attr("Tlabels: {int32, int64} = DT_INT64").attr(
        LOSS_REDUCTION_ATTR
    ).set_shape_fn(_sparse_xent_loss_shape).doc(
        "SparseSoftmaxCrossEntropyWithLogits reduced over the batch in the same op: a training loss.\n\n"
        "The per-example op followed by Mean is two ops forward and five backward (the Mean's gradient, "
        "a reshape and a multiply); here the kernel reduces the loss and scales backprop, so the loss "
        "is one op and its gradient one multiply (none for the tape's own seed of a scalar loss), as "
        "torch's cross_entropy with a reduction.\n\n"
        "features: batch_size x num_classes matrix of logits.\n"
        "labels: batch_size vector with values in [0, num_classes): the index of the true class.\n"
        "reduction: 'mean' (the loss averaged over the batch; nan for an empty batch) or 'sum'.\n"
        "loss: The reduced loss (a scalar).\n"
        "backprop: d loss / d features (batch_size x num_classes matrix): softmax(features) - labels, "
        "divided by batch_size for 'mean'."
    )

    register_op("BiasAdd").attr("T: numbertype").input("value: T").input("bias: T").attr(_DATA_FORMAT).output(
        "output: T"
    ).set_shape_fn(_bias_add_shape).doc(
        "Adds bias to value along its channel dimension (the last for 'NHWC', dimension 1 for 'NCHW').\n\n"
        "value: Any number of dimensions, at least 2.\n"
        "bias: 1-D with size the channel dimension of value."
    )
    register_op("BiasAddGrad").attr("T: numbertype").input("out_backprop: T").attr(_DATA_FORMAT).output(
        "output: T"
    ).set_shape_fn(_bias_add_grad_shape).doc(
        "The backward operation for BiasAdd: sums out_backprop over every dimension but the channel one.\n\n"
        "out_backprop: Any number of dimensions, at least 2.\n"
        "output: 1-D with size the channel dimension of out_backprop."
    )
    register_op("FusedMatMul").input("a: T").input("b: T").input("bias: T").output("product: T").attr(
        "transpose_a: bool = false"
    ).attr("transpose_b: bool = false").attr(FUSED_ACTIVATION_ATTR).attr(f"T: {_FLOATS}").set_shape_fn(
        _fused_mat_mul_shape
    ).doc(
        "activation(a * b + bias): MatMul, BiasAdd and an activation in one op (a dense layer).\n\n"
        "TensorFlow's grappler rewrites MatMul + BiasAdd + activation into _FusedMatMul; here the fused op "
        "is called directly (ok.nn.Dense does), so eager code saves the intermediate ops, their tensors "
        "and their tape records.  The gradient needs only the output: every activation offered has a "
        "derivative written in terms of its result.\n\n"
        "a: A matrix [M, K] (or [K, M] with transpose_a).\n"
        "b: A matrix [K, N] (or [N, K] with transpose_b).\n"
        "bias: 1-D, [N].\n"
        "activation: Applied to a * b + bias: Identity, Relu, Relu6, Elu, Sigmoid or Tanh."
    )

    _conv_op("Conv2D", "{half, bfloat16, float, double, int32}").input("input: T").input("filter: T").output(
        "output: T"
    ).set_shape_fn(_conv2d_shape).doc(
        "Computes a 2-D convolution given 4-D input and filter tensors.\n\n"
        "output[b, i, j, k] = sum_{di, dj, q} input[b, strides[1] * i + dilations[1] * di, "
        "strides[2] * j + dilations[2] * dj, q] * filter[di, dj, q, k] (NHWC, after padding).\n\n"
        "input: 4-D tensor laid out as data_format.\n"
        "filter: 4-D tensor of shape [filter_height, filter_width, in_channels, out_channels].\n" + _CONV_DOC
    )
    _conv_op("FusedConv2D", _FLOATS).input("input: T").input("filter: T").input("bias: T").output(
        "output: T"
    ).attr(FUSED_ACTIVATION_ATTR).set_shape_fn(_fused_conv2d_shape).doc(
        "activation(conv2d(input, filter) + bias): Conv2D, BiasAdd and an activation in one op (a "
        "convolution layer).\n\n"
        "TensorFlow's grappler rewrites Conv2D + BiasAdd + activation into _FusedConv2D; here the fused "
        "op is called directly (ok.nn.Conv2D does), so eager code saves the intermediate ops, their "
        "tensors and their tape records.  The gradient needs only the output.\n\n"
        "input: 4-D tensor laid out as data_format.\n"
        "filter: 4-D tensor of shape [filter_height, filter_width, in_channels, out_channels].\n"
        "bias: 1-D, [out_channels], added along the channel dimension of data_format.\n"
        "activation: Applied to conv2d + bias: Identity, Relu, Relu6, Elu, Sigmoid or Tanh.\n" + _CONV_DOC
    )
    _conv_op("Conv2DBackpropInput", "{half, bfloat16, float, double, int32}").input("input_sizes: int32").input(
        "filter: T"
    ).input("out_backprop: T").output("output: T").set_shape_fn(_conv2d_backprop_input_shape).doc(
        "Computes the gradients of convolution with respect to the input.\n\n"
        "input_sizes: The shape of the input of the convolution (4 values in data_format order, or just "
        "[height, width]).\n"
        "filter: 4-D [filter_height, filter_width, in_channels, out_channels].\n"
        "out_backprop: 4-D gradients with respect to the output of the convolution.\n" + _CONV_DOC
    )
    _conv_op("Conv2DBackpropFilter", _FLOATS).input("input: T").input("filter_sizes: int32").input(
        "out_backprop: T"
    ).output("output: T").set_shape_fn(_conv2d_backprop_filter_shape).doc(
        "Computes the gradients of convolution with respect to the filter.\n\n"
        "input: 4-D input of the convolution.\n"
        "filter_sizes: The shape of the filter: [filter_height, filter_width, in_channels, out_channels].\n"
        "out_backprop: 4-D gradients with respect to the output of the convolution.\n" + _CONV_DOC
    )

    _pool_attrs(
        register_op("MaxPool").attr(
            "T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8} = DT_FLOAT"
        ),
        explicit=True,
    ).attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'").input("input: T").output("output: T").set_shape_fn(
        _pool_shape
    ).doc(
        "Performs max pooling on the input: each output is the maximum of its window (padding never wins).\n\n"
        "input: 4-D input to pool over.\n" + _POOL_DOC + "\nexplicit_paddings: With padding 'EXPLICIT', "
        "(before, after) pairs per dimension.\n'NCHW_VECT_C' is accepted by the spec but not supported."
    )
    _pool_attrs(register_op("MaxPoolGrad"), explicit=True).attr(_DATA_FORMAT).input("orig_input: T").input(
        "orig_output: T"
    ).input("grad: T").output("output: T").attr("T: realnumbertype = DT_FLOAT").set_shape_fn(
        _max_pool_grad_shape
    ).doc(
        "Computes gradients of the maxpooling function: each grad value goes to the position of its "
        "window's maximum in orig_input (the first in row-major window order on ties).\n\n"
        "orig_input: The original input tensor.\norig_output: The original output tensor: MaxPool's output "
        "for orig_input (a kernel may find each window's maximum as its first value equal to it, as "
        "TensorFlow's GPU kernel does; the CPU kernel does where the windows tile the input).\n"
        "grad: 4-D gradients with respect to the output of max_pool.\n" + _POOL_DOC
    )
    # TensorFlow's MaxPoolGradGrad has no EXPLICIT padding; it is added here (defaults keep
    # TensorFlow's calls valid) so that MaxPoolGrad is differentiable for every MaxPool.
    _pool_attrs(register_op("MaxPoolGradGrad"), explicit=True).attr(_DATA_FORMAT).input("orig_input: T").input(
        "orig_output: T"
    ).input("grad: T").output("output: T").attr("T: realnumbertype").set_shape_fn(_max_pool_grad_grad_shape).doc(
        "Computes second-order gradients of the maxpooling function: each output takes the grad value at "
        "the position of its window's maximum in orig_input.  (TensorFlow's spec has no 'EXPLICIT' "
        "padding; it is added so every MaxPoolGrad is differentiable.)\n\n"
        "orig_input: The original input tensor.\norig_output: The original output tensor.\n"
        "grad: 4-D gradients of gradients with respect to the input of max_pool.\n" + _POOL_DOC
    )
    _argmax_pool_op("MaxPoolWithArgmax", "Targmax: {int32, int64} = DT_INT64").input("input: T").output(
        "output: T"
    ).output("argmax: Targmax").set_shape_fn(_max_pool_with_argmax_shape).doc(
        "Performs max pooling on the input and outputs both max values and indices: MaxPool's output "
        "(a nan in a window makes its maximum nan), and where each maximum is.\n\n"
        "The gradient, MaxPoolGradWithArgmax, sends each value straight to its index instead of looking "
        "for the maximum again (torch's max_pool2d saves its indices the same way).  ok.nn.MaxPool2D "
        "keeps MaxPool: computing and storing the indices costs more in its forward than it saves in "
        "its backward on the cpu and opencl backends (docs/benchmarks.md).\n\n"
        "input: 4-D [batch, height, width, channels] (NHWC only).\n"
        "output: The max pooled output tensor.\n"
        "argmax: 4-D. The flat index of each maximum: ((b * height + y) * width + x) * channels + c with "
        "include_batch_in_index, else (y * width + x) * channels + c.  The first maximum of the window in "
        "row-major order; a nan is never the maximum unless it is the window's first element inside the "
        "input (TensorFlow's CPU rule, the one MaxPoolGrad follows); padding is never an index.\n"
        + _ARGMAX_POOL_DOC
    )
    _argmax_pool_op("MaxPoolGradWithArgmax", "Targmax: {int32, int64}").input("input: T").input("grad: T").input(
        "argmax: Targmax"
    ).output("output: T").set_shape_fn(_max_pool_grad_shape).doc(
        "Computes gradients of MaxPoolWithArgmax: each grad value is added at its argmax index.\n\n"
        "input: The original input (only its shape is read).\n"
        "grad: 4-D gradients with respect to the output of MaxPoolWithArgmax.\n"
        "argmax: MaxPoolWithArgmax's argmax for this input and these attrs.  An index outside the "
        "input is an error on cpu and CUDA (checked on the device there), and on OpenCL when argmax came "
        "from the host (a device-computed out-of-range index is ignored there, as for Gather).  An index "
        "in the input but outside its own window: cpu adds the value there, as TensorFlow's CPU kernel "
        "does; OpenCL and CUDA, which gather per input element from the windows holding it, ignore it.\n"
        + _ARGMAX_POOL_DOC
    )
    _argmax_pool_op("MaxPoolGradGradWithArgmax", "Targmax: {int32, int64}").input("input: T").input(
        "grad: T"
    ).input("argmax: Targmax").output("output: T").set_shape_fn(_max_pool_grad_grad_with_argmax_shape).doc(
        "Computes second-order gradients of the maxpooling function: each output takes the grad value "
        "at its argmax index.\n\n"
        "input: The original input (only its shape is read).\n"
        "grad: 4-D, the shape of input: gradients of gradients with respect to the input of max_pool.\n"
        "argmax: MaxPoolWithArgmax's argmax, as for MaxPoolGradWithArgmax.\n" + _ARGMAX_POOL_DOC
    )
    _pool_attrs(register_op("AvgPool").input("value: T").output("output: T"), explicit=False).attr(_DATA_FORMAT).attr(
        f"T: {_FLOATS}"
    ).set_shape_fn(_pool_shape).doc(
        "Performs average pooling on the input: each output is the mean of its window; with 'SAME' padding "
        "only the elements inside the input are counted.\n\n"
        "value: 4-D input to pool over.\n" + _POOL_DOC
    )
    _pool_attrs(register_op("AvgPoolGrad").input("orig_input_shape: int32").input("grad: T").output("output: T"), False).attr(
        _DATA_FORMAT
    ).attr(f"T: {_FLOATS}").set_shape_fn(_avg_pool_grad_shape).doc(
        "Computes gradients of the average pooling function.\n\n"
        "orig_input_shape: 1-D. Shape of the original input to avg_pool.\n"
        "grad: 4-D gradients with respect to the output of avg_pool.\n" + _POOL_DOC
    )


# ------------------------------------------------------------ gradients


def _mask(cond: Tensor, like: Tensor) -> Tensor:
    """A boolean tensor as 0/1 of ``like``'s dtype."""
    return _ops().cast(cond, DstT=like.dtype)  # type: ignore[no-any-return]


def _relu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_activation_grad_from_output("Relu", grad, op.outputs[0])]


def _relu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # Linear in ``gradients`` with the same mask; piecewise constant in ``features``.
    return [_ops().relu_grad(grad, op.inputs[1]), None]


def _relu6_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_activation_grad_from_output("Relu6", grad, op.outputs[0])]


def _elu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_activation_grad_from_output("Elu", grad, op.outputs[0])]


def _selu_grad(op: Any, grad: Tensor) -> list[Any]:
    # d/dx = scale * alpha * exp(x) = y + scale * alpha where y < 0, else scale: TensorFlow's
    # SeluGrad (relu_op_functor.h) tests the output, so x = 0 gets scale, the right side's slope.
    # A select, not 0/1 masks: a mask times an infinite or NaN output was NaN (0 * inf).
    ops, y = _ops(), op.outputs[0]
    return [ops.select_v2(ops.less(y, 0), ops.mul(grad, ops.add(y, SELU_SCALE * SELU_ALPHA)), ops.mul(grad, SELU_SCALE))]


def _softplus_grad(op: Any, grad: Tensor) -> list[Any]:
    ops = _ops()
    return [ops.real_div(grad, ops.add(1, ops.exp(ops.neg(op.inputs[0]))))]


def _softmax_vjp(grad: Tensor, softmax: Tensor) -> Any:
    """(grad - sum(grad * softmax, -1)) * softmax: the softmax Jacobian applied to ``grad``."""
    ops = _ops()
    return ops.mul(ops.sub(grad, ops.sum(ops.mul(grad, softmax), -1, keep_dims=True)), softmax)


def _softmax_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_softmax_vjp(grad, op.outputs[0])]


def _log_softmax_grad(op: Any, grad: Tensor) -> list[Any]:
    ops = _ops()
    softmax = ops.exp(op.outputs[0])
    return [ops.sub(grad, ops.mul(ops.sum(grad, -1, keep_dims=True), softmax))]


def _xent_features_grad(op: Any, grad_loss: Tensor | None, grad_backprop: Tensor | None) -> Any:
    """d/dfeatures through both outputs: loss' derivative is ``backprop``; backprop's
    (softmax - labels) is the softmax Jacobian.  An output nothing used has None
    (these gradients are registered with materialize_grads=False)."""
    ops = _ops()
    grad = None
    if grad_loss is not None:
        grad = ops.mul(ops.reshape(grad_loss, constant((-1, 1), grad_loss)), op.outputs[1])
    if grad_backprop is None or is_zero_gradient(grad_backprop):  # the usual case: nothing used backprop
        return grad
    term = _softmax_vjp(grad_backprop, ops.softmax(op.inputs[0]))
    return term if grad is None else ops.add(grad, term)


def _xent_grad(op: Any, grad_loss: Tensor | None, grad_backprop: Tensor | None) -> list[Any]:
    ops = _ops()
    features, labels = op.inputs
    need_features, need_labels = op.needs_input_grad
    d_features = _xent_features_grad(op, grad_loss, grad_backprop) if need_features else None
    d_labels = None
    if need_labels:
        if grad_loss is not None:
            d_labels = ops.mul(ops.reshape(grad_loss, constant((-1, 1), grad_loss)), ops.neg(ops.log_softmax(features)))
        if grad_backprop is not None:
            d_labels = ops.neg(grad_backprop) if d_labels is None else ops.sub(d_labels, grad_backprop)
    return [
        None if d_features is None else unbroadcast(d_features, features),
        None if d_labels is None else unbroadcast(d_labels, labels),
    ]


def _sparse_xent_grad(op: Any, grad_loss: Tensor | None, grad_backprop: Tensor | None) -> list[Any]:
    return [_xent_features_grad(op, grad_loss, grad_backprop), None]


def _sparse_xent_loss_grad(op: Any, grad_loss: Tensor | None, grad_backprop: Tensor | None) -> list[Any]:
    """The kernel's backprop output is already d loss / d features: times the loss'
    gradient (nothing to multiply for the tape's seed of a scalar loss), plus the
    softmax Jacobian's term when something used backprop itself (second order)."""
    if not op.needs_input_grad[0]:
        return [None, None]
    ops = _ops()
    backprop = op.outputs[1]
    grad = None
    if grad_loss is not None:
        grad = backprop if is_unit_gradient(grad_loss) else ops.mul(backprop, grad_loss)
    if grad_backprop is not None and not is_zero_gradient(grad_backprop):
        term = _softmax_vjp(grad_backprop, ops.softmax(op.inputs[0]))
        if op.get_attr("reduction") == "mean" and backprop.shape[0] > 1:
            term = ops.real_div(term, constant(backprop.shape[0], term, term.dtype))
        grad = term if grad is None else ops.add(grad, term)
    return [grad, None]


def _activation_grad_from_output(activation: str, grad: Tensor, y: Tensor) -> Tensor:
    """d activation / d its input, times ``grad``, written with the activation's output
    ``y`` (the gradients of Relu, Relu6, Elu, FusedMatMul and FusedConv2D)."""
    ops = _ops()
    if activation == "Identity":
        return grad
    if activation == "Relu":
        return ops.relu_grad(grad, y)  # type: ignore[no-any-return]
    if activation == "Relu6":  # 0 < y < 6 exactly where 0 < x < 6
        return ops.mul(grad, ops.mul(_mask(ops.greater(y, 0), grad), _mask(ops.less(y, 6), grad)))  # type: ignore[no-any-return]
    if activation == "Elu":  # exp(x) = y + 1 where y < 0 (exactly where x < 0), else 1: TensorFlow's EluGrad
        # A select, not 0/1 masks: a mask times an infinite or NaN output was NaN (0 * inf).
        return ops.select_v2(ops.less(y, 0), ops.mul(grad, ops.add(y, 1)), grad)  # type: ignore[no-any-return]
    return UNARY_GRAD_RULES[activation](ops, grad, None, y)  # type: ignore[no-any-return]  # Sigmoid, Tanh: in y only


def _fused_mat_mul_grad(op: Any, grad: Tensor) -> list[Any]:
    a, b, _ = op.inputs
    need_a, need_b, need_bias = op.needs_input_grad
    dz = _activation_grad_from_output(op.get_attr("activation"), grad, op.outputs[0])
    ga, gb = mat_mul_grads(a, b, dz, op.get_attr("transpose_a"), op.get_attr("transpose_b"), need_a, need_b)
    return [ga, gb, _ops().bias_add_grad(dz) if need_bias else None]


def _bias_add_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad, _ops().bias_add_grad(grad, data_format=op.get_attr("data_format"))]


def _bias_add_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # BiasAddGrad sums over all but the channel axis; its adjoint broadcasts back.
    ops = _ops()
    return [ops.bias_add(ops.zeros_like(op.inputs[0]), grad, data_format=op.get_attr("data_format"))]


_CONV_ATTRS = ("strides", "use_cudnn_on_gpu", "padding", "explicit_paddings", "data_format", "dilations")


def _conv_attrs(op: Any) -> dict[str, Any]:
    return {name: op.get_attr(name) for name in _CONV_ATTRS}


def _sizes(t: Tensor) -> Tensor:
    """``t``'s shape as an int32 vector: a constant, or a Shape op for a tensor of
    unknown dimensions (a gradient traced by ok.function under an unknown batch)."""
    shape = tuple(t.shape)
    return _ops().shape(t) if None in shape else constant(shape, t)


def _conv2d_grad(op: Any, grad: Tensor) -> list[Any]:
    ops, attrs = _ops(), _conv_attrs(op)
    x, w = op.inputs
    need_x, need_w = op.needs_input_grad  # a first layer's input gradient is usually not wanted
    fmt = attrs["data_format"]
    layout = _layout(fmt)
    axis = layout[3]
    groups = conv_groups([x.shape[i] for i in layout], w.shape)
    if groups > 1:
        # A grouped convolution: each group's gradients are an ordinary convolution's, on its
        # slices of the input, filter and output channels (TensorFlow's CPU has none).
        xs, ws, gs = (ops.split(constant(a, t), t, num_split=groups) for a, t in ((axis, x), (3, w), (axis, grad)))
        parts = [_conv2d_grad_parts(ops, attrs, xi, wi, gi, need_x, need_w) for xi, wi, gi in zip(xs, ws, gs)]
        return [
            ops.concat_v2([p[0] for p in parts], constant(axis, x)) if need_x else None,
            ops.concat_v2([p[1] for p in parts], constant(3, w)) if need_w else None,
        ]
    return _conv2d_grad_parts(ops, attrs, x, w, grad, need_x, need_w)


def _conv2d_grad_parts(ops: Any, attrs: dict[str, Any], x: Tensor, w: Tensor, grad: Tensor, need_x: bool,
                       need_w: bool) -> list[Any]:
    return [
        ops.conv2d_backprop_input(_sizes(x), w, grad, **attrs) if need_x else None,
        ops.conv2d_backprop_filter(x, constant(tuple(w.shape), w), grad, **attrs) if need_w else None,
    ]


def _fused_conv2d_grad(op: Any, grad: Tensor) -> list[Any]:
    ops, attrs = _ops(), _conv_attrs(op)
    x, w, _ = op.inputs
    need_x, need_w, need_bias = op.needs_input_grad
    dz = _activation_grad_from_output(op.get_attr("activation"), grad, op.outputs[0])
    return [
        ops.conv2d_backprop_input(_sizes(x), w, dz, **attrs) if need_x else None,
        ops.conv2d_backprop_filter(x, constant(tuple(w.shape), w), dz, **attrs) if need_w else None,
        ops.bias_add_grad(dz, data_format=attrs["data_format"]) if need_bias else None,
    ]


def _conv2d_backprop_input_grad(op: Any, grad: Tensor) -> list[Any]:
    # output = dx(filter, dy) is linear in each of filter and dy.
    ops, attrs = _ops(), _conv_attrs(op)
    _, w, dy = op.inputs
    return [None, ops.conv2d_backprop_filter(grad, constant(tuple(w.shape), w), dy, **attrs), ops.conv2d(grad, w, **attrs)]


def _conv2d_backprop_filter_grad(op: Any, grad: Tensor) -> list[Any]:
    ops, attrs = _ops(), _conv_attrs(op)
    x, _, dy = op.inputs
    return [ops.conv2d_backprop_input(_sizes(x), grad, dy, **attrs), None, ops.conv2d(x, grad, **attrs)]


def _pool_attrs_of(op: Any, explicit: bool) -> dict[str, Any]:
    attrs = {name: op.get_attr(name) for name in ("ksize", "strides", "padding", "data_format")}
    if explicit:
        attrs["explicit_paddings"] = op.get_attr("explicit_paddings")
    return attrs


def _max_pool_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_ops().max_pool_grad(op.inputs[0], op.outputs[0], grad, **_pool_attrs_of(op, explicit=True))]


def _max_pool_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # Piecewise constant in orig_input (the argmax choice) and orig_output (unused): only
    # the incoming gradient carries a derivative, and that map is the gather MaxPoolGradGrad does.
    attrs = _pool_attrs_of(op, explicit=True)
    return [None, None, _ops().max_pool_grad_grad(op.inputs[0], op.inputs[1], grad, **attrs)]


def _max_pool_grad_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    attrs = _pool_attrs_of(op, explicit=True)
    return [None, None, _ops().max_pool_grad(op.inputs[0], op.inputs[1], grad, **attrs)]


def _argmax_pool_attrs_of(op: Any) -> dict[str, Any]:
    return {name: op.get_attr(name) for name in ("ksize", "strides", "padding", "include_batch_in_index")}


def _max_pool_with_argmax_grad(op: Any, grad: Tensor | None, argmax_grad: Any) -> list[Any]:
    # argmax is an integer output: it has no gradient to pass on (None: not materialized).
    if grad is None:
        return [None]
    return [_ops().max_pool_grad_with_argmax(op.inputs[0], grad, op.outputs[1], **_argmax_pool_attrs_of(op))]


def _max_pool_grad_with_argmax_grad(op: Any, grad: Tensor) -> list[Any]:
    # Linear in grad (the input only gives the shape, argmax is an index): the adjoint is the gather.
    x, _, argmax = op.inputs
    return [None, _ops().max_pool_grad_grad_with_argmax(x, grad, argmax, **_argmax_pool_attrs_of(op)), None]


def _max_pool_grad_grad_with_argmax_grad(op: Any, grad: Tensor) -> list[Any]:
    x, _, argmax = op.inputs
    return [None, _ops().max_pool_grad_with_argmax(x, grad, argmax, **_argmax_pool_attrs_of(op)), None]


def _avg_pool_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_ops().avg_pool_grad(_sizes(op.inputs[0]), grad, **_pool_attrs_of(op, explicit=False))]


def _avg_pool_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    return [None, _ops().avg_pool(grad, **_pool_attrs_of(op, explicit=False))]


_GRADIENTS: dict[str, Any] = {
    "Relu": _relu_grad,
    "ReluGrad": _relu_grad_grad,
    "Relu6": _relu6_grad,
    "Elu": _elu_grad,
    "Selu": _selu_grad,
    "Softplus": _softplus_grad,
    "Softmax": _softmax_grad,
    "LogSoftmax": _log_softmax_grad,
    "SoftmaxCrossEntropyWithLogits": _xent_grad,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_xent_grad,
    "SparseSoftmaxCrossEntropyLoss": _sparse_xent_loss_grad,
    "BiasAdd": _bias_add_grad,
    "BiasAddGrad": _bias_add_grad_grad,
    "FusedMatMul": _fused_mat_mul_grad,
    "Conv2D": _conv2d_grad,
    "FusedConv2D": _fused_conv2d_grad,
    "Conv2DBackpropInput": _conv2d_backprop_input_grad,
    "Conv2DBackpropFilter": _conv2d_backprop_filter_grad,
    "MaxPool": _max_pool_grad,
    "MaxPoolGrad": _max_pool_grad_grad,
    "MaxPoolGradGrad": _max_pool_grad_grad_grad,
    "MaxPoolWithArgmax": _max_pool_with_argmax_grad,
    "MaxPoolGradWithArgmax": _max_pool_grad_with_argmax_grad,
    "MaxPoolGradGradWithArgmax": _max_pool_grad_grad_with_argmax_grad,
    "AvgPool": _avg_pool_grad,
    "AvgPoolGrad": _avg_pool_grad_grad,
}


#: Gradients that take None for an unused output (TensorFlow's FunctionsAcceptingNoneForIndicesMap).
_WITHOUT_ZEROS = (
    "SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyLoss",
    "MaxPoolWithArgmax",
)


def register_gradients() -> None:
    """Neural-network op gradients: every op here is differentiable."""
    for name, fn in _GRADIENTS.items():
        register_gradient(name, materialize_grads=name not in _WITHOUT_ZEROS)(fn)


def _fused_mat_mul(a: Any, b: Any, bias: Any, transpose_a: bool, transpose_b: bool, activation: str, **attrs: Any) -> Any:
    """FusedMatMul composed of MatMul, BiasAdd and the activation op: what a backend
    without a fused kernel runs."""
    ops = _ops()
    return _activate(ops.bias_add(ops.mat_mul(a, b, transpose_a=transpose_a, transpose_b=transpose_b), bias), activation)


def _activate(y: Any, activation: str) -> Any:
    """``y`` through the op of one of FUSED_ACTIVATIONS (the generic fused kernels)."""
    return y if activation == "Identity" else getattr(_ops(), activation.lower())(y)


def _fused_conv2d(input: Any, filter: Any, bias: Any, activation: str, data_format: str, **attrs: Any) -> Any:
    """FusedConv2D composed of Conv2D, BiasAdd and the activation op."""
    ops = _ops()
    conv_attrs = {name: attrs[name] for name in _CONV_ATTRS if name in attrs}
    y = ops.bias_add(ops.conv2d(input, filter, data_format=data_format, **conv_attrs), bias, data_format=data_format)
    return _activate(y, activation)


def _sparse_xent_loss(features: Any, labels: Any, reduction: str, **attrs: Any) -> Any:
    """SparseSoftmaxCrossEntropyLoss composed of the per-example op, a reduction and a
    scaling of backprop: what a backend without a fused kernel runs."""
    ops = _ops()
    loss, backprop = ops.sparse_softmax_cross_entropy_with_logits(features, labels)
    axis = constant((0,), loss)
    if reduction == "sum":
        return ops.sum(loss, axis), backprop
    batch = backprop.shape[0]
    return ops.mean(loss, axis), ops.real_div(backprop, constant(max(batch, 1), backprop, backprop.dtype))


def register_generic_kernels() -> None:
    register_kernel("FusedMatMul", backend="*")(_fused_mat_mul)
    register_kernel("FusedConv2D", backend="*")(_fused_conv2d)
    register_kernel("SparseSoftmaxCrossEntropyLoss", backend="*")(_sparse_xent_loss)


# Host-side argument checks that every backend's convolution and pooling kernels share.


def _bad(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op '{op}': {message}", op=op)


def check_rank4(op: str, **arrays: Any) -> None:
    """Every named array is 4-D (NHWC or NCHW data, HWIO filters)."""
    for name, a in arrays.items():
        if len(a.shape) != 4:
            raise _bad(op, f"input '{name}' must be 4-D, got shape {list(a.shape)}")


def check_sizes(op: str, name: str, sizes: Any, allowed: tuple[int, ...] = (4,)) -> list[int]:
    """A host-memory size vector (``input_sizes``, ``filter_sizes``...) as ints."""
    values = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if np.asarray(sizes).ndim != 1 or len(values) not in allowed or any(v < 0 for v in values):
        raise _bad(op, f"input '{name}' must be a vector of {' or '.join(map(str, allowed))} sizes >= 0, got {values}")
    return values


def check_out_shape(op: str, name: str, got: Sequence[int], want: Sequence[int], data_format: str) -> None:
    """A gradient input has the shape the forward op's output had."""
    if tuple(got) != tuple(want):
        raise _bad(op, f"input '{name}' must have shape {list(want)} (NHWC order; data_format {data_format}), got {list(got)}")


def check_argmax_type(op: str, targmax: Any, x_shape: Sequence[int], include_batch: bool) -> None:
    """MaxPoolWithArgmax's int32 indices must reach every element they may point at."""
    n, h, w, c = (int(d) for d in x_shape)
    limit = (n if include_batch else 1) * h * w * c
    if targmax.name == "int32" and limit > np.iinfo(np.int32).max:
        raise _bad(op, f"an input of {limit} elements needs Targmax int64: its indices do not fit int32")
