"""CPU kernels of the shape and data-movement ops: one table in ``register_all``."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError


def reshape(tensor: np.ndarray, shape: np.ndarray, **attrs: Any) -> np.ndarray:
    dims = [int(d) for d in np.asarray(shape).reshape(-1)]
    try:
        return tensor.reshape(dims)
    except ValueError as e:
        raise InvalidArgumentError(
            f"op 'Reshape': cannot reshape a tensor with {tensor.size} elements to shape {dims}", op="Reshape"
        ) from e


def shape(input: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return np.array(input.shape, dtype=out_type.np)


def pad(input: np.ndarray, paddings: np.ndarray, **attrs: Any) -> np.ndarray:
    pads = np.asarray(paddings)
    if pads.shape != (input.ndim, 2):
        raise InvalidArgumentError(
            f"op 'Pad': paddings must have shape [{input.ndim}, 2] for an input of rank {input.ndim}, got {list(pads.shape)}",
            op="Pad",
        )
    if (pads < 0).any():
        raise InvalidArgumentError(f"op 'Pad': paddings must be non-negative, got {pads.tolist()}", op="Pad")
    return np.pad(input, pads.tolist(), mode="constant")


def string_to_number(string_tensor: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    parse = float if out_type.is_floating else int
    out = np.empty(string_tensor.shape, out_type.np)
    flat_in, flat_out = string_tensor.reshape(-1), out.reshape(-1)
    for i, s in enumerate(flat_in):
        text = s.decode() if isinstance(s, bytes) else str(s)
        try:
            value = parse(text.strip())
        except ValueError:
            raise InvalidArgumentError(
                f"op 'StringToNumber': could not convert string {text!r} to {out_type.name}", op="StringToNumber"
            ) from None
        if out_type.is_integer and not (out_type.min <= value <= out_type.max):
            raise InvalidArgumentError(f"op 'StringToNumber': {text!r} is out of range for {out_type.name}", op="StringToNumber")
        flat_out[i] = value
    return out


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Identity", lambda input, **a: input, None, ()),
        ("Reshape", reshape, None, ("shape",)),
        ("Shape", shape, None, ()),
        ("Pad", pad, None, ("paddings",)),
        ("ZerosLike", lambda x, **a: np.zeros_like(x), None, ()),
        ("OnesLike", lambda x, **a: np.ones_like(x), None, ()),
        ("StringToNumber", string_to_number, None, ()),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
