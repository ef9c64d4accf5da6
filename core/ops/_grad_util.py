"""Helpers for gradient functions (written with public ops only)."""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor, ops_module as _ops


def unbroadcast(grad: Tensor, shape: tuple[int, ...]) -> Tensor:
    """Sum ``grad`` over the axes that numpy broadcasting added or stretched to reach
    ``grad.shape`` from ``shape`` (TensorFlow's BroadcastGradientArgs + Sum + Reshape)."""
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
