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


@family("state", ARITH + ("float16",))
def _state_source(dtype: str) -> str:
    """The updates, reading and writing through LD/ST: a float16 element is loaded as a
    float and stored rounded to half (vload_half/vstore_half, core OpenCL), so the
    update stays in place.  A slot written is read back before it is used again, so
    var's update sees the slot's stored (for half, rounded) value, as TensorFlow's does."""
    T = ctype(ok.as_dtype(dtype))
    half = dtype == "float16"
    C = "float" if half else T
    ld, st = ("vload_half(i, p)", "vstore_half(v, i, p)") if half else ("p[i]", "p[i] = (v)")
    float_part = "" if dtype not in FLOATS + ("float16",) else """
__kernel void sgd(__global T* var, __global const T* alpha, __global const T* delta) {
  long i = get_global_id(0); ST(var, i, LD(var, i) - LD(alpha, 0) * LD(delta, i));
}
__kernel void momentum(__global T* var, __global T* accum, __global const T* lr, __global const T* grad,
                       __global const T* momentum, int nesterov) {
  long i = get_global_id(0); C m = LD(momentum, 0); C g = LD(grad, i);
  ST(accum, i, LD(accum, i) * m + g); C a = LD(accum, i);
  ST(var, i, LD(var, i) - (nesterov ? LD(lr, 0) * (g + m * a) : LD(lr, 0) * a));
}
__kernel void adam(__global T* var, __global T* m, __global T* v, __global const T* b1p, __global const T* b2p,
                   __global const T* lr, __global const T* b1, __global const T* b2, __global const T* eps,
                   __global const T* grad, int nesterov) {
  long i = get_global_id(0); C g = LD(grad, i); C beta1 = LD(b1, 0); C beta2 = LD(b2, 0);
  C lr_t = LD(lr, 0) * sqrt(1 - LD(b2p, 0)) / (1 - LD(b1p, 0));
  ST(m, i, LD(m, i) + (g - LD(m, i)) * (1 - beta1)); ST(v, i, LD(v, i) + (g * g - LD(v, i)) * (1 - beta2));
  C mi = LD(m, i); C vi = LD(v, i);
  C dir = nesterov ? mi * beta1 + g * (1 - beta1) : mi;
  ST(var, i, LD(var, i) - lr_t * dir / (sqrt(vi) + LD(eps, 0)));
}
"""
    return f"""
#define T {T}
#define C {C}
#define LD(p, i) {ld}
#define ST(p, i, v) {st}
__kernel void assign_add(__global T* ref, __global const T* value) {{ long i = get_global_id(0); ST(ref, i, LD(ref, i) + LD(value, i)); }}
__kernel void assign_sub(__global T* ref, __global const T* value) {{ long i = get_global_id(0); ST(ref, i, LD(ref, i) - LD(value, i)); }}
{float_part}
#undef T
#undef C
#undef LD
#undef ST
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
    floats = {"T": list(FLOATS) + ["float16"]}
    table: list[KernelRow] = [
        ("Assign", assign, None, ()),
        ("AssignAdd", _update("AssignAdd", "assign_add"), {"T": list(ARITH) + ["float16"]}, ()),
        ("AssignSub", _update("AssignSub", "assign_sub"), {"T": list(ARITH) + ["float16"]}, ()),
        ("ApplyGradientDescent", apply_gradient_descent, floats, ()),
        ("ApplyMomentum", apply_momentum, floats, ()),
        ("ApplyAdam", apply_adam, floats, ()),
    ]
    register_table(table)
