"""OpenCL kernels of the in-place Variable updates: one table in ``register_all``.

These are the only kernels that write into an input: the ``Ref`` input's buffer
is updated in place and returned.  The optimizer updates are fused into one
kernel each (the generic kernels would run 5-15 elementwise ops); their scalar
hyperparameters stay on the device and are read by every work-item.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.state_ops import check_update

from .array_kernels import BE
from .backend import ctype
from .common import FLOATS, INTS, fail
from .elementwise import KernelRow, register_table
from .programs import family

ARITH = FLOATS + INTS


@family("state", ARITH)
def _state_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    float_part = "" if dtype not in FLOATS else """
__kernel void sgd(__global T* var, __global const T* alpha, __global const T* delta) {
  int i = get_global_id(0); var[i] -= alpha[0] * delta[i];
}
__kernel void momentum(__global T* var, __global T* accum, __global const T* lr, __global const T* grad,
                       __global const T* momentum, int nesterov) {
  int i = get_global_id(0); T m = momentum[0]; T g = grad[i];
  T a = accum[i] * m + g; accum[i] = a;
  var[i] -= nesterov ? lr[0] * (g + m * a) : lr[0] * a;
}
__kernel void adam(__global T* var, __global T* m, __global T* v, __global const T* b1p, __global const T* b2p,
                   __global const T* lr, __global const T* b1, __global const T* b2, __global const T* eps,
                   __global const T* grad, int nesterov) {
  int i = get_global_id(0); T g = grad[i]; T beta1 = b1[0]; T beta2 = b2[0];
  T lr_t = lr[0] * sqrt(1 - b2p[0]) / (1 - b1p[0]);
  T mi = m[i] + (g - m[i]) * (1 - beta1); T vi = v[i] + (g * g - v[i]) * (1 - beta2);
  m[i] = mi; v[i] = vi;
  T dir = nesterov ? mi * beta1 + g * (1 - beta1) : mi;
  var[i] -= lr_t * dir / (sqrt(vi) + eps[0]);
}
"""
    return f"""
#define T {T}
__kernel void assign_add(__global T* ref, __global const T* value) {{ int i = get_global_id(0); ref[i] += value[i]; }}
__kernel void assign_sub(__global T* ref, __global const T* value) {{ int i = get_global_id(0); ref[i] -= value[i]; }}
{float_part}
#undef T
"""


def _same_shape(op: str, ref: Any, value: Any) -> None:
    if tuple(ref.shape) != tuple(value.shape):
        raise fail(op, f"value must have the variable's shape {list(ref.shape)}, got {list(value.shape)}")


def assign(ref: Any, value: Any, **attrs: Any) -> Any:
    _same_shape("Assign", ref, value)
    be = BE()
    if ref.size:
        be.launch1d(be.programs.kernel("scopy", str(ref.dtype.itemsize), "copy", "Assign"), ref.size,
                    ref.base_data, value.base_data, np.int32(0), np.int32(0))
    be.dirty(ref)
    return ref


def _update(op: str, name: str) -> Any:
    def kernel(ref: Any, value: Any, T: ok.DType, **attrs: Any) -> Any:
        _same_shape(op, ref, value)
        be = BE()
        if ref.size:
            be.launch1d(be.programs.kernel("state", T.name, name, op), ref.size, ref.base_data, value.base_data)
        be.dirty(ref)
        return ref

    kernel.__name__ = op
    return kernel


def apply_gradient_descent(var: Any, alpha: Any, delta: Any, T: ok.DType, **attrs: Any) -> Any:
    op = "ApplyGradientDescent"
    check_update(op, var=var, alpha=alpha, delta=delta)
    be = BE()
    if var.size:
        be.launch1d(be.programs.kernel("state", T.name, "sgd", op), var.size, var.base_data, alpha.base_data, delta.base_data)
    be.dirty(var)
    return var


def apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any, use_nesterov: bool, T: ok.DType, **attrs: Any) -> Any:
    op = "ApplyMomentum"
    check_update(op, var=var, accum=accum, lr=lr, grad=grad, momentum=momentum)
    be = BE()
    if var.size:
        be.launch1d(be.programs.kernel("state", T.name, "momentum", op), var.size, var.base_data, accum.base_data,
                    lr.base_data, grad.base_data, momentum.base_data, np.int32(bool(use_nesterov)))
    be.dirty(var)
    be.dirty(accum)
    return var


def apply_adam(var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any, beta1: Any, beta2: Any,
               epsilon: Any, grad: Any, use_nesterov: bool, T: ok.DType, **attrs: Any) -> Any:
    op = "ApplyAdam"
    check_update(op, var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr, beta1=beta1,
                 beta2=beta2, epsilon=epsilon, grad=grad)
    be = BE()
    if var.size:
        be.launch1d(be.programs.kernel("state", T.name, "adam", op), var.size, var.base_data, m.base_data, v.base_data,
                    beta1_power.base_data, beta2_power.base_data, lr.base_data, beta1.base_data, beta2.base_data,
                    epsilon.base_data, grad.base_data, np.int32(bool(use_nesterov)))
    for x in (var, m, v):
        be.dirty(x)
    return var


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    floats = {"T": list(FLOATS)}
    table: list[KernelRow] = [
        ("Assign", assign, None, ()),
        ("AssignAdd", _update("AssignAdd", "assign_add"), {"T": list(ARITH)}, ()),
        ("AssignSub", _update("AssignSub", "assign_sub"), {"T": list(ARITH)}, ()),
        ("ApplyGradientDescent", apply_gradient_descent, floats, ()),
        ("ApplyMomentum", apply_momentum, floats, ()),
        ("ApplyAdam", apply_adam, floats, ()),
    ]
    register_table(table)
