"""Elementwise math ops where opkernel used to answer differently from TensorFlow
(found by the TensorFlow-oracle cases of tests/tf_conformance/cases_math.py).

TensorFlow's answers are written as literals with the TensorFlow source that gives
them, so these tests need no TensorFlow.  Every body runs on every installed backend.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import KernelNotFoundError


def _run(op: str, *inputs: Any, **attrs: Any) -> np.ndarray:
    """``op``'s output; a skip where the backend has no kernel for these dtypes (OpenCL has no complex kernels)."""
    try:
        return ok.execute(op, *inputs, **attrs).numpy()  # type: ignore[no-any-return]
    except KernelNotFoundError as e:
        pytest.skip(str(e))


# ---------------------------------------------------------------- complex parts of a 0-d tensor


@pytest.mark.parametrize("op,expected", [("Real", 3.0), ("Imag", -4.0), ("ComplexAbs", 5.0), ("Angle", np.arctan2(-4.0, 3.0))])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_part_of_a_scalar_is_a_scalar(backend: str, op: str, expected: float, dtype: str) -> None:
    part = "float32" if dtype == "complex64" else "float64"
    y = _run(op, np.array(3 - 4j, dtype), Tout=part)
    assert y.shape == ()
    assert y.dtype == np.dtype(part)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


# ---------------------------------------------------------------- FloorMod's signed zeros and INT_MIN


# tensorflow/core/kernels/cwise_ops.h, floor_fmod: r = fmod(x, y), plus y where r != 0 and
# the signs of r and y differ.  A zero remainder keeps fmod's sign, which is x's.
def test_float_floor_mod_zero_takes_the_sign_of_x(backend: str) -> None:
    x = np.array([-0.0, 0.0, 6.0, -6.0, 0.0, -0.0, 7.0, -7.0, 5.5], np.float32)
    y = np.array([3.0, -3.0, -3.0, 3.0, -2.0, 2.0, -3.0, 3.0, -np.inf], np.float32)
    out = ok.ops.floor_mod(x, y).numpy()
    np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -2.0, 2.0, -np.inf])
    assert np.signbit(out[:6]).tolist() == [True, False, False, True, False, True]
    scalar = ok.ops.floor_mod(np.array(-6.0), np.array(-3.0)).numpy()
    assert scalar == 0 and np.signbit(scalar)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64"])
def test_int_floor_mod_of_the_lowest_value_by_minus_one_is_zero(backend: str, dtype: str) -> None:
    low = np.iinfo(dtype).min
    x = np.array([low, low, low + 1, -7], dtype)
    y = np.array([-1, 1, -1, -1], dtype)
    assert ok.ops.floor_mod(x, y).numpy().tolist() == [0, 0, 0, 0]


# ---------------------------------------------------------------- where TensorFlow is no reference


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_erf_at_infinity(backend: str, dtype: str) -> None:
    """erf(+-inf) = +-1; TensorFlow's double erf returns NaN there (cases_math.DIFFERENCES)."""
    out = ok.ops.erf(np.array([np.inf, -np.inf, np.nan], dtype)).numpy()
    assert out[:2].tolist() == [1.0, -1.0]
    assert np.isnan(out[2])


@pytest.mark.parametrize("op", ["maximum", "minimum"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_maximum_and_minimum_of_signed_zeros(backend: str, op: str, dtype: str) -> None:
    """IEEE 754 leaves the sign of max(-0, +0) open and TensorFlow's answer depends on the
    element's position, so the suite compares no such tie: the result is a zero, and NaN
    still wins."""
    x = np.array([-0.0, 0.0, -0.0, 0.0, np.nan] * 7, dtype)
    y = np.array([0.0, -0.0, -0.0, 0.0, -0.0] * 7, dtype)
    out = getattr(ok.ops, op)(x, y).numpy().reshape(7, 5)
    assert (out[:, :4] == 0).all()
    assert np.signbit(out[:, 2]).all() and not np.signbit(out[:, 3]).any()  # equal zeros keep their sign
    assert np.isnan(out[:, 4]).all()


# ---------------------------------------------------------------- complex Sign, Rsqrt, Sigmoid


# tensorflow/core/kernels/cwise_ops.h, scalar_sign_op for complex: x / |x| part by part.
def test_complex_sign_divides_part_by_part(backend: str) -> None:
    z = np.array([complex(-2.0, -0.0), complex(-0.0, 1.5), complex(np.inf, 0.0), 0j, 3 - 4j], np.complex128)
    out = _run("Sign", z)
    np.testing.assert_array_equal(out[[0, 1, 3, 4]], [-1 + 0j, 1j, 0j, 0.6 - 0.8j])
    assert np.signbit(out[0].imag) and np.signbit(out[1].real)
    assert np.isnan(out[2].real) and out[2].imag == 0


@pytest.mark.parametrize("op", ["rsqrt", "sigmoid"])
def test_complex_rsqrt_and_sigmoid_tend_to_zero_at_infinity(backend: str, op: str) -> None:
    """1 / sqrt(z) -> 0 as |z| -> inf, and 1 / (1 + exp(-z)) -> 0 as Re z -> -inf: 0, as
    TensorFlow gives, not the NaN of a complex division by an infinity."""
    z = {"rsqrt": [complex(0, -np.inf), complex(np.inf, -np.inf), complex(-2, -np.inf), complex(np.inf, 1.5)],
         "sigmoid": [complex(-np.inf, 1.5), complex(-np.inf, -np.inf), complex(-np.inf, np.nan), complex(-800, 1)]}[op]
    out = _run(op.capitalize(), np.array(z, np.complex128))
    np.testing.assert_array_equal(out, np.zeros(len(z), np.complex128))


# ---------------------------------------------------------------- Tanh saturates to exactly +-1


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_tanh_saturates_to_one(backend: str, dtype: str) -> None:
    """tanh rounds to +-1 past 9.01 in float32 (19.06 in float64), as TensorFlow's does;
    PoCL's float tanh stopped one ulp short, even at inf."""
    x = np.array([-np.inf, -30.0, -20.0, 20.0, 30.0, np.inf, np.nan], dtype)
    out = ok.ops.tanh(x).numpy()
    assert out[:6].tolist() == [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]
    assert np.isnan(out[6])
    np.testing.assert_allclose(ok.ops.tanh(np.array([9.0, -15.0, 0.5], dtype)).numpy(),
                               np.tanh(np.array([9.0, -15.0, 0.5], np.float64)), rtol=1e-3 if dtype == "float16" else 1e-6)


# ---------------------------------------------------------------- Sign of -0.0


# tensorflow/core/kernels/cwise_ops.h, scalar_sign_op: (0 < x) - (x < 0), so sign(-0.0) is +0.0.
@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32", "float64"])
def test_sign_of_negative_zero_is_positive_zero(backend: str, dtype: str) -> None:
    try:
        x = ok.ops.cast(np.array([-0.0, 0.0, -2.0, 3.0], np.float32), DstT=ok.as_dtype(dtype))
        values = ok.ops.cast(ok.ops.sign(x), DstT=ok.float32).numpy()
    except KernelNotFoundError as e:
        pytest.skip(str(e))
    assert values.tolist() == [0.0, 0.0, -1.0, 1.0]
    assert not np.signbit(values[:2]).any()


# ---------------------------------------------------------------- Cast of floats out of an integer's range


SATURATING = {
    "int8": [0, 127, -128, 127, -128, 127, -128, -1, 2],
    "uint8": [0, 255, 0, 255, 0, 255, 0, 0, 2],
    "int16": [0, 32767, -32768, 32767, -32768, 300, -129, -1, 2],
    "uint16": [0, 65535, 0, 65535, 0, 300, 0, 0, 2],
    "int32": [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 300, -129, -1, 2],
    "uint32": [0, 2**32 - 1, 0, 2**32 - 1, 0, 300, 0, 0, 2],
    "int64": [0, 2**63 - 1, -(2**63), 10**10, -(10**10), 300, -129, -1, 2],
    "uint64": [0, 2**64 - 1, 0, 10**10, 0, 300, 0, 0, 2],
}


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", sorted(SATURATING))
def test_float_to_integer_cast_saturates(backend: str, src: str, dst: str) -> None:
    """C++ leaves these undefined, and TensorFlow's CPU answer depends on the element's
    position (uint8(65535.0) is 255 or 0 by the array's length): opkernel saturates and
    maps NaN to 0 at every position, as TensorFlow's GPU kernels do."""
    x = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 300.7, -129.9, -1.5, 2.5], src)
    for n in (1, 3, 16, 17, 35):  # every position: SIMD lanes and scalar tails
        wide = np.tile(x, n)
        try:
            out = ok.ops.cast(wide, DstT=ok.as_dtype(dst)).numpy()
        except KernelNotFoundError as e:
            pytest.skip(str(e))
        assert out.reshape(n, len(x)).tolist() == [SATURATING[dst]] * n


# ---------------------------------------------------------------- no warnings where TensorFlow gives NaN silently


@pytest.mark.parametrize("op", ["sin", "cos", "tanh", "exp", "log", "sqrt"])
def test_transcendentals_of_infinities_do_not_warn(backend: str, op: str) -> None:
    """TensorFlow returns NaN for sin(inf), log(-1)... without a word; numpy's
    'invalid value' RuntimeWarning reached the caller for Sin, Cos and Tanh."""
    x = np.array([np.inf, -np.inf, np.nan, -1.0, 0.5], np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = getattr(ok.ops, op)(x).numpy()
        try:
            getattr(ok.ops, op)(np.array([complex(np.inf, np.inf), complex(np.nan, 1.0)], np.complex128)).numpy()
        except KernelNotFoundError:
            pass  # no complex kernels on this backend: the real case above still ran
    with np.errstate(all="ignore"):
        expected = getattr(np, op)(x)
    np.testing.assert_allclose(out, expected, rtol=1e-12, equal_nan=True)
