"""Gradient checking against finite differences (``tf.test.compute_gradient``)."""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from ..autodiff import GradientTape
from ..engine import to_tensor
from ..tensor import Tensor

__all__ = ["compute_gradient", "compute_gradient_error"]


def _as_arrays(inputs: Sequence[Any]) -> list[np.ndarray]:
    return [np.array(x.numpy() if isinstance(x, Tensor) else x) for x in inputs]


def _dtype_of(x: Any) -> Any:
    return x.dtype if isinstance(x, Tensor) else None


def _real_view(a: np.ndarray) -> np.ndarray:
    """A flat view of ``a`` (a copy if ``a`` is not contiguous), a complex array as its
    interleaved real and imaginary parts."""
    flat = np.ascontiguousarray(a).reshape(-1)
    return flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat


def _theoretical(f: Callable[..., Any], xs: list[Tensor]) -> list[np.ndarray]:
    """One row per real output component, one column per real input component.

    A complex number counts as two real ones (its real and imaginary parts), as in
    TensorFlow's checker.  With the gradient convention dL/da + j dL/db, seeding the
    output with 1 gives the row of Re(y_j) and seeding it with 1j the row of Im(y_j);
    a complex gradient's parts are that row's entries for Re(x_i) and Im(x_i).
    """
    with GradientTape(persistent=True) as tape:
        for x in xs:
            tape.watch(x)
        y = f(*xs)
    y_np = y.numpy()
    seeds = (1, 1j) if y_np.dtype.kind == "c" else (1,)
    widths = [x.size * (2 if x.dtype.is_complex else 1) for x in xs]
    jac = [np.zeros((y_np.size * len(seeds), w), dtype=np.float64) for w in widths]
    for j in range(y_np.size):
        for s, unit in enumerate(seeds):
            seed = np.zeros(y_np.size, dtype=y_np.dtype)
            seed[j] = unit
            grads = tape.gradient(y, xs, output_gradients=to_tensor(seed.reshape(y_np.shape), y.dtype))
            for k, g in enumerate(grads):
                if g is not None:
                    jac[k][j * len(seeds) + s] = np.asarray(_real_view(g.numpy()), dtype=np.float64)
    return jac


def _numerical(f: Callable[..., Any], arrays: list[np.ndarray], dtypes: list[Any], delta: float) -> list[np.ndarray]:
    def run(values: list[np.ndarray]) -> np.ndarray:
        y = f(*[to_tensor(v, dt) for v, dt in zip(values, dtypes)]).numpy()
        return np.asarray(_real_view(np.asarray(y)), dtype=np.float64)

    y0 = run(arrays)
    jacs = []
    for k, x in enumerate(arrays):
        width = _real_view(x).size
        jac = np.zeros((y0.size, width), dtype=np.float64)
        for i in range(width):
            plus, minus = [a.copy() for a in arrays], [a.copy() for a in arrays]
            _real_view(plus[k])[i] += delta  # a view: writes through to plus[k]
            _real_view(minus[k])[i] -= delta
            jac[:, i] = (run(plus) - run(minus)) / (2 * delta)
        jacs.append(jac)
    return jacs


def compute_gradient(f: Callable[..., Any], inputs: Sequence[Any], delta: float | None = None) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(theoretical, numerical) Jacobians of ``f`` at ``inputs``, one pair per input.

    Each Jacobian has shape (f's output size, input size), a complex number counting
    as two real ones (interleaved real and imaginary parts).  The theoretical one
    comes from the tape, the numerical one from central differences with step
    ``delta`` (default 1e-3, or 1e-6 for float64 inputs).
    """
    xs = [x if isinstance(x, Tensor) else to_tensor(x) for x in inputs]
    dtypes = [x.dtype for x in xs]
    if delta is None:
        delta = 1e-6 if all(dt.name in ("float64", "complex128") for dt in dtypes) else 1e-3
    return _theoretical(f, xs), _numerical(f, _as_arrays(xs), dtypes, delta)


def compute_gradient_error(f: Callable[..., Any], inputs: Sequence[Any], delta: float | None = None) -> float:
    """Largest absolute difference between the theoretical and numerical Jacobians."""
    theoretical, numerical = compute_gradient(f, inputs, delta)
    return max((float(np.max(np.abs(t - n))) if t.size else 0.0 for t, n in zip(theoretical, numerical)), default=0.0)
