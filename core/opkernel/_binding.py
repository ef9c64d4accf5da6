"""Binding: an op call's arguments checked against its OpDef — host data converted
to tensors, type and length attrs inferred from the inputs (TensorFlow's rules),
defaults filled in, everything validated — before any kernel is chosen.

``bind`` is the general path's first step, and the tracer's (``ok.function``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ._calls import expected_dtype, named_error
from ._context import config
from ._convert import host_array, natural_dtype, transfer
from .backend import Backend
from .dtypes import DType, as_dtype
from .errors import InvalidArgumentError, OpkernelError, OpTypeError
from .op_registry import ArgDef, OpDef
from .tensor import Tensor, Variable

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


def bind(op_def: OpDef, inputs: Sequence[Any], attrs: Mapping[str, Any], be: Backend) -> tuple[list[Tensor], dict[str, Any]]:
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
        if value is not REQUIRED:
            value = op_def.coerce_attr(name, value)
            if name in op_def.inferred_attrs and bound.get(name, value) != value:
                error = InvalidArgumentError if op_def.attr(name).type == "int" else OpTypeError
                raise error(
                    f"op {op_def.name!r}: attr {name!r} was given as {format_attr(value)} but the inputs have "
                    f"{name}={format_attr(bound[name])}",
                    op=op_def.name,
                )
        bound[name] = value
    for attr in op_def.attrs:
        if bound.get(attr.name, REQUIRED) is REQUIRED:
            if not attr.has_default:
                raise InvalidArgumentError(
                    f"op {op_def.name!r}: missing required attr {attr.name!r} of type {attr.type}", op=op_def.name
                )
            bound[attr.name] = attr.default
    return tensors, bound


class _Required:
    def __repr__(self) -> str:
        return "<required>"


REQUIRED: Any = _Required()


def _infer_type_attrs(op_def: OpDef, groups: list[list[Any]], bound: dict[str, Any]) -> None:
    """TensorFlow's attr inference: ``T`` from input dtypes, ``N`` from list lengths."""
    sources: dict[str, str] = {}
    for arg, items in zip(op_def.inputs, groups):
        if arg.number_attr:
            _set_inferred(op_def, bound, arg.number_attr, len(items), arg, sources)
        if arg.type_list_attr:
            _set_inferred(
                op_def, bound, arg.type_list_attr,
                tuple(_dtype_of(x) or natural_dtype(x, _what(op_def, arg), op_def.name) for x in items), arg, sources,
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
                bound[arg.type_attr] = natural_dtype(items[0], _what(op_def, arg), op_def.name)
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
        natural_dtype(x, _what(op_def, arg), op_def.name)
        for arg, items in zip(op_def.inputs, groups) if arg.type_attr == name for x in items
    }
    for wider in (as_dtype("float32"), as_dtype("int64")):
        if wider in natural and (allowed is None or wider in allowed):
            return wider
    return default


def _set_inferred(op_def: OpDef, bound: dict[str, Any], name: str, value: Any, arg: ArgDef, sources: dict[str, str]) -> None:
    old = bound.get(name, REQUIRED)
    if old is not REQUIRED and old != value:
        raise OpTypeError(
            f"op {op_def.name!r}: input {arg.name!r} has {name}={format_attr(value)} but input "
            f"{sources[name]!r} has {name}={format_attr(old)}; inputs sharing attr {name!r} must agree",
            op=op_def.name,
        )
    bound[name] = value
    sources.setdefault(name, arg.name)


def format_attr(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(format_attr(v) for v in value) + "]"
    return value.name if isinstance(value, DType) else repr(value)


def _convert(op_def: OpDef, arg: ArgDef, index: int, x: Any, bound: Mapping[str, Any], be: Backend) -> Tensor:
    want = expected_dtype(arg, index, bound)
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
    host = host_array(x, want, _what(op_def, arg), op_def.name)
    try:
        value = be.from_numpy(host)
    except OpkernelError as e:  # the backend cannot hold it (strings on cuda): say for which op and input
        if e.op is not None:
            raise
        raise named_error(e, op_def.name) from e
    return Tensor(value, want, be)

