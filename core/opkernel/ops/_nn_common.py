"""What the neural-network op modules share: attr specs, the window arithmetic,
the shape-function helpers of 4-D layouts and the host-side checks of the kernels.

The window arithmetic (``window_output_size``, ``spatial_attr``,
``explicit_padding``) is public so that backends compute exactly the geometry
the shape functions promise; backends and plugins import it, and the checks,
from ``opkernel.ops.nn_ops``, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from ..shapes import Dimension, InferenceContext, TensorShape
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import constant

_FLOATS = "{half, bfloat16, float, double}"
_PADDING = "padding: {'SAME', 'VALID'}"
_PADDING_EXPLICIT = "padding: {'SAME', 'VALID', 'EXPLICIT'}"
_EXPLICIT_PADDINGS = "explicit_paddings: list(int) = []"
_DATA_FORMAT = "data_format: {'NHWC', 'NCHW'} = 'NHWC'"


# ------------------------------------------------------------ window geometry


def window_output_size(
    input_size: int, filter_size: int, dilation: int, stride: int, padding: str, pads: tuple[int, int] = (0, 0)
) -> tuple[int, int, int]:
    """TensorFlow's ``GetWindowedOutputSizeVerbose``: ``(output size, padding
    before, padding after)`` of one spatial dimension.

    ``SAME``: ``out = ceil(in / stride)``, padding total
    ``max((out - 1) * stride + effective_filter - in, 0)``, the smaller half
    before.  ``VALID``: no padding.  ``EXPLICIT``: ``pads``.  Raises ValueError
    for non-positive strides/dilations/filter size or a negative output size.
    """
    if stride < 1:
        raise ValueError(f"strides must be > 0, got {stride}")
    if dilation < 1:
        raise ValueError(f"dilations must be > 0, got {dilation}")
    if filter_size < 1:  # an empty window would give an output made of nothing (TensorFlow refuses it too)
        raise ValueError(f"the filter's spatial size must be > 0, got {filter_size}")
    effective = (filter_size - 1) * dilation + 1
    if padding == "VALID":
        before = after = 0
        out = _c_div(input_size - effective + stride, stride)
    elif padding == "SAME":
        out = (input_size + stride - 1) // stride
        total = max((out - 1) * stride + effective - input_size, 0)
        before, after = total // 2, total - total // 2
    elif padding == "EXPLICIT":
        before, after = pads
        out = _c_div(input_size + before + after - effective + stride, stride)
    else:
        raise ValueError(f"padding must be 'SAME', 'VALID' or 'EXPLICIT', got {padding!r}")
    if out < 0:
        raise ValueError(
            f"computed output size would be negative: {out} [input size {input_size}, "
            f"effective filter size {effective}, stride {stride}, padding {before}+{after}]"
        )
    return out, before, after


def _c_div(a: int, b: int) -> int:
    """a / b rounded toward zero, as C's integer division in TensorFlow's GetWindowedOutputSize:
    a window that overhangs the input by less than a stride gives an empty output, not an error."""
    q = abs(a) // b
    return q if a >= 0 else -q


def spatial_attr(values: Sequence[int], data_format: str, name: str) -> tuple[int, int]:
    """The (height, width) entries of a 4-element ``strides``/``ksize``/``dilations``
    attr laid out as ``data_format``; every entry must be positive and the batch
    and depth entries 1.  Raises ValueError."""
    if len(values) != 4:
        raise ValueError(f"attr '{name}' must specify 4 dimensions, got {list(values)}")
    if any(v < 1 for v in values):
        raise ValueError(f"attr '{name}' must be positive, got {list(values)}")
    h, w = (1, 2) if data_format == "NHWC" else (2, 3)
    c = 3 if data_format == "NHWC" else 1
    if values[0] != 1 or values[c] != 1:
        raise ValueError(
            f"attr '{name}' must be 1 in the batch and depth dimensions ({data_format} layout), got {list(values)}"
        )
    return int(values[h]), int(values[w])


def explicit_padding(
    padding: str, explicit_paddings: Sequence[int], data_format: str, pool_window: tuple[int, int] | None = None
) -> tuple[tuple[int, int], tuple[int, int]]:
    """((top, bottom), (left, right)) from ``explicit_paddings`` (pairs per
    dimension of ``data_format``) when ``padding`` is ``EXPLICIT``; zeros
    otherwise.  Raises ValueError as TensorFlow's ``CheckValidPadding`` does and,
    for a pool (``pool_window``: its (height, width)), as its pools do for padding
    as wide as the window (pooling_ops_common.cc): so no window pools padding alone."""
    if padding != "EXPLICIT":
        if len(explicit_paddings):
            raise ValueError(
                f"attr 'explicit_paddings' must be empty unless padding is 'EXPLICIT', got {list(explicit_paddings)}"
            )
        return (0, 0), (0, 0)
    if len(explicit_paddings) != 8:
        raise ValueError(
            f"attr 'explicit_paddings' must have 8 values (a pair per dimension) when padding is 'EXPLICIT', "
            f"got {list(explicit_paddings)}"
        )
    if any(p < 0 for p in explicit_paddings):
        raise ValueError(f"attr 'explicit_paddings' must be non-negative, got {list(explicit_paddings)}")
    pairs = [tuple(explicit_paddings[i : i + 2]) for i in range(0, 8, 2)]
    h, w, c = (1, 2, 3) if data_format == "NHWC" else (2, 3, 1)
    if pairs[0] != (0, 0) or pairs[c] != (0, 0):
        raise ValueError(f"attr 'explicit_paddings' must not pad the batch or depth dimension, got {list(explicit_paddings)}")
    ph, pw = (int(pairs[h][0]), int(pairs[h][1])), (int(pairs[w][0]), int(pairs[w][1]))
    if pool_window is not None:
        kh, kw = pool_window
        for side, pad, k in (("top", ph[0], kh), ("bottom", ph[1], kh), ("left", pw[0], kw), ("right", pw[1], kw)):
            if pad >= k:
                raise ValueError(f"{side} padding {pad} must be smaller than the window size {k}")
    return ph, pw



# ------------------------------------------------------------ shape-function helpers


def _layout(fmt: str) -> tuple[int, int, int, int]:
    """Axes (batch, height, width, depth) of a 4-D tensor in ``fmt``."""
    return (0, 1, 2, 3) if fmt == "NHWC" else (0, 2, 3, 1)


def _make_4d(c: InferenceContext, fmt: str, n: Dimension, h: Dimension, w: Dimension, d: Dimension) -> TensorShape:
    return c.make_shape([n, h, w, d] if fmt == "NHWC" else [n, d, h, w])


def _checked(c: InferenceContext, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except ValueError as e:
        raise c.error(str(e)) from None


def _windowed_dim(
    c: InferenceContext, size: Dimension, k: Dimension | int, dilation: int, stride: int, padding: str, pads: tuple[int, int]
) -> Dimension:
    in_size, k_size = c.value(size), c.value(k)
    if in_size is None or k_size is None:
        _checked(c, window_output_size, 1, 1, dilation, stride, padding, pads)  # still validate the attrs
        return c.unknown_dim()
    return c.make_dim(_checked(c, window_output_size, in_size, k_size, dilation, stride, padding, pads)[0])


def _shape_from_sizes(c: InferenceContext, i: int) -> TensorShape:
    return c.with_rank(c.make_shape_from_shape_tensor(i), 4)


# ------------------------------------------------------------ gradient helpers


def _sizes(t: Tensor) -> Tensor:
    """``t``'s shape as an int32 vector: a constant, or a Shape op for a tensor of
    unknown dimensions (a gradient traced by ok.function under an unknown batch)."""
    shape = tuple(t.shape)
    return _ops().shape(t) if None in shape else constant(shape, t)


# ------------------------------------------------------------ host-side checks
# Host-side argument checks that every backend's convolution and pooling kernels share.


def _bad(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op '{op}': {message}", op=op)


def check_rank4(op: str, **arrays: Any) -> None:
    """Every named array is 4-D (NHWC or NCHW data, HWIO filters)."""
    for name, a in arrays.items():
        if len(a.shape) != 4:
            raise _bad(op, f"input '{name}' must be 4-D, got shape {list(a.shape)}")


def check_sizes(op: str, name: str, sizes: Any, allowed: tuple[int, ...] = (4,)) -> list[int]:
    """A host-memory size vector (``input_sizes``, ``filter_sizes``...) as ints."""
    values = [int(v) for v in np.asarray(sizes).reshape(-1)]
    if np.asarray(sizes).ndim != 1 or len(values) not in allowed or any(v < 0 for v in values):
        raise _bad(op, f"input '{name}' must be a vector of {' or '.join(map(str, allowed))} sizes >= 0, got {values}")
    return values


def check_out_shape(op: str, name: str, got: Sequence[int], want: Sequence[int], data_format: str) -> None:
    """A gradient input has the shape the forward op's output had."""
    if tuple(got) != tuple(want):
        raise _bad(op, f"input '{name}' must have shape {list(want)} (NHWC order; data_format {data_format}), got {list(got)}")


def check_argmax_type(op: str, targmax: Any, x_shape: Sequence[int], include_batch: bool) -> None:
    """MaxPoolWithArgmax's int32 indices must reach every element they may point at."""
    n, h, w, c = (int(d) for d in x_shape)
    limit = (n if include_batch else 1) * h * w * c
    if targmax.name == "int32" and limit > np.iinfo(np.int32).max:
        raise _bad(op, f"an input of {limit} elements needs Targmax int64: its indices do not fit int32")
