"""Specs, shape functions and gradients of the ops that rearrange a tensor's shape:
Identity, StopGradient, Reshape, Shape, Size, Rank, Transpose, InvertPermutation,
ExpandDims, Squeeze, ConcatV2, ConcatOffset, Pack, Unpack, Split, Tile and
BroadcastTo, following TensorFlow's ``array_ops.cc``.

Part of the array ops (``opkernel.ops.array_ops`` registers them and re-exports
the public names).
"""

from __future__ import annotations

import math

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import shape_fns
from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import Dimension, InferenceContext, as_shape
from ..tensor import Tensor, ops_module as _ops
from ._array_common import _INDEX, _axis, _scalar, _shape_const, _shape_of, _sum_all, _values, named_errors
from ._grad_util import unbroadcast

__all__ = ["register_gradients", "register_ops", "reshape_sizes"]


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
    dims = [int(v) for v in sizes]
    if dims.count(-1) > 1 or min(dims, default=0) < -1:
        raise error(f"shape must be a vector of sizes >= 0 with at most one -1, got {dims}")
    # Python ints (math.prod: exact, and 40x faster than np.prod on a few sizes)
    n_in = [int(v) for v in n_in]
    n = math.prod(n_in)
    if -1 in dims:
        has_zero = 0 in dims
        known = math.prod(v for v in dims if v > 0)
        counted = math.prod(v for v in n_in if v > 0 or not has_zero)
        if not (has_zero and 0 in n_in) and counted % known:
            raise error(f"cannot reshape a tensor with {n} elements to shape {dims}")
        dims[dims.index(-1)] = counted // known
    if math.prod(dims) != n:
        raise error(f"cannot reshape a tensor with {n} elements to shape {list(sizes)}")
    return dims


def _shape_shape(c: InferenceContext) -> None:
    c.set_output(0, c.vector(c.rank(c.input(0))))



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


def _split_v_shape(c: InferenceContext) -> None:
    """Each piece's shape: the input's with split_dim's size from size_splits (-1 for the rest),
    checked as TensorFlow's kernel checks them once the sizes and the dimension are known."""
    data, num = c.input(0), c.num_outputs()
    c.with_rank(c.input(1), 1)
    c.merge(c.input(1), c.vector(num))
    axis = _scalar(c, 2)
    sizes = _values(c, 1)
    if axis is None or data.dims is None:
        for i in range(num):
            c.set_output(i, c.unknown_shape() if data.rank is None else c.unknown_shape_of_rank(data.rank))
        return
    axis = _axis(c, axis, len(data.dims), "split_dim")
    if sizes is None:
        for i in range(num):
            c.set_output(i, c.replace_dim(data, axis, c.unknown_dim()))
        return
    for i, n in enumerate(split_v_sizes(sizes, c.value(c.dim(data, axis)), lambda m: c.error(m))):
        c.set_output(i, c.replace_dim(data, axis, n))


def split_v_sizes(sizes: list[int], total: int | None, error: Callable[[str], Exception]) -> list[int | None]:
    """SplitV's piece sizes: ``sizes`` with its one -1 resolved, checked against the size
    ``total`` of the dimension split (None: unknown, so the -1 stays unknown)."""
    if len(sizes) == 1:
        if total is not None and sizes[0] != total:
            raise error(f"with one output, its size must be the input's along split_dim ({total}), got {sizes[0]}")
        return [total]
    fill = [i for i, n in enumerate(sizes) if n == -1]
    if len(fill) > 1:
        raise error(f"size_splits may hold one -1 (the rest of the dimension), got {sizes}")
    bad = [(i, n) for i, n in enumerate(sizes) if n < -1 or (n < 0 and i not in fill)]
    if bad:
        raise error(f"size_splits[{bad[0][0]}] must be >= 0 (or -1), got {bad[0][1]}")
    known = sum(n for n in sizes if n >= 0)
    out: list[int | None] = list(sizes)
    if total is not None:
        if fill and known > total or not fill and known != total:
            what = "at most" if fill else "exactly"
            raise error(f"size_splits {sizes} must add up to {what} the input's size along split_dim ({total})")
        if fill:
            out[fill[0]] = total - known
    elif fill:
        out[fill[0]] = None
    return out


def _broadcast_args_shape(c: InferenceContext) -> None:
    a, b = c.with_rank(c.input(0), 1), c.with_rank(c.input(1), 1)
    na, nb = c.value(c.dim(a, 0)), c.value(c.dim(b, 0))
    c.set_output(0, c.vector(max(na, nb) if na is not None and nb is not None else c.unknown_dim()))


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


def _invert_permutation_shape(c: InferenceContext) -> None:
    c.set_output(0, c.with_rank(c.input(0), 1))


def _concat_offset_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    for i in range(1, c.num_inputs()):
        c.set_output(i - 1, c.with_rank(c.input(i), 1))


# ---------------------------------------------------------------- specs


def _shape_text(shape: Any) -> str:
    dims = shape._values()
    return "unknown" if dims is None else "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _ensure_shape_shape(c: InferenceContext) -> None:
    c.set_output(0, c.merge(c.input(0), as_shape(c.get_attr("shape"))))


def _ensure_shape(input: Any, *, shape: Any) -> Any:
    """EnsureShape's kernel (every backend): the input, after its shape is checked."""
    want = as_shape(shape)
    if not want.is_compatible_with(tuple(input.shape)):
        raise InvalidArgumentError(
            f"op 'EnsureShape': the input has shape {list(input.shape)}, which is not compatible with the expected "
            f"shape {_shape_text(want)}", op="EnsureShape",
        )
    return _ops().identity(input)


def _split_v(value: Any, size_splits: Any, split_dim: Any, num_split: int) -> list[Any]:
    """SplitV's kernel (every backend): Slices of the input, after TensorFlow's checks."""
    def bad(message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"op 'SplitV': {message}", op="SplitV")

    sizes, dim = np.asarray(size_splits.numpy()), np.asarray(split_dim.numpy())
    if sizes.ndim != 1 or sizes.size != num_split:
        raise bad(f"size_splits must be a vector of num_split={num_split} sizes, got shape {list(sizes.shape)}")
    if dim.ndim:
        raise bad(f"split_dim must be a scalar, got shape {list(dim.shape)}")
    shape = [int(d) for d in value.shape]
    rank = len(shape)
    if not -rank <= int(dim) < rank:
        raise bad(f"split_dim {int(dim)} is out of range for a tensor of rank {rank}; expected a value in [{-rank}, {rank})")
    axis = int(dim) % rank
    pieces = split_v_sizes([int(n) for n in sizes], shape[axis], bad)
    ops, out, start = _ops(), [], 0
    for n in pieces:
        assert n is not None  # the dimension is known, so every size is
        begin, size = [0] * rank, list(shape)
        begin[axis], size[axis] = start, n
        out.append(ops.slice(value, np.asarray(begin, np.int64), np.asarray(size, np.int64)))
        start += n
    return out


def _broadcast_args(s0: Any, s1: Any) -> Any:
    """BroadcastArgs' kernel (every backend): numpy's rule on two shape vectors, aligned at
    the end: equal sizes stay, a 1 takes the other's size, any other pair is an error."""
    a, b = np.asarray(s0.numpy()), np.asarray(s1.numpy())
    for k, v in enumerate((a, b)):
        if v.ndim != 1:
            raise InvalidArgumentError(
                f"op 'BroadcastArgs': s{k} must be a vector (a shape), got shape {list(v.shape)}", op="BroadcastArgs"
            )
    n = max(a.size, b.size)
    x, y = [1] * (n - a.size) + a.tolist(), [1] * (n - b.size) + b.tolist()
    out = []
    for p, q in zip(x, y):
        if p != q and p != 1 and q != 1:
            raise InvalidArgumentError(
                f"op 'BroadcastArgs': incompatible shapes: {a.tolist()} vs. {b.tolist()}", op="BroadcastArgs"
            )
        out.append(q if p == 1 else p)
    return Tensor(s0._backend.from_numpy(np.asarray(out, a.dtype)), s0.dtype, s0._backend)


def register_generic_kernels() -> None:
    register_kernel("EnsureShape", backend="*")(_ensure_shape)
    register_kernel("SplitV", backend="*", host_memory=("size_splits", "split_dim"))(named_errors("SplitV")(_split_v))
    register_kernel("BroadcastArgs", backend="*", host_memory=("s0", "s1", "r0"))(_broadcast_args)


def register_ops() -> None:
    register_op("EnsureShape").input("input: T").output("output: T").attr("shape: shape").attr("T: type").set_shape_fn(
        _ensure_shape_shape
    ).doc("Returns the input after checking that its shape is compatible with shape (unknown dimensions match any); "
          "shape inference takes the known dimensions from shape.")
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
    register_op("SplitV").input("value: T").input("size_splits: Tlen").input("split_dim: int32").output(
        "output: num_split * T"
    ).attr("num_split: int >= 1").attr("T: type").attr("Tlen: {int8, int32, int64} = DT_INT64").set_shape_fn(
        _split_v_shape
    ).doc(
        "Splits a tensor into num_split pieces along dimension split_dim, of the sizes size_splits gives.\n\n"
        "size_splits: The size of each piece (num_split values); one may be -1, the rest of the dimension.\n"
        "split_dim: The dimension to split, in [-rank, rank)."
    )
    register_op("BroadcastArgs").input("s0: T").input("s1: T").output("r0: T").attr(
        "T: {int32, int64} = DT_INT32"
    ).set_shape_fn(_broadcast_args_shape).doc(
        "Returns the shape that tensors of shapes s0 and s1 broadcast to, with numpy's broadcasting rules."
    )
    register_op("Tile").input("input: T").input("multiples: Tmultiples").output("output: T").attr("T: type").attr(
        f"Tmultiples: {_INDEX}"
    ).set_shape_fn(_tile_shape).doc("Repeats the input multiples[i] times along dimension i.")
    register_op("BroadcastTo").input("input: T").input("shape: Tidx").output("output: T").attr("T: type").attr(
        f"Tidx: {_INDEX}"
    ).set_shape_fn(_broadcast_to_shape).doc("Broadcasts the input to shape, with numpy's broadcasting rules.")


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


def _split_v_grad(op: Any, *grads: Any) -> list[Any]:
    if len(grads) == 1:
        return [grads[0], None, None]
    return [_ops().concat_v2(list(grads), op.inputs[2]), None, None]



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


def _broadcast_to_grad(op: Any, grad: Any) -> list[Any]:
    shape = tuple(op.inputs[0].shape)
    return [_sum_all(grad) if not shape else unbroadcast(grad, op.inputs[0]), None]


def register_gradients() -> None:
    for name in ("Identity", "EnsureShape"):
        register_gradient(name)(_identity_grad)
    for name in ("Reshape", "ExpandDims", "Squeeze"):
        register_gradient(name)(_reshape_back)
    register_gradient("Transpose")(_transpose_grad)
    register_gradient("ConcatV2")(_concat_grad)
    register_gradient("Pack")(_pack_grad)
    register_gradient("Unpack")(_unpack_grad)
    register_gradient("Split")(_split_grad)
    register_gradient("SplitV")(_split_v_grad)
    register_gradient("Tile")(_tile_grad)
    register_gradient("BroadcastTo")(_broadcast_to_grad)
    for name in ("StopGradient", "Shape", "Size", "Rank", "InvertPermutation", "ConcatOffset", "BroadcastArgs"):
        not_differentiable(name)
