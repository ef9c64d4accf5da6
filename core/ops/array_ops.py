"""Specs, shape functions and gradients of the shape and data-movement ops."""

from __future__ import annotations

import numpy as np

from .. import shape_fns
from ..errors import ShapeError
from ..gradients import not_differentiable
from ..op_registry import register_op
from ..shapes import InferenceContext


def _reshape_shape(c: InferenceContext) -> None:
    data = c.input(0)
    wanted = c.input_tensor(1)
    if wanted is None:
        c.set_output(0, c.make_shape_from_shape_tensor(1))
        return
    dims = [int(d) for d in np.asarray(wanted).reshape(-1)]
    if sum(d == -1 for d in dims) > 1:
        raise ShapeError(f"op 'Reshape': can only infer one dimension, got shape {dims}", op="Reshape")
    n = c.num_elements(data)
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if n is not None:
            if known == 0 or n % known:
                raise ShapeError(f"op 'Reshape': cannot reshape a tensor of {n} elements into shape {dims}", op="Reshape")
            dims = [n // known if d == -1 else d for d in dims]
        else:
            c.set_output(0, c.make_shape([None if d == -1 else d for d in dims]))
            return
    elif n is not None and n != int(np.prod(dims, dtype=np.int64)):
        raise ShapeError(f"op 'Reshape': cannot reshape a tensor of {n} elements into shape {dims}", op="Reshape")
    c.set_output(0, c.make_shape(dims))


def _shape_shape(c: InferenceContext) -> None:
    c.set_output(0, c.vector(c.rank(c.input(0))))


def _pad_shape(c: InferenceContext) -> None:
    data = c.input(0)
    paddings = c.with_rank(c.input(1), 2)
    c.merge(c.dim(paddings, 1), c.make_dim(2))
    rank = c.rank(data) if c.rank_known(data) else c.value(c.dim(paddings, 0))
    if rank is None:
        c.set_output(0, c.unknown_shape())
        return
    data = c.with_rank(data, rank)
    pads = c.input_tensor(1)
    if pads is None:
        c.set_output(0, c.unknown_shape_of_rank(rank))
        return
    pads = np.asarray(pads).reshape(-1, 2)
    if pads.shape[0] != rank:
        raise ShapeError(f"op 'Pad': paddings must have {rank} rows for an input of rank {rank}, got {pads.shape[0]}", op="Pad")
    if (pads < 0).any():
        raise ShapeError(f"op 'Pad': paddings must be non-negative, got {pads.tolist()}", op="Pad")
    c.set_output(0, c.make_shape([c.add(c.dim(data, i), int(lo + hi)) for i, (lo, hi) in enumerate(pads)]))


def register_ops() -> None:
    register_op("Identity").input("input: T").output("output: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns a tensor with the same shape and contents as the input.")
    register_op("Reshape").input("tensor: T").input("shape: Tshape").output("output: T").attr("T: type").attr(
        "Tshape: {int32, int64} = DT_INT32"
    ).set_shape_fn(_reshape_shape).doc("Reshapes a tensor; one entry of shape may be -1 and is inferred.")
    register_op("Shape").input("input: T").output("output: out_type").attr("T: type").attr(
        "out_type: {int32, int64} = DT_INT32"
    ).set_shape_fn(_shape_shape).doc("Returns the shape of a tensor as a 1-D integer tensor.")
    register_op("Pad").input("input: T").input("paddings: Tpaddings").output("output: T").attr("T: type").attr(
        "Tpaddings: {int32, int64} = DT_INT32"
    ).set_shape_fn(_pad_shape).doc(
        "Pads a tensor with zeros.\n\npaddings: An [rank, 2] tensor: how many values to add before and after each dimension."
    )
    register_op("ZerosLike").input("x: T").output("y: T").attr("T: type").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns a tensor of zeros with the same shape and type as x.")
    register_op("OnesLike").input("x: T").output("y: T").attr(
        "T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, int64, complex64, complex128, bool}"
    ).set_shape_fn(shape_fns.unchanged_shape).doc("Returns a tensor of ones with the same shape and type as x.")
    register_op("StringToNumber").input("string_tensor: string").output("output: out_type").attr(
        "out_type: {float, int32} = DT_FLOAT"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Converts each string in the input Tensor to the specified numeric type.\n\n"
        "out_type: The numeric type to interpret each string in string_tensor as."
    )


def register_gradients() -> None:
    for name in ("Shape", "ZerosLike", "OnesLike", "StringToNumber"):
        not_differentiable(name)
