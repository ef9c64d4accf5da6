"""CUDA kernels of the arithmetic, comparison, reduction and linear-algebra ops.

Almost every row is the CPU plugin's own kernel body (written against
``xp_of``), or its kernel factory given cupy's ufuncs where the CPU row passes
numpy's.  RealDiv, FloorDiv, FloorMod and Pow are the CPU's rules rebuilt over
cupy's ufuncs (the CPU versions call numpy ufuncs sharded across threads).
MatMul and BatchMatMul are ``a @ b`` on cupy arrays: cuBLAS.  Erf is
``cupyx.scipy.special.erf``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel_cpu import math_kernels as cpu
from opkernel_cpu import nn_kernels as cpu_nn
from opkernel_cpu.xp import xp_of

from .backend import SUPPORTED
from .lazy import LazyModule

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]


def _without_bfloat16(types: list[str]) -> list[str]:
    return [t for t in types if t != "bfloat16"]


def _erf(special: LazyModule) -> Any:
    erf = special.erf

    def kernel(x: Any, T: ok.DType, **attrs: Any) -> Any:
        if xp_of(x) is np:
            return cpu.erf(x, T=T)
        wide = x.astype(np.float64 if T.name == "float64" else np.float32, copy=False)
        return erf(wide).astype(T.np, copy=False)

    return kernel


def _gelu(special: LazyModule) -> tuple[Any, Any]:
    """Gelu and GeluGrad: the CPU plugin's bodies (opkernel_cpu.nn_kernels) over cupy with
    ``cupyx.scipy.special.erf``, float16 in float32."""
    erf = special.erf

    def wide(x: Any, T: ok.DType) -> Any:
        return x.astype(np.float64 if T.name == "float64" else np.float32, copy=False)

    def gelu(features: Any, approximate: bool, T: ok.DType, **attrs: Any) -> Any:
        if xp_of(features) is np:
            return cpu_nn.gelu(features, approximate=approximate, T=T)
        return cpu_nn.gelu_values(wide(features, T), approximate, erf).astype(T.np, copy=False)

    def gelu_grad(gradients: Any, features: Any, approximate: bool, T: ok.DType, **attrs: Any) -> Any:
        if xp_of(features) is np:
            return cpu_nn.gelu_grad(gradients, features, approximate=approximate, T=T)
        cpu_nn.check_gelu_grad(gradients, features)
        return cpu_nn.gelu_grad_values(wide(gradients, T), wide(features, T), approximate, erf).astype(T.np, copy=False)

    return gelu, gelu_grad


def zeros_signed_as_the_last(input: Any, axes: tuple[int, ...], keep_dims: bool, out: Any) -> Any:
    """``out`` (the Max or Min of ``input`` over ``axes``) with each zero given the sign of
    the last zero of its slice, in row-major order of the reduced axes.

    TensorFlow's MaxReducer/MinReducer keep the element just read when it equals the
    running value, so of equal signed zeros the last one wins (as numpy's sequential
    reduction gives); cupy's parallel tree reduction keeps whichever zero its tree meets
    first.  Any other answer is a unique value (or NaN), so only zeros are rewritten."""
    xp = xp_of(input)
    if not axes:
        return out
    kept = [a for a in range(input.ndim) if a not in axes]
    rows = xp.transpose(input, tuple(kept) + axes).reshape(tuple(input.shape[a] for a in kept) + (-1,))
    last = rows.shape[-1] - 1 - xp.argmax((rows[..., ::-1] == 0).astype(np.int8), axis=-1)
    picked = xp.take_along_axis(rows, last[..., None], axis=-1)[..., 0]
    shape = tuple(1 if a in axes else n for a, n in enumerate(input.shape)) if keep_dims else picked.shape
    return xp.where(out == 0, picked.reshape(shape), out)


def _extreme(op: str, fn: Any, name: str, lowest: bool) -> Any:
    """Max/Min; an empty reduction gives the identity (cupy's max takes no ``initial``);
    equal signed zeros give the last one, as TensorFlow (``zeros_signed_as_the_last``)."""
    device = cpu._extreme(op, fn, lowest)
    host = cpu._extreme(op, getattr(np, name), lowest)

    def kernel(input: Any, reduction_indices: Any, keep_dims: bool, T: ok.DType, **attrs: Any) -> Any:
        if input.size or xp_of(input) is np:
            out = device(input, reduction_indices, keep_dims, T=T)
            if T.is_floating and input.size:
                out = zeros_signed_as_the_last(input, cpu._axes(op, input, reduction_indices), keep_dims, out)
            return out
        identity = host(np.empty(input.shape, input.dtype), reduction_indices, keep_dims, T=T)
        return xp_of(input).asarray(identity)

    return kernel


def _division(xp: LazyModule) -> dict[str, Any]:
    """RealDiv, FloorDiv, FloorMod and Pow with TensorFlow's integer rules, as on the CPU."""
    binary = cpu._binary
    real_div_int = binary("RealDiv", xp.floor_divide)
    real_div_float = binary("RealDiv", xp.true_divide, quiet=True)
    floor_div_int = binary("FloorDiv", xp.floor_divide)
    floor_div_float = binary("FloorDiv", lambda a, b: xp.floor(xp.true_divide(a, b)), quiet=True)
    floor_mod_ = binary("FloorMod", xp.mod, quiet=True)
    fmod = binary("FloorMod", xp.fmod, quiet=True)
    power = binary("Pow", xp.power, quiet=True)

    def real_div(x: Any, y: Any, T: ok.DType) -> Any:
        if T.is_integer:
            cpu._check_nonzero("RealDiv", y, x)
            m = xp_of(x, y)
            q = real_div_int(m.abs(x), m.abs(y))  # C semantics: truncate toward zero
            return m.where((x < 0) != (y < 0), -q, q).astype(T.np)
        return real_div_float(x, y)

    def floor_div(x: Any, y: Any, T: ok.DType) -> Any:
        if T.is_integer:
            cpu._check_nonzero("FloorDiv", y, x)
            return floor_div_int(x, y)
        return floor_div_float(x, y)

    def floor_mod(x: Any, y: Any, T: ok.DType) -> Any:
        if T.is_integer:
            cpu._check_nonzero("FloorMod", y, x)
            return floor_mod_(x, y)
        return cpu.floor_mod_float(x, y, fmod)

    def pow_(x: Any, y: Any, T: ok.DType) -> Any:
        if T.is_integer and x.size and y.size and xp_of(y).any(y < 0):
            raise cpu._fail("Pow", "Integers to negative integer powers are not allowed")
        return power(x, y)

    return {"RealDiv": real_div, "FloorDiv": floor_div, "FloorMod": floor_mod, "Pow": pow_}


def rows(xp: LazyModule, special: LazyModule) -> list[Row]:
    """(op, function, type constraints, host-memory args): the CPU table over ``xp``."""
    number = {"T": _without_bfloat16(cpu._NUMBER)}
    real = {"T": _without_bfloat16(cpu._REAL)}
    axes = ("reduction_indices",)
    binary = cpu._binary
    division = _division(xp)
    gelu, gelu_grad = _gelu(special)
    return [
        ("Add", binary("Add", xp.add), None, ()),
        ("Sub", binary("Sub", xp.subtract), None, ()),
        ("Mul", binary("Mul", xp.multiply), None, ()),
        ("RealDiv", division["RealDiv"], None, ()),
        ("FloorDiv", division["FloorDiv"], real, ()),  # no complex, as on cpu
        ("FloorMod", division["FloorMod"], None, ()),
        ("Pow", division["Pow"], None, ()),
        ("Maximum", binary("Maximum", xp.maximum), None, ()),
        ("Minimum", binary("Minimum", xp.minimum), None, ()),
        ("Neg", cpu._unary(xp.negative), None, ()),
        ("Abs", cpu._unary(xp.abs), None, ()),
        ("Sign", cpu.sign, None, ()),
        ("Square", cpu._unary(xp.square), None, ()),
        ("Exp", cpu._unary(xp.exp, quiet=True), None, ()),
        ("Log", cpu._unary(xp.log, quiet=True), None, ()),
        ("Log1p", cpu._unary(xp.log1p, quiet=True), None, ()),
        ("Sqrt", cpu._unary(xp.sqrt, quiet=True), None, ()),
        ("Rsqrt", cpu.rsqrt, None, ()),
        ("Sin", cpu._unary(xp.sin, quiet=True), None, ()),
        ("Cos", cpu._unary(xp.cos, quiet=True), None, ()),
        ("Tanh", cpu._unary(xp.tanh, quiet=True), None, ()),
        ("Sigmoid", cpu.sigmoid, None, ()),
        ("Erf", _erf(special), {"T": ["float16", "float32", "float64"]}, ()),
        ("Gelu", gelu, {"T": ["float16", "float32", "float64"]}, ()),
        ("GeluGrad", gelu_grad, {"T": ["float16", "float32", "float64"]}, ()),
        ("Floor", cpu._unary(xp.floor), None, ()),
        ("Ceil", cpu._unary(xp.ceil), None, ()),
        ("Expm1", cpu._unary(xp.expm1, quiet=True), None, ()),
        ("Sinh", cpu._unary(xp.sinh, quiet=True), None, ()),
        ("Cosh", cpu._unary(xp.cosh, quiet=True), None, ()),
        ("Atan", cpu._unary(xp.arctan, quiet=True), None, ()),
        ("Tan", cpu._unary(xp.tan, quiet=True), None, ()),
        ("Asin", cpu._unary(xp.arcsin, quiet=True), None, ()),
        ("Acos", cpu._unary(xp.arccos, quiet=True), None, ()),
        ("Asinh", cpu._unary(xp.arcsinh, quiet=True), None, ()),
        ("Acosh", cpu._unary(xp.arccosh, quiet=True), None, ()),
        ("Atanh", cpu._unary(xp.arctanh, quiet=True), None, ()),
        ("Reciprocal", cpu._unary(xp.reciprocal, quiet=True), None, ()),
        ("Round", cpu._unary(xp.rint), None, ()),
        ("IsNan", cpu._unary(xp.isnan), None, ()),
        ("IsInf", cpu._unary(xp.isinf), None, ()),
        ("IsFinite", cpu._unary(xp.isfinite), None, ()),
        ("Atan2", binary("Atan2", xp.arctan2), None, ()),
        ("SquaredDifference", cpu.squared_difference, None, ()),
        ("Equal", cpu._equality("Equal", xp.equal, False), None, ()),
        ("NotEqual", cpu._equality("NotEqual", xp.not_equal, True), None, ()),
        ("Less", binary("Less", xp.less), None, ()),
        ("LessEqual", binary("LessEqual", xp.less_equal), None, ()),
        ("Greater", binary("Greater", xp.greater), None, ()),
        ("GreaterEqual", binary("GreaterEqual", xp.greater_equal), None, ()),
        ("LogicalAnd", binary("LogicalAnd", xp.logical_and), None, ()),
        ("LogicalOr", binary("LogicalOr", xp.logical_or), None, ()),
        ("BitwiseAnd", binary("BitwiseAnd", xp.bitwise_and), None, ()),
        ("BitwiseOr", binary("BitwiseOr", xp.bitwise_or), None, ()),
        ("BitwiseXor", binary("BitwiseXor", xp.bitwise_xor), None, ()),
        ("LogicalNot", cpu._unary(xp.logical_not), None, ()),
        ("Select", cpu.select, None, ()),
        ("SelectV2", cpu.select_v2, None, ()),
        ("ClipByValue", cpu.clip_by_value, number, ()),
        ("Sum", cpu.sum_, number, axes),
        ("Mean", cpu.mean, number, axes),
        ("Prod", cpu.prod, number, axes),
        ("Max", _extreme("Max", xp.max, "max", lowest=True), real, axes),
        ("Min", _extreme("Min", xp.min, "min", lowest=False), real, axes),
        ("All", cpu._bool_reduction("All", xp.all), None, axes),
        ("Any", cpu._bool_reduction("Any", xp.any), None, axes),
        ("ArgMax", cpu._arg("ArgMax", xp.argmax), {"T": _without_bfloat16(cpu._NUMBER) + ["bool"]}, ("dimension",)),
        ("ArgMin", cpu._arg("ArgMin", xp.argmin), {"T": _without_bfloat16(cpu._NUMBER) + ["bool"]}, ("dimension",)),
        ("MatMul", cpu.mat_mul, None, ()),
        ("BatchMatMul", cpu.batch_mat_mul, None, ()),
        ("AddN", cpu.add_n, number, ()),
        # to and from what a cupy array holds: a cast to string is a KernelNotFoundError (run it on cpu)
        ("Cast", cpu.cast, {"SrcT": sorted(SUPPORTED), "DstT": sorted(SUPPORTED)}, ()),
        ("Conj", cpu._unary(xp.conjugate), None, ()),
        ("Real", cpu.complex_part("Real", lambda z: z.real), None, ()),
        ("Imag", cpu.complex_part("Imag", lambda z: z.imag), None, ()),
        ("ComplexAbs", cpu.complex_part("ComplexAbs", xp.abs), None, ()),
        ("Angle", cpu.complex_part("Angle", xp.angle), None, ()),
        ("Complex", cpu.complex_, None, ()),
    ]
