"""Math ops: elementwise, comparisons, reductions and linear algebra, on every backend."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel._infer import infer_shapes
from opkernel.errors import InvalidArgumentError, ShapeError

import optable
from optable import OpCase

FLOATS = ("float32", "float64")


def arr(rng: np.random.Generator, dt: str, shape: tuple[int, ...], lo: float = -2.0, hi: float = 2.0) -> np.ndarray:
    """Uniform values in [lo, hi] (integers for integer dtypes)."""
    if np.dtype(dt).kind in "iu":
        return rng.integers(int(lo), int(hi) + 1, shape).astype(dt)
    return rng.uniform(lo, hi, shape).astype(dt)


def nonzero(rng: np.random.Generator, dt: str, shape: tuple[int, ...], lo: float = 0.5, hi: float = 2.0) -> np.ndarray:
    """Values with lo <= |v| <= hi and random signs."""
    return (arr(rng, dt, shape, lo, hi) * rng.choice([-1, 1], shape)).astype(dt)


def axes(*a: int) -> np.ndarray:
    return np.array(a, dtype=np.int32)


# ---------------------------------------------------------------- elementwise binary

BROADCASTS = [("same", (2, 3), (2, 3)), ("bcast_row", (2, 3), (3,)), ("bcast_outer", (2, 1), (1, 3)), ("scalar", (2, 3), ())]


def binary_rows(
    op: str, ref: Any, *, x: Any = arr, y: Any = arr, ints: Any = None, dtypes: tuple[str, ...] = FLOATS, grad: bool = True
) -> list[OpCase]:
    rows = [
        OpCase(
            f"{op}-{name}", op, lambda rng, dt, sx=sx, sy=sy: [x(rng, dt, sx), y(rng, dt, sy)], ref,
            dtypes=dtypes, grad=grad,
        )
        for name, sx, sy in BROADCASTS
    ]
    if ints is not None:
        xi, yi = ints
        rows.append(OpCase(f"{op}-int32", op, lambda rng, dt: [xi(rng, dt, (2, 3)), yi(rng, dt, (3,))], ref, dtypes=("int32",), grad=False))
    return rows


def trunc_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.trunc(x / y) if x.dtype.kind in "iu" else x / y


def floor_div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.floor_divide(x, y) if x.dtype.kind in "iu" else np.floor(x / y)


def away_from_jumps(rng: np.random.Generator, dt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values of x for FloorMod with y in [0.5, 2] away from its discontinuities: x = y * (k + f)."""
    k = rng.integers(-2, 3, shape)
    return ((k + rng.uniform(0.2, 0.8, shape)) * 0.5).astype(dt)


def positive(lo: float = 0.5, hi: float = 2.0) -> Any:
    return lambda rng, dt, shape: arr(rng, dt, shape, lo, hi)


small_ints = lambda rng, dt, shape: arr(rng, dt, shape, -5, 5)  # noqa: E731
nonzero_ints = lambda rng, dt, shape: nonzero(rng, dt, shape, 1, 4)  # noqa: E731

BINARY_CASES = [
    *binary_rows("Add", np.add, ints=(small_ints, small_ints)),
    *binary_rows("Sub", np.subtract, ints=(small_ints, small_ints)),
    *binary_rows("Mul", np.multiply, ints=(small_ints, small_ints)),
    *binary_rows("RealDiv", trunc_div, y=nonzero, ints=(small_ints, nonzero_ints)),
    *binary_rows("FloorDiv", floor_div, y=nonzero, grad=False, ints=(small_ints, nonzero_ints)),
    *binary_rows("FloorMod", np.mod, x=away_from_jumps, y=positive(0.5, 0.5), ints=(small_ints, nonzero_ints)),
    *binary_rows("Pow", np.power, x=positive(), ints=(small_ints, lambda rng, dt, s: arr(rng, dt, s, 0, 3))),
    *binary_rows("Maximum", np.maximum, ints=(small_ints, small_ints)),
    *binary_rows("Minimum", np.minimum, ints=(small_ints, small_ints)),
    *binary_rows("Atan2", np.arctan2, y=nonzero),
    OpCase("Atan2-signs_and_zeros", "Atan2", lambda rng, dt: [np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0], dt),
                                                               np.array([0.0, 0.0, -0.0, -0.0, -1.0, -1.0, 0.0, np.inf], dt)],
           np.arctan2, grad=False),
    *binary_rows("SquaredDifference", lambda x, y: np.square(x - y), ints=(small_ints, small_ints)),
    OpCase("FloorMod-negative_divisor", "FloorMod", lambda rng, dt: [arr(rng, dt, (2, 3), -3, 3), nonzero(rng, dt, (2, 3))], np.mod, grad=False),
    OpCase("Pow-negative_base_int_exponent", "Pow", lambda rng, dt: [arr(rng, dt, (5,)), np.array([0, 1, 2, 3, -1], dt)], np.power, grad=False),
]

# ---------------------------------------------------------------- elementwise unary


def unary(op: str, ref: Any, lo: float = -2.0, hi: float = 2.0, shape: tuple[int, ...] = (2, 3), **kw: Any) -> OpCase:
    return OpCase(f"{op}", op, lambda rng, dt: [arr(rng, dt, shape, lo, hi)], ref, **kw)


def sigmoid_ref(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


erf_ref = np.vectorize(math.erf, otypes=[np.float64])

UNARY_CASES = [
    unary("Neg", np.negative),
    OpCase("Abs", "Abs", lambda rng, dt: [nonzero(rng, dt, (2, 3))], np.abs),
    OpCase("Sign", "Sign", lambda rng, dt: [nonzero(rng, dt, (2, 3))], np.sign),
    OpCase("Sign-zero", "Sign", lambda rng, dt: [np.array([-1.5, 0.0, 2.0, -0.25], dt)], np.sign, grad=False),
    unary("Square", np.square),
    unary("Exp", np.exp),
    unary("Log", np.log, 0.2, 3.0),
    unary("Log1p", np.log1p, -0.8, 3.0),
    unary("Sqrt", np.sqrt, 0.2, 3.0),
    unary("Rsqrt", lambda x: 1 / np.sqrt(x), 0.2, 3.0),
    unary("Sin", np.sin, -4, 4),
    unary("Cos", np.cos, -4, 4),
    unary("Tanh", np.tanh, -3, 3),
    unary("Sigmoid", sigmoid_ref, -5, 5),
    OpCase("Sigmoid-saturated", "Sigmoid", lambda rng, dt: [np.array([-800.0, -40.0, 0.0, 40.0, 800.0], dt)], sigmoid_ref, grad=False),
    unary("Erf", erf_ref, -3, 3),
    OpCase("Floor", "Floor", lambda rng, dt: [np.array([-2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 1e6 + 0.5], dt)],
           np.floor, grad=False),
    OpCase("Ceil", "Ceil", lambda rng, dt: [np.array([-2.5, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 2.5, 1e6 + 0.5], dt)],
           np.ceil, grad=False),
    unary("Expm1", np.expm1, -3, 3),
    OpCase("Expm1-small", "Expm1", lambda rng, dt: [np.array([-1e-7, -1e-20, 0.0, 1e-20, 1e-7], dt)], np.expm1, grad=False),
    unary("Sinh", np.sinh, -3, 3),
    unary("Cosh", np.cosh, -3, 3),
    unary("Atan", np.arctan, -4, 4),
    unary("Tan", np.tan, -1.2, 1.2),
    unary("Asin", np.arcsin, -0.9, 0.9),
    unary("Acos", np.arccos, -0.9, 0.9),
    unary("Asinh", np.arcsinh, -3, 3),
    unary("Acosh", np.arccosh, 1.2, 4),
    unary("Atanh", np.arctanh, -0.9, 0.9),
    OpCase("Reciprocal", "Reciprocal", lambda rng, dt: [nonzero(rng, dt, (2, 3))], np.reciprocal),
    OpCase("Reciprocal-zeros", "Reciprocal", lambda rng, dt: [np.array([0.0, -0.0, np.inf, -np.inf], dt)],
           lambda x: np.array([np.inf, -np.inf, 0.0, -0.0], x.dtype), grad=False),
    OpCase("Round", "Round", lambda rng, dt: [np.array([-2.5, -1.5, -0.5, -0.0, 0.5, 1.5, 2.5, 0.49, 1e6 + 0.5], dt)],
           np.rint, grad=False),
    OpCase("Round-int32", "Round", lambda rng, dt: [arr(rng, dt, (2, 3), -5, 5)], lambda x: x, dtypes=("int32", "int64"),
           grad=False),
    *[
        OpCase(op, op, lambda rng, dt: [np.array([0.0, -1.5, np.inf, -np.inf, np.nan, 1e30], dt)], ref, grad=False)
        for op, ref in (("IsNan", np.isnan), ("IsInf", np.isinf), ("IsFinite", np.isfinite))
    ],
    OpCase("Erf-all_ranges", "Erf", lambda rng, dt: [np.array([-7.0, -4.5, -1.0, -1e-9, 0.0, 0.3, 0.46875, 0.5, 3.9, 4.1, 30.0], dt)], erf_ref, grad=False),
    *[
        OpCase(f"{op}-int32", op, lambda rng, dt: [arr(rng, dt, (2, 3), -5, 5)], ref, dtypes=("int32",), grad=False)
        for op, ref in (("Neg", np.negative), ("Abs", np.abs), ("Sign", np.sign), ("Square", np.square))
    ],
]

# ---------------------------------------------------------------- comparisons, logical, select, clip, cast


def compare_rows(op: str, ref: Any) -> list[OpCase]:
    # Few distinct values, so that equal elements occur.
    same = lambda rng, dt, shape: rng.integers(-2, 3, shape).astype(dt)  # noqa: E731
    return [
        OpCase(f"{op}-bcast", op, lambda rng, dt: [same(rng, dt, (2, 3)), same(rng, dt, (3,))], ref, dtypes=("float32", "float64", "int32"), grad=False),
        OpCase(f"{op}-scalar", op, lambda rng, dt: [same(rng, dt, (4,)), np.array(0, dt)], ref, dtypes=("int32",), grad=False),
    ]


def bools(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, 2, shape).astype(bool)


def select_ref(c: np.ndarray, t: np.ndarray, e: np.ndarray) -> np.ndarray:
    return np.where(c, t, e)


def clip_ref(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return np.minimum(np.maximum(t, lo), hi)


def cast_ref(x: np.ndarray, DstT: ok.DType, **attrs: Any) -> np.ndarray:
    return x.astype(DstT.np)


INT_TYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


def bits(rng: np.random.Generator, dt: str, shape: tuple[int, ...]) -> np.ndarray:
    """Integers over the whole range of ``dt`` (every bit, the sign bit too)."""
    info = np.iinfo(dt)
    return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)


LOGIC_CASES = [
    *compare_rows("Equal", np.equal),
    *compare_rows("NotEqual", np.not_equal),
    *compare_rows("Less", np.less),
    *compare_rows("LessEqual", np.less_equal),
    *compare_rows("Greater", np.greater),
    *compare_rows("GreaterEqual", np.greater_equal),
    OpCase("LogicalAnd", "LogicalAnd", lambda rng, dt: [bools(rng, (2, 3)), bools(rng, (3,))], np.logical_and, dtypes=("bool",), grad=False),
    OpCase("LogicalOr", "LogicalOr", lambda rng, dt: [bools(rng, (2, 1)), bools(rng, (1, 3))], np.logical_or, dtypes=("bool",), grad=False),
    OpCase("LogicalNot", "LogicalNot", lambda rng, dt: [bools(rng, (2, 3))], np.logical_not, dtypes=("bool",), grad=False),
    *[
        OpCase(op, op, lambda rng, dt: [bits(rng, dt, (2, 3)), bits(rng, dt, (3,))], ref, dtypes=INT_TYPES, grad=False)
        for op, ref in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor))
    ],
    OpCase("Select-same", "Select", lambda rng, dt: [bools(rng, (2, 3)), arr(rng, dt, (2, 3)), arr(rng, dt, (2, 3))], select_ref),
    OpCase("SelectV2-bcast", "SelectV2", lambda rng, dt: [bools(rng, (2, 1)), arr(rng, dt, (2, 3)), arr(rng, dt, (3,))], select_ref),
    OpCase("SelectV2-bcast_cond", "SelectV2", lambda rng, dt: [bools(rng, (2, 3)), arr(rng, dt, (1, 3)), arr(rng, dt, ())], select_ref),
    OpCase("SelectV2-int32", "SelectV2", lambda rng, dt: [bools(rng, (2, 3)), arr(rng, dt, (2, 3), -9, 9), arr(rng, dt, (3,), -9, 9)], select_ref, dtypes=("int32",), grad=False),
    OpCase("ClipByValue-scalar", "ClipByValue", lambda rng, dt: [arr(rng, dt, (2, 3)), np.array(-0.5, dt), np.array(0.7, dt)], clip_ref),
    OpCase(
        "ClipByValue-tensor", "ClipByValue",
        lambda rng, dt: [arr(rng, dt, (2, 3)), arr(rng, dt, (2, 3), -1, -0.2), arr(rng, dt, (2, 3), 0.2, 1)], clip_ref,
    ),
    OpCase("ClipByValue-int32", "ClipByValue", lambda rng, dt: [arr(rng, dt, (2, 3), -9, 9), np.array(-3, dt), np.array(4, dt)], clip_ref, dtypes=("int32",), grad=False),
    OpCase("Cast-to_float64", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3))], cast_ref, attrs={"DstT": ok.float64}, dtypes=("float32",), grad=False),
    OpCase("Cast-to_float32", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3))], cast_ref, attrs={"DstT": ok.float32}, dtypes=("float64",), grad=False),
    OpCase("Cast-identity", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3))], cast_ref, attrs={"DstT": ok.float64}, dtypes=("float64",)),
    OpCase("Cast-float_to_int", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3), -5, 5)], cast_ref, attrs={"DstT": ok.int32}, grad=False),
    OpCase("Cast-int_to_float", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3), -5, 5)], cast_ref, attrs={"DstT": ok.float32}, dtypes=("int32",), grad=False),
    OpCase("Cast-bool_to_int", "Cast", lambda rng, dt: [bools(rng, (4,))], cast_ref, attrs={"DstT": ok.int32}, dtypes=("bool",), grad=False),
]

# ---------------------------------------------------------------- reductions


def norm_axes(a: np.ndarray, rank: int) -> tuple[int, ...]:
    return tuple(sorted({int(v) % rank for v in np.asarray(a).reshape(-1)})) if rank else ()


def reducer(fn: Any) -> Any:
    def ref(x: np.ndarray, a: np.ndarray, keep_dims: bool = False, **attrs: Any) -> np.ndarray:
        return fn(x, axis=norm_axes(a, x.ndim), keepdims=keep_dims)

    return ref


def int_mean(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    if x.dtype.kind in "iu":
        count = int(np.prod([x.shape[a] for a in axis]))
        return np.trunc(np.sum(x, axis=axis, keepdims=keepdims) / count)
    return np.mean(x, axis=axis, keepdims=keepdims)


REDUCTION_AXES = [
    ("axis0", (2, 3, 2), axes(0)),
    ("scalar_axis", (2, 3), np.array(1, np.int32)),
    ("negative", (2, 3, 2), axes(-1, 0)),  # an axis named twice is an error: test_tf_reduce_divergences.py
    ("all", (2, 3), axes(0, 1)),
    ("none", (2, 3), axes()),
    ("int64_axes", (3, 2), np.array([-2], np.int64)),
]


def reduction_rows(op: str, fn: Any, maker: Any = arr, ints: bool = True, grad: bool = True) -> list[OpCase]:
    ref = reducer(fn)
    rows = []
    for name, shape, a in REDUCTION_AXES:
        for keep in (False, True):
            rows.append(
                OpCase(
                    f"{op}-{name}-keep{int(keep)}", op, lambda rng, dt, shape=shape, a=a: [maker(rng, dt, shape), a], ref,
                    attrs={"keep_dims": keep}, grad=grad,
                )
            )
    rows.append(OpCase(f"{op}-scalar_input", op, lambda rng, dt: [maker(rng, dt, ()), axes()], ref, grad=grad))
    if ints:
        rows.append(OpCase(f"{op}-int32", op, lambda rng, dt: [arr(rng, dt, (2, 3), -4, 4), axes(1)], ref, dtypes=("int32",), grad=False))
        rows.append(
            OpCase(f"{op}-int32-keep", op, lambda rng, dt: [arr(rng, dt, (3, 2), -4, 4), axes(0)], ref, attrs={"keep_dims": True}, dtypes=("int32",), grad=False)
        )
    return rows


def with_zeros(count: int) -> Any:
    """Prod inputs of shape (3, 4): row 0 has no zero, row 1 one zero, row 2 ``count`` zeros."""

    def make(rng: np.random.Generator, dt: str) -> list[np.ndarray]:
        x = nonzero(rng, dt, (3, 4), 0.5, 1.5)
        x[1, 2] = 0
        x[2, :count] = 0
        return [x, axes(1)]

    return make


def arg_ref(fn: Any) -> Any:
    return lambda x, d, **attrs: fn(x, axis=int(d))


REDUCTION_CASES = [
    *reduction_rows("Sum", np.sum),
    *reduction_rows("Mean", int_mean),
    *reduction_rows("Prod", np.prod, maker=lambda rng, dt, shape: nonzero(rng, dt, shape, 0.5, 1.5)),
    *reduction_rows("Max", np.max),
    *reduction_rows("Min", np.min),
    OpCase("Prod-one_zero", "Prod", with_zeros(1), reducer(np.prod)),
    OpCase("Prod-two_zeros", "Prod", with_zeros(2), reducer(np.prod)),
    OpCase("Prod-two_zeros-keep", "Prod", with_zeros(2), reducer(np.prod), attrs={"keep_dims": True}),
    OpCase("Mean-int32-negative", "Mean", lambda rng, dt: [np.array([[-7, 1], [7, -1]], dt), axes(1)], reducer(int_mean), dtypes=("int32",), grad=False),
    *[
        OpCase(f"{op}-bool-{name}-keep{int(keep)}", op, lambda rng, dt, shape=shape, a=a: [bools(rng, shape), a], reducer(fn), attrs={"keep_dims": keep}, dtypes=("bool",), grad=False)
        for op, fn in (("All", np.all), ("Any", np.any))
        for name, shape, a in REDUCTION_AXES
        for keep in (False, True)
    ],
    *[
        OpCase(f"{op}-{name}", op, lambda rng, dt, shape=shape, d=d: [arr(rng, dt, shape, -9, 9), np.array(d, np.int32)], arg_ref(fn), dtypes=("float32", "float64", "int32"), grad=False)
        for op, fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin))
        for name, shape, d in (("axis0", (3, 4), 0), ("axis_neg", (2, 3, 4), -1), ("vector", (5,), 0))
    ],
    OpCase("ArgMax-int32_out", "ArgMax", lambda rng, dt: [arr(rng, dt, (3, 4)), np.array(1, np.int64)], arg_ref(np.argmax), attrs={"output_type": ok.int32}, grad=False),
    OpCase("ArgMax-bool", "ArgMax", lambda rng, dt: [bools(rng, (3, 4)), np.array(1, np.int32)], arg_ref(np.argmax), dtypes=("bool",), grad=False),
]

# ---------------------------------------------------------------- linear algebra


def matmul_ref(a: np.ndarray, b: np.ndarray, transpose_a: bool = False, transpose_b: bool = False, **attrs: Any) -> np.ndarray:
    return (a.T if transpose_a else a) @ (b.T if transpose_b else b)


def bmm_ref(x: np.ndarray, y: np.ndarray, adj_x: bool = False, adj_y: bool = False, **attrs: Any) -> np.ndarray:
    return np.matmul(np.swapaxes(x, -1, -2) if adj_x else x, np.swapaxes(y, -1, -2) if adj_y else y)


def two(sa: tuple[int, ...], sb: tuple[int, ...]) -> Any:
    return lambda rng, dt: [arr(rng, dt, sa), arr(rng, dt, sb)]


LINALG_CASES = [
    OpCase("MatMul", "MatMul", two((2, 3), (3, 4)), matmul_ref),
    OpCase("MatMul-transpose_a", "MatMul", two((3, 2), (3, 4)), matmul_ref, attrs={"transpose_a": True}),
    OpCase("MatMul-transpose_b", "MatMul", two((2, 3), (4, 3)), matmul_ref, attrs={"transpose_b": True}),
    OpCase("MatMul-transpose_both", "MatMul", two((3, 2), (4, 3)), matmul_ref, attrs={"transpose_a": True, "transpose_b": True}),
    OpCase("MatMul-int32", "MatMul", lambda rng, dt: [arr(rng, dt, (2, 3), -4, 4), arr(rng, dt, (3, 2), -4, 4)], matmul_ref, dtypes=("int32",), grad=False),
    OpCase("BatchMatMul", "BatchMatMul", two((2, 2, 3), (2, 3, 2)), bmm_ref),
    OpCase("BatchMatMul-bcast", "BatchMatMul", two((2, 1, 2, 3), (3, 3, 2)), bmm_ref),
    OpCase("BatchMatMul-bcast_rank2", "BatchMatMul", two((2, 3), (2, 3, 2)), bmm_ref),
    OpCase("BatchMatMul-adj_x", "BatchMatMul", two((2, 3, 2), (1, 3, 2)), bmm_ref, attrs={"adj_x": True}),
    OpCase("BatchMatMul-adj_y", "BatchMatMul", two((2, 2, 3), (2, 4, 3)), bmm_ref, attrs={"adj_y": True}),
    OpCase("BatchMatMul-adj_both", "BatchMatMul", two((1, 3, 2), (2, 2, 3)), bmm_ref, attrs={"adj_x": True, "adj_y": True}),
    OpCase("BatchMatMul-int32", "BatchMatMul", lambda rng, dt: [arr(rng, dt, (2, 2, 3), -4, 4), arr(rng, dt, (3, 2), -4, 4)], bmm_ref, dtypes=("int32",), grad=False),
    *[OpCase(f"Einsum-{eq.replace('...', 'E').replace(',', '_').replace('->', '-to-') or 'scalar'}", "Einsum",
             (lambda shapes: lambda rng, dt: [[arr(rng, dt, s) for s in shapes]])(shapes),
             (lambda eq: lambda xs, equation: np.einsum(eq, *xs))(eq), attrs={"equation": eq},
             dtypes=("float32", "float64", "int32") if i < 3 else ("float32", "float64"))
      for i, (eq, shapes) in enumerate([
          ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]), ("ij->ji", [(2, 3)]),
          ("ii->i", [(3, 3)]), ("ii->", [(3, 3)]), ("ij->", [(2, 3)]), ("i,j->ij", [(3,), (2,)]),
          ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]), ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)]),
          ("iij,jk->ik", [(2, 2, 3), (3, 2)]), ("ij,kj->", [(2, 3), (4, 3)]), ("a...,a->...", [(3, 2, 2), (3,)]),
          ("->", [()]), (",i->i", [(), (3,)]), ("ab,ab->ab", [(2, 3), (2, 3)]),
      ])],
    OpCase("AddN", "AddN", lambda rng, dt: [[arr(rng, dt, (2, 3)) for _ in range(3)]], lambda xs: sum(xs), dtypes=("float32", "float64", "int32"), grad=False),
    OpCase("AddN-one", "AddN", lambda rng, dt: [[arr(rng, dt, (4,))]], lambda xs: xs[0], grad=False),
]

# ---------------------------------------------------------------- complex numbers
# Values on complex64 and complex128; gradients on complex128 against finite differences
# of the real and imaginary parts (the checker counts a complex number as two reals), so
# a gradient that is not conjugated fails.

COMPLEX = ("complex64", "complex128")
PART = {"complex64": ok.float32, "complex128": ok.float64, "float32": ok.complex64, "float64": ok.complex128}


def carr(rng: np.random.Generator, dt: str, shape: tuple[int, ...], lo: float = -1.5, hi: float = 1.5) -> np.ndarray:
    """Both parts uniform in [lo, hi]."""
    return (rng.uniform(lo, hi, shape) + 1j * rng.uniform(lo, hi, shape)).astype(dt)


def polar(rng: np.random.Generator, dt: str, shape: tuple[int, ...], r: tuple[float, float] = (0.5, 1.5), turn: float = 0.8) -> np.ndarray:
    """|z| in r and arg(z) within turn * pi of the positive real axis (away from the
    branch cut of Log, Sqrt and Angle on the negative real axis)."""
    return (rng.uniform(*r, shape) * np.exp(1j * np.pi * rng.uniform(-turn, turn, shape))).astype(dt)


def crow(id: str, op: str, inputs: Any, ref: Any, **kw: Any) -> OpCase:
    return OpCase(f"{id}-complex", op, inputs, ref, dtypes=COMPLEX, grad_dtype="complex128", **kw)


def cunary(op: str, ref: Any, maker: Any = carr, **kw: Any) -> OpCase:
    return crow(op, op, lambda rng, dt: [maker(rng, dt, (2, 3))], ref, **kw)


def cbinary(op: str, ref: Any, x: Any = carr, y: Any = carr) -> list[OpCase]:
    return [
        crow(f"{op}-{name}", op, lambda rng, dt, sx=sx, sy=sy: [x(rng, dt, sx), y(rng, dt, sy)], ref)
        for name, sx, sy in BROADCASTS
    ]


def part_rows(op: str, ref: Any, maker: Any = carr) -> list[OpCase]:
    """Real/Imag/ComplexAbs/Angle: Tout is the parts' dtype, so one row per dtype."""
    return [
        OpCase(f"{op}-{dt}", op, lambda rng, d: [maker(rng, d, (2, 3))], lambda z, **a: ref(z), attrs={"Tout": PART[dt]},
               dtypes=(dt,), grad=dt == "complex128", grad_dtype=dt)
        for dt in COMPLEX
    ]


def complex_rows() -> list[OpCase]:
    rows = []
    for dt in ("float32", "float64"):
        for name, sx, sy in (("same", (2, 3), (2, 3)), ("bcast", (2, 1), (3,))):
            rows.append(OpCase(
                f"Complex-{name}-{dt}", "Complex", lambda rng, d, sx=sx, sy=sy: [arr(rng, d, sx), arr(rng, d, sy)],
                lambda re, im, **a: re + 1j * im, attrs={"Tout": PART[dt]}, dtypes=(dt,), grad=dt == "float64", grad_dtype=dt,
            ))
    return rows


def cbmm_ref(x: np.ndarray, y: np.ndarray, adj_x: bool = False, adj_y: bool = False, **attrs: Any) -> np.ndarray:
    return np.matmul(np.conj(np.swapaxes(x, -1, -2)) if adj_x else x, np.conj(np.swapaxes(y, -1, -2)) if adj_y else y)


def ctwo(sa: tuple[int, ...], sb: tuple[int, ...]) -> Any:
    return lambda rng, dt: [carr(rng, dt, sa), carr(rng, dt, sb)]


def cwith_zeros(rng: np.random.Generator, dt: str) -> list[np.ndarray]:
    x = polar(rng, dt, (3, 4), turn=1.0)
    x[1, 2] = 0
    return [x, axes(1)]


COMPLEX_CASES = [
    cunary("Conj", np.conj),
    *part_rows("Real", np.real),
    *part_rows("Imag", np.imag),
    *part_rows("ComplexAbs", np.abs, polar),
    *part_rows("Angle", np.angle, polar),
    *complex_rows(),
    *cbinary("Add", np.add),
    *cbinary("Sub", np.subtract),
    *cbinary("Mul", np.multiply),
    *cbinary("RealDiv", np.divide, y=polar),
    crow("Pow", "Pow", lambda rng, dt: [polar(rng, dt, (2, 3)), carr(rng, dt, (2, 3), -1, 1)], np.power),
    cunary("Neg", np.negative),
    cunary("Square", np.square),
    cunary("Exp", np.exp),
    cunary("Log", np.log, polar),
    cunary("Log1p", np.log1p, lambda rng, dt, s: (polar(rng, dt, s) + 0.5).astype(dt)),
    cunary("Sqrt", np.sqrt, polar),
    cunary("Rsqrt", lambda z: 1 / np.sqrt(z), polar),
    cunary("Sin", np.sin),
    cunary("Cos", np.cos),
    cunary("Tanh", np.tanh, lambda rng, dt, s: carr(rng, dt, s, -0.7, 0.7)),
    cunary("Sigmoid", lambda z: 1 / (1 + np.exp(-z)), lambda rng, dt, s: carr(rng, dt, s, -1, 1)),
    cunary("Sign", lambda z: z / np.abs(z), polar),
    crow("Sum", "Sum", lambda rng, dt: [carr(rng, dt, (2, 3)), axes(1)], reducer(np.sum)),
    crow("Mean", "Mean", lambda rng, dt: [carr(rng, dt, (2, 3, 2)), axes(0, 2)], reducer(np.mean), attrs={"keep_dims": True}),
    crow("Prod", "Prod", lambda rng, dt: [polar(rng, dt, (3, 4), turn=1.0), axes(1)], reducer(np.prod)),
    crow("Prod-one_zero", "Prod", cwith_zeros, reducer(np.prod)),
    crow("MatMul", "MatMul", ctwo((2, 3), (3, 4)), matmul_ref),
    crow("MatMul-transpose_a", "MatMul", ctwo((3, 2), (3, 4)), matmul_ref, attrs={"transpose_a": True}),
    crow("MatMul-transpose_both", "MatMul", ctwo((3, 2), (4, 3)), matmul_ref, attrs={"transpose_a": True, "transpose_b": True}),
    crow("BatchMatMul", "BatchMatMul", ctwo((2, 2, 3), (2, 3, 2)), cbmm_ref),
    crow("BatchMatMul-adj_x", "BatchMatMul", ctwo((2, 3, 2), (1, 3, 2)), cbmm_ref, attrs={"adj_x": True}),
    crow("BatchMatMul-adj_y", "BatchMatMul", ctwo((2, 2, 3), (2, 4, 3)), cbmm_ref, attrs={"adj_y": True}),
    crow("BatchMatMul-adj_both", "BatchMatMul", ctwo((1, 3, 2), (2, 2, 3)), cbmm_ref, attrs={"adj_x": True, "adj_y": True}),
    crow("SelectV2", "SelectV2", lambda rng, dt: [bools(rng, (2, 1)), carr(rng, dt, (2, 3)), carr(rng, dt, (3,))], select_ref),
    OpCase("Cast-complex_to_float", "Cast", lambda rng, dt: [carr(rng, dt, (2, 3))], lambda z, DstT: np.real(z).astype(DstT.np),
           attrs={"DstT": ok.float64}, dtypes=COMPLEX, grad_dtype="complex128"),
    OpCase("Cast-float_to_complex", "Cast", lambda rng, dt: [arr(rng, dt, (2, 3))], cast_ref,
           attrs={"DstT": ok.complex128}, dtypes=FLOATS),
]

# ---------------------------------------------------------------- stateless random ops


def _random_ref(kind: str) -> Any:
    """The CPU plugin's numpy path (Philox and TensorFlow's distributions in numpy, the
    reference its native kernel is checked against; test_random.py checks both against
    TensorFlow's recorded bits)."""

    def ref(shape: Any, *rest: Any, dtype: Any = None, **attrs: Any) -> np.ndarray:
        from opkernel.ops import random_ops as R
        from opkernel_cpu import random_kernels as rk

        if kind == "v1":  # a seed
            key, counter = R.key_counter(*R.seed_words("", rest[0]))
        else:  # a key, a counter and an algorithm
            key, counter = R.check_key_counter("", rest[0], rest[1], rest[2])
        which = attrs["_kind"]
        dims = tuple(int(d) for d in np.asarray(shape))
        lo, span = (int(rest[-2]), int(rest[-1]) - int(rest[-2])) if which == rk.INT else (0, 1)
        dt = ok.as_dtype(dtype) if dtype is not None else ok.as_dtype(np.asarray(rest[-1]).dtype)
        return rk._numpy_fill(which, dt, int(np.prod(dims)), key, counter, lo, span).reshape(dims)

    return ref


def _key_counter(rng: np.random.Generator, dt: str) -> list[np.ndarray]:
    return [np.array([3, 4], np.int32), np.array([0x0123456789ABCDEF], np.uint64), np.array([5, 9], np.uint64),
            np.array(1, np.int32)]


def _random_rows() -> list[OpCase]:
    rows = []
    tol = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12)}  # normal numbers off cpu: the device's log, sin, cos
    for op, kind in (("StatelessRandomUniformV2", 0), ("StatelessRandomNormalV2", 1), ("StatelessTruncatedNormalV2", 2)):
        for dt in ("float32", "float64"):
            rows.append(OpCase(f"{op}-{dt}", op, _key_counter, lambda *a, _k=kind, **kw: _random_ref("v2")(*a, **{**kw, "_kind": _k}),
                               attrs={"dtype": ok.as_dtype(dt)}, dtypes=(dt,), grad=False, tol=tol))
    rows.append(OpCase("StatelessRandomUniformIntV2", "StatelessRandomUniformIntV2",
                       lambda rng, dt: [*_key_counter(rng, dt), np.array(-7, dt), np.array(100, dt)],
                       lambda *a, **kw: _random_ref("v2")(*a, **{**kw, "_kind": 3}), dtypes=("int32", "int64"), grad=False))
    rows.append(OpCase("StatelessRandomUniformFullIntV2", "StatelessRandomUniformFullIntV2", _key_counter,
                       lambda *a, **kw: _random_ref("v2")(*a, **{**kw, "_kind": 4}), attrs={"dtype": ok.uint32},
                       dtypes=("int32",), grad=False))
    seed = lambda rng, dt: [np.array([2, 3], np.int32), np.array([11, -12], np.int64)]  # noqa: E731
    for op, kind in (("StatelessRandomUniform", 0), ("StatelessRandomNormal", 1), ("StatelessTruncatedNormal", 2)):
        rows.append(OpCase(op, op, seed, lambda *a, _k=kind, **kw: _random_ref("v1")(*a, **{**kw, "_kind": _k}),
                           attrs={"dtype": ok.float32}, dtypes=("float32",), grad=False, tol=tol))
    rows.append(OpCase("StatelessRandomUniformInt", "StatelessRandomUniformInt",
                       lambda rng, dt: [*seed(rng, dt), np.array(-3, dt), np.array(30, dt)],
                       lambda *a, **kw: _random_ref("v1")(*a, **{**kw, "_kind": 3}), dtypes=("int32",), grad=False))

    def key_counter_ref(seed: np.ndarray, **_: Any) -> tuple[np.ndarray, np.ndarray]:
        from opkernel.ops import random_ops as R

        k, c = R.key_counter(*R.seed_words("", seed))
        return np.array([k[0] | k[1] << 32], np.uint64), np.array([c[0] | c[1] << 32, c[2] | c[3] << 32], np.uint64)

    rows.append(OpCase("StatelessRandomGetKeyCounter", "StatelessRandomGetKeyCounter",
                       lambda rng, dt: [np.array([-5, 2**40], dt)], key_counter_ref, dtypes=("int64",), grad=False))

    def multinomial_ref(logits: np.ndarray, num_samples: Any, seed: Any, **_: Any) -> np.ndarray:
        from opkernel_cpu import random_kernels as rk

        return rk.stateless_multinomial(logits, num_samples, seed, output_dtype=ok.int64)

    rows.append(OpCase("StatelessMultinomial", "StatelessMultinomial",
                       lambda rng, dt: [(rng.standard_normal((3, 7)) * 2).astype(dt), np.int32(9), np.array([4, 5], np.int64)],
                       multinomial_ref, dtypes=("float32", "float64"), grad=False))
    return rows


RANDOM_CASES = _random_rows()

CASES = BINARY_CASES + UNARY_CASES + LOGIC_CASES + REDUCTION_CASES + LINALG_CASES + COMPLEX_CASES + RANDOM_CASES


test_values, test_shapes, test_gradients = optable.table_tests(CASES)


def test_ids_are_unique() -> None:
    ids = optable.ids(CASES)
    assert len(ids) == len(set(ids))


def test_every_op_has_a_row_and_a_gradient_decision() -> None:
    from opkernel import gradients

    ops = {c.op for c in CASES}
    for op in ops:
        assert gradients.has_gradient(op) or gradients.is_not_differentiable(op), op


# ---------------------------------------------------------------- specific behaviour


def grads_of(f: Any, *xs: Any) -> Any:
    ts = [ok.tensor(x) for x in xs]
    with ok.autodiff.GradientTape() as tape:
        for t in ts:
            tape.watch(t)
        y = f(*ts)
    return [None if g is None else g.numpy() for g in tape.gradient(y, ts)]


def test_sum_accepts_a_python_list_of_axes(backend: str) -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    out = ok.ops.sum(ok.tensor(x), [0, -1], keep_dims=True)
    np.testing.assert_array_equal(out.numpy(), x.sum(axis=(0, 2), keepdims=True))
    assert ok.ops.sum(ok.tensor(x), [1]).shape == (2, 4)


def test_sum_accepts_an_empty_list_of_axes(backend: str) -> None:
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(ok.ops.sum(ok.tensor(x), []).numpy(), x)


def test_maximum_minimum_ties_go_to_x(backend: str) -> None:
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 1.0, 4.0])
    gx, gy = grads_of(ok.ops.maximum, x, y)
    np.testing.assert_array_equal(gx, [1, 1, 0])
    np.testing.assert_array_equal(gy, [0, 0, 1])
    gx, gy = grads_of(ok.ops.minimum, x, y)
    np.testing.assert_array_equal(gx, [1, 0, 1])
    np.testing.assert_array_equal(gy, [0, 1, 0])


def test_max_min_gradient_splits_ties_evenly(backend: str) -> None:
    x = np.array([[3.0, 1.0, 3.0, 3.0], [0.0, 2.0, 1.0, 2.0]])
    (g,) = grads_of(lambda t: ok.ops.max(t, [1]), x)
    np.testing.assert_allclose(g, [[1 / 3, 0, 1 / 3, 1 / 3], [0, 0.5, 0, 0.5]])
    (g,) = grads_of(lambda t: ok.ops.min(t, [0], keep_dims=True), np.array([[1.0, 2.0], [1.0, 0.0]]))
    np.testing.assert_allclose(g, [[0.5, 0], [0.5, 1]])


def test_prod_gradient_with_zeros(backend: str) -> None:
    x = np.array([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 0.0, 4.0]])
    (g,) = grads_of(lambda t: ok.ops.prod(t, [1]), x)
    np.testing.assert_allclose(g, [[12, 8, 6], [0, 8, 0], [0, 0, 0]])


def test_pow_gradient_wrt_exponent_is_zero_for_non_positive_base(backend: str) -> None:
    gx, gy = grads_of(ok.ops.pow, np.array([0.0, -2.0, 2.0]), np.array([2.0, 2.0, 3.0]))
    np.testing.assert_allclose(gx, [0.0, -4.0, 12.0])
    np.testing.assert_allclose(gy, [0.0, 0.0, 8 * math.log(2)])


def test_clip_by_value_gradient_goes_to_the_bound_that_clipped(backend: str) -> None:
    g = grads_of(ok.ops.clip_by_value, np.array([-2.0, 0.0, 2.0, 0.5]), np.array(-1.0), np.array(1.0))
    np.testing.assert_array_equal(g[0], [0, 1, 0, 1])
    assert g[1] == 1 and g[2] == 1


def test_select_v2_gradient(backend: str) -> None:
    c = ok.tensor(np.array([[True], [False]]))
    gt, ge = grads_of(lambda t, e: ok.ops.select_v2(c, t, e), np.ones((2, 3)), np.ones(3))
    np.testing.assert_array_equal(gt, [[1, 1, 1], [0, 0, 0]])
    np.testing.assert_array_equal(ge, [1, 1, 1])


def test_add_n_gradient(backend: str) -> None:
    xs = [np.arange(3.0), np.ones(3), np.zeros(3)]
    ts = [ok.tensor(x) for x in xs]
    with ok.autodiff.GradientTape() as tape:
        tape.watch(ts)
        y = ok.ops.mul(ok.ops.add_n(ts), ok.tensor(np.array([1.0, 2.0, 3.0])))
    for g in tape.gradient(y, ts):
        np.testing.assert_array_equal(g.numpy(), [1, 2, 3])


def test_cast_gradient(backend: str) -> None:
    x = ok.tensor(np.array([1.5, -2.0], np.float32))
    with ok.autodiff.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = ok.ops.cast(x, DstT=ok.float64)
        z = ok.ops.cast(x, DstT=ok.int32)
    g = tape.gradient(y, x)
    assert g.dtype == ok.float32
    np.testing.assert_array_equal(g.numpy(), [1, 1])
    assert tape.gradient(z, x) is None


def test_erf_matches_math_erf_to_double_precision(backend: str) -> None:
    x = np.concatenate([np.linspace(-6, 6, 2001), np.logspace(-200, 1, 201), [0.46875, 4.0, 26.0, np.inf, -np.inf]])
    out = ok.ops.erf(ok.tensor(x)).numpy()
    np.testing.assert_allclose(out, erf_ref(x), rtol=2e-15, atol=0)
    assert np.isnan(ok.ops.erf(ok.tensor(np.array([np.nan]))).numpy()[0])


def test_equal_with_incompatible_shapes(backend: str) -> None:
    x, y = np.zeros(3), np.zeros(4)
    assert ok.ops.equal(x, y, incompatible_shape_error=False).numpy().tolist() is False
    assert ok.ops.not_equal(x, y, incompatible_shape_error=False).numpy().tolist() is True
    with pytest.raises(InvalidArgumentError, match="'Equal'.*Incompatible shapes"):
        ok.ops.equal(x, y)
    assert ok.infer_shapes("Equal", [(3,), (4,)], {"incompatible_shape_error": False})[0].rank is None


def test_integer_ops(backend: str) -> None:
    x, y = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
    np.testing.assert_array_equal(ok.ops.floor_div(x, y).numpy(), [3, -4, -4, 3])
    np.testing.assert_array_equal(ok.ops.floor_mod(x, y).numpy(), [1, 1, -1, -1])
    np.testing.assert_array_equal(ok.ops.real_div(x, y).numpy(), [3, -3, -3, 3])
    assert ok.ops.sum(np.array([2**31 - 1, 1], np.int32), [0]).dtype == ok.int32


# ---------------------------------------------------------------- errors


def test_matmul_inner_dimension_mismatch(backend: str) -> None:
    a, b = np.ones((2, 3)), np.ones((4, 5))
    with pytest.raises(InvalidArgumentError, match="'MatMul'") as e:
        ok.ops.mat_mul(a, b)
    assert e.value.op == "MatMul"
    with pytest.raises(ShapeError, match="MatMul"):
        ok.infer_shapes("MatMul", [(2, 3), (4, 5)])
    ok.infer_shapes("MatMul", [(2, 3), (5, 3)], {"transpose_b": True})
    with pytest.raises(ShapeError, match="MatMul"):
        ok.infer_shapes("MatMul", [(2, 3), (5, 3)])


def test_batch_matmul_errors(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'BatchMatMul'"):
        ok.ops.batch_mat_mul(np.ones((2, 2, 3)), np.ones((2, 4, 2)))
    with pytest.raises(InvalidArgumentError, match="'BatchMatMul'.*broadcast"):
        ok.ops.batch_mat_mul(np.ones((2, 2, 3)), np.ones((3, 3, 2)))
    with pytest.raises(ShapeError, match="BatchMatMul"):
        ok.infer_shapes("BatchMatMul", [(2, 2, 3), (3, 3, 2)])


def test_int32_to_exp_is_a_type_error(backend: str) -> None:
    with pytest.raises(TypeError) as e:
        ok.ops.exp(ok.tensor(np.arange(3, dtype=np.int32)))
    msg = str(e.value)
    assert "'Exp'" in msg and "'x'" in msg and "float32" in msg and "int32" in msg


def test_broadcast_mismatch(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'Add'.*Incompatible shapes"):
        ok.ops.add(np.ones((2, 3)), np.ones(4))
    with pytest.raises(ShapeError, match="Add"):
        ok.infer_shapes("Add", [(2, 3), (4,)])
    with pytest.raises(InvalidArgumentError, match="'SelectV2'"):
        ok.ops.select_v2(np.ones(2, bool), np.ones(3), np.ones(3))


def test_reduction_axis_out_of_range(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'Sum'.*Invalid reduction dimension 2"):
        ok.ops.sum(np.ones((2, 3)), [2])
    with pytest.raises(InvalidArgumentError, match="'Max'.*-3"):
        ok.ops.max(np.ones((2, 3)), [-3])
    with pytest.raises(ShapeError, match="'Sum'"):
        infer_shapes(ok.op_def("Sum"), [(2, 3), (1,)], {}, [None, np.array([5], np.int32)])


def test_arg_max_errors(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'ArgMax'.*range"):
        ok.ops.arg_max(np.ones((2, 3)), 2)
    with pytest.raises(InvalidArgumentError, match="'ArgMin'.*empty"):
        ok.ops.arg_min(np.ones((2, 0)), 1)
    with pytest.raises(ShapeError, match="'ArgMax'"):
        infer_shapes(ok.op_def("ArgMax"), [(2, 3), ()], {}, [None, np.array(-3, np.int32)])
    assert infer_shapes(ok.op_def("ArgMax"), [(2, 3, 4), ()], {}, [None, None])[0].rank == 2


def test_integer_division_by_zero(backend: str) -> None:
    for fn in (ok.ops.floor_div, ok.ops.floor_mod, ok.ops.real_div):
        with pytest.raises(InvalidArgumentError, match="division by zero"):
            fn(np.array([1, 2], np.int32), np.array([1, 0], np.int32))


def test_integer_pow_negative_exponent(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'Pow'.*negative"):
        ok.ops.pow(np.array([2], np.int32), np.array([-1], np.int32))


def test_clip_by_value_bound_shape(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'ClipByValue'.*clip_value_min"):
        ok.ops.clip_by_value(np.ones((2, 3)), np.zeros(3), np.array(1.0))
    with pytest.raises(ShapeError, match="ClipByValue"):
        ok.infer_shapes("ClipByValue", [(2, 3), (3,), ()])


def test_add_n_shape_mismatch(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'AddN'"):
        ok.ops.add_n([np.ones(2), np.ones(3)])


def test_inputs_are_not_mutated(backend: str) -> None:
    x = np.array([[3.0, -1.0], [0.5, 2.0]])
    keep = x.copy()
    ok.ops.clip_by_value(x, np.array(0.0), np.array(1.0))
    ok.ops.rsqrt(np.abs(x))
    ok.ops.add_n([x, x])
    ok.ops.sum(x, [0])
    np.testing.assert_array_equal(x, keep)


# ---------------------------------------------------------------- complex numbers: specific behaviour


def needs_complex(backend: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.complex64):
        pytest.skip(f"backend {backend!r} holds no complex tensors")


def test_complex_gradient_convention(backend: str) -> None:
    """dL/da + j dL/db for a real loss L of z = a + bj (TensorFlow's and PyTorch's convention)."""
    needs_complex(backend)
    z = np.array([1 + 2j, -0.5 + 0.25j, 3 - 1j])
    # L = sum |z|^2 = sum a^2 + b^2: gradient 2a + 2bj = 2z.
    (g,) = grads_of(lambda t: ok.ops.sum(ok.ops.real(ok.ops.mul(t, ok.ops.conj(t)), Tout=ok.float64), [0]), z)
    np.testing.assert_allclose(g, 2 * z)
    # L = sum Re(z^2) = sum a^2 - b^2: gradient 2a - 2bj = 2 conj(z).
    (g,) = grads_of(lambda t: ok.ops.sum(ok.ops.real(ok.ops.square(t), Tout=ok.float64), [0]), z)
    np.testing.assert_allclose(g, 2 * np.conj(z))
    # L = sum Im(z) = sum b: gradient 0 + 1j.
    (g,) = grads_of(lambda t: ok.ops.sum(ok.ops.imag(t, Tout=ok.float64), [0]), z)
    np.testing.assert_allclose(g, np.full(3, 1j))


def test_complex_sign_and_abs_gradients_are_zero_at_zero(backend: str) -> None:
    needs_complex(backend)
    z = np.array([0j, 3 + 4j])
    (g,) = grads_of(lambda t: ok.ops.sum(ok.ops.complex_abs(t, Tout=ok.float64), [0]), z)
    np.testing.assert_allclose(g, [0, (3 + 4j) / 5])
    (g,) = grads_of(lambda t: ok.ops.sum(ok.ops.real(ok.ops.sign(t), Tout=ok.float64), [0]), z)
    assert g[0] == 0 and np.isfinite(g).all()


@pytest.mark.parametrize("op", ["Real", "Imag", "ComplexAbs", "Angle"])
def test_complex_part_dtype_must_pair_with_t(op: str, backend: str) -> None:
    needs_complex(backend)
    z = np.ones(2, np.complex128)
    with pytest.raises(InvalidArgumentError, match=rf"^op '{op}': attr 'Tout' must be float64, the dtype of complex128's parts, got float32$"):
        ok.execute(op, z)  # Tout defaults to float
    out = ok.execute(op, z, Tout=ok.float64)
    assert out.dtype == ok.float64


def test_complex_dtype_must_pair_with_t(backend: str) -> None:
    needs_complex(backend)
    with pytest.raises(InvalidArgumentError, match=r"^op 'Complex': attr 'Tout' must be complex128, the complex dtype with float64 parts, got complex64$"):
        ok.ops.complex(np.ones(2), np.ones(2))


def test_complex_broadcasts_and_keeps_infinite_parts(backend: str) -> None:
    needs_complex(backend)
    re = np.array([[np.inf], [1.0]], np.float32)
    im = np.array([2.0, -np.inf, 0.5], np.float32)
    out = ok.ops.complex(re, im).numpy()
    assert out.dtype == np.complex64 and out.shape == (2, 3)
    np.testing.assert_array_equal(out.real, np.broadcast_to(re, (2, 3)))
    np.testing.assert_array_equal(out.imag, np.broadcast_to(im, (2, 3)))
    with pytest.raises(InvalidArgumentError, match=r"^op 'Complex': Incompatible shapes: \[2\] vs. \[3\]$"):
        ok.ops.complex(np.ones(2, np.float32), np.ones(3, np.float32))


def test_complex_parts_are_new_arrays(backend: str) -> None:
    needs_complex(backend)
    z = ok.tensor(np.array([1 + 2j, 3 - 4j], np.complex64))
    before = z.numpy().copy()
    for f in (ok.ops.real, ok.ops.imag):
        part = f(z)
        if backend == "cpu":
            assert not np.shares_memory(part.value, z.value) and part.value.flags.c_contiguous
    np.testing.assert_array_equal(z.numpy(), before)


def test_conj_takes_complex_types_only(backend: str) -> None:
    with pytest.raises(ok.errors.OpTypeError, match="Conj"):
        ok.ops.conj(np.ones(2, np.float32))


def test_float16_floor_div_floors_the_half_quotient(backend: str) -> None:
    """TensorFlow's half FloorDiv floors the quotient rounded to half: 1026 // 1.0009765625
    is 1025 (OpenCL floored the float32 quotient, 1024.999, to 1024)."""
    if not ok.engine.backend_instance(backend).supports_dtype(ok.float16):
        pytest.skip(f"{backend} holds no float16")
    a = np.array([1026, -1026, 7, 2049, 0, 5], np.float16)
    b = np.array([1.0009765625, 1.0009765625, 0.1, 3, 0, -0.0], np.float16)
    with np.errstate(all="ignore"):  # 0 / 0 and 5 / -0.0 are in the case
        want = np.floor((a.astype(np.float32) / b.astype(np.float32)).astype(np.float16))
        np.testing.assert_array_equal(ok.ops.floor_div(a, b).numpy(), want)
