"""CPU kernels of the neural-network ops: one table in ``register_all``.

Convolutions are im2col on the padded input (a strided view, copied once) and
one BLAS matmul; their backprops are one matmul plus a loop over the kernel
positions (never over pixels).  Pooling loops over the window positions on
strided slices.  Half and bfloat16 compute in float32.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, NamedTuple, NoReturn

import numpy as np
import opkernel as ok
from numpy.lib.stride_tricks import as_strided
from opkernel.errors import InvalidArgumentError
from opkernel.ops.image_ops import bilinear_table, nearest_index, resize_grad_sizes, resize_size
from opkernel.ops.layer_norm_ops import check_layer_norm
from opkernel.ops.nn_ops import (
    check_argmax_type,
    check_out_shape,
    check_rank4,
    check_sizes,
    SELU_ALPHA,
    SELU_SCALE,
    conv_groups,
    explicit_padding,
    spatial_attr,
    window_output_size,
)

from . import sharding
from .math_kernels import erf as _erf_kernel, product, sigmoid
from .xp import xp_of

_FLOATS = ["float16", "bfloat16", "float32", "float64"]
_REAL = ["float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
_NUMBER = _REAL + ["complex64", "complex128"]


def _error(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op '{op}': {message}", op=op)


def _work_type(T: ok.DType) -> Any:
    """The numpy type to compute in: float32 for the 16-bit floats."""
    return np.float32 if T.name in ("float16", "bfloat16") else T.np


def _widened(fn: Any) -> Any:
    """Run an elementwise kernel in float32 for half/bfloat16 and cast back."""

    def kernel(features: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
        return xp_of(features).asarray(fn(features.astype(_work_type(T), copy=False))).astype(T.np, copy=False)  # type: ignore[no-any-return]

    return kernel


# ------------------------------------------------------------ activations


_ZERO_ROWS: dict[np.dtype[Any], np.ndarray] = {}


def _relu(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    if out is None and _native_relu is not None and type(x) is np.ndarray and x.dtype in _NATIVE_FLOATS:
        return _native_relu(x)  # type: ignore[no-any-return]  # one pass, sharded; numpy's bits
    if type(x) is np.ndarray and x.flags.c_contiguous and x.size >= 4096:
        # numpy's maximum against a scalar takes a slow broadcasting loop; against a row
        # of zeros it runs contiguous on both operands (2x faster), with the same result.
        width = math.gcd(x.size, 1024)
        if width >= 64:
            zeros = _ZERO_ROWS.get(x.dtype)
            if zeros is None:
                zeros = _ZERO_ROWS.setdefault(x.dtype, np.zeros(1024, x.dtype))
            rows = None if out is None else out.reshape(-1, width)  # a view: out is contiguous like x
            return _positive_zero(np.maximum(x.reshape(-1, width), zeros[:width], out=rows).reshape(x.shape))
    return _positive_zero(xp_of(x).maximum(x, x.dtype.type(0), out=out))


def _positive_zero(y: np.ndarray) -> np.ndarray:
    """``y`` with -0.0 made +0.0, for the 16-bit floats: numpy's float16 and bfloat16
    maximum keeps its first argument on a tie, so max(-0.0, 0) was -0.0 (float32 and
    float64 give +0.0, TensorFlow's answer: docs/conformance.md)."""
    if y.dtype.itemsize == 2 and y.dtype.kind in "fV":  # V: ml_dtypes' bfloat16
        y += y.dtype.type(0)  # -0.0 + 0.0 is +0.0; every other value, NaN included, is unchanged
    return y


def relu(features: np.ndarray, **attrs: Any) -> np.ndarray:
    return _relu(features)


def relu_grad(gradients: np.ndarray, features: np.ndarray, **attrs: Any) -> np.ndarray:
    if gradients.shape != features.shape:
        raise _error(
            "ReluGrad",
            f"gradients and features must have the same shape, got {list(gradients.shape)} and {list(features.shape)}",
        )
    # A product (not a select), so a nan gradient stays nan where the feature is <= 0, as in TensorFlow.
    native = sharding.native_module()
    if native is not None and type(gradients) is np.ndarray and type(features) is np.ndarray \
            and gradients.dtype == features.dtype and gradients.dtype in _NATIVE_FLOATS:  # one pass, no temporary
        out = np.empty(gradients.shape, gradients.dtype)
        native.relu_grad(_aligned(gradients), _aligned(features), out)
        return out
    xp = xp_of(gradients, features)
    with np.errstate(invalid="ignore"):  # inf * 0: nan without a warning, as TensorFlow (and the native path)
        return xp.multiply(gradients, features > 0, dtype=gradients.dtype)  # type: ignore[no-any-return]


def elu_grad(gradients: np.ndarray, outputs: np.ndarray, **attrs: Any) -> np.ndarray:
    """gradients * (outputs + 1) where outputs < 0, else gradients (TensorFlow's EluGrad, in T)."""
    if gradients.shape != outputs.shape:
        raise _error(
            "EluGrad", f"gradients and outputs must have the same shape, got {list(gradients.shape)} and {list(outputs.shape)}"
        )
    xp = xp_of(gradients, outputs)
    with np.errstate(all="ignore"):
        return xp.where(outputs < 0, gradients * (outputs + outputs.dtype.type(1)), gradients)  # type: ignore[no-any-return]


def leaky_relu(features: np.ndarray, alpha: float, T: ok.DType, **attrs: Any) -> np.ndarray:
    """features where features > 0, else features * alpha: the attr is a 32-bit float, cast
    to T (TensorFlow's static_cast<T>(alpha)); NaN stays NaN."""
    xp = xp_of(features)
    with np.errstate(all="ignore"):
        return xp.where(features > 0, features, features * T.np.type(np.float32(alpha)))  # type: ignore[no-any-return]


def leaky_relu_grad(gradients: np.ndarray, features: np.ndarray, alpha: float, T: ok.DType, **attrs: Any) -> np.ndarray:
    if gradients.shape != features.shape:
        raise _error(
            "LeakyReluGrad",
            f"gradients and features must have the same shape, got {list(gradients.shape)} and {list(features.shape)}",
        )
    xp = xp_of(gradients, features)
    with np.errstate(all="ignore"):
        return xp.where(features > 0, gradients, gradients * T.np.type(np.float32(alpha)))  # type: ignore[no-any-return]


def relu6(features: np.ndarray, **attrs: Any) -> np.ndarray:
    xp = xp_of(features)
    return _positive_zero(xp.minimum(xp.maximum(features, features.dtype.type(0)), features.dtype.type(6)))


# ``x < 0`` selects the exponential branch, so -0.0 passes through as in TensorFlow
# (minimum(-0.0, 0) is +0.0 here: the minimum only keeps expm1 finite on the other branch).
def _elu(x: np.ndarray) -> np.ndarray:
    xp = xp_of(x)
    return xp.where(x < 0, xp.expm1(xp.minimum(x, 0)), x)  # type: ignore[no-any-return]


def _selu(x: np.ndarray) -> np.ndarray:
    xp = xp_of(x)
    return xp.where(x < 0, (SELU_SCALE * SELU_ALPHA) * xp.expm1(xp.minimum(x, 0)), SELU_SCALE * x).astype(x.dtype)  # type: ignore[no-any-return]


def _native_activation(ufunc_name: str, numpy_path: Any) -> Any:
    """An activation kernel: the native ufunc ``ufunc_name`` (one pass, sharded) for float32
    and float64 numpy arrays, float16 and bfloat16 through it in float32; else
    ``numpy_path`` (the several numpy passes) widened as before."""
    widened = _widened(numpy_path)
    native = sharding.native_module()
    if native is None:
        return widened
    fn = getattr(native, ufunc_name)
    run = sharding.elementwise(fn)  # quiet without np.errstate: the native ufuncs raise no flags

    def kernel(features: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
        if type(features) is not np.ndarray:
            return widened(features, T=T)  # type: ignore[no-any-return]
        if T.name in ("float32", "float64"):
            return run(features)  # type: ignore[no-any-return]
        return run(features.astype(np.float32)).astype(T.np)  # type: ignore[no-any-return]

    kernel.ufunc, kernel.ufunc_dtypes = fn, ("float32", "float64")  # type: ignore[attr-defined]  # fusion.py
    kernel.__name__ = ufunc_name
    return kernel


# GELU (opkernel's Gelu and GeluGrad ops; activation_ops.py).  The bodies are written against
# xp with the erf to use as a parameter, so the CUDA backend registers them too.
_SQRT_HALF = 0.7071067811865476  # 1 / sqrt(2)
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
_TANH_C = 0.7978845608028654  # sqrt(2 / pi)
_TANH_A = 0.044715


def gelu_values(x: Any, approximate: bool, erf: Callable[[Any], Any]) -> Any:
    """x * 0.5 * (erf(x / sqrt 2) + 1), or with the tanh approximation
    x * 0.5 * (tanh(sqrt(2 / pi) * (x + 0.044715 x^3)) + 1), in x's (float) type: the
    operations of ok.nn's composition in its order, constants rounded to the type."""
    xp, t = xp_of(x), x.dtype.type
    with np.errstate(all="ignore"):
        if approximate:
            inner = (x + x * x * x * t(_TANH_A)) * t(_TANH_C)
            return x * t(0.5) * (xp.tanh(inner) + t(1))
        return x * t(0.5) * (erf(x * t(_SQRT_HALF)) + t(1))


def gelu_grad_values(dy: Any, x: Any, approximate: bool, erf: Callable[[Any], Any]) -> Any:
    """dy * gelu'(x): gelu'(x) = Phi(x) + x * phi(x) (exact), or
    0.5 * (1 + t) + 0.5 * x * (1 - t^2) * sqrt(2 / pi) * (1 + 3 * 0.044715 x^2) with
    t = tanh(u), u = sqrt(2 / pi) * (x + 0.044715 x^3), computed as sigmoids of +-2u;
    where x is infinite, the limits (dy, 0)."""
    xp, t = xp_of(x), x.dtype.type
    with np.errstate(all="ignore"):
        if approximate:  # 0.5 (1 + tanh u) = s(2u), 1 - tanh(u)^2 = 4 s(2u) s(-2u): no cancellation near -1
            u = (x + x * x * x * t(_TANH_A)) * t(_TANH_C)
            cdf = t(1) / (t(1) + xp.exp(t(-2) * u))
            tail = t(2) * x * cdf * (t(1) / (t(1) + xp.exp(t(2) * u))) * (t(_TANH_C) * (t(1) + t(3 * _TANH_A) * x * x))
            # past |x| = 25 s(-2u) s(2u) is exactly 0 in both types; x * x may overflow there (0 * inf)
            tail = xp.where(xp.abs(x) < t(25), tail, t(0))
        else:
            cdf = t(0.5) * (erf(x * t(_SQRT_HALF)) + t(1))
            tail = xp.where(xp.isinf(x), t(0), x * (xp.exp(t(-0.5) * x * x) * t(_INV_SQRT_2PI)))
        return dy * (cdf + tail)


def check_gelu_grad(gradients: Any, features: Any) -> None:
    if gradients.shape != features.shape:
        raise _error("GeluGrad", f"gradients and features must have the same shape, got {list(gradients.shape)} "
                                 f"and {list(features.shape)}")


def _numpy_erf(x: np.ndarray) -> np.ndarray:
    return _erf_kernel(x, T=ok.as_dtype(x.dtype))


_native = sharding.native_module()
# The native ufuncs are quiet (no floating-point flags: _native.c): no np.errstate around them.
_native_relu = sharding.elementwise(_native.relu) if _native is not None else None
_native_gelu = sharding.elementwise(_native.gelu) if _native is not None else None
_native_gelu_grad = sharding.elementwise(_native.gelu_grad) if _native is not None else None


def gelu(features: np.ndarray, approximate: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    """Gelu: the native ufunc (one pass, sharded) for exact float32/float64 numpy arrays,
    float16 and bfloat16 through float32; the tanh approximation (and no native module) as
    numpy passes."""
    wt = _work_type(T)
    x = features.astype(wt, copy=False)
    if _native_gelu is not None and not approximate and type(x) is np.ndarray:
        out = _native_gelu(x)
    else:
        out = gelu_values(x, approximate, _numpy_erf)
    return out.astype(T.np, copy=False)  # type: ignore[no-any-return]


def gelu_grad(gradients: np.ndarray, features: np.ndarray, approximate: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    """GeluGrad: gradients * gelu'(features), by the native ufunc as Gelu."""
    check_gelu_grad(gradients, features)
    wt = _work_type(T)
    dy, x = gradients.astype(wt, copy=False), features.astype(wt, copy=False)
    if _native_gelu_grad is not None and not approximate and type(x) is np.ndarray:
        out = _native_gelu_grad(dy, x)
    else:
        out = gelu_grad_values(dy, x, approximate, _numpy_erf)
    return out.astype(T.np, copy=False)  # type: ignore[no-any-return]


def _softplus(x: np.ndarray) -> np.ndarray:
    return xp_of(x).logaddexp(x, x.dtype.type(0))  # type: ignore[no-any-return]


elu_kernel = _native_activation("elu", _elu)
softplus_kernel = _native_activation("softplus", _softplus)
selu_kernel = _native_activation("selu", _selu)


# ------------------------------------------------------------ softmax and losses


def _log_softmax(x: np.ndarray) -> np.ndarray:
    """(x - max) - log(sum(exp(x - max))) over the last axis: one pass a row in the native
    module where it applies (float32/float64 numpy arrays), else numpy's passes."""
    native = sharding.rows(sharding.LOG_SOFTMAX, x)
    if native is not None:
        return native
    xp = xp_of(x)
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=-1, keepdims=True))  # type: ignore[no-any-return]


def _softmax(x: np.ndarray) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) over the last axis (see _log_softmax)."""
    native = sharding.rows(sharding.SOFTMAX, x)
    if native is not None:
        return native
    e = xp_of(x).exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)  # type: ignore[no-any-return]


def _last_axis(op: str, logits: np.ndarray) -> bool:
    """Whether there is anything to compute: an empty tensor (any axis of size 0, the
    last included, as TensorFlow allows) gives an empty result."""
    if logits.ndim < 1:
        raise _error(op, f"logits must have rank >= 1, got shape {list(logits.shape)}")
    return logits.size > 0


def softmax(logits: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if not _last_axis("Softmax", logits):
        return xp_of(logits).empty(logits.shape, T.np)  # type: ignore[no-any-return]
    return _softmax(logits.astype(_work_type(T), copy=False)).astype(T.np, copy=False)


def check_softmax_grad(gradients: Any, softmax: Any) -> None:
    if gradients.shape != softmax.shape:
        raise _error("SoftmaxGrad", f"gradients and softmax must have the same shape, got {list(gradients.shape)} "
                                    f"and {list(softmax.shape)}")
    if gradients.ndim < 1:
        raise _error("SoftmaxGrad", f"gradients and softmax must have rank >= 1, got shape {list(gradients.shape)}")


def softmax_grad_values(g: Any, s: Any) -> Any:
    """(g - sum(g * s, -1)) * s over the last axis, by array operations (numpy or cupy)."""
    with np.errstate(all="ignore"):  # inf and NaN propagate silently, as in the native kernel
        return (g - (g * s).sum(axis=-1, keepdims=True)) * s


def softmax_grad(gradients: np.ndarray, softmax: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    """SoftmaxGrad: one native pass per row for the sums, one for the result."""
    check_softmax_grad(gradients, softmax)
    if not gradients.size:
        return xp_of(gradients).empty(gradients.shape, T.np)  # type: ignore[no-any-return]
    wt = _work_type(T)
    g, s = gradients.astype(wt, copy=False), softmax.astype(wt, copy=False)
    out = sharding.softmax_grad(g, s)
    if out is None:
        out = softmax_grad_values(g, s)
    return out.astype(T.np, copy=False)


def log_softmax(logits: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if not _last_axis("LogSoftmax", logits):
        return xp_of(logits).empty(logits.shape, T.np)  # type: ignore[no-any-return]
    return _log_softmax(logits.astype(_work_type(T), copy=False)).astype(T.np, copy=False)


def softmax_cross_entropy_with_logits(
    features: np.ndarray, labels: np.ndarray, T: ok.DType, **attrs: Any
) -> tuple[np.ndarray, np.ndarray]:
    op = "SoftmaxCrossEntropyWithLogits"
    try:
        shape = np.broadcast_shapes(features.shape, labels.shape)
    except ValueError:
        raise _error(
            op, f"features and labels must be broadcastable, got shapes {list(features.shape)} and {list(labels.shape)}"
        ) from None
    if len(shape) != 2:  # TensorFlow's rule: 2-D, or broadcast to 2-D (a [classes] labels row for every example)
        raise _error(op, f"features and labels must be 2-D or broadcast to 2-D, got shapes {list(features.shape)} and "
                       f"{list(labels.shape)}")
    wt = _work_type(T)
    xp = xp_of(features, labels)
    if shape[1] == 0:  # no classes: each loss is an empty sum, 0, as TensorFlow gives it
        return xp.zeros(shape[:1], T.np), xp.empty(shape, T.np)
    logp = _log_softmax(xp.broadcast_to(features.astype(wt, copy=False), shape))
    y = xp.broadcast_to(labels.astype(wt, copy=False), shape)
    # sum(y * (lse - shifted)) as TensorFlow's xent_op.h: 0.0 - logp is that, +0.0 where logp is
    # 0 (a single class), so the loss is +0.0 there; -(sum(y * logp)) would be -0.0.
    loss = (y * (0.0 - logp)).sum(axis=-1)
    backprop = np.exp(logp) - y
    return loss.astype(T.np, copy=False), backprop.astype(T.np, copy=False)


#: Unsigned twin of each signed label dtype: one comparison of the unsigned view
#: finds negative labels too (seen unsigned they are huge).
_UNSIGNED = {np.dtype(np.int32): np.dtype(np.uint32), np.dtype(np.int64): np.dtype(np.uint64)}
#: (batch, classes) -> the flat offset of each row (read-only, made once per shape).
_ROW_STARTS: dict[tuple[int, int], np.ndarray] = {}


def _row_starts(batch: int, classes: int) -> np.ndarray:
    key = (batch, classes)
    starts = _ROW_STARTS.get(key)
    if starts is None:
        if len(_ROW_STARTS) >= 64:
            _ROW_STARTS.clear()
        starts = _ROW_STARTS[key] = np.arange(0, batch * classes, classes)
        starts.flags.writeable = False
    return starts


def _bad_label(op: str, value: int, classes: int, labels: Any) -> NoReturn:
    shown = "" if labels is None else f"; label values: {labels.tolist() if labels.size <= 16 else '...'}"
    raise _error(op, f"received a label value of {value} which is outside the valid range of [0, {classes}){shown}")


def _sparse_xent(op: str, features: Any, labels: Any, T: ok.DType) -> tuple[Any, Any]:
    """Per-example loss and backprop (softmax - one_hot) of the sparse softmax
    cross-entropy, in the work type (float32 for the 16-bit floats)."""
    if features.ndim != 2 or labels.ndim != 1 or labels.shape[0] != features.shape[0]:
        raise _error(
            op,
            "features must be 2-D [batch, classes] and labels 1-D [batch], "
            f"got shapes {list(features.shape)} and {list(labels.shape)}",
        )
    batch, classes = features.shape
    if classes == 0:  # TensorFlow's check: no label can be valid, even in an empty batch
        raise _error(op, f"must have at least one class, got features shape {list(features.shape)}")
    host = type(features) is np.ndarray
    work = np.dtype(_work_type(T))
    native = sharding.native_module()
    one_pass = host and type(labels) is np.ndarray and work in _NATIVE_FLOATS and labels.dtype in _UNSIGNED \
        and batch > 0 and classes > 0
    if native is None or not one_pass:
        # Another thread may change the caller's labels while this runs: the numpy path
        # checks and indexes with one copy (the native pass makes and checks its own).
        labels = labels.copy()
    if labels.size:
        unsigned = labels.view(_UNSIGNED.get(labels.dtype) or labels.dtype.str.replace("i", "u"))
        if (np.maximum.reduce(unsigned) if host else unsigned.max()) >= classes:
            seen = labels.copy()  # the caller's labels may change while we look for the bad one
            bad = seen[(seen < 0) | (seen >= classes)]
            _bad_label(op, int(bad[0]) if bad.size else int(unsigned.max().astype(labels.dtype)), classes, seen)
    xp = np if host else xp_of(features, labels)
    x = features.astype(work, copy=False)
    if native is not None and one_pass:
        loss, backprop = np.empty(batch, x.dtype), np.empty((batch, classes), x.dtype)
        # The native pass copies and checks the labels itself: they were checked above,
        # but another thread may have changed them since.
        caught = native.sparse_xent(_aligned(x), _aligned(labels), loss, backprop)
        if caught is not None:
            _bad_label(op, caught[1], classes, None)
        return loss, backprop
    top = np.maximum.reduce(x, axis=-1, keepdims=True) if host else x.max(axis=-1, keepdims=True)
    shifted = xp.subtract(x, top)
    at_label = (_row_starts(batch, classes) if host else xp.arange(0, batch * classes, classes)) + labels
    flat = shifted.reshape(-1)
    picked = flat.take(at_label)  # the shifted logit of each row's label
    e = xp.exp(shifted, out=shifted)
    total = np.add.reduce(e, axis=-1) if host else e.sum(axis=-1)
    loss = xp.log(total)
    loss -= picked  # -log_softmax at the label
    backprop = xp.divide(e, total.reshape(-1, 1), out=e)  # softmax, in place of its numerator
    flat.put(at_label, flat.take(at_label) - 1)  # rows' labels never collide: take/put, no fancy indexing
    return loss, backprop


def sparse_softmax_cross_entropy_with_logits(
    features: np.ndarray, labels: np.ndarray, T: ok.DType, **attrs: Any
) -> tuple[np.ndarray, np.ndarray]:
    loss, backprop = _sparse_xent("SparseSoftmaxCrossEntropyWithLogits", features, labels, T)
    return loss.astype(T.np, copy=False), backprop.astype(T.np, copy=False)


def reduce_loss(loss: Any, backprop: Any, reduction: str, T: ok.DType) -> tuple[Any, Any]:
    """Per-example (loss, backprop) in the work type -> the reduced loss and its
    gradient with respect to the features (scaled by 1/batch for 'mean'), in T."""
    host = type(loss) is np.ndarray
    total = np.add.reduce(loss) if host else loss.sum()
    batch = loss.shape[0]
    if reduction == "mean" and batch != 1:
        if batch:
            total = total / batch  # a Python number: computed in the work type (NEP 50)
            backprop *= 1 / batch
        else:
            total = np.nan  # the mean of no examples
    out = np.asarray(total, T.np) if host else xp_of(loss).asarray(total, dtype=T.np)
    return out, backprop.astype(T.np, copy=False)


def sparse_softmax_cross_entropy_loss(
    features: np.ndarray, labels: np.ndarray, T: ok.DType, reduction: str, **attrs: Any
) -> tuple[np.ndarray, np.ndarray]:
    return reduce_loss(*_sparse_xent("SparseSoftmaxCrossEntropyLoss", features, labels, T), reduction, T)


# ------------------------------------------------------------ bias


def _channel_axis(op: str, x: np.ndarray, data_format: str) -> int:
    if x.ndim < 2:
        raise _error(op, f"input must be at least 2-D, got shape {list(x.shape)}")
    return 1 if data_format == "NCHW" else x.ndim - 1


def bias_add(value: np.ndarray, bias: np.ndarray, data_format: str, **attrs: Any) -> np.ndarray:
    axis = _channel_axis("BiasAdd", value, data_format)
    if bias.ndim != 1 or bias.shape[0] != value.shape[axis]:
        raise _error(
            "BiasAdd",
            f"bias must be 1-D with size the channel dimension of value ({value.shape[axis]}, {data_format}), "
            f"got shapes {list(value.shape)} and {list(bias.shape)}",
        )
    tiled = _tiled_bias(value, bias) if axis == value.ndim - 1 else None
    if tiled is not None:
        width, row = tiled
        return (value.reshape(-1, width) + row).reshape(value.shape)  # type: ignore[no-any-return]
    shape = [1] * value.ndim
    shape[axis] = bias.shape[0]
    return value + bias.reshape(shape)  # type: ignore[no-any-return]


def _tiled_bias(value: Any, bias: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(width, row) for adding a last-axis ``bias`` to ``value`` viewed as rows of
    ``width``: numpy broadcasts a short bias row by row (slow for a few channels over
    many rows), so the bias is tiled k times onto rows k times longer.  None with
    fewer rows or wider channels, where plain broadcasting wins (the tile costs more
    than it saves), or for anything but a C-contiguous numpy array."""
    c = bias.shape[0]
    if 0 < c <= 16 and value.size >= 2048 * c and type(value) is np.ndarray and value.flags.c_contiguous:
        k = math.gcd(value.size // c, 1024 // c)
        if k > 1:
            return c * k, np.tile(bias, k)
    return None


def bias_add_grad(out_backprop: np.ndarray, T: ok.DType, data_format: str, **attrs: Any) -> np.ndarray:
    axis = _channel_axis("BiasAddGrad", out_backprop, data_format)
    wt = _work_type(T)
    g = out_backprop
    if axis == g.ndim - 1 and type(g) is np.ndarray:
        rows = _by_channel(g)
        if rows.shape[0] >= 64 and T.np.type in (np.float32, np.float64) and g.size:
            # A row of ones times the (rows, channels) matrix: one BLAS call instead of
            # numpy's reduction over the rows (5-10x faster from 64 rows on).
            return np.ones(rows.shape[0], wt) @ rows  # type: ignore[no-any-return]
        return np.add.reduce(rows, axis=0, dtype=wt).astype(T.np, copy=False)  # type: ignore[no-any-return]
    others = tuple(a for a in range(g.ndim) if a != axis)
    return g.sum(axis=others, dtype=wt).astype(T.np, copy=False)  # type: ignore[no-any-return]


# ------------------------------------------------------------ window geometry


def _to_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return x if data_format == "NHWC" else x.transpose(0, 2, 3, 1)


def _from_nhwc(x: np.ndarray, data_format: str) -> np.ndarray:
    return x if data_format == "NHWC" else xp_of(x).ascontiguousarray(x.transpose(0, 3, 1, 2))


def _nhwc_dims(values: Any, data_format: str) -> tuple[int, int, int, int]:
    v = [int(d) for d in values]
    return (v[0], v[1], v[2], v[3]) if data_format == "NHWC" else (v[0], v[2], v[3], v[1])


class _Window(NamedTuple):
    """One 2-D window geometry (NHWC)."""

    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    oh: int
    ow: int
    pads: tuple[tuple[int, int], tuple[int, int]]

    def padded(self, x: np.ndarray, value: Any = 0) -> np.ndarray:
        (t, b), (l, r) = self.pads
        if not (t or b or l or r):
            return x
        n, h, w, c = x.shape
        out = xp_of(x).full((n, h + t + b, w + l + r, c), value, x.dtype)  # a fill and a copy: cheaper than pad()
        out[:, t : t + h, l : l + w, :] = x
        return out  # type: ignore[no-any-return]

    def padded_shape(self, n: int, h: int, w: int, c: int) -> tuple[int, int, int, int]:
        (t, b), (l, r) = self.pads
        return n, h + t + b, w + l + r, c

    def crop(self, xp: np.ndarray, h: int, w: int) -> np.ndarray:
        (t, _), (l, _) = self.pads
        return xp[:, t : t + h, l : l + w, :]

    def tap(self, i: int, j: int) -> tuple[slice, slice, slice, slice]:
        """Where kernel position (i, j) reads the padded input, for every output position."""
        r0, c0 = i * self.dh, j * self.dw
        return (
            slice(None),
            slice(r0, r0 + (self.oh - 1) * self.sh + 1, self.sh),
            slice(c0, c0 + (self.ow - 1) * self.sw + 1, self.sw),
            slice(None),
        )

    def windows(self, xp: np.ndarray) -> np.ndarray:
        """A read-only (n, oh, ow, kh, kw, c) view of the padded input's windows."""
        n, _, _, c = xp.shape
        s0, s1, s2, s3 = xp.strides
        return _strided(
            xp, (n, self.oh, self.ow, self.kh, self.kw, c), (s0, s1 * self.sh, s2 * self.sw, s1 * self.dh, s2 * self.dw, s3)
        )


def _strided(a: np.ndarray, shape: tuple[int, ...], strides: tuple[int, ...]) -> np.ndarray:
    """A read-only view of ``a`` with ``shape`` and ``strides`` (bytes) from its first
    element, as numpy's ``as_strided(..., writeable=False)``; for a C-contiguous numpy
    array through the ndarray constructor, a quarter of as_strided's cost (2 against
    10 us; a convolution step takes several)."""
    if type(a) is np.ndarray and a.flags.c_contiguous:
        view = np.ndarray(shape, a.dtype, a, 0, strides)
        view.flags.writeable = False
        return view
    return as_strided(a, shape, strides, writeable=False)


def _window(
    op: str, hw: tuple[int, int], khw: tuple[int, int], strides: Any, dilations: Any, padding: str,
    explicit_paddings: Any, data_format: str,
) -> _Window:
    return _window_cached(
        op, hw, khw, tuple(strides), None if dilations is None else tuple(dilations), padding,
        tuple(explicit_paddings), data_format,
    )


@functools.lru_cache(maxsize=256)  # a model's few layer geometries, asked for on every step
def _window_cached(
    op: str, hw: tuple[int, int], khw: tuple[int, int], strides: tuple[int, ...], dilations: tuple[int, ...] | None,
    padding: str, explicit_paddings: tuple[int, ...], data_format: str,
) -> _Window:
    try:
        sh, sw = spatial_attr(strides, data_format, "strides")
        dh, dw = spatial_attr(dilations, data_format, "dilations") if dilations is not None else (1, 1)
        ph, pw = explicit_padding(padding, explicit_paddings, data_format, khw if dilations is None else None)
        oh, pt, pb = window_output_size(hw[0], khw[0], dh, sh, padding, ph)
        ow, pl, pr = window_output_size(hw[1], khw[1], dw, sw, padding, pw)
    except ValueError as e:
        raise _error(op, str(e)) from None
    return _Window(khw[0], khw[1], sh, sw, dh, dw, oh, ow, ((pt, pb), (pl, pr)))


def _check_format(op: str, data_format: str) -> None:
    if data_format not in ("NHWC", "NCHW"):
        raise _error(op, f"data_format {data_format!r} is not supported on this backend; use 'NHWC' or 'NCHW'")


_check_rank4, _sizes, _check_out = check_rank4, check_sizes, check_out_shape


# ------------------------------------------------------------ convolution


def _by_channel(a: np.ndarray) -> np.ndarray:
    """``a`` as (rows, last dimension); ``reshape(-1, 0)`` is ambiguous when the last
    dimension (no output channels) is empty."""
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


class _Conv(NamedTuple):
    x_shape: tuple[int, int, int, int]  # NHWC
    win: _Window
    out_channels: int


def _conv_geometry(
    op: str, x_shape: tuple[int, int, int, int], f_shape: tuple[int, ...], attrs: dict[str, Any]
) -> _Conv:
    data_format = attrs["data_format"]
    _check_format(op, data_format)
    _, h, w, c = x_shape
    kh, kw, fc, oc = f_shape
    if fc != c:
        raise _error(
            op,
            f"input depth {c} must equal the filter's in_channels {fc} "
            f"(input shape {list(x_shape)} in NHWC order, filter shape {list(f_shape)})",
        )
    win = _window(
        op, (h, w), (kh, kw), attrs["strides"], attrs["dilations"], attrs["padding"], attrs["explicit_paddings"], data_format
    )
    return _Conv(x_shape, win, oc)


def _native_im2col(x: np.ndarray, window: tuple[int, ...], oh: int, ow: int) -> np.ndarray | None:
    """opkernel_cpu._native's im2col of NHWC ``x`` (``window``: kh, kw, sh, sw, dh, dw,
    pad_top, pad_left), or None without the native module or for another array type."""
    native = sharding.native_module()
    if native is None or type(x) is not np.ndarray or x.dtype.hasobject or not _in_range((*window, oh, ow)):
        return None
    n, _, _, c = x.shape
    cols = np.empty((n * oh * ow, window[0] * window[1] * c), x.dtype)
    native.im2col(_aligned(x), cols, (*window, oh, ow))
    return cols


def _im2col(x: np.ndarray, win: _Window) -> np.ndarray:
    """(n * oh * ow, kh * kw * c): each row one window of the padded input."""
    window = _native_window(win)
    cols = _native_im2col(x, window, win.oh, win.ow) if window is not None else None  # a copy per window row
    if cols is not None:
        return cols
    n, _, _, c = x.shape
    xp = win.padded(x)
    if c == 1 and type(xp) is np.ndarray:
        # One channel: copying the strided window view moves one element per inner
        # loop; a copy per kernel position moves whole rows (2-3x faster).
        cols = np.empty((n, win.oh, win.ow, win.kh, win.kw, 1), xp.dtype)
        for i in range(win.kh):
            for j in range(win.kw):
                cols[:, :, :, i, j, :] = xp[win.tap(i, j)]
        return cols.reshape(n * win.oh * win.ow, win.kh * win.kw)
    return win.windows(xp).reshape(n * win.oh * win.ow, win.kh * win.kw * c)


def conv2d(input: np.ndarray, filter: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    _check_rank4("Conv2D", input=input, filter=filter)
    return conv2d_by_groups(lambda x, f: _conv2d("Conv2D", x, f, T, attrs), input, filter, attrs["data_format"])  # type: ignore[no-any-return]


def conv2d_by_groups(conv: Callable[[Any, Any], Any], input: Any, filter: Any, data_format: str) -> Any:
    """``conv(input, filter)``; for a grouped convolution (opkernel.ops.nn_ops.conv_groups),
    ``conv`` of each group's channel slices, concatenated along the channel axis.  numpy or cupy."""
    try:
        groups = conv_groups(_nhwc_dims(input.shape, data_format), filter.shape)
    except ValueError as e:
        raise _error("Conv2D", str(e)) from None
    if groups == 1:
        return conv(input, filter)
    axis = 3 if data_format == "NHWC" else 1
    fc, ocg = filter.shape[2], filter.shape[3] // groups
    lead = (slice(None),) * axis
    parts = [conv(input[(*lead, slice(i * fc, (i + 1) * fc))], filter[..., i * ocg:(i + 1) * ocg]) for i in range(groups)]
    return xp_of(input).concatenate(parts, axis=axis)


def _conv2d(op: str, input: np.ndarray, filter: np.ndarray, T: ok.DType, attrs: dict[str, Any]) -> np.ndarray:
    """The convolution of Conv2D and FusedConv2D; ``op`` names the op in errors."""
    _check_rank4(op, input=input, filter=filter)
    x = _to_nhwc(input, attrs["data_format"])
    g = _conv_geometry(op, x.shape, filter.shape, attrs)
    wt = _work_type(T)
    n, win = x.shape[0], g.win
    out = _im2col(x.astype(wt, copy=False), win) @ _by_channel(filter.astype(wt, copy=False))
    return _from_nhwc(out.reshape(n, win.oh, win.ow, g.out_channels).astype(T.np, copy=False), attrs["data_format"])


def _backprop_input_stride1(dy: np.ndarray, filter: np.ndarray, win: _Window, h: int, w: int) -> np.ndarray | None:
    """The input gradient of a stride-1 convolution as a convolution itself: dy, padded
    by the kernel's extent less the forward padding, correlated with the filter turned
    180 degrees and its channels swapped (one im2col and one GEMM instead of a
    scatter-add per kernel position: 3x faster with 2 to 16 input channels).  None
    when the strides are not 1, the forward padding exceeds the kernel's extent, or
    there is a single input channel (a one-column GEMM: the scatter-add is faster)."""
    if win.sh != 1 or win.sw != 1 or filter.shape[2] == 1:
        return None
    (t, b), (l, r) = win.pads
    eh, ew = (win.kh - 1) * win.dh, (win.kw - 1) * win.dw
    pt, pb, pl, pr = eh - t, eh - b, ew - l, ew - r
    if min(pt, pb, pl, pr) < 0:
        return None
    n, oh, ow, oc = dy.shape
    c = filter.shape[2]
    turned = filter[::-1, ::-1].transpose(0, 1, 3, 2).reshape(win.kh * win.kw * oc, c)
    cols = _native_im2col(dy, (win.kh, win.kw, 1, 1, win.dh, win.dw, pt, pl), h, w)
    if cols is not None:
        return (cols @ turned).reshape(n, h, w, c)  # type: ignore[no-any-return]
    dyp = np.zeros((n, oh + pt + pb, ow + pl + pr, oc), dy.dtype)
    dyp[:, pt : pt + oh, pl : pl + ow, :] = dy
    s0, s1, s2, s3 = dyp.strides
    cols = _strided(dyp, (n, h, w, win.kh, win.kw, oc), (s0, s1, s2, s1 * win.dh, s2 * win.dw, s3)).reshape(
        n * h * w, win.kh * win.kw * oc
    )
    return (cols @ turned).reshape(n, h, w, c)  # type: ignore[no-any-return]


def conv2d_backprop_input(
    input_sizes: np.ndarray, filter: np.ndarray, out_backprop: np.ndarray, T: ok.DType, **attrs: Any
) -> np.ndarray:
    op, data_format = "Conv2DBackpropInput", attrs["data_format"]
    _check_rank4(op, filter=filter, out_backprop=out_backprop)
    _check_format(op, data_format)
    sizes = _sizes(op, "input_sizes", input_sizes, (4, 2))
    dy = _to_nhwc(out_backprop, data_format)
    if len(sizes) == 2:
        x_shape = (dy.shape[0], sizes[0], sizes[1], filter.shape[2])
    else:
        x_shape = _nhwc_dims(sizes, data_format)
    g = _conv_geometry(op, x_shape, filter.shape, attrs)
    n, h, w, c = x_shape
    win = g.win
    _check_out(op, "out_backprop", dy.shape, (n, win.oh, win.ow, g.out_channels), data_format)
    wt = _work_type(T)
    native, window = sharding.native_module(), _native_window(win)
    if native is not None and window is not None and type(dy) is np.ndarray and type(filter) is np.ndarray \
            and np.dtype(wt) in _NATIVE_FLOATS:  # one GEMM into each window's taps, then one pass adding them into place
        dcols = _by_channel(dy.astype(wt, copy=False)) @ _by_channel(filter.astype(wt, copy=False)).T
        summed = np.zeros((n, h, w, c), wt)
        native.col2im(_aligned(dcols), summed, (*window, win.oh, win.ow))
        return _from_nhwc(summed.astype(T.np, copy=False), data_format)
    if dy.size and n * h * w * c:
        dx = _backprop_input_stride1(dy.astype(wt, copy=False), filter.astype(wt, copy=False), win, h, w)
        if dx is not None:
            return _from_nhwc(dx.astype(T.np, copy=False), data_format)
    dxp = np.zeros(win.padded_shape(n, h, w, c), wt)
    if dy.size and dxp.size:
        dcols = _by_channel(dy.astype(wt, copy=False)) @ _by_channel(filter.astype(wt, copy=False)).T
        dcols = dcols.reshape(n, win.oh, win.ow, win.kh, win.kw, c)
        for i in range(win.kh):
            for j in range(win.kw):
                dxp[win.tap(i, j)] += dcols[:, :, :, i, j, :]
    return _from_nhwc(win.crop(dxp, h, w).astype(T.np), data_format)


def conv2d_backprop_filter(
    input: np.ndarray, filter_sizes: np.ndarray, out_backprop: np.ndarray, T: ok.DType, **attrs: Any
) -> np.ndarray:
    op, data_format = "Conv2DBackpropFilter", attrs["data_format"]
    _check_rank4(op, input=input, out_backprop=out_backprop)
    _check_format(op, data_format)
    f_shape = tuple(_sizes(op, "filter_sizes", filter_sizes))
    x = _to_nhwc(input, data_format)
    dy = _to_nhwc(out_backprop, data_format)
    g = _conv_geometry(op, x.shape, f_shape, attrs)
    win = g.win
    _check_out(op, "out_backprop", dy.shape, (x.shape[0], win.oh, win.ow, g.out_channels), data_format)
    wt = _work_type(T)
    cols = _im2col(x.astype(wt, copy=False), win)
    dw = cols.T @ _by_channel(dy.astype(wt, copy=False))
    return dw.reshape(f_shape).astype(T.np, copy=False)  # type: ignore[no-any-return]


# ------------------------------------------------------------ depthwise convolution
# Written against xp (numpy or cupy): the CUDA backend registers these bodies too.


def _depthwise_window(op: str, x_shape: tuple[int, int, int, int], f_shape: tuple[int, ...], attrs: dict[str, Any]) -> _Window:
    _check_format(op, attrs["data_format"])
    _, h, w, c = x_shape
    kh, kw, fc, _ = f_shape
    if fc != c:
        raise _error(op, f"input depth {c} must equal the filter's in_channels {fc} "
                         f"(input shape {list(x_shape)} in NHWC order, filter shape {list(f_shape)})")
    return _window(op, (h, w), (kh, kw), attrs["strides"], attrs["dilations"], attrs["padding"],
                   attrs["explicit_paddings"], attrs["data_format"])


def depthwise_conv2d_native(input: Any, filter: Any, T: ok.DType, **attrs: Any) -> Any:
    """Each input channel c convolved with its depth_multiplier filters f[:, :, c, q]:
    one multiply-add over the whole output per kernel position, in the work type."""
    op = "DepthwiseConv2dNative"
    _check_rank4(op, input=input, filter=filter)
    x = _to_nhwc(input, attrs["data_format"])
    win = _depthwise_window(op, x.shape, filter.shape, attrs)
    n, c, m = x.shape[0], x.shape[3], filter.shape[3]
    wt = _work_type(T)
    xp = xp_of(input, filter)
    xpad, f = win.padded(x.astype(wt, copy=False)), filter.astype(wt, copy=False)
    out = xp.zeros((n, win.oh, win.ow, c, m), wt)
    if out.size:
        with np.errstate(invalid="ignore", over="ignore"):  # inf and NaN as IEEE arithmetic gives them
            for i in range(win.kh):
                for j in range(win.kw):
                    out += xpad[win.tap(i, j)][..., None] * f[i, j]
    return _from_nhwc(out.reshape(n, win.oh, win.ow, c * m).astype(T.np, copy=False), attrs["data_format"])


def depthwise_conv2d_native_backprop_input(input_sizes: Any, filter: Any, out_backprop: Any, T: ok.DType,
                                           **attrs: Any) -> Any:
    """Each kernel position's products with the output gradient, summed over the
    multiplier, added into the input positions it read."""
    op, data_format = "DepthwiseConv2dNativeBackpropInput", attrs["data_format"]
    _check_rank4(op, filter=filter, out_backprop=out_backprop)
    _check_format(op, data_format)
    x_shape = _nhwc_dims(_sizes(op, "input_sizes", input_sizes), data_format)
    win = _depthwise_window(op, x_shape, filter.shape, attrs)
    n, h, w, c = x_shape
    m = filter.shape[3]
    dy = _to_nhwc(out_backprop, data_format)
    _check_out(op, "out_backprop", dy.shape, (n, win.oh, win.ow, c * m), data_format)
    wt = _work_type(T)
    xp = xp_of(filter, out_backprop)
    dxp = xp.zeros(win.padded_shape(n, h, w, c), wt)
    if dy.size and dxp.size:
        dy5, f = dy.astype(wt, copy=False).reshape(n, win.oh, win.ow, c, m), filter.astype(wt, copy=False)
        holes = None if bool(xp.isfinite(f).all()) else xp.zeros(dxp.shape[1:3], bool)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(win.kh):
                for j in range(win.kw):
                    tap = win.tap(i, j)
                    dxp[tap] += dy5[..., 0] * f[i, j, :, 0] if m == 1 else (dy5 * f[i, j]).sum(axis=-1)
                    if holes is not None:
                        # As TensorFlow's kernel: positions this tap's outputs do not read take
                        # 0 * the tap (NaN for an infinite or NaN filter value), not nothing.
                        holes[...] = True
                        holes[tap[1:3]] = False
                        dxp[:, holes] += (0 * f[i, j]).sum(axis=-1)
    return _from_nhwc(win.crop(dxp, h, w).astype(T.np), data_format)


def depthwise_conv2d_native_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any, T: ok.DType,
                                            **attrs: Any) -> Any:
    """Per kernel position, the input it read times the output gradient, summed over
    the batch and the output positions (one contraction per position)."""
    op, data_format = "DepthwiseConv2dNativeBackpropFilter", attrs["data_format"]
    _check_rank4(op, input=input, out_backprop=out_backprop)
    _check_format(op, data_format)
    kh, kw, c, m = f_shape = tuple(_sizes(op, "filter_sizes", filter_sizes))
    x = _to_nhwc(input, data_format)
    dy = _to_nhwc(out_backprop, data_format)
    win = _depthwise_window(op, x.shape, f_shape, attrs)
    n = x.shape[0]
    _check_out(op, "out_backprop", dy.shape, (n, win.oh, win.ow, c * m), data_format)
    wt = _work_type(T)
    xp = xp_of(input, out_backprop)
    df = xp.zeros(f_shape, wt)
    p = n * win.oh * win.ow
    if p and df.size:
        xpad = win.padded(x.astype(wt, copy=False))
        dy3 = dy.astype(wt, copy=False).reshape(p, c, m)
        with np.errstate(invalid="ignore", over="ignore"):
            for i in range(kh):
                for j in range(kw):
                    df[i, j] = xp.einsum("pc,pcm->cm", xpad[win.tap(i, j)].reshape(p, c), dy3)
    return df.astype(T.np, copy=False)


# ------------------------------------------------------------ layer normalization
# Written against xp (numpy or cupy): the CUDA backend registers these bodies too.


def _row_dot(a: Any, b: Any) -> Any:
    """The dot product of each row (last axis) of a and b, keeping the axis: one pass."""
    return xp_of(a).einsum("...i,...i->...", a, b)[..., None]


def _layer_norm_stats(x: Any, epsilon: float) -> tuple[Any, Any]:
    """(x - mean, rstd) of each row (last axis), in x's type; the variance uncorrected.
    ``x - mean`` is a new array the callers may overwrite."""
    xp = xp_of(x)
    n = x.dtype.type(x.shape[-1])
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered, 1.0 / xp.sqrt(_row_dot(centered, centered) / n + x.dtype.type(epsilon))


def fused_layer_norm(x: Any, scale: Any, offset: Any, epsilon: float, T: ok.DType, **attrs: Any) -> Any:
    """The native row kernel (three passes over each row, rows shared on the pool) for
    numpy float32/float64; otherwise (cupy, float16 in float32 without it) four passes:
    the mean, the centering, the variance (a row dot product), and the normalization
    written in place into the centered array."""
    check_layer_norm("FusedLayerNorm", tuple(x.shape), tuple(scale.shape), tuple(offset.shape), epsilon)
    wt = _work_type(T)
    if x.size == 0:
        return xp_of(x).zeros(x.shape, T.np)
    xw, sw, ow = x.astype(wt, copy=False), scale.astype(wt, copy=False), offset.astype(wt, copy=False)
    native = sharding.layer_norm(xw, sw, ow, epsilon)  # the native row kernel: three passes, threaded
    if native is not None:
        return native.astype(T.np, copy=False)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        y, rstd = _layer_norm_stats(xw, epsilon)
        y *= rstd
        y *= scale.astype(wt, copy=False)
        y += offset.astype(wt, copy=False)
    return y.astype(T.np, copy=False)


def fused_layer_norm_grad(y_backprop: Any, x: Any, scale: Any, epsilon: float, T: ok.DType, **attrs: Any) -> Any:
    """dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * scale, and the
    parameters' gradients summed over the rows: by the native row kernel where it applies
    (dx and per-block column sums in its last pass over a row), else the row means and
    dot products one pass each, the rest in place."""
    op = "FusedLayerNormGrad"
    c = check_layer_norm(op, tuple(x.shape), tuple(scale.shape), None, epsilon)
    if tuple(y_backprop.shape) != tuple(x.shape):
        raise _error(op, f"y_backprop must have x's shape {list(x.shape)}, got {list(y_backprop.shape)}")
    wt = _work_type(T)
    xp = xp_of(x, y_backprop)
    if x.size == 0:
        return xp.zeros(x.shape, T.np), xp.zeros((c,), T.np), xp.zeros((c,), T.np)
    xw, dy = x.astype(wt, copy=False), y_backprop.astype(wt, copy=False)
    native = sharding.layer_norm_grad(dy, xw, scale.astype(wt, copy=False), epsilon)
    if native is not None:  # the native row kernel: dx and the parameters' column sums
        dx, dscale, doffset = native
        return dx.astype(T.np, copy=False), dscale.astype(T.np, copy=False), doffset.astype(T.np, copy=False)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        xhat, rstd = _layer_norm_stats(xw, epsilon)
        xhat *= rstd
        n = xhat.dtype.type(c)
        dx = dy * scale.astype(wt, copy=False)
        mean_gx = _row_dot(dx, xhat) / n
        dx -= dx.mean(axis=-1, keepdims=True)
        dx -= xhat * mean_gx
        dx *= rstd
        rows_dy, rows_xhat = dy.reshape(-1, c), xhat.reshape(-1, c)
        dscale = xp.einsum("ri,ri->i", rows_dy, rows_xhat)
        doffset = rows_dy.sum(axis=0)
    return dx.astype(T.np, copy=False), dscale.astype(T.np, copy=False), doffset.astype(T.np, copy=False)


# ------------------------------------------------------------ image resizes
# Written against xp (numpy or cupy): the CUDA backend registers these bodies too.  The
# sample positions and weights come from opkernel.ops.image_ops (TensorFlow's float32
# arithmetic); the gradients add in TensorFlow's order (row-major over the gradient, the
# four corners in order), so the sums are its sums.


def resize_bilinear(images: Any, size: Any, align_corners: bool, half_pixel_centers: bool, T: ok.DType,
                    **attrs: Any) -> Any:
    """Each output the lerp of its four input neighbors in float32, along x then y, as
    TensorFlow's compute_lerp; a resize to the same size is the image in float32, as
    TensorFlow's (so an infinity stays one, where its lerp would make NaN)."""
    oh, ow = resize_size("ResizeBilinear", tuple(images.shape), size, align_corners, half_pixel_centers)
    n, h, w, c = images.shape
    if (oh, ow) == (h, w):
        return images.astype(np.float32)
    ys, xs = bilinear_table(h, oh, align_corners, half_pixel_centers), bilinear_table(w, ow, align_corners, half_pixel_centers)
    xp = xp_of(images)
    x = images.astype(np.float32, copy=False)
    xl, yl = xp.asarray(xs.lerp)[:, None], xp.asarray(ys.lerp)[:, None, None]
    xlo, xhi = xp.asarray(xs.lower), xp.asarray(xs.upper)
    with np.errstate(invalid="ignore", over="ignore"):
        top, bottom = x[:, xp.asarray(ys.lower)], x[:, xp.asarray(ys.upper)]
        top = top[:, :, xlo] + (top[:, :, xhi] - top[:, :, xlo]) * xl
        bottom = bottom[:, :, xlo] + (bottom[:, :, xhi] - bottom[:, :, xlo]) * xl
        return top + (bottom - top) * yl


def _add_in_order(xp: Any, shape: tuple[int, int, int, int], dtype: Any, targets: np.ndarray, values: Any) -> Any:
    """An NHWC array of ``shape``: each of ``values`` ([k, batch, channels]) added into
    spatial position ``targets[k]`` (flat h * W + w), one after another in k's order."""
    n, h, w, c = shape
    out = xp.zeros((h * w, n * c), dtype)
    if values.size:
        with np.errstate(invalid="ignore", over="ignore"):
            xp.add.at(out, xp.asarray(targets), values.reshape(len(targets), n * c))
    return xp.ascontiguousarray(out.reshape(h, w, n, c).transpose(2, 0, 1, 3))


def resize_bilinear_grad(grads: Any, original_image: Any, align_corners: bool, half_pixel_centers: bool,
                         T: ok.DType, **attrs: Any) -> Any:
    """Each gradient element's four parts, ``grad * (1 - y_lerp) * (1 - x_lerp)`` and so on
    in float32, rounded to T and added into the output in TensorFlow's order (float16 and
    bfloat16 add in float32, rounded once at the end, as TensorFlow's)."""
    op = "ResizeBilinearGrad"
    oh, ow = resize_grad_sizes(op, tuple(grads.shape), tuple(original_image.shape), align_corners, half_pixel_centers)
    n, rh, rw, c = grads.shape
    ys, xs = bilinear_table(oh, rh, align_corners, half_pixel_centers), bilinear_table(ow, rw, align_corners, half_pixel_centers)
    xp = xp_of(grads)
    one = np.float32(1)
    yw = np.stack([one - ys.lerp, one - ys.lerp, ys.lerp, ys.lerp], axis=1)  # [rh, 4]: TL, TR, BL, BR
    xw = np.stack([one - xs.lerp, xs.lerp, one - xs.lerp, xs.lerp], axis=1)  # [rw, 4]
    rows = np.stack([ys.lower, ys.lower, ys.upper, ys.upper], axis=1)
    cols = np.stack([xs.lower, xs.upper, xs.lower, xs.upper], axis=1)
    targets = (rows[:, None, :] * ow + cols[None, :, :]).reshape(-1)  # [rh * rw * 4], y, x, corner
    g = xp.moveaxis(grads.astype(np.float32, copy=False), 0, 2)  # [rh, rw, n, c]
    with np.errstate(invalid="ignore", over="ignore"):
        parts = (g[:, :, None] * xp.asarray(yw)[:, None, :, None, None]) * xp.asarray(xw)[None, :, :, None, None]
        wt = _work_type(T)
        out = _add_in_order(xp, (n, oh, ow, c), wt, targets, parts.astype(wt, copy=False))
    return out if wt is T.np else out.astype(T.np)


def resize_nearest_neighbor(images: Any, size: Any, align_corners: bool, half_pixel_centers: bool, **attrs: Any) -> Any:
    oh, ow = resize_size("ResizeNearestNeighbor", tuple(images.shape), size, align_corners, half_pixel_centers)
    n, h, w, c = images.shape
    xp = xp_of(images)
    rows = xp.asarray(nearest_index(h, oh, align_corners, half_pixel_centers))
    cols = xp.asarray(nearest_index(w, ow, align_corners, half_pixel_centers))
    return images[:, rows][:, :, cols]


def resize_nearest_neighbor_grad(grads: Any, size: Any, align_corners: bool, half_pixel_centers: bool, T: ok.DType,
                                 **attrs: Any) -> Any:
    """Each gradient element added into the position its output copied, in row-major order."""
    n, rh, rw, c = grads.shape if grads.ndim == 4 else (0, 0, 0, 0)
    oh, ow = resize_grad_sizes("ResizeNearestNeighborGrad", tuple(grads.shape), size, align_corners, half_pixel_centers)
    rows, cols = nearest_index(oh, rh, align_corners, half_pixel_centers), nearest_index(ow, rw, align_corners, half_pixel_centers)
    targets = (rows[:, None] * ow + cols[None, :]).reshape(-1)
    xp = xp_of(grads)
    return _add_in_order(xp, (n, oh, ow, c), T.np, targets, xp.moveaxis(grads, 0, 2))


# ------------------------------------------------------------ pooling


def _pool_geometry(op: str, x_shape: tuple[int, int, int, int], attrs: dict[str, Any]) -> _Window:
    data_format = attrs["data_format"]
    _check_format(op, data_format)
    try:
        kh, kw = spatial_attr(attrs["ksize"], data_format, "ksize")
    except ValueError as e:
        raise _error(op, f"{e}; pooling over the batch or depth dimension is not supported") from None
    win = _window(
        op, x_shape[1:3], (kh, kw), attrs["strides"], None, attrs["padding"], attrs.get("explicit_paddings", ()), data_format
    )
    return _clamped(win, x_shape[1], x_shape[2])


def _clamp(size: int, k: int, s: int, out: int, before: int) -> tuple[int, int, int]:
    """(taps, padding before, padding after) of one dimension of a pooling window (no
    dilation) without the taps that lie in the padding for every window."""
    if out == 0:
        return k, before, max(0, k - size - before)
    # tap i is real for some window only if the last window's row i is past the top
    # padding and the first window's is before the input's end
    lo, hi = max(0, before - (out - 1) * s), min(k, before + size)
    if hi <= lo:  # no tap is real for any window: keep one, padding in each
        lo = min(lo, k - 1)
        hi = lo + 1
    before -= lo
    return hi - lo, before, max(0, (out - 1) * s + hi - lo - before - size)


@functools.lru_cache(maxsize=256)
def _clamped(win: _Window, h: int, w: int) -> _Window:
    """``win`` clamped to the input: the taps that are padding in every window dropped,
    so a pool's work and its padded copy are bounded by the input's extent, whatever
    ``ksize`` (a SAME window of 46341 x 46341 around a 1 x 1 input has one real tap).
    Pooling ignores padding taps (MaxPool never picks one, AvgPool counts only real
    taps), so the result is the same; for VALID padding nothing changes."""
    (pt, _), (pl, _) = win.pads
    kh, pt, pb = _clamp(h, win.kh, win.sh, win.oh, pt)
    kw, pl, pr = _clamp(w, win.kw, win.sw, win.ow, pl)
    if (kh, kw) == (win.kh, win.kw):
        return win
    return win._replace(kh=kh, kw=kw, pads=((pt, pb), (pl, pr)))


def _lowest(dtype: np.dtype[Any]) -> Any:
    return -np.inf if dtype.kind in "fV" else np.iinfo(dtype).min


def _argmax_tap(x: np.ndarray, win: _Window) -> np.ndarray:
    """(n, oh, ow, c): which window position (row-major tap index) holds each window's
    maximum: the first on ties, never a padding position (TensorFlow's CPU rule)."""
    with np.errstate(invalid="ignore"):  # bfloat16 comparisons with nan warn; the rule is the same
        return _argmax_tap_impl(x, win)


def _argmax_tap_impl(x: np.ndarray, win: _Window) -> np.ndarray:
    _, h, w, _ = x.shape
    xp = win.padded(x, _lowest(x.dtype))
    _, hp, wp, _ = xp.shape
    if hp == h and wp == w:
        return _argmax_of([xp[win.tap(*divmod(k, win.kw))] for k in range(win.kh * win.kw)])
    (t, _), (l, _) = win.pads
    # which window positions are real input, so that padding never wins
    inside = (((np.arange(hp) >= t) & (np.arange(hp) < t + h))[:, None]
              & ((np.arange(wp) >= l) & (np.arange(wp) < l + w))[None, :])
    tap = win.tap(0, 0)
    best = xp[tap].copy()
    best_k = np.zeros(best.shape, np.intp)
    best_ok = np.broadcast_to(inside[tap[1], tap[2]][None, :, :, None], best.shape).copy()
    for k in range(1, win.kh * win.kw):
        tap = win.tap(*divmod(k, win.kw))
        v = xp[tap]
        ok_ = inside[tap[1], tap[2]][None, :, :, None]
        take = ok_ & ((v > best) | ~best_ok)
        best_ok |= take
        np.copyto(best, v, where=take)
        np.copyto(best_k, k, where=take)
    return best_k


def _argmax_of(taps: list[np.ndarray]) -> np.ndarray:
    """Elementwise, the index of the first largest of ``taps`` (same-shaped arrays, no padding)."""
    best = taps[0].copy()
    floating = best.dtype.kind in "fV"  # V: ml_dtypes' bfloat16
    if len(taps) < 256 and not (floating and np.isnan(best).any()):
        # Branch-free: with no nan in the first tap, fmax keeps the first maximum (nan
        # never wins), and each later winner's index k exceeds every earlier one.
        best_k8 = np.zeros(best.shape, np.uint8)
        for k in range(1, len(taps)):
            v = taps[k]
            take = v > best
            np.fmax(best, v, out=best) if floating else np.maximum(best, v, out=best)
            np.maximum(best_k8, take.view(np.uint8) * np.uint8(k), out=best_k8)
        return best_k8
    best_k = np.zeros(best.shape, np.intp)
    for k in range(1, len(taps)):
        v = taps[k]
        take = v > best
        np.copyto(best, v, where=take)
        np.copyto(best_k, k, where=take)
    return best_k


def _tiling(x_shape: tuple[int, ...], win: _Window) -> tuple[int, int] | None:
    """(rows, cols) of input the windows cover when they tile it exactly (stride ==
    size, no padding, no dilation; a VALID remainder is left out), else None."""
    if win.pads != ((0, 0), (0, 0)) or (win.sh, win.sw) != (win.kh, win.kw) or (win.dh, win.dw) != (1, 1):
        return None
    rows, cols = win.oh * win.kh, win.ow * win.kw
    return (rows, cols) if rows <= x_shape[1] and cols <= x_shape[2] else None


def _blocks(x: np.ndarray, win: _Window, rows: int, cols: int) -> np.ndarray:
    """(n * oh, kh, ow, kw, c): the tiling windows of NHWC ``x`` (``_tiling``), a view
    when they cover all of ``x``. Window (a, b)'s tap (i, j) is ``[a, i, b, j]``; a
    slice ``[:, i]`` is a run of whole rows, so loops over it stay contiguous."""
    n, c = x.shape[0], x.shape[3]
    return x[:, :rows, :cols].reshape(n * win.oh, win.kh, win.ow, win.kw, c)


def _argmax(x: np.ndarray, win: _Window) -> np.ndarray:
    """Flat indices into the padded NHWC input of each window's maximum (``_argmax_tap``)."""
    n, _, _, c = x.shape
    hp, wp = win.padded_shape(*x.shape)[1:3]
    di, dj = np.divmod(_argmax_tap(x, win), win.kw)
    r = np.arange(win.oh)[None, :, None, None] * win.sh + di
    q = np.arange(win.ow)[None, None, :, None] * win.sw + dj
    return ((np.arange(n)[:, None, None, None] * hp + r) * wp + q) * c + np.arange(c)  # type: ignore[no-any-return]


#: The dtypes opkernel_cpu._native's kernels compute in (others, and other array types, take the numpy paths).
_NATIVE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _in_range(values: tuple[int, ...]) -> bool:
    """Whether geometry ``values`` suit opkernel_cpu._native: each in [0, 2**31)."""
    return all(0 <= v < 1 << 31 for v in values)


def _native_window(win: _Window) -> tuple[int, ...] | None:
    """``win`` as opkernel_cpu._native's kernels take it (kh, kw, sh, sw, dh, dw, pad_top,
    pad_left), or None when a size is out of their range (the numpy path takes it)."""
    (t, _), (l, _) = win.pads
    window = (win.kh, win.kw, win.sh, win.sw, win.dh, win.dw, t, l)
    return window if _in_range((*window, win.oh, win.ow)) and win.kh * win.kw < 1 << 31 else None


def _aligned(a: np.ndarray) -> np.ndarray:
    """``a`` C-contiguous and aligned, as opkernel_cpu._native reads arrays (a copy if not)."""
    a = np.ascontiguousarray(a)
    return a if a.flags.aligned else a.copy()


def _without_nan(x: np.ndarray) -> np.ndarray:
    """``x`` with NaN and -inf raised to the lowest finite value, where it has any.
    TensorFlow's CPU MaxPool (pooling_ops_common.h) is a cwiseMax from that value, so
    neither ever wins: a window of NaN pools to it (numpy's maximum propagates NaN)."""
    if x.dtype.kind not in "fV" or not x.size:
        return x
    lowest = ok.as_dtype(x.dtype).min
    with np.errstate(invalid="ignore"):
        m = xp_of(x).min(x)
        if m == m and m >= lowest:  # no NaN (the minimum would be NaN) and no -inf
            return x
        return xp_of(x).fmax(x, x.dtype.type(lowest))  # type: ignore[no-any-return]


def max_pool(input: np.ndarray, **attrs: Any) -> np.ndarray:
    out, native = _max_pool(input, **attrs)
    if not native and out.dtype.kind in "fV" and out.size:
        # A window of nan and -inf only pools to lowest(), as TensorFlow's does, not to the
        # -inf the padding holds here.
        xp = xp_of(out)
        lowest = out.dtype.type(ok.as_dtype(out.dtype).min)
        if xp.min(out) < lowest:
            out = xp.maximum(out, lowest)
    return out


def _max_pool(input: np.ndarray, **attrs: Any) -> tuple[np.ndarray, bool]:
    """MaxPool, and whether the native kernel computed it (it follows TensorFlow's rule
    for NaN, -inf and windows of padding only by itself)."""
    data_format = attrs["data_format"]
    _check_rank4("MaxPool", input=input)
    x = _to_nhwc(input, data_format)
    win = _pool_geometry("MaxPool", x.shape, attrs)
    native, window = sharding.native_module(), _native_window(win)
    if native is not None and window is not None and type(x) is np.ndarray and x.dtype in _NATIVE_FLOATS:
        y = np.empty((x.shape[0], win.oh, win.ow, x.shape[3]), x.dtype)  # one pass over the windows
        native.max_pool(_aligned(x), y, window)
        return _from_nhwc(y, data_format), True
    x = _without_nan(x)
    tiled = _tiling(x.shape, win) if type(x) is np.ndarray and win.kh * win.kw > 1 else None
    if tiled is not None:  # windows tile the input: reduce whole rows, then the taps of a row
        x5 = _blocks(x, win, *tiled)
        with np.errstate(invalid="ignore"):
            rows = x5[:, 0] if win.kh == 1 else np.maximum(x5[:, 0], x5[:, 1])
            for i in range(2, win.kh):
                np.maximum(rows, x5[:, i], out=rows)
            out = rows[:, :, 0] if win.kw == 1 else np.maximum(rows[:, :, 0], rows[:, :, 1])
            for j in range(2, win.kw):
                np.maximum(out, rows[:, :, j], out=out)
        return _from_nhwc(out.reshape(x.shape[0], win.oh, win.ow, x.shape[3]), data_format), False
    xp = win.padded(x, _lowest(x.dtype))
    out = np.empty((x.shape[0], win.oh, win.ow, x.shape[3]), x.dtype)
    with np.errstate(invalid="ignore"):  # bfloat16's maximum warns on nan; the result is nan, as in TensorFlow
        for i in range(win.kh):
            for j in range(win.kw):
                if i == j == 0:
                    out[...] = xp[win.tap(0, 0)]
                else:
                    np.maximum(out, xp[win.tap(i, j)], out=out)
    return _from_nhwc(out, data_format), False


def max_pool_grad(orig_input: np.ndarray, orig_output: np.ndarray, grad: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    op, data_format = "MaxPoolGrad", attrs["data_format"]
    _check_rank4(op, orig_input=orig_input, orig_output=orig_output, grad=grad)
    x = _to_nhwc(orig_input, data_format)
    win = _pool_geometry(op, x.shape, attrs)
    n, h, w, c = x.shape
    for name, a in (("orig_output", orig_output), ("grad", grad)):
        _check_out(op, name, _to_nhwc(a, data_format).shape, (n, win.oh, win.ow, c), data_format)
    if n * win.oh * win.ow * c == 0:  # nothing pooled (a VALID window larger than the input, or an empty dim)
        return _from_nhwc(np.zeros((n, h, w, c), T.np), data_format)
    wt = _work_type(T)
    dy = _to_nhwc(grad, data_format).astype(wt, copy=False)
    native, window = sharding.native_module(), _native_window(win)
    if native is not None and window is not None and type(x) is np.ndarray and type(dy) is np.ndarray \
            and x.dtype == dy.dtype and x.dtype in _NATIVE_FLOATS:  # one pass over the windows, not one per tap
        exact = _tiling(x.shape, win) == (h, w)  # every element of dx is some window's tap: written once
        routed = np.empty(x.shape, x.dtype) if exact else np.zeros(x.shape, x.dtype)
        native.max_pool_grad(_aligned(x), _aligned(dy), routed, window, exact)
        return _from_nhwc(routed, data_format)
    zero = np.zeros((), wt)
    branch_free = bool(np.isfinite(dy).all())  # nan * 0 and inf * 0 would put nan at the other taps
    tiled = _tiling(x.shape, win) if type(x) is np.ndarray and win.kh * win.kw > 1 else None
    if tiled is not None:
        dx = _max_pool_grad_tiled(x, _to_nhwc(orig_output, data_format), dy, win, tiled, branch_free)
        if dx is not None:
            return _from_nhwc(dx.astype(T.np, copy=False), data_format)
    dxp = np.zeros(win.padded_shape(n, h, w, c), wt)
    best_k = _argmax_tap(x, win)
    for k in range(win.kh * win.kw):  # one tap at a time: a tap's positions never collide
        dst = dxp[win.tap(*divmod(k, win.kw))]
        dst += dy * (best_k == k) if branch_free else np.where(best_k == k, dy, zero)
    return _from_nhwc(win.crop(dxp, h, w).astype(T.np, copy=False), data_format)


def _max_pool_grad_tiled(
    x: np.ndarray, y: np.ndarray, dy: np.ndarray, win: _Window, tiled: tuple[int, int], branch_free: bool
) -> np.ndarray | None:
    """MaxPoolGrad when the windows tile ``x``: each window's gradient goes to its first
    tap, in row-major order, equal to ``y``, the forward's output, so to its first
    maximum (the tap TensorFlow's CPU kernel picks; its GPU kernel also finds it by
    comparing with the output). None, for the general path to recompute the argmax
    from ``x`` alone, when some window holds no value equal to its ``y`` (a nan, or an
    ``orig_output`` that is not this input's MaxPool), or when ``x`` holds a nan: MaxPool
    never picks one, but the gradient's rule does when it is its window's first tap."""
    if _without_nan(x) is not x:
        return None
    n, h, w, c = x.shape
    rows, cols = tiled
    x5 = _blocks(x, win, rows, cols)
    y3, dy3 = y.reshape(n * win.oh, win.ow, c), dy.reshape(n * win.oh, win.ow, c)
    dx5 = np.empty(x5.shape, dy.dtype)
    free = np.ones(y3.shape, bool)  # windows whose maximum is still to be found
    hit = np.empty(y3.shape, bool)
    zero = np.zeros((), dy.dtype)
    with np.errstate(invalid="ignore"):  # bfloat16 comparisons with nan warn
        for i in range(win.kh):
            for j in range(win.kw):
                np.equal(x5[:, i, :, j], y3, out=hit)
                hit &= free
                free ^= hit
                dst = dx5[:, i, :, j]
                np.multiply(dy3, hit, out=dst) if branch_free else np.copyto(dst, np.where(hit, dy3, zero))
    if free.any():
        return None
    if dx5.dtype.kind in "fV":
        dx5 += zero  # -1.0 * False is -0.0: TensorFlow's sum into zeros gives +0.0 (and +0.0 for a -0.0 gradient)
    if (rows, cols) == (h, w):
        return dx5.reshape(n, h, w, c)
    dx = np.zeros((n, h, w, c), dy.dtype)
    dx[:, :rows, :cols] = dx5.reshape(n, rows, cols, c)
    return dx


def max_pool_grad_grad(orig_input: np.ndarray, orig_output: np.ndarray, grad: np.ndarray, **attrs: Any) -> np.ndarray:
    op, data_format = "MaxPoolGradGrad", attrs["data_format"]
    _check_rank4(op, orig_input=orig_input, orig_output=orig_output, grad=grad)
    x = _to_nhwc(orig_input, data_format)
    win = _pool_geometry(op, x.shape, attrs)
    n, _, _, c = x.shape
    _check_out(op, "orig_output", _to_nhwc(orig_output, data_format).shape, (n, win.oh, win.ow, c), data_format)
    _check_out(op, "grad", _to_nhwc(grad, data_format).shape, x.shape, data_format)
    if n * win.oh * win.ow * c == 0:  # nothing pooled (a VALID window larger than the input, or an empty dim)
        return _from_nhwc(np.zeros((n, win.oh, win.ow, c), grad.dtype), data_format)
    ggp = win.padded(_to_nhwc(grad, data_format))
    return _from_nhwc(ggp.reshape(-1)[_argmax(x, win)], data_format)


# ------------------------------------------------------------ max pooling with argmax (NHWC)


def _argmax_pool_window(op: str, x_shape: tuple[int, int, int, int], attrs: dict[str, Any]) -> _Window:
    return _pool_geometry(op, x_shape, {"ksize": attrs["ksize"], "strides": attrs["strides"],
                                         "padding": attrs["padding"], "data_format": "NHWC"})


@functools.lru_cache(maxsize=32)  # a model's few pooling layers, asked for on every step
def _argmax_layout(shape: tuple[int, int, int, int], win: _Window) -> tuple[np.ndarray, np.ndarray]:
    """(base, offsets), both int64 and read-only: tap k of output (oy, ox, ch)'s window
    lies at flat index ``base[oy, ox, ch] + offsets[k]`` of one (h, w, c) image."""
    _, h, w, c = shape
    (t, _), (l, _) = win.pads
    rows = np.arange(win.oh, dtype=np.int64) * win.sh - t
    cols = np.arange(win.ow, dtype=np.int64) * win.sw - l
    base = (rows[:, None, None] * w + cols[None, :, None]) * c + np.arange(c, dtype=np.int64)
    di, dj = np.divmod(np.arange(win.kh * win.kw, dtype=np.int64), win.kw)
    offsets = (di * w + dj) * c
    base.flags.writeable = offsets.flags.writeable = False
    return base, offsets


def _max_and_tap_tiled(x: np.ndarray, win: _Window) -> tuple[np.ndarray, np.ndarray]:
    """(maximum, first tap holding it) of windows that tile contiguous ``x``, exact when
    no window holds a nan (the caller checks).  In NHWC a window's taps lie ``c``
    elements apart, and numpy's loops over strided views of them run several times
    slower than contiguous ones.  So the ``kw`` columns of each window row are compared
    first on the whole flattened input against itself shifted by ``j * c`` (a result at
    every position: the input's size in work, in one long loop), then the ``kh`` rows of
    each window at the window starts only.  Ties keep the earlier column, then the
    earlier row: the first maximum in row-major order."""
    n, h, w, c = x.shape
    kh, kw = win.kh, win.kw
    flat = x.reshape(-1)
    span = flat.size - (kw - 1) * c
    m1 = np.empty(flat.size, x.dtype)  # at each position: the max of the kw elements from it along the row
    t1 = np.zeros(flat.size, np.uint8)  # ... and which of them held it first
    m, t = m1[:span], t1[:span]
    take = np.empty(span, bool)

    def starts(a: np.ndarray, i: int) -> np.ndarray:
        """Row i of every window, at its first column: an (n, oh, ow, c) view."""
        e = a.itemsize
        return _strided(a[i * w * c :], (n, win.oh, win.ow, c), (h * w * c * e, kh * w * c * e, kw * c * e, e))

    with np.errstate(invalid="ignore"):  # bfloat16 comparisons warn on nan
        if kw == 1:
            m1 = flat
        else:
            np.greater(flat[c : c + span], flat[:span], out=take)
            np.maximum(flat[:span], flat[c : c + span], out=m)
            t[...] = take.view(np.uint8)
            for j in range(2, kw):
                shifted = flat[j * c : j * c + span]
                np.greater(shifted, m, out=take)
                np.maximum(m, shifted, out=m)
                np.maximum(t, take.view(np.uint8) * np.uint8(j), out=t)  # j grows: the latest winner is the largest
        best, tap = np.array(starts(m1, 0)), np.array(starts(t1, 0))
        take = np.empty(best.shape, bool)
        for i in range(1, kh):
            row = starts(m1, i)
            np.greater(row, best, out=take)
            np.maximum(best, row, out=best)
            # tap = take ? t1 + i * kw : tap, in uint8 arithmetic (np.where is 10x slower here)
            tap += take.view(np.uint8) * (starts(t1, i) + np.uint8(i * kw) - tap)
    return best, tap


def max_pool_with_argmax(
    input: np.ndarray, T: ok.DType, Targmax: ok.DType, include_batch_in_index: bool, **attrs: Any
) -> tuple[np.ndarray, np.ndarray]:
    op = "MaxPoolWithArgmax"
    _check_rank4(op, input=input)
    x = input
    win = _argmax_pool_window(op, x.shape, attrs)
    n, h, w, c = x.shape
    check_argmax_type(op, Targmax, x.shape, include_batch_in_index)
    if n * win.oh * win.ow * c == 0:  # nothing pooled (an empty dim, or a VALID window larger than the input)
        xp = xp_of(x)
        return xp.empty((n, win.oh, win.ow, c), x.dtype), xp.empty((n, win.oh, win.ow, c), Targmax.np)
    native, window = sharding.native_module(), _native_window(win)
    if native is not None and window is not None and type(x) is np.ndarray and x.dtype in _NATIVE_FLOATS:
        y, found = np.empty((n, win.oh, win.ow, c), x.dtype), np.empty((n, win.oh, win.ow, c), np.int64)  # one pass
        if native.max_pool_with_argmax(_aligned(x), y, found, window, include_batch_in_index) == 0:
            return _at_argmax(x, y, found, include_batch_in_index), found.astype(Targmax.np, copy=False)
        # some window lies wholly in the padding: the passes below give it the numpy path's answer
    tiled = _tiling(x.shape, win) if type(x) is np.ndarray and 1 < win.kh * win.kw < 256 else None
    tap: np.ndarray | None = None
    if tiled is not None and x.size and win.oh * win.ow:
        x = np.ascontiguousarray(x)
        out, tap = _max_and_tap_tiled(x, win)
        if out.dtype.kind in "fV" and np.isnan(out).any():
            tap = None  # a nan in the running maximum stops later taps winning: the general rule below
    else:
        out = max_pool(x, ksize=attrs["ksize"], strides=attrs["strides"], padding=attrs["padding"], data_format="NHWC")
    if tap is None:
        tap = _argmax_tap(x, win)
    base, offsets = _argmax_layout(x.shape, win)
    argmax = np.take(offsets, tap)
    argmax += base
    if include_batch_in_index and n > 1:
        argmax += (np.arange(n, dtype=np.int64) * (h * w * c))[:, None, None, None]
    return _at_argmax(x, out, argmax, include_batch_in_index), argmax.astype(Targmax.np, copy=False)


def _at_argmax(x: np.ndarray, out: np.ndarray, argmax: np.ndarray, include_batch: bool) -> np.ndarray:
    """MaxPoolWithArgmax's output: the input at each argmax (maxpooling_op.cc keeps the two
    together: a NaN wins only as a window's first element, and is then the output).  The
    maximum computed alongside already is that, unless the input holds NaN or -inf, or
    (for floats) -0.0 and +0.0 tie, where the first is the output and ``maximum`` may
    give the other: floats are read at the argmax always."""
    if x.dtype.kind not in "fV" and _without_nan(x) is x:
        return out
    xp = xp_of(x)
    n, h, w, c = x.shape
    flat = argmax if include_batch or n == 1 else argmax + (xp.arange(n, dtype=np.int64) * (h * w * c))[:, None, None, None]
    return xp.take(x.reshape(-1), flat)  # type: ignore[no-any-return]


def _flat_argmax(op: str, argmax: Any, x_shape: tuple[int, int, int, int], include_batch: bool) -> Any:
    """``argmax`` as contiguous int64 indices into the whole flattened input (numpy or
    cupy); an index outside the input (outside its image without include_batch_in_index)
    is an error."""
    xp = xp_of(argmax)
    n, h, w, c = x_shape
    image = h * w * c
    limit = n * image if include_batch else image
    # A copy, always: the indices checked are the ones used, even if another thread
    # changes the caller's argmax meanwhile (the CUDA kernels index device memory with them).
    idx = argmax.astype(np.int64)
    # one pass: a negative index, seen as unsigned, is larger than any limit
    if idx.size and int(idx.view(np.uint64).max()) >= limit:
        bad = (idx < 0) | (idx >= limit)
        where = tuple(int(v) for v in xp.argwhere(bad)[0])
        scope = "the input" if include_batch else "one image of the input (include_batch_in_index=False)"
        raise _error(op, f"argmax{list(where)} = {int(idx[where])} is not an index into {scope}: expected [0, {limit})")
    if not include_batch and n > 1 and idx.size:
        idx += (xp.arange(n, dtype=np.int64) * image)[:, None, None, None]
    return xp.ascontiguousarray(idx).reshape(-1)


def argmax_pool_inputs(
    op: str, input: Any, grad: Any, argmax: Any, attrs: dict[str, Any], grad_is_input_shaped: bool
) -> Any:
    """The *WithArgmax gradients' shape checks; argmax as ``_flat_argmax`` gives it."""
    _check_rank4(op, input=input, grad=grad, argmax=argmax)
    win = _argmax_pool_window(op, input.shape, attrs)
    pooled = (input.shape[0], win.oh, win.ow, input.shape[3])
    _check_out(op, "grad", grad.shape, input.shape if grad_is_input_shaped else pooled, "NHWC")
    _check_out(op, "argmax", argmax.shape, pooled, "NHWC")
    return _flat_argmax(op, argmax, input.shape, attrs["include_batch_in_index"])


def max_pool_grad_with_argmax(input: np.ndarray, grad: np.ndarray, argmax: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    """Each grad value added at its argmax: a scatter-add (TensorFlow's CPU kernel adds
    too), so overlapping windows that share a maximum sum their values."""
    idx = argmax_pool_inputs("MaxPoolGradWithArgmax", input, grad, argmax, attrs, grad_is_input_shaped=False)
    wt = _work_type(T)
    dx = np.zeros(input.size, wt)
    np.add.at(dx, idx, grad.astype(wt, copy=False).reshape(-1))
    return dx.reshape(input.shape).astype(T.np, copy=False)


def max_pool_grad_grad_with_argmax(input: Any, grad: Any, argmax: Any, **attrs: Any) -> Any:
    """Each output takes grad at its argmax: a gather (numpy or cupy)."""
    idx = argmax_pool_inputs("MaxPoolGradGradWithArgmax", input, grad, argmax, attrs, grad_is_input_shaped=True)
    return xp_of(grad).take(grad.reshape(-1), idx).reshape(argmax.shape)


def _counts(h: int, w: int, win: _Window) -> np.ndarray:
    """(oh, ow, 1): how many elements of each window lie inside the input."""
    (t, _), (l, _) = win.pads

    def inside(size: int, out: int, k: int, s: int, before: int) -> np.ndarray:
        start = np.arange(out) * s - before
        return np.minimum(start + k, size) - np.maximum(start, 0)

    return (inside(h, win.oh, win.kh, win.sh, t)[:, None] * inside(w, win.ow, win.kw, win.sw, l)[None, :])[:, :, None]  # type: ignore[no-any-return]


def avg_pool(value: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    data_format = attrs["data_format"]
    _check_rank4("AvgPool", value=value)
    x = _to_nhwc(value, data_format)
    win = _pool_geometry("AvgPool", x.shape, attrs)
    n, h, w, c = x.shape
    xp = win.padded(x.astype(_work_type(T), copy=False))
    out = np.zeros((n, win.oh, win.ow, c), xp.dtype)
    for i in range(win.kh):
        for j in range(win.kw):
            out += xp[win.tap(i, j)]
    out /= np.maximum(_counts(h, w, win), 1)
    return _from_nhwc(out.astype(T.np, copy=False), data_format)


def avg_pool_grad(orig_input_shape: np.ndarray, grad: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    op, data_format = "AvgPoolGrad", attrs["data_format"]
    _check_rank4(op, grad=grad)
    n, h, w, c = _nhwc_dims(_sizes(op, "orig_input_shape", orig_input_shape), data_format)
    win = _pool_geometry(op, (n, h, w, c), attrs)
    dy = _to_nhwc(grad, data_format)
    _check_out(op, "grad", dy.shape, (n, win.oh, win.ow, c), data_format)
    if dy.size == 0:  # nothing pooled (a VALID window larger than the input, or an empty dim)
        return _from_nhwc(np.zeros((n, h, w, c), T.np), data_format)
    wt = _work_type(T)
    share = dy.astype(wt) / np.maximum(_counts(h, w, win), 1)
    dxp = np.zeros(win.padded_shape(n, h, w, c), wt)
    for i in range(win.kh):
        for j in range(win.kw):
            dxp[win.tap(i, j)] += share
    return _from_nhwc(win.crop(dxp, h, w).astype(T.np), data_format)


# ------------------------------------------------------------ dense layer


def _tanh(x: np.ndarray, T: ok.DType) -> np.ndarray:
    return xp_of(x).tanh(x, out=x)  # type: ignore[no-any-return]


#: Activations that FusedMatMul applies with the activation op's own kernel (a new array).
_FUSED_BY_KERNEL = {"Elu": elu_kernel, "Sigmoid": sigmoid, "Tanh": _tanh}


def fused_mat_mul(
    a: np.ndarray, b: np.ndarray, bias: np.ndarray, transpose_a: bool, transpose_b: bool, activation: str,
    T: ok.DType, **attrs: Any,
) -> np.ndarray:
    """activation(a @ b + bias): the bias and Relu/Relu6/Tanh written into the product
    in place, so a dense layer allocates one array instead of three.  The values are
    those of MatMul, BiasAdd and the activation's kernel run one after the other."""
    op = "FusedMatMul"
    out = product(op, a, b, transpose_a, transpose_b)  # a new array: ours to write
    if bias.ndim != 1 or bias.shape[0] != out.shape[1]:
        raise _error(
            op,
            f"bias must be 1-D with size the number of columns of the product ({out.shape[1]}), "
            f"got shape {list(bias.shape)}",
        )
    return bias_activation_in_place(out, bias, activation, T)  # type: ignore[no-any-return]


def bias_activation_in_place(out: Any, bias: Any, activation: str, T: ok.DType, channel_axis: int = -1) -> Any:
    """activation(out + bias) written into ``out`` (a fresh array the caller owns) for
    Identity, Relu, Relu6 and Tanh; Elu and Sigmoid through their own kernels (a new
    array).  ``bias`` runs along ``channel_axis``."""
    xp = xp_of(out, bias)
    last = channel_axis in (-1, out.ndim - 1)
    tiled = _tiled_bias(out, bias) if last else None
    if tiled is not None:
        width, row = tiled
        rows = out.reshape(-1, width)  # a view: out is C-contiguous
        np.add(rows, row, out=rows)
    else:
        if not last:
            bias = bias.reshape((-1,) + (1,) * (out.ndim - 1 - channel_axis))
        xp.add(out, bias, out=out)
    if activation == "Identity":
        return out
    if activation == "Relu":
        return _relu(out, out=out)
    if activation == "Relu6":
        xp.maximum(out, out.dtype.type(0), out=out)
        return xp.minimum(out, out.dtype.type(6), out=out)
    return _FUSED_BY_KERNEL[activation](out, T=T)  # attr checked by the engine


def fused_conv2d(
    input: np.ndarray, filter: np.ndarray, bias: np.ndarray, activation: str, T: ok.DType, **attrs: Any
) -> np.ndarray:
    """activation(conv2d + bias), the bias and Relu/Relu6/Tanh written into the
    convolution's output in place: one array instead of three, the values of Conv2D,
    BiasAdd and the activation's kernel run one after the other."""
    return fused_conv2d_epilogue(_conv2d("FusedConv2D", input, filter, T, attrs), bias, activation, T, attrs["data_format"])  # type: ignore[no-any-return]


def fused_conv2d_epilogue(out: Any, bias: Any, activation: str, T: ok.DType, data_format: str) -> Any:
    """FusedConv2D's bias check and in-place epilogue on a convolution's fresh output
    (shared with the CUDA plugin, whose convolution differs)."""
    axis = 1 if data_format == "NCHW" else 3
    if bias.ndim != 1 or bias.shape[0] != out.shape[axis]:
        raise _error(
            "FusedConv2D",
            f"bias must be 1-D with size the number of output channels ({out.shape[axis]}), got shape {list(bias.shape)}",
        )
    return bias_activation_in_place(out, bias, activation, T, axis)


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Relu", relu, {"T": _REAL}, ()),
        ("ReluGrad", relu_grad, {"T": _REAL}, ()),
        ("Relu6", relu6, {"T": _REAL}, ()),
        ("LeakyRelu", leaky_relu, None, ()),
        ("LeakyReluGrad", leaky_relu_grad, None, ()),
        ("Elu", elu_kernel, None, ()),
        ("EluGrad", elu_grad, None, ()),
        ("Gelu", gelu, None, ()),
        ("GeluGrad", gelu_grad, None, ()),
        ("Selu", selu_kernel, None, ()),
        ("Softplus", softplus_kernel, None, ()),
        ("Softmax", softmax, None, ()),
        ("SoftmaxGrad", softmax_grad, None, ()),
        ("LogSoftmax", log_softmax, None, ()),
        ("SoftmaxCrossEntropyWithLogits", softmax_cross_entropy_with_logits, None, ()),
        ("SparseSoftmaxCrossEntropyWithLogits", sparse_softmax_cross_entropy_with_logits, None, ()),
        ("SparseSoftmaxCrossEntropyLoss", sparse_softmax_cross_entropy_loss, None, ()),
        ("BiasAdd", bias_add, {"T": _NUMBER}, ()),
        ("BiasAddGrad", bias_add_grad, {"T": _NUMBER}, ()),
        ("FusedMatMul", fused_mat_mul, None, ()),
        ("FusedConv2D", fused_conv2d, None, ()),
        ("Conv2D", conv2d, None, ()),
        ("Conv2DBackpropInput", conv2d_backprop_input, None, ("input_sizes",)),
        ("Conv2DBackpropFilter", conv2d_backprop_filter, None, ("filter_sizes",)),
        ("DepthwiseConv2dNative", depthwise_conv2d_native, None, ()),
        ("ResizeBilinear", resize_bilinear, None, ("size",)),
        ("FusedLayerNorm", fused_layer_norm, None, ()),
        ("FusedLayerNormGrad", fused_layer_norm_grad, None, ()),
        ("ResizeBilinearGrad", resize_bilinear_grad, None, ()),
        ("ResizeNearestNeighbor", resize_nearest_neighbor, None, ("size",)),
        ("ResizeNearestNeighborGrad", resize_nearest_neighbor_grad, None, ("size",)),
        ("DepthwiseConv2dNativeBackpropInput", depthwise_conv2d_native_backprop_input, None, ("input_sizes",)),
        ("DepthwiseConv2dNativeBackpropFilter", depthwise_conv2d_native_backprop_filter, None, ("filter_sizes",)),
        ("MaxPool", max_pool, {"T": _REAL}, ()),
        ("MaxPoolGrad", max_pool_grad, None, ()),
        ("MaxPoolGradGrad", max_pool_grad_grad, None, ()),
        ("MaxPoolWithArgmax", max_pool_with_argmax, {"T": _REAL}, ()),
        ("MaxPoolGradWithArgmax", max_pool_grad_with_argmax, {"T": _REAL}, ()),
        ("MaxPoolGradGradWithArgmax", max_pool_grad_grad_with_argmax, {"T": _REAL}, ()),
        ("AvgPool", avg_pool, None, ()),
        ("AvgPoolGrad", avg_pool_grad, None, ("orig_input_shape",)),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
