"""Specs, shape functions and gradients of ReverseV2, MatrixBandPart, Cumsum, Cumprod and
LinSpace, following TensorFlow's ``array_ops.cc``, ``math_ops.cc`` and their gradients
(``array_grad.py``, ``math_grad.py``); also the checks every backend's kernels share
(``reverse_axes``, ``band``, ``scan_axis``, ``linspace_count``).

Part of the array ops (``opkernel.ops.array_ops`` registers them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import not_differentiable, register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext, output_size_from
from ..tensor import ops_module as _ops
from ._array_common import _INDEX, _scalar, _values

__all__ = ["band", "band_mask", "linspace_count", "linspace_values", "mirror_map", "mirror_pads", "mirror_source",
           "register_gradients", "register_ops", "reverse_axes", "scan_axis"]

_SCAN_TYPES = ("{float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, "
               "quint16, uint16, complex128, half, uint32, uint64}")


# ---------------------------------------------------------------- the checks kernels share


def _fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


def reverse_axes(axis: Any, rank: int) -> tuple[int, ...]:
    """ReverseV2's axes made non-negative, after TensorFlow's checks (a vector, each in
    [-rank, rank), none twice)."""
    a = np.asarray(axis)
    if a.ndim != 1:
        raise _fail("ReverseV2", f"'axis' must be 1-D, got shape {list(a.shape)}")
    out: list[int] = []
    for v in (int(x) for x in a):
        if not -rank <= v < rank:
            raise _fail("ReverseV2", f"axis {v} is out of range for a tensor of rank {rank}; expected a value in "
                                     f"[{-rank}, {rank})")
        v %= rank
        if v in out:
            raise _fail("ReverseV2", f"axis {v} specified more than once")
        out.append(v)
    return tuple(out)


def band(shape: tuple[int, ...], num_lower: Any, num_upper: Any) -> tuple[int, int]:
    """MatrixBandPart's bounds after TensorFlow's checks: the input has rank >= 2, each
    bound is a scalar no greater than the matrix's rows (lower) or columns (upper);
    negative means the whole triangle."""
    op = "MatrixBandPart"
    if len(shape) < 2:
        raise _fail(op, f"input must be at least 2-dim, got shape {list(shape)}")
    lo, hi = np.asarray(num_lower), np.asarray(num_upper)
    if lo.shape != () or hi.shape != ():
        raise _fail(op, f"num_lower and num_upper must be scalars, got shapes {list(lo.shape)} and {list(hi.shape)}")
    m, n = shape[-2], shape[-1]
    if int(lo) > m:
        raise _fail(op, f"num_lower must be negative or less or equal to number of rows ({m}), got {int(lo)}")
    if int(hi) > n:
        raise _fail(op, f"num_upper must be negative or less or equal to number of columns ({n}), got {int(hi)}")
    return int(lo), int(hi)


def band_mask(m: int, n: int, lower: int, upper: int) -> np.ndarray:
    """Where MatrixBandPart keeps [m, n]: (lower < 0 or i - j <= lower) and (upper < 0 or j - i <= upper)."""
    i = np.arange(m)[:, None]
    j = np.arange(n)[None, :]
    return ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))


def scan_axis(op: str, axis: Any, rank: int) -> int:
    a = np.asarray(axis)
    if a.shape != ():
        raise _fail(op, f"axis must be a scalar, got shape {list(a.shape)}")
    v = int(a)
    if not -rank <= v < rank:
        raise _fail(op, f"axis {v} is out of range for a tensor of rank {rank}; expected a value in [{-rank}, {rank})")
    return v % rank


def linspace_count(start: Any, stop: Any, num: Any) -> int:
    op = "LinSpace"
    for name, v in (("start", start), ("stop", stop), ("num", num)):
        if np.ndim(v) != 0:
            raise _fail(op, f"{name} must be a scalar, got shape {list(np.shape(v))}")
    n = int(np.asarray(num))
    if n <= 0:
        raise _fail(op, f"Requires num > 0: {n}")
    return n


def linspace_values(start: Any, stop: Any, n: int, dtype: np.dtype[Any]) -> np.ndarray:
    """TensorFlow's LinSpace in ``dtype``'s arithmetic (each operation rounded to it):
    start + step * i with step = (stop - start) / (n - 1), the last element exactly stop."""
    t = dtype.type
    s, e = t(np.asarray(start).reshape(())[()]), t(np.asarray(stop).reshape(())[()])
    if n == 1:
        return np.array([s], dtype)
    with np.errstate(all="ignore"):
        step = t((e - s) / t(n - 1))
        out = (s + step * np.arange(n).astype(dtype)).astype(dtype)
    out[-1] = e
    return out  # type: ignore[no-any-return]


def mirror_pads(op: str, shape: tuple[int, ...], paddings: Any, mode: str) -> list[tuple[int, int]]:
    """MirrorPad's (before, after) per dimension after TensorFlow's checks: REFLECT pads by
    less than the dimension's size (the edge is not repeated), SYMMETRIC by at most it."""
    pads = np.asarray(paddings)
    if pads.shape != (len(shape), 2):
        raise _fail(op, f"paddings must be a matrix with shape [{len(shape)}, 2] for an input of rank {len(shape)}, "
                        f"got {list(pads.shape)}")
    out: list[tuple[int, int]] = []
    for d, (b, a) in enumerate(pads.tolist()):
        n = shape[d]
        if b < 0 or a < 0:
            raise _fail(op, f"paddings must be non-negative, got {pads.tolist()}")
        if mode == "REFLECT" and max(b, a) >= max(n, 1) and (b or a):
            raise _fail(op, f"paddings must be less than the dimension size: {b}, {a} not less than {n}")
        if mode == "SYMMETRIC" and max(b, a) > n:
            raise _fail(op, f"paddings must be no greater than the dimension size: {b}, {a} greater than {n}")
        out.append((int(b), int(a)))
    return out


def mirror_source(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of a mirror-padded dimension of size ``n``, the input index it copies."""
    q = np.arange(-before, n + after, dtype=np.int64)
    reflect = mode == "REFLECT"
    q = np.where(q < 0, -q - (0 if reflect else 1), q)
    return np.where(q >= n, 2 * n - (2 if reflect else 1) - q, q)


def mirror_map(shape: tuple[int, ...], pads: list[tuple[int, int]], mode: str) -> np.ndarray:
    """The flat input position each element of the padded output copies (int64, C order)."""
    strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]
    flat = np.zeros((), np.int64)
    for d, (n, (b, a)) in enumerate(zip(shape, pads)):
        src = mirror_source(n, b, a, mode) * strides[d]
        flat = flat[..., None] + src
    return flat.reshape(-1)


# ---------------------------------------------------------------- shape functions


def _reverse_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(1), 1)
    axes = _values(c, 1)
    x = c.input(0)
    if axes is not None and x.dims is not None:
        rank = len(x.dims)
        seen = set()
        for v in axes:
            if not -rank <= v < rank:
                raise c.error(f"axis {v} is out of range for a tensor of rank {rank}")
            if v % rank in seen:
                raise c.error(f"axis {v % rank} specified more than once")
            seen.add(v % rank)
    c.set_output(0, x)


def _band_shape(c: InferenceContext) -> None:
    c.with_rank_at_least(c.input(0), 2)
    _scalar(c, 1)
    _scalar(c, 2)
    c.set_output(0, c.input(0))


def _scan_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(1), 0)
    c.set_output(0, c.input(0))


def _mirror_pad_shape(c: InferenceContext) -> None:
    paddings = c.with_rank(c.input(1), 2)
    c.merge(c.dim(paddings, 1), c.make_dim(2))
    data = c.input(0)
    pads = c.input_tensor(1)
    if pads is None or data.dims is None:
        c.set_output(0, c.unknown_shape() if data.dims is None else c.unknown_shape_of_rank(len(data.dims)))
        return
    p = np.asarray(pads).reshape(-1, 2)
    if len(p) != len(data.dims):
        raise c.error(f"paddings must have {len(data.dims)} rows for an input of rank {len(data.dims)}, got {len(p)}")
    c.set_output(0, c.make_shape([c.add(c.dim(data, i), int(lo + hi)) for i, (lo, hi) in enumerate(p)]))


def _mirror_pad_grad_shape(c: InferenceContext) -> None:
    paddings = c.with_rank(c.input(1), 2)
    c.merge(c.dim(paddings, 1), c.make_dim(2))
    data = c.input(0)
    pads = c.input_tensor(1)
    if pads is None or data.dims is None:
        c.set_output(0, c.unknown_shape() if data.dims is None else c.unknown_shape_of_rank(len(data.dims)))
        return
    p = np.asarray(pads).reshape(-1, 2)
    dims = [d.value for d in data.dims]
    c.set_output(0, c.make_shape([None if d is None else d - int(lo + hi) for d, (lo, hi) in zip(dims, p)]))


@output_size_from("num")
def _linspace_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 0)
    c.with_rank(c.input(1), 0)
    n = _scalar(c, 2)
    if n is not None and n <= 0:
        raise c.error(f"Requires num > 0: {n}")
    c.set_output(0, c.vector(n))


# ---------------------------------------------------------------- specs


def register_ops() -> None:
    register_op("ReverseV2").input("tensor: T").input("axis: Tidx").output("output: T").attr(
        "Tidx: {int32, int64} = DT_INT32"
    ).attr(
        "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, half, float, double, complex64, "
        "complex128, string}"
    ).set_shape_fn(_reverse_shape).doc("Reverses the tensor along the dimensions in axis (negative counts from the end).")
    register_op("MatrixBandPart").input("input: T").input("num_lower: Tindex").input("num_upper: Tindex").output(
        "band: T"
    ).attr("T: type").attr("Tindex: {int32, int64} = DT_INT64").set_shape_fn(_band_shape).doc(
        "Keeps the central band of each innermost matrix, zeros elsewhere: element [m, n] stays where "
        "(num_lower < 0 or m - n <= num_lower) and (num_upper < 0 or n - m <= num_upper)."
    )
    for name, what in (("Cumsum", "sum"), ("Cumprod", "product")):
        register_op(name).input("x: T").input("axis: Tidx").output("out: T").attr("exclusive: bool = false").attr(
            "reverse: bool = false"
        ).attr(f"T: {_SCAN_TYPES}").attr(f"Tidx: {_INDEX}").set_shape_fn(_scan_shape).doc(
            f"The cumulative {what} of x along axis; exclusive leaves each element out of its own "
            f"{what}, reverse runs from the end."
        )
    for name, doc in (("MirrorPad", "Pads with the input's mirror image: REFLECT leaves the edge out (pads < the "
                                    "dimension's size), SYMMETRIC repeats it (pads <= the size)."),
                      ("MirrorPadGrad", "MirrorPad's gradient: the padded tensor's mirrored parts folded back (summed) "
                                        "onto the input's positions.")):
        register_op(name).input("input: T").input("paddings: Tpaddings").output("output: T").attr("T: type").attr(
            f"Tpaddings: {_INDEX}"
        ).attr("mode: {'REFLECT', 'SYMMETRIC'}").set_shape_fn(
            _mirror_pad_shape if name == "MirrorPad" else _mirror_pad_grad_shape
        ).doc(doc)
    register_op("LinSpace").input("start: T").input("stop: T").input("num: Tidx").output("output: T").attr(
        "T: {float, double}"
    ).attr(f"Tidx: {_INDEX}").set_shape_fn(_linspace_shape).doc(
        "num evenly spaced values from start to stop, both included: start + i * (stop - start) / (num - 1), "
        "the last exactly stop."
    )


# ---------------------------------------------------------------- gradients


def _reverse_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().reverse_v2(grad, op.inputs[1]), None]


def _band_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().matrix_band_part(grad, op.inputs[1], op.inputs[2]), None, None]


def _cumsum_grad(op: Any, grad: Any) -> list[Any]:
    """The cumulative sum of the gradient the other way (TensorFlow's _CumsumGrad)."""
    return [_ops().cumsum(grad, op.inputs[1], exclusive=op.get_attr("exclusive"),
                          reverse=not op.get_attr("reverse")), None]


def _cumprod_grad(op: Any, grad: Any) -> list[Any]:
    """TensorFlow's _CumprodGrad: cumsum(prod * grad, the other way) / x (undefined at 0)."""
    ops = _ops()
    x, axis = op.inputs
    exclusive, reverse = op.get_attr("exclusive"), op.get_attr("reverse")
    prod = ops.cumprod(x, axis, exclusive=exclusive, reverse=reverse)
    out = ops.cumsum(ops.mul(prod, grad), axis, exclusive=exclusive, reverse=not reverse)
    return [ops.real_div(out, x), None]


def _mirror_pad_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().mirror_pad_grad(grad, op.inputs[1], mode=op.get_attr("mode")), None]


def _mirror_pad_grad_grad(op: Any, grad: Any) -> list[Any]:
    return [_ops().mirror_pad(grad, op.inputs[1], mode=op.get_attr("mode")), None]


def register_gradients() -> None:
    register_gradient("MirrorPad")(_mirror_pad_grad)
    register_gradient("MirrorPadGrad")(_mirror_pad_grad_grad)
    register_gradient("ReverseV2")(_reverse_grad)
    register_gradient("MatrixBandPart")(_band_grad)
    register_gradient("Cumsum")(_cumsum_grad)
    register_gradient("Cumprod")(_cumprod_grad)
    not_differentiable("LinSpace")
