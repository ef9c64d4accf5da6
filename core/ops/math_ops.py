"""Specs, shape functions and gradients of the arithmetic and linear-algebra ops."""

from __future__ import annotations

from .. import shape_fns
from ..gradients import not_differentiable
from ..op_registry import register_op

_BINARY_TYPES = "{bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, complex64, complex128}"
_NEG_TYPES = "{bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"
_MATMUL_TYPES = "{bfloat16, half, float, double, int32, int64, complex64, complex128}"


def _binary(name: str, types: str, doc: str) -> None:
    register_op(name).input("x: T").input("y: T").output("z: T").attr(f"T: {types}").set_shape_fn(
        shape_fns.broadcast_binary_op_shape
    ).doc(doc)


def register_ops() -> None:
    _binary(
        "Add",
        "{bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, complex128, string}",
        "Returns x + y element-wise, with numpy broadcasting.",
    )
    _binary("Sub", _BINARY_TYPES, "Returns x - y element-wise, with numpy broadcasting.")
    _binary("Mul", _BINARY_TYPES, "Returns x * y element-wise, with numpy broadcasting.")
    _binary(
        "RealDiv",
        _BINARY_TYPES,
        "Returns x / y element-wise for real types (integer division truncates toward zero).",
    )
    register_op("Neg").input("x: T").output("y: T").attr(f"T: {_NEG_TYPES}").set_shape_fn(
        shape_fns.unchanged_shape
    ).doc("Computes numerical negative value element-wise.")
    register_op("MatMul").input("a: T").input("b: T").output("product: T").attr("transpose_a: bool = false").attr(
        "transpose_b: bool = false"
    ).attr(f"T: {_MATMUL_TYPES}").set_shape_fn(shape_fns.matmul_shape).doc(
        "Multiplies matrix a by matrix b, producing a * b.\n\n"
        "transpose_a: If true, a is transposed before multiplication.\n"
        "transpose_b: If true, b is transposed before multiplication."
    )
    register_op("AddN").input("inputs: N * T").output("sum: T").attr("N: int >= 1").attr("T: numbertype").set_shape_fn(
        shape_fns.merge_all_inputs
    ).doc("Adds all input tensors element-wise.")
    register_op("Cast").input("x: SrcT").output("y: DstT").attr("SrcT: type").attr("DstT: type").attr(
        "Truncate: bool = false"
    ).set_shape_fn(shape_fns.unchanged_shape).doc("Casts x to DstT.")


def register_gradients() -> None:
    """Gradient functions arrive with autodiff; nothing here is non-differentiable."""


__all__ = ["register_ops", "register_gradients", "not_differentiable"]
