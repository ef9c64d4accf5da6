"""Dtype-aware comparison of tensors and arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import as_dtype

__all__ = ["assert_all_close", "default_tolerance"]

_TOLERANCES = {"float16": (1e-3, 1e-3), "bfloat16": (1e-2, 1e-2), "float32": (1e-5, 1e-6), "complex64": (1e-5, 1e-6)}


def default_tolerance(dtype: Any) -> tuple[float, float]:
    """(rtol, atol) suited to ``dtype``: exact for integers, tighter for float64."""
    dt = as_dtype(dtype)
    if not (dt.is_floating or dt.is_complex):
        return (0.0, 0.0)
    return _TOLERANCES.get(dt.name, (1e-12, 1e-14))


def assert_all_close(actual: Any, expected: Any, rtol: float | None = None, atol: float | None = None) -> None:
    """Assert two tensors/arrays agree in shape and value within dtype-aware tolerances."""
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        raise AssertionError(f"shape mismatch: got {a.shape}, expected {e.shape}")
    if a.dtype == object or e.dtype == object:
        if not (a == e).all():
            raise AssertionError(f"values differ:\n got      {a!r}\n expected {e!r}")
        return
    if a.dtype.kind in "biu" and e.dtype.kind in "biu":  # exact, and not through float64 (2**53)
        np.testing.assert_array_equal(a, e)
        return
    d_rtol, d_atol = default_tolerance(a.dtype if a.dtype.kind in "fc" else e.dtype)
    np.testing.assert_allclose(
        a.astype(np.float64) if a.dtype.kind not in "fc" else a,
        e,
        rtol=d_rtol if rtol is None else rtol,
        atol=d_atol if atol is None else atol,
    )
