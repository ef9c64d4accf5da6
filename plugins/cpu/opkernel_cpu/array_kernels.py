"""CPU kernels of the shape and data-movement ops: one table in ``register_all``.

Integer inputs that hold shapes, axes, paddings or slice specs are host-memory
arguments: they arrive as numpy arrays.  Results may be views of the input
(numpy semantics); no kernel writes into an input.  A view of a Variable stays a
value: the Variable copies itself before an in-place update while the view is alive
(``Variable._unshare``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import opkernel as ok
from opkernel.errors import InvalidArgumentError
from opkernel.ops.array_ops import parse_numbers, range_size, reshape_sizes, strided_slice_plan
from opkernel.ops.nd_ops import NdPlan, nd_plan, top_k_count
from opkernel.ops.scan_ops import (
    band, band_mask, linspace_count, linspace_values, mirror_pads, mirror_source, reverse_axes, scan_axis,
)

from . import sharding
from .xp import xp_of


def _error(op: str) -> Callable[[str], InvalidArgumentError]:
    return lambda message: InvalidArgumentError(f"op '{op}': {message}", op=op)


def _ints(values: np.ndarray, op: str, name: str, vector: bool = True) -> list[int]:
    arr = np.asarray(values)
    if vector and arr.ndim != 1:
        raise _error(op)(f"'{name}' must be a vector, got shape {list(arr.shape)}")
    return arr.reshape(-1).tolist()


def _scalar(value: np.ndarray, op: str, name: str) -> int:
    arr = np.asarray(value)
    if arr.size != 1:
        raise _error(op)(f"'{name}' must be a scalar, got shape {list(arr.shape)}")
    return int(arr.reshape(()))


def _axis(axis: int, rank: int, op: str, name: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise _error(op)(f"{name} {axis} is out of range for a tensor of rank {rank}; expected a value in [{-rank}, {rank})")
    return axis % rank if rank else axis


# ---------------------------------------------------------------- shapes


def reshape(tensor: np.ndarray, shape: np.ndarray, **attrs: Any) -> np.ndarray:
    dims = _ints(shape, "Reshape", "shape", vector=False)
    if shape.ndim > 1:
        raise _error("Reshape")(f"shape must be a vector of sizes >= 0 with at most one -1, got {dims}")
    return tensor.reshape(reshape_sizes(tensor.shape, dims, _error("Reshape")))


def shape(input: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return np.array(input.shape, dtype=out_type.np)


def size(input: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return np.array(input.size, dtype=out_type.np)


def rank(input: np.ndarray, **attrs: Any) -> np.ndarray:
    return np.array(input.ndim, dtype=np.int32)


def transpose(x: np.ndarray, perm: np.ndarray, **attrs: Any) -> np.ndarray:
    # TensorFlow counts a negative entry from the end, as an axis: perm [-1, 0, 1] is [2, 0, 1].
    given = _ints(perm, "Transpose", "perm")
    p = [d + x.ndim if -x.ndim <= d < 0 else d for d in given]
    if sorted(p) != list(range(x.ndim)):
        raise _error("Transpose")(f"perm {given} is not a permutation of the {x.ndim} dimensions of the input {list(x.shape)}")
    return xp_of(x).transpose(x, p)  # type: ignore[no-any-return]


def invert_permutation(x: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    xp = xp_of(x)
    p = xp.asarray(x)
    if p.ndim != 1 or not xp.array_equal(xp.sort(p), xp.arange(p.size)):
        raise _error("InvertPermutation")(f"x must be a permutation of 0..{p.size - 1}, got {p.tolist()}")
    out = xp.empty(p.size, dtype=T.np)
    out[p] = xp.arange(p.size, dtype=T.np)
    return out  # type: ignore[no-any-return]


def expand_dims(input: np.ndarray, dim: np.ndarray, **attrs: Any) -> np.ndarray:
    if np.size(dim) != 1:
        raise _error("ExpandDims")(f"'dim' must hold a single value, got {np.asarray(dim).tolist()}")
    axis = _axis(int(np.asarray(dim).reshape(())), input.ndim + 1, "ExpandDims", "dim")
    return xp_of(input).expand_dims(input, axis)  # type: ignore[no-any-return]


def squeeze(input: np.ndarray, squeeze_dims: list[int], **attrs: Any) -> np.ndarray:
    axes = {_axis(int(a), input.ndim, "Squeeze", "squeeze_dims entry") for a in squeeze_dims}
    for a in axes:
        if input.shape[a] != 1:
            raise _error("Squeeze")(f"cannot squeeze dimension {a} of shape {list(input.shape)}: its size is not 1")
    if not squeeze_dims:
        axes = {k for k, d in enumerate(input.shape) if d == 1}
    return xp_of(input).squeeze(input, axis=tuple(sorted(axes)))  # type: ignore[no-any-return]


def zeros(xp: Any, shape: Any, dtype: Any) -> Any:
    """An array of ``dtype``'s zero: ``b""`` for strings (object arrays), as TensorFlow's
    zero string; numpy's zeros of an object dtype hold the integer 0."""
    if np.dtype(dtype).kind == "O":
        return np.full(shape, b"", dtype=object)
    return xp.zeros(shape, dtype)


def zeros_like(x: np.ndarray, **attrs: Any) -> np.ndarray:
    return zeros(xp_of(x), x.shape, x.dtype)  # type: ignore[no-any-return]


def pad(input: np.ndarray, paddings: np.ndarray, **attrs: Any) -> np.ndarray:
    pads = np.asarray(paddings)
    if pads.shape != (input.ndim, 2):
        raise _error("Pad")(f"paddings must have shape [{input.ndim}, 2] for an input of rank {input.ndim}, got {list(pads.shape)}")
    if (pads < 0).any():
        raise _error("Pad")(f"paddings must be non-negative, got {pads.tolist()}")
    if input.ndim == 0:  # numpy's pad rejects an empty pad_width: a 0-d input pads to a copy of itself
        return xp_of(input).array(input, copy=True)  # type: ignore[no-any-return]
    if input.dtype.kind == "O":  # strings pad with the empty string, TensorFlow's zero
        return np.pad(input, pads.tolist(), mode="constant", constant_values=b"")
    return xp_of(input).pad(input, pads.tolist(), mode="constant")  # type: ignore[no-any-return]


def broadcast_to(input: np.ndarray, shape: np.ndarray, **attrs: Any) -> np.ndarray:
    dims = _ints(shape, "BroadcastTo", "shape")
    try:
        if input.ndim > len(dims):  # assignment would drop leading ones; broadcasting never does
            raise ValueError
        xp = xp_of(input)
        out = xp.empty(dims, input.dtype)
        out[...] = input  # one broadcasting copy (np.broadcast_to's view, then a copy, costs more)
        return out  # type: ignore[no-any-return]
    except ValueError as e:
        raise _error("BroadcastTo")(f"cannot broadcast a tensor of shape {list(input.shape)} to shape {dims}") from e


def tile(input: np.ndarray, multiples: np.ndarray, **attrs: Any) -> np.ndarray:
    m = _ints(multiples, "Tile", "multiples")
    if len(m) != input.ndim or any(v < 0 for v in m):
        raise _error("Tile")(
            f"multiples must hold {input.ndim} non-negative values for an input of shape {list(input.shape)}, got {m}"
        )
    return xp_of(input).tile(input, m) if m else input.copy()


def _legacy_scalar(value: Any) -> bool:
    """A scalar, or a 1-element vector: TensorFlow's Fill takes either (IsLegacyScalar)."""
    return np.ndim(value) == 0 or np.shape(value) == (1,)


def fill(dims: np.ndarray, value: np.ndarray, **attrs: Any) -> np.ndarray:
    d = _ints(dims, "Fill", "dims")
    if any(v < 0 for v in d):
        raise _error("Fill")(f"dims must be non-negative, got {d}")
    if not _legacy_scalar(value):
        raise _error("Fill")(f"value must be a scalar (or a 1-element vector), got shape {list(np.shape(value))}")
    return xp_of(value).full(d, value.reshape(()), dtype=value.dtype)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- joining and splitting


def concat_v2(values: list[np.ndarray], axis: np.ndarray, **attrs: Any) -> np.ndarray:
    first = values[0]
    for k, v in enumerate(values[1:], 1):
        if v.ndim != first.ndim:
            raise _error("ConcatV2")(
                f"all inputs must have the same rank, got values[0] of shape {list(first.shape)} "
                f"and values[{k}] of shape {list(v.shape)}"
            )
    if first.ndim == 0:
        raise _error("ConcatV2")("cannot concatenate scalars; use Pack")
    a = _axis(_scalar(axis, "ConcatV2", "axis"), first.ndim, "ConcatV2")
    for k, v in enumerate(values[1:], 1):
        if v.shape[:a] + v.shape[a + 1 :] != first.shape[:a] + first.shape[a + 1 :]:
            raise _error("ConcatV2")(
                f"dimensions other than axis {a} must match, got values[0] of shape {list(first.shape)} "
                f"and values[{k}] of shape {list(v.shape)}"
            )
    return xp_of(*values).concatenate(values, axis=a)  # type: ignore[no-any-return]


def concat_offset(concat_dim: np.ndarray, shape: list[np.ndarray], shape_type: ok.DType, **attrs: Any) -> list[np.ndarray]:
    shapes = [np.asarray(s) for s in shape]
    first = shapes[0]
    a = _axis(_scalar(concat_dim, "ConcatOffset", "concat_dim"), first.size, "ConcatOffset", "concat_dim")
    mask = np.arange(first.size) != a
    offsets, at = [], 0
    for k, s in enumerate(shapes):
        if s.shape != first.shape or not np.array_equal(s[mask], first[mask]):
            raise _error("ConcatOffset")(f"shape[{k}] = {s.tolist()} does not match shape[0] = {first.tolist()} outside concat_dim {a}")
        off = np.zeros(first.size, dtype=shape_type.np)
        off[a] = at
        at += int(s[a])
        offsets.append(off)
    return offsets


def pack(values: list[np.ndarray], axis: int, **attrs: Any) -> np.ndarray:
    first = values[0]
    for k, v in enumerate(values[1:], 1):
        if v.shape != first.shape:
            raise _error("Pack")(
                f"all inputs must have the same shape, got values[0] of shape {list(first.shape)} "
                f"and values[{k}] of shape {list(v.shape)}"
            )
    return xp_of(*values).stack(values, axis=_axis(axis, first.ndim + 1, "Pack"))  # type: ignore[no-any-return]


def unpack(value: np.ndarray, num: int, axis: int, **attrs: Any) -> list[np.ndarray]:
    a = _axis(axis, value.ndim, "Unpack")
    if value.shape[a] != num:
        raise _error("Unpack")(f"num={num} must equal dimension {a} of the input shape {list(value.shape)}")
    moved = xp_of(value).moveaxis(value, a, 0)
    return [moved[k] for k in range(num)]


def split(split_dim: np.ndarray, value: np.ndarray, num_split: int, **attrs: Any) -> list[np.ndarray]:
    a = _axis(_scalar(split_dim, "Split", "split_dim"), value.ndim, "Split", "split_dim")
    if value.shape[a] % num_split:
        raise _error("Split")(
            f"num_split={num_split} does not evenly divide dimension {a} of the input shape {list(value.shape)}"
        )
    return xp_of(value).split(value, num_split, axis=a)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- slicing and gathering


def slice_(input: np.ndarray, begin: np.ndarray, size: np.ndarray, **attrs: Any) -> np.ndarray:
    b, s = _ints(begin, "Slice", "begin"), _ints(size, "Slice", "size")
    if len(b) != input.ndim or len(s) != input.ndim:
        raise _error("Slice")(
            f"begin and size must have {input.ndim} entries for an input of shape {list(input.shape)}, got {b} and {s}"
        )
    index = []
    for k, (lo, n, d) in enumerate(zip(b, s, input.shape)):
        n = d - lo if n == -1 else n
        if not (0 <= lo <= d and 0 <= n <= d - lo):
            raise _error("Slice")(
                f"expected begin[{k}] in [0, {d}] and size[{k}] in [0, {d} - begin[{k}]] (or -1) for dimension {k} "
                f"of shape {list(input.shape)}, got begin {b} and size {s}"
            )
        index.append(slice(lo, lo + n))
    return input[tuple(index)]


def _plan(op: str, dims: tuple[int, ...], begin: np.ndarray, end: np.ndarray, strides: np.ndarray, attrs: dict[str, Any]) -> Any:
    b, e, s = _ints(begin, op, "begin"), _ints(end, op, "end"), _ints(strides, op, "strides")
    return strided_slice_plan(dims, b, e, s, len(s), attrs, _error(op))


def strided_slice(input: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, **attrs: Any) -> np.ndarray:
    plan = _plan("StridedSlice", input.shape, begin, end, strides, attrs)
    return input[plan.numpy_index()].reshape(plan.final_shape)  # type: ignore[no-any-return]


def strided_slice_grad(
    shape: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, dy: np.ndarray, **attrs: Any
) -> np.ndarray:
    dims = _ints(shape, "StridedSliceGrad", "shape")
    plan = _plan("StridedSliceGrad", tuple(dims), begin, end, strides, attrs)
    if tuple(dy.shape) != tuple(plan.final_shape):
        raise _error("StridedSliceGrad")(f"dy must have shape {list(plan.final_shape)}, got {list(dy.shape)}")
    out = zeros(xp_of(dy), dims, dy.dtype)
    index = plan.numpy_index()
    value = dy.reshape(np.shape(out[index]))  # np.shape: one element of an object array is a bare bytes
    out[index] = value[()] if value.ndim == 0 else value
    return out  # type: ignore[no-any-return]


def _check_indices(indices: np.ndarray, limit: int, op: str) -> None:
    bad = (indices < 0) | (indices >= limit)
    if bad.any():
        where = tuple(int(v) for v in xp_of(indices).argwhere(bad)[0])
        raise _error(op)(f"indices{list(where)} = {int(indices[where])} is not in [0, {limit})")


def gather_v2(params: np.ndarray, indices: np.ndarray, axis: np.ndarray, batch_dims: int, **attrs: Any) -> np.ndarray:
    if params.ndim == 0:
        raise _error("GatherV2")("params must be at least a vector")
    a = _axis(_scalar(axis, "GatherV2", "axis"), params.ndim, "GatherV2")
    if not -indices.ndim <= batch_dims <= indices.ndim:
        raise _error("GatherV2")(f"batch_dims={batch_dims} must be in [{-indices.ndim}, {indices.ndim}] for indices of rank {indices.ndim}")
    bd = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
    if bd > a:
        raise _error("GatherV2")(f"batch_dims={bd} must be less than or equal to axis={a}")
    if params.shape[:bd] != indices.shape[:bd]:
        raise _error("GatherV2")(
            f"the first batch_dims={bd} dimensions of params {list(params.shape)} and indices {list(indices.shape)} must match"
        )
    xp = xp_of(params, indices)
    out_shape = params.shape[:a] + indices.shape[bd:] + params.shape[a + 1 :]
    if 0 in out_shape:  # nothing is gathered, so no index is read or checked (TensorFlow's kernel neither)
        return xp.empty(out_shape, params.dtype)  # type: ignore[no-any-return]
    _check_indices(indices, params.shape[a], "GatherV2")
    if bd == 0:
        return xp.take(params, indices, axis=a)  # type: ignore[no-any-return]
    n_b = math.prod(params.shape[:bd])  # shapes hold Python ints: exact, and far cheaper than np.prod
    n_o = math.prod(params.shape[bd:a])
    n_i = math.prod(params.shape[a + 1 :])
    p = params.reshape(n_b, n_o, params.shape[a], n_i)
    idx = indices.reshape(n_b, 1, -1)
    out = p[xp.arange(n_b)[:, None, None], xp.arange(n_o)[None, :, None], idx]  # [n_b, n_o, n_j, n_i]
    return out.reshape(params.shape[:a] + indices.shape[bd:] + params.shape[a + 1 :])  # type: ignore[no-any-return]


def unsorted_segment_sum(data: np.ndarray, segment_ids: np.ndarray, num_segments: np.ndarray, **attrs: Any) -> np.ndarray:
    op = "UnsortedSegmentSum"
    n = _scalar(num_segments, op, "num_segments")
    if n < 0:
        raise _error(op)(f"num_segments must be >= 0, got {n}")
    xp = xp_of(data, segment_ids)
    ids = xp.asarray(segment_ids)
    if data.shape[: ids.ndim] != ids.shape:
        raise _error(op)(f"segment_ids shape {list(ids.shape)} must be a prefix of data shape {list(data.shape)}")
    inner = data.shape[ids.ndim :]
    # TensorFlow's kernel reads no id when there is no data to sum (an empty num_segments
    # with data is an out-of-range id, as there).
    if data.size and (ids >= n).any():
        where = tuple(int(v) for v in xp.argwhere(ids >= n)[0])
        raise _error(op)(f"segment_ids{list(where)} = {int(ids[where])} is out of range [0, {n})")
    out = xp.zeros((n,) + inner, dtype=data.dtype)
    if out.size == 0:
        return out  # type: ignore[no-any-return]
    flat_ids = ids.reshape(-1)
    rows = data.reshape((flat_ids.size,) + inner)
    native = sharding.native_module()
    if native is not None and xp is np and out.ndim == 2 and rows.dtype in _SEGMENT_SUM_TYPES:
        # np.add.at's additions, in its order (the same bits), without its indexing per row
        if native.segment_sum(np.ascontiguousarray(rows), np.ascontiguousarray(flat_ids), out) == 0:
            return out  # type: ignore[no-any-return]
    keep = flat_ids >= 0
    xp.add.at(out, flat_ids[keep], rows[keep])
    return out  # type: ignore[no-any-return]


_SEGMENT_SUM_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def one_hot(indices: np.ndarray, depth: np.ndarray, on_value: np.ndarray, off_value: np.ndarray, axis: int, T: ok.DType, **attrs: Any) -> np.ndarray:
    d = _scalar(depth, "OneHot", "depth")
    if d < 0:
        raise _error("OneHot")(f"depth must be non-negative, got {d}")
    if np.ndim(on_value) != 0 or np.ndim(off_value) != 0:
        raise _error("OneHot")("on_value and off_value must be scalars")
    if not -1 <= axis <= indices.ndim:
        raise _error("OneHot")(f"axis {axis} is out of range for indices of rank {indices.ndim}; expected a value in [-1, {indices.ndim}]")
    xp = xp_of(indices, on_value, off_value)
    hot = indices.astype(np.int64)[..., None] == xp.arange(d)
    out = xp.where(hot, on_value, off_value).astype(T.np, copy=False)
    return out if axis == -1 else xp.moveaxis(out, -1, axis)  # type: ignore[no-any-return]


def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, Tidx: ok.DType, **attrs: Any) -> np.ndarray:
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if np.ndim(v) != 0:
            raise _error("Range")(f"'{name}' must be a scalar, got shape {list(np.shape(v))}")
    # numpy scalars of Tidx: the size and the values are computed in Tidx, as TensorFlow does.
    s, l, d = (np.asarray(v, dtype=Tidx.np).reshape(())[()] for v in (start, limit, delta))
    n = range_size(s, l, d, _error("Range"))
    if Tidx.is_integer:
        return (int(s) + np.arange(n, dtype=np.int64) * int(d)).astype(Tidx.np)
    return (s + np.arange(n).astype(Tidx.np) * d).astype(Tidx.np)  # type: ignore[no-any-return]


def where(input: np.ndarray, **attrs: Any) -> np.ndarray:
    return xp_of(input).argwhere(input).astype(np.int64, copy=False)  # type: ignore[no-any-return]


def string_to_number(string_tensor: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return parse_numbers(string_tensor, out_type)


# ---------------------------------------------------------------- ReverseV2, MatrixBandPart, Cumsum, Cumprod, LinSpace


#: The numbers (not strings or quantized types: TensorFlow has no CPU kernels for them).
_BAND_TYPES = ["bool", "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
               "uint32", "uint64", "complex64", "complex128"]
_SCAN_TYPES = [t for t in _BAND_TYPES if t != "bool"]
_TOPK_TYPES = [t for t in _SCAN_TYPES if not t.startswith("complex")]


def mirror_pad(input: np.ndarray, paddings: np.ndarray, mode: str, **attrs: Any) -> np.ndarray:
    pads = mirror_pads("MirrorPad", tuple(input.shape), paddings, mode)
    xp = xp_of(input)
    if input.ndim == 0 or not any(b or a for b, a in pads):
        return xp.array(input, copy=True)  # type: ignore[no-any-return]
    return xp.pad(input, pads, mode=mode.lower())  # type: ignore[no-any-return]  # numpy's reflect and symmetric are TensorFlow's


def mirror_pad_grad(input: np.ndarray, paddings: np.ndarray, mode: str, **attrs: Any) -> np.ndarray:
    """The padded gradient folded back axis by axis: each padded position adds into the
    input index it copied (mirror_source), in order."""
    op = "MirrorPadGrad"
    p = np.asarray(paddings)
    if p.shape != (input.ndim, 2) or (p < 0).any():
        raise InvalidArgumentError(f"op {op!r}: paddings must be a non-negative [{input.ndim}, 2] matrix, got "
                                   f"{p.tolist()}", op=op)
    shape = tuple(int(n - b - a) for n, (b, a) in zip(input.shape, p.tolist()))
    if any(n < 0 for n in shape):
        raise InvalidArgumentError(f"op {op!r}: paddings {p.tolist()} are more than the gradient's shape "
                                   f"{list(input.shape)}", op=op)
    pads = mirror_pads(op, shape, p, mode)
    xp = xp_of(input)
    g = input
    for d, (n, (b, a)) in enumerate(zip(shape, pads)):
        moved = xp.moveaxis(g, d, 0)
        out = xp.zeros((n,) + moved.shape[1:], input.dtype)
        with np.errstate(all="ignore"):
            xp.add.at(out, xp.asarray(mirror_source(n, b, a, mode)), moved)
        g = xp.moveaxis(out, 0, d)
    return xp.array(g, copy=True, order="C")  # type: ignore[no-any-return]  # (ascontiguousarray makes a 0-d array 1-d)


def reverse_v2(tensor: np.ndarray, axis: np.ndarray, **attrs: Any) -> np.ndarray:
    axes = reverse_axes(axis, tensor.ndim)
    xp = xp_of(tensor)
    if not axes:
        return tensor
    return xp.ascontiguousarray(xp.flip(tensor, axes))  # type: ignore[no-any-return]


def matrix_band_part(input: np.ndarray, num_lower: np.ndarray, num_upper: np.ndarray, **attrs: Any) -> np.ndarray:
    lower, upper = band(tuple(input.shape), num_lower, num_upper)
    xp = xp_of(input)
    keep = xp.asarray(band_mask(input.shape[-2], input.shape[-1], lower, upper))
    return xp.where(keep, input, xp.zeros((), input.dtype))  # type: ignore[no-any-return]


def _scan(op: str, accumulate: Any, identity: int) -> Any:
    """Cumsum/Cumprod: numpy's accumulation in x's own type (integers wrap, each float16
    step rounds to half), from the end when ``reverse``, shifted by one element with the
    identity first when ``exclusive`` (TensorFlow's ScanOp)."""

    def kernel(x: np.ndarray, axis: np.ndarray, exclusive: bool, reverse: bool, **attrs: Any) -> np.ndarray:
        a = scan_axis(op, axis, x.ndim)
        xp = xp_of(x)
        y = xp.flip(x, a) if reverse else x
        with np.errstate(all="ignore"):
            out = accumulate(xp)(y, axis=a, dtype=x.dtype)
        if exclusive and out.shape[a]:
            first = xp.full(out.shape[:a] + (1,) + out.shape[a + 1:], identity, x.dtype)
            out = xp.concatenate([first, xp.take(out, xp.arange(out.shape[a] - 1), axis=a)], axis=a)
        if reverse:
            out = xp.flip(out, a)
        return xp.ascontiguousarray(out)  # type: ignore[no-any-return]

    kernel.__name__ = op
    return kernel


cumsum = _scan("Cumsum", lambda xp: xp.cumsum, 0)
cumprod = _scan("Cumprod", lambda xp: xp.cumprod, 1)


def lin_space(start: np.ndarray, stop: np.ndarray, num: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    n = linspace_count(start, stop, num)
    return linspace_values(start, stop, n, np.dtype(T.np))


# ---------------------------------------------------------------- TopKV2, GatherNd, ScatterNd, TensorScatterUpdate


def top_k_v2(input: np.ndarray, k: np.ndarray, index_type: ok.DType, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    """The k largest along the last axis, largest first; NaN counts as the largest and of
    equal values the lower index comes first (a stable sort of the reversed row, read
    backwards): TensorFlow's order."""
    n = top_k_count(tuple(input.shape), k)
    xp = xp_of(input)
    last = input.shape[-1]
    ascending = xp.argsort(input[..., ::-1], axis=-1, kind="stable")
    order = (last - 1 - ascending[..., ::-1])[..., :n]
    values = xp.take_along_axis(input, order, axis=-1)
    return values, order.astype(index_type.np)


def _rows_of(plan: NdPlan, xp: Any) -> Any:
    """The flat positions of every element the plan addresses: [indices..., slice]."""
    rows = xp.asarray(plan.rows)
    return rows[:, None] + xp.arange(plan.slice_size, dtype=np.int64)[None, :]


def gather_nd(params: np.ndarray, indices: np.ndarray, **attrs: Any) -> np.ndarray:
    plan = nd_plan("GatherNd", tuple(params.shape), indices)
    xp = xp_of(params)
    flat = xp.ascontiguousarray(params).reshape(-1)
    return flat[_rows_of(plan, xp)].reshape(plan.out_shape)  # type: ignore[no-any-return]


def _updates_fit(op: str, plan: NdPlan, updates: Any) -> None:
    if tuple(updates.shape) != plan.out_shape:
        raise InvalidArgumentError(
            f"op {op!r}: updates must have shape {list(plan.out_shape)} (the indices' outer dimensions, then the "
            f"slice each index addresses), got {list(updates.shape)}", op=op)


def scatter_nd(indices: np.ndarray, updates: np.ndarray, shape: np.ndarray, **attrs: Any) -> np.ndarray:
    op = "ScatterNd"
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if np.asarray(shape).ndim != 1 or any(d < 0 for d in dims):
        raise InvalidArgumentError(f"op {op!r}: shape must be a vector of non-negative sizes, got {np.asarray(shape).tolist()}", op=op)
    plan = nd_plan(op, dims, indices, what="shape")
    _updates_fit(op, plan, updates)
    xp = xp_of(updates)
    out = xp.zeros(int(np.prod(dims, dtype=np.int64)), updates.dtype)
    if updates.size:
        with np.errstate(all="ignore"):  # integers wrap, as TensorFlow's
            xp.add.at(out, _rows_of(plan, xp).reshape(-1), xp.ascontiguousarray(updates).reshape(-1))
    return out.reshape(dims)  # type: ignore[no-any-return]


def tensor_scatter_update(tensor: np.ndarray, indices: np.ndarray, updates: np.ndarray, **attrs: Any) -> np.ndarray:
    op = "TensorScatterUpdate"
    plan = nd_plan(op, tuple(tensor.shape), indices, what="shape")
    _updates_fit(op, plan, updates)
    xp = xp_of(tensor)
    out = xp.array(tensor, copy=True).reshape(-1)
    if updates.size:
        out[_rows_of(plan, xp).reshape(-1)] = xp.ascontiguousarray(updates).reshape(-1)  # a duplicate: the last
    return out.reshape(tensor.shape)  # type: ignore[no-any-return]


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Identity", lambda input, **a: input, None, ()),
        ("StopGradient", lambda input, **a: input, None, ()),
        ("Reshape", reshape, None, ("shape",)),
        ("Shape", shape, None, ()),
        ("Size", size, None, ()),
        ("Rank", rank, None, ()),
        ("Transpose", transpose, None, ("perm",)),
        ("InvertPermutation", invert_permutation, None, ()),
        ("ExpandDims", expand_dims, None, ("dim",)),
        ("Squeeze", squeeze, None, ()),
        ("Pad", pad, None, ("paddings",)),
        ("BroadcastTo", broadcast_to, None, ("shape",)),
        ("Tile", tile, None, ("multiples",)),
        ("Fill", fill, None, ("dims",)),
        # zeros/ones(shape) rather than *_like: the same result at a fraction of the call cost
        ("ZerosLike", zeros_like, None, ()),
        ("OnesLike", lambda x, **a: xp_of(x).ones(x.shape, x.dtype), None, ()),
        ("ConcatV2", concat_v2, None, ("axis",)),
        ("ConcatOffset", concat_offset, None, ("concat_dim", "shape")),
        ("Pack", pack, None, ()),
        ("Unpack", unpack, None, ()),
        ("Split", split, None, ("split_dim",)),
        ("Slice", slice_, None, ("begin", "size")),
        ("StridedSlice", strided_slice, None, ("begin", "end", "strides")),
        ("StridedSliceGrad", strided_slice_grad, None, ("shape", "begin", "end", "strides")),
        ("GatherV2", gather_v2, None, ("axis",)),
        ("UnsortedSegmentSum", unsorted_segment_sum, None, ("num_segments",)),
        ("OneHot", one_hot, None, ("depth",)),
        ("Range", range_, None, ("start", "limit", "delta")),
        ("Where", where, None, ()),
        ("StringToNumber", string_to_number, None, ()),
        ("ReverseV2", reverse_v2, None, ("axis",)),
        ("MatrixBandPart", matrix_band_part, {"T": _BAND_TYPES}, ("num_lower", "num_upper")),
        ("Cumsum", cumsum, {"T": _SCAN_TYPES}, ("axis",)),
        ("Cumprod", cumprod, {"T": _SCAN_TYPES}, ("axis",)),
        ("LinSpace", lin_space, None, ("start", "stop", "num")),
        ("TopKV2", top_k_v2, {"T": _TOPK_TYPES}, ("k",)),
        ("MirrorPad", mirror_pad, None, ("paddings",)),
        ("MirrorPadGrad", mirror_pad_grad, {"T": _BAND_TYPES}, ("paddings",)),
        ("GatherNd", gather_nd, None, ("indices",)),
        ("ScatterNd", scatter_nd, {"T": _BAND_TYPES}, ("indices", "shape")),  # bool: or
        ("TensorScatterUpdate", tensor_scatter_update, None, ("indices",)),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
