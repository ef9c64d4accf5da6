"""CUDA kernels of the shape and data-movement ops: the CPU plugin's bodies.

Every one is written against ``xp_of`` in opkernel_cpu, so on cupy arrays it
runs cupy.  Shapes, axes, paddings and slice specs are host-memory arguments
(numpy); Shape, Size, Rank and ConcatOffset compute on the host and their results
are uploaded by ``CudaBackend.as_output``; Range is built on the device after
its count is checked against the device's memory.  StringToNumber has no
CUDA kernel: strings cannot live on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import opkernel as ok
from opkernel.errors import ResourceExhaustedError
from opkernel.ops.array_ops import range_size
from opkernel.ops.scan_ops import linspace_count
from opkernel_cpu import array_kernels as cpu
from opkernel_cpu.xp import xp_of

from . import runtime

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]

#: Ops of the array family without a CUDA kernel, and why.
CPU_ONLY = {"StringToNumber": "strings cannot live on a CUDA device; run it on cpu and move the numbers"}


def identity(input: Any, **attrs: Any) -> Any:
    return input


def zeros_like(x: Any, **attrs: Any) -> Any:
    return xp_of(x).zeros_like(x)


def ones_like(x: Any, **attrs: Any) -> Any:
    return xp_of(x).ones_like(x)


#: The dtypes ``cupy.add.at`` (the CPU body's scatter-add) takes.
_ADD_AT = frozenset(["int32", "int64", "uint32", "uint64", "float16", "float32", "float64"])
#: The type another dtype's segments are summed in: complex as two real sums; the small
#: integers in 32 bits, then wrapped back (modular, as numpy's add.at in the narrow type).
_SUMMED_AS = {"complex64": "float32", "complex128": "float64",
              "int8": "int32", "int16": "int32", "uint8": "uint32", "uint16": "uint32"}


def unsorted_segment_sum(data: Any, segment_ids: Any, num_segments: Any, **attrs: Any) -> Any:
    """The CPU body, whose ``add.at`` cupy has for 32/64-bit numbers and float16 only."""
    if xp_of(data) is np or data.dtype.name in _ADD_AT or data.dtype.name not in _SUMMED_AS:
        return cpu.unsorted_segment_sum(data, segment_ids, num_segments, **attrs)
    return summed_as_wider(data, segment_ids, num_segments)


def summed_as_wider(data: Any, segment_ids: Any, num_segments: Any) -> Any:
    xp, wide = xp_of(data), _SUMMED_AS[data.dtype.name]
    if data.dtype.kind == "c":
        real = cpu.unsorted_segment_sum(xp.ascontiguousarray(data.real), segment_ids, num_segments)
        imag = cpu.unsorted_segment_sum(xp.ascontiguousarray(data.imag), segment_ids, num_segments)
        out = xp.empty(real.shape, data.dtype)
        out.real, out.imag = real, imag
        return out
    return cpu.unsorted_segment_sum(data.astype(wide), segment_ids, num_segments).astype(data.dtype)


def range_(start: Any, limit: Any, delta: Any, Tidx: ok.DType, **attrs: Any) -> Any:
    """Range computed on the device (its scalars are host memory).  The CPU body builds
    the values on the host, where a count from an input's value (``range(0, 2**40)``) is
    terabytes the host bound does not cover on a device backend: here the count is
    checked against the device's memory first, and nothing is built on the host."""
    cp = runtime.STATE.cupy
    if cp is None or Tidx.name == "bfloat16":  # the table over numpy (tests); cupy has no bfloat16
        return cpu.range_(start, limit, delta, Tidx=Tidx, **attrs)
    return range_on(cp, start, limit, delta, Tidx, _device_bytes())


def _device_bytes() -> int | None:
    try:
        return int(runtime.STATE.device.mem_info[1])
    except Exception:  # no context in this thread: cupy's own allocation error then
        return None


def range_on(xp: Any, start: Any, limit: Any, delta: Any, Tidx: ok.DType, device_bytes: int | None) -> Any:
    """The CPU body's checks and values (computed in Tidx, as TensorFlow does), built by ``xp``
    after refusing a count past ``device_bytes``."""
    for name, v in (("start", start), ("limit", limit), ("delta", delta)):
        if np.ndim(v) != 0:
            raise cpu._error("Range")(f"'{name}' must be a scalar, got shape {list(np.shape(v))}")
    s, l, d = (np.asarray(v, dtype=Tidx.np).reshape(())[()] for v in (start, limit, delta))
    n = range_size(s, l, d, cpu._error("Range"))
    nbytes = n * Tidx.size
    if device_bytes is not None and nbytes > device_bytes:
        raise ResourceExhaustedError(
            f"op 'Range': start={s}, limit={l}, delta={d} give {n} elements of {Tidx.name} ({nbytes} bytes), "
            f"more than the CUDA device holds ({device_bytes} bytes); input 'limit' and input 'delta' set the count",
            op="Range", backend="cuda", requested_bytes=nbytes,
        )
    # the device array on the left: a numpy scalar on the left would try to convert it
    if Tidx.is_integer:
        return (xp.arange(n, dtype=np.int64) * int(d) + int(s)).astype(Tidx.np)
    return (xp.arange(n).astype(Tidx.np) * d + s).astype(Tidx.np)


def lin_space(start: Any, stop: Any, num: Any, T: ok.DType, **attrs: Any) -> Any:
    """Built on the device (its scalars are host memory): start + step * i in T, the last
    element exactly stop, as TensorFlow's kernel."""
    cp = runtime.STATE.cupy
    if cp is None or T.name == "bfloat16":  # the table over numpy (tests); cupy has no bfloat16
        return cpu.lin_space(start, stop, num, T=T, **attrs)
    n = linspace_count(start, stop, num)
    t = np.dtype(T.np).type
    s, e = t(np.asarray(start).reshape(())[()]), t(np.asarray(stop).reshape(())[()])
    if n == 1:
        return cp.full((1,), s, T.np)
    step = t((e - s) / t(n - 1))
    out = (cp.arange(n).astype(T.np) * step + s).astype(T.np)
    out[-1] = e
    return out


def rows() -> list[Row]:
    return [
        ("Identity", identity, None, ()),
        ("StopGradient", identity, None, ()),
        ("Reshape", cpu.reshape, None, ("shape",)),
        ("Shape", cpu.shape, None, ()),
        ("Size", cpu.size, None, ()),
        ("Rank", cpu.rank, None, ()),
        ("Transpose", cpu.transpose, None, ("perm",)),
        ("InvertPermutation", cpu.invert_permutation, None, ()),
        ("ExpandDims", cpu.expand_dims, None, ("dim",)),
        ("Squeeze", cpu.squeeze, None, ()),
        ("Pad", cpu.pad, None, ("paddings",)),
        ("BroadcastTo", cpu.broadcast_to, None, ("shape",)),
        ("Tile", cpu.tile, None, ("multiples",)),
        ("Fill", cpu.fill, None, ("dims",)),
        ("ZerosLike", zeros_like, None, ()),
        ("OnesLike", ones_like, None, ()),
        ("ConcatV2", cpu.concat_v2, None, ("axis",)),
        ("ConcatOffset", cpu.concat_offset, None, ("concat_dim", "shape")),
        ("Pack", cpu.pack, None, ()),
        ("Unpack", cpu.unpack, None, ()),
        ("Split", cpu.split, None, ("split_dim",)),
        ("Slice", cpu.slice_, None, ("begin", "size")),
        ("StridedSlice", cpu.strided_slice, None, ("begin", "end", "strides")),
        ("StridedSliceGrad", cpu.strided_slice_grad, None, ("shape", "begin", "end", "strides")),
        ("GatherV2", cpu.gather_v2, None, ("axis",)),
        ("UnsortedSegmentSum", unsorted_segment_sum, None, ("num_segments",)),
        ("OneHot", cpu.one_hot, None, ("depth",)),
        ("Range", range_, None, ("start", "limit", "delta")),
        ("Where", cpu.where, None, ()),
        ("ReverseV2", cpu.reverse_v2, None, ("axis",)),
        ("MatrixBandPart", cpu.matrix_band_part, {"T": cpu._BAND_TYPES}, ("num_lower", "num_upper")),
        ("Cumsum", cpu.cumsum, {"T": cpu._SCAN_TYPES}, ("axis",)),
        ("Cumprod", cpu.cumprod, {"T": cpu._SCAN_TYPES}, ("axis",)),
        ("LinSpace", lin_space, None, ("start", "stop", "num")),
        ("TopKV2", cpu.top_k_v2, {"T": cpu._TOPK_TYPES}, ("k",)),
        ("MirrorPad", cpu.mirror_pad, None, ("paddings",)),
        ("MirrorPadGrad", cpu.mirror_pad_grad, {"T": cpu._BAND_TYPES}, ("paddings",)),
        ("GatherNd", cpu.gather_nd, None, ("indices",)),
        ("ScatterNd", cpu.scatter_nd, {"T": cpu._BAND_TYPES}, ("indices", "shape")),
        ("TensorScatterUpdate", cpu.tensor_scatter_update, None, ("indices",)),
    ]
