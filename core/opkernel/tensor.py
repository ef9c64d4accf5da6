"""Tensors: a native array on one backend plus its opkernel dtype."""

from __future__ import annotations

import math

import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, ContextManager, Iterator, Sequence, overload

import numpy as np

from .dtypes import DType
from .errors import DLPackError, SymbolicTensorError

if TYPE_CHECKING:
    from .backend import Backend
    from .typing import DTypeLike, TensorLike

__all__ = ["Tensor", "TensorRef", "Variable"]


# Tensors sit below everything that computes: a tensor operator calls an op, a Variable
# converts its initial value, ``.to()`` transfers, but this module imports none of the rooms
# that do those things.  Each installs what tensors need from it when it is imported
# (``install``): the runtime its conversion, transfer and context, the package its loader
# of ``opkernel.ops``, which is imported at the first operator.
_OPS: list[Any] = []
_HOOKS: dict[str, Callable[..., Any]] = {}
_HOOK_NAMES = frozenset({"load_ops", "to_tensor", "transfer", "restore_backend", "is_tracing"})


def install(**hooks: Callable[..., Any]) -> None:
    """Install the callbacks tensors need from the rooms above them: ``load_ops()``
    (the ``opkernel.ops`` module), ``to_tensor(data, dtype, backend)``, ``transfer(t,
    backend)``, ``restore_backend(name)`` (the backend an unpickled tensor goes to) and
    ``is_tracing()``."""
    unknown = set(hooks) - _HOOK_NAMES
    if unknown:
        raise TypeError(f"opkernel.tensor.install: unknown hooks {sorted(unknown)}; known: {sorted(_HOOK_NAMES)}")
    _HOOKS.update(hooks)


def _hook(name: str) -> Callable[..., Any]:
    try:
        return _HOOKS[name]
    except KeyError:
        raise RuntimeError(f"opkernel.tensor: no {name!r} is installed (importing opkernel installs it)") from None


def ops_module() -> Any:
    """``opkernel.ops`` (imported on first use, by the loader the package installs)."""
    try:
        return _OPS[0]
    except IndexError:
        ops = _hook("load_ops")()
        _OPS.append(ops)
        return ops


_ops = ops_module


class Tensor:
    """An immutable value on one backend.

    ``value`` is the backend's native array (numpy.ndarray on ``cpu``,
    pyopencl.array.Array on ``opencl``, cupy.ndarray on ``cuda``).
    """

    __slots__ = ("_value", "_dtype", "_backend", "__weakref__")
    __array_priority__ = 100  # numpy defers binary operators to us

    def __init__(self, value: Any, dtype: DType, backend: Backend) -> None:
        self._value = value
        self._dtype = dtype
        self._backend = backend

    @property
    def value(self) -> Any:
        """The backend-native array."""
        return self._value

    @property
    def dtype(self) -> DType:
        return self._dtype

    @property
    def backend(self) -> str:
        """Name of the backend the data lives on."""
        return self._backend.name

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._value.shape)

    @property
    def ndim(self) -> int:
        return len(self._value.shape)

    @property
    def size(self) -> int:
        return math.prod(self._value.shape)

    def numpy(self) -> np.ndarray:
        """The data as a numpy array (synchronises with the device).

        On a host backend it is a read-only view of the tensor's memory: a tensor is a
        value, so writing to it must fail.  Elsewhere it is a copy.
        """
        value = self._value
        a = self._backend.to_numpy(value)
        if a is value or (isinstance(value, np.ndarray) and np.may_share_memory(a, value)):
            a = a.view()
            a.flags.writeable = False
        return a

    def item(self) -> Any:
        return self.numpy().item()

    def to(self, backend: str) -> Tensor:
        """A copy of this tensor on ``backend`` (the same tensor if already there)."""
        return _hook("transfer")(self, backend)  # type: ignore[no-any-return]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        a = self.numpy()
        if dtype is not None and np.dtype(dtype) != a.dtype:
            return a.astype(dtype)
        # np.array(t) asks for a copy: without one, writing to it would change the tensor.
        return a.copy() if copy else a

    def __dlpack_device__(self) -> tuple[int, int]:
        """The DLPack device of the tensor's memory: ``(1, 0)`` (kDLCPU) on host backends,
        ``(2, index)`` (kDLCUDA) on cuda."""
        value = self._value
        if isinstance(value, np.ndarray) or not hasattr(value, "__dlpack_device__"):
            value = self._exporter(None)  # raises where the memory has no DLPack pointer
        device_type, device_id = value.__dlpack_device__()  # a device array's own: no copy to learn it
        return int(device_type), int(device_id)

    def __dlpack__(
        self,
        *,
        stream: Any = None,
        max_version: tuple[int, int] | None = None,
        dl_device: Any = None,
        copy: bool | None = None,
    ) -> Any:
        """A DLPack capsule of the tensor, for ``np.from_dlpack``, ``torch.from_dlpack``,
        ``cupy.from_dlpack``, ``jax.dlpack.from_dlpack`` (docs/c-kernels.md, "DLPack").

        A tensor is a value, so no consumer may write to it.  On host backends the capsule
        shares the tensor's memory and is marked read-only (DLPack 1.0's flag: numpy then
        returns a read-only array); a consumer that asks for a pre-1.0 capsule, which
        cannot carry the flag, gets a copy.  On cuda the consumer gets a copy (CuPy cannot
        mark an export read-only).  ``copy=True`` always copies; ``copy=False`` where a
        copy is needed raises DLPackError."""
        source = self._exporter(copy)
        legacy = max_version is None or int(max_version[0]) < 1
        if isinstance(source, np.ndarray) and not source.flags.writeable and (legacy or copy):
            if copy is False:
                raise DLPackError(
                    "Tensor.__dlpack__: the consumer asked for a pre-1.0 DLPack capsule, which cannot be marked "
                    "read-only, and copy=False: a tensor is a value, so it is exported read-only or as a copy"
                )
            source, copy = source.copy(), None
        kwargs = {"stream": stream}
        for name, value in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy)):
            if value is not None:
                kwargs[name] = value
        return source.__dlpack__(**kwargs)

    def _exporter(self, copy: bool | None) -> Any:
        source = self._backend.dlpack_exporter(self._value, copy)
        if source is None:
            raise DLPackError(
                f"a tensor on backend {self._backend.name!r} cannot be exchanged through DLPack: its memory has no "
                "DLPack pointer; use .numpy() or .to('cpu')",
                backend=self._backend.name,
            )
        return source

    def __len__(self) -> int:
        if not self._value.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self._value.shape[0])

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __float__(self) -> float:
        return float(self.numpy())

    def __int__(self) -> int:
        return int(self.numpy())

    def __repr__(self) -> str:
        body = np.array2string(self.numpy(), separator=", ", threshold=20, edgeitems=3, prefix="ok.Tensor(")
        return f"ok.Tensor({body}, dtype={self._dtype.name}, backend={self.backend!r})"

    # A tensor pickles as what it means (dtype, values, backend name), never as the
    # backend's native array or the backend object, which do not survive a process.
    def __reduce__(self) -> tuple[Any, ...]:
        return _restore_tensor, (self._dtype.name, np.array(self.numpy()), self.backend)

    def __deepcopy__(self, memo: dict[int, Any]) -> Tensor:
        return Tensor(self._backend.copy(self._value), self._dtype, self._backend)

    # Operators map to registered ops and dispatch like any other call.  Each is
    # bound to the op's generated wrapper on first use (see _bind_operator).
    def __add__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__add__")(self, other)

    def __radd__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__radd__")(self, other)

    def __sub__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__sub__")(self, other)

    def __rsub__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rsub__")(self, other)

    def __mul__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__mul__")(self, other)

    def __rmul__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rmul__")(self, other)

    def __truediv__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__truediv__")(self, other)

    def __rtruediv__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rtruediv__")(self, other)

    def __neg__(self) -> Tensor:
        return _bind_operator("__neg__")(self)

    # ``a @ b`` is tf.matmul: MatMul on matrices, BatchMatMul (TensorFlow's BatchMatMulV2,
    # broadcasting batch dimensions) when either operand has rank 3 or more.
    def __matmul__(self, other: TensorLike) -> Tensor:
        try:  # the common case first: two matrices (an ndarray has .ndim too)
            if _MAT_MUL and self.ndim <= 2 and other.ndim <= 2:  # type: ignore[union-attr]
                return _MAT_MUL[0](self, other)
        except (AttributeError, SymbolicTensorError):
            pass
        return _matmul(self, other)

    def __rmatmul__(self, other: TensorLike) -> Tensor:
        return _matmul(other, self)

    def __pow__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__pow__")(self, other)

    def __rpow__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rpow__")(self, other)

    def __mod__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__mod__")(self, other)

    def __rmod__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rmod__")(self, other)

    def __floordiv__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__floordiv__")(self, other)

    def __rfloordiv__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__rfloordiv__")(self, other)

    # Comparisons are elementwise and give bool tensors, as TensorFlow 2's do; a tensor is
    # therefore unhashable (use ``t.ref()`` as a key).  ``t == None`` is False, as there.
    @overload  # type: ignore[override]
    def __eq__(self, other: None) -> bool: ...
    @overload
    def __eq__(self, other: TensorLike) -> Tensor: ...

    def __eq__(self, other: Any) -> Any:
        if other is None:
            return False
        return _ops().equal(self, other)

    @overload  # type: ignore[override]
    def __ne__(self, other: None) -> bool: ...
    @overload
    def __ne__(self, other: TensorLike) -> Tensor: ...

    def __ne__(self, other: Any) -> Any:
        if other is None:
            return True
        return _ops().not_equal(self, other)

    def __lt__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__lt__")(self, other)

    def __le__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__le__")(self, other)

    def __gt__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__gt__")(self, other)

    def __ge__(self, other: TensorLike) -> Tensor:
        return _bind_operator("__ge__")(self, other)

    def __hash__(self) -> int:
        raise TypeError("ok.Tensor is unhashable (== compares elementwise); use tensor.ref() as the key")

    def ref(self) -> TensorRef:
        """A hashable reference to this tensor (by identity), for dict keys and sets;
        ``ref.deref()`` gives the tensor back (TensorFlow's ``Tensor.ref()``)."""
        return TensorRef(self)

    def __abs__(self) -> Tensor:
        ops = _ops()
        if self._dtype.is_complex:
            return ops.complex_abs(self, Tout=self._dtype.real_dtype)  # type: ignore[no-any-return]
        return ops.abs(self)  # type: ignore[no-any-return]

    def __invert__(self) -> Tensor:
        if self._dtype.name != "bool":
            raise TypeError(f"~ is the logical not of a bool tensor; this one is {self._dtype.name}")
        return _ops().logical_not(self)  # type: ignore[no-any-return]

    def __getitem__(self, key: Any) -> Tensor:
        """Python indexing, as TensorFlow's: ints, slices with steps, ``...`` and ``None``
        (one StridedSlice op); an int tensor, array or list of ints picks rows (GatherV2
        on axis 0).  Recorded on tapes and traced like any op."""
        return _index(self, key)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError("ok.Tensor does not support item assignment: a tensor is a value (a Variable's "
                        "assign ops replace a whole value)")

    def __iter__(self) -> Iterator[Tensor]:
        if not self._value.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(int(self._value.shape[0])))

    @property
    def T(self) -> Tensor:
        """The transpose: the axes in reverse order (numpy's ``.T``)."""
        return _ops().transpose(self, list(range(self.ndim))[::-1])  # type: ignore[no-any-return]

    def reshape(self, *shape: Any) -> Tensor:
        """``ok.ops.reshape``: ``t.reshape(2, -1)`` or ``t.reshape((2, -1))``."""
        dims = shape[0] if len(shape) == 1 and isinstance(shape[0], (list, tuple, Tensor, np.ndarray)) else shape
        return _ops().reshape(self, dims)  # type: ignore[no-any-return]

    def astype(self, dtype: DTypeLike) -> Tensor:
        """``ok.ops.cast`` to ``dtype`` (this tensor itself when it has that dtype)."""
        from .dtypes import as_dtype

        if as_dtype(dtype) is self._dtype:
            return self
        return _ops().cast(self, DstT=dtype)  # type: ignore[no-any-return]

    cast = astype

    def sum(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        """The sum over ``axis`` (all axes when None), as numpy's."""
        return _ops().sum(self, _axes(self, axis), keep_dims=keepdims)  # type: ignore[no-any-return]

    def mean(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _ops().mean(self, _axes(self, axis), keep_dims=keepdims)  # type: ignore[no-any-return]

    def max(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _ops().max(self, _axes(self, axis), keep_dims=keepdims)  # type: ignore[no-any-return]

    def min(self, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Tensor:
        return _ops().min(self, _axes(self, axis), keep_dims=keepdims)  # type: ignore[no-any-return]

    def argmax(self, axis: int | None = None) -> Tensor:
        """The index of the largest element along ``axis`` (of the flattened tensor when
        None, as numpy's), as int64."""
        ops = _ops()
        if axis is None:
            return ops.arg_max(ops.reshape(self, [-1]), 0)  # type: ignore[no-any-return]
        return ops.arg_max(self, axis)  # type: ignore[no-any-return]


_OPERATORS = {
    "__add__": ("add", False), "__radd__": ("add", True), "__sub__": ("sub", False), "__rsub__": ("sub", True),
    "__mul__": ("mul", False), "__rmul__": ("mul", True), "__truediv__": ("real_div", False),
    "__rtruediv__": ("real_div", True), "__neg__": ("neg", False), "__pow__": ("pow", False), "__rpow__": ("pow", True),
    "__mod__": ("floor_mod", False), "__rmod__": ("floor_mod", True), "__floordiv__": ("floor_div", False),
    "__rfloordiv__": ("floor_div", True), "__lt__": ("less", False), "__le__": ("less_equal", False),
    "__gt__": ("greater", False), "__ge__": ("greater_equal", False),
}


class TensorRef:
    """A hashable reference to a tensor, by identity (``Tensor.ref()``)."""

    __slots__ = ("_tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self._tensor = tensor

    def deref(self) -> Tensor:
        return self._tensor

    def __hash__(self) -> int:
        return id(self._tensor)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TensorRef) and other._tensor is self._tensor

    def __repr__(self) -> str:
        return f"<ok.Tensor reference {id(self._tensor):#x}>"


def _axes(t: Tensor, axis: int | Sequence[int] | None) -> Any:
    if axis is None:
        return list(range(t.ndim))
    return axis


def _index(t: Tensor, key: Any) -> Tensor:
    """``t[key]``: one StridedSlice op for ints, slices, ``...`` and ``None`` (TensorFlow's
    ``_slice_helper``); one GatherV2 on axis 0 for an int tensor, array or list."""
    ops = _ops()
    if isinstance(key, (Tensor, np.ndarray, list)):
        dtype = key._dtype.name if isinstance(key, Tensor) else np.asarray(key).dtype.kind
        if dtype in ("bool", "b"):
            raise TypeError("indexing with a bool mask is not supported; use ok.ops.where to find the indices, "
                            "then index with them")
        return ops.gather_v2(t, key, 0)  # type: ignore[no-any-return]
    parts = key if isinstance(key, tuple) else (key,)
    begin: list[int] = []
    end: list[int] = []
    strides: list[int] = []
    masks = {"begin_mask": 0, "end_mask": 0, "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
    for i, part in enumerate(parts):
        bit = 1 << i
        if part is Ellipsis:
            masks["ellipsis_mask"] |= bit
            begin += [0]
            end += [0]
            strides += [1]
        elif part is None:
            masks["new_axis_mask"] |= bit
            begin += [0]
            end += [0]
            strides += [1]
        elif isinstance(part, slice):
            step = 1 if part.step is None else _int_index(part.step, key)
            if step == 0:
                raise ValueError(f"slice step cannot be zero, in index {key!r}")
            if part.start is None:
                masks["begin_mask"] |= bit
            if part.stop is None:
                masks["end_mask"] |= bit
            begin.append(0 if part.start is None else _int_index(part.start, key))
            end.append(0 if part.stop is None else _int_index(part.stop, key))
            strides.append(step)
        else:
            k = _int_index(part, key)
            masks["shrink_axis_mask"] |= bit
            begin += [k]
            end += [k + 1]
            strides += [1]
    return ops.strided_slice(t, begin, end, strides, **masks)  # type: ignore[no-any-return]


def _int_index(part: Any, key: Any) -> int:
    if isinstance(part, (bool, np.bool_)) or not isinstance(part, (int, np.integer)):
        raise TypeError(
            f"a tensor index is an int, a slice of ints, ..., None, or (alone) an int tensor, array or list; "
            f"got {type(part).__name__} {part!r} in {key!r}"
        )
    return int(part)


def _backend_or_active(name: str) -> Backend:
    """The backend a pickled tensor lived on, or the active one when it is not installed here."""
    return _hook("restore_backend")(name)  # type: ignore[no-any-return]


def _restore_tensor(dtype: str, value: np.ndarray, backend: str) -> Tensor:
    from .dtypes import as_dtype

    be = _backend_or_active(backend)
    return Tensor(be.from_numpy(value), as_dtype(dtype), be)


def _tracing() -> bool:
    """Whether ``ok.function`` is tracing in this context."""
    return bool(_hook("is_tracing")())


def _restore_variable(dtype: str, value: np.ndarray, backend: str, trainable: bool, name: str | None) -> Variable:
    from .dtypes import as_dtype

    be = _backend_or_active(backend)
    return Variable(Tensor(be.from_numpy(value), as_dtype(dtype), be), trainable=trainable, name=name)


class _Probe:
    __slots__ = ("held",)
    held: object


class _Locks:
    """The locks of several variables, taken in one global order (by id) so that two
    updates of the same variables in different argument orders cannot deadlock."""

    __slots__ = ("locks",)

    def __init__(self, variables: tuple[Variable, ...]) -> None:
        unique = {id(v): v._lock for v in variables}
        self.locks = [unique[k] for k in sorted(unique)]

    def __enter__(self) -> None:
        for lock in self.locks:
            lock.acquire()

    def __exit__(self, *exc: object) -> None:
        for lock in reversed(self.locks):
            lock.release()


def update_lock(*variables: Variable) -> ContextManager[Any]:
    """What an in-place update of ``variables`` holds: one variable's lock, or all of
    theirs in a fixed order (none for no variables)."""
    if len(variables) == 1:
        return variables[0]._lock
    return _Locks(variables)


def _most_refs(objects: tuple[Any, ...]) -> int:
    """The largest reference count among ``objects`` (a loop, not a comprehension and
    max(): it runs before every in-place update of a Variable)."""
    most = 0
    for o in objects:
        n = sys.getrefcount(o)
        if n > most:
            most = n
    return most


def _sole_holder_refcount() -> int:
    probe = _Probe()
    probe.held = object()
    return _most_refs((probe.held,))


#: What ``_most_refs`` reports for an object held by one attribute and the tuple passed
#: in.  Measured rather than assumed: interpreters differ in the references they count.
_SOLE_HOLDER = _sole_holder_refcount()


def _rank(x: Any) -> int:
    """The rank of an operand of ``@``; 2 when it is unknown at trace time (MatMul then
    says what it needs)."""
    if isinstance(x, Tensor):
        try:
            return x.ndim
        except SymbolicTensorError:
            return 2
    return int(np.ndim(x))


#: ``ok.ops.mat_mul``, once ``@`` has been used (its wrapper holds the op's handle, which
#: stays valid when plugins change).
_MAT_MUL: list[Callable[..., Tensor]] = []


def _matmul(a: TensorLike, b: TensorLike) -> Tensor:
    """``a @ b`` as tf.matmul: MatMul for matrices, BatchMatMul when a rank is above 2."""
    ops = _ops()
    if not _MAT_MUL:
        _MAT_MUL.append(ops.mat_mul)
    if _rank(a) > 2 or _rank(b) > 2:
        return ops.batch_mat_mul(a, b)  # type: ignore[no-any-return]
    return _MAT_MUL[0](a, b)


def _bind_operator(dunder: str) -> Callable[..., Tensor]:
    """Replace ``Tensor.<dunder>`` by the op's wrapper itself (or its argument swap),
    so later uses cost one call; returns it.  The wrapper holds the op's handle,
    which stays valid when plugins change."""
    op_name, swapped = _OPERATORS[dunder]
    fn = getattr(_ops(), op_name)
    method: Callable[..., Tensor] = (lambda self, other: fn(other, self)) if swapped else fn
    setattr(Tensor, dunder, method)
    return method


class Variable(Tensor):
    """A mutable tensor: the only thing a ``Ref`` input accepts.

    Kernels receive its native array and may update it in place; ``assign``,
    ``assign_add`` and ``assign_sub`` run the registered ops of those names, so
    they work on every backend without copying the variable.  The initial value
    is always copied, so updates never reach the caller's data.

    Reading a variable (an op input, ``.numpy()``, ``read_value()``) never copies
    it, and an op may return a view of its memory (Identity, Reshape, a full
    Slice).  Those are values, so before an in-place update a variable whose memory
    is still held by anything else moves to a copy (copy-on-write, as TensorFlow's
    resource variables do): the views keep the value they had.

    Updates are atomic per variable, as TensorFlow's resource variables' are (and
    whatever ``use_locking`` says): every op that takes the variable as a ``Ref``
    input holds its lock from the copy-on-write check to the version bump, so
    concurrent ``assign_add`` calls from several threads lose no increment.  Reads
    take no lock.  On a device backend the lock covers queueing the update on the
    backend's in-order queue, which orders the updates themselves.
    """

    __slots__ = ("trainable", "name", "_version", "_borrowed", "_lock")

    def __init__(
        self, initial_value: TensorLike, dtype: DTypeLike | None = None, *, trainable: bool = True, name: str | None = None
    ) -> None:
        to_tensor = _hook("to_tensor")
        if isinstance(initial_value, Tensor):
            t = to_tensor(initial_value.numpy(), dtype or initial_value.dtype, initial_value.backend)  # copies
        else:
            t = to_tensor(initial_value, dtype)
        super().__init__(t._value, t._dtype, t._backend)
        self.trainable = trainable
        self.name = name
        self._version = 0  # bumped by every op that takes it as a Ref input (tapes check it)
        self._borrowed = False
        self._lock = threading.Lock()  # held by every in-place update (update_lock)

    @classmethod
    def _view(cls, value: Any, dtype: DType, backend: Backend) -> Variable:
        """A Variable sharing ``value`` (generic kernels receive Ref inputs this way)."""
        v = cls.__new__(cls)
        Tensor.__init__(v, value, dtype, backend)
        v.trainable = False
        v.name = None
        v._version = 0
        # The view stands for a variable inside one call, which made that variable's
        # memory private first (``_unshare``); the view must update it, not a copy.
        v._borrowed = True
        v._lock = threading.Lock()  # the call holds the variable's own lock
        return v

    def _unshare(self) -> None:
        """Copy-on-write: called before a kernel updates this variable in place.  When
        any object besides this variable holds its memory (an op output that is a view
        of it, an array from ``.numpy()``), the variable moves to a copy first."""
        if self._borrowed:
            return
        be = self._backend
        owners = be.memory_owners(self._value)
        if owners is None or _most_refs(owners) > _SOLE_HOLDER:
            self._value = be.copy(self._value)

    def assign(self, value: TensorLike) -> Variable:
        _ops().assign(self, value)
        return self

    def assign_add(self, value: TensorLike) -> Variable:
        _ops().assign_add(self, value)
        return self

    def assign_sub(self, value: TensorLike) -> Variable:
        _ops().assign_sub(self, value)
        return self

    def read_value(self) -> Tensor:
        """A snapshot: a tensor that later updates of the variable do not change (they
        copy the variable first while the snapshot holds its memory).  While
        ``ok.function`` traces, an Identity op: every replay reads the variable then."""
        if not self._borrowed and _tracing():
            return _ops().identity(self)  # type: ignore[no-any-return]
        return Tensor(self._value, self._dtype, self._backend)

    def numpy(self) -> np.ndarray:
        if not self._borrowed and _tracing():
            raise SymbolicTensorError(
                f"variable {self.name!r}: .numpy() (or numpy conversion) while ok.function traces would bake its "
                "current value into the graph; use the variable in ops, or var.read_value(), to read it on every call"
            )
        return super().numpy()

    def __repr__(self) -> str:
        if not self._borrowed and _tracing():
            return f"ok.Variable(<read while tracing>, shape={self.shape}, dtype={self._dtype.name}, name={self.name!r})"
        return "ok.Variable" + super().__repr__()[len("ok.Tensor"):]

    def __reduce__(self) -> tuple[Any, ...]:
        return _restore_variable, (self._dtype.name, np.array(self.numpy()), self.backend, self.trainable, self.name)

    def __deepcopy__(self, memo: dict[int, Any]) -> Variable:
        return Variable(self, trainable=self.trainable, name=self.name)
