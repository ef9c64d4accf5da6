"""Resource variables: variables behind ``resource`` handles (TensorFlow's
resource_variable_ops), and the handle helpers every resource op uses.

VarHandleOp makes a handle naming a variable of the backend's resource manager; the
variable itself comes into being at its first AssignVariableOp (so VarIsInitializedOp is
false until then), as in TensorFlow.  A variable holds a *value*: a tensor nothing writes
to.  ReadVariableOp returns that value without copying; AssignVariableOp stores a copy of
its input (which may be a Ref Variable's memory) and the updates (AssignAdd/AssignSub)
store the result of an op, so an update never changes a value read before it.  Every op
that changes a variable holds the variable's lock from the read to the store, so
concurrent updates from several threads lose none.

The kernels are generic (written with other ops), so every backend with the arithmetic
runs them; a handle names the backend it was made on, and a handle of one backend used
on another is refused, as TensorFlow refuses a resource of another device.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from .. import shape_fns
from .._context import active_backend
from ..backend import Backend
from ..dtypes import DType
from ..errors import FailedPreconditionError, InvalidArgumentError, ResourceNotFoundError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..resources import ResourceBase, ResourceHandle, ResourceMgr, anonymous_name
from ..shapes import InferenceContext
from ..tensor import Tensor
from ..tensor import ops_module as _ops
from ._array_common import errors_as
from .state_ops import TRAINING_INPUTS, check_update

__all__ = [
    "RESOURCE_VARIABLE_OPS", "Var", "handle_array", "handle_only_shape", "handle_to_scalar_shape", "make_handle",
    "resource_from_handle", "register_ops",
    "register_gradients", "register_generic_kernels",
]

RESOURCE_VARIABLE_OPS = (
    "VarHandleOp", "ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
    "VarIsInitializedOp", "VariableShape", "ResourceGather", "DestroyResourceOp", "ResourceScatterAdd",
    "ResourceScatterUpdate", "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam",
)


# ---------------------------------------------------------------- handles


def handle_array(handle: ResourceHandle) -> np.ndarray:
    """The native value of a scalar ``resource`` tensor holding ``handle``."""
    out = np.empty((), dtype=object)
    out[()] = handle
    return out


def make_handle(be: Backend, kind: str, container: str, shared_name: str,
                dtypes_and_shapes: tuple[tuple[Any, Any], ...] = ()) -> ResourceHandle:
    """A handle to the resource ``kind`` named ``shared_name`` on ``be``; with no name, a
    handle to an anonymous resource, deleted with the handle."""
    if shared_name:
        return ResourceHandle(be.name, container, shared_name, kind, dtypes_and_shapes)
    return ResourceHandle(be.name, container, anonymous_name(kind), kind, dtypes_and_shapes,
                          manager=be.resource_manager)


def handle_of(op: str, be: Backend, value: Any, kind: str | tuple[str, ...]) -> ResourceHandle:
    """The handle a scalar ``resource`` input holds, checked: a handle to a ``kind``
    resource (one of ``kind``) of backend ``be``."""
    arr = value._value if isinstance(value, Tensor) else value
    if not isinstance(arr, np.ndarray) or arr.shape != ():
        shape = list(getattr(arr, "shape", ()))
        raise InvalidArgumentError(f"op {op!r}: the resource handle must be a scalar, got shape {shape}", op=op)
    handle = arr[()]
    if not isinstance(handle, ResourceHandle):
        raise InvalidArgumentError(f"op {op!r}: expected a resource handle, got {handle!r}", op=op)
    kinds = (kind,) if isinstance(kind, str) else kind
    if handle.kind not in kinds:
        raise InvalidArgumentError(f"op {op!r}: expected a handle to a {' or '.join(kinds)}, got a handle to a "
                                   f"{handle.kind} ({handle!r})", op=op)
    if handle.backend != be.name:
        raise InvalidArgumentError(
            f"op {op!r} runs on backend {be.name!r} and was given {handle!r}: a resource lives on the backend "
            f"that made its handle; run the op there (ok.use_backend({handle.backend!r}))", op=op,
        )
    return handle


def resource_from_handle(op: str, be: Backend, handle: ResourceHandle, kind: type[ResourceBase]) -> Any:
    """The resource ``handle`` names in ``be``'s manager (ResourceNotFoundError naming
    the op when there is none)."""
    mgr: ResourceMgr = be.resource_manager
    try:
        return mgr.lookup(handle.container, handle.name, kind)
    except ResourceNotFoundError as e:
        raise ResourceNotFoundError(f"op {op!r}: {e}", op=op) from e
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"op {op!r}: {e}", op=op) from e


# ---------------------------------------------------------------- the variable


class Var(ResourceBase):
    """A resource variable: its dtype, and its value once assigned (a Tensor nothing
    writes to, replaced whole by every update under ``lock``)."""

    def __init__(self, dtype: DType) -> None:
        self.dtype = dtype
        self.value: Tensor | None = None
        self.lock = threading.Lock()

    def debug_string(self) -> str:
        if self.value is None:
            return f"Var {self.dtype.name}, uninitialized"
        return f"Var {self.dtype.name}{list(self.value.shape)}"

    def memory_used(self) -> int:
        value = self.value
        return 0 if value is None else int(np.prod(value.shape)) * self.dtype.size

    def close(self) -> None:
        self.value = None


def _variable(op: str, resource: Tensor, be: Backend) -> Var:
    handle = handle_of(op, be, resource, "Var")
    try:
        return resource_from_handle(op, be, handle, Var)  # type: ignore[no-any-return]
    except ResourceNotFoundError as e:
        raise ResourceNotFoundError(
            f"op {op!r}: variable {handle.name!r} (container {handle.container!r}) does not exist: it was never "
            "assigned, or it was destroyed", op=op,
        ) from e


def _check_dtype(op: str, var: Var, dtype: DType, verb: str) -> None:
    if var.dtype is not dtype:
        raise InvalidArgumentError(
            f"op {op!r}: trying to {verb} variable with wrong dtype: the variable holds {var.dtype.name}, "
            f"the op has {dtype.name}", op=op,
        )


def _initialized_value(op: str, var: Var, name: str) -> Tensor:
    value = var.value
    if value is None:
        raise FailedPreconditionError(
            f"op {op!r}: variable {name!r} is not initialized (it was destroyed, or never assigned)", op=op
        )
    return value


# ---------------------------------------------------------------- kernels


def _var_handle_op(*, container: str, shared_name: str, dtype: DType, shape: Any, **_: Any) -> np.ndarray:
    be = active_backend()
    return handle_array(make_handle(be, "Var", container, shared_name, ((dtype, shape),)))


def _read_variable_op(resource: Tensor, *, dtype: DType) -> Tensor:
    op = "ReadVariableOp"
    try:
        var = _variable(op, resource, resource._backend)
    except ResourceNotFoundError as e:  # TensorFlow's read says FailedPrecondition: TF1's uninitialized variable
        raise FailedPreconditionError(str(e), op=op) from e
    _check_dtype(op, var, dtype, "read")
    return _initialized_value(op, var, handle_of(op, resource._backend, resource, "Var").name)


def _assign_variable_op(resource: Tensor, value: Tensor, *, dtype: DType, validate_shape: bool) -> None:
    op = "AssignVariableOp"
    be = resource._backend
    handle = handle_of(op, be, resource, "Var")
    var = be.resource_manager.lookup_or_create(handle.container, handle.name, Var, lambda: Var(dtype))
    _check_dtype(op, var, value.dtype, "assign")
    with var.lock:
        old = var.value
        if validate_shape and old is not None and tuple(old.shape) != tuple(value.shape):
            raise InvalidArgumentError(
                f"op {op!r}: trying to assign a value of shape {list(value.shape)} to variable {handle.name!r} of "
                f"shape {list(old.shape)} (validate_shape=True); nothing was assigned", op=op,
            )
        # A copy: the input may be a Ref Variable's memory, which its own updates change.
        var.value = Tensor(be.copy(value._value), value.dtype, be)


def _update(op: str, resource: Tensor, value: Tensor, subtract: bool) -> None:
    be = resource._backend
    var = _variable(op, resource, be)
    _check_dtype(op, var, value.dtype, "update")
    ops = _ops()
    with var.lock:
        old = _initialized_value(op, var, handle_of(op, be, resource, "Var").name)
        if tuple(old.shape) != tuple(value.shape):
            raise InvalidArgumentError(
                f"op {op!r}: cannot update a variable of shape {list(old.shape)} with a value of shape "
                f"{list(value.shape)}: shapes must be equal; nothing was updated", op=op,
            )
        with errors_as(op):
            var.value = ops.sub(old, value) if subtract else ops.add(old, value)


def _assign_add_variable_op(resource: Tensor, value: Tensor, **_: Any) -> None:
    _update("AssignAddVariableOp", resource, value, subtract=False)


def _assign_sub_variable_op(resource: Tensor, value: Tensor, **_: Any) -> None:
    _update("AssignSubVariableOp", resource, value, subtract=True)


def _var_is_initialized_op(resource: Tensor) -> Tensor:
    op = "VarIsInitializedOp"
    be = resource._backend
    handle = handle_of(op, be, resource, "Var")
    try:
        var = be.resource_manager.lookup(handle.container, handle.name, Var)
    except ResourceNotFoundError:
        var = None
    return _ops().fill([], var is not None and var.value is not None)  # type: ignore[no-any-return]


def _variable_shape(input: Tensor, *, out_type: DType) -> Tensor:
    op = "VariableShape"
    var = _variable(op, input, input._backend)
    value = _initialized_value(op, var, handle_of(op, input._backend, input, "Var").name)
    return _ops().cast(_ops().shape(value), out_type)  # type: ignore[no-any-return]


def _resource_gather(resource: Tensor, indices: Tensor, *, batch_dims: int, dtype: DType, **_: Any) -> Tensor:
    op = "ResourceGather"
    var = _variable(op, resource, resource._backend)
    _check_dtype(op, var, dtype, "read")
    value = _initialized_value(op, var, handle_of(op, resource._backend, resource, "Var").name)
    with errors_as(op):
        return _ops().gather_v2(value, indices, 0, batch_dims=batch_dims)  # type: ignore[no-any-return]


def _destroy_resource_op(resource: Tensor, *, ignore_lookup_error: bool) -> None:
    op = "DestroyResourceOp"
    be = resource._backend
    arr = resource._value
    if not isinstance(arr, np.ndarray) or arr.shape != () or not isinstance(arr[()], ResourceHandle):
        raise InvalidArgumentError(f"op {op!r}: expected a scalar resource handle", op=op)
    handle = handle_of(op, be, resource, arr[()].kind)
    mgr = be.resource_manager
    try:
        found = mgr.lookup(handle.container, handle.name, ResourceBase)
    except ResourceNotFoundError as e:
        if not ignore_lookup_error:
            raise ResourceNotFoundError(f"op {op!r}: {e}", op=op) from e
        return
    if not type(found).names_kind(handle.kind):
        raise InvalidArgumentError(
            f"op {op!r}: {handle!r} names a {found.debug_string()}, not a {handle.kind}; nothing was deleted", op=op
        )
    mgr.discard(handle.container, handle.name)


def _scatter(op: str, resource: Tensor, indices: Tensor, updates: Tensor, dtype: DType, add: bool) -> None:
    be = resource._backend
    var = _variable(op, resource, be)
    _check_dtype(op, var, dtype, "update")
    ops = _ops()
    with var.lock:
        old = _initialized_value(op, var, handle_of(op, be, resource, "Var").name)
        want = tuple(indices.shape) + tuple(old.shape[1:])
        if not old.shape:
            raise InvalidArgumentError(f"op {op!r}: the variable must have at least one dimension, got a scalar", op=op)
        if tuple(updates.shape) not in (want, ()):
            raise InvalidArgumentError(
                f"op {op!r}: updates must have shape indices.shape + variable.shape[1:] = {list(want)} (or be a "
                f"scalar), got {list(updates.shape)}; nothing was updated", op=op,
            )
        n = int(old.shape[0])
        host = np.asarray(indices.numpy()).reshape(-1)
        bad = np.flatnonzero((host < 0) | (host >= n))
        if bad.size:
            raise InvalidArgumentError(
                f"op {op!r}: indices[{int(bad[0])}] = {int(host[bad[0]])} is not in [0, {n}); nothing was updated", op=op
            )
        with errors_as(op):  # computed whole before the store: a failure changes nothing
            full = ops.broadcast_to(updates, list(want)) if tuple(updates.shape) != want else updates
            flat_idx = ops.reshape(indices, [-1])
            rows = ops.reshape(full, [-1, *old.shape[1:]])
            if add:  # repeated indices add up, as TensorFlow's
                new = ops.add(old, ops.unsorted_segment_sum(rows, flat_idx, n))
            else:
                new = ops.tensor_scatter_update(old, ops.reshape(flat_idx, [-1, 1]), rows)
        var.value = new


def _resource_scatter_add(resource: Tensor, indices: Tensor, updates: Tensor, *, dtype: DType, **_: Any) -> None:
    _scatter("ResourceScatterAdd", resource, indices, updates, dtype, add=True)


def _resource_scatter_update(resource: Tensor, indices: Tensor, updates: Tensor, *, dtype: DType, **_: Any) -> None:
    _scatter("ResourceScatterUpdate", resource, indices, updates, dtype, add=False)


def _distinct_variables(op: str, handles: list[Tensor]) -> list[Var]:
    """The variables behind ``handles``, which must be different variables."""
    be = handles[0]._backend
    found = [_variable(op, h, be) for h in handles]
    if len({id(v) for v in found}) != len(found):
        raise InvalidArgumentError(f"op {op!r}: the variable and its slots must be different variables", op=op)
    return found


def _apply_update(op: str, handles: list[Tensor], scalars: dict[str, Tensor], grad: Tensor,
                  step: Any) -> None:
    """An optimizer step on resource variables: every variable locked (in the order of
    their names, so two steps never wait on each other), checked, the new values computed
    with ops, then all stored: a failed check or op changes none."""
    be = handles[0]._backend
    names = [handle_of(op, be, h, "Var") for h in handles]
    variables = _distinct_variables(op, handles)
    order = sorted(range(len(variables)), key=lambda k: (names[k].container, names[k].name))
    for k in order:
        variables[k].lock.acquire()
    try:
        values = [_initialized_value(op, v, n.name) for v, n in zip(variables, names)]
        for v in variables:
            _check_dtype(op, v, grad.dtype, "update")
        slots, hypers, grad_name = TRAINING_INPUTS[op.replace("Resource", "", 1)]
        check_update(op, like=op.replace("Resource", "", 1), **dict(zip(slots, values)), **scalars, **{grad_name: grad})
        with errors_as(op):
            new = step(*values)
        for v, value in zip(variables, new):
            v.value = value
    finally:
        for k in order:
            variables[k].lock.release()


def _resource_apply_gradient_descent(var: Tensor, alpha: Tensor, delta: Tensor, **_: Any) -> None:
    ops = _ops()
    _apply_update("ResourceApplyGradientDescent", [var], {"alpha": alpha}, delta,
                  lambda v: [ops.sub(v, ops.mul(alpha, delta))])


def _resource_apply_momentum(var: Tensor, accum: Tensor, lr: Tensor, grad: Tensor, momentum: Tensor, *,
                             use_nesterov: bool, **_: Any) -> None:
    ops = _ops()

    def step(v: Tensor, a: Tensor) -> list[Tensor]:
        a = ops.add(ops.mul(a, momentum), grad)
        direction = ops.add(grad, ops.mul(momentum, a)) if use_nesterov else a
        return [ops.sub(v, ops.mul(lr, direction)), a]

    _apply_update("ResourceApplyMomentum", [var, accum], {"lr": lr, "momentum": momentum}, grad, step)


def _resource_apply_adam(
    var: Tensor, m: Tensor, v: Tensor, beta1_power: Tensor, beta2_power: Tensor, lr: Tensor, beta1: Tensor,
    beta2: Tensor, epsilon: Tensor, grad: Tensor, *, use_nesterov: bool, **_: Any,
) -> None:
    ops = _ops()

    def step(x: Tensor, m_: Tensor, v_: Tensor) -> list[Tensor]:
        one = ops.ones_like(beta1)
        lr_t = ops.real_div(ops.mul(lr, ops.sqrt(ops.sub(one, beta2_power))), ops.sub(one, beta1_power))
        m_ = ops.add(m_, ops.mul(ops.sub(grad, m_), ops.sub(one, beta1)))
        v_ = ops.add(v_, ops.mul(ops.sub(ops.square(grad), v_), ops.sub(one, beta2)))
        direction = ops.add(ops.mul(m_, beta1), ops.mul(grad, ops.sub(one, beta1))) if use_nesterov else m_
        return [ops.sub(x, ops.real_div(ops.mul(lr_t, direction), ops.add(ops.sqrt(v_), epsilon))), m_, v_]

    scalars = {"beta1_power": beta1_power, "beta2_power": beta2_power, "lr": lr, "beta1": beta1, "beta2": beta2,
               "epsilon": epsilon}
    _apply_update("ResourceApplyAdam", [var, m, v], scalars, grad, step)


# ---------------------------------------------------------------- registration


def handle_only_shape(c: InferenceContext) -> None:
    """Input 0 is a scalar handle; no outputs (the updates, the resource ops of tables and queues)."""
    c.with_rank(c.input(0), 0)


def handle_to_scalar_shape(c: InferenceContext) -> None:
    """Input 0 is a scalar handle; output 0 a scalar (a size, a flag)."""
    c.with_rank(c.input(0), 0)
    c.set_output(0, c.scalar())


def _handle_to_unknown_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    c.set_output(0, c.unknown_shape())


def _variable_shape_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    c.set_output(0, c.vector(c.unknown_dim()))


def register_ops() -> None:
    register_op("VarHandleOp").output("resource: resource").attr("container: string = ''").attr(
        "shared_name: string = ''"
    ).attr("debug_name: string = ''").attr("dtype: type").attr("shape: shape").attr(
        "allowed_devices: list(string) = []"
    ).set_is_stateful().set_shape_fn(shape_fns.scalar_shape).doc(
        "A handle to the resource variable shared_name of this backend (a new anonymous variable, deleted with its "
        "handle, when shared_name is empty); the variable exists from its first AssignVariableOp."
    )
    register_op("ReadVariableOp").input("resource: resource").output("value: dtype").attr("dtype: type").set_is_stateful(
    ).set_shape_fn(_handle_to_unknown_shape).doc("The variable's value (never changed by a later update).")
    register_op("AssignVariableOp").input("resource: resource").input("value: dtype").attr("dtype: type").attr(
        "validate_shape: bool = false"
    ).set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "Stores a copy of value as the variable's value, creating the variable at the first assignment."
    )
    for name, sign in (("AssignAddVariableOp", "+"), ("AssignSubVariableOp", "-")):
        register_op(name).input("resource: resource").input("value: dtype").attr("dtype: type").set_is_stateful(
        ).set_shape_fn(handle_only_shape).doc(f"variable = variable {sign} value, atomically; value has the variable's shape.")
    register_op("VarIsInitializedOp").input("resource: resource").output("is_initialized: bool").set_is_stateful(
    ).set_shape_fn(shape_fns.scalar_shape).doc("True once the variable has been assigned (and not destroyed).")
    register_op("VariableShape").input("input: resource").output("output: out_type").attr(
        "out_type: {int32, int64} = DT_INT32"
    ).set_is_stateful().set_shape_fn(_variable_shape_shape).doc("The shape of the variable's value.")
    register_op("ResourceGather").input("resource: resource").input("indices: Tindices").attr(
        "batch_dims: int = 0"
    ).attr("validate_indices: bool = true").output("output: dtype").attr("dtype: type").attr(
        "Tindices: {int32, int64}"
    ).set_is_stateful().set_shape_fn(_handle_to_unknown_shape).doc(
        "Gathers slices of the variable's value along axis 0 (after batch_dims), as GatherV2."
    )
    for name, verb, types in (("ResourceScatterAdd", "adds updates to", "numbertype"),
                              ("ResourceScatterUpdate", "writes updates into", "type")):
        register_op(name).input("resource: resource").input("indices: Tindices").input("updates: dtype").attr(
            f"dtype: {types}"
        ).attr("Tindices: {int32, int64}").set_is_stateful().set_shape_fn(handle_only_shape).doc(
            f"Atomically {verb} the rows indices of the variable (updates: indices.shape + variable.shape[1:], or "
            "a scalar)."
        )
    register_op("ResourceApplyGradientDescent").input("var: resource").input("alpha: T").input("delta: T").attr(
        "T: numbertype"
    ).attr("use_locking: bool = false").set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "var -= alpha * delta, atomically."
    )
    register_op("ResourceApplyMomentum").input("var: resource").input("accum: resource").input("lr: T").input(
        "grad: T"
    ).input("momentum: T").attr("T: numbertype").attr("use_locking: bool = false").attr(
        "use_nesterov: bool = false"
    ).set_is_stateful().set_shape_fn(handle_only_shape).doc(
        "accum = accum * momentum + grad; var -= lr * accum (Nesterov: var -= lr * (grad + momentum * accum)), "
        "atomically."
    )
    register_op("ResourceApplyAdam").input("var: resource").input("m: resource").input("v: resource").input(
        "beta1_power: T"
    ).input("beta2_power: T").input("lr: T").input("beta1: T").input("beta2: T").input("epsilon: T").input(
        "grad: T"
    ).attr("T: numbertype").attr("use_locking: bool = false").attr("use_nesterov: bool = false").set_is_stateful(
    ).set_shape_fn(handle_only_shape).doc(
        "The Adam update of var and its slots m and v, atomically (as ApplyAdam)."
    )
    register_op("DestroyResourceOp").input("resource: resource").attr("ignore_lookup_error: bool = true").set_is_stateful(
    ).set_shape_fn(handle_only_shape).doc(
        "Deletes the resource the handle names (a missing one is an error unless ignore_lookup_error)."
    )


def register_gradients() -> None:
    # ReadVariableOp passes its gradient to the handle: a tape that watches a variable's
    # handle (ok.ResourceVariable's) gives the variable the sum of its reads' gradients.
    register_gradient("ReadVariableOp")(_read_variable_grad)
    for name in RESOURCE_VARIABLE_OPS:
        if name != "ReadVariableOp":
            not_differentiable(name)


def _read_variable_grad(op: Any, grad: Tensor) -> list[Tensor]:
    return [grad]


def register_generic_kernels() -> None:
    for name, fn in (
        ("VarHandleOp", _var_handle_op), ("ReadVariableOp", _read_variable_op),
        ("AssignVariableOp", _assign_variable_op), ("AssignAddVariableOp", _assign_add_variable_op),
        ("AssignSubVariableOp", _assign_sub_variable_op), ("VarIsInitializedOp", _var_is_initialized_op),
        ("VariableShape", _variable_shape), ("ResourceGather", _resource_gather),
        ("DestroyResourceOp", _destroy_resource_op), ("ResourceScatterAdd", _resource_scatter_add),
        ("ResourceScatterUpdate", _resource_scatter_update),
        ("ResourceApplyGradientDescent", _resource_apply_gradient_descent),
        ("ResourceApplyMomentum", _resource_apply_momentum), ("ResourceApplyAdam", _resource_apply_adam),
    ):
        register_kernel(name, backend="*")(fn)
