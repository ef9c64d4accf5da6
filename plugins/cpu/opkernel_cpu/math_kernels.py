"""CPU kernels of the arithmetic and linear-algebra ops: one table in ``register_all``."""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError


def _unary(fn: Any) -> Any:
    return lambda x, **attrs: fn(x)


def _binary(fn: Any) -> Any:
    return lambda x, y, **attrs: fn(x, y)


def real_div(x: np.ndarray, y: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if T.is_integer:
        if not np.all(y):
            raise InvalidArgumentError("op 'RealDiv': integer division by zero", op="RealDiv")
        q = np.abs(x) // np.abs(y)  # C semantics: truncate toward zero
        return np.where((x < 0) != (y < 0), -q, q).astype(T.np)
    return np.true_divide(x, y)


def mat_mul(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool, **attrs: Any) -> np.ndarray:
    if a.ndim != 2 or b.ndim != 2:
        raise InvalidArgumentError(f"op 'MatMul': inputs must be matrices, got shapes {a.shape} and {b.shape}", op="MatMul")
    a = a.T if transpose_a else a
    b = b.T if transpose_b else b
    if a.shape[1] != b.shape[0]:
        raise InvalidArgumentError(
            f"op 'MatMul': matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}"
            f" (transpose_a={transpose_a}, transpose_b={transpose_b})",
            op="MatMul",
        )
    return a @ b


def add_n(inputs: list[np.ndarray], **attrs: Any) -> np.ndarray:
    shape = inputs[0].shape
    for x in inputs[1:]:
        if x.shape != shape:
            raise InvalidArgumentError(f"op 'AddN': all inputs must have shape {shape}, got {x.shape}", op="AddN")
    out = inputs[0].copy()
    for x in inputs[1:]:
        np.add(out, x, out=out)
    return out


def cast(x: np.ndarray, DstT: ok.DType, **attrs: Any) -> np.ndarray:
    return x.astype(DstT.np)


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Add", _binary(np.add), None, ()),
        ("Sub", _binary(np.subtract), None, ()),
        ("Mul", _binary(np.multiply), None, ()),
        ("RealDiv", real_div, None, ()),
        ("Neg", _unary(np.negative), None, ()),
        ("MatMul", mat_mul, None, ()),
        ("AddN", add_n, None, ()),
        ("Cast", cast, None, ()),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
