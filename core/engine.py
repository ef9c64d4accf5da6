"""The engine: the active backend, conversion of inputs, and op dispatch.

The path of one call (``ok.ops.add(x, y)``):

1. the generated wrapper calls ``execute(op, inputs, attrs)``;
2. fast path: when every input is a tensor on the active backend, the key
   ``(backend, label, input dtypes, attrs)`` finds a cached ``_Signature`` and
   its kernel runs at once;
3. otherwise ``_bind`` converts host data to tensors, infers type and length
   attrs from the inputs, fills defaults, validates everything against the
   OpDef, and finds or builds the ``_Signature`` (kernel lookup, kernel
   construction, output dtypes), which is cached under both keys.
"""

from __future__ import annotations

import copy
import inspect
import keyword
import math
import numbers
import os
import threading
import time
import warnings
from collections import namedtuple
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from . import kernels as kernel_registry
from . import op_registry, plugins
from .autodiff import RECORDING, install_placement, record_op, record_single, record_transfer
from .backend import Backend
from .dtypes import DType, as_dtype
from .errors import (
    BackendNotFoundError,
    BackendUnavailableError,
    InvalidArgumentError,
    KernelFallbackWarning,
    KernelNotFoundError,
    OpkernelError,
    OpTypeError,
    ResourceExhaustedError,
)
from .kernels import GENERIC, KernelDef, OpKernelConstruction, OpKernelContext
from .op_registry import ArgDef, OpDef
from .shapes import output_size_inputs
from .tensor import Tensor, Variable, update_lock

__all__ = [
    "available_backends",
    "get_backend",
    "set_backend",
    "use_backend",
    "kernel_fallback",
    "backend_instance",
    "backend_status",
    "kernel_label_map",
    "to_tensor",
    "transfer",
    "execute",
    "op_handle",
    "select_kernel",
    "config",
]


#: The most threads one op may be split across: more than any core count the pools are
#: tuned for, few enough that a typo cannot start thousands of OS threads.
MAX_INTRA_OP_THREADS = 256


class _Config:
    """Process-wide settings (``ok.config``).

    ``transfer_policy``: ``"error"`` (default) makes a tensor on another backend
    an error; ``"copy"`` copies it to the active backend (counted in
    ``transfers``).
    ``intra_op_parallelism_threads``: how many threads a backend may split one
    large op across (TensorFlow's setting of that name): an int from 0 to
    ``MAX_INTRA_OP_THREADS``; 0 means the core count (the default, capped at
    that maximum); 1 keeps every op on the calling thread.
    ``kernel_fallback``: the backends, in order, that run a call the active
    backend has no kernel for (default ``()``: none, the call is a
    ``KernelNotFoundError``); the environment variable
    ``OPKERNEL_KERNEL_FALLBACK=cpu[,name...]`` sets it at startup and
    ``with ok.kernel_fallback("cpu"):`` for one context.
    ``fallbacks``: how many calls fell back, by (op, from backend, to backend).
    """

    _intra_op_threads: int

    def __init__(self) -> None:
        self.transfer_policy = "error"
        self.transfers = 0
        self.intra_op_parallelism_threads = min(os.cpu_count() or 1, MAX_INTRA_OP_THREADS)
        # Names only: checked against the installed backends when a fallback is first
        # looked for, so that reading the variable does not discover plugins at import.
        self._kernel_fallback: tuple[str, ...] = _fallback_names(
            os.environ.get("OPKERNEL_KERNEL_FALLBACK", "").split(","), "OPKERNEL_KERNEL_FALLBACK", check=False
        )
        self._fallbacks: dict[tuple[str, str, str], int] = {}

    @property
    def kernel_fallback(self) -> tuple[str, ...]:
        """The fallback backends in effect in this context (``ok.kernel_fallback`` blocks included)."""
        scoped = _FALLBACK.get()
        return self._kernel_fallback if scoped is None else scoped

    @kernel_fallback.setter
    def kernel_fallback(self, names: Sequence[str]) -> None:
        self._kernel_fallback = _fallback_names(names, "ok.config.kernel_fallback")

    @property
    def fallbacks(self) -> Mapping[tuple[str, str, str], int]:
        """A read-only snapshot: calls that ran on a fallback backend, by (op, from, to)."""
        with _lock:
            return MappingProxyType(dict(self._fallbacks))

    @property
    def intra_op_parallelism_threads(self) -> int:
        return self._intra_op_threads

    @intra_op_parallelism_threads.setter
    def intra_op_parallelism_threads(self, n: int) -> None:
        # Checked here, where the mistake is made: a backend reads it in the middle of
        # an op, where a bad value would start thousands of threads or fail every call.
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise OpTypeError(f"ok.config.intra_op_parallelism_threads must be an int, got {type(n).__name__} {n!r}")
        if not 0 <= n <= MAX_INTRA_OP_THREADS:
            raise InvalidArgumentError(
                f"ok.config.intra_op_parallelism_threads must be between 0 (the core count) and "
                f"{MAX_INTRA_OP_THREADS}, got {n}"
            )
        self._intra_op_threads = int(n)


def _fallback_names(names: Any, what: str, check: bool = True) -> tuple[str, ...]:
    """``names`` as a tuple of backend names, in order, without repeats or blanks;
    ``check``: each must be an installed backend (one installed but unavailable
    here is allowed: a fallback skips it)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise OpTypeError(
            f"{what} must be a tuple of backend names, such as ('cpu',), got {type(names).__name__} {names!r}"
        )
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise OpTypeError(f"{what} must hold backend names (str), got {type(name).__name__} {name!r}")
        name = name.strip()
        if name and name not in out:
            out.append(name)
    if check:
        installed = plugins.backend_classes()
        for name in out:
            if name not in installed:
                raise _unknown_backend(name)
    return tuple(out)


#: The kernel fallback of this context (``ok.kernel_fallback``); None: ``config``'s.
_FALLBACK: ContextVar[tuple[str, ...] | None] = ContextVar("opkernel_kernel_fallback", default=None)

config = _Config()

# ---------------------------------------------------------------- backends

_ACTIVE: ContextVar[Backend | None] = ContextVar("opkernel_backend", default=None)
_LABELS: ContextVar[Mapping[str, str] | None] = ContextVar("opkernel_kernel_labels", default=None)
_lock = threading.RLock()
#: The process-wide default backend, in a cell that generated wrappers read directly.
_DEFAULT: list[Backend | None] = [None]
#: How many blocks that need the general dispatch path are open in any context
#: (kernel_label_map, profile); while 0, generated wrappers may take their fast path.
_SLOW_SCOPES = [0]
#: The active profilers (ok.profile); execute() reports every call to each.
_PROFILERS: list[Any] = []
#: While ok.function traces in this context: the callback that records a call as a graph
#: node instead of running it (the tracer holds a _SLOW_SCOPES count, so every call comes here).
_TRACER: ContextVar[Callable[..., Any] | None] = ContextVar("opkernel_tracer", default=None)
_instances: dict[str, Backend] = {}
_init_errors: dict[str, str] = {}


def _classes_by_priority() -> list[tuple[str, type[Backend]]]:
    classes = plugins.backend_classes()
    return sorted(((n, c) for n, (c, _) in classes.items()), key=lambda nc: (-nc[1].priority, nc[0]))


def _unavailable_reason(name: str, cls: type[Backend]) -> str | None:
    if name in _init_errors:
        return _init_errors[name]
    try:
        return cls.availability()
    except Exception as e:  # availability() must not raise; treat it as unavailable if it does
        return f"availability check raised {type(e).__name__}: {e}"


def backend_status() -> list[tuple[str, int, str | None]]:
    """(name, priority, reason it is unavailable or None) for every installed backend."""
    return [(n, c.priority, _unavailable_reason(n, c)) for n, c in _classes_by_priority()]


def available_backends() -> list[str]:
    """Names of the backends usable here, highest priority first."""
    return [n for n, _, reason in backend_status() if reason is None]


def _unknown_backend(name: str) -> BackendNotFoundError:
    status = backend_status()
    names = [n for n, _, _ in status]
    for n, _, reason in status:
        if n == name:
            return BackendUnavailableError(
                f"backend {name!r} is installed but not available: {reason}. "
                f"Available backends: {available_backends()}.",
                backend=name,
            )
    failure = plugins.failure_of(name)
    if failure is not None:  # installed, but its plugin is broken: say so, not "pip install"
        return BackendNotFoundError(
            f"backend {name!r} cannot be used: {failure.failed_to_load()}. Installed backends: {names}; "
            "`opkernel info` lists plugin errors.",
            backend=name,
        )
    import difflib  # only for this error message; not imported with opkernel

    hint = difflib.get_close_matches(name, names, n=1)
    did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
    return BackendNotFoundError(
        f"unknown backend {name!r}; installed backends: {names}.{did_you_mean} "
        f"Backends come from plugins (pip install opkernel-{name}).",
        backend=name,
    )


def backend_instance(name: str) -> Backend:
    """The (lazily initialised) backend called ``name``."""
    inst = _instances.get(name)
    if inst is not None:
        return inst
    plugins.ensure_loaded()  # before taking _lock: loading holds the plugin lock, then its listeners take ours
    with _lock:
        if name in _instances:
            return _instances[name]
        classes = plugins.backend_classes()
        if name not in classes:
            raise _unknown_backend(name)
        cls = classes[name][0]
        if _unavailable_reason(name, cls) is not None:
            raise _unknown_backend(name)
        try:
            inst = cls()
        except Exception as e:
            _init_errors[name] = f"initialisation failed: {type(e).__name__}: {e}"
            raise _unknown_backend(name) from e
        _instances[name] = inst
        return inst


def _default_backend() -> Backend:
    be = _DEFAULT[0]
    if be is not None:
        return be
    plugins.ensure_loaded()  # before taking _lock, as in backend_instance
    with _lock:
        be = _DEFAULT[0]
        if be is None:
            wanted = os.environ.get("OPKERNEL_BACKEND")
            be = _DEFAULT[0] = backend_instance(wanted) if wanted else _first_usable_backend()
        return be


def _first_usable_backend() -> Backend:
    """The available backend of highest priority whose initialisation succeeds.

    A backend whose ``__init__`` raises is skipped with a warning (and reported
    as unavailable from then on), so the default does not depend on whether
    it was tried before.
    """
    for name in available_backends():
        try:
            return backend_instance(name)
        except BackendUnavailableError as e:
            warnings.warn(f"{e} Falling back to the next backend.", RuntimeWarning, stacklevel=4)
    raise BackendNotFoundError(
        "no backend is available. Install one (pip install opkernel-cpu); "
        f"installed: {[(n, r) for n, _, r in backend_status()]}"
    )


def active_backend() -> Backend:
    """The backend ops dispatch to in this context."""
    return _ACTIVE.get() or _default_backend()


def get_backend() -> str:
    """Name of the active backend."""
    return active_backend().name


def set_backend(name: str) -> None:
    """Make ``name`` the process-wide default backend.

    ``use_backend`` overrides it for one context (thread or asyncio task).
    """
    _DEFAULT[0] = backend_instance(name)


@contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    """Dispatch to ``name`` inside the block, in this context only."""
    token = _ACTIVE.set(backend_instance(name))
    try:
        yield _ACTIVE.get()  # type: ignore[misc]
    finally:
        _ACTIVE.reset(token)


@contextmanager
def kernel_fallback(*names: str) -> Iterator[tuple[str, ...]]:
    """Inside the block, in this context only (thread or asyncio task), a call the
    active backend has no kernel for runs on the first of ``names`` that has one:
    ``with ok.kernel_fallback("cpu"):``.  No names: no fallback in the block."""
    token = _FALLBACK.set(_fallback_names(names, "ok.kernel_fallback"))
    try:
        yield _FALLBACK.get()  # type: ignore[misc]
    finally:
        _FALLBACK.reset(token)


@contextmanager
def kernel_label_map(labels: Mapping[str, str]) -> Iterator[None]:
    """Choose kernels by label per op inside the block (TensorFlow's ``_kernel`` attr)."""
    outer = _LABELS.get() or {}
    token = _LABELS.set({**outer, **labels})
    with _lock:
        _SLOW_SCOPES[0] += 1
    try:
        yield
    finally:
        with _lock:
            _SLOW_SCOPES[0] -= 1
        _LABELS.reset(token)


def _reset_backends_for_tests() -> None:
    with _lock:
        _DEFAULT[0] = None
        _instances.clear()
        _init_errors.clear()
        _reset_handles()


def _on_plugins_changed() -> None:
    """Drop op handles, and instances of backends whose class is no longer provided
    (a removed plugin's backend must not stay usable through the instance cache)."""
    _reset_handles()
    with _lock:
        provided = {n: c for n, (c, _) in plugins.backend_classes().items()}
        for name in [n for n, inst in _instances.items() if provided.get(n) is not type(inst)]:
            del _instances[name]
        for name in [n for n in _init_errors if n not in provided]:
            del _init_errors[name]
        default = _DEFAULT[0]
        if default is not None and _instances.get(default.name) is not default:
            _DEFAULT[0] = None


plugins.on_change(_on_plugins_changed)

# ---------------------------------------------------------------- tensors

_PY_DEFAULTS = {bool: "bool", int: "int32", float: "float32", complex: "complex64", str: "string", bytes: "string"}


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
#: A float array whose largest magnitude reaches this may hold Python ints that
#: fit neither int64 nor uint64 (numpy reads ``[-1, 2**63]`` as float64).
_INT64_SPAN = 2.0**63


def _kind_name(x: Any) -> str:
    return type(x).__name__


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _range_of(dtype: DType) -> str:
    if dtype.is_integer or dtype.is_quantized:
        return f" (its range is [{dtype.min}, {dtype.max}])"
    return ""


def _bad_leaf(value: Any, strings: bool) -> tuple[str, Any] | None:
    """The first element of a nested list or tuple that cannot be a tensor element:
    (where, element).  ``strings``: the elements must all be str or bytes."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, x = stack.pop()
        if isinstance(x, (list, tuple)):
            stack.extend((f"{where}[{k}]", v) for k, v in reversed(list(enumerate(x))))
            continue
        if strings:
            if not isinstance(x, (str, bytes, np.str_, np.bytes_)):
                return where, x
        elif isinstance(x, (str, bytes, np.str_, np.bytes_)):
            return where, x
        elif isinstance(x, int) and not isinstance(x, bool) and not -(2**63) <= x < 2**64:
            return where, x
        elif not isinstance(x, (bool, int, float, complex, np.generic, np.ndarray, Tensor)):
            if not hasattr(x, "__array__"):
                return where, x
    return None


def _check_object_array(arr: np.ndarray, what: str, op: str | None) -> None:
    """An object array becomes a string tensor only when it holds str and bytes alone, as
    TensorFlow takes it; numbers, None, lists and other objects are refused."""
    for k, x in enumerate(arr.flat):
        if not isinstance(x, (str, bytes, np.str_, np.bytes_)):
            where = f"[{', '.join(str(int(i)) for i in np.unravel_index(k, arr.shape))}]" if arr.ndim else ""
            raise OpTypeError(
                f"{what}: cannot convert a numpy object array to a tensor: its element {where or '(0-d)'} is "
                f"{_kind_name(x)} {_shown(x)}; an object array must hold str or bytes only (a string tensor), "
                "other values need a numeric array (e.g. np.array(values, dtype=np.float32))",
                op=op,
            )


def _only_ints(value: Any) -> bool:
    """Whether every element of a nested list or tuple is a Python int (not a bool)."""
    if isinstance(value, (list, tuple)):
        return all(_only_ints(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool)


def _ragged_where(value: Any) -> str:
    """Where a nested list first stops being rectangular, for the error message."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        where, x = stack.pop()
        if not isinstance(x, (list, tuple)):
            continue
        kinds = {isinstance(v, (list, tuple)) for v in x}
        if len(kinds) > 1:
            return f"{where or 'the value'} mixes lists and scalars"
        lengths = [len(v) for v in x if isinstance(v, (list, tuple))]
        if len(set(lengths)) > 1:
            k = next(k for k, n in enumerate(lengths) if n != lengths[0])
            return f"element {where}[{k}] has length {lengths[k]} where element {where}[0] has length {lengths[0]}"
        stack.extend((f"{where}[{k}]", v) for k, v in enumerate(x))
    return "its nested lists differ in length"


def _describe_leaf(where: str, x: Any, strings: bool = False) -> str:
    at = f" at {where}" if where else ""
    if isinstance(x, int) and not isinstance(x, bool) and not strings:
        return f"the integer {x}{at} fits neither int64 nor uint64"
    hint = "; make it a list first (list(...))" if isinstance(x, (Iterator, set, frozenset)) else ""
    return (
        f"{_shown(x)} ({_kind_name(x)}){at} is not a number, str or bytes; expected those, nested lists "
        f"or tuples of them, a numpy array or a tensor{hint}"
    )


def _literal_array(value: Any, what: str, op: str | None, strings: bool = False) -> np.ndarray:
    """numpy's reading of a Python value, refusing what would not make a faithful tensor:
    None, sets, dicts, iterators and other objects (numpy would wrap them in an object
    array, which became a string tensor, or read None as NaN), integers beyond uint64,
    and ragged nested lists.  ``strings``: the value is meant for a string tensor."""
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.asarray(value)
        if arr.dtype.kind == "O":  # a string tensor's host form, when every element is str or bytes
            _check_object_array(arr, what, op)
        return arr
    try:
        arr = np.asarray(value)
    except ValueError as e:
        if isinstance(value, (list, tuple)):
            raise InvalidArgumentError(
                f"{what}: a nested list must be rectangular to become a tensor: {_ragged_where(value)}",
                op=op,
            ) from e
        raise InvalidArgumentError(f"{what}: cannot convert {_kind_name(value)} to a tensor: {e}", op=op) from e
    except OverflowError as e:
        bad = _bad_leaf(value, False)
        detail = _describe_leaf(*bad) if bad else str(e)
        raise InvalidArgumentError(f"{what}: cannot convert the value to a tensor: {detail}", op=op) from e
    kind = arr.dtype.kind
    suspicious = (
        kind == "O"
        or (kind in "US" and not isinstance(value, (str, bytes)))
        or (strings and kind not in "US")
        or (kind == "f" and isinstance(value, (list, tuple)) and arr.size and float(np.abs(arr).max()) >= _INT64_SPAN)
    )
    if kind == "f" and suspicious and _only_ints(value):
        raise InvalidArgumentError(
            f"{what}: cannot convert the value to a tensor: its integers span [{int(np.min(arr))}, "
            f"{int(np.max(arr))}], which neither int64 nor uint64 holds",
            op=op,
        )
    if suspicious:
        text = strings or kind in "US"
        bad = _bad_leaf(value, text)
        if bad is not None:
            error = InvalidArgumentError if isinstance(bad[1], int) and not text else OpTypeError
            expected = "; a string tensor holds str or bytes" if text else ""
            raise error(f"{what}: cannot convert the value to a tensor: {_describe_leaf(*bad, text)}{expected}", op=op)
    return arr


def _natural_dtype(value: Any, what: str = "ok.tensor", op: str | None = None) -> DType:
    """The dtype a Python literal converts to when nothing else says (TensorFlow's rule:
    int32 for integers that fit it, else int64)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return as_dtype(value.dtype)
    if value.__class__ is int:  # the common literal, without building an array
        if _INT32_MIN <= value <= _INT32_MAX:
            return as_dtype("int32")
    arr = _literal_array(value, what, op)
    if arr.dtype.kind == "f":
        return as_dtype("float32")
    if arr.dtype.kind == "i":
        fits = not arr.size or (int(arr.min()) >= _INT32_MIN and int(arr.max()) <= _INT32_MAX)
        return as_dtype("int32" if fits else "int64")
    if arr.dtype.kind == "u":  # numpy's reading of integers in [2**63, 2**64)
        return as_dtype("uint64")
    if arr.dtype.kind == "c":
        return as_dtype("complex64")
    if arr.dtype.kind in "US":
        return as_dtype("string")
    return as_dtype(arr.dtype)


def _host_array(value: Any, dtype: DType, what: str, op: str | None = None) -> np.ndarray:
    arr = _literal_array(value, what, op, strings=dtype.name == "string")
    if arr.dtype.kind in "fc" and arr.size and (dtype.is_integer or dtype.is_bool or dtype.is_quantized):
        raise OpTypeError(f"{what}: cannot convert {value!r} (floating point) to {dtype.name} without loss", op=op)
    if arr.dtype.kind in "US" and dtype.name != "string":
        raise OpTypeError(f"{what}: cannot convert {_shown(value)} (text) to {dtype.name}; parse it with ok.ops.string_to_number", op=op)
    try:
        return np.asarray(value, dtype=dtype.np)
    except OverflowError as e:
        raise InvalidArgumentError(f"{what}: {_shown(value)} is out of range for {dtype.name}{_range_of(dtype)}", op=op) from e
    except (TypeError, ValueError) as e:
        raise OpTypeError(f"{what}: cannot convert {value!r} to {dtype.name}: {e}", op=op) from e


def to_tensor(data: Any, dtype: Any = None, backend: str | None = None) -> Tensor:
    """``ok.tensor``: host data (lists, scalars, numpy arrays) as a tensor on a backend.

    The tensor never shares memory with ``data``: the caller may change its array later."""
    be = backend_instance(backend) if backend else active_backend()
    if isinstance(data, Tensor):
        t = data if data._backend is be else transfer(data, be.name)
        if dtype is not None and as_dtype(dtype) is not t._dtype:
            raise OpTypeError(f"tensor has dtype {t._dtype.name}, asked for {as_dtype(dtype).name}; use ok.ops.cast")
        return t
    dt = as_dtype(dtype) if dtype is not None else _natural_dtype(data)
    arr = _host_array(data, dt, "ok.tensor")
    if be.host_memory_is_native and _callers_memory(arr, data):
        arr = arr.copy()  # device backends upload a copy of their own
    return Tensor(be.from_numpy(arr), dt, be)


#: Host data numpy always converts into a new array: nothing the caller holds shares it.
_FRESH_KINDS = (Tensor, list, tuple, int, float, complex, bool, str, bytes, np.generic, type(None))


def _callers_memory(arr: np.ndarray, data: Any) -> bool:
    """Whether ``arr``, converted from ``data``, may share memory the caller can still
    change: ``data`` itself, a view of it, or what its ``__array__`` or buffer exposes."""
    if isinstance(data, np.ndarray):
        return np.may_share_memory(arr, data)
    return not isinstance(data, _FRESH_KINDS)


def transfer(t: Tensor, backend: str) -> Tensor:
    """A copy of ``t`` on ``backend``, through host memory.

    Differentiable, as ``tf.identity`` under another device is: a recording tape
    that tracks ``t`` records the copy, and its gradient is copied back to ``t``'s
    backend."""
    be = backend_instance(backend)
    if t._backend is be:
        return t
    return _moved(t, be)


def _moved(t: Tensor, be: Backend) -> Tensor:
    """``transfer`` to a backend instance (``t`` lives elsewhere)."""
    out = Tensor(be.from_numpy(t._backend.to_numpy(t._value)), t._dtype, be)
    if RECORDING[0]:
        record_transfer(t, out)
    return out


install_placement(_ACTIVE.set, _ACTIVE.reset, _moved)


# ---------------------------------------------------------------- dispatch

class _Signature:
    """Everything about one call signature that is worth computing once.

    ``call(*tensors)`` runs the whole call for tensors already on the backend:
    the kernel, output wrapping, tape recording and error translation.
    """

    __slots__ = ("run", "out_dtypes", "pack", "kernel", "op_def", "attrs", "backend", "call", "refs")

    def __init__(
        self, run: Callable[[list[Any]], list[Any]], out_dtypes: list[DType], pack: Callable[[list[Tensor]], Any],
        kernel: KernelDef, op_def: OpDef, attrs: dict[str, Any], backend: Backend,
    ) -> None:
        self.run = run
        self.out_dtypes = out_dtypes
        self.pack = pack
        self.kernel = kernel
        self.op_def = op_def
        self.attrs = attrs
        self.backend = backend
        self.call: Callable[..., Any] = self._call
        #: Flat positions of Ref inputs (a list input counts its length): the call makes
        #: those Variables' memory private first and bumps their versions.
        self.refs = (
            [i for i, a in enumerate(op_def.inputs) if a.is_ref] if not any(a.is_list for a in op_def.inputs)
            else [
                i for i, is_ref in enumerate(
                    a.is_ref for a, n in zip(op_def.inputs, _input_lengths(op_def, attrs)) for _ in range(1 if n is None else n)
                ) if is_ref
            ]
        )

    def _call(self, *inputs: Tensor) -> Any:
        if not self.refs:
            return _finish(self, self.backend, self._run_translated([x._value for x in inputs]), inputs)
        with update_lock(*[inputs[i] for i in self.refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
            for i in self.refs:
                inputs[i]._unshare()  # type: ignore[attr-defined]
            flat = [x._value for x in inputs]
            outs = self._run_translated(flat)
            for i in self.refs:
                if flat[i] is not inputs[i]._value:  # a generic kernel's update ran on a fallback backend
                    inputs[i]._value = flat[i]
                inputs[i]._version += 1  # type: ignore[attr-defined]
        return _finish(self, self.backend, outs, inputs)

    def _run_translated(self, flat: list[Any]) -> list[Any]:
        try:
            return self.run(flat)
        except Exception as e:
            translated = _translated(e, self.backend, self.op_def.name)
            if translated is e:
                raise
            raise translated from e


class OpHandle:
    """Per-op dispatch state: the finalized OpDef and its signature caches.

    A handle lives as long as the process; when plugins or kernels change it is
    reset in place, so generated wrappers can hold on to it.
    ``fast`` maps ``(backend, input dtypes..., attr value, attr class, ...)``
    to a signature's ``call``, for calls whose inputs are all tensors on the
    active backend; ``cache`` maps the fully bound signature.
    """

    __slots__ = ("name", "_op_def", "cache", "fast", "literal", "_validated", "generation", "build_lock")

    def __init__(self, name: str) -> None:
        self.name = name
        self._op_def: OpDef | None = None
        self.cache: dict[Any, _Signature] = {}
        self.fast: dict[Any, Callable[..., Any]] = {}
        #: Calls with Python literal or numpy arguments (``mean(x, [0])``, ``mul(g, 2.0)``):
        #: ``(backend, label, input keys, attr keys)`` -> the signature, the dtype each
        #: such argument converts to (None where the caller passed a tensor), and whether
        #: an output may be a view of a caller's numpy array (see ``_unaliased``).
        self.literal: dict[Any, tuple[_Signature, list[Any], bool]] = {}
        self._validated: set[int] = set()
        self.generation = 0  # bumped by reset(): a signature built before it must not be stored
        self.build_lock = threading.RLock()  # one construction per signature, even when threads race

    @property
    def op_def(self) -> OpDef:
        op_def = self._op_def
        if op_def is None:
            plugins.ensure_loaded()
            op_def = self._op_def = op_registry.get_op_def(self.name)
        return op_def

    def reset(self) -> None:
        with _cache_lock:
            self.generation += 1
            self.cache.clear()
            self.fast.clear()
            self.literal.clear()
            self._validated.clear()
            self._op_def = None


_handles: dict[str, OpHandle] = {}
#: Held while a handle is reset and while a signature is stored, so that a signature
#: built from the kernels before a registration is never stored after its reset.
_cache_lock = threading.Lock()


def op_handle(name: str) -> OpHandle:
    """The handle of op ``name`` (finalizing the op)."""
    h = _handles.get(name)
    if h is None:
        h = _handles.setdefault(name, OpHandle(name))
    h.op_def  # noqa: B018 -- finalize now, so unknown ops fail here
    return h


def _reset_handles() -> None:
    """Forget every cached signature (plugins, ops or kernels changed)."""
    for h in list(_handles.values()):
        h.reset()


kernel_registry.on_change(_reset_handles)


def execute(
    op: OpHandle, inputs: Sequence[Any], attrs: dict[str, Any], label: str | None = None,
    fast_key: tuple[Any, ...] | None = None,
) -> Any:
    """Run ``op`` on the active backend.  ``attrs`` holds the non-inferred attrs given by the caller.

    Generated wrappers try ``op.fast`` themselves first; this is the general path.
    ``fast_key`` is the key a wrapper built for this call when all its inputs
    are tensors on the active backend: the signature is filed under it.
    """
    tracer = _TRACER.get() if _SLOW_SCOPES[0] else None
    if tracer is not None:
        return tracer(op, inputs, attrs, label)
    be = _ACTIVE.get() or _default_backend()
    if label is None and _SLOW_SCOPES[0]:
        labels = _LABELS.get()
        if labels is not None:
            label = labels.get(op.name)
    generation = op.generation
    op_def = op.op_def
    lkey: tuple[Any, ...] | None = None
    flat: list[Any] = []
    if fast_key is None:
        try:
            lkey, flat = _literal_key(op_def, inputs, attrs, be, label)
        except _Uncacheable:
            pass
        else:
            hit = op.literal.get(lkey)
            if hit is not None:
                tensors = _with_literals(hit[1], flat, be)
                if all(t._backend is be for t in tensors):
                    result = _profiled(op.name, hit[0], tensors, be) if _PROFILERS else hit[0].call(*tensors)
                    return _unaliased(result, flat) if hit[2] else result
    tensors, bound = _bind(op_def, inputs, attrs, be)
    full_key = (be, label, *[t._dtype for t in tensors], *_hashable_items(bound))
    sig = op.cache.get(full_key)
    if sig is None:
        with op.build_lock:
            sig = op.cache.get(full_key)
            if sig is None:
                sig = _build_signature(op, bound, be, label)
                with _cache_lock:
                    if op.generation == generation:
                        op.cache[full_key] = sig
    if lkey is not None:
        _remember_literals(op, generation, lkey, sig, tensors, flat)
    if fast_key is not None and label is None and fast_key[0] is be and fast_key not in op.fast:
        # The generated wrapper built the key; every input is a tensor on this backend (else it passes None).
        with _cache_lock:
            if op.generation == generation:
                op.fast[fast_key] = sig.call
    result = _profiled(op.name, sig, tensors, be) if _PROFILERS else sig.call(*tensors)
    if fast_key is None and be.host_memory_is_native:
        return _unaliased(result, [x for v in inputs for x in (v if v.__class__ in (list, tuple) else (v,))])
    return result


def _unaliased(result: Any, items: Sequence[Any]) -> Any:
    """``result`` with no output sharing memory with the host data among ``items``.

    A host backend hands the caller's arrays (and what an ``__array__`` or a buffer
    exposes) to kernels as they are, and a kernel may return a view of its input
    (Identity, Reshape, a full Slice); the caller may change its array after the
    call, so such an output gets its own copy."""
    arrays = [x if isinstance(x, np.ndarray) else np.asarray(x) for x in items if not isinstance(x, _FRESH_KINDS)]
    if not arrays:
        return result
    for out in result if isinstance(result, (tuple, list)) else (result,):
        for t in out if isinstance(out, list) else (out,):
            if isinstance(t, Tensor) and isinstance(t._value, np.ndarray):
                if any(np.may_share_memory(t._value, a) for a in arrays):
                    t._value = t._value.copy()  # not yet seen by anyone but a recording tape, which holds t
    return result


class _Uncacheable(Exception):
    """An argument the literal cache cannot key (a numpy array, an object)."""


#: Per op; a full table is emptied, so a loop over changing literals never grows it.
_LITERAL_ENTRIES = 256
_ATOMS = frozenset({int, bool, str, bytes, type(None), DType})


def _atom_key(x: Any) -> Any:
    """A literal's key: its class with its value (1, 1.0 and True differ); floats by
    their bits, so 0.0 and -0.0 differ; short lists and tuples element by element."""
    c = x.__class__
    if c in _ATOMS or c is _Required:
        return (c, x)
    if c is float:
        return (c, x.hex())
    if (c is list or c is tuple) and len(x) <= 64:
        return (c, tuple([_atom_key(v) for v in x]))
    raise _Uncacheable


def _item_key(x: Any) -> Any:
    if isinstance(x, Tensor):
        return (x.__class__, x._dtype)  # the tensor itself is passed through
    if isinstance(x, (np.ndarray, np.generic)):
        return (np.ndarray, x.dtype)  # converted on each call: only its dtype decides the signature
    return _atom_key(x)


def _literal_key(
    op_def: OpDef, inputs: Sequence[Any], attrs: Mapping[str, Any], be: Backend, label: str | None
) -> tuple[tuple[Any, ...], list[Any]]:
    """The literal-cache key of a call and its flat input items; raises _Uncacheable."""
    flat: list[Any] = []
    parts: list[Any] = [be, label]
    if len(inputs) != len(op_def.inputs):
        raise _Uncacheable
    for arg, v in zip(op_def.inputs, inputs):
        if arg.is_list:
            if v.__class__ is not list and v.__class__ is not tuple:
                raise _Uncacheable
            parts.append(tuple([_item_key(x) for x in v]))
            flat.extend(v)
        else:
            parts.append(_item_key(v))
            flat.append(v)
    for k, v in attrs.items():
        parts.append(k)
        parts.append(_atom_key(v))
    return tuple(parts), flat


def _with_literals(dtypes: list[DType | None], flat: list[Any], be: Backend) -> list[Tensor]:
    """The call's tensors from a literal-cache entry: each literal or numpy value
    converted to the dtype it took when the entry was made, each tensor as it is."""
    return [x if dt is None else Tensor(be.from_numpy(np.asarray(x, dt.np)), dt, be) for dt, x in zip(dtypes, flat)]


def _remember_literals(
    op: OpHandle, generation: int, key: tuple[Any, ...], sig: _Signature, tensors: list[Tensor], flat: list[Any]
) -> None:
    """File a call with literals under ``key``: its signature, and the dtype each
    literal or numpy value converted to.  Values are converted again on every call
    (a shared constant could be written through the ``.numpy()`` of an op that
    returns its input; a numpy value may change between calls, and one of the
    right dtype is passed without a copy).  Tensors are passed through, so none
    may have been moved to another backend by this call."""
    if not all(t is x or not isinstance(x, Tensor) for t, x in zip(tensors, flat)):
        return
    dtypes: list[DType | None] = [None if t is x else t._dtype for t, x in zip(tensors, flat)]
    if any(dt is not None and dt.is_quantized for dt in dtypes):
        return  # quantized conversions check values, not only dtypes
    literal = op.literal
    if len(literal) >= _LITERAL_ENTRIES:
        literal.clear()
    arrays = sig.backend.host_memory_is_native and any(isinstance(x, np.ndarray) for x in flat)
    with _cache_lock:
        if op.generation == generation:
            literal[key] = (sig, dtypes, arrays)


def _profiled(name: str, sig: _Signature, tensors: Sequence[Tensor], be: Backend) -> Any:
    sync = any(p.synchronize for p in _PROFILERS)
    if sync:
        be.synchronize()
    start = time.perf_counter()
    result = sig.call(*tensors)
    if sync:
        be.synchronize()
    elapsed = time.perf_counter() - start
    outs = result if isinstance(result, (tuple, list)) else [result]
    nbytes = sum(int(getattr(o._value, "nbytes", 0)) for o in outs if isinstance(o, Tensor))
    for p in list(_PROFILERS):
        p.add(be.name, name, elapsed, nbytes)
    return result


def _translated(error: Exception, be: Backend, op: str) -> Exception:
    """The backend's opkernel error for a native failure, or the error itself; a
    MemoryError the backend leaves alone (numpy's) becomes a ResourceExhaustedError.
    An opkernel error that names no op (a backend helper's, such as an allocation's)
    gets the op's name."""
    if isinstance(error, OpkernelError):
        return error if error.op is not None else _named(error, op)
    translated = be.translate_error(error, op)
    if translated is None and isinstance(error, MemoryError):
        return _out_of_memory(error, be, op)
    return translated or error


def _named(error: OpkernelError, op: str) -> OpkernelError:
    """A copy of ``error`` (same class and context) for ``op``, its message led by the op."""
    named = copy.copy(error)
    named.op = op
    if f"'{op}'" not in error.message:
        named.message = f"op {op!r}: {error.message}"
        named.args = (named.message,)
    return named


def _out_of_memory(error: MemoryError, be: Backend, op: str) -> ResourceExhaustedError:
    """The error for a kernel that ran out of memory; numpy's says what it asked for."""
    shape, dtype = getattr(error, "shape", None), getattr(error, "dtype", None)
    requested: int | None = None
    try:
        if shape is not None and dtype is not None:
            requested = math.prod(int(d) for d in shape) * np.dtype(dtype).itemsize
    except (TypeError, ValueError):
        requested = None
    amount = f"{requested} bytes ({requested / 2**20:.1f} MiB)" if requested is not None else "memory"
    return ResourceExhaustedError(
        f"op {op!r}: out of memory on backend {be.name!r} allocating {amount}: {error}",
        op=op, backend=be.name, requested_bytes=requested,
    )


def _finish(sig: _Signature, be: Backend, outs: list[Any], inputs: Sequence[Tensor]) -> Any:
    conv = be.as_output
    tensors = [Tensor(conv(v, dt), dt, be) for v, dt in zip(outs, sig.out_dtypes)]
    if RECORDING[0]:
        record_op(sig.op_def, sig.attrs, inputs, tensors)
    return sig.pack(tensors)


def _hashable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    return value


def _hashable_items(attrs: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple((k, _hashable(v)) for k, v in sorted(attrs.items()))


# ------------------------------------------------------------ binding


def _what(op_def: OpDef, arg: ArgDef) -> str:
    return f"op {op_def.name!r}, input {arg.name!r}"


def _place(op_def: OpDef, arg: ArgDef, t: Tensor, be: Backend) -> Tensor:
    if t._backend is be:
        return t
    if config.transfer_policy == "copy":
        config.transfers += 1
        return transfer(t, be.name)
    raise InvalidArgumentError(
        f"{_what(op_def, arg)}: tensor lives on backend {t.backend!r} but the op runs on {be.name!r}. "
        f"Move it with x.to({be.name!r}), or set ok.config.transfer_policy = 'copy'.",
        op=op_def.name,
    )


def _items(op_def: OpDef, arg: ArgDef, value: Any) -> list[Any]:
    if not arg.is_list:
        return [value]
    if isinstance(value, (Tensor, np.ndarray)) or not isinstance(value, (list, tuple)):
        raise OpTypeError(
            f"{_what(op_def, arg)}: expected a list of tensors, got {type(value).__name__}", op=op_def.name
        )
    return list(value)


def _dtype_of(x: Any) -> DType | None:
    if isinstance(x, Tensor):
        return x._dtype
    if isinstance(x, (np.ndarray, np.generic)):
        return as_dtype(x.dtype)
    return None


def _bind(op_def: OpDef, inputs: Sequence[Any], attrs: Mapping[str, Any], be: Backend) -> tuple[list[Tensor], dict[str, Any]]:
    """Convert inputs, infer type/length attrs, fill defaults, validate; returns flat tensors and all attrs."""
    if len(inputs) != len(op_def.inputs):
        raise InvalidArgumentError(
            f"op {op_def.name!r} takes {len(op_def.inputs)} inputs "
            f"({', '.join(a.name for a in op_def.inputs)}), got {len(inputs)}",
            op=op_def.name,
        )
    groups = [_items(op_def, arg, v) for arg, v in zip(op_def.inputs, inputs)]
    bound: dict[str, Any] = {}
    _infer_type_attrs(op_def, groups, bound)
    tensors: list[Tensor] = []
    for arg, items in zip(op_def.inputs, groups):
        for i, item in enumerate(items):
            tensors.append(_convert(op_def, arg, i, item, bound, be))
    for name, value in attrs.items():
        if value is not _REQUIRED:
            value = op_def.coerce_attr(name, value)
            if name in op_def.inferred_attrs and bound.get(name, value) != value:
                error = InvalidArgumentError if op_def.attr(name).type == "int" else OpTypeError
                raise error(
                    f"op {op_def.name!r}: attr {name!r} was given as {_fmt(value)} but the inputs have "
                    f"{name}={_fmt(bound[name])}",
                    op=op_def.name,
                )
        bound[name] = value
    for attr in op_def.attrs:
        if bound.get(attr.name, _REQUIRED) is _REQUIRED:
            if not attr.has_default:
                raise InvalidArgumentError(
                    f"op {op_def.name!r}: missing required attr {attr.name!r} of type {attr.type}", op=op_def.name
                )
            bound[attr.name] = attr.default
    return tensors, bound


class _Required:
    def __repr__(self) -> str:
        return "<required>"


_REQUIRED: Any = _Required()


def _infer_type_attrs(op_def: OpDef, groups: list[list[Any]], bound: dict[str, Any]) -> None:
    """TensorFlow's attr inference: ``T`` from input dtypes, ``N`` from list lengths."""
    sources: dict[str, str] = {}
    for arg, items in zip(op_def.inputs, groups):
        if arg.number_attr:
            _set_inferred(op_def, bound, arg.number_attr, len(items), arg, sources)
        if arg.type_list_attr:
            _set_inferred(
                op_def, bound, arg.type_list_attr,
                tuple(_dtype_of(x) or _natural_dtype(x, _what(op_def, arg), op_def.name) for x in items), arg, sources,
            )
        elif arg.type_attr:
            for x in items:
                dt = _dtype_of(x)
                if dt is not None:
                    _set_inferred(op_def, bound, arg.type_attr, dt, arg, sources)
    for arg, items in zip(op_def.inputs, groups):  # literals only: default, then the literal's own type
        if arg.type_attr and arg.type_attr not in bound and not arg.type_list_attr:
            attr = op_def.attr(arg.type_attr)
            if attr.has_default:
                bound[arg.type_attr] = _literal_default(op_def, attr.name, attr.default, groups)
            elif items:
                bound[arg.type_attr] = _natural_dtype(items[0], _what(op_def, arg), op_def.name)
    for name, value in list(bound.items()):
        attr = op_def.attr(name)
        if attr.type == "type":
            op_def.check_type_attr(name, value, sources.get(name, name))
        elif attr.type == "list(type)":
            for dt in value:
                op_def.check_type_attr(name, dt, sources.get(name, name))
            op_def.coerce_attr(name, value)  # its minimum length
        else:
            op_def.coerce_attr(name, value)


def _literal_default(op_def: OpDef, name: str, default: DType, groups: list[list[Any]]) -> DType:
    """A type attr that only literals decide: its default; but where the default is
    int32 and the attr allows it, float32 for float literals (``range(0.0, 1.0, 0.25)``)
    and int64 for integers past int32 (``fill([2**40], 1.0)``), as TensorFlow converts
    the literals first and infers the attr from them."""
    if default is not as_dtype("int32"):
        return default
    allowed = op_def.attr(name).allowed_values
    natural = {
        _natural_dtype(x, _what(op_def, arg), op_def.name)
        for arg, items in zip(op_def.inputs, groups) if arg.type_attr == name for x in items
    }
    for wider in (as_dtype("float32"), as_dtype("int64")):
        if wider in natural and (allowed is None or wider in allowed):
            return wider
    return default


def _set_inferred(op_def: OpDef, bound: dict[str, Any], name: str, value: Any, arg: ArgDef, sources: dict[str, str]) -> None:
    old = bound.get(name, _REQUIRED)
    if old is not _REQUIRED and old != value:
        raise OpTypeError(
            f"op {op_def.name!r}: input {arg.name!r} has {name}={_fmt(value)} but input "
            f"{sources[name]!r} has {name}={_fmt(old)}; inputs sharing attr {name!r} must agree",
            op=op_def.name,
        )
    bound[name] = value
    sources.setdefault(name, arg.name)


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return value.name if isinstance(value, DType) else repr(value)


def _expected_dtype(arg: ArgDef, index: int, bound: Mapping[str, Any]) -> DType:
    if arg.dtype is not None:
        return arg.dtype
    if arg.type_list_attr:
        return bound[arg.type_list_attr][index]  # type: ignore[no-any-return]
    return bound[arg.type_attr]  # type: ignore[no-any-return,index]


def _convert(op_def: OpDef, arg: ArgDef, index: int, x: Any, bound: Mapping[str, Any], be: Backend) -> Tensor:
    want = _expected_dtype(arg, index, bound)
    if arg.is_ref and not isinstance(x, Variable):
        raise OpTypeError(
            f"{_what(op_def, arg)}: is a Ref input and needs an ok.Variable, got {type(x).__name__}",
            op=op_def.name,
        )
    if isinstance(x, Tensor):
        if x._dtype is not want:
            raise OpTypeError(
                f"{_what(op_def, arg)}: expected dtype {want.name}, got {x._dtype.name}", op=op_def.name
            )
        return _place(op_def, arg, x, be)
    if isinstance(x, (np.ndarray, np.generic)) and as_dtype(x.dtype) is not want and not want.is_quantized:
        raise OpTypeError(
            f"{_what(op_def, arg)}: expected dtype {want.name}, got a numpy array of {as_dtype(x.dtype).name}",
            op=op_def.name,
        )
    host = _host_array(x, want, _what(op_def, arg), op_def.name)
    try:
        value = be.from_numpy(host)
    except OpkernelError as e:  # the backend cannot hold it (strings on cuda): say for which op and input
        if e.op is not None:
            raise
        raise _named(e, op_def.name) from e
    return Tensor(value, want, be)


# ------------------------------------------------------------ kernels


def select_kernel(op_def: OpDef, backend: str, attrs: Mapping[str, Any], label: str | None = None) -> KernelDef:
    """The kernel that would run: highest priority on ``backend`` whose constraints and
    label match, else a generic kernel; raises KernelNotFoundError."""
    for where in (backend, GENERIC):
        for k in kernel_registry.kernels_for(op_def.name, where):
            if k.label == label and k.matches(attrs):
                return k
    raise _no_kernel(op_def, backend, attrs, label)


def _no_kernel(op_def: OpDef, backend: str, attrs: Mapping[str, Any], label: str | None) -> KernelNotFoundError:
    types = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(attrs.items()) if isinstance(v, DType) or (isinstance(v, tuple) and v and isinstance(v[0], DType)))
    registered = [
        f"{k.backend} ({k.describe_constraints()}{', label=' + repr(k.label) if k.label else ''})"
        for b in kernel_registry.backends_for(op_def.name)
        for k in kernel_registry.kernels_for(op_def.name, b)
    ]
    on_backend = kernel_registry.kernels_for(op_def.name, backend)
    if not registered:
        reason = "no kernel is registered on any backend"
    elif not on_backend:
        reason = f"no kernel on backend {backend!r}"
    elif not any(k.matches(attrs) for k in on_backend):
        reason = f"no kernel on backend {backend!r} for these types"
    else:
        reason = f"no kernel on backend {backend!r} with label {label!r}"
    where = f" with {types}" if types else ""
    listing = "; registered: " + ", ".join(registered) if registered else ""
    return KernelNotFoundError(
        f"{reason}: op {op_def.name!r}{where}{listing}.{_providers_hint(op_def.name, backend)}"
        f"{_fallback_hint(op_def.name, backend, attrs, label)}",
        op=op_def.name, backend=backend,
    )


def _fallback_hint(op: str, backend: str, attrs: Mapping[str, Any], label: str | None) -> str:
    """The way out through ``ok.config.kernel_fallback``, when another backend has a
    kernel for the call and no fallback is in effect."""
    if config.kernel_fallback:
        return ""
    installed = plugins.backend_classes()
    others = [
        b for b in kernel_registry.backends_for(op)
        if b not in (backend, GENERIC) and b in installed and any(k.label == label and k.matches(attrs) for k in kernel_registry.kernels_for(op, b))
    ]
    if not others:
        return ""
    name = "cpu" if "cpu" in others else sorted(others)[0]
    return (
        f" To run it on {name!r} instead (its inputs copied there, its outputs back), set "
        f"ok.config.kernel_fallback = ({name!r},), OPKERNEL_KERNEL_FALLBACK={name}, or use "
        f"`with ok.kernel_fallback({name!r}):`."
    )


def _providers_hint(op: str, backend: str) -> str:
    """Which installed distributions provide kernels of ``op``, on which backends, and which
    known op package (``opkernel.library.KNOWN_OP_PACKAGES``) to install for ``backend``."""
    from .library import known_package_for

    by_package: dict[str, set[str]] = {}
    for b in kernel_registry.backends_for(op):
        for k in kernel_registry.kernels_for(op, b):
            if k.provider.distribution is not None:  # an installed package, not a script or a test
                by_package.setdefault(k.provider.distribution, set()).add(b)
    hint = "".join(f" {p} provides kernels for: {', '.join(sorted(bs))}." for p, bs in sorted(by_package.items()))
    known = known_package_for(op)
    if known is not None and known.distribution not in by_package and {backend, GENERIC} & set(known.backends):
        hint += f" {known.distribution} provides kernels for: {', '.join(known.backends)}; pip install {known.distribution}."
    return hint


#: Output lists longer than this are checked against the host's memory before anything is made.
_MANY_OUTPUTS = 1 << 16


def _output_dtypes(op_def: OpDef, attrs: Mapping[str, Any]) -> tuple[list[DType], list[int | None]]:
    """Flat output dtypes, and per output arg its list length (None for a single tensor)."""
    flat: list[DType] = []
    lengths: list[int | None] = []
    for arg in op_def.outputs:
        if arg.type_list_attr:
            dts = list(attrs[arg.type_list_attr])
            lengths.append(len(dts))
        elif arg.number_attr:
            n = int(attrs[arg.number_attr])
            if n > _MANY_OUTPUTS:
                from ._bounds import check_output_count  # not imported with opkernel: rarely needed

                check_output_count(op_def.name, arg.number_attr, n)
            dts = [_expected_dtype(arg, 0, attrs)] * n
            lengths.append(n)
        else:
            dts = [_expected_dtype(arg, 0, attrs)]
            lengths.append(None)
        flat.extend(dts)
    return flat, lengths


_result_types: dict[str, Any] = {}


def _packer(op_def: OpDef, lengths: list[int | None]) -> Callable[[list[Tensor]], Any]:
    if lengths == [None]:
        return lambda outs: outs[0]
    if not lengths:
        return lambda outs: None
    if len(lengths) == 1:  # a single list output is returned as a plain list, as TensorFlow's API does
        return lambda outs: list(outs)
    names = tuple(a.name for a in op_def.outputs)
    rt = _result_types.get(op_def.name)
    if rt is None or rt._fields != names:
        rt = _result_types[op_def.name] = namedtuple(op_def.name.replace(">", "_"), names, rename=True)

    def pack(outs: list[Tensor]) -> Any:
        parts: list[Any] = []
        pos = 0
        for n in lengths:
            if n is None:
                parts.append(outs[pos])
                pos += 1
            else:
                parts.append(outs[pos : pos + n])
                pos += n
        return rt(*parts)

    return pack


def _group(op_def: OpDef, flat: list[Any], lengths: list[int | None]) -> list[Any]:
    out: list[Any] = []
    pos = 0
    for n in lengths:
        if n is None:
            out.append(flat[pos])
            pos += 1
        else:
            out.append(list(flat[pos : pos + n]))
            pos += n
    return out


def _input_lengths(op_def: OpDef, attrs: Mapping[str, Any]) -> list[int | None]:
    lengths: list[int | None] = []
    for arg in op_def.inputs:
        if arg.type_list_attr:
            lengths.append(len(attrs[arg.type_list_attr]))
        elif arg.number_attr:
            lengths.append(int(attrs[arg.number_attr]))
        else:
            lengths.append(None)
    return lengths


def _flatten_outputs(op_def: OpDef, result: Any, lengths: list[int | None]) -> list[Any]:
    if lengths == [None]:
        return [result]
    if not lengths:
        return []
    if len(lengths) == 1:  # a kernel of an op whose only output is a list returns that list
        result = (result,)
    if not isinstance(result, (tuple, list)) or len(result) != len(lengths):
        raise InvalidArgumentError(
            f"op {op_def.name!r}: kernel must return {len(lengths)} values "
            f"({', '.join(a.name for a in op_def.outputs)}), got {type(result).__name__}",
            op=op_def.name,
        )
    flat: list[Any] = []
    for value, n in zip(result, lengths):
        if n is None:
            flat.append(value)
        else:
            if len(value) != n:
                raise InvalidArgumentError(f"op {op_def.name!r}: kernel returned {len(value)} tensors for a list output of {n}", op=op_def.name)
            flat.extend(value)
    return flat


def _build_signature(op: OpHandle, attrs: dict[str, Any], be: Backend, label: str | None, fallback: bool = True) -> _Signature:
    op_def = op.op_def
    try:
        kdef = select_kernel(op_def, be.name, attrs, label)
    except KernelNotFoundError as e:
        if not fallback or not config.kernel_fallback:
            raise
        return _FallbackSignature(op, attrs, be, label, e)
    if id(kdef) not in op._validated:
        kdef.validate_against(op_def)
        op._validated.add(id(kdef))
    out_dtypes, out_lengths = _output_dtypes(op_def, attrs)
    in_lengths = _input_lengths(op_def, attrs)
    run = _invoker(op_def, kdef, attrs, be, out_dtypes, in_lengths, out_lengths)
    sig = _Signature(run, out_dtypes, _packer(op_def, out_lengths), kdef, op_def, attrs, be)
    fast = _fast_call(sig, kdef, in_lengths, out_lengths)
    if fast is not None:
        sig.call = fast
    sized_by = output_size_inputs(op_def.shape_fn)
    if sized_by:
        from ._bounds import size_guard  # only ops whose output sizes come from input values use it

        sig.call = size_guard(sig.call, op_def, attrs, be, out_dtypes, in_lengths, sized_by)
    return sig


def _host_positions(op_def: OpDef, kdef: KernelDef, in_lengths: list[int | None]) -> list[int]:
    positions: list[int] = []
    pos = 0
    for arg, n in zip(op_def.inputs, in_lengths):
        width = 1 if n is None else n
        if arg.name in kdef.host_memory:
            positions.extend(range(pos, pos + width))
        pos += width
    return positions


def _invoker(
    op_def: OpDef, kdef: KernelDef, attrs: dict[str, Any], be: Backend,
    out_dtypes: list[DType], in_lengths: list[int | None], out_lengths: list[int | None],
) -> Callable[[list[Any]], list[Any]]:
    host = [] if be.host_memory_is_native else _host_positions(op_def, kdef, in_lengths)
    simple_inputs = all(n is None for n in in_lengths)

    def prepare(flat: list[Any]) -> list[Any]:
        if host:
            flat = list(flat)
            for i in host:
                flat[i] = be.to_numpy(flat[i])
        return flat if simple_inputs else _group(op_def, flat, in_lengths)

    if kdef.is_class:
        kernel = kdef.impl(OpKernelConstruction(op_def, attrs, be))

        def run_class(flat: list[Any]) -> list[Any]:
            ctx = OpKernelContext(op_def, attrs, be, prepare(flat) if host else flat, out_dtypes)
            kernel.compute(ctx)
            return ctx.outputs

        return run_class
    fn = kdef.impl
    if kdef.is_generic:
        in_dtypes = [dt for arg, n in zip(op_def.inputs, in_lengths) for dt in _arg_dtypes(arg, n, attrs)]
        makers = [
            Variable._view if arg.is_ref else Tensor
            for arg, n in zip(op_def.inputs, in_lengths)
            for _ in range(1 if n is None else n)
        ]

        generic_kw = kernel_kwargs(fn, attrs)  # as a function kernel: the attrs it names
        ref_positions = [i for i, make in enumerate(makers) if make is not Tensor]

        def run_generic(flat: list[Any]) -> list[Any]:
            tensors = [make(v, dt, be) for make, v, dt in zip(makers, flat, in_dtypes)]
            grouped = tensors if simple_inputs else _group(op_def, tensors, in_lengths)
            token = _ACTIVE.set(be)
            try:
                result = fn(*grouped, **generic_kw)
            except KernelNotFoundError as e:
                if e.op == op_def.name:
                    raise
                raise KernelNotFoundError(
                    f"op {op_def.name!r} runs its generic kernel on backend {be.name!r} (no kernel of its own "
                    f"matches), which is composed of other ops, and op {e.op!r} has no kernel there: {e}",
                    op=op_def.name, backend=be.name,
                ) from e
            finally:
                _ACTIVE.reset(token)
            for i in ref_positions:
                if tensors[i]._value is not flat[i]:  # updated on a fallback backend: the new value goes back
                    flat[i] = tensors[i]._value
            outs = _flatten_outputs(op_def, result, out_lengths)
            return [o._value if isinstance(o, Tensor) else o for o in outs]

        return run_generic
    kw = kernel_kwargs(fn, attrs)
    if simple_inputs and not host and out_lengths == [None]:
        return lambda flat: [fn(*flat, **kw)]
    return lambda flat: _flatten_outputs(op_def, fn(*prepare(flat), **kw), out_lengths)


def kernel_kwargs(fn: Callable[..., Any], attrs: Mapping[str, Any]) -> dict[str, Any]:
    """The attrs a function kernel receives: all of them if it takes ``**kwargs``, else
    the ones it names; a callable without an inspectable signature (a numpy ufunc
    registered directly) receives none.  Decided once per signature."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return {}
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return dict(attrs)
    names = {p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    return {k: v for k, v in attrs.items() if k in names}


def _positional_attrs(fn: Callable[..., Any], n_inputs: int, kw: dict[str, Any]) -> tuple[Any, ...] | None:
    """``kw``'s values in order when they are exactly the plain parameters that follow
    the ``n_inputs`` inputs of ``fn`` (``mat_mul(a, b, transpose_a, transpose_b)``):
    a positional call is cheaper than one unpacking a dict.  None otherwise."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    rest = params[n_inputs:]
    if len(rest) != len(kw) or any(p.kind is not p.POSITIONAL_OR_KEYWORD or p.name not in kw for p in rest):
        return None
    if any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in params[:n_inputs]):
        return None
    return tuple(kw[p.name] for p in rest)


def _raise_translated(error: Exception, be: Backend, op: str) -> None:
    translated = _translated(error, be, op)
    if translated is error:
        raise error
    raise translated from error


_FAST_CALL = """
def call({params}):
    try:
        v = fn({args})
    except Exception as e:
        _raise_translated(e, be, name)
    if type(v) is not native or getattr(v, "dtype", None) is not npdt:
        return wrap(v, ({inputs}))
    t = Tensor(v, dt, be)
    if RECORDING[0]:
        record_single(op_def, attrs, ({inputs}), t)
    return t
"""


def _compiled_call(fn: Callable[..., Any], n_inputs: int, kw: dict[str, Any], env: dict[str, Any]) -> Callable[..., Tensor]:
    """The fast call of a function kernel with ``n_inputs`` single-tensor inputs, compiled
    with its attrs written into the kernel call: positionally when they are the plain
    parameters after the inputs (``mat_mul(a, b, transpose_a, transpose_b)``), else as
    keyword arguments.  A call spreading a tuple or dict (``fn(a, b, *extra)``,
    ``fn(a, b, **kw)``) takes CPython's generic call path: 0.45 us more on a 4x4 MatMul.
    ``env`` holds the template's other names; its ``wrap`` covers outputs that need
    converting, while the common case is written out inline, one Python call less."""
    namespace: dict[str, Any] = dict(env, fn=fn, Tensor=Tensor, RECORDING=RECORDING, record_single=record_single,
                                     _raise_translated=_raise_translated)
    params = [f"x{i}" for i in range(n_inputs)]
    args = [f"{p}._value" for p in params]
    extra = _positional_attrs(fn, n_inputs, kw) if kw else ()
    if extra is not None:
        namespace.update({f"_e{i}": v for i, v in enumerate(extra)})
        args += [f"_e{i}" for i in range(len(extra))]
    elif all(k.isidentifier() and not keyword.iskeyword(k) for k in kw):
        namespace.update({f"_k_{k}": v for k, v in kw.items()})
        args += [f"{k}=_k_{k}" for k in kw]
    else:
        namespace["_kw"] = kw
        args.append("**_kw")
    inputs = "".join(f"{p}, " for p in params)  # a tuple expression, () for none
    source = _FAST_CALL.format(params=", ".join(params), inputs=inputs, args=", ".join(args))
    exec(compile(source, f"<opkernel fast call {namespace['name']}>", "exec"), namespace)
    call: Callable[..., Tensor] = namespace["call"]
    return call


def _fast_call(sig: _Signature, kdef: KernelDef, in_lengths: list[int | None], out_lengths: list[int | None]) -> Callable[..., Any] | None:
    """A compiled function running the whole call for the common case — a function kernel, single
    tensors in, one tensor out, nothing in host memory — with no per-call work beyond
    the kernel, the output check and the tape check."""
    if (
        kdef.is_class or kdef.is_generic or (kdef.host_memory and not sig.backend.host_memory_is_native)
        or not out_lengths or any(n is not None for n in in_lengths + out_lengths)
    ):
        return None
    fn, be, op_def, attrs = kdef.impl, sig.backend, sig.op_def, sig.attrs
    kw = kernel_kwargs(fn, attrs)
    if len(out_lengths) > 1 or sig.refs:
        return _fast_multi_call(sig, fn, kw)
    dt = sig.out_dtypes[0]
    native: Any = (be.array_types or (None,))[0]
    npdt, conv, name = dt.np, be.as_output, op_def.name

    def wrap(v: Any, inputs: tuple[Tensor, ...]) -> Tensor:
        if type(v) is not native or getattr(v, "dtype", None) is not npdt:
            v = conv(v, dt)
        t = Tensor(v, dt, be)
        if RECORDING[0]:
            record_single(op_def, attrs, inputs, t)
        return t

    env = dict(wrap=wrap, dt=dt, be=be, name=name, native=native, npdt=npdt, op_def=op_def, attrs=attrs)
    return _compiled_call(fn, len(in_lengths), kw, env)


def _fast_multi_call(sig: _Signature, fn: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    """``_fast_call`` for an op with several single-tensor outputs (a kernel returning a
    tuple) or with Ref inputs (whose Variables' versions each call bumps): one output
    with Refs, several without (``_fast_tuple_call``), or several with Refs."""
    be, op_def, attrs, out_dtypes, pack, name = sig.backend, sig.op_def, sig.attrs, sig.out_dtypes, sig.pack, sig.op_def.name
    conv, n, refs = be.as_output, len(sig.out_dtypes), sig.refs
    if n > 1 and not refs:
        return _fast_tuple_call(sig, fn, kw)
    if n == 1:  # an in-place update (ApplyGradientDescent, AssignAdd): one output, Refs bumped
        dt = out_dtypes[0]
        npdt = dt.np
        native: Any = (be.array_types or (None,))[0]

        def call_ref(*xs: Tensor) -> Any:
            with update_lock(*[xs[i] for i in refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
                for i in refs:
                    xs[i]._unshare()  # type: ignore[attr-defined]
                try:
                    v: Any = fn(*[x._value for x in xs], **kw)
                except Exception as e:
                    _raise_translated(e, be, name)
                for i in refs:
                    xs[i]._version += 1  # type: ignore[attr-defined]
            t = Tensor(v if type(v) is native and v.dtype is npdt else conv(v, dt), dt, be)
            if RECORDING[0]:
                record_op(op_def, attrs, xs, (t,))
            return t

        return call_ref

    def call(*xs: Tensor) -> Any:
        with update_lock(*[xs[i] for i in refs]):  # type: ignore[arg-type]  # Ref inputs are Variables
            for i in refs:
                xs[i]._unshare()  # type: ignore[attr-defined]
            try:
                result: Any = fn(*[x._value for x in xs], **kw)
            except Exception as e:
                _raise_translated(e, be, name)
            for i in refs:
                xs[i]._version += 1  # type: ignore[attr-defined]
        if not isinstance(result, (tuple, list)) or len(result) != n:
            _flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
        outs = [Tensor(conv(v, dt), dt, be) for v, dt in zip(result, out_dtypes)]
        if RECORDING[0]:
            record_op(op_def, attrs, xs, outs)
        return pack(outs)

    return call


def _fast_tuple_call(sig: _Signature, fn: Callable[..., Any], kw: dict[str, Any]) -> Callable[..., Any]:
    """``_fast_multi_call`` for the usual several-output op (no Refs), with the output
    conversion of ``_fast_call``'s ``wrap`` inline and the result tuple made directly."""
    be, op_def, attrs, name = sig.backend, sig.op_def, sig.attrs, sig.op_def.name
    conv, n, out_dtypes = be.as_output, len(sig.out_dtypes), tuple(sig.out_dtypes)
    typed = tuple((dt, dt.np) for dt in out_dtypes)
    native: Any = (be.array_types or (None,))[0]
    make = _result_types[op_def.name]._make

    def call(*xs: Tensor) -> Any:
        try:
            result: Any = fn(*[x._value for x in xs], **kw)
        except Exception as e:
            _raise_translated(e, be, name)
        if (result.__class__ is not tuple and result.__class__ is not list) or len(result) != n:
            _flatten_outputs(op_def, result, [None] * n)  # raises the kernel-contract error
        outs = [
            Tensor(v if type(v) is native and v.dtype is npdt else conv(v, dt), dt, be)
            for v, (dt, npdt) in zip(result, typed)
        ]
        if RECORDING[0]:
            record_op(op_def, attrs, xs, outs)
        return make(outs)

    return call


def _arg_dtypes(arg: ArgDef, n: int | None, attrs: Mapping[str, Any]) -> list[DType]:
    if n is None:
        return [_expected_dtype(arg, 0, attrs)]
    return [_expected_dtype(arg, i, attrs) for i in range(n)]


def warmup(backend: str | None = None) -> int:
    """Build every program of ``backend`` (default: the active one) ahead of time."""
    be = backend_instance(backend) if backend else active_backend()
    return be.warmup()


def memory(backend: str | None = None) -> dict[str, int]:
    """Allocator statistics of ``backend`` (default: the active one)."""
    be = backend_instance(backend) if backend else active_backend()
    return be.memory()


def execute_by_name(op_name: str, *inputs: Any, _kernel: str | None = None, **attrs: Any) -> Any:
    """Run an op by name: ``ok.execute("MatMul", a, b, transpose_b=True)``."""
    return execute(op_handle(op_name), inputs, attrs, _kernel)


# ------------------------------------------------------------ kernel fallback

#: (op, from, to) already warned about: the warning is issued once per key and process.
_WARNED: set[tuple[str, str, str]] = set()


class _FallbackSignature(_Signature):
    """A call signature the active backend has no kernel for, run on a fallback backend.

    Which backend runs it depends on the fallback in effect at each call (a
    ContextVar), so the route is looked up per call in ``routes``, keyed by that
    setting: the signature can sit in the op's caches like any other, and a call
    made after the fallback is turned off raises the KernelNotFoundError of a call
    without one.  A kernel registered later resets the caches, so it wins from then on."""

    __slots__ = ("handle", "label", "error", "routes", "ref_positions", "in_dtypes")

    def __init__(self, op: OpHandle, attrs: dict[str, Any], be: Backend, label: str | None, error: KernelNotFoundError) -> None:
        op_def = op.op_def
        self.handle, self.label, self.error = op, label, error
        self.routes: dict[tuple[str, ...], _Signature | KernelNotFoundError] = {}
        first = self._route(config.kernel_fallback, be, attrs)  # raises when no listed backend has a kernel
        out_dtypes, out_lengths = _output_dtypes(op_def, attrs)
        in_lengths = _input_lengths(op_def, attrs)
        super().__init__(self._run, out_dtypes, _packer(op_def, out_lengths), first.kernel, op_def, attrs, be)
        self.call = self._fallback_call
        self.refs = []
        self.in_dtypes = [dt for arg, n in zip(op_def.inputs, in_lengths) for dt in _arg_dtypes(arg, n, attrs)]
        self.ref_positions = frozenset(
            i for i, is_ref in enumerate(
                a.is_ref for a, n in zip(op_def.inputs, in_lengths) for _ in range(1 if n is None else n)
            ) if is_ref
        )

    def _route(self, setting: tuple[str, ...], be: Backend, attrs: dict[str, Any]) -> _Signature:
        route = self.routes.get(setting)
        if route is None:
            route = self.routes[setting] = self._resolve(setting, be, attrs)
        if isinstance(route, KernelNotFoundError):
            raise copy.copy(route)
        return route

    def _resolve(self, setting: tuple[str, ...], be: Backend, attrs: dict[str, Any]) -> _Signature | KernelNotFoundError:
        if not setting:  # the error a call without a fallback gets, with its way out
            return _no_kernel(self.handle.op_def, be.name, attrs, self.label)
        tried: list[str] = []
        for name in setting:
            if name == be.name:
                continue
            try:
                fb = backend_instance(name)
            except BackendUnavailableError as e:
                tried.append(f"{name!r} (unavailable here: {e})")
                continue
            except BackendNotFoundError as e:
                raise BackendNotFoundError(f"the kernel fallback {setting} names backend {name!r}: {e}", backend=name) from e
            try:
                return _build_signature(self.handle, attrs, fb, self.label, fallback=False)
            except KernelNotFoundError:
                tried.append(f"{name!r} (no kernel for these types either)")
        error = self.error
        return KernelNotFoundError(
            f"{error.message} The kernel fallback {setting} has none: tried {', '.join(tried) or 'no other backend'}.",
            op=error.op, backend=be.name,
        )

    def _fallback_call(self, *inputs: Tensor) -> Any:
        setting = _FALLBACK.get()
        if setting is None:
            setting = config._kernel_fallback
        route = self.routes.get(setting)
        if route is None or route.__class__ is KernelNotFoundError:
            route = self._route(setting, self.backend, self.attrs)
        be, fb = self.backend, route.backend  # type: ignore[union-attr]
        key = (self.op_def.name, be.name, fb.name)
        if key not in _WARNED:
            _warn_fallback(key, self.attrs)
        refs = self.ref_positions
        # A Ref input goes over as a copy of its own (a host backend's to_numpy and
        # from_numpy may hand over the variable's memory, which the kernel would then
        # update in place, bypassing the copy-on-write that protects read_value()
        # snapshots and .numpy() arrays); the update comes back as the variable's new value.
        with update_lock(*[inputs[i] for i in refs]):  # type: ignore[arg-type]  # none: an empty lock
            moved = [
                Variable._view(fb.from_numpy(np.array(be.to_numpy(x._value))), x._dtype, fb) if i in refs else _moved(x, fb)
                for i, x in enumerate(inputs)
            ]
            result = route.call(*moved)  # type: ignore[union-attr]
            for i in refs:  # the update made on the fallback backend, written back as the variable's new value
                var = inputs[i]
                var._value = be.from_numpy(fb.to_numpy(moved[i]._value))
                var._version += 1  # type: ignore[attr-defined]
        result = _map_outputs(result, lambda t: _moved(t, be))
        with _lock:
            config._fallbacks[key] = config._fallbacks.get(key, 0) + 1
        for p in list(_PROFILERS):
            add = getattr(p, "add_fallback", None)
            if add is not None:
                add(*key)
        return result

    def _run(self, flat: list[Any]) -> list[Any]:
        """The signature's ``run``: native values in and out, through ``call``."""
        be = self.backend
        result = self._fallback_call(*[
            (Variable._view if i in self.ref_positions else Tensor)(v, dt, be) for i, (v, dt) in enumerate(zip(flat, self.in_dtypes))
        ])
        outs: list[Any] = []
        _map_outputs(result, lambda t: outs.append(t._value))
        return outs


def _map_outputs(result: Any, fn: Callable[[Tensor], Any]) -> Any:
    """A packed op result (a tensor, a list, a named tuple of those, or None) with ``fn``
    applied to each tensor, in output order."""
    if result is None:
        return None
    if isinstance(result, Tensor):
        return fn(result)
    if result.__class__ is list:
        return [fn(t) for t in result]
    return result._make([_map_outputs(part, fn) for part in result])


def _warn_fallback(key: tuple[str, str, str], attrs: Mapping[str, Any]) -> None:
    """The warning of a fallback, once per (op, from, to), pointing at the caller's line."""
    op, source, target = key
    types = ", ".join(f"{k}={_fmt(v)}" for k, v in sorted(attrs.items()) if isinstance(v, DType))
    level, frame = 1, inspect.currentframe()
    here = os.path.dirname(os.path.abspath(__file__))
    while frame is not None and (frame.f_code.co_filename.startswith(here) or frame.f_code.co_filename.startswith("<opkernel")):
        frame, level = frame.f_back, level + 1
    with _lock:  # threads falling back at once: one of them warns
        if key in _WARNED:
            return
        _WARNED.add(key)
    try:
        warnings.warn(
            f"op {op!r} has no kernel on backend {source!r}{' for ' + types if types else ''}: running it on "
            f"{target!r} (ok.config.kernel_fallback), its inputs copied there and its outputs back. Warned once per "
            f"op and pair of backends; ok.config.fallbacks counts every call.",
            KernelFallbackWarning, stacklevel=level,
        )
    except BaseException:  # a warnings filter raising it: the next call raises again
        with _lock:
            _WARNED.discard(key)
        raise
