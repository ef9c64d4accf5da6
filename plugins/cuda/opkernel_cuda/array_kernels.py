"""CUDA kernels of the shape and data-movement ops: the CPU plugin's bodies.

Every one is written against ``xp_of`` in opkernel_cpu, so on cupy arrays it
runs cupy.  Shapes, axes, paddings and slice specs are host-memory arguments
(numpy); Shape, Size, Rank, Range and ConcatOffset compute on the host and
their results are uploaded by ``CudaBackend.as_output``.  StringToNumber has no
CUDA kernel: strings cannot live on the device.
"""

from __future__ import annotations

from typing import Any

from opkernel_cpu import array_kernels as cpu
from opkernel_cpu.xp import xp_of

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]

#: Ops of the array family without a CUDA kernel, and why.
CPU_ONLY = {"StringToNumber": "strings cannot live on a CUDA device; run it on cpu and move the numbers"}


def identity(input: Any, **attrs: Any) -> Any:
    return input


def zeros_like(x: Any, **attrs: Any) -> Any:
    return xp_of(x).zeros_like(x)


def ones_like(x: Any, **attrs: Any) -> Any:
    return xp_of(x).ones_like(x)


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
        ("UnsortedSegmentSum", cpu.unsorted_segment_sum, None, ("num_segments",)),
        ("OneHot", cpu.one_hot, None, ("depth",)),
        ("Range", cpu.range_, None, ("start", "limit", "delta")),
        ("Where", cpu.where, None, ()),
    ]
