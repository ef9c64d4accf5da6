"""CUDA kernels of the in-place Variable updates.

Assign, AssignAdd and AssignSub are the CPU plugin's bodies (cupy's copyto,
add and subtract with ``out=``).  The optimizer updates are one fused raw
kernel each (``sources.py``: one pass over the variable and its slots, instead
of the half-dozen elementwise launches the generic kernel makes), after the
inputs are checked (``check_update``: a rejected update writes nothing); a
variable or slot that is not contiguous goes to the CPU body, which computes
with cupy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.state_ops import check_update
from opkernel_cpu import state_kernels as cpu
from opkernel_cpu.xp import xp_of

from . import runtime
from .sources import ACCUMULATOR, CTYPES, FLOATS

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]


def _fusable(T: ok.DType, var: Any, slots: tuple[Any, ...], scalars: tuple[Any, ...], grad: Any) -> bool:
    if xp_of(var) is np or T.name not in FLOATS or not var.flags.c_contiguous:
        return False
    if any(s.shape != var.shape or not s.flags.c_contiguous for s in slots):
        return False
    return grad.shape == var.shape and all(s.size == 1 for s in scalars)


def _args(T: ok.DType) -> tuple[str, str]:
    return CTYPES[T.name], ACCUMULATOR[T.name]


def _c(x: Any) -> Any:
    return xp_of(x).ascontiguousarray(x)


def apply_gradient_descent(var: Any, alpha: Any, delta: Any, T: ok.DType, **attrs: Any) -> Any:
    check_update("ApplyGradientDescent", var=var, alpha=alpha, delta=delta)
    if not _fusable(T, var, (), (alpha,), delta):
        return cpu.apply_gradient_descent(var, alpha, delta, T=T, **attrs)
    if var.size:
        runtime.launch(
            "training", "apply_gradient_descent", _args(T), runtime.grid(var.size), runtime.BLOCK,
            (var, _c(alpha), _c(delta), np.int64(var.size)),
        )
    return var


def apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any, use_nesterov: bool, T: ok.DType, **attrs: Any) -> Any:
    check_update("ApplyMomentum", var=var, accum=accum, lr=lr, grad=grad, momentum=momentum)
    if not _fusable(T, var, (accum,), (lr, momentum), grad):
        return cpu.apply_momentum(var, accum, lr, grad, momentum, use_nesterov=use_nesterov, T=T, **attrs)
    if var.size:
        runtime.launch(
            "training", "apply_momentum", _args(T), runtime.grid(var.size), runtime.BLOCK,
            (var, accum, _c(lr), _c(grad), _c(momentum), np.int64(var.size), np.int32(bool(use_nesterov))),
        )
    return var


def apply_adam(
    var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any, beta1: Any, beta2: Any,
    epsilon: Any, grad: Any, use_nesterov: bool, T: ok.DType, **attrs: Any,
) -> Any:
    check_update("ApplyAdam", var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
                 beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad)
    scalars = (beta1_power, beta2_power, lr, beta1, beta2, epsilon)
    if not _fusable(T, var, (m, v), scalars, grad):
        return cpu.apply_adam(var, m, v, *scalars, grad, use_nesterov=use_nesterov, T=T, **attrs)
    if var.size:
        runtime.launch(
            "training", "apply_adam", _args(T), runtime.grid(var.size), runtime.BLOCK,
            (var, m, v, *(_c(s) for s in scalars), _c(grad), np.int64(var.size), np.int32(bool(use_nesterov))),
        )
    return var


def rows() -> list[Row]:
    floats = {"T": list(FLOATS)}
    return [
        ("Assign", cpu.assign, None, ()),
        ("AssignAdd", cpu.assign_add, None, ()),
        ("AssignSub", cpu.assign_sub, None, ()),
        ("ApplyGradientDescent", apply_gradient_descent, floats, ()),
        ("ApplyMomentum", apply_momentum, floats, ()),
        ("ApplyAdam", apply_adam, floats, ()),
    ]
