"""Specs, shape functions and gradients of the ops that make tensors of new
values: ZerosLike, OnesLike, Fill, Range, OneHot and StringToNumber, following
TensorFlow's ``array_ops.cc``; also the parsing that every backend's
StringToNumber kernel shares (``parse_numbers``).

Part of the array ops (``opkernel.ops.array_ops`` registers them and re-exports
the public names).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import shape_fns
from ..dtypes import DType
from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext
from ._array_common import _INDEX, _scalar, _sum_all, _values

__all__ = ["parse_numbers", "range_size", "register_gradients", "register_ops"]


# ---------------------------------------------------------------- shape functions


@shape_fns.output_size_from("depth")
def _one_hot_shape(c: InferenceContext) -> None:
    axis = int(c.get_attr("axis", -1))
    if axis < -1:
        raise c.error(f"axis must be >= -1, got {axis}")
    depth = _scalar(c, 1)
    if depth is not None and depth < 0:
        raise c.error(f"depth must be non-negative, got {depth}")
    c.with_rank(c.input(2), 0)
    c.with_rank(c.input(3), 0)
    indices = c.input(0)
    if indices.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    rank = len(indices.dims)
    if axis > rank:
        raise c.error(f"axis {axis} is out of range for indices of rank {rank}; expected a value in [-1, {rank}]")
    at = rank if axis == -1 else axis
    dims: list[Any] = list(indices.dims)
    c.set_output(0, c.make_shape(dims[:at] + [depth] + dims[at:]))


@shape_fns.output_size_from("dims")
def _fill_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 1)
    c.with_rank(c.input(1), 0)
    dims = _values(c, 0)
    if dims is not None and any(d < 0 for d in dims):
        raise c.error(f"dims must be non-negative, got {dims}")
    c.set_output(0, c.make_shape_from_shape_tensor(0))


def range_size(start: Any, limit: Any, delta: Any, error: Callable[[str], Exception]) -> int:
    """The length of Range(start, limit, delta), TensorFlow's rules.  The bounds are
    Python or numpy scalars: numpy ones set the dtype of the arithmetic."""
    if delta == 0:
        raise error("delta must not be 0")
    if delta > 0 and start > limit:
        raise error(f"start must be <= limit when delta > 0, got start={start}, limit={limit}")
    if delta < 0 and start < limit:
        raise error(f"start must be >= limit when delta < 0, got start={start}, limit={limit}")
    if isinstance(start, (int, np.integer)) and isinstance(limit, (int, np.integer)) and isinstance(delta, (int, np.integer)):
        return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    # In the inputs' own dtype, as TensorFlow does (sequence_ops.cc): given float32
    # scalars, range(0.0, 0.3, 0.1) has 3 elements; the same arithmetic in float64 gives 4.
    with np.errstate(all="ignore"):
        size = np.ceil(abs((limit - start) / delta))
    if not np.isfinite(size):
        raise error(f"the size (limit - start) / delta must be finite, got start={start}, limit={limit}, delta={delta}")
    return int(size)


@shape_fns.output_size_from("start", "limit", "delta")
def _range_shape(c: InferenceContext) -> None:
    values: list[Any] = []
    for i in range(3):
        c.with_rank(c.input(i), 0)
        t = c.input_tensor(i)
        if t is None:
            c.set_output(0, c.vector(None))
            return
        values.append(np.asarray(t).reshape(())[()])  # a numpy scalar: its dtype sets the size's arithmetic
    c.set_output(0, c.vector(range_size(values[0], values[1], values[2], c.error)))


# ---------------------------------------------------------------- specs


def register_ops() -> None:
    register_op("ZerosLike").input("x: T").output("y: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns a tensor of zeros with the same shape and type as x.")
    register_op("OnesLike").input("x: T").output("y: T").attr(
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64, complex64, complex128, "
        "bool}"
    ).set_shape_fn(shape_fns.unchanged_shape).doc("Returns a tensor of ones with the same shape and type as x.")
    register_op("StringToNumber").input("string_tensor: string").output("output: out_type").attr(
        "out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Converts each string in the input Tensor to the specified numeric type.\n\n"
        "out_type: The numeric type to interpret each string in string_tensor as."
    )
    register_op("OneHot").input("indices: TI").input("depth: int32").input("on_value: T").input(
        "off_value: T"
    ).attr("axis: int = -1").output("output: T").attr("T: type").attr("TI: {uint8, int8, int32, int64} = DT_INT64").set_shape_fn(
        _one_hot_shape
    ).doc("A one-hot tensor: on_value where indices == i along the new dimension axis, off_value elsewhere.")
    register_op("Fill").input("dims: index_type").input("value: T").output("output: T").attr("T: type").attr(
        f"index_type: {_INDEX}"
    ).set_shape_fn(_fill_shape).doc("A tensor of shape dims filled with the scalar value.")
    register_op("Range").input("start: Tidx").input("limit: Tidx").input("delta: Tidx").output("output: Tidx").attr(
        "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32} = DT_INT32"
    ).set_shape_fn(_range_shape).doc("The sequence start, start + delta, ... up to but not including limit.")


# ---------------------------------------------------------------- gradients


def _fill_grad(op: Any, grad: Any) -> list[Any]:
    return [None, _sum_all(grad)]


def register_gradients() -> None:
    register_gradient("Fill")(_fill_grad)
    for name in ("ZerosLike", "OnesLike", "StringToNumber", "OneHot", "Range"):
        not_differentiable(name)


# ---------------------------------------------------------------- StringToNumber


_NAN_PAYLOAD = re.compile(r"[+-]?nan\([0-9A-Za-z_]*\)", re.IGNORECASE)


def _parse_number(text: str, floating: bool, unsigned: bool = False) -> int | float:
    """One string as TensorFlow's StringToNumber reads it (strtod / safe_strto*): ASCII
    only, surrounding whitespace allowed; floats also in hex ("0x1p3"), as inf/nan words
    and as C's "nan(payload)"; integers in decimal only, unsigned ones without a minus
    sign (safe_strtou32 refuses "-0").  Python's own syntax is wider (digit separators
    "1_000", non-ASCII digits), so those are refused first.  ValueError if unreadable."""
    body = text.strip()
    if floating and body.isascii() and _NAN_PAYLOAD.fullmatch(body):
        return float("nan")
    if not body.isascii() or "_" in body:
        raise ValueError(text)
    if not floating:
        if unsigned and body.startswith("-"):
            raise ValueError(text)
        return int(body)
    try:
        return float(body)
    except ValueError:
        if not body.lstrip("+-").lower().startswith("0x"):  # fromhex alone would read "abc" as 2748
            raise
        return float.fromhex(body)


def parse_numbers(strings: np.ndarray, out_type: DType) -> np.ndarray:
    """StringToNumber's semantics on host strings (str or bytes), shared by every
    backend's kernel: TensorFlow's syntax (see ``_parse_number``), an integer out of
    ``out_type``'s range rejected, a float out of range rounded to inf or 0 as strtof does."""
    out = np.empty(strings.shape, out_type.np)
    flat_in, flat_out = strings.reshape(-1), out.reshape(-1)
    for i, s in enumerate(flat_in):
        text = s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)
        try:
            value = _parse_number(text, out_type.is_floating, out_type.is_unsigned)
        except ValueError:
            raise InvalidArgumentError(
                f"op 'StringToNumber': could not convert string {text!r} to {out_type.name}", op="StringToNumber"
            ) from None
        if out_type.is_integer and not (out_type.min <= value <= out_type.max):
            raise InvalidArgumentError(
                f"op 'StringToNumber': {text!r} is out of range for {out_type.name}", op="StringToNumber"
            )
        with np.errstate(over="ignore"):  # 1e39 as float32 is inf, as in TensorFlow
            flat_out[i] = value
    return out
