"""Grayscale morphological dilation: specs, kernels, shape functions and gradients of
Dilation2D, Dilation2DBackpropInput and Dilation2DBackpropFilter, following
TensorFlow's ``nn_ops.cc`` and ``dilation_ops.cc``.

    output[b, y, x, c] = max over the taps (dy, dx) inside the input of
                         input[b, y * sh + dy * rh - top, x * sw + dx * rw - left, c] + filter[dy, dx, c]

The kernels are generic and run TensorFlow's scan itself: the running maximum starts at
the dtype's lowest value and a tap replaces it only when strictly greater, taps in
row-major order.  So NaN never wins (as in TensorFlow), ties go to the first tap, an
output whose taps all fall outside the input is the lowest value, and the backprop ops
send each output's gradient to the input element and filter tap that won, or, where none
won, to TensorFlow's defaults (the window's first in-bounds row and column of the input,
the filter's first tap).  Each tap is a strided slice of the padded input; the backprop
ops place each tap's share with StridedSliceGrad.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..errors import InvalidArgumentError, UnimplementedError
from ..gradients import not_differentiable, register_gradient
from ..kernels import register_kernel
from ..op_registry import register_op
from ..shapes import InferenceContext
from ..tensor import ops_module as _ops
from ._array_common import named_errors
from ._nn_common import window_output_size

_ATTRS = ("T: realnumbertype", "strides: list(int) >= 4", "rates: list(int) >= 4", "padding: {'SAME', 'VALID'}")


#: The dtypes of Dilation2D that the Add op does not take.
_NO_ADD = ("uint16", "uint32", "uint64")


def _plus(a: Any, b: Any) -> Any:
    """a + b of one shape, for every dtype of Dilation2D (AddN where Add lacks it)."""
    return _ops().add_n([a, b]) if a.dtype.name in _NO_ADD else _ops().add(a, b)


def _i64(values: Any) -> np.ndarray:
    return np.asarray(values, np.int64)


class _Geometry:
    """The windows of one call: sizes, padding, and each tap's slice of the padded input."""

    def __init__(self, op: str, input_shape: Sequence[Any], filter_shape: Sequence[Any], strides: Sequence[int],
                 rates: Sequence[int], padding: str) -> None:
        def bad(message: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"op {op!r}: {message}", op=op)

        if len(input_shape) != 4:
            raise bad(f"input must be 4-dimensional [batch, height, width, depth], got shape {list(input_shape)}")
        if len(filter_shape) != 3:
            raise bad(f"filter must be 3-dimensional [height, width, depth], got shape {list(filter_shape)}")
        for name, values in (("strides", strides), ("rates", rates)):
            if len(values) != 4:
                raise bad(f"attr '{name}' must have 4 values, got {list(values)}")
            if values[0] != 1 or values[3] != 1:
                raise UnimplementedError(f"op {op!r}: attr '{name}' must be 1 in the batch and depth dimensions, got "
                                         f"{list(values)}", op=op)
            if any(v < 1 for v in values):
                raise bad(f"attr '{name}' must be positive, got {list(values)}")
        self.batch, self.h, self.w, self.depth = (None if d is None else int(d) for d in input_shape)
        self.fh, self.fw, fdepth = (None if d is None else int(d) for d in filter_shape)
        if self.depth is not None and fdepth is not None and self.depth != fdepth:
            raise bad(f"input and filter must have the same depth, got {self.depth} and {fdepth}")
        self.sh, self.sw, self.rh, self.rw = int(strides[1]), int(strides[2]), int(rates[1]), int(rates[2])
        self.oh = self.ow = None
        self.top = self.bottom = self.left = self.right = 0
        if None not in (self.h, self.fh):
            try:
                self.oh, self.top, self.bottom = window_output_size(self.h, self.fh, self.rh, self.sh, padding)  # type: ignore[arg-type]
            except ValueError as e:
                raise bad(f"rows: {e}") from None
        if None not in (self.w, self.fw):
            try:
                self.ow, self.left, self.right = window_output_size(self.w, self.fw, self.rw, self.sw, padding)  # type: ignore[arg-type]
            except ValueError as e:
                raise bad(f"columns: {e}") from None

    def taps(self) -> list[tuple[int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
        """(dy, dx, begin, end, strides, valid) per tap: its strided slice of the padded input and
        a [1, oh, ow, 1] mask of the outputs whose tap lies inside the unpadded input."""
        assert None not in (self.oh, self.ow, self.h, self.w, self.fh, self.fw, self.batch, self.depth)
        oh, ow, h, w = int(self.oh), int(self.ow), int(self.h), int(self.w)  # type: ignore[arg-type]
        out = []
        rows, cols = np.arange(oh) * self.sh - self.top, np.arange(ow) * self.sw - self.left
        for dy in range(int(self.fh)):  # type: ignore[arg-type]
            for dx in range(int(self.fw)):  # type: ignore[arg-type]
                r, c = rows + dy * self.rh, cols + dx * self.rw
                valid = ((r >= 0) & (r < h))[:, None] & ((c >= 0) & (c < w))[None, :]
                begin = _i64([0, dy * self.rh, dx * self.rw, 0])
                end = _i64([int(self.batch), dy * self.rh + (oh - 1) * self.sh + 1,  # type: ignore[arg-type]
                            dx * self.rw + (ow - 1) * self.sw + 1, int(self.depth)])  # type: ignore[arg-type]
                out.append((dy, dx, begin, end, _i64([1, self.sh, self.sw, 1]), valid.reshape(1, oh, ow, 1)))
        return out

    def padded_shape(self) -> np.ndarray:
        return _i64([self.batch, int(self.h) + self.top + self.bottom,  # type: ignore[arg-type]
                     int(self.w) + self.left + self.right, self.depth])  # type: ignore[arg-type]


def _scan(input: Any, filter: Any, g: _Geometry) -> tuple[Any, list[Any]]:
    """TensorFlow's scan: the output, and each tap's mask of the outputs it won (strictly greater
    than every earlier tap, and than the dtype's lowest value)."""
    ops = _ops()
    lowest = np.asarray(input.dtype.min, input.dtype.np)
    shape = _i64([g.batch, g.oh, g.ow, g.depth])
    current = ops.fill(shape, lowest)
    padded = ops.pad(input, _i64([[0, 0], [g.top, g.bottom], [g.left, g.right], [0, 0]]))
    wins = []
    depth = g.depth
    assert depth is not None  # a kernel's geometry is concrete
    for dy, dx, begin, end, strides, valid in g.taps():
        tap = ops.reshape(ops.strided_slice(filter, _i64([dy, dx, 0]), _i64([dy + 1, dx + 1, depth]), _i64([1, 1, 1])),
                          _i64([depth]))
        window = ops.strided_slice(padded, begin, end, strides)
        if input.dtype.name in _NO_ADD:  # Add (TensorFlow's) has no uint16/32/64; AddN has, without broadcasting
            candidate = ops.add_n([window, ops.broadcast_to(tap, shape)])
        else:
            candidate = ops.add(window, tap)
        win = ops.logical_and(valid, ops.greater(candidate, current))
        current = ops.select_v2(win, candidate, current)
        wins.append(win)
    return current, wins


def _winners(wins: list[Any]) -> tuple[list[Any], Any]:
    """Each tap's mask of the outputs it finally won (the last of its wins), and the mask of
    the outputs no tap won."""
    ops = _ops()
    later: Any = None
    final: list[Any] = [None] * len(wins)
    for t in range(len(wins) - 1, -1, -1):
        final[t] = wins[t] if later is None else ops.logical_and(wins[t], ops.logical_not(later))
        later = wins[t] if later is None else ops.logical_or(later, wins[t])
    return final, ops.logical_not(later)


def _geometry(op: str, input: Any, filter: Any, strides: Sequence[int], rates: Sequence[int], padding: str) -> _Geometry:
    return _Geometry(op, [int(d) for d in input.shape], [int(d) for d in filter.shape], strides, rates, padding)


def _dilation2d(input: Any, filter: Any, strides: Sequence[int], rates: Sequence[int], padding: str) -> Any:
    g = _geometry("Dilation2D", input, filter, strides, rates, padding)
    if 0 in (g.batch, g.oh, g.ow, g.depth) or 0 in (g.fh, g.fw):
        return _ops().fill(_i64([g.batch, g.oh, g.ow, g.depth]), np.zeros((), input.dtype.np))
    return _scan(input, filter, g)[0]


def _check_backprop(op: str, g: _Geometry, out_backprop: Any) -> None:
    want = [g.batch, g.oh, g.ow, g.depth]
    if [int(d) for d in out_backprop.shape] != want:
        raise InvalidArgumentError(f"op {op!r}: out_backprop must have the output's shape {want}, got "
                                   f"{[int(d) for d in out_backprop.shape]}", op=op)


def _shares(op: str, input: Any, filter: Any, out_backprop: Any, strides: Sequence[int], rates: Sequence[int],
            padding: str) -> tuple[_Geometry, list[Any], Any, Any] | None:
    """Both backprop ops' first half: the geometry, each tap's share of out_backprop (where it won,
    zeros elsewhere), the share no tap won and its mask; None when the call holds no element to pass on."""
    g = _geometry(op, input, filter, strides, rates, padding)
    _check_backprop(op, g, out_backprop)
    if 0 in (g.batch, g.oh, g.ow, g.depth, g.h, g.w, g.fh, g.fw):
        return None
    ops, zero = _ops(), np.zeros((), input.dtype.np)
    final, none_won = _winners(_scan(input, filter, g)[1])
    shares = [ops.select_v2(won, out_backprop, zero) for won in final]
    return g, shares, ops.select_v2(none_won, out_backprop, zero), none_won


def _backprop_input(input: Any, filter: Any, out_backprop: Any, strides: Sequence[int], rates: Sequence[int],
                    padding: str) -> Any:
    ops, shared = _ops(), _shares("Dilation2DBackpropInput", input, filter, out_backprop, strides, rates, padding)
    if shared is None:
        return ops.zeros_like(input)
    g, shares, rest, none_won = shared
    padded = g.padded_shape()
    total: Any = None
    for (_, _, begin, end, step, _), share in zip(g.taps(), shares):
        placed = ops.strided_slice_grad(padded, begin, end, step, share)
        total = placed if total is None else _plus(total, placed)
    grad = ops.slice(total, _i64([0, g.top, g.left, 0]), _i64([g.batch, g.h, g.w, g.depth]))
    if bool(np.asarray(ops.any(none_won, _i64([0, 1, 2, 3])).numpy())):
        # TensorFlow's default where no tap won: the window's first row and column inside the input
        assert g.h is not None and g.w is not None  # a kernel's geometry is concrete
        rows = np.maximum(np.arange(int(g.oh)) * g.sh - g.top, 0)  # type: ignore[arg-type]
        cols = np.maximum(np.arange(int(g.ow)) * g.sw - g.left, 0)  # type: ignore[arg-type]
        by_row = ops.unsorted_segment_sum(ops.transpose(rest, _i64([1, 0, 2, 3])), rows, np.int64(g.h))
        by_col = ops.unsorted_segment_sum(ops.transpose(by_row, _i64([2, 1, 0, 3])), cols, np.int64(g.w))
        grad = _plus(grad, ops.transpose(by_col, _i64([1, 2, 0, 3])))
    return grad


def _backprop_filter(input: Any, filter: Any, out_backprop: Any, strides: Sequence[int], rates: Sequence[int],
                     padding: str) -> Any:
    ops, shared = _ops(), _shares("Dilation2DBackpropFilter", input, filter, out_backprop, strides, rates, padding)
    if shared is None:
        return ops.zeros_like(filter)
    g, shares, rest, _ = shared
    axes = _i64([0, 1, 2])
    sums = [ops.sum(share, axes) for share in shares]
    sums[0] = _plus(sums[0], ops.sum(rest, axes))  # TensorFlow's default tap
    return ops.reshape(ops.pack(sums), _i64([g.fh, g.fw, g.depth]))


def _dilation_shape(c: InferenceContext) -> None:
    data, kernel = c.with_rank(c.input(0), 4), c.with_rank(c.input(1), 3)
    c.merge(c.dim(data, 3), c.dim(kernel, 2))
    try:
        g = _Geometry("Dilation2D", [c.value(c.dim(data, i)) for i in range(4)],
                      [c.value(c.dim(kernel, i)) for i in range(3)], c.get_attr("strides"), c.get_attr("rates"),
                      c.get_attr("padding"))
    except (InvalidArgumentError, UnimplementedError) as e:
        raise c.error(str(e).removeprefix("op 'Dilation2D': ")) from None
    c.set_output(0, c.make_shape([c.dim(data, 0), c.unknown_dim() if g.oh is None else g.oh,
                                  c.unknown_dim() if g.ow is None else g.ow, c.dim(data, 3)]))


def _backprop_shape(which: int) -> Any:
    def shape_fn(c: InferenceContext) -> None:
        c.with_rank(c.input(0), 4)
        c.with_rank(c.input(1), 3)
        c.with_rank(c.input(2), 4)
        c.set_output(0, c.input(which))

    return shape_fn


def register_generic_kernels() -> None:
    register_kernel("Dilation2D", backend="*")(named_errors("Dilation2D")(_dilation2d))
    register_kernel("Dilation2DBackpropInput", backend="*")(named_errors("Dilation2DBackpropInput")(_backprop_input))
    register_kernel("Dilation2DBackpropFilter", backend="*")(named_errors("Dilation2DBackpropFilter")(_backprop_filter))


def register_ops() -> None:
    builder = register_op("Dilation2D").input("input: T").input("filter: T").output("output: T")
    for attr in _ATTRS:
        builder = builder.attr(attr)
    builder.set_shape_fn(_dilation_shape).doc(
        "Grayscale morphological dilation of a 4-D NHWC input by a 3-D filter [height, width, depth]: each "
        "output is the maximum, over the filter's taps inside the input, of input + filter.\n\n"
        "strides: [1, stride_rows, stride_cols, 1].\nrates: [1, rate_rows, rate_cols, 1], the taps' spacing."
    )
    for name, which, out in (("Dilation2DBackpropInput", 0, "in_backprop"),
                             ("Dilation2DBackpropFilter", 1, "filter_backprop")):
        builder = register_op(name).input("input: T").input("filter: T").input("out_backprop: T").output(f"{out}: T")
        for attr in _ATTRS:
            builder = builder.attr(attr)
        builder.set_shape_fn(_backprop_shape(which)).doc(
            f"The gradient of Dilation2D with respect to its {'input' if which == 0 else 'filter'}: each output's "
            "gradient goes to the input element and filter tap that won its maximum."
        )


def _dilation_grad(op: Any, grad: Any) -> list[Any]:
    attrs = {name: op.get_attr(name) for name in ("strides", "rates", "padding")}
    ops = _ops()
    x, f = op.inputs
    return [ops.dilation2d_backprop_input(x, f, grad, **attrs), ops.dilation2d_backprop_filter(x, f, grad, **attrs)]


def register_gradients() -> None:
    register_gradient("Dilation2D")(_dilation_grad)
    for name in ("Dilation2DBackpropInput", "Dilation2DBackpropFilter"):
        not_differentiable(name)  # TensorFlow registers no gradient for them either
