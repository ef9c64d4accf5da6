"""Conformance cases of the reductions, products, AddN, Select/SelectV2, ClipByValue,
ArgMax/ArgMin and the state ops (Assign*, Apply*).

Numpy only (see case.py).  Sizes are small except the few ``big_*`` cases, which reach
the OpenCL backend's multi-pass tree reduction (rows longer than 4096 elements), its
column-block kernel and the packed MatMul (more than 32**3 multiply-adds).

The state ops take their ``Ref`` inputs (``var``, ``m``, ``v``, ``accum``, ``ref``) as
plain arrays: the recorder runs TensorFlow's resource equivalents on tf.Variables made
from them (ResourceApply*, Assign{,Add,Sub}VariableOp) and the compared outputs are the
op's output followed by the final value of every Ref input, in the OpDef's order.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from opkernel.ops.data_flow_ops import QUEUE_OPS
from opkernel.ops.lookup_ops import LOOKUP_OPS
from opkernel.ops.resource_variable_ops import RESOURCE_VARIABLE_OPS

from case import Case, noncontiguous, rng

try:  # bfloat16 arrays are ml_dtypes' (a dependency of TensorFlow and of opkernel's bfloat16)
    import ml_dtypes  # noqa: F401

    _BF16: tuple[str, ...] = ("bfloat16",)
except ImportError:  # pragma: no cover - the recording then has bfloat16 cases the tests skip
    _BF16 = ()

FLOATS = ("float16", "float32", "float64")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")
INTS = SIGNED + UNSIGNED
COMPLEX = ("complex64", "complex128")
REAL = FLOATS + _BF16 + INTS
NUMBER = REAL + COMPLEX

NAN, INF = float("nan"), float("inf")


def _a(values: Any, dtype: str) -> np.ndarray:
    return np.array(values, dtype=np.dtype(dtype))


def rand(dtype: str, shape: tuple[int, ...], seed: int, lo: int = -9, hi: int = 10) -> np.ndarray:
    """Random values of ``dtype`` that every dtype holds exactly (small integers for the
    integer types, normal values for the floats)."""
    g = rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return g.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        return g.integers(0 if dt.kind == "u" else lo, hi, shape).astype(dt)
    if dt.kind == "c":
        return (g.standard_normal(shape) + 1j * g.standard_normal(shape)).astype(dt)
    return g.standard_normal(shape).astype(dt)


def _idx(values: Any, dtype: str = "int32") -> np.ndarray:
    return np.array(values, dtype=dtype)


# ---------------------------------------------------------------- Sum Prod Mean Max Min


def _reduction_cases(op: str, dtypes: tuple[str, ...]) -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(dtypes):
        # small positive integers keep Prod of 4 elements within int8
        x = rand(dt, (3, 4), 10 + i, -3, 4) if op == "Prod" else rand(dt, (3, 4), 10 + i)
        out.append(Case(f"{op}/{dt}_axis1", op, (x, _idx(1))))
        out.append(Case(f"{op}/{dt}_all_keep", op, (x, _idx([0, 1])), {"keep_dims": True}))
    f32 = rand("float32", (2, 3, 4), 1)
    out += [
        Case(f"{op}/float32_axis0_grad", op, (f32, _idx(0)), grad=True, seed=2),
        Case(f"{op}/float64_axes_0_2_keep_grad", op, (f32.astype(np.float64), _idx([0, 2])), {"keep_dims": True},
             grad=True, seed=3),
        Case(f"{op}/float32_negative_duplicate_axes", op, (f32, _idx([-1, 2, 0]))),
        Case(f"{op}/float32_no_axes", op, (f32, _idx([], "int32"))),
        Case(f"{op}/int64_tidx", op, (rand("int32", (2, 3, 4), 4), _idx([1], "int64"))),
        Case(f"{op}/scalar_no_axes", op, (_a(2.5, "float32"), _idx([]))),
        Case(f"{op}/scalar_axis0_rejected", op, (_a(2.5, "float32"), _idx(0))),
        Case(f"{op}/empty_reduced_float32", op, (np.zeros((0, 3), np.float32), _idx(0))),
        Case(f"{op}/empty_reduced_int32", op, (np.zeros((3, 0), np.int32), _idx(1))),
        Case(f"{op}/empty_kept_float32", op, (np.zeros((0, 3), np.float32), _idx(1))),
        Case(f"{op}/nan_inf_float32", op, (_a([[NAN, 1, 2], [INF, -INF, 1], [INF, 1, 2], [-0.0, -0.0, -0.0]], "float32"),
                                           _idx(1))),
        Case(f"{op}/signed_zero_float32", op, (_a([[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]], "float32"), _idx(1))),
        Case(f"{op}/axis_out_of_range", op, (f32, _idx(3))),
        Case(f"{op}/axis_below_range", op, (f32, _idx(-4))),
        Case(f"{op}/axes_matrix_rejected", op, (f32, _idx([[0], [1]]))),
        Case(f"{op}/noncontiguous_float32", op, (noncontiguous(rand("float32", (4, 5), 5)), _idx(1))),
        Case(f"{op}/noncontiguous_int32_axis0", op, (noncontiguous(rand("int32", (4, 5), 6)), _idx(0))),
    ]
    if op in ("Sum", "Mean", "Prod"):
        out.append(Case(f"{op}/complex64_axis0_keep", op, (rand("complex64", (3, 4), 7), _idx(0)), {"keep_dims": True}))
        out.append(Case(f"{op}/complex128_grad", op, (rand("complex128", (3, 4), 9), _idx(1)), grad=True, seed=8))
    if op in ("Sum", "Mean", "Prod", "Max", "Min"):
        # a long row: OpenCL's two-pass tree reduction; a tall one: its column kernel
        long_row = rand("float32", (1, 5000), 20) * (0.01 if op == "Prod" else 1) + (1 if op == "Prod" else 0)
        out.append(Case(f"{op}/big_long_row_float32", op, (long_row.astype(np.float32), _idx(1)),
                        tol=(1e-4, 1e-4), why="5000 float32 terms summed in a different order"))
        out.append(Case(f"{op}/big_columns_int32", op, (rand("int32", (300, 40), 21, -2, 3), _idx(0))))
    return out


def _with_nan(a: np.ndarray, at: int) -> np.ndarray:
    a = a.copy()
    a[0, at] = NAN
    return a


def _signed_zeros(n: int, seed: int) -> np.ndarray:
    return np.where(rng(seed).integers(0, 2, (2, n)) == 1, -0.0, 0.0).astype(np.float32)


def _reduce_specials() -> list[Case]:
    i8 = np.full((4,), 100, np.int8)
    return [
        Case("Sum/int32_wraps", "Sum", (_a([2**31 - 1, 1, 5], "int32"), _idx(0))),
        Case("Sum/int8_wraps", "Sum", (i8, _idx(0))),
        Case("Sum/uint8_wraps", "Sum", (np.full((3,), 200, np.uint8), _idx(0))),
        Case("Sum/int64_wraps", "Sum", (_a([2**63 - 1, 2], "int64"), _idx(0))),
        Case("Sum/float16_many", "Sum", (rand("float16", (300,), 30), _idx(0)), tol=(2e-2, 2e-1),
             why="300 float16 terms: TensorFlow and opkernel accumulate in float32 but round at different points"),
        Case("Sum/inf_minus_inf", "Sum", (_a([INF, -INF], "float64"), _idx(0))),
        Case("Prod/int32_wraps", "Prod", (_a([65536, 65536, 3], "int32"), _idx(0))),
        Case("Prod/int8_wraps", "Prod", (_a([16, 16, -3], "int8"), _idx(0))),
        Case("Prod/zeros_grad", "Prod", (_a([[0.0, 2.0, 3.0], [0.0, 0.0, 4.0], [1.5, 2.0, -1.0]], "float32"), _idx(1)),
             grad=True, seed=31),
        Case("Prod/zero_times_inf", "Prod", (_a([0.0, INF], "float32"), _idx(0))),
        Case("Mean/int32_truncates_toward_zero", "Mean", (_a([[-3, -4], [3, 4], [-7, 0]], "int32"), _idx(1))),
        Case("Mean/uint8_wide_sum", "Mean", (_a([200, 101], "uint8"), _idx(0))),
        Case("Mean/int8_negative", "Mean", (_a([-128, -127], "int8"), _idx(0))),
        Case("Mean/int64_large", "Mean", (_a([2**62, 2**62, 2**62], "int64"), _idx(0))),
        Case("Mean/float16_grad", "Mean", (rand("float16", (3, 4), 32), _idx(1)), grad=True, seed=33),
        Case("Max/ties_grad", "Max", (_a([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, -2.0]], "float32"), _idx(1)),
             grad=True, seed=34),
        Case("Min/ties_grad", "Min", (_a([[1.0, 1.0, 3.0], [2.0, 2.0, 2.0], [-1.0, 0.0, -2.0]], "float64"), _idx(1)),
             grad=True, seed=35),
        Case("Max/nan_grad", "Max", (_a([[NAN, 1.0, 2.0], [2.0, 2.0, NAN], [INF, 1.0, INF]], "float32"), _idx(1)),
             grad=True, seed=38),
        Case("Min/inf_grad", "Min", (_a([[-INF, 1.0, -INF], [0.0, -0.0, 1.0]], "float64"), _idx(1)), grad=True, seed=39),
        Case("Sum/empty_grad", "Sum", (np.zeros((0, 3), np.float32), _idx(0)), grad=True, seed=40),
        Case("Mean/empty_grad", "Mean", (np.zeros((2, 0), np.float64), _idx(1)), grad=True, seed=41),
        Case("Prod/negative_zero_grad", "Prod", (_a([[-0.0, 2.0, -3.0], [INF, 0.0, 1.0]], "float64"), _idx(1)), grad=True,
             seed=42),
        Case("Max/all_nan", "Max", (_a([[NAN, NAN], [NAN, 1.0]], "float32"), _idx(1))),
        Case("Min/all_nan", "Min", (_a([[NAN, NAN], [1.0, NAN]], "float32"), _idx(1))),
        Case("Max/int_extremes", "Max", (_a([[-128, -128], [127, -1]], "int8"), _idx(1))),
        Case("Min/uint64_extremes", "Min", (_a([[2**64 - 1, 2**64 - 1], [0, 5]], "uint64"), _idx(1))),
        Case("Max/float16_inf", "Max", (_a([[-INF, -INF], [65504, INF]], "float16"), _idx(1))),
        Case("Sum/float16_partial_overflow", "Sum", (_a([60000, 60000, -60000], "float16"), _idx(0))),
        Case("Mean/float16_partial_overflow", "Mean", (_a([60000, 60000], "float16"), _idx(0))),
        Case("Prod/float16_partial_overflow", "Prod", (_a([1000, 1000, 0.001], "float16"), _idx(0))),
        Case("Sum/uint64_wraps", "Sum", (_a([2**64 - 1, 2], "uint64"), _idx(0))),
        Case("Mean/uint64_wraps", "Mean", (_a([2**64 - 1, 3], "uint64"), _idx(0))),
        Case("Mean/int8_big_columns", "Mean", (np.full((300, 40), -128, np.int8), _idx(0))),
        Case("Sum/bfloat16_many", "Sum", (np.ones((300,), np.float32).astype(np.dtype("bfloat16")) if _BF16
                                          else np.ones((300,), np.float32), _idx(0)),
             why="a bfloat16 sum of 300 ones: 300 if accumulated in float32, 256 if in bfloat16"),
        # long rows of +-0.0: TensorFlow keeps the later of equal values, through OpenCL's tree too
        Case("Max/big_signed_zeros", "Max", (_signed_zeros(6000, 36), _idx(1))),
        Case("Max/big_nan_in_long_row", "Max", (_with_nan(rand("float32", (2, 6000), 43), 3001), _idx(1))),
        Case("Min/big_nan_in_long_row", "Min", (_with_nan(rand("float64", (2, 6000), 44), 17), _idx(1))),
        Case("Mean/big_int32_long_row", "Mean", (np.full((1, 9000), 2**31 - 1, np.int32), _idx(1))),
        Case("Sum/big_int8_wraps_columns", "Sum", (np.full((300, 20), 101, np.int8), _idx(0))),
        Case("Prod/big_uint8_columns", "Prod", (rand("uint8", (300, 20), 45, 0, 3), _idx(0))),
        Case("Min/big_signed_zeros", "Min", (_signed_zeros(6000, 37), _idx(1))),
    ]


def _bool_cases(op: str) -> list[Case]:
    b = rand("bool", (3, 4), 40)
    return [
        Case(f"{op}/axis1", op, (b, _idx(1))),
        Case(f"{op}/axis0_keep", op, (b, _idx(0)), {"keep_dims": True}),
        Case(f"{op}/all_axes_int64", op, (rand("bool", (2, 3, 2), 41), _idx([0, -1, 1], "int64"))),
        Case(f"{op}/no_axes", op, (b, _idx([]))),
        Case(f"{op}/scalar", op, (np.array(True), _idx([]))),
        Case(f"{op}/empty_reduced", op, (np.zeros((0, 2), bool), _idx(0))),
        Case(f"{op}/all_true_false", op, (np.array([[True, True], [False, False]]), _idx(1))),
        Case(f"{op}/noncontiguous", op, (noncontiguous(rand("bool", (3, 4), 42)), _idx(1))),
        Case(f"{op}/axis_out_of_range", op, (b, _idx(2))),
        Case(f"{op}/float_input_rejected", op, (rand("float32", (3,), 43), _idx(0))),
        Case(f"{op}/big_long_row", op, (np.ones((1, 5000), bool) if op == "All" else np.zeros((1, 5000), bool), _idx(1))),
    ]


# ---------------------------------------------------------------- ArgMax ArgMin


def _arg_cases(op: str) -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(REAL + ("bool",)):
        out.append(Case(f"{op}/{dt}_axis1", op, (rand(dt, (3, 5), 50 + i), _idx(1))))
    f = rand("float32", (2, 3, 4), 60)
    out += [
        Case(f"{op}/axis0", op, (f, _idx(0))),
        Case(f"{op}/axis_negative", op, (f, _idx(-1))),
        Case(f"{op}/tidx_int64", op, (f, _idx(1, "int64"))),
        Case(f"{op}/output_int32", op, (f, _idx(2)), {"output_type": "int32"}),
        Case(f"{op}/ties_first", op, (_a([[1, 3, 3, 0], [2, 2, 2, 2], [0, -1, -1, 0]], "int32"), _idx(1))),
        Case(f"{op}/nan", op, (_a([[NAN, 1, 2], [1, NAN, 0], [NAN, NAN, NAN], [2, 1, NAN]], "float32"), _idx(1))),
        Case(f"{op}/inf", op, (_a([[-INF, -INF], [INF, INF], [-INF, INF], [INF, -INF]], "float64"), _idx(1))),
        Case(f"{op}/signed_zero", op, (_a([[-0.0, 0.0], [0.0, -0.0]], "float32"), _idx(1))),
        Case(f"{op}/int_extremes", op, (_a([[-128, -128, 127], [127, 127, -128]], "int8"), _idx(1))),
        Case(f"{op}/int64_extremes", op, (_a([[-2**63, 2**63 - 1, -2**63], [2**63 - 1, -2**63, 2**63 - 1]], "int64"),
                                          _idx(1))),
        Case(f"{op}/uint64_extremes", op, (_a([[0, 2**64 - 1, 2**64 - 1], [2**64 - 1, 0, 0]], "uint64"), _idx(1))),
        Case(f"{op}/float16_nan", op, (_a([[NAN, 1, 2], [-65504, NAN, -65504], [NAN, NAN, NAN]], "float16"), _idx(1))),
        Case(f"{op}/bool_ties", op, (np.array([[True, True], [False, False], [False, True]]), _idx(1))),
        Case(f"{op}/complex_rejected", op, (rand("complex64", (2, 3), 63), _idx(1))),
        Case(f"{op}/dimension_float_rejected", op, (f, np.array(1.0, np.float32))),
        Case(f"{op}/scalar_rejected", op, (_a(1.0, "float32"), _idx(0))),
        Case(f"{op}/empty_reduced_rejected", op, (np.zeros((3, 0), np.float32), _idx(1))),
        Case(f"{op}/empty_kept", op, (np.zeros((0, 3), np.float32), _idx(1))),
        Case(f"{op}/axis_out_of_range", op, (f, _idx(3))),
        Case(f"{op}/axis_vector_rejected", op, (f, _idx([1]))),
        Case(f"{op}/noncontiguous", op, (noncontiguous(rand("float32", (4, 6), 61)), _idx(1))),
        Case(f"{op}/big_long_row", op, (rand("float32", (2, 5000), 62), _idx(1))),
    ]
    return out


# ---------------------------------------------------------------- MatMul BatchMatMul


def _matmul_cases() -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(("float16", "float32", "float64", "int32", "int64") + COMPLEX + _BF16):
        out.append(Case(f"MatMul/{dt}", "MatMul", (rand(dt, (3, 4), 70 + i, -5, 6), rand(dt, (4, 2), 80 + i, -5, 6)),
                        tol=(2e-2, 5e-2) if dt in ("float16", "bfloat16") else None,
                        why="16-bit floats: the products are rounded at different points"))
    a, b = rand("float32", (3, 4), 90), rand("float32", (4, 5), 91)
    out += [
        Case("MatMul/transpose_a", "MatMul", (a.T.copy(), b), {"transpose_a": True}),
        Case("MatMul/transpose_b", "MatMul", (a, b.T.copy()), {"transpose_b": True}),
        Case("MatMul/transpose_both_grad", "MatMul", (a.T.copy(), b.T.copy()), {"transpose_a": True, "transpose_b": True},
             grad=True, seed=92),
        Case("MatMul/float64_grad", "MatMul", (a.astype(np.float64), b.astype(np.float64)), grad=True, seed=93),
        Case("MatMul/complex128_grad", "MatMul", (rand("complex128", (2, 3), 109), rand("complex128", (3, 2), 110)),
             grad=True, seed=111),
        Case("MatMul/complex128_transpose_a", "MatMul", (rand("complex128", (3, 2), 94), rand("complex128", (3, 2), 95)),
             {"transpose_a": True}),
        Case("MatMul/grad_a_hint", "MatMul", (a, b), {"grad_a": True}),
        Case("MatMul/empty_inner_grad", "MatMul", (np.zeros((3, 0), np.float32), np.zeros((0, 2), np.float32)), grad=True,
             seed=107),
        Case("MatMul/nan_grad", "MatMul", (_a([[NAN, 1.0], [0.0, 2.0]], "float64"), _a([[1.0, 0.0], [INF, 1.0]], "float64")),
             grad=True, seed=108),
        Case("MatMul/empty_inner", "MatMul", (np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32))),
        Case("MatMul/empty_rows", "MatMul", (np.zeros((0, 3), np.float32), b[:3])),
        Case("MatMul/nan_inf", "MatMul", (_a([[NAN, 1], [INF, 0], [1, 1]], "float32"), _a([[1, 0], [0, 1]], "float32"))),
        Case("MatMul/int32_wraps", "MatMul", (_a([[2**30, 2**30]], "int32"), _a([[2], [1]], "int32"))),
        Case("MatMul/noncontiguous", "MatMul", (noncontiguous(a), noncontiguous(b))),
        Case("MatMul/inner_mismatch", "MatMul", (a, a)),
        Case("MatMul/rank3_rejected", "MatMul", (rand("float32", (2, 3, 4), 97), b)),
        Case("MatMul/vector_rejected", "MatMul", (rand("float32", (4,), 98), b)),
        Case("MatMul/big_packed_float32", "MatMul", (rand("float32", (40, 50), 99), rand("float32", (50, 36), 100)),
             tol=(1e-4, 1e-4), why="50-term float32 dot products summed in a different order"),
        Case("MatMul/big_packed_int64", "MatMul", (rand("int64", (33, 40), 101), rand("int64", (40, 30), 102))),
        Case("MatMul/float16_long_inner", "MatMul", (rand("float16", (2, 300), 103), rand("float16", (300, 2), 104)),
             tol=(2e-2, 1e-1), why="300 float16 products: accumulated in float32 on both sides, rounded once"),
        Case("MatMul/float16_overflow", "MatMul", (_a([[300, 300]], "float16"), _a([[300], [-300]], "float16"))),
        Case("MatMul/uint8_rejected", "MatMul", (rand("uint8", (2, 2), 105), rand("uint8", (2, 2), 106))),
        Case("MatMul/dtype_mismatch", "MatMul", (a, b.astype(np.float64))),
    ]
    return out


_EINSUMS: list[tuple[str, list[tuple[int, ...]], bool]] = [
    # equation, operand shapes, compare gradients
    ("ij,jk->ik", [(3, 4), (4, 2)], True),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)], True),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)], True),
    ("abc,cd->abd", [(2, 3, 4), (4, 5)], True),
    ("ij->ji", [(3, 4)], True),
    ("ij->", [(3, 4)], True),
    ("ij->j", [(3, 4)], True),
    ("ii->i", [(4, 4)], True),
    ("ii->", [(4, 4)], True),
    ("iij,jk->ik", [(3, 3, 4), (4, 2)], True),
    ("i,i->", [(5,), (5,)], True),
    ("i,j->ij", [(3,), (4,)], True),
    ("ij,kj->", [(3, 4), (5, 4)], True),
    ("ab,ab->ab", [(3, 4), (3, 4)], True),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)], True),
    ("a...,a->...", [(3, 2, 4), (3,)], True),
    ("...ij->...ji", [(2, 3, 4)], True),
    ("ij,jk->ki", [(3, 4), (4, 2)], True),
    ("->", [()], False),
    (",i->i", [(), (3,)], True),
]


def _einsum_cases() -> list[Case]:
    out: list[Case] = []
    for i, (eq, shapes, grad) in enumerate(_EINSUMS):
        xs = [rand("float32", s, 300 + 10 * i + k) for k, s in enumerate(shapes)]
        name = eq.replace("...", "E").replace(",", "_").replace("->", "_to_") or "scalar"
        out.append(Case(f"Einsum/{name}", "Einsum", (xs,), {"equation": eq}, grad=grad, seed=300 + i))
    for i, dt in enumerate(("float64", "float16", "bfloat16", "int32", "int64") + COMPLEX):
        xs = [rand(dt, (2, 3, 4), 500 + i, -5, 6), rand(dt, (2, 4, 2), 510 + i, -5, 6)]
        out.append(Case(f"Einsum/{dt}", "Einsum", (xs,), {"equation": "bij,bjk->bik"},
                        tol=(2e-2, 5e-2) if dt in ("float16", "bfloat16") else None,
                        why="16-bit floats: the products are rounded at different points"))
    a, b = rand("float32", (3, 4), 520), rand("float32", (4, 2), 521)
    out += [
        Case("Einsum/float64_grad", "Einsum", ([a.astype(np.float64), b.astype(np.float64)],), {"equation": "ij,jk->ik"},
             grad=True, seed=522),
        Case("Einsum/empty", "Einsum", ([np.zeros((0, 4), np.float32), b],), {"equation": "ij,jk->ik"}),
        Case("Einsum/empty_contraction", "Einsum", ([np.zeros((3, 0), np.float32), np.zeros((0, 2), np.float32)],),
             {"equation": "ij,jk->ik"}),
        Case("Einsum/nan_inf", "Einsum", ([_a([[NAN, 1.0], [INF, 0.0]], "float32"), _a([[1.0, 0.0], [0.0, 1.0]], "float32")],),
             {"equation": "ij,jk->ik"}),
        Case("Einsum/noncontiguous", "Einsum", ([noncontiguous(a), b],), {"equation": "ij,jk->ik"}),
        Case("Einsum/rejects_no_arrow", "Einsum", ([a, b],), {"equation": "ij,jk"}),
        Case("Einsum/rejects_three_operands", "Einsum", ([a, a.T.copy(), a],), {"equation": "ij,ji,ij->i"}),
        Case("Einsum/rejects_operand_count", "Einsum", ([a],), {"equation": "ij,jk->ik"}),
        Case("Einsum/rejects_size_mismatch", "Einsum", ([a, a],), {"equation": "ij,jk->ik"}),
        Case("Einsum/rejects_rank_mismatch", "Einsum", ([a, b],), {"equation": "ijk,jk->ik"}),
        Case("Einsum/rejects_unknown_output_label", "Einsum", ([a, b],), {"equation": "ij,jk->iz"}),
        Case("Einsum/repeated_output_label", "Einsum", ([a, b],), {"equation": "ij,jk->ii"}),
        Case("Einsum/rejects_broadcast_without_ellipsis", "Einsum", ([rand("float32", (2, 3, 4), 523)],),
             {"equation": "...ij->ij"}),
        Case("Einsum/digit_labels", "Einsum", ([a, b],), {"equation": "i1,1k->ik"}),
    ]
    return out


def _batch_matmul_cases() -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(("float16", "float32", "float64", "int32", "int64") + COMPLEX + _BF16):
        out.append(Case(f"BatchMatMul/{dt}", "BatchMatMul",
                        (rand(dt, (2, 3, 4), 110 + i, -5, 6), rand(dt, (2, 4, 2), 120 + i, -5, 6)),
                        tol=(2e-2, 5e-2) if dt in ("float16", "bfloat16") else None,
                        why="16-bit floats: the products are rounded at different points"))
    x, y = rand("float32", (2, 3, 4), 130), rand("float32", (2, 4, 5), 131)
    cx, cy = rand("complex64", (2, 4, 3), 132), rand("complex64", (2, 5, 4), 133)
    out += [
        Case("BatchMatMul/adj_x", "BatchMatMul", (np.swapaxes(x, 1, 2).copy(), y), {"adj_x": True}),
        Case("BatchMatMul/adj_y", "BatchMatMul", (x, np.swapaxes(y, 1, 2).copy()), {"adj_y": True}),
        Case("BatchMatMul/complex_adjoints", "BatchMatMul", (cx, cy), {"adj_x": True, "adj_y": True}),
        Case("BatchMatMul/complex_adjoints_grad", "BatchMatMul", (cx.astype(np.complex128), cy.astype(np.complex128)),
             {"adj_x": True, "adj_y": True}, grad=True, seed=142),
        Case("BatchMatMul/float32_grad", "BatchMatMul", (x, y), grad=True, seed=135),
        Case("BatchMatMul/rank2", "BatchMatMul", (x[0], y[0])),
        Case("BatchMatMul/rank4", "BatchMatMul", (rand("float64", (2, 2, 3, 4), 136), rand("float64", (2, 2, 4, 1), 137))),
        Case("BatchMatMul/empty_batch", "BatchMatMul", (np.zeros((0, 3, 4), np.float32), np.zeros((0, 4, 5), np.float32))),
        Case("BatchMatMul/empty_inner", "BatchMatMul", (np.zeros((2, 3, 0), np.float32), np.zeros((2, 0, 5), np.float32))),
        Case("BatchMatMul/noncontiguous", "BatchMatMul", (noncontiguous(x), noncontiguous(y))),
        Case("BatchMatMul/broadcast_batch", "BatchMatMul", (x, y[:1])),
        Case("BatchMatMul/inner_mismatch", "BatchMatMul", (x, x)),
        Case("BatchMatMul/rank1_rejected", "BatchMatMul", (x[0, 0], y[0])),
        Case("BatchMatMul/big_packed", "BatchMatMul", (rand("float32", (2, 33, 40), 140), rand("float32", (2, 40, 30), 141)),
             tol=(1e-4, 1e-4), why="40-term float32 dot products summed in a different order"),
    ]
    return out


# ---------------------------------------------------------------- AddN


def _add_n_cases() -> list[Case]:
    out = [Case(f"AddN/{dt}", "AddN", ([rand(dt, (2, 3), 150 + i), rand(dt, (2, 3), 160 + i), rand(dt, (2, 3), 170 + i)],))
           for i, dt in enumerate(NUMBER)]
    out += [
        Case("AddN/one_input", "AddN", ([rand("float32", (3,), 180)],)),
        Case("AddN/scalars", "AddN", ([_a(1.5, "float64"), _a(-2.0, "float64")],)),
        Case("AddN/empty", "AddN", ([np.zeros((0, 2), np.float32)] * 2,)),
        Case("AddN/int32_wraps", "AddN", ([_a([2**31 - 1], "int32"), _a([2], "int32")],)),
        Case("AddN/inf_nan", "AddN", ([_a([INF, INF, NAN, -0.0], "float32"), _a([-INF, 1, 1, -0.0], "float32")],)),
        Case("AddN/grad", "AddN", ([rand("float32", (2, 2), 181), rand("float32", (2, 2), 182)],), grad=True, seed=183),
        Case("AddN/noncontiguous", "AddN", ([noncontiguous(rand("float32", (3, 4), 184)), rand("float32", (3, 4), 185)],)),
        Case("AddN/shape_mismatch", "AddN", ([rand("float32", (2, 3), 186), rand("float32", (3, 2), 187)],)),
        Case("AddN/no_broadcast", "AddN", ([rand("float32", (2, 3), 188), rand("float32", (3,), 189)],)),
        Case("AddN/bool_rejected", "AddN", ([np.array([True]), np.array([False])],)),
        Case("AddN/float16_overflow", "AddN", ([_a([60000, -60000], "float16"), _a([60000, 60000], "float16"),
                                                _a([-60000, 0], "float16")],)),
        Case("AddN/many", "AddN", ([rand("int64", (3,), 190 + i) for i in range(12)],)),
        Case("AddN/dtype_mismatch", "AddN", ([_a([1], "float32"), _a([1], "float64")],)),
    ]
    return out


# ---------------------------------------------------------------- Select SelectV2 ClipByValue


def _select_cases() -> list[Case]:
    c = np.array([[True, False, True], [False, False, True]])
    t, e = rand("float32", (2, 3), 200), rand("float32", (2, 3), 201)
    out = [Case(f"Select/{dt}", "Select", (c, rand(dt, (2, 3), 210 + i), rand(dt, (2, 3), 220 + i)))
           for i, dt in enumerate(NUMBER + ("bool",))]
    out += [
        Case("Select/scalar_condition", "Select", (np.array(False), t, e)),
        Case("Select/vector_condition_rows", "Select", (np.array([True, False]), t, e)),
        Case("Select/vector_condition_rank3", "Select", (np.array([False, True]), rand("int32", (2, 2, 2), 202),
                                                          rand("int32", (2, 2, 2), 203))),
        Case("Select/scalars", "Select", (np.array(True), _a(1.0, "float32"), _a(2.0, "float32"))),
        Case("Select/empty", "Select", (np.zeros((0, 2), bool), np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32))),
        Case("Select/nan_passes", "Select", (np.array([True, False]), _a([NAN, -0.0], "float32"), _a([1, 2], "float32"))),
        Case("Select/grad", "Select", (c, t, e), grad=True, seed=204),
        Case("Select/rows_grad", "Select", (np.array([False, True]), t, e), grad=True, seed=205),
        Case("Select/nan_grad", "Select", (np.array([True, False]), _a([NAN, 1.0], "float32"), _a([2.0, NAN], "float32")),
             grad=True, seed=209),
        Case("Select/noncontiguous", "Select", (noncontiguous(c), noncontiguous(t), e)),
        Case("Select/t_e_mismatch", "Select", (c, t, e[:, :2])),
        Case("Select/condition_shape_rejected", "Select", (c[:, :2], t, e)),
        Case("Select/vector_length_rejected", "Select", (np.array([True, False, True]), t, e)),
        Case("Select/condition_not_bool", "Select", (c.astype(np.int32), t, e)),
        Case("Select/scalar_condition_shapes_differ", "Select", (np.array(True), t, e[:1])),
        Case("Select/vector_condition_scalar_t", "Select", (np.array([True]), _a(1.0, "float32"), _a(2.0, "float32"))),
        Case("Select/big", "Select", (rand("bool", (100, 50), 206), rand("float64", (100, 50), 207),
                                      rand("float64", (100, 50), 208))),
    ]
    return out


def _select_v2_cases() -> list[Case]:
    c = np.array([[True], [False]])
    t, e = rand("float32", (2, 3), 230), rand("float32", (1, 3), 231)
    out = [Case(f"SelectV2/{dt}", "SelectV2", (np.array([True, False, True]), rand(dt, (2, 3), 240 + i), rand(dt, (2, 3), 250 + i)))
           for i, dt in enumerate(NUMBER + ("bool",))]
    out += [
        Case("SelectV2/broadcast_all", "SelectV2", (c, t, e)),
        Case("SelectV2/scalar_condition", "SelectV2", (np.array(True), t, e)),
        Case("SelectV2/scalar_values", "SelectV2", (c, _a(1.0, "float32"), _a(-1.0, "float32"))),
        Case("SelectV2/condition_widens", "SelectV2", (np.ones((2, 2, 3), bool), t, e)),
        Case("SelectV2/empty", "SelectV2", (np.zeros((0, 1), bool), _a([1.0, 2.0], "float32"), _a(0.0, "float32"))),
        Case("SelectV2/nan_and_signed_zero", "SelectV2", (np.array([True, False]), _a([NAN, 1], "float32"),
                                                           _a([2, -0.0], "float32"))),
        Case("SelectV2/grad_broadcast", "SelectV2", (c, t, e), grad=True, seed=232),
        Case("SelectV2/grad_scalar_t", "SelectV2", (c, _a(2.0, "float64"), rand("float64", (2, 3), 233)), grad=True, seed=234),
        Case("SelectV2/noncontiguous", "SelectV2", (noncontiguous(np.array([[True, False, True, True]])),
                                                     noncontiguous(rand("float32", (3, 4), 235)), _a(0.0, "float32"))),
        Case("SelectV2/incompatible", "SelectV2", (np.array([True, False]), t, e)),
        Case("SelectV2/t_e_dtype_mismatch", "SelectV2", (c, t, e.astype(np.float64))),
    ]
    return out


def _clip_cases() -> list[Case]:
    out = []
    for i, dt in enumerate(REAL):
        t = rand(dt, (3, 4), 260 + i)
        out.append(Case(f"ClipByValue/{dt}", "ClipByValue", (t, _a(2 if dt in UNSIGNED else -2, dt), _a(5, dt))))
    t = rand("float32", (2, 3), 270) * 3
    out += [
        Case("ClipByValue/tensor_bounds", "ClipByValue", (t, rand("float32", (2, 3), 271) - 1, rand("float32", (2, 3), 272) + 1)),
        Case("ClipByValue/min_scalar_max_tensor", "ClipByValue", (t, _a(-1, "float32"), np.full((2, 3), 1.5, np.float32))),
        Case("ClipByValue/nan_t", "ClipByValue", (_a([NAN, 5, -5, -0.0, 0.0], "float32"), _a(-1, "float32"), _a(1, "float32"))),
        Case("ClipByValue/nan_min", "ClipByValue", (_a([-5, 0, 5], "float32"), _a(NAN, "float32"), _a(1, "float32"))),
        Case("ClipByValue/nan_max", "ClipByValue", (_a([-5, 0, 5], "float32"), _a(-1, "float32"), _a(NAN, "float32"))),
        Case("ClipByValue/inf", "ClipByValue", (_a([-INF, INF, 0], "float64"), _a(-1, "float64"), _a(INF, "float64"))),
        Case("ClipByValue/min_above_max", "ClipByValue", (_a([-5, 0, 5], "int32"), _a(3, "int32"), _a(1, "int32"))),
        Case("ClipByValue/signed_zero_bounds", "ClipByValue", (_a([-0.0, 0.0, -1, 1], "float32"), _a(0.0, "float32"),
                                                               _a(-0.0, "float32"))),
        Case("ClipByValue/scalar_t", "ClipByValue", (_a(7, "int64"), _a(0, "int64"), _a(3, "int64"))),
        Case("ClipByValue/empty", "ClipByValue", (np.zeros((0, 3), np.float32), _a(0, "float32"), _a(1, "float32"))),
        Case("ClipByValue/grad", "ClipByValue", (t, _a(-1, "float32"), _a(1, "float32")), grad=True, seed=273),
        Case("ClipByValue/tensor_bounds_grad", "ClipByValue",
             (t.astype(np.float64), np.full((2, 3), -1.0), np.full((2, 3), 1.0)), grad=True, seed=274),
        Case("ClipByValue/boundary_grad", "ClipByValue", (_a([-1.0, 0.5, 1.0, 2.0, -3.0], "float32"), _a(-1.0, "float32"),
                                                          _a(1.0, "float32")), grad=True, seed=276),
        Case("ClipByValue/nan_grad", "ClipByValue", (_a([NAN, 0.5, 5.0], "float32"), _a(-1.0, "float32"), _a(1.0, "float32")),
             grad=True, seed=277),
        Case("ClipByValue/noncontiguous", "ClipByValue", (noncontiguous(t), _a(-1, "float32"), _a(1, "float32"))),
        Case("ClipByValue/bound_shape_rejected", "ClipByValue", (t, np.zeros((3,), np.float32), _a(1, "float32"))),
        Case("ClipByValue/complex_rejected", "ClipByValue", (rand("complex64", (3,), 275), _a(0, "complex64"),
                                                             _a(1, "complex64"))),
    ]
    return out


# ---------------------------------------------------------------- state ops


def _state_cases() -> list[Case]:
    out: list[Case] = []
    for i, dt in enumerate(("float32", "int32", "int64", "float64", "bool", "complex64", "uint8")):
        out.append(Case(f"Assign/{dt}", "Assign", (rand(dt, (2, 3), 300 + i), rand(dt, (2, 3), 310 + i))))
    out += [
        Case("Assign/scalar", "Assign", (_a(1.0, "float32"), _a(-0.0, "float32"))),
        Case("Assign/empty", "Assign", (np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32))),
        # validate_shape is given explicitly: Assign's default is true, AssignVariableOp's
        # (what the recorder runs) false.
        Case("Assign/shape_mismatch", "Assign", (rand("float32", (2, 3), 320), rand("float32", (3, 2), 321)),
             {"validate_shape": True}),
        Case("Assign/validate_shape_false_reshapes", "Assign", (rand("float32", (2, 3), 324), rand("float32", (3, 2), 325)),
             {"validate_shape": False}),
        Case("Assign/noncontiguous_value", "Assign", (rand("float32", (3, 4), 322), noncontiguous(rand("float32", (3, 4), 323)))),
    ]
    for op in ("AssignAdd", "AssignSub"):
        for i, dt in enumerate(("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "complex128")):
            out.append(Case(f"{op}/{dt}", op, (rand(dt, (2, 3), 330 + i), rand(dt, (2, 3), 340 + i))))
        big = 2**31 - 1 if op == "AssignAdd" else -(2**31)
        out += [
            Case(f"{op}/int32_wraps", op, (_a([big, 0], "int32"), _a([1, -1], "int32"))),
            Case(f"{op}/uint8_wraps", op, (_a([255, 0], "uint8"), _a([1, 1], "uint8"))),
            Case(f"{op}/inf_nan", op, (_a([INF, NAN, -0.0], "float32"), _a([INF, 1, 0.0], "float32"))),
            Case(f"{op}/scalar", op, (_a(1.5, "float64"), _a(2.25, "float64"))),
            Case(f"{op}/shape_mismatch", op, (rand("float32", (2, 3), 350), rand("float32", (3,), 351))),
            Case(f"{op}/bool_rejected", op, (np.array([True]), np.array([False]))),
        ]
    for i, dt in enumerate(("float16", "float32", "float64")):
        tol = (1e-2, 1e-2) if dt == "float16" else None
        why = "float16 arithmetic rounded at different points" if tol else ""
        var, g = rand(dt, (2, 3), 360 + i), rand(dt, (2, 3), 370 + i)
        acc = np.abs(rand(dt, (2, 3), 380 + i))
        s = lambda v: _a(v, dt)  # noqa: E731
        out += [
            Case(f"ApplyGradientDescent/{dt}", "ApplyGradientDescent", (var, s(0.1), g), tol=tol, why=why),
            Case(f"ApplyMomentum/{dt}", "ApplyMomentum", (var, acc, s(0.1), g, s(0.9)), tol=tol, why=why),
            Case(f"ApplyMomentum/{dt}_nesterov", "ApplyMomentum", (var, acc, s(0.1), g, s(0.9)), {"use_nesterov": True},
                 tol=tol, why=why),
            Case(f"ApplyAdam/{dt}", "ApplyAdam", (var, acc * 0.1, acc, s(0.9), s(0.999), s(0.01), s(0.9), s(0.999), s(1e-3), g),
                 tol=tol, why=why),
            Case(f"ApplyAdam/{dt}_nesterov", "ApplyAdam",
                 (var, acc * 0.1, acc, s(0.81), s(0.998), s(0.01), s(0.9), s(0.999), s(1e-3), g), {"use_nesterov": True},
                 tol=tol, why=why),
        ]
    f = lambda v: _a(v, "float32")  # noqa: E731
    var, g = rand("float32", (2, 3), 390), rand("float32", (2, 3), 391)
    out += [
        Case("ApplyGradientDescent/nan_grad", "ApplyGradientDescent", (f([1, 2]), f(0.5), f([NAN, INF]))),
        Case("ApplyGradientDescent/scalar_var", "ApplyGradientDescent", (f(1.0), f(0.5), f(4.0))),
        Case("ApplyGradientDescent/empty", "ApplyGradientDescent", (np.zeros((0,), np.float32), f(0.5), np.zeros((0,), np.float32))),
        Case("ApplyGradientDescent/alpha_not_scalar", "ApplyGradientDescent", (var, f([0.1]), g)),
        Case("ApplyGradientDescent/delta_shape", "ApplyGradientDescent", (var, f(0.1), g[:1])),
        Case("ApplyMomentum/accum_shape", "ApplyMomentum", (var, np.zeros((3, 2), np.float32), f(0.1), g, f(0.9))),
        Case("ApplyMomentum/momentum_not_scalar", "ApplyMomentum", (var, np.zeros((2, 3), np.float32), f(0.1), g, f([0.9]))),
        Case("ApplyAdam/epsilon_not_scalar", "ApplyAdam",
             (var, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), f(0.9), f(0.999), f(0.01), f(0.9), f(0.999),
              f([1e-7]), g)),
        Case("ApplyAdam/grad_shape", "ApplyAdam",
             (var, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), f(0.9), f(0.999), f(0.01), f(0.9), f(0.999),
              f(1e-7), g[:, :2])),
        Case("ApplyAdam/beta1_power_one", "ApplyAdam",
             (var, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), f(1.0), f(0.999), f(0.01), f(0.9), f(0.999),
              f(1e-7), g)),
        Case("ApplyGradientDescent/int32_rejected", "ApplyGradientDescent", (_a([1, 2], "int32"), _a(1, "int32"),
                                                                             _a([1, 1], "int32"))),
        Case("ApplyMomentum/nan_momentum", "ApplyMomentum", (var, np.ones((2, 3), np.float32), f(0.1), g, f(NAN))),
        Case("ApplyAdam/noncontiguous", "ApplyAdam",
             (noncontiguous(var), np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32), f(0.9), f(0.999), f(0.01),
              f(0.9), f(0.999), f(1e-7), noncontiguous(g))),
        Case("ApplyAdam/zero_state", "ApplyAdam",
             (var, np.zeros((2, 3), np.float32), np.zeros((2, 3), np.float32), f(0.9), f(0.999), f(0.01), f(0.9), f(0.999),
              f(1e-7), g)),
    ]
    return out


def cases() -> list[Case]:
    out: list[Case] = []
    out += _reduction_cases("Sum", NUMBER)
    out += _reduction_cases("Prod", NUMBER)
    out += _reduction_cases("Mean", NUMBER)
    out += _reduction_cases("Max", REAL)
    out += _reduction_cases("Min", REAL)
    out += _reduce_specials()
    out += _einsum_cases()
    out += _bool_cases("All") + _bool_cases("Any")
    out += _arg_cases("ArgMax") + _arg_cases("ArgMin")
    out += _matmul_cases() + _batch_matmul_cases()
    out += _add_n_cases()
    out += _select_cases() + _select_v2_cases() + _clip_cases()
    out += _state_cases()
    return out


#: Reviewed, deliberate differences from TensorFlow: case id (or op name) -> reason.
DIFFERENCES: dict[str, str] = {
    "Einsum/rejects_unknown_output_label": (
        "an output label that no operand has: TensorFlow's Einsum drops it (ij,jk->iz gives shape [3]); opkernel "
        "raises InvalidArgumentError naming the label, as numpy's einsum does"),
    "BatchMatMul/broadcast_batch": (
        "opkernel's BatchMatMul is TensorFlow's BatchMatMulV2 (documented in the op): batch dimensions "
        "broadcast as in numpy, where TensorFlow's BatchMatMul (v1) requires them equal"),
    "ClipByValue/uint32": (
        "TensorFlow registers no CPU kernel of ClipByValue for uint32 (NotFoundError) although its OpDef "
        "allows it; opkernel clips (tested against min(max(t, lo), hi) in test_tf_reduce_divergences.py)"),
    "ClipByValue/uint64": "as ClipByValue/uint32, for uint64",
    **{f"{op}/float16_partial_overflow": (
        "TensorFlow's float16 Sum/Mean/Prod keep each partial result as a half, in an order set by the memory "
        "layout (the sum of 5000 float16 ones is 5000 along a row, 2048 down a column), so an intermediate "
        "overflows to inf or a long sum stalls; opkernel accumulates float16 in float32 and rounds once "
        "(tested against the exact result rounded to float16 in test_tf_reduce_divergences.py)")
       for op in ("Sum", "Mean", "Prod")},
    "Assign/validate_shape_false_reshapes": (
        "an opkernel Variable has a fixed shape, as a TF2 tf.Variable made without shape=None: Assign with "
        "validate_shape=false still needs the variable's shape (InvalidArgumentError), where TensorFlow's "
        "ref Assign gives the variable the value's shape"),
}

#: Ops of this family with no case, and why.
#: The resource ops' comparison with TensorFlow is a transcript of steps, not cases.
_RESOURCE_REASON = (
    "a resource op: its inputs are handles to state, which a case of inputs and outputs cannot hold; "
    "tests/test_resource_variables.py runs scripts of these ops in TensorFlow and on every backend and "
    "compares each step's output or error class (tests/resource_transcripts.py)"
)
EXEMPT: dict[str, str] = {op: _RESOURCE_REASON for op in (*RESOURCE_VARIABLE_OPS, *LOOKUP_OPS, *QUEUE_OPS)}
