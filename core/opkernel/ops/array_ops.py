"""Specs, shape functions and gradients of the shape and data-movement ops.

The specs follow TensorFlow's ``array_ops.cc`` (names of inputs, outputs and
attrs, type lists and defaults).  Shape functions read integer inputs (shapes,
axes, paddings, begin/end) through ``c.input_tensor`` when they are known and
fall back to partial shapes when they are not.  ``strided_slice_plan`` holds
the mask logic of StridedSlice once, for the shape function, the kernels and
the gradient.

Each op's spec, shape function and gradient live together in one module:

* ``shape_ops``: the ops that rearrange a shape (Identity, Reshape, Shape,
  Transpose, ExpandDims, Squeeze, ConcatV2, Pack, Unpack, Split, Tile, BroadcastTo...);
* ``indexing_ops``: the ops that select, pad and scatter elements (Pad, Slice,
  StridedSlice, GatherV2, UnsortedSegmentSum, Where...);
* ``block_ops``: the ops that move blocks between space and depth or batch
  (DepthToSpace, SpaceToDepth, SpaceToBatchND, BatchToSpaceND);
* ``search_ops``: the binary searches (LowerBound, UpperBound);
* ``sparse_ops``: the ops that count or take (index, value) pairs (Bincount,
  DenseBincount, SparseSegmentSum, SparseSegmentMean, SparseToDense);
* ``creation_ops``: the ops that make tensors of new values (ZerosLike, OnesLike,
  Fill, Range, OneHot, StringToNumber);
* ``_array_common``: the helpers they share.

This module registers them, in that order, and is where backends and plugins
import the public names from (re-exported here).
"""

from __future__ import annotations

from typing import Any

from . import block_ops, creation_ops, indexing_ops, nd_ops, scan_ops, search_ops, shape_ops, sparse_ops
from .creation_ops import parse_numbers as parse_numbers, range_size
from .indexing_ops import StridedSlicePlan, strided_slice_plan
from .shape_ops import reshape_sizes

__all__ = ["StridedSlicePlan", "range_size", "register_gradients", "reshape_sizes", "register_ops", "stop_gradient", "strided_slice_plan"]

_FAMILIES = (shape_ops, indexing_ops, block_ops, search_ops, sparse_ops, creation_ops, scan_ops, nd_ops)


def stop_gradient(x: Any) -> Any:
    """``x`` unchanged, but no gradient flows back through it (the StopGradient op)."""
    from .. import ops

    return ops.stop_gradient(x)


def register_ops() -> None:
    for family in _FAMILIES:
        family.register_ops()


def register_gradients() -> None:
    for family in _FAMILIES:
        family.register_gradients()
