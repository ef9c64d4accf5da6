"""Conformance cases of the elementwise math ops: unary and binary arithmetic,
comparisons, logic, complex numbers and Cast (TensorFlow's ``cwise_ops``).

Each op gets random inputs for every dtype that both TensorFlow's CPU kernels and
opkernel accept, then the edge cases that decide its semantics: NaN and +-inf,
-0.0, ties, integer wraparound, division and modulo by negative numbers and by
zero, broadcasting, 0-d, empty and non-contiguous inputs, a few inputs large enough
to take the cpu backend's threaded path, and calls TensorFlow rejects.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from case import Case, noncontiguous, rng

try:  # bfloat16 arrays are ml_dtypes' (a dependency of TensorFlow and of opkernel's bfloat16)
    import ml_dtypes  # noqa: F401

    _BF16: tuple[str, ...] = ("bfloat16",)
except ImportError:  # pragma: no cover - the recording then has bfloat16 cases the tests skip
    _BF16 = ()

#: The float dtypes of the random and special-value cases (bfloat16 has no gradient case).
FLOATS = ("float16", "float32", "float64") + _BF16
COMPLEX = ("complex64", "complex128")
SIGNED = ("int8", "int16", "int32", "int64")
UNSIGNED = ("uint8", "uint16", "uint32", "uint64")

#: Large enough for the cpu backend's threaded path on 2 threads: a transcendental
#: ufunc shards from 2 * 2**14 elements, any other ufunc from 2 * 2**18
#: (plugins/cpu/opkernel_cpu/sharding.py).
LARGE_TRANSCENDENTAL = 2 * (1 << 14) + 7
LARGE_CHEAP = 2 * (1 << 18) + 7

_COMPLEX_NONFINITE = (
    "C++ leaves std::complex results undefined where they are not mathematically defined or "
    "representable ([complex.numbers]/3), and Eigen's formulas give NaN or a differently signed "
    "zero part there; opkernel follows C99 Annex G (numpy's complex functions)"
)
_COMPLEX_ZERO_SIGN = (
    "the sign of a zero part of a complex result: TensorFlow's follows Eigen's formulas and C++'s "
    "std::complex, which ignores the sign of a zero imaginary part on a branch cut (sqrt(-4-0j) = +2j); "
    "opkernel's follows C99 Annex G as numpy implements it (csqrt(conj z) = conj(csqrt z), so -2j); "
    "every non-zero part agrees"
)

DIFFERENCES: dict[str, str] = {
    "Erf/float64_infinities": "TensorFlow's double erf returns NaN at +-inf; erf(+-inf) = +-1, which opkernel "
                              "returns (tests/test_tf_math_divergences.py::test_erf_at_infinity)",
    "Sign/float64_subnormal": "TensorFlow runs its CPU kernels with denormals flushed to zero (FTZ/DAZ, "
                              "port::ScopedFlushDenormal), so sign(1e-310) is 0 there; opkernel keeps IEEE "
                              "subnormals, as numpy does",
    "RealDiv/int32_truncates": "TensorFlow registers RealDiv for integers but has no CPU kernel for them "
                               "(NotFoundError); opkernel divides integers truncating toward zero, as "
                               "TensorFlow's Div and C do (tests/test_ops_math.py)",
    "Pow/complex64_zero_to_zero": "TensorFlow computes exp(y log x), NaN at 0**0; opkernel gives 1, the "
                                  "value of C99's cpow and numpy",
    "RealDiv/complex128_by_zero": "a non-zero complex number over zero is an infinity in C99 Annex G "
                                  "(opkernel, numpy); Eigen's complex division gives NaN",
    "Sigmoid/float32_saturated_grad": "where sigmoid saturates (y = 1) the gradient is zero; opkernel writes it "
                                      "as grad - grad*y (no constant op at any order, core/opkernel/ops/math_ops.py), "
                                      "+0 where TensorFlow's grad*y*(1-y) gives -0 for a negative grad",
    "Tanh/float32_saturated_grad": "as Sigmoid's: grad - grad*y*y gives +0 where TensorFlow's grad*(1-y*y) "
                                   "gives -0 for a negative grad",
    **{f"{op}/complex128_nonfinite": _COMPLEX_NONFINITE for op in ("Expm1", "Log1p", "Sigmoid", "Sign", "Reciprocal")},
    **{f"{op}/complex128_special": _COMPLEX_ZERO_SIGN for op in ("Log1p", "Rsqrt", "Sigmoid", "Sqrt", "Reciprocal")},
    **{f"Round/{dt}": "TensorFlow 2.21's CPU kernel of Round returns 0 for every integer; a whole number rounds to "
                      "itself, which opkernel returns" for dt in ("int32", "int64")},
    "Pow/complex64_special": _COMPLEX_ZERO_SIGN,
}
_CAST_OUT_OF_RANGE = ("a float out of the integer type's range: C++ leaves the conversion undefined and TensorFlow's "
                      "CPU answer depends on the element's position (SIMD lanes saturate through int32, the scalar tail "
                      "wraps); opkernel saturates and sends NaN to 0 on every backend, as TensorFlow's GPU kernels do "
                      "(tests/test_tf_math_divergences.py)")
DIFFERENCES.update({
    "Cast/float32_to_uint32_out_of_range": _CAST_OUT_OF_RANGE,
    "Cast/float16_to_int8_out_of_range": _CAST_OUT_OF_RANGE,
})

EXEMPT: dict[str, str] = {}

_SPECIAL = [np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 1e-30, -1e-30, 1e30, -1e30, 88.0, -88.0, 710.0]


def _random(dtype: str, shape: tuple[int, ...], seed: int, lo: float = -4.0, hi: float = 4.0) -> np.ndarray:
    r = rng(seed)
    if dtype == "bfloat16":
        return r.uniform(lo, hi, shape).astype(np.float32).astype(np.dtype("bfloat16"))
    dt = np.dtype(dtype)
    if dt.kind == "c":
        part = np.float32 if dt == np.complex64 else np.float64
        re = r.uniform(lo, hi, shape).astype(part)
        im = r.uniform(lo, hi, shape).astype(part)
        return (re + 1j * im).astype(dt)
    if dt.kind == "f":
        return r.uniform(lo, hi, shape).astype(dt)
    if dt.kind == "b":
        return r.integers(0, 2, shape).astype(bool)
    info = np.iinfo(dt)
    return r.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, shape, dtype=dt)


def _periodic(dtype: str, n: int, period: int, scale: float = 1.0, offset: float = 0.0) -> np.ndarray:
    """A large input that repeats every ``period`` (a prime, so a shard that starts at the
    wrong offset shows) and whose TensorFlow output compresses well in the recording."""
    return ((np.arange(n) % period - period // 2) * scale + offset).astype(dtype)


def _full_range(dtype: str, shape: tuple[int, ...], seed: int) -> np.ndarray:
    """Integers over the dtype's whole range (wraparound happens)."""
    info = np.iinfo(np.dtype(dtype))
    return rng(seed).integers(info.min, info.max, shape, dtype=np.dtype(dtype), endpoint=True)


def _special(dtype: str) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.array(_SPECIAL, np.float64).astype(np.dtype(dtype))


def _complex_special(dtype: str) -> np.ndarray:
    """Finite values with signed-zero parts: branch cuts and the signs of zero parts."""
    vals = [complex(a, b) for a in (0.0, -0.0, 1.0, -2.0, 1e-20) for b in (0.0, -0.0, 1.5, -3.0)]
    return np.array(vals, dtype)


def _complex_nonfinite(dtype: str) -> np.ndarray:
    """Values with an infinite or NaN part."""
    vals = [complex(a, b) for a in (0.0, 1.0, -2.0, np.inf, -np.inf, np.nan) for b in (0.0, 1.5, np.inf, -np.inf, np.nan)]
    return np.array([v for v in vals if not np.isfinite(v)], dtype)


def _ints_edge(dtype: str) -> np.ndarray:
    info = np.iinfo(np.dtype(dtype))
    vals = [info.min, info.min + 1, -7, -1, 0, 1, 7, info.max - 1, info.max]
    return np.array([v for v in vals if info.min <= v <= info.max], dtype)


# ---------------------------------------------------------------- unary


#: op -> (real dtypes, with complex, the domain of its random real inputs, has a gradient)
_UNARY_FLOAT = {
    "Exp": (True, (-4.0, 4.0)),
    "Log": (True, (0.05, 5.0)),
    "Log1p": (True, (-0.9, 5.0)),
    "Sqrt": (True, (0.05, 5.0)),
    "Rsqrt": (True, (0.05, 5.0)),
    "Sin": (True, (-6.0, 6.0)),
    "Cos": (True, (-6.0, 6.0)),
    "Tanh": (True, (-5.0, 5.0)),
    "Sigmoid": (True, (-8.0, 8.0)),
    "Erf": (False, (-3.0, 3.0)),
    "Floor": (False, (-5.0, 5.0)),
    "Ceil": (False, (-5.0, 5.0)),
    "Expm1": (True, (-3.0, 3.0)),
    "Sinh": (True, (-3.0, 3.0)),
    "Cosh": (True, (-3.0, 3.0)),
    "Atan": (True, (-3.0, 3.0)),
    "Tan": (True, (-1.3, 1.3)),
    "Asin": (True, (-0.95, 0.95)),
    "Acos": (True, (-0.95, 0.95)),
    "Asinh": (True, (-4.0, 4.0)),
    "Acosh": (True, (1.05, 6.0)),
    "Atanh": (True, (-0.95, 0.95)),
    "Reciprocal": (True, (0.25, 4.0)),
    "Round": (False, (-6.0, 6.0)),
    "IsNan": (False, (-6.0, 6.0)),
    "IsInf": (False, (-6.0, 6.0)),
    "IsFinite": (False, (-6.0, 6.0)),
}

#: The unary ops with a bool result (no gradient to compare).
_BOOL_TESTS = ("IsNan", "IsInf", "IsFinite")

#: Ops that also take signed integers.
_UNARY_ALL = ("Abs", "Neg", "Sign", "Square")


def _unary_cases() -> list[Case]:
    out: list[Case] = []
    for op, (has_complex, (lo, hi)) in _UNARY_FLOAT.items():
        for i, dt in enumerate(FLOATS):
            grad = dt in ("float32", "float64") and op not in _BOOL_TESTS
            out.append(Case(f"{op}/{dt}", op, (_random(dt, (4, 8), 10 + i, lo, hi),), grad=grad, seed=10 + i))
            special = _special(dt)
            if op == "Erf":  # the infinities apart: TensorFlow's double erf gives NaN there
                special = special[np.isfinite(special) | np.isnan(special)]
            out.append(Case(f"{op}/{dt}_special", op, (special,)))
        if has_complex:
            for i, dt in enumerate(COMPLEX):
                out.append(Case(f"{op}/{dt}", op, (_random(dt, (3, 5), 20 + i, -2.0, 2.0),), grad=True, seed=20 + i))
            out.append(Case(f"{op}/complex128_special", op, (_complex_special("complex128"),), why="branch cuts, signed zeros"))
            out.append(Case(f"{op}/complex128_nonfinite", op, (_complex_nonfinite("complex128"),)))
        grad = op not in _BOOL_TESTS
        out.append(Case(f"{op}/scalar", op, (np.array(0.75, np.float32),), grad=grad, seed=3))
        out.append(Case(f"{op}/empty", op, (np.zeros((0, 3), np.float32),), grad=grad))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_random("float64", (3, 6), 31, lo, hi)),), grad=grad, seed=31))
    for op in ("Exp", "Tanh", "Log1p"):
        out.append(Case(f"{op}/float32_large", op, (_periodic("float32", LARGE_TRANSCENDENTAL, 97, 0.01, 0.5),),
                        why="reaches the cpu backend's threaded path"))
    # Values where a naive formula overflows or loses precision.
    out.append(Case("Sigmoid/float32_saturates", "Sigmoid", (np.array([-200.0, -90.0, -30.0, 30.0, 90.0, 200.0], np.float32),)))
    out.append(Case("Sigmoid/float32_saturated_grad", "Sigmoid", (np.array([-200.0, -120.0, 120.0, 200.0], np.float32),), grad=True, seed=2))
    out.append(Case("Log1p/float64_tiny", "Log1p", (np.array([1e-300, -1e-20, 1e-10, -0.999999], np.float64),), grad=True))
    out.append(Case("Tanh/float32_saturates", "Tanh", (np.array([-50.0, -9.0, 9.0, 50.0, 1e-8], np.float32),)))
    out.append(Case("Tanh/float32_saturated_grad", "Tanh", (np.array([-50.0, -100.0, 50.0, 100.0], np.float32),), grad=True, seed=2))
    for dt in FLOATS:
        out.append(Case(f"Erf/{dt}_infinities", "Erf", (np.array([np.inf, -np.inf], dt),)))
    out.append(Case("Erf/float64_tails", "Erf", (np.array([-30.0, -6.0, -0.46875, 0.46875, 4.0, 4.5, 30.0, 1e-200], np.float64),)))
    out.append(Case("Rsqrt/float32_negative_zero", "Rsqrt", (np.array([-0.0, 0.0, -1.0], np.float32),)))
    out.append(Case("Round/halves", "Round", (np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 8388609.0], np.float32),)))
    for dt in ("int32", "int64"):
        out.append(Case(f"Round/{dt}", "Round", (_random(dt, (3, 4), 61),)))
    out.append(Case("Round/int8", "Round", (np.array([1, -2], np.int8),), why="TensorFlow has no CPU kernel"))
    out.append(Case("Reciprocal/int32", "Reciprocal", (np.array([1, 2], np.int32),), why="TensorFlow has no CPU kernel"))
    out.append(Case("Atanh/float32_edges", "Atanh", (np.array([-1.0, 1.0, 1.5, -0.0], np.float32),)))
    out.append(Case("Acosh/float32_edges", "Acosh", (np.array([1.0, 0.5, np.inf, -1.0], np.float32),)))
    out.append(Case("Atan2/signed_zeros", "Atan2", (np.array([0.0, -0.0, 0.0, -0.0, np.inf, -np.inf], np.float32),
                                                   np.array([0.0, 0.0, -0.0, -0.0, np.inf, -np.inf], np.float32))))

    for op in _UNARY_ALL:
        for i, dt in enumerate(FLOATS):
            out.append(Case(f"{op}/{dt}", op, (_random(dt, (4, 8), 50 + i),), grad=dt in ("float32", "float64"), seed=50 + i))
            out.append(Case(f"{op}/{dt}_special", op, (_special(dt),)))
        if op == "Square":
            for dt in UNSIGNED:
                out.append(Case(f"{op}/{dt}", op, (_random(dt, (4, 8), 61, 0, 300),), why="wraps"))
        for dt in SIGNED:
            out.append(Case(f"{op}/{dt}", op, (_random(dt, (4, 8), 60, -50, 50),)))
            out.append(Case(f"{op}/{dt}_edges", op, (_ints_edge(dt),), why="INT_MIN wraps as in two's complement"))
        if op != "Abs":
            for i, dt in enumerate(COMPLEX):
                grad = op != "Sign"  # TensorFlow passes back 0 for complex Sign (see math_ops._sign_grad)
                out.append(Case(f"{op}/{dt}", op, (_random(dt, (3, 5), 70 + i),), grad=grad, seed=70 + i))
            out.append(Case(f"{op}/complex128_special", op, (_complex_special("complex128"),)))
            out.append(Case(f"{op}/complex128_nonfinite", op, (_complex_nonfinite("complex128"),)))
        out.append(Case(f"{op}/scalar", op, (np.array(-2.5, np.float64),), grad=True, seed=4))
        out.append(Case(f"{op}/empty", op, (np.zeros((2, 0), np.int32),)))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_random("int32", (4, 6), 71, -9, 9)),)))
    out.append(Case("Abs/float32_large", "Abs", (_periodic("float32", LARGE_CHEAP, 101, 0.25),),
                    why="reaches the cpu backend's threaded path"))
    out.append(Case("Sign/float64_signed_zero_nan", "Sign", (np.array([-0.0, 0.0, np.nan, -np.nan, 2.3e-308], np.float64),)))
    out.append(Case("Sign/float64_subnormal", "Sign", (np.array([1e-310, -4.9e-324], np.float64),)))
    # Types TensorFlow rejects.
    out.append(Case("Sqrt/int32_rejected", "Sqrt", (np.array([1, 4], np.int32),)))
    out.append(Case("Erf/complex64_rejected", "Erf", (np.array([1j], np.complex64),)))
    out.append(Case("Abs/complex64_rejected", "Abs", (np.array([1 + 1j], np.complex64),), why="ComplexAbs is the complex |x|"))
    out.append(Case("Neg/bool_rejected", "Neg", (np.array([True]),)))
    out.append(Case("Abs/uint8_rejected", "Abs", (np.array([1], np.uint8),)))
    return out


# ---------------------------------------------------------------- binary arithmetic


_ARITH_TYPES = {
    "Add": FLOATS + ("uint8",) + SIGNED + COMPLEX,
    "Sub": FLOATS + UNSIGNED + SIGNED + COMPLEX,
    "Mul": FLOATS + UNSIGNED + SIGNED + COMPLEX,
    "RealDiv": FLOATS + COMPLEX,
    "FloorDiv": FLOATS + UNSIGNED + SIGNED,
    "FloorMod": FLOATS + SIGNED + UNSIGNED,
    "Maximum": FLOATS + SIGNED + UNSIGNED,
    "Minimum": FLOATS + SIGNED + UNSIGNED,
    "Pow": FLOATS + SIGNED + COMPLEX,
    "Atan2": FLOATS,
    "SquaredDifference": FLOATS + ("int32", "int64") + COMPLEX,
}


def _nonzero(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return np.where(a == 0, np.ones_like(a), a)
    return a


def _binary_cases() -> list[Case]:
    out: list[Case] = []
    for op, types in _ARITH_TYPES.items():
        divides = op in ("RealDiv", "FloorDiv", "FloorMod")
        for i, dt in enumerate(types):
            lo, hi = (0.2, 3.0) if op == "Pow" and np.dtype(dt).kind != "i" else (-9.0, 9.0)
            x = _random(dt, (3, 4), 100 + i, lo, hi)
            y = _random(dt, (3, 4), 200 + i, 0.0 if op == "Pow" else lo, 3.0 if op == "Pow" else hi)
            if divides:
                y = _nonzero(y)
            differentiable = np.dtype(dt).kind in "fc" and dt != "float16" and op != "FloorDiv"
            out.append(Case(f"{op}/{dt}", op, (x, y), grad=differentiable, seed=300 + i))
        # broadcasting both ways, a 0-d operand, empty operands
        a = _random("float32", (2, 1, 4), 5, 0.5, 3.0)
        b = _random("float32", (3, 1), 6, 0.5, 3.0)
        grad = op != "FloorDiv"
        out.append(Case(f"{op}/broadcast", op, (a, b), grad=grad, seed=7))
        out.append(Case(f"{op}/scalar_operand", op, (a, np.array(1.5, np.float32)), grad=grad, seed=8))
        out.append(Case(f"{op}/both_scalar", op, (np.array(2.5, np.float64), np.array(-1.25, np.float64)), grad=grad, seed=9))
        out.append(Case(f"{op}/empty", op, (np.zeros((0, 4), np.float32), np.ones((1, 4), np.float32)), grad=grad))
        out.append(Case(f"{op}/empty_broadcast", op, (np.zeros((3, 0), np.float32), np.ones((3, 1), np.float32))))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(a[0]), noncontiguous(_random("float32", (1, 4), 11, 0.5, 3.0))),
                        grad=grad, seed=12))
        out.append(Case(f"{op}/incompatible", op, (np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))))
        out.append(Case(f"{op}/mixed_dtypes", op, (np.ones(2, np.float32), np.ones(2, np.float64))))
        if op != "Pow":
            special = _special("float64")
            if op in ("Maximum", "Minimum"):  # see test_maximum_and_minimum_of_signed_zeros
                special = special[~((special == 0) & np.signbit(special))]
            xs = np.repeat(special, len(special))
            ys = np.tile(special, len(special))
            out.append(Case(f"{op}/float64_special", op, (xs, ys)))
            out.append(Case(f"{op}/float32_special", op, (xs.astype(np.float32), ys.astype(np.float32))))
    out.extend(_integer_arith_cases())
    out.extend(_pow_cases())
    # Ties of Maximum/Minimum: the gradient goes to x.  Not -0.0 against 0.0: IEEE 754
    # leaves the sign of that result open, and TensorFlow's depends on the element's
    # position (SIMD lanes or the scalar tail); tests/test_tf_math_divergences.py checks it.
    for op in ("Maximum", "Minimum"):
        x = np.array([1.0, 2.0, 0.0, np.nan, 3.0, -1.0], np.float32)
        y = np.array([1.0, 1.0, 0.0, 1.0, np.nan, -1.0], np.float32)
        out.append(Case(f"{op}/ties_nan", op, (x, y), grad=True, seed=13))
        out.append(Case(f"{op}/float64_large", op, (_periodic("float64", LARGE_CHEAP, 103, 0.5, 0.25),
                                                     _periodic("float64", LARGE_CHEAP, 89, 0.75, 0.125)),
                        why="reaches the cpu backend's threaded path (operands of one shape)"))
    out.append(Case("Add/int8_large", "Add", (_periodic("int8", LARGE_CHEAP, 251), _periodic("int8", LARGE_CHEAP, 107, 1.0, 60)),
                    why="reaches the cpu backend's threaded path; int8 wraps"))
    strings = np.array([[b"ab", b"", b"x\x00y"], [b"\xff", b"cd", b""]], object)
    out.append(Case("Add/string", "Add", (strings, np.array([b"1", b"", b"zz"], object)), why="concatenates, broadcasting"))
    out.append(Case("Add/string_scalar", "Add", (np.array(b"pre-", object), strings)))
    out.append(Case("Add/string_empty", "Add", (np.array([], object).reshape(0, 2), np.array([b"a", b"b"], object))))
    out.append(Case("Add/string_incompatible", "Add", (strings, np.array([b"a", b"b"], object))))
    out.append(Case("Mul/string_rejected", "Mul", (strings, strings)))
    out.append(Case("Add/broadcast_rank5", "Add", (_random("float32", (2, 1, 3, 1, 2), 45), _random("float32", (4, 1, 1), 46)),
                    grad=True, seed=47))
    out.append(Case("Mul/broadcast_rank5_int64", "Mul", (_random("int64", (1, 2, 1, 3, 1), 48), _random("int64", (2, 1, 2, 1, 4), 49))))
    out.append(Case("Mul/complex64_inf", "Mul", (np.array([complex(np.inf, 0), 1 + 1j], np.complex64), np.array([1j, complex(np.nan, 0)], np.complex64))))
    out.append(Case("RealDiv/complex128_by_zero", "RealDiv", (np.array([1 + 1j, 0j, 1j], np.complex128), np.array([0j, 0j, 1e-300 + 0j], np.complex128))))
    return out


def _integer_arith_cases() -> list[Case]:
    out: list[Case] = []
    for dt in SIGNED:
        e = _ints_edge(dt)
        xs, ys = np.repeat(e, len(e)), np.tile(e, len(e))
        for op in ("Add", "Sub", "Mul", "Maximum", "Minimum"):
            out.append(Case(f"{op}/{dt}_wraps", op, (xs, ys), why="two's complement wraparound"))
        nz = ys != 0
        for op in ("FloorDiv", "FloorMod"):
            out.append(Case(f"{op}/{dt}_signs", op, (xs[nz], ys[nz]), why="INT_MIN / -1 and division by negatives"))
        out.append(Case(f"FloorDiv/{dt}_by_zero", "FloorDiv", (np.array([3, -3], dt), np.array([1, 0], dt))))
        out.append(Case(f"FloorMod/{dt}_by_zero", "FloorMod", (np.array([3, -3], dt), np.array([0, 2], dt))))
    for dt in UNSIGNED:
        e = np.array([0, 1, 7, np.iinfo(dt).max], dt)
        xs, ys = np.repeat(e, len(e)), np.tile(e, len(e))
        out.append(Case(f"Sub/{dt}_wraps", "Sub", (xs, ys)))
        out.append(Case(f"Mul/{dt}_wraps", "Mul", (xs, ys)))
        out.append(Case(f"FloorDiv/{dt}_edges", "FloorDiv", (xs[ys != 0], ys[ys != 0])))
    for dt in UNSIGNED:
        e = np.array([0, 1, 7, np.iinfo(dt).max], dt)
        xs, ys = np.repeat(e, len(e)), np.tile(e, len(e))
        out.append(Case(f"FloorMod/{dt}_edges", "FloorMod", (xs[ys != 0], ys[ys != 0])))
        for op in ("FloorDiv", "FloorMod"):
            out.append(Case(f"{op}/{dt}_by_zero", op, (np.array([3, 4], dt), np.array([1, 0], dt))))
    for dt in ("int32", "int64"):
        x = _full_range(dt, (32,), 80)
        y = _full_range(dt, (32,), 81)
        out.append(Case(f"Add/{dt}_full_range", "Add", (x, y)))
        out.append(Case(f"Mul/{dt}_full_range", "Mul", (x, y)))
        out.append(Case(f"FloorMod/{dt}_full_range", "FloorMod", (x, _nonzero(y))))
        out.append(Case(f"FloorDiv/{dt}_full_range", "FloorDiv", (x, _nonzero(y))))
    out.append(Case("RealDiv/int32_truncates", "RealDiv", (np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)),
                    why="TensorFlow's RealDiv has no integer kernel on CPU"))
    out.append(Case("FloorMod/float32_signs", "FloorMod",
                    (np.array([7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 5.5, 1e30], np.float32),
                     np.array([3.0, 3.0, -3.0, -3.0, -2.0, 2.0, np.inf, 3.0], np.float32))))
    out.append(Case("FloorDiv/float32_signs", "FloorDiv",
                    (np.array([7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 5.5, 1.0], np.float32),
                     np.array([3.0, 3.0, -3.0, -3.0, -2.0, 2.0, np.inf, -np.inf], np.float32))))
    return out


def _pow_cases() -> list[Case]:
    out: list[Case] = []
    for dt in SIGNED:
        x = np.array([0, 1, -1, 2, -2, 3, 7, -7, 0], dt)
        y = np.array([0, 5, 5, 6, 7, 4, 2, 3, 3], dt)
        out.append(Case(f"Pow/{dt}_edges", "Pow", (x, y)))
        out.append(Case(f"Pow/{dt}_overflow", "Pow", (np.array([2, 3, -3, 10], dt), np.array([70, 41, 41, 30], dt)),
                        why="repeated squaring wraps"))
        out.append(Case(f"Pow/{dt}_negative_exponent", "Pow", (np.array([2, 1], dt), np.array([-1, 2], dt))))
    for dt in ("float32", "float64"):
        xs = np.repeat(_special(dt), len(_SPECIAL))
        ys = np.tile(_special(dt), len(_SPECIAL))
        out.append(Case(f"Pow/{dt}_special", "Pow", (xs, ys)))
    out.append(Case("Pow/float32_negative_base", "Pow", (np.array([-2.0, -2.0, -8.0, 0.0, 0.0], np.float32),
                                                          np.array([2.0, 0.5, 1.0 / 3.0, -1.0, 0.0], np.float32))))
    out.append(Case("Pow/float64_grad_at_zero", "Pow", (np.array([0.0, 0.0, -1.5, 2.0], np.float64),
                                                         np.array([2.0, 0.5, 2.0, 0.0], np.float64)), grad=True, seed=14))
    out.append(Case("Pow/complex64_special", "Pow", (np.array([1j, -1 + 0j, 2 + 2j, 0j], np.complex64),
                                                      np.array([2 + 0j, 0.5 + 0j, -1j, 2 + 0j], np.complex64))))
    out.append(Case("Pow/complex64_zero_to_zero", "Pow", (np.array([0j], np.complex64), np.array([0j], np.complex64))))
    return out


# ---------------------------------------------------------------- comparisons and logic


_ORDERED = ("Less", "LessEqual", "Greater", "GreaterEqual")


def _compare_cases() -> list[Case]:
    out: list[Case] = []
    for op in _ORDERED + ("Equal", "NotEqual"):
        for i, dt in enumerate(FLOATS + SIGNED + UNSIGNED):
            x = _random(dt, (4, 5), 400 + i, -3, 3)
            y = _random(dt, (4, 5), 500 + i, -3, 3)
            out.append(Case(f"{op}/{dt}", op, (x, y)))
        xs = np.repeat(_special("float32"), len(_SPECIAL))
        ys = np.tile(_special("float32"), len(_SPECIAL))
        out.append(Case(f"{op}/float32_special", op, (xs, ys), why="NaN compares unequal, -0.0 == 0.0"))
        out.append(Case(f"{op}/int64_edges", op, (np.repeat(_ints_edge("int64"), 9), np.tile(_ints_edge("int64"), 9))))
        out.append(Case(f"{op}/broadcast", op, (_random("int32", (2, 1, 3), 1), _random("int32", (4, 1), 2))))
        out.append(Case(f"{op}/scalar", op, (np.array(1.0, np.float32), np.array([0.5, 1.0, 2.0], np.float32))))
        out.append(Case(f"{op}/empty", op, (np.zeros((0,), np.float64), np.zeros((1,), np.float64))))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_random("float32", (3, 4), 3)), noncontiguous(_random("float32", (3, 4), 4)))))
        out.append(Case(f"{op}/incompatible", op, (np.ones((2, 3), np.float32), np.ones((4,), np.float32))))
        out.append(Case(f"{op}/mixed_dtypes", op, (np.ones(2, np.int32), np.ones(2, np.int64))))
    for op in _ORDERED:
        out.append(Case(f"{op}/complex64_rejected", op, (np.ones(2, np.complex64), np.ones(2, np.complex64))))
        out.append(Case(f"{op}/bool_rejected", op, (np.ones(2, bool), np.ones(2, bool))))
    for op in ("Equal", "NotEqual"):
        for dt in COMPLEX:
            c = _complex_special(dt)
            out.append(Case(f"{op}/{dt}", op, (c, c[::-1].copy())))
        b = np.array([True, False, True, False])
        out.append(Case(f"{op}/bool", op, (b, np.array([True, True, False, False]))))
        out.append(Case(f"{op}/string", op, (np.array([b"ab", b"", b"a\x00", b"b"], object), np.array([b"ab", b"", b"a", b"B"], object))))
        out.append(Case(f"{op}/string_broadcast", op, (np.array([[b"x"], [b""]], object), np.array([b"x", b"", b"y"], object))))
        out.append(Case(f"{op}/incompatible_no_error", op, (np.ones((2, 3), np.float32), np.ones((4,), np.float32)),
                        {"incompatible_shape_error": False}))
        out.append(Case(f"{op}/incompatible_no_error_empty", op, (np.ones((0, 3), np.int64), np.ones((2,), np.int64)),
                        {"incompatible_shape_error": False}))
        out.append(Case(f"{op}/mixed_dtypes_no_error", op, (np.ones(2, np.float32), np.ones(2, np.float64)),
                        {"incompatible_shape_error": False}))
        out.append(Case(f"{op}/compatible_no_error", op, (np.ones((2, 3), np.int32), np.array([1, 0, 1], np.int32)),
                        {"incompatible_shape_error": False}))
    for op in ("LogicalAnd", "LogicalOr"):
        x = np.array([True, True, False, False])
        y = np.array([True, False, True, False])
        out.append(Case(f"{op}/truth_table", op, (x, y)))
        out.append(Case(f"{op}/broadcast", op, (_random("bool", (3, 1), 1), _random("bool", (1, 4), 2))))
        out.append(Case(f"{op}/scalar", op, (np.array(True), _random("bool", (5,), 3))))
        out.append(Case(f"{op}/empty", op, (np.zeros((0, 2), bool), np.zeros((1, 2), bool))))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_random("bool", (3, 4), 4)), noncontiguous(_random("bool", (3, 4), 5)))))
        out.append(Case(f"{op}/incompatible", op, (np.ones((2, 3), bool), np.ones((2,), bool))))
        out.append(Case(f"{op}/int32_rejected", op, (np.ones(2, np.int32), np.ones(2, np.int32))))
    out.append(Case("LogicalNot/values", "LogicalNot", (_random("bool", (3, 5), 6),)))
    out.append(Case("LogicalNot/scalar", "LogicalNot", (np.array(False),)))
    out.append(Case("LogicalNot/empty", "LogicalNot", (np.zeros((0,), bool),)))
    out.append(Case("LogicalNot/noncontiguous", "LogicalNot", (noncontiguous(_random("bool", (2, 6), 7)),)))
    out.append(Case("LogicalNot/float32_rejected", "LogicalNot", (np.ones(2, np.float32),)))
    return out


# ---------------------------------------------------------------- complex numbers


def _complex_cases() -> list[Case]:
    out: list[Case] = []
    for i, (cdt, rdt) in enumerate((("complex64", "float32"), ("complex128", "float64"))):
        z = _random(cdt, (3, 4), 600 + i)
        special = _complex_special(cdt)
        out.append(Case(f"Conj/{cdt}", "Conj", (z,), grad=True, seed=610 + i))
        out.append(Case(f"Conj/{cdt}_special", "Conj", (special,)))
        for op in ("Real", "Imag", "ComplexAbs", "Angle"):
            out.append(Case(f"{op}/{cdt}", op, (z,), {"Tout": rdt}, grad=True, seed=620 + i))
            out.append(Case(f"{op}/{cdt}_special", op, (special,), {"Tout": rdt}))
            out.append(Case(f"{op}/{cdt}_empty", op, (np.zeros((0, 2), cdt),), {"Tout": rdt}))
            out.append(Case(f"{op}/{cdt}_scalar", op, (np.array(3 - 4j, cdt),), {"Tout": rdt}, grad=True, seed=5))
            out.append(Case(f"{op}/{cdt}_noncontiguous", op, (noncontiguous(z),), {"Tout": rdt}))
        re = _random(rdt, (3, 4), 630 + i)
        im = _random(rdt, (3, 4), 640 + i)
        out.append(Case(f"Complex/{rdt}", "Complex", (re, im), {"Tout": cdt}, grad=True, seed=650 + i))
        out.append(Case(f"Complex/{rdt}_broadcast", "Complex", (re, im[:1]), {"Tout": cdt}, grad=True, seed=660 + i))
        out.append(Case(f"Complex/{rdt}_special", "Complex", (_special(rdt), _special(rdt)[::-1].copy()), {"Tout": cdt}))
        out.append(Case(f"Complex/{rdt}_scalar", "Complex", (np.array(1.5, rdt), np.array(-0.0, rdt)), {"Tout": cdt}))
        out.append(Case(f"Complex/{rdt}_empty", "Complex", (np.zeros((0,), rdt), np.zeros((0,), rdt)), {"Tout": cdt}))
    out.append(Case("ComplexAbs/complex64_overflow", "ComplexAbs", (np.array([3e38 + 3e38j, 1e-30 + 1e-30j], np.complex64),),
                    {"Tout": "float32"}, why="hypot, not sqrt(a*a + b*b)"))
    out.append(Case("ComplexAbs/grad_at_zero", "ComplexAbs", (np.array([0j, 1 + 0j], np.complex64),), {"Tout": "float32"}, grad=True, seed=6))
    out.append(Case("Angle/signed_zeros", "Angle", (np.array([complex(-1, 0.0), complex(-1, -0.0), complex(0.0, -0.0), complex(-0.0, 0.0)], np.complex128),),
                    {"Tout": "float64"}))
    # Calls TensorFlow rejects.
    out.append(Case("Real/float32_rejected", "Real", (np.ones(2, np.float32),), {"Tout": "float32"}))
    out.append(Case("Conj/float32_rejected", "Conj", (np.ones(2, np.float32),)))
    out.append(Case("Complex/int32_rejected", "Complex", (np.ones(2, np.int32), np.ones(2, np.int32)), {"Tout": "complex64"}))
    for op in ("Real", "Imag", "ComplexAbs", "Angle"):
        out.append(Case(f"{op}/complex64_to_float64_rejected", op, (np.ones(2, np.complex64),), {"Tout": "float64"},
                        why="TensorFlow registers only the matching pairs"))
        out.append(Case(f"{op}/complex128_to_float32_rejected", op, (np.ones(2, np.complex128),), {"Tout": "float32"}))
    out.append(Case("Complex/float32_to_complex128_rejected", "Complex", (np.ones(2, np.float32), np.ones(2, np.float32)), {"Tout": "complex128"}))
    out.append(Case("Complex/float64_to_complex64_rejected", "Complex", (np.ones(2, np.float64), np.ones(2, np.float64)), {"Tout": "complex64"}))
    out.append(Case("Complex/mixed_parts", "Complex", (np.ones(2, np.float32), np.ones(2, np.float64)), {"Tout": "complex64"}))
    out.append(Case("Complex/incompatible", "Complex", (np.ones((2, 3), np.float32), np.ones((3,), np.float32)[:2]), {"Tout": "complex64"}))
    return out


# ---------------------------------------------------------------- Cast


_CAST_FROM_FLOAT = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool", "float16", "complex64")


def _cast_cases() -> list[Case]:
    out: list[Case] = []
    f64 = _special("float64")
    finite = np.array([0.0, -0.0, 0.4, -0.6, 1.5, -1.5, 2.5, 100.7, -100.7, 127.0, 255.0, 300.0, -129.0, 65535.0, 1e10, -1e10], np.float64)
    for dst in _CAST_FROM_FLOAT:
        if np.dtype(dst).kind in "iu":
            info = np.iinfo(dst)
            inside = (finite > float(info.min) - 1) & (finite < float(info.max) + 1)
            out.append(Case(f"Cast/float64_to_{dst}", "Cast", (finite[inside],), {"DstT": dst}, why="rounds toward zero"))
        else:
            out.append(Case(f"Cast/float64_to_{dst}", "Cast", (finite,), {"DstT": dst}))
    # No case casts NaN, an infinity or a float out of the integer type's range: C++ leaves
    # that undefined and TensorFlow's answer depends on the element's position (SIMD lanes
    # saturate through int32, the scalar tail wraps: uint8(65535.0) is 255 or 0 by the
    # array's length), so it is no reference.  opkernel saturates and sends NaN to 0, as
    # TensorFlow's GPU kernels do: tests/test_tf_math_divergences.py checks it.  Two such
    # casts are compared all the same, as listed differences:
    out.append(Case("Cast/float32_to_uint32_out_of_range", "Cast", (np.array([-1.0, 5e9, -3e9], np.float32),), {"DstT": "uint32"}))
    out.append(Case("Cast/float16_to_int8_out_of_range", "Cast", (np.array([200.0, -200.0, 1000.0], np.float16),), {"DstT": "int8"}))
    out.append(Case("Cast/float32_to_bool_special", "Cast", (_special("float32"),), {"DstT": "bool"}))
    out.append(Case("Cast/float64_to_float32_special", "Cast", (f64,), {"DstT": "float32"}))
    out.append(Case("Cast/float64_to_float16_overflow", "Cast", (np.array([65504.0, 65520.0, 1e6, -1e6, 1e-8, 6e-8], np.float64),), {"DstT": "float16"}))
    out.append(Case("Cast/float32_to_float16_truncate", "Cast", (np.array([1.0009765625, 1.0004, -1.0004, 65519.0], np.float32),),
                    {"DstT": "float16", "Truncate": True}))
    out.append(Case("Cast/float64_to_float32_truncate", "Cast", (np.array([0.1, -0.1, 1 / 3, np.nan], np.float64),),
                    {"DstT": "float32", "Truncate": True}))
    for src in SIGNED + UNSIGNED:
        e = _ints_edge(src) if src.startswith("i") else np.array([0, 1, 200, np.iinfo(src).max], src)
        for dst in ("int8", "uint8", "int32", "int64", "float32", "float64", "bool", "float16"):
            if dst != src:
                out.append(Case(f"Cast/{src}_to_{dst}", "Cast", (e,), {"DstT": dst}, why="integers wrap modulo 2**bits"))
    for bf in _BF16:
        out.append(Case("Cast/float32_to_bfloat16", "Cast", (np.array([1.0, 1.00390625, 1.01171875, -3.3e38, 3.4e38, np.nan, -0.0, 1e-40], np.float32),),
                        {"DstT": bf}, why="rounds to nearest even; overflow and subnormals"))
        out.append(Case("Cast/float32_to_bfloat16_truncate", "Cast", (np.array([1.01171875, -1.01171875, 1.00390625], np.float32),),
                        {"DstT": bf, "Truncate": True}))
        out.append(Case("Cast/bfloat16_to_float64", "Cast", (_random(bf, (6,), 707),), {"DstT": "float64"}))
        out.append(Case("Cast/bfloat16_to_int32", "Cast", (_random(bf, (6,), 708, -100.0, 100.0),), {"DstT": "int32"}))
    out.append(Case("Cast/bool_to_float32", "Cast", (np.array([True, False]),), {"DstT": "float32"}))
    out.append(Case("Cast/bool_to_int64", "Cast", (np.array([True, False]),), {"DstT": "int64"}))
    out.append(Case("Cast/complex64_to_float32", "Cast", (np.array([1 + 2j, -3.5 - 1j], np.complex64),), {"DstT": "float32"}, why="drops the imaginary part"))
    out.append(Case("Cast/complex128_to_int32", "Cast", (np.array([1.7 + 2j, -3.5 - 1j], np.complex128),), {"DstT": "int32"}))
    out.append(Case("Cast/complex128_to_bool", "Cast", (np.array([0j, 1j, 1 + 0j], np.complex128),), {"DstT": "bool"}))
    out.append(Case("Cast/float32_to_complex128", "Cast", (np.array([1.5, np.nan, -0.0], np.float32),), {"DstT": "complex128"}))
    out.append(Case("Cast/float32_to_float64_grad", "Cast", (_random("float32", (3, 4), 700),), {"DstT": "float64"}, grad=True, seed=701))
    out.append(Case("Cast/float64_to_complex64_grad", "Cast", (_random("float64", (5,), 702),), {"DstT": "complex64"}, grad=True, seed=703))
    out.append(Case("Cast/same_type", "Cast", (_random("int32", (4,), 704),), {"DstT": "int32"}))
    out.append(Case("Cast/scalar", "Cast", (np.array(-2.7, np.float32),), {"DstT": "int32"}))
    out.append(Case("Cast/empty", "Cast", (np.zeros((0, 3), np.float32),), {"DstT": "int8"}))
    out.append(Case("Cast/noncontiguous", "Cast", (noncontiguous(_random("float64", (3, 4), 705)),), {"DstT": "float32"}))
    return out


def _bitwise_cases() -> list[Case]:
    out: list[Case] = []
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        for i, dt in enumerate(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")):
            info = np.iinfo(dt)
            out.append(Case(f"{op}/{dt}", op, (_random(dt, (3, 4), 400 + i, info.min, info.max),
                                               _random(dt, (3, 4), 500 + i, info.min, info.max))))
        out += [
            Case(f"{op}/broadcast", op, (_random("int32", (2, 1, 4), 5, -99, 99), _random("int32", (3, 1), 6, -99, 99))),
            Case(f"{op}/scalar", op, (np.array(-1, np.int64), _random("int64", (5,), 7, -2**40, 2**40))),
            Case(f"{op}/empty", op, (np.zeros((0, 4), np.uint8), np.ones((1, 4), np.uint8))),
            Case(f"{op}/noncontiguous", op, (noncontiguous(_random("int16", (3, 4), 8, -99, 99)),
                                             noncontiguous(_random("int16", (3, 4), 9, -99, 99)))),
            Case(f"{op}/incompatible", op, (np.ones((2, 3), np.int32), np.ones((2,), np.int32))),
            Case(f"{op}/float_rejected", op, (np.ones(2, np.float32), np.ones(2, np.float32))),
            Case(f"{op}/bool_rejected", op, (np.ones(2, bool), np.ones(2, bool))),
        ]
    return out


def cases() -> list[Case]:
    return _unary_cases() + _binary_cases() + _compare_cases() + _complex_cases() + _cast_cases() + _bitwise_cases()

