"""Specs, shape functions and gradients of the 2-D convolutions: Conv2D, FusedConv2D
(Conv2D, BiasAdd and an activation in one op), DepthwiseConv2dNative and the backprop
ops, following TensorFlow's ``nn_ops.cc``; also FusedConv2D's generic kernel.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them and
re-exports the public names).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import shape_fns
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import constant
from ._nn_common import (
    _DATA_FORMAT,
    _EXPLICIT_PADDINGS,
    _FLOATS,
    _PADDING_EXPLICIT,
    _checked,
    _layout,
    _make_4d,
    _shape_from_sizes,
    _sizes,
    _windowed_dim,
    explicit_padding,
    spatial_attr,
)
from .activation_ops import FUSED_ACTIVATION_ATTR, _activate, _activation_grad_from_output

__all__ = ["conv_groups", "register_generic_kernels", "register_gradients", "register_ops"]


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


def _depthwise_shape(c: InferenceContext) -> None:
    """DepthwiseConv2dNative's output: [batch, out_height, out_width, in_depth * depth_multiplier]
    (in data_format order); the filter's in_depth must equal the input's."""
    fmt = c.get_attr("data_format")
    x = c.with_rank(c.input(0), 4)
    f = c.with_rank(c.input(1), 4)
    sh, sw = _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    dh, dw = _checked(c, spatial_attr, c.get_attr("dilations"), fmt, "dilations")
    padding = c.get_attr("padding")
    ph, pw = _checked(c, explicit_padding, padding, c.get_attr("explicit_paddings"), fmt)
    bn, bh, bw, bd = _layout(fmt)
    depth = c.merge(c.dim(x, bd), c.dim(f, 2))
    oh = _windowed_dim(c, c.dim(x, bh), c.dim(f, 0), dh, sh, padding, ph)
    ow = _windowed_dim(c, c.dim(x, bw), c.dim(f, 1), dw, sw, padding, pw)
    c.set_output(0, _make_4d(c, fmt, c.dim(x, bn), oh, ow, c.multiply(depth, c.dim(f, 3))))


@shape_fns.output_size_from("input_sizes")
def _depthwise_backprop_input_shape(c: InferenceContext) -> None:
    fmt = c.get_attr("data_format")
    _checked(c, spatial_attr, c.get_attr("strides"), fmt, "strides")
    _checked(c, spatial_attr, c.get_attr("dilations"), fmt, "dilations")
    _checked(c, explicit_padding, c.get_attr("padding"), c.get_attr("explicit_paddings"), fmt)
    c.with_rank(c.input(1), 4)
    c.with_rank(c.input(2), 4)
    c.set_output(0, _shape_from_sizes(c, 0))


def _fused_conv2d_shape(c: InferenceContext) -> None:
    _conv2d_shape(c, grouped=False)
    out = c.output(0)
    bias = c.with_rank(c.input(2), 1)
    axis = 1 if c.get_attr("data_format") == "NCHW" else 3
    c.set_output(0, c.replace_dim(out, axis, c.merge(c.dim(out, axis), c.dim(bias, 0))))



# ------------------------------------------------------------ specs


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


def register_ops() -> None:
    """Specs of the convolutions."""
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
    _register_depthwise_ops()


_DEPTHWISE_DOC = (
    "strides: The stride of the sliding window for each dimension of input, in data_format order; "
    "batch and depth strides must be 1.\n"
    "padding: The type of padding algorithm to use ('SAME', 'VALID' or 'EXPLICIT').\n"
    "explicit_paddings: With padding 'EXPLICIT', (before, after) pairs for each dimension in "
    "data_format order; batch and depth pairs must be 0.\n"
    "data_format: 'NHWC' or 'NCHW'.\n"
    "dilations: The dilation factor for each dimension of input, in data_format order; batch and "
    "depth dilations must be 1.  (TensorFlow's CPU kernel ignores it and tf.nn.depthwise_conv2d "
    "dilates through space_to_batch; here every backend dilates the window.)"
)


def _depthwise_op(name: str) -> Any:
    return (
        register_op(name)
        .attr(f"T: {_FLOATS}")
        .attr("strides: list(int)")
        .attr(_PADDING_EXPLICIT)
        .attr(_EXPLICIT_PADDINGS)
        .attr(_DATA_FORMAT)
        .attr("dilations: list(int) = [1, 1, 1, 1]")
    )


def _register_depthwise_ops() -> None:
    """Specs of the depthwise convolution and its backprops."""
    _depthwise_op("DepthwiseConv2dNative").input("input: T").input("filter: T").output("output: T").set_shape_fn(
        _depthwise_shape
    ).doc(
        "Computes a 2-D depthwise convolution given 4-D input and filter tensors.\n\n"
        "Each input channel is convolved with its own depth_multiplier filters:\n"
        "output[b, i, j, k * channel_multiplier + q] = sum_{di, dj} input[b, strides[1] * i + "
        "dilations[1] * di, strides[2] * j + dilations[2] * dj, k] * filter[di, dj, k, q] (NHWC, after "
        "padding).\n\n"
        "input: 4-D tensor laid out as data_format.\n"
        "filter: 4-D [filter_height, filter_width, in_channels, channel_multiplier].\n" + _DEPTHWISE_DOC
    )
    _depthwise_op("DepthwiseConv2dNativeBackpropInput").input("input_sizes: int32").input("filter: T").input(
        "out_backprop: T"
    ).output("output: T").set_shape_fn(_depthwise_backprop_input_shape).doc(
        "Computes the gradients of depthwise convolution with respect to the input.\n\n"
        "input_sizes: The shape of the input of the convolution (4 values in data_format order).\n"
        "filter: 4-D [filter_height, filter_width, in_channels, depthwise_multiplier].\n"
        "out_backprop: 4-D gradients with respect to the output of the convolution.\n" + _DEPTHWISE_DOC
    )
    _depthwise_op("DepthwiseConv2dNativeBackpropFilter").input("input: T").input("filter_sizes: int32").input(
        "out_backprop: T"
    ).output("output: T").set_shape_fn(_conv2d_backprop_filter_shape).doc(
        "Computes the gradients of depthwise convolution with respect to the filter.\n\n"
        "input: 4-D input of the convolution, laid out as data_format.\n"
        "filter_sizes: The shape of the filter: [filter_height, filter_width, in_channels, "
        "depthwise_multiplier].\n"
        "out_backprop: 4-D gradients with respect to the output of the convolution.\n" + _DEPTHWISE_DOC
    )


# ------------------------------------------------------------ gradients


_CONV_ATTRS = ("strides", "use_cudnn_on_gpu", "padding", "explicit_paddings", "data_format", "dilations")


def _conv_attrs(op: Any) -> dict[str, Any]:
    return {name: op.get_attr(name) for name in _CONV_ATTRS}



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



_DEPTHWISE_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations")


def _depthwise_attrs(op: Any) -> dict[str, Any]:
    return {name: op.get_attr(name) for name in _DEPTHWISE_ATTRS}


def _depthwise_grad(op: Any, grad: Tensor) -> list[Any]:
    ops, attrs = _ops(), _depthwise_attrs(op)
    x, w = op.inputs
    need_x, need_w = op.needs_input_grad
    return [
        ops.depthwise_conv2d_native_backprop_input(_sizes(x), w, grad, **attrs) if need_x else None,
        ops.depthwise_conv2d_native_backprop_filter(x, constant(tuple(w.shape), w), grad, **attrs) if need_w else None,
    ]


def _depthwise_backprop_input_grad(op: Any, grad: Tensor) -> list[Any]:
    # As TensorFlow's: the input gradient is linear in each of filter and out_backprop.
    ops, attrs = _ops(), _depthwise_attrs(op)
    _, w, dy = op.inputs
    return [None, ops.depthwise_conv2d_native_backprop_filter(grad, constant(tuple(w.shape), w), dy, **attrs),
            ops.depthwise_conv2d_native(grad, w, **attrs)]


def _depthwise_backprop_filter_grad(op: Any, grad: Tensor) -> list[Any]:
    ops, attrs = _ops(), _depthwise_attrs(op)
    x, _, dy = op.inputs
    return [ops.depthwise_conv2d_native_backprop_input(_sizes(x), grad, dy, **attrs), None,
            ops.depthwise_conv2d_native(x, grad, **attrs)]


_GRADIENTS: dict[str, Any] = {
    "DepthwiseConv2dNative": _depthwise_grad,
    "DepthwiseConv2dNativeBackpropInput": _depthwise_backprop_input_grad,
    "DepthwiseConv2dNativeBackpropFilter": _depthwise_backprop_filter_grad,
    "Conv2D": _conv2d_grad,
    "FusedConv2D": _fused_conv2d_grad,
    "Conv2DBackpropInput": _conv2d_backprop_input_grad,
    "Conv2DBackpropFilter": _conv2d_backprop_filter_grad,
}


def register_gradients() -> None:
    """Gradients of the convolutions: every op here is differentiable."""
    for name, fn in _GRADIENTS.items():
        register_gradient(name)(fn)


# ------------------------------------------------------------ generic kernels


def _fused_conv2d(input: Any, filter: Any, bias: Any, activation: str, data_format: str, **attrs: Any) -> Any:
    """FusedConv2D composed of Conv2D, BiasAdd and the activation op."""
    ops = _ops()
    conv_attrs = {name: attrs[name] for name in _CONV_ATTRS if name in attrs}
    y = ops.bias_add(ops.conv2d(input, filter, data_format=data_format, **conv_attrs), bias, data_format=data_format)
    return _activate(y, activation)



def register_generic_kernels() -> None:
    """Kernels for any backend, composed of other ops: FusedConv2D."""
    register_kernel("FusedConv2D", backend="*")(_fused_conv2d)
