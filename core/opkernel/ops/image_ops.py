"""Specs, shape functions and gradients of the image resizes: ResizeBilinear,
ResizeNearestNeighbor and their gradient ops, following TensorFlow's ``image_ops.cc``,
``image_resizer_state.h`` and ``image_grad.py``; also the host-side geometry every
backend's kernels share (``resize_size``, ``resize_grad_sizes``, ``bilinear_table``,
``nearest_index``), so every backend samples exactly the positions TensorFlow's CPU
kernels sample.

TensorFlow computes a resize's scale and sample positions in float32:
``scale = in / out`` (``(in - 1) / (out - 1)`` with align_corners and out > 1), the
position of output ``y`` is ``y * scale``, or ``(y + 0.5) * scale - 0.5`` with
half_pixel_centers (``(y + 0.5) * scale`` for the nearest neighbor, which floors it).
The tables here do the same float32 arithmetic.

Part of the neural-network ops (``opkernel.ops.nn_ops`` registers them).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..errors import InvalidArgumentError
from ..gradients import register_gradient
from ..op_registry import register_op
from ..shapes import InferenceContext, output_size_from
from ..tensor import Tensor, ops_module as _ops
from ._grad_util import constant

__all__ = ["BilinearTable", "bilinear_table", "nearest_index", "register_gradients", "register_ops", "resize_grad_sizes",
           "resize_size"]

_ATTRS = ("align_corners", "half_pixel_centers")


def _fail(op: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"op {op!r}: {message}", op=op)


# ---------------------------------------------------------------- the geometry kernels share


def _check_attrs(op: str, align_corners: bool, half_pixel_centers: bool) -> None:
    if half_pixel_centers and align_corners:
        raise _fail(op, "if half_pixel_centers is True, align_corners must be False")


def _size_pair(op: str, size: Any, name: str) -> tuple[int, int]:
    s = np.asarray(size)
    if s.ndim != 1 or s.size != 2:
        raise _fail(op, f"input '{name}' must be a vector of 2 elements (height, width), got shape {list(s.shape)}")
    return int(s[0]), int(s[1])


def resize_size(op: str, images_shape: tuple[int, ...], size: Any, align_corners: bool,
                half_pixel_centers: bool) -> tuple[int, int]:
    """(out_height, out_width) of a ResizeBilinear or ResizeNearestNeighbor call after
    TensorFlow's checks (ImageResizerState): a 4-D image of at least one channel and a
    non-empty height and width, a size of two positive values."""
    _check_attrs(op, align_corners, half_pixel_centers)
    if len(images_shape) != 4:
        raise _fail(op, f"input 'images' must be 4-D [batch, height, width, channels], got shape {list(images_shape)}")
    if images_shape[3] < 1:
        raise _fail(op, f"the image must have at least one channel, got shape {list(images_shape)}")
    if images_shape[1] < 1 or images_shape[2] < 1:
        raise _fail(op, f"the input image must be of non-zero size, got shape {list(images_shape)}")
    oh, ow = _size_pair(op, size, "size")
    if oh < 1 or ow < 1:
        raise _fail(op, f"the output size must be positive, got {[oh, ow]}")
    return oh, ow


def resize_grad_sizes(op: str, grads_shape: tuple[int, ...], original: Any, align_corners: bool,
                      half_pixel_centers: bool) -> tuple[int, int]:
    """The original (height, width) of a resize gradient after TensorFlow's checks:
    ResizeBilinearGrad passes the original image's shape (and wants a non-empty gradient
    image and attrs that do not conflict), ResizeNearestNeighborGrad the ``size`` input's
    values (TensorFlow's kernel checks neither)."""
    if op == "ResizeBilinearGrad":
        _check_attrs(op, align_corners, half_pixel_centers)
    if len(grads_shape) != 4:
        raise _fail(op, f"input 'grads' must be 4-D [batch, height, width, channels], got shape {list(grads_shape)}")
    if op == "ResizeBilinearGrad":
        shape = tuple(original)
        if len(shape) != 4:
            raise _fail(op, f"input 'original_image' must be 4-D, got shape {list(shape)}")
        if grads_shape[1] < 1 or grads_shape[2] < 1:
            raise _fail(op, f"the resized dimensions must be positive, got shape {list(grads_shape)}")
        if shape[0] != grads_shape[0] or shape[3] != grads_shape[3]:
            raise _fail(op, f"input 'original_image' (shape {list(shape)}) must have the batch and channels of "
                            f"'grads' (shape {list(grads_shape)})")
        oh, ow = int(shape[1]), int(shape[2])
    else:
        oh, ow = _size_pair(op, original, "size")
    if oh < 1 or ow < 1:
        raise _fail(op, f"the original dimensions must be positive, got {[oh, ow]}")
    return oh, ow


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TensorFlow's CalculateResizeScale, in float32.  An axis of one input position
    takes the plain ratio even with align_corners: TensorFlow 2.21's kernels weigh it so
    (its bilinear gradient's weights show it; the positions are the same either way)."""
    if align_corners and out_size > 1 and in_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


class BilinearTable(NamedTuple):
    """For each output position along one axis: the input positions below and above it
    and the float32 weight of the one above (``lerp``)."""

    lower: np.ndarray
    upper: np.ndarray
    lerp: np.ndarray


def bilinear_table(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> BilinearTable:
    """TensorFlow's compute_interpolation_weights along one axis."""
    scale = _scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=np.float32)
    pos = (i + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel_centers else i * scale
    floor = np.floor(pos)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return BilinearTable(lower, upper, (pos - floor).astype(np.float32))


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """C's roundf: halves away from zero (exact: v - trunc(v) is exact in floating point)."""
    t = np.trunc(v)
    return t + np.where(np.abs(v - t) >= np.float32(0.5), np.sign(v), np.float32(0))  # type: ignore[no-any-return]


def nearest_index(in_size: int, out_size: int, align_corners: bool, half_pixel_centers: bool) -> np.ndarray:
    """The input position each of ``out_size`` positions copies, along one axis: the
    nearest neighbor's (rounded with align_corners, else floored; clamped to the input)."""
    scale = _scale(in_size, out_size, align_corners)
    i = np.arange(out_size, dtype=np.float32)
    pos = (i + np.float32(0.5)) * scale if half_pixel_centers else i * scale
    index = (_round_half_away(pos) if align_corners else np.floor(pos)).astype(np.int64)
    return np.clip(index, 0, in_size - 1)


# ---------------------------------------------------------------- shape functions


@output_size_from("size")
def _resize_shape(c: InferenceContext) -> None:
    images = c.with_rank(c.input(0), 4)
    size = c.with_rank(c.input(1), 1)
    c.merge(c.dim(size, 0), c.make_dim(2))
    values = c.input_tensor(1)
    h, w = (None, None) if values is None else (int(v) for v in np.asarray(values).reshape(-1)[:2])
    c.set_output(0, c.make_shape([c.dim(images, 0), c.make_dim(h), c.make_dim(w), c.dim(images, 3)]))


def _bilinear_grad_shape(c: InferenceContext) -> None:
    c.with_rank(c.input(0), 4)
    c.set_output(0, c.with_rank(c.input(1), 4))


# ---------------------------------------------------------------- specs


_DOC = (
    "align_corners: If true, the centers of the 4 corner pixels of the input and output are aligned, "
    "preserving the values at the corners.\n"
    "half_pixel_centers: If true, pixel centers are at 0.5 (the sample positions TensorFlow 2's "
    "tf.image.resize uses); excludes align_corners."
)


def _resize_op(name: str, types: str) -> Any:
    return (register_op(name).attr(f"T: {types}").attr("align_corners: bool = false")
            .attr("half_pixel_centers: bool = false"))


def register_ops() -> None:
    _resize_op("ResizeBilinear", "{int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}").input(
        "images: T"
    ).input("size: int32").output("resized_images: float").set_shape_fn(_resize_shape).doc(
        "Resize images to size using bilinear interpolation, computed in float32.\n\n"
        "images: 4-D [batch, height, width, channels].\n"
        "size: 1-D int32, 2 elements: new_height, new_width.\n"
        "resized_images: 4-D [batch, new_height, new_width, channels], float32.\n" + _DOC
    )
    _resize_op("ResizeBilinearGrad", "{float, bfloat16, half, double}").input("grads: float").input(
        "original_image: T"
    ).output("output: T").set_shape_fn(_bilinear_grad_shape).doc(
        "Computes the gradient of bilinear interpolation: each gradient element adds its four "
        "weighted parts into the input positions it was interpolated from.\n\n"
        "grads: 4-D [batch, height, width, channels], float32.\n"
        "original_image: The image that was resized (only its shape is used).\n" + _DOC
    )
    _resize_op("ResizeNearestNeighbor", "{int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}").input(
        "images: T"
    ).input("size: int32").output("resized_images: T").set_shape_fn(_resize_shape).doc(
        "Resize images to size using nearest neighbor interpolation.\n\n"
        "images: 4-D [batch, height, width, channels].\n"
        "size: 1-D int32, 2 elements: new_height, new_width.\n" + _DOC
    )
    _resize_op("ResizeNearestNeighborGrad", "{uint8, int8, int32, half, float, double, bfloat16}").input(
        "grads: T"
    ).input("size: int32").output("output: T").set_shape_fn(_resize_shape).doc(
        "Computes the gradient of nearest neighbor interpolation: each gradient element adds "
        "into the input position it copied, in row-major order.\n\n"
        "grads: 4-D [batch, height, width, channels].\n"
        "size: 1-D int32, 2 elements: the original input's height and width.\n" + _DOC
    )


# ---------------------------------------------------------------- gradients


def _attrs(op: Any) -> dict[str, Any]:
    return {name: op.get_attr(name) for name in _ATTRS}


def _spatial(t: Tensor) -> Tensor:
    """t's (height, width) as an int32 vector: a constant when known."""
    dims = tuple(t.shape)[1:3]
    if None not in dims:
        return constant(dims, t)
    ops = _ops()
    return ops.strided_slice(ops.shape(t), constant((1,), t), constant((3,), t), constant((1,), t))  # type: ignore[no-any-return]


def _resize_bilinear_grad(op: Any, grad: Tensor) -> list[Any]:
    image = op.inputs[0]
    if not image.dtype.is_floating:
        return [None, None]
    return [_ops().resize_bilinear_grad(grad, image, **_attrs(op)), None]


def _resize_bilinear_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # ResizeBilinearGrad is linear in grads; its adjoint is the resize itself, from the
    # original image's size to the gradient's.  (TensorFlow has no gradient here.)
    grads = op.inputs[0]
    if 0 in tuple(grads.shape)[3:]:  # no channels: nothing to resize (the resize refuses them)
        return [_ops().zeros_like(grads), None]
    return [_ops().resize_bilinear(grad, _spatial(grads), **_attrs(op)), None]


def _resize_nearest_grad(op: Any, grad: Tensor) -> list[Any]:
    return [_ops().resize_nearest_neighbor_grad(grad, _spatial(op.inputs[0]), **_attrs(op)), None]


def _resize_nearest_grad_grad(op: Any, grad: Tensor) -> list[Any]:
    # The adjoint of the nearest neighbor's gradient is the nearest-neighbor resize to the
    # gradient's size: the same positions, copied instead of summed.
    return [_ops().resize_nearest_neighbor(grad, _spatial(op.inputs[0]), **_attrs(op)), None]


def register_gradients() -> None:
    register_gradient("ResizeBilinear")(_resize_bilinear_grad)
    register_gradient("ResizeBilinearGrad")(_resize_bilinear_grad_grad)
    register_gradient("ResizeNearestNeighbor")(_resize_nearest_grad)
    register_gradient("ResizeNearestNeighborGrad")(_resize_nearest_grad_grad)
