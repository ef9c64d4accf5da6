"""The shape and data-movement ops: values, inferred shapes and gradients on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import opkernel as ok
import optable
import pytest
from opkernel.errors import InvalidArgumentError, OpTypeError, ShapeError
from opkernel.testing.gradient_checker import compute_gradient_error
from optable import OpCase

ALL = ("float32", "float64", "int32")


def data(rng: np.random.Generator, dt: str, *shape: int) -> np.ndarray:
    """Normal floats, or small integers for an integer dtype."""
    if np.dtype(dt).kind in "iu":
        return rng.integers(-9, 10, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def i32(*v: Any) -> np.ndarray:
    return np.array(v, np.int32)


def i64(*v: Any) -> np.ndarray:
    return np.array(v, np.int64)


def one(shape: tuple[int, ...], *rest: Any) -> Any:
    """Inputs: one data tensor of ``shape`` followed by fixed (integer) inputs."""
    return lambda rng, dt: [data(rng, dt, *shape), *rest]


def sliced(expr: Any) -> Any:
    """A StridedSlice reference: ``expr(x)`` is the numpy slicing it must match."""
    return lambda x, *spec, **attrs: expr(x)


def strided(shape: tuple[int, ...], begin: tuple[int, ...], end: tuple[int, ...], strides: tuple[int, ...]) -> Any:
    return one(shape, i32(*begin), i32(*end), i32(*strides))


def gather_batched(params: np.ndarray, indices: np.ndarray, axis: int, **attrs: Any) -> np.ndarray:
    return np.stack([np.take(params[b], indices[b], axis=int(axis) - 1) for b in range(params.shape[0])])


def segment_sum(data_: np.ndarray, ids: np.ndarray, num: Any, **attrs: Any) -> np.ndarray:
    out = np.zeros((int(num),) + data_.shape[ids.ndim :], data_.dtype)
    for row, i in zip(data_.reshape((ids.size,) + data_.shape[ids.ndim :]), ids.reshape(-1)):
        if i >= 0:
            out[i] += row
    return out


def one_hot_ref(indices: np.ndarray, depth: Any, on: np.ndarray, off: np.ndarray, axis: int = -1, **attrs: Any) -> np.ndarray:
    hot = indices[..., None] == np.arange(int(depth))
    return np.moveaxis(np.where(hot, on, off), -1, axis)


def strided_grad_ref(shape: np.ndarray, begin: Any, end: Any, strides: Any, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    out = np.zeros(tuple(shape), dy.dtype)
    out[1:4, ::-2] = dy
    return out



def band_ref(x: np.ndarray, lower: Any, upper: Any, **attrs: Any) -> np.ndarray:
    i = np.arange(x.shape[-2])[:, None]
    j = np.arange(x.shape[-1])[None, :]
    keep = ((int(lower) < 0) | (i - j <= int(lower))) & ((int(upper) < 0) | (j - i <= int(upper)))
    return np.where(keep, x, np.zeros((), x.dtype))


def scan_ref(fn: Any, identity: int) -> Any:
    def ref(x: np.ndarray, axis: Any, exclusive: bool = False, reverse: bool = False, **attrs: Any) -> np.ndarray:
        a = int(axis) % x.ndim
        y = np.flip(x, a) if reverse else x
        out = fn(y, axis=a)
        if exclusive:
            out = np.concatenate([np.full_like(np.take(out, [0], axis=a), identity), np.take(out, range(out.shape[a] - 1), axis=a)], axis=a)
        return np.flip(out, a) if reverse else out

    return ref


SCAN_CASES = [
    OpCase("reverse_v2", "ReverseV2", one((2, 3, 4), i32(0, -1)), lambda x, a: np.flip(x, (0, 2)), dtypes=ALL),
    OpCase("reverse_v2_int64_axis", "ReverseV2", one((3, 4), i64(1)), lambda x, a: np.flip(x, 1)),
    OpCase("matrix_band_part", "MatrixBandPart", one((2, 4, 5), np.int64(1), np.int64(2)), band_ref, dtypes=ALL),
    OpCase("matrix_band_part_lower", "MatrixBandPart", one((5, 4), np.int32(-1), np.int32(0)), band_ref),
    OpCase("cumsum", "Cumsum", one((3, 5), np.int32(1)), scan_ref(np.cumsum, 0), dtypes=ALL),
    OpCase("cumsum_exclusive_reverse", "Cumsum", one((4, 3), np.int64(0)), scan_ref(np.cumsum, 0),
           attrs={"exclusive": True, "reverse": True}),
    OpCase("cumprod", "Cumprod", lambda rng, dt: [np.abs(data(rng, dt, 3, 4)) + 0.5, np.int32(-1)], scan_ref(np.cumprod, 1)),
    OpCase("cumprod_exclusive", "Cumprod", lambda rng, dt: [np.abs(data(rng, dt, 3, 4)) + 0.5, np.int32(0)],
           scan_ref(np.cumprod, 1), attrs={"exclusive": True}),
    OpCase("lin_space", "LinSpace", lambda rng, dt: [np.array(-1.5, dt), np.array(2.25, dt), np.int32(7)],
           lambda s, e, n: np.linspace(s, e, int(n)), grad=False),
]


def top_k_ref(x: np.ndarray, k: Any, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(-x, axis=-1, kind="stable")[..., :int(k)]
    return np.take_along_axis(x, order, -1), order.astype(np.int32)


def gather_nd_ref(params: np.ndarray, indices: np.ndarray, **attrs: Any) -> np.ndarray:
    return params[tuple(np.moveaxis(indices, -1, 0))]


def scatter_nd_ref(indices: np.ndarray, updates: np.ndarray, shape: np.ndarray, **attrs: Any) -> np.ndarray:
    out = np.zeros(tuple(shape), updates.dtype)
    np.add.at(out, tuple(np.moveaxis(indices, -1, 0)), updates)
    return out


def tensor_scatter_update_ref(tensor: np.ndarray, indices: np.ndarray, updates: np.ndarray, **attrs: Any) -> np.ndarray:
    out = tensor.copy()
    out[tuple(np.moveaxis(indices, -1, 0))] = updates
    return out


def mirror_pad_grad_ref(g: np.ndarray, p: np.ndarray, mode: str) -> np.ndarray:
    shape = tuple(n - b - a for n, (b, a) in zip(g.shape, p.tolist()))
    index = np.arange(int(np.prod(shape))).reshape(shape)
    src = np.pad(index, p.tolist(), mode=mode.lower()).reshape(-1)
    out = np.zeros(int(np.prod(shape)), g.dtype)
    np.add.at(out, src, g.reshape(-1))
    return out.reshape(shape)


ND_CASES = [
    OpCase("mirror_pad_grad", "MirrorPadGrad", one((6, 7), i32(1, 2, 2, 1).reshape(2, 2)), mirror_pad_grad_ref,
           attrs={"mode": "REFLECT"}, dtypes=ALL),
    OpCase("mirror_pad_reflect", "MirrorPad", one((3, 4), i32(1, 2, 2, 1).reshape(2, 2)),
           lambda x, p, mode: np.pad(x, p.tolist(), mode="reflect"), attrs={"mode": "REFLECT"}, dtypes=ALL),
    OpCase("mirror_pad_symmetric", "MirrorPad", one((3, 4), i64(3, 0, 2, 4).reshape(2, 2)),
           lambda x, p, mode: np.pad(x, p.tolist(), mode="symmetric"), attrs={"mode": "SYMMETRIC"}),
    OpCase("top_k", "TopKV2", one((3, 7), np.int32(3)), top_k_ref, dtypes=ALL),
    OpCase("top_k_vector", "TopKV2", one((6,), np.int32(6)), top_k_ref),
    OpCase("gather_nd", "GatherNd", one((3, 4, 5), i32(1, 2, 0, 3, 2, 1).reshape(3, 2)), gather_nd_ref, dtypes=ALL),
    OpCase("gather_nd_elements", "GatherNd", one((3, 4), i64(2, 3, 0, 1).reshape(2, 2)), gather_nd_ref),
    OpCase("scatter_nd", "ScatterNd", lambda rng, dt: [i32(1, 3, 1).reshape(3, 1), data(rng, dt, 3, 2), i32(5, 2)],
           scatter_nd_ref, dtypes=ALL),
    OpCase("tensor_scatter_update", "TensorScatterUpdate",
           lambda rng, dt: [data(rng, dt, 5, 2), i32(4, 0).reshape(2, 1), data(rng, dt, 2, 2)], tensor_scatter_update_ref,
           dtypes=ALL),
]

def depth_to_space_ref(x: np.ndarray, block_size: int, data_format: str = "NHWC") -> np.ndarray:
    """The definition, element by element: output[b, h, w, c] = input[b, h // bs, w // bs,
    ((h % bs) * bs + w % bs) * depth + c] (NHWC; NCHW through transposes)."""
    if data_format == "NCHW":
        return depth_to_space_ref(x.transpose(0, 2, 3, 1), block_size).transpose(0, 3, 1, 2)
    bs, (b, h, w, c) = block_size, x.shape
    d = c // (bs * bs)
    out = np.empty((b, h * bs, w * bs, d), x.dtype)
    for i, j in np.ndindex(h * bs, w * bs):
        k = ((i % bs) * bs + j % bs) * d
        out[:, i, j, :] = x[:, i // bs, j // bs, k:k + d]
    return out


def space_to_depth_ref(x: np.ndarray, block_size: int, data_format: str = "NHWC") -> np.ndarray:
    if data_format == "NCHW":
        return space_to_depth_ref(x.transpose(0, 2, 3, 1), block_size).transpose(0, 3, 1, 2)
    bs, (b, h, w, c) = block_size, x.shape
    out = np.empty((b, h // bs, w // bs, bs * bs * c), x.dtype)
    for i, j in np.ndindex(h, w):
        k = ((i % bs) * bs + j % bs) * c
        out[:, i // bs, j // bs, k:k + c] = x[:, i, j, :]
    return out


def space_to_batch_ref(x: np.ndarray, block_shape: np.ndarray, paddings: np.ndarray) -> np.ndarray:
    """TensorFlow's definition: output[(offset) * batch + b, p...] = padded[b, p * block + offset...],
    with the block offsets in row-major order."""
    m = len(block_shape)
    padded = np.pad(x, [(0, 0), *[tuple(p) for p in paddings], *[(0, 0)] * (x.ndim - 1 - m)])
    spatial = [padded.shape[1 + i] // int(k) for i, k in enumerate(block_shape)]
    out = np.empty((x.shape[0] * int(np.prod(block_shape)), *spatial, *x.shape[1 + m:]), x.dtype)
    for n, offset in enumerate(np.ndindex(*[int(k) for k in block_shape])):
        index = tuple(slice(o, None, int(k)) for o, k in zip(offset, block_shape))
        out[n * x.shape[0]:(n + 1) * x.shape[0]] = padded[(slice(None), *index)]
    return out


def batch_to_space_ref(x: np.ndarray, block_shape: np.ndarray, crops: np.ndarray) -> np.ndarray:
    m, batch = len(block_shape), x.shape[0] // int(np.prod(block_shape))
    full = np.empty((batch, *[x.shape[1 + i] * int(k) for i, k in enumerate(block_shape)], *x.shape[1 + m:]), x.dtype)
    for n, offset in enumerate(np.ndindex(*[int(k) for k in block_shape])):
        index = tuple(slice(o, None, int(k)) for o, k in zip(offset, block_shape))
        full[(slice(None), *index)] = x[n * batch:(n + 1) * batch]
    return full[(slice(None), *[slice(int(lo), full.shape[1 + i] - int(hi)) for i, (lo, hi) in enumerate(crops)])]


def bound_ref(upper: bool) -> Any:
    def ref(s: np.ndarray, v: np.ndarray, out_type: Any = None, **_: Any) -> np.ndarray:
        side = "right" if upper else "left"
        out = np.stack([np.searchsorted(row, vals, side=side) for row, vals in zip(s, v)]) if len(s) else \
            np.zeros(v.shape, np.int64)
        return out.astype(np.int32 if out_type is None else np.dtype(str(out_type)))

    return ref


def sorted_rows(rng: np.random.Generator, dt: str) -> list[np.ndarray]:
    """[3, 9] sorted rows with repeats, and [3, 5] values: some equal to elements, some outside."""
    s = np.sort(rng.integers(-6, 7, (3, 9)), axis=1).astype(dt)
    v = rng.integers(-8, 9, (3, 5)).astype(dt)
    return [s, v]


def bincount_ref(arr: np.ndarray, size: Any, weights: np.ndarray, **_: Any) -> np.ndarray:
    out = np.zeros(int(size), weights.dtype)
    for i, a in enumerate(arr.reshape(-1)):
        if a < int(size):
            out[a] += weights.reshape(-1)[i] if weights.size else 1
    return out


def dense_bincount_ref(x: np.ndarray, size: Any, weights: np.ndarray, binary_output: bool = False, **_: Any) -> np.ndarray:
    if x.ndim == 2:
        return np.stack([dense_bincount_ref(r, size, w if weights.size else weights, binary_output)
                         for r, w in zip(x, weights if weights.size else [weights] * len(x))])
    out = bincount_ref(x, size, np.zeros(0, weights.dtype) if binary_output else weights)
    return (out > 0).astype(weights.dtype) if binary_output else out


def segment_ref(mean: bool) -> Any:
    def ref(data: np.ndarray, indices: np.ndarray, ids: np.ndarray, **_: Any) -> np.ndarray:
        num = int(ids[-1]) + 1 if ids.size else 0
        out = np.zeros((num,) + data.shape[1:], data.dtype)
        for s in range(num):
            rows = data[indices[ids == s]]
            if len(rows):
                out[s] = rows.mean(0) if mean else rows.sum(0)
        return out

    return ref


def sparse_to_dense_ref(indices: np.ndarray, shape: np.ndarray, values: np.ndarray, default: np.ndarray, **_: Any) -> np.ndarray:
    out = np.full(tuple(shape), default, values.dtype)
    points = indices.reshape(len(indices) if indices.ndim else 1, -1)
    for i, p in enumerate(points):
        out[tuple(p)] = values if values.ndim == 0 else values[i]
    return out


def diag_ref(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.shape * 2, x.dtype)
    for index in np.ndindex(*x.shape):
        out[index * 2] = x[index]
    return out


CASES = [
    OpCase("identity", "Identity", one((2, 3)), lambda x: x, dtypes=ALL),
    OpCase("ensure_shape", "EnsureShape", one((2, 3)), lambda x, **a: x, attrs={"shape": [None, 3]}, dtypes=ALL),
    OpCase("stop_gradient", "StopGradient", one((2, 3)), lambda x: x, dtypes=ALL, grad=False),
    OpCase("reshape", "Reshape", one((2, 3, 4), i32(4, -1)), lambda x, s: x.reshape(s), dtypes=ALL),
    OpCase("reshape_int64", "Reshape", one((2, 3), i64(3, 2)), lambda x, s: x.reshape(s)),
    OpCase("reshape_scalar", "Reshape", one((1, 1), np.zeros(0, np.int32)), lambda x, s: x.reshape(())),
    OpCase("transpose", "Transpose", one((2, 3, 4), i32(2, 0, 1)), lambda x, p: np.transpose(x, p), dtypes=ALL),
    OpCase("transpose_int64", "Transpose", one((3, 2), i64(1, 0)), lambda x, p: x.T),
    OpCase(
        "invert_permutation", "InvertPermutation", lambda rng, dt: [np.array([2, 0, 3, 1], dt)],
        lambda p: np.argsort(p), dtypes=("int32", "int64"), grad=False,
    ),
    OpCase("expand_dims_0", "ExpandDims", one((2, 3), np.int32(0)), lambda x, d: x[None], dtypes=ALL),
    OpCase("expand_dims_neg", "ExpandDims", one((2, 3), np.int64(-1)), lambda x, d: x[..., None]),
    OpCase("expand_dims_mid", "ExpandDims", one((2, 3), np.int32(-2)), lambda x, d: x[:, None]),
    OpCase("squeeze_all", "Squeeze", one((1, 3, 1, 2)), lambda x: np.squeeze(x), dtypes=ALL),
    OpCase("squeeze_dims", "Squeeze", one((1, 3, 1, 2)), lambda x, **a: np.squeeze(x, 2), attrs={"squeeze_dims": [-2]}),
    OpCase(
        "concat_neg_axis", "ConcatV2", lambda rng, dt: [[data(rng, dt, 2, 3), data(rng, dt, 2, 2)], np.int32(-1)],
        lambda v, a: np.concatenate(v, int(a)), dtypes=ALL, grad=False,
    ),
    OpCase(
        "concat_three_int64_axis", "ConcatV2",
        lambda rng, dt: [[data(rng, dt, 1, 3), data(rng, dt, 2, 3), data(rng, dt, 3, 3)], np.int64(0)],
        lambda v, a: np.concatenate(v, int(a)), grad=False,
    ),
    OpCase(
        "concat_offset", "ConcatOffset", lambda rng, dt: [np.int32(1), [i32(2, 3, 5), i32(2, 4, 5), i32(2, 1, 5)]],
        lambda d, s: [i32(0, 0, 0), i32(0, 3, 0), i32(0, 7, 0)], dtypes=("int32",), grad=False,
    ),
    OpCase(
        "pack", "Pack", lambda rng, dt: [[data(rng, dt, 2, 3) for _ in range(3)]],
        lambda v, **a: np.stack(v), dtypes=ALL, grad=False,
    ),
    OpCase(
        "pack_neg_axis", "Pack", lambda rng, dt: [[data(rng, dt, 2, 3) for _ in range(2)]],
        lambda v, axis: np.stack(v, axis), attrs={"axis": -2}, grad=False,
    ),
    OpCase(
        "unpack", "Unpack", one((3, 2, 4)), lambda x, num, axis: [x[:, k] for k in range(num)],
        attrs={"num": 2, "axis": -2}, dtypes=ALL, grad_output=1,
    ),
    OpCase("unpack_axis0", "Unpack", one((3, 2)), lambda x, num: list(x), attrs={"num": 3}),
    OpCase(
        "split_neg_axis", "Split", lambda rng, dt: [np.int32(-1), data(rng, dt, 2, 6)],
        lambda a, x, num_split: np.split(x, num_split, int(a)), attrs={"num_split": 3}, dtypes=ALL, grad_output=1,
    ),
    OpCase(
        "split_one", "Split", lambda rng, dt: [np.int32(0), data(rng, dt, 2, 3)],
        lambda a, x, num_split: [x], attrs={"num_split": 1},
    ),
    OpCase("slice", "Slice", one((3, 4, 5), i32(1, 0, 2), i32(2, -1, 3)), lambda x, b, s: x[1:3, :, 2:5], dtypes=ALL),
    OpCase("slice_int64", "Slice", one((4, 3), i64(2, 1), i64(-1, 1)), lambda x, b, s: x[2:, 1:2]),
    # StridedSlice: each row is the numpy slice it must equal.
    OpCase(
        "strided_basic", "StridedSlice", strided((5, 6), (1, 0), (4, 6), (1, 2)),
        sliced(lambda x: x[1:4, 0:6:2]), dtypes=ALL,
    ),
    OpCase(
        "strided_negative", "StridedSlice", strided((5, 6), (4, -1), (0, -5), (-2, -1)),
        sliced(lambda x: x[4:0:-2, -1:-5:-1]), dtypes=ALL,
    ),
    OpCase(
        "strided_reverse_masked", "StridedSlice", strided((5, 3), (0,), (0,), (-1,)),
        sliced(lambda x: x[::-1]), attrs={"begin_mask": 1, "end_mask": 1}, dtypes=ALL,
    ),
    OpCase(
        "strided_begin_end_mask", "StridedSlice", strided((5, 6), (7, 2), (3, 7), (1, 1)),
        sliced(lambda x: x[:3, 2:]), attrs={"begin_mask": 1, "end_mask": 2},
    ),
    OpCase(
        "strided_ellipsis", "StridedSlice", strided((2, 3, 4), (0, 1), (0, 3), (1, 1)),
        sliced(lambda x: x[..., 1:3]), attrs={"ellipsis_mask": 1}, dtypes=ALL,
    ),
    OpCase(
        "strided_ellipsis_new_axis", "StridedSlice", strided((2, 3), (0, 0), (0, 0), (1, 1)),
        sliced(lambda x: x[..., None]), attrs={"ellipsis_mask": 1, "new_axis_mask": 2},
    ),
    OpCase(
        "strided_new_axis_shrink", "StridedSlice", strided((3, 4), (0, 0, 1), (0, 0, 2), (1, 1, 1)),
        sliced(lambda x: x[:, None, 1]), attrs={"begin_mask": 1, "end_mask": 1, "new_axis_mask": 2, "shrink_axis_mask": 4},
        dtypes=ALL,
    ),
    OpCase(
        "strided_shrink_negative", "StridedSlice", strided((4, 3), (-1,), (0,), (1,)),
        sliced(lambda x: x[-1]), attrs={"shrink_axis_mask": 1},
    ),
    OpCase(
        "strided_clamped", "StridedSlice", strided((4, 3), (-100, 1), (100, -100), (1, -1)),
        sliced(lambda x: x[-100:100, 1:-100:-1]),
    ),
    OpCase(
        "strided_empty", "StridedSlice", strided((5, 2), (3,), (1,), (1,)), sliced(lambda x: x[3:1]),
    ),
    OpCase(
        "strided_slice_grad", "StridedSliceGrad",
        lambda rng, dt: [i32(5, 6), i32(1, -1), i32(4, 0), i32(1, -2), data(rng, dt, 3, 3)],
        strided_grad_ref, attrs={"end_mask": 2}, dtypes=ALL,
    ),
    OpCase(
        "gather_axis0", "GatherV2", lambda rng, dt: [data(rng, dt, 5, 3), i32(4, 0, 4, 2), np.int32(0)],
        lambda p, i, a, **k: np.take(p, i, axis=0), dtypes=ALL,
    ),
    OpCase(
        "gather_axis1", "GatherV2", lambda rng, dt: [data(rng, dt, 3, 4, 2), i64([0, 3], [3, 3]), np.int32(1)],
        lambda p, i, a, **k: np.take(p, i, axis=1), dtypes=ALL,
    ),
    OpCase(
        "gather_neg_axis", "GatherV2", lambda rng, dt: [data(rng, dt, 2, 3), i32(2, 0), np.int64(-1)],
        lambda p, i, a, **k: np.take(p, i, axis=-1),
    ),
    OpCase(
        "gather_batch_dims", "GatherV2", lambda rng, dt: [data(rng, dt, 2, 3, 4), i32([0, 2, 2], [1, 1, 0]), np.int32(2)],
        lambda p, i, a, **k: np.stack([np.take(p[b], i[b], axis=1) for b in range(2)]),
        attrs={"batch_dims": 1}, dtypes=ALL,
    ),
    OpCase(
        "gather_batch_dims_axis", "GatherV2", lambda rng, dt: [data(rng, dt, 2, 3, 2), i32([0, 2], [1, 1]), np.int32(1)],
        gather_batched, attrs={"batch_dims": -1},
    ),
    OpCase(
        "unsorted_segment_sum", "UnsortedSegmentSum",
        lambda rng, dt: [data(rng, dt, 5, 3), i32(0, 2, 0, -1, 1), np.int32(4)], segment_sum, dtypes=ALL,
    ),
    OpCase(
        "unsorted_segment_sum_2d_ids", "UnsortedSegmentSum",
        lambda rng, dt: [data(rng, dt, 2, 3, 2), i64([1, 1, 0], [2, 0, 2]), np.int64(3)], segment_sum,
    ),
    OpCase(
        "one_hot", "OneHot", lambda rng, dt: [i64([0, 3, -1], [2, 4, 1]), np.int32(4), np.array(2, dt), np.array(-1, dt)],
        one_hot_ref, dtypes=ALL, grad=False,
    ),
    OpCase(
        "one_hot_axis0_int32", "OneHot",
        lambda rng, dt: [i32(1, 0, 2), np.int32(3), np.array(1, dt), np.array(0, dt)],
        one_hot_ref, attrs={"axis": 0}, dtypes=ALL, grad=False,
    ),
    OpCase("tile", "Tile", one((2, 3), i32(2, 1)), lambda x, m: np.tile(x, m), dtypes=ALL),
    OpCase("tile_int64", "Tile", one((2, 1, 3), i64(1, 3, 2)), lambda x, m: np.tile(x, m)),
    OpCase("broadcast_to", "BroadcastTo", one((3, 1), i32(2, 3, 4)), lambda x, s: np.broadcast_to(x, s), dtypes=ALL),
    OpCase("broadcast_to_scalar", "BroadcastTo", one((), i32(2, 3)), lambda x, s: np.broadcast_to(x, s)),
    OpCase("pad", "Pad", one((2, 3), i32([1, 0], [2, 1])), lambda x, p: np.pad(x, p), dtypes=ALL),
    OpCase("pad_v2", "PadV2", lambda rng, dt: [data(rng, dt, 2, 3), i32([1, 0], [2, 1]), np.asarray(7, dt)],
           lambda x, p, c: np.pad(x, p, constant_values=c), dtypes=ALL,
           grad=False),  # constant_values gets no gradient, as in TensorFlow; the input's: tf_conformance
    OpCase("pad_int64", "Pad", one((2,), i64([0, 2])), lambda x, p: np.pad(x, p)),
    OpCase("split_v", "SplitV", lambda rng, dt: [data(rng, dt, 2, 7), i64(3, -1, 0, 2), np.int32(-1)],
           lambda x, s, a, num_split: np.split(x, [3, 5, 5], -1), attrs={"num_split": 4}, dtypes=ALL, grad_output=1),
    OpCase("split_v_int32", "SplitV", lambda rng, dt: [data(rng, dt, 4, 3), i32(1, 3), np.int32(0)],
           lambda x, s, a, num_split: np.split(x, [1], 0), attrs={"num_split": 2}, grad_output=0),
    OpCase("split_v_one", "SplitV", lambda rng, dt: [data(rng, dt, 2, 3), i64(3), np.int32(1)],
           lambda x, s, a, num_split: [x], attrs={"num_split": 1}),
    OpCase("broadcast_args", "BroadcastArgs", lambda rng, dt: [np.array([2, 1, 3], dt), np.array([4, 1], dt)],
           lambda a, b: np.array(np.broadcast_shapes(tuple(a), tuple(b)), a.dtype), dtypes=("int32", "int64"), grad=False),
    OpCase("lower_bound", "LowerBound", sorted_rows, bound_ref(False), dtypes=("float32", "float64", "int32", "int64"),
           grad=False),
    OpCase("upper_bound", "UpperBound", sorted_rows, bound_ref(True), dtypes=("float32", "float64", "int32", "int64"),
           grad=False),
    OpCase("upper_bound_int64", "UpperBound", sorted_rows, bound_ref(True), attrs={"out_type": "int64"}, grad=False),
    OpCase("bincount", "Bincount", lambda rng, dt: [rng.integers(0, 8, (4, 5)).astype(np.int32), np.int32(6),
                                                    data(rng, dt, 4, 5)], bincount_ref,
           dtypes=("float32", "float64", "int32", "int64"), grad=False),
    OpCase("bincount_counts", "Bincount", lambda rng, dt: [rng.integers(0, 8, (9,)).astype(np.int32), np.int32(6),
                                                           np.zeros(0, dt)], bincount_ref, dtypes=("int32", "float32"), grad=False),
    OpCase("dense_bincount", "DenseBincount", lambda rng, dt: [rng.integers(0, 5, (3, 6)).astype(np.int64), np.int64(4),
                                                              data(rng, dt, 3, 6)], dense_bincount_ref,
           dtypes=("float32", "int64"), grad=False),
    OpCase("dense_bincount_binary", "DenseBincount", lambda rng, dt: [rng.integers(0, 5, (7,)).astype(np.int32),
                                                                     np.int32(4), np.zeros(0, dt)],
           dense_bincount_ref, attrs={"binary_output": True}, dtypes=("float32", "int32"), grad=False),
    OpCase("sparse_segment_sum", "SparseSegmentSum", lambda rng, dt: [data(rng, dt, 5, 3), i32(0, 4, 4, 1, 2),
                                                                      i64(0, 0, 2, 2, 4)], segment_ref(False), dtypes=ALL),
    OpCase("sparse_segment_mean", "SparseSegmentMean", lambda rng, dt: [data(rng, dt, 5, 2, 2), i64(3, 1, 3),
                                                                        i32(1, 1, 1)], segment_ref(True)),
    OpCase("sparse_to_dense", "SparseToDense", lambda rng, dt: [i64([0, 1], [2, 0], [2, 2]), i64(3, 3), data(rng, dt, 3),
                                                                np.asarray(data(rng, dt, 1)[0])], sparse_to_dense_ref, dtypes=ALL),
    OpCase("sparse_to_dense_scalar_value", "SparseToDense", lambda rng, dt: [i32(1, 3), i32(5), np.asarray(data(rng, dt, 1)[0]),
                                                                             np.asarray(data(rng, dt, 1)[0])],
           sparse_to_dense_ref),
    OpCase("diag", "Diag", one((3,)), diag_ref, dtypes=("float32", "float64", "int32", "int64", "complex64", "bfloat16")),
    OpCase("diag_rank3", "Diag", one((2, 1, 2)), diag_ref),
    OpCase("depth_to_space", "DepthToSpace", one((2, 2, 3, 8)), depth_to_space_ref, attrs={"block_size": 2}, dtypes=ALL),
    OpCase("depth_to_space_nchw", "DepthToSpace", one((1, 18, 2, 1)), depth_to_space_ref,
           attrs={"block_size": 3, "data_format": "NCHW"}, dtypes=ALL),
    OpCase("space_to_depth", "SpaceToDepth", one((2, 4, 6, 3)), space_to_depth_ref, attrs={"block_size": 2}, dtypes=ALL),
    OpCase("space_to_depth_nchw", "SpaceToDepth", one((1, 2, 3, 6)), space_to_depth_ref,
           attrs={"block_size": 3, "data_format": "NCHW"}, dtypes=ALL),
    OpCase("space_to_batch_nd", "SpaceToBatchND", one((2, 3, 4, 2), i32(2, 3), i32([1, 0], [1, 1])),
           space_to_batch_ref, dtypes=(*ALL, "bool", "complex64")),
    OpCase("space_to_batch_nd_1d", "SpaceToBatchND", one((1, 5), i64(3), i64([0, 1])), space_to_batch_ref),
    OpCase("batch_to_space_nd", "BatchToSpaceND", one((12, 2, 2, 2), i32(2, 3), i32([1, 0], [1, 1])),
           batch_to_space_ref, dtypes=(*ALL, "bool", "complex64")),
    OpCase("batch_to_space_nd_3d", "BatchToSpaceND", one((8, 1, 2, 1, 1), i64(2, 2, 2), i64([0, 1], [1, 0], [0, 0])),
           batch_to_space_ref),
    OpCase(
        "fill", "Fill", lambda rng, dt: [i32(2, 3), np.array(1.5 if dt != "int32" else 7, dt)],
        lambda d, v: np.full(d, v), dtypes=ALL,
    ),
    OpCase("zeros_like", "ZerosLike", one((2, 3)), np.zeros_like, dtypes=ALL, grad=False),
    OpCase("ones_like", "OnesLike", one((2, 3)), np.ones_like, dtypes=ALL, grad=False),
    OpCase(
        "range", "Range", lambda rng, dt: [np.array(2, dt), np.array(11, dt), np.array(3, dt)],
        lambda s, l, d: np.arange(s, l, d), dtypes=ALL, grad=False,
    ),
    OpCase(
        "range_negative_delta", "Range", lambda rng, dt: [np.array(1.5, dt), np.array(-1, dt), np.array(-0.5, dt)],
        lambda s, l, d: np.arange(s, l, d), grad=False,
    ),
    OpCase("shape", "Shape", one((2, 3, 1)), lambda x: np.array(x.shape, np.int32), dtypes=ALL, grad=False),
    OpCase(
        "size_int64", "Size", one((2, 3, 1)), lambda x, **a: np.array(x.size, np.int64),
        attrs={"out_type": "int64"}, dtypes=ALL, grad=False,
    ),
    OpCase("rank", "Rank", one((2, 3, 1)), lambda x: np.array(x.ndim, np.int32), dtypes=ALL, grad=False),
    OpCase(
        "where", "Where", lambda rng, dt: [rng.integers(0, 2, (3, 4)).astype(dt)], np.argwhere, dtypes=ALL, grad=False,
    ),
    OpCase(
        "where_bool", "Where", lambda rng, dt: [rng.integers(0, 2, (2, 2, 3)).astype(bool)], np.argwhere,
        dtypes=("bool",), grad=False,
    ),
    OpCase(
        "string_to_number", "StringToNumber", lambda rng, dt: [np.array([b"1.5", b"-2"], object)],
        lambda s: np.array([1.5, -2.0]), dtypes=("float32",), grad=False,
        skip={"cuda": "strings cannot live on a CUDA device: StringToNumber has a cpu kernel only (docs/cuda.md)"},
    ),
    *SCAN_CASES,
    *ND_CASES,
]


test_values, test_shapes, test_gradients = optable.table_tests(CASES)


# ---------------------------------------------------------------- list-input gradients


def test_concat_gradient(backend: str) -> None:
    rng = np.random.default_rng(0)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((2, 1)), rng.standard_normal((2, 2))
    error = compute_gradient_error(lambda x, y, z: ok.ops.concat_v2([x, y, z], np.int64(-1)), [a, b, c])
    assert error < 1e-6


def test_pack_gradient(backend: str) -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    error = compute_gradient_error(lambda x, y: ok.ops.pack([x, y], axis=-1), [a, b])
    assert error < 1e-6


def test_stop_gradient_blocks_the_gradient(backend: str) -> None:
    from opkernel.ops.array_ops import stop_gradient

    x = ok.tensor(np.array([1.0, 2.0]))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.add(stop_gradient(x), ok.ops.identity(x))
    assert np.array_equal(tape.gradient(y, x).numpy(), [1.0, 1.0])


def _second_order(f: Any, x: np.ndarray) -> np.ndarray:
    """d/dx of sum(d/dx sum(f(x))), with nested tapes."""
    t = ok.tensor(x)
    with ok.GradientTape() as outer:
        outer.watch(t)
        with ok.GradientTape() as inner:
            inner.watch(t)
            y = f(t)
        g = inner.gradient(y, t)
    return outer.gradient(g, t).numpy()  # type: ignore[no-any-return]


def test_strided_slice_second_order(backend: str) -> None:
    x = np.arange(12.0).reshape(3, 4)

    def f(t: Any) -> Any:
        s = ok.ops.strided_slice(t, i32(2, 0), i32(0, 4), i32(-1, 2))
        return ok.ops.mul(s, s)

    expected = np.zeros((3, 4))
    expected[2:0:-1, 0:4:2] = 2.0
    np.testing.assert_allclose(_second_order(f, x), expected)


def test_gather_second_order(backend: str) -> None:
    x = np.arange(6.0).reshape(3, 2)

    def f(t: Any) -> Any:
        g = ok.ops.gather_v2(t, i32(2, 0, 2), np.int32(0))
        return ok.ops.mul(g, g)

    expected = np.zeros((3, 2))
    expected[0], expected[2] = 2.0, 4.0  # index 2 is gathered twice: d2/dx2 of 2 x^2
    np.testing.assert_allclose(_second_order(f, x), expected)


# ---------------------------------------------------------------- shape inference with partial information


@pytest.mark.parametrize(
    "op,shapes,attrs,expected",
    [
        ("Reshape", [[2, None], [2]], {}, [None, None]),
        ("Transpose", [[2, 3, None], [3]], {}, [None, None, None]),
        ("ExpandDims", [[2, 3], []], {}, None),
        ("ConcatV2", [[[2, 3], [2, None]], []], {}, [None, None]),
        ("Pack", [[[2, None], [None, 3]]], {"axis": 1}, [2, 2, 3]),
        ("Unpack", [[None, 2]], {"num": 2, "axis": -1}, [None]),
        ("Split", [[], [4, None]], {"num_split": 2}, [None, None]),
        ("Slice", [[None, 3], [2], [2]], {}, [None, None]),
        ("StridedSlice", [[5, None], [2], [2], [2]], {"shrink_axis_mask": 1}, [None]),
        ("GatherV2", [[5, 3], [2, 2], []], {}, [None, None, None]),
        ("Tile", [[2, 3], [2]], {}, [None, None]),
        ("Fill", [[3], []], {}, [None, None, None]),
        ("Range", [[], [], []], {}, [None]),
        ("Where", [[2, 3]], {}, [None, 2]),
        ("OneHot", [[2, None], [], [], []], {"axis": 1}, [2, None, None]),
        ("UnsortedSegmentSum", [[4, 3], [4], []], {}, [None, 3]),
        ("SplitV", [[4, None], [2], []], {"num_split": 2}, [None, None]),
        ("Diag", [[2, None]], {}, [2, None, 2, None]),
        ("DepthToSpace", [[1, 2, None, 8]], {"block_size": 2}, [1, 4, None, 2]),
        ("SpaceToDepth", [[1, None, 4, 3]], {"block_size": 2, "data_format": "NHWC"}, [1, None, 2, 12]),
        ("SpaceToBatchND", [[2, 4, 6, 3], [2], [2, 2]], {}, [None, None, None, None]),
        ("BatchToSpaceND", [[8, 2, 3], [1], [1, 2]], {}, [None, None, None]),
        ("BroadcastArgs", [[3], [None]], {}, [None]),
    ],
)
def test_partial_shapes(op: str, shapes: list[Any], attrs: dict[str, Any], expected: Any) -> None:
    shape = ok.infer_shapes(op, shapes, attrs)[0]
    assert (None if shape.rank is None else shape.as_list()) == expected


def _infer(op: str, shapes: list[Any], attrs: dict[str, Any], tensors: list[Any]) -> list[ok.TensorShape]:
    from opkernel._infer import infer_shapes

    return infer_shapes(ok.op_def(op), shapes, attrs, tensors)


def test_strided_slice_shape_with_unknown_dims() -> None:
    (out,) = _infer("StridedSlice", [[None, 6], [2], [2], [2]], {}, [None, i32(0, 1), i32(2, 5), i32(1, 2)])
    assert out.as_list() == [None, 2]


def test_reshape_shape_infers_the_missing_dimension() -> None:
    (out,) = _infer("Reshape", [[2, 3, 4], [2]], {}, [None, i32(-1, 6)])
    assert out.as_list() == [4, 6]


# ---------------------------------------------------------------- errors


def test_reshape_incompatible_size(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'Reshape'") as e:
        ok.ops.reshape(np.zeros((2, 3)), i32(4, 2))
    assert e.value.op == "Reshape"


def test_reshape_shape_fn_incompatible_size() -> None:
    with pytest.raises(ShapeError, match="'Reshape'"):
        _infer("Reshape", [[2, 3], [2]], {}, [None, i32(4, 2)])


def test_concat_mismatched_ranks(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'ConcatV2'.*same rank"):
        ok.ops.concat_v2([np.zeros((2, 3)), np.zeros(3)], np.int32(0))
    with pytest.raises(ShapeError, match="'ConcatV2'"):
        ok.infer_shapes("ConcatV2", [[[2, 3], [3]], []])


def test_concat_mismatched_dims(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'ConcatV2'"):
        ok.ops.concat_v2([np.zeros((2, 3)), np.zeros((3, 3))], np.int32(1))


@pytest.mark.parametrize("op,inputs", [("ConcatV2", ([np.zeros(2)], np.int32(0))), ("Pack", ([],))])
def test_list_below_minimum_length(op: str, inputs: tuple[Any, ...], backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"'{op}'"):
        ok.execute(op, *inputs)


def test_wrong_dtype(backend: str) -> None:
    with pytest.raises(TypeError):
        ok.ops.reshape(np.zeros(4), np.array([2.0, 2.0]))
    with pytest.raises(OpTypeError, match="'ConcatV2'"):
        ok.ops.concat_v2([np.zeros(2, np.float32), np.zeros(2, np.float64)], np.int32(0))
    with pytest.raises(OpTypeError, match="'OneHot'"):
        ok.ops.one_hot(np.array([1.0]), np.int32(2), np.float32(1), np.float32(0))


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: ok.ops.transpose(np.zeros((2, 3)), i32(0, 0)), "'Transpose'.*permutation"),
        (lambda: ok.ops.expand_dims(np.zeros((2, 3)), np.int32(3)), "'ExpandDims'"),
        (lambda: ok.ops.squeeze(np.zeros((2, 3)), axis=[0]), "'Squeeze'.*size"),
        (lambda: ok.ops.concat_v2([np.zeros(2), np.zeros(2)], np.int32(1)), "'ConcatV2'.*out of range"),
        (lambda: ok.ops.pack([np.zeros(2), np.zeros(3)]), "'Pack'.*same shape"),
        (lambda: ok.ops.pack([np.zeros(2), np.zeros(2)], axis=2), "'Pack'.*out of range"),
        (lambda: ok.ops.unpack(np.zeros((2, 3)), num=3), "'Unpack'"),
        (lambda: ok.ops.split(np.int32(1), np.zeros((2, 3)), num_split=2), "'Split'.*evenly"),
        (lambda: ok.ops.slice(np.zeros((2, 3)), i32(1, 1), i32(2, 1)), "'Slice'"),
        (lambda: ok.ops.strided_slice(np.zeros(3), i32(5), i32(6), i32(1), shrink_axis_mask=1), "'StridedSlice'.*out of bounds"),
        (lambda: ok.ops.strided_slice(np.zeros(3), i32(0), i32(2), i32(0)), "'StridedSlice'.*non-zero"),
        (lambda: ok.ops.strided_slice(np.zeros(3), i32(0, 0), i32(1, 1), i32(1, 1)), "'StridedSlice'.*out of range"),
        (
            lambda: ok.ops.strided_slice(np.zeros((2, 2)), i32(0, 0), i32(1, 1), i32(1, 1), ellipsis_mask=3),
            "'StridedSlice'.*ellipsis",
        ),
        (lambda: ok.ops.gather_v2(np.zeros((2, 3)), i32(0, 3), np.int32(1)), "'GatherV2'.*not in \\[0, 3\\)"),
        (lambda: ok.ops.gather_v2(np.zeros((2, 3)), i32(0), np.int32(2)), "'GatherV2'.*out of range"),
        (lambda: ok.ops.unsorted_segment_sum(np.zeros(3), i32(0, 1, 5), np.int32(2)), "'UnsortedSegmentSum'"),
        (lambda: ok.ops.one_hot(i64(1), np.int32(-1), np.float32(1), np.float32(0)), "'OneHot'"),
        (lambda: ok.ops.tile(np.zeros((2, 3)), i32(2)), "'Tile'"),
        (lambda: ok.ops.broadcast_to(np.zeros((2, 3)), i32(3, 3)), "'BroadcastTo'"),
        (lambda: ok.ops.broadcast_to(np.zeros((1, 3)), i32(3)), "'BroadcastTo'.*shape \\[1, 3\\] to shape \\[3\\]"),
        (lambda: ok.ops.broadcast_to(np.zeros(3), i32(-1, 3)), "'BroadcastTo'"),
        (lambda: ok.ops.fill(i32(2, -1), np.float32(1)), "'Fill'"),
        (lambda: ok.ops.range(np.int32(0), np.int32(5), np.int32(0)), "'Range'.*delta"),
        (lambda: ok.ops.range(np.int32(5), np.int32(0), np.int32(1)), "'Range'"),
        (lambda: ok.ops.pad(np.zeros((2, 3)), i32([1, 1])), "'Pad'"),
        (lambda: ok.ops.invert_permutation(i32(0, 0)), "'InvertPermutation'"),
    ],
)
def test_kernel_errors(call: Any, match: str, backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        call()


@pytest.mark.parametrize(
    "op,shapes,attrs,tensors,match",
    [
        ("Transpose", [[2, 3], [2]], {}, [None, i32(0, 2)], "permutation"),
        ("ExpandDims", [[2, 3], []], {}, [None, np.int32(-4)], "out of range"),
        ("Squeeze", [[2, 3]], {"squeeze_dims": [1]}, None, "squeeze"),
        ("ConcatV2", [[[2, 3], [2, 3]], []], {}, [None, np.int32(2)], "out of range"),
        ("ConcatV2", [[[2, 3], [3, 3]], []], {}, [None, np.int32(1)], "Dimension"),
        ("Pack", [[[2], [3]]], {}, None, "Dimension"),
        ("Unpack", [[2, 3]], {"num": 3}, None, "Dimension"),
        ("Split", [[], [2, 3]], {"num_split": 2}, [np.int32(1), None], "evenly"),
        ("Slice", [[2, 3], [2], [2]], {}, [None, i32(1, 1), i32(2, 1)], "exceeds"),
        ("StridedSlice", [[3], [1], [1], [1]], {"shrink_axis_mask": 1}, [None, i32(3), i32(4), i32(1)], "out of bounds"),
        ("GatherV2", [[2, 3], [2], []], {}, [None, None, np.int32(-3)], "out of range"),
        ("GatherV2", [[2, 3], [2, 2], []], {"batch_dims": 2}, [None, None, np.int32(1)], "batch_dims"),
        ("Tile", [[2, 3], [3]], {}, [None, None], "rank"),
        ("BroadcastTo", [[2, 3], [2]], {}, [None, i32(3, 3)], "broadcast"),
        ("Fill", [[2], []], {}, [i32(-1, 2), None], "non-negative"),
        ("Range", [[], [], []], {}, [np.int32(0), np.int32(3), np.int32(0)], "delta"),
        ("OneHot", [[2], [], [], []], {"axis": 2}, None, "axis"),
        ("SplitV", [[2, 3], [2], []], {"num_split": 2}, [None, i64(1, 1), np.int32(1)], "add up"),
        ("SplitV", [[2, 3], [3], []], {"num_split": 3}, [None, i64(-1, -1, 3), np.int32(1)], "one -1"),
        ("DepthToSpace", [[1, 2, 2, 3]], {"block_size": 2}, None, "divisible"),
        ("SpaceToDepth", [[1, 3, 4, 1]], {"block_size": 2}, None, "divisible"),
        ("SpaceToBatchND", [[1, 3, 4, 1], [2], [2, 2]], {}, [None, i32(2, 2), np.zeros((2, 2), np.int32)], "divisible"),
        ("BatchToSpaceND", [[2, 1, 1, 1], [2], [2, 2]], {}, [None, i32(2, 2), np.zeros((2, 2), np.int32)], "divisible"),
        ("BatchToSpaceND", [[4, 1, 1, 1], [2], [2, 2]], {}, [None, i32(2, 2), i32([2, 1], [0, 0])], "exceed"),
        ("Diag", [[]], {}, None, "rank"),
    ],
)
def test_shape_fn_errors(op: str, shapes: list[Any], attrs: dict[str, Any], tensors: Any, match: str) -> None:
    with pytest.raises(ShapeError, match=match) as e:
        _infer(op, shapes, attrs, tensors)
    assert e.value.op == op


def test_string_zeros_are_empty_strings() -> None:
    """TensorFlow's zero string is b'': ZerosLike, Pad and StridedSliceGrad of strings gave
    the integer 0 in their object arrays."""
    with ok.use_backend("cpu"):
        s = ok.tensor(np.array([b"ab", b"c"], object))
        assert ok.ops.zeros_like(s).numpy().tolist() == [b"", b""]
        assert ok.ops.pad(s, [[1, 1]]).numpy().tolist() == [b"", b"ab", b"c", b""]
        assert ok.ops.strided_slice_grad([3], [0], [2], [1], s).numpy().tolist() == [b"ab", b"c", b""]


def test_floor_div_of_complex_has_no_kernel() -> None:
    """As in TensorFlow, FloorDiv has no complex kernel (numpy's floor raised a raw TypeError)."""
    from opkernel.errors import KernelNotFoundError

    with ok.use_backend("cpu"), pytest.raises(KernelNotFoundError, match=r"op 'FloorDiv' with T=complex64"):
        ok.ops.floor_div(np.array([1 + 2j], np.complex64), np.array([1 + 1j], np.complex64))


def test_slice_gradient_of_a_scalar(backend: str) -> None:
    """Slicing a 0-d tensor (empty begin and size) passes the gradient through (numpy read
    the empty shapes as float64 and raised a raw casting error)."""
    x = ok.Variable(np.float32(3))
    with ok.GradientTape() as tape:
        y = ok.ops.slice(x, np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert float(tape.gradient(y, x).numpy()) == 1.0


def test_strided_slice_grad_of_a_scalar_string() -> None:
    """A 0-d dy into a 0-d output: one element of an object array is a bare bytes (a raw
    AttributeError before)."""
    empty = np.zeros(0, np.int32)
    with ok.use_backend("cpu"):
        out = ok.ops.strided_slice_grad(empty, empty, empty, empty, np.array(b"x", object)).numpy()
    assert out.shape == () and out[()] == b"x"


@pytest.mark.parametrize("call", [
    lambda: ok.ops.batch_to_space_nd(np.ones((1, 1), np.float32), i64(1), i64([2**63 - 1, 3])),
    lambda: ok.ops.space_to_batch_nd(np.ones((1, 1), np.float32), i64(1), i64([2**62, 2**62])),
    lambda: ok.ops.space_to_batch_nd(np.ones((1, 0, 0), np.float32), i64(2**40, 2**40), np.zeros((2, 2), np.int64)),
    lambda: ok.ops.space_to_depth(np.zeros((1, 0, 0, 1), np.float32), block_size=2**40),
    lambda: ok.ops.sparse_to_dense(np.zeros((2, 0), np.int64), np.zeros(0, np.int64), np.float32([1, 2]), np.float32(0)),
], ids=["crops_wrap_int64", "paddings_wrap_int64", "blocks_past_int64", "block_size_past_int64", "repeated_scalar_index"])
def test_block_and_sparse_ops_refuse_sizes_past_int64(backend: str, call: Any) -> None:
    """Sizes computed in Python ints, checked before any work: numpy's int64 arithmetic wrapped
    (a crops check passed) or raised raw OverflowError/ValueError."""
    with ok.use_backend(backend), pytest.raises(ok.errors.InvalidArgumentError):
        call()


def test_diag_gradient_traces_with_unknown_dimensions() -> None:
    @ok.function(input_signature=[ok.TensorSpec((None,), ok.float32)])
    def grad(x: Any) -> Any:
        with ok.GradientTape() as tape:
            tape.watch(x)
            y = ok.ops.mul(ok.ops.diag(x), np.arange(9, dtype=np.float32).reshape(3, 3))
        return tape.gradient(y, x)

    assert grad(ok.tensor(np.ones(3, np.float32))).numpy().tolist() == [0.0, 4.0, 8.0]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_sparse_segment_mean_gradient_counts_large_segments_in_float32(backend: str, dtype: str) -> None:
    """A segment of 5000 rows: counted in float16 (or bfloat16) the count stopped at 2048 (256)."""
    n = 5000
    with ok.use_backend(backend):
        x = ok.tensor(np.ones((4, 2), ok.as_dtype(dtype).np))
        try:
            with ok.GradientTape() as tape:
                tape.watch(x)
                y = ok.ops.sparse_segment_mean(x, (np.arange(n) % 4).astype(np.int32), np.zeros(n, np.int32))
            g = tape.gradient(y, x)
        except ok.errors.KernelNotFoundError:  # OpenCL has no bfloat16 Cast
            pytest.skip(f"{backend} has no {dtype} kernel for an op SparseSegmentMean or its gradient is made of")
        assert np.asarray(g.numpy(), np.float32).tolist() == [[0.25, 0.25]] * 4
