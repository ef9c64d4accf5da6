"""Specs, kernels, shape functions and gradients of the ops that count, gather by
segments or place values given as (index, value) pairs: Bincount, DenseBincount,
SparseSegmentSum, SparseSegmentMean and SparseToDense, following TensorFlow's
``math_ops.cc`` and ``sparse_ops.cc``.

Their kernels are generic (composed of UnsortedSegmentSum, GatherV2, Fill and
TensorScatterUpdate), so every backend runs them.  The index inputs that decide an
output's shape or must be checked (segment ids, sparse indices, sizes) are host
memory, as TensorFlow checks them on the host; the data stays where it is.

Part of the array ops (``opkernel.ops.array_ops`` registers them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._array_common import _INDEX, _values, named_errors


def _error(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


#: More elements than any tensor of this library can hold (its size in bytes must fit int64).
_MOST_ELEMENTS = 2**62


def _i64(values: Any) -> np.ndarray:
    return np.asarray(values, np.int64)


# ---------------------------------------------------------------- Bincount, DenseBincount


def _counts(op: str, ids: Any, weights: Any, size: int, rows: int, dtype: Any, binary: bool) -> Any:
    """[rows, size] bins of the ids (row r's ids offset by r * (size + 1), an id past the size
    going to its row's spare bin, dropped at the end), summing ``weights`` (None: ones)."""
    ops = _ops()
    n = int(np.prod(ids.shape))
    if n:
        lowest = int(np.asarray(ops.min(ops.reshape(ids, _i64([n])), _i64([0])).numpy()))
        if lowest < 0:
            raise _error(op, f"the values to count must be non-negative, got {lowest}")
    if rows * (size + 1) > _MOST_ELEMENTS:
        raise _error(op, f"size {size} is too large: {rows} rows of {size} bins are more than a tensor can hold")
    if n == 0 or size == 0:
        return ops.fill(_i64([rows, size]), np.zeros((), dtype.np))
    clipped = ops.minimum(ops.cast(ops.reshape(ids, _i64([n])), DstT="int64"), np.int64(size))
    if rows > 1:
        clipped = ops.add(clipped, _i64(np.repeat(np.arange(rows) * (size + 1), n // rows)))
    w = ops.fill(_i64([n]), np.ones((), dtype.np)) if weights is None or binary else ops.reshape(weights, _i64([n]))
    bins = ops.unsorted_segment_sum(w, clipped, np.int64(rows * (size + 1)))
    bins = ops.slice(ops.reshape(bins, _i64([rows, size + 1])), _i64([0, 0]), _i64([rows, size]))
    if binary:
        bins = ops.cast(ops.greater(bins, np.zeros((), dtype.np)), DstT=dtype)
    return bins


def _size_of(op: str, size: Any) -> int:
    s = np.asarray(size.numpy())
    if s.ndim:
        raise _error(op, f"size must be a scalar, got shape {list(s.shape)}")
    if int(s) < 0:
        raise _error(op, f"size must be non-negative, got {int(s)}")
    return int(s)


def _bincount(arr: Any, size: Any, weights: Any) -> Any:
    op = "Bincount"
    n = _size_of(op, size)
    has_weights = int(np.prod(weights.shape)) > 0
    if has_weights and int(np.prod(weights.shape)) != int(np.prod(arr.shape)):
        raise _error(op, f"weights must have as many values as arr ({int(np.prod(arr.shape))}) or none, "
                         f"got shape {list(weights.shape)}")
    out = _counts(op, arr, weights if has_weights else None, n, 1, weights.dtype, False)
    return _ops().reshape(out, _i64([n]))


def _dense_bincount(input: Any, size: Any, weights: Any, binary_output: bool) -> Any:
    op = "DenseBincount"
    n = _size_of(op, size)
    shape = [int(d) for d in input.shape]
    if len(shape) > 2:
        raise _error(op, f"input must have rank 0, 1 or 2, got shape {shape}")
    has_weights = int(np.prod(weights.shape)) > 0
    if has_weights and [int(d) for d in weights.shape] != shape:
        raise _error(op, f"weights must have the input's shape {shape} or no values, got shape {list(weights.shape)}")
    rows = shape[0] if len(shape) == 2 else 1
    out = _counts(op, input, weights if has_weights else None, n, rows, weights.dtype, binary_output)
    return out if len(shape) == 2 else _ops().reshape(out, _i64([n]))


def _bincount_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(1), 0)
    size = _values(c, 1)
    if size is not None and size[0] < 0:
        raise c.error(f"size must be non-negative, got {size[0]}")
    c.set_output(0, c.vector(c.unknown_dim() if size is None else size[0]))


def _dense_bincount_shape(c: InferenceContext) -> None:
    data = c.with_rank_at_most(c.input(0), 2)
    c.with_rank(c.input(1), 0)
    size = _values(c, 1)
    if size is not None and size[0] < 0:
        raise c.error(f"size must be non-negative, got {size[0]}")
    n = c.unknown_dim() if size is None else size[0]
    if data.rank is None:
        c.set_output(0, c.unknown_shape())
    elif data.rank == 2:
        c.set_output(0, c.make_shape([c.dim(data, 0), n]))
    else:
        c.set_output(0, c.vector(n))


# ---------------------------------------------------------------- SparseSegmentSum, SparseSegmentMean


def _segments(op: str, data: Any, indices: Any, segment_ids: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """The indices and segment ids on the host, checked as TensorFlow checks them, and the
    number of segments (the last id + 1)."""
    idx, ids = np.asarray(indices.numpy()), np.asarray(segment_ids.numpy())
    if not data.shape:
        raise _error(op, "data must have rank >= 1, got a scalar")
    if idx.ndim != 1 or ids.ndim != 1:
        raise _error(op, f"indices and segment_ids must be vectors, got shapes {list(idx.shape)} and {list(ids.shape)}")
    if idx.size != ids.size:
        raise _error(op, f"indices and segment_ids must have the same size, got {idx.size} and {ids.size}")
    rows = int(data.shape[0])
    bad = np.flatnonzero((idx < 0) | (idx >= rows))
    if bad.size:
        raise _error(op, f"indices[{bad[0]}] = {idx[bad[0]]} is out of range [0, {rows})")
    if ids.size and ids[0] < 0:
        raise _error(op, f"segment ids must be non-negative, got {ids[0]}")
    if ids.size > 1 and (np.diff(ids) < 0).any():
        raise _error(op, f"segment ids must be sorted (non-decreasing), got {ids.tolist()}")
    num = int(ids[-1]) + 1 if ids.size else 0
    if num > _MOST_ELEMENTS:
        raise _error(op, f"the last segment id {int(ids[-1])} makes more segments than a tensor can hold")
    return idx.astype(np.int64), ids.astype(np.int64), num


def _segment_reduction(op: str, mean: bool) -> Any:
    def kernel(data: Any, indices: Any, segment_ids: Any) -> Any:
        idx, ids, num = _segments(op, data, indices, segment_ids)
        ops = _ops()
        narrow = data.dtype.name in ("float16", "bfloat16")  # summed in float32, as TensorFlow's kernels do
        rows = ops.gather_v2(data, idx, np.int32(0))
        total = ops.unsorted_segment_sum(ops.cast(rows, DstT="float32") if narrow else rows, ids, np.int64(num))
        if mean and num and int(np.prod(total.shape)):
            counts = np.maximum(np.bincount(ids, minlength=num), 1).astype(np.float32 if narrow else data.dtype.np)
            total = ops.real_div(total, counts.reshape((num,) + (1,) * (len(data.shape) - 1)))
        return ops.cast(total, DstT=data.dtype) if narrow else total

    kernel.__name__ = op
    return kernel


def _segment_shape(c: InferenceContext) -> None:
    data = c.with_rank_at_least(c.input(0), 1)
    idx, ids = c.with_rank(c.input(1), 1), c.with_rank(c.input(2), 1)
    c.merge(c.dim(idx, 0), c.dim(ids, 0))
    known = _values(c, 2)
    rows: Any = c.unknown_dim() if known is None else (known[-1] + 1 if known else 0)
    c.set_output(0, c.unknown_shape() if data.rank is None else c.replace_dim(data, 0, rows))


# ---------------------------------------------------------------- SparseToDense


def _sparse_to_dense(sparse_indices: Any, output_shape: Any, sparse_values: Any, default_value: Any,
                     validate_indices: bool) -> Any:
    op = "SparseToDense"
    idx, shape = np.asarray(sparse_indices.numpy()), np.asarray(output_shape.numpy())
    if shape.ndim != 1:
        raise _error(op, f"output_shape must be a vector, got shape {list(shape.shape)}")
    if idx.ndim > 2:
        raise _error(op, f"sparse_indices must have rank 0, 1 or 2, got shape {list(idx.shape)}")
    n = 1 if idx.ndim == 0 else idx.shape[0]
    dims = idx.shape[1] if idx.ndim == 2 else 1
    if shape.size != dims:
        raise _error(op, f"output_shape must have {dims} values (one per index component), got {shape.size}")
    if (shape < 0).any():
        raise _error(op, f"output_shape must be non-negative, got {shape.tolist()}")
    values_shape = [int(d) for d in sparse_values.shape]
    if values_shape not in ([], [n]):
        raise _error(op, f"sparse_values must be a scalar or have shape [{n}], got {values_shape}")
    if default_value.shape:
        raise _error(op, f"default_value must be a scalar, got shape {list(default_value.shape)}")
    points = idx.reshape(n, dims).astype(np.int64)
    bad = np.flatnonzero(((points < 0) | (points >= shape)).any(axis=1))
    if bad.size:
        raise _error(op, f"sparse_indices[{bad[0]}] = {points[bad[0]].tolist()} is out of bounds: need 0 <= index < "
                         f"{shape.tolist()}")
    if validate_indices and n > 1:
        steps = points[1:] - points[:-1]  # in bounds, so no overflow
        moved = steps != 0
        if dims == 0:  # every index is the one index of a scalar
            sign = np.zeros(n - 1, np.int64)
        else:
            first = moved.argmax(axis=1)  # the first index component that changed
            sign = np.sign(steps[np.arange(n - 1), first]) * moved.any(axis=1)
        if (sign <= 0).any():
            k = int(np.flatnonzero(sign <= 0)[0]) + 1
            what = "repeated" if sign[k - 1] == 0 else "out of order (indices must be sorted row-major)"
            raise _error(op, f"sparse_indices[{k}] = {points[k].tolist()} is {what}")
    ops = _ops()
    dense = ops.fill(shape.astype(np.int64), default_value)
    if n == 0:
        return dense
    values = sparse_values if values_shape else ops.fill(_i64([n]), sparse_values)
    return ops.tensor_scatter_update(dense, points, values)


def _sparse_to_dense_shape(c: InferenceContext) -> None:
    c.with_rank_at_most(c.input(0), 2)
    c.with_rank(c.input(1), 1)
    c.with_rank_at_most(c.input(2), 1)
    c.with_rank(c.input(3), 0)
    c.set_output(0, c.make_shape_from_shape_tensor(1))


# ---------------------------------------------------------------- registration


def register_generic_kernels() -> None:
    register_kernel("Bincount", backend="*", host_memory=("size",))(named_errors("Bincount")(_bincount))
    register_kernel("DenseBincount", backend="*", host_memory=("size",))(named_errors("DenseBincount")(_dense_bincount))
    for name, mean in (("SparseSegmentSum", False), ("SparseSegmentMean", True)):
        register_kernel(name, backend="*", host_memory=("indices", "segment_ids"))(
            named_errors(name)(_segment_reduction(name, mean)))
    register_kernel("SparseToDense", backend="*", host_memory=("sparse_indices", "output_shape"))(
        named_errors("SparseToDense")(_sparse_to_dense))


def register_ops() -> None:
    counted = "{int32, int64, float, double}"
    register_op("Bincount").input("arr: int32").input("size: int32").input("weights: T").output("bins: T").attr(
        f"T: {counted}"
    ).set_shape_fn(_bincount_shape).doc(
        "Counts how often each integer in [0, size) occurs in arr (values past size are ignored), or sums their "
        "weights.\n\nweights: As many values as arr, or none (each occurrence counts 1)."
    )
    register_op("DenseBincount").input("input: Tidx").input("size: Tidx").input("weights: T").output(
        "output: T"
    ).attr("Tidx: {int32, int64}").attr(f"T: {counted}").attr("binary_output: bool = false").set_shape_fn(
        _dense_bincount_shape
    ).doc(
        "Bincount of a vector, or of each row of a matrix.\n\nweights: The input's shape, or no values (each "
        "occurrence counts 1).\nbinary_output: Whether a bin holds 1 where its value occurs (weights ignored) "
        "instead of the count or sum."
    )
    for name, types, what in (
        ("SparseSegmentSum", "realnumbertype", "sum"),
        ("SparseSegmentMean", "{bfloat16, half, float, double}", "mean"),
    ):
        register_op(name).input("data: T").input("indices: Tidx").input("segment_ids: Tsegmentids").output(
            "output: T"
        ).attr(f"T: {types}").attr(f"Tidx: {_INDEX}").attr(f"Tsegmentids: {_INDEX}").attr(
            "sparse_gradient: bool = false"
        ).set_shape_fn(_segment_shape).doc(
            f"output[i] = the {what} of data[indices[j]] over the j with segment_ids[j] == i (0 for an empty "
            "segment); the output has segment_ids[-1] + 1 rows.\n\n"
            "segment_ids: Sorted (non-decreasing), as many as indices.\n"
            "sparse_gradient: TensorFlow's choice of a sparse gradient; the gradient here is dense either way."
        )
    register_op("SparseToDense").input("sparse_indices: Tindices").input("output_shape: Tindices").input(
        "sparse_values: T"
    ).input("default_value: T").output("dense: T").attr("validate_indices: bool = true").attr("T: type").attr(
        "Tindices: {int32, int64}"
    ).set_shape_fn(_sparse_to_dense_shape).doc(
        "A dense tensor of output_shape holding default_value, with sparse_values at sparse_indices.\n\n"
        "sparse_indices: [N, rank] (or [N] for rank 1, or a scalar): where the values go, in bounds.\n"
        "sparse_values: [N], or a scalar for every index.\n"
        "validate_indices: Whether to also require the indices sorted row-major and without repeats."
    )


def _rows(t: Any) -> Any:
    """``t``'s first dimension: an int, or a scalar tensor where a trace does not know it."""
    if t.shape[0] is not None:
        return t.shape[0]
    return _ops().strided_slice(_ops().shape(t, out_type="int64"), _i64([0]), _i64([1]), _i64([1]), shrink_axis_mask=1)


def _segment_grad(mean: bool) -> Any:
    def grad_fn(op: Any, grad: Any) -> list[Any]:
        """The dense gradient: each output row's gradient back to the data rows it summed
        (divided by the segment's size for the mean); written with ops, so it traces."""
        ops = _ops()
        data, indices, ids = op.inputs
        narrow = data.dtype.name in ("float16", "bfloat16")  # counted and summed in float32, as the forward
        g = ops.gather_v2(ops.cast(grad, DstT="float32") if narrow else grad, ids, np.int32(0))
        if mean:
            ones = ops.ones_like(ops.cast(ids, DstT="float32" if narrow else data.dtype))
            sizes = ops.gather_v2(ops.unsorted_segment_sum(ones, ids, _rows(grad)), ids, np.int32(0))
            g = ops.real_div(g, ops.reshape(sizes, _i64([-1] + [1] * (len(data.shape) - 1))))
        out = ops.unsorted_segment_sum(g, indices, _rows(data))
        return [ops.cast(out, DstT=data.dtype) if narrow else out, None, None]

    return grad_fn


def _sparse_to_dense_grad(op: Any, grad: Any) -> list[Any]:
    """TensorFlow's: the values get the gradient at their indices; the default value the rest."""
    ops = _ops()
    indices, _, values, _ = op.inputs
    rank = len(indices.shape)
    points = indices if rank == 2 else ops.reshape(indices, _i64([-1, 1]))
    at_values = ops.gather_nd(grad, points)
    total = ops.sum(grad, _i64(range(len(grad.shape))))
    placed = ops.sum(at_values, _i64([0]))
    return [None, None, at_values if values.shape else placed, ops.sub(total, placed)]


def register_gradients() -> None:
    register_gradient("SparseSegmentSum")(_segment_grad(False))
    register_gradient("SparseSegmentMean")(_segment_grad(True))
    register_gradient("SparseToDense")(_sparse_to_dense_grad)
    for name in ("Bincount", "DenseBincount"):
        not_differentiable(name)
