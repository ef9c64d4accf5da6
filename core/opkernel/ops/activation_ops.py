"""Specs, shape functions and gradients of the activations, softmax, the
cross-entropy losses, BiasAdd and FusedMatMul (a dense layer in one op), following
TensorFlow's ``nn_ops.cc``; also the generic kernels of the fused ops here.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them and
re-exports the public names).
"""

from __future__ import annotations

from typing import Any

from .. import shape_fns
from ..autodiff import is_unit_gradient, is_zero_gradient
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext, TensorShape
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import constant, mat_mul_grads, unbroadcast
from ._nn_common import _DATA_FORMAT, _FLOATS
from .math_ops import UNARY_GRAD_RULES

__all__ = [
    "FUSED_ACTIVATIONS",
    "FUSED_ACTIVATION_ATTR",
    "LOSS_REDUCTION_ATTR",
    "SELU_ALPHA",
    "SELU_SCALE",
    "register_generic_kernels",
    "register_gradients",
    "register_ops",
]

SELU_SCALE = 1.0507009873554804934193349852946
SELU_ALPHA = 1.6732632423543772848170429916717
#: How SparseSoftmaxCrossEntropyLoss reduces the per-example losses (torch's ``reduction``).
LOSS_REDUCTION_ATTR = "reduction: {'mean', 'sum'} = 'mean'"

#: The activations FusedMatMul offers (a subset of TensorFlow's _FusedMatMul fused_ops).
FUSED_ACTIVATIONS = ("Identity", "Relu", "Relu6", "Elu", "Sigmoid", "Tanh")
FUSED_ACTIVATION_ATTR = "activation: {" + ", ".join(f"'{a}'" for a in FUSED_ACTIVATIONS) + "} = 'Identity'"


# ------------------------------------------------------------ shape functions


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


def register_ops() -> None:
    """Specs of the activations, softmax, the losses, BiasAdd and FusedMatMul."""
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
    register_op("EluGrad").input("gradients: T").input("outputs: T").output("backprops: T").attr(
        f"T: {_FLOATS}"
    ).set_shape_fn(shape_fns.merge_all_inputs).doc(
        "Computes Elu's gradients: gradients * (outputs + 1) where outputs < 0, else gradients.\n\n"
        "gradients: The backpropagated gradients to the corresponding Elu operation.\n"
        "outputs: The outputs of the corresponding Elu operation.\n"
        "backprops: The same shape as gradients and outputs."
    )
    _activation(
        "Selu",
        _FLOATS,
        "Computes the scaled exponential linear function: scale * features if > 0, "
        "scale * alpha * (exp(features) - 1) otherwise, with alpha = 1.6732632423543772848170429916717 "
        "and scale = 1.0507009873554804934193349852946.",
    )
    _activation("Softplus", _FLOATS, "Computes softplus: log(exp(features) + 1).")
    register_op("Gelu").input("features: T").output("activations: T").attr("approximate: bool = false").attr(
        f"T: {_FLOATS}"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Computes the Gaussian error linear unit in one op (opkernel's own; TensorFlow's tf.nn.gelu and "
        "Keras compose it): features * 0.5 * (erf(features / sqrt(2)) + 1), or with approximate, "
        "features * 0.5 * (tanh(sqrt(2 / pi) * (features + 0.044715 * features^3)) + 1).\n\n"
        "approximate: the tanh approximation of Hendrycks and Gimpel instead of erf."
    )
    register_op("GeluGrad").input("gradients: T").input("features: T").output("backprops: T").attr(
        "approximate: bool = false"
    ).attr(f"T: {_FLOATS}").set_shape_fn(shape_fns.merge_all_inputs).doc(
        "Computes Gelu's gradients: gradients * d Gelu(features) / d features; where features is "
        "infinite, the derivative's limits (1 at +inf, 0 at -inf).\n\n"
        "gradients: The backpropagated gradients to the corresponding Gelu operation.\n"
        "features: The features passed as input to the corresponding Gelu operation.\n"
        "backprops: The same shape as gradients and features."
    )
    register_op("LeakyRelu").input("features: T").output("activations: T").attr("alpha: float = 0.2").attr(
        "T: {half, bfloat16, float, double} = DT_FLOAT"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Computes rectified linear with a leak: features where features > 0, else features * alpha."
    )
    register_op("LeakyReluGrad").input("gradients: T").input("features: T").output("backprops: T").attr(
        "alpha: float = 0.2"
    ).attr("T: {half, bfloat16, float, double} = DT_FLOAT").set_shape_fn(shape_fns.merge_all_inputs).doc(
        "Computes LeakyRelu's gradients: gradients where features > 0, else gradients * alpha.\n\n"
        "gradients: The backpropagated gradients to the corresponding LeakyRelu operation.\n"
        "features: The features passed as input to the corresponding LeakyRelu operation, or its output."
    )

    register_op("Softmax").input("logits: T").output("softmax: T").attr(f"T: {_FLOATS}").set_shape_fn(
        shape_fns.unchanged_shape_with_rank_at_least(1)
    ).doc(
        "Computes softmax activations over the last dimension: exp(logits) / sum(exp(logits), -1).\n\n"
        "logits: A non-empty tensor of rank >= 1."
    )
    register_op("SoftmaxGrad").input("gradients: T").input("softmax: T").output("backprops: T").attr(
        f"T: {_FLOATS}"
    ).set_shape_fn(_softmax_grad_shape).doc(
        "Computes Softmax's gradients over the last dimension in one op (opkernel's own; TensorFlow's "
        "gradient of Softmax composes it): (gradients - sum(gradients * softmax, -1)) * softmax.\n\n"
        "gradients: The backpropagated gradients to the corresponding Softmax operation.\n"
        "softmax: The output of the corresponding Softmax operation (rank >= 1).\n"
        "backprops: The same shape as gradients and softmax."
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


def _elu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    """TensorFlow's _EluGradGrad: linear in ``gradients`` (EluGrad again); in ``outputs``,
    ``grad * gradients`` where the output is negative, else 0."""
    ops, g, y = _ops(), op.inputs[0], op.inputs[1]
    return [ops.elu_grad(grad, y), ops.select_v2(ops.less(y, 0), ops.mul(grad, g), ops.zeros_like(y))]


def _selu_grad(op: Any, grad: Tensor) -> list[Any]:
    # d/dx = scale * alpha * exp(x) = y + scale * alpha where y < 0, else scale: TensorFlow's
    # SeluGrad (relu_op_functor.h) tests the output, so x = 0 gets scale, the right side's slope.
    # A select, not 0/1 masks: a mask times an infinite or NaN output was NaN (0 * inf).
    ops, y = _ops(), op.outputs[0]
    return [ops.select_v2(ops.less(y, 0), ops.mul(grad, ops.add(y, SELU_SCALE * SELU_ALPHA)), ops.mul(grad, SELU_SCALE))]


def _gelu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_ops().gelu_grad(grad, op.inputs[0], approximate=op.get_attr("approximate"))]


def _gelu_second_derivative(x: Tensor, approximate: bool) -> Any:
    """Gelu''(x), written with ops: phi(x) * (2 - x^2) exactly; with the tanh approximation,
    (1 - t^2) * (u' - x * t * u'^2 + x * u'' / 2), t = tanh(u), u = c * (x + a * x^3),
    u' = c * (1 + 3 a x^2), u'' = 6 a c x, with t = s(2u) - s(-2u) and 1 - t^2 = 4 s(2u) s(-2u)
    (no cancellation where tanh is near +-1).  Where |x| >= 40 (exact) or 25 (tanh) the true
    value is 0 in float64 and float32, and x * x may overflow: 0 is selected there."""
    ops = _ops()
    if not approximate:
        value, bound = ops.exp(x * x * -0.5) * 0.3989422804014327 * (2.0 - x * x), 40.0
    else:
        c, a = 0.7978845608028654, 0.044715
        u2 = (x + x * x * x * a) * (2.0 * c)
        s, s_neg = ops.sigmoid(u2), ops.sigmoid(-u2)
        t = s - s_neg
        du = (x * x * (3.0 * a) + 1.0) * c
        value, bound = (s * s_neg * 4.0) * (du - x * t * du * du + x * x * (3.0 * a * c)), 25.0
    return ops.select_v2(ops.less(ops.abs(x), bound), value, ops.zeros_like(x))


def _gelu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    """Linear in ``gradients`` (GeluGrad again); in ``features``, grad * gradients * Gelu''."""
    ops, dy, x = _ops(), op.inputs[0], op.inputs[1]
    approximate = op.get_attr("approximate")
    return [ops.gelu_grad(grad, x, approximate=approximate),
            ops.mul(ops.mul(grad, dy), _gelu_second_derivative(x, approximate))]


def _softplus_grad(op: Any, grad: Tensor) -> list[Any]:
    ops = _ops()
    return [ops.real_div(grad, ops.add(1, ops.exp(ops.neg(op.inputs[0]))))]


def _softmax_grad_shape(ctx: Any) -> None:
    """Both inputs have one shape, of rank >= 1 (the softmax's axis is the last)."""
    merged = ctx.merge(ctx.input(0), ctx.input(1))
    ctx.set_output(0, ctx.with_rank_at_least(merged, 1))


def _softmax_vjp(grad: Tensor, softmax: Tensor) -> Any:
    """(grad - sum(grad * softmax, -1)) * softmax: the softmax Jacobian applied to ``grad``,
    as one SoftmaxGrad op (a row kernel: one pass for the sums, one for the result, where
    the composition took four ops and four passes) when both have one known shape; composed
    where they broadcast (SoftmaxCrossEntropyWithLogits' features against its labels) or a
    trace left a dimension unknown."""
    ops = _ops()
    shape = tuple(grad.shape)
    if shape == tuple(softmax.shape) and None not in shape:
        return ops.softmax_grad(grad, softmax)
    return ops.mul(ops.sub(grad, ops.sum(ops.mul(grad, softmax), -1, keep_dims=True)), softmax)


def _softmax_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    """SoftmaxGrad(g, s) = J(s) g with J = diag(s) - s s^T symmetric: linear in g, whose
    gradient is SoftmaxGrad(grad, s) again; in s, grad * (g - sum(g * s)) - g * sum(grad * s)."""
    ops, g, s = _ops(), op.inputs[0], op.inputs[1]
    dot_g = ops.sum(ops.mul(g, s), -1, keep_dims=True)
    dot_u = ops.sum(ops.mul(grad, s), -1, keep_dims=True)
    return [ops.softmax_grad(grad, s), ops.sub(ops.mul(grad, ops.sub(g, dot_g)), ops.mul(g, dot_u))]


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


def _leaky_relu_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_ops().leaky_relu_grad(grad, op.inputs[0], alpha=op.get_attr("alpha"))]


def _leaky_relu_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # Linear in ``gradients`` with the same slopes; piecewise constant in ``features``.
    ops = _ops()
    return [ops.leaky_relu_grad(grad, op.inputs[1], alpha=op.get_attr("alpha")), ops.zeros_like(op.inputs[1])]


def _bias_add_grad(op: Any, grad: Tensor) -> list[Any]:
    return [grad, _ops().bias_add_grad(grad, data_format=op.get_attr("data_format"))]


def _bias_add_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # BiasAddGrad sums over all but the channel axis; its adjoint broadcasts back.
    ops = _ops()
    return [ops.bias_add(ops.zeros_like(op.inputs[0]), grad, data_format=op.get_attr("data_format"))]



_GRADIENTS: dict[str, Any] = {
    "Relu": _relu_grad,
    "ReluGrad": _relu_grad_grad,
    "Relu6": _relu6_grad,
    "Elu": _elu_grad,
    "EluGrad": _elu_grad_grad,
    "Selu": _selu_grad,
    "LeakyRelu": _leaky_relu_grad,
    "LeakyReluGrad": _leaky_relu_grad_grad,
    "Softplus": _softplus_grad,
    "Gelu": _gelu_grad,
    "GeluGrad": _gelu_grad_grad,
    "Softmax": _softmax_grad,
    "SoftmaxGrad": _softmax_grad_grad,
    "LogSoftmax": _log_softmax_grad,
    "SoftmaxCrossEntropyWithLogits": _xent_grad,
    "SparseSoftmaxCrossEntropyWithLogits": _sparse_xent_grad,
    "SparseSoftmaxCrossEntropyLoss": _sparse_xent_loss_grad,
    "BiasAdd": _bias_add_grad,
    "BiasAddGrad": _bias_add_grad_grad,
    "FusedMatMul": _fused_mat_mul_grad,
}


#: Gradients that take None for an unused output (TensorFlow's FunctionsAcceptingNoneForIndicesMap).
_WITHOUT_ZEROS = ("SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyLoss")


def register_gradients() -> None:
    """Gradients of the activations, softmax, the losses, BiasAdd and FusedMatMul: every op here is differentiable."""
    for name, fn in _GRADIENTS.items():
        register_gradient(name, materialize_grads=name not in _WITHOUT_ZEROS)(fn)


# ------------------------------------------------------------ generic kernels


def _fused_mat_mul(a: Any, b: Any, bias: Any, transpose_a: bool, transpose_b: bool, activation: str, **attrs: Any) -> Any:
    """FusedMatMul composed of MatMul, BiasAdd and the activation op: what a backend
    without a fused kernel runs."""
    ops = _ops()
    return _activate(ops.bias_add(ops.mat_mul(a, b, transpose_a=transpose_a, transpose_b=transpose_b), bias), activation)


def _activate(y: Any, activation: str) -> Any:
    """``y`` through the op of one of FUSED_ACTIVATIONS (the generic fused kernels)."""
    return y if activation == "Identity" else getattr(_ops(), activation.lower())(y)



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
    """Kernels for any backend, composed of other ops: FusedMatMul and SparseSoftmaxCrossEntropyLoss."""
    register_kernel("FusedMatMul", backend="*")(_fused_mat_mul)
    register_kernel("SparseSoftmaxCrossEntropyLoss", backend="*")(_sparse_xent_loss)
