"""Common shape functions (TensorFlow's ``common_shape_fns``).

Each is a plain function of an :class:`~opkernel.shapes.InferenceContext` that
sets the output shapes and returns ``None``; the ``*_with_rank*`` ones are
factories that return such a function.  Shape errors name the op and the input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .shapes import Dimension, InferenceContext, TensorShape, output_size_from, output_size_inputs

__all__ = [
    "batch_matmul_shape",
    "broadcast_binary_op_shape",
    "matmul_shape",
    "merge_all_inputs",
    "no_outputs",
    "output_size_from",
    "output_size_inputs",
    "reduction_shape",
    "scalar_shape",
    "unchanged_shape",
    "unchanged_shape_with_rank",
    "unchanged_shape_with_rank_at_least",
    "unchanged_shape_with_rank_at_most",
    "unknown_shape",
]

ContextFn = Callable[[InferenceContext], None]


def unchanged_shape(ctx: InferenceContext) -> None:
    """Output 0 has the shape of input 0 (elementwise unary ops)."""
    ctx.set_output(0, ctx.input(0))


def unchanged_shape_with_rank(rank: int) -> ContextFn:
    """Like :func:`unchanged_shape`, with input 0 required to have rank ``rank``."""

    def fn(ctx: InferenceContext) -> None:
        ctx.set_output(0, ctx.with_rank(ctx.input(0), rank))

    return fn


def unchanged_shape_with_rank_at_least(rank: int) -> ContextFn:
    """Like :func:`unchanged_shape`, with input 0 required to have rank ``>= rank``."""

    def fn(ctx: InferenceContext) -> None:
        ctx.set_output(0, ctx.with_rank_at_least(ctx.input(0), rank))

    return fn


def unchanged_shape_with_rank_at_most(rank: int) -> ContextFn:
    """Like :func:`unchanged_shape`, with input 0 required to have rank ``<= rank``."""

    def fn(ctx: InferenceContext) -> None:
        ctx.set_output(0, ctx.with_rank_at_most(ctx.input(0), rank))

    return fn


def scalar_shape(ctx: InferenceContext) -> None:
    """Output 0 is a scalar."""
    ctx.set_output(0, ctx.scalar())


def unknown_shape(ctx: InferenceContext) -> None:
    """Every output is of unknown shape."""
    for i in range(ctx.num_outputs()):
        ctx.set_output(i, ctx.unknown_shape())


def no_outputs(ctx: InferenceContext) -> None:
    """For ops without outputs: there is nothing to infer."""


def merge_all_inputs(ctx: InferenceContext) -> None:
    """Every input must have the same shape (unknowns allowed); output 0 has the
    merged, most specific one.  ``AddN``-style ops."""
    if ctx.num_inputs() == 0:
        raise ctx.error("merge_all_inputs needs at least one input, but the op has none")
    merged = ctx.input(0)
    for i in range(1, ctx.num_inputs()):
        merged = ctx.merge(merged, ctx.input(i))
    ctx.set_output(0, merged)


def matmul_shape(ctx: InferenceContext) -> None:
    """``MatMul``: two matrices, attrs ``transpose_a`` and ``transpose_b``
    (default false); the inner dimensions must agree."""
    a = ctx.with_rank(ctx.input(0), 2)
    b = ctx.with_rank(ctx.input(1), 2)
    ta = bool(ctx.get_attr("transpose_a", False))
    tb = bool(ctx.get_attr("transpose_b", False))
    ctx.merge(ctx.dim(a, 0 if ta else 1), ctx.dim(b, 1 if tb else 0))
    ctx.set_output(0, ctx.matrix(ctx.dim(a, 1 if ta else 0), ctx.dim(b, 0 if tb else 1)))


def batch_matmul_shape(ctx: InferenceContext) -> None:
    """``BatchMatMulV2``: inputs of rank >= 2 whose last two dimensions are
    multiplied (attrs ``adj_x``/``adj_y`` swap them) and whose leading (batch)
    dimensions broadcast."""
    x = ctx.with_rank_at_least(ctx.input(0), 2)
    y = ctx.with_rank_at_least(ctx.input(1), 2)
    adj_x = bool(ctx.get_attr("adj_x", False))
    adj_y = bool(ctx.get_attr("adj_y", False))
    batch = ctx.broadcast(ctx.subshape(x, 0, -2), ctx.subshape(y, 0, -2))
    ctx.merge(ctx.dim(x, -2 if adj_x else -1), ctx.dim(y, -1 if adj_y else -2))
    rows, cols = ctx.dim(x, -1 if adj_x else -2), ctx.dim(y, -2 if adj_y else -1)
    ctx.set_output(0, ctx.concatenate(batch, ctx.matrix(rows, cols)))


def broadcast_binary_op_shape(ctx: InferenceContext) -> None:
    """Output 0 is inputs 0 and 1 broadcast together, as in numpy; an unknown
    dimension against 1 stays unknown, against a size > 1 takes that size."""
    ctx.set_output(0, ctx.broadcast(ctx.input(0), ctx.input(1)))


def _reduction_axes(ctx: InferenceContext, axes: npt.NDArray[Any], data: TensorShape) -> set[int]:
    """The distinct, non-negative axes of ``data`` (of known rank) that ``axes`` names."""
    if not np.issubdtype(axes.dtype, np.integer) or axes.ndim > 1:
        raise ctx.error(
            f"{ctx.input_label(1)} (the reduction axes) must be an int32 or int64 scalar "
            f"or vector, but has dtype {axes.dtype} and shape {axes.shape}"
        )
    rank = len(data)
    bad = [int(a) for a in axes.ravel() if not -rank <= a < rank]
    if bad:
        raise ctx.error(
            f"Invalid reduction dimension {bad[0]} for {ctx.describe(data)} of rank {rank}; "
            f"expected an axis in [{-rank}, {rank})"
        )
    return {int(a) % rank for a in axes.ravel()}


def reduction_shape(ctx: InferenceContext) -> None:
    """Reductions (``Sum``, ``Max``...): input 0 is the data, input 1 the axes
    (an int scalar or vector; negative axes count from the end, duplicates are
    allowed), attr ``keep_dims`` keeps reduced axes as size 1.  With the axes
    unknown, ``keep_dims`` keeps the rank, otherwise the rank is unknown too."""
    data = ctx.input(0)
    axes = ctx.input_tensor(1)
    keep_dims = bool(ctx.get_attr("keep_dims", False))
    if axes is None or data.dims is None:
        rank = data.rank if keep_dims else None
        ctx.set_output(0, TensorShape(None) if rank is None else ctx.unknown_shape_of_rank(rank))
        return
    reduced = _reduction_axes(ctx, axes, data)
    dims: list[Dimension] = []
    for i, d in enumerate(data.dims):
        if i not in reduced:
            dims.append(d)
        elif keep_dims:
            dims.append(Dimension(1))
    ctx.set_output(0, ctx.make_shape(dims))
