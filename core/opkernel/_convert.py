"""Conversion: Python values and numpy arrays as tensors (``ok.tensor``), with the
checks that refuse what would not make a faithful tensor, and transfers between backends.

Above the runtime's context (which backend), below binding and dispatch, which convert
an op's literal arguments with ``host_array`` and ``natural_dtype``.
"""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np

from ._context import ACTIVE, active_backend, available_backends, backend_instance, is_tracing
from .autodiff import RECORDING, install_placement, record_transfer
from .backend import Backend
from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError, OpTypeError
from .tensor import Tensor
from .tensor import install as tensor_hooks

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


def natural_dtype(value: Any, what: str = "ok.tensor", op: str | None = None) -> DType:
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


def host_array(value: Any, dtype: DType, what: str, op: str | None = None) -> np.ndarray:
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
    dt = as_dtype(dtype) if dtype is not None else natural_dtype(data)
    arr = host_array(data, dt, "ok.tensor")
    if be.host_memory_is_native and _callers_memory(arr, data):
        arr = arr.copy()  # device backends upload a copy of their own
    return Tensor(be.from_numpy(arr), dt, be)


#: Host data numpy always converts into a new array: nothing the caller holds shares it.
FRESH_KINDS = (Tensor, list, tuple, int, float, complex, bool, str, bytes, np.generic, type(None))


def _callers_memory(arr: np.ndarray, data: Any) -> bool:
    """Whether ``arr``, converted from ``data``, may share memory the caller can still
    change: ``data`` itself, a view of it, or what its ``__array__`` or buffer exposes."""
    if isinstance(data, np.ndarray):
        return np.may_share_memory(arr, data)
    return not isinstance(data, FRESH_KINDS)


def transfer(t: Tensor, backend: str) -> Tensor:
    """A copy of ``t`` on ``backend``, through host memory.

    Differentiable, as ``tf.identity`` under another device is: a recording tape
    that tracks ``t`` records the copy, and its gradient is copied back to ``t``'s
    backend."""
    be = backend_instance(backend)
    if t._backend is be:
        return t
    return moved(t, be)


def moved(t: Tensor, be: Backend) -> Tensor:
    """``transfer`` to a backend instance (``t`` lives elsewhere)."""
    out = Tensor(be.from_numpy(t._backend.to_numpy(t._value)), t._dtype, be)
    if RECORDING[0]:
        record_transfer(t, out)
    return out


def _restore_backend(name: str) -> Backend:
    """The backend a pickled tensor lived on, or the active one when it is not installed here."""
    return backend_instance(name) if name in available_backends() else active_backend()


install_placement(ACTIVE.set, ACTIVE.reset, moved, to_tensor)
tensor_hooks(to_tensor=to_tensor, transfer=transfer, restore_backend=_restore_backend, is_tracing=is_tracing)

