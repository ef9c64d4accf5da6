"""Where the reductions and ClipByValue gave a different answer than TensorFlow (issue 24),
found by the TensorFlow-oracle suite (tests/tf_conformance/cases_reduce.py).

TensorFlow's answers are written here as literals, each with the TensorFlow source that
gives it, so these tests need no TensorFlow.  Every body runs on every installed backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel import errors

REDUCTIONS = ["sum", "prod", "mean", "max", "min"]
X = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


# ---------------------------------------------------------------- reduction axes

# tensorflow/core/kernels/reduction_ops_common.cc, ReductionHelper::Simplify: the axes
# are read flat; an axis named twice (2 and -1 of a rank-3 input) is InvalidArgumentError
# "Axes contains duplicate dimension" (opkernel used to merge them).


@pytest.mark.parametrize("fn", REDUCTIONS)
@pytest.mark.parametrize("axes", [[2, -1], [0, 0], [-3, 1, 0]])
def test_reduction_rejects_an_axis_named_twice(backend: str, fn: str, axes: list[int]) -> None:
    op = {"sum": "Sum", "prod": "Prod", "mean": "Mean", "max": "Max", "min": "Min"}[fn]
    with pytest.raises(errors.InvalidArgumentError, match=f"'{op}'.*duplicate dimension"):
        getattr(ok.ops, fn)(X, np.array(axes, np.int32))


@pytest.mark.parametrize("fn", ["all", "any"])
def test_bool_reduction_rejects_an_axis_named_twice(backend: str, fn: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="duplicate dimension"):
        getattr(ok.ops, fn)(np.ones((2, 3), bool), np.array([1, -1], np.int64))


@pytest.mark.parametrize("fn", REDUCTIONS + ["all", "any"])
def test_reduction_reads_a_matrix_of_axes_flat(backend: str, fn: str) -> None:
    x = X > 5 if fn in ("all", "any") else X
    got = getattr(ok.ops, fn)(x, np.array([[0], [2]], np.int32)).numpy()
    want = getattr(ok.ops, fn)(x, np.array([0, 2], np.int32)).numpy()
    assert got.shape == (3,)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- signed zeros in Max/Min

# Eigen's MaxReducer/MinReducer (reduction_ops.h) keep the element just read when it
# equals the running value: Max of [-0.0, 0.0] is 0.0, of [0.0, -0.0] is -0.0.
ZEROS = np.array([[-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]], np.float32)


@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_of_equal_zeros_keep_the_later_one(backend: str, fn: str) -> None:
    got = getattr(ok.ops, fn)(ZEROS, np.int32(1)).numpy()
    np.testing.assert_array_equal(np.signbit(got), [False, True, True])
    column = getattr(ok.ops, fn)(np.ascontiguousarray(ZEROS.T), np.int32(0)).numpy()  # the column kernels
    np.testing.assert_array_equal(np.signbit(column), [False, True, True])


@pytest.mark.parametrize("n", [1000, 10000])  # OpenCL's tree reduction, in one pass and in two
@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_of_long_rows_of_zeros_keep_the_last_one(backend: str, fn: str, n: int) -> None:
    rows = np.where(np.random.default_rng(n).integers(0, 2, (4, n)) == 1, -0.0, 0.0).astype(np.float32)
    rows[:, -1] = [-0.0, 0.0, -0.0, 0.0]
    got = getattr(ok.ops, fn)(rows, np.int32(1)).numpy()
    np.testing.assert_array_equal(np.signbit(got), [True, False, True, False])


# ---------------------------------------------------------------- float16 reductions

# A deliberate difference (cases_reduce.py): TensorFlow's float16 partial sums are halves
# in a layout-dependent order; opkernel accumulates in float32, so the result is the exact
# one rounded to float16 (here, where TensorFlow's intermediate overflows to inf).
@pytest.mark.parametrize("fn,values", [
    ("sum", [60000, 60000, -60000]), ("mean", [60000, 60000]), ("prod", [1000, 1000, 0.001]),
    ("sum", [2048] + [1] * 100),
])
def test_float16_reductions_round_the_exact_result_once(backend: str, fn: str, values: list[float]) -> None:
    x = np.array(values, np.float16)
    exact = {"sum": np.sum, "mean": np.mean, "prod": np.prod}[fn](x.astype(np.float64))
    for data, axis in ((x, 0), (np.stack([x, x], 1), 0)):  # a row, and the column kernels
        got = getattr(ok.ops, fn)(data, np.int32(axis)).numpy()
        assert got.dtype == np.float16
        np.testing.assert_allclose(got.astype(np.float64), np.float16(exact), rtol=1e-3)


# TensorFlow's AddN on float16 rounds each partial sum to a half (in0 + in1 + ... in
# Eigen::half): [60000] + [60000] + [-60000] is inf (OpenCL used to sum in float32).
def test_add_n_of_float16_rounds_each_partial_sum(backend: str) -> None:
    inputs = [np.array([60000, -60000], np.float16), np.array([60000, 60000], np.float16),
              np.array([-60000, 0], np.float16)]
    got = ok.ops.add_n(inputs).numpy()
    np.testing.assert_array_equal(got, np.array([np.inf, 0], np.float16))


# ---------------------------------------------------------------- Prod's gradient

# tensorflow/python/ops/math_grad.py, _ProdGrad: the product of the elements before x_i
# times the product of those after it (exclusive cumprods).  opkernel used prod / x_i,
# which gave NaN for an infinite x_i (inf / inf), +0.0 for -0.0 and dropped an inf
# beside a zero (inf * 0 is NaN).
def test_prod_gradient_is_the_product_of_the_others(backend: str) -> None:
    inf = np.inf
    x = ok.tensor(np.array([[-0.0, 2.0, -3.0], [inf, 0.0, 1.0], [inf, 2.0, 3.0], [0.0, 0.0, 5.0]], np.float64))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.prod(x, np.int32(1))
    got = tape.gradient(y, x).numpy()
    want = np.array([[-6.0, 0.0, -0.0], [0.0, inf, np.nan], [6.0, inf, inf], [0.0, 0.0, 0.0]])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got)[~np.isnan(want)], np.signbit(want)[~np.isnan(want)])
    with ok.GradientTape() as tape:  # over the first axis of a rank-3 input, and keep_dims
        tape.watch(x)
        y3 = ok.ops.prod(ok.ops.reshape(x, [4, 3, 1]), np.int32(0), keep_dims=True)
    col = tape.gradient(y3, x).numpy()
    with np.errstate(invalid="ignore"):  # inf * 0
        others = np.array([np.prod(np.delete(x.numpy()[:, j], i)) for i in range(4) for j in range(3)]).reshape(4, 3)
    np.testing.assert_array_equal(col, others)


# ---------------------------------------------------------------- ClipByValue


def _clip(t: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    try:
        return ok.ops.clip_by_value(t, lo, hi).numpy()
    except errors.KernelNotFoundError as e:
        pytest.skip(f"no kernel for {t.dtype} on {ok.get_backend()}: {e}")


# cwise_op_clip.cc on std::complex: Eigen's min and max work on the real and imaginary
# parts separately, so each part is clipped between the same parts of the bounds.
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_clip_by_value_of_complex_clips_each_part(backend: str, dtype: str) -> None:
    t = np.array([0.5 - 0.4j, 0.5 + 2j, 2 + 0.1j, -1 + 3j], dtype)
    got = _clip(t, np.array(0.1 + 0.1j, dtype), np.array(1 + 1j, dtype))
    np.testing.assert_array_equal(got, np.array([0.5 + 0.1j, 0.5 + 1j, 1 + 0.1j, 0.1 + 1j], dtype))
    bounds = _clip(t, np.full(4, -1 - 1j, dtype), np.full(4, 1 + 0j, dtype))  # tensor bounds
    np.testing.assert_array_equal(bounds, np.array([0.5 - 0.4j, 0.5 + 0j, 1 + 0j, -1 + 0j], dtype))


# TensorFlow has no CPU kernel of ClipByValue for uint32/uint64 (a deliberate difference
# in cases_reduce.py): the mathematical definition min(max(t, lo), hi) is the reference.
@pytest.mark.parametrize("dtype", ["uint32", "uint64"])
def test_clip_by_value_of_wide_unsigned_ints_is_the_definition(backend: str, dtype: str) -> None:
    top = np.iinfo(dtype).max
    t = np.array([0, 3, 7, top, top - 1, 5], dtype)
    got = _clip(t, np.array(3, dtype), np.array(top - 1, dtype))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, np.minimum(np.maximum(t, 3), top - 1).astype(dtype))


# ---------------------------------------------------------------- float16 variables

# TensorFlow updates float16 variables (AssignAdd, ApplyGradientDescent/Momentum/Adam);
# OpenCL had no float16 kernel for them (KernelNotFoundError).  The update is in place:
# the Variable itself holds the new value.
def test_float16_variable_updates_run_in_place(backend: str) -> None:
    rng = np.random.default_rng(7)
    var0, grad = rng.standard_normal((3, 5)).astype(np.float16), rng.standard_normal((3, 5)).astype(np.float16)
    var, m, v = ok.Variable(var0), ok.Variable(np.zeros((3, 5), np.float16)), ok.Variable(np.ones((3, 5), np.float16))
    h = np.float16
    ok.ops.apply_adam(var, m, v, h(0.9), h(0.999), h(0.01), h(0.9), h(0.999), h(1e-3), grad)
    m_want = 0.1 * grad.astype(np.float32)
    v_want = 1 + (grad.astype(np.float32) ** 2 - 1) * np.float32(1 - h(0.999))
    lr_t = 0.01 * np.sqrt(1 - np.float32(h(0.999))) / (1 - np.float32(h(0.9)))
    np.testing.assert_allclose(m.numpy(), m_want, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(v.numpy(), v_want, rtol=2e-3, atol=1e-3)
    np.testing.assert_allclose(var.numpy(), var0 - lr_t * m_want / (np.sqrt(v_want) + np.float32(h(1e-3))),
                               rtol=2e-3, atol=2e-3)
    ok.ops.assign_add(var, np.ones((3, 5), np.float16))
    ok.ops.apply_gradient_descent(var, h(0.5), np.full((3, 5), 2, np.float16))
    accum = ok.Variable(np.zeros((3, 5), np.float16))
    ok.ops.apply_momentum(var, accum, h(1), np.ones((3, 5), np.float16), h(0.9))
    np.testing.assert_array_equal(accum.numpy(), np.ones((3, 5), np.float16))
    assert var.dtype == ok.float16 and var.numpy().dtype == np.float16
