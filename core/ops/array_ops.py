"""Specs, shape functions and gradients of the shape and data-movement ops.

The specs follow TensorFlow's ``array_ops.cc`` (names of inputs, outputs and
attrs, type lists and defaults).  Shape functions read integer inputs (shapes,
axes, paddings, begin/end) through ``c.input_tensor`` when they are known and
fall back to partial shapes when they are not.  ``strided_slice_plan`` holds
the mask logic of StridedSlice once, for the shape function, the kernels and
the gradient.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import shape_fns
from ..dtypes import DType
from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..op_registry import register_op
from ..shapes import Dimension, InferenceContext
from ..tensor import ops_module as _ops
from ._grad_util import unbroadcast

__all__ = ["StridedSlicePlan", "range_size", "register_gradients", "reshape_sizes", "register_ops", "stop_gradient", "strided_slice_plan"]

_INDEX = "{int32, int64} = DT_INT32"
_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


def stop_gradient(x: Any) -> Any:
    """``x`` unchanged, but no gradient flows back through it (the StopGradient op)."""
    from .. import ops

    return ops.stop_gradient(x)


# ---------------------------------------------------------------- helpers


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


# ---------------------------------------------------------------- StridedSlice


_NEW_AXIS = -1
_SHRINK_AXIS = -2


@dataclass(frozen=True)
class StridedSlicePlan:
    """What a StridedSlice spec selects from an input of a given shape.

    ``index`` has one entry per input dimension: an int for a shrunk dimension,
    a ``slice`` in numpy's convention, or None where begin/end/strides or the
    dimension are not known.  ``processing_shape`` is the shape of the selected
    block (one entry per input dimension, shrunk ones as 1); ``final_shape`` the
    output's (new axes added, shrunk axes dropped).  Unknown sizes are None.
    """

    index: tuple[int | slice | None, ...]
    processing_shape: tuple[int | None, ...]
    final_shape: tuple[int | None, ...]

    @property
    def fully_known(self) -> bool:
        return None not in self.index

    def numpy_index(self) -> tuple[int | slice, ...]:
        """``index`` for ``array[...]`` (only when fully known)."""
        return tuple(i for i in self.index if i is not None)


def _canonical(x: int, masked: bool, is_end: bool, stride: int, d: int) -> int:
    """A begin (or end) index of a dimension of size ``d`` clamped into the valid
    range for the stride's direction; a masked one is the fullest range's bound."""
    lo, hi = (0, d) if stride > 0 else (-1, d - 1)
    if masked:
        return (hi if is_end else lo) if stride > 0 else (lo if is_end else hi)
    x = x + d if x < 0 else x
    return min(max(x, lo), hi)


def strided_slice_plan(
    dims: Sequence[int | None],
    begin: Sequence[int] | None,
    end: Sequence[int] | None,
    strides: Sequence[int] | None,
    n: int,
    masks: dict[str, int],
    error: Callable[[str], Exception],
) -> StridedSlicePlan:
    """TensorFlow's ValidateStridedSliceOp: the sparse spec (``n`` entries of
    begin/end/strides and the five bit masks) made dense against an input of
    shape ``dims`` (``None`` for an unknown size), then canonicalized.

    ``begin``, ``end``, ``strides`` may be None when unknown; the result then
    has unknown sizes where they matter.  Bad specs raise ``error(message)``.
    """
    begin_mask, end_mask = masks.get("begin_mask", 0), masks.get("end_mask", 0)
    ellipsis_mask, new_axis_mask = masks.get("ellipsis_mask", 0), masks.get("new_axis_mask", 0)
    shrink_axis_mask = masks.get("shrink_axis_mask", 0)
    if ellipsis_mask & (ellipsis_mask - 1):
        raise error(f"only one ellipsis is allowed in a slice spec, got ellipsis_mask={ellipsis_mask}")
    for name, v in (("begin", begin), ("end", end), ("strides", strides)):
        if v is not None and len(v) != n:
            raise error(f"begin, end and strides must have the same length, but {name} has {len(v)} entries, expected {n}")
    # Sparse spec -> dense spec: expand the ellipsis (an implicit one at the end).
    sparse_dims, new_after_ellipsis, seen = n, 0, False
    for i in range(n):
        if seen and new_axis_mask >> i & 1:
            new_after_ellipsis += 1
        if ellipsis_mask >> i & 1:
            seen = True
    if not seen:
        ellipsis_mask |= 1 << n
        sparse_dims += 1
    rank = len(dims)
    dense: list[tuple[int | None, bool, bool, bool]] = []  # (sparse index, begin masked, end masked, shrink)
    gather: list[int] = []  # per output dim: a dense index, _NEW_AXIS, or _SHRINK_AXIS
    for i in range(sparse_dims):
        bit = 1 << i
        if ellipsis_mask & bit:
            stop = min(rank - (sparse_dims - i) + 1 + new_after_ellipsis, rank)
            while len(dense) < stop:
                gather.append(len(dense))
                dense.append((None, True, True, False))
        elif new_axis_mask & bit:
            gather.append(_NEW_AXIS)
        else:
            if len(dense) == rank:
                raise error(f"index {i} of the slice spec is out of range: the input has only {rank} dimensions")
            shrink = bool(shrink_axis_mask & bit)
            gather.append(_SHRINK_AXIS if shrink else len(dense))
            dense.append((i, bool(begin_mask & bit), bool(end_mask & bit), shrink))
    index: list[int | slice | None] = []
    processing: list[int | None] = []
    for k, (src, begin_masked, end_masked, shrink) in enumerate(dense):
        d = dims[k]
        b = e = 0
        stride: int | None = 1
        b_known = e_known = True
        if src is not None:
            stride = None if strides is None else int(strides[src])
            b_known, e_known = begin is not None, end is not None
            b = int(begin[src]) if begin is not None else 0
            e = int(end[src]) if end is not None else 0
        if stride == 0:
            raise error(f"strides[{src}] must be non-zero")
        if shrink and stride is not None and stride < 0:
            raise error(f"strides[{src}] must be positive for a shrunk (integer-indexed) dimension, got {stride}")
        if d is None or stride is None:
            index.append(None)
            processing.append(1 if shrink else None)
            continue
        if shrink:
            if not b_known:
                index.append(None)
                processing.append(1)
                continue
            x = b + d if b < 0 else b
            if not 0 <= x < d:
                raise error(f"slice index {b} of dimension {k} is out of bounds for a dimension of size {d}")
            index.append(x)
            processing.append(1)
            continue
        if not ((b_known or begin_masked) and (e_known or end_masked)):
            index.append(None)
            processing.append(None)
            continue
        cb, ce = _canonical(b, begin_masked, False, stride, d), _canonical(e, end_masked, True, stride, d)
        interval = ce - cb
        if interval == 0 or (interval < 0) != (stride < 0):
            index.append(slice(0, 0, 1))
            processing.append(0)
            continue
        index.append(slice(cb, None if ce < 0 else ce, stride))
        processing.append((abs(interval) + abs(stride) - 1) // abs(stride))
    final = tuple(1 if g == _NEW_AXIS else processing[g] for g in gather if g != _SHRINK_AXIS)
    return StridedSlicePlan(tuple(index), tuple(processing), final)


def _strided_slice_shape(c: InferenceContext) -> None:
    data = c.input(0)
    specs = [c.with_rank(c.input(i), 1) for i in (1, 2, 3)]
    length = c.merge(c.merge(c.dim(specs[0], 0), c.dim(specs[1], 0)), c.dim(specs[2], 0))
    n = c.value(length)
    if data.rank is None or n is None:
        c.set_output(0, c.unknown_shape())
        return
    masks = {m: int(c.get_attr(m, 0)) for m in _SLICE_MASKS}
    plan = strided_slice_plan(data.as_list(), _values(c, 1), _values(c, 2), _values(c, 3), n, masks, c.error)
    c.set_output(0, c.make_shape(plan.final_shape))


# ---------------------------------------------------------------- shape functions


def _reshape_shape(c: InferenceContext) -> None:
    wanted = _values(c, 1)
    if wanted is not None and wanted.count(-1) > 1:
        raise c.error(f"can only infer one dimension, but shape {wanted} has several -1 entries")
    out = c.make_shape_from_shape_tensor(1)
    src = c.input(0)
    c.set_output(0, out)
    if out.dims is None or src.dims is None:
        return
    out_unknown = [k for k, d in enumerate(out.dims) if d.value is None]
    in_unknown = [k for k, d in enumerate(src.dims) if d.value is None]
    if len(out_unknown) > 1 or len(in_unknown) > 1:
        return  # nothing more to learn (TensorFlow's SetOutputShapeForReshape)
    out_known = int(np.prod([d.value for d in out.dims if d.value is not None], dtype=np.int64))
    in_known = int(np.prod([d.value for d in src.dims if d.value is not None], dtype=np.int64))
    if not out_unknown and not in_unknown:
        if in_known != out_known:
            raise c.error(f"cannot reshape a tensor of {in_known} elements to shape {out} ({out_known} elements)")
    elif not in_unknown:
        if out_known > 0:
            if in_known % out_known:
                raise c.error(f"cannot reshape a tensor of {in_known} elements to shape {wanted}")
            out = c.replace_dim(out, out_unknown[0], in_known // out_known)
    elif not out_unknown:
        if in_known > 0 and out_known % in_known:
            raise c.error(f"cannot reshape a tensor of shape {src} to shape {out} ({out_known} elements)")
    elif in_known == out_known:
        out = c.replace_dim(out, out_unknown[0], c.dim(src, in_unknown[0]))
    c.set_output(0, out)


def reshape_sizes(n_in: Sequence[int], sizes: Sequence[int], error: Callable[[str], Exception]) -> list[int]:
    """Reshape's output shape for an input of shape ``n_in``: ``sizes`` with its -1 resolved
    as TensorFlow's kernel does (reshape_op.h).  When ``sizes`` has a 0, the -1 is the
    product of the input's non-zero dimensions over that of the other non-zero sizes, so an
    empty [0, 4] reshaped to [-1, 0] is [4, 0], not an error."""
    dims = list(sizes)
    if dims.count(-1) > 1 or min(dims, default=0) < -1:
        raise error(f"shape must be a vector of sizes >= 0 with at most one -1, got {dims}")
    n = int(np.prod(n_in, dtype=np.int64))
    if -1 in dims:
        has_zero = 0 in dims
        known = int(np.prod([v for v in dims if v > 0], dtype=np.int64))
        counted = int(np.prod([v for v in n_in if v > 0 or not has_zero], dtype=np.int64))
        if not (has_zero and 0 in n_in) and counted % known:
            raise error(f"cannot reshape a tensor with {n} elements to shape {dims}")
        dims[dims.index(-1)] = counted // known
    if int(np.prod(dims, dtype=np.int64)) != n:
        raise error(f"cannot reshape a tensor with {n} elements to shape {list(sizes)}")
    return dims


def _shape_shape(c: InferenceContext) -> None:
    c.set_output(0, c.vector(c.rank(c.input(0))))


@shape_fns.output_size_from("paddings")
def _pad_shape(c: InferenceContext) -> None:
    data = c.input(0)
    paddings = c.with_rank(c.input(1), 2)
    c.merge(c.dim(paddings, 1), c.make_dim(2))
    rank = c.rank(data) if c.rank_known(data) else c.value(c.dim(paddings, 0))
    if rank is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank(data, rank)
    c.merge(c.dim(paddings, 0), c.make_dim(rank))
    pads = c.input_tensor(1)
    if pads is None:
        c.set_output(0, c.unknown_shape_of_rank(rank))
        return
    pads = np.asarray(pads).reshape(-1, 2)
    if (pads < 0).any():
        raise c.error(f"paddings must be non-negative, got {pads.tolist()}")
    c.set_output(0, c.make_shape([c.add(c.dim(data, i), int(lo + hi)) for i, (lo, hi) in enumerate(pads)]))


def _transpose_shape(c: InferenceContext) -> None:
    data = c.input(0)
    perm_shape = c.with_rank_at_most(c.input(1), 1)
    perm = _values(c, 1)
    if data.rank is not None:
        rank: int | None = data.rank
    elif perm is not None:
        rank = len(perm)
    elif perm_shape.rank == 1:
        rank = c.value(c.dim(perm_shape, 0))
    else:
        rank = None
    if rank is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank(data, rank)
    c.merge(c.dim(c.with_rank(perm_shape, 1), 0), c.make_dim(rank))
    if perm is None:
        c.set_output(0, c.unknown_shape_of_rank(rank))
        return
    if sorted(p % rank if -rank <= p < rank else p for p in perm) != list(range(rank)):
        raise c.error(f"perm {perm} is not a permutation of the {rank} dimensions of the input")
    c.set_output(0, c.make_shape([c.dim(data, p) for p in perm]))


def _expand_dims_shape(c: InferenceContext) -> None:
    data = c.input(0)
    dim = _values(c, 1)
    if dim is not None and len(dim) != 1:
        raise c.error(f"'dim' must hold a single value, got {dim}")
    if dim is None or data.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    rank = len(data.dims)
    axis = _axis(c, dim[0], rank + 1, "dim")
    dims: list[Any] = list(data.dims)
    c.set_output(0, c.make_shape(dims[:axis] + [1] + dims[axis:]))


def _squeeze_shape(c: InferenceContext) -> None:
    data = c.input(0)
    if data.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    rank = len(data.dims)
    wanted = {_axis(c, int(a), rank, "squeeze_dims entry") for a in c.get_attr("squeeze_dims", [])}
    out: list[Dimension] = []
    for k, d in enumerate(data.dims):
        if d.value is None:
            if k in wanted:
                continue
            if not wanted:
                c.set_output(0, c.unknown_shape())
                return
        elif d.value == 1:
            if k in wanted or not wanted:
                continue
        elif k in wanted:
            raise c.error(f"cannot squeeze dimension {k}: expected size 1, got {d.value}")
        out.append(d)
    c.set_output(0, c.make_shape(out))


def _concat_shape(c: InferenceContext) -> None:
    n = c.num_inputs() - 1
    shapes = [c.input(i) for i in range(n)]
    axis = _scalar(c, n)
    ranks = {s.rank for s in shapes if s.rank is not None}
    if len(ranks) > 1:
        raise c.error(f"all inputs must have the same rank, got shapes {', '.join(str(s) for s in shapes)}")
    if not ranks:
        c.set_output(0, c.unknown_shape())
        return
    rank = ranks.pop()
    if axis is None:
        c.set_output(0, c.unknown_shape_of_rank(rank))
        return
    if rank == 0:
        raise c.error("cannot concatenate scalars; use Pack")
    axis = _axis(c, axis, rank, "axis")
    total: Dimension = c.make_dim(0)
    out: list[Dimension] = [Dimension(None)] * rank
    for s in shapes:
        s = c.with_rank(s, rank)
        for k in range(rank):
            if k == axis:
                continue
            out[k] = c.merge(out[k], c.dim(s, k))
        total = c.add(total, c.dim(s, axis))
    out[axis] = total
    c.set_output(0, c.make_shape(out))


def _pack_shape(c: InferenceContext) -> None:
    merged = c.input(0)
    for i in range(1, c.num_inputs()):
        merged = c.merge(merged, c.input(i))
    if merged.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    rank = len(merged.dims) + 1
    axis = _axis(c, int(c.get_attr("axis", 0)), rank, "axis")
    dims: list[Any] = list(merged.dims)
    c.set_output(0, c.make_shape(dims[:axis] + [c.num_inputs()] + dims[axis:]))


def _unpack_shape(c: InferenceContext) -> None:
    data = c.input(0)
    if data.dims is None:
        out = c.unknown_shape()
    else:
        rank = len(data.dims)
        axis = _axis(c, int(c.get_attr("axis", 0)), rank, "axis")
        c.merge(c.dim(data, axis), c.make_dim(c.num_outputs()))
        out = c.make_shape([d for k, d in enumerate(data.dims) if k != axis])
    for i in range(c.num_outputs()):
        c.set_output(i, out)


def _split_shape(c: InferenceContext) -> None:
    data = c.input(1)
    axis = _scalar(c, 0)
    num = c.num_outputs()
    if axis is None or data.dims is None:
        out = c.unknown_shape() if data.rank is None else c.unknown_shape_of_rank(data.rank)
    else:
        axis = _axis(c, axis, len(data.dims), "split_dim")
        size = c.value(c.dim(data, axis))
        if size is not None and size % num:
            raise c.error(f"num_split={num} does not evenly divide dimension {axis} of size {size}")
        out = c.replace_dim(data, axis, c.divide(c.dim(data, axis), num))
    for i in range(num):
        c.set_output(i, out)


def _slice_shape(c: InferenceContext) -> None:
    data = c.input(0)
    begin_shape, size_shape = c.with_rank(c.input(1), 1), c.with_rank(c.input(2), 1)
    length = c.merge(c.dim(begin_shape, 0), c.dim(size_shape, 0))
    if data.rank is not None:
        length = c.merge(length, c.make_dim(data.rank))
    rank = c.value(length)
    if rank is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank(data, rank)
    begin, size = _values(c, 1), _values(c, 2)
    if size is None:
        c.set_output(0, c.unknown_shape_of_rank(rank))
        return
    out: list[int | None] = []
    for k in range(rank):
        d, s = c.value(c.dim(data, k)), size[k]
        b = None if begin is None else begin[k]
        if b is not None and (b < 0 or (d is not None and b > d)):
            raise c.error(f"begin[{k}] = {b} is out of range for dimension {k} of size {d}")
        if s < -1:
            raise c.error(f"size[{k}] = {s} must be >= -1")
        if s == -1:
            out.append(None if d is None or b is None else d - b)
            continue
        if b is not None and d is not None and b + s > d:
            raise c.error(f"begin[{k}] + size[{k}] = {b + s} exceeds dimension {k} of size {d}")
        out.append(s)
    c.set_output(0, c.make_shape(out))


@shape_fns.output_size_from("shape")
def _strided_slice_grad_shape(c: InferenceContext) -> None:
    c.set_output(0, c.make_shape_from_shape_tensor(0))


def _gather_shape(c: InferenceContext) -> None:
    params = c.with_rank_at_least(c.input(0), 1)
    indices = c.input(1)
    axis = _scalar(c, 2)
    if axis is None or params.dims is None or indices.dims is None:
        if params.rank is not None and indices.rank is not None:
            batch_dims = int(c.get_attr("batch_dims", 0))
            batch_dims = batch_dims + indices.rank if batch_dims < 0 else batch_dims
            c.set_output(0, c.unknown_shape_of_rank(params.rank + indices.rank - 1 - batch_dims))
        else:
            c.set_output(0, c.unknown_shape())
        return
    p_rank, i_rank = len(params.dims), len(indices.dims)
    axis = _axis(c, axis, p_rank, "axis")
    batch_dims = int(c.get_attr("batch_dims", 0))
    if not -i_rank <= batch_dims <= i_rank:
        raise c.error(f"batch_dims={batch_dims} must be in [{-i_rank}, {i_rank}] for indices of rank {i_rank}")
    batch_dims = batch_dims + i_rank if batch_dims < 0 else batch_dims
    if batch_dims > axis:
        raise c.error(f"batch_dims={batch_dims} must be less than or equal to axis={axis}")
    for k in range(batch_dims):
        c.merge(c.dim(params, k), c.dim(indices, k))
    out = c.concatenate(c.subshape(params, 0, axis), c.subshape(indices, batch_dims))
    c.set_output(0, c.concatenate(out, c.subshape(params, axis + 1)))


@shape_fns.output_size_from("num_segments")
def _unsorted_segment_sum_shape(c: InferenceContext) -> None:
    data, ids = c.input(0), c.input(1)
    num = _scalar(c, 2)
    if num is not None and num < 0:
        raise c.error(f"num_segments must be >= 0, got {num}")
    if ids.rank is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank_at_least(data, ids.rank)
    c.merge(ids, c.subshape(data, 0, ids.rank))
    c.set_output(0, c.concatenate(c.vector(num), c.subshape(data, ids.rank)))


@shape_fns.output_size_from("depth")
def _one_hot_shape(c: InferenceContext) -> None:
    axis = int(c.get_attr("axis", -1))
    if axis < -1:
        raise c.error(f"axis must be >= -1, got {axis}")
    depth = _scalar(c, 1)
    if depth is not None and depth < 0:
        raise c.error(f"depth must be non-negative, got {depth}")
    c.with_rank(c.input(2), 0)
    c.with_rank(c.input(3), 0)
    indices = c.input(0)
    if indices.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    rank = len(indices.dims)
    if axis > rank:
        raise c.error(f"axis {axis} is out of range for indices of rank {rank}; expected a value in [-1, {rank}]")
    at = rank if axis == -1 else axis
    dims: list[Any] = list(indices.dims)
    c.set_output(0, c.make_shape(dims[:at] + [depth] + dims[at:]))


@shape_fns.output_size_from("multiples")
def _tile_shape(c: InferenceContext) -> None:
    data = c.input(0)
    multiples = c.make_shape_from_shape_tensor(1)
    known = _values(c, 1)
    if known is not None and any(m < 0 for m in known):
        raise c.error(f"multiples must be non-negative, got {known}")
    if data.rank is not None:
        multiples = c.with_rank(multiples, data.rank)
        c.merge(c.input(1), c.vector(data.rank))
    if multiples.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank(data, len(multiples.dims))
    c.set_output(0, c.make_shape([c.multiply(c.dim(data, k), m) for k, m in enumerate(multiples.dims)]))


@shape_fns.output_size_from("shape")
def _broadcast_to_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(1), 1)
    out = c.make_shape_from_shape_tensor(1)
    data = c.input(0)
    if out.dims is None or data.dims is None:
        c.set_output(0, out)
        return
    out_rank, in_rank = len(out.dims), len(data.dims)
    if in_rank > out_rank:
        raise c.error(f"cannot broadcast a tensor of shape {data} to the lower-rank shape {out}")
    dims = list(out.dims)
    for k in range(1, in_rank + 1):
        d, o = data.dims[-k], dims[-k]
        if d.value is not None and d.value != 1:
            if o.value is not None and o.value != d.value:
                raise c.error(f"cannot broadcast a tensor of shape {data} to shape {out}")
            dims[-k] = d
    c.set_output(0, c.make_shape(dims))


@shape_fns.output_size_from("dims")
def _fill_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 1)
    c.with_rank(c.input(1), 0)
    dims = _values(c, 0)
    if dims is not None and any(d < 0 for d in dims):
        raise c.error(f"dims must be non-negative, got {dims}")
    c.set_output(0, c.make_shape_from_shape_tensor(0))


def range_size(start: Any, limit: Any, delta: Any, error: Callable[[str], Exception]) -> int:
    """The length of Range(start, limit, delta), TensorFlow's rules.  The bounds are
    Python or numpy scalars: numpy ones set the dtype of the arithmetic."""
    if delta == 0:
        raise error("delta must not be 0")
    if delta > 0 and start > limit:
        raise error(f"start must be <= limit when delta > 0, got start={start}, limit={limit}")
    if delta < 0 and start < limit:
        raise error(f"start must be >= limit when delta < 0, got start={start}, limit={limit}")
    if isinstance(start, (int, np.integer)) and isinstance(limit, (int, np.integer)) and isinstance(delta, (int, np.integer)):
        return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    # In the inputs' own dtype, as TensorFlow does (sequence_ops.cc): given float32
    # scalars, range(0.0, 0.3, 0.1) has 3 elements; the same arithmetic in float64 gives 4.
    with np.errstate(all="ignore"):
        size = np.ceil(abs((limit - start) / delta))
    if not np.isfinite(size):
        raise error(f"the size (limit - start) / delta must be finite, got start={start}, limit={limit}, delta={delta}")
    return int(size)


@shape_fns.output_size_from("start", "limit", "delta")
def _range_shape(c: InferenceContext) -> None:
    values: list[Any] = []
    for i in range(3):
        c.with_rank(c.input(i), 0)
        t = c.input_tensor(i)
        if t is None:
            c.set_output(0, c.vector(None))
            return
        values.append(np.asarray(t).reshape(())[()])  # a numpy scalar: its dtype sets the size's arithmetic
    c.set_output(0, c.vector(range_size(values[0], values[1], values[2], c.error)))


def _where_shape(c: InferenceContext) -> None:
    c.set_output(0, c.matrix(None, c.rank(c.input(0))))


def _invert_permutation_shape(c: InferenceContext) -> None:
    c.set_output(0, c.with_rank(c.input(0), 1))


def _concat_offset_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    for i in range(1, c.num_inputs()):
        c.set_output(i - 1, c.with_rank(c.input(i), 1))


# ---------------------------------------------------------------- specs


def _strided_slice_attrs(builder: Any, index: str = "{int32, int64}") -> Any:
    builder = builder.output("output: T").attr("T: type").attr(f"Index: {index}")
    for m in _SLICE_MASKS:
        builder = builder.attr(f"{m}: int = 0")
    return builder


def register_ops() -> None:
    register_op("Identity").input("input: T").output("output: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns a tensor with the same shape and contents as the input.")
    register_op("StopGradient").input("input: T").output("output: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns the input unchanged; gradients do not flow back through it.")
    register_op("Reshape").input("tensor: T").input("shape: Tshape").output("output: T").attr("T: type").attr(
        f"Tshape: {_INDEX}"
    ).set_shape_fn(_reshape_shape).doc("Reshapes a tensor; one entry of shape may be -1 and is inferred.")
    register_op("Shape").input("input: T").output("output: out_type").attr("T: type").attr(
        f"out_type: {_INDEX}"
    ).set_shape_fn(_shape_shape).doc("Returns the shape of a tensor as a 1-D integer tensor.")
    register_op("Size").input("input: T").output("output: out_type").attr("T: type").attr(
        f"out_type: {_INDEX}"
    ).set_shape_fn(shape_fns.scalar_shape).doc("Returns the number of elements of a tensor.")
    register_op("Rank").input("input: T").output("output: int32").attr("T: type").set_shape_fn(
        shape_fns.scalar_shape
    ).doc("Returns the number of dimensions of a tensor.")
    register_op("Pad").input("input: T").input("paddings: Tpaddings").output("output: T").attr("T: type").attr(
        f"Tpaddings: {_INDEX}"
    ).set_shape_fn(_pad_shape).doc(
        "Pads a tensor with zeros.\n\npaddings: An [rank, 2] tensor: how many values to add before and after each dimension."
    )
    register_op("ZerosLike").input("x: T").output("y: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns a tensor of zeros with the same shape and type as x.")
    register_op("OnesLike").input("x: T").output("y: T").attr(
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64, complex64, complex128, "
        "bool}"
    ).set_shape_fn(shape_fns.unchanged_shape).doc("Returns a tensor of ones with the same shape and type as x.")
    register_op("StringToNumber").input("string_tensor: string").output("output: out_type").attr(
        "out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Converts each string in the input Tensor to the specified numeric type.\n\n"
        "out_type: The numeric type to interpret each string in string_tensor as."
    )
    register_op("Transpose").input("x: T").input("perm: Tperm").output("y: T").attr("T: type").attr(
        f"Tperm: {_INDEX}"
    ).set_shape_fn(_transpose_shape).doc(
        "Permutes the dimensions of x: output dimension i is input dimension perm[i]."
    )
    register_op("InvertPermutation").input("x: T").output("y: T").attr(f"T: {_INDEX}").set_shape_fn(
        _invert_permutation_shape
    ).doc("Computes the inverse permutation of a vector: y[x[i]] = i.")
    register_op("ExpandDims").input("input: T").input("dim: Tdim").output("output: T").attr("T: type").attr(
        f"Tdim: {_INDEX}"
    ).set_shape_fn(_expand_dims_shape).doc(
        "Inserts a dimension of size 1 at index dim (in [-rank - 1, rank]; negative counts from the end)."
    )
    register_op("Squeeze").input("input: T").output("output: T").attr("T: type").attr(
        "squeeze_dims: list(int) >= 0 = []"
    ).set_shape_fn(_squeeze_shape).doc(
        "Removes dimensions of size 1.\n\n"
        "squeeze_dims: The dimensions to remove (each must have size 1); all size-1 dimensions when empty."
    )
    register_op("ConcatV2").input("values: N * T").input("axis: Tidx").output("output: T").attr("N: int >= 2").attr(
        "T: type"
    ).attr(f"Tidx: {_INDEX}").set_shape_fn(_concat_shape).doc(
        "Concatenates tensors along one dimension.\n\naxis: The dimension to join along, in [-rank, rank)."
    )
    register_op("ConcatOffset").input("concat_dim: int32").input("shape: N * shape_type").output(
        "offset: N * shape_type"
    ).attr("N: int >= 2").attr(f"shape_type: {_INDEX}").set_shape_fn(_concat_offset_shape).doc(
        "The offsets of each input of a concatenation along concat_dim (for the gradient of ConcatV2)."
    )
    register_op("Pack").input("values: N * T").output("output: T").attr("N: int >= 1").attr("T: type").attr(
        "axis: int = 0"
    ).set_shape_fn(_pack_shape).doc(
        "Stacks N tensors of the same shape into one tensor of rank + 1, along a new dimension axis."
    )
    register_op("Unpack").input("value: T").output("output: num * T").attr("num: int >= 0").attr("T: type").attr(
        "axis: int = 0"
    ).set_shape_fn(_unpack_shape).doc("Unstacks dimension axis of value (of size num) into num tensors.")
    register_op("Split").input("split_dim: int32").input("value: T").output("output: num_split * T").attr(
        "num_split: int >= 1"
    ).attr("T: type").set_shape_fn(_split_shape).doc(
        "Splits a tensor into num_split equal pieces along dimension split_dim."
    )
    register_op("Slice").input("input: T").input("begin: Index").input("size: Index").output("output: T").attr(
        "T: type"
    ).attr("Index: {int32, int64}").set_shape_fn(_slice_shape).doc(
        "Extracts the block input[begin[i] : begin[i] + size[i]] (size -1: to the end of the dimension)."
    )
    _strided_slice_attrs(
        register_op("StridedSlice").input("input: T").input("begin: Index").input("end: Index").input("strides: Index"),
        "{int16, int32, int64}",  # as TensorFlow's StridedSlice (its StridedSliceGrad keeps int32 and int64)
    ).set_shape_fn(_strided_slice_shape).doc(
        "Extracts a strided slice of a tensor (numpy basic indexing: begin/end/strides per spec entry, with bit masks\n"
        "for begin/end left out, an ellipsis, new axes and shrunk (integer-indexed) axes); strides may be negative."
    )
    _strided_slice_attrs(
        register_op("StridedSliceGrad").input("shape: Index").input("begin: Index").input("end: Index").input(
            "strides: Index"
        ).input("dy: T")
    ).set_shape_fn(_strided_slice_grad_shape).doc(
        "The gradient of StridedSlice: dy scattered into zeros of the given shape."
    )
    register_op("GatherV2").input("params: Tparams").input("indices: Tindices").input("axis: Taxis").attr(
        "batch_dims: int = 0"
    ).output("output: Tparams").attr("Tparams: type").attr("Tindices: {int16, int32, int64}").attr(
        "Taxis: {int32, int64}"
    ).set_shape_fn(_gather_shape).doc(
        "Gathers slices of params along axis at the given indices (the first batch_dims dimensions are batch)."
    )
    register_op("UnsortedSegmentSum").input("data: T").input("segment_ids: Tindices").input(
        "num_segments: Tnumsegments"
    ).output("output: T").attr("T: numbertype").attr("Tindices: {int16, int32, int64}").attr(
        f"Tnumsegments: {_INDEX}"
    ).set_shape_fn(_unsorted_segment_sum_shape).doc(
        "output[i, ...] = sum of data[j..., ...] over the j with segment_ids[j...] == i; negative ids are dropped."
    )
    register_op("OneHot").input("indices: TI").input("depth: int32").input("on_value: T").input(
        "off_value: T"
    ).attr("axis: int = -1").output("output: T").attr("T: type").attr("TI: {uint8, int8, int32, int64} = DT_INT64").set_shape_fn(
        _one_hot_shape
    ).doc("A one-hot tensor: on_value where indices == i along the new dimension axis, off_value elsewhere.")
    register_op("Tile").input("input: T").input("multiples: Tmultiples").output("output: T").attr("T: type").attr(
        f"Tmultiples: {_INDEX}"
    ).set_shape_fn(_tile_shape).doc("Repeats the input multiples[i] times along dimension i.")
    register_op("BroadcastTo").input("input: T").input("shape: Tidx").output("output: T").attr("T: type").attr(
        f"Tidx: {_INDEX}"
    ).set_shape_fn(_broadcast_to_shape).doc("Broadcasts the input to shape, with numpy's broadcasting rules.")
    register_op("Fill").input("dims: index_type").input("value: T").output("output: T").attr("T: type").attr(
        f"index_type: {_INDEX}"
    ).set_shape_fn(_fill_shape).doc("A tensor of shape dims filled with the scalar value.")
    register_op("Range").input("start: Tidx").input("limit: Tidx").input("delta: Tidx").output("output: Tidx").attr(
        "Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32} = DT_INT32"
    ).set_shape_fn(_range_shape).doc("The sequence start, start + delta, ... up to but not including limit.")
    register_op("Where").input("input: T").attr("T: {numbertype, bool} = DT_BOOL").output("index: int64").set_shape_fn(
        _where_shape
    ).doc("The coordinates of the true (non-zero) elements of input, as a [num_true, rank] int64 matrix.")


# ---------------------------------------------------------------- gradients


def _reshape_back(op: Any, grad: Any) -> list[Any]:
    """Gradient of an op that only rearranges shape: reshape grad to the input's."""
    rest: list[Any] = [None] * (len(op.inputs) - 1)
    x = op.inputs[0]
    shape = _ops().shape(x) if None in tuple(x.shape) else _shape_const(x.shape)  # traced with unknown dims
    return [_ops().reshape(grad, shape)] + rest


def _identity_grad(op: Any, grad: Any) -> list[Any]:
    return [grad]


def _transpose_grad(op: Any, grad: Any) -> list[Any]:
    """Transpose back by the inverse permutation, computed on the host: perm is a
    host-memory input, and negative entries (counted from the end) are allowed."""
    perm = np.asarray(op.inputs[1].numpy()).reshape(-1)
    inverse = np.argsort(perm % len(perm)) if len(perm) else perm
    return [_ops().transpose(grad, _shape_const(inverse.tolist(), op.inputs[1].dtype)), None]


def _concat_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    values, axis = op.inputs[:-1], op.inputs[-1]
    if axis.dtype.name != "int32":
        axis = ops.cast(axis, DstT="int32")
    shapes = [_shape_of(v) for v in values]
    offsets = ops.concat_offset(axis, shapes)
    return [ops.slice(grad, off, size) for off, size in zip(offsets, shapes)] + [None]


def _pack_grad(op: Any, grad: Any) -> list[Any]:
    n = len(op.inputs)
    parts: list[Any] = _ops().unpack(grad, num=n, axis=op.get_attr("axis"))
    return parts


def _unpack_grad(op: Any, *grads: Any) -> list[Any]:
    if not grads:
        return [_ops().zeros_like(op.inputs[0])]
    return [_ops().pack(list(grads), axis=op.get_attr("axis"))]


def _split_grad(op: Any, *grads: Any) -> list[Any]:
    if len(grads) == 1:
        return [None, grads[0]]
    return [None, _ops().concat_v2(list(grads), op.inputs[0])]


def _slice_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    x, begin = op.inputs[0], op.inputs[1]
    if None in tuple(x.shape) or None in tuple(grad.shape):
        room = ops.sub(_shape_of(x, begin.dtype), _shape_of(grad, begin.dtype))
    else:
        room = _shape_const([int(a) - int(b) for a, b in zip(x.shape, grad.shape)], begin.dtype)
    after = ops.sub(room, begin)
    paddings = ops.pack([begin, after], axis=1)
    return [ops.pad(grad, paddings), None, None]


def _masks(op: Any) -> dict[str, int]:
    return {m: op.get_attr(m) for m in _SLICE_MASKS}


def _strided_slice_grad(op: Any, grad: Any) -> list[Any]:
    x, begin, end, strides = op.inputs
    shape = _shape_of(x, begin.dtype)
    return [_ops().strided_slice_grad(shape, begin, end, strides, grad, **_masks(op)), None, None, None]


def _strided_slice_grad_grad(op: Any, grad: Any) -> list[Any]:
    _, begin, end, strides, _ = op.inputs
    return [None, None, None, None, _ops().strided_slice(grad, begin, end, strides, **_masks(op))]


def _pad_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    x, paddings = op.inputs
    rank = len(x.shape)
    if rank == 0:
        return [grad, None]
    first = ops.slice(paddings, _shape_const([0, 0], paddings.dtype), _shape_const([rank, 1], paddings.dtype))
    begin = ops.reshape(first, _shape_const([rank]))
    return [ops.slice(grad, begin, _shape_of(x, paddings.dtype)), None]


def _gather_grad(op: Any, grad: Any) -> list[Any]:
    """Scatter-add grad back into params' shape with UnsortedSegmentSum.

    The axis is the op's metadata input (host memory in every kernel); its
    value fixes the static shapes of the reshapes, so it is read here.
    """
    ops = _ops()
    params, indices, axis_t = op.inputs
    p_shape, i_shape = tuple(params.shape), tuple(indices.shape)
    axis = int(np.asarray(axis_t.numpy()).reshape(()))
    axis = axis + len(p_shape) if axis < 0 else axis
    batch_dims = int(op.get_attr("batch_dims"))
    batch_dims = batch_dims + len(i_shape) if batch_dims < 0 else batch_dims
    n_b = int(np.prod(p_shape[:batch_dims], dtype=np.int64))
    n_o = int(np.prod(p_shape[batch_dims:axis], dtype=np.int64))
    n_p = p_shape[axis]
    n_i = int(np.prod(p_shape[axis + 1 :], dtype=np.int64))
    # Indices of unknown dimensions (traced by ok.function): their count is -1 in the reshapes.
    n_j = -1 if None in i_shape[batch_dims:] else int(np.prod(i_shape[batch_dims:], dtype=np.int64))
    # grad is [B..., O..., J..., I...]; bring J next to B, then rows are (b, j) pairs.
    g = ops.reshape(grad, _shape_const([n_b, n_o, n_j, n_i]))
    if n_o > 1:
        g = ops.transpose(g, _shape_const([0, 2, 1, 3]))
    g = ops.reshape(g, _shape_const([-1 if n_j < 0 else n_b * n_j, n_o * n_i]))
    ids = ops.reshape(indices, _shape_const([n_b, n_j]))
    if n_b > 1:  # batch b's rows land in segments [b * P, (b + 1) * P)
        ids = ops.add(ids, (np.arange(n_b, dtype=indices.dtype.np) * n_p).reshape(n_b, 1))
    ids = ops.reshape(ids, _shape_const([-1 if n_j < 0 else n_b * n_j]))
    summed = ops.unsorted_segment_sum(g, ids, np.int64(n_b * n_p))
    out = ops.reshape(summed, _shape_const([n_b, n_p, n_o, n_i]))
    if n_o > 1:
        out = ops.transpose(out, _shape_const([0, 2, 1, 3]))
    return [ops.reshape(out, _shape_const(p_shape)), None, None]


def _unsorted_segment_sum_grad(op: Any, grad: Any) -> list[Any]:
    """Gather grad at the segment ids; rows of dropped (negative) ids get zero."""
    ops = _ops()
    data, ids = op.inputs[0], op.inputs[1]
    zero = np.zeros((), ids.dtype.np)
    gathered = ops.gather_v2(grad, ops.maximum(ids, zero), np.int32(0))
    extra = len(data.shape) - len(ids.shape)
    keep = ops.reshape(ops.greater_equal(ids, zero), _shape_const(tuple(ids.shape) + (1,) * extra))
    # A select, not a product with 0/1: a dropped row is +0.0 as in TensorFlow, never -0.0
    # or NaN from the (inf or NaN) gradient of segment 0 that it gathered in its place.
    return [ops.select_v2(keep, gathered, ops.zeros_like(gathered)), None, None]


def _tile_grad(op: Any, grad: Any) -> list[Any]:
    """Sum the tiled copies: grad reshaped to [m0, d0, m1, d1, ...], summed over the m's."""
    ops = _ops()
    x = op.inputs[0]
    shape = tuple(x.shape)
    if not shape:
        return [grad, None]
    if 0 in shape:
        return [ops.zeros_like(x), None]
    split = [v for g, d in zip(grad.shape, shape) for v in (g // d, d)]
    summed = ops.sum(ops.reshape(grad, _shape_const(split)), _shape_const(range(0, 2 * len(shape), 2)), keep_dims=False)
    return [ops.reshape(summed, _shape_const(shape)), None]


def _sum_all(grad: Any) -> Any:
    if not grad.shape:
        return grad
    return _ops().sum(grad, _shape_const(range(len(grad.shape))), keep_dims=False)


def _broadcast_to_grad(op: Any, grad: Any) -> list[Any]:
    shape = tuple(op.inputs[0].shape)
    return [_sum_all(grad) if not shape else unbroadcast(grad, op.inputs[0]), None]


def _fill_grad(op: Any, grad: Any) -> list[Any]:
    return [None, _sum_all(grad)]


def register_gradients() -> None:
    for name in ("Identity",):
        register_gradient(name)(_identity_grad)
    for name in ("Reshape", "ExpandDims", "Squeeze"):
        register_gradient(name)(_reshape_back)
    register_gradient("Transpose")(_transpose_grad)
    register_gradient("ConcatV2")(_concat_grad)
    register_gradient("Pack")(_pack_grad)
    register_gradient("Unpack")(_unpack_grad)
    register_gradient("Split")(_split_grad)
    register_gradient("Slice")(_slice_grad)
    register_gradient("StridedSlice")(_strided_slice_grad)
    register_gradient("StridedSliceGrad")(_strided_slice_grad_grad)
    register_gradient("Pad")(_pad_grad)
    register_gradient("GatherV2")(_gather_grad)
    register_gradient("UnsortedSegmentSum")(_unsorted_segment_sum_grad)
    register_gradient("Tile")(_tile_grad)
    register_gradient("BroadcastTo")(_broadcast_to_grad)
    register_gradient("Fill")(_fill_grad)
    for name in (
        "StopGradient", "Shape", "Size", "Rank", "ZerosLike", "OnesLike", "StringToNumber", "InvertPermutation",
        "ConcatOffset", "OneHot", "Range", "Where",
    ):
        not_differentiable(name)


_NAN_PAYLOAD = re.compile(r"[+-]?nan\([0-9A-Za-z_]*\)", re.IGNORECASE)


def _parse_number(text: str, floating: bool, unsigned: bool = False) -> int | float:
    """One string as TensorFlow's StringToNumber reads it (strtod / safe_strto*): ASCII
    only, surrounding whitespace allowed; floats also in hex ("0x1p3"), as inf/nan words
    and as C's "nan(payload)"; integers in decimal only, unsigned ones without a minus
    sign (safe_strtou32 refuses "-0").  Python's own syntax is wider (digit separators
    "1_000", non-ASCII digits), so those are refused first.  ValueError if unreadable."""
    body = text.strip()
    if floating and body.isascii() and _NAN_PAYLOAD.fullmatch(body):
        return float("nan")
    if not body.isascii() or "_" in body:
        raise ValueError(text)
    if not floating:
        if unsigned and body.startswith("-"):
            raise ValueError(text)
        return int(body)
    try:
        return float(body)
    except ValueError:
        if not body.lstrip("+-").lower().startswith("0x"):  # fromhex alone would read "abc" as 2748
            raise
        return float.fromhex(body)


def parse_numbers(strings: np.ndarray, out_type: DType) -> np.ndarray:
    """StringToNumber's semantics on host strings (str or bytes), shared by every
    backend's kernel: TensorFlow's syntax (see ``_parse_number``), an integer out of
    ``out_type``'s range rejected, a float out of range rounded to inf or 0 as strtof does."""
    out = np.empty(strings.shape, out_type.np)
    flat_in, flat_out = strings.reshape(-1), out.reshape(-1)
    for i, s in enumerate(flat_in):
        text = s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s)
        try:
            value = _parse_number(text, out_type.is_floating, out_type.is_unsigned)
        except ValueError:
            raise InvalidArgumentError(
                f"op 'StringToNumber': could not convert string {text!r} to {out_type.name}", op="StringToNumber"
            ) from None
        if out_type.is_integer and not (out_type.min <= value <= out_type.max):
            raise InvalidArgumentError(
                f"op 'StringToNumber': {text!r} is out of range for {out_type.name}", op="StringToNumber"
            )
        with np.errstate(over="ignore"):  # 1e39 as float32 is inf, as in TensorFlow
            flat_out[i] = value
    return out
