"""Ops that update Variables in place through ``Ref`` inputs: assignment and the
fused optimizer updates (TensorFlow's state_ops and training_ops).

Each has a generic kernel written with other ops, so every backend can run it;
backends override with fused kernels where that pays.
"""

from __future__ import annotations

from typing import Any

from .. import shape_fns
from ..errors import InvalidArgumentError
from ..gradients import not_differentiable
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops

_NUMBER = "{bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, complex64, complex128}"
_FLOAT = "{bfloat16, half, float, double}"
#: Each training op's inputs by role: the variable and its slots (Refs updated
#: together), the scalar hyper-parameters, the gradient.
TRAINING_INPUTS: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "ApplyGradientDescent": (("var",), ("alpha",), "delta"),
    "ApplyMomentum": (("var", "accum"), ("lr", "momentum"), "grad"),
    "ApplyAdam": (("var", "m", "v"), ("beta1_power", "beta2_power", "lr", "beta1", "beta2", "epsilon"), "grad"),
}
TRAINING_OPS = tuple(TRAINING_INPUTS)


def check_update(op: str, *, like: str | None = None, **inputs: Any) -> None:
    """Raise InvalidArgumentError unless every slot and the gradient have the variable's
    shape and every hyper-parameter is a scalar (rank 0), as TensorFlow's training ops
    check.  Every kernel of a training op calls this before it writes anything, so a
    rejected update leaves the variable and all its slots as they were.  ``inputs``
    are the op's inputs by name (anything with a ``shape``)."""
    slots, scalars, grad = TRAINING_INPUTS[like or op]  # like: the Ref op a resource op mirrors
    want = tuple(inputs["var"].shape)
    for name in (*slots[1:], grad):
        got = tuple(inputs[name].shape)
        if got != want:
            raise InvalidArgumentError(
                f"op {op!r}: {name!r} must have the shape of 'var', {list(want)}, got {list(got)}; nothing was updated",
                op=op,
            )
    for name in scalars:
        got = tuple(inputs[name].shape)
        if got:
            raise InvalidArgumentError(
                f"op {op!r}: {name!r} must be a scalar, got shape {list(got)}; nothing was updated", op=op
            )


def _scalar_inputs_then_var(*scalars: int) -> Any:
    def fn(c: InferenceContext) -> None:
        for i in scalars:
            c.with_rank(c.input(i), 0)
        c.set_output(0, c.input(0))

    return fn


def register_ops() -> None:
    register_op("Assign").input("ref: Ref(T)").input("value: T").output("output_ref: Ref(T)").attr("T: type").attr(
        "validate_shape: bool = true"
    ).attr("use_locking: bool = true").set_shape_fn(shape_fns.merge_all_inputs).doc(
        "Writes value into the variable ref, in place; value must have ref's shape."
    )
    for name, sign in (("AssignAdd", "+"), ("AssignSub", "-")):
        register_op(name).input("ref: Ref(T)").input("value: T").output("output_ref: Ref(T)").attr(
            f"T: {_NUMBER}"
        ).attr("use_locking: bool = false").set_shape_fn(shape_fns.merge_all_inputs).doc(
            f"Updates ref in place: ref = ref {sign} value."
        )
    register_op("ApplyGradientDescent").input("var: Ref(T)").input("alpha: T").input("delta: T").output(
        "out: Ref(T)"
    ).attr(f"T: {_FLOAT}").attr("use_locking: bool = false").set_shape_fn(_scalar_inputs_then_var(1)).doc(
        "var -= alpha * delta, in place."
    )
    register_op("ApplyMomentum").input("var: Ref(T)").input("accum: Ref(T)").input("lr: T").input("grad: T").input(
        "momentum: T"
    ).output("out: Ref(T)").attr(f"T: {_FLOAT}").attr("use_locking: bool = false").attr(
        "use_nesterov: bool = false"
    ).set_shape_fn(_scalar_inputs_then_var(2, 4)).doc(
        "accum = accum * momentum + grad; var -= lr * accum (Nesterov: var -= lr * (grad + momentum * accum))."
    )
    register_op("ApplyAdam").input("var: Ref(T)").input("m: Ref(T)").input("v: Ref(T)").input(
        "beta1_power: T"
    ).input("beta2_power: T").input("lr: T").input("beta1: T").input("beta2: T").input("epsilon: T").input(
        "grad: T"
    ).output("out: Ref(T)").attr(f"T: {_FLOAT}").attr("use_locking: bool = false").attr(
        "use_nesterov: bool = false"
    ).set_shape_fn(_scalar_inputs_then_var(3, 4, 5, 6, 7, 8)).doc(
        "The Adam update, in place: lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); "
        "m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + epsilon)."
    )


def register_gradients() -> None:
    for name in ("Assign", "AssignAdd", "AssignSub", *TRAINING_OPS):
        not_differentiable(name)


# Generic kernels: every backend with Assign/AssignAdd/AssignSub kernels gets the optimizers.


def _apply_gradient_descent(var: Any, alpha: Any, delta: Any, **attrs: Any) -> Any:
    check_update("ApplyGradientDescent", var=var, alpha=alpha, delta=delta)
    ops = _ops()
    return ops.assign_sub(var, ops.mul(alpha, delta))


def _apply_momentum(var: Any, accum: Any, lr: Any, grad: Any, momentum: Any, use_nesterov: bool, **attrs: Any) -> Any:
    check_update("ApplyMomentum", var=var, accum=accum, lr=lr, grad=grad, momentum=momentum)
    ops = _ops()
    ops.assign(accum, ops.add(ops.mul(accum, momentum), grad))
    step = ops.add(grad, ops.mul(momentum, accum)) if use_nesterov else accum
    return ops.assign_sub(var, ops.mul(lr, step))


def _apply_adam(
    var: Any, m: Any, v: Any, beta1_power: Any, beta2_power: Any, lr: Any, beta1: Any, beta2: Any,
    epsilon: Any, grad: Any, use_nesterov: bool, **attrs: Any,
) -> Any:
    check_update("ApplyAdam", var=var, m=m, v=v, beta1_power=beta1_power, beta2_power=beta2_power, lr=lr,
                 beta1=beta1, beta2=beta2, epsilon=epsilon, grad=grad)
    ops = _ops()
    one = ops.ones_like(beta1)
    lr_t = ops.real_div(ops.mul(lr, ops.sqrt(ops.sub(one, beta2_power))), ops.sub(one, beta1_power))
    ops.assign_add(m, ops.mul(ops.sub(grad, m), ops.sub(one, beta1)))
    ops.assign_add(v, ops.mul(ops.sub(ops.square(grad), v), ops.sub(one, beta2)))
    direction = ops.add(ops.mul(m, beta1), ops.mul(grad, ops.sub(one, beta1))) if use_nesterov else m
    return ops.assign_sub(var, ops.real_div(ops.mul(lr_t, direction), ops.add(ops.sqrt(v), epsilon)))


def register_generic_kernels() -> None:
    register_kernel("ApplyGradientDescent", backend="*")(_apply_gradient_descent)
    register_kernel("ApplyMomentum", backend="*")(_apply_momentum)
    register_kernel("ApplyAdam", backend="*")(_apply_adam)
