"""OpenCL kernels of the neural-network ops: one table in ``register_all``.

(Relu, Relu6, Elu, Selu, Softplus and BiasAdd are elementwise: see
``elementwise``.)  Softmax and the losses run one work-item per row.  Conv2D is
im2col + the packed MatMul of ``linalg_kernels``; its input gradient is one
MatMul plus col2im, its filter gradient one MatMul over the im2col columns.
Pooling and the pooling gradients are direct kernels, written as gathers (each
work-item owns one output element), so no atomics are needed and results are
deterministic.  Layout NCHW is handled by transposing to NHWC and back.
"""

from __future__ import annotations

import functools
import math
from typing import Any, NamedTuple

import numpy as np

import opkernel as ok
from opkernel.ops.nn_ops import (
    check_argmax_type, check_out_shape, check_rank4, check_sizes, conv_groups, explicit_padding, spatial_attr,
    window_output_size,
)

from .array_kernels import BE, copy_into, gather_view, zeros
from .backend import OpenCLBackend, ctype
from .common import FLOATS, dims, fail, fast_divisor, scalar, vector_row_source, vector_rows
from .linalg_kernels import TILES, bias_activation_in_place, gemm, gemm_filled_a
from .elementwise import KernelRow, float32_compute, register_table, run_half, spec_of
from .programs import family
from .reduction_kernels import reduce

POOL_TYPES = FLOATS + ("int32", "int64", "int8", "int16", "uint8", "uint16")
#: The lowest value of each pool type: where a window's maximum starts (floats: see _window_source).
_LOWEST = {"int8": "CHAR_MIN", "int16": "SHRT_MIN", "int32": "INT_MIN", "int64": "LONG_MIN", "uint8": "0", "uint16": "0"}


def _sparse_xent_source(label: str) -> str:
    """The sparse cross-entropy kernel for one label type (int32 or int64 labels)."""
    return f"""__kernel void sparse_xent_{label}(__global T* loss, __global T* back, __global const T* x, __global const {label}* y, int C, T scale) {{
  int r = get_global_id(0); __global const T* p = x + (long)r * C; __global T* b = back + (long)r * C;
  T m = row_max(p, C); T s = 0;
  for (int c = 0; c < C; ++c) s += exp(p[c] - m);
  T ls = log(s); {label} lab = y[r];
  for (int c = 0; c < C; ++c) b[c] = (exp(p[c] - m - ls) - (c == lab ? 1 : 0)) * scale;
  loss[r] = (lab >= 0 && lab < C) ? ls - (p[lab] - m) : NAN;   /* TensorFlow's order: +0.0 for one class */
}}
"""


def _softmax_v8_source(dtype: str) -> str:
    """Softmax's and SoftmaxGrad's ``*_v8`` kernels (``T`` defined by the family's source)."""
    T = ctype(ok.as_dtype(dtype))
    return vector_row_source(dtype, f"""
// Softmax and SoftmaxGrad on a CPU device for rows of C % 8 == 0 (common.vector_rows): a
// work-item per row, reading it as vectors of 8 (plain vector loads: PoCL calls vload8 out of line), so a
// CPU compiler vectorises along the row instead of gathering across rows (3x faster on
// Intel's runtime, 10x on PoCL's).  The 8 lanes' partial results meet pairwise at the end (OK_HSUM8).
#define V8 {T}8
__kernel void softmax_v8(__global T* out, __global const T* x, int C, int logs) {{
  long r = get_global_id(0); int n = C / 8;
  __global const V8* p = (__global const V8*)(x + r * C); __global V8* q = (__global V8*)(out + r * C);
  V8 m8 = p[0]; for (int c = 1; c < n; ++c) m8 = fmax(m8, p[c]);
  T m = OK_HMAX8(m8); V8 s8 = 0;  // Softmax keeps each exp in the output, scaled in place below
  for (int c = 0; c < n; ++c) {{ V8 e = exp(p[c] - m); s8 += e; if (!logs) q[c] = e; }}
  T s = OK_HSUM8(s8);
  if (logs) {{ T ls = log(s); for (int c = 0; c < n; ++c) q[c] = p[c] - m - ls; }}
  else {{ T inv = 1 / s; for (int c = 0; c < n; ++c) q[c] *= inv; }}
}}
__kernel void softmax_grad_v8(__global T* out, __global const T* g, __global const T* s, int C) {{
  long o = (long)get_global_id(0) * C; int n = C / 8;
  __global const V8* gv = (__global const V8*)(g + o); __global const V8* sv = (__global const V8*)(s + o);
  __global V8* q = (__global V8*)(out + o);
  V8 d8 = 0; for (int c = 0; c < n; ++c) d8 += gv[c] * sv[c];
  T dot = OK_HSUM8(d8);
  for (int c = 0; c < n; ++c) q[c] = (gv[c] - dot) * sv[c];
}}
""")


@family("softmax", FLOATS)
def _softmax_source(dtype: str) -> str:
    T = ctype(ok.as_dtype(dtype))
    return f"""
#define T {T}
inline T row_max(__global const T* p, int C) {{ T m = p[0]; for (int c = 1; c < C; ++c) m = fmax(m, p[c]); return m; }}
__kernel void softmax(__global T* out, __global const T* x, int C, int logs) {{
  int r = get_global_id(0); __global const T* p = x + (long)r * C; __global T* q = out + (long)r * C;
  T m = row_max(p, C); T s = 0;
  for (int c = 0; c < C; ++c) s += exp(p[c] - m);
  if (logs) {{ T ls = log(s); for (int c = 0; c < C; ++c) q[c] = p[c] - m - ls; }}
  else {{ T inv = 1 / s; for (int c = 0; c < C; ++c) q[c] = exp(p[c] - m) * inv; }}
}}
// SoftmaxGrad: out = (g - sum(g * s)) * s over a row, one work-item per row.
__kernel void softmax_grad(__global T* out, __global const T* g, __global const T* s, int C) {{
  long o = (long)get_global_id(0) * C; T dot = 0;
  for (int c = 0; c < C; ++c) dot += g[o + c] * s[o + c];
  for (int c = 0; c < C; ++c) out[o + c] = (g[o + c] - dot) * s[o + c];
}}
{_softmax_v8_source(dtype)}__kernel void xent(__global T* loss, __global T* back, __global const T* x, __global const T* y, int C) {{
  int r = get_global_id(0); __global const T* p = x + (long)r * C; __global const T* l = y + (long)r * C;
  __global T* b = back + (long)r * C;
  T m = row_max(p, C); T s = 0;
  for (int c = 0; c < C; ++c) s += exp(p[c] - m);
  T ls = log(s); T acc = 0;
  for (int c = 0; c < C; ++c) {{ T lp = p[c] - m - ls; acc -= l[c] * lp; b[c] = exp(lp) - l[c]; }}
  loss[r] = acc;
}}
{_sparse_xent_source("int")}{_sparse_xent_source("long")}#undef T
"""


def _rows(op: str, logits: Any) -> tuple[int, int]:
    if logits.ndim < 1:  # an empty last axis is allowed (as in TensorFlow): an empty result
        raise fail(op, f"logits must have rank >= 1, got shape {list(logits.shape)}")
    C = logits.shape[-1]
    return int(math.prod(logits.shape[:-1])), C


def _softmax(op: str, logs: int) -> Any:
    def kernel(logits: Any, T: ok.DType, **attrs: Any) -> Any:
        rows, C = _rows(op, logits)
        be = BE()
        out = be.new_array(logits.shape, logits.dtype)
        if rows and C:
            name = "softmax_v8" if vector_rows(be, C, out.dtype.itemsize) else "softmax"
            be.launch1d(be.programs.kernel("softmax", T.name, name, op), rows, out.base_data, logits.base_data,
                        np.int32(C), np.int32(logs))
        return out

    kernel.__name__ = op
    return kernel


def softmax_grad(gradients: Any, softmax: Any, T: ok.DType, **attrs: Any) -> Any:
    op = "SoftmaxGrad"
    if gradients.shape != softmax.shape:
        raise fail(op, f"gradients and softmax must have the same shape, got {list(gradients.shape)} and "
                       f"{list(softmax.shape)}")
    if gradients.ndim < 1:
        raise fail(op, f"gradients and softmax must have rank >= 1, got shape {list(gradients.shape)}")
    be = BE()
    out = be.new_array(gradients.shape, gradients.dtype)
    C = gradients.shape[-1]
    if out.size:
        name = "softmax_grad_v8" if vector_rows(be, C, out.dtype.itemsize) else "softmax_grad"
        be.launch1d(be.programs.kernel("softmax", T.name, name, op), out.size // C, out.base_data,
                    gradients.base_data, softmax.base_data, np.int32(C))
    return out


def softmax_cross_entropy_with_logits(features: Any, labels: Any, T: ok.DType, **attrs: Any) -> tuple[Any, Any]:
    op = "SoftmaxCrossEntropyWithLogits"
    try:
        shape = tuple(np.broadcast_shapes(features.shape, labels.shape))
    except ValueError:
        raise fail(op, f"features and labels must be broadcastable, got shapes {list(features.shape)} and {list(labels.shape)}") from None
    if len(shape) != 2:  # TensorFlow's rule: 2-D, or broadcast to 2-D (a [classes] labels row for every example)
        raise fail(op, f"features and labels must be 2-D or broadcast to 2-D, got shapes {list(features.shape)} and "
                       f"{list(labels.shape)}")
    be = BE()
    if features.shape != shape:
        features = gather_view(be, op, features, lambda g: np.broadcast_to(g, shape))
    if labels.shape != shape:
        labels = gather_view(be, op, labels, lambda g: np.broadcast_to(g, shape))
    # No classes: each loss is an empty sum, 0 (as TensorFlow gives it), not unwritten memory.
    loss = be.new_array(shape[:1], features.dtype) if shape[1] else zeros(be, op, shape[:1], features.dtype)
    back = be.new_array(shape, features.dtype)
    if shape[0] and shape[1]:
        be.launch1d(be.programs.kernel("softmax", T.name, "xent", op), shape[0], loss.base_data, back.base_data,
                    features.base_data, labels.base_data, np.int32(shape[1]))
    return loss, back


def _sparse_xent(op: str, features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType, scale: float) -> tuple[Any, Any]:
    """Per-example loss and backprop (softmax - one_hot, times ``scale``): one work-item per row."""
    if features.ndim != 2 or labels.ndim != 1 or labels.shape[0] != features.shape[0]:
        raise fail(op, "features must be 2-D [batch, classes] and labels 1-D [batch], "
                   f"got shapes {list(features.shape)} and {list(labels.shape)}")
    be = BE()
    classes = features.shape[1]
    if classes == 0:  # TensorFlow's check: no label can be valid, even in an empty batch
        raise fail(op, f"must have at least one class, got features shape {list(features.shape)}")
    host = be.host(labels)
    if host is not None:
        bad = (host < 0) | (host >= classes)
        if bad.any():
            raise fail(op, f"received a label value of {int(host[bad][0])} which is outside the valid range of [0, {classes}); "
                       f"label values: {host.tolist() if host.size <= 16 else '...'}")
    loss = be.new_array(features.shape[:1], features.dtype)
    back = be.new_array(features.shape, features.dtype)
    if features.size:
        name = "sparse_xent_int" if Tlabels.name == "int32" else "sparse_xent_long"
        be.launch1d(be.programs.kernel("softmax", T.name, name, op), features.shape[0], loss.base_data, back.base_data,
                    features.base_data, labels.base_data, np.int32(classes), scalar(features.dtype, scale))
    return loss, back


def sparse_softmax_cross_entropy_with_logits(features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType, **attrs: Any) -> tuple[Any, Any]:
    return _sparse_xent("SparseSoftmaxCrossEntropyWithLogits", features, labels, T, Tlabels, 1.0)


def sparse_softmax_cross_entropy_loss(
    features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType, reduction: str, **attrs: Any
) -> tuple[Any, Any]:
    """The per-example kernel with backprop scaled by 1/batch for 'mean', then the
    loss vector reduced on the device (the Mean/Sum reduction kernels)."""
    batch = features.shape[0] if features.ndim == 2 else 0
    mean = reduction == "mean"
    loss, back = _sparse_xent("SparseSoftmaxCrossEntropyLoss", features, labels, T, Tlabels, 1 / batch if mean and batch else 1.0)
    return reduce(BE(), "Mean" if mean else "Sum", loss, (0,), False, T.name), back


def bias_add_grad(out_backprop: Any, T: ok.DType, data_format: str, **attrs: Any) -> Any:
    if out_backprop.ndim < 2:
        raise fail("BiasAddGrad", f"input must be at least 2-D, got shape {list(out_backprop.shape)}")
    axis = 1 if data_format == "NCHW" else out_backprop.ndim - 1
    others = tuple(a for a in range(out_backprop.ndim) if a != axis)
    return reduce(BE(), "Sum", out_backprop, others, False, T.name)


# ------------------------------------------------------------ windows


class Window(NamedTuple):
    n: int
    h: int
    w: int
    c: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int

    def args(self, oc: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The kernels' geometry arguments g1 to g4 (``_GEOMETRY``)."""
        return _window_args(self, oc)

    def key(self, dtype: str) -> str:
        """The program key of this geometry's window kernels: ``dtype``, with ":long" when a
        window coordinate can reach 2**31 (their 64-bit variant, built on first use)."""
        return dtype + ":long" if _wide(self) else dtype


_INT_MAX = 2**31 - 1


@functools.lru_cache(maxsize=256)
def _wide(win: Window) -> bool:
    """Whether a window coordinate the kernels compute (oh * SH - PT + ii * DH, h + PT -
    ii * DH, and the same for the width) can fall outside int's range."""
    reach = max((win.oh - 1) * win.sh + (win.kh - 1) * win.dh, win.h - 1 + win.pt,
                (win.ow - 1) * win.sw + (win.kw - 1) * win.dw, win.w - 1 + win.pl)
    return reach > _INT_MAX


@functools.lru_cache(maxsize=256)  # a model's few layer geometries, launched every step
def _window_args(win: Window, oc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    magic = [fast_divisor(d) for d in (win.c, win.ow, win.oh, win.w, win.h, win.sh, win.sw)]
    out = dims(win[:8]), dims(list(win[8:]) + [oc]), dims([m for m, _ in magic]), dims([s for _, s in magic])
    for a in out:
        a.flags.writeable = False
    return out


def _taps_inside(k: int, pad: int, stride: int, out: int, size: int) -> tuple[int, int]:
    """(window size, padding before) of a pool along one dimension, without the taps that
    fall outside the input for every output position: the same windows (the same
    elements, counts and argmax indices), and a window far larger than the input (ksize
    2**31 - 1, whose kernels looped 2**31 times per element) costs no more than the input.
    Tap t of output o reads row o * stride - pad + t."""
    first = max(0, pad - (out - 1) * stride)  # taps before it are above row 0 for every output
    last = min(k - 1, pad + size - 1)  # taps after it are below the last row for every output
    if out < 1 or last < first or (first == 0 and last == k - 1):
        return k, pad
    return last - first + 1, pad - first


def _window(op: str, x_shape: tuple[int, ...], khw: tuple[int, int], attrs: dict[str, Any], dilations: Any) -> Window:
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {fmt!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    try:
        sh, sw = spatial_attr(attrs["strides"], fmt, "strides")
        dh, dw = spatial_attr(dilations, fmt, "dilations") if dilations is not None else (1, 1)
        ph, pw = explicit_padding(attrs["padding"], attrs.get("explicit_paddings", ()), fmt,
                                  khw if dilations is None else None)  # None: a convolution
        oh, pt, _ = window_output_size(x_shape[1], khw[0], dh, sh, attrs["padding"], ph)
        ow, pl, _ = window_output_size(x_shape[2], khw[1], dw, sw, attrs["padding"], pw)
    except ValueError as e:
        raise fail(op, str(e)) from None
    n, h, w, c = x_shape
    kh, kw = khw
    if dilations is None:  # a pool: its kernels loop over every tap of the window
        kh, pt = _taps_inside(kh, pt, sh, oh, h)
        kw, pl = _taps_inside(kw, pl, sw, ow, w)
    if max(sh, sw, dh, dw, pt, pl, kh, kw, oh, ow) > _INT_MAX:
        # The kernels take the geometry as 32-bit ints (even empty tensors' geometry is
        # checked: it becomes kernel arguments before the sizes are).  A stride with one
        # output, or a dilation with one tap, never multiplies anything: 1 gives the same windows.
        sh, sw = (1 if oh <= 1 and sh > _INT_MAX else sh), (1 if ow <= 1 and sw > _INT_MAX else sw)
        dh, dw = (1 if kh <= 1 and dh > _INT_MAX else dh), (1 if kw <= 1 and dw > _INT_MAX else dw)
        pad = f"padding {attrs['padding']!r}" + ("" if attrs["padding"] == "EXPLICIT" else " (from the window size)")
        for name, pair in (("strides", (sh, sw)), ("dilations", (dh, dw)), (pad, (pt, pl)),
                           ("ksize" if dilations is None else "filter size", (kh, kw)), ("output size", (oh, ow))):
            if max(pair) > _INT_MAX:
                raise fail(op, f"{name}: (height, width) {list(pair)} has a value of 2**31 or more; the OpenCL "
                               f"window kernels take values below 2**31 ({_INT_MAX + 1})")
    return Window(n, h, w, c, oh, ow, kh, kw, sh, sw, dh, dw, pt, pl)


def _nhwc(be: OpenCLBackend, op: str, x: Any, fmt: str) -> Any:
    return x if fmt == "NHWC" else gather_view(be, op, x, lambda g: np.transpose(g, (0, 2, 3, 1)))


def _from_nhwc(be: OpenCLBackend, op: str, x: Any, fmt: str) -> Any:
    return x if fmt == "NHWC" else gather_view(be, op, x, lambda g: np.transpose(g, (0, 3, 1, 2)))


def _nhwc_dims(values: Any, fmt: str) -> tuple[int, int, int, int]:
    v = [int(d) for d in values]
    return (v[0], v[1], v[2], v[3]) if fmt == "NHWC" else (v[0], v[2], v[3], v[1])


_rank4 = check_rank4


_sizes, _check_out = check_sizes, check_out_shape


_GEOMETRY = """
#define N g1.v[0]
#define H g1.v[1]
#define W g1.v[2]
#define C g1.v[3]
#define OH g1.v[4]
#define OW g1.v[5]
#define KH g1.v[6]
#define KW g1.v[7]
#define SH g2.v[0]
#define SW g2.v[1]
#define DH g2.v[2]
#define DW g2.v[3]
#define PT g2.v[4]
#define PL g2.v[5]
// Divisions by the geometry's runtime sizes, as multiplications (fdiv; g3: multipliers, g4: shifts)
#define DIV_C(n) fdiv(n, g3.v[0], g4.v[0])
#define DIV_OW(n) fdiv(n, g3.v[1], g4.v[1])
#define DIV_OH(n) fdiv(n, g3.v[2], g4.v[2])
#define DIV_W(n) fdiv(n, g3.v[3], g4.v[3])
#define DIV_H(n) fdiv(n, g3.v[4], g4.v[4])
// Window coordinates (h = oh * SH - PT + ii * DH, ...) in IDX: int, or long where the host
// found that one can pass 2**31 (Window.key: the ":long" programs, WIDE).  fdiv is exact
// below 2**31 only, so the long programs divide by the strides.
#if WIDE
#define IDX long
#define DIV_SH(n) ((n) / SH)
#define DIV_SW(n) ((n) / SW)
#else
#define IDX int
#define DIV_SH(n) fdiv(n, g3.v[5], g4.v[5])
#define DIV_SW(n) fdiv(n, g3.v[6], g4.v[6])
#endif
// (n, oh, ow, c) of output element i; (n, h, w, c) of input element i (NHWC)
#define OUT_INDEX(i) int t_ = DIV_C(i); int c = (i) - t_ * C; int u_ = DIV_OW(t_); int ow = t_ - u_ * OW; \
  int n = DIV_OH(u_); int oh = u_ - n * OH;
#define IN_INDEX(i) int t_ = DIV_C(i); int c = (i) - t_ * C; int u_ = DIV_W(t_); int w = t_ - u_ * W; \
  int n = DIV_H(u_); int h = u_ - n * H;
// (n, oh, ow) of output position p (the *_rows kernels' work-items)
#define POS_INDEX(p) int t_ = DIV_OW(p); int ow = (p) - t_ * OW; int n = DIV_OH(t_); int oh = t_ - n * OH;
// The per-position argmax kernels work on blocks of CH channels (c0 on): WINDOW_ARGMAX_BLOCK
// finds, for COUNT of them, the first maximum of position (n, oh, ow)'s window in row-major
// order, never a padding position, into best[e] and at[e] (h * W + w; -1 for none), and
// runs EXTRA on each value a of channel e.  Whole blocks pass the constant CH as COUNT, so
// the arrays stay in vector registers (with a run-time count they live in memory: the
// MaxPoolGrad kernel ran 2.3-2.6x slower); the last, partial block passes its own count.
#define CH 16
#define WINDOW_ARGMAX_BLOCK(COUNT, EXTRA) \
    for (int ii = 0; ii < KH; ++ii) { \
      IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue; \
      for (int j = 0; j < KW; ++j) { \
        IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue; \
        __global const T* v = x + (((long)n * H + h) * W + w) * C + c0; \
        int here = h * W + w; \
        for (int e = 0; e < (COUNT); ++e) { \
          T a = v[e]; int take = (at[e] < 0) | (a > best[e]); \
          best[e] = take ? a : best[e]; at[e] = take ? here : at[e]; EXTRA \
        } \
      } \
    }
"""


def _im2col_panels_source(rm: int) -> str:
    """im2col for the packed MatMul on CPU devices (Conv2D's forward): im2col_rows' loops,
    each value stored straight into the panels of A, the columns (``linalg_kernels``:
    Ap[M/RM][K][RM], row m an output position, column k a window element), which saves
    the packing launch's pass over them.  MP is M rounded up to whole panels: the last
    work-item zeroes the padding rows, as the packing kernel does (they reach only rows of
    C past M, never stored, but uninitialised memory could hold denormals, slow in the
    multiply-adds).  The transposed columns of Conv2DBackpropFilter written the same way,
    a panel per RM window elements, ran slower than im2col_rows and the packing launch
    together: that product keeps them."""
    return f"""#define RM {rm}
__kernel void im2col_panels(__global T* restrict P, __global const T* restrict x, dims_t g1, dims_t g2, dims_t g3, dims_t g4, int MP) {{
  int q = get_global_id(0); if (q >= N * OH) return;
  int n = DIV_OH(q); int oh = q - n * OH; int KK = KH * KW * C;
  if (C == 1) {{  // one channel: no channel loops, a select instead of the branches
    for (int ow = 0; ow < OW; ++ow) {{
      long pos = (long)q * OW + ow;
      __global T* dst = P + (pos / RM) * KK * RM + pos % RM;
      for (int ii = 0; ii < KH; ++ii) {{
        IDX h = (IDX)oh * SH - PT + (IDX)ii * DH; bool hin = h >= 0 && h < H;
        __global const T* row = x + ((long)n * H + (hin ? h : 0)) * W;
        for (int j = 0; j < KW; ++j) {{
          IDX w = (IDX)ow * SW - PL + (IDX)j * DW; bool in = hin && w >= 0 && w < W;
          T v = row[in ? w : 0]; dst[(ii * KW + j) * RM] = in ? v : (T)0;
        }}
      }}
    }}
  }} else
  for (int ow = 0; ow < OW; ++ow) {{
    long pos = (long)q * OW + ow;
    __global T* dst = P + (pos / RM) * KK * RM + pos % RM;
    for (int ii = 0; ii < KH; ++ii) {{
      IDX h = (IDX)oh * SH - PT + (IDX)ii * DH; bool hin = h >= 0 && h < H;
      __global const T* row = x + ((long)n * H + (hin ? h : 0)) * W * C;
      for (int j = 0; j < KW; ++j) {{
        IDX w = (IDX)ow * SW - PL + (IDX)j * DW; int k0 = (ii * KW + j) * C;
        if (hin && w >= 0 && w < W) {{ for (int c = 0; c < C; ++c) dst[(k0 + c) * RM] = row[w * C + c]; }}
        else {{ for (int c = 0; c < C; ++c) dst[(k0 + c) * RM] = (T)0; }}
      }}
    }}
  }}
  if (q == N * OH - 1) {{
    for (long m = (long)N * OH * OW; m < MP; ++m) {{
      __global T* d = P + (m / RM) * KK * RM + m % RM;
      for (int k = 0; k < KK; ++k) d[k * RM] = (T)0;
    }}
  }}
}}
#undef RM
"""


@family("window", POOL_TYPES)
def _window_source(key: str) -> str:
    dtype, _, width = key.partition(":")  # "float32", or "float32:long" (Window.key)
    T = ctype(ok.as_dtype(dtype))
    lowest = "-INFINITY" if dtype in FLOATS else _LOWEST[dtype]
    # MaxPool starts from the lowest finite value, as TensorFlow's CPU kernel does.
    floor_ = {"float32": "-FLT_MAX", "float64": "-DBL_MAX"}.get(dtype, lowest)
    panels = _im2col_panels_source(TILES[dtype][1]) if dtype in TILES else ""
    return f"""
#define T {T}
#define ISNAN(v) {"OK_ISNAN(v)" if dtype in FLOATS else "0"}
#define WIDE {int(bool(width))}
{_GEOMETRY}
// Work-item (p, ii) copies row ii of output position p's window: KW runs of C channels.
// The divisions by runtime sizes (finding n, oh, ow from p) are paid once per KW * C
// elements, not once per element: they cost more than the copy itself.
__kernel void im2col(__global T* cols, __global const T* x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int p = get_global_id(0); if (p >= N * OH * OW) return;
  int ii = get_global_id(1);
  int t = DIV_OW(p); int ow = p - t * OW; int n = DIV_OH(t); int oh = t - n * OH;
  IDX h = (IDX)oh * SH - PT + (IDX)ii * DH;
  __global T* dst = cols + ((long)p * KH + ii) * KW * C;
  if (h < 0 || h >= H) {{
    for (int e = 0; e < KW * C; ++e) dst[e] = (T)0;
    return;
  }}
  __global const T* row = x + ((long)n * H + h) * W * C;
  for (int j = 0; j < KW; ++j) {{
    IDX w = (IDX)ow * SW - PL + (IDX)j * DW;
    if (w >= 0 && w < W) {{ for (int c = 0; c < C; ++c) dst[j * C + c] = row[w * C + c]; }}
    else {{ for (int c = 0; c < C; ++c) dst[j * C + c] = (T)0; }}
  }}
}}
// im2col's version for CPU devices: work-item q, an output row (n, oh), writes the OW * KH
// window rows of its positions one after the other (a work-item per window row spent
// more on its fixed cost than on copying a few channels: 156 -> 111 us on 64x8x8x1, 3x3).
__kernel void im2col_rows(__global T* restrict cols, __global const T* restrict x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int q = get_global_id(0); if (q >= N * OH) return;
  int n = DIV_OH(q); int oh = q - n * OH;
  __global T* dst = cols + (long)q * OW * KH * KW * C;
  if (C == 1) {{  // one channel: no channel loops, a select instead of the branches
    for (int ow = 0; ow < OW; ++ow) {{
      for (int ii = 0; ii < KH; ++ii, dst += KW) {{
        IDX h = (IDX)oh * SH - PT + (IDX)ii * DH; bool hin = h >= 0 && h < H;
        __global const T* row = x + ((long)n * H + (hin ? h : 0)) * W;
        for (int j = 0; j < KW; ++j) {{
          IDX w = (IDX)ow * SW - PL + (IDX)j * DW; bool in = hin && w >= 0 && w < W;
          T v = row[in ? w : 0]; dst[j] = in ? v : (T)0;
        }}
      }}
    }}
    return;
  }}
  for (int ow = 0; ow < OW; ++ow) {{
    for (int ii = 0; ii < KH; ++ii, dst += KW * C) {{
      IDX h = (IDX)oh * SH - PT + (IDX)ii * DH;
      if (h < 0 || h >= H) {{ for (int e = 0; e < KW * C; ++e) dst[e] = (T)0; continue; }}
      __global const T* row = x + ((long)n * H + h) * W * C;
      for (int j = 0; j < KW; ++j) {{
        IDX w = (IDX)ow * SW - PL + (IDX)j * DW;
        if (w >= 0 && w < W) {{ for (int c = 0; c < C; ++c) dst[j * C + c] = row[w * C + c]; }}
        else {{ for (int c = 0; c < C; ++c) dst[j * C + c] = (T)0; }}
      }}
    }}
  }}
}}
{panels}// dx[n, h, w, c] = sum of the column entries that im2col copied from (n, h, w, c).
__kernel void col2im(__global T* dx, __global const T* dcols, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  IN_INDEX(i)
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - (IDX)ii * DH; if (hh < 0) continue; IDX oh = DIV_SH(hh); if (oh * SH != hh || oh >= OH) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - (IDX)j * DW; if (ww < 0) continue; IDX ow = DIV_SW(ww); if (ow * SW != ww || ow >= OW) continue;
      acc += dcols[((((n * OH + oh) * OW + ow) * KH + ii) * KW + j) * C + c];
    }}
  }}
  dx[i] = acc;
}}
// col2im's version for CPU devices: work-item q, an input position (n, h, w), sums the
// column entries of its C channels tap by tap (the taps' checks paid once per C elements).
__kernel void col2im_rows(__global T* restrict dx, __global const T* restrict dcols, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int q = get_global_id(0); if (q >= N * H * W) return;
  int t = DIV_W(q); int w = q - t * W; int n = DIV_H(t); int h = t - n * H;
  __global T* d = dx + (long)q * C;
  for (int c = 0; c < C; ++c) d[c] = (T)0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - (IDX)ii * DH; if (hh < 0) continue; IDX oh = DIV_SH(hh); if (oh * SH != hh || oh >= OH) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - (IDX)j * DW; if (ww < 0) continue; IDX ow = DIV_SW(ww); if (ow * SW != ww || ow >= OW) continue;
      __global const T* src = dcols + ((((long)(n * OH + oh) * OW + ow) * KH + ii) * KW + j) * C;
      for (int c = 0; c < C; ++c) d[c] += src[c];
    }}
  }}
}}
// The first maximum of a window in row-major order, never a padding position: h * W + w.
inline int window_argmax(__global const T* x, int n, int oh, int ow, int c, dims_t g1, dims_t g2) {{
  int best_at = -1; T best = {lowest};
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      T v = x[((n * H + h) * W + w) * C + c];
      if (best_at < 0 || v > best) {{ best = v; best_at = h * W + w; }}
    }}
  }}
  return best_at;
}}
__kernel void max_pool(__global T* out, __global const T* x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  T best = {floor_};
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      // TensorFlow's CPU MaxPool (pooling_ops_common.h): a cwiseMax from the lowest
      // finite value, so NaN and -inf never win.
      T v = x[((n * H + h) * W + w) * C + c]; best = v > best ? v : best;
    }}
  }}
  out[i] = best;
}}
// CPU devices take the *_rows kernels: work-item p, an output position, does the C channels of
// its window in an inner loop the compiler vectorises.  One work-item per element runs the
// window's bounds checks and index arithmetic per element, unvectorised: 6x slower on PoCL.
__kernel void max_pool_rows(__global T* restrict out, __global const T* restrict x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int p = get_global_id(0); if (p >= N * OH * OW) return;
  POS_INDEX(p)
  __global T* o = out + (long)p * C;
  for (int c = 0; c < C; ++c) o[c] = {floor_};
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      __global const T* v = x + (((long)n * H + h) * W + w) * C;
      for (int c = 0; c < C; ++c) {{ T a = v[c]; T b = o[c]; o[c] = a > b ? a : b; }}  // as max_pool
    }}
  }}
}}
// max_pool_grad_scatter's rows version: window_argmax's rule for CH channels at a time
// (WINDOW_ARGMAX_BLOCK), then each tap's row of dx written.
#define MPG_BLOCK(COUNT) {{ \
    T best[CH]; int at[CH]; \
    for (int e = 0; e < CH; ++e) {{ best[e] = (T)0; at[e] = -1; }} \
    WINDOW_ARGMAX_BLOCK(COUNT, ) \
    __global const T* g = dy + (long)p * C + c0; \
    for (int ii = 0; ii < KH; ++ii) {{ \
      IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue; \
      for (int j = 0; j < KW; ++j) {{ \
        IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue; \
        __global T* d = dx + (((long)n * H + h) * W + w) * C + c0; \
        int here = h * W + w; \
        for (int e = 0; e < (COUNT); ++e) d[e] = at[e] == here ? (T)0 + g[e] : (T)0; \
      }} \
    }} \
  }}
__kernel void max_pool_grad_scatter_rows(__global T* restrict dx, __global const T* restrict x, __global const T* restrict dy,
                                         dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int p = get_global_id(0); if (p >= N * OH * OW) return;
  POS_INDEX(p)
  int c0 = 0;
  for (; c0 + CH <= C; c0 += CH) MPG_BLOCK(CH)
  if (c0 < C) {{ int nc = C - c0; MPG_BLOCK(nc) }}
}}
#undef MPG_BLOCK
// MaxPoolGrad where windows never overlap (strides >= window): one launch, each window
// writing its gradient at its argmax and zeros at its other positions.
__kernel void max_pool_grad_scatter(__global T* dx, __global const T* x, __global const T* dy, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  int a = window_argmax(x, n, oh, ow, c, g1, g2);
  T g = dy[i];
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      dx[((n * H + h) * W + w) * C + c] = h * W + w == a ? (T)0 + g : (T)0;   /* 0 + g: a -0.0 gradient sums to +0.0, as TensorFlow's */
    }}
  }}
}}
// Overlapping windows: MaxPoolGrad in two launches: each window's argmax once (max_pool_argmax), then every
// input element gathers the gradients of the windows whose argmax it is (no atomics).
__kernel void max_pool_argmax(__global int* argmax, __global const T* x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  argmax[i] = window_argmax(x, n, oh, ow, c, g1, g2);
}}
__kernel void max_pool_grad(__global T* dx, __global const int* argmax, __global const T* dy, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  IN_INDEX(i)
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - ii; if (hh < 0) continue; IDX oh = DIV_SH(hh); if (oh * SH != hh || oh >= OH) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - j; if (ww < 0) continue; IDX ow = DIV_SW(ww); if (ow * SW != ww || ow >= OW) continue;
      int o = ((n * OH + oh) * OW + ow) * C + c;
      if (argmax[o] == h * W + w) acc += dy[o];
    }}
  }}
  dx[i] = acc;
}}
__kernel void max_pool_grad_grad(__global T* out, __global const T* x, __global const T* gg, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  int a = window_argmax(x, n, oh, ow, c, g1, g2);
  out[i] = a < 0 ? (T)0 : gg[(n * H * W + a) * C + c];
}}
inline int window_count(IDX oh, IDX ow, dims_t g1, dims_t g2) {{
  IDX hs = oh * SH - PT; IDX he = min(hs + KH, (IDX)H); hs = max(hs, (IDX)0);
  IDX ws = ow * SW - PL; IDX we = min(ws + KW, (IDX)W); ws = max(ws, (IDX)0);
  return (int)max((he - hs) * (we - ws), (IDX)1);
}}
__kernel void avg_pool(__global T* out, __global const T* x, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      acc += x[((n * H + h) * W + w) * C + c];
    }}
  }}
  out[i] = acc / (T)window_count(oh, ow, g1, g2);
}}
__kernel void avg_pool_grad(__global T* dx, __global const T* dy, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  IN_INDEX(i)
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - ii; if (hh < 0) continue; IDX oh = DIV_SH(hh); if (oh * SH != hh || oh >= OH) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - j; if (ww < 0) continue; IDX ow = DIV_SW(ww); if (ow * SW != ww || ow >= OW) continue;
      acc += dy[((n * OH + oh) * OW + ow) * C + c] / (T)window_count(oh, ow, g1, g2);
    }}
  }}
  dx[i] = acc;
}}
// Depthwise convolution, M (g2.v[6]) filters per input channel.  Work-item i, the
// input-channel position (n, oh, ow, c) of output element i / M, writes its M outputs.
// As TensorFlow's kernels, the three multiply every tap, a padding position's as a zero
// (so an infinite filter tap there gives NaN, 0 * inf), and never skip one.
__kernel void depthwise(__global T* out, __global const T* x, __global const T* f, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  int M = g2.v[6];
  for (int m = 0; m < M; ++m) {{
    T acc = 0;
    for (int ii = 0; ii < KH; ++ii) {{
      IDX h = (IDX)oh * SH - PT + (IDX)ii * DH; bool hin = h >= 0 && h < H;
      for (int j = 0; j < KW; ++j) {{
        IDX w = (IDX)ow * SW - PL + (IDX)j * DW; bool in = hin && w >= 0 && w < W;
        T v = in ? x[(((long)n * H + h) * W + w) * C + c] : (T)0;
        acc += v * f[((long)(ii * KW + j) * C + c) * M + m];
      }}
    }}
    out[(long)i * M + m] = acc;
  }}
}}
// dx[n, h, w, c]: the output gradients of every window that read (n, h, w, c), times the
// filter taps that read it, summed over the multiplier.
__kernel void depthwise_backprop_input(__global T* dx, __global const T* dy, __global const T* f, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  IN_INDEX(i)
  int M = g2.v[6];
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - (IDX)ii * DH; IDX oh = hh < 0 ? (IDX)-1 : DIV_SH(hh); bool hin = hh >= 0 && oh * SH == hh && oh < OH;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - (IDX)j * DW; IDX ow = ww < 0 ? (IDX)-1 : DIV_SW(ww); bool in = hin && ww >= 0 && ow * SW == ww && ow < OW;
      __global const T* k = f + ((long)(ii * KW + j) * C + c) * M;
      if (in) {{
        __global const T* g = dy + ((((long)n * OH + oh) * OW + ow) * C + c) * M;
        for (int m = 0; m < M; ++m) acc += g[m] * k[m];
      }} else {{
        for (int m = 0; m < M; ++m) acc += (T)0 * k[m];  // no output read this tap: a zero gradient
      }}
    }}
  }}
  dx[i] = acc;
}}
// df[ii, j, c, m]: work-item e sums its tap's input times the output gradient over the
// batch and the output positions, in that order.
__kernel void depthwise_backprop_filter(__global T* df, __global const T* x, __global const T* dy, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int e = get_global_id(0);
  int M = g2.v[6];
  int m = e % M; int t = e / M; int c = t % C; t /= C; int j = t % KW; int ii = t / KW;
  T acc = 0;
  for (int n = 0; n < N; ++n) {{
    for (int oh = 0; oh < OH; ++oh) {{
      IDX h = (IDX)oh * SH - PT + (IDX)ii * DH; bool hin = h >= 0 && h < H;
      for (int ow = 0; ow < OW; ++ow) {{
        IDX w = (IDX)ow * SW - PL + (IDX)j * DW; bool in = hin && w >= 0 && w < W;
        T v = in ? x[(((long)n * H + h) * W + w) * C + c] : (T)0;
        acc += v * dy[((((long)n * OH + oh) * OW + ow) * C + c) * M + m];
      }}
    }}
  }}
  df[e] = acc;
}}
#undef T
"""


def _conv_window(op: str, x_shape: tuple[int, ...], f_shape: tuple[int, ...], attrs: dict[str, Any]) -> Window:
    kh, kw, fc, _ = f_shape
    if fc != x_shape[3]:
        raise fail(op, f"input depth {x_shape[3]} must equal the filter's in_channels {fc} "
                   f"(input shape {list(x_shape)} in NHWC order, filter shape {list(f_shape)})")
    return _window(op, x_shape, (kh, kw), attrs, attrs["dilations"])


def _im2col(be: OpenCLBackend, op: str, x: Any, win: Window, dtype: str) -> Any:
    cols = be.new_array((win.n * win.oh * win.ow, win.kh * win.kw * win.c), x.dtype)
    if cols.size:
        if be.is_cpu:
            _launch_positions(be, be.programs.kernel("window", win.key(dtype), "im2col_rows", op), win.n * win.oh, win,
                              cols.base_data, x.base_data)
        else:
            _launch_positions(be, be.programs.kernel("window", win.key(dtype), "im2col", op), win.n * win.oh * win.ow, win,
                              cols.base_data, x.base_data, depth=win.kh)
    return cols


def _columns_product(be: OpenCLBackend, op: str, x: Any, win: Window, dtype: str, b: Any, N: int,
                     b_kn: tuple[int, int], transposed: bool) -> Any:
    """A B, A being the im2col columns of ``x`` ([positions, window elements]; with
    ``transposed``, their transpose).  When Conv2D's product takes the packed MatMul,
    im2col writes A's panels itself (``im2col_panels``): one pass over the columns less."""
    KK, P = win.kh * win.kw * win.c, win.n * win.oh * win.ow
    M, K = (KK, P) if transposed else (P, KK)
    if be.is_cpu and not transposed:
        def fill(packed: Any, Mp: int) -> None:
            _launch_positions(be, be.programs.kernel("window", win.key(dtype), "im2col_panels", op), win.n * win.oh, win,
                              packed, x.base_data, extra=(np.int32(Mp),))

        out = gemm_filled_a(be, op, dtype, fill, b, M, N, K, b_kn)
        if out is not None:
            return out
    cols = _im2col(be, op, x, win, dtype)
    return gemm(be, op, dtype, cols, b, M, N, K, (1, KK) if transposed else (KK, 1), b_kn)


def _check_conv_type(op: str, T: ok.DType) -> str:
    if T.name not in TILES:
        raise fail(op, f"T={T.name} is not supported by the OpenCL convolution")
    return T.name


def _conv2d_nhwc(op: str, input: Any, filter: Any, T: ok.DType, attrs: Any) -> Any:
    """The convolution's output in NHWC (a fresh GEMM result), whatever data_format."""
    _rank4(op, input=input, filter=filter)
    be = BE()
    if attrs["data_format"] not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {attrs['data_format']!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    x = _nhwc(be, op, input, attrs["data_format"])
    win = _conv_window(op, x.shape, filter.shape, attrs)
    oc = filter.shape[3]
    out = _columns_product(be, op, x, win, _check_conv_type(op, T), filter, oc, (oc, 1), transposed=False)
    return be.view(out, (win.n, win.oh, win.ow, oc))


def conv2d(input: Any, filter: Any, T: ok.DType, **attrs: Any) -> Any:
    op = "Conv2D"
    _rank4(op, input=input, filter=filter)
    fmt = attrs["data_format"]
    try:
        groups = conv_groups(_nhwc_dims(input.shape, fmt), filter.shape) if fmt in ("NHWC", "NCHW") else 1
    except ValueError as e:
        raise fail(op, str(e)) from None
    if groups == 1:
        return _from_nhwc(BE(), op, _conv2d_nhwc(op, input, filter, T, attrs), fmt)
    # A grouped convolution (see conv_groups): each group's channels and
    # filter slice gathered contiguous, convolved, and written into its output channels.
    be, axis = BE(), 3 if fmt == "NHWC" else 1
    fc, ocg = filter.shape[2], filter.shape[3] // groups
    out = None
    for i in range(groups):
        xs = gather_view(be, op, input, lambda g: g[(*(slice(None),) * axis, slice(i * fc, (i + 1) * fc))])
        fs = gather_view(be, op, filter, lambda g: g[..., i * ocg:(i + 1) * ocg])
        part = _conv2d_nhwc(op, xs, fs, T, attrs)
        if out is None:
            out = be.new_array((*part.shape[:3], filter.shape[3]), part.dtype)
        copy_into(be, op, out, lambda g: g[..., i * ocg:(i + 1) * ocg], part)
    return _from_nhwc(be, op, out, fmt)


def fused_conv2d(input: Any, filter: Any, bias: Any, activation: str, T: ok.DType, **attrs: Any) -> Any:
    """The convolution, then FusedMatMul's epilogue launch (bias + activation in place)
    on its NHWC output, where the channels are the last dimension; NCHW is transposed
    after that, as Conv2D's output is."""
    op = "FusedConv2D"
    out = _conv2d_nhwc(op, input, filter, T, attrs)
    oc = out.shape[3]
    if bias.ndim != 1 or bias.shape[0] != oc:
        raise fail(op, f"bias must be 1-D with size the number of output channels ({oc}), got shape {list(bias.shape)}")
    return _from_nhwc(BE(), op, bias_activation_in_place(op, out, bias, activation, T), attrs["data_format"])


def conv2d_backprop_input(input_sizes: np.ndarray, filter: Any, out_backprop: Any, T: ok.DType, **attrs: Any) -> Any:
    op, fmt = "Conv2DBackpropInput", attrs["data_format"]
    _rank4(op, filter=filter, out_backprop=out_backprop)
    if fmt not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {fmt!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    be = BE()
    sizes = _sizes(op, "input_sizes", input_sizes, (4, 2))
    dy = _nhwc(be, op, out_backprop, fmt)
    x_shape = (dy.shape[0], sizes[0], sizes[1], filter.shape[2]) if len(sizes) == 2 else _nhwc_dims(sizes, fmt)
    win = _conv_window(op, x_shape, filter.shape, attrs)
    oc = filter.shape[3]
    _check_out(op, "out_backprop", dy.shape, (win.n, win.oh, win.ow, oc), fmt)
    K = win.kh * win.kw * win.c
    P = win.n * win.oh * win.ow
    dcols = gemm(be, op, _check_conv_type(op, T), dy, filter, P, K, oc, (oc, 1), (1, oc))
    dx = be.new_array(x_shape, dy.dtype)
    if dx.size:
        if be.is_cpu:
            _launch_positions(be, be.programs.kernel("window", win.key(T.name), "col2im_rows", op), win.n * win.h * win.w, win,
                              dx.base_data, dcols.base_data)
        else:
            be.launch1d(be.programs.kernel("window", win.key(T.name), "col2im", op), dx.size, dx.base_data, dcols.base_data, values=win.args())
    return _from_nhwc(be, op, dx, fmt)


def conv2d_backprop_filter(input: Any, filter_sizes: np.ndarray, out_backprop: Any, T: ok.DType, **attrs: Any) -> Any:
    op, fmt = "Conv2DBackpropFilter", attrs["data_format"]
    _rank4(op, input=input, out_backprop=out_backprop)
    if fmt not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {fmt!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    be = BE()
    f_shape = tuple(_sizes(op, "filter_sizes", filter_sizes))
    x = _nhwc(be, op, input, fmt)
    dy = _nhwc(be, op, out_backprop, fmt)
    win = _conv_window(op, x.shape, f_shape, attrs)
    oc = f_shape[3]
    _check_out(op, "out_backprop", dy.shape, (x.shape[0], win.oh, win.ow, oc), fmt)
    dw = _columns_product(be, op, x, win, _check_conv_type(op, T), dy, oc, (oc, 1), transposed=True)
    return be.view(dw, f_shape)


def _depthwise_format(op: str, attrs: dict[str, Any]) -> str:
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {fmt!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    return str(fmt)


def _depthwise_kernel(be: OpenCLBackend, op: str, name: str, win: Window, T: ok.DType) -> Any:
    if T.name not in FLOATS:
        raise fail(op, f"T={T.name} is not supported by the OpenCL depthwise convolution")
    return be.programs.kernel("window", win.key(T.name), name, op)


def depthwise_conv2d_native(input: Any, filter: Any, T: ok.DType, **attrs: Any) -> Any:
    """A work-item per (n, oh, ow, c) computing its channel's depth_multiplier outputs
    (the window loops of the pooling kernels, with the filter's taps)."""
    op = "DepthwiseConv2dNative"
    _rank4(op, input=input, filter=filter)
    be, fmt = BE(), _depthwise_format(op, attrs)
    x = _nhwc(be, op, input, fmt)
    win = _conv_window(op, x.shape, filter.shape, attrs)
    m = filter.shape[3]
    out = be.new_array((win.n, win.oh, win.ow, win.c * m), x.dtype)
    if out.size:
        be.launch1d(_depthwise_kernel(be, op, "depthwise", win, T), win.n * win.oh * win.ow * win.c, out.base_data,
                    x.base_data, filter.base_data, values=win.args(m))
    return _from_nhwc(be, op, out, fmt)


def depthwise_conv2d_native_backprop_input(input_sizes: np.ndarray, filter: Any, out_backprop: Any, T: ok.DType,
                                           **attrs: Any) -> Any:
    op = "DepthwiseConv2dNativeBackpropInput"
    _rank4(op, filter=filter, out_backprop=out_backprop)
    be, fmt = BE(), _depthwise_format(op, attrs)
    x_shape = _nhwc_dims(_sizes(op, "input_sizes", input_sizes), fmt)
    win = _conv_window(op, x_shape, filter.shape, attrs)
    m = filter.shape[3]
    dy = _nhwc(be, op, out_backprop, fmt)
    _check_out(op, "out_backprop", dy.shape, (win.n, win.oh, win.ow, win.c * m), fmt)
    dx = be.new_array(x_shape, dy.dtype)
    if dx.size:
        be.launch1d(_depthwise_kernel(be, op, "depthwise_backprop_input", win, T), dx.size, dx.base_data, dy.base_data,
                    filter.base_data, values=win.args(m))
    return _from_nhwc(be, op, dx, fmt)


def depthwise_conv2d_native_backprop_filter(input: Any, filter_sizes: np.ndarray, out_backprop: Any, T: ok.DType,
                                            **attrs: Any) -> Any:
    """A work-item per filter element, summing over the batch and the output positions
    (deterministic, no atomics; the work is the filter's size, so large inputs with small
    filters keep few work-items busy)."""
    op = "DepthwiseConv2dNativeBackpropFilter"
    _rank4(op, input=input, out_backprop=out_backprop)
    be, fmt = BE(), _depthwise_format(op, attrs)
    f_shape = tuple(_sizes(op, "filter_sizes", filter_sizes))
    x = _nhwc(be, op, input, fmt)
    dy = _nhwc(be, op, out_backprop, fmt)
    win = _conv_window(op, x.shape, f_shape, attrs)
    m = f_shape[3]
    _check_out(op, "out_backprop", dy.shape, (win.n, win.oh, win.ow, win.c * m), fmt)
    df = be.new_array(f_shape, x.dtype)
    if df.size:
        be.launch1d(_depthwise_kernel(be, op, "depthwise_backprop_filter", win, T), df.size, df.base_data, x.base_data,
                    dy.base_data, values=win.args(m))
    return df


def _pool_window(op: str, x_shape: tuple[int, ...], attrs: dict[str, Any]) -> Window:
    fmt = attrs["data_format"]
    if fmt not in ("NHWC", "NCHW"):
        raise fail(op, f"data_format {fmt!r} is not supported on this backend; use 'NHWC' or 'NCHW'")
    try:
        kh, kw = spatial_attr(attrs["ksize"], fmt, "ksize")
    except ValueError as e:
        raise fail(op, f"{e}; pooling over the batch or depth dimension is not supported") from None
    return _window(op, x_shape, (kh, kw), attrs, None)


def _launch_positions(be: OpenCLBackend, kernel: Any, positions: int, win: Window, *buffers: Any, depth: int = 1,
                      extra: tuple[Any, ...] = (), values: tuple[Any, ...] | None = None) -> None:
    """A kernel with a work-item per spatial position (and ``depth`` along dimension 1):
    im2col and the ``*_rows`` kernels, in work-groups of 64 (the kernels skip the padding);
    ``extra`` arguments follow the geometry's, or ``values`` (from ``_window_values``) are
    all the by-value arguments."""
    if values is None:
        values = _window_values(win, extra) if extra else win.args()
    be.launch(kernel, (-(-positions // 64) * 64, depth), (64, 1), *buffers, values=values)


@functools.lru_cache(maxsize=256)
def _window_values(win: Window, extra: tuple[Any, ...], first: bool = False) -> tuple[Any, ...]:
    """The geometry's arguments, then ``extra`` (before them with ``first``): one tuple per
    (layer, extra values), so launches find their kernel object by its identity
    (``OpenCLBackend.launch``)."""
    return (*extra, *win.args()) if first else (*win.args(), *extra)


#: The argmax pools' ``with_batch`` argument, by include_batch_in_index.
_BATCH = {False: np.int32(0), True: np.int32(1)}


def _pool(op: str, name: str) -> Any:
    def kernel(*inputs: Any, T: ok.DType, **attrs: Any) -> Any:
        fmt = attrs["data_format"]
        x = inputs[0]
        _rank4(op, **{"input" if op == "MaxPool" else "value": x})
        be = BE()
        x = _nhwc(be, op, x, fmt)
        win = _pool_window(op, x.shape, attrs)
        out = be.new_array((win.n, win.oh, win.ow, win.c), x.dtype)
        if out.size:
            if name == "max_pool" and be.is_cpu:
                _launch_positions(be, be.programs.kernel("window", win.key(T.name), "max_pool_rows", op), win.n * win.oh * win.ow,
                                  win, out.base_data, x.base_data)
            else:
                be.launch1d(be.programs.kernel("window", win.key(T.name), name, op), out.size, out.base_data, x.base_data, values=win.args())
        return _from_nhwc(be, op, out, fmt)

    kernel.__name__ = op
    return kernel


def _half_floor(fn: Any) -> Any:
    """float16 MaxPool, a ``float32_compute`` kernel: its float32 maximum starts from
    float32's lowest value, which narrows to -inf, where TensorFlow's half MaxPool keeps
    half's lowest, -65504 (a window of NaN, -inf or padding only).  Raised to it here."""

    def kernel(*inputs: Any, **attrs: Any) -> Any:
        out = fn(*inputs, **attrs)
        if attrs.get("T") is not ok.float16 or not out.size:
            return out
        be = BE()
        return run_half(be, spec_of("Maximum"), (out, be.from_numpy(np.array(-65504.0, np.float16))))

    kernel.__name__ = getattr(fn, "__name__", "MaxPool")
    kernel._float32_of = fn._float32_of  # type: ignore[attr-defined]  # register_table: other types skip both wrappers
    return kernel


def max_pool_grad(orig_input: Any, orig_output: Any, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, fmt = "MaxPoolGrad", attrs["data_format"]
    _rank4(op, orig_input=orig_input, orig_output=orig_output, grad=grad)
    be = BE()
    x = _nhwc(be, op, orig_input, fmt)
    win = _pool_window(op, x.shape, attrs)
    dy = _nhwc(be, op, grad, fmt)
    for nm, a in (("orig_output", orig_output), ("grad", grad)):
        _check_out(op, nm, _nhwc_dims(a.shape, fmt), (win.n, win.oh, win.ow, win.c), fmt)
    if win.sh >= win.kh and win.sw >= win.kw:  # windows never overlap: each writes its own positions
        covered = (win.sh, win.sw) == (win.kh, win.kw) and win.oh * win.sh - win.pt >= win.h and win.ow * win.sw - win.pl >= win.w
        dx = be.new_array(x.shape, x.dtype) if covered else zeros(be, op, x.shape, x.dtype)
        if dx.size and dy.size:
            if be.is_cpu:
                _launch_positions(be, be.programs.kernel("window", win.key(T.name), "max_pool_grad_scatter_rows", op),
                                  win.n * win.oh * win.ow, win, dx.base_data, x.base_data, dy.base_data)
            else:
                be.launch1d(be.programs.kernel("window", win.key(T.name), "max_pool_grad_scatter", op), dy.size, dx.base_data,
                            x.base_data, dy.base_data, values=win.args())
        return _from_nhwc(be, op, dx, fmt)
    dx = be.new_array(x.shape, x.dtype)
    if dx.size:
        argmax = be.new_array((win.n, win.oh, win.ow, win.c), np.dtype(np.int32))
        if argmax.size:
            be.launch1d(be.programs.kernel("window", win.key(T.name), "max_pool_argmax", op), argmax.size, argmax.base_data,
                        x.base_data, values=win.args())
        be.launch1d(be.programs.kernel("window", win.key(T.name), "max_pool_grad", op), dx.size, dx.base_data,
                    argmax.base_data, dy.base_data, values=win.args())
    return _from_nhwc(be, op, dx, fmt)


def max_pool_grad_grad(orig_input: Any, orig_output: Any, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, fmt = "MaxPoolGradGrad", attrs["data_format"]
    _rank4(op, orig_input=orig_input, orig_output=orig_output, grad=grad)
    be = BE()
    x = _nhwc(be, op, orig_input, fmt)
    win = _pool_window(op, x.shape, attrs)
    _check_out(op, "orig_output", _nhwc_dims(orig_output.shape, fmt), (win.n, win.oh, win.ow, win.c), fmt)
    _check_out(op, "grad", _nhwc_dims(grad.shape, fmt), x.shape, fmt)
    gg = _nhwc(be, op, grad, fmt)
    out = be.new_array((win.n, win.oh, win.ow, win.c), x.dtype)
    if out.size:
        be.launch1d(be.programs.kernel("window", win.key(T.name), "max_pool_grad_grad", op), out.size, out.base_data, x.base_data, gg.base_data, values=win.args())
    return _from_nhwc(be, op, out, fmt)


@family("argmax_pool", tuple(f"{t}:{i}" for t in POOL_TYPES for i in ("int32", "int64")))
def _argmax_pool_source(key: str) -> str:
    dtype, index, *width = key.split(":")  # "float32:int64", or "float32:int64:long" (Window.key)
    T, I = ctype(ok.as_dtype(dtype)), ctype(ok.as_dtype(index))
    lowest = "-INFINITY" if dtype in FLOATS else _LOWEST[dtype]
    panels = _im2col_panels_source(TILES[dtype][1]) if dtype in TILES else ""
    return f"""
#define T {T}
#define I {I}
#define ISNAN(v) {"OK_ISNAN(v)" if dtype in FLOATS else "0"}
#define WIDE {int(bool(width))}
{_GEOMETRY}
// MaxPoolWithArgmax: argmax = the flat index of the window's first maximum in row-major order,
// a NaN winning only as the first element (window_argmax's rule, TensorFlow's CPU one), the
// batch counted when with_batch; out = the element there (maxpooling_op.cc keeps the two together).
__kernel void max_pool_with_argmax(__global T* out, __global I* argmax, __global const T* x, int with_batch,
                                   dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  int best_at = -1; T best = {lowest};
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      T v = x[((n * H + h) * W + w) * C + c];
      if (best_at < 0 || v > best) {{ best = v; best_at = h * W + w; }}
    }}
  }}
  out[i] = best;
  argmax[i] = best_at < 0 ? (I)-1 : (with_batch ? (I)n * H * W * C : (I)0) + (I)best_at * C + c;
}}
// max_pool_with_argmax for CPU devices: work-item p, an output position, runs the rule above for
// CH channels at a time (WINDOW_ARGMAX_BLOCK), and writes its C outputs and indices.
#define MPA_BLOCK(COUNT) {{ \
    T best[CH]; int at[CH]; \
    for (int e = 0; e < CH; ++e) {{ best[e] = {lowest}; at[e] = -1; }} \
    WINDOW_ARGMAX_BLOCK(COUNT, ) \
    for (int e = 0; e < (COUNT); ++e) {{ \
      o[c0 + e] = best[e]; \
      am[c0 + e] = at[e] < 0 ? (I)-1 : base + (I)at[e] * C + c0 + e; \
    }} \
  }}
__kernel void max_pool_with_argmax_rows(__global T* restrict out, __global I* restrict argmax, __global const T* restrict x,
                                        int with_batch, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int p = get_global_id(0); if (p >= N * OH * OW) return;
  POS_INDEX(p)
  __global T* o = out + (long)p * C; __global I* am = argmax + (long)p * C;
  I base = with_batch ? (I)n * H * W * C : (I)0;
  int c0 = 0;
  for (; c0 + CH <= C; c0 += CH) MPA_BLOCK(CH)
  if (c0 < C) {{ int nc = C - c0; MPA_BLOCK(nc) }}
}}
#undef MPA_BLOCK
// max_pool_grad_with_argmax_scatter for CPU devices: work-item p, an output position, writes
// its window's rows of C channels (a loop the compiler vectorises).
__kernel void max_pool_grad_with_argmax_scatter_rows(__global T* restrict dx, __global const I* restrict argmax,
                                                     __global const T* restrict dy, int with_batch,
                                                     dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int p = get_global_id(0); if (p >= N * OH * OW) return;
  POS_INDEX(p)
  __global const I* a = argmax + (long)p * C; __global const T* g = dy + (long)p * C;
  I base = with_batch ? (I)n * H * W * C : (I)0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      __global T* d = dx + (((long)n * H + h) * W + w) * C;
      I here = base + (I)(h * W + w) * C;
      for (int c = 0; c < C; ++c) d[c] = here + c == a[c] ? (T)0 + g[c] : (T)0;
    }}
  }}
}}
// MaxPoolGradWithArgmax as a gather (no atomics): each input element sums the gradients of
// the windows holding it whose argmax is its own index.
__kernel void max_pool_grad_with_argmax(__global T* dx, __global const I* argmax, __global const T* dy,
                                        int with_batch, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  IN_INDEX(i)
  I me = with_batch ? (I)i : (I)((h * W + w) * C + c);
  T acc = 0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX hh = (IDX)h + PT - ii; if (hh < 0) continue; IDX oh = DIV_SH(hh); if (oh * SH != hh || oh >= OH) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX ww = (IDX)w + PL - j; if (ww < 0) continue; IDX ow = DIV_SW(ww); if (ow * SW != ww || ow >= OW) continue;
      int o = ((n * OH + oh) * OW + ow) * C + c;
      if (argmax[o] == me) acc += dy[o];
    }}
  }}
  dx[i] = acc;
}}
// MaxPoolGradWithArgmax where windows never overlap (strides >= window): one work-item per window
// writes its gradient at its argmax and zeros at its other positions (an index outside the window
// is ignored, as by the gather above).
__kernel void max_pool_grad_with_argmax_scatter(__global T* dx, __global const I* argmax, __global const T* dy,
                                                int with_batch, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  OUT_INDEX(i)
  I a = argmax[i]; T g = dy[i];
  I base = with_batch ? (I)n * H * W * C : (I)0;
  for (int ii = 0; ii < KH; ++ii) {{
    IDX h = (IDX)oh * SH - PT + ii; if (h < 0 || h >= H) continue;
    for (int j = 0; j < KW; ++j) {{
      IDX w = (IDX)ow * SW - PL + j; if (w < 0 || w >= W) continue;
      dx[((n * H + h) * W + w) * C + c] = base + (I)((h * W + w) * C + c) == a ? (T)0 + g : (T)0;
    }}
  }}
}}
// MaxPoolGradGradWithArgmax: each output takes gg at its argmax (0 for an index outside the input).
__kernel void max_pool_grad_grad_with_argmax(__global T* out, __global const I* argmax, __global const T* gg,
                                             int with_batch, dims_t g1, dims_t g2, dims_t g3, dims_t g4) {{
  int i = get_global_id(0);
  long n = DIV_OH(DIV_OW(DIV_C(i))); long image = (long)H * W * C;
  long a = (long)argmax[i];
  long limit = with_batch ? N * image : image;
  out[i] = (a >= 0 && a < limit) ? gg[with_batch ? a : n * image + a] : (T)0;
}}
"""


def _argmax_pool_setup(op: str, input: Any, attrs: dict[str, Any]) -> tuple[OpenCLBackend, Window]:
    _rank4(op, input=input)
    return BE(), _pool_window(op, input.shape, {**attrs, "data_format": "NHWC"})


def _argmax_pool_index_check(be: OpenCLBackend, op: str, argmax: Any, win: Window, with_batch: bool) -> None:
    """Host-known argmax (uploaded from numpy) is checked; device-computed indices outside
    the input are ignored, as for Gather."""
    host = be.host(argmax)
    limit = (win.n if with_batch else 1) * win.h * win.w * win.c
    if host is not None and host.size:
        bad = (host < 0) | (host >= limit)
        if bad.any():
            where = tuple(int(v) for v in np.argwhere(bad)[0])
            raise fail(op, f"argmax{list(where)} = {int(host[where])} is not an index into the input's "
                           f"{'elements' if with_batch else 'image (include_batch_in_index=False)'}: expected [0, {limit})")


def max_pool_with_argmax(input: Any, T: ok.DType, Targmax: ok.DType, include_batch_in_index: bool, **attrs: Any) -> Any:
    op = "MaxPoolWithArgmax"
    be, win = _argmax_pool_setup(op, input, attrs)
    check_argmax_type(op, Targmax, input.shape, include_batch_in_index)
    shape = (win.n, win.oh, win.ow, win.c)
    out, argmax = be.new_array(shape, input.dtype), be.new_array(shape, Targmax.np)
    if out.size:
        key, values = win.key(f"{T.name}:{Targmax.name}"), _window_values(win, (_BATCH[include_batch_in_index],), first=True)
        if be.is_cpu:
            _launch_positions(be, be.programs.kernel("argmax_pool", key, "max_pool_with_argmax_rows", op),
                              win.n * win.oh * win.ow, win, out.base_data, argmax.base_data, input.base_data,
                              values=values)
        else:
            be.launch1d(be.programs.kernel("argmax_pool", key, "max_pool_with_argmax", op), out.size, out.base_data,
                        argmax.base_data, input.base_data, values=values)
    return out, argmax


def _argmax_pool_backward(op: str, name: str, grad_shaped_as_input: bool) -> Any:
    def kernel(input: Any, grad: Any, argmax: Any, T: ok.DType, Targmax: ok.DType, include_batch_in_index: bool,
               **attrs: Any) -> Any:
        be, win = _argmax_pool_setup(op, input, attrs)
        _rank4(op, grad=grad, argmax=argmax)
        pooled = (win.n, win.oh, win.ow, win.c)
        _check_out(op, "grad", grad.shape, tuple(input.shape) if grad_shaped_as_input else pooled, "NHWC")
        _check_out(op, "argmax", argmax.shape, pooled, "NHWC")
        _argmax_pool_index_check(be, op, argmax, win, include_batch_in_index)
        key, values = win.key(f"{T.name}:{Targmax.name}"), _window_values(win, (_BATCH[include_batch_in_index],), first=True)
        if not grad_shaped_as_input and win.sh >= win.kh and win.sw >= win.kw:
            # disjoint windows: each writes its own positions (zeros first unless they cover the input)
            covered = ((win.sh, win.sw) == (win.kh, win.kw) and win.oh * win.sh - win.pt >= win.h
                       and win.ow * win.sw - win.pl >= win.w)
            dx = be.new_array(tuple(input.shape), grad.dtype) if covered else zeros(be, op, tuple(input.shape), grad.dtype)
            if dx.size and argmax.size:
                if be.is_cpu:
                    _launch_positions(be, be.programs.kernel("argmax_pool", key, "max_pool_grad_with_argmax_scatter_rows", op),
                                      win.n * win.oh * win.ow, win, dx.base_data, argmax.base_data, grad.base_data,
                                      values=values)
                else:
                    k = be.programs.kernel("argmax_pool", key, "max_pool_grad_with_argmax_scatter", op)
                    be.launch1d(k, argmax.size, dx.base_data, argmax.base_data, grad.base_data, values=values)
            return dx
        out = be.new_array(pooled if grad_shaped_as_input else tuple(input.shape), grad.dtype)
        if out.size:
            if not argmax.size:
                return zeros(be, op, out.shape, out.dtype)
            k = be.programs.kernel("argmax_pool", key, name, op)
            be.launch1d(k, out.size, out.base_data, argmax.base_data, grad.base_data, values=values)
        return out

    kernel.__name__ = op
    return kernel


def avg_pool_grad(orig_input_shape: np.ndarray, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, fmt = "AvgPoolGrad", attrs["data_format"]
    _rank4(op, grad=grad)
    be = BE()
    shape = _nhwc_dims(_sizes(op, "orig_input_shape", orig_input_shape), fmt)
    win = _pool_window(op, shape, attrs)
    dy = _nhwc(be, op, grad, fmt)
    _check_out(op, "grad", dy.shape, (win.n, win.oh, win.ow, win.c), fmt)
    dx = be.new_array(shape, grad.dtype)
    if dx.size:
        be.launch1d(be.programs.kernel("window", win.key(T.name), "avg_pool_grad", op), dx.size, dx.base_data, dy.base_data, values=win.args())
    return _from_nhwc(be, op, dx, fmt)


def register_all() -> None:
    """(op, function, type constraints, host-memory args), one row per kernel."""
    floats = {"T": list(FLOATS) + ["float16"]}
    pools = {"T": list(POOL_TYPES) + ["float16"]}
    conv = {"T": [t for t in TILES if t in POOL_TYPES] + ["float16"]}
    ints = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
    f = float32_compute  # float16 is computed in float32
    table: list[KernelRow] = [
        ("Softmax", f(_softmax("Softmax", 0)), floats, ()),
        ("SoftmaxGrad", f(softmax_grad), floats, ()),
        ("LogSoftmax", f(_softmax("LogSoftmax", 1)), floats, ()),
        ("SoftmaxCrossEntropyWithLogits", f(softmax_cross_entropy_with_logits), floats, ()),
        ("SparseSoftmaxCrossEntropyWithLogits", f(sparse_softmax_cross_entropy_with_logits), floats, ()),
        ("SparseSoftmaxCrossEntropyLoss", f(sparse_softmax_cross_entropy_loss), floats, ()),
        ("BiasAddGrad", f(bias_add_grad), {"T": list(FLOATS) + ["float16"] + ints}, ()),
        ("Conv2D", f(conv2d), conv, ()),
        ("FusedConv2D", f(fused_conv2d), floats, ()),
        ("Conv2DBackpropInput", f(conv2d_backprop_input), conv, ("input_sizes",)),
        ("Conv2DBackpropFilter", f(conv2d_backprop_filter), conv, ("filter_sizes",)),
        ("DepthwiseConv2dNative", f(depthwise_conv2d_native), floats, ()),
        ("DepthwiseConv2dNativeBackpropInput", f(depthwise_conv2d_native_backprop_input), floats, ("input_sizes",)),
        ("DepthwiseConv2dNativeBackpropFilter", f(depthwise_conv2d_native_backprop_filter), floats, ("filter_sizes",)),
        ("MaxPool", _half_floor(f(_pool("MaxPool", "max_pool"))), pools, ()),
        ("MaxPoolGrad", f(max_pool_grad), pools, ()),
        ("MaxPoolGradGrad", f(max_pool_grad_grad), pools, ()),
        ("MaxPoolWithArgmax", f(max_pool_with_argmax), pools, ()),
        ("MaxPoolGradWithArgmax", f(_argmax_pool_backward("MaxPoolGradWithArgmax", "max_pool_grad_with_argmax", False)),
         pools, ()),
        ("MaxPoolGradGradWithArgmax",
         f(_argmax_pool_backward("MaxPoolGradGradWithArgmax", "max_pool_grad_grad_with_argmax", True)), pools, ()),
        ("AvgPool", f(_pool("AvgPool", "avg_pool")), pools, ()),
        ("AvgPoolGrad", f(avg_pool_grad), pools, ("orig_input_shape",)),
    ]
    register_table(table)
