"""Neural-network ops: activations, softmax and losses, bias, convolution and pooling,
against straightforward numpy references, on every backend."""

from __future__ import annotations

from typing import Any

import math

import numpy as np
import opkernel as ok
import optable
import pytest
from opkernel import ops
from opkernel.autodiff import GradientTape
from opkernel.errors import InvalidArgumentError, OpTypeError, ShapeError
from opkernel.testing.gradient_checker import compute_gradient_error
from optable import OpCase

FLOATS = ("float32", "float64")
SCALE = 1.0507009873554804934193349852946
ALPHA = 1.6732632423543772848170429916717


def randn(rng: np.random.Generator, dt: str, *shape: int, scale: float = 1.0) -> np.ndarray:
    if np.dtype(dt).kind in "iu":
        return rng.integers(-4, 5, shape).astype(dt)
    return (rng.standard_normal(shape) * scale).astype(dt)


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


# ---------------------------------------------------------------- references (NHWC, plain loops)


def to_nhwc(x: np.ndarray, fmt: str) -> np.ndarray:
    return x if fmt == "NHWC" else x.transpose(0, 2, 3, 1)


def from_nhwc(x: np.ndarray, fmt: str) -> np.ndarray:
    return x if fmt == "NHWC" else x.transpose(0, 3, 1, 2)


def hw(values: Any, fmt: str) -> tuple[int, int]:
    return (values[1], values[2]) if fmt == "NHWC" else (values[2], values[3])


def geometry(size: int, k: int, stride: int, dilation: int, padding: str, pads: tuple[int, int]) -> tuple[int, int]:
    """(output size, padding before) as TensorFlow defines them."""
    eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return (size - eff) // stride + 1, 0
    if padding == "SAME":
        out = -(-size // stride)
        return out, max((out - 1) * stride + eff - size, 0) // 2
    return (size + pads[0] + pads[1] - eff) // stride + 1, pads[0]


def explicit(attrs: dict[str, Any], fmt: str) -> tuple[tuple[int, int], tuple[int, int]]:
    p = list(attrs.get("explicit_paddings", ())) or [0] * 8
    pairs = [(p[i], p[i + 1]) for i in range(0, 8, 2)]
    return (pairs[1], pairs[2]) if fmt == "NHWC" else (pairs[2], pairs[3])


def conv_setup(x_shape: tuple[int, ...], k: tuple[int, int], attrs: dict[str, Any]) -> Any:
    fmt = attrs.get("data_format", "NHWC")
    sh, sw = hw(attrs["strides"], fmt)
    dh, dw = hw(attrs.get("dilations", (1, 1, 1, 1)), fmt)
    ph, pw = explicit(attrs, fmt)
    oh, top = geometry(x_shape[1], k[0], sh, dh, attrs["padding"], ph)
    ow, left = geometry(x_shape[2], k[1], sw, dw, attrs["padding"], pw)
    return fmt, (sh, sw), (dh, dw), (oh, ow), (top, left)


def ref_conv2d(x: np.ndarray, w: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    x = to_nhwc(x, fmt)
    fmt, (sh, sw), (dh, dw), (oh, ow), (top, left) = conv_setup(x.shape, w.shape[:2], attrs)
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.result_type(x, w))
    for i in range(oh):
        for j in range(ow):
            for a in range(w.shape[0]):
                for b in range(w.shape[1]):
                    r, c = i * sh + a * dh - top, j * sw + b * dw - left
                    if 0 <= r < x.shape[1] and 0 <= c < x.shape[2]:
                        out[:, i, j, :] += x[:, r, c, :] @ w[a, b]
    return from_nhwc(out, fmt)


def ref_conv2d_backprop_input(sizes: np.ndarray, w: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    shape = tuple(int(s) for s in sizes)
    x_shape = shape if fmt == "NHWC" else (shape[0], shape[2], shape[3], shape[1])
    dy = to_nhwc(dy, fmt)
    fmt, (sh, sw), (dh, dw), (oh, ow), (top, left) = conv_setup(x_shape, w.shape[:2], attrs)
    dx = np.zeros(x_shape, dy.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(w.shape[0]):
                for b in range(w.shape[1]):
                    r, c = i * sh + a * dh - top, j * sw + b * dw - left
                    if 0 <= r < x_shape[1] and 0 <= c < x_shape[2]:
                        dx[:, r, c, :] += dy[:, i, j, :] @ w[a, b].T
    return from_nhwc(dx, fmt)


def ref_conv2d_backprop_filter(x: np.ndarray, sizes: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    x, dy = to_nhwc(x, fmt), to_nhwc(dy, fmt)
    kh, kw, _, _ = (int(s) for s in sizes)
    fmt, (sh, sw), (dh, dw), (oh, ow), (top, left) = conv_setup(x.shape, (kh, kw), attrs)
    dw_ = np.zeros(tuple(int(s) for s in sizes), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(kh):
                for b in range(kw):
                    r, c = i * sh + a * dh - top, j * sw + b * dw - left
                    if 0 <= r < x.shape[1] and 0 <= c < x.shape[2]:
                        dw_[a, b] += x[:, r, c, :].T @ dy[:, i, j, :]
    return dw_


def pool_windows(x_shape: tuple[int, ...], attrs: dict[str, Any]) -> Any:
    """Yield (i, j, row slice, col slice) of every output's window, clipped to the input."""
    fmt = attrs.get("data_format", "NHWC")
    kh, kw = hw(attrs["ksize"], fmt)
    fmt, (sh, sw), _, (oh, ow), (top, left) = conv_setup(x_shape, (kh, kw), attrs)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - top, j * sw - left
            yield i, j, slice(max(r0, 0), min(r0 + kh, x_shape[1])), slice(max(c0, 0), min(c0 + kw, x_shape[2]))


def pool_out_shape(x_shape: tuple[int, ...], attrs: dict[str, Any]) -> tuple[int, int, int, int]:
    fmt = attrs.get("data_format", "NHWC")
    _, _, _, (oh, ow), _ = conv_setup(x_shape, hw(attrs["ksize"], fmt), attrs)
    return x_shape[0], oh, ow, x_shape[3]


def ref_max_pool(x: np.ndarray, **attrs: Any) -> np.ndarray:
    """TensorFlow's CPU MaxPool (pooling_ops_common.h): a cwiseMax from the lowest finite
    value, so NaN and -inf never win and a window of them pools to that value."""
    fmt = attrs.get("data_format", "NHWC")
    x = to_nhwc(x, fmt)
    out = np.zeros(pool_out_shape(x.shape, attrs), x.dtype)
    lowest = ok.as_dtype(x.dtype).min
    for i, j, rows, cols in pool_windows(x.shape, attrs):
        window = x[:, rows, cols, :].reshape(x.shape[0], (rows.stop - rows.start) * (cols.stop - cols.start), x.shape[3])
        out[:, i, j, :] = np.fmax.reduce(window, axis=1, initial=lowest) if x.dtype.kind in "fV" else window.max(axis=1)
    return from_nhwc(out, fmt)


def argmax_positions(x: np.ndarray, attrs: dict[str, Any]) -> Any:
    """Yield (n, i, j, ch, r, c): output (n, i, j, ch) takes its max from input (n, r, c, ch)."""
    for i, j, rows, cols in pool_windows(x.shape, attrs):
        for n in range(x.shape[0]):
            for ch in range(x.shape[3]):
                window = x[n, rows, cols, ch]
                r, c = np.unravel_index(np.argmax(window), window.shape)  # first max, row-major
                yield n, i, j, ch, rows.start + r, cols.start + c


def ref_max_pool_grad(x: np.ndarray, y: np.ndarray, g: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    x, g = to_nhwc(x, fmt), to_nhwc(g, fmt)
    dx = np.zeros_like(x)
    for n, i, j, ch, r, c in argmax_positions(x, attrs):
        dx[n, r, c, ch] += g[n, i, j, ch]
    return from_nhwc(dx, fmt)


def ref_max_pool_grad_grad(x: np.ndarray, y: np.ndarray, gg: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    x, gg = to_nhwc(x, fmt), to_nhwc(gg, fmt)
    out = np.zeros(pool_out_shape(x.shape, attrs), x.dtype)
    for n, i, j, ch, r, c in argmax_positions(x, attrs):
        out[n, i, j, ch] = gg[n, r, c, ch]
    return from_nhwc(out, fmt)


def ref_argmax(x: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """MaxPoolWithArgmax's flat indices (NHWC), the batch counted with include_batch_in_index."""
    n, h, w, c = x.shape
    batch = attrs.get("include_batch_in_index", False)
    out = np.zeros(pool_out_shape(x.shape, attrs), np.int64)
    for b, i, j, ch, r, q in argmax_positions(x, attrs):
        out[b, i, j, ch] = (((b * h if batch else 0) + r) * w + q) * c + ch
    return out.astype(attrs.get("Targmax", "int64"))


def ref_max_pool_with_argmax(x: np.ndarray, **attrs: Any) -> tuple[np.ndarray, np.ndarray]:
    return ref_max_pool(x, **attrs), ref_argmax(x, attrs)


def _image_of(x_shape: tuple[int, ...], argmax: np.ndarray, batch: bool) -> tuple[np.ndarray, np.ndarray]:
    """(batch index, flat index into that image) of every argmax entry."""
    image = int(np.prod(x_shape[1:]))
    b = np.broadcast_to(np.arange(x_shape[0])[:, None, None, None], argmax.shape)
    return (argmax // image, argmax % image) if batch else (b, argmax)


def ref_max_pool_grad_with_argmax(x: np.ndarray, g: np.ndarray, argmax: np.ndarray, **attrs: Any) -> np.ndarray:
    dx = np.zeros(x.shape, g.dtype)
    b, at = _image_of(x.shape, argmax.astype(np.int64), attrs.get("include_batch_in_index", False))
    for bi, ai, gi in zip(b.ravel(), at.ravel(), g.ravel()):
        dx[bi].reshape(-1)[ai] += gi
    return dx


def ref_max_pool_grad_grad_with_argmax(x: np.ndarray, gg: np.ndarray, argmax: np.ndarray, **attrs: Any) -> np.ndarray:
    b, at = _image_of(x.shape, argmax.astype(np.int64), attrs.get("include_batch_in_index", False))
    return gg.reshape(x.shape[0], -1)[b, at]


def ref_avg_pool(x: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    x = to_nhwc(x, fmt)
    out = np.zeros(pool_out_shape(x.shape, attrs), x.dtype)
    for i, j, rows, cols in pool_windows(x.shape, attrs):
        out[:, i, j, :] = x[:, rows, cols, :].mean(axis=(1, 2))
    return from_nhwc(out, fmt)


def ref_avg_pool_grad(sizes: np.ndarray, g: np.ndarray, **attrs: Any) -> np.ndarray:
    fmt = attrs.get("data_format", "NHWC")
    shape = tuple(int(s) for s in sizes)
    x_shape = shape if fmt == "NHWC" else (shape[0], shape[2], shape[3], shape[1])
    g = to_nhwc(g, fmt)
    dx = np.zeros(x_shape, g.dtype)
    for i, j, rows, cols in pool_windows(x_shape, attrs):
        count = (rows.stop - rows.start) * (cols.stop - cols.start)
        dx[:, rows, cols, :] += g[:, i, j, None, None, :] / count
    return from_nhwc(dx, fmt)


def ref_softmax(x: np.ndarray, **_: Any) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def ref_softmax_grad(g: np.ndarray, s: np.ndarray, **_: Any) -> np.ndarray:
    """(g - sum(g * s)) * s row by row in float64, the sum exactly rounded (math.fsum)."""
    g64, s64 = g.astype(np.float64).reshape(-1, g.shape[-1]), s.astype(np.float64).reshape(-1, s.shape[-1])
    out = np.empty_like(g64)
    for r in range(g64.shape[0]):
        dot = math.fsum(float(a) * float(b) for a, b in zip(g64[r], s64[r]))
        out[r] = [(float(a) - dot) * float(b) for a, b in zip(g64[r], s64[r])]
    return out.reshape(g.shape)


def ref_log_softmax(x: np.ndarray, **_: Any) -> np.ndarray:
    return np.log(ref_softmax(x))


def ref_xent(features: np.ndarray, labels: np.ndarray, **_: Any) -> tuple[np.ndarray, np.ndarray]:
    features, labels = np.broadcast_arrays(features, labels)
    return -(labels * ref_log_softmax(features)).sum(axis=-1), ref_softmax(features) - labels


def ref_sparse_xent(features: np.ndarray, labels: np.ndarray, **_: Any) -> tuple[np.ndarray, np.ndarray]:
    onehot = np.eye(features.shape[1])[labels]
    return ref_xent(features, onehot)


def ref_sparse_xent_loss(
    features: np.ndarray, labels: np.ndarray, reduction: str = "mean", **_: Any
) -> tuple[np.ndarray, np.ndarray]:
    loss, backprop = ref_sparse_xent(features, labels)
    if reduction == "sum":
        return loss.sum(), backprop
    return loss.mean(), backprop / max(len(labels), 1)


def ref_bias_add(x: np.ndarray, b: np.ndarray, data_format: str = "NHWC", **_: Any) -> np.ndarray:
    if data_format == "NCHW":
        return x + b.reshape((-1,) + (1,) * (x.ndim - 2))
    return x + b


def ref_bias_add_grad(g: np.ndarray, data_format: str = "NHWC", **_: Any) -> np.ndarray:
    axis = 1 if data_format == "NCHW" else g.ndim - 1
    return g.sum(axis=tuple(a for a in range(g.ndim) if a != axis))


def unary(fn: Any) -> Any:
    return lambda x, **_: fn(x)


# ---------------------------------------------------------------- rows


def dilation_windows(x: np.ndarray, f: np.ndarray, strides: Any, rates: Any, padding: str) -> Any:
    """Each output position's in-bounds taps, in row-major order: (b, y, x, [(h, w, dy, dx), ...])."""
    (_, h, w, _), (fh, fw, _) = x.shape, f.shape
    sh, sw, rh, rw = strides[1], strides[2], rates[1], rates[2]
    eh, ew = (fh - 1) * rh + 1, (fw - 1) * rw + 1
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        top, left = max((oh - 1) * sh + eh - h, 0) // 2, max((ow - 1) * sw + ew - w, 0) // 2
    else:
        oh, ow, top, left = (h - eh) // sh + 1, (w - ew) // sw + 1, 0, 0
    for y, z in np.ndindex(oh, ow):
        taps = [(y * sh + dy * rh - top, z * sw + dx * rw - left, dy, dx) for dy in range(fh) for dx in range(fw)]
        yield y, z, oh, ow, [(a, b, dy, dx) for a, b, dy, dx in taps if 0 <= a < h and 0 <= b < w], (
            max(y * sh - top, 0), max(z * sw - left, 0))


def dilation_ref(x: np.ndarray, f: np.ndarray, strides: Any, rates: Any, padding: str, **_: Any) -> np.ndarray:
    out = None
    for y, z, oh, ow, taps, _default in dilation_windows(x, f, strides, rates, padding):
        if out is None:
            out = np.zeros((x.shape[0], oh, ow, x.shape[3]), x.dtype)
        values = [x[:, a, b, :] + f[dy, dx, :] for a, b, dy, dx in taps]
        out[:, y, z, :] = np.max(values, axis=0)
    return out


def dilation_backprop_ref(which: int) -> Any:
    def ref(x: np.ndarray, f: np.ndarray, g: np.ndarray, strides: Any, rates: Any, padding: str, **_: Any) -> np.ndarray:
        """Each output's gradient to its first maximal tap (the input element, or the filter tap)."""
        out = np.zeros_like(x if which == 0 else f)
        for y, z, _oh, _ow, taps, _default in dilation_windows(x, f, strides, rates, padding):
            for b, c in np.ndindex(x.shape[0], x.shape[3]):
                values = [x[b, a, w, c] + f[dy, dx, c] for a, w, dy, dx in taps]
                a, w, dy, dx = taps[int(np.argmax(values))]
                if which == 0:
                    out[b, a, w, c] += g[b, y, z, c]
                else:
                    out[dy, dx, c] += g[b, y, z, c]
        return out

    return ref


def lrn_ref(x: np.ndarray, depth_radius: int = 5, bias: float = 1.0, alpha: float = 1.0, beta: float = 0.5,
            **_: Any) -> np.ndarray:
    """LRN's definition, one depth at a time, in float64."""
    w = x.astype(np.float64)
    out = np.empty_like(w)
    for d in range(x.shape[3]):
        window = w[..., max(0, d - depth_radius):d + depth_radius + 1]
        out[..., d] = w[..., d] * (bias + alpha * np.sum(window * window, -1)) ** -beta
    return out.astype(x.dtype)


def lrn_grad_ref(g: np.ndarray, x: np.ndarray, y: np.ndarray, depth_radius: int = 5, bias: float = 1.0,
                 alpha: float = 1.0, beta: float = 0.5, **_: Any) -> np.ndarray:
    """d(sum(g * LRN(x))) / dx from the derivative of each output by each input, in float64:
    dy_j/dx_k = [j == k] N_j^-beta - 2 alpha beta x_k y_j / N_j for |j - k| <= radius."""
    x64, g64, y64 = x.astype(np.float64), g.astype(np.float64), y.astype(np.float64)
    depth = x.shape[3]
    norm = np.stack([bias + alpha * np.sum(x64[..., max(0, j - depth_radius):j + depth_radius + 1] ** 2, -1)
                     for j in range(depth)], -1)
    out = np.zeros_like(x64)
    for k in range(depth):
        for j in range(max(0, k - depth_radius), min(depth, k + depth_radius + 1)):
            out[..., k] += g64[..., j] * ((j == k) * norm[..., j] ** -beta
                                          - 2 * alpha * beta * x64[..., k] * y64[..., j] / norm[..., j])
    return out.astype(x.dtype)


def one(shape: tuple[int, ...], scale: float = 1.0) -> Any:
    return lambda rng, dt: [randn(rng, dt, *shape, scale=scale)]


def probabilities(rng: np.random.Generator, dt: str, *shape: int) -> np.ndarray:
    return ref_softmax(rng.standard_normal(shape)).astype(dt)


def gelu_ref(x: np.ndarray, approximate: bool = False, **_: Any) -> np.ndarray:
    """GELU element by element in float64 (math.erf, math.tanh)."""
    def one(v: float) -> float:
        if approximate:
            return 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
        return 0.5 * v * (1 + math.erf(v / math.sqrt(2)))
    return np.array([one(float(v)) for v in x.ravel()]).reshape(x.shape).astype(x.dtype)


def gelu_grad_ref(g: np.ndarray, x: np.ndarray, approximate: bool = False, **_: Any) -> np.ndarray:
    """dy * GELU'(x) element by element in float64; the limits 1 and 0 at +-inf."""
    def slope(v: float) -> float:
        if math.isinf(v):
            return 1.0 if v > 0 else 0.0
        if approximate:
            c = math.sqrt(2 / math.pi)
            t = math.tanh(c * (v + 0.044715 * v ** 3))
            return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * c * (1 + 3 * 0.044715 * v * v)
        return 0.5 * (1 + math.erf(v / math.sqrt(2))) + v * math.exp(-v * v / 2) / math.sqrt(2 * math.pi)
    flat = [float(gv) * slope(float(v)) for gv, v in zip(g.ravel(), x.ravel())]
    return np.array(flat).reshape(x.shape).astype(x.dtype)


def gelu_specials(rng: np.random.Generator, dt: str) -> list[np.ndarray]:
    # +-1e20: x * x overflows float32 where the derivative's second term is exactly 0
    return [np.ones(9, dt), np.array([-np.inf, -1e20, -30.0, -5.0, -0.75, 0.0, 9.0, 1e20, np.inf], dt)]


ACTIVATION_CASES = [
    OpCase("Relu", "Relu", one((3, 4)), unary(lambda x: np.maximum(x, 0))),
    OpCase("Relu-int32", "Relu", one((3, 4)), unary(lambda x: np.maximum(x, 0)), dtypes=("int32",), grad=False),
    OpCase("ReluGrad", "ReluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)],
           lambda g, f: g * (f > 0)),
    OpCase("ReluGrad-int32", "ReluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)],
           lambda g, f: g * (f > 0), dtypes=("int32",), grad=False),
    OpCase("Relu6", "Relu6", one((3, 4), 5.0), unary(lambda x: np.clip(x, 0, 6))),
    OpCase("Relu6-int32", "Relu6", lambda rng, dt: [rng.integers(-3, 10, (3, 4)).astype(dt)],
           unary(lambda x: np.clip(x, 0, 6)), dtypes=("int32",), grad=False),
    OpCase("Elu", "Elu", one((3, 4), 2.0), unary(lambda x: np.where(x > 0, x, np.exp(x) - 1))),
    OpCase("Elu-half", "Elu", one((3, 4), 2.0), unary(lambda x: np.where(x > 0, x, np.exp(x) - 1)),
           dtypes=("float16",), grad=False),
    OpCase("LeakyRelu", "LeakyRelu", one((3, 4), 2.0), lambda x, alpha=0.2, **_: np.where(x > 0, x, x * x.dtype.type(np.float32(alpha)))),
    OpCase("LeakyRelu-alpha", "LeakyRelu", one((3, 4), 2.0), lambda x, alpha=0.2, **_: np.where(x > 0, x, x * x.dtype.type(np.float32(alpha))),
           attrs={"alpha": 0.01}),
    OpCase("LeakyRelu-half", "LeakyRelu", one((3, 4), 2.0),
           lambda x, alpha=0.2, **_: np.where(x > 0, x, x * x.dtype.type(np.float32(alpha))), dtypes=("float16",), grad=False),
    OpCase("LeakyReluGrad", "LeakyReluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)],
           lambda g, f, alpha=0.2, **_: np.where(f > 0, g, g * g.dtype.type(np.float32(alpha))), attrs={"alpha": 0.3}),
    *[OpCase(f"Dilation2D-{pad}", "Dilation2D", lambda rng, dt: [randn(rng, dt, 2, 5, 6, 2), randn(rng, dt, 2, 3, 2)],
             dilation_ref, attrs={"strides": [1, 2, 1, 1], "rates": [1, 1, 2, 1], "padding": pad}) for pad in ("SAME", "VALID")],
    OpCase("Dilation2D-int32", "Dilation2D", lambda rng, dt: [rng.integers(-9, 9, (1, 4, 4, 1)).astype(dt),
                                                             rng.integers(-9, 9, (2, 2, 1)).astype(dt)],
           dilation_ref, attrs={"strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1], "padding": "SAME"}, dtypes=("int32",),
           grad=False),
    *[OpCase(f"{op}-{pad}", op, lambda rng, dt, pad=pad: [randn(rng, dt, 2, 5, 6, 2), randn(rng, dt, 2, 3, 2),
                                                 randn(rng, dt, 2, 3 if pad == "SAME" else 2, 6 if pad == "SAME" else 2, 2)],
             dilation_backprop_ref(which), attrs={"strides": [1, 2, 1, 1], "rates": [1, 1, 2, 1], "padding": pad},
             grad=False)
      for op, which in (("Dilation2DBackpropInput", 0), ("Dilation2DBackpropFilter", 1)) for pad in ("SAME", "VALID")],
    OpCase("LRN", "LRN", one((2, 2, 3, 7)), lrn_ref, attrs={"depth_radius": 2, "bias": 1.5, "alpha": 0.3, "beta": 0.75},
           dtypes=("float32",), grad_dtype="float32", grad_tol=2e-2, tol={"float32": (2e-6, 2e-6)}),
    OpCase("LRN-wide", "LRN", one((1, 2, 1, 4)), lrn_ref, attrs={"depth_radius": 9}, dtypes=("float32",),
           grad=False, tol={"float32": (2e-6, 2e-6)}),
    OpCase("LRN-half", "LRN", one((1, 2, 2, 5)), lrn_ref, attrs={"depth_radius": 1}, dtypes=("float16", "bfloat16"),
           grad=False),
    OpCase("LRNGrad", "LRNGrad", lambda rng, dt: [randn(rng, dt, 1, 2, 2, 6), *(lambda x: [x, lrn_ref(x, 2, 1.0, 0.5, 0.5)])(
        randn(rng, dt, 1, 2, 2, 6))], lrn_grad_ref, attrs={"depth_radius": 2, "alpha": 0.5}, dtypes=("float32",),
           grad=False, tol={"float32": (2e-5, 2e-5)}),
    OpCase("EluGrad", "EluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)],
           lambda g, y, **_: np.where(y < 0, g * (y + 1), g)),
    OpCase("EluGrad-half", "EluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)],
           lambda g, y, **_: np.where(y < 0, g * (y + 1), g), dtypes=("float16",), grad=False),
    OpCase("Gelu", "Gelu", one((3, 4), 2.0), gelu_ref),
    OpCase("Gelu-tanh", "Gelu", one((3, 4), 2.0), gelu_ref, attrs={"approximate": True}),
    OpCase("Gelu-large", "Gelu", one((70, 300), 3.0), gelu_ref, grad=False),
    OpCase("Gelu-half", "Gelu", one((3, 4), 2.0), gelu_ref, dtypes=("float16",), grad=False),
    OpCase("GeluGrad", "GeluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4, scale=2.0)], gelu_grad_ref),
    OpCase("GeluGrad-tanh", "GeluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4, scale=2.0)],
           gelu_grad_ref, attrs={"approximate": True}),
    OpCase("GeluGrad-large", "GeluGrad", lambda rng, dt: [randn(rng, dt, 70, 300), randn(rng, dt, 70, 300, scale=3.0)],
           gelu_grad_ref, grad=False),
    # the tanh form's 1 + tanh(u) cancels where tanh saturates (x = -5: OpenCL's tanh is -1 there, 0 for -1.5e-6)
    *[OpCase(f"GeluGrad-specials{'-tanh' * a}", "GeluGrad", gelu_specials, gelu_grad_ref, attrs={"approximate": a},
             grad=False, tol={"float32": (1e-5, 2e-6)}) for a in (False, True)],
    OpCase("GeluGrad-half", "GeluGrad", lambda rng, dt: [randn(rng, dt, 3, 4), randn(rng, dt, 3, 4)], gelu_grad_ref,
           dtypes=("float16",), grad=False),
    OpCase("Selu", "Selu", one((3, 4), 2.0), unary(lambda x: SCALE * np.where(x > 0, x, ALPHA * (np.exp(x) - 1)))),
    OpCase("Softplus", "Softplus", one((3, 4), 3.0), unary(lambda x: np.log1p(np.exp(x)))),
    OpCase("Softplus-extreme", "Softplus", lambda rng, dt: [np.array([-200.0, -30.0, 0.0, 30.0, 200.0], dt)],
           unary(lambda x: np.where(x > 30, x, np.log1p(np.exp(np.minimum(x, 30))))), grad=False),
]

SOFTMAX_CASES = [
    OpCase("Softmax-2d", "Softmax", one((2, 5)), ref_softmax),
    OpCase("Softmax-3d", "Softmax", one((2, 2, 3)), ref_softmax),
    OpCase("Softmax-large", "Softmax", lambda rng, dt: [np.array([[1000.0, 1001.0, 999.0]], dt)], ref_softmax, grad=False),
    OpCase("Softmax-half", "Softmax", one((2, 5)), ref_softmax, dtypes=("float16",), grad=False),
    OpCase("SoftmaxGrad-2d", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 3, 5), probabilities(rng, dt, 3, 5)],
           ref_softmax_grad),
    OpCase("SoftmaxGrad-3d", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 2, 3, 4), probabilities(rng, dt, 2, 3, 4)],
           ref_softmax_grad),
    # rows of 300 (the native kernel's lanes and its tail), and enough rows to share out on the pool
    OpCase("SoftmaxGrad-rows", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 4, 300), probabilities(rng, dt, 4, 300)],
           ref_softmax_grad, grad=False),
    OpCase("SoftmaxGrad-large", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 300, 512),
                                                                probabilities(rng, dt, 300, 512)],
           ref_softmax_grad, grad=False, dtypes=("float32",)),
    OpCase("SoftmaxGrad-empty", "SoftmaxGrad", lambda rng, dt: [np.zeros((2, 0), dt), np.zeros((2, 0), dt)],
           lambda g, s: np.zeros((2, 0)), grad=False),
    OpCase("SoftmaxGrad-half", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 3, 5), probabilities(rng, dt, 3, 5)],
           ref_softmax_grad, dtypes=("float16",), grad=False),
    # rows of a multiple of 8: the OpenCL kernels that read rows as vectors of 8 on CPU devices
    OpCase("Softmax-rows-of-8", "Softmax", one((5, 64)), ref_softmax),
    OpCase("LogSoftmax-rows-of-8", "LogSoftmax", one((3, 2, 16)), ref_log_softmax),
    OpCase("SoftmaxGrad-rows-of-8", "SoftmaxGrad", lambda rng, dt: [randn(rng, dt, 5, 24), probabilities(rng, dt, 5, 24)],
           ref_softmax_grad),
    OpCase("LogSoftmax-2d", "LogSoftmax", one((2, 5)), ref_log_softmax),
    OpCase("LogSoftmax-3d", "LogSoftmax", one((2, 2, 3)), ref_log_softmax),
    OpCase("LogSoftmax-large", "LogSoftmax", lambda rng, dt: [np.array([[1000.0, 1001.0, -1000.0]], dt)],
           lambda x: np.array([[-1.3132616875182228, -0.3132616875182228, -2001.3132616875182]]), grad=False),
    OpCase("Xent", "SoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 3, 4), probabilities(rng, dt, 3, 4)], ref_xent),
    OpCase("Xent-backprop", "SoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 3, 4), probabilities(rng, dt, 3, 4)], ref_xent, grad_output=1),
    OpCase("Xent-broadcast-labels", "SoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 3, 4), probabilities(rng, dt, 1, 4)], ref_xent),
    OpCase("Xent-large", "SoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [np.array([[1000.0, 0.0, -1000.0]], dt), np.array([[0.0, 0.5, 0.5]], dt)],
           lambda f, l: (np.array([1500.0]), np.array([[1.0, -0.5, -0.5]])), grad=False),
    OpCase("SparseXent", "SparseSoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 3, 4), np.array([0, 3, 1], np.int64)], ref_sparse_xent),
    OpCase("SparseXent-backprop", "SparseSoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 3, 4), np.array([0, 3, 1], np.int64)], ref_sparse_xent, grad_output=1),
    OpCase("SparseXent-int32", "SparseSoftmaxCrossEntropyWithLogits",
           lambda rng, dt: [randn(rng, dt, 4, 3), np.array([2, 2, 0, 1], np.int32)], ref_sparse_xent),
    OpCase("SparseXentLoss-mean", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [randn(rng, dt, 3, 4), np.array([0, 3, 1], np.int64)], ref_sparse_xent_loss),
    OpCase("SparseXentLoss-mean-backprop", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [randn(rng, dt, 3, 4), np.array([0, 3, 1], np.int64)], ref_sparse_xent_loss, grad_output=1),
    OpCase("SparseXentLoss-sum-int32", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [randn(rng, dt, 5, 3), np.array([2, 2, 0, 1, 0], np.int32)], ref_sparse_xent_loss,
           attrs={"reduction": "sum"}),
    OpCase("SparseXentLoss-one-example", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [randn(rng, dt, 1, 4), np.array([2], np.int64)], ref_sparse_xent_loss),
    OpCase("SparseXentLoss-large", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [np.array([[1000.0, 0.0, -1000.0], [0.0, 1000.0, 0.0]], dt), np.array([1, 1], np.int64)],
           lambda f, l: (np.array(500.0), np.array([[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]])), grad=False),
    OpCase("SparseXentLoss-half", "SparseSoftmaxCrossEntropyLoss",
           lambda rng, dt: [randn(rng, dt, 3, 4), np.array([0, 3, 1], np.int64)], ref_sparse_xent_loss,
           dtypes=("float16",), grad=False),
]

BIAS_CASES = [
    OpCase("BiasAdd-nhwc", "BiasAdd", lambda rng, dt: [randn(rng, dt, 2, 3, 4), randn(rng, dt, 4)], ref_bias_add),
    OpCase("BiasAdd-2d", "BiasAdd", lambda rng, dt: [randn(rng, dt, 3, 2), randn(rng, dt, 2)], ref_bias_add),
    OpCase("BiasAdd-nchw", "BiasAdd", lambda rng, dt: [randn(rng, dt, 2, 3, 2, 2), randn(rng, dt, 3)], ref_bias_add,
           attrs={"data_format": "NCHW"}),
    OpCase("BiasAdd-int32", "BiasAdd", lambda rng, dt: [randn(rng, dt, 2, 3), randn(rng, dt, 3)], ref_bias_add,
           dtypes=("int32",), grad=False),
    OpCase("BiasAddGrad-int32", "BiasAddGrad", one((2, 3, 4)), ref_bias_add_grad, dtypes=("int32",), grad=False),
    OpCase("BiasAddGrad-nhwc", "BiasAddGrad", one((2, 3, 4)), ref_bias_add_grad),
    OpCase("BiasAddGrad-nchw", "BiasAddGrad", one((2, 3, 2, 2)), ref_bias_add_grad, attrs={"data_format": "NCHW"}),
    # Shapes that take the CPU kernels' other paths: many rows of a few channels.
    OpCase("BiasAdd-many-rows", "BiasAdd", lambda rng, dt: [randn(rng, dt, 4, 64, 32, 4), randn(rng, dt, 4)], ref_bias_add,
           grad=False),
    OpCase("BiasAddGrad-many-rows", "BiasAddGrad", one((8, 9, 5)), ref_bias_add_grad, grad=False),
]


FUSED_ACTIVATIONS = ("Identity", "Relu", "Relu6", "Elu", "Sigmoid", "Tanh")


def ref_fused_mat_mul(a: np.ndarray, b: np.ndarray, bias: np.ndarray, transpose_a: bool = False,
                      transpose_b: bool = False, activation: str = "Identity", **_: Any) -> np.ndarray:
    return ref_fused_activation((a.T if transpose_a else a) @ (b.T if transpose_b else b) + bias, activation)


def ref_fused_activation(x: np.ndarray, activation: str) -> np.ndarray:
    return {
        "Identity": lambda: x, "Relu": lambda: np.maximum(x, 0), "Relu6": lambda: np.clip(x, 0, 6),
        "Elu": lambda: np.where(x > 0, x, np.expm1(np.minimum(x, 0))), "Sigmoid": lambda: 1 / (1 + np.exp(-x)),
        "Tanh": lambda: np.tanh(x),
    }[activation]()


def dense_inputs(m: int, k: int, n: int, transpose_a: bool = False, transpose_b: bool = False,
                 scale: float = 1.0) -> Any:
    return lambda rng, dt: [randn(rng, dt, *((k, m) if transpose_a else (m, k)), scale=scale),
                            randn(rng, dt, *((n, k) if transpose_b else (k, n))), randn(rng, dt, n)]


FUSED_CASES = [
    *[OpCase(f"FusedMatMul-{act}", "FusedMatMul", dense_inputs(3, 4, 5, scale=2.0), ref_fused_mat_mul,
             attrs={"activation": act}) for act in FUSED_ACTIVATIONS],
    OpCase("FusedMatMul-default", "FusedMatMul", dense_inputs(2, 3, 4), ref_fused_mat_mul),
    OpCase("FusedMatMul-transpose_a", "FusedMatMul", dense_inputs(3, 4, 2, transpose_a=True), ref_fused_mat_mul,
           attrs={"transpose_a": True, "activation": "Relu"}),
    OpCase("FusedMatMul-transpose_b", "FusedMatMul", dense_inputs(3, 4, 2, transpose_b=True), ref_fused_mat_mul,
           attrs={"transpose_b": True, "activation": "Tanh"}),
    OpCase("FusedMatMul-transpose_both", "FusedMatMul", dense_inputs(3, 4, 2, True, True), ref_fused_mat_mul,
           attrs={"transpose_a": True, "transpose_b": True, "activation": "Sigmoid"}),
    # Large enough for the CPU Relu's contiguous path, written into the product in place.
    OpCase("FusedMatMul-relu-large", "FusedMatMul", dense_inputs(64, 20, 128), ref_fused_mat_mul,
           attrs={"activation": "Relu"}, grad=False),
    OpCase("FusedMatMul-half", "FusedMatMul", dense_inputs(3, 4, 5), ref_fused_mat_mul,
           attrs={"activation": "Elu"}, dtypes=("float16",), grad=False),
    OpCase("FusedMatMul-empty", "FusedMatMul", dense_inputs(0, 4, 5), ref_fused_mat_mul,
           attrs={"activation": "Relu"}, grad=False),
]


def conv_rows(name: str, x: tuple[int, ...], w: tuple[int, ...], attrs: dict[str, Any], **kw: Any) -> list[OpCase]:
    """Conv2D and its two backprop ops on one geometry."""
    full = {"dilations": [1, 1, 1, 1], **attrs}
    fmt = full.get("data_format", "NHWC")
    x_nhwc = x if fmt == "NHWC" else (x[0], x[2], x[3], x[1])
    y_shape = np.shape(ref_conv2d(np.zeros(x), np.zeros(w), **full))
    return [
        OpCase(f"Conv2D-{name}", "Conv2D", lambda rng, dt: [randn(rng, dt, *x), randn(rng, dt, *w)], ref_conv2d,
               attrs=full, **kw),
        OpCase(f"Conv2DBackpropInput-{name}", "Conv2DBackpropInput",
               lambda rng, dt: [i32(*x), randn(rng, dt, *w), randn(rng, dt, *y_shape)], ref_conv2d_backprop_input,
               attrs=full, **kw),
        OpCase(f"Conv2DBackpropFilter-{name}", "Conv2DBackpropFilter",
               lambda rng, dt: [randn(rng, dt, *x), i32(*w), randn(rng, dt, *y_shape)], ref_conv2d_backprop_filter,
               attrs=full, **kw),
    ] if x_nhwc[3] == w[2] else []


def depthwise_as_conv(f: np.ndarray) -> np.ndarray:
    """A depthwise filter [kh, kw, c, m] as the ordinary convolution filter [kh, kw, c, c * m]
    it equals: input channel k feeds only its outputs k * m .. k * m + m - 1."""
    kh, kw, c, m = f.shape
    full = np.zeros((kh, kw, c, c * m), f.dtype)
    for k in range(c):
        full[:, :, k, k * m:(k + 1) * m] = f[:, :, k, :]
    return full


def ref_depthwise(x: np.ndarray, f: np.ndarray, **attrs: Any) -> np.ndarray:
    return ref_conv2d(x, depthwise_as_conv(f), **attrs)


def ref_depthwise_backprop_input(sizes: np.ndarray, f: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    return ref_conv2d_backprop_input(sizes, depthwise_as_conv(f), dy, **attrs)


def ref_depthwise_backprop_filter(x: np.ndarray, sizes: np.ndarray, dy: np.ndarray, **attrs: Any) -> np.ndarray:
    kh, kw, c, m = (int(v) for v in sizes)
    full = ref_conv2d_backprop_filter(x, np.array([kh, kw, c, c * m]), dy, **attrs)
    return np.stack([full[:, :, k, k * m:(k + 1) * m] for k in range(c)], axis=2)


def depthwise_rows(name: str, x: tuple[int, ...], w: tuple[int, ...], attrs: dict[str, Any], **kw: Any) -> list[OpCase]:
    """DepthwiseConv2dNative and its two backprop ops on one geometry."""
    full = {"dilations": [1, 1, 1, 1], **attrs}
    y_shape = np.shape(ref_depthwise(np.zeros(x), np.zeros(w), **full))
    return [
        OpCase(f"DepthwiseConv2dNative-{name}", "DepthwiseConv2dNative",
               lambda rng, dt: [randn(rng, dt, *x), randn(rng, dt, *w)], ref_depthwise, attrs=full, **kw),
        OpCase(f"DepthwiseConv2dNativeBackpropInput-{name}", "DepthwiseConv2dNativeBackpropInput",
               lambda rng, dt: [i32(*x), randn(rng, dt, *w), randn(rng, dt, *y_shape)], ref_depthwise_backprop_input,
               attrs=full, **kw),
        OpCase(f"DepthwiseConv2dNativeBackpropFilter-{name}", "DepthwiseConv2dNativeBackpropFilter",
               lambda rng, dt: [randn(rng, dt, *x), i32(*w), randn(rng, dt, *y_shape)], ref_depthwise_backprop_filter,
               attrs=full, **kw),
    ]


def ref_fused_conv2d(x: np.ndarray, w: np.ndarray, bias: np.ndarray, activation: str = "Identity", **attrs: Any) -> np.ndarray:
    return ref_fused_activation(ref_bias_add(ref_conv2d(x, w, **attrs), bias, attrs.get("data_format", "NHWC")), activation)


def fused_conv_row(name: str, x: tuple[int, ...], w: tuple[int, ...], attrs: dict[str, Any], **kw: Any) -> OpCase:
    channels = w[3]
    return OpCase(f"FusedConv2D-{name}", "FusedConv2D",
                  lambda rng, dt: [randn(rng, dt, *x), randn(rng, dt, *w), randn(rng, dt, channels)],
                  ref_fused_conv2d, attrs={"dilations": [1, 1, 1, 1], **attrs}, **kw)


CONV_CASES = [
    *[fused_conv_row(act.lower(), (2, 4, 4, 2), (3, 3, 2, 3),
                     {"strides": [1, 1, 1, 1], "padding": "SAME", "activation": act}) for act in FUSED_ACTIVATIONS],
    fused_conv_row("relu-valid-s2", (1, 6, 5, 2), (2, 2, 2, 3), {"strides": [1, 2, 2, 1], "padding": "VALID", "activation": "Relu"}),
    fused_conv_row("nchw-tanh", (2, 2, 4, 4), (3, 3, 2, 3),
                   {"strides": [1, 1, 1, 1], "padding": "SAME", "data_format": "NCHW", "activation": "Tanh"}),
    fused_conv_row("half", (1, 4, 4, 2), (3, 3, 2, 2), {"strides": [1, 1, 1, 1], "padding": "SAME", "activation": "Relu6"},
                   dtypes=("float16",), grad=False),
    # 4096 output rows of 4 channels: the cpu epilogue adds the bias tiled onto rows of 1024
    fused_conv_row("relu-many-rows", (4, 32, 32, 1), (3, 3, 1, 4), {"strides": [1, 1, 1, 1], "padding": "SAME", "activation": "Relu"},
                   grad=False),
    *depthwise_rows("valid-m2", (2, 4, 5, 3), (3, 3, 3, 2), {"strides": [1, 1, 1, 1], "padding": "VALID"}),
    *depthwise_rows("same-s2", (1, 6, 5, 4), (3, 3, 4, 1), {"strides": [1, 2, 2, 1], "padding": "SAME"}),
    *depthwise_rows("same-dilated-s21", (1, 6, 6, 2), (2, 3, 2, 2),
                    {"strides": [1, 2, 1, 1], "padding": "SAME", "dilations": [1, 1, 2, 1]}),
    *depthwise_rows("explicit", (1, 4, 4, 2), (3, 2, 2, 3),
                    {"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0]}),
    *depthwise_rows("nchw", (2, 3, 5, 4), (2, 2, 3, 2), {"strides": [1, 1, 1, 2], "padding": "SAME", "data_format": "NCHW"}),
    *depthwise_rows("empty-batch", (0, 4, 4, 2), (2, 2, 2, 2), {"strides": [1, 1, 1, 1], "padding": "VALID"}, grad=False),
    *conv_rows("valid", (2, 4, 4, 2), (3, 3, 2, 3), {"strides": [1, 1, 1, 1], "padding": "VALID"}),
    *conv_rows("same-s2-odd-total", (1, 6, 6, 2), (3, 3, 2, 2), {"strides": [1, 2, 2, 1], "padding": "SAME"}),
    *conv_rows("same-s21", (1, 5, 4, 2), (2, 3, 2, 2), {"strides": [1, 2, 1, 1], "padding": "SAME"}),
    *conv_rows("same-even-kernel", (1, 4, 5, 1), (2, 2, 1, 2), {"strides": [1, 1, 1, 1], "padding": "SAME"}),
    *conv_rows("same-dilated", (1, 5, 5, 2), (2, 2, 2, 2),
               {"strides": [1, 1, 1, 1], "padding": "SAME", "dilations": [1, 2, 2, 1]}),
    *conv_rows("valid-s2-dilated", (1, 7, 6, 1), (2, 2, 1, 2),
               {"strides": [1, 2, 2, 1], "padding": "VALID", "dilations": [1, 2, 1, 1]}),
    *conv_rows("valid-s3-ragged", (1, 7, 5, 1), (2, 2, 1, 1), {"strides": [1, 3, 2, 1], "padding": "VALID"}),
    *conv_rows("explicit", (1, 4, 4, 2), (3, 2, 2, 2),
               {"strides": [1, 2, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0]}),
    *conv_rows("explicit-s1-dilated", (2, 5, 4, 3), (3, 2, 3, 2),  # the input gradient as a stride-1 convolution
               {"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 2, 1, 0, 1, 0, 0],
                "dilations": [1, 1, 2, 1]}),
    *conv_rows("explicit-s1-wide-pad", (1, 3, 3, 2), (2, 2, 2, 2),  # padding beyond the kernel's extent
               {"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 3, 0, 1, 2, 0, 0]}),
    # More channels than the channel blocks of per-position kernels (OpenCL on CPU devices).
    *conv_rows("same-s2-wide", (1, 5, 6, 20), (3, 3, 20, 3), {"strides": [1, 2, 2, 1], "padding": "SAME"}),
    *conv_rows("nchw", (1, 2, 5, 4), (3, 2, 2, 3),
               {"strides": [1, 1, 2, 1], "padding": "SAME", "data_format": "NCHW"}),
    *conv_rows("nchw-explicit-dilated", (1, 1, 5, 5), (2, 2, 1, 2),
               {"strides": [1, 1, 1, 2], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 0, 0, 1, 1, 2, 0],
                "data_format": "NCHW", "dilations": [1, 1, 2, 1]}),
    OpCase("Conv2D-int32", "Conv2D", lambda rng, dt: [randn(rng, dt, 1, 4, 4, 2), randn(rng, dt, 2, 2, 2, 3)],
           ref_conv2d, attrs={"strides": [1, 1, 1, 1], "padding": "SAME"}, dtypes=("int32",), grad=False),
    OpCase("Conv2DBackpropInput-int32", "Conv2DBackpropInput",
           lambda rng, dt: [i32(1, 5, 5, 2), randn(rng, dt, 3, 3, 2, 3), randn(rng, dt, 1, 3, 3, 3)],
           ref_conv2d_backprop_input, attrs={"strides": [1, 2, 2, 1], "padding": "SAME"}, dtypes=("int32",), grad=False),
    OpCase("Conv2D-half", "Conv2D", lambda rng, dt: [randn(rng, dt, 1, 4, 4, 2), randn(rng, dt, 2, 2, 2, 3)],
           ref_conv2d, attrs={"strides": [1, 1, 1, 1], "padding": "SAME"}, dtypes=("float16",), grad=False,
           tol={"float16": (1e-2, 1e-2)}),
    OpCase("Conv2DBackpropInput-hw-sizes", "Conv2DBackpropInput",
           lambda rng, dt: [i32(5, 5), randn(rng, dt, 3, 3, 2, 3), randn(rng, dt, 2, 3, 3, 3)],
           lambda s, w, dy, **a: ref_conv2d_backprop_input(i32(2, 5, 5, 2), w, dy, **a),
           attrs={"strides": [1, 2, 2, 1], "padding": "SAME"}),
]


def pool_rows(name: str, x: tuple[int, ...], attrs: dict[str, Any], avg: bool = True) -> list[OpCase]:
    """MaxPool, MaxPoolGrad, MaxPoolGradGrad (and AvgPool, AvgPoolGrad) on one geometry."""
    y_shape = np.shape(ref_max_pool(np.zeros(x), **attrs))

    def with_output(rng: np.random.Generator, dt: str, grad_shape: tuple[int, ...]) -> list[np.ndarray]:
        orig = randn(rng, dt, *x)
        return [orig, ref_max_pool(orig, **attrs).astype(dt), randn(rng, dt, *grad_shape)]

    rows = [
        OpCase(f"MaxPool-{name}", "MaxPool", one(x), ref_max_pool, attrs=attrs),
        OpCase(f"MaxPoolGrad-{name}", "MaxPoolGrad", lambda rng, dt: with_output(rng, dt, y_shape), ref_max_pool_grad,
               attrs=attrs),
    ]
    rows.append(OpCase(f"MaxPoolGradGrad-{name}", "MaxPoolGradGrad", lambda rng, dt: with_output(rng, dt, x),
                       ref_max_pool_grad_grad, attrs=attrs))
    if avg:
        rows += [
            OpCase(f"AvgPool-{name}", "AvgPool", one(x), ref_avg_pool, attrs=attrs),
            OpCase(f"AvgPoolGrad-{name}", "AvgPoolGrad", lambda rng, dt: [i32(*x), randn(rng, dt, *y_shape)],
                   ref_avg_pool_grad, attrs=attrs),
        ]
    return rows


def argmax_pool_rows(name: str, x: tuple[int, ...], attrs: dict[str, Any]) -> list[OpCase]:
    """MaxPoolWithArgmax and its two gradients on one NHWC geometry; argmax from the reference."""
    y_shape = pool_out_shape(x, attrs)

    def with_argmax(rng: np.random.Generator, dt: str, grad_shape: tuple[int, ...]) -> list[np.ndarray]:
        orig = randn(rng, dt, *x)
        return [orig, randn(rng, dt, *grad_shape), ref_argmax(orig, attrs)]

    return [
        OpCase(f"MaxPoolWithArgmax-{name}", "MaxPoolWithArgmax", one(x), ref_max_pool_with_argmax, attrs=attrs),
        OpCase(f"MaxPoolGradWithArgmax-{name}", "MaxPoolGradWithArgmax", lambda rng, dt: with_argmax(rng, dt, y_shape),
               ref_max_pool_grad_with_argmax, attrs=attrs),
        OpCase(f"MaxPoolGradGradWithArgmax-{name}", "MaxPoolGradGradWithArgmax",
               lambda rng, dt: with_argmax(rng, dt, x), ref_max_pool_grad_grad_with_argmax, attrs=attrs),
    ]


def pool(k: tuple[int, int], s: tuple[int, int], padding: str, fmt: str = "NHWC", **extra: Any) -> dict[str, Any]:
    if fmt == "NHWC":
        return {"ksize": [1, *k, 1], "strides": [1, *s, 1], "padding": padding, **extra}
    return {"ksize": [1, 1, *k], "strides": [1, 1, *s], "padding": padding, "data_format": fmt, **extra}


POOL_CASES = [
    *pool_rows("valid-2x2", (2, 4, 4, 2), pool((2, 2), (2, 2), "VALID")),
    # Windows that tile the input (the CPU kernels' whole-rows path), with a VALID remainder and as SAME.
    *pool_rows("valid-2x2-remainder", (1, 5, 7, 3), pool((2, 2), (2, 2), "VALID"), avg=False),
    *pool_rows("same-2x3-tiled", (1, 4, 6, 2), pool((2, 3), (2, 3), "SAME"), avg=False),
    # Strides larger than the window: disjoint windows with rows and columns between them.
    *pool_rows("valid-k2s3-gaps", (1, 7, 8, 2), pool((2, 2), (3, 3), "VALID"), avg=False),
    *pool_rows("valid-k3s2", (1, 6, 5, 2), pool((3, 3), (2, 2), "VALID")),
    *pool_rows("same-k3s2", (1, 5, 5, 2), pool((3, 3), (2, 2), "SAME")),
    *pool_rows("same-k2s1", (1, 3, 4, 2), pool((2, 2), (1, 1), "SAME")),
    *pool_rows("same-k3s1x2", (2, 4, 5, 1), pool((3, 2), (1, 2), "SAME")),
    *pool_rows("nchw-same", (1, 2, 5, 4), pool((2, 3), (2, 2), "SAME", "NCHW")),
    *pool_rows("explicit", (1, 4, 4, 2), pool((2, 2), (2, 1), "EXPLICIT", explicit_paddings=[0, 0, 1, 0, 0, 1, 0, 0]),
               avg=False),
    # MaxPoolWithArgmax: tiling windows (the CPU kernel's tap-major path, with a VALID remainder),
    # overlapping and padded ones, gaps, the batch in the index or not, int32 indices.
    *argmax_pool_rows("valid-2x2", (2, 4, 4, 3), pool((2, 2), (2, 2), "VALID")),
    *argmax_pool_rows("valid-2x2-remainder-batch", (2, 5, 7, 3),
                      pool((2, 2), (2, 2), "VALID", include_batch_in_index=True)),
    *argmax_pool_rows("same-k3s2", (2, 5, 5, 2), pool((3, 3), (2, 2), "SAME")),
    *argmax_pool_rows("same-k2s1-batch-int32", (2, 3, 4, 2),
                      pool((2, 2), (1, 1), "SAME", include_batch_in_index=True, Targmax="int32")),
    *argmax_pool_rows("valid-k2s3-gaps", (1, 7, 8, 2), pool((2, 2), (3, 3), "VALID")),
    *argmax_pool_rows("same-2x3-tiled-int32", (1, 4, 6, 2), pool((2, 3), (2, 3), "SAME", Targmax="int32")),
    OpCase("MaxPoolWithArgmax-int32-ties", "MaxPoolWithArgmax",
           lambda rng, dt: [rng.integers(0, 2, (2, 4, 6, 3)).astype(dt)], ref_max_pool_with_argmax,
           attrs=pool((2, 2), (2, 2), "VALID"), dtypes=("int32", "int64"), grad=False),
    OpCase("MaxPoolWithArgmax-int32-ties-overlapping", "MaxPoolWithArgmax",
           lambda rng, dt: [rng.integers(0, 3, (1, 5, 5, 2)).astype(dt)], ref_max_pool_with_argmax,
           attrs=pool((3, 3), (2, 2), "SAME"), dtypes=("int32",), grad=False),
    OpCase("MaxPool-int32", "MaxPool", one((1, 4, 4, 2)), ref_max_pool, attrs=pool((2, 2), (1, 1), "SAME"),
           dtypes=("int32",), grad=False),
    OpCase("MaxPoolGrad-int32-ties", "MaxPoolGrad",
           lambda rng, dt: [rng.integers(0, 3, (1, 5, 5, 2)).astype(dt), np.zeros((1, 3, 3, 2), dt),
                            rng.integers(-4, 5, (1, 3, 3, 2)).astype(dt)],
           ref_max_pool_grad, attrs=pool((3, 3), (2, 2), "SAME"), dtypes=("int32",), grad=False),
    OpCase("MaxPoolGrad-int32-ties-tiled", "MaxPoolGrad",
           lambda rng, dt: [rng.integers(0, 2, (2, 4, 4, 3)).astype(dt), np.zeros((2, 2, 2, 3), dt),
                            rng.integers(-4, 5, (2, 2, 2, 3)).astype(dt)],
           ref_max_pool_grad, attrs=pool((2, 2), (2, 2), "VALID"), dtypes=("int32",), grad=False),
    OpCase("MaxPoolGradGrad-int32-ties", "MaxPoolGradGrad",
           lambda rng, dt: [rng.integers(0, 3, (1, 5, 5, 2)).astype(dt), np.zeros((1, 3, 3, 2), dt),
                            rng.integers(-4, 5, (1, 5, 5, 2)).astype(dt)],
           ref_max_pool_grad_grad, attrs=pool((3, 3), (2, 2), "SAME"), dtypes=("int32",), grad=False),
    OpCase("AvgPool-half", "AvgPool", one((1, 4, 4, 2)), ref_avg_pool, attrs=pool((3, 3), (2, 2), "SAME"),
           dtypes=("float16",), grad=False),
]

def batch_norm_ref(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, mean: np.ndarray, variance: np.ndarray,
                   epsilon: float = 1e-4, is_training: bool = True, **attrs: Any) -> tuple[np.ndarray, ...]:
    """TensorFlow's FusedBatchNormV3 in float64 (NHWC): y, the statistics (the variance
    Bessel-corrected), the batch mean and uncorrected variance, an empty reserve."""
    eps = float(np.float32(epsilon))
    if is_training:
        m, v = x.mean((0, 1, 2)), x.var((0, 1, 2))
        n = x.size // x.shape[-1]
        stats = (m, v * n / (n - 1), m, v)
    else:
        m, v = mean, variance
        stats = (m, v, m, v)
    return ((x - m) / np.sqrt(v + eps) * scale + offset, *stats, np.zeros(0))


BATCH_NORM_CASES = [
    OpCase("FusedBatchNormV3-training", "FusedBatchNormV3",
           lambda rng, dt: [randn(rng, dt, 2, 3, 3, 4), np.abs(randn(rng, "float32", 4)) + 0.5, randn(rng, "float32", 4),
                            np.zeros(0, np.float32), np.zeros(0, np.float32)],
           batch_norm_ref, attrs={"epsilon": 0.001}, dtypes=("float32",), grad=False),  # float32 only: FusedBatchNormGradV3's cases
    OpCase("FusedBatchNormV3-inference", "FusedBatchNormV3",
           lambda rng, dt: [randn(rng, dt, 2, 3, 3, 4), np.abs(randn(rng, "float32", 4)) + 0.5, randn(rng, "float32", 4),
                            randn(rng, "float32", 4), np.abs(randn(rng, "float32", 4)) + 0.5],
           batch_norm_ref, attrs={"epsilon": 0.01, "is_training": False}, dtypes=("float32",), grad=False),
]

def _resize_positions(in_size: int, out_size: int, align_corners: bool, half_pixel: bool, nearest: bool) -> list[float]:
    """The sample position of each output along one axis, by TensorFlow's definition
    (tf.image.resize's half-pixel centers; align_corners maps corner to corner)."""
    scale = (in_size - 1) / (out_size - 1) if align_corners and out_size > 1 else in_size / out_size
    scale = float(np.float32(scale))
    if half_pixel:
        return [(y + 0.5) * scale - (0.0 if nearest else 0.5) for y in range(out_size)]
    return [y * scale for y in range(out_size)]


def ref_resize_bilinear(x: np.ndarray, size: np.ndarray, align_corners: bool = False,
                        half_pixel_centers: bool = False) -> np.ndarray:
    n, h, w, c = x.shape
    oh, ow = (int(v) for v in size)
    out = np.zeros((n, oh, ow, c))
    xf = x.astype(np.float64)
    for i, py in enumerate(_resize_positions(h, oh, align_corners, half_pixel_centers, False)):
        y0, y1, fy = max(math.floor(py), 0), min(math.ceil(py), h - 1), py - math.floor(py)
        for j, px in enumerate(_resize_positions(w, ow, align_corners, half_pixel_centers, False)):
            x0, x1, fx = max(math.floor(px), 0), min(math.ceil(px), w - 1), px - math.floor(px)
            top = xf[:, y0, x0] * (1 - fx) + xf[:, y0, x1] * fx
            bottom = xf[:, y1, x0] * (1 - fx) + xf[:, y1, x1] * fx
            out[:, i, j] = top * (1 - fy) + bottom * fy
    return out.astype(np.float32)


def ref_resize_bilinear_grad(g: np.ndarray, original: np.ndarray, align_corners: bool = False,
                             half_pixel_centers: bool = False) -> np.ndarray:
    n, h, w, c = original.shape
    out = np.zeros(original.shape)
    for i, py in enumerate(_resize_positions(h, g.shape[1], align_corners, half_pixel_centers, False)):
        y0, y1, fy = max(math.floor(py), 0), min(math.ceil(py), h - 1), py - math.floor(py)
        for j, px in enumerate(_resize_positions(w, g.shape[2], align_corners, half_pixel_centers, False)):
            x0, x1, fx = max(math.floor(px), 0), min(math.ceil(px), w - 1), px - math.floor(px)
            for (r, cl), wgt in (((y0, x0), (1 - fy) * (1 - fx)), ((y0, x1), (1 - fy) * fx), ((y1, x0), fy * (1 - fx)),
                                 ((y1, x1), fy * fx)):
                out[:, r, cl] += g[:, i, j] * wgt
    return out.astype(original.dtype)


def _nearest(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> list[int]:
    pos = _resize_positions(in_size, out_size, align_corners, half_pixel, True)
    return [min(max(int(math.floor(p + 0.5) if align_corners else math.floor(p)), 0), in_size - 1) for p in pos]


def ref_resize_nearest(x: np.ndarray, size: np.ndarray, align_corners: bool = False,
                       half_pixel_centers: bool = False) -> np.ndarray:
    rows = _nearest(x.shape[1], int(size[0]), align_corners, half_pixel_centers)
    cols = _nearest(x.shape[2], int(size[1]), align_corners, half_pixel_centers)
    return x[:, rows][:, :, cols]


def ref_resize_nearest_grad(g: np.ndarray, size: np.ndarray, align_corners: bool = False,
                            half_pixel_centers: bool = False) -> np.ndarray:
    h, w = (int(v) for v in size)
    out = np.zeros((g.shape[0], h, w, g.shape[3]), g.dtype)
    rows = _nearest(h, g.shape[1], align_corners, half_pixel_centers)
    cols = _nearest(w, g.shape[2], align_corners, half_pixel_centers)
    for i, r in enumerate(rows):
        for j, cl in enumerate(cols):
            out[:, r, cl] += g[:, i, j]
    return out


#: ResizeBilinear computes in float32 whatever its input (values up to about 60 here).
_IN_FLOAT32 = {"float32": (1e-5, 5e-5), "float64": (1e-5, 5e-5), "int32": (1e-5, 5e-5), "uint8": (1e-5, 5e-5)}


def resize_rows(name: str, x: tuple[int, ...], size: tuple[int, int], attrs: dict[str, Any]) -> list[OpCase]:
    """The two resizes and their gradient ops on one geometry."""
    g = (x[0], size[0], size[1], x[3])
    ints = ("float32", "float64", "int32", "uint8")
    return [
        OpCase(f"ResizeBilinear-{name}", "ResizeBilinear", lambda rng, dt: [(randn(rng, dt, *x) * 20).astype(dt), i32(*size)],
               ref_resize_bilinear, attrs=attrs, dtypes=ints, grad=False, tol=_IN_FLOAT32),  # in float32: adjoint test below
        OpCase(f"ResizeBilinearGrad-{name}", "ResizeBilinearGrad",
               lambda rng, dt: [randn(rng, "float32", *g), np.zeros(x, dt)], ref_resize_bilinear_grad, attrs=attrs,
               grad=False, tol=_IN_FLOAT32),
        OpCase(f"ResizeNearestNeighbor-{name}", "ResizeNearestNeighbor", lambda rng, dt: [randn(rng, dt, *x), i32(*size)],
               ref_resize_nearest, attrs=attrs, dtypes=("float32", "float64", "int32", "uint8", "float16")),
        OpCase(f"ResizeNearestNeighborGrad-{name}", "ResizeNearestNeighborGrad",
               lambda rng, dt: [randn(rng, dt, *g), i32(*x[1:3])], ref_resize_nearest_grad, attrs=attrs,
               dtypes=("float32", "float64", "int32")),
    ]


def ref_layer_norm(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, epsilon: float = 1e-3) -> np.ndarray:
    xf = x.astype(np.float64)
    mean = xf.mean(-1, keepdims=True)
    return ((xf - mean) / np.sqrt(xf.var(-1, keepdims=True) + epsilon) * scale + offset).astype(x.dtype)


def ref_layer_norm_grad(dy: np.ndarray, x: np.ndarray, scale: np.ndarray, epsilon: float = 1e-3) -> tuple[np.ndarray, ...]:
    xf, d = x.astype(np.float64), dy.astype(np.float64)
    rstd = 1 / np.sqrt(xf.var(-1, keepdims=True) + epsilon)
    xhat = (xf - xf.mean(-1, keepdims=True)) * rstd
    g = d * scale
    dx = rstd * (g - g.mean(-1, keepdims=True) - xhat * (g * xhat).mean(-1, keepdims=True))
    lead = tuple(range(x.ndim - 1))
    return dx.astype(x.dtype), (d * xhat).sum(lead).astype(x.dtype), d.sum(lead).astype(x.dtype)


def _layer_norm_inputs(shape: tuple[int, ...]) -> Any:
    return lambda rng, dt: [randn(rng, dt, *shape), randn(rng, dt, shape[-1]), randn(rng, dt, shape[-1])]


LAYER_NORM_CASES = [
    OpCase("FusedLayerNorm-3d", "FusedLayerNorm", _layer_norm_inputs((2, 3, 5)), ref_layer_norm,
           dtypes=("float32", "float64", "float16"), tol={"float16": (2e-2, 2e-2)}),
    OpCase("FusedLayerNorm-1d-eps", "FusedLayerNorm", _layer_norm_inputs((7,)), ref_layer_norm, attrs={"epsilon": 0.5}),
    OpCase("FusedLayerNorm-wide", "FusedLayerNorm", _layer_norm_inputs((3, 300)), ref_layer_norm, grad=False),
    OpCase("FusedLayerNorm-empty", "FusedLayerNorm", _layer_norm_inputs((0, 4)), ref_layer_norm, grad=False),
    OpCase("FusedLayerNorm-rows-of-8", "FusedLayerNorm", _layer_norm_inputs((4, 2, 64)), ref_layer_norm),
    OpCase("FusedLayerNormGrad-rows-of-8", "FusedLayerNormGrad",
           lambda rng, dt: [randn(rng, dt, 6, 16), randn(rng, dt, 6, 16), randn(rng, dt, 16)], ref_layer_norm_grad,
           grad=False),
    OpCase("FusedLayerNormGrad-3d", "FusedLayerNormGrad",
           lambda rng, dt: [randn(rng, dt, 2, 3, 5), randn(rng, dt, 2, 3, 5), randn(rng, dt, 5)], ref_layer_norm_grad,
           grad=False, dtypes=("float32", "float64", "float16"), tol={"float16": (3e-2, 3e-2)}),
    OpCase("FusedLayerNormGrad-1d", "FusedLayerNormGrad",
           lambda rng, dt: [randn(rng, dt, 6), randn(rng, dt, 6), randn(rng, dt, 6)], ref_layer_norm_grad, grad=False),
    OpCase("FusedLayerNormGrad-empty", "FusedLayerNormGrad",
           lambda rng, dt: [randn(rng, dt, 0, 4), randn(rng, dt, 0, 4), randn(rng, dt, 4)], ref_layer_norm_grad,
           grad=False),
]


RESIZE_CASES = [
    *resize_rows("up", (2, 3, 4, 2), (5, 7), {}),
    *resize_rows("down-align", (1, 6, 5, 3), (4, 2), {"align_corners": True}),
    *resize_rows("half-pixel", (2, 4, 3, 1), (7, 5), {"half_pixel_centers": True}),
    *resize_rows("same-size", (1, 3, 3, 2), (3, 3), {}),
    *resize_rows("to-one", (1, 4, 5, 2), (1, 1), {"align_corners": True}),
]


CASES = ACTIVATION_CASES + SOFTMAX_CASES + BIAS_CASES + FUSED_CASES + CONV_CASES + POOL_CASES + BATCH_NORM_CASES + RESIZE_CASES + LAYER_NORM_CASES


test_values, test_shapes, test_gradients = optable.table_tests(CASES)


def test_every_op_has_rows() -> None:
    names = {"Relu", "ReluGrad", "Relu6", "Elu", "Selu", "Softplus", "Gelu", "GeluGrad", "Softmax", "SoftmaxGrad", "LogSoftmax", "SoftmaxCrossEntropyWithLogits",
             "SparseSoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyLoss", "BiasAdd", "BiasAddGrad", "FusedMatMul", "Conv2D", "Conv2DBackpropInput",
             "Conv2DBackpropFilter", "FusedConv2D", "MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "AvgPool", "AvgPoolGrad",
             "MaxPoolWithArgmax", "MaxPoolGradWithArgmax", "MaxPoolGradGradWithArgmax", "DepthwiseConv2dNative",
             "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter"}
    assert names <= {c.op for c in CASES}
    assert names <= {c.op for c in CASES if c.grad}


# ---------------------------------------------------------------- specific behaviour


@pytest.mark.parametrize("op", ["relu", "relu6"])
def test_relu_keeps_nan_and_clips_inf(op: str, backend: str) -> None:
    x = np.array([np.nan, -np.inf, -1.0, 0.0, 3.0, 7.0, np.inf], np.float32)
    top = np.inf if op == "relu" else 6.0
    out = getattr(ops, op)(x).numpy()
    np.testing.assert_array_equal(out, [np.nan, 0.0, 0.0, 0.0, 3.0, min(7.0, top), top])
    dense = ok.nn.Dense(3, 3, op, seed=0)
    h = dense(ok.tensor(np.array([[np.nan, 1.0, 1.0]], np.float32))).numpy()
    assert np.isnan(h).all()  # the fused epilogue keeps the nan too


def test_relu_grad_needs_matching_shapes_and_keeps_nan(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="'ReluGrad'.*same shape, got \\[2, 3\\] and \\[3\\]"):
        ops.relu_grad(np.ones((2, 3), np.float32), np.ones(3, np.float32))
    g = np.array([np.nan, 1.0, 2.0], np.float32)
    out = ops.relu_grad(g, np.array([-1.0, 0.0, 3.0], np.float32)).numpy()
    np.testing.assert_array_equal(out, [np.nan, 0.0, 2.0])


def test_max_pool_grad_ties_go_to_first_in_window(backend: str) -> None:
    x = np.ones((1, 3, 3, 1), np.float32)
    attrs = pool((2, 2), (1, 1), "VALID")
    y = ops.max_pool(x, **attrs)
    dx = ops.max_pool_grad(x, y, np.ones((1, 2, 2, 1), np.float32), **attrs).numpy()[0, :, :, 0]
    np.testing.assert_array_equal(dx, [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


@pytest.mark.parametrize("size, shape", [((2, 2), (3, 4, 6, 5)), ((2, 3), (2, 5, 7, 3)), ((3, 1), (2, 6, 2, 4))])
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_max_pool_grad_tiling_windows_with_relu_ties(
    size: tuple[int, int], shape: tuple[int, ...], data_format: str, backend: str
) -> None:
    # Windows that tile the input (a VALID remainder left out in the second case),
    # with Relu's zeros tying in many windows: the gradient goes to each window's
    # first maximum only.
    x = np.maximum(np.random.default_rng(1).standard_normal(shape), 0).astype(np.float32)
    if data_format == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    attrs = pool(size, size, "VALID", data_format)
    y = ops.max_pool(x, **attrs)
    np.testing.assert_array_equal(y.numpy(), ref_max_pool(x, **attrs))
    dy = np.random.default_rng(2).standard_normal(y.shape).astype(np.float32)
    dx = ops.max_pool_grad(x, y, dy, **attrs)
    np.testing.assert_array_equal(dx.numpy(), ref_max_pool_grad(x, y.numpy(), dy, **attrs))


@pytest.mark.parametrize("k, s, padding", [((2, 2), (2, 2), "VALID"), ((2, 2), (3, 3), "VALID"),
                                           ((2, 2), (2, 2), "SAME"), ((3, 3), (2, 2), "SAME")])
def test_max_pool_and_grad_over_many_channels(k: tuple[int, int], s: tuple[int, int], padding: str, backend: str) -> None:
    # 37 channels: two whole blocks and a part of the channel blocks that per-position
    # kernels loop over (OpenCL on CPU devices), with Relu's ties and a nan in the first
    # element of a window (which takes its gradient).
    rng = np.random.default_rng(3)
    x = np.maximum(rng.standard_normal((2, 5, 7, 37)), 0).astype(np.float32)
    x[0, 0, 0, 20] = np.nan
    attrs = pool(k, s, padding)
    y = ops.max_pool(x, **attrs)
    np.testing.assert_array_equal(y.numpy(), ref_max_pool(x, **attrs))
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = ops.max_pool_grad(x, y, dy, **attrs)  # overlapping windows sum in another order than the reference
    np.testing.assert_allclose(dx.numpy(), ref_max_pool_grad(x, y.numpy(), dy, **attrs), rtol=1e-6, atol=1e-6)


def test_max_pool_grad_nan_after_a_window_start_never_takes_the_gradient(backend: str) -> None:
    # TensorFlow's rule on every backend: a nan wins only as its window's first element.
    x = np.zeros((1, 2, 2, 20), np.float32)
    x[0, :, :, 19] = [[1.0, np.nan], [3.0, 2.0]]
    attrs = pool((2, 2), (2, 2), "VALID")
    y = ops.max_pool(x, **attrs)
    assert y.numpy()[0, 0, 0, 19] == 3.0  # MaxPool never picks a nan (the gradient rule differs)
    dx = ops.max_pool_grad(x, y, np.full(y.shape, 2.0, np.float32), **attrs).numpy()
    expect = np.zeros(x.shape, np.float32)
    expect[0, 0, 0, :19] = 2.0  # all-zero windows: the first position
    expect[0, 1, 0, 19] = 2.0  # 3.0, the first maximum after the window's start
    np.testing.assert_array_equal(dx, expect)


@pytest.mark.parametrize("strides", [(1, 1), (3, 3)])
def test_max_pool_grad_with_no_window_is_zeros(strides: tuple[int, int], backend: str) -> None:
    # A 3x3 VALID window does not fit a 2x2 input: no output, and a zero gradient
    # (overlapping and disjoint windows take different kernels on some backends).
    attrs = pool((3, 3), strides, "VALID")
    x = np.ones((2, 2, 2, 3), np.float32)
    y = ops.max_pool(x, **attrs)
    assert y.shape == (2, 0, 0, 3)
    dx = ops.max_pool_grad(x, y, np.zeros(y.shape, np.float32), **attrs)
    np.testing.assert_array_equal(dx.numpy(), np.zeros_like(x))


def test_cpu_max_pool_grad_with_an_orig_output_from_elsewhere_follows_the_input() -> None:
    # The tiled path finds each maximum by comparing with orig_output; an orig_output
    # that matches no value of a window sends it to the argmax of the input alone.
    attrs = pool((2, 2), (2, 2), "VALID")
    x = np.random.default_rng(3).standard_normal((2, 4, 4, 3)).astype(np.float32)
    y = np.random.default_rng(4).standard_normal((2, 2, 2, 3)).astype(np.float32)
    dy = np.random.default_rng(5).standard_normal(y.shape).astype(np.float32)
    with ok.use_backend("cpu"):
        dx = ops.max_pool_grad(x, y, dy, **attrs).numpy()
    np.testing.assert_array_equal(dx, ref_max_pool_grad(x, y, dy, **attrs))
    # Only some windows unmatched, with and without a gradient of their own: the
    # zero-gradient ones give zeros however their maximum is found.
    y_true = ref_max_pool(x, **attrs)
    for zero_unmatched in (True, False):
        y_mixed, dy_mixed = y_true.copy(), dy.copy()
        y_mixed[0, 1, 0, 2] = y_mixed[1, 0, 1, 0] = 1e6
        if zero_unmatched:
            dy_mixed[0, 1, 0, 2] = dy_mixed[1, 0, 1, 0] = 0
        with ok.use_backend("cpu"):
            dx = ops.max_pool_grad(x, y_mixed, dy_mixed, **attrs).numpy()
        np.testing.assert_array_equal(dx, ref_max_pool_grad(x, y_mixed, dy_mixed, **attrs))


@pytest.mark.parametrize("shape", [(1, 2, 2, 1), (1, 4, 4, 1), (2, 4, 4, 3)])
def test_max_pool_and_its_gradient_never_write_their_inputs(shape: tuple[int, ...], backend: str) -> None:
    # One window per image with one channel: the taps' reshape could be a view of the input.
    attrs = pool((2, 2), (2, 2), "VALID")
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    kept = x.copy()
    y = ops.max_pool(x, **attrs)
    dy = np.ones(y.shape, np.float32)
    dx = ops.max_pool_grad(x, y, dy, **attrs)
    np.testing.assert_array_equal(x, kept)
    np.testing.assert_array_equal(y.numpy(), ref_max_pool(kept, **attrs))
    np.testing.assert_array_equal(dx.numpy(), ref_max_pool_grad(kept, y.numpy(), dy, **attrs))


def test_cpu_max_pool_grad_nan_rule_is_the_same_on_both_paths() -> None:
    # A nan never takes the gradient from an earlier position; one in the first
    # position keeps it (the comparison is "greater than the best so far").
    attrs = pool((2, 2), (2, 2), "VALID")
    x = np.array([[1.0, np.nan], [3.0, 2.0]], np.float32).reshape(1, 2, 2, 1)
    first = np.array([[np.nan, 5.0], [3.0, 2.0]], np.float32).reshape(1, 2, 2, 1)
    with ok.use_backend("cpu"):
        for data, expected in ((x, [[0, 0], [1, 0]]), (first, [[1, 0], [0, 0]])):
            dx = ops.max_pool_grad(data, ops.max_pool(data, **attrs), np.ones((1, 1, 1, 1), np.float32), **attrs)
            np.testing.assert_array_equal(dx.numpy()[0, :, :, 0], expected)
        for bad in (np.nan, np.inf):  # a nan or inf gradient reaches the maximum only
            dy = np.full((1, 1, 1, 1), bad, np.float32)
            dx = ops.max_pool_grad(x, ops.max_pool(x, **attrs), dy, **attrs).numpy()[0, :, :, 0]
            np.testing.assert_array_equal(dx, [[0, 0], [bad, 0]])
        row = pool((1, 3), (1, 3), "VALID")  # bfloat16 (numpy kind "V") follows the same rule
        for dt in ("float32", "bfloat16"):
            data = np.array([1.0, np.nan, 5.0], np.float32).astype(ok.as_dtype(dt).np).reshape(1, 1, 3, 1)
            dx = ops.max_pool_grad(data, ops.max_pool(data, **row), np.ones((1, 1, 1, 1), data.dtype), **row)
            np.testing.assert_array_equal(dx.numpy().astype(np.float32).ravel(), [0, 0, 1])


def test_max_pool_same_padding_never_wins(backend: str) -> None:
    x = -np.arange(1, 10, dtype=np.float32).reshape(1, 3, 3, 1) * 100
    attrs = pool((3, 3), (2, 2), "SAME")
    np.testing.assert_array_equal(ops.max_pool(x, **attrs).numpy().ravel(), [-100, -200, -400, -500])
    dx = ops.max_pool_grad(x, ops.max_pool(x, **attrs), np.ones((1, 2, 2, 1), np.float32), **attrs).numpy()
    np.testing.assert_array_equal(dx[0, :, :, 0], [[1, 1, 0], [1, 1, 0], [0, 0, 0]])


def test_avg_pool_same_counts_only_inside(backend: str) -> None:
    x = np.ones((1, 3, 3, 1), np.float64)
    out = ops.avg_pool(x, **pool((3, 3), (1, 1), "SAME")).numpy()
    np.testing.assert_array_equal(out, np.ones_like(x))


def test_conv2d_nchw_matches_nhwc(backend: str) -> None:
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 5, 6, 3)), rng.standard_normal((3, 2, 3, 4))
    nhwc = ops.conv2d(x, w, strides=[1, 2, 1, 1], padding="SAME", dilations=[1, 1, 2, 1]).numpy()
    nchw = ops.conv2d(x.transpose(0, 3, 1, 2), w, strides=[1, 1, 2, 1], padding="SAME", dilations=[1, 1, 1, 2],
                      data_format="NCHW").numpy()
    np.testing.assert_allclose(nchw.transpose(0, 2, 3, 1), nhwc, rtol=1e-12)


def test_digits_sized_conv_is_fast_enough_to_train(backend: str) -> None:
    """A batch-64 8x8 forward+backward through the conv kernels: shapes and dtypes line up."""
    rng = np.random.default_rng(0)
    x = ok.tensor(rng.standard_normal((64, 8, 8, 8)).astype(np.float32))
    w = ok.tensor(rng.standard_normal((3, 3, 8, 16)).astype(np.float32))
    with GradientTape() as tape:
        tape.watch([x, w])
        y = ops.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
        p = ops.max_pool(y, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    dx, dw = tape.gradient(p, [x, w])
    assert y.shape == (64, 8, 8, 16) and p.shape == (64, 4, 4, 16)
    assert dx.shape == x.shape and dw.shape == w.shape and dw.dtype == ok.float32


# ---------------------------------------------------------------- second order


def grad_of(f: Any, wrt: int, seed_with_output: bool = True) -> Any:
    """x -> d(0.5 * |f(x)|^2)/dx[wrt], written as a VJP seeded with f(x) itself."""

    def g(*xs: ok.Tensor) -> ok.Tensor:
        with GradientTape() as tape:
            tape.watch(list(xs))
            y = f(*xs)
        return tape.gradient(y, xs[wrt], output_gradients=y)  # type: ignore[no-any-return]

    return g


CONV_ATTRS = {"strides": [1, 2, 1, 1], "padding": "SAME", "dilations": [1, 1, 2, 1]}


@pytest.mark.parametrize("wrt", [0, 1], ids=["input", "filter"])
def test_conv2d_second_order(wrt: int, backend: str) -> None:
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((1, 4, 4, 2)), rng.standard_normal((2, 2, 2, 2))
    f = grad_of(lambda a, b: ops.conv2d(a, b, **CONV_ATTRS), wrt)
    assert compute_gradient_error(f, [x, w]) < 1e-6


@pytest.mark.parametrize("op", ["max_pool", "avg_pool"])
def test_pool_second_order(op: str, backend: str) -> None:
    x = np.random.default_rng(3).standard_normal((1, 5, 5, 2))
    attrs = pool((3, 3), (2, 2), "SAME")
    f = grad_of(lambda a: getattr(ops, op)(a, **attrs), 0)
    assert compute_gradient_error(f, [x]) < 1e-6


def test_max_pool_third_order_through_grad_grad(backend: str) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 4, 4, 1))
    attrs = pool((2, 2), (1, 1), "VALID")
    y = ops.max_pool(x, **attrs)
    f = grad_of(lambda g: ops.max_pool_grad(x, y, g, **attrs), 0)
    assert compute_gradient_error(f, [rng.standard_normal((1, 3, 3, 1))]) < 1e-6


def test_bias_add_grad_second_order(backend: str) -> None:
    rng = np.random.default_rng(5)
    f = grad_of(lambda v, b: ops.bias_add(v, b, data_format="NCHW"), 1)
    assert compute_gradient_error(f, [rng.standard_normal((2, 3, 2)), rng.standard_normal(3)]) < 1e-6


@pytest.mark.parametrize("op", ["elu", "selu", "softplus", "softmax", "log_softmax"])
def test_activation_second_order(op: str, backend: str) -> None:
    x = np.random.default_rng(6).standard_normal((2, 3)) * 2
    assert compute_gradient_error(grad_of(getattr(ops, op), 0), [x]) < 1e-6


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_xent_second_order(sparse: bool, backend: str) -> None:
    rng = np.random.default_rng(7)
    logits = rng.standard_normal((2, 3))
    labels = np.array([2, 0], np.int64) if sparse else ref_softmax(rng.standard_normal((2, 3)))
    op = ops.sparse_softmax_cross_entropy_with_logits if sparse else ops.softmax_cross_entropy_with_logits
    f = grad_of(lambda a: op(a, labels).loss, 0)
    assert compute_gradient_error(f, [logits]) < 1e-6


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_sparse_xent_loss_second_order(reduction: str, backend: str) -> None:
    logits = np.random.default_rng(7).standard_normal((3, 4))
    labels = np.array([2, 0, 3], np.int64)
    f = grad_of(lambda a: ops.sparse_softmax_cross_entropy_loss(a, labels, reduction=reduction).loss, 0)
    assert compute_gradient_error(f, [logits]) < 1e-6


def test_sparse_xent_loss_is_the_mean_of_the_per_example_op(backend: str) -> None:
    # Values and gradients of the fused loss against SparseSoftmaxCrossEntropyWithLogits + Mean,
    # through a tape, with an explicit output gradient (not the tape's unit seed) too.
    rng = np.random.default_rng(9)
    logits = ok.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    labels = ok.tensor(rng.integers(0, 5, 6))
    for seed in (None, ok.tensor(np.float32(2.5))):
        with GradientTape() as tape:
            tape.watch(logits)
            fused = ops.sparse_softmax_cross_entropy_loss(logits, labels).loss
            composed = ops.mean(ops.sparse_softmax_cross_entropy_with_logits(logits, labels).loss, [0])
        assert fused.shape == () and fused.backend == backend
        np.testing.assert_allclose(fused.numpy(), composed.numpy(), rtol=1e-6)
        (g_fused,) = tape.gradient(fused, [logits], output_gradients=seed) if seed is not None else tape.gradient(fused, [logits])
        with GradientTape() as tape2:
            tape2.watch(logits)
            composed = ops.mean(ops.sparse_softmax_cross_entropy_with_logits(logits, labels).loss, [0])
        (g_composed,) = tape2.gradient(composed, [logits], output_gradients=seed)
        np.testing.assert_allclose(g_fused.numpy(), g_composed.numpy(), rtol=1e-5, atol=1e-7)


def test_sparse_xent_loss_gradient_runs_no_op_for_the_seed(backend: str) -> None:
    # The tape seeds a scalar loss with its shared unit, so the gradient is the kernel's
    # backprop output itself; an output gradient of 2 costs one Mul.
    rng = np.random.default_rng(10)
    logits = ok.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    labels = ok.tensor(np.array([0, 2, 1, 1]))
    for seed, expected in ((None, {}), (ok.tensor(np.float32(2.0)), {"Mul": 1})):
        with GradientTape() as tape:
            tape.watch(logits)
            loss, backprop = ops.sparse_softmax_cross_entropy_loss(logits, labels)
        with ok.profile() as prof:
            (g,) = tape.gradient(loss, [logits], output_gradients=seed)
        assert {op: calls for _, op, calls, _, _ in prof.rows()} == expected
        factor = 1.0 if seed is None else 2.0
        np.testing.assert_allclose(g.numpy(), factor * backprop.numpy(), rtol=1e-6)


def test_sparse_xent_loss_hessian_vector_product_through_the_unit_seed(backend: str) -> None:
    # The inner gradient (default seed: backprop returned as is) differentiated again by an
    # outer tape must match the per-example op + Mean composition.
    rng = np.random.default_rng(12)
    logits = ok.tensor(rng.standard_normal((3, 4)))
    labels = ok.tensor(np.array([1, 0, 3]))
    v = ok.tensor(rng.standard_normal((3, 4)))

    def hvp(loss_fn: Any) -> np.ndarray:
        with GradientTape() as outer:
            outer.watch(logits)
            with GradientTape() as inner:
                inner.watch(logits)
                loss = loss_fn()
            (g,) = inner.gradient(loss, [logits])
            dot = ops.sum(ops.mul(g, v), [0, 1])
        (h,) = outer.gradient(dot, [logits])
        return h.numpy()  # type: ignore[no-any-return]

    fused = hvp(lambda: ops.sparse_softmax_cross_entropy_loss(logits, labels).loss)
    composed = hvp(lambda: ops.mean(ops.sparse_softmax_cross_entropy_with_logits(logits, labels).loss, [0]))
    assert np.abs(composed).max() > 1e-3
    np.testing.assert_allclose(fused, composed, rtol=1e-6, atol=1e-9)


def test_sparse_xent_loss_of_an_empty_batch(backend: str) -> None:
    out = ops.sparse_softmax_cross_entropy_loss(np.zeros((0, 3), np.float32), np.zeros(0, np.int64))
    assert np.isnan(out.loss.numpy()) and out.backprop.shape == (0, 3)
    total = ops.sparse_softmax_cross_entropy_loss(np.zeros((0, 3), np.float32), np.zeros(0, np.int64), reduction="sum")
    assert total.loss.numpy() == 0


def test_sparse_xent_loss_generic_kernel_is_the_composition(backend: str) -> None:
    (generic,) = ok.kernels.kernels_for("SparseSoftmaxCrossEntropyLoss", "*")
    rng = np.random.default_rng(11)
    logits, labels = rng.standard_normal((5, 4)).astype(np.float32), rng.integers(0, 4, 5)
    for reduction in ("mean", "sum"):
        loss, backprop = generic.impl(ok.tensor(logits), ok.tensor(labels), reduction=reduction, T=ok.float32)
        assert loss.backend == backend
        expected = ops.sparse_softmax_cross_entropy_loss(logits, labels, reduction=reduction)
        np.testing.assert_allclose(loss.numpy(), expected.loss.numpy(), rtol=1e-6)
        np.testing.assert_allclose(backprop.numpy(), expected.backprop.numpy(), rtol=1e-6, atol=1e-7)


# ---------------------------------------------------------------- errors

X4 = np.zeros((1, 4, 4, 2), np.float32)
W4 = np.zeros((2, 2, 2, 3), np.float32)


@pytest.mark.parametrize(
    "attrs,match",
    [
        ({"strides": [1, 1, 1], "padding": "SAME"}, "must specify 4 dimensions"),
        ({"strides": [2, 1, 1, 1], "padding": "SAME"}, "batch and depth"),
        ({"strides": [1, 0, 1, 1], "padding": "SAME"}, "must be positive"),
        ({"strides": [1, 1, 1, 1], "padding": "SAME", "dilations": [1, 1, 1, 2]}, "batch and depth"),
        ({"strides": [1, 1, 1, 1], "padding": "FULL"}, "'padding'"),
        ({"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 1]}, "8 values"),
        ({"strides": [1, 1, 1, 1], "padding": "EXPLICIT", "explicit_paddings": [1, 0, 0, 0, 0, 0, 0, 0]}, "batch or depth"),
        ({"strides": [1, 1, 1, 1], "padding": "VALID", "explicit_paddings": [0] * 8}, "must be empty"),
        ({"strides": [1, 1, 1, 1], "padding": "VALID", "dilations": [1, 5, 1, 1]}, "negative"),
    ],
)
def test_conv2d_bad_attrs(attrs: dict[str, Any], match: str, backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"op 'Conv2D'.*{match}"):
        ops.conv2d(X4, W4, **attrs)


def test_conv2d_bad_attrs_in_shape_fn() -> None:
    with pytest.raises(ShapeError, match="op 'Conv2D'.*must specify 4 dimensions"):
        ok.infer_shapes("Conv2D", [(1, 4, 4, 2), (2, 2, 2, 3)], {"strides": [1, 1], "padding": "SAME"})


def test_conv2d_mismatched_channels(backend: str) -> None:
    w = np.zeros((2, 2, 3, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match="op 'Conv2D'.*depth 2 must equal the filter's in_channels 3"):
        ops.conv2d(X4, w, strides=[1, 1, 1, 1], padding="SAME")
    with pytest.raises(ShapeError, match="op 'Conv2D'"):
        ok.infer_shapes("Conv2D", [(1, 4, 4, 2), (2, 2, 3, 3)], {"strides": [1, 1, 1, 1], "padding": "SAME"})


def test_conv2d_rank(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'Conv2D'.*'input' must be 4-D"):
        ops.conv2d(np.zeros((4, 4, 2), np.float32), W4, strides=[1, 1, 1, 1], padding="SAME")
    with pytest.raises(ShapeError, match="op 'Conv2D'.*rank 4"):
        ok.infer_shapes("Conv2D", [(4, 4, 2), (2, 2, 2, 3)], {"strides": [1, 1, 1, 1], "padding": "SAME"})


def test_conv2d_shape_fn_partial() -> None:
    attrs = {"strides": [1, 2, 2, 1], "padding": "SAME"}
    (s,) = ok.infer_shapes("Conv2D", [(None, 5, None, 2), (3, 3, None, 4)], attrs)
    assert s.as_list() == [None, 3, None, 4]
    (s,) = ok.infer_shapes("Conv2D", [None, (3, 3, 2, 4)], attrs)
    assert s.as_list() == [None, None, None, 4]
    (s,) = ok.infer_shapes("Conv2D", [(1, 2, 7, 7), (3, 3, 2, 4)], {**attrs, "strides": [1, 1, 2, 3], "data_format": "NCHW"})
    assert s.as_list() == [1, 4, 4, 3]


def test_conv2d_backprop_shape_errors(backend: str) -> None:
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID"}
    with pytest.raises(InvalidArgumentError, match="op 'Conv2DBackpropInput'.*'out_backprop' must have shape"):
        ops.conv2d_backprop_input(i32(1, 4, 4, 2), W4, np.zeros((1, 4, 4, 3), np.float32), **attrs)
    with pytest.raises(InvalidArgumentError, match="op 'Conv2DBackpropInput'.*'input_sizes'"):
        ops.conv2d_backprop_input(i32(1, 4, 4), W4, np.zeros((1, 3, 3, 3), np.float32), **attrs)
    with pytest.raises(InvalidArgumentError, match="op 'Conv2DBackpropFilter'.*in_channels"):
        ops.conv2d_backprop_filter(X4, i32(2, 2, 5, 3), np.zeros((1, 3, 3, 3), np.float32), **attrs)


@pytest.mark.parametrize(
    "op,attrs,error,match",
    [
        ("max_pool", {"ksize": [1, 2, 2], "strides": [1, 1, 1, 1], "padding": "VALID"}, InvalidArgumentError,
         "'ksize' must have at least 4"),
        ("max_pool", {"ksize": [1, 2, 2, 2], "strides": [1, 1, 1, 1], "padding": "VALID"}, InvalidArgumentError,
         "batch and depth"),
        ("max_pool", {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID", "data_format": "NCHW_VECT_C"},
         InvalidArgumentError, "NCHW_VECT_C"),
        ("avg_pool", {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "EXPLICIT"}, InvalidArgumentError,
         "'padding'"),
        ("avg_pool", {"ksize": [1, 6, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}, InvalidArgumentError,
         "negative"),
        ("avg_pool", {"ksize": [1, 2, 2, 1], "strides": [2, 1, 1, 1], "padding": "VALID"}, InvalidArgumentError,
         "batch and depth"),
    ],
)
def test_pool_bad_attrs(op: str, attrs: dict[str, Any], error: type[Exception], match: str, backend: str) -> None:
    name = "MaxPool" if op == "max_pool" else "AvgPool"
    with pytest.raises(error, match=f"op '{name}'.*{match}"):
        getattr(ops, op)(X4, **attrs)


def test_pool_grad_shape_errors(backend: str) -> None:
    attrs = pool((2, 2), (2, 2), "VALID")
    with pytest.raises(InvalidArgumentError, match="op 'MaxPoolGrad'.*'grad' must have shape"):
        ops.max_pool_grad(X4, np.zeros((1, 2, 2, 2), np.float32), np.zeros((1, 3, 3, 2), np.float32), **attrs)
    with pytest.raises(InvalidArgumentError, match="op 'AvgPoolGrad'.*'grad' must have shape"):
        ops.avg_pool_grad(i32(1, 4, 4, 2), np.zeros((1, 2, 2, 3), np.float32), **attrs)
    with pytest.raises(ShapeError, match="op 'MaxPoolGrad'"):
        ok.infer_shapes("MaxPoolGrad", [(1, 4, 4, 2), (1, 2, 2, 2), (1, 3, 3, 2)], attrs)


@pytest.mark.parametrize("label_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("label", [3, -1, -(2**31)])
def test_sparse_xent_out_of_range_label(label: int, label_dtype: Any, backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"op 'SparseSoftmaxCrossEntropyWithLogits'.*{label}.*\[0, 3\)"):
        ops.sparse_softmax_cross_entropy_with_logits(np.zeros((2, 3), np.float32), np.array([0, label], label_dtype))


@pytest.mark.parametrize("label", [3, -1])
def test_sparse_xent_loss_out_of_range_label(label: int, backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"op 'SparseSoftmaxCrossEntropyLoss'.*{label}.*\[0, 3\)"):
        ops.sparse_softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), np.array([0, label]))


def test_sparse_xent_loss_errors(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'SparseSoftmaxCrossEntropyLoss'.*labels 1-D"):
        ops.sparse_softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), np.zeros(3, np.int64))
    with pytest.raises(InvalidArgumentError, match="op 'SparseSoftmaxCrossEntropyLoss'.*'reduction' must be one of"):
        ops.sparse_softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), np.zeros(2, np.int64), reduction="none")
    with pytest.raises(OpTypeError, match="SparseSoftmaxCrossEntropyLoss"):
        ops.sparse_softmax_cross_entropy_loss(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))
    with pytest.raises(ShapeError, match="op 'SparseSoftmaxCrossEntropyLoss'"):
        ok.infer_shapes("SparseSoftmaxCrossEntropyLoss", [(2, 3), (3,)])
    loss, backprop = ok.infer_shapes("SparseSoftmaxCrossEntropyLoss", [(None, 3), (4,)])
    assert loss.as_list() == [] and backprop.as_list() == [4, 3]


def test_sparse_xent_labels_must_be_integers(backend: str) -> None:
    with pytest.raises(OpTypeError, match="SparseSoftmaxCrossEntropyWithLogits"):
        ops.sparse_softmax_cross_entropy_with_logits(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))


def test_xent_shape_errors(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'SparseSoftmaxCrossEntropyWithLogits'.*labels 1-D"):
        ops.sparse_softmax_cross_entropy_with_logits(np.zeros((2, 3), np.float32), np.zeros(3, np.int64))
    with pytest.raises(InvalidArgumentError, match="op 'SoftmaxCrossEntropyWithLogits'.*broadcastable"):
        ops.softmax_cross_entropy_with_logits(np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32))
    with pytest.raises(ShapeError, match="op 'SparseSoftmaxCrossEntropyWithLogits'"):
        ok.infer_shapes("SparseSoftmaxCrossEntropyWithLogits", [(2, 3), (3,)])


def test_bias_add_errors(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'BiasAdd'.*bias must be 1-D with size"):
        ops.bias_add(np.zeros((2, 3), np.float32), np.zeros(2, np.float32))
    with pytest.raises(InvalidArgumentError, match="op 'BiasAdd'.*at least 2-D"):
        ops.bias_add(np.zeros(3, np.float32), np.zeros(3, np.float32))
    with pytest.raises(ShapeError, match="op 'BiasAdd'"):
        ok.infer_shapes("BiasAdd", [(2, 3, 4), (3,)])
    (s,) = ok.infer_shapes("BiasAdd", [(2, 3, 4), (3,)], {"data_format": "NCHW"})
    assert s.as_list() == [2, 3, 4]


def test_fused_mat_mul_errors(backend: str) -> None:
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(InvalidArgumentError, match=r"op 'FusedMatMul'.*bias must be 1-D with size .*\(4\), got shape \[3\]"):
        ops.fused_mat_mul(a, b, np.ones(3, np.float32))
    with pytest.raises(InvalidArgumentError, match=r"op 'FusedMatMul'.*got shape \[1, 4\]"):
        ops.fused_mat_mul(a, b, np.ones((1, 4), np.float32))
    with pytest.raises(InvalidArgumentError, match=r"op 'FusedMatMul': Matrix size-incompatible: In\[0\]: \[2, 3\], In\[1\]: \[4, 3\]"):
        ops.fused_mat_mul(a, b.T, np.ones(4, np.float32))
    with pytest.raises(InvalidArgumentError, match="op 'FusedMatMul'.*inputs must be matrices"):
        ops.fused_mat_mul(a[0], b, np.ones(4, np.float32))
    with pytest.raises(InvalidArgumentError, match="op 'FusedMatMul'.*'activation' must be one of"):
        ops.fused_mat_mul(a, b, np.ones(4, np.float32), activation="Gelu")
    with pytest.raises(OpTypeError, match="op 'FusedMatMul'"):
        ops.fused_mat_mul(a.astype(np.int32), b.astype(np.int32), np.ones(4, np.int32))
    with pytest.raises(ShapeError, match="op 'FusedMatMul'"):
        ok.infer_shapes("FusedMatMul", [(2, 3), (3, 4), (3,)])
    (s,) = ok.infer_shapes("FusedMatMul", [(3, 2), (4, 3), (4,)], {"transpose_a": True, "transpose_b": True})
    assert s.as_list() == [2, 4]


@pytest.mark.parametrize("activation", FUSED_ACTIVATIONS)
def test_fused_mat_mul_generic_kernel_is_the_composition(activation: str, backend: str) -> None:
    # What a backend without a FusedMatMul kernel runs: MatMul, BiasAdd and the activation op.
    (generic,) = ok.kernels.kernels_for("FusedMatMul", "*")
    a, b, bias = dense_inputs(5, 3, 4, transpose_b=True)(np.random.default_rng(1), "float32")
    tensors = [ok.tensor(v) for v in (a, b, bias)]
    out = generic.impl(*tensors, transpose_a=False, transpose_b=True, activation=activation, T=ok.float32)
    assert out.backend == backend
    fused = ops.fused_mat_mul(a, b, bias, transpose_b=True, activation=activation)
    np.testing.assert_allclose(out.numpy(), fused.numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("activation", [None, "relu", "tanh", "softplus"])
def test_dense_runs_one_fused_op_with_the_unfused_values_and_gradients(activation: str | None, backend: str) -> None:
    rng = np.random.default_rng(2)
    x = ok.tensor(rng.standard_normal((6, 5)).astype(np.float32))
    layer = ok.nn.Dense(5, 3, activation, seed=3)
    with ok.profile() as prof, GradientTape() as tape:
        y = layer(x)
        loss = ops.sum(ops.mul(y, y), [0, 1])
    fused_grads = tape.gradient(loss, layer.variables)
    counts = {op: calls for _, op, calls, _, _ in prof.rows()}
    if activation == "softplus":  # not one FusedMatMul offers: three ops
        assert "FusedMatMul" not in counts and counts["MatMul"] == 1 and counts["Softplus"] == 1
    else:
        assert counts["FusedMatMul"] == 1 and "BiasAdd" not in counts

    with GradientTape() as tape:
        ref = ops.bias_add(ops.mat_mul(x, layer.kernel), layer.bias)
        ref = getattr(ops, activation)(ref) if activation else ref
        ref_loss = ops.sum(ops.mul(ref, ref), [0, 1])
    ref_grads = tape.gradient(ref_loss, layer.variables)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    for g, r in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-6)


def test_fused_mat_mul_gradient_skips_what_the_tape_does_not_need(backend: str) -> None:
    rng = np.random.default_rng(3)
    x = ok.tensor(rng.standard_normal((4, 3)).astype(np.float32))  # a constant: no gradient wanted
    layer = ok.nn.Dense(3, 2, "relu", seed=0)
    with GradientTape() as tape:
        y = layer(x)
    with ok.profile() as prof:
        gk, gb = tape.gradient(y, layer.variables)
    counts = {op: calls for _, op, calls, _, _ in prof.rows()}
    assert counts["MatMul"] == 1 and counts["BiasAddGrad"] == 1 and counts["ReluGrad"] == 1
    mask = (x.numpy() @ layer.kernel.numpy() + layer.bias.numpy()) > 0
    np.testing.assert_allclose(gk.numpy(), x.numpy().T @ mask.astype(np.float32), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb.numpy(), mask.sum(0).astype(np.float32), rtol=1e-6, atol=0)


@pytest.mark.parametrize("activation", FUSED_ACTIVATIONS)
def test_fused_conv2d_generic_kernel_is_the_composition(activation: str, backend: str) -> None:
    (generic,) = ok.kernels.kernels_for("FusedConv2D", "*")
    rng = np.random.default_rng(3)
    x, w, b = randn(rng, "float32", 2, 5, 5, 2), randn(rng, "float32", 3, 3, 2, 4), randn(rng, "float32", 4)
    attrs = {"strides": [1, 2, 1, 1], "padding": "SAME", "activation": activation}
    out = generic.impl(*[ok.tensor(v) for v in (x, w, b)], data_format="NHWC", T=ok.float32, **attrs)
    assert out.backend == backend
    np.testing.assert_allclose(out.numpy(), ops.fused_conv2d(x, w, b, **attrs).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activation", [None, "relu", "sigmoid", "softplus"])
def test_conv2d_layer_runs_one_fused_op_with_the_unfused_values_and_gradients(activation: str | None, backend: str) -> None:
    rng = np.random.default_rng(4)
    x = ok.tensor(rng.standard_normal((2, 5, 5, 3)).astype(np.float32))
    layer = ok.nn.Conv2D(3, 4, 3, strides=2, activation=activation, seed=5)
    with ok.profile() as prof, GradientTape() as tape:
        y = layer(x)
        loss = ops.sum(ops.mul(y, y), [0, 1, 2, 3])
    fused_grads = tape.gradient(loss, layer.variables)
    counts = {op: calls for _, op, calls, _, _ in prof.rows()}
    if activation == "softplus":  # not one FusedConv2D offers: three ops
        assert "FusedConv2D" not in counts and counts["Conv2D"] == 1 and counts["Softplus"] == 1
    else:
        assert counts["FusedConv2D"] == 1 and "BiasAdd" not in counts and "Conv2D" not in counts
        assert "Conv2DBackpropInput" not in counts  # the layer's input needs no gradient here

    with GradientTape() as tape:
        ref = ops.bias_add(ops.conv2d(x, layer.kernel, strides=[1, 2, 2, 1], padding="SAME"), layer.bias)
        ref = getattr(ops, activation)(ref) if activation else ref
        ref_loss = ops.sum(ops.mul(ref, ref), [0, 1, 2, 3])
    ref_grads = tape.gradient(ref_loss, layer.variables)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-6, atol=1e-6)
    for g, r in zip(fused_grads, ref_grads):
        np.testing.assert_allclose(g.numpy(), r.numpy(), rtol=1e-5, atol=1e-5)


def test_fused_conv2d_errors(backend: str) -> None:
    x, w = np.ones((1, 4, 4, 2), np.float32), np.ones((3, 3, 2, 3), np.float32)
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    with pytest.raises(InvalidArgumentError, match=r"op 'FusedConv2D'.*bias must be 1-D with size .*\(3\), got shape \[2\]"):
        ops.fused_conv2d(x, w, np.ones(2, np.float32), **attrs)
    with pytest.raises(InvalidArgumentError, match=r"op 'FusedConv2D'.*'activation' must be one of"):
        ops.fused_conv2d(x, w, np.ones(3, np.float32), activation="Gelu", **attrs)
    with pytest.raises(OpTypeError, match="op 'FusedConv2D'"):
        ops.fused_conv2d(x.astype(np.int32), w.astype(np.int32), np.ones(3, np.int32), **attrs)
    with pytest.raises(ShapeError, match="op 'FusedConv2D'"):
        ok.infer_shapes("FusedConv2D", [(1, 4, 4, 2), (3, 3, 2, 3), (2,)], attrs)
    (s,) = ok.infer_shapes("FusedConv2D", [(1, 2, 4, 4), (3, 3, 2, 3), (3,)], {**attrs, "data_format": "NCHW"})
    assert s.as_list() == [1, 3, 4, 4]


@pytest.mark.parametrize("activation", ["Relu", "Tanh"])
def test_fused_conv2d_second_order(activation: str, backend: str) -> None:
    rng = np.random.default_rng(8)
    inputs = [rng.standard_normal((1, 3, 3, 2)), rng.standard_normal((2, 2, 2, 2)) * 0.5, rng.standard_normal(2)]
    f = grad_of(lambda a, b, c: ops.fused_conv2d(a, b, c, strides=[1, 1, 1, 1], padding="SAME", activation=activation), 1)
    assert compute_gradient_error(f, inputs) < 1e-6


@pytest.mark.parametrize("activation", FUSED_ACTIVATIONS)
def test_fused_mat_mul_second_order(activation: str, backend: str) -> None:
    inputs = dense_inputs(3, 2, 4, scale=0.5)(np.random.default_rng(7), "float64")
    f = grad_of(lambda a, b, c: ops.fused_mat_mul(a, b, c, activation=activation), 0)
    assert compute_gradient_error(f, inputs) < 1e-6


def test_softmax_needs_rank_1(backend: str) -> None:
    with pytest.raises(InvalidArgumentError, match="op 'Softmax'"):
        ops.softmax(np.float32(1.0))
    with pytest.raises(ShapeError, match="op 'LogSoftmax'"):
        ok.infer_shapes("LogSoftmax", [()])


def test_kernels_do_not_mutate_inputs(backend: str) -> None:
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((1, 4, 4, 2)), rng.standard_normal((2, 2, 2, 2))
    dy = rng.standard_normal((1, 4, 4, 2))
    saved = [a.copy() for a in (x, w, dy)]
    attrs = {"strides": [1, 1, 1, 1], "padding": "SAME"}
    ops.conv2d(x, w, **attrs)
    ops.conv2d_backprop_input(i32(1, 4, 4, 2), w, dy, **attrs)
    ops.conv2d_backprop_filter(x, i32(2, 2, 2, 2), dy, **attrs)
    ops.max_pool_grad(x, x, dy, **pool((1, 1), (1, 1), "SAME"))
    ops.sparse_softmax_cross_entropy_with_logits(x.reshape(8, 4), np.arange(8) % 4)
    ops.sparse_softmax_cross_entropy_loss(x.reshape(8, 4), np.arange(8) % 4)
    for a, b in zip((x, w, dy), saved):
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- max pooling with argmax

ARGMAX_GEOMETRIES = [
    pool((2, 2), (2, 2), "VALID"), pool((2, 2), (2, 2), "SAME"), pool((3, 3), (2, 2), "SAME"),
    pool((3, 2), (1, 2), "SAME"), pool((2, 2), (3, 3), "VALID"),
]


@pytest.mark.parametrize("attrs", ARGMAX_GEOMETRIES, ids=lambda a: f"k{a['ksize'][1]}{a['ksize'][2]}s{a['strides'][1]}{a['strides'][2]}{a['padding']}")
@pytest.mark.parametrize("include_batch", [False, True])
def test_max_pool_with_argmax_matches_max_pool_and_its_gradient(
    attrs: dict[str, Any], include_batch: bool, backend: str
) -> None:
    # Relu'd data: many tied zeros, each window's gradient goes to its first maximum either way.
    x = np.maximum(np.random.default_rng(1).standard_normal((3, 7, 6, 4)), 0).astype(np.float32)
    out = ops.max_pool_with_argmax(x, include_batch_in_index=include_batch, **attrs)
    y = ops.max_pool(x, **attrs)
    assert out.argmax.dtype == ok.int64 and out.output.dtype == ok.float32
    np.testing.assert_array_equal(out.output.numpy(), y.numpy())
    np.testing.assert_array_equal(out.argmax.numpy(), ref_argmax(x, {**attrs, "include_batch_in_index": include_batch}))
    dy = np.random.default_rng(2).standard_normal(y.shape).astype(np.float32)
    with_argmax = ops.max_pool_grad_with_argmax(x, dy, out.argmax, include_batch_in_index=include_batch, **attrs)
    np.testing.assert_allclose(with_argmax.numpy(), ops.max_pool_grad(x, y, dy, **attrs).numpy(), rtol=1e-6, atol=1e-6)
    gg = np.random.default_rng(3).standard_normal(x.shape).astype(np.float32)
    np.testing.assert_array_equal(
        ops.max_pool_grad_grad_with_argmax(x, gg, out.argmax, include_batch_in_index=include_batch, **attrs).numpy(),
        ops.max_pool_grad_grad(x, y, gg, **attrs).numpy(),
    )


@pytest.mark.parametrize("attrs", [pool((2, 2), (2, 2), "VALID"), pool((3, 3), (2, 2), "SAME")], ids=["tiled", "overlapping"])
def test_max_pool_with_argmax_nan_rule(attrs: dict[str, Any], backend: str) -> None:
    # TensorFlow's CPU rule (maxpooling_op.cc): the index is the first maximum, a nan winning
    # only as the window's first element, and the output is the input at that index.
    # MaxPool itself never picks a nan (pooling_ops_common.h).
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 0, 0, 0] = np.nan  # first element of the first window
    x[0, 1, 2, 0] = 5.0
    x[0, 0, 3, 0] = np.nan  # second element of its window's first row: not the index
    out = ops.max_pool_with_argmax(x, **attrs)
    y = ops.max_pool(x, **attrs).numpy()
    np.testing.assert_array_equal(out.output.numpy(), x.reshape(-1)[out.argmax.numpy()])
    assert np.isnan(out.output.numpy()[0, 0, 0, 0]) and not np.isnan(y).any()
    assert y[0, 0, 0, 0] == (5.0 if attrs["padding"] == "SAME" else 0.0)
    am = out.argmax.numpy()[0, :, :, 0]
    assert am[0, 0] == 0  # the nan in the first position
    if attrs["padding"] == "VALID":
        assert am[0, 1] == 1 * 4 + 2  # the 5.0, not the later nan at (0, 3)
        expected = ref_argmax(np.nan_to_num(x, nan=-np.inf), attrs)[0, :, :, 0]  # a later nan never wins
        expected[0, 0] = 0  # ... the first one does
        np.testing.assert_array_equal(am, expected)
    assert np.isnan(ops.max_pool_grad_with_argmax(x, np.ones(y.shape, np.float32), out.argmax, **attrs).numpy()).sum() == 0


def test_max_pool_with_argmax_int32_indices_and_shapes(backend: str) -> None:
    attrs = pool((2, 2), (2, 2), "SAME")
    x = np.arange(2 * 5 * 5 * 2, dtype=np.float32).reshape(2, 5, 5, 2)
    out = ops.max_pool_with_argmax(x, Targmax="int32", include_batch_in_index=True, **attrs)
    assert out.argmax.dtype == ok.int32 and out.argmax.shape == (2, 3, 3, 2)
    np.testing.assert_array_equal(out.argmax.numpy(), ref_argmax(x, {**attrs, "include_batch_in_index": True}))
    assert ok.infer_shapes("MaxPoolWithArgmax", [(2, 5, 5, 2)], {**attrs}) == [ok.TensorShape([2, 3, 3, 2])] * 2


def test_max_pool_grad_with_argmax_rejects_bad_indices_and_shapes(backend: str) -> None:
    attrs = pool((2, 2), (2, 2), "VALID")
    x = np.ones((2, 4, 4, 3), np.float32)
    dy = np.ones((2, 2, 2, 3), np.float32)
    good = ref_argmax(x, attrs)
    for value, batch in ((4 * 4 * 3, False), (-1, False), (2 * 4 * 4 * 3, True)):
        bad = good.copy()
        bad[1, 0, 1, 2] = value
        for fn, g in ((ops.max_pool_grad_with_argmax, dy), (ops.max_pool_grad_grad_with_argmax, x)):
            with pytest.raises(InvalidArgumentError, match=r"op 'MaxPoolGrad(Grad)?WithArgmax'.*argmax\[1, 0, 1, 2\]"):
                fn(x, g, bad, include_batch_in_index=batch, **attrs)
    with pytest.raises((InvalidArgumentError, ShapeError), match="MaxPoolGradWithArgmax"):
        ops.max_pool_grad_with_argmax(x, dy, good[:, :1], **attrs)
    with pytest.raises((InvalidArgumentError, ShapeError), match="MaxPoolGradGradWithArgmax"):
        ops.max_pool_grad_grad_with_argmax(x, dy, good, **attrs)
    with pytest.raises((InvalidArgumentError, ShapeError), match="MaxPoolWithArgmax"):
        ops.max_pool_with_argmax(x, ksize=[2, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")


def test_max_pool_with_argmax_int32_needs_room() -> None:
    from opkernel.ops.nn_ops import check_argmax_type

    check_argmax_type("MaxPoolWithArgmax", ok.int32, (64, 1024, 1024, 16), include_batch=False)
    with pytest.raises(InvalidArgumentError, match="op 'MaxPoolWithArgmax'.*Targmax int64"):
        check_argmax_type("MaxPoolWithArgmax", ok.int32, (256, 1024, 1024, 16), include_batch=True)


def test_max_pool_with_argmax_never_writes_its_inputs(backend: str) -> None:
    attrs = pool((2, 2), (2, 2), "VALID")
    x = np.random.default_rng(0).standard_normal((2, 4, 4, 3)).astype(np.float32)
    dy = np.ones((2, 2, 2, 3), np.float32)
    saved = x.copy(), dy.copy()
    out = ops.max_pool_with_argmax(x, **attrs)
    argmax = out.argmax.numpy()
    kept = argmax.copy()
    ops.max_pool_grad_with_argmax(x, dy, argmax, **attrs)
    ops.max_pool_grad_grad_with_argmax(x, x, argmax, **attrs)
    for a, b in zip((x, dy, argmax), (*saved, kept)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("attrs", [pool((2, 2), (2, 2), "VALID"), pool((3, 3), (2, 2), "SAME")], ids=["tiled", "overlapping"])
@pytest.mark.parametrize("include_batch", [False, True])
def test_max_pool_with_argmax_over_many_channels(attrs: dict[str, Any], include_batch: bool, backend: str) -> None:
    # 37 channels: two whole blocks and a part of the channel blocks that per-position
    # kernels loop over (OpenCL on CPU devices), with Relu's ties (nan: the test above).
    rng = np.random.default_rng(5)
    x = np.maximum(rng.standard_normal((2, 5, 7, 37)), 0).astype(np.float32)
    out = ops.max_pool_with_argmax(x, include_batch_in_index=include_batch, **attrs)
    np.testing.assert_array_equal(out.output.numpy(), ref_max_pool(x, **attrs))
    np.testing.assert_array_equal(out.argmax.numpy(), ref_argmax(x, {**attrs, "include_batch_in_index": include_batch}))
    dy = rng.standard_normal(out.output.shape).astype(np.float32)
    dx = ops.max_pool_grad_with_argmax(x, dy, out.argmax, include_batch_in_index=include_batch, **attrs)
    flat = out.argmax.numpy().reshape(2, -1) if not include_batch else out.argmax.numpy().reshape(1, -1)
    expected = np.zeros((flat.shape[0], x.size // flat.shape[0]), np.float32)
    for row, (idx, g) in enumerate(zip(flat, dy.reshape(flat.shape[0], -1))):
        np.add.at(expected[row], idx, g)
    np.testing.assert_allclose(dx.numpy(), expected.reshape(x.shape), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("k", [(1, 2), (2, 1), (2, 3), (3, 2), (3, 3)])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_max_pool_with_argmax_tiling_windows_with_ties(k: tuple[int, int], dtype: str, backend: str) -> None:
    # Values in {0, 1, 2}: most windows hold their maximum more than once; the index is
    # the first in row-major order (the CPU kernel compares columns, then rows).
    attrs = pool(k, k, "VALID")
    x = np.random.default_rng(k[0] * 10 + k[1]).integers(0, 3, (3, 7, 8, 5)).astype(dtype)
    out = ops.max_pool_with_argmax(x, include_batch_in_index=True, **attrs)
    np.testing.assert_array_equal(out.output.numpy(), ref_max_pool(x, **attrs))
    np.testing.assert_array_equal(out.argmax.numpy(), ref_argmax(x, {**attrs, "include_batch_in_index": True}))


@pytest.mark.parametrize("shape,k", [((0, 4, 4, 2), (2, 2)), ((2, 4, 4, 0), (2, 2)), ((2, 1, 1, 3), (2, 2)),
                                     ((2, 3, 3, 2), (1, 1))])
def test_max_pool_with_argmax_empty_and_trivial_windows(shape: tuple[int, ...], k: tuple[int, int], backend: str) -> None:
    attrs = pool(k, k, "VALID")
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    out = ops.max_pool_with_argmax(x, **attrs)
    np.testing.assert_array_equal(out.output.numpy(), ref_max_pool(x, **attrs))
    np.testing.assert_array_equal(out.argmax.numpy(), ref_argmax(x, attrs))
    dy = np.ones(out.output.shape, np.float32)
    dx = ops.max_pool_grad_with_argmax(x, dy, out.argmax, **attrs)
    np.testing.assert_array_equal(dx.numpy(), ref_max_pool_grad_with_argmax(x, dy, out.argmax.numpy(), **attrs))
    gg = ops.max_pool_grad_grad_with_argmax(x, x, out.argmax, **attrs)
    assert gg.shape == out.output.shape


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
@pytest.mark.parametrize("op", ["relu", "relu6"])
def test_relu_of_negative_zero_is_positive_zero(backend: str, dtype: str, op: str) -> None:
    """+0.0 everywhere (docs/conformance.md); numpy's float16 and bfloat16 maximum kept
    -0.0 on the cpu backend."""
    if not ok.engine.backend_instance(backend).supports_dtype(ok.as_dtype(dtype)):
        pytest.skip(f"{backend} holds no {dtype}")
    for n in (1, 9, 5000):
        x = ok.tensor(np.full(n, -0.0, np.float32).astype(ok.as_dtype(dtype).np))
        y = np.asarray(getattr(ok.ops, op)(x).numpy(), np.float32)
        assert not np.signbit(y).any() and (y == 0).all(), (dtype, n)


def test_softmax_cross_entropy_takes_labels_that_broadcast_to_a_matrix(backend: str) -> None:
    """TensorFlow's rule: features and labels broadcast to 2-D, so one [classes] row of
    labels serves every example (refused before: 'must be 2-D')."""
    f = np.array([[1, 2, 3], [0, 0, 1]], np.float32)
    labels = np.array([0.2, 0.3, 0.5], np.float32)
    x = ok.Variable(f)
    with ok.GradientTape() as tape:
        loss, backprop = ok.ops.softmax_cross_entropy_with_logits(x, labels)
        total = ok.ops.sum(loss, [0])
    logp = f - np.log(np.exp(f).sum(1, keepdims=True))
    np.testing.assert_allclose(loss.numpy(), -(labels * logp).sum(1), rtol=1e-5)
    np.testing.assert_allclose(backprop.numpy(), np.exp(logp) - labels, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tape.gradient(total, x).numpy(), np.exp(logp) - labels, rtol=1e-5, atol=1e-6)
    with pytest.raises(ok.errors.InvalidArgumentError, match="must be 2-D or broadcast to 2-D"):
        ok.ops.softmax_cross_entropy_with_logits(np.zeros(3, np.float32), np.zeros(3, np.float32))


@pytest.mark.parametrize("attrs", [{}, {"align_corners": True}, {"half_pixel_centers": True}])
def test_resize_bilinear_gradients_are_adjoint(backend: str, attrs: dict[str, Any]) -> None:
    """ResizeBilinear computes in float32, which finite differences cannot resolve; its
    gradient (ResizeBilinearGrad) and that op's own gradient (ResizeBilinear back) are
    checked as adjoints instead: <resize(x), g> = <x, resize_grad(g)>, through tapes."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
    g = rng.standard_normal((2, 7, 3, 3)).astype(np.float32)
    size = i32(7, 3)
    with ok.use_backend(backend):
        xv = ok.Variable(x)
        with ok.GradientTape() as tape:
            y = ok.ops.resize_bilinear(xv, size, **attrs)
        (dx,) = tape.gradient(y, [xv], output_gradients=[ok.tensor(g)])
        direct = ok.ops.resize_bilinear_grad(g, x, **attrs).numpy()
        gv = ok.Variable(g)
        with ok.GradientTape() as tape2:
            back = ok.ops.resize_bilinear_grad(gv, x, **attrs)
        (dg,) = tape2.gradient(back, [gv], output_gradients=[ok.tensor(x)])
    np.testing.assert_array_equal(dx.numpy(), direct)
    lhs = float((ref_resize_bilinear(x, size, **attrs).astype(np.float64) * g).sum())
    np.testing.assert_allclose(float((x.astype(np.float64) * direct).sum()), lhs, rtol=1e-5)
    np.testing.assert_allclose(dg.numpy(), ok.ops.resize_bilinear(x, size, **attrs).numpy(), rtol=1e-6)
