"""Generic kernels (``backend="*"``), written with opkernel ops: every backend that
has the few ops used here (Pad, StridedSlice, comparisons, Cast, Add, Select,
Reshape, UnsortedSegmentSum, GatherV2) runs median pooling with no kernel of its own.

The median is found without sorting: in a window of ``cnt`` in-bounds values,
value ``v`` is the lower median exactly when fewer than ``m + 1`` values are
smaller than it and more than ``m`` are smaller or equal, with
``m = (cnt - 1) // 2``.  The first window element (row-major) that passes is
the median, which is also the tie rule of the gradient.  Window geometry
depends only on shapes, so validity masks, ``m`` and the flat positions are
computed on the host and uploaded as small constants.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

import opkernel as ok

from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["median_pool2d", "median_pool2d_grad", "gather_at_medians"]

_ops: Any = ok.ops


def _taps(x: ok.Tensor, g: Window) -> list[ok.Tensor]:
    """The K = kh * kw window elements of every output, row-major, each (n, oh, ow, c);
    positions outside the input hold zeros (masked out by the callers)."""
    bottom = max(0, (g.oh - 1) * g.sh + g.kh - g.top - g.h)
    right = max(0, (g.ow - 1) * g.sw + g.kw - g.left - g.w)
    if g.top or g.left or bottom or right:
        x = _ops.pad(x, [[0, 0], [g.top, bottom], [g.left, right], [0, 0]])
    return [
        _ops.strided_slice(
            x, [0, i, j, 0], [g.n, i + (g.oh - 1) * g.sh + 1, j + (g.ow - 1) * g.sw + 1, g.c], [1, g.sh, g.sw, 1]
        )
        for i in range(g.kh)
        for j in range(g.kw)
    ]


def _const(value: np.ndarray) -> ok.Tensor:
    return ok.tensor(value)  # on the active backend: the one this generic kernel serves


def _nan_last_less(a: ok.Tensor, b: ok.Tensor) -> ok.Tensor:
    """a < b where NaN sorts after every number (as the device kernels and np.sort order)."""
    return _ops.logical_or(_ops.less(a, b), _ops.logical_and(_ops.not_equal(b, b), _ops.equal(a, a)))  # type: ignore[no-any-return]


def _nan_last_less_equal(a: ok.Tensor, b: ok.Tensor) -> ok.Tensor:
    return _ops.logical_or(_ops.less_equal(a, b), _ops.not_equal(b, b))  # type: ignore[no-any-return]


def _medians(x: ok.Tensor, g: Window, want_index: bool) -> tuple[ok.Tensor, ok.Tensor | None]:
    """(median values, flat positions in ``x`` of the medians or None), each (n, oh, ow, c)."""
    taps = _taps(x, g)
    inside = (g.row_inside()[:, None, :, None] & g.col_inside()[None, :, None, :]).reshape(g.oh, g.ow, g.taps)
    padded = not inside.all()
    valid = [_const(inside[None, :, :, t, None]) for t in range(g.taps)] if padded else []
    m = _const((((g.counts() - 1) // 2)[None, :, :, None]).astype(np.int32))

    def count(pred: Any, t: int) -> ok.Tensor:
        total: ok.Tensor | None = None
        for s, v in enumerate(taps):
            hit = pred(v, taps[t])
            if padded:
                hit = _ops.logical_and(hit, valid[s])
            n = _ops.cast(hit, DstT=ok.int32)
            total = n if total is None else _ops.add(total, n)
        assert total is not None
        return total

    index_type = np.int64 if g.n * g.h * g.w * g.c >= 2**31 else np.int32
    base = (np.arange(g.n) * g.h * g.w * g.c)[:, None, None, None] + np.arange(g.c)[None, None, None, :]
    rows = np.arange(g.oh) * g.sh - g.top
    cols = np.arange(g.ow) * g.sw - g.left
    value: ok.Tensor | None = None
    index: ok.Tensor | None = None
    found: ok.Tensor | None = None
    less, less_equal = (_nan_last_less, _nan_last_less_equal) if x.dtype.is_floating else (_ops.less, _ops.less_equal)
    for t, v in enumerate(taps):
        below, at_most = count(less, t), count(less_equal, t)
        is_median = _ops.logical_and(_ops.less_equal(below, m), _ops.greater(at_most, m))
        if padded:
            is_median = _ops.logical_and(is_median, valid[t])
        flat = None
        if want_index:
            i, j = divmod(t, g.kw)
            spatial = ((rows + i)[:, None] * g.w + (cols + j)[None, :]) * g.c
            flat = _ops.add(_const(base.astype(index_type)), _const(spatial[None, :, :, None].astype(index_type)))
        if found is None:
            found, value, index = is_median, v, flat
            continue
        take = _ops.logical_and(is_median, _ops.logical_not(found))
        value = _ops.select(take, v, value)
        if want_index:
            index = _ops.select(take, flat, index)
        found = _ops.logical_or(found, take)
    assert value is not None
    return value, index


def _empty(shape: Sequence[int], dtype: ok.DType) -> ok.Tensor:
    return _const(np.zeros(tuple(shape), dtype.np))


def median_pool2d(value: ok.Tensor, ksize: Sequence[int], strides: Sequence[int], padding: str, T: ok.DType) -> ok.Tensor:
    g = window(MEDIAN_POOL, value.shape, ksize, strides, padding)
    if 0 in g.out_shape:
        return _empty(g.out_shape, T)
    return _medians(value, g, want_index=False)[0]


def _median_positions(x: ok.Tensor, g: Window) -> ok.Tensor:
    """The flat position in ``x`` of each window's median, as a vector."""
    index = _medians(x, g, want_index=True)[1]
    assert index is not None
    return _ops.reshape(index, [-1])  # type: ignore[no-any-return]


def median_pool2d_grad(
    orig_input: ok.Tensor, grad: ok.Tensor, ksize: Sequence[int], strides: Sequence[int], padding: str, T: ok.DType
) -> ok.Tensor:
    op = MEDIAN_POOL_GRAD
    g = window(op, orig_input.shape, ksize, strides, padding)
    if tuple(grad.shape) != g.out_shape:
        raise ok.errors.InvalidArgumentError(
            f"op '{op}': grad must have the shape of the pooled output {list(g.out_shape)}, got {list(grad.shape)}",
            op=op,
        )
    if 0 in g.out_shape:
        return _empty(orig_input.shape, T)
    total = _ops.unsorted_segment_sum(_ops.reshape(grad, [-1]), _median_positions(orig_input, g), g.n * g.h * g.w * g.c)
    return _ops.reshape(total, list(orig_input.shape))  # type: ignore[no-any-return]


def gather_at_medians(
    orig_input: ok.Tensor, grad: ok.Tensor, ksize: Sequence[int], strides: Sequence[int], padding: str
) -> ok.Tensor:
    """``grad`` (shaped like ``orig_input``) read at each window's median: the
    transpose of MedianPool2DGrad, so its gradient with respect to ``grad``."""
    g = window(MEDIAN_POOL_GRAD, orig_input.shape, ksize, strides, padding)
    if 0 in g.out_shape:
        return _empty(g.out_shape, grad.dtype)
    picked = _ops.gather_v2(_ops.reshape(grad, [-1]), _median_positions(orig_input, g), 0)
    return _ops.reshape(picked, list(g.out_shape))  # type: ignore[no-any-return]
