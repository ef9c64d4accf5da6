"""What the array op modules share: the index-type attr spec, the readers of
known integer inputs in shape functions, and shape vectors for gradients.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from ..dtypes import DType
from ..errors import OpkernelError
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops

_INDEX = "{int32, int64} = DT_INT32"


def _values(c: InferenceContext, i: int) -> list[int] | None:
    """The known value of integer input ``i`` as a flat list of ints, else None."""
    t = c.input_tensor(i)
    return None if t is None else [int(v) for v in np.asarray(t).reshape(-1)]


def _scalar(c: InferenceContext, i: int) -> int | None:
    c.with_rank(c.input(i), 0)
    v = _values(c, i)
    return None if v is None else v[0]


def _axis(c: InferenceContext, axis: int, rank: int, what: str) -> int:
    """``axis`` in ``[-rank, rank)`` made non-negative, or a ShapeError."""
    if not -rank <= axis < rank:
        raise c.error(f"{what} {axis} is out of range for a tensor of rank {rank}; expected a value in [{-rank}, {rank})")
    return axis % rank if rank else axis


def _shape_const(shape: Sequence[int], dtype: DType | None = None) -> np.ndarray:
    """A static shape as an integer array (an empty shape must not become float)."""
    return np.asarray(list(shape), dtype=np.int32 if dtype is None else dtype.np)


def _shape_of(t: Any, dtype: DType | None = None) -> Any:
    """``t``'s shape as an integer vector: a constant, or a Shape op for a tensor of
    unknown dimensions (a gradient traced by ok.function under an unknown batch)."""
    if None in tuple(t.shape):
        return _ops().shape(t, out_type=dtype.name if dtype is not None else "int32")
    return _shape_const(t.shape, dtype)


def _sum_all(grad: Any) -> Any:
    if not grad.shape:
        return grad
    return _ops().sum(grad, _shape_const(range(len(grad.shape))), keep_dims=False)


@contextmanager
def errors_as(op: str) -> Iterator[None]:
    """Errors of the ops a generic kernel is written with, said as the kernel's op's own:
    ``op 'PadV2': paddings must be non-negative ... (in op 'Pad')``."""
    try:
        yield
    except OpkernelError as e:
        if e.op == op:
            raise
        inner = str(e).removeprefix(f"op {e.op!r}: ")
        raise type(e)(f"op {op!r}: {inner} (in op {e.op!r})", op=op) from e


_Kernel = TypeVar("_Kernel", bound=Callable[..., Any])


def named_errors(op: str) -> Callable[[_Kernel], _Kernel]:
    """A generic kernel whose errors, raised by the ops it is written with, are said as
    ``op``'s own (``errors_as``)."""

    def wrap(fn: _Kernel) -> _Kernel:
        @functools.wraps(fn)
        def kernel(*args: Any, **kwargs: Any) -> Any:
            with errors_as(op):
                return fn(*args, **kwargs)

        return kernel  # type: ignore[return-value]

    return wrap
