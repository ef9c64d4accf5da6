"""Specs, shape functions and gradients of TopKV2, GatherNd, ScatterNd and
TensorScatterUpdate, following TensorFlow's ``nn_ops.cc`` and ``array_ops.cc`` and their
gradients; also the checks every backend's kernels share (``top_k_count``, ``nd_plan``).

Part of the array ops (``opkernel.ops.array_ops`` registers them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext, output_size_from
from ..tensor import ops_module as _ops
from ._array_common import _scalar, _shape_of

__all__ = ["NdPlan", "nd_plan", "register_gradients", "register_ops", "top_k_count"]

_NONCOMPLEX = "{float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}"


def _fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


def top_k_count(shape: tuple[int, ...], k: Any) -> int:
    """TopKV2's k after TensorFlow's checks: a scalar in [0, the last dimension]."""
    op = "TopKV2"
    kk = np.asarray(k)
    if kk.shape != ():
        raise _fail(op, f"k must be a scalar, got shape {list(kk.shape)}")
    n = int(kk)
    if n < 0:
        raise _fail(op, f"Need k >= 0, got {n}")
    if not shape:
        raise _fail(op, "input must be at least 1-dimensional, got a scalar")
    if shape[-1] < n:
        raise _fail(op, f"input must have at least k columns. Had {shape[-1]}, needed {n}")
    return n


@dataclass(frozen=True)
class NdPlan:
    """An [..., d] index tensor into a tensor of ``shape``: ``rows`` the flat position of
    each index's first element (int64, one per index), ``slice_size`` the elements each
    index addresses, ``out_shape`` GatherNd's output shape."""

    rows: np.ndarray
    slice_size: int
    out_shape: tuple[int, ...]
    indices_shape: tuple[int, ...]


def nd_plan(op: str, shape: tuple[int, ...], indices: Any, what: str = "param shape") -> NdPlan:
    """The rows ``indices`` address in a tensor of ``shape``, after TensorFlow's checks
    (each index inside ``shape``; an error names the first one that is not)."""
    idx = np.asarray(indices)
    if idx.ndim < 1:
        raise _fail(op, f"indices must be at least a vector, got shape {list(idx.shape)}")
    depth = idx.shape[-1]
    if depth > len(shape):
        raise _fail(op, f"index innermost dimension length must be <= rank of the tensor; saw {depth} vs "
                        f"{len(shape)}")
    lead = shape[:depth]
    count = int(np.prod(idx.shape[:-1], dtype=np.int64))
    flat = idx.reshape(count, depth).astype(np.int64)  # depth 0: every index addresses the whole tensor
    bad: Any = np.nonzero(((flat < 0) | (flat >= np.array(lead, np.int64))).any(axis=1))[0] if flat.size else []
    if len(bad):
        k = int(bad[0])
        raise _fail(op, f"indices[{k}] = {flat[k].tolist()} does not index into {what} {list(shape)}")
    strides = np.ones(depth, np.int64)
    for d in range(depth - 2, -1, -1):
        strides[d] = strides[d + 1] * lead[d + 1]
    slice_size = int(np.prod(shape[depth:], dtype=np.int64))
    rows = flat @ strides if depth else np.zeros(flat.shape[0], np.int64)
    return NdPlan(rows * slice_size, slice_size, tuple(idx.shape[:-1]) + tuple(shape[depth:]), tuple(idx.shape))


# ---------------------------------------------------------------- shape functions


def _top_k_shape(c: InferenceContext) -> None:
    x = c.with_rank_at_least(c.input(0), 1)
    k = _scalar(c, 1)
    if k is not None and k < 0:
        raise c.error(f"Need k >= 0, got {k}")
    if x.dims is None:
        c.set_output(0, c.unknown_shape())
        c.set_output(1, c.unknown_shape())
        return
    last = x.dims[-1].value
    if k is not None and last is not None and last < k:
        raise c.error(f"input must have at least k columns. Had {last}, needed {k}")
    out = c.make_shape([d.value for d in x.dims[:-1]] + [k])
    c.set_output(0, out)
    c.set_output(1, out)


def _gather_nd_shape(c: InferenceContext) -> None:
    params, indices = c.input(0), c.with_rank_at_least(c.input(1), 1)
    if params.dims is None or indices.dims is None or indices.dims[-1].value is None:
        c.set_output(0, c.unknown_shape())
        return
    depth = indices.dims[-1].value
    if depth > len(params.dims):
        raise c.error(f"index innermost dimension length must be <= params rank; saw {depth} vs {len(params.dims)}")
    c.set_output(0, c.make_shape([d.value for d in indices.dims[:-1]] + [d.value for d in params.dims[depth:]]))


@output_size_from("shape")
def _scatter_nd_shape(c: InferenceContext) -> None:
    c.with_rank_at_least(c.input(0), 1)
    c.with_rank(c.input(2), 1)
    c.set_output(0, c.make_shape_from_shape_tensor(2))


def _tensor_scatter_shape(c: InferenceContext) -> None:
    c.with_rank_at_least(c.input(1), 1)
    c.set_output(0, c.input(0))


# ---------------------------------------------------------------- specs


def register_ops() -> None:
    register_op("TopKV2").input("input: T").input("k: Tk").output("values: T").output("indices: index_type").attr(
        "sorted: bool = true"
    ).attr(f"T: {_NONCOMPLEX}").attr("Tk: {int16, int32, int64} = DT_INT32").attr(
        "index_type: {int16, int32, int64} = DT_INT32"
    ).set_shape_fn(_top_k_shape).doc(
        "The k largest entries of each last-axis vector and their indices, largest first (NaN counts as the "
        "largest; of equal values the lower index comes first; sorted=false gives the same order)."
    )
    register_op("GatherNd").input("params: Tparams").input("indices: Tindices").output("output: Tparams").attr(
        "Tparams: type"
    ).attr("Tindices: {int16, int32, int64}").attr('bad_indices_policy: string = ""').set_shape_fn(
        _gather_nd_shape
    ).doc("Gathers slices of params at the multi-indices in the last axis of indices.")
    register_op("ScatterNd").input("indices: Tindices").input("updates: T").input("shape: Tindices").output(
        "output: T"
    ).attr("T: type").attr("Tindices: {int16, int32, int64}").attr('bad_indices_policy: string = ""').set_shape_fn(
        _scatter_nd_shape
    ).doc("A zero tensor of shape with updates summed into the slices the indices address (duplicates add).")
    register_op("TensorScatterUpdate").input("tensor: T").input("indices: Tindices").input("updates: T").output(
        "output: T"
    ).attr("T: type").attr("Tindices: {int16, int32, int64, uint16}").attr('bad_indices_policy: string = ""').set_shape_fn(
        _tensor_scatter_shape
    ).doc("A copy of tensor with the slices the indices address replaced by updates (a duplicate: the last one).")


# ---------------------------------------------------------------- gradients


def _top_k_grad(op: Any, grad: Any, _grad_indices: Any = None) -> list[Any]:
    """The values' gradient scattered back to the positions they came from (TensorFlow's
    _TopKGrad: flat positions row * n + index, one ScatterNd)."""
    ops = _ops()
    x, indices = op.inputs[0], op.outputs[1]
    shape = tuple(x.shape)
    if None in shape:
        raise InvalidArgumentError("TopKV2's gradient needs the input's shape known when it is built (trace with "
                                   f"an input_signature of known dimensions), got {list(shape)}", op="TopKV2")
    n = shape[-1]
    rows = int(np.prod(shape[:-1], dtype=np.int64))
    k = tuple(indices.shape)[-1]
    starts = np.arange(rows, dtype=np.int64).reshape(rows, 1) * n
    flat = ops.add(ops.reshape(ops.cast(indices, DstT="int64"), [rows, k]), starts)
    total = np.array([rows * n], np.int64)
    dense = ops.scatter_nd(ops.reshape(flat, [rows * k, 1]), ops.reshape(grad, [rows * k]), total)
    return [ops.reshape(dense, list(shape)), None]


def _gather_nd_grad(op: Any, grad: Any) -> list[Any]:
    params, indices = op.inputs
    return [_ops().scatter_nd(indices, grad, _shape_of(params, indices.dtype)), None]


def _scatter_nd_grad(op: Any, grad: Any) -> list[Any]:
    return [None, _ops().gather_nd(grad, op.inputs[0]), None]


def _tensor_scatter_update_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    _, indices, updates = op.inputs
    return [ops.tensor_scatter_update(grad, indices, ops.zeros_like(updates)), None, ops.gather_nd(grad, indices)]


def register_gradients() -> None:
    register_gradient("TopKV2")(_top_k_grad)
    register_gradient("GatherNd")(_gather_nd_grad)
    register_gradient("ScatterNd")(_scatter_nd_grad)
    register_gradient("TensorScatterUpdate")(_tensor_scatter_update_grad)
