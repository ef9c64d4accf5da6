"""The op specs, shape functions and gradients of median pooling.

Both ops live in the ``Addons`` namespace, so their wrappers are
``ok.ops.addons.median_pool2d`` and ``ok.ops.addons.median_pool2d_grad``.
"""

from __future__ import annotations

from typing import Any

import opkernel as ok
from opkernel.ops.nn_ops import spatial_attr, window_output_size

__all__ = ["MEDIAN_POOL", "MEDIAN_POOL_GRAD", "register_ops", "register_gradients", "pool_attrs"]

MEDIAN_POOL = "Addons>MedianPool2D"
MEDIAN_POOL_GRAD = "Addons>MedianPool2DGrad"

_WINDOW_DOC = (
    "ksize: The size of the window for each dimension of the input (NHWC); batch and depth entries are 1.\n"
    "strides: The stride of the sliding window for each dimension of the input (NHWC); batch and depth "
    "entries are 1.\n"
    "padding: 'VALID': only windows wholly inside the input; 'SAME': ceil(size / stride) windows per "
    "dimension, placed as MaxPool places them, and a window's median is over its elements inside the input."
)
_TIE_RULE = (
    "On ties the gradient goes to the first element, in row-major window order, among the window's "
    "elements inside the input that equal the median (for a NaN median: that are NaN)."
)


def _window_attrs(builder: Any) -> Any:
    return builder.attr("ksize: list(int) >= 4").attr("strides: list(int) >= 4").attr("padding: {'SAME', 'VALID'}")


def _checked(c: ok.InferenceContext, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as e:
        raise c.error(str(e)) from None


def _pooled(c: ok.InferenceContext, x: ok.TensorShape) -> ok.TensorShape:
    """The output shape for an input of shape ``x``: unknown batch, height, width or depth propagate."""
    x = c.with_rank(x, 4)
    kh, kw = _checked(c, spatial_attr, c.get_attr("ksize"), "NHWC", "ksize")
    sh, sw = _checked(c, spatial_attr, c.get_attr("strides"), "NHWC", "strides")
    padding = c.get_attr("padding")
    dims = []
    for axis, k, s in ((1, kh, sh), (2, kw, sw)):
        size = c.value(c.dim(x, axis))
        if size is None:
            _checked(c, window_output_size, 1, 1, 1, s, padding)  # still validate the attrs
            dims.append(c.unknown_dim())
        else:
            dims.append(c.make_dim(_checked(c, window_output_size, size, k, 1, s, padding)[0]))
    return c.make_shape([c.dim(x, 0), dims[0], dims[1], c.dim(x, 3)])


def median_pool_shape(c: ok.InferenceContext) -> None:
    """MedianPool2D: (batch, out_height, out_width, depth)."""
    c.set_output(0, _pooled(c, c.input(0)))


def median_pool_grad_shape(c: ok.InferenceContext) -> None:
    """MedianPool2DGrad: the shape of orig_input; grad must have the pooled shape."""
    c.merge(c.input(1), _pooled(c, c.input(0)))
    c.set_output(0, c.with_rank(c.input(0), 4))


def register_ops() -> None:
    _window_attrs(ok.register_op(MEDIAN_POOL).input("value: T").output("output: T")).attr(
        "T: realnumbertype"
    ).set_shape_fn(median_pool_shape).doc(
        "Performs median pooling on the input: each output is the median of its window.\n\n"
        "For an even number of elements the median is the lower of the two middle values.  NaN sorts "
        "after every number (as in numpy's sort), so a window's median is NaN only when more than half "
        "its elements are NaN.\n\n"
        "value: 4-D input to pool over, NHWC.\n" + _WINDOW_DOC + "\noutput: The median pooled output tensor."
    )
    _window_attrs(
        ok.register_op(MEDIAN_POOL_GRAD).input("orig_input: T").input("grad: T").output("output: T")
    ).attr("T: realnumbertype").set_shape_fn(median_pool_grad_shape).doc(
        "Computes the gradient of median pooling: each grad value is added at the position, in "
        "orig_input, of its window's median.\n\n" + _TIE_RULE + "\n\n"
        "orig_input: The original input of MedianPool2D.\n"
        "grad: 4-D gradients with respect to the output of MedianPool2D.\n" + _WINDOW_DOC + "\n"
        "output: Gradients with respect to orig_input."
    )
    # How ok.dask.apply splits MedianPool2D over chunks: a window op (declaring imports no Dask).
    from opkernel.dask import Window, declare

    declare(MEDIAN_POOL, Window(ksize="ksize", strides="strides", padding="padding"))


def pool_attrs(op: Any) -> dict[str, Any]:
    """The window attrs of a recorded MedianPool2D or MedianPool2DGrad call."""
    return {name: op.get_attr(name) for name in ("ksize", "strides", "padding")}


def _median_pool_grad(op: Any, grad: ok.Tensor) -> list[Any]:
    return [ok.ops.addons.median_pool2d_grad(op.inputs[0], grad, **pool_attrs(op))]


def _median_pool_grad_grad(op: Any, grad: ok.Tensor) -> list[Any]:
    # Piecewise constant in orig_input (it only chooses the median positions); linear in
    # grad, whose transpose gathers the incoming gradient at those positions.
    from .composite import gather_at_medians

    return [None, gather_at_medians(op.inputs[0], grad, **pool_attrs(op))]


def register_gradients() -> None:
    ok.register_gradient(MEDIAN_POOL)(_median_pool_grad)
    ok.register_gradient(MEDIAN_POOL_GRAD)(_median_pool_grad_grad)
