"""Where opkernel used to give a different answer than TensorFlow (issue 24).

TensorFlow's CPU kernels are the reference.  Its answers are written here as literals,
each with the TensorFlow source that produces it, so these tests need no TensorFlow.
Every test body runs on every installed backend (the ``backend`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok

# ---------------------------------------------------------------- Mean of integers

# tensorflow/core/kernels/reduction_ops.h, CASTING_SPECIALIZATION: Mean sums 8- to 32-bit
# integers in (u)int64, divides there (C++ division, toward zero), then casts back.
MEAN_CASES = [
    ("uint8", [200, 101], 150),
    ("uint8", [255] * 20000, 255),  # long enough for the multi-pass device reduction
    ("int8", [-128] * 20000, -128),
    ("int8", [-128, -127], -127),  # -255 / 2 truncates toward zero
    ("int16", [30000, 30001, 30002], 30001),
    ("int32", [2**31 - 1] * 3, 2**31 - 1),
    ("int32", [-3, -4], -3),
    ("uint32", [2**32 - 1, 2**32 - 3], 2**32 - 2),
]


@pytest.mark.parametrize("dtype,values,expected", MEAN_CASES, ids=[f"{c[0]}-{len(c[1])}-{c[2]}" for c in MEAN_CASES])
def test_mean_of_integers_does_not_overflow(backend: str, dtype: str, values: list[int], expected: int) -> None:
    x = np.array(values, dtype)
    y = ok.ops.mean(x, 0)
    assert y.dtype == ok.as_dtype(dtype)
    assert int(y.numpy()) == expected
    columns = ok.ops.mean(np.stack([x, x], axis=1), 0).numpy()  # the column (strided) kernels too
    assert columns.tolist() == [expected, expected]
