"""OpenCL kernels of TopKV2, GatherNd, ScatterNd, TensorScatterUpdate, MirrorPad and MirrorPadGrad.

The indices are host-memory arguments: the host checks them (an index outside the
tensor is an InvalidArgumentError naming it, as TensorFlow's) and works out the flat
positions they address, which the kernels read.
* TopKV2 runs one work-item per row. It makes k selections, each the best element ranking
  after the previous pick in TensorFlow's order: NaN first, then larger values, then the
  lower index. That is O(n k) per row.
* GatherNd copies the addressed elements by their size.
* TensorScatterUpdate copies the tensor, with each addressed slot taken from its last
  update.
* ScatterNd sums each output slot's updates in their order. The host groups the updates by
  slot (a stable sort), so the sums are deterministic without atomics.
* MirrorPad gathers each output element from the input element the host maps it to, and
  MirrorPadGrad sums each input position's mirrored gradients as ScatterNd sums.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.nd_ops import nd_plan, top_k_count
from opkernel.ops.scan_ops import mirror_map, mirror_pads

from .array_kernels import _WORD, BE, MOVABLE
from .backend import OpenCLBackend, ctype
from .common import fail
from .elementwise import KernelRow, float32_compute, register_table
from .programs import family


_TOPK_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@family("top_k", tuple(f"{t}:{i}" for t in _TOPK_TYPES for i in ("int16", "int32", "int64")))
def _top_k_source(key: str) -> str:
    dtype, index = key.split(":")
    T, I = ctype(ok.as_dtype(dtype)), ctype(ok.as_dtype(index))
    nan = "(a != a)" if dtype.startswith("float") else "0"
    nan_b = "(b != b)" if dtype.startswith("float") else "0"
    return f"""
// a ranks before b: NaN first, then larger values, then the lower index (TensorFlow's TopK order)
inline int before({T} a, long ia, {T} b, long ib) {{
  int na = {nan}, nb = {nan_b};
  if (na != nb) return na;
  if (!na && a != b) return a > b;
  return ia < ib;
}}
// One work-item per row of n: k selections, each the best element ranking after the previous one.
__kernel void top_k(__global {T}* values, __global {I}* indices, __global const {T}* x, long n, long k) {{
  long row = get_global_id(0);
  __global const {T}* r = x + row * n;
  {T} pv = 0; long pi = -1;
  for (long j = 0; j < k; j++) {{
    long best = -1;
    for (long i = 0; i < n; i++) {{
      if (pi >= 0 && !before(pv, pi, r[i], i)) continue;  // ranks before the previous pick
      if (best < 0 || before(r[i], i, r[best], best)) best = i;
    }}
    pv = r[best]; pi = best;
    values[row * k + j] = pv; indices[row * k + j] = ({I})best;
  }}
}}
"""


def _top_k(input: Any, k: np.ndarray, T: ok.DType, index_type: ok.DType, **attrs: Any) -> Any:
    n = top_k_count(tuple(input.shape), k)
    be = BE()
    out_shape = tuple(input.shape[:-1]) + (n,)
    values = be.new_array(out_shape, input.dtype)
    indices = be.new_array(out_shape, index_type.np)
    rows = int(math.prod(input.shape[:-1]))
    if rows and n:
        kern = be.programs.kernel("top_k", f"{T.name}:{index_type.name}", "top_k", "TopKV2")
        be.launch(kern, (rows,), None, values.base_data, indices.base_data, input.base_data,
                  np.int64(input.shape[-1]), np.int64(n))
    return values, indices


top_k_v2 = float32_compute(_top_k)


@family("nd_gather", ("1", "2", "4", "8", "16"))
def _nd_gather_source(size: str) -> str:
    W = _WORD[int(size)]
    return f"""
// out[i] = x[rows[i / slice] + i % slice], moving elements by their size
__kernel void nd_gather(__global {W}* out, __global const {W}* x, __global const long* rows, long slice) {{
  long i = get_global_id(0); out[i] = x[rows[i / slice] + i % slice];
}}
// out = tensor with slot s replaced by update last[s] (-1: kept), slots of ``slice`` elements
__kernel void nd_update(__global {W}* out, __global const {W}* tensor, __global const {W}* updates,
                        __global const long* last, long slice) {{
  long i = get_global_id(0); long u = last[i / slice];
  out[i] = u < 0 ? tensor[i] : updates[u * slice + i % slice];
}}
"""


def _rows_buffer(be: OpenCLBackend, values: np.ndarray) -> Any:
    return be.from_numpy(np.ascontiguousarray(values, np.int64))


def gather_nd(params: Any, indices: np.ndarray, **attrs: Any) -> Any:
    plan = nd_plan("GatherNd", tuple(params.shape), indices)
    be = BE()
    out = be.new_array(plan.out_shape, params.dtype)
    if out.size:
        k = be.programs.kernel("nd_gather", str(params.dtype.itemsize), "nd_gather", "GatherNd")
        be.launch1d(k, out.size, out.base_data, params.base_data, _rows_buffer(be, plan.rows).base_data,
                    np.int64(plan.slice_size))
    return out


def tensor_scatter_update(tensor: Any, indices: np.ndarray, updates: Any, **attrs: Any) -> Any:
    op = "TensorScatterUpdate"
    plan = nd_plan(op, tuple(tensor.shape), indices, what="shape")
    if tuple(updates.shape) != plan.out_shape:
        raise fail(op, f"updates must have shape {list(plan.out_shape)}, got {list(updates.shape)}")
    be = BE()
    out = be.new_array(tuple(tensor.shape), tensor.dtype)
    if out.size:
        slots = out.size // max(plan.slice_size, 1)
        last = np.full(slots, -1, np.int64)
        if plan.slice_size:
            last[plan.rows // plan.slice_size] = np.arange(len(plan.rows))  # a duplicate slot: the last update
        k = be.programs.kernel("nd_gather", str(tensor.dtype.itemsize), "nd_update", op)
        be.launch1d(k, out.size, out.base_data, tensor.base_data, updates.base_data if updates.size else tensor.base_data,
                    _rows_buffer(be, last).base_data, np.int64(max(plan.slice_size, 1)))
    return out


_SCATTER_TYPES = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@family("nd_scatter", _SCATTER_TYPES + ("float16",))
def _nd_scatter_source(dtype: str) -> str:
    if dtype == "float16":
        return """
// nd_scatter on halves: each step's sum rounded to half, as a half accumulator's is
__kernel void nd_scatter(__global half* out, __global const half* updates, __global const long* start,
                         __global const long* order, long slice) {
  long i = get_global_id(0); long s = i / slice, j = i % slice;
  float acc = 0.0f; ushort h;  /* a half's bits: a half variable needs cl_khr_fp16 */
  for (long p = start[s]; p < start[s + 1]; p++) {
    acc += vload_half(order[p] * slice + j, updates);
    vstore_half_rte(acc, 0, (__private half*)&h); acc = vload_half(0, (__private const half*)&h);
  }
  vstore_half_rte(acc, i, out);
}
"""
    T = ctype(ok.as_dtype(dtype))
    return f"""
#pragma OPENCL FP_CONTRACT OFF
// out[slot, j] = the sum of updates[u, j] over the updates u of that slot, in their order
// (start/order: the updates grouped by slot, stably: deterministic sums)
__kernel void nd_scatter(__global {T}* out, __global const {T}* updates, __global const long* start,
                         __global const long* order, long slice) {{
  long i = get_global_id(0); long s = i / slice, j = i % slice;
  {T} acc = 0;
  for (long p = start[s]; p < start[s + 1]; p++) acc += updates[order[p] * slice + j];
  out[i] = acc;
}}
"""


def _grouped_sum(be: OpenCLBackend, op: str, dtype_name: str, out: Any, updates: Any, target: np.ndarray,
                 slice_: int) -> None:
    """out[slot, j] = the sum of updates[u, j] over the updates u whose target slot is
    ``slot``, in update order (the host groups them: a stable sort), zeros elsewhere."""
    slots = out.size // slice_
    order = np.argsort(target, kind="stable").astype(np.int64)
    start = np.zeros(slots + 1, np.int64)
    np.add.at(start, target + 1, 1)
    start = np.cumsum(start)
    k = be.programs.kernel("nd_scatter", dtype_name, "nd_scatter", op)
    be.launch1d(k, out.size, out.base_data, updates.base_data if updates.size else out.base_data,
                _rows_buffer(be, start).base_data, _rows_buffer(be, order if order.size else np.zeros(1, np.int64)).base_data,
                np.int64(slice_))


def mirror_pad(input: Any, paddings: np.ndarray, mode: str, **attrs: Any) -> Any:
    """The host maps each output element to the input element it copies (mirror_map); the
    device gathers them."""
    pads = mirror_pads("MirrorPad", tuple(input.shape), paddings, mode)
    be = BE()
    out = be.new_array(tuple(n + b + a for n, (b, a) in zip(input.shape, pads)), input.dtype)
    if out.size:
        k = be.programs.kernel("nd_gather", str(input.dtype.itemsize), "nd_gather", "MirrorPad")
        be.launch1d(k, out.size, out.base_data, input.base_data,
                    _rows_buffer(be, mirror_map(tuple(input.shape), pads, mode)).base_data, np.int64(1))
    return out


def _mirror_pad_grad(input: Any, paddings: np.ndarray, mode: str, T: ok.DType, **attrs: Any) -> Any:
    """Each gradient element adds into the input element its position copied: grouped sums
    in order (deterministic, no atomics)."""
    op = "MirrorPadGrad"
    p = np.asarray(paddings)
    if p.shape != (input.ndim, 2) or (p < 0).any():
        raise fail(op, f"paddings must be a non-negative [{input.ndim}, 2] matrix, got {p.tolist()}")
    shape = tuple(int(n - b - a) for n, (b, a) in zip(input.shape, p.tolist()))
    if any(n < 0 for n in shape):
        raise fail(op, f"paddings {p.tolist()} are more than the gradient's shape {list(input.shape)}")
    pads = mirror_pads(op, shape, p, mode)
    be = BE()
    out = be.new_array(shape, input.dtype)
    if out.size:
        _grouped_sum(be, op, T.name, out, input, mirror_map(shape, pads, mode), 1)
    return out


mirror_pad_grad = float32_compute(_mirror_pad_grad)


def _scatter_nd(indices: np.ndarray, updates: Any, shape: np.ndarray, T: ok.DType, **attrs: Any) -> Any:
    op = "ScatterNd"
    dims = tuple(int(d) for d in np.asarray(shape).reshape(-1))
    if np.asarray(shape).ndim != 1 or any(d < 0 for d in dims):
        raise fail(op, f"shape must be a vector of non-negative sizes, got {np.asarray(shape).tolist()}")
    plan = nd_plan(op, dims, indices, what="shape")
    if tuple(updates.shape) != plan.out_shape:
        raise fail(op, f"updates must have shape {list(plan.out_shape)}, got {list(updates.shape)}")
    be = BE()
    out = be.new_array(dims, updates.dtype)
    if out.size:
        slice_ = max(plan.slice_size, 1)
        _grouped_sum(be, op, T.name, out, updates, plan.rows // slice_, slice_)
    return out


scatter_nd = float32_compute(_scatter_nd)


def register_all() -> None:
    every = {"T": sorted(set(MOVABLE))}
    table: list[KernelRow] = [
        ("TopKV2", top_k_v2, {"T": list(_TOPK_TYPES) + ["float16"]}, ("k",)),
        ("GatherNd", gather_nd, {"Tparams": sorted(set(MOVABLE))}, ("indices",)),
        ("ScatterNd", scatter_nd, {"T": list(_SCATTER_TYPES) + ["float16"]}, ("indices", "shape")),
        ("TensorScatterUpdate", tensor_scatter_update, every, ("indices",)),
        ("MirrorPad", mirror_pad, every, ("paddings",)),
        ("MirrorPadGrad", mirror_pad_grad, {"T": list(_SCATTER_TYPES) + ["float16"]}, ("paddings",)),
    ]
    register_table(table)
