"""How a value from opkernel is compared with TensorFlow's (numpy only: the conformance
tests, the differential test's driver and its workers all use it)."""

from __future__ import annotations

import numpy as np

#: (rtol, atol) by dtype, when the case gives none: a few ulps of the dtype for
#: values near 1, and TensorFlow's Eigen vs numpy/OpenCL libm differences.
TOLERANCE = {
    "float16": (2e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1e-5, 1e-6), "float64": (1e-12, 1e-12),
    "complex64": (1e-5, 1e-6), "complex128": (1e-12, 1e-12),
}


def mismatch(got: np.ndarray, want: np.ndarray, dtype: str, tol: tuple[float, float] | None,
             signed_zeros: bool = True) -> str | None:
    """Why ``got`` is not ``want`` (first few positions), or None when they agree.
    ``signed_zeros=False`` lets +0.0 and -0.0 agree."""
    if got.shape != want.shape:
        return f"shape {got.shape}, TensorFlow {want.shape}"
    if dtype == "string":
        bad = np.array([g != w for g, w in zip(got.ravel().tolist(), want.ravel().tolist())], bool)
    elif dtype not in TOLERANCE:
        bad = got != want
    elif dtype.startswith("complex"):
        for part in (np.real, np.imag):
            why = mismatch(part(got), part(want), "float64", tol or TOLERANCE[dtype], signed_zeros)
            if why:
                return f"{part.__name__} part: {why}"
        return None
    else:
        with np.errstate(invalid="ignore"):  # a 16-bit NaN's cast
            g, w = got.astype(np.float64), want.astype(np.float64)
        rtol, atol = tol or TOLERANCE[dtype]
        gn, wn = np.isnan(g), np.isnan(w)
        with np.errstate(invalid="ignore"):
            close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        inf = np.isinf(w) | np.isinf(g)
        zero = (g == 0) & (w == 0)
        bad = (gn != wn) | (~gn & ~close) | (inf & (g != w) & ~wn) | (zero & (np.signbit(g) != np.signbit(w)) & signed_zeros)
    bad = np.asarray(bad)
    if not bad.any():
        return None
    where = np.argwhere(bad)[:3]
    shown = "; ".join(f"at {tuple(int(i) for i in ix)}: {got[tuple(ix)]!r} vs TensorFlow {want[tuple(ix)]!r}"
                      for ix in where)
    return f"{int(bad.sum())} of {bad.size} values differ ({shown})"
