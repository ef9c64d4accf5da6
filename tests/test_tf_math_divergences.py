"""Elementwise math ops where opkernel used to answer differently from TensorFlow
(found by the TensorFlow-oracle cases of tests/tf_conformance/cases_math.py).

TensorFlow's answers are written as literals with the TensorFlow source that gives
them, so these tests need no TensorFlow.  Every body runs on every installed backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.kernels import kernels_for


def _needs_kernel(op: str, backend: str) -> None:
    if not kernels_for(op, backend):
        pytest.skip(f"backend {backend!r} has no {op} kernel")


# ---------------------------------------------------------------- complex parts of a 0-d tensor


@pytest.mark.parametrize("op,expected", [("Real", 3.0), ("Imag", -4.0), ("ComplexAbs", 5.0), ("Angle", np.arctan2(-4.0, 3.0))])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_complex_part_of_a_scalar_is_a_scalar(backend: str, op: str, expected: float, dtype: str) -> None:
    _needs_kernel(op, backend)
    part = "float32" if dtype == "complex64" else "float64"
    y = ok.execute(op, np.array(3 - 4j, dtype), Tout=part)
    assert y.shape == ()
    assert y.dtype == ok.as_dtype(part)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


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
