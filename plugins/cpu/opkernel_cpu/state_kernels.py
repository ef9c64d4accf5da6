"""CPU kernels of the in-place Variable updates: one table in ``register_all``."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError
from opkernel.ops.state_ops import check_update

from . import sharding
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


# The optimizers check every input first (check_update), then compute every new value
# before they write any: a failure on the way (out of memory) leaves all slots as they were.


def apply_gradient_descent(var: np.ndarray, alpha: np.ndarray, delta: np.ndarray, **attrs: Any) -> np.ndarray:
    check_update("ApplyGradientDescent", var=var, alpha=alpha, delta=delta)
    var -= alpha * delta
    return var


def apply_momentum(
    var: np.ndarray, accum: np.ndarray, lr: np.ndarray, grad: np.ndarray, momentum: np.ndarray,
    use_nesterov: bool, **attrs: Any,
) -> np.ndarray:
    check_update("ApplyMomentum", var=var, accum=accum, lr=lr, grad=grad, momentum=momentum)
    new_accum = accum * momentum
    new_accum += grad
    step = lr * (grad + momentum * new_accum) if use_nesterov else lr * new_accum
    xp_of(var).copyto(accum, new_accum)
    var -= step
    return var


def apply_adam(
    var: np.ndarray, m: np.ndarray, v: np.ndarray, beta1_power: np.ndarray, beta2_power: np.ndarray,
    lr: np.ndarray, beta1: np.ndarray, beta2: np.ndarray, epsilon: np.ndarray, grad: np.ndarray,
    use_nesterov: bool, **attrs: Any,
) -> np.ndarray:
    check_update("ApplyAdam", var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
                 beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad)
    xp = xp_of(var, grad)
    lr_t = lr * xp.sqrt(1 - beta2_power) / (1 - beta1_power)
    native = sharding.native_module()
    if native is not None and xp is np and var.dtype in _ADAM_TYPES:
        # the update below in one pass, the same operations in the same order (same bits);
        # the scalars are computed here, in the arrays' type, as below
        if native.adam(var, m, v, np.asarray(grad), float(lr_t), float(1 - beta1), float(1 - beta2), float(beta1),
                       float(epsilon), use_nesterov) == 0:
            return var
    new_m = (grad - m) * (1 - beta1)
    new_m += m
    new_v = (grad * grad - v) * (1 - beta2)
    new_v += v
    direction = new_m * beta1 + grad * (1 - beta1) if use_nesterov else new_m
    step = lr_t * direction / (xp.sqrt(new_v) + epsilon)
    xp.copyto(m, new_m)
    xp.copyto(v, new_v)
    var -= step
    return var


_ADAM_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


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
