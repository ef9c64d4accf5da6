"""Specs, shape functions and gradients of the neural-network ops.

Activations, softmax and the cross-entropy losses, BiasAdd, the convolutions and their
backprop ops, max/average pooling and the image resizes with their gradient ops,
following TensorFlow's ``nn_ops.cc`` and ``image_ops.cc``.  The window arithmetic (``window_output_size``,
``spatial_attr``, ``explicit_padding``) is public so that backends compute
exactly the geometry the shape functions promise.

Each op's spec, shape function and gradient live together in one module:

* ``activation_ops``: the activations, softmax, the cross-entropy losses, BiasAdd
  and FusedMatMul;
* ``conv_ops``: Conv2D, FusedConv2D, DepthwiseConv2dNative and the convolution backprop ops;
* ``pooling_ops``: max and average pooling and their gradient ops;
* ``image_ops``: the bilinear and nearest-neighbor resizes and their gradient ops;
* ``lrn_ops``: local response normalization (LRN, LRNGrad);
* ``dilation_ops``: grayscale morphological dilation (Dilation2D and its backprop ops);
* ``_nn_common``: what they share (attr specs, the window arithmetic, shape-function
  helpers and the host-side checks of the backends' kernels).

This module registers them, in that order, and is where backends and plugins
import the public names from (re-exported here).
"""

from __future__ import annotations

from . import activation_ops, conv_ops, dilation_ops, image_ops, lrn_ops, pooling_ops
from ._nn_common import (
    check_argmax_type as check_argmax_type,
    check_out_shape as check_out_shape,
    check_rank4 as check_rank4,
    check_sizes as check_sizes,
    explicit_padding,
    spatial_attr,
    window_output_size,
)
from .activation_ops import (
    FUSED_ACTIVATION_ATTR as FUSED_ACTIVATION_ATTR,
    FUSED_ACTIVATIONS,
    LOSS_REDUCTION_ATTR as LOSS_REDUCTION_ATTR,
    SELU_ALPHA,
    SELU_SCALE,
)
from .conv_ops import conv_groups

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

_FAMILIES = (activation_ops, conv_ops, pooling_ops, image_ops, lrn_ops, dilation_ops)


def register_ops() -> None:
    """Neural-network op specs."""
    for family in _FAMILIES:
        family.register_ops()


def register_gradients() -> None:
    """Neural-network op gradients: every op here is differentiable."""
    for family in _FAMILIES:
        family.register_gradients()


def register_generic_kernels() -> None:
    """The generic kernels (any backend) of the fused ops, composed of other ops."""
    activation_ops.register_generic_kernels()
    conv_ops.register_generic_kernels()
    lrn_ops.register_generic_kernels()
    dilation_ops.register_generic_kernels()
