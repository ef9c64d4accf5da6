"""Helpers for gradient functions (written with public ops only)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import DType, int32
from ..errors import InvalidArgumentError
from ..tensor import Tensor, ops_module as _ops

#: (backend, dtype, value) -> Tensor; emptied when full, so it never grows without bound.
_CONSTANTS: dict[tuple[Any, ...], Tensor] = {}
_CONSTANTS_MAX = 1024


def constant(value: int | tuple[int, ...], like: Tensor, dtype: DType = int32) -> Tensor:
    """A small constant (a shape vector, an element count) on ``like``'s backend,
    made once per backend, dtype and value.

    For operands that an op only reads (the shape of a Reshape or BroadcastTo,
    the divisor of a mean's gradient): one built from a literal on every call
    costs a conversion each time.  Its host array is read-only, so an op that
    handed it out could not have it written through.
    """
    be = like._backend
    key = (be, dtype, value)
    t = _CONSTANTS.get(key)
    if t is None:
        arr = np.array(value, dtype.np)
        arr.flags.writeable = False
        t = Tensor(be.from_numpy(arr), dtype, be)
        if len(_CONSTANTS) >= _CONSTANTS_MAX:
            _CONSTANTS.clear()
        _CONSTANTS[key] = t
    return t


def unbroadcast(grad: Tensor, like: Tensor | tuple[int, ...]) -> Tensor:
    """Sum ``grad`` over the axes that numpy broadcasting added or stretched to reach
    ``grad.shape`` from ``like``'s shape (TensorFlow's BroadcastGradientArgs + Sum + Reshape).

    ``like`` is the input (or its static shape).  While ``ok.function`` traces with
    unknown dimensions, which axes were stretched is known only when the graph runs:
    the axes are then computed from the shapes by ops."""
    shape = tuple(like.shape) if isinstance(like, Tensor) else tuple(like)
    if None in shape:
        if not isinstance(like, Tensor):
            raise InvalidArgumentError(f"unbroadcast: shape {shape} has unknown dimensions; pass the tensor itself")
        return _unbroadcast_by_ops(grad, like, len(grad.shape) - len(shape))
    if tuple(grad.shape) == tuple(shape):
        return grad
    lead = len(grad.shape) - len(shape)
    axes = list(range(lead)) + [
        lead + i for i, d in enumerate(shape) if d == 1 and grad.shape[lead + i] != 1
    ]
    ops = _ops()
    if axes:
        grad = ops.sum(grad, axes, keep_dims=False)
    return ops.reshape(grad, list(shape))  # type: ignore[no-any-return]


def _unbroadcast_by_ops(grad: Tensor, like: Tensor, lead: int) -> Tensor:
    """unbroadcast for a ``like`` of unknown dimensions: the summed axes (the ``lead``
    added ones, and those where ``like`` has 1 and ``grad`` not) found from the shapes."""
    ops = _ops()
    rank = len(like.shape)
    like_shape = ops.shape(like)
    tail = ops.slice(ops.shape(grad), constant((lead,), grad), constant((rank,), grad))
    one = constant(1, grad)
    stretched = ops.where(ops.logical_and(ops.equal(like_shape, one), ops.not_equal(tail, one)))
    axes = ops.add(ops.reshape(ops.cast(stretched, DstT=int32), constant((-1,), grad)), constant(lead, grad))
    if lead:
        axes = ops.concat_v2([constant(tuple(range(lead)), grad), axes], constant(0, grad))
    return ops.reshape(ops.sum(grad, axes, keep_dims=True), like_shape)  # type: ignore[no-any-return]


def mat_mul_grads(
    a: Tensor, b: Tensor, grad: Tensor, transpose_a: bool, transpose_b: bool, need_a: bool = True, need_b: bool = True
) -> tuple[Any, Any]:
    """TensorFlow's _MatMulGrad, every transpose combination without a Transpose op:
    (F, F): grad b^T, a^T grad;  (F, T): grad b, grad^T a;  (T, F): b grad^T, a grad;
    (T, T): b^T grad^T, grad^T a^T.  A gradient not needed is not computed (None)."""
    mm = _ops().mat_mul
    ta, tb = transpose_a, transpose_b
    ga = gb = None
    if need_a:  # grad_a / grad_b mark the products as gradients, as TensorFlow's do
        ga = mm(grad, b, transpose_b=not tb, grad_a=True) if not ta else mm(b, grad, transpose_a=tb, transpose_b=True, grad_a=True)
    if need_b:
        gb = mm(a, grad, transpose_a=not ta, grad_b=True) if not tb else mm(grad, a, transpose_a=True, transpose_b=ta, grad_b=True)
    return ga, gb
