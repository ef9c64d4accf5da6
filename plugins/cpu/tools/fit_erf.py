"""Fits the polynomials of the native float32 erf (``_native.c``, ``erf_f32``) and prints
their coefficients and worst errors.  Run with numpy:

    python plugins/cpu/tools/fit_erf.py

Both are least-squares Chebyshev fits at Chebyshev points (close to minimax), computed
and evaluated in double precision:
* |x| < 1: erf(x) = x * S(x^2), S of degree 7 (relative error about 4e-11);
* 1 <= |x| < 4: erf(x) = B((|x| - 2.5) / 1.5), B of degree 16 (absolute error about 6e-10);
  from 4 on (3.92 in fact) erf rounds to 1 in float32.
Both errors are far below half a float32 ulp, so the float32 result is erf rounded once.
"""

import math

import numpy as np
from numpy.polynomial import chebyshev as C
from numpy.polynomial import polynomial as P

erf = np.vectorize(math.erf)


def small() -> np.ndarray:
    t = (1 - np.cos(np.linspace(0, np.pi, 4000))) / 2
    y = np.sqrt(t)
    f = np.where(y > 0, erf(y) / np.where(y > 0, y, 1), 2 / math.sqrt(math.pi))
    in_s = C.cheb2poly(C.chebfit(2 * t - 1, f, 7))  # a polynomial of s = 2t - 1
    in_t = np.zeros(1)
    for k, a in enumerate(in_s):
        in_t = P.polyadd(in_t, a * P.polypow([-1, 2], k))
    return in_t


def big() -> np.ndarray:
    y = 2.5 + 1.5 * np.cos(np.linspace(0, np.pi, 6000))
    return C.cheb2poly(C.chebfit((y - 2.5) / 1.5, erf(y), 16))


if __name__ == "__main__":
    s, b = small(), big()
    t = np.linspace(0, 1, 100001)
    y = np.sqrt(t)
    print("S:", ", ".join(repr(float(v)) for v in s))
    print("  worst relative error", np.max(np.abs(P.polyval(t, s) * y - erf(y)) / np.maximum(erf(y), 1e-300)))
    y = np.linspace(1, 4, 100001)
    print("B:", ", ".join(repr(float(v)) for v in b))
    print("  worst absolute error", np.max(np.abs(P.polyval((y - 2.5) / 1.5, b) - erf(y))))
