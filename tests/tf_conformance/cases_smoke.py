"""A few cases across the suite's machinery: list inputs and outputs, Ref inputs,
gradients, a call TensorFlow rejects.  The op families' own tables are in the
other ``cases_*.py`` modules; these stay as a quick end-to-end check of the framework."""

from __future__ import annotations

import numpy as np

from case import Case, noncontiguous, rng

DIFFERENCES: dict[str, str] = {}
EXEMPT: dict[str, str] = {}


def cases() -> list[Case]:
    r = rng(1)
    x = r.standard_normal((3, 4)).astype(np.float32)
    y = r.standard_normal((3, 4)).astype(np.float32)
    return [
        Case("Add/smoke_float32_grad", "Add", (x, y), grad=True, seed=1),
        Case("Add/smoke_int32_wraps", "Add",
             (np.array([2**31 - 1, -2**31], np.int32), np.array([1, -1], np.int32))),
        Case("Mul/smoke_noncontiguous", "Mul", (noncontiguous(x), y)),
        Case("MatMul/smoke_bad_inner_dim", "MatMul", (x, y)),
        Case("Split/smoke_list_output", "Split", (np.int32(1), x), {"num_split": 2}, grad=True, seed=2),
        Case("Pack/smoke_list_input", "Pack", ([x, y, x],), {"axis": 1}, grad=True, seed=3),
        Case("Cast/smoke_float_to_int32", "Cast", (np.array([1.7, -1.7, 0.0], np.float32),),
             {"DstT": "int32"}),
        Case("AssignAdd/smoke", "AssignAdd", (x, y)),
        Case("ApplyGradientDescent/smoke", "ApplyGradientDescent", (x, np.float32(0.5), y)),
    ]
