"""Fused numpy kernels of median pooling for the ``cpu`` backend.

3x3 windows, where they lie wholly inside the input, use the classic
19-exchange median-of-9 network (Paeth; Devillard's ``opt_med9``) over shifted
views of the input.  Its first stage sorts each window's three columns; a
column's sort is shared by every window that contains it, so it is done once
per input position, and each later exchange computes only the half the median
needs: 18 ``np.minimum``/``np.maximum`` passes in all.  Work goes in tiles of
about ``TILE_ELEMENTS`` so the intermediate arrays stay in cache.

Everything else (other window sizes, and windows that SAME padding cuts at the
border) takes the lower median with ``np.partition`` over a sliding window view,
tile by tile: positions outside the input are filled with the dtype's largest
value (NaN for floats), which sorts after every real element, so the
``(cnt - 1) // 2``-th smallest is the median of the ``cnt`` elements inside.

NaN sorts after every number, as in ``np.sort``: the network's minimum is
``np.fmin`` (a NaN loses) and its maximum ``np.maximum`` (a NaN wins).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import opkernel as ok

from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["median_pool2d", "median_pool2d_grad", "TILE_ELEMENTS"]

#: Elements of one intermediate array of a tile (128 KiB of float32).
TILE_ELEMENTS = 1 << 15
#: Elements of the (.., kh * kw) copy the partition path sorts per tile.
SELECT_ELEMENTS = 1 << 19


def _fill(dtype: ok.DType) -> Any:
    """A value no real element exceeds: the padding of the partition path.  For floats
    NaN, which np.partition sorts last, with the input's own NaNs."""
    return np.iinfo(dtype.np).max if dtype.is_integer else np.nan


def _select(x: np.ndarray, g: Window, out: np.ndarray, rows: tuple[int, int], cols: tuple[int, int], fill: Any) -> None:
    """``out[:, r0:r1, c0:c1]`` = the lower medians of those outputs' windows (any size, any padding)."""
    (r0, r1), (c0, c1) = rows, cols
    if r0 >= r1 or c0 >= c1 or not g.n:
        return
    k = g.taps
    per_row = (c1 - c0) * g.c * k
    step = max(1, SELECT_ELEMENTS // per_row)
    counts = g.counts()
    for ra in range(r0, r1, step):
        rb = min(r1, ra + step)
        y0, y1 = ra * g.sh - g.top, (rb - 1) * g.sh - g.top + g.kh
        x0, x1 = c0 * g.sw - g.left, (c1 - 1) * g.sw - g.left + g.kw
        src = x[:, max(y0, 0) : min(y1, g.h), max(x0, 0) : min(x1, g.w)]
        if y0 < 0 or x0 < 0 or y1 > g.h or x1 > g.w:
            region = np.full((g.n, y1 - y0, x1 - x0, g.c), fill, x.dtype)
            region[:, max(0, -y0) : max(0, -y0) + src.shape[1], max(0, -x0) : max(0, -x0) + src.shape[2]] = src
        else:
            region = src
        windows = sliding_window_view(region, (g.kh, g.kw), axis=(1, 2))[:, :: g.sh, :: g.sw]
        flat = windows.reshape(*windows.shape[:4], k)
        m = (counts[ra:rb, c0:c1] - 1) // 2
        kth = np.unique(m)
        flat = np.partition(flat, kth, axis=-1)
        if kth.size == 1:
            out[:, ra:rb, c0:c1] = flat[..., int(kth[0])]
        else:
            out[:, ra:rb, c0:c1] = np.take_along_axis(flat, m[None, :, :, None, None], axis=-1)[..., 0]


def _median3x3(x: np.ndarray, g: Window, out: np.ndarray, rows: tuple[int, int], cols: tuple[int, int]) -> None:
    """``out[:, r0:r1, c0:c1]`` for 3x3 windows wholly inside the input: the median network."""
    (r0, r1), (c0, c1) = rows, cols
    oh, ow, sh, sw = r1 - r0, c1 - c0, g.sh, g.sw
    y_base, x_base = r0 * sh - g.top, c0 * sw - g.left
    width = (ow - 1) * sw + 3
    xs = x[:, :, x_base : x_base + width]
    per_row = width * g.c
    if oh * per_row <= TILE_ELEMENTS:
        rows_per_tile, images_per_tile = oh, max(1, TILE_ELEMENTS // (oh * per_row))
    else:
        rows_per_tile, images_per_tile = max(1, TILE_ELEMENTS // per_row), 1
    shape_v = (images_per_tile, rows_per_tile, width, g.c)
    shape_h = (images_per_tile, rows_per_tile, ow, g.c)
    vbuf = [np.empty(shape_v, x.dtype) for _ in range(4)]
    hbuf = [np.empty(shape_h, x.dtype) for _ in range(4)]
    mn, mx = np.fmin, np.maximum  # NaN sorts last: it loses every minimum and wins every maximum

    def h(a: np.ndarray, j: int) -> np.ndarray:
        return a[:, :, j : j + (ow - 1) * sw + 1 : sw]

    for b0 in range(0, g.n, images_per_tile):
        b1 = min(g.n, b0 + images_per_tile)
        for qa in range(0, oh, rows_per_tile):
            qb = min(oh, qa + rows_per_tile)
            nb, nr = b1 - b0, qb - qa
            a, b, c = (xs[b0:b1, y_base + qa * sh + i : y_base + (qb - 1) * sh + i + 1 : sh] for i in range(3))
            lo, hi, mid, tmp = (buf[:nb, :nr] for buf in vbuf)
            # stage 1: sort each column of three (shared by the windows that contain it)
            mn(a, b, out=lo)
            mx(a, b, out=hi)
            mx(lo, c, out=mid)
            mn(lo, c, out=lo)
            mn(hi, mid, out=tmp)  # the middle of three
            mx(hi, mid, out=hi)
            mid = tmp
            # stage 2: max of the lows, min of the highs, median of the middles, median of those three
            p, q, r, s = (buf[:nb, :nr] for buf in hbuf)
            mx(h(lo, 0), h(lo, 1), out=p)
            mx(p, h(lo, 2), out=p)
            mn(h(hi, 0), h(hi, 1), out=q)
            mn(q, h(hi, 2), out=q)
            mn(h(mid, 0), h(mid, 1), out=r)
            mx(h(mid, 0), h(mid, 1), out=s)
            mn(s, h(mid, 2), out=s)
            mx(r, s, out=r)
            mn(p, r, out=s)
            mx(p, r, out=p)
            mn(p, q, out=p)
            mx(s, p, out=out[b0:b1, r0 + qa : r0 + qb, c0:c1])


def _pool(x: np.ndarray, g: Window, dtype: ok.DType) -> np.ndarray:
    if dtype.name == "bfloat16":  # np.partition has no bfloat16 loop; float32 holds every bfloat16 exactly
        return _pool(x.astype(np.float32), g, ok.float32).astype(x.dtype)
    out = np.empty(g.out_shape, x.dtype)
    if 0 in g.out_shape:
        return out
    r0, r1, c0, c1 = g.interior()
    if g.kh == g.kw == 3 and r0 < r1 and c0 < c1:
        _median3x3(x, g, out, (r0, r1), (c0, c1))
        strips = [((0, r0), (0, g.ow)), ((r1, g.oh), (0, g.ow)), ((r0, r1), (0, c0)), ((r0, r1), (c1, g.ow))]
    else:
        strips = [((0, g.oh), (0, g.ow))]
    for rows, cols in strips:
        _select(x, g, out, rows, cols, _fill(dtype))
    return out


def median_pool2d(value: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str, T: ok.DType) -> np.ndarray:
    return _pool(value, window(MEDIAN_POOL, value.shape, ksize, strides, padding), T)


def median_positions(x: np.ndarray, g: Window, medians: np.ndarray) -> np.ndarray:
    """(n, oh, ow, c) int64: the flat position in ``x`` of each window's median, the
    first in row-major window order among the in-bounds elements equal to it."""
    rows_in, cols_in = g.row_inside(), g.col_inside()
    inside = rows_in[:, None, :, None] & cols_in[None, :, None, :]  # (oh, ow, kh, kw)
    base = (np.arange(g.n, dtype=np.int64) * g.h * g.w * g.c)[:, None, None, None] + np.arange(g.c)[None, None, None, :]
    rows = np.arange(g.oh) * g.sh - g.top
    cols = np.arange(g.ow) * g.sw - g.left

    def spatial(i: Any, j: Any) -> np.ndarray:
        return (((rows[:, None] + i) * g.w + (cols[None, :] + j)) * g.c)[None, :, :, None]  # type: ignore[no-any-return]

    # A NaN median is at the window's first NaN inside (NaN == NaN is false, so it is
    # matched by isnan); the fallback to the first element inside is never taken then.
    nan_median = np.isnan(medians) if medians.dtype.kind == "f" else None
    first = inside.reshape(g.oh, g.ow, -1).argmax(-1)
    positions = base + spatial(first // g.kw, first % g.kw)
    found = np.zeros(g.out_shape, bool)
    bottom = max(0, (g.oh - 1) * g.sh + g.kh - g.top - g.h)
    right = max(0, (g.ow - 1) * g.sw + g.kw - g.left - g.w)
    xp = np.pad(x, ((0, 0), (g.top, bottom), (g.left, right), (0, 0))) if g.top or g.left or bottom or right else x
    for i in range(g.kh):
        for j in range(g.kw):
            tap = xp[:, i : i + (g.oh - 1) * g.sh + 1 : g.sh, j : j + (g.ow - 1) * g.sw + 1 : g.sw]
            equal = tap == medians if nan_median is None else (tap == medians) | (np.isnan(tap) & nan_median)
            take = equal & inside[None, :, :, i, j, None] & ~found
            np.copyto(positions, base + spatial(i, j), where=take)
            found |= take
    return positions  # type: ignore[no-any-return]


def median_pool2d_grad(
    orig_input: np.ndarray, grad: np.ndarray, ksize: Sequence[int], strides: Sequence[int], padding: str, T: ok.DType
) -> np.ndarray:
    op = MEDIAN_POOL_GRAD
    g = window(op, orig_input.shape, ksize, strides, padding)
    if grad.shape != g.out_shape:
        raise ok.errors.InvalidArgumentError(
            f"op '{op}': grad must have the shape of the pooled output {list(g.out_shape)}, got {list(grad.shape)}",
            op=op,
        )
    if 0 in g.out_shape:
        return np.zeros(orig_input.shape, orig_input.dtype)
    where = median_positions(orig_input, g, _pool(orig_input, g, T)).ravel()
    if T.is_integer:
        total = np.zeros(orig_input.size, orig_input.dtype)
        np.add.at(total, where, grad.ravel())
    else:
        total = np.bincount(where, weights=grad.ravel().astype(np.float64), minlength=orig_input.size)
    return total.reshape(orig_input.shape).astype(orig_input.dtype, copy=False)
