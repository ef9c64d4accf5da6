"""Specs, shape functions and gradients of max and average pooling and of their
gradient ops (MaxPool, MaxPoolWithArgmax, AvgPool and the *Grad ops), following
TensorFlow's ``nn_ops.cc``.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them and
re-exports the public names).
"""

from __future__ import annotations

from typing import Any

from .. import shape_fns
from ..gradients import register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext, TensorShape
from ..tensor import Tensor, ops_module as _ops
from ._nn_common import (
    _DATA_FORMAT,
    _EXPLICIT_PADDINGS,
    _FLOATS,
    _PADDING,
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

__all__ = ["register_gradients", "register_ops"]


# ------------------------------------------------------------ shape functions


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


# ------------------------------------------------------------ specs


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



def _pool_attrs(builder: Any, explicit: bool) -> Any:
    builder = builder.attr("ksize: list(int) >= 4").attr("strides: list(int) >= 4")
    if explicit:
        return builder.attr(_PADDING_EXPLICIT).attr(_EXPLICIT_PADDINGS)
    return builder.attr(_PADDING)



def register_ops() -> None:
    """Specs of the pooling ops."""
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
_WITHOUT_ZEROS = ("MaxPoolWithArgmax",)


def register_gradients() -> None:
    """Gradients of the pooling ops: every op here is differentiable."""
    for name, fn in _GRADIENTS.items():
        register_gradient(name, materialize_grads=name not in _WITHOUT_ZEROS)(fn)
