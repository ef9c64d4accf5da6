"""CPU kernels of the arithmetic, comparison, reduction and linear-algebra ops:
one table in ``register_all``."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

import opkernel as ok
from opkernel.errors import InvalidArgumentError
from opkernel.ops.math_ops import arg_axis, cast_truncation_bits, kernel_reduction_axes, select_condition_shape

from . import sharding
from .xp import xp_of

Kernel = Callable[..., Any]

# numbertype without the quantized dtypes, which have no arithmetic here.
_NUMBER = [
    "bfloat16", "float16", "float32", "float64", "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64", "complex64", "complex128",
]
_REAL = [t for t in _NUMBER if not t.startswith("complex")]


def _fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op '{op}': {message}", op=op)


def _incompatible(op: str, *arrays: np.ndarray) -> InvalidArgumentError:
    shapes = " vs. ".join(str(list(a.shape)) for a in arrays)
    return _fail(op, f"Incompatible shapes: {shapes}")


# ---------------------------------------------------------------- elementwise


def _binary(op: str, fn: Kernel, quiet: bool = False) -> Kernel:
    """A broadcasting binary kernel; ``quiet`` silences numpy's inf/nan warnings
    (TensorFlow returns inf and nan without a word).

    A numpy ufunc is sharded across threads for large inputs (sharding.py); a
    broadcasting failure becomes InvalidArgumentError in CpuBackend.translate_error.
    """
    if isinstance(fn, np.ufunc):
        return sharding.elementwise(fn, quiet)

    def kernel(x: np.ndarray, y: np.ndarray) -> Any:
        try:
            with np.errstate(all="ignore" if quiet else "warn"):
                return fn(x, y)
        except ValueError as e:
            if x.shape != y.shape:
                raise _incompatible(op, x, y) from e
            raise

    kernel.__name__ = op
    return kernel


def _unary(fn: Kernel, quiet: bool = False) -> Kernel:
    if isinstance(fn, np.ufunc):
        return sharding.elementwise(fn, quiet)
    if not quiet:
        return fn

    def kernel(x: np.ndarray) -> Any:
        with np.errstate(all="ignore"):
            return fn(x)

    return kernel


def _check_nonzero(op: str, y: np.ndarray, x: Any = None) -> None:
    """An integer division by zero is an error where a quotient is computed, as in
    TensorFlow's functors: an empty result (``x`` empty) computes none."""
    if (x is None or x.size) and y.size and not xp_of(y).all(y):
        raise _fail(op, "Integer division by zero")


_real_div_int = _binary("RealDiv", np.floor_divide)
_real_div_float = _binary("RealDiv", np.true_divide, quiet=True)
_floor_div_int = _binary("FloorDiv", np.floor_divide)
# floor(x / y), as TensorFlow computes it: numpy's floor_divide rounds differently for floats.
_floor_div_float = _binary("FloorDiv", lambda a, b: np.floor(np.true_divide(a, b)), quiet=True)
_floor_mod = _binary("FloorMod", np.mod, quiet=True)
_fmod = _binary("FloorMod", np.fmod, quiet=True)


def floor_mod_float(x: Any, y: Any, fmod: Kernel) -> Any:
    """TensorFlow's floor_fmod: fmod, moved by y where its sign differs from y's.  A zero
    result keeps the sign of x (fmod's), where numpy's mod gives it the sign of y."""
    xp = xp_of(x, y)
    r = fmod(x, y)
    with np.errstate(all="ignore"):
        return xp.where((r != 0) & ((y < 0) != (r < 0)), r + y, r)


_pow = _binary("Pow", np.power, quiet=True)


def real_div(x: np.ndarray, y: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if T.is_integer:
        _check_nonzero("RealDiv", y, x)
        xp = xp_of(x, y)
        q = _real_div_int(xp.abs(x), xp.abs(y))  # C semantics: truncate toward zero
        return xp.where((x < 0) != (y < 0), -q, q).astype(T.np)  # type: ignore[no-any-return]
    return _real_div_float(x, y)  # type: ignore[no-any-return]


real_div.ufunc = np.true_divide  # type: ignore[attr-defined]  # for floats (fusion.py)


def floor_div(x: np.ndarray, y: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if T.is_integer:
        _check_nonzero("FloorDiv", y, x)
        return _floor_div_int(x, y)  # type: ignore[no-any-return]
    return _floor_div_float(x, y)  # type: ignore[no-any-return]


def floor_mod(x: np.ndarray, y: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    if T.is_integer:
        _check_nonzero("FloorMod", y, x)
        return _floor_mod(x, y)  # type: ignore[no-any-return]
    return floor_mod_float(x, y, _fmod)  # type: ignore[no-any-return]


def pow_(x: np.ndarray, y: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    # Checked where a power is computed, as TensorFlow's safe_pow: an empty result computes none.
    if T.is_integer and x.size and y.size and xp_of(y).any(y < 0):
        raise _fail("Pow", "Integers to negative integer powers are not allowed")
    return _pow(x, y)  # type: ignore[no-any-return]


def sign(x: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    xp = xp_of(x)
    if T.is_complex:  # x / |x|, 0 at 0 (numpy < 2 takes the sign of the real part)
        magnitude = xp.abs(x)
        safe = xp.where(magnitude == 0, 1, magnitude)
        out = xp.empty(x.shape, T.np)
        # Part by part, as TensorFlow's x / |x|: a complex division would turn the sign
        # of a zero part around (sign(-2-0j) is -1-0j) and an infinite |x| into NaN parts.
        with np.errstate(all="ignore"):
            out.real[...] = x.real / safe
            out.imag[...] = x.imag / safe
        return xp.where(magnitude == 0, xp.zeros((), T.np), out)  # type: ignore[no-any-return]
    if T.name == "bfloat16":  # ml_dtypes' sign returns -0.0 for -0.0; TensorFlow's (and float's) +0.0
        return xp.sign(x.astype(np.float32)).astype(T.np)  # type: ignore[no-any-return]
    return xp.sign(x)  # type: ignore[no-any-return]


def rsqrt(x: np.ndarray, **attrs: Any) -> np.ndarray:
    if _native_rsqrt is not None and type(x) is np.ndarray and x.dtype in (np.float32, np.float64):
        return _native_rsqrt(x)  # type: ignore[no-any-return]  # one pass, sharded; numpy's bits
    xp = xp_of(x)
    with np.errstate(all="ignore"):
        root = xp.sqrt(x)
        if x.dtype.kind == "c":  # 1 / an infinite complex number is 0 (numpy's division gives NaN)
            return xp.where(xp.isinf(root), xp.zeros((), x.dtype), 1 / root)  # type: ignore[no-any-return]
        # A 0-d input gives a numpy scalar, which cannot be written into.
        return xp.reciprocal(root, out=root) if isinstance(root, xp.ndarray) else xp.reciprocal(root)  # type: ignore[no-any-return]


def squared_difference(x: np.ndarray, y: np.ndarray, **attrs: Any) -> np.ndarray:
    """(x - y) * (x - y), in x's type (integers wrap); for complex numbers times the
    conjugate, a real square magnitude with a zero imaginary part (TensorFlow's abs2)."""
    try:
        np.broadcast_shapes(x.shape, y.shape)
    except ValueError as e:
        raise _incompatible("SquaredDifference", x, y) from e
    xp = xp_of(x, y)
    with np.errstate(all="ignore"):
        d = xp.subtract(x, y)
        if d.dtype.kind != "c":
            return xp.multiply(d, d)  # type: ignore[no-any-return]
        # re^2 + im^2 and an exact zero: a complex product's imaginary part, re*(-im) + im*re,
        # is not always 0 where the multiply fuses an add
        out = xp.zeros(d.shape, d.dtype)
        out.real = d.real * d.real + d.imag * d.imag
        return out  # type: ignore[no-any-return]


_native = sharding.native_module()
# The native ufuncs are quiet (their loops leave no floating-point flag: _native.c), so their
# kernels need no np.errstate, which costs more than a 1000-element op.
_native_erf = sharding.elementwise(_native.erf) if _native is not None else None
_native_sigmoid = sharding.elementwise(_native.sigmoid) if _native is not None else None
_native_exp = sharding.elementwise(_native.exp) if _native is not None else None
_native_rsqrt = sharding.elementwise(_native.rsqrt) if _native is not None else None
_numpy_exp = _unary(np.exp, quiet=True)


def exp(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """float32 numpy arrays: the native exp ufunc (Cephes's expf, within 1 ulp, sharded; 0
    where the result leaves the normal floats, as TensorFlow's CPU threads, which flush
    denormals, give); every other type: numpy's exp."""
    if _native_exp is not None and type(x) is np.ndarray and x.dtype == np.float32:
        return _native_exp(x)  # type: ignore[no-any-return]
    return _numpy_exp(x)  # type: ignore[no-any-return]


# what fusion.py computes in its place, per type
exp.ufuncs = {"float32": np.exp if _native is None else _native.exp, "float64": np.exp}  # type: ignore[attr-defined]


def sigmoid(x: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    """The native sigmoid ufunc for float32/float64 numpy arrays (one pass, sharded; float32
    within 2 ulp), float16/bfloat16 through it in float32; else numpy's passes."""
    if _native_sigmoid is not None and type(x) is np.ndarray and not T.is_complex:
        if T.name in ("float32", "float64"):
            return _native_sigmoid(x)  # type: ignore[no-any-return]
        return _native_sigmoid(x.astype(np.float32)).astype(T.np)  # type: ignore[no-any-return]
    xp = xp_of(x)
    with np.errstate(all="ignore"):
        if T.is_complex:  # 1 / (1 + e) is 0 where e is infinite (numpy's division gives NaN)
            e = xp.exp(-x)
            return xp.where(xp.isinf(e), xp.zeros((), x.dtype), 1 / (1 + e))  # type: ignore[no-any-return]
        e = xp.exp(-xp.abs(x))  # never overflows
        return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(T.np)  # type: ignore[no-any-return]


# W. J. Cody, "Rational Chebyshev approximations for the error function",
# Math. Comp. 23 (1969) 631-637: the coefficients of Netlib SPECFUN's CALERF.
_ERF_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03, 1.85777706184603153e-1)
_ERF_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_ERF_C = (
    5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
    8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
    2.15311535474403846e-8,
)
_ERF_D = (
    1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
    3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03,
)
_ERF_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_ERF_Q = (2.56852019228982242e00, 1.87295284992346047e00, 5.27905102951428412e-1, 6.05183413124413191e-2, 2.33520497626869185e-3)
_ONE_OVER_SQRT_PI = 5.6418958354775628695e-1


def _rational(z: np.ndarray, num: tuple[float, ...], den: tuple[float, ...], lead: int) -> np.ndarray:
    """Cody's nested evaluation: ``lead`` Horner steps, then the constant terms."""
    xnum = num[-1] * z
    xden = z.copy()
    for i in range(lead):
        xnum = (xnum + num[i]) * z
        xden = (xden + den[i]) * z
    return (xnum + num[lead]) / (xden + den[lead])


def _erfc_tail(y: np.ndarray, r: np.ndarray) -> np.ndarray:
    """exp(-y^2) * r, with y^2 split so the exponent stays exact (Cody's trick)."""
    head = np.trunc(y * 16.0) / 16.0
    return np.exp(-head * head) * np.exp(-(y - head) * (y + head)) * r  # type: ignore[no-any-return]




def erf(x: np.ndarray, T: ok.DType, **attrs: Any) -> np.ndarray:
    """The native erf ufunc (``_native.c``: float32 within 2.5 ulp, float64 the C library's),
    sharded like numpy's transcendental ufuncs; float16 and bfloat16 through float32, as
    Eigen computes them.  Without the native module: Cody's erf in float64 with numpy."""
    if _native_erf is not None:
        if T.name in ("float32", "float64"):
            return _native_erf(x)  # type: ignore[no-any-return]
        return _native_erf(x.astype(np.float32)).astype(T.np)  # type: ignore[no-any-return]
    return erf_cody(x, T)


if _native is not None:  # what fusion.py computes in their place, for float32 and float64
    erf.ufunc, erf.ufunc_dtypes = _native.erf, ("float32", "float64")  # type: ignore[attr-defined]
    sigmoid.ufunc, sigmoid.ufunc_dtypes = _native.sigmoid, ("float32", "float64")  # type: ignore[attr-defined]


def erf_cody(x: np.ndarray, T: ok.DType) -> np.ndarray:
    """Vectorized Cody erf in float64: about 1e-16 relative error everywhere."""
    x64 = np.asarray(x, np.float64)
    y = np.abs(x64)
    out = np.empty_like(x64)
    small = y <= 0.46875
    mid = (y > 0.46875) & (y <= 4.0)
    big = y > 4.0
    if small.any():
        xs = x64[small]
        out[small] = xs * _rational(xs * xs, _ERF_A, _ERF_B, 3)
    if mid.any():
        ym = y[mid]
        erfc = _erfc_tail(ym, _rational(ym, _ERF_C, _ERF_D, 7))
        out[mid] = np.copysign(1.0 - erfc, x64[mid])
    if big.any():
        yb = np.minimum(y[big], 27.0)  # erfc underflows to 0 well before; keeps 1/y^2 finite
        z = 1.0 / (yb * yb)
        r = (_ONE_OVER_SQRT_PI - z * _rational(z, _ERF_P, _ERF_Q, 4)) / yb
        out[big] = np.copysign(1.0 - _erfc_tail(yb, r), x64[big])
    out[np.isnan(x64)] = np.nan
    return out.astype(T.np, copy=False)


# ---------------------------------------------------------------- comparisons, select, clip


def _equality(op: str, fn: Kernel, mismatch: bool) -> Kernel:
    def kernel(x: np.ndarray, y: np.ndarray, incompatible_shape_error: bool, **attrs: Any) -> np.ndarray:
        try:
            return fn(x, y)  # type: ignore[no-any-return]
        except ValueError as e:
            if x.shape == y.shape:
                raise
            if incompatible_shape_error:
                raise _incompatible(op, x, y) from e
            return xp_of(x, y).array(mismatch)  # type: ignore[no-any-return]

    return kernel


def select(condition: np.ndarray, t: np.ndarray, e: np.ndarray, **attrs: Any) -> np.ndarray:
    shape = select_condition_shape(condition.shape, t.shape, e.shape)
    return xp_of(condition, t, e).where(condition.reshape(shape), t, e)  # type: ignore[no-any-return]


def select_v2(condition: np.ndarray, t: np.ndarray, e: np.ndarray, **attrs: Any) -> np.ndarray:
    try:
        return xp_of(condition, t, e).where(condition, t, e)  # type: ignore[no-any-return]
    except ValueError as err:
        raise _fail(
            "SelectV2",
            f"condition, t and e must be broadcastable, got shapes {list(condition.shape)}, "
            f"{list(t.shape)} and {list(e.shape)}",
        ) from err


def clip_by_value(t: np.ndarray, clip_value_min: np.ndarray, clip_value_max: np.ndarray, **attrs: Any) -> np.ndarray:
    for name, bound in (("clip_value_min", clip_value_min), ("clip_value_max", clip_value_max)):
        if bound.ndim and bound.shape != t.shape:
            raise _fail(
                "ClipByValue",
                f"{name} must be a scalar or have the shape of t {list(t.shape)}, got shape {list(bound.shape)}",
            )
    xp = xp_of(t, clip_value_min, clip_value_max)
    if t.dtype.kind == "c":
        # TensorFlow's CPU kernel clips a complex t's real and imaginary parts each
        # between the same parts of the bounds (Eigen's min and max act part by part).
        out = xp.empty(t.shape, t.dtype)
        out.real[...] = clip_by_value(t.real, xp.real(clip_value_min), xp.real(clip_value_max))
        out.imag[...] = clip_by_value(t.imag, xp.imag(clip_value_min), xp.imag(clip_value_max))
        return out  # type: ignore[no-any-return]
    # TensorFlow's std::max(std::min(t, max), min) (cwise_op_clip.cc), comparisons and all:
    # a NaN in t stays NaN, a NaN bound is ignored, and min > max gives min.
    with np.errstate(invalid="ignore"):
        low = xp.where(clip_value_max < t, clip_value_max, t)
        return xp.where(low < clip_value_min, clip_value_min, low)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- reductions


def _axes(op: str, x: np.ndarray, indices: np.ndarray) -> tuple[int, ...]:
    """The sorted non-negative axes named by ``indices``, checked as TensorFlow does."""
    return kernel_reduction_axes(op, x.ndim, indices)


def _accumulator(T: ok.DType) -> Any:
    """The dtype to accumulate in: float32 for the 16-bit floats, else T.  TensorFlow does so
    for bfloat16; its float16 partial sums are halves, in an order that depends on the
    layout (a deliberate difference, see tests/tf_conformance/cases_reduce.py)."""
    return np.float32 if T.name in ("float16", "bfloat16") else T.np


def _add_reduce(xp: Any, x: Any, axes: tuple[int, ...], keep_dims: bool, dtype: Any) -> Any:
    # numpy's ufunc.reduce directly: np.sum's Python wrapper costs more than a small reduction.
    if xp is np:
        if axes == (x.ndim - 1,) and x.dtype == dtype and x.shape[-1] > 1:
            # the last axis of float32/float64: the native row sums (numpy's reduction pays a
            # setup per row, 8x the native kernel's time on rows of 64)
            sums = sharding.rows(sharding.ROW_SUM, x)
            if sums is not None:
                return sums[..., None] if keep_dims else sums
        if keep_dims:  # two calls: numpy's stubs type keepdims as a literal
            return np.add.reduce(x, axis=axes, dtype=dtype, keepdims=True)
        return np.add.reduce(x, axis=axes, dtype=dtype)
    return xp.sum(x, axis=axes, keepdims=keep_dims, dtype=dtype)


def _unreduced(x: Any, axes: tuple[int, ...], keep_dims: bool) -> Any:
    """When every reduced axis has size 1 (or there is none), TensorFlow's reduction is a
    reshape (ReductionHelper: "nothing to reduce"): the input's own values, -0.0 and
    inf + 0j included, where arithmetic on the identity would change them.  None otherwise."""
    if any(x.shape[a] != 1 for a in axes):
        return None
    shape = x.shape if keep_dims else tuple(d for a, d in enumerate(x.shape) if a not in axes)
    return x.reshape(shape).copy()


def sum_(input: np.ndarray, reduction_indices: np.ndarray, keep_dims: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    axes = _axes("Sum", input, reduction_indices)
    same = _unreduced(input, axes, keep_dims)
    if same is not None:
        return same  # type: ignore[no-any-return]
    xp = xp_of(input)
    return xp.asarray(_add_reduce(xp, input, axes, keep_dims, _accumulator(T)), dtype=T.np)  # type: ignore[no-any-return]


def prod(input: np.ndarray, reduction_indices: np.ndarray, keep_dims: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    axes = _axes("Prod", input, reduction_indices)
    same = _unreduced(input, axes, keep_dims)
    if same is not None:
        return same  # type: ignore[no-any-return]
    xp = xp_of(input)
    with np.errstate(all="ignore"):  # 0 * inf is nan and overflow inf (or a wrap), silently, as in TensorFlow
        return xp.asarray(xp.prod(input, axis=axes, keepdims=keep_dims, dtype=_accumulator(T)), dtype=T.np)  # type: ignore[no-any-return]


def mean(input: np.ndarray, reduction_indices: np.ndarray, keep_dims: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    axes = _axes("Mean", input, reduction_indices)
    same = _unreduced(input, axes, keep_dims)
    if same is not None:
        return same  # type: ignore[no-any-return]
    count = math.prod([input.shape[a] for a in axes])
    xp = xp_of(input)
    if not T.is_integer:
        total = _add_reduce(xp, input, axes, keep_dims, _accumulator(T))
        with np.errstate(all="ignore"):  # the mean of nothing is nan
            if T.is_complex:  # by a real count, part by part: a complex division by count + 0j makes inf parts NaN
                out = xp.empty(total.shape, T.np)
                out.real[...] = total.real / count
                out.imag[...] = total.imag / count
                return out  # type: ignore[no-any-return]
            return xp.asarray(xp.true_divide(total, count), dtype=T.np)  # type: ignore[no-any-return]
    # TensorFlow sums 8- to 32-bit integers in 64 bits (reduction_ops.h): a uint8 mean of
    # [200, 101] is 150, not the 22 of a sum that wrapped in uint8.
    wide = np.uint64 if T.is_unsigned else np.int64
    total = xp.asarray(_add_reduce(xp, input, axes, keep_dims, wide))
    if count == 0:
        return xp.zeros_like(total)  # type: ignore[no-any-return]
    q = total // count  # floor; move the negative quotients with a remainder back toward zero
    return (q + ((total < 0) & (q * count != total))).astype(T.np)  # type: ignore[no-any-return]


def _extreme(op: str, fn: Kernel, lowest: bool) -> Kernel:
    def kernel(input: np.ndarray, reduction_indices: np.ndarray, keep_dims: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
        axes = _axes(op, input, reduction_indices)
        same = _unreduced(input, axes, keep_dims)
        if same is not None:
            return same  # type: ignore[no-any-return]
        if input.size == 0:  # the reduction's identity, as TensorFlow gives for an empty reduction
            initial = (-np.inf if lowest else np.inf) if T.is_floating else (T.min if lowest else T.max)
            return xp_of(input).asarray(fn(input, axis=axes, keepdims=keep_dims, initial=initial), dtype=T.np)  # type: ignore[no-any-return]
        return xp_of(input).asarray(fn(input, axis=axes, keepdims=keep_dims), dtype=T.np)  # type: ignore[no-any-return]

    return kernel


def _bool_reduction(op: str, fn: Kernel) -> Kernel:
    def kernel(input: np.ndarray, reduction_indices: np.ndarray, keep_dims: bool, **attrs: Any) -> np.ndarray:
        return xp_of(input).asarray(fn(input, axis=_axes(op, input, reduction_indices), keepdims=keep_dims))  # type: ignore[no-any-return]

    return kernel


def _arg(op: str, fn: Kernel) -> Kernel:
    """ArgMax/ArgMin as TensorFlow's CPU kernel (Eigen's ArgMaxPairReducer): a scan from
    (index 0, lowest finite value) that moves only to a strictly greater element.  So
    NaN is never picked (numpy picks the first NaN), a slice of NaN or of values no
    greater than the lowest finite one gives 0, and ties give the first index."""
    is_max = op == "ArgMax"

    def kernel(input: np.ndarray, dimension: np.ndarray, output_type: ok.DType, T: ok.DType, **attrs: Any) -> np.ndarray:
        axis = arg_axis(op, input.shape, dimension)
        if not T.is_floating:
            return fn(input, axis=axis).astype(output_type.np, copy=False)  # type: ignore[no-any-return]
        xp = xp_of(input)
        index = xp.expand_dims(fn(input, axis=axis), axis)
        if input.size:
            # numpy's answer is TensorFlow's wherever the picked value is a number beyond
            # the lowest (highest) finite one: numpy picks the first NaN, so none is in
            # the slice, and the first of equal values, as the scan does.
            best = xp.take_along_axis(input, index, axis)
            with np.errstate(invalid="ignore"):
                plain = bool(xp.all(best > T.min if is_max else best < T.max))
            if not plain:
                x = xp.where(xp.isnan(input), -xp.inf if is_max else xp.inf, input)
                index = xp.expand_dims(fn(x, axis=axis), axis)
                best = xp.take_along_axis(x, index, axis)
                index = xp.where(best > T.min if is_max else best < T.max, index, 0)
        return index.squeeze(axis).astype(output_type.np, copy=False)  # type: ignore[no-any-return]

    return kernel


# ---------------------------------------------------------------- linear algebra


#: Products whose first operand has fewer elements go through ndarray.dot (see product).
_DOT_BELOW = 4096


def product(op: str, a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    """The matrix product of MatMul (and FusedMatMul): a new array, errors naming ``op``."""
    if transpose_a:
        a = a.T
    if transpose_b:
        b = b.T
    # A 4x4 MatMul is mostly call overhead: the ranks are read (an int each) and the
    # inner sizes left to BLAS, which raises on a mismatch; reading both shapes (a new
    # tuple each) and comparing them cost 0.4 us more.
    if a.ndim == 2 and b.ndim == 2:
        try:
            # The same BLAS call either way: dot has less per-call overhead (1.2 against
            # 2.4 us on a 4x4), matmul is a few per cent faster on large products.
            return a.dot(b) if a.size < _DOT_BELOW else a @ b  # type: ignore[no-any-return]
        except ValueError:
            pass
    if a.ndim != 2 or b.ndim != 2:
        raise _fail(op, f"inputs must be matrices, got shapes {list(a.shape)} and {list(b.shape)}")
    raise _fail(
        op,
        f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}"
        f" (transpose_a={transpose_a}, transpose_b={transpose_b})",
    )


def mat_mul(a: np.ndarray, b: np.ndarray, transpose_a: bool, transpose_b: bool) -> np.ndarray:
    return product("MatMul", a, b, transpose_a, transpose_b)


def _adjoint(m: np.ndarray, complex_: bool) -> np.ndarray:
    xp = xp_of(m)
    m = xp.swapaxes(m, -1, -2)
    return xp.conj(m) if complex_ else m


def batch_mat_mul(x: np.ndarray, y: np.ndarray, adj_x: bool, adj_y: bool, T: ok.DType, **attrs: Any) -> np.ndarray:
    if x.ndim < 2 or y.ndim < 2:
        raise _fail("BatchMatMul", f"inputs must have rank >= 2, got shapes {list(x.shape)} and {list(y.shape)}")
    a = _adjoint(x, T.is_complex) if adj_x else x
    b = _adjoint(y, T.is_complex) if adj_y else y
    if a.shape[-1] != b.shape[-2]:
        raise _fail(
            "BatchMatMul",
            f"Matrix size-incompatible: In[0]: {list(x.shape)}, In[1]: {list(y.shape)} (adj_x={adj_x}, adj_y={adj_y})",
        )
    if a.ndim > 2 or b.ndim > 2:
        out = sharding.batched_matmul(a, b)  # many small products: the batch on the intra-op pool
        if out is not None:
            return out
    try:
        return xp_of(a, b).matmul(a, b)  # type: ignore[no-any-return]
    except ValueError as e:
        raise _fail(
            "BatchMatMul", f"batch dimensions must broadcast, got shapes {list(x.shape)} and {list(y.shape)}"
        ) from e


def add_n(inputs: list[np.ndarray], **attrs: Any) -> np.ndarray:
    shape = inputs[0].shape
    for x in inputs[1:]:
        if x.shape != shape:
            raise _fail("AddN", f"all inputs must have shape {list(shape)}, got {list(x.shape)}")
    out = inputs[0].copy()
    xp = xp_of(out)
    with np.errstate(all="ignore"):  # overflow gives inf (or wraps), silently, as in TensorFlow
        for x in inputs[1:]:
            xp.add(out, x, out=out)
    return out


def cast(x: np.ndarray, DstT: ok.DType, SrcT: ok.DType, Truncate: bool = False, **attrs: Any) -> np.ndarray:
    bits = cast_truncation_bits(SrcT, DstT) if Truncate else 0
    with np.errstate(all="ignore"):
        if bits:
            x = _zero_low_bits(x, bits)
        if x.dtype.kind == "c" and not DstT.is_complex:
            x = x.real  # C++ static_cast semantics: the imaginary part is dropped
        if DstT.is_integer and (SrcT.is_floating or SrcT.is_complex):
            return saturating_cast(x, DstT.np)  # type: ignore[no-any-return]
        return x.astype(DstT.np)


def saturating_cast(x: Any, dst: np.dtype[Any]) -> Any:
    """Floats to an integer type, rounding toward zero, out-of-range values to the nearest
    end of the range and NaN to 0, as CUDA's conversions (and TensorFlow's GPU kernels)
    do.  C++ leaves these conversions undefined: TensorFlow's CPU answer and numpy's
    ``astype`` depend on the element's position in the array (SIMD lanes or not)."""
    xp = xp_of(x)
    info = np.iinfo(dst)
    top, bottom = float(info.max) + 1.0, float(info.min)  # powers of two: exact in every float type
    if x.size and x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            inside = bool(xp.min(x) >= bottom) and bool(xp.max(x) < top)  # False with any NaN
        if inside:  # the usual case: one conversion, rounding toward zero
            return x.astype(dst)
    wide = x.astype(np.float64)  # compares exactly with the range's ends, 2**k
    inside = (wide >= bottom) & (wide < top)  # False for NaN
    out = xp.where(inside, wide, 0.0).astype(dst)
    out = xp.where(wide >= top, dst.type(info.max), out)
    return xp.where(wide < bottom, dst.type(info.min), out)


def _zero_low_bits(x: np.ndarray, bits: int) -> np.ndarray:
    """A copy of float (or complex) ``x`` with the low ``bits`` of each part's bit pattern
    zeroed, NaN left alone: TensorFlow's LSBZeroSetter, which makes Cast truncate."""
    xp = xp_of(x)
    parts = xp.ascontiguousarray(x).view(x.real.dtype).copy()  # complex: (re, im) pairs
    word = np.dtype(f"u{parts.dtype.itemsize}")
    mask = word.type(((1 << (8 * word.itemsize)) - 1) ^ ((1 << bits) - 1))
    pattern = parts.view(word)
    xp.copyto(pattern, pattern & mask, where=~xp.isnan(parts))
    return parts.view(x.dtype).reshape(x.shape)  # type: ignore[no-any-return]


# ---------------------------------------------------------------- complex numbers


def _check_parts(op: str, complex_: ok.DType, part: ok.DType) -> None:
    """Tout of Real/Imag/ComplexAbs/Angle must be T's parts' dtype: float32 for complex64,
    float64 for complex128 (the pairs TensorFlow registers kernels for)."""
    if complex_.real_dtype is not part:
        raise _fail(op, f"attr 'Tout' must be {complex_.real_dtype.name}, the dtype of {complex_.name}'s parts, got {part.name}")


def complex_part(op: str, take: Callable[[Any], Any]) -> Kernel:
    """Real, Imag, ComplexAbs and Angle: ``take(z)`` as a new contiguous array of the
    parts' dtype (``z.real`` and ``z.imag`` are strided views of the input)."""

    def kernel(input: np.ndarray, T: ok.DType, Tout: ok.DType, **attrs: Any) -> np.ndarray:
        _check_parts(op, T, Tout)
        # Not ascontiguousarray: it turns a 0-d input into shape [1].
        return xp_of(input).array(take(input), dtype=Tout.np, order="C", copy=True)  # type: ignore[no-any-return]

    kernel.__name__ = op
    return kernel


def complex_(real: np.ndarray, imag: np.ndarray, T: ok.DType, Tout: ok.DType, **attrs: Any) -> np.ndarray:
    """real + imag * 1j, broadcast, written part by part (so an infinite part stays
    infinite: imag * 1j would turn inf into nan + inf j)."""
    if Tout.real_dtype is not T:  # the same pairs as Real's, the other way round
        wanted = "complex64" if T.name == "float32" else "complex128"
        raise _fail("Complex", f"attr 'Tout' must be {wanted}, the complex dtype with {T.name} parts, got {Tout.name}")
    try:
        shape = np.broadcast_shapes(real.shape, imag.shape)
    except ValueError as e:
        raise _incompatible("Complex", real, imag) from e
    out = xp_of(real, imag).empty(shape, Tout.np)
    out.real[...] = real
    out.imag[...] = imag
    return out  # type: ignore[no-any-return]


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    number = {"T": _NUMBER}
    real = {"T": _REAL}
    axes = ("reduction_indices",)
    table: list[tuple[str, Any, dict[str, list[str]] | None, tuple[str, ...]]] = [
        ("Add", _binary("Add", np.add), None, ()),
        ("Sub", _binary("Sub", np.subtract), None, ()),
        ("Mul", _binary("Mul", np.multiply), None, ()),
        ("RealDiv", real_div, None, ()),
        ("FloorDiv", floor_div, real, ()),  # no complex: floor is not defined there (TensorFlow has no such kernel)
        ("FloorMod", floor_mod, None, ()),
        ("Pow", pow_, None, ()),
        ("Maximum", _binary("Maximum", np.maximum), None, ()),
        ("Minimum", _binary("Minimum", np.minimum), None, ()),
        ("Neg", _unary(np.negative), None, ()),
        ("Abs", _unary(np.abs), None, ()),
        ("Sign", sign, None, ()),
        ("Square", _unary(np.square), None, ()),
        ("Exp", exp, None, ()),
        ("Log", _unary(np.log, quiet=True), None, ()),
        ("Log1p", _unary(np.log1p, quiet=True), None, ()),
        ("Sqrt", _unary(np.sqrt, quiet=True), None, ()),
        ("Rsqrt", rsqrt, None, ()),
        ("Sin", _unary(np.sin, quiet=True), None, ()),
        ("Cos", _unary(np.cos, quiet=True), None, ()),
        ("Tanh", _unary(np.tanh, quiet=True), None, ()),
        ("Sigmoid", sigmoid, None, ()),
        ("Erf", erf, None, ()),
        ("Floor", _unary(np.floor), None, ()),
        ("Ceil", _unary(np.ceil), None, ()),
        ("Expm1", _unary(np.expm1, quiet=True), None, ()),
        ("Sinh", _unary(np.sinh, quiet=True), None, ()),
        ("Cosh", _unary(np.cosh, quiet=True), None, ()),
        ("Atan", _unary(np.arctan, quiet=True), None, ()),
        ("Tan", _unary(np.tan, quiet=True), None, ()),
        ("Asin", _unary(np.arcsin, quiet=True), None, ()),
        ("Acos", _unary(np.arccos, quiet=True), None, ()),
        ("Asinh", _unary(np.arcsinh, quiet=True), None, ()),
        ("Acosh", _unary(np.arccosh, quiet=True), None, ()),
        ("Atanh", _unary(np.arctanh, quiet=True), None, ()),
        ("Reciprocal", _unary(np.reciprocal, quiet=True), None, ()),
        ("Round", _unary(np.rint), None, ()),  # halves to even, as TensorFlow's (and integers unchanged)
        ("IsNan", _unary(np.isnan), None, ()),
        ("IsInf", _unary(np.isinf), None, ()),
        ("IsFinite", _unary(np.isfinite), None, ()),
        ("Atan2", _binary("Atan2", np.arctan2, quiet=True), None, ()),
        ("SquaredDifference", squared_difference, None, ()),
        ("Equal", _equality("Equal", np.equal, False), None, ()),
        ("NotEqual", _equality("NotEqual", np.not_equal, True), None, ()),
        ("Less", _binary("Less", np.less), None, ()),
        ("LessEqual", _binary("LessEqual", np.less_equal), None, ()),
        ("Greater", _binary("Greater", np.greater), None, ()),
        ("GreaterEqual", _binary("GreaterEqual", np.greater_equal), None, ()),
        ("LogicalAnd", _binary("LogicalAnd", np.logical_and), None, ()),
        ("LogicalOr", _binary("LogicalOr", np.logical_or), None, ()),
        ("BitwiseAnd", _binary("BitwiseAnd", np.bitwise_and), None, ()),
        ("BitwiseOr", _binary("BitwiseOr", np.bitwise_or), None, ()),
        ("BitwiseXor", _binary("BitwiseXor", np.bitwise_xor), None, ()),
        ("LogicalNot", _unary(np.logical_not), None, ()),
        ("Select", select, None, ()),
        ("SelectV2", select_v2, None, ()),
        ("ClipByValue", clip_by_value, number, ()),
        ("Sum", sum_, number, axes),
        ("Mean", mean, number, axes),
        ("Prod", prod, number, axes),
        ("Max", _extreme("Max", np.max, lowest=True), real, axes),
        ("Min", _extreme("Min", np.min, lowest=False), real, axes),
        ("All", _bool_reduction("All", np.all), None, axes),
        ("Any", _bool_reduction("Any", np.any), None, axes),
        ("ArgMax", _arg("ArgMax", np.argmax), {"T": _NUMBER + ["bool"]}, ("dimension",)),
        ("ArgMin", _arg("ArgMin", np.argmin), {"T": _NUMBER + ["bool"]}, ("dimension",)),
        ("MatMul", mat_mul, None, ()),
        ("BatchMatMul", batch_mat_mul, None, ()),
        ("AddN", add_n, number, ()),
        ("Cast", cast, None, ()),
        ("Conj", _unary(np.conjugate), None, ()),
        ("Real", complex_part("Real", lambda z: z.real), None, ()),
        ("Imag", complex_part("Imag", lambda z: z.imag), None, ()),
        ("ComplexAbs", complex_part("ComplexAbs", np.abs), None, ()),
        ("Angle", complex_part("Angle", np.angle), None, ()),
        ("Complex", complex_, None, ()),
    ]
    for op, fn, constraints, host in table:
        ok.register_kernel(op, backend="cpu", type_constraints=constraints, host_memory=host)(fn)
