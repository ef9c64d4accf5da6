"""Specs, kernels, shape functions and gradients of the ops that move blocks of
elements between the spatial dimensions and the depth or batch dimension:
DepthToSpace, SpaceToDepth, SpaceToBatchND and BatchToSpaceND, following
TensorFlow's ``array_ops.cc``.

Each is a rearrangement (a Reshape, a Transpose and a Reshape, with a Pad or a
Slice for the ND pair), so one generic kernel composed of those ops serves every
backend, exactly, for every dtype.  Each op's gradient is its inverse.  Unlike
TensorFlow's CPU kernels, DepthToSpace and SpaceToDepth take NCHW on every backend
(TensorFlow has NCHW on GPUs only); NCHW_VECT_C holds qint8 data, which opkernel
does not have, and is refused.

Part of the array ops (``opkernel.ops.array_ops`` registers them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, UnimplementedError
from ..gradients import register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._array_common import _INDEX, _values, named_errors

_FORMATS = "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"

#: Past this, a dimension (or a tensor's element count) cannot be: sizes are int64 and bytes must fit too.
_MOST = 2**62


def _error(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


def _const(values: Any) -> np.ndarray:
    return np.asarray(list(values), np.int64)


def _fits(op: str, shape: list[int]) -> list[int]:
    """``shape``, an output's, after checking that its dimensions (and its size) are ones a tensor can have."""
    if any(d > _MOST for d in shape) or math.prod(shape) > _MOST:
        raise _error(op, f"the output's shape {shape} is larger than a tensor can be")
    return shape


# ---------------------------------------------------------------- DepthToSpace, SpaceToDepth


def _depth_layout(op: str, shape: list[int], data_format: str) -> tuple[int, int, int, int]:
    """(batch, height, width, depth) of a rank-4 input in ``data_format``, after the checks
    both ops share."""
    if len(shape) != 4:
        raise _error(op, f"input must have rank 4, got rank {len(shape)} (shape {shape})")
    if data_format == "NCHW_VECT_C":
        raise UnimplementedError(
            f"op {op!r}: data_format NCHW_VECT_C holds qint8 data, which opkernel does not have", op=op
        )
    b, *rest = shape
    h, w, c = rest if data_format == "NHWC" else (rest[1], rest[2], rest[0])
    return b, h, w, c


def _depth_to_space(input: Any, block_size: int, data_format: str) -> Any:
    b, h, w, c = _depth_layout("DepthToSpace", [int(d) for d in input.shape], data_format)
    bs = block_size
    if c % (bs * bs):
        raise _error("DepthToSpace", f"the input's depth {c} must be divisible by block_size * block_size = {bs * bs}")
    d, ops = c // (bs * bs), _ops()
    _fits("DepthToSpace", [b, h * bs, w * bs, d])
    if data_format == "NHWC":  # depth index (i * bs + j) * d + k goes to row h * bs + i, column w * bs + j
        x = ops.transpose(ops.reshape(input, _const([b, h, w, bs, bs, d])), _const([0, 1, 3, 2, 4, 5]))
        return ops.reshape(x, _const([b, h * bs, w * bs, d]))
    x = ops.transpose(ops.reshape(input, _const([b, bs, bs, d, h, w])), _const([0, 3, 4, 1, 5, 2]))
    return ops.reshape(x, _const([b, d, h * bs, w * bs]))


def _space_to_depth(input: Any, block_size: int, data_format: str) -> Any:
    b, h, w, c = _depth_layout("SpaceToDepth", [int(d) for d in input.shape], data_format)
    bs = block_size
    if h % bs or w % bs:
        raise _error("SpaceToDepth", f"the input's height {h} and width {w} must be divisible by block_size {bs}")
    ops = _ops()
    _fits("SpaceToDepth", [b, h // bs, w // bs, bs * bs * c])
    if data_format == "NHWC":
        x = ops.transpose(ops.reshape(input, _const([b, h // bs, bs, w // bs, bs, c])), _const([0, 1, 3, 2, 4, 5]))
        return ops.reshape(x, _const([b, h // bs, w // bs, bs * bs * c]))
    x = ops.transpose(ops.reshape(input, _const([b, c, h // bs, bs, w // bs, bs])), _const([0, 3, 5, 1, 2, 4]))
    return ops.reshape(x, _const([b, bs * bs * c, h // bs, w // bs]))


def _depth_shape(to_space: bool) -> Any:
    op = "DepthToSpace" if to_space else "SpaceToDepth"

    def shape_fn(c: InferenceContext) -> None:
        data = c.with_rank(c.input(0), 4)
        fmt, bs = c.get_attr("data_format"), int(c.get_attr("block_size"))
        if fmt == "NCHW_VECT_C":
            raise c.error(f"{op}: data_format NCHW_VECT_C holds qint8 data, which opkernel does not have")
        hi, wi, ci = (1, 2, 3) if fmt == "NHWC" else (2, 3, 1)
        dims = [c.value(c.dim(data, i)) for i in range(4)]
        out: list[Any] = list(dims)
        if to_space:
            depth = dims[ci]
            if depth is not None and depth % (bs * bs):
                raise c.error(f"the input's depth {depth} must be divisible by block_size * block_size = {bs * bs}")
            out[ci] = None if depth is None else depth // (bs * bs)
            for i in (hi, wi):
                out[i] = None if dims[i] is None else dims[i] * bs  # type: ignore[operator]
        else:
            for i in (hi, wi):
                if dims[i] is not None and dims[i] % bs:  # type: ignore[operator]
                    raise c.error(f"the input's height and width {dims[hi]}, {dims[wi]} must be divisible by block_size {bs}")
                out[i] = None if dims[i] is None else dims[i] // bs  # type: ignore[operator]
            out[ci] = None if dims[ci] is None else dims[ci] * bs * bs  # type: ignore[operator]
        c.set_output(0, c.make_shape([c.unknown_dim() if v is None else v for v in out]))

    return shape_fn


# ---------------------------------------------------------------- SpaceToBatchND, BatchToSpaceND


def _block_args(op: str, shape: list[int], block_shape: Any, pads: Any, what: str) -> tuple[list[int], np.ndarray]:
    """block_shape and paddings (or crops) on the host, checked as TensorFlow checks them."""
    blocks, amounts = np.asarray(block_shape.numpy()), np.asarray(pads.numpy())
    if blocks.ndim != 1:
        raise _error(op, f"block_shape must be a vector, got shape {list(blocks.shape)}")
    m = blocks.size
    if amounts.shape != (m, 2):
        raise _error(op, f"{what} must have shape [{m}, 2] (a pair per block dimension), got {list(amounts.shape)}")
    if len(shape) < 1 + m:
        raise _error(op, f"input must have rank >= {1 + m} (a batch and {m} block dimensions), got rank {len(shape)}")
    if (blocks < 1).any():
        raise _error(op, f"block_shape must be positive, got {blocks.tolist()}")
    if (amounts < 0).any():
        raise _error(op, f"{what} must be non-negative, got {amounts.tolist()}")
    if math.prod(int(v) for v in blocks) > _MOST:
        raise _error(op, f"the product of block_shape {blocks.tolist()} is larger than a tensor's size can be")
    return [int(v) for v in blocks], amounts.astype(np.int64)


def _space_to_batch_nd(input: Any, block_shape: Any, paddings: Any) -> Any:
    op = "SpaceToBatchND"
    shape = [int(d) for d in input.shape]
    blocks, pads = _block_args(op, shape, block_shape, paddings, "paddings")
    m, ops = len(blocks), _ops()
    padded = [shape[1 + i] + int(pads[i][0]) + int(pads[i][1]) for i in range(m)]  # Python ints: no wrapping
    _fits(op, [shape[0] * math.prod(blocks), *padded, *shape[1 + m:]])
    for i, (p, k) in enumerate(zip(padded, blocks)):
        if p % k:
            raise _error(op, f"padded dimension {1 + i} of size {p} is not divisible by block_shape[{i}] = {k}")
    rest = shape[1 + m:]
    x = ops.pad(input, np.concatenate([np.zeros((1, 2), np.int64), pads, np.zeros((len(rest), 2), np.int64)]))
    # One block dimension at a time, the last first: each moves its block offsets in front
    # of the batch, so the offsets end up in row-major order, most significant first, as
    # TensorFlow's batch index (offset * batch + b) has them.  A transpose of at most five
    # dimensions each (a backend may limit the rank of a transpose; M + 1 + M + rest may be 10).
    dims = [shape[0], *padded, math.prod(rest)]
    for i in reversed(range(m)):
        k = blocks[i]
        before, after = math.prod(dims[1:1 + i]), math.prod(dims[2 + i:])
        x = ops.reshape(x, _const([dims[0], before, dims[1 + i] // k, k, after]))
        x = ops.transpose(x, _const([3, 0, 1, 2, 4]))
        dims[0], dims[1 + i] = dims[0] * k, dims[1 + i] // k
    return ops.reshape(x, _const([*dims[:1 + m], *rest]))


def _batch_to_space_nd(input: Any, block_shape: Any, crops: Any) -> Any:
    op = "BatchToSpaceND"
    shape = [int(d) for d in input.shape]
    blocks, cuts = _block_args(op, shape, block_shape, crops, "crops")
    m, ops, total = len(blocks), _ops(), math.prod(blocks)
    if shape[0] % total:
        raise _error(op, f"the input's batch {shape[0]} is not divisible by the product of block_shape {blocks} ({total})")
    spatial, rest = shape[1:1 + m], shape[1 + m:]
    full = [s * k for s, k in zip(spatial, blocks)]
    _fits(op, [shape[0] // total, *full, *rest])
    for i, (f, (lo, hi)) in enumerate(zip(full, cuts.tolist())):  # Python ints: no wrapping
        if f - lo - hi < 0:
            raise _error(op, f"crops {[int(lo), int(hi)]} of dimension {1 + i} exceed its size {f}")
    # SpaceToBatchND's steps undone in reverse: the batch's most significant block offsets
    # go back into the first block dimension first.
    dims = [shape[0], *spatial, math.prod(rest)]
    x = input
    for i in range(m):
        k = blocks[i]
        before, after = math.prod(dims[1:1 + i]), math.prod(dims[2 + i:])
        x = ops.reshape(x, _const([k, dims[0] // k, before, dims[1 + i], after]))
        x = ops.transpose(x, _const([1, 2, 3, 0, 4]))
        dims[0], dims[1 + i] = dims[0] // k, dims[1 + i] * k
    x = ops.reshape(x, _const([*dims[:1 + m], *rest]))
    if not cuts.any():
        return x
    begin = [0, *[int(lo) for lo, _ in cuts.tolist()], *[0] * len(rest)]
    size = [dims[0], *[f - int(lo) - int(hi) for f, (lo, hi) in zip(full, cuts.tolist())], *rest]
    return ops.slice(x, _const(begin), _const(size))


def _batch_space_shape(to_batch: bool) -> Any:
    def shape_fn(c: InferenceContext) -> None:
        data = c.input(0)
        blocks_shape = c.with_rank(c.input(1), 1)
        pads_shape = c.with_rank(c.input(2), 2)
        c.merge(c.dim(pads_shape, 1), c.make_dim(2))
        m = c.value(c.merge(c.dim(blocks_shape, 0), c.dim(pads_shape, 0)))
        rank = data.rank
        if rank is None:
            c.set_output(0, c.unknown_shape())
            return
        if m is not None:
            data = c.with_rank_at_least(data, 1 + m)
        blocks, pads = _values(c, 1), _values(c, 2)
        if m is None or blocks is None or pads is None:
            c.set_output(0, c.unknown_shape_of_rank(rank))
            return
        if any(k < 1 for k in blocks):
            raise c.error(f"block_shape must be positive, got {blocks}")
        if any(p < 0 for p in pads):
            raise c.error(f"{'paddings' if to_batch else 'crops'} must be non-negative, got {pads}")
        dims = [c.value(c.dim(data, i)) for i in range(rank)]
        out: list[int | None] = list(dims)
        total = math.prod(blocks)
        if to_batch:
            out[0] = None if dims[0] is None else dims[0] * total
        else:
            if dims[0] is not None and dims[0] % total:
                raise c.error(f"the input's batch {dims[0]} is not divisible by the product of block_shape {blocks}")
            out[0] = None if dims[0] is None else dims[0] // total
        for i, k in enumerate(blocks):
            d, (lo, hi) = dims[1 + i], pads[2 * i:2 * i + 2]
            if d is None:
                out[1 + i] = None
            elif to_batch:
                if (d + lo + hi) % k:
                    raise c.error(f"padded dimension {1 + i} of size {d + lo + hi} is not divisible by block_shape[{i}] = {k}")
                out[1 + i] = (d + lo + hi) // k
            else:
                if d * k - lo - hi < 0:
                    raise c.error(f"crops {[lo, hi]} of dimension {1 + i} exceed its size {d * k}")
                out[1 + i] = d * k - lo - hi
        c.set_output(0, c.make_shape([c.unknown_dim() if v is None else v for v in out]))

    return shape_fn


# ---------------------------------------------------------------- registration


def register_generic_kernels() -> None:
    register_kernel("DepthToSpace", backend="*")(named_errors("DepthToSpace")(_depth_to_space))
    register_kernel("SpaceToDepth", backend="*")(named_errors("SpaceToDepth")(_space_to_depth))
    register_kernel("SpaceToBatchND", backend="*", host_memory=("block_shape", "paddings"))(
        named_errors("SpaceToBatchND")(_space_to_batch_nd))
    register_kernel("BatchToSpaceND", backend="*", host_memory=("block_shape", "crops"))(
        named_errors("BatchToSpaceND")(_batch_to_space_nd))


def register_ops() -> None:
    for name, to_space, what in (("DepthToSpace", True, "depth into blocks of space"),
                                 ("SpaceToDepth", False, "blocks of space into depth")):
        register_op(name).input("input: T").output("output: T").attr("T: type").attr("block_size: int >= 2").attr(
            _FORMATS
        ).set_shape_fn(_depth_shape(to_space)).doc(
            f"Rearranges {what}: each block_size x block_size block of the spatial dimensions "
            f"{'comes from' if to_space else 'becomes'} block_size * block_size consecutive depth values "
            "(row-major within the block).\n\n"
            "data_format: NHWC or NCHW (TensorFlow's CPU kernels take NHWC only); NCHW_VECT_C is refused."
        )
    register_op("SpaceToBatchND").input("input: T").input("block_shape: Tblock_shape").input(
        "paddings: Tpaddings"
    ).output("output: T").attr("T: type").attr(f"Tblock_shape: {_INDEX}").attr(f"Tpaddings: {_INDEX}").set_shape_fn(
        _batch_space_shape(True)
    ).doc(
        "Pads the M spatial dimensions after the batch and moves blocks of block_shape of them into the batch: "
        "the output's batch is block offset * batch + b.\n\n"
        "block_shape: M positive sizes.\npaddings: An [M, 2] tensor: how many zeros to add before and after each "
        "spatial dimension; each padded size is divisible by its block size."
    )
    register_op("BatchToSpaceND").input("input: T").input("block_shape: Tblock_shape").input("crops: Tcrops").output(
        "output: T"
    ).attr("T: type").attr(f"Tblock_shape: {_INDEX}").attr(f"Tcrops: {_INDEX}").set_shape_fn(
        _batch_space_shape(False)
    ).doc(
        "The inverse of SpaceToBatchND: moves blocks of the batch back into the M spatial dimensions after it, "
        "then crops them.\n\n"
        "block_shape: M positive sizes; their product divides the batch.\ncrops: An [M, 2] tensor: how many "
        "elements to remove from the start and end of each spatial dimension."
    )


def _depth_to_space_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().space_to_depth(grad, block_size=op.get_attr("block_size"), data_format=op.get_attr("data_format"))]


def _space_to_depth_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().depth_to_space(grad, block_size=op.get_attr("block_size"), data_format=op.get_attr("data_format"))]


def _space_to_batch_nd_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().batch_to_space_nd(grad, op.inputs[1], op.inputs[2]), None, None]


def _batch_to_space_nd_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().space_to_batch_nd(grad, op.inputs[1], op.inputs[2]), None, None]


def register_gradients() -> None:
    register_gradient("DepthToSpace")(_depth_to_space_grad)
    register_gradient("SpaceToDepth")(_space_to_depth_grad)
    register_gradient("SpaceToBatchND")(_space_to_batch_nd_grad)
    register_gradient("BatchToSpaceND")(_batch_to_space_nd_grad)
