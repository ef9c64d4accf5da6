"""Attr values: the canonical form of a value given for an attr of each type (``int``,
``float``, ``type``, ``shape``, ``tensor``, lists of them, ...), the checks of a value
against an attr's constraints, and the JSON encoding of values in saved OpDefs."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np

from .dtypes import DType, as_dtype
from .errors import OpTypeError
from .shapes import TensorShape, as_shape

if TYPE_CHECKING:
    from .op_registry import AttrDef

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# ------------------------------------------------------ attr values: checking


class _WrongKind:
    """Marks a value of the wrong Python kind for an attr."""


_WRONG_KIND: Any = _WrongKind()

_KIND_TEXT = {
    "int": "an int",
    "float": "a float",
    "bool": "a bool",
    "string": "a str",
    "type": "a dtype (a DType, a name such as 'float32', a numpy dtype)",
    "shape": "a shape (a list or tuple of sizes, a TensorShape, or None)",
    "tensor": "an array-like value",
}


def _element_type(attr_type: str) -> str:
    return attr_type[5:-1] if attr_type.startswith("list(") else attr_type


def _expected_kind(attr_type: str) -> str:
    if attr_type.startswith("list("):
        return f"a list or tuple of {_element_type(attr_type)} values"
    return _KIND_TEXT[attr_type]


def _canonical(attr_type: str, value: Any) -> Any:
    """``value`` in canonical form for ``attr_type``, or ``_WRONG_KIND``."""
    if attr_type.startswith("list("):
        if not isinstance(value, (list, tuple)):
            return _WRONG_KIND
        items = tuple(_canonical(attr_type[5:-1], v) for v in value)
        return _WRONG_KIND if any(v is _WRONG_KIND for v in items) else items
    return _SCALAR_CANONICAL[attr_type](value)


def _canonical_int(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        return _WRONG_KIND
    number = int(value)
    return number if _INT64_MIN <= number <= _INT64_MAX else _WRONG_KIND


def _canonical_float(value: Any) -> Any:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return _WRONG_KIND
    return float(value)


def _canonical_bool(value: Any) -> Any:
    return bool(value) if isinstance(value, (bool, np.bool_)) else _WRONG_KIND


def _canonical_string(value: Any) -> Any:
    return value if isinstance(value, str) else _WRONG_KIND


def _canonical_type(value: Any) -> Any:
    try:
        return as_dtype(value)
    except OpTypeError:
        return _WRONG_KIND


def _canonical_shape(value: Any) -> Any:
    try:
        return as_shape(value)
    except (TypeError, ValueError):
        return _WRONG_KIND


def _canonical_tensor(value: Any) -> Any:
    try:
        array = np.array(value)
    except (TypeError, ValueError):
        return _WRONG_KIND
    if array.dtype.kind in "US":
        array = array.astype(object)
    array.flags.writeable = False
    return array


_SCALAR_CANONICAL: dict[str, Callable[[Any], Any]] = {
    "int": _canonical_int,
    "float": _canonical_float,
    "bool": _canonical_bool,
    "string": _canonical_string,
    "type": _canonical_type,
    "shape": _canonical_shape,
    "tensor": _canonical_tensor,
}


def _violation(attr: AttrDef, value: Any) -> str | None:
    """What a canonical ``value`` breaks of ``attr``'s constraints, or None."""
    items = value if attr.is_list else (value,)
    if attr.allowed_values is not None and any(v not in attr.allowed_values for v in items):
        return f"{'elements ' if attr.is_list else ''}must be one of {_show(attr.allowed_values)}"
    if attr.minimum is None:
        return None
    if attr.is_list and len(value) < attr.minimum:
        return f"must have at least {attr.minimum} elements"
    if attr.type == "int" and value < attr.minimum:
        return f"must be >= {attr.minimum}"
    return None


def _attr_message(op: str, attr: str, problem: str, value: Any) -> str:
    return f"op '{op}': attr '{attr}' {problem}, got {_show(value)}"


def _show(value: Any) -> str:
    """``value`` as error messages print it: dtypes by name, lists in brackets."""
    if isinstance(value, DType):
        return value.name
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(_show(v) for v in value) + "]"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# ------------------------------------------------------ attr values: JSON form


def _encode(attr_type: str, value: Any) -> Any:
    if attr_type.startswith("list("):
        return [_encode(attr_type[5:-1], v) for v in value]
    if attr_type == "shape":
        return None if value.rank is None else value.as_list()
    if attr_type == "tensor":
        return _encode_tensor(value)
    return _encode_scalar(value)


def _encode_scalar(value: Any) -> Any:
    if isinstance(value, DType):
        return value.name
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # "inf", "-inf", "nan": JSON has no literal for them
    return value


def _encode_tensor(array: np.ndarray[Any, Any]) -> dict[str, Any]:
    dtype = as_dtype(array.dtype)
    if dtype.is_complex:
        flat: list[Any] = [[_encode_scalar(float(v.real)), _encode_scalar(float(v.imag))] for v in array.ravel()]
    elif dtype.is_floating:
        flat = [_encode_scalar(float(v)) for v in array.ravel()]
    else:
        flat = array.ravel().tolist()
    return {"dtype": dtype.name, "shape": list(array.shape), "values": flat}


def _decode(attr_type: str, data: Any) -> Any:
    if attr_type.startswith("list("):
        return tuple(_decode(attr_type[5:-1], v) for v in data)
    if attr_type == "type":
        return as_dtype(data)
    if attr_type == "shape":
        return TensorShape(data)
    if attr_type == "tensor":
        return _decode_tensor(data)
    if attr_type == "float":
        return float(data)
    return data


def _decode_tensor(data: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    dtype = as_dtype(data["dtype"])
    values = data["values"]
    if dtype.is_complex:
        values = [complex(float(re), float(im)) for re, im in values]
    elif dtype.is_floating:
        values = [float(v) for v in values]
    array = np.array(values, dtype=dtype.np).reshape(data["shape"])
    array.flags.writeable = False
    return array
