"""OpenCL kernels of the shape and data-movement ops: one table in ``register_all``.

Most of them are one strided copy.  The host describes the source (and the
destination) as (element offset, element strides) over a shape; numpy computes
those for slices, strided slices, transposes and broadcasts on a *ghost* array,
a zero-byte view with the input's shape whose strides are element counts, so no
index arithmetic is written twice.  The ``scopy`` kernel then moves elements by
their size in bytes, so one program serves every dtype.

Reshape, ExpandDims and Squeeze return views of the same buffer; Identity and
StopGradient return the input itself (tensors are immutable; a Variable copies
itself before an in-place update while such a view is alive).  Shape, Size,
Rank, InvertPermutation, ConcatOffset and Where compute on the host (their
inputs are host-memory arguments, or, for Where, the output's shape depends on
the data) and upload the result; StringToNumber parses on the host, where
string tensors live on this backend.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

import opkernel as ok
from opkernel.errors import InternalError
from opkernel.ops.array_ops import parse_numbers, range_size, reshape_sizes, strided_slice_plan
from opkernel.ops.scan_ops import band, linspace_count, reverse_axes, scan_axis

from .backend import OpenCLBackend, ctype
from .common import ALL, REALS, collapse, contiguous_strides, dims, fail, scalar
from .programs import family

_WORD = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}


def BE() -> OpenCLBackend:
    return ok.engine.backend_instance("opencl")  # type: ignore[return-value]


@family("scopy", ("1", "2", "4", "8", "16"))
def _scopy_source(size: str) -> str:
    W = _WORD[int(size)]
    return f"""
__kernel void scopy(__global {W}* out, __global const {W}* x, int rank, dims_t shape,
                    dims_t so, dims_t sx, int out_off, int x_off) {{
  int i = get_global_id(0); int r = i; int o = out_off; int s = x_off;
  for (int d = rank - 1; d >= 0; --d) {{
    int n = shape.v[d]; int k = r % n; r /= n; o += k * so.v[d]; s += k * sx.v[d];
  }}
  out[o] = x[s];
}}
__kernel void copy(__global {W}* restrict out, __global const {W}* restrict x, int out_off, int x_off) {{
  long i = get_global_id(0); out[out_off + i] = x[x_off + i];
}}
__kernel void scopy_rows(__global {W}* out, __global const {W}* x, int rank, dims_t shape,
                         dims_t so, dims_t sx, int out_off, int x_off, int inner) {{
  int r = get_global_id(0); int o = out_off; int s = x_off;
  for (int d = rank - 1; d >= 0; --d) {{
    int n = shape.v[d]; int k = r % n; r /= n; o += k * so.v[d]; s += k * sx.v[d];
  }}
  for (int j = 0; j < inner; ++j) out[o + j] = x[s + j];
}}
"""


# ---------------------------------------------------------------- layouts


class _GhostArray(np.ndarray):
    """Indexing that always returns a view.  numpy indexes every dimension away with
    integers into a scalar *copy* (``g[k]`` of a 1-D array) whose address says nothing
    about the ghost: read as an offset, it sent 0-d results (Unpack of a vector, a
    StridedSlice shrunk to a scalar, its gradient) to a wild address, garbage or SIGSEGV.
    A trailing Ellipsis makes numpy return a 0-d view instead."""

    def __getitem__(self, key: Any) -> Any:
        key = key if isinstance(key, tuple) else (key,)
        if not any(k is Ellipsis for k in key):
            key = key + (Ellipsis,)
        return super().__getitem__(key)


class Ghost:
    """A zero-byte numpy array of ``shape``: views of it tell offsets and strides in elements."""

    def __init__(self, shape: Sequence[int]) -> None:
        self._base = np.zeros(1, np.uint8)
        self.addr = self._base.__array_interface__["data"][0]
        strided = as_strided(self._base, shape=tuple(shape), strides=tuple(contiguous_strides(shape)), writeable=False)
        self.array = strided.view(_GhostArray)

    def layout(self, view: Any) -> tuple[int, list[int], tuple[int, ...]]:
        # Anything but a view of the ghost (a numpy scalar, a copy) has an address
        # unrelated to it; reading it as an offset would move memory out of bounds.
        if not self._owns(view):
            raise InternalError(f"opencl: a layout was computed from a copy, not a view, of shape {list(np.shape(view))}")
        return view.__array_interface__["data"][0] - self.addr, list(view.strides), view.shape

    def _owns(self, view: Any) -> bool:
        base = view if isinstance(view, np.ndarray) else None
        while base is not None:
            if base is self._base:
                return True
            base = getattr(base, "base", None)
        return False


def strided_copy(
    be: OpenCLBackend, op: str, out: Any, out_off: int, out_strides: Sequence[int],
    x: Any, x_off: int, x_strides: Sequence[int], shape: Sequence[int],
) -> None:
    """out[out_off + idx . out_strides] = x[x_off + idx . x_strides] for every idx < shape."""
    plan = _copy_plan(tuple(shape), tuple(out_strides), tuple(x_strides), out_off, x_off)
    if plan is None:
        return
    if isinstance(plan, str):
        raise fail(op, plan)
    name, n, values = plan
    be.launch1d(be.programs.kernel("scopy", str(x.dtype.itemsize), name, op), n, out.base_data, x.base_data,
                values=values)


@functools.lru_cache(maxsize=512)
def _copy_plan(shape: tuple[int, ...], out_strides: tuple[int, ...], x_strides: tuple[int, ...], out_off: int,
               x_off: int) -> tuple[str, int, tuple[Any, ...]] | str | None:
    """strided_copy's kernel, work-items and by-value arguments for one layout, made once
    (a model copies the same few layouts at every step); None: nothing to copy; a string:
    the error of a layout no kernel takes."""
    n = int(math.prod(shape))
    if n == 0:
        return None
    cshape, (so, sx) = collapse(shape, out_strides, x_strides)
    if len(cshape) == 1 and so[0] == 1 and sx[0] == 1:
        return "copy", n, (np.int32(out_off), np.int32(x_off))
    if len(cshape) > 8:
        return f"copies over more than 8 non-trivial dimensions are not supported, got shape {list(shape)}"
    if len(cshape) > 1 and so[-1] == 1 and sx[-1] == 1 and _ROW_COPY_LEAST <= cshape[-1] <= _ROW_COPY_MOST:
        # a work-item per contiguous run of the last axis: the index arithmetic (a division
        # and a remainder per axis) once a run, not once an element
        inner = cshape[-1]
        return "scopy_rows", n // inner, _frozen(np.int32(len(cshape) - 1), dims(cshape[:-1]), dims(so[:-1]),
                                                 dims(sx[:-1]), np.int32(out_off), np.int32(x_off), np.int32(inner))
    return "scopy", n, _frozen(np.int32(len(cshape)), dims(cshape), dims(so), dims(sx), np.int32(out_off),
                               np.int32(x_off))


def _frozen(*values: Any) -> tuple[Any, ...]:
    """Cached kernel arguments, their arrays made read-only."""
    for v in values:
        if isinstance(v, np.ndarray):
            v.flags.writeable = False
    return values


#: The runs of the last axis that strided_copy copies a run per work-item: from 4
#: elements, and up to 256, so that a copy of a few long rows (a slice of [2, 4M]) still
#: spreads over many work-items on a GPU.
_ROW_COPY_LEAST, _ROW_COPY_MOST = 4, 256


def gather_view(be: OpenCLBackend, op: str, x: Any, view_of: Any) -> Any:
    """A new contiguous array holding ``view_of(ghost)``, a numpy view of ``x``'s ghost."""
    g = Ghost(x.shape)
    off, strides, shape = g.layout(view_of(g.array))
    out = be.new_array(tuple(shape), x.dtype)
    strided_copy(be, op, out, 0, contiguous_strides(shape), x, off, strides, shape)
    return out


def copy_into(be: OpenCLBackend, op: str, out: Any, region: Any, x: Any) -> None:
    """Write contiguous ``x`` into ``region(ghost of out)``."""
    g = Ghost(out.shape)
    off, strides, shape = g.layout(region(g.array))
    strided_copy(be, op, out, off, strides, x, 0, contiguous_strides(shape), shape)


#: Zero is all-zero bytes in every dtype, so zeros are written as unsigned words of the
#: element's size (or 8-byte halves of a complex128): one fill kernel per size, and the
#: types with no OpenCL C name (complex, bfloat16, quantized) that Pad and
#: StridedSliceGrad move get zeros too.
_ZERO_WORDS: dict[int, np.dtype[Any]] = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: np.dtype(np.uint64)}


def zeros(be: OpenCLBackend, op: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
    out = be.new_array(shape, dtype)
    if out.size:
        size = np.dtype(dtype).itemsize
        word = _ZERO_WORDS[8 if size % 8 == 0 else size]
        count = out.size * size // word.itemsize
        be.launch1d(be.programs.kernel("fill", word.name, "fill", op), count, out.base_data, scalar(word, 0))
    return out


# ---------------------------------------------------------------- validation helpers


def _ints(values: Any, op: str, name: str, vector: bool = True) -> list[int]:
    arr = np.asarray(values)
    if vector and arr.ndim != 1:
        raise fail(op, f"'{name}' must be a vector, got shape {list(arr.shape)}")
    return [int(v) for v in arr.reshape(-1)]


def _scalar(value: Any, op: str, name: str) -> int:
    arr = np.asarray(value)
    if arr.size != 1:
        raise fail(op, f"'{name}' must be a scalar, got shape {list(arr.shape)}")
    return int(arr.reshape(()))


def _axis(axis: int, rank: int, op: str, name: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise fail(op, f"{name} {axis} is out of range for a tensor of rank {rank}; expected a value in [{-rank}, {rank})")
    return axis % rank if rank else axis


# ---------------------------------------------------------------- shapes and views


def identity(input: Any, **attrs: Any) -> Any:
    return input


def reshape(tensor: Any, shape: np.ndarray, **attrs: Any) -> Any:
    d = _ints(shape, "Reshape", "shape", vector=False)
    if np.ndim(shape) > 1:
        raise fail("Reshape", f"shape must be a vector of sizes >= 0 with at most one -1, got {d}")
    return BE().view(tensor, tuple(reshape_sizes(tensor.shape, d, lambda m: fail("Reshape", m))))


def shape(input: Any, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return np.array(input.shape, dtype=out_type.np)


def size(input: Any, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    return np.array(int(math.prod(input.shape)), dtype=out_type.np)


def rank(input: Any, **attrs: Any) -> np.ndarray:
    return np.array(len(input.shape), dtype=np.int32)


def expand_dims(input: Any, dim: np.ndarray, **attrs: Any) -> Any:
    if np.size(dim) != 1:
        raise fail("ExpandDims", f"'dim' must hold a single value, got {np.asarray(dim).tolist()}")
    axis = _axis(int(np.asarray(dim).reshape(())), input.ndim + 1, "ExpandDims", "dim")
    s = list(input.shape)
    s.insert(axis, 1)
    return BE().view(input, tuple(s))


def squeeze(input: Any, squeeze_dims: list[int], **attrs: Any) -> Any:
    axes = {_axis(int(a), input.ndim, "Squeeze", "squeeze_dims entry") for a in squeeze_dims}
    for a in axes:
        if input.shape[a] != 1:
            raise fail("Squeeze", f"cannot squeeze dimension {a} of shape {list(input.shape)}: its size is not 1")
    if not squeeze_dims:
        axes = {k for k, d in enumerate(input.shape) if d == 1}
    return BE().view(input, tuple(d for k, d in enumerate(input.shape) if k not in axes))


def transpose(x: Any, perm: np.ndarray, **attrs: Any) -> Any:
    # TensorFlow counts a negative entry from the end, as an axis: perm [-1, 0, 1] is [2, 0, 1].
    given = _ints(perm, "Transpose", "perm")
    p = [d + x.ndim if -x.ndim <= d < 0 else d for d in given]
    if sorted(p) != list(range(x.ndim)):
        raise fail("Transpose", f"perm {given} is not a permutation of the {x.ndim} dimensions of the input {list(x.shape)}")
    if p == sorted(p):
        return x
    # the layout of np.transpose's view, written directly (no ghost view: Transpose runs at
    # every step of a model)
    be, strides = BE(), contiguous_strides(x.shape)
    shape = tuple(x.shape[k] for k in p)
    out = be.new_array(shape, x.dtype)
    strided_copy(be, "Transpose", out, 0, contiguous_strides(shape), x, 0, [strides[k] for k in p], shape)
    return out


def invert_permutation(x: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    p = np.asarray(x)
    if p.ndim != 1 or not np.array_equal(np.sort(p), np.arange(p.size)):
        raise fail("InvertPermutation", f"x must be a permutation of 0..{p.size - 1}, got {p.tolist()}")
    out = np.empty(p.size, dtype=T.np)
    out[p] = np.arange(p.size, dtype=T.np)
    return out


def pad(input: Any, paddings: np.ndarray, **attrs: Any) -> Any:
    pads = np.asarray(paddings)
    if pads.shape != (input.ndim, 2):
        raise fail("Pad", f"paddings must have shape [{input.ndim}, 2] for an input of rank {input.ndim}, got {list(pads.shape)}")
    if (pads < 0).any():
        raise fail("Pad", f"paddings must be non-negative, got {pads.tolist()}")
    be = BE()
    shape_ = tuple(int(d + lo + hi) for d, (lo, hi) in zip(input.shape, pads))
    out = zeros(be, "Pad", shape_, input.dtype)
    copy_into(be, "Pad", out, lambda g: g[tuple(slice(int(lo), int(lo) + d) for d, (lo, _) in zip(input.shape, pads))], input)
    return out


def broadcast_to(input: Any, shape: np.ndarray, **attrs: Any) -> Any:
    d = _ints(shape, "BroadcastTo", "shape")
    try:
        return gather_view(BE(), "BroadcastTo", input, lambda g: np.broadcast_to(g, d))
    except ValueError as e:
        raise fail("BroadcastTo", f"cannot broadcast a tensor of shape {list(input.shape)} to shape {d}") from e


def tile(input: Any, multiples: np.ndarray, **attrs: Any) -> Any:
    m = _ints(multiples, "Tile", "multiples")
    if len(m) != input.ndim or any(v < 0 for v in m):
        raise fail("Tile", f"multiples must hold {input.ndim} non-negative values for an input of shape {list(input.shape)}, got {m}")
    be = BE()
    inter = [v for pair in zip(m, input.shape) for v in pair]  # [m0, d0, m1, d1, ...]
    own = contiguous_strides(input.shape)
    x_strides = [v for s in own for v in (0, s)]
    out = be.new_array(tuple(a * b for a, b in zip(m, input.shape)), input.dtype)
    strided_copy(be, "Tile", out, 0, contiguous_strides(inter), input, 0, x_strides, inter)
    return out


# ---------------------------------------------------------------- joining and splitting


def concat_v2(values: list[Any], axis: np.ndarray, **attrs: Any) -> Any:
    first = values[0]
    for k, v in enumerate(values[1:], 1):
        if v.ndim != first.ndim:
            raise fail("ConcatV2", f"all inputs must have the same rank, got values[0] of shape {list(first.shape)} and values[{k}] of shape {list(v.shape)}")
    if first.ndim == 0:
        raise fail("ConcatV2", "cannot concatenate scalars; use Pack")
    a = _axis(_scalar(axis, "ConcatV2", "axis"), first.ndim, "ConcatV2")
    for k, v in enumerate(values[1:], 1):
        if v.shape[:a] + v.shape[a + 1 :] != first.shape[:a] + first.shape[a + 1 :]:
            raise fail("ConcatV2", f"dimensions other than axis {a} must match, got values[0] of shape {list(first.shape)} and values[{k}] of shape {list(v.shape)}")
    return _join(values, a, "ConcatV2")


def _join(values: Sequence[Any], a: int, op: str) -> Any:
    be = BE()
    shape_ = list(values[0].shape)
    shape_[a] = sum(v.shape[a] for v in values)
    out = be.new_array(tuple(shape_), values[0].dtype)
    at = 0
    for v in values:
        lo = at
        copy_into(be, op, out, lambda g, lo=lo, n=v.shape[a]: g[(slice(None),) * a + (slice(lo, lo + n),)], v)
        at += v.shape[a]
    return out


def pack(values: list[Any], axis: int, **attrs: Any) -> Any:
    first = values[0]
    for k, v in enumerate(values[1:], 1):
        if v.shape != first.shape:
            raise fail("Pack", f"all inputs must have the same shape, got values[0] of shape {list(first.shape)} and values[{k}] of shape {list(v.shape)}")
    a = _axis(axis, first.ndim + 1, "Pack")
    be = BE()
    expanded = [be.view(v, v.shape[:a] + (1,) + v.shape[a:]) for v in values]
    return _join(expanded, a, "Pack")


def unpack(value: Any, num: int, axis: int, **attrs: Any) -> list[Any]:
    a = _axis(axis, value.ndim, "Unpack")
    if value.shape[a] != num:
        raise fail("Unpack", f"num={num} must equal dimension {a} of the input shape {list(value.shape)}")
    be = BE()
    return [gather_view(be, "Unpack", value, lambda g, k=k: g[(slice(None),) * a + (k,)]) for k in range(num)]


def split(split_dim: np.ndarray, value: Any, num_split: int, **attrs: Any) -> list[Any]:
    a = _axis(_scalar(split_dim, "Split", "split_dim"), value.ndim, "Split", "split_dim")
    if value.shape[a] % num_split:
        raise fail("Split", f"num_split={num_split} does not evenly divide dimension {a} of the input shape {list(value.shape)}")
    be = BE()
    n = value.shape[a] // num_split
    return [gather_view(be, "Split", value, lambda g, k=k: g[(slice(None),) * a + (slice(k * n, (k + 1) * n),)]) for k in range(num_split)]


# ---------------------------------------------------------------- slicing


def slice_(input: Any, begin: np.ndarray, size: np.ndarray, **attrs: Any) -> Any:
    b, s = _ints(begin, "Slice", "begin"), _ints(size, "Slice", "size")
    if len(b) != input.ndim or len(s) != input.ndim:
        raise fail("Slice", f"begin and size must have {input.ndim} entries for an input of shape {list(input.shape)}, got {b} and {s}")
    index = []
    for k, (lo, n, d) in enumerate(zip(b, s, input.shape)):
        n = d - lo if n == -1 else n
        if not (0 <= lo <= d and 0 <= n <= d - lo):
            raise fail(
                "Slice",
                f"expected begin[{k}] in [0, {d}] and size[{k}] in [0, {d} - begin[{k}]] (or -1) for dimension {k} "
                f"of shape {list(input.shape)}, got begin {b} and size {s}",
            )
        index.append(slice(lo, lo + n))
    return gather_view(BE(), "Slice", input, lambda g: g[tuple(index)])


def _plan(op: str, shape_: Sequence[int], begin: np.ndarray, end: np.ndarray, strides: np.ndarray, attrs: dict[str, Any]) -> Any:
    b, e, s = _ints(begin, op, "begin"), _ints(end, op, "end"), _ints(strides, op, "strides")
    return strided_slice_plan(tuple(shape_), b, e, s, len(s), attrs, lambda m: fail(op, m))


def strided_slice(input: Any, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, **attrs: Any) -> Any:
    plan = _plan("StridedSlice", input.shape, begin, end, strides, attrs)
    out = gather_view(BE(), "StridedSlice", input, lambda g: g[plan.numpy_index()])
    return BE().view(out, tuple(int(d) for d in plan.final_shape))


def strided_slice_grad(shape: np.ndarray, begin: np.ndarray, end: np.ndarray, strides: np.ndarray, dy: Any, **attrs: Any) -> Any:
    d = _ints(shape, "StridedSliceGrad", "shape")
    plan = _plan("StridedSliceGrad", d, begin, end, strides, attrs)
    if tuple(dy.shape) != tuple(plan.final_shape):
        raise fail("StridedSliceGrad", f"dy must have shape {list(plan.final_shape)}, got {list(dy.shape)}")
    be = BE()
    out = zeros(be, "StridedSliceGrad", tuple(d), dy.dtype)
    copy_into(be, "StridedSliceGrad", out, lambda g: g[plan.numpy_index()], dy)
    return out


# ---------------------------------------------------------------- gathering


@family("gather", tuple(f"{n}:{i}" for n in ("1", "2", "4", "8", "16") for i in ("int32", "int64")))
def _gather_source(key: str) -> str:
    size, index = key.split(":")
    W, I = _WORD[int(size)], ctype(ok.as_dtype(index))
    return f"""
// params [B, O, A, N], indices [B, J] -> out [B, O, J, N]; an index outside [0, A) gives 0.
__kernel void gather(__global {W}* out, __global const {W}* params, __global const {I}* idx,
                     int O, int A, int J, int N) {{
  int i = get_global_id(0);
  int n = i % N; int r = i / N; int j = r % J; r /= J; int o = r % O; int b = r / O;
  {I} a = idx[b * J + j];
  out[i] = (a >= 0 && a < A) ? params[((b * O + o) * A + a) * N + n] : ({W})(0);
}}
"""


def _check_indices(be: OpenCLBackend, indices: Any, limit: int, op: str) -> None:
    host = be.host(indices)
    if host is None:
        return  # a device-computed index tensor: out-of-range entries give zeros, as on GPUs
    bad = (host < 0) | (host >= limit)
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        raise fail(op, f"indices{list(where)} = {int(host[where])} is not in [0, {limit})")


def gather_v2(params: Any, indices: Any, axis: np.ndarray, batch_dims: int, Tindices: ok.DType, **attrs: Any) -> Any:
    op = "GatherV2"
    if params.ndim == 0:
        raise fail(op, "params must be at least a vector")
    a = _axis(_scalar(axis, op, "axis"), params.ndim, op)
    if not -indices.ndim <= batch_dims <= indices.ndim:
        raise fail(op, f"batch_dims={batch_dims} must be in [{-indices.ndim}, {indices.ndim}] for indices of rank {indices.ndim}")
    bd = batch_dims + indices.ndim if batch_dims < 0 else batch_dims
    if bd > a:
        raise fail(op, f"batch_dims={bd} must be less than or equal to axis={a}")
    if params.shape[:bd] != indices.shape[:bd]:
        raise fail(op, f"the first batch_dims={bd} dimensions of params {list(params.shape)} and indices {list(indices.shape)} must match")
    be = BE()
    shape = tuple(params.shape[:a]) + tuple(indices.shape[bd:]) + tuple(params.shape[a + 1 :])
    if 0 in shape:  # nothing is gathered, so no index is read or checked (TensorFlow's kernel neither)
        return be.new_array(shape, params.dtype)
    _check_indices(be, indices, params.shape[a], op)
    O = int(math.prod(params.shape[bd:a]))
    A = params.shape[a]
    N = int(math.prod(params.shape[a + 1 :]))
    J = int(math.prod(indices.shape[bd:]))
    out = be.new_array(tuple(params.shape[:a]) + tuple(indices.shape[bd:]) + tuple(params.shape[a + 1 :]), params.dtype)
    if out.size:
        k = be.programs.kernel("gather", f"{params.dtype.itemsize}:{Tindices.name}", "gather", op)
        be.launch1d(k, out.size, out.base_data, params.base_data, indices.base_data, np.int32(O), np.int32(A), np.int32(J), np.int32(N))
    return out


@family("segment_sum", tuple(f"{t}:{i}" for t in REALS for i in ("int32", "int64")))
def _segment_source(key: str) -> str:
    dtype, index = key.split(":")
    T, I = ctype(ok.as_dtype(dtype)), ctype(ok.as_dtype(index))
    return f"""
// out [S, N]: one work-item per output element sums the rows of its segment
// (no atomics, so any dtype works and the result is deterministic).
__kernel void segment_sum(__global {T}* out, __global const {T}* data, __global const {I}* ids, int R, int N) {{
  int i = get_global_id(0); int n = i % N; int s = i / N;
  {T} acc = 0;
  for (int r = 0; r < R; ++r) if (ids[r] == s) acc += data[r * N + n];
  out[i] = acc;
}}
// CPU devices: one work-item per segment and block of up to CB columns, which tests each
// id once for the whole block and adds matching rows into its block of out, in the same
// order (the per-element kernel tests each id once per element: 1.8 ms for [2048, 64]
// into 96 segments on Intel's CPU runtime).
__kernel void segment_sum_rows(__global {T}* out, __global const {T}* data, __global const {I}* ids, int R, int N, int CB) {{
  int s = get_global_id(0); int c0 = get_global_id(1) * CB; int c1 = min(c0 + CB, N);
  __global {T}* o = out + (long)s * N;
  for (int c = c0; c < c1; ++c) o[c] = 0;
  for (int r = 0; r < R; ++r) {{
    if (ids[r] != s) continue;
    __global const {T}* d = data + (long)r * N;
    for (int c = c0; c < c1; ++c) o[c] += d[c];
  }}
}}
"""


#: Columns per work-item of ``segment_sum_rows`` (CPU devices).
SEGMENT_COLUMNS = 256


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: np.ndarray, T: ok.DType, Tindices: ok.DType, **attrs: Any) -> Any:
    op = "UnsortedSegmentSum"
    n = _scalar(num_segments, op, "num_segments")
    if n < 0:
        raise fail(op, f"num_segments must be >= 0, got {n}")
    if tuple(data.shape[: segment_ids.ndim]) != tuple(segment_ids.shape):
        raise fail(op, f"segment_ids shape {list(segment_ids.shape)} must be a prefix of data shape {list(data.shape)}")
    be = BE()
    host = be.host(segment_ids)
    # TensorFlow's kernel reads no id when there is no data to sum (an empty num_segments
    # with data is an out-of-range id, as there).
    if host is not None and math.prod(data.shape) and (host >= n).any():
        where = tuple(int(v) for v in np.argwhere(host >= n)[0])
        raise fail(op, f"segment_ids{list(where)} = {int(host[where])} is out of range [0, {n})")
    inner = tuple(data.shape[segment_ids.ndim :])
    out = be.new_array((n,) + inner, data.dtype)
    N = int(math.prod(inner))
    R = int(math.prod(segment_ids.shape))
    if out.size:
        if R == 0:
            return zeros(be, op, out.shape, data.dtype)
        key = f"{T.name}:{Tindices.name}"
        if be.is_cpu:
            cb = min(N, SEGMENT_COLUMNS)
            be.launch(be.programs.kernel("segment_sum", key, "segment_sum_rows", op), (n, -(-N // cb)), (1, 1),
                      out.base_data, data.base_data, segment_ids.base_data, np.int32(R), np.int32(N), np.int32(cb))
        else:
            be.launch1d(be.programs.kernel("segment_sum", key, "segment_sum", op), out.size, out.base_data,
                        data.base_data, segment_ids.base_data, np.int32(R), np.int32(N))
    return out


def complex_segment_sum(data: Any, segment_ids: Any, num_segments: np.ndarray, T: ok.DType, **attrs: Any) -> Any:
    """UnsortedSegmentSum of complex64/complex128: a sum adds real and imaginary parts
    alone, so the data is read as float32/float64 with a trailing dimension of 2 (the
    same bytes), summed by the real kernel, and the result read back as complex."""
    be = BE()
    part = ok.float32 if T.name == "complex64" else ok.float64
    pairs = be.new_array(tuple(data.shape) + (2,), part.np, data=data.base_data)
    out = unsorted_segment_sum(pairs, segment_ids, num_segments, T=part, **attrs)
    return be.new_array(tuple(out.shape[:-1]), T.np, data=out.base_data)


@family("one_hot", tuple(f"{t}:{i}" for t in ALL for i in ("uint8", "int32", "int64")))
def _one_hot_source(key: str) -> str:
    dtype, index = key.split(":")
    T, I = ctype(ok.as_dtype(dtype)), ctype(ok.as_dtype(index))
    return f"""
// out [O, D, N] from indices [O, N]
__kernel void one_hot(__global {T}* out, __global const {I}* idx, {T} on, {T} off, int D, int N) {{
  int i = get_global_id(0); int n = i % N; int r = i / N; int d = r % D; int o = r / D;
  out[i] = ((long)idx[o * N + n] == (long)d) ? on : off;
}}
"""


def one_hot(indices: Any, depth: np.ndarray, on_value: Any, off_value: Any, axis: int, T: ok.DType, TI: ok.DType, **attrs: Any) -> Any:
    op = "OneHot"
    d = _scalar(depth, op, "depth")
    if d < 0:
        raise fail(op, f"depth must be non-negative, got {d}")
    if np.ndim(on_value) != 0 or np.ndim(off_value) != 0:
        raise fail(op, "on_value and off_value must be scalars")
    if not -1 <= axis <= indices.ndim:
        raise fail(op, f"axis {axis} is out of range for indices of rank {indices.ndim}; expected a value in [-1, {indices.ndim}]")
    a = indices.ndim if axis == -1 else axis
    be = BE()
    out = be.new_array(tuple(indices.shape[:a]) + (d,) + tuple(indices.shape[a:]), T.np)
    if out.size:
        N = int(math.prod(indices.shape[a:]))
        k = be.programs.kernel("one_hot", f"{T.name}:{TI.name}", "one_hot", op)
        on, off = np.asarray(on_value).reshape(()), np.asarray(off_value).reshape(())
        be.launch1d(k, out.size, out.base_data, indices.base_data, scalar(T.np, on.item()), scalar(T.np, off.item()), np.int32(d), np.int32(N))
    return out


def complex_one_hot(indices: Any, depth: np.ndarray, on_value: Any, off_value: Any, axis: int, T: ok.DType, **attrs: Any) -> Any:
    """OneHot of complex64/complex128: the real and the imaginary parts are one-hot
    tensors of float32/float64 of their own, interleaved into the complex result's bytes.
    OneHot of bfloat16: a uint16 one-hot of the values' bits (OneHot only moves values)."""
    be = BE()
    if T.name == "bfloat16":
        bits = [np.asarray(v, T.np).view(np.uint16) for v in (on_value, off_value)]
        out = one_hot(indices, depth, bits[0], bits[1], axis, T=ok.uint16, **attrs)
        return be.new_array(tuple(out.shape), T.np, data=out.base_data)
    part = ok.float32 if T.name == "complex64" else ok.float64
    on, off = np.asarray(on_value), np.asarray(off_value)
    re = one_hot(indices, depth, on.real, off.real, axis, T=part, **attrs)
    im = one_hot(indices, depth, on.imag, off.imag, axis, T=part, **attrs)
    pairs = be.new_array(tuple(re.shape) + (2,), part.np)
    if pairs.size:
        copy_into(be, "OneHot", pairs, lambda g: g[..., 0], re)
        copy_into(be, "OneHot", pairs, lambda g: g[..., 1], im)
    return be.new_array(tuple(re.shape), T.np, data=pairs.base_data)


@family("range", REALS)
def _range_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    W = "double" if dtype == "float64" else ("float" if dtype == "float32" else "long")
    # start + i * delta rounded twice, as TensorFlow's CPU kernel and numpy compute it: not one fused multiply-add.
    return (
        "#pragma OPENCL FP_CONTRACT OFF\n"
        f"__kernel void range(__global {T}* out, {W} start, {W} delta) {{ int i = get_global_id(0); out[i] = ({T})(start + i * delta); }}\n"
    )


def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray, Tidx: ok.DType, **attrs: Any) -> Any:
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if np.ndim(v) != 0:
            raise fail("Range", f"'{name}' must be a scalar, got shape {list(np.shape(v))}")
    # numpy scalars of Tidx: the size is computed in Tidx, as TensorFlow does.
    s, lim, d = (np.asarray(v, dtype=Tidx.np).reshape(())[()] for v in (start, limit, delta))
    n = range_size(s, lim, d, lambda m: fail("Range", m))
    be = BE()
    if Tidx.name == "float16":
        # Half arithmetic, each product and sum rounded to half as in TensorFlow's CPU kernel
        # (start + T(i) * delta in Eigen::half): numpy's float16 on the host, then uploaded.
        return be.from_numpy((s + np.arange(n).astype(np.float16) * d).astype(np.float16))
    out = be.new_array((n,), Tidx.np)
    if n:
        wide = np.float64 if Tidx.name == "float64" else (np.float32 if Tidx.is_floating else np.int64)
        k = be.programs.kernel("range", Tidx.name, "range", "Range")
        be.launch1d(k, n, out.base_data, wide(s), wide(d))
    return out


# ---------------------------------------------------------------- ReverseV2, MatrixBandPart, Cumsum, Cumprod, LinSpace


def reverse_v2(tensor: Any, axis: np.ndarray, **attrs: Any) -> Any:
    axes = reverse_axes(axis, tensor.ndim)
    if not axes:
        return tensor
    index = tuple(slice(None, None, -1) if d in axes else slice(None) for d in range(tensor.ndim))
    return gather_view(BE(), "ReverseV2", tensor, lambda g: g[index])


@family("band", ("1", "2", "4", "8", "16"))
def _band_source(size: str) -> str:
    W = _WORD[int(size)]
    zero = "(ulong2)(0, 0)" if size == "16" else "0"
    return f"""
// MatrixBandPart on [.., m, n], moving elements by their size
__kernel void band(__global {W}* out, __global const {W}* x, int m, int n, long lower, long upper) {{
  int i = get_global_id(0); long col = i % n; long row = (i / n) % m;
  int keep = (lower < 0 || row - col <= lower) && (upper < 0 || col - row <= upper);
  out[i] = keep ? x[i] : ({W}){zero};
}}
"""


def matrix_band_part(input: Any, num_lower: np.ndarray, num_upper: np.ndarray, **attrs: Any) -> Any:
    lower, upper = band(tuple(input.shape), num_lower, num_upper)
    be = BE()
    out = be.new_array(tuple(input.shape), input.dtype)
    if out.size:
        k = be.programs.kernel("band", str(input.dtype.itemsize), "band", "MatrixBandPart")
        be.launch1d(k, out.size, out.base_data, input.base_data, np.int32(input.shape[-2]), np.int32(input.shape[-1]),
                    np.int64(lower), np.int64(upper))
    return out


_SCAN_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@family("scan", _SCAN_TYPES + ("float16",))
def _scan_source(dtype: str) -> str:
    half = dtype == "float16"
    T = "half" if half else ctype(ok.as_dtype(dtype))
    A = "float" if half else T
    load = "vload_half(idx, x)" if half else "x[idx]"
    # float16: the running value rounded to half at every step, as TensorFlow's half scan
    keep = "vstore_half_rte(acc, 0, (__private half*)&h); acc = vload_half(0, (__private const half*)&h);" if half else ""
    store = "vstore_half_rte(v, idx, out);" if half else "out[idx] = v;"
    kernels = []
    for name, op, identity in (("cumsum", "+", "0"), ("cumprod", "*", "1")):
        kernels.append(f"""
// One work-item per line along the scanned axis of [outer, len, inner]
__kernel void {name}(__global {T}* out, __global const {T}* x, long len, long inner, int exclusive, int reverse) {{
  long line = get_global_id(0); long o = line / inner, in = line % inner;
  {A} acc = ({A}){identity};
  {"ushort h;  /* a half's bits: a half variable needs cl_khr_fp16 */" if half else ""}
  for (long k = 0; k < len; k++) {{
    long idx = (o * len + (reverse ? len - 1 - k : k)) * inner + in;
    {A} v = acc;
    acc = acc {op} {load};
    {keep}
    if (!exclusive) v = acc;
    {store}
  }}
}}""")
    return "#pragma OPENCL FP_CONTRACT OFF\n" + "\n".join(kernels) + "\n"


def _scan(op: str, name: str) -> Any:
    def kernel(x: Any, axis: np.ndarray, exclusive: bool, reverse: bool, T: ok.DType, **attrs: Any) -> Any:
        a = scan_axis(op, axis, x.ndim)
        be = BE()
        out = be.new_array(tuple(x.shape), x.dtype)
        if out.size:
            length = int(x.shape[a])
            inner = int(math.prod(x.shape[a + 1:]))
            lines = out.size // length
            k = be.programs.kernel("scan", T.name, name, op)
            be.launch(k, (lines,), None, out.base_data, x.base_data, np.int64(length), np.int64(inner),
                      np.int32(bool(exclusive)), np.int32(bool(reverse)))
        return out

    kernel.__name__ = op
    return kernel


cumsum = _scan("Cumsum", "cumsum")
cumprod = _scan("Cumprod", "cumprod")


@family("linspace", ("float32", "float64"))
def _linspace_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    # start + step * i rounded twice, as TensorFlow's CPU kernel: not one fused multiply-add
    return (
        "#pragma OPENCL FP_CONTRACT OFF\n"
        f"__kernel void linspace(__global {T}* out, {T} start, {T} stop, {T} step, long n) {{\n"
        f"  long i = get_global_id(0); out[i] = i == n - 1 ? stop : start + step * ({T})i;\n}}\n"
    )


def lin_space(start: np.ndarray, stop: np.ndarray, num: np.ndarray, T: ok.DType, **attrs: Any) -> Any:
    n = linspace_count(start, stop, num)
    be = BE()
    t = np.dtype(T.np).type
    s, e = t(np.asarray(start).reshape(())[()]), t(np.asarray(stop).reshape(())[()])
    step = t((e - s) / t(n - 1)) if n > 1 else t(0)
    if n == 1:
        e = s  # one value: start (the kernel writes its last element as stop)
    out = be.new_array((n,), np.dtype(T.np))
    k = be.programs.kernel("linspace", T.name, "linspace", "LinSpace")
    be.launch(k, (n,), None, out.base_data, s, e, step, np.int64(n))
    return out


def where(input: np.ndarray, **attrs: Any) -> np.ndarray:
    return np.argwhere(input).astype(np.int64, copy=False)


def concat_offset(concat_dim: np.ndarray, shape: list[np.ndarray], shape_type: ok.DType, **attrs: Any) -> list[np.ndarray]:
    shapes = [np.asarray(s) for s in shape]
    first = shapes[0]
    a = _axis(_scalar(concat_dim, "ConcatOffset", "concat_dim"), first.size, "ConcatOffset", "concat_dim")
    mask = np.arange(first.size) != a
    offsets, at = [], 0
    for k, s in enumerate(shapes):
        if s.shape != first.shape or not np.array_equal(s[mask], first[mask]):
            raise fail("ConcatOffset", f"shape[{k}] = {s.tolist()} does not match shape[0] = {first.tolist()} outside concat_dim {a}")
        off = np.zeros(first.size, dtype=shape_type.np)
        off[a] = at
        at += int(s[a])
        offsets.append(off)
    return offsets


def string_to_number(string_tensor: np.ndarray, out_type: ok.DType, **attrs: Any) -> np.ndarray:
    """Parses on the host (string tensors live there on this backend); the result is uploaded."""
    return parse_numbers(string_tensor, out_type)


#: Data movement works on any dtype held in device memory: it moves elements by their size.
MOVABLE = [
    "bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
    "float32", "float64", "complex64", "complex128", "qint8", "quint8", "qint16", "quint16", "qint32",
]


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    from .elementwise import KernelRow, float32_compute, register_table

    every = {"T": MOVABLE}
    anything = {"T": MOVABLE + ["string"]}  # string tensors are numpy arrays in host memory
    table: list[KernelRow] = [
        ("Identity", identity, anything, ()),
        ("StopGradient", identity, anything, ()),
        ("Reshape", reshape, every, ("shape",)),
        ("Shape", shape, anything, ()),
        ("Size", size, anything, ()),
        ("Rank", rank, anything, ()),
        ("Transpose", transpose, every, ("perm",)),
        ("InvertPermutation", invert_permutation, None, ("x",)),
        ("ExpandDims", expand_dims, every, ("dim",)),
        ("Squeeze", squeeze, every, ()),
        ("Pad", pad, every, ("paddings",)),
        ("BroadcastTo", broadcast_to, every, ("shape",)),
        ("Tile", tile, every, ("multiples",)),
        ("ConcatV2", concat_v2, every, ("axis",)),
        ("ConcatOffset", concat_offset, None, ("concat_dim", "shape")),
        ("Pack", pack, every, ()),
        ("Unpack", unpack, every, ()),
        ("Split", split, every, ("split_dim",)),
        ("Slice", slice_, every, ("begin", "size")),
        ("StridedSlice", strided_slice, every, ("begin", "end", "strides")),
        ("StridedSliceGrad", strided_slice_grad, every, ("shape", "begin", "end", "strides")),
        ("GatherV2", gather_v2, {"Tparams": MOVABLE}, ("axis",)),
        ("UnsortedSegmentSum", float32_compute(unsorted_segment_sum), {"T": list(REALS) + ["float16"]}, ("num_segments",)),
        ("UnsortedSegmentSum", complex_segment_sum, {"T": ["complex64", "complex128"]}, ("num_segments",)),
        ("OneHot", float32_compute(one_hot), {"T": list(ALL) + ["float16"]}, ("depth", "on_value", "off_value")),
        ("OneHot", complex_one_hot, {"T": ["complex64", "complex128", "bfloat16"]}, ("depth", "on_value", "off_value")),
        ("Range", range_, {"Tidx": list(REALS) + ["float16"]}, ("start", "limit", "delta")),
        # The input is read on the host, so any dtype the device holds as bytes can be tested.
        ("Where", where, {"T": list(ALL) + ["float16", "bfloat16", "complex64", "complex128"]}, ("input",)),
        ("StringToNumber", string_to_number, None, ()),
        ("ReverseV2", reverse_v2, every, ("axis",)),
        ("MatrixBandPart", matrix_band_part, {"T": [t for t in MOVABLE if not t.startswith(("q", "string"))]},
         ("num_lower", "num_upper")),
        ("Cumsum", cumsum, {"T": list(_SCAN_TYPES) + ["float16"]}, ("axis",)),
        ("Cumprod", cumprod, {"T": list(_SCAN_TYPES) + ["float16"]}, ("axis",)),
        ("LinSpace", lin_space, {"T": ["float32", "float64"]}, ("start", "stop", "num")),
    ]
    register_table(table)
