"""Host-side helpers shared by the kernel modules: errors, broadcasting, strides."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from opkernel.errors import InvalidArgumentError

MAX_RANK = 8

FLOATS = ("float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
REALS = FLOATS + INTS
ALL = REALS + ("bool",)


def fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op '{op}': {message}", op=op)


def dims(values: Sequence[int]) -> np.ndarray:
    """A ``dims_t`` kernel argument (a struct of 8 ints, passed by value)."""
    out = np.zeros(MAX_RANK, np.int32)
    out[: len(values)] = values
    return out


def fast_divisor(d: int) -> tuple[int, int]:
    """(multiplier, shift) with which the kernels' ``fdiv(n, m, s)`` computes ``n / d`` for
    0 <= n < 2**31 by a multiply-high, an add and a shift (Granlund and Montgomery,
    "Division by invariant integers using multiplication", 1994; CUTLASS's FastDivmod).
    The multiplier is returned as the int32 of its 32 bits, as a ``dims_t`` holds it.
    (0, 0) for d < 1, a size whose kernels never run."""
    if d < 1:
        return 0, 0
    s = (d - 1).bit_length()  # ceil(log2(d))
    m = ((1 << 32) * ((1 << s) - d)) // d + 1  # < 2**32 since 2**(s-1) < d
    return (m - (1 << 32) if m >= 1 << 31 else m), s


def broadcast_shape(op: str, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise fail(op, "Incompatible shapes: " + " vs. ".join(str(list(s)) for s in shapes)) from None


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(int(shape[i + 1]), 1)
    return strides


def broadcast_strides(shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides reading a C-contiguous ``shape`` at each index of ``out_shape`` (0 where broadcast)."""
    lead = len(out_shape) - len(shape)
    own = contiguous_strides(shape)
    return [0] * lead + [0 if d == 1 and o != 1 else s for d, o, s in zip(shape, out_shape[lead:], own)]


def collapse(shape: Sequence[int], *strides: Sequence[int]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dimensions and merge neighbours that are contiguous for every operand."""
    keep = [i for i, d in enumerate(shape) if d != 1]
    out_shape = [int(shape[i]) for i in keep]
    out_strides = [[int(s[i]) for i in keep] for s in strides]
    i = len(out_shape) - 1
    while i > 0:
        if all(st[i - 1] == st[i] * out_shape[i] for st in out_strides):
            out_shape[i - 1] *= out_shape[i]
            del out_shape[i]
            for st in out_strides:
                st[i - 1] = st[i]
                del st[i]
        i -= 1
    if not out_shape:
        out_shape = [1]
        out_strides = [[0] for _ in strides]
    return out_shape, out_strides


def scalar(dtype: np.dtype[Any], value: Any) -> Any:
    """A by-value kernel argument of ``dtype`` (bool travels as uchar)."""
    if dtype == np.bool_:
        return np.uint8(bool(value))
    return dtype.type(value)


def literal(value: float, dtype: str) -> str:
    """An OpenCL C literal of a floating ``dtype``."""
    text = repr(float(value))
    return text + "f" if dtype == "float32" else text


#: The widest element the ``*_v8`` row kernels take (see ``vector_rows``).
VECTOR_ROW_ITEMSIZE = 4


def vector_row_source(dtype: str, source: str) -> str:
    """``source`` (a family's ``*_v8`` kernels) where ``dtype``'s rows may be read as
    vectors of 8, else nothing: a program holding a ``double8`` kernel does not build on
    PoCL for AVX-512 CPUs, taking the family's scalar kernels down with it."""
    return source if np.dtype(dtype).itemsize <= VECTOR_ROW_ITEMSIZE else ""


def vector_rows(be: Any, C: int, itemsize: int) -> bool:
    """Whether a row kernel (Softmax, SoftmaxGrad, the layer norm pair) reads rows of ``C``
    values of ``itemsize`` bytes as vectors of 8 (its ``*_v8`` kernel): on CPU devices
    (``be.row_vectors``), for rows of a multiple of 8 values, where buffers start on a
    boundary of 8 values (kernels read arrays from their buffer's start, so every row
    then starts on a vector), and for values of at most 4 bytes: vectors of 8 doubles are
    512 bits, which PoCL 3.1's LLVM cannot compile builtins on (``fmax``, ``exp``, even
    ``fabs`` of a ``double8``) for CPUs with AVX-512 ("Cannot emit physreg copy
    instruction", or a program without its kernels), so float64 rows take the scalar
    loops everywhere."""
    return (bool(be.row_vectors) and itemsize <= VECTOR_ROW_ITEMSIZE and C >= 8 and C % 8 == 0
            and be.base_align % (8 * itemsize) == 0)
