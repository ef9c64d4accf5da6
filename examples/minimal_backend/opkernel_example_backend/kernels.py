"""The kernels of the ``example`` backend: one table in ``register_all``.

A function kernel receives native arrays (``ExampleArray``) and the op's attrs
as keyword arguments, and returns native arrays.  Inputs listed in
``host_memory`` arrive as numpy arrays instead (Reshape's ``shape``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok

from .backend import ExampleArray

NUMBERS = ["float32", "float64", "int32", "int64"]
FLOATS = ["float32", "float64"]


def add(x: ExampleArray, y: ExampleArray, **attrs: Any) -> ExampleArray:
    return ExampleArray(np.add(x.data, y.data))


def mul(x: ExampleArray, y: ExampleArray, **attrs: Any) -> ExampleArray:
    return ExampleArray(np.multiply(x.data, y.data))


def reshape(tensor: ExampleArray, shape: np.ndarray, **attrs: Any) -> ExampleArray:
    dims = [int(d) for d in shape.reshape(-1)]  # host memory: a numpy array
    try:
        return ExampleArray(tensor.data.reshape(dims))
    except ValueError as e:
        raise ok.errors.InvalidArgumentError(
            f"op 'Reshape': cannot reshape a tensor with {tensor.data.size} elements to shape {dims}", op="Reshape"
        ) from e


class MatMul(ok.OpKernel):
    """A class kernel: ``__init__`` reads attrs once per signature, ``compute`` runs per call."""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.transpose_a = ctx.get_attr("transpose_a")
        self.transpose_b = ctx.get_attr("transpose_b")

    def compute(self, ctx: ok.OpKernelContext) -> None:
        a, b = ctx.input(0).data, ctx.input(1).data
        ctx.require(a.ndim == 2 and b.ndim == 2, f"inputs must be matrices, got shapes {a.shape} and {b.shape}")
        a = a.T if self.transpose_a else a
        b = b.T if self.transpose_b else b
        ctx.require(a.shape[1] == b.shape[0], f"matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}")
        ctx.set_output(0, ExampleArray(a @ b))


def register_all() -> None:
    """(op, kernel, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Add", add, {"T": NUMBERS}, ()),
        ("Mul", mul, {"T": NUMBERS}, ()),
        ("MatMul", MatMul, {"T": FLOATS}, ()),
        ("Reshape", reshape, None, ("shape",)),
        ("Identity", lambda input, **attrs: input, None, ()),
        ("ZerosLike", lambda x, **attrs: ExampleArray(np.zeros_like(x.data)), None, ()),
        ("OnesLike", lambda x, **attrs: ExampleArray(np.ones_like(x.data)), None, ()),
    ]
    for op, kernel, constraints, host in table:
        ok.register_kernel(op, backend="example", type_constraints=constraints, host_memory=host)(kernel)
