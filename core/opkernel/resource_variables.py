"""``ok.ResourceVariable``: a variable behind a ``resource`` handle, as TensorFlow 2's
``tf.Variable`` (its ResourceVariable).

Its state lives in the resource manager of the backend it was made on, as a *value*
nothing writes to: ``read_value()`` costs no copy, and a value read stays what it was
when the variable changes later (``assign`` stores a copy; ``assign_add`` stores the
sum).  Every update is atomic: updates from several threads at once lose none.  Its
methods run the resource variable ops (VarHandleOp, ReadVariableOp, AssignVariableOp,
AssignAddVariableOp, ...) on the variable's backend, whichever backend is active, as
TensorFlow runs a variable's ops on its device.  Ops of any backend may take the
variable's ``handle`` (on that backend), traced functions too: a traced function reads
the variable at each call.

A ``GradientTape`` watches a trainable variable when it is read (``read_value()`` or a
ReadVariableOp of its handle) and gives it a gradient: the sum of its reads' gradients.

``ok.Variable`` is the other kind: a tensor updated in place through ``Ref`` inputs
(TensorFlow 1's RefVariable), which the optimizers of ``ok.nn`` update.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np

from . import engine, ops
from .autodiff import register_handle
from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError, OpTypeError
from .resources import ResourceHandle
from .tensor import Tensor
from .typing import TensorLike

__all__ = ["ResourceVariable"]


class ResourceVariable:
    """A variable behind a resource handle (``tf.Variable``).

    ``initial_value`` is converted on the active backend (or ``backend``) and assigned.
    A trainable floating-point variable is watched by a ``GradientTape`` when read, as
    TensorFlow's: ``tape.gradient(loss, v)`` sums the gradients of the reads of ``v`` that
    ``loss`` depends on.
    With ``shared_name``, variables of that name on one backend share their state (as
    TensorFlow's ``shared_name``); without one the variable is anonymous and is deleted
    when its last handle is gone."""

    __slots__ = ("_handle", "_dtype", "_backend", "_shape", "name", "trainable")

    def __init__(
        self, initial_value: TensorLike, dtype: Any = None, *, trainable: bool = True, name: str | None = None,
        shared_name: str = "", container: str = "", backend: str | None = None,
    ) -> None:
        if name is not None and not isinstance(name, str):
            raise InvalidArgumentError(f"ResourceVariable: name must be a string, got {name!r}")
        with engine.use_backend(backend) if backend is not None else nullcontext():
            value = engine.to_tensor(initial_value, as_dtype(dtype) if dtype is not None else None)
            if value.dtype.is_resource or value.dtype.name == "string":
                raise InvalidArgumentError(f"ResourceVariable: a variable holds numbers or bools, got {value.dtype.name}")
            handle = ops.var_handle_op(dtype=value.dtype, shape=list(value.shape), shared_name=shared_name,
                                       container=container, debug_name=name or "")
            ops.assign_variable_op(handle, value)
        self._handle = handle
        self._shape: tuple[int, ...] = tuple(value.shape)
        self._dtype: DType = value.dtype
        self._backend: str = value.backend
        self.name = name
        self.trainable = bool(trainable)
        register_handle(handle, self.trainable and value.dtype.is_floating)  # tapes watch it when it is read

    @property
    def _ok_gradient_source(self) -> Tensor:
        """What ``GradientTape`` tracks for the variable (``watch(v)``, ``gradient(loss, v)``):
        its handle, whose gradient is the sum of the gradients of its reads."""
        return self._handle

    # ------------------------------------------------------------ what it is

    @property
    def handle(self) -> Tensor:
        """The scalar ``resource`` tensor naming the variable (an input of the resource
        variable ops)."""
        return self._handle

    @property
    def resource_handle(self) -> ResourceHandle:
        """The :class:`ResourceHandle` the handle tensor holds."""
        found: ResourceHandle = self._handle._value[()]
        return found

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def backend(self) -> str:
        return self._backend

    @property
    def shape(self) -> tuple[int, ...]:
        """The variable's shape: its initial value's, which ``assign`` keeps (as
        ``tf.Variable.assign``); known without a read, so also while tracing."""
        return self._shape

    def is_initialized(self) -> bool:
        """False once the variable has been destroyed by DestroyResourceOp."""
        with engine.use_backend(self._backend):
            return bool(ops.var_is_initialized_op(self._handle).numpy())

    # ------------------------------------------------------------ reads

    def read_value(self) -> Tensor:
        """The variable's value: a tensor that keeps this value whatever happens to the
        variable later.  While tracing, the read is followed by EnsureShape with the
        variable's shape, so the traced graph knows it (and a value of another shape,
        assigned through the raw op, fails the call instead of feeding the graph)."""
        with engine.use_backend(self._backend):
            value = ops.read_variable_op(self._handle, dtype=self._dtype)
            if engine.is_tracing():
                value = ops.ensure_shape(value, shape=list(self._shape))
            return value

    value = read_value

    def numpy(self) -> np.ndarray:
        return self.read_value().numpy()

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def sparse_read(self, indices: TensorLike) -> Tensor:
        """Rows ``indices`` of the value (ResourceGather)."""
        with engine.use_backend(self._backend):
            return ops.resource_gather(self._handle, indices, dtype=self._dtype)

    # ------------------------------------------------------------ updates

    def assign(self, value: TensorLike) -> ResourceVariable:
        """Store a copy of ``value``, of the variable's dtype and shape (as
        ``tf.Variable.assign``; the raw AssignVariableOp may change the shape)."""
        with engine.use_backend(self._backend):
            converted = self._converted(value)
            if tuple(converted.shape) != self._shape and None not in tuple(converted.shape):
                raise InvalidArgumentError(
                    f"ResourceVariable.assign: the variable has shape {list(self._shape)}, the value "
                    f"{list(converted.shape)}; nothing was assigned"
                )
            ops.assign_variable_op(self._handle, converted)
        return self

    def assign_add(self, delta: TensorLike) -> ResourceVariable:
        """variable += delta, atomically (``delta`` has the variable's shape)."""
        with engine.use_backend(self._backend):
            ops.assign_add_variable_op(self._handle, self._converted(delta))
        return self

    def assign_sub(self, delta: TensorLike) -> ResourceVariable:
        """variable -= delta, atomically (``delta`` has the variable's shape)."""
        with engine.use_backend(self._backend):
            ops.assign_sub_variable_op(self._handle, self._converted(delta))
        return self

    def _converted(self, value: TensorLike) -> Tensor:
        return engine.to_tensor(value, self._dtype)

    def __repr__(self) -> str:
        try:
            shown = repr(self.numpy().tolist())
        except Exception as e:  # destroyed: say so instead of failing to print
            shown = f"<{type(e).__name__}>"
        name = f" {self.name!r}" if self.name else ""
        return f"<ok.ResourceVariable{name} dtype={self._dtype.name} backend={self._backend!r} value={shown}>"

    def __reduce__(self) -> Any:
        raise OpTypeError("an ok.ResourceVariable cannot be pickled: its state lives in one process's backend; "
                        "pickle its numpy() value instead")

