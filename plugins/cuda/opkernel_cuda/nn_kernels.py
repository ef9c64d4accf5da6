"""CUDA kernels of the neural-network ops.

* Activations, Softmax, LogSoftmax and BiasAdd: the CPU plugin's bodies.
* FusedMatMul: the CPU body too: a cuBLAS product, then the bias and the
  activation written into it in place (cupy elementwise launches, no new buffers
  for Relu, Relu6 and Tanh).
* FusedConv2D: the Conv2D below, then FusedMatMul's in-place bias and activation.
* Conv2D and its two backprops: im2col as a strided view of the padded input
  (copied once) and one cuBLAS GEMM, as on the CPU; the input backprop adds the
  GEMM's columns back with one strided add per kernel position.  16-bit floats
  compute in float32.  Written against ``xp_of``, so the tests run them on numpy.
* SparseSoftmaxCrossEntropyLoss: the raw per-example kernel below, then the
  loss summed and backprop scaled on the device (cupy, the CPU body's helper).
* AvgPool / AvgPoolGrad: one strided add per window position, as on the CPU.
* Raw CUDA (``sources.py``): the two softmax cross-entropy losses (one block
  per row, fused max / sum / loss / backprop), BiasAddGrad over the channels
  of NHWC data, and MaxPool with MaxPoolGrad / MaxPoolGradGrad through one
  argmax kernel and a gather (deterministic: no atomics); MaxPoolWithArgmax is
  that argmax kernel, MaxPoolGradWithArgmax the gather from its indices, and
  MaxPoolGradGradWithArgmax the CPU body's gather on cupy.

A raw kernel falls back to the CPU body (which raises the CPU's error
messages, or computes with cupy's array API) for bad arguments, empty inputs,
and dtypes it is not instantiated for.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel.ops.nn_ops import check_argmax_type
from opkernel_cpu import nn_kernels as cpu
from opkernel_cpu.xp import xp_of

from . import runtime
from .sources import ACCUMULATOR, CTYPES, FLOATS, POOL_TYPES, REALS

Row = tuple[str, Any, "dict[str, list[str]] | None", tuple[str, ...]]

_I64 = np.int64
ACCUMULATOR_NP = {"float16": np.float32, "float32": np.float32, "float64": np.float64, "int32": np.int32, "int64": np.int64}


def _types(T: ok.DType) -> tuple[str, str]:
    return CTYPES[T.name], ACCUMULATOR[T.name]


def _acc_size(T: ok.DType) -> int:
    return 8 if ACCUMULATOR[T.name] in ("double", "long long") else 4


# ------------------------------------------------------------ softmax cross-entropy


def softmax_cross_entropy_with_logits(features: Any, labels: Any, T: ok.DType, **attrs: Any) -> Any:
    xp = xp_of(features, labels)

    def fallback() -> Any:
        return cpu.softmax_cross_entropy_with_logits(features, labels, T=T)

    if xp is np or T.name not in FLOATS or features.ndim != 2 or labels.ndim != 2:
        return fallback()
    try:
        shape = np.broadcast_shapes(features.shape, labels.shape)
    except ValueError:
        return fallback()  # raises the CPU's message
    rows, cols = shape
    if not rows or not cols:
        return fallback()
    x = xp.ascontiguousarray(xp.broadcast_to(features, shape))
    y = xp.ascontiguousarray(xp.broadcast_to(labels, shape))
    loss = xp.empty(rows, T.np)
    backprop = xp.empty(shape, T.np)
    runtime.launch(
        "xent", "softmax_xent", _types(T), min(rows, runtime.MAX_BLOCKS), runtime.BLOCK,
        (x, y, loss, backprop, _I64(rows), _I64(cols)), shared=runtime.BLOCK * _acc_size(T),
    )
    return loss, backprop


def _sparse_xent(op: str, features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType) -> tuple[Any, Any]:
    """Per-example loss and backprop: the raw kernel (in T), or the CPU body (in its
    work type) for host arrays, other dtypes, bad shapes or labels (raising its
    messages, naming ``op``) and empty inputs."""
    xp = xp_of(features, labels)
    if (
        xp is np or T.name not in FLOATS or Tlabels.name not in ("int32", "int64")
        or features.ndim != 2 or labels.ndim != 1 or labels.shape[0] != features.shape[0]
        or not features.size
    ):
        return cpu._sparse_xent(op, features, labels, T)
    rows, cols = features.shape
    if bool(((labels < 0) | (labels >= cols)).any()):  # synchronises, as TensorFlow's CPU kernel checks
        return cpu._sparse_xent(op, features, labels, T)  # raises the CPU's message naming the label
    x = xp.ascontiguousarray(features)
    loss = xp.empty(rows, T.np)
    backprop = xp.empty((rows, cols), T.np)
    runtime.launch(
        "sparse_xent", "sparse_softmax_xent", (*_types(T), CTYPES[Tlabels.name]), min(rows, runtime.MAX_BLOCKS),
        runtime.BLOCK, (x, xp.ascontiguousarray(labels), loss, backprop, _I64(rows), _I64(cols)),
        shared=runtime.BLOCK * _acc_size(T),
    )
    return loss, backprop


def sparse_softmax_cross_entropy_with_logits(features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType, **attrs: Any) -> Any:
    loss, backprop = _sparse_xent("SparseSoftmaxCrossEntropyWithLogits", features, labels, T, Tlabels)
    return loss.astype(T.np, copy=False), backprop.astype(T.np, copy=False)


def sparse_softmax_cross_entropy_loss(
    features: Any, labels: Any, T: ok.DType, Tlabels: ok.DType, reduction: str, **attrs: Any
) -> Any:
    """The per-example kernel, then the loss summed and backprop scaled on the device
    (cupy's reduction and an in-place multiply) by the CPU body's helper."""
    return cpu.reduce_loss(*_sparse_xent("SparseSoftmaxCrossEntropyLoss", features, labels, T, Tlabels), reduction, T)


# ------------------------------------------------------------ bias


def bias_add_grad(out_backprop: Any, T: ok.DType, data_format: str, **attrs: Any) -> Any:
    xp = xp_of(out_backprop)
    axis = cpu._channel_axis("BiasAddGrad", out_backprop, data_format)
    if xp is np or T.name not in REALS or axis != out_backprop.ndim - 1 or not out_backprop.size:
        return cpu.bias_add_grad(out_backprop, T=T, data_format=data_format)
    dy = xp.ascontiguousarray(out_backprop)
    channels = dy.shape[-1]
    n_rows = dy.size // channels
    chunks = min(max(1, n_rows // 64), 1024)
    chunk = -(-n_rows // chunks)
    chunks = -(-n_rows // chunk)
    partial = xp.empty((chunks, channels), ACCUMULATOR_NP[T.name])
    blocks = (min(-(-channels // runtime.BLOCK), runtime.MAX_BLOCKS), chunks)
    runtime.launch(
        "bias_grad", "bias_grad_partial", _types(T), blocks, runtime.BLOCK,
        (dy, partial, _I64(n_rows), _I64(channels), _I64(chunk)),
    )
    return partial.sum(axis=0).astype(T.np, copy=False)


# ------------------------------------------------------------ convolution


def _im2col(x: Any, win: Any) -> Any:
    """(n * oh * ow, kh * kw * c): each row one window of the padded NHWC input."""
    xp = xp_of(x)
    padded = win.padded(x)
    n, _, _, c = padded.shape
    s0, s1, s2, s3 = padded.strides
    view = xp.lib.stride_tricks.as_strided(
        padded,
        shape=(n, win.oh, win.ow, win.kh, win.kw, c),
        strides=(s0, s1 * win.sh, s2 * win.sw, s1 * win.dh, s2 * win.dw, s3),
    )
    return view.reshape(n * win.oh * win.ow, win.kh * win.kw * c)


def conv2d(input: Any, filter: Any, T: ok.DType, **attrs: Any) -> Any:
    cpu._check_rank4("Conv2D", input=input, filter=filter)
    return cpu.conv2d_by_groups(lambda x, f: _conv2d("Conv2D", x, f, T, attrs), input, filter, attrs["data_format"])


def _conv2d(op: str, input: Any, filter: Any, T: ok.DType, attrs: dict[str, Any]) -> Any:
    """The convolution of Conv2D and FusedConv2D; ``op`` names the op in errors."""
    cpu._check_rank4(op, input=input, filter=filter)
    x = cpu._to_nhwc(input, attrs["data_format"])
    g = cpu._conv_geometry(op, x.shape, filter.shape, attrs)
    wt = cpu._work_type(T)
    n, win = x.shape[0], g.win
    kh, kw, ci, _ = filter.shape  # explicit sizes: a reshape to (-1, 0) is refused with no output channels
    out = _im2col(x.astype(wt, copy=False), win) @ filter.astype(wt, copy=False).reshape(kh * kw * ci, g.out_channels)
    return cpu._from_nhwc(out.reshape(n, win.oh, win.ow, g.out_channels).astype(T.np, copy=False), attrs["data_format"])


def fused_conv2d(input: Any, filter: Any, bias: Any, activation: str, T: ok.DType, **attrs: Any) -> Any:
    """The convolution above, then the bias and the activation written into its fresh
    output (the CPU body's epilogue: cupy elementwise, in place for Relu, Relu6, Tanh)."""
    return cpu.fused_conv2d_epilogue(_conv2d("FusedConv2D", input, filter, T, attrs), bias, activation, T, attrs["data_format"])


def conv2d_backprop_input(input_sizes: Any, filter: Any, out_backprop: Any, T: ok.DType, **attrs: Any) -> Any:
    op, data_format = "Conv2DBackpropInput", attrs["data_format"]
    cpu._check_rank4(op, filter=filter, out_backprop=out_backprop)
    cpu._check_format(op, data_format)
    sizes = cpu._sizes(op, "input_sizes", input_sizes, (4, 2))
    dy = cpu._to_nhwc(out_backprop, data_format)
    if len(sizes) == 2:
        x_shape = (dy.shape[0], sizes[0], sizes[1], filter.shape[2])
    else:
        x_shape = cpu._nhwc_dims(sizes, data_format)
    g = cpu._conv_geometry(op, x_shape, filter.shape, attrs)
    n, h, w, c = x_shape
    win = g.win
    cpu._check_out(op, "out_backprop", dy.shape, (n, win.oh, win.ow, g.out_channels), data_format)
    xp = xp_of(filter, out_backprop)
    wt = cpu._work_type(T)
    dxp = xp.zeros(win.padded_shape(n, h, w, c), wt)
    if dy.size and dxp.size:
        dcols = dy.astype(wt, copy=False).reshape(-1, g.out_channels) @ filter.astype(wt, copy=False).reshape(-1, g.out_channels).T
        dcols = dcols.reshape(n, win.oh, win.ow, win.kh, win.kw, c)
        for i in range(win.kh):
            for j in range(win.kw):
                dxp[win.tap(i, j)] += dcols[:, :, :, i, j, :]
    return cpu._from_nhwc(win.crop(dxp, h, w).astype(T.np), data_format)


def conv2d_backprop_filter(input: Any, filter_sizes: Any, out_backprop: Any, T: ok.DType, **attrs: Any) -> Any:
    op, data_format = "Conv2DBackpropFilter", attrs["data_format"]
    cpu._check_rank4(op, input=input, out_backprop=out_backprop)
    cpu._check_format(op, data_format)
    f_shape = tuple(cpu._sizes(op, "filter_sizes", filter_sizes))
    x = cpu._to_nhwc(input, data_format)
    dy = cpu._to_nhwc(out_backprop, data_format)
    g = cpu._conv_geometry(op, x.shape, f_shape, attrs)
    win = g.win
    cpu._check_out(op, "out_backprop", dy.shape, (x.shape[0], win.oh, win.ow, g.out_channels), data_format)
    wt = cpu._work_type(T)
    cols = _im2col(x.astype(wt, copy=False), win)
    dw = cols.T @ dy.astype(wt, copy=False).reshape(dy.shape[0] * win.oh * win.ow, g.out_channels)
    return dw.reshape(f_shape).astype(T.np, copy=False)


# ------------------------------------------------------------ pooling


def _pool_args(x: Any, win: Any) -> tuple[Any, ...]:
    _, h, w, c = x.shape
    (pad_top, _), (pad_left, _) = win.pads
    # 64-bit: the kernels' window coordinates pass 2**31 where every size fits in 32 bits
    return tuple(_I64(v) for v in (h, w, c, win.oh, win.ow, win.kh, win.kw, win.sh, win.sw, pad_top, pad_left))


def _max_pool_nhwc(x: Any, win: Any, T: ok.DType) -> tuple[Any, Any]:
    """(maximum, argmax) of every window of contiguous NHWC ``x``; argmax indexes ``x`` flat, -1 if none."""
    xp = xp_of(x)
    n, _, _, c = x.shape
    y = xp.empty((n, win.oh, win.ow, c), x.dtype)
    argmax = xp.empty(y.shape, np.int64)
    if y.size:
        runtime.launch(
            "pool", "max_pool", _types(T), runtime.grid(y.size), runtime.BLOCK,
            (x, y, argmax, _I64(y.size), *_pool_args(x, win)),
        )
    return y, argmax


def max_pool(input: Any, T: ok.DType, **attrs: Any) -> Any:
    if xp_of(input) is np or T.name not in POOL_TYPES or input.ndim != 4:
        return cpu.max_pool(input, T=T, **attrs)
    data_format = attrs["data_format"]
    x = xp_of(input).ascontiguousarray(cpu._to_nhwc(input, data_format))
    win = cpu._pool_geometry("MaxPool", x.shape, attrs)
    return cpu._from_nhwc(_max_pool_nhwc(x, win, T)[0], data_format)


def _pool_grad_setup(op: str, orig_input: Any, orig_output: Any, grad: Any, attrs: dict[str, Any]) -> tuple[Any, Any]:
    data_format = attrs["data_format"]
    cpu._check_rank4(op, orig_input=orig_input, orig_output=orig_output, grad=grad)
    x = xp_of(orig_input).ascontiguousarray(cpu._to_nhwc(orig_input, data_format))
    win = cpu._pool_geometry(op, x.shape, attrs)
    n, _, _, c = x.shape
    cpu._check_out(op, "orig_output", cpu._to_nhwc(orig_output, data_format).shape, (n, win.oh, win.ow, c), data_format)
    return x, win


def max_pool_grad(orig_input: Any, orig_output: Any, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, data_format = "MaxPoolGrad", attrs["data_format"]
    xp = xp_of(orig_input, grad)
    if xp is np or T.name not in REALS or orig_input.ndim != 4:
        return cpu.max_pool_grad(orig_input, orig_output, grad, T=T, **attrs)
    x, win = _pool_grad_setup(op, orig_input, orig_output, grad, attrs)
    n, h, w, c = x.shape
    dy = xp.ascontiguousarray(cpu._to_nhwc(grad, data_format))
    cpu._check_out(op, "grad", dy.shape, (n, win.oh, win.ow, c), data_format)
    _, argmax = _max_pool_nhwc(x, win, T)
    dx = xp.zeros(x.shape, T.np)
    if not dx.size or not argmax.size:
        return cpu._from_nhwc(dx, data_format)
    runtime.launch(
        "pool", "max_pool_grad", _types(T), runtime.grid(dx.size), runtime.BLOCK,
        (argmax, dy, dx, _I64(dx.size), *_pool_args(x, win)),
    )
    return cpu._from_nhwc(dx, data_format)


def max_pool_grad_grad(orig_input: Any, orig_output: Any, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, data_format = "MaxPoolGradGrad", attrs["data_format"]
    xp = xp_of(orig_input, grad)
    if xp is np or T.name not in REALS or orig_input.ndim != 4:
        return cpu.max_pool_grad_grad(orig_input, orig_output, grad, T=T, **attrs)
    x, win = _pool_grad_setup(op, orig_input, orig_output, grad, attrs)
    gg = xp.ascontiguousarray(cpu._to_nhwc(grad, data_format))
    cpu._check_out(op, "grad", gg.shape, x.shape, data_format)
    _, argmax = _max_pool_nhwc(x, win, T)
    picked = gg.reshape(-1)[xp.maximum(argmax, 0)]
    out = xp.where(argmax >= 0, picked, xp.zeros((), gg.dtype))
    return cpu._from_nhwc(out, data_format)


def max_pool_with_argmax(input: Any, T: ok.DType, Targmax: ok.DType, include_batch_in_index: bool, **attrs: Any) -> Any:
    """MaxPool's argmax kernel; the output is the input at that argmax (TensorFlow's CPU
    rule, the contract of MaxPoolWithArgmax on every backend: a NaN wins only as a
    window's first element, and is then the output)."""
    op = "MaxPoolWithArgmax"
    xp = xp_of(input)
    if xp is np or T.name not in POOL_TYPES or input.ndim != 4:
        return cpu.max_pool_with_argmax(input, T=T, Targmax=Targmax, include_batch_in_index=include_batch_in_index, **attrs)
    x = xp.ascontiguousarray(input)
    win = cpu._argmax_pool_window(op, x.shape, attrs)
    check_argmax_type(op, Targmax, x.shape, include_batch_in_index)
    y, argmax = _max_pool_nhwc(x, win, T)  # argmax counts the batch
    y = xp.where(argmax >= 0, x.reshape(-1)[xp.maximum(argmax, 0)], y)
    n, h, w, c = x.shape
    if not include_batch_in_index and n > 1:
        argmax -= (xp.arange(n, dtype=np.int64) * (h * w * c))[:, None, None, None]
    return y, argmax.astype(Targmax.np, copy=False)


def max_pool_grad_with_argmax(input: Any, grad: Any, argmax: Any, T: ok.DType, **attrs: Any) -> Any:
    """MaxPoolGrad's gather over the windows holding each input element, from the given
    argmax (checked on the device: one synchronisation)."""
    op = "MaxPoolGradWithArgmax"
    xp = xp_of(input, grad, argmax)
    if xp is np or T.name not in REALS or input.ndim != 4:
        return cpu.max_pool_grad_with_argmax(input, grad, argmax, T=T, **attrs)
    idx = cpu.argmax_pool_inputs(op, input, grad, argmax, attrs, grad_is_input_shaped=False)
    win = cpu._argmax_pool_window(op, input.shape, attrs)
    dx = xp.zeros(input.shape, T.np)
    if dx.size and idx.size:
        runtime.launch(
            "pool", "max_pool_grad", _types(T), runtime.grid(dx.size), runtime.BLOCK,
            (idx, xp.ascontiguousarray(grad), dx, _I64(dx.size), *_pool_args(input, win)),
        )
    return dx


def _inside_counts(xp: Any, h: int, w: int, win: Any) -> Any:
    return xp.asarray(np.maximum(cpu._counts(h, w, win), 1))


def avg_pool(value: Any, T: ok.DType, **attrs: Any) -> Any:
    data_format = attrs["data_format"]
    cpu._check_rank4("AvgPool", value=value)
    x = cpu._to_nhwc(value, data_format)
    win = cpu._pool_geometry("AvgPool", x.shape, attrs)
    n, h, w, c = x.shape
    xp = xp_of(value)
    padded = win.padded(x.astype(cpu._work_type(T), copy=False))
    out = xp.zeros((n, win.oh, win.ow, c), padded.dtype)
    for i in range(win.kh):
        for j in range(win.kw):
            out += padded[win.tap(i, j)]
    out /= _inside_counts(xp, h, w, win)
    return cpu._from_nhwc(out.astype(T.np, copy=False), data_format)


def avg_pool_grad(orig_input_shape: Any, grad: Any, T: ok.DType, **attrs: Any) -> Any:
    op, data_format = "AvgPoolGrad", attrs["data_format"]
    cpu._check_rank4(op, grad=grad)
    n, h, w, c = cpu._nhwc_dims(cpu._sizes(op, "orig_input_shape", orig_input_shape), data_format)
    win = cpu._pool_geometry(op, (n, h, w, c), attrs)
    dy = cpu._to_nhwc(grad, data_format)
    cpu._check_out(op, "grad", dy.shape, (n, win.oh, win.ow, c), data_format)
    xp = xp_of(grad)
    wt = cpu._work_type(T)
    share = dy.astype(wt) / _inside_counts(xp, h, w, win)
    dxp = xp.zeros(win.padded_shape(n, h, w, c), wt)
    for i in range(win.kh):
        for j in range(win.kw):
            dxp[win.tap(i, j)] += share
    return cpu._from_nhwc(win.crop(dxp, h, w).astype(T.np), data_format)


def _softplus(x: Any) -> Any:
    return xp_of(x).logaddexp(x, x.dtype.type(0))


def rows() -> list[Row]:
    real = {"T": [t for t in cpu._REAL if t != "bfloat16"]}
    fused_real = {"T": list(REALS)}
    pool = {"T": list(POOL_TYPES)}
    floats = {"T": list(FLOATS)}
    number = {"T": [t for t in cpu._NUMBER if t != "bfloat16"]}
    resize = {"T": ["int8", "uint8", "int16", "uint16", "int32", "int64", *FLOATS]}
    return [
        ("Relu", cpu.relu, real, ()),
        ("ReluGrad", cpu.relu_grad, real, ()),
        ("Relu6", cpu.relu6, real, ()),
        ("LeakyRelu", cpu.leaky_relu, None, ()),
        ("LeakyReluGrad", cpu.leaky_relu_grad, None, ()),
        ("Elu", cpu._widened(cpu._elu), None, ()),
        ("EluGrad", cpu.elu_grad, None, ()),
        ("Selu", cpu._widened(cpu._selu), None, ()),
        ("Softplus", cpu._widened(_softplus), None, ()),
        ("Softmax", cpu.softmax, None, ()),
        ("SoftmaxGrad", cpu.softmax_grad, None, ()),
        ("LogSoftmax", cpu.log_softmax, None, ()),
        ("SoftmaxCrossEntropyWithLogits", softmax_cross_entropy_with_logits, floats, ()),
        ("SparseSoftmaxCrossEntropyWithLogits", sparse_softmax_cross_entropy_with_logits, floats, ()),
        ("SparseSoftmaxCrossEntropyLoss", sparse_softmax_cross_entropy_loss, floats, ()),
        ("BiasAdd", cpu.bias_add, number, ()),
        ("BiasAddGrad", bias_add_grad, number, ()),
        ("FusedMatMul", cpu.fused_mat_mul, floats, ()),
        ("Conv2D", conv2d, None, ()),
        ("FusedConv2D", fused_conv2d, floats, ()),
        ("Conv2DBackpropInput", conv2d_backprop_input, None, ("input_sizes",)),
        ("Conv2DBackpropFilter", conv2d_backprop_filter, None, ("filter_sizes",)),
        ("DepthwiseConv2dNative", cpu.depthwise_conv2d_native, floats, ()),
        ("ResizeBilinear", cpu.resize_bilinear, resize, ("size",)),
        ("FusedLayerNorm", cpu.fused_layer_norm, floats, ()),
        ("FusedLayerNormGrad", cpu.fused_layer_norm_grad, floats, ()),
        ("ResizeBilinearGrad", cpu.resize_bilinear_grad, floats, ()),
        ("ResizeNearestNeighbor", cpu.resize_nearest_neighbor, resize, ("size",)),
        ("ResizeNearestNeighborGrad", cpu.resize_nearest_neighbor_grad, {"T": ["uint8", "int8", "int32", *FLOATS]}, ("size",)),
        ("DepthwiseConv2dNativeBackpropInput", cpu.depthwise_conv2d_native_backprop_input, floats, ("input_sizes",)),
        ("DepthwiseConv2dNativeBackpropFilter", cpu.depthwise_conv2d_native_backprop_filter, floats, ("filter_sizes",)),
        ("MaxPool", max_pool, pool, ()),
        ("MaxPoolGrad", max_pool_grad, fused_real, ()),
        ("MaxPoolGradGrad", max_pool_grad_grad, fused_real, ()),
        ("MaxPoolWithArgmax", max_pool_with_argmax, pool, ()),
        ("MaxPoolGradWithArgmax", max_pool_grad_with_argmax, fused_real, ()),
        ("MaxPoolGradGradWithArgmax", cpu.max_pool_grad_grad_with_argmax, fused_real, ()),
        ("AvgPool", avg_pool, None, ()),
        ("AvgPoolGrad", avg_pool_grad, None, ("orig_input_shape",)),
    ]
