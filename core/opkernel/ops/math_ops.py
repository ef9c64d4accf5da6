"""Specs, shape functions and gradients of the arithmetic, comparison, reduction and
linear-algebra ops (TensorFlow's ``math_ops.cc`` and ``math_grad.py``).

Gradients are written with public ops only, so they run on every backend and are
themselves differentiable (second-order gradients through nested tapes).

Complex gradients follow TensorFlow's (and PyTorch's) convention: for a real loss L
of a complex z = a + bj, the gradient is dL/da + j dL/db, so a holomorphic
``y = f(z)`` passes back ``grad * conj(f'(z))``.  The rules below are written for
real dtypes and take conjugated inputs (``_conj``) where the derivative reads them.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import shape_fns
from ..errors import InvalidArgumentError, ShapeError
from ..gradients import not_differentiable, register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._grad_util import constant, mat_mul_grads, unbroadcast

_BINARY_TYPES = "{bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128}"
_NEG_TYPES = "{bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"
_MATMUL_TYPES = "{bfloat16, half, float, double, int32, int64, complex64, complex128}"
_UNARY = _NEG_TYPES
_UNARY_REAL = "{bfloat16, half, float, double}"
_UNARY_COMPLEX = "{bfloat16, half, float, double, complex64, complex128}"
_ABS_TYPES = "{bfloat16, half, float, double, int8, int16, int32, int64}"
_POW_TYPES = "{bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128}"
_FLOOR_MOD_TYPES = "{int8, int16, int32, int64, uint8, uint16, uint32, uint64, bfloat16, half, float, double}"
_MIN_MAX_TYPES = "{bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, uint64}"
#: The bitwise ops' types: every integer type (TensorFlow's bitwise_ops.cc).
_BITWISE_TYPES = "{int8, int16, int32, int64, uint8, uint16, uint32, uint64}"
#: The bitwise binary ops and the operator each computes.
_BITWISE = {"BitwiseAnd": "&", "BitwiseOr": "|", "BitwiseXor": "^"}
_BATCH_MATMUL_TYPES = "{bfloat16, half, float, double, int16, int32, int64, complex64, complex128}"
# Sub, Mul and FloorDiv take the wide unsigned types too, as in TensorFlow (RealDiv has no CPU kernel for them there).
_BINARY_UINT_TYPES = (
    "{bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, uint32, uint64, complex64, complex128}"
)
_SQUARE_TYPES = (
    "{bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, uint64, complex64, complex128}"
)

_UNARY_DOCS = {
    "Abs": ("Computes the absolute value of a tensor element-wise: y = |x|.", _ABS_TYPES),
    "Sign": ("Returns -1 where x < 0, 0 where x == 0, 1 where x > 0 (x / |x| for complex x != 0).", _UNARY),
    "Square": ("Computes the square of x element-wise: y = x * x.", _SQUARE_TYPES),
    "Exp": ("Computes the exponential of x element-wise: y = e^x.", _UNARY_COMPLEX),
    "Log": ("Computes the natural logarithm of x element-wise.", _UNARY_COMPLEX),
    "Log1p": ("Computes log(1 + x) element-wise, accurately for small x.", _UNARY_COMPLEX),
    "Sqrt": ("Computes the square root of x element-wise.", _UNARY_COMPLEX),
    "Rsqrt": ("Computes the reciprocal of the square root of x element-wise: y = 1 / sqrt(x).", _UNARY_COMPLEX),
    "Sin": ("Computes the sine of x element-wise.", _UNARY_COMPLEX),
    "Cos": ("Computes the cosine of x element-wise.", _UNARY_COMPLEX),
    "Tanh": ("Computes the hyperbolic tangent of x element-wise.", _UNARY_COMPLEX),
    "Sigmoid": ("Computes the logistic sigmoid of x element-wise: y = 1 / (1 + exp(-x)).", _UNARY_COMPLEX),
    "Erf": ("Computes the Gauss error function of x element-wise.", _UNARY_REAL),
    "Floor": ("Returns the largest integer not greater than x, element-wise.", _UNARY_REAL),
    "Ceil": ("Returns the smallest integer not less than x, element-wise.", _UNARY_REAL),
    "Expm1": ("Computes exp(x) - 1 element-wise, accurately for small x.", _UNARY_COMPLEX),
    "Sinh": ("Computes the hyperbolic sine of x element-wise.", _UNARY_COMPLEX),
    "Cosh": ("Computes the hyperbolic cosine of x element-wise.", _UNARY_COMPLEX),
    "Atan": ("Computes the arctangent of x element-wise (the principal value, in (-pi/2, pi/2) for real x).", _UNARY_COMPLEX),
    "Tan": ("Computes the tangent of x element-wise.", _UNARY_COMPLEX),
    "Asin": ("Computes the arcsine of x element-wise (the principal value, in [-pi/2, pi/2] for real x).", _UNARY_COMPLEX),
    "Acos": ("Computes the arccosine of x element-wise (the principal value, in [0, pi] for real x).", _UNARY_COMPLEX),
    "Asinh": ("Computes the inverse hyperbolic sine of x element-wise.", _UNARY_COMPLEX),
    "Acosh": ("Computes the inverse hyperbolic cosine of x element-wise (NaN below 1 for real x).", _UNARY_COMPLEX),
    "Atanh": ("Computes the inverse hyperbolic tangent of x element-wise (+-inf at +-1, NaN beyond).", _UNARY_COMPLEX),
    "Reciprocal": ("Computes the reciprocal of x element-wise: y = 1 / x.", _UNARY_COMPLEX),
    "Round": ("Rounds x to the nearest integer element-wise, halves to the even one (banker's rounding).",
              "{bfloat16, half, float, double, int32, int64}"),
}

#: The bool-valued tests of floats (TensorFlow's IsNan, IsInf, IsFinite).
_FLOAT_TESTS = {
    "IsNan": "Returns which elements of x are NaN.",
    "IsInf": "Returns which elements of x are +inf or -inf.",
    "IsFinite": "Returns which elements of x are finite (neither NaN nor infinite).",
}

_COMPARISONS = {
    "Less": "x < y",
    "LessEqual": "x <= y",
    "Greater": "x > y",
    "GreaterEqual": "x >= y",
}

_REDUCTION_DOC = (
    "\n\nReduces input along the dimensions given in reduction_indices (a scalar or vector; "
    "negative entries count from the end; naming an axis twice is an error). Unless keep_dims is true, "
    "the rank of the tensor is reduced by 1 for each distinct entry in reduction_indices; "
    "with keep_dims the reduced dimensions are kept with length 1.\n\n"
    "input: The tensor to reduce.\n"
    "reduction_indices: The dimensions to reduce. Must be in the range [-rank(input), rank(input)).\n"
    "keep_dims: If true, retain reduced dimensions with length 1.\n"
    "output: The reduced tensor."
)


# ---------------------------------------------------------------- shape functions


def _equality_shape(c: InferenceContext) -> None:
    """Broadcast shape; with ``incompatible_shape_error=false`` incompatible shapes
    give a scalar at run time, so the shape is unknown."""
    try:
        c.set_output(0, c.broadcast(c.input(0), c.input(1)))
    except ShapeError:
        if c.get_attr("incompatible_shape_error", True):
            raise
        c.set_output(0, c.unknown_shape())


def _select_v2_shape(c: InferenceContext) -> None:
    c.set_output(0, c.broadcast(c.broadcast(c.input(0), c.input(1)), c.input(2)))


def _select_shape(c: InferenceContext) -> None:
    """Select (v1), as TensorFlow's: t and e have one shape; condition is a scalar, has
    that shape, or is a vector that picks rows (the first dimension of t)."""
    data = c.merge(c.input(1), c.input(2))
    cond = c.input(0)
    if c.rank_known(cond) and c.rank_known(data) and c.rank(cond) != 0:
        if c.rank(cond) == 1 and c.rank(data) != 0:
            c.merge(cond, c.vector(c.dim(data, 0)))
        else:
            data = c.merge(data, cond)
    c.set_output(0, data)


def _clip_by_value_shape(c: InferenceContext) -> None:
    """Output has t's shape; each bound is a scalar or has t's shape."""
    t = c.input(0)
    for i in (1, 2):
        bound = c.input(i)
        if c.rank_known(bound) and c.rank(bound) != 0:
            try:
                t = c.merge(t, bound)
            except ShapeError as e:
                raise c.error(
                    f"{c.input_label(i)} must be a scalar or have the shape of input 't' "
                    f"({c.describe(c.input(0))}), got {c.describe(bound)}"
                ) from e
    c.set_output(0, t)


def _arg_op_shape(c: InferenceContext) -> None:
    """ArgMax/ArgMin: the input's shape without dimension ``dimension`` (a scalar)."""
    data = c.input(0)
    c.with_rank(c.input(1), 0)
    if not c.rank_known(data):
        c.set_output(0, c.unknown_shape())
        return
    rank = c.rank(data) or 0
    dim = c.input_tensor(1)
    if dim is None:
        c.set_output(0, c.unknown_shape_of_rank(max(rank - 1, 0)))
        return
    axis = int(np.asarray(dim).reshape(()))
    if not -rank <= axis < rank:
        raise c.error(f"dimension {axis} is out of range for {c.describe(data)} of rank {rank}; expected [{-rank}, {rank})")
    axis %= rank
    c.set_output(0, c.make_shape([c.dim(data, i) for i in range(rank) if i != axis]))


# ---------------------------------------------------------------- op specs


def _binary(name: str, types: str, doc: str) -> None:
    register_op(name).input("x: T").input("y: T").output("z: T").attr(f"T: {types}").set_shape_fn(
        shape_fns.broadcast_binary_op_shape
    ).doc(doc)


def _unary(name: str, types: str, doc: str) -> None:
    register_op(name).input("x: T").output("y: T").attr(f"T: {types}").set_shape_fn(shape_fns.unchanged_shape).doc(doc)


def _reduction(name: str, types: str, doc: str) -> None:
    register_op(name).input("input: T").input("reduction_indices: Tidx").output("output: T").attr(
        "keep_dims: bool = false"
    ).attr(f"T: {types}").attr("Tidx: {int32, int64} = DT_INT32").set_shape_fn(shape_fns.reduction_shape).doc(
        doc + _REDUCTION_DOC
    )


def _bool_reduction(name: str, doc: str) -> None:
    register_op(name).input("input: bool").input("reduction_indices: Tidx").output("output: bool").attr(
        "keep_dims: bool = false"
    ).attr("Tidx: {int32, int64} = DT_INT32").set_shape_fn(shape_fns.reduction_shape).doc(doc + _REDUCTION_DOC)


def _arg_op(name: str, doc: str, output_types: str) -> None:
    register_op(name).input("input: T").input("dimension: Tidx").output("output: output_type").attr(
        "T: {realnumbertype, quantizedtype, bool}"
    ).attr("Tidx: {int32, int64} = DT_INT32").attr(f"output_type: {output_types} = DT_INT64").set_shape_fn(
        _arg_op_shape
    ).doc(
        doc + "\n\nNote that in case of ties the smallest index is returned.\n\n"
        "dimension: A scalar in [-rank(input), rank(input)): the dimension to reduce across.\n"
        "output_type: The dtype of the indices."
    )


def _register_elementwise() -> None:
    _binary(
        "Add",
        "{bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, complex128, string}",
        "Returns x + y element-wise, with numpy broadcasting.",
    )
    _binary("Sub", _BINARY_UINT_TYPES, "Returns x - y element-wise, with numpy broadcasting.")
    _binary("Mul", _BINARY_UINT_TYPES, "Returns x * y element-wise, with numpy broadcasting.")
    _binary(
        "RealDiv",
        _BINARY_TYPES,
        "Returns x / y element-wise for real types (integer division truncates toward zero).",
    )
    _binary(
        "FloorDiv",
        _BINARY_UINT_TYPES,
        "Returns floor(x / y) element-wise, with numpy broadcasting (integers round toward -infinity).",
    )
    _binary(
        "FloorMod",
        _FLOOR_MOD_TYPES,
        "Returns the remainder of floor division element-wise: x - floor(x / y) * y, "
        "so the result has the sign of y.",
    )
    _binary(
        "Pow",
        _POW_TYPES,
        "Computes x ** y element-wise, with numpy broadcasting. Integers to negative integer powers are an error.",
    )
    _binary("Maximum", _MIN_MAX_TYPES, "Returns max(x, y) element-wise, with numpy broadcasting.")
    _binary("Minimum", _MIN_MAX_TYPES, "Returns min(x, y) element-wise, with numpy broadcasting.")
    for name, symbol in _BITWISE.items():
        _binary(name, _BITWISE_TYPES, f"Returns x {symbol} y element-wise on the bits of integers, with numpy broadcasting.")
    _unary("Neg", _NEG_TYPES, "Computes numerical negative value element-wise.")
    for name, (doc, types) in _UNARY_DOCS.items():
        _unary(name, types, doc)
    for name, doc in _FLOAT_TESTS.items():
        register_op(name).input("x: T").output("y: bool").attr(f"T: {_UNARY_REAL}").set_shape_fn(
            shape_fns.unchanged_shape
        ).doc(doc)
    register_op("Atan2").input("y: T").input("x: T").output("z: T").attr(f"T: {_UNARY_REAL}").set_shape_fn(
        shape_fns.broadcast_binary_op_shape
    ).doc("Computes the arctangent of y / x element-wise, in [-pi, pi] by the signs of both, with numpy broadcasting.")
    _binary(
        "SquaredDifference",
        "{bfloat16, half, float, double, int32, int64, complex64, complex128}",
        "Returns (x - y) * conj(x - y) element-wise, with numpy broadcasting.",
    )


def _register_comparisons() -> None:
    for name, expr in _COMPARISONS.items():
        register_op(name).input("x: T").input("y: T").output("z: bool").attr("T: realnumbertype").set_shape_fn(
            shape_fns.broadcast_binary_op_shape
        ).doc(f"Returns the truth value of ({expr}) element-wise, with numpy broadcasting.")
    for name, expr in (("Equal", "x == y"), ("NotEqual", "x != y")):
        register_op(name).input("x: T").input("y: T").output("z: bool").attr("T: type").attr(
            "incompatible_shape_error: bool = true"
        ).set_shape_fn(_equality_shape).doc(
            f"Returns the truth value of ({expr}) element-wise, with numpy broadcasting.\n\n"
            "incompatible_shape_error: If false, shapes that do not broadcast give a scalar "
            f"{'false' if name == 'Equal' else 'true'} instead of an error."
        )
    for name, op in (("LogicalAnd", "x AND y"), ("LogicalOr", "x OR y")):
        register_op(name).input("x: bool").input("y: bool").output("z: bool").set_shape_fn(
            shape_fns.broadcast_binary_op_shape
        ).doc(f"Returns the truth value of {op} element-wise, with numpy broadcasting.")
    register_op("LogicalNot").input("x: bool").output("y: bool").set_shape_fn(shape_fns.unchanged_shape).doc(
        "Returns the truth value of NOT x element-wise."
    )
    register_op("Select").input("condition: bool").input("t: T").input("e: T").output("output: T").attr(
        "T: type"
    ).set_shape_fn(_select_shape).doc(
        "Selects elements from t where condition is true and from e elsewhere (TensorFlow's "
        "Select: no broadcasting). t and e have the same shape; condition is a scalar (it "
        "picks all of t or all of e), has that shape, or is a vector of t's first dimension "
        "(it picks rows). SelectV2 broadcasts instead.\n\n"
        "condition: Where true, take the element (or row) of t, else that of e.\n"
        "t: Values taken where condition is true.\n"
        "e: Values taken where condition is false; the shape of t."
    )
    register_op("SelectV2").input("condition: bool").input("t: T").input("e: T").output("output: T").attr(
        "T: type"
    ).set_shape_fn(_select_v2_shape).doc(
        "Selects elements from t where condition is true and from e elsewhere. condition, t "
        "and e broadcast together.\n\n"
        "condition: Where true, take the element of t, else the element of e.\n"
        "t: Values taken where condition is true.\n"
        "e: Values taken where condition is false."
    )
    register_op("ClipByValue").input("t: T").input("clip_value_min: T").input("clip_value_max: T").output(
        "output: T"
    ).attr("T: numbertype").set_shape_fn(_clip_by_value_shape).doc(
        "Clips tensor values to [clip_value_min, clip_value_max]: min(max(t, clip_value_min), clip_value_max).\n\n"
        "clip_value_min: A scalar, or a tensor of the shape of t: the minimum value to clip to.\n"
        "clip_value_max: A scalar, or a tensor of the shape of t: the maximum value to clip to."
    )


def _register_reductions() -> None:
    _reduction("Sum", "numbertype", "Computes the sum of elements across dimensions of a tensor.")
    _reduction(
        "Mean",
        "numbertype",
        "Computes the mean of elements across dimensions of a tensor (integer means truncate toward zero).",
    )
    _reduction("Prod", "numbertype", "Computes the product of elements across dimensions of a tensor.")
    _reduction("Max", "{realnumbertype, quantizedtype}", "Computes the maximum of elements across dimensions of a tensor.")
    _reduction("Min", "{realnumbertype, quantizedtype}", "Computes the minimum of elements across dimensions of a tensor.")
    _bool_reduction("All", "Computes the logical and of elements across dimensions of a tensor.")
    _bool_reduction("Any", "Computes the logical or of elements across dimensions of a tensor.")
    # TensorFlow 2.21 lets ArgMax, not ArgMin, return int16 and uint16 indices.
    _arg_op(
        "ArgMax",
        "Returns the index with the largest value across a dimension of a tensor.",
        "{int16, uint16, int32, int64}",
    )
    _arg_op("ArgMin", "Returns the index with the smallest value across a dimension of a tensor.", "{int32, int64}")


_COMPLEX_TYPES = "{complex64, complex128}"
_COMPLEX_PARTS = (
    "\n\nT: A complex dtype.\n"
    "Tout: The real dtype of T: float for complex64, double for complex128 (other pairs are "
    "an InvalidArgumentError; TensorFlow registers no kernel for them)."
)


def _complex_to_real(name: str, doc: str, arg: str = "input", result: str = "output") -> None:
    register_op(name).input(f"{arg}: T").output(f"{result}: Tout").attr(f"T: {_COMPLEX_TYPES} = DT_COMPLEX64").attr(
        "Tout: {float, double} = DT_FLOAT"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(doc + _COMPLEX_PARTS)


def _register_complex() -> None:
    """TensorFlow's complex-number ops.  Conj's ``variant`` type is left out: there are
    no variant tensors here."""
    register_op("Conj").input("input: T").output("output: T").attr(f"T: {_COMPLEX_TYPES} = DT_COMPLEX64").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Returns the complex conjugate of a complex number element-wise: a - bj for a + bj.")
    _complex_to_real("Real", "Returns the real part of a complex number element-wise: a for a + bj.")
    _complex_to_real("Imag", "Returns the imaginary part of a complex number element-wise: b for a + bj.")
    _complex_to_real(  # TensorFlow names ComplexAbs's argument and result x and y
        "ComplexAbs", "Computes the absolute value of a complex number element-wise: sqrt(a^2 + b^2) for a + bj.", "x", "y"
    )
    _complex_to_real(
        "Angle", "Returns the argument of a complex number element-wise: atan2(b, a) for a + bj, in [-pi, pi]."
    )
    register_op("Complex").input("real: T").input("imag: T").output("out: Tout").attr("T: {float, double} = DT_FLOAT").attr(
        f"Tout: {_COMPLEX_TYPES} = DT_COMPLEX64"
    ).set_shape_fn(shape_fns.broadcast_binary_op_shape).doc(
        "Converts two real numbers to a complex number element-wise: real + imag * 1j, with numpy broadcasting.\n\n"
        "real: The real parts.\n"
        "imag: The imaginary parts.\n"
        "T: A real dtype.\n"
        "Tout: The complex dtype whose parts have dtype T: complex64 for float, complex128 for double."
    )


def register_ops() -> None:
    _register_elementwise()
    _register_comparisons()
    _register_reductions()
    _register_complex()
    register_op("MatMul").input("a: T").input("b: T").output("product: T").attr("transpose_a: bool = false").attr(
        "transpose_b: bool = false"
    ).attr(f"T: {_MATMUL_TYPES}").attr("grad_a: bool = false").attr("grad_b: bool = false").set_shape_fn(
        shape_fns.matmul_shape
    ).doc(
        "Multiplies matrix a by matrix b, producing a * b.\n\n"
        "transpose_a: If true, a is transposed before multiplication.\n"
        "transpose_b: If true, b is transposed before multiplication.\n"
        "grad_a: Set by the gradient when this product is the gradient with respect to a (a hint; "
        "the result does not depend on it), as in TensorFlow.\n"
        "grad_b: The same for b."
    )
    register_op("BatchMatMul").input("x: T").input("y: T").output("output: T").attr(
        f"T: {_BATCH_MATMUL_TYPES}"
    ).attr("adj_x: bool = false").attr("adj_y: bool = false").attr("grad_x: bool = false").attr(
        "grad_y: bool = false"
    ).set_shape_fn(shape_fns.batch_matmul_shape).doc(
        "Multiplies slices of two tensors in batches (TensorFlow's BatchMatMulV2).\n\n"
        "x and y have rank >= 2; their last two dimensions are multiplied as matrices and "
        "their leading (batch) dimensions broadcast as in numpy.\n\n"
        "x: A tensor of shape [..., r_x, c_x].\n"
        "y: A tensor of shape [..., r_y, c_y].\n"
        "output: A tensor of shape [..., r_o, c_o], r_o = c_x if adj_x else r_x, c_o = r_y if adj_y else c_y.\n"
        "adj_x: If true, adjoint (transpose and conjugate) the slices of x.\n"
        "adj_y: If true, adjoint (transpose and conjugate) the slices of y."
    )
    register_op("AddN").input("inputs: N * T").output("sum: T").attr("N: int >= 1").attr("T: numbertype").set_shape_fn(
        shape_fns.merge_all_inputs
    ).doc("Adds all input tensors element-wise.")
    register_op("Cast").input("x: SrcT").output("y: DstT").attr("SrcT: type").attr("DstT: type").attr(
        "Truncate: bool = false"
    ).set_shape_fn(shape_fns.unchanged_shape).doc(
        "Casts x to DstT. With Truncate, a cast that narrows a float's significand (float64 "
        "to float32 or float16, float32 to float16 or bfloat16, and their complex forms) "
        "rounds toward zero instead of to nearest, as TensorFlow's does."
    )


# ---------------------------------------------------------------- gradients


def _pair(grad_x: Any, grad_y: Any, op: Any) -> list[Any]:
    """Gradients of a broadcasting binary op, reduced back to each input's shape."""
    x, y = op.inputs
    return [unbroadcast(grad_x, x), unbroadcast(grad_y, y)]


def _atan2_grad(op: Any, grad: Any) -> list[Any]:
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2) (TensorFlow's _Atan2Grad)."""
    ops = _ops()
    y, x = op.inputs
    zs = ops.reciprocal(ops.add(ops.square(x), ops.square(y)))
    return _pair(ops.mul(ops.mul(grad, x), zs), ops.neg(ops.mul(ops.mul(grad, y), zs)), op)


def _squared_difference_grad(op: Any, grad: Any) -> list[Any]:
    """2 * grad * (x - y) and its negation (TensorFlow's _SquaredDifferenceGrad, which
    takes no conjugate for complex inputs either)."""
    ops = _ops()
    x, y = op.inputs
    x_grad = ops.mul(ops.mul(grad, 2), ops.sub(x, y))
    return _pair(x_grad, ops.neg(x_grad), op)


def _add_grad(op: Any, grad: Any) -> list[Any]:
    return _pair(grad, grad, op)


def _sub_grad(op: Any, grad: Any) -> list[Any]:
    return _pair(grad, _ops().neg(grad), op)


def _conj(x: Any) -> Any:
    """The complex conjugate of a complex tensor; any other tensor itself."""
    return _ops().conj(x) if x.dtype.is_complex else x


def _mul_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    x, y = op.inputs
    return _pair(ops.mul(grad, _conj(y)), ops.mul(_conj(x), grad), op)


def _real_div_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    x, y = op.inputs
    x, y = _conj(x), _conj(y)
    return _pair(ops.real_div(grad, y), ops.mul(grad, ops.real_div(ops.real_div(ops.neg(x), y), y)), op)


def _floor_mod_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    x, y = op.inputs
    return _pair(grad, ops.mul(grad, ops.neg(ops.floor_div(x, y))), op)


def _pow_grad(op: Any, grad: Any) -> list[Any]:
    """d/dx = y x^(y-1); d/dy = z log(x), taken as 0 where x <= 0 (as TensorFlow does)."""
    ops = _ops()
    x, y = op.inputs
    x, y, z = _conj(x), _conj(y), _conj(op.outputs[0])
    gx = ops.mul(grad, ops.mul(y, ops.pow(x, ops.sub(y, 1))))
    positive = ops.not_equal(x, 0) if x.dtype.is_complex else ops.greater(x, 0)
    safe_x = ops.select_v2(positive, x, ops.ones_like(x))
    log_x = ops.select_v2(positive, ops.log(safe_x), ops.zeros_like(x))
    gy = ops.mul(grad, ops.mul(z, log_x))
    return _pair(gx, gy, op)


def _min_max_grad(select_x: str) -> Any:
    """Maximum/Minimum: the gradient goes to the selected input; ties go to x."""

    def grad_fn(op: Any, grad: Any) -> list[Any]:
        ops = _ops()
        x, y = op.inputs
        x_wins = getattr(ops, select_x)(x, y)
        zeros = ops.zeros_like(grad)
        return _pair(ops.select_v2(x_wins, grad, zeros), ops.select_v2(x_wins, zeros, grad), op)

    return grad_fn


def _unary_grad(rule: Any) -> Any:
    """The gradient ``rule(ops, grad, x, y)`` of an elementwise unary op ``y = f(x)``.

    For complex x the rule is given conj(x) and conj(y): each f here has a power series
    with real coefficients, so f'(conj(x)) = conj(f'(x)) and f(conj(x)) = conj(y).
    """

    def grad_fn(op: Any, grad: Any) -> list[Any]:
        x, y = op.inputs[0], op.outputs[0]
        if x.dtype.is_complex:
            x, y = _conj(x), _conj(y)
        return [rule(_ops(), grad, x, y)]

    return grad_fn


_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

def _sigmoid_rule(ops: Any, gy: Any, y: Any) -> Any:
    return ops.sub(gy, ops.mul(gy, y))  # grad * y * (1 - y)


# Written to avoid scalar constants where an identity allows (1 - y*y -> grad - grad*y*y):
# each constant is one more op, and one more gradient, at every higher order.
UNARY_GRAD_RULES = {
    "Abs": lambda ops, g, x, y: ops.mul(g, ops.sign(x)),
    "Exp": lambda ops, g, x, y: ops.mul(g, y),
    "Log": lambda ops, g, x, y: ops.real_div(g, x),
    "Log1p": lambda ops, g, x, y: ops.real_div(g, ops.add(x, 1)),
    "Sqrt": lambda ops, g, x, y: ops.real_div(g, ops.add(y, y)),
    "Rsqrt": lambda ops, g, x, y: ops.mul(ops.mul(g, ops.mul(ops.square(y), y)), -0.5),
    "Square": lambda ops, g, x, y: ops.mul(g, ops.add(x, x)),
    "Sin": lambda ops, g, x, y: ops.mul(g, ops.cos(x)),
    "Cos": lambda ops, g, x, y: ops.neg(ops.mul(g, ops.sin(x))),
    "Tanh": lambda ops, g, x, y: ops.sub(g, ops.mul(ops.mul(g, y), y)),
    "Sigmoid": lambda ops, g, x, y: _sigmoid_rule(ops, ops.mul(g, y), y),
    "Erf": lambda ops, g, x, y: ops.mul(g, ops.mul(ops.exp(ops.neg(ops.square(x))), _TWO_OVER_SQRT_PI)),
    "Expm1": lambda ops, g, x, y: ops.add(g, ops.mul(g, y)),  # grad * exp(x) = grad * (y + 1)
    "Sinh": lambda ops, g, x, y: ops.mul(g, ops.cosh(x)),
    "Cosh": lambda ops, g, x, y: ops.mul(g, ops.sinh(x)),
    "Atan": lambda ops, g, x, y: ops.real_div(g, ops.add(ops.square(x), 1)),
    "Tan": lambda ops, g, x, y: ops.add(g, ops.mul(ops.mul(g, y), y)),  # grad * sec^2 = grad * (1 + y^2)
    "Asin": lambda ops, g, x, y: ops.mul(g, ops.rsqrt(ops.sub(1, ops.square(x)))),
    "Acos": lambda ops, g, x, y: ops.neg(ops.mul(g, ops.rsqrt(ops.sub(1, ops.square(x))))),
    "Asinh": lambda ops, g, x, y: ops.real_div(g, ops.cosh(y)),
    "Acosh": lambda ops, g, x, y: ops.real_div(g, ops.sinh(y)),
    "Atanh": lambda ops, g, x, y: ops.real_div(g, ops.sub(1, ops.square(x))),
    "Reciprocal": lambda ops, g, x, y: ops.neg(ops.mul(ops.mul(g, y), y)),
}


def _neg_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().neg(grad)]


def _sign_grad(op: Any, grad: Any) -> list[Any]:
    """0 for real x.  For complex z, sign(z) = z / |z| varies with the angle: the gradient
    is (grad - conj(grad) s^2) / (2 |z|) with s = sign(z), and 0 at z = 0 (PyTorch's sgn
    rule; TensorFlow passes back 0 for complex inputs too, which is not the derivative)."""
    ops = _ops()
    z = op.inputs[0]
    if not z.dtype.is_complex:
        return [ops.zeros_like(z)]
    s = op.outputs[0]
    r = ops.complex_abs(z, Tout=z.dtype.real_dtype)
    at_zero = ops.equal(r, 0)
    safe_r = ops.select_v2(at_zero, ops.ones_like(r), r)
    two_r = ops.complex(ops.add(safe_r, safe_r), ops.zeros_like(r), Tout=z.dtype)
    g = ops.real_div(ops.sub(grad, ops.mul(ops.conj(grad), ops.mul(s, s))), two_r)
    return [ops.select_v2(at_zero, ops.zeros_like(g), g)]


def _select_grad(op: Any, grad: Any) -> list[Any]:
    """Select (v1): grad and t have one shape, so the same (row) selection routes it."""
    ops = _ops()
    cond = op.inputs[0]
    zeros = ops.zeros_like(grad)
    return [None, ops.select(cond, grad, zeros), ops.select(cond, zeros, grad)]


def _select_v2_grad(op: Any, grad: Any) -> list[Any]:
    ops = _ops()
    cond, t, e = op.inputs
    zeros = ops.zeros_like(grad)
    return [None, unbroadcast(ops.select_v2(cond, grad, zeros), t), unbroadcast(ops.select_v2(cond, zeros, grad), e)]


def _clip_by_value_grad(op: Any, grad: Any) -> list[Any]:
    """To t where it lies inside [min, max]; to a bound where it clipped t."""
    ops = _ops()
    t, lo, hi = op.inputs
    below, above = ops.less(t, lo), ops.greater(t, hi)
    zeros = ops.zeros_like(grad)
    return [
        ops.select_v2(ops.logical_or(below, above), zeros, grad),
        unbroadcast(ops.select_v2(below, grad, zeros), lo),
        unbroadcast(ops.select_v2(above, grad, zeros), hi),
    ]


def _cast_grad(op: Any, grad: Any) -> list[Any]:
    src, dst = op.get_attr("SrcT"), op.get_attr("DstT")
    if (src.is_floating or src.is_complex) and (dst.is_floating or dst.is_complex):
        return [_ops().cast(grad, DstT=src)]
    return [None]


def _add_n_grad(op: Any, grad: Any) -> list[Any]:
    return [grad] * len(op.inputs)


# -- reductions


def reduction_axes(op: Any) -> tuple[int, ...]:
    """The sorted, distinct, non-negative axes a recorded reduction reduced.

    The axes input is host metadata (a small integer tensor), read back as
    TensorFlow's gradients read a constant ``reduction_indices``.
    """
    rank = len(op.inputs[0].shape)
    axes = np.asarray(op.inputs[1].numpy()).reshape(-1)
    return tuple(sorted({int(a) % rank for a in axes})) if rank else ()


def _int32(values: Any) -> np.ndarray:
    """A constant int32 vector (an empty one too, which a Python [] would not give)."""
    return np.asarray(values, dtype=np.int32).reshape(-1)


def _kept_shape(op: Any) -> tuple[int, ...]:
    axes = set(reduction_axes(op))
    return tuple([1 if i in axes else d for i, d in enumerate(op.inputs[0].shape)])


def _with_kept_dims(op: Any, t: Any) -> Any:
    """``t`` (shaped like the reduction's output) reshaped as if keep_dims were true."""
    if op.get_attr("keep_dims"):
        return t
    if None in tuple(op.inputs[0].shape):  # traced with unknown dimensions: a 1 inserted per reduced axis
        for axis in reduction_axes(op):
            t = _ops().expand_dims(t, constant(axis, t))
        return t
    return _ops().reshape(t, constant(_kept_shape(op), t))


def _sum_grad(op: Any, grad: Any) -> list[Any]:
    x = op.inputs[0]
    g = grad if not grad.shape else _with_kept_dims(op, grad)  # a scalar broadcasts as it is
    if None in tuple(x.shape):  # traced with unknown dimensions: x's shape when the graph runs
        return [_ops().broadcast_to(g, _ops().shape(x)), None]
    if tuple(g.shape) != tuple(x.shape):
        g = _ops().broadcast_to(g, constant(tuple(x.shape), g))
    return [g, None]


def _mean_grad(op: Any, grad: Any) -> list[Any]:
    # Divided before it is broadcast (the same values as TensorFlow's broadcast, then
    # divide, with the division on the reduced shape only).
    x, y = op.inputs[0], op.outputs[0]
    if None in tuple(x.shape):  # traced with unknown dimensions: the count from the sizes when the graph runs
        ops = _ops()
        one = constant(1, grad)
        count = ops.maximum(ops.floor_div(ops.size(x), ops.maximum(ops.size(y), one)), one)
        return _sum_grad(op, ops.real_div(grad, ops.cast(count, DstT=grad.dtype)))
    count = max(math.prod(x.shape) // max(math.prod(y.shape), 1), 1)
    return _sum_grad(op, _ops().real_div(grad, constant(count, grad, grad.dtype)))


def _min_max_reduction_grad(op: Any, grad: Any) -> list[Any]:
    """To the positions that hold the extreme value, split evenly among ties."""
    ops = _ops()
    x = op.inputs[0]
    y = _with_kept_dims(op, op.outputs[0])
    g = _with_kept_dims(op, grad)
    picked = ops.cast(ops.equal(y, x), DstT=grad.dtype)
    count = ops.sum(picked, _int32(reduction_axes(op)), keep_dims=True)
    return [ops.mul(ops.real_div(picked, count), g), None]


def _shifted_rows(m: Any, k: int, down: bool) -> Any:
    """Matrix ``m`` moved ``k`` rows down (or up), the rows left empty filled with ones."""
    ops = _ops()
    rows, cols = (int(d) for d in m.shape)
    if k >= rows:
        return ops.ones_like(m)
    kept = ops.slice(m, constant((0 if down else k, 0), m), constant((rows - k, cols), m))
    ones = ops.ones_like(ops.slice(m, constant((0, 0), m), constant((k, cols), m)))
    return ops.concat_v2([ones, kept] if down else [kept, ones], constant(0, m))


def _exclusive_cumprods(m: Any) -> tuple[Any, Any]:
    """For each row of matrix ``m``, the product of the rows before it and of the rows
    after it (TensorFlow's cumprod with exclusive=True, and with reverse=True): a
    doubling scan, log2(rows) multiplications of shifted copies."""
    ops = _ops()
    left, right = _shifted_rows(m, 1, True), _shifted_rows(m, 1, False)
    k = 1
    while k < int(m.shape[0]):
        left = ops.mul(left, _shifted_rows(left, k, True))
        right = ops.mul(right, _shifted_rows(right, k, False))
        k *= 2
    return left, right


def _prod_grad(op: Any, grad: Any) -> list[Any]:
    """TensorFlow's _ProdGrad: d prod / d x_i is the product of the elements before x_i
    times the product of those after it (exclusive cumulative products over the reduced
    axes), so zeros, infinities, NaN and signed zeros give what the products give."""
    ops = _ops()
    x = _conj(op.inputs[0])  # the product of the others has real coefficients: conj commutes
    shape = tuple(int(d) for d in x.shape)
    g = _with_kept_dims(op, grad)
    if tuple(g.shape) != shape:
        g = ops.broadcast_to(g, constant(shape, g))
    if math.prod(shape) == 0:
        return [ops.zeros_like(x), None]
    axes = reduction_axes(op)
    rest = tuple(i for i in range(len(shape)) if i not in axes)
    perm = axes + rest
    reduced = math.prod(shape[i] for i in axes)
    m = ops.reshape(ops.transpose(x, constant(perm, x)), constant((reduced, math.prod(shape) // reduced), x))
    left, right = _exclusive_cumprods(m)
    y = ops.reshape(ops.mul(left, right), constant(tuple(shape[i] for i in perm), x))
    return [ops.mul(g, ops.transpose(y, constant(tuple(int(i) for i in np.argsort(perm)), x))), None]


# -- linear algebra


def _mat_mul_grad(op: Any, grad: Any) -> list[Any]:
    (a, b), (need_a, need_b) = op.inputs, op.needs_input_grad
    return list(mat_mul_grads(_conj(a), _conj(b), grad, op.get_attr("transpose_a"), op.get_attr("transpose_b"), need_a, need_b))


def _batch_mat_mul_grad(op: Any, grad: Any) -> list[Any]:
    """TensorFlow's _BatchMatMulV2: as MatMul, then summed over broadcast batch dims."""
    bmm = _ops().batch_mat_mul
    x, y = op.inputs
    ax, ay = op.get_attr("adj_x"), op.get_attr("adj_y")
    if not ax and not ay:
        gx, gy = bmm(grad, y, adj_y=True, grad_x=True), bmm(x, grad, adj_x=True, grad_y=True)
    elif not ax and ay:
        gx, gy = bmm(grad, y, grad_x=True), bmm(grad, x, adj_x=True, grad_y=True)
    elif ax and not ay:
        gx, gy = bmm(y, grad, adj_y=True, grad_x=True), bmm(x, grad, grad_y=True)
    else:
        gx, gy = bmm(y, grad, adj_x=True, adj_y=True, grad_x=True), bmm(grad, x, adj_x=True, adj_y=True, grad_y=True)
    return [unbroadcast(gx, x), unbroadcast(gy, y)]


# -- complex numbers


def _conj_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().conj(grad)]


def _real_grad(op: Any, grad: Any) -> list[Any]:
    """Real(z) = a: dL/da + j dL/db = grad + 0j."""
    ops = _ops()
    return [ops.complex(grad, ops.zeros_like(grad), Tout=op.inputs[0].dtype)]


def _imag_grad(op: Any, grad: Any) -> list[Any]:
    """Imag(z) = b: 0 + j grad."""
    ops = _ops()
    return [ops.complex(ops.zeros_like(grad), grad, Tout=op.inputs[0].dtype)]


def _complex_grad(op: Any, grad: Any) -> list[Any]:
    """Complex(a, b) = a + bj: the real and imaginary parts of grad, unbroadcast."""
    ops = _ops()
    part = grad.dtype.real_dtype
    return _pair(ops.real(grad, Tout=part), ops.imag(grad, Tout=part), op)


def _complex_abs_grad(op: Any, grad: Any) -> list[Any]:
    """|z|: grad * z / |z|, and 0 at z = 0 (TensorFlow's div_no_nan)."""
    ops = _ops()
    z, r = op.inputs[0], op.outputs[0]
    safe_r = ops.select_v2(ops.equal(r, 0), ops.ones_like(r), r)
    scale = ops.real_div(grad, safe_r)
    return [ops.mul(ops.complex(scale, ops.zeros_like(scale), Tout=z.dtype), z)]


def _angle_grad(op: Any, grad: Any) -> list[Any]:
    """atan2(b, a): d/da = -b / |z|^2, d/db = a / |z|^2, so -grad / (b + aj)."""
    ops = _ops()
    z = op.inputs[0]
    part = z.dtype.real_dtype
    a, b = ops.real(z, Tout=part), ops.imag(z, Tout=part)
    return [ops.real_div(ops.complex(ops.neg(grad), ops.zeros_like(grad), Tout=z.dtype), ops.complex(b, a, Tout=z.dtype))]


_NOT_DIFFERENTIABLE = (
    *_BITWISE,
    "Floor",  # TensorFlow's gradients of Floor, Ceil and Round are None
    "Ceil",
    "Round",
    "IsNan",
    "IsInf",
    "IsFinite",
    "FloorDiv",
    "Equal",
    "NotEqual",
    "Less",
    "LessEqual",
    "Greater",
    "GreaterEqual",
    "LogicalAnd",
    "LogicalOr",
    "LogicalNot",
    "ArgMax",
    "ArgMin",
    "All",
    "Any",
)


def register_gradients() -> None:
    table: dict[str, Any] = {
        "Add": _add_grad,
        "Sub": _sub_grad,
        "Mul": _mul_grad,
        "RealDiv": _real_div_grad,
        "FloorMod": _floor_mod_grad,
        "Pow": _pow_grad,
        "Maximum": _min_max_grad("greater_equal"),
        "Minimum": _min_max_grad("less_equal"),
        "Neg": _neg_grad,
        "Sign": _sign_grad,
        "Select": _select_grad,
        "SelectV2": _select_v2_grad,
        "ClipByValue": _clip_by_value_grad,
        "Cast": _cast_grad,
        "AddN": _add_n_grad,
        "Sum": _sum_grad,
        "Mean": _mean_grad,
        "Max": _min_max_reduction_grad,
        "Min": _min_max_reduction_grad,
        "Prod": _prod_grad,
        "MatMul": _mat_mul_grad,
        "BatchMatMul": _batch_mat_mul_grad,
        "Conj": _conj_grad,
        "Real": _real_grad,
        "Imag": _imag_grad,
        "Complex": _complex_grad,
        "ComplexAbs": _complex_abs_grad,
        "Angle": _angle_grad,
        "Atan2": _atan2_grad,
        "SquaredDifference": _squared_difference_grad,
    }
    table.update({name: _unary_grad(rule) for name, rule in UNARY_GRAD_RULES.items()})
    for name, fn in table.items():
        register_gradient(name)(fn)
    for name in _NOT_DIFFERENTIABLE:
        not_differentiable(name)


__all__ = ["register_ops", "register_gradients", "reduction_axes"]


def select_condition_shape(cond: tuple[int, ...], t: tuple[int, ...], e: tuple[int, ...]) -> tuple[int, ...]:
    """Select (v1): the shape to view ``condition`` as so that it broadcasts against t
    the way TensorFlow's Select reads it (a vector picks rows), checked as TensorFlow
    does (select_op.cc); shared by every backend's kernel."""
    def bad(message: str) -> InvalidArgumentError:
        return InvalidArgumentError(f"op 'Select': {message}", op="Select")

    if tuple(t) != tuple(e):
        raise bad(f"'t' and 'e' must have the same shape, got {list(t)} and {list(e)} (SelectV2 broadcasts)")
    if len(cond) == 0:
        return ()
    if len(cond) == 1 and len(t) != 1:
        if len(t) == 0:
            raise bad(f"a vector 'condition' of shape {list(cond)} needs 't' of rank 1 or more, got a scalar")
        if t[0] != cond[0]:
            raise bad(f"a vector 'condition' picks rows: its size {cond[0]} must equal the first dimension "
                      f"of 't' {list(t)}")
        return (cond[0],) + (1,) * (len(t) - 1)
    if tuple(cond) != tuple(t):
        raise bad(f"'condition' must be a scalar, a vector of t's first dimension or have the shape of 't' "
                  f"{list(t)}, got {list(cond)} (SelectV2 broadcasts)")
    return tuple(cond)


#: Significand bits, the hidden one included (std::numeric_limits<T>::digits).
_SIGNIFICAND = {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}
#: (SrcT, DstT) pairs whose Cast honours Truncate=True in TensorFlow (cast_op.h, CAST_FUNCTORS).
_TRUNCATING = {
    ("float64", "float32"), ("complex128", "complex64"), ("float64", "float16"), ("float32", "float16"),
    ("complex128", "float16"), ("complex64", "float16"), ("float32", "bfloat16"),
}


def cast_truncation_bits(src: Any, dst: Any) -> int:
    """How many low bits of each (real or imaginary) part of the source Cast(Truncate=True)
    zeroes before converting, so that it rounds toward zero (TensorFlow's LSBZeroSetter,
    which leaves NaN alone); 0 for the pairs where TensorFlow ignores Truncate."""
    if (src.name, dst.name) not in _TRUNCATING:
        return 0
    part = src.real_dtype.name if src.is_complex else src.name
    out = dst.real_dtype.name if dst.is_complex else dst.name
    return _SIGNIFICAND[part] - _SIGNIFICAND[out]


def arg_axis(op: str, shape: tuple[int, ...], dimension: Any) -> int:
    """ArgMax/ArgMin's ``dimension`` (a host scalar) as a non-negative axis of
    ``shape``, checked as TensorFlow does; shared by every backend's kernel."""
    dim = np.asarray(dimension)
    if dim.ndim:
        raise InvalidArgumentError(f"op '{op}': dimension must be a scalar, got shape {list(dim.shape)}", op=op)
    axis, rank = int(dim), len(shape)
    if not -rank <= axis < rank:
        raise InvalidArgumentError(f"op '{op}': Expected dimension in the range [{-rank}, {rank}), but got {axis}", op=op)
    axis %= rank
    if shape[axis] == 0:
        raise InvalidArgumentError(f"op '{op}': Reduction axis {axis} is empty in shape {list(shape)}", op=op)
    return axis


def kernel_reduction_axes(op: str, rank: int, indices: Any) -> tuple[int, ...]:
    """The sorted non-negative axes a reduction's ``reduction_indices`` (a host array)
    names for an input of rank ``rank``, checked as TensorFlow's kernels do
    (ReductionHelper::Simplify): the indices are read flat, whatever their shape, each
    must lie in [-rank, rank), and naming one axis twice is an error.  Shared by every
    backend's reduction kernels."""
    axes: list[int] = []
    for a in np.asarray(indices).reshape(-1).tolist():
        if not -rank <= a < rank:
            raise InvalidArgumentError(
                f"op '{op}': Invalid reduction dimension {a} for input with {rank} dimension(s); "
                f"expected [{-rank}, {rank})",
                op=op,
            )
        if a % rank in axes:
            raise InvalidArgumentError(
                f"op '{op}': Invalid reduction arguments: Axes contains duplicate dimension: {a % rank}", op=op
            )
        axes.append(a % rank)
    return tuple(sorted(axes))

