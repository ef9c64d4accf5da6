"""CPU kernels of the in-place Variable updates: one table in ``register_all``."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError

from .xp import xp_of


def _same_shape(op: str, ref: np.ndarray, value: np.ndarray) -> None:
    if ref.shape != value.shape:
        raise InvalidArgumentError(
            f"op {op!r}: value must have the variable's shape {list(ref.shape)}, got {list(value.shape)}", op=op
        )


def assign(ref: np.ndarray, value: np.ndarray, **attrs: Any) -> np.ndarray:
    _same_shape("Assign", ref, value)
    xp_of(ref, value).copyto(ref, value)
    return ref


def assign_add(ref: np.ndarray, value: np.ndarray, **attrs: Any) -> np.ndarray:
    _same_shape("AssignAdd", ref, value)
    return xp_of(ref, value).add(ref, value, out=ref)  # type: ignore[no-any-return]


def assign_sub(ref: np.ndarray, value: np.ndarray, **attrs: Any) -> np.ndarray:
    _same_shape("AssignSub", ref, value)
    return xp_of(ref, value).subtract(ref, value, out=ref)  # type: ignore[no-any-return]


def apply_gradient_descent(var: np.ndarray, alpha: np.ndarray, delta: np.ndarray, **attrs: Any) -> np.ndarray:
    _same_shape("ApplyGradientDescent", var, delta)
    var -= alpha * delta
    return var


def apply_momentum(
    var: np.ndarray, accum: np.ndarray, lr: np.ndarray, grad: np.ndarray, momentum: np.ndarray,
    use_nesterov: bool, **attrs: Any,
) -> np.ndarray:
    _same_shape("ApplyMomentum", var, grad)
    accum *= momentum
    accum += grad
    var -= lr * (grad + momentum * accum) if use_nesterov else lr * accum
    return var


def apply_adam(
    var: np.ndarray, m: np.ndarray, v: np.ndarray, beta1_power: np.ndarray, beta2_power: np.ndarray,
    lr: np.ndarray, beta1: np.ndarray, beta2: np.ndarray, epsilon: np.ndarray, grad: np.ndarray,
    use_nesterov: bool, **attrs: Any,
) -> np.ndarray:
    _same_shape("ApplyAdam", var, grad)
    xp = xp_of(var, grad)
    lr_t = lr * xp.sqrt(1 - beta2_power) / (1 - beta1_power)
    m += (grad - m) * (1 - beta1)
    v += (grad * grad - v) * (1 - beta2)
    direction = m * beta1 + grad * (1 - beta1) if use_nesterov else m
    var -= lr_t * direction / (xp.sqrt(v) + epsilon)
    return var


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Assign", assign, None, ()),
        ("AssignAdd", assign_add, None, ()),
        ("AssignSub", assign_sub, None, ()),
        ("ApplyGradientDescent", apply_gradient_descent, None, ()),
        ("ApplyMomentum", apply_momentum, None, ()),
        ("ApplyAdam", apply_adam, None, ()),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
