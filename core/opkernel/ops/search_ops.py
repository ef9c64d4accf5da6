"""Specs, kernels and shape functions of LowerBound and UpperBound: a binary search
of each row of ``sorted_inputs`` for each value of the same row of ``values``,
following TensorFlow's ``array_ops.cc`` and ``searchsorted_op.cc``.

The kernel is C++'s ``std::lower_bound`` / ``std::upper_bound`` (which TensorFlow's
CPU kernel calls) run on every value at once: each step compares one element per
value, written with opkernel ops, so it serves every backend and agrees with
TensorFlow even where a row is not sorted or holds NaN (the comparisons decide, as in
C++).  A row of n elements takes ``n.bit_length()`` steps.

Part of the array ops (``opkernel.ops.array_ops`` registers them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import not_differentiable
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._array_common import named_errors

#: The element types the comparisons order (TensorFlow's CPU kernels: its real number types).
BOUND_TYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
               "float32", "float64"]


def _bound(op: str, upper: bool) -> Any:
    def kernel(sorted_inputs: Any, values: Any, out_type: Any) -> Any:
        s_shape, v_shape = [int(d) for d in sorted_inputs.shape], [int(d) for d in values.shape]
        for name, shape in (("sorted_inputs", s_shape), ("values", v_shape)):
            if len(shape) != 2:
                raise InvalidArgumentError(f"op {op!r}: {name} must be a matrix (a row per search), got shape {shape}",
                                           op=op)
        if s_shape[0] != v_shape[0]:
            raise InvalidArgumentError(
                f"op {op!r}: sorted_inputs and values must have the same number of rows, got {s_shape[0]} and {v_shape[0]}",
                op=op,
            )
        (rows, n), m = s_shape, v_shape[1]
        ops = _ops()
        if rows * m == 0 or n == 0:
            return ops.fill(np.asarray(v_shape, np.int64), np.zeros((), out_type.np))
        flat = ops.reshape(sorted_inputs, np.asarray([rows * n], np.int64))
        row_start = np.repeat(np.arange(rows, dtype=np.int64) * n, m).reshape(rows, m)
        lo = ops.fill(np.asarray(v_shape, np.int64), np.int64(0))
        count = ops.fill(np.asarray(v_shape, np.int64), np.int64(n))
        for _ in range(n.bit_length()):  # count at least halves each step: n >> bit_length(n) == 0
            step = ops.floor_div(count, np.int64(2))
            at = ops.add(lo, step)
            element = ops.gather_v2(flat, ops.add(ops.minimum(at, np.int64(n - 1)), row_start), np.int32(0))
            # lower_bound moves right past element < value, upper_bound past !(value < element)
            right = ops.logical_not(ops.less(values, element)) if upper else ops.less(element, values)
            right = ops.logical_and(right, ops.greater(count, np.int64(0)))
            lo = ops.select_v2(right, ops.add(at, np.int64(1)), lo)
            count = ops.select_v2(right, ops.sub(ops.sub(count, step), np.int64(1)), step)
        return lo if out_type.name == "int64" else ops.cast(lo, DstT=out_type)

    kernel.__name__ = op
    return kernel


def _bound_shape(c: InferenceContext) -> None:
    s, v = c.with_rank(c.input(0), 2), c.with_rank(c.input(1), 2)
    c.merge(c.dim(s, 0), c.dim(v, 0))
    c.set_output(0, v)


def register_generic_kernels() -> None:
    for name, upper in (("LowerBound", False), ("UpperBound", True)):
        register_kernel(name, backend="*", type_constraints={"T": BOUND_TYPES})(named_errors(name)(_bound(name, upper)))


def register_ops() -> None:
    for name, first in (("LowerBound", "not less than"), ("UpperBound", "greater than")):
        register_op(name).input("sorted_inputs: T").input("values: T").output("output: out_type").attr(
            "T: type"
        ).attr("out_type: {int32, int64} = DT_INT32").set_shape_fn(_bound_shape).doc(
            f"For each value, the index of the first element of its row of sorted_inputs that is {first} it "
            "(C++'s std::" + ("upper_bound" if name == "UpperBound" else "lower_bound") + ").\n\n"
            "sorted_inputs: [rows, n], each row sorted ascending.\nvalues: [rows, m], searched in the same row."
        )


def register_gradients() -> None:
    for name in ("LowerBound", "UpperBound"):
        not_differentiable(name)
