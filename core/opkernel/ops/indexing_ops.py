"""Specs, shape functions and gradients of the ops that select, pad and scatter
elements: Pad, Slice, StridedSlice, StridedSliceGrad, GatherV2, UnsortedSegmentSum
and Where, following TensorFlow's ``array_ops.cc``.  ``strided_slice_plan`` holds
the mask logic of StridedSlice once, for the shape function, the kernels and the
gradient.

Part of the array ops (``opkernel.ops.array_ops`` registers them and re-exports
the public names).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import shape_fns
from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._array_common import _INDEX, _axis, _scalar, _shape_const, _shape_of, _values, errors_as, named_errors

__all__ = ["StridedSlicePlan", "register_gradients", "register_ops", "strided_slice_plan"]

_SLICE_MASKS = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")


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


def _where_shape(c: InferenceContext) -> None:
    c.set_output(0, c.matrix(None, c.rank(c.input(0))))


# ---------------------------------------------------------------- specs


def _strided_slice_attrs(builder: Any, index: str = "{int32, int64}") -> Any:
    builder = builder.output("output: T").attr("T: type").attr(f"Index: {index}")
    for m in _SLICE_MASKS:
        builder = builder.attr(f"{m}: int = 0")
    return builder


def _pad_v2_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(2), 0)
    _pad_shape(c)


#: PadV2's dtypes: what Pad and SelectV2 compute with on every backend.
PAD_V2_TYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                "bfloat16", "float32", "float64", "complex64", "complex128"]


def _pad_v2(input: Any, paddings: Any, constant_values: Any) -> Any:
    """PadV2's kernel (every backend): Pad's result where the input is, constant_values in
    the border (a select, so an infinite or NaN constant is exact)."""
    if tuple(constant_values.shape):
        raise InvalidArgumentError(
            f"op 'PadV2': constant_values must be a scalar, got shape {list(constant_values.shape)}", op="PadV2"
        )
    ops = _ops()
    with errors_as("PadV2"):
        padded = ops.pad(input, paddings)
        inside = ops.pad(ops.fill(ops.shape(input), True), paddings)
        return ops.select_v2(inside, padded, constant_values)


def _diag(diagonal: Any) -> Any:
    """Diag's kernel (every backend): the n values as an [n, 1] column padded with n zeros on
    the right, read as a flat vector whose first n * n values are the diagonal matrix (a value
    every n + 1 places); no arithmetic, so a NaN or infinity stays alone on its diagonal."""
    shape = [int(d) for d in diagonal.shape]
    if not shape:
        raise InvalidArgumentError("op 'Diag': diagonal must have rank >= 1, got a scalar", op="Diag")
    n, ops = math.prod(shape), _ops()
    column = ops.reshape(diagonal, np.asarray([n, 1], np.int64))
    rows = ops.pad(column, np.asarray([[0, 0], [0, n]], np.int64))
    flat = ops.slice(ops.reshape(rows, np.asarray([n * (n + 1)], np.int64)), np.asarray([0], np.int64),
                     np.asarray([n * n], np.int64))
    return ops.reshape(flat, np.asarray(shape + shape, np.int64))


def _diag_shape(c: InferenceContext) -> None:
    data = c.with_rank_at_least(c.input(0), 1)
    if data.dims is None:
        c.set_output(0, c.unknown_shape())
        return
    c.set_output(0, c.make_shape(list(data.dims) * 2))


def register_generic_kernels() -> None:
    register_kernel("PadV2", backend="*", type_constraints={"T": PAD_V2_TYPES})(_pad_v2)
    register_kernel("Diag", backend="*")(named_errors("Diag")(_diag))


def register_ops() -> None:
    register_op("Diag").input("diagonal: T").output("output: T").attr(
        "T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"
    ).set_shape_fn(_diag_shape).doc(
        "Returns a tensor with the given diagonal values and zeros elsewhere: for a diagonal of shape "
        "[D1, ..., Dk], an output of shape [D1, ..., Dk, D1, ..., Dk] with output[i1..ik, i1..ik] = diagonal[i1..ik]."
    )
    register_op("PadV2").input("input: T").input("paddings: Tpaddings").input("constant_values: T").output(
        "output: T"
    ).attr("T: type").attr(f"Tpaddings: {_INDEX}").set_shape_fn(_pad_v2_shape).doc(
        "Pads a tensor with constant_values (a scalar).\n\npaddings: An [rank, 2] tensor: how many values to add "
        "before and after each dimension."
    )
    register_op("Pad").input("input: T").input("paddings: Tpaddings").output("output: T").attr("T: type").attr(
        f"Tpaddings: {_INDEX}"
    ).set_shape_fn(_pad_shape).doc(
        "Pads a tensor with zeros.\n\npaddings: An [rank, 2] tensor: how many values to add before and after each dimension."
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
    register_op("Where").input("input: T").attr("T: {numbertype, bool} = DT_BOOL").output("index: int64").set_shape_fn(
        _where_shape
    ).doc("The coordinates of the true (non-zero) elements of input, as a [num_true, rank] int64 matrix.")


# ---------------------------------------------------------------- gradients


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
    x, paddings = op.inputs[0], op.inputs[1]  # PadV2's third input, constant_values, gets none
    rank = len(x.shape)
    if rank == 0:
        return [grad, None]
    first = ops.slice(paddings, _shape_const([0, 0], paddings.dtype), _shape_const([rank, 1], paddings.dtype))
    begin = ops.reshape(first, _shape_const([rank]))
    return [ops.slice(grad, begin, _shape_of(x, paddings.dtype)), None]


def _pad_v2_grad(op: Any, grad: Any) -> list[Any]:
    """The input's part of the gradient, as Pad's; none for constant_values (TensorFlow's)."""
    return [*_pad_grad(op, grad), None]


def _diag_grad(op: Any, grad: Any) -> list[Any]:
    """The gradient's diagonal (TensorFlow's DiagPart of it): the flat [n * n] gradient at
    the positions i * (n + 1)."""
    ops, x = _ops(), op.inputs[0]
    n = ops.size(x, out_type="int64")  # a tensor, so a trace with unknown dimensions works too
    diagonal = ops.range(np.int64(0), ops.mul(n, n), ops.add(n, np.int64(1)))  # flat positions i * (n + 1)
    picked = ops.gather_v2(ops.reshape(grad, np.asarray([-1], np.int64)), diagonal, np.int32(0))
    return [ops.reshape(picked, _shape_of(x))]


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



def register_gradients() -> None:
    register_gradient("Slice")(_slice_grad)
    register_gradient("StridedSlice")(_strided_slice_grad)
    register_gradient("StridedSliceGrad")(_strided_slice_grad_grad)
    register_gradient("Pad")(_pad_grad)
    register_gradient("PadV2")(_pad_v2_grad)
    register_gradient("Diag")(_diag_grad)
    register_gradient("GatherV2")(_gather_grad)
    register_gradient("UnsortedSegmentSum")(_unsorted_segment_sum_grad)
    not_differentiable("Where")
