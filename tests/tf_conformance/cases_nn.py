"""Conformance cases for the nn ops: activations, softmax and cross entropy, bias,
convolutions and pools.

Inputs that must be consistent with each other (MaxPoolGrad's ``orig_output``, the
*WithArgmax ops' ``argmax``) are computed here with numpy from the case's own
``orig_input``, following TensorFlow's rule: the first maximum of a window in
row-major order, padding never a candidate.

TensorFlow's fused ops (``_FusedConv2D``, ``_FusedMatMul``) are internal: ``tf.raw_ops``
does not expose them, so they cannot be called eagerly by name.  opkernel's
``FusedConv2D``/``FusedMatMul`` and its own ``SparseSoftmaxCrossEntropyLoss`` are
exempt from the per-op comparison; ``composed_cases()`` gives cases for them and
``COMPOSED`` the TensorFlow composition each is compared with (Conv2D/MatMul, BiasAdd
and the activation; SparseSoftmaxCrossEntropyWithLogits and a mean or sum).  A
``COMPOSED`` entry is a function ``(tf, inputs, attrs) -> list of outputs`` that gets
the TensorFlow module as an argument, so this module still imports numpy only.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from case import Case, noncontiguous, rng

try:  # bfloat16 arrays are ml_dtypes' (a dependency of TensorFlow and of opkernel's bfloat16)
    import ml_dtypes  # noqa: F401

    _BF16: tuple[str, ...] = ("bfloat16",)
except ImportError:  # pragma: no cover - the recording then has bfloat16 cases the tests skip
    _BF16 = ()

NAN, INF = float("nan"), float("inf")

DIFFERENCES: dict[str, str] = {
    "LRN/bfloat16": "TensorFlow's CPU LRN has no bfloat16 kernel (NotFoundError; its OpDef allows bfloat16); opkernel "
                    "computes it in float32, checked against the definition in tests/test_ops_nn.py",
    # TensorFlow's CPU kernels of these ops implement NHWC only (they raise "only supports
    # NHWC on device type CPU"); opkernel computes NCHW on every backend, checked against
    # numpy references of the definition in tests/test_ops_nn.py.
    "Conv2D/nchw": "TensorFlow's CPU Conv2D has no NCHW kernel; opkernel supports NCHW "
                   "(tests/test_ops_nn.py checks it against the definition)",
    "Conv2DBackpropInput/nchw": "TensorFlow's CPU Conv2DBackpropInput has no NCHW kernel; opkernel supports NCHW "
                                "(tests/test_ops_nn.py checks it against the definition)",
    "Conv2DBackpropFilter/nchw": "TensorFlow's CPU Conv2DBackpropFilter has no NCHW kernel; opkernel supports "
                                 "NCHW (tests/test_ops_nn.py checks it against the definition)",
    "MaxPool/nchw": "TensorFlow's CPU MaxPool has no NCHW kernel; opkernel supports NCHW "
                    "(tests/test_ops_nn.py checks it against the definition)",
    "AvgPool/nchw": "TensorFlow's CPU AvgPool has no NCHW kernel; opkernel supports NCHW "
                    "(tests/test_ops_nn.py checks it against the definition)",
}

_NO_CPU_KERNEL = ("TensorFlow has no CPU kernel for this call (NotFoundError: GPU only); opkernel computes it "
                  "on every backend, checked against a numpy reference of the definition in tests/test_ops_nn.py")
_NO_CPU_DILATION = ("TensorFlow's CPU kernels of the convolution gradients reject dilations > 1 ('Current CPU "
                    "implementations do not yet support dilation rates larger than 1'); opkernel computes them, "
                    "checked against the definition and the numeric gradient in tests/test_ops_nn.py")
_XENT_LABELS_GRAD = ("TensorFlow's gradient with respect to labels is -log_softmax(features) * grad_loss: it drops "
                     "backprop's own term (d backprop / d labels = -1, so -grad_backprop) and, for broadcast labels, "
                     "returns the broadcast shape; opkernel returns the full derivative in the labels' shape, checked "
                     "by the numeric gradient checker in tests/test_ops_nn.py (Xent, Xent-backprop, "
                     "Xent-broadcast-labels).  The forward values are compared in the cases without _gradient")
_RELU_NEG_ZERO = ("TensorFlow's sign of Relu(-0.0) and Relu6(-0.0) depends on where the element falls: +0.0 in "
                  "Eigen's SIMD packets, -0.0 in the scalar tail (a 9-element tensor gives eight +0.0 and one -0.0); "
                  "opkernel gives +0.0 everywhere, TensorFlow's answer for whole packets (compared in the *_specials "
                  "and Relu/float32_gradient_at_zero cases)")
DIFFERENCES.update({
    "Selu/float32_tiny_negative_gradient":
        "TensorFlow's Selu computes scale * alpha * (exp(x) - 1), which is 0 for a negative x of magnitude below "
        "2**-25 (exp(x) rounds to 1 in float32), so its SeluGrad (which tests the output for < 0) takes the right side's slope, "
        "scale (1.0507), there; opkernel computes expm1(x), whose output stays negative and whose gradient is "
        "the left side's, scale * alpha * exp(x) (1.7581): the derivative of the function at those points",
    "Relu/negative_zero_scalar_tail": _RELU_NEG_ZERO,
    "Relu6/negative_zero_scalar_tail": _RELU_NEG_ZERO,
    "MaxPoolGradGradWithArgmax": _NO_CPU_KERNEL,
    "MaxPoolGradWithArgmax/int32_argmax": _NO_CPU_KERNEL,
    "Conv2DBackpropInput/dilated": _NO_CPU_DILATION,
    "DepthwiseConv2dNative/unequal_strides":
        "TensorFlow's DepthwiseConv2dNative kernels take one stride for both spatial dimensions ('Current "
        "implementation only supports equal length strides in the row and column dimensions'); opkernel computes "
        "unequal strides on every backend, checked against the definition in tests/test_ops_nn.py",
    "Conv2DBackpropFilter/dilated": _NO_CPU_DILATION,
    "SoftmaxCrossEntropyWithLogits/float32_gradient": _XENT_LABELS_GRAD,
    "SoftmaxCrossEntropyWithLogits/float64_gradient": _XENT_LABELS_GRAD,
    "SoftmaxCrossEntropyWithLogits/broadcast_labels_gradient": _XENT_LABELS_GRAD,
    "MaxPoolGradWithArgmax/argmax_out_of_range":
        "an argmax outside its image: TensorFlow's CPU kernel adds the value into another image of the batch "
        "(the flat index plus the batch offset); opkernel raises InvalidArgumentError naming the index "
        "(tests/test_ops_nn.py)",
    "MaxPoolGradWithArgmax/argmax_negative":
        "a negative argmax: TensorFlow's CPU kernel adds the value into the previous image of the batch; "
        "opkernel raises InvalidArgumentError naming the index (tests/test_ops_nn.py)",
    "MaxPoolWithArgmax/empty_batch":
        "TensorFlow's CPU MaxPoolWithArgmax alone rejects an empty input ('tensor_in must not be empty', a guard "
        "in that kernel only: MaxPool, MaxPoolGrad and MaxPoolGradWithArgmax accept an empty batch); opkernel "
        "returns the empty outputs, as for MaxPool",
    "AvgPoolGrad/grad_shape_mismatch":
        "TensorFlow's CPU AvgPoolGrad does not check grad's shape against the pooled shape of "
        "orig_input_shape and reads grad as if it had that shape; opkernel raises InvalidArgumentError "
        "naming the expected and given shapes",
})

EXEMPT: dict[str, str] = {
    "FusedConv2D": "TensorFlow's _FusedConv2D is internal (grappler's rewrite, not in tf.raw_ops); "
                   "compared with Conv2D + BiasAdd + activation composed in TensorFlow (composed_cases)",
    "FusedMatMul": "TensorFlow's _FusedMatMul is internal (grappler's rewrite, not in tf.raw_ops); "
                   "compared with MatMul + BiasAdd + activation composed in TensorFlow (composed_cases)",
    "SparseSoftmaxCrossEntropyLoss": "opkernel's own op (TensorFlow has none); compared with "
                                     "SparseSoftmaxCrossEntropyWithLogits + Mean/Sum in TensorFlow (composed_cases)",
    "FusedLayerNorm": "opkernel's own op (TensorFlow and Keras compose layer normalization); compared with Keras 3's "
                      "composition (moments, then the normalization) in TensorFlow (composed_cases)",
    "FusedLayerNormGrad": "opkernel's own op (FusedLayerNorm's gradient); compared with the gradient of that "
                          "composition in TensorFlow (composed_cases)",
    "Gelu": "opkernel's own op (TensorFlow's tf.nn.gelu composes GELU); compared with tf.nn.gelu (composed_cases)",
    "GeluGrad": "opkernel's own op (Gelu's gradient); compared with the gradient of tf.nn.gelu (composed_cases)",
    "SoftmaxGrad": "opkernel's own op (Softmax's gradient); compared with TensorFlow's composition in its "
                   "Softmax gradient, (dy - reduce_sum(dy * s, -1)) * s (composed_cases)",
    "Addons>MedianPool2D": "not a TensorFlow op (TensorFlow Addons' Python layer, no registered op); "
                           "tests/test_median_pool.py checks it against numpy's median",
    "Addons>MedianPool2DGrad": "not a TensorFlow op (the gradient of Addons>MedianPool2D); "
                               "tests/test_median_pool.py checks it with the numeric gradient checker",
}


# ------------------------------------------------------------------ inputs


def _rand(seed: int, shape: tuple[int, ...], dtype: str, lo: float = -3.0, hi: float = 3.0) -> np.ndarray:
    r = rng(seed)
    if np.issubdtype(np.dtype(dtype), np.integer):
        info = np.iinfo(dtype)
        return r.integers(max(int(lo), info.min), min(int(hi), info.max) + 1, shape).astype(dtype)
    if dtype == "bfloat16":
        return r.uniform(lo, hi, shape).astype(np.float32).astype(np.dtype("bfloat16"))
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        return (r.uniform(lo, hi, shape) + 1j * r.uniform(lo, hi, shape)).astype(dtype)
    return r.uniform(lo, hi, shape).astype(dtype)


def _a(values: Any, dtype: str) -> np.ndarray:
    return np.array(values, dtype=dtype)


_SPECIALS = [NAN, INF, -INF, -0.0, 0.0, 1e-30, -1e-30, 6.0, 6.5, -6.0, 20.0, 30.0, 88.0, -88.0, 100.0, -100.0]


def _window_taps(shape: tuple[int, ...], ksize: list[int], strides: list[int], padding: str
                 ) -> tuple[int, int, list[list[list[tuple[int, int]]]]]:
    """NHWC output height, width and, per output (y, x), the input (y, x) positions of its window."""
    _, h, w, _ = shape
    kh, kw, sh, sw = ksize[1], ksize[2], strides[1], strides[2]
    if padding == "VALID":
        oh, ow, pt, pl = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0
    else:
        oh, ow = -(-h // sh), -(-w // sw)
        pt = max((oh - 1) * sh + kh - h, 0) // 2
        pl = max((ow - 1) * sw + kw - w, 0) // 2
    taps = [[[(y * sh - pt + i, x * sw - pl + j) for i in range(kh) for j in range(kw)
              if 0 <= y * sh - pt + i < h and 0 <= x * sw - pl + j < w]
             for x in range(ow)] for y in range(oh)]
    return oh, ow, taps


def _max_pool_argmax(x: np.ndarray, ksize: list[int], strides: list[int], padding: str,
                     include_batch: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """MaxPool's output and TensorFlow's flat argmax (first maximum, NaN never chosen
    unless it is the window's first element) for NHWC ``x``."""
    n, h, w, c = x.shape
    oh, ow, taps = _window_taps(x.shape, ksize, strides, padding)
    out = np.zeros((n, oh, ow, c), x.dtype)
    arg = np.zeros((n, oh, ow, c), np.int64)
    for b in range(n):
        for y in range(oh):
            for xx in range(ow):
                for ch in range(c):
                    best = None
                    for (iy, ix) in taps[y][xx]:
                        v = x[b, iy, ix, ch]
                        if best is None or v > x[b, best[0], best[1], ch]:
                            best = (iy, ix)
                    assert best is not None
                    out[b, y, xx, ch] = x[b, best[0], best[1], ch]
                    flat = (best[0] * w + best[1]) * c + ch
                    arg[b, y, xx, ch] = flat + (b * h * w * c if include_batch else 0)
    return out, arg


def _distinct(seed: int, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Distinct values (a shuffled range), so every window has one maximum and numeric
    gradients do not straddle a tie."""
    size = int(np.prod(shape))
    return (rng(seed).permutation(size).reshape(shape) * 0.25 - size * 0.1).astype(dtype)


# ------------------------------------------------------------------ activations


def _activation_cases() -> list[Case]:
    out: list[Case] = []
    kinds = {
        "Relu": ["float32", "float64", "float16", "int32", "int64", "int8", "int16", "uint8"],
        "Relu6": ["float32", "float64", "float16", "int32", "int64", "int8", "uint8"],
        "Elu": ["float32", "float64", "float16"],
        "Selu": ["float32", "float64", "float16"],
        "Softplus": ["float32", "float64", "float16"],
        "LeakyRelu": ["float32", "float64", "float16", "bfloat16"],
    }
    for i, (op, dtypes) in enumerate(kinds.items()):
        for j, dt in enumerate(dtypes):
            lo, hi = (-10, 10) if dt.startswith(("int", "uint")) else (-8.0, 8.0)
            tol = (1e-2, 1e-2) if dt == "float16" else None
            out.append(Case(f"{op}/{dt}_random", op, (_rand(100 * i + j, (4, 6), dt, lo, hi),),
                            grad=dt in ("float32", "float64"), seed=100 * i + j, tol=tol,
                            why="float16's 11-bit significand" if tol else ""))
        for dt in ("float32", "float64"):
            out.append(Case(f"{op}/{dt}_specials", op, (_a(_SPECIALS, dt),)))
        out.append(Case(f"{op}/empty", op, (np.zeros((0, 3), np.float32),)))
        out.append(Case(f"{op}/scalar", op, (_a(-1.5, "float32"),), grad=True, seed=7))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_rand(11 + i, (3, 5), "float32")),)))
        out.append(Case(f"{op}/rejects_bool", op, (np.array([True, False]),)))
    # Integer extremes: Relu6 of int8 saturates at 6, Relu of the most negative value is 0.
    out.append(Case("Relu/int8_extremes", "Relu", (_a([-128, -1, 0, 1, 127], "int8"),)))
    out.append(Case("Relu6/int8_extremes", "Relu6", (_a([-128, -1, 0, 5, 6, 7, 127], "int8"),)))
    out.append(Case("Relu6/uint8_extremes", "Relu6", (_a([0, 5, 6, 7, 255], "uint8"),)))
    out.append(Case("Relu/int64_extremes", "Relu", (_a([-(2**63), -1, 0, 2**63 - 1], "int64"),)))
    for op in ("Elu", "Selu", "Softplus"):
        out.append(Case(f"{op}/rejects_int32", op, (_a([1, -2], "int32"),)))
        out.append(Case(f"{op}/float16_specials", op, (_a(_SPECIALS, "float16"),), tol=(1e-2, 1e-3),
                        why="float16's 11-bit significand"))
    out.append(Case("LeakyRelu/alpha", "LeakyRelu", (_rand(41, (3, 5), "float32", -4, 4),), {"alpha": 0.01}, grad=True, seed=41))
    out.append(Case("LeakyRelu/alpha_above_one", "LeakyRelu", (_rand(42, (3, 5), "float64", -4, 4),), {"alpha": 1.5},
                    grad=True, seed=42))
    out.append(Case("LeakyRelu/specials", "LeakyRelu", (_a(_SPECIALS, "float32"),)))
    out.append(Case("LeakyRelu/rejects_int32", "LeakyRelu", (_a([1, -2], "int32"),)))
    for dt in ("float32", "float64"):
        out.append(Case(f"LeakyReluGrad/{dt}", "LeakyReluGrad", (_rand(43, (3, 4), dt), _rand(44, (3, 4), dt)),
                        {"alpha": 0.3}, grad=True, seed=45))
    for dt in ("float32", "float64", "float16") + _BF16:
        out.append(Case(f"EluGrad/{dt}", "EluGrad", (_rand(46, (3, 4), dt), _rand(47, (3, 4), dt, -1.0, 2.0)),
                        grad=dt in ("float32", "float64"), seed=46))
    out.append(Case("EluGrad/specials", "EluGrad", (_a([1.0, INF, -INF, NAN, 2.0, INF, 3.0, NAN], "float32"),
                                                    _a([-1.0, -1.0, 0.5, -0.5, NAN, 0.0, -0.0, 2.0], "float32"))))
    out.append(Case("EluGrad/shape_mismatch", "EluGrad", (_rand(46, (3, 4), "float32"), _rand(47, (4, 3), "float32"))))
    out.append(Case("EluGrad/rejects_int32", "EluGrad", (_a([1, 2], "int32"), _a([-1, 1], "int32"))))
    x = _rand(48, (2, 3, 2, 9), "float32")
    for r, bias, alpha, beta in ((2, 1.0, 0.5, 0.75), (5, 2.0, 1e-4, 0.5), (0, 1.0, 1.0, 1.0), (12, 1.5, 0.1, 0.3)):
        attrs = {"depth_radius": r, "bias": bias, "alpha": alpha, "beta": beta}
        out.append(Case(f"LRN/r{r}_beta{beta}", "LRN", (x,), attrs, grad=True, seed=48 + r, tol=(2e-5, 2e-6),
                        why="a windowed sum in another order, and pow against TensorFlow's rsqrt/exp(log) forms"))
        y = np.asarray(_lrn_reference(x, r, bias, alpha, beta), np.float32)
        out.append(Case(f"LRNGrad/r{r}_beta{beta}", "LRNGrad", (_rand(49, x.shape, "float32"), x, y), attrs,
                        tol=(2e-5, 2e-5), why="sums in another order"))
    for dt in ("float16",) + _BF16:
        out.append(Case(f"LRN/{dt}", "LRN", (_rand(50, (1, 2, 2, 5), dt),), {"depth_radius": 1}, tol=(1e-2, 1e-2),
                        why=f"{dt}'s short significand (opkernel computes in float32)"))
    out += [
        Case("LRN/default_attrs", "LRN", (_rand(51, (1, 1, 2, 12), "float32"),), tol=(2e-5, 2e-6), why="as above"),
        Case("LRN/rank3", "LRN", (_rand(52, (2, 2, 5), "float32"),)),
        Case("LRN/rejects_float64", "LRN", (_rand(53, (1, 1, 1, 3), "float64"),)),
        Case("LRNGrad/shapes_differ", "LRNGrad", (x, x, x[:, :, :, :4].copy())),
    ]
    for i, (pad, st, rt, dt) in enumerate((("SAME", 1, 1, "float32"), ("VALID", 1, 1, "float64"), ("SAME", 2, 1, "float32"),
                                           ("VALID", 1, 2, "float32"), ("SAME", 2, 2, "int32"), ("SAME", 1, 1, "float16"))):
        x, f = _rand(60 + i, (2, 6, 5, 3), dt, -5, 5), _rand(70 + i, (2, 3, 3), dt, -5, 5)
        attrs = {"strides": [1, st, 1, 1], "rates": [1, 1, rt, 1], "padding": pad}
        out.append(Case(f"Dilation2D/{pad}_s{st}_r{rt}_{dt}", "Dilation2D", (x, f), attrs,
                        grad=dt in ("float32", "float64"), seed=60 + i))
    ties = np.round(_rand(80, (1, 4, 4, 1), "float32", -2, 2))
    flat = np.zeros((2, 2, 1), np.float32)
    nan_x = _rand(81, (1, 3, 3, 1), "float32")
    nan_x[0, 1, 1, 0] = NAN
    nan_x[0, 0, 0, 0] = NAN
    unit = {"strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1], "padding": "SAME"}
    out += [
        Case("Dilation2D/ties", "Dilation2D", (ties, flat), unit, grad=True, seed=80),
        Case("Dilation2D/nan", "Dilation2D", (nan_x, flat), unit, grad=True, seed=81),
        Case("Dilation2D/all_nan", "Dilation2D", (np.full((1, 2, 2, 1), NAN, np.float32), flat), unit, grad=True, seed=82),
        Case("Dilation2D/minus_inf", "Dilation2D", (np.full((1, 2, 2, 1), -INF, np.float32), flat), unit, grad=True,
             seed=83),
        Case("Dilation2D/empty_batch", "Dilation2D", (np.zeros((0, 3, 3, 1), np.float32), flat), unit),
        Case("Dilation2D/filter_too_big", "Dilation2D", (_rand(84, (1, 2, 2, 1), "float32"), np.zeros((3, 3, 1), np.float32)),
             {**unit, "padding": "VALID"}),
        Case("Dilation2D/depth_mismatch", "Dilation2D", (_rand(85, (1, 3, 3, 2), "float32"), flat), unit),
        Case("Dilation2D/input_rank3", "Dilation2D", (_rand(86, (3, 3, 1), "float32"), flat), unit),
        Case("Dilation2D/batch_stride", "Dilation2D", (_rand(87, (1, 3, 3, 1), "float32"), flat),
             {**unit, "strides": [2, 1, 1, 1]}),
    ]
    for op in ("Dilation2DBackpropInput", "Dilation2DBackpropFilter"):
        out += [
            Case(f"{op}/SAME", op, (_rand(90, (2, 5, 4, 2), "float32"), _rand(91, (3, 2, 2), "float32"),
                                    _rand(92, (2, 3, 4, 2), "float32")),
                 {"strides": [1, 2, 1, 1], "rates": [1, 1, 2, 1], "padding": "SAME"}, tol=(1e-6, 1e-6),
                 why="sums in another order"),
            Case(f"{op}/VALID", op, (_rand(93, (1, 5, 5, 1), "float64"), _rand(94, (2, 2, 1), "float64"),
                                     _rand(95, (1, 4, 4, 1), "float64")), {**unit, "padding": "VALID"}),
            Case(f"{op}/all_nan", op, (np.full((1, 2, 2, 1), NAN, np.float32), flat, _rand(96, (1, 2, 2, 1), "float32")),
                 unit),
            Case(f"{op}/grad_shape", op, (_rand(93, (1, 5, 5, 1), "float32"), flat, _rand(97, (1, 3, 3, 1), "float32")),
                 unit),
        ]
    out.append(Case("LeakyReluGrad/shape_mismatch", "LeakyReluGrad", (_rand(43, (3, 4), "float32"), _rand(44, (4, 3), "float32"))))
    # Softplus switches formulas around |x| ~ -log(eps) + 2: check both sides of each switch.
    sp = [-40.0, -20.0, -17.0, -15.0, -14.0, 14.0, 15.0, 16.0, 17.0, 18.0, 35.0, 40.0, 1e4, -1e4]
    out.append(Case("Softplus/float32_thresholds", "Softplus", (_a(sp, "float32"),), grad=True, seed=3))
    out.append(Case("Softplus/float64_thresholds", "Softplus", (_a(sp + [-40.0, 36.0, 37.0, 38.0], "float64"),),
                    grad=True, seed=4))
    # 4096+ contiguous elements: the cpu backend's Relu takes maximum against rows of zeros.
    rows = _rand(31, (64, 72), "float32", -6, 6)
    rows[::7, ::5] = -0.0
    out.append(Case("Relu/float32_rows", "Relu", (rows,)))
    out.append(Case("Elu/float32_large", "Elu", (_rand(32, (64, 72), "float32", -6, 6),)))
    # 16 elements: whole SIMD packets in TensorFlow, where Relu(-0.0) is +0.0 (see DIFFERENCES).
    out.append(Case("Relu/float32_gradient_at_zero", "Relu", (_a([-1.0, -0.0, 0.0, 1.0] * 4, "float32"),),
                    grad=True, seed=5, why="TensorFlow's Relu gradient at 0 is 0"))
    out.append(Case("Relu6/float32_gradient_at_kinks", "Relu6", (_a([-1.0, 0.0, 3.0, 6.0, 7.0], "float32"),),
                    grad=True, seed=6, why="TensorFlow's Relu6 gradient is 0 at 0 and at 6"))
    for op in ("Relu", "Relu6"):
        out.append(Case(f"{op}/negative_zero_scalar_tail", op, (np.full(4, -0.0, np.float32),)))
    out.append(Case("Elu/float64_gradient_at_zero", "Elu", (_a([-1.0, -0.0, 0.0, 1.0], "float64"),),
                    grad=True, seed=8))
    out.append(Case("Selu/float64_gradient_at_zero", "Selu", (_a([-1.0, -0.0, 0.0, 1.0], "float64"),),
                    grad=True, seed=9))
    # Tiny negative inputs: TensorFlow's exp(x) - 1 rounds to 0 there (see DIFFERENCES).
    out.append(Case("Selu/float32_tiny_negative_gradient", "Selu", (_a([-1e-8, -3e-9, -1e-12, -1e-30], "float32"),),
                    grad=True, seed=10))

    # ReluGrad(gradients, features): gradients where features > 0.
    for j, dt in enumerate(["float32", "float64", "float16", "int32", "int64", "uint8"]):
        lo, hi = (-10, 10) if dt.startswith(("int", "uint")) else (-3.0, 3.0)
        out.append(Case(f"ReluGrad/{dt}_random", "ReluGrad",
                        (_rand(200 + j, (3, 4), dt, lo, hi), _rand(300 + j, (3, 4), dt, lo, hi)),
                        grad=dt == "float64", seed=200 + j))
    out.append(Case("ReluGrad/specials", "ReluGrad",
                    (_a([NAN, NAN, INF, INF, -INF, 1.0, 1.0, 2.0], "float32"),
                     _a([1.0, -1.0, 0.0, 2.0, 3.0, -0.0, NAN, INF], "float32"))))
    out.append(Case("ReluGrad/empty", "ReluGrad", (np.zeros((0, 2), np.float32), np.zeros((0, 2), np.float32))))
    out.append(Case("ReluGrad/scalar", "ReluGrad", (_a(2.5, "float32"), _a(1.0, "float32"))))
    out.append(Case("ReluGrad/noncontiguous", "ReluGrad",
                    (noncontiguous(_rand(210, (3, 4), "float32")), noncontiguous(_rand(211, (3, 4), "float32")))))
    out.append(Case("ReluGrad/rejects_shape_mismatch", "ReluGrad",
                    (np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))))
    out.append(Case("ReluGrad/float32_native", "ReluGrad",
                    (_rand(212, (64, 64), "float32"), _rand(213, (64, 64), "float32")),
                    why="the cpu backend's native one-pass kernel (float32 and float64, any size)"))
    return out


# ------------------------------------------------------------------ softmax and cross entropy


def _softmax_cases() -> list[Case]:
    out: list[Case] = []
    for op in ("Softmax", "LogSoftmax"):
        for j, (dt, shape) in enumerate([("float32", (3, 5)), ("float64", (2, 3, 4)), ("float16", (4, 6)),
                                         ("float32", (7,))]):
            tol = (1e-2, 1e-2) if dt == "float16" else None
            out.append(Case(f"{op}/{dt}_{'x'.join(map(str, shape))}", op, (_rand(400 + j, shape, dt, -5, 5),),
                            grad=dt != "float16", seed=400 + j, tol=tol,
                            why="float16's 11-bit significand" if tol else ""))
        rows = [[0.0, 1.0, 2.0], [1000.0, 1000.0, -1000.0], [-INF, 0.0, 1.0], [-INF, -INF, -INF],
                [INF, 0.0, 1.0], [NAN, 0.0, 1.0], [-0.0, 0.0, -0.0], [-1e30, 1e30, 0.0]]
        for dt in ("float32", "float64"):
            out.append(Case(f"{op}/{dt}_specials", op, (_a(rows, dt),)))
        out.append(Case(f"{op}/ties", op, (_a([[2.0, 2.0, 2.0, 2.0]], "float32"),), grad=True, seed=9))
        out.append(Case(f"{op}/empty_batch", op, (np.zeros((0, 4), np.float32),)))
        out.append(Case(f"{op}/empty_classes", op, (np.zeros((3, 0), np.float32),)))
        out.append(Case(f"{op}/rejects_scalar", op, (_a(1.0, "float32"),)))
        out.append(Case(f"{op}/noncontiguous", op, (noncontiguous(_rand(410, (3, 4), "float32")),)))
        out.append(Case(f"{op}/rejects_int32", op, (_a([[1, 2]], "int32"),)))

    op = "SoftmaxCrossEntropyWithLogits"
    for j, dt in enumerate(["float32", "float64", "float16"]):
        labels = rng(500 + j).dirichlet(np.ones(5), 4).astype(dt)
        tol = (1e-2, 1e-2) if dt == "float16" else None
        out.append(Case(f"{op}/{dt}_random", op, (_rand(510 + j, (4, 5), dt), labels),
                        tol=tol, why="float16's 11-bit significand" if tol else ""))
        if dt != "float16":
            out.append(Case(f"{op}/{dt}_gradient", op, (_rand(510 + j, (4, 5), dt), labels), grad=True, seed=500 + j))
    onehot = np.eye(4, dtype=np.float32)[[0, 3, 1]]
    out.append(Case(f"{op}/onehot", op, (_rand(520, (3, 4), "float32"), onehot)))
    out.append(Case(f"{op}/broadcast_labels", op,
                    (_rand(521, (3, 4), "float32"), _a([[0.1, 0.2, 0.3, 0.4]], "float32"))))
    out.append(Case(f"{op}/broadcast_labels_gradient", op,
                    (_rand(521, (3, 4), "float32"), _a([[0.1, 0.2, 0.3, 0.4]], "float32")), grad=True, seed=521))
    out.append(Case(f"{op}/broadcast_features", op,
                    (_a([[0.5, -1.0, 2.0]], "float32"), rng(522).dirichlet(np.ones(3), 2).astype(np.float32))))
    out.append(Case(f"{op}/specials", op,
                    (_a([[1000.0, 0.0, -1000.0], [-INF, 0.0, 1.0], [NAN, 0.0, 1.0], [0.0, 0.0, 0.0]], "float32"),
                     _a([[0.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], "float32"))))
    out.append(Case(f"{op}/empty_batch", op, (np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32))))
    out.append(Case(f"{op}/rejects_shape_mismatch", op, (np.zeros((2, 3), np.float32), np.zeros((2, 4), np.float32))))
    out.append(Case(f"{op}/rejects_rank3", op, (np.zeros((2, 3, 4), np.float32), np.zeros((2, 3, 4), np.float32))))
    out.append(Case(f"{op}/rank1", op, (_a([0.5, 1.0, -1.0], "float32"), _a([0.0, 1.0, 0.0], "float32"))))

    op = "SparseSoftmaxCrossEntropyWithLogits"
    for j, (dt, lt) in enumerate([("float32", "int64"), ("float64", "int32"), ("float16", "int64"),
                                  ("float32", "int32")]):
        tol = (1e-2, 1e-2) if dt == "float16" else None
        out.append(Case(f"{op}/{dt}_{lt}_random", op,
                        (_rand(600 + j, (4, 5), dt), rng(610 + j).integers(0, 5, 4).astype(lt)),
                        grad=dt != "float16", seed=600 + j, tol=tol, why="float16's 11-bit significand" if tol else ""))
    out.append(Case(f"{op}/label_too_large", op, (_rand(620, (3, 4), "float32"), _a([0, 4, 1], "int64"))))
    out.append(Case(f"{op}/label_negative", op, (_rand(621, (3, 4), "float32"), _a([0, -1, 1], "int32"))))
    out.append(Case(f"{op}/specials", op,
                    (_a([[1000.0, 0.0, -1000.0], [-INF, 0.0, 1.0], [NAN, 0.0, 1.0], [INF, 0.0, 0.0]], "float32"),
                     _a([2, 0, 1, 0], "int64"))))
    out.append(Case(f"{op}/empty_batch", op, (np.zeros((0, 3), np.float32), np.zeros((0,), np.int64))))
    out.append(Case(f"{op}/rejects_labels_rank2", op, (np.zeros((2, 3), np.float32), np.zeros((2, 1), np.int64))))
    out.append(Case(f"{op}/rejects_batch_mismatch", op, (np.zeros((2, 3), np.float32), np.zeros((3,), np.int64))))
    out.append(Case(f"{op}/rejects_features_rank1", op, (np.zeros((3,), np.float32), np.zeros((), np.int64))))
    out.append(Case(f"{op}/noncontiguous", op,
                    (noncontiguous(_rand(622, (3, 4), "float32")), _a([3, 0, 2], "int64")), grad=True, seed=622))
    return out


# ------------------------------------------------------------------ bias


def _bias_cases() -> list[Case]:
    out: list[Case] = []
    for j, dt in enumerate(["float32", "float64", "float16", "int32", "int64", "uint8", "int8", "complex64"]):
        lo, hi = (0, 100) if dt.startswith(("int", "uint")) else (-3.0, 3.0)
        out.append(Case(f"BiasAdd/{dt}_random", "BiasAdd", (_rand(700 + j, (2, 3, 4), dt, lo, hi),
                                                            _rand(710 + j, (4,), dt, lo, hi)),
                        grad=dt in ("float32", "float64"), seed=700 + j))
        out.append(Case(f"BiasAddGrad/{dt}_random", "BiasAddGrad", (_rand(720 + j, (2, 3, 4), dt, lo, hi),),
                        grad=dt in ("float32", "float64"), seed=720 + j))
    out.append(Case("BiasAdd/nchw", "BiasAdd", (_rand(730, (2, 3, 2, 2), "float32"), _rand(731, (3,), "float32")),
                    {"data_format": "NCHW"}, grad=True, seed=730))
    out.append(Case("BiasAdd/nchw_rank3", "BiasAdd", (_rand(732, (2, 3, 4), "float32"), _rand(733, (3,), "float32")),
                    {"data_format": "NCHW"}))
    out.append(Case("BiasAdd/nchw_rank2", "BiasAdd", (_rand(734, (2, 3), "float32"), _rand(735, (3,), "float32")),
                    {"data_format": "NCHW"}))
    out.append(Case("BiasAdd/int32_wraps", "BiasAdd", (_a([[2**31 - 1, -(2**31)]], "int32"), _a([1, -1], "int32"))))
    out.append(Case("BiasAdd/uint8_wraps", "BiasAdd", (_a([[250, 3]], "uint8"), _a([10, 255], "uint8"))))
    out.append(Case("BiasAdd/specials", "BiasAdd", (_a([[NAN, INF, -INF, -0.0]], "float32"),
                                                   _a([1.0, -INF, -INF, -0.0], "float32"))))
    out.append(Case("BiasAdd/empty", "BiasAdd", (np.zeros((0, 3), np.float32), np.ones(3, np.float32))))
    out.append(Case("BiasAdd/noncontiguous", "BiasAdd", (noncontiguous(_rand(736, (3, 4), "float32")),
                                                         noncontiguous(_rand(737, (4,), "float32")))))
    out.append(Case("BiasAdd/rejects_bias_size", "BiasAdd", (np.zeros((2, 3), np.float32), np.zeros(4, np.float32))))
    out.append(Case("BiasAdd/rejects_bias_rank2", "BiasAdd", (np.zeros((2, 3), np.float32),
                                                              np.zeros((1, 3), np.float32))))
    out.append(Case("BiasAdd/rejects_value_rank1", "BiasAdd", (np.zeros(3, np.float32), np.zeros(3, np.float32))))
    out.append(Case("BiasAdd/rejects_bool", "BiasAdd", (np.zeros((2, 2), bool), np.zeros(2, bool))))
    out.append(Case("BiasAddGrad/nchw", "BiasAddGrad", (_rand(740, (2, 3, 2, 2), "float32"),),
                    {"data_format": "NCHW"}, grad=True, seed=740))
    out.append(Case("BiasAddGrad/nchw_rank3", "BiasAddGrad", (_rand(741, (2, 3, 4), "float32"),),
                    {"data_format": "NCHW"}))
    out.append(Case("BiasAddGrad/int32_wraps", "BiasAddGrad", (_a([[2**31 - 1, 5], [1, 5]], "int32"),)))
    out.append(Case("BiasAddGrad/specials", "BiasAddGrad", (_a([[NAN, INF, -0.0], [1.0, -INF, -0.0]], "float32"),)))
    out.append(Case("BiasAddGrad/empty", "BiasAddGrad", (np.zeros((0, 3), np.float32),)))
    out.append(Case("BiasAddGrad/rejects_rank1", "BiasAddGrad", (np.zeros(3, np.float32),)))
    out.append(Case("BiasAddGrad/float32_large", "BiasAddGrad", (_rand(742, (2048, 16), "float32"),),
                    tol=(1e-4, 1e-4), why="sums of 2048 terms: summation order differs"))
    return out


# ------------------------------------------------------------------ convolutions


def _conv(strides: list[int], padding: str, **more: Any) -> dict[str, Any]:
    return {"strides": strides, "padding": padding, **more}


_CONV_CONFIGS: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    # name, input shape (NHWC), filter shape (HWIO), attrs
    ("valid", (2, 5, 5, 3), (3, 3, 3, 2), _conv([1, 1, 1, 1], "VALID")),
    ("same_stride2", (1, 7, 6, 2), (3, 2, 2, 3), _conv([1, 2, 2, 1], "SAME")),
    ("same_even_filter", (1, 4, 4, 1), (2, 2, 1, 2), _conv([1, 1, 1, 1], "SAME")),
    ("dilated", (1, 7, 7, 2), (2, 3, 2, 2), _conv([1, 1, 1, 1], "VALID", dilations=[1, 2, 2, 1])),
    ("explicit", (1, 4, 5, 2), (3, 3, 2, 2),
     _conv([1, 2, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0])),
    ("strided_valid", (1, 6, 7, 2), (2, 2, 2, 1), _conv([1, 3, 2, 1], "VALID")),
]


def _conv_out_shape(x: tuple[int, ...], f: tuple[int, ...], attrs: dict[str, Any]) -> tuple[int, ...]:
    s, d = attrs["strides"], attrs.get("dilations", [1, 1, 1, 1])
    dims = []
    for axis in (1, 2):
        k = (f[axis - 1] - 1) * d[axis] + 1
        if attrs["padding"] == "VALID":
            dims.append((x[axis] - k) // s[axis] + 1)
        elif attrs["padding"] == "SAME":
            dims.append(-(-x[axis] // s[axis]))
        else:
            p = attrs["explicit_paddings"]
            dims.append((x[axis] + p[2 * axis] + p[2 * axis + 1] - k) // s[axis] + 1)
    return (x[0], dims[0], dims[1], f[3])


def _conv_cases() -> list[Case]:
    out: list[Case] = []
    for j, (name, xs, fs, attrs) in enumerate(_CONV_CONFIGS):
        ys = _conv_out_shape(xs, fs, attrs)
        x, f, dy = _rand(800 + j, xs, "float32"), _rand(810 + j, fs, "float32"), _rand(820 + j, ys, "float32")
        # TensorFlow's CPU kernels of the convolution's gradients have no dilations.
        out.append(Case(f"Conv2D/{name}", "Conv2D", (x, f), attrs, grad=name != "dilated", seed=800 + j))
        out.append(Case(f"Conv2DBackpropInput/{name}", "Conv2DBackpropInput", (_a(xs, "int32"), f, dy), attrs,
                        grad=name != "dilated", seed=830 + j))
        out.append(Case(f"Conv2DBackpropFilter/{name}", "Conv2DBackpropFilter", (x, _a(fs, "int32"), dy), attrs,
                        grad=name != "dilated", seed=840 + j))
    xs, fs, attrs = (1, 5, 5, 2), (3, 3, 2, 2), _conv([1, 1, 1, 1], "SAME")
    ys = _conv_out_shape(xs, fs, attrs)
    for j, dt in enumerate(["float64", "float16", "int32"]):
        lo, hi = (-5, 5) if dt == "int32" else (-3.0, 3.0)
        tol = (2e-2, 5e-2) if dt == "float16" else None
        why = "float16 products summed over 18 taps" if tol else ""
        x, f, dy = _rand(850 + j, xs, dt, lo, hi), _rand(860 + j, fs, dt, lo, hi), _rand(870 + j, ys, dt, lo, hi)
        out.append(Case(f"Conv2D/{dt}", "Conv2D", (x, f), attrs, grad=dt == "float64", seed=850 + j, tol=tol, why=why))
        out.append(Case(f"Conv2DBackpropInput/{dt}", "Conv2DBackpropInput", (_a(xs, "int32"), f, dy), attrs,
                        tol=tol, why=why))
        if dt != "int32":
            out.append(Case(f"Conv2DBackpropFilter/{dt}", "Conv2DBackpropFilter", (x, _a(fs, "int32"), dy), attrs,
                            tol=tol, why=why))
    out.append(Case("Conv2DBackpropFilter/rejects_int32", "Conv2DBackpropFilter",
                    (np.ones(xs, np.int32), _a(fs, "int32"), np.ones(ys, np.int32)), attrs))
    nchw = _conv([1, 1, 1, 1], "VALID", data_format="NCHW")
    out.append(Case("Conv2D/nchw", "Conv2D", (_rand(880, (1, 2, 4, 4), "float32"), _rand(881, (2, 2, 2, 3), "float32")),
                    nchw))
    out.append(Case("Conv2DBackpropInput/nchw", "Conv2DBackpropInput",
                    (_a([1, 2, 4, 4], "int32"), _rand(881, (2, 2, 2, 3), "float32"), _rand(882, (1, 3, 3, 3), "float32")),
                    nchw))
    out.append(Case("Conv2DBackpropFilter/nchw", "Conv2DBackpropFilter",
                    (_rand(880, (1, 2, 4, 4), "float32"), _a([2, 2, 2, 3], "int32"), _rand(882, (1, 3, 3, 3), "float32")),
                    nchw))
    valid = _conv([1, 1, 1, 1], "VALID")
    out.append(Case("Conv2D/specials", "Conv2D",
                    (_a([[[[NAN], [1.0]], [[INF], [2.0]], [[0.0], [3.0]]]], "float32"),
                     _a([[[[1.0]], [[0.0]]]], "float32")), valid))
    out.append(Case("Conv2D/empty_batch", "Conv2D", (np.zeros((0, 3, 3, 2), np.float32), np.ones((2, 2, 2, 1), np.float32)),
                    valid))
    out.append(Case("Conv2D/empty_out_channels", "Conv2D",
                    (np.ones((1, 3, 3, 2), np.float32), np.ones((2, 2, 2, 0), np.float32)), valid))
    out.append(Case("Conv2D/noncontiguous", "Conv2D",
                    (noncontiguous(_rand(883, (1, 4, 4, 2), "float32")), noncontiguous(_rand(884, (2, 2, 2, 2), "float32"))),
                    valid))
    out.append(Case("Conv2D/filter_larger_than_input", "Conv2D",
                    (np.ones((1, 2, 2, 1), np.float32), np.ones((3, 3, 1, 1), np.float32)), valid))
    out.append(Case("Conv2D/filter_larger_than_input_same", "Conv2D",
                    (_rand(885, (1, 2, 2, 1), "float32"), _rand(886, (3, 3, 1, 1), "float32")),
                    _conv([1, 1, 1, 1], "SAME")))
    out.append(Case("Conv2D/rejects_channel_mismatch", "Conv2D",
                    (np.ones((1, 3, 3, 2), np.float32), np.ones((2, 2, 3, 1), np.float32)), valid))
    out.append(Case("Conv2D/rejects_rank3_input", "Conv2D",
                    (np.ones((3, 3, 2), np.float32), np.ones((2, 2, 2, 1), np.float32)), valid))
    out.append(Case("Conv2D/rejects_strides_length", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([1, 1, 1], "VALID")))
    out.append(Case("Conv2D/rejects_batch_stride", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([2, 1, 1, 1], "VALID")))
    out.append(Case("Conv2D/rejects_zero_stride", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([1, 0, 1, 1], "VALID")))
    out.append(Case("Conv2D/rejects_explicit_paddings_with_same", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([1, 1, 1, 1], "SAME", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0])))
    out.append(Case("Conv2D/rejects_negative_explicit_padding", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([1, 1, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, -1, 1, 1, 1, 0, 0])))
    out.append(Case("Conv2D/rejects_zero_dilation", "Conv2D",
                    (np.ones((1, 3, 3, 1), np.float32), np.ones((2, 2, 1, 1), np.float32)),
                    _conv([1, 1, 1, 1], "VALID", dilations=[1, 0, 1, 1])))
    out.append(Case("Conv2D/float32_native", "Conv2D",
                    (_rand(887, (2, 12, 12, 8), "float32"), _rand(888, (3, 3, 8, 4), "float32")),
                    _conv([1, 1, 1, 1], "SAME"), tol=(1e-4, 1e-4), why="sums of 72 products: order differs",))
    out.append(Case("Conv2DBackpropInput/hw_sizes", "Conv2DBackpropInput",
                    (_a([5, 5], "int32"), _rand(889, (3, 3, 3, 2), "float32"), _rand(890, (2, 3, 3, 2), "float32")),
                    valid))
    out.append(Case("Conv2DBackpropInput/rejects_sizes_mismatch", "Conv2DBackpropInput",
                    (_a([1, 6, 6, 2], "int32"), np.ones((3, 3, 2, 2), np.float32), np.ones((1, 3, 3, 2), np.float32)),
                    valid))
    out.append(Case("Conv2DBackpropInput/rejects_sizes_length", "Conv2DBackpropInput",
                    (_a([1, 5, 5], "int32"), np.ones((3, 3, 2, 2), np.float32), np.ones((1, 3, 3, 2), np.float32)),
                    valid))
    out.append(Case("Conv2DBackpropFilter/rejects_sizes_mismatch", "Conv2DBackpropFilter",
                    (np.ones((1, 5, 5, 2), np.float32), _a([2, 2, 2, 2], "int32"), np.ones((1, 3, 3, 2), np.float32)),
                    valid))
    out.append(Case("Conv2DBackpropFilter/rejects_channel_mismatch", "Conv2DBackpropFilter",
                    (np.ones((1, 5, 5, 3), np.float32), _a([3, 3, 2, 2], "int32"), np.ones((1, 3, 3, 2), np.float32)),
                    valid))
    return out


# ------------------------------------------------------------------ pools


def _pool(k: int | tuple[int, int], s: int | tuple[int, int], padding: str, **more: Any) -> dict[str, Any]:
    kh, kw = (k, k) if isinstance(k, int) else k
    sh, sw = (s, s) if isinstance(s, int) else s
    return {"ksize": [1, kh, kw, 1], "strides": [1, sh, sw, 1], "padding": padding, **more}


_POOL_CONFIGS: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("valid_2x2", (2, 4, 4, 3), _pool(2, 2, "VALID")),
    ("same_3x3_s2", (1, 5, 6, 2), _pool(3, 2, "SAME")),
    ("overlap_3x2_s1", (1, 4, 5, 2), _pool((3, 2), 1, "VALID")),
    ("window_larger_than_input", (1, 2, 3, 1), _pool(4, 1, "SAME")),
]


def _pool_cases() -> list[Case]:
    out: list[Case] = []
    for j, (name, xs, attrs) in enumerate(_POOL_CONFIGS):
        x = _distinct(900 + j, xs, "float32")
        y, arg = _max_pool_argmax(x, attrs["ksize"], attrs["strides"], attrs["padding"])
        dy = _rand(910 + j, y.shape, "float32")
        ddx = _rand(920 + j, xs, "float32")
        out.append(Case(f"MaxPool/{name}", "MaxPool", (x,), attrs, grad=True, seed=900 + j))
        out.append(Case(f"AvgPool/{name}", "AvgPool", (_rand(930 + j, xs, "float32"),), attrs, grad=True, seed=930 + j))
        out.append(Case(f"AvgPoolGrad/{name}", "AvgPoolGrad", (_a(xs, "int32"), dy), attrs, grad=True, seed=940 + j))
        out.append(Case(f"MaxPoolGrad/{name}", "MaxPoolGrad", (x, y, dy), attrs, grad=True, seed=950 + j))
        out.append(Case(f"MaxPoolGradGrad/{name}", "MaxPoolGradGrad", (x, y, ddx), attrs, seed=960 + j))
        out.append(Case(f"MaxPoolWithArgmax/{name}", "MaxPoolWithArgmax", (x,), attrs, grad=True, seed=970 + j))
        out.append(Case(f"MaxPoolGradWithArgmax/{name}", "MaxPoolGradWithArgmax", (x, dy, arg), attrs))
        out.append(Case(f"MaxPoolGradGradWithArgmax/{name}", "MaxPoolGradGradWithArgmax", (x, ddx, arg), attrs))

    attrs = _pool(2, 1, "VALID")
    for j, dt in enumerate(["float64", "float16", "int32", "int64", "uint8", "int8", "int16", "uint16"]):
        lo, hi = (0, 100) if dt.startswith(("int", "uint")) else (-3.0, 3.0)
        x = _rand(1000 + j, (1, 3, 4, 2), dt, lo, hi)
        out.append(Case(f"MaxPool/{dt}", "MaxPool", (x,), attrs))
        if dt in ("float64", "float16"):
            out.append(Case(f"AvgPool/{dt}", "AvgPool", (x,), attrs, tol=(1e-2, 1e-2) if dt == "float16" else None,
                            why="float16's 11-bit significand" if dt == "float16" else ""))
        out.append(Case(f"MaxPoolWithArgmax/{dt}", "MaxPoolWithArgmax", (x,), attrs))
    # Ties: TensorFlow takes a window's first maximum (row-major), for the value, the
    # gradient and the argmax.
    tie = _a([[[[1.0], [1.0], [0.0]], [[1.0], [1.0], [1.0]], [[0.0], [1.0], [1.0]]]], "float32")
    ta = _pool(2, 1, "VALID")
    ty, targ = _max_pool_argmax(tie, ta["ksize"], ta["strides"], ta["padding"])
    out.append(Case("MaxPool/ties", "MaxPool", (tie,), ta))
    out.append(Case("MaxPoolGrad/ties", "MaxPoolGrad", (tie, ty, _a(np.arange(1.0, 5.0).reshape(ty.shape), "float32")), ta))
    out.append(Case("MaxPoolWithArgmax/ties", "MaxPoolWithArgmax", (tie,), ta))
    out.append(Case("MaxPoolGradGrad/ties", "MaxPoolGradGrad", (tie, ty, _a(np.arange(9.0).reshape(tie.shape), "float32")),
                    ta))
    # NaN, infinities and -0.0 in windows.
    sp = _a([[[[NAN], [1.0], [2.0]], [[3.0], [NAN], [-INF]], [[-INF], [-INF], [INF]]]], "float32")
    out.append(Case("MaxPool/specials", "MaxPool", (sp,), ta))
    out.append(Case("AvgPool/specials", "AvgPool", (sp,), ta))
    out.append(Case("MaxPoolWithArgmax/specials", "MaxPoolWithArgmax", (sp,), ta))
    out.append(Case("MaxPool/all_neg_inf", "MaxPool", (np.full((1, 2, 2, 1), -INF, np.float32),), _pool(2, 1, "SAME")))
    out.append(Case("MaxPool/negative_zero", "MaxPool", (_a([[[[-0.0], [-0.0]], [[-0.0], [-0.0]]]], "float32"),),
                    _pool(2, 1, "VALID")))
    out.append(Case("MaxPool/int8_min", "MaxPool", (np.full((1, 2, 2, 1), -128, np.int8),), _pool(2, 1, "SAME")))
    # include_batch_in_index and Targmax.
    x = _distinct(1100, (2, 3, 3, 2), "float32")
    ia = _pool(2, 1, "VALID")
    out.append(Case("MaxPoolWithArgmax/include_batch", "MaxPoolWithArgmax", (x,),
                    {**ia, "include_batch_in_index": True}, grad=True, seed=1100))
    out.append(Case("MaxPoolWithArgmax/targmax_int32", "MaxPoolWithArgmax", (x,), {**ia, "Targmax": "int32"}))
    y, arg = _max_pool_argmax(x, ia["ksize"], ia["strides"], ia["padding"], include_batch=True)
    dy = _rand(1101, y.shape, "float32")
    out.append(Case("MaxPoolGradWithArgmax/include_batch", "MaxPoolGradWithArgmax", (x, dy, arg),
                    {**ia, "include_batch_in_index": True}))
    out.append(Case("MaxPoolGradGradWithArgmax/include_batch", "MaxPoolGradGradWithArgmax",
                    (x, _rand(1102, x.shape, "float32"), arg), {**ia, "include_batch_in_index": True}))
    y0, arg0 = _max_pool_argmax(x, ia["ksize"], ia["strides"], ia["padding"])
    out.append(Case("MaxPoolGradWithArgmax/int32_argmax", "MaxPoolGradWithArgmax", (x, dy, arg0.astype(np.int32)), ia))
    bad = arg0.copy()
    bad[0, 0, 0, 0] = x[0].size + 5
    out.append(Case("MaxPoolGradWithArgmax/argmax_out_of_range", "MaxPoolGradWithArgmax", (x, dy, bad), ia))
    out.append(Case("MaxPoolGradGradWithArgmax/argmax_out_of_range", "MaxPoolGradGradWithArgmax",
                    (x, _rand(1103, x.shape, "float32"), bad), ia))
    neg = arg0.copy()
    neg[1, 0, 1, 1] = -1
    out.append(Case("MaxPoolGradWithArgmax/argmax_negative", "MaxPoolGradWithArgmax", (x, dy, neg), ia))
    out.append(Case("MaxPoolGradWithArgmax/rejects_grad_shape", "MaxPoolGradWithArgmax",
                    (x, np.ones((2, 3, 3, 2), np.float32), arg0), ia))
    # NCHW: TensorFlow's CPU pools are NHWC only (see DIFFERENCES).
    out.append(Case("MaxPool/nchw", "MaxPool", (_distinct(1110, (1, 2, 4, 4), "float32"),),
                    {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2], "padding": "VALID", "data_format": "NCHW"}))
    out.append(Case("AvgPool/nchw", "AvgPool", (_rand(1111, (1, 2, 4, 4), "float32"),),
                    {"ksize": [1, 1, 2, 2], "strides": [1, 1, 2, 2], "padding": "VALID", "data_format": "NCHW"}))
    # EXPLICIT padding (MaxPool and MaxPoolGrad only).
    ea = {**_pool(2, 2, "EXPLICIT"), "explicit_paddings": [0, 0, 1, 0, 0, 1, 0, 0]}
    x = _distinct(1120, (1, 3, 3, 2), "float32")
    out.append(Case("MaxPool/explicit", "MaxPool", (x,), ea, grad=True, seed=1120))
    out.append(Case("MaxPool/explicit_negative_values", "MaxPool", (-np.abs(x) - 1,), ea,
                    why="padding never wins, even over negative values"))
    # Empty and degenerate.
    out.append(Case("MaxPool/empty_batch", "MaxPool", (np.zeros((0, 4, 4, 1), np.float32),), _pool(2, 2, "VALID")))
    out.append(Case("AvgPool/empty_batch", "AvgPool", (np.zeros((0, 4, 4, 1), np.float32),), _pool(2, 2, "VALID")))
    out.append(Case("MaxPool/empty_channels", "MaxPool", (np.zeros((1, 4, 4, 0), np.float32),), _pool(2, 2, "VALID")))
    out.append(Case("MaxPool/noncontiguous", "MaxPool", (noncontiguous(_distinct(1121, (1, 4, 4, 2), "float32")),),
                    _pool(2, 2, "VALID")))
    out.append(Case("AvgPool/noncontiguous", "AvgPool", (noncontiguous(_rand(1122, (1, 4, 4, 2), "float32")),),
                    _pool(2, 2, "VALID")))
    out.append(Case("MaxPool/window_larger_than_input_valid", "MaxPool", (np.ones((1, 2, 2, 1), np.float32),),
                    _pool(3, 1, "VALID")))
    out.append(Case("AvgPool/window_larger_than_input_valid", "AvgPool", (np.ones((1, 2, 2, 1), np.float32),),
                    _pool(3, 1, "VALID")))
    # Calls TensorFlow rejects.
    for op in ("MaxPool", "AvgPool", "MaxPoolWithArgmax"):
        x1 = np.ones((1, 4, 4, 1), np.float32)
        out.append(Case(f"{op}/rejects_ksize_length", op, (x1,),
                        {"ksize": [1, 2, 2], "strides": [1, 1, 1, 1], "padding": "VALID"}))
        out.append(Case(f"{op}/rejects_batch_ksize", op, (x1,),
                        {"ksize": [2, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}))
        out.append(Case(f"{op}/rejects_zero_ksize", op, (x1,),
                        {"ksize": [1, 0, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}))
        out.append(Case(f"{op}/rejects_zero_stride", op, (x1,),
                        {"ksize": [1, 2, 2, 1], "strides": [1, 0, 1, 1], "padding": "VALID"}))
        out.append(Case(f"{op}/rejects_rank3", op, (np.ones((4, 4, 1), np.float32),), _pool(2, 1, "VALID")))
    out.append(Case("AvgPool/rejects_int32", "AvgPool", (np.ones((1, 2, 2, 1), np.int32),), _pool(2, 1, "VALID")))
    out.append(Case("AvgPoolGrad/rejects_shape_length", "AvgPoolGrad",
                    (_a([1, 4, 4], "int32"), np.ones((1, 2, 2, 1), np.float32)), _pool(2, 2, "VALID")))
    out.append(Case("AvgPoolGrad/grad_shape_mismatch", "AvgPoolGrad",
                    (_a([1, 4, 4, 1], "int32"), np.ones((1, 3, 3, 1), np.float32)), _pool(2, 2, "VALID")))
    out.append(Case("MaxPoolGrad/rejects_grad_shape", "MaxPoolGrad",
                    (np.ones((1, 4, 4, 1), np.float32), np.ones((1, 2, 2, 1), np.float32),
                     np.ones((1, 3, 3, 1), np.float32)), _pool(2, 2, "VALID")))
    # Large enough for the cpu backend's native pool kernels to run several row blocks.
    big = _rand(1130, (2, 32, 32, 8), "float32")
    out.append(Case("MaxPool/float32_large", "MaxPool", (big,), _pool(3, 2, "SAME")))
    out.append(Case("AvgPool/float32_large", "AvgPool", (big,), _pool(3, 2, "SAME")))
    return out


def _batch_norm_inputs() -> tuple[np.ndarray, ...]:
    c = 4
    return (_rand(121, (c,), "float32", 0.5, 2.0), _rand(122, (c,), "float32"), _rand(123, (c,), "float32"),
            _rand(124, (c,), "float32", 0.5, 2.0), np.zeros(0, np.float32))


def _batch_norm_cases() -> list[Case]:
    """The calls TensorFlow rejects, and FusedBatchNormGradV3 (FusedBatchNormV3's values are
    composed cases: see _tf_batch_norm)."""
    scale, offset, mean, var, none = _batch_norm_inputs()
    out = [
        Case("FusedBatchNormV3/bad_scale", "FusedBatchNormV3", (_rand(125, (2, 3, 3, 4), "float32"),
                                                                np.ones(3, np.float32), offset, none, none)),
        Case("FusedBatchNormV3/rank3", "FusedBatchNormV3", (_rand(125, (2, 3, 4), "float32"), scale, offset, none, none)),
    ]
    xg = _rand(132, (2, 3, 3, 4), "float32")
    dy = _rand(133, (2, 3, 3, 4), "float32")
    bmean, bvar = xg.mean((0, 1, 2)), xg.var((0, 1, 2))
    for training in (True, False):
        out.append(Case(f"FusedBatchNormGradV3/training{int(training)}", "FusedBatchNormGradV3",
                        (dy, xg, scale, bmean if training else mean, bvar if training else var, none),
                        {"epsilon": 0.001, "is_training": training}, tol=(1e-4, 1e-5), why="sums over the batch"))
    return out


def _batch_norm_composed_cases() -> list[Case]:
    scale, offset, mean, var, none = _batch_norm_inputs()
    out: list[Case] = []
    for dt in ("float32", "float16"):
        x = _rand(125, (2, 3, 3, 4), dt)
        tol = (1e-2, 1e-2) if dt == "float16" else (1e-5, 1e-5)
        out.append(Case(f"FusedBatchNormV3/training_{dt}", "FusedBatchNormV3", (x, scale, offset, none, none),
                        {"epsilon": 0.001}, tol=tol, why="sums over the batch"))
        out.append(Case(f"FusedBatchNormV3/inference_{dt}", "FusedBatchNormV3", (x, scale, offset, mean, var),
                        {"epsilon": 0.01, "is_training": False}, tol=tol, why="sums over the batch"))
    out += [
        Case("FusedBatchNormV3/nchw", "FusedBatchNormV3", (_rand(128, (2, 4, 3, 5), "float32"), scale, offset, none, none),
             {"data_format": "NCHW"}, tol=(1e-5, 1e-5), why="sums over the batch"),
        Case("FusedBatchNormV3/running_average", "FusedBatchNormV3", (_rand(130, (3, 2, 2, 4), "float32"), scale, offset,
                                                                      mean, var),
             {"exponential_avg_factor": 0.1}, tol=(1e-5, 1e-5), why="sums over the batch"),
        Case("FusedBatchNormV3/ndhwc", "FusedBatchNormV3", (_rand(131, (2, 2, 2, 2, 4), "float32"), scale, offset, none,
                                                            none), {"data_format": "NDHWC"}, tol=(1e-5, 1e-5),
             why="sums over the batch"),
    ]
    return out


def _more_cases() -> list[Case]:
    """bfloat16, the widest unsigned types and integer wraparound."""
    out: list[Case] = []
    for dt in _BF16:
        for j, op in enumerate(["Relu", "Relu6", "Elu", "Selu", "Softplus", "Softmax", "LogSoftmax"]):
            out.append(Case(f"{op}/{dt}", op, (_rand(1300 + j, (3, 5), dt, -8.0, 8.0),)))
        out.append(Case(f"BiasAdd/{dt}", "BiasAdd", (_rand(1310, (2, 3), dt), _rand(1311, (3,), dt))))
        out.append(Case(f"BiasAddGrad/{dt}", "BiasAddGrad", (_rand(1312, (4, 3), dt),)))
        out.append(Case(f"MaxPool/{dt}", "MaxPool", (_rand(1313, (1, 3, 4, 2), dt),), _pool(2, 1, "VALID")))
        out.append(Case(f"AvgPool/{dt}", "AvgPool", (_rand(1314, (1, 3, 4, 2), dt),), _pool(2, 1, "SAME")))
        out.append(Case(f"Conv2D/{dt}", "Conv2D", (_rand(1315, (1, 4, 4, 2), dt), _rand(1316, (2, 2, 2, 2), dt)),
                        _conv([1, 1, 1, 1], "VALID"), tol=(3e-2, 3e-2),
                        why="bfloat16 products summed over 8 taps (TensorFlow rounds each step to bfloat16)"))
    for dt in ("uint32", "uint64"):
        out.append(Case(f"Relu/{dt}", "Relu", (_a([0, 1, 7, np.iinfo(dt).max], dt),)))
        out.append(Case(f"Relu6/{dt}", "Relu6", (_a([0, 1, 7, np.iinfo(dt).max], dt),)))
        out.append(Case(f"ReluGrad/{dt}", "ReluGrad", (_a([5, 6, 7, 8], dt), _a([0, 1, 0, 9], dt))))
    out.append(Case("BiasAdd/int8_wraps", "BiasAdd", (_a([[127, -128]], "int8"), _a([1, -1], "int8"))))
    out.append(Case("BiasAddGrad/int8_wraps", "BiasAddGrad", (_a([[100, 1], [100, 2]], "int8"),)))
    out.append(Case("Conv2D/int32_wraps", "Conv2D",
                    (np.full((1, 2, 2, 1), 2**20, np.int32), np.full((2, 2, 1, 1), 2**11, np.int32)),
                    _conv([1, 1, 1, 1], "VALID"), why="4 products of 2**31: the sum wraps modulo 2**32"))
    # AvgPool with SAME padding divides by the taps inside the input only.
    out.append(Case("AvgPool/same_edges", "AvgPool", (_a(np.arange(1.0, 13.0).reshape(1, 3, 4, 1), "float32"),),
                    _pool(3, 2, "SAME")))
    nan_x = _a([[[[1.0], [NAN]], [[2.0], [0.0]]]], "float32")
    out.append(Case("MaxPoolGrad/nan_in_window", "MaxPoolGrad",
                    (nan_x, _a([[[[2.0]]]], "float32"), _a([[[[5.0]]]], "float32")), _pool(2, 2, "VALID"),
                    why="orig_output from MaxPool, which never picks nan"))
    return out


def _rejected_cases() -> list[Case]:
    """More calls TensorFlow rejects (or answers oddly): sizes, shapes and ranks."""
    f32 = np.float32
    valid = _conv([1, 1, 1, 1], "VALID")
    pool = _pool(2, 2, "VALID")
    out = [
        Case("Conv2DBackpropInput/rejects_negative_sizes", "Conv2DBackpropInput",
             (_a([1, -5, 5, 2], "int32"), np.ones((3, 3, 2, 2), f32), np.ones((1, 3, 3, 2), f32)), valid),
        Case("Conv2DBackpropInput/rejects_filter_rank3", "Conv2DBackpropInput",
             (_a([1, 5, 5, 2], "int32"), np.ones((3, 3, 2), f32), np.ones((1, 3, 3, 2), f32)), valid),
        Case("Conv2DBackpropFilter/rejects_negative_sizes", "Conv2DBackpropFilter",
             (np.ones((1, 5, 5, 2), f32), _a([3, -3, 2, 2], "int32"), np.ones((1, 3, 3, 2), f32)), valid),
        Case("Conv2DBackpropFilter/rejects_sizes_length", "Conv2DBackpropFilter",
             (np.ones((1, 5, 5, 2), f32), _a([3, 3, 2], "int32"), np.ones((1, 3, 3, 2), f32)), valid),
        Case("Conv2D/rejects_filter_rank5", "Conv2D", (np.ones((1, 3, 3, 1), f32), np.ones((2, 2, 1, 1, 1), f32)),
             valid),
        Case("Conv2D/rejects_zero_filter_depth", "Conv2D", (np.ones((1, 3, 3, 2), f32), np.ones((2, 2, 0, 1), f32)),
             valid),
        Case("Conv2D/grouped", "Conv2D", (_rand(1400, (1, 3, 3, 4), "float32"), _rand(1401, (2, 2, 2, 6), "float32")),
             valid, why="input depth a multiple of the filter's in_channels: a grouped convolution"),
        Case("Conv2D/grouped_int32", "Conv2D", (_rand(1404, (2, 4, 3, 6), "int32", -9, 9),
                                                _rand(1405, (2, 2, 2, 3), "int32", -9, 9)), _conv([1, 2, 1, 1], "SAME")),
        Case("Conv2D/rejects_groups_output_depth", "Conv2D",
             (np.ones((1, 3, 3, 4), f32), np.ones((2, 2, 2, 3), f32)), valid),
        Case("AvgPoolGrad/rejects_negative_shape", "AvgPoolGrad",
             (_a([1, -4, 4, 1], "int32"), np.ones((1, 2, 2, 1), f32)), pool),
        Case("AvgPoolGrad/empty_batch", "AvgPoolGrad", (_a([0, 4, 4, 1], "int32"), np.ones((0, 2, 2, 1), f32)), pool),
        Case("MaxPoolGrad/rejects_orig_output_shape", "MaxPoolGrad",
             (np.ones((1, 4, 4, 1), f32), np.ones((1, 3, 3, 1), f32), np.ones((1, 2, 2, 1), f32)), pool),
        Case("MaxPoolGrad/rejects_rank3", "MaxPoolGrad",
             (np.ones((4, 4, 1), f32), np.ones((2, 2, 1), f32), np.ones((2, 2, 1), f32)), pool),
        Case("MaxPoolGradGrad/rejects_grad_shape", "MaxPoolGradGrad",
             (np.ones((1, 4, 4, 1), f32), np.ones((1, 2, 2, 1), f32), np.ones((1, 2, 2, 1), f32)), pool),
        Case("MaxPoolGradWithArgmax/rejects_argmax_shape", "MaxPoolGradWithArgmax",
             (np.ones((1, 4, 4, 1), f32), np.ones((1, 2, 2, 1), f32), np.zeros((1, 3, 3, 1), np.int64)), pool),
        Case("MaxPoolWithArgmax/empty_batch", "MaxPoolWithArgmax", (np.zeros((0, 4, 4, 1), f32),), pool),
        Case("MaxPool/rejects_explicit_paddings_length", "MaxPool", (np.ones((1, 4, 4, 1), f32),),
             {**_pool(2, 2, "EXPLICIT"), "explicit_paddings": [0, 0, 1, 1]}),
        Case("MaxPool/explicit_padding_larger_than_window", "MaxPool", (np.ones((1, 2, 2, 1), f32),),
             {**_pool(2, 1, "EXPLICIT"), "explicit_paddings": [0, 0, 2, 0, 0, 0, 0, 0]}),
        Case("BiasAddGrad/nchw_rank2", "BiasAddGrad", (_rand(1402, (2, 3), "float32"),), {"data_format": "NCHW"}),
        Case("BiasAdd/rejects_nchw_bias_size", "BiasAdd", (np.ones((2, 3, 4), f32), np.ones(4, f32)),
             {"data_format": "NCHW"}),
        Case("SparseSoftmaxCrossEntropyWithLogits/no_classes", "SparseSoftmaxCrossEntropyWithLogits",
             (np.zeros((2, 0), f32), _a([0, 0], "int64"))),
        Case("SparseSoftmaxCrossEntropyWithLogits/empty_no_classes", "SparseSoftmaxCrossEntropyWithLogits",
             (np.zeros((0, 0), f32), np.zeros(0, np.int64))),
        Case("SoftmaxCrossEntropyWithLogits/no_classes", "SoftmaxCrossEntropyWithLogits",
             (np.zeros((2, 0), f32), np.zeros((2, 0), f32))),
        Case("SoftmaxCrossEntropyWithLogits/float16_broadcast", "SoftmaxCrossEntropyWithLogits",
             (_rand(1403, (3, 4), "float16"), _a([[0.25, 0.25, 0.5, 0.0]], "float16")), tol=(1e-2, 1e-2),
             why="float16's 11-bit significand"),
        Case("ReluGrad/rejects_dtype_mismatch", "ReluGrad", (np.ones(3, f32), np.ones(3, np.float64))),
    ]
    return out


_DEPTHWISE_CONFIGS: list[tuple[str, tuple[int, ...], tuple[int, ...], dict[str, Any]]] = [
    # name, input shape (NHWC), filter shape [kh, kw, in_channels, multiplier], attrs
    ("valid_m2", (2, 5, 5, 3), (3, 3, 3, 2), _conv([1, 1, 1, 1], "VALID")),
    ("same_stride2", (1, 7, 6, 4), (3, 2, 4, 1), _conv([1, 2, 2, 1], "SAME")),
    ("same_even_filter_m3", (1, 4, 4, 2), (2, 2, 2, 3), _conv([1, 1, 1, 1], "SAME")),
    ("explicit", (1, 4, 5, 2), (3, 3, 2, 2), _conv([1, 1, 1, 1], "EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0])),
    ("valid_stride3", (1, 8, 7, 2), (2, 2, 2, 1), _conv([1, 3, 3, 1], "VALID")),
]


def _depthwise_out_shape(x: tuple[int, ...], f: tuple[int, ...], attrs: dict[str, Any]) -> tuple[int, ...]:
    n, oh, ow, _ = _conv_out_shape(x, f, attrs)
    return (n, oh, ow, f[2] * f[3])


def _depthwise_cases() -> list[Case]:
    out: list[Case] = []
    for j, (name, xs, fs, attrs) in enumerate(_DEPTHWISE_CONFIGS):
        ys = _depthwise_out_shape(xs, fs, attrs)
        x, f, dy = _rand(900 + j, xs, "float32"), _rand(910 + j, fs, "float32"), _rand(920 + j, ys, "float32")
        out.append(Case(f"DepthwiseConv2dNative/{name}", "DepthwiseConv2dNative", (x, f), attrs, grad=True, seed=900 + j))
        out.append(Case(f"DepthwiseConv2dNativeBackpropInput/{name}", "DepthwiseConv2dNativeBackpropInput",
                        (_a(xs, "int32"), f, dy), attrs, grad=True, seed=930 + j))
        out.append(Case(f"DepthwiseConv2dNativeBackpropFilter/{name}", "DepthwiseConv2dNativeBackpropFilter",
                        (x, _a(fs, "int32"), dy), attrs, grad=True, seed=940 + j))
    xs, fs, attrs = (2, 5, 5, 3), (3, 3, 3, 2), _conv([1, 1, 1, 1], "SAME")
    ys = _depthwise_out_shape(xs, fs, attrs)
    for j, dt in enumerate(["float64", "float16"]):
        tol = (2e-2, 5e-2) if dt == "float16" else None
        why = "float16 products summed over 9 taps (the filter gradient over 50 positions)" if tol else ""
        x, f, dy = _rand(950 + j, xs, dt), _rand(960 + j, fs, dt), _rand(970 + j, ys, dt)
        out.append(Case(f"DepthwiseConv2dNative/{dt}", "DepthwiseConv2dNative", (x, f), attrs, grad=dt == "float64",
                        seed=950 + j, tol=tol, why=why))
        out.append(Case(f"DepthwiseConv2dNativeBackpropInput/{dt}", "DepthwiseConv2dNativeBackpropInput",
                        (_a(xs, "int32"), f, dy), attrs, tol=tol, why=why))
        out.append(Case(f"DepthwiseConv2dNativeBackpropFilter/{dt}", "DepthwiseConv2dNativeBackpropFilter",
                        (x, _a(fs, "int32"), dy), attrs, tol=(5e-2, 2e-1) if tol else None, why=why))
    valid = _conv([1, 1, 1, 1], "VALID")
    x, f = _rand(980, (1, 4, 4, 2), "float32"), _rand(981, (2, 2, 2, 2), "float32")
    out += [
        Case("DepthwiseConv2dNative/specials", "DepthwiseConv2dNative",
             (_a([[[[NAN, 1.0], [INF, 2.0]], [[0.0, -INF], [3.0, 4.0]]]], "float32"), np.ones((1, 1, 2, 1), np.float32)), valid),
        Case("DepthwiseConv2dNative/empty_batch", "DepthwiseConv2dNative",
             (np.zeros((0, 3, 3, 2), np.float32), np.ones((2, 2, 2, 1), np.float32)), valid),
        Case("DepthwiseConv2dNative/empty_multiplier", "DepthwiseConv2dNative",
             (np.ones((1, 3, 3, 2), np.float32), np.ones((2, 2, 2, 0), np.float32)), valid),
        Case("DepthwiseConv2dNative/noncontiguous", "DepthwiseConv2dNative", (noncontiguous(x), f), valid),
        Case("DepthwiseConv2dNative/rejects_depth_mismatch", "DepthwiseConv2dNative",
             (x, _rand(982, (2, 2, 3, 1), "float32")), valid),
        Case("DepthwiseConv2dNative/rejects_rank3", "DepthwiseConv2dNative", (x[0], f), valid),
        Case("DepthwiseConv2dNative/filter_taller_than_input", "DepthwiseConv2dNative",
             (x, _rand(983, (5, 2, 2, 1), "float32")), valid),
        Case("DepthwiseConv2dNative/rejects_batch_stride", "DepthwiseConv2dNative", (x, f), _conv([2, 1, 1, 1], "VALID")),
        Case("DepthwiseConv2dNative/unequal_strides", "DepthwiseConv2dNative", (x, f), _conv([1, 1, 2, 1], "VALID")),
        Case("DepthwiseConv2dNativeBackpropInput/rejects_sizes_length", "DepthwiseConv2dNativeBackpropInput",
             (_a([4, 4], "int32"), f, _rand(984, (1, 3, 3, 4), "float32")), valid),
        Case("DepthwiseConv2dNativeBackpropInput/rejects_out_backprop_shape", "DepthwiseConv2dNativeBackpropInput",
             (_a([1, 4, 4, 2], "int32"), f, _rand(984, (1, 3, 3, 2), "float32")), valid),
        Case("DepthwiseConv2dNativeBackpropFilter/rejects_out_backprop_shape", "DepthwiseConv2dNativeBackpropFilter",
             (x, _a([2, 2, 2, 2], "int32"), _rand(985, (1, 2, 3, 4), "float32")), valid),
        Case("DepthwiseConv2dNativeBackpropFilter/rejects_depth_mismatch", "DepthwiseConv2dNativeBackpropFilter",
             (x, _a([2, 2, 3, 2], "int32"), _rand(985, (1, 3, 3, 6), "float32")), valid),
    ]
    return out


def _resize_cases() -> list[Case]:
    out: list[Case] = []
    modes = {"legacy": {}, "align": {"align_corners": True}, "half_pixel": {"half_pixel_centers": True}}
    geometries = {"up": ((2, 4, 5, 3), (7, 9)), "down": ((1, 9, 7, 2), (4, 3)), "mixed": ((2, 5, 3, 1), (2, 8))}
    for j, (gname, (xs, size)) in enumerate(geometries.items()):
        gs = (xs[0], size[0], size[1], xs[3])
        for mname, attrs in modes.items():
            seed = 1000 + 10 * j + len(mname)
            x, g = _rand(seed, xs, "float32", -50.0, 50.0), _rand(seed + 1, gs, "float32")
            sz = _a(size, "int32")
            out += [
                Case(f"ResizeBilinear/{gname}_{mname}", "ResizeBilinear", (x, sz), attrs, grad=True, seed=seed),
                Case(f"ResizeNearestNeighbor/{gname}_{mname}", "ResizeNearestNeighbor", (x, sz), attrs, grad=True,
                     seed=seed),
                Case(f"ResizeBilinearGrad/{gname}_{mname}", "ResizeBilinearGrad", (g, np.zeros(xs, np.float32)), attrs),
                Case(f"ResizeNearestNeighborGrad/{gname}_{mname}", "ResizeNearestNeighborGrad",
                     (g, _a(xs[1:3], "int32")), attrs),
            ]
    xs, size, gs = (1, 3, 4, 2), _a([5, 6], "int32"), (1, 5, 6, 2)
    for dt in ("float64", "float16", "bfloat16", "int32", "uint8", "int8", "int64", "uint16", "int16"):
        x = _rand(1100, xs, dt, -100, 100) if dt != "uint8" and dt != "uint16" else _rand(1100, xs, dt, 0, 200)
        out.append(Case(f"ResizeBilinear/{dt}", "ResizeBilinear", (x, size), {"half_pixel_centers": True}))
        out.append(Case(f"ResizeNearestNeighbor/{dt}", "ResizeNearestNeighbor", (x, size), {"align_corners": True}))
    for dt in ("float64", "float16", "bfloat16"):
        out.append(Case(f"ResizeBilinearGrad/{dt}", "ResizeBilinearGrad",
                        (_rand(1110, gs, "float32"), np.zeros(xs, dt)), {"half_pixel_centers": True}))
    for dt in ("float64", "float16", "bfloat16", "int32", "int8", "uint8"):
        lo, hi = (0, 20) if dt == "uint8" else (-20, 20)
        out.append(Case(f"ResizeNearestNeighborGrad/{dt}", "ResizeNearestNeighborGrad",
                        (_rand(1120, gs, dt, lo, hi), _a(xs[1:3], "int32")), {}))
    x = _rand(1130, (1, 2, 3, 2), "float32")
    out += [
        Case("ResizeBilinear/specials", "ResizeBilinear",
             (_a([[[[NAN], [1.0], [INF]], [[-INF], [2.0], [3.0]]]], "float32"), _a([3, 5], "int32")), {}),
        Case("ResizeBilinear/empty_batch", "ResizeBilinear", (np.zeros((0, 2, 2, 1), np.float32), _a([3, 3], "int32")), {}),
        Case("ResizeNearestNeighbor/empty_batch", "ResizeNearestNeighbor",
             (np.zeros((0, 2, 2, 1), np.float32), _a([3, 3], "int32")), {}),
        Case("ResizeBilinear/noncontiguous", "ResizeBilinear", (noncontiguous(x), _a([4, 4], "int32")), {}),
        Case("ResizeBilinear/rejects_align_and_half_pixel", "ResizeBilinear", (x, _a([4, 4], "int32")),
             {"align_corners": True, "half_pixel_centers": True}),
        Case("ResizeBilinear/rejects_zero_size", "ResizeBilinear", (x, _a([0, 4], "int32")), {}),
        Case("ResizeBilinear/rejects_size_length", "ResizeBilinear", (x, _a([4, 4, 4], "int32")), {}),
        Case("ResizeBilinear/rejects_rank3", "ResizeBilinear", (x[0], _a([4, 4], "int32")), {}),
        Case("ResizeBilinear/rejects_empty_image", "ResizeBilinear", (np.zeros((1, 0, 3, 2), np.float32), _a([4, 4], "int32")), {}),
        Case("ResizeBilinear/rejects_no_channels", "ResizeBilinear", (np.zeros((1, 2, 3, 0), np.float32), _a([4, 4], "int32")), {}),
        Case("ResizeNearestNeighbor/rejects_negative_size", "ResizeNearestNeighbor", (x, _a([-1, 4], "int32")), {}),
        Case("ResizeNearestNeighbor/rejects_align_and_half_pixel", "ResizeNearestNeighbor", (x, _a([4, 4], "int32")),
             {"align_corners": True, "half_pixel_centers": True}),
        Case("ResizeBilinearGrad/rejects_empty_grads", "ResizeBilinearGrad",
             (np.zeros((1, 0, 3, 2), np.float32), np.zeros((1, 2, 3, 2), np.float32)), {}),
        Case("ResizeBilinearGrad/rejects_empty_original", "ResizeBilinearGrad",
             (np.ones((1, 2, 3, 2), np.float32), np.zeros((1, 0, 3, 2), np.float32)), {}),
        Case("ResizeNearestNeighborGrad/rejects_zero_size", "ResizeNearestNeighborGrad",
             (np.ones((1, 2, 3, 2), np.float32), _a([0, 3], "int32")), {}),
        Case("ResizeNearestNeighborGrad/rejects_size_length", "ResizeNearestNeighborGrad",
             (np.ones((1, 2, 3, 2), np.float32), _a([3], "int32")), {}),
    ]
    return out


def _lrn_reference(x: np.ndarray, r: int, bias: float, alpha: float, beta: float) -> np.ndarray:
    """LRN's definition in float64: the output image an LRNGrad case is given."""
    w = x.astype(np.float64)
    out = np.empty_like(w)
    for d in range(x.shape[3]):
        window = w[..., max(0, d - r):d + r + 1]
        out[..., d] = w[..., d] * (bias + alpha * np.sum(window * window, -1)) ** -beta
    return out


def cases() -> list[Case]:
    return [*_activation_cases(), *_softmax_cases(), *_bias_cases(), *_conv_cases(), *_pool_cases(), *_more_cases(),
            *_rejected_cases(), *_batch_norm_cases(), *_depthwise_cases(), *_resize_cases()]


# ------------------------------------------------------------------ compositions


def _tf_activation(tf: Any, y: Any, activation: str) -> Any:
    return y if activation == "Identity" else getattr(tf.raw_ops, activation)(features=y) \
        if activation in ("Relu", "Relu6", "Elu") else getattr(tf.raw_ops, activation)(x=y)


def _tf_fused_conv2d(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    x, f, b = inputs
    attrs = dict(attrs)
    act = attrs.pop("activation", "Identity")
    fmt = attrs.get("data_format", "NHWC")
    y = tf.raw_ops.Conv2D(input=x, filter=f, **attrs)
    return [_tf_activation(tf, tf.raw_ops.BiasAdd(value=y, bias=b, data_format=fmt), act)]


def _tf_fused_mat_mul(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    a, b, bias = inputs
    attrs = dict(attrs)
    act = attrs.pop("activation", "Identity")
    y = tf.raw_ops.MatMul(a=a, b=b, **attrs)
    return [_tf_activation(tf, tf.raw_ops.BiasAdd(value=y, bias=bias), act)]


def _tf_sparse_xent_loss(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    loss, backprop = tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=inputs[0], labels=inputs[1])
    if attrs.get("reduction", "mean") == "sum":
        return [tf.reduce_sum(loss), backprop]
    n = tf.cast(tf.shape(loss)[0], loss.dtype)
    return [tf.reduce_mean(loss), backprop / n]


def _tf_batch_norm(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    """TensorFlow's FusedBatchNormV3 for y, batch_mean and batch_variance; its reserve spaces
    (outputs 3 to 5) are scratch for its gradient kernel whose shapes and values vary from
    run to run (uninitialized memory in inference), so they are made by their meaning: the
    batch mean and uncorrected variance (the given mean and variance in inference), empty."""
    x, scale, offset, mean, variance = inputs
    r = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean, variance=variance, **attrs)
    if attrs.get("is_training", True):
        fmt = attrs.get("data_format", "NHWC")
        axes = [d for d in range(len(x.shape)) if d != (1 if fmt.startswith("NC") else len(x.shape) - 1)]
        m, v = tf.nn.moments(tf.cast(x, tf.float32), axes)
    else:
        m, v = mean, variance
    return [r.y, r.batch_mean, r.batch_variance, m, v, tf.zeros([0], tf.float32)]


def _tf_layer_norm_of(tf: Any, x: Any, scale: Any, offset: Any, epsilon: float) -> Any:
    """Keras 3's LayerNormalization(axis=-1) on TensorFlow: moments, then the normalization."""
    wide = x.dtype in (tf.float16, tf.bfloat16)
    xf = tf.cast(x, tf.float32) if wide else x
    mean, variance = tf.nn.moments(xf, axes=[-1], keepdims=True)
    y = (xf - mean) * tf.math.rsqrt(variance + epsilon) * tf.cast(scale, xf.dtype) + tf.cast(offset, xf.dtype)
    return tf.cast(y, x.dtype) if wide else y


def _tf_layer_norm(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    x, scale, offset = (tf.constant(v) for v in inputs)
    return [_tf_layer_norm_of(tf, x, scale, offset, attrs.get("epsilon", 1e-3))]


def _tf_layer_norm_grad(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    dy, x, scale = (tf.constant(v) for v in inputs)
    offset = tf.zeros_like(scale)
    with tf.GradientTape() as tape:
        tape.watch([x, scale, offset])
        y = _tf_layer_norm_of(tf, x, scale, offset, attrs.get("epsilon", 1e-3))
    return list(tape.gradient(y, [x, scale, offset], output_gradients=dy))


def _tf_gelu(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    return [tf.nn.gelu(tf.constant(inputs[0]), approximate=attrs.get("approximate", False))]


def _tf_gelu_grad(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    dy, x = (tf.constant(v) for v in inputs)
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = tf.nn.gelu(x, approximate=attrs.get("approximate", False))
    return [tape.gradient(y, x, output_gradients=dy)]


def _tf_softmax_grad(tf: Any, inputs: tuple[Any, ...], attrs: dict[str, Any]) -> list[Any]:
    # nn_grad.py's _SoftmaxGrad: the composition TensorFlow's gradient of Softmax runs
    dy, sm = (tf.constant(v) for v in inputs)
    return [(dy - tf.reduce_sum(dy * sm, -1, keepdims=True)) * sm]


COMPOSED: dict[str, Callable[[Any, tuple[Any, ...], dict[str, Any]], list[Any]]] = {
    "Gelu": _tf_gelu,
    "SoftmaxGrad": _tf_softmax_grad,
    "GeluGrad": _tf_gelu_grad,
    "FusedLayerNorm": _tf_layer_norm,
    "FusedLayerNormGrad": _tf_layer_norm_grad,
    "FusedBatchNormV3": _tf_batch_norm,
    "FusedConv2D": _tf_fused_conv2d,
    "FusedMatMul": _tf_fused_mat_mul,
    "SparseSoftmaxCrossEntropyLoss": _tf_sparse_xent_loss,
}


def composed_cases() -> list[Case]:
    """Cases of the ops in ``COMPOSED``: TensorFlow's answer is the composition's."""
    out: list[Case] = _batch_norm_composed_cases()
    for j, act in enumerate(["Identity", "Relu", "Relu6", "Elu", "Sigmoid", "Tanh"]):
        out.append(Case(f"FusedConv2D/{act}", "FusedConv2D",
                        (_rand(1200 + j, (1, 5, 5, 2), "float32"), _rand(1210 + j, (3, 3, 2, 3), "float32"),
                         _rand(1220 + j, (3,), "float32")),
                        {"strides": [1, 1, 1, 1], "padding": "SAME", "activation": act}, grad=True, seed=1200 + j,
                        tol=(1e-4, 1e-5), why="the filter gradient sums 25 float32 products per value, with "
                        "cancellation: summation order moves it by a few 1e-6"))
        out.append(Case(f"FusedMatMul/{act}", "FusedMatMul",
                        (_rand(1230 + j, (3, 4), "float32"), _rand(1240 + j, (4, 5), "float32"),
                         _rand(1250 + j, (5,), "float32")),
                        {"activation": act}, grad=True, seed=1230 + j, tol=(1e-4, 1e-5),
                        why="the weights' gradient sums 3 float32 products per value, with cancellation: "
                        "TensorFlow's own answer moves by 1e-6 between Intel and AMD CPUs (oneDNN's kernels)"))
    out.append(Case("FusedConv2D/float64_strided", "FusedConv2D",
                    (_rand(1260, (2, 6, 5, 2), "float64"), _rand(1261, (2, 2, 2, 2), "float64"),
                     _rand(1262, (2,), "float64")),
                    {"strides": [1, 2, 2, 1], "padding": "VALID", "activation": "Relu"}, grad=True, seed=1260))
    out.append(Case("FusedMatMul/transposed", "FusedMatMul",
                    (_rand(1263, (4, 3), "float32"), _rand(1264, (5, 4), "float32"), _rand(1265, (5,), "float32")),
                    {"transpose_a": True, "transpose_b": True, "activation": "Relu"}, grad=True, seed=1263))
    out.append(Case("FusedMatMul/specials", "FusedMatMul",
                    (_a([[NAN, 1.0], [INF, 0.0]], "float32"), _a([[1.0, 0.0], [0.0, 1.0]], "float32"),
                     _a([0.0, -INF], "float32")), {"activation": "Relu"}))
    for j, red in enumerate(["mean", "sum"]):
        out.append(Case(f"SparseSoftmaxCrossEntropyLoss/{red}", "SparseSoftmaxCrossEntropyLoss",
                        (_rand(1270 + j, (4, 5), "float32"), rng(1280 + j).integers(0, 5, 4).astype(np.int64)),
                        {"reduction": red}, grad=True, seed=1270 + j))
    out.append(Case("SparseSoftmaxCrossEntropyLoss/label_out_of_range", "SparseSoftmaxCrossEntropyLoss",
                    (_rand(1290, (2, 3), "float32"), _a([0, 3], "int64"))))
    for j, (shape, dt) in enumerate([((4, 16), "float32"), ((2, 3, 8), "float32"), ((3, 5), "float64"),
                                     ((2, 64), "float16"), ((5,), "float32")]):
        c = shape[-1]
        x = _rand(1300 + j, shape, dt) * 2 + 0.5
        tol = (2e-2, 2e-2) if dt == "float16" else None
        why = "float16: TensorFlow's composition rounds each op's result to half, the fused op once" if tol else ""
        out.append(Case(f"FusedLayerNorm/{dt}_{'x'.join(map(str, shape))}", "FusedLayerNorm",
                        (x.astype(dt), _rand(1310 + j, (c,), dt), _rand(1320 + j, (c,), dt)), {}, grad=dt != "float16",
                        seed=1300 + j, tol=tol, why=why))
        out.append(Case(f"FusedLayerNormGrad/{dt}_{'x'.join(map(str, shape))}", "FusedLayerNormGrad",
                        (_rand(1330 + j, shape, dt), x.astype(dt), _rand(1340 + j, (c,), dt)), {},
                        tol=tol or (1e-5, 1e-5), why=why or "the row sums of the two formulas associate differently"))
    out.append(Case("FusedLayerNorm/epsilon", "FusedLayerNorm",
                    (_rand(1350, (3, 4), "float32"), _rand(1351, (4,), "float32"), _rand(1352, (4,), "float32")),
                    {"epsilon": 0.25}, grad=True, seed=1350))
    out.append(Case("FusedLayerNorm/specials", "FusedLayerNorm",
                    (_a([[NAN, 1.0, 2.0], [INF, 0.0, 1.0], [1.0, 1.0, 1.0]], "float32"), np.ones(3, np.float32),
                     np.zeros(3, np.float32)), {}))
    for j, (dt, approximate) in enumerate([(d, a) for d in ("float32", "float64", "float16") for a in (False, True)]):
        x = _rand(1360 + j, (4, 6), dt) * 3
        if approximate:  # past +-4 the tanh form's 1 + tanh(u) cancels to TensorFlow's exact 0 (+0.0) in its gradient
            x = np.clip(x, -4, 4).astype(dt)
        half = dt == "float16"
        tol = (2e-2, 2e-2) if half else None
        why = "float16: TensorFlow's composition rounds each op's result to half, the op once (in float32)" if half else ""
        name = f"{dt}{'_tanh' * approximate}"
        if dt == "float64":
            tol, why = (1e-6, 1e-9), ("tf.nn.gelu computes 0.5 x erfc(-x / sqrt 2) (its float64 erfc is within about "
                                      "1e-10 of the true value here) and the tanh form with pow(x, 3); opkernel "
                                      "computes 0.5 x (1 + erf(x / sqrt 2)) as torch does, with the C library's erf")
        out.append(Case(f"Gelu/{name}", "Gelu", (x,), {"approximate": approximate}, grad=not half, seed=1360 + j,
                        tol=tol, why=why))
        # x within +-5: further out TensorFlow's derivative cancels to an exact 0 (+0.0) where opkernel's keeps a
        # tiny negative value (-1e-6 in float32, -0.0 in float16)
        out.append(Case(f"GeluGrad/{name}", "GeluGrad", (_rand(1370 + j, (4, 6), dt), np.clip(x, -5, 5).astype(dt)),
                        {"approximate": approximate}, tol=tol or (1e-5, 1e-6),
                        why=why or "the derivative's formula differs from the autodiff of the composition's "
                        "(Phi(x) + x * phi(x) against the chain rule's products)"))
    for approximate in (False, True):
        out.append(Case(f"Gelu/specials{'_tanh' * approximate}", "Gelu",
                        (_a([NAN, -INF, -30.0, -0.0, 0.0, 5.0, INF], "float32"),), {"approximate": approximate}))
    for j, (dt, shape) in enumerate([("float32", (3, 7)), ("float64", (2, 3, 5)), ("float32", (4, 100)),
                                     ("float16", (3, 7)), ("bfloat16", (2, 9))]):
        logits = _rand(1390 + j, shape, "float64")
        e = np.exp(logits - logits.max(-1, keepdims=True))
        half = dt in ("float16", "bfloat16")
        out.append(Case(f"SoftmaxGrad/{dt}_{'x'.join(map(str, shape))}", "SoftmaxGrad",
                        (_rand(1395 + j, shape, dt), (e / e.sum(-1, keepdims=True)).astype(dt)),
                        grad=not half, seed=1390 + j, tol=(2e-2, 2e-2) if half else None,
                        why="16-bit floats: TensorFlow's composition rounds each op's result, the op once (in float32)"
                        if half else ""))
    out.append(Case("SoftmaxGrad/specials", "SoftmaxGrad",
                    (_a([[NAN, 1.0, 2.0], [INF, 0.0, 1.0], [1.0, 2.0, 3.0]], "float32"),
                     _a([[0.2, 0.3, 0.5], [0.0, 0.5, 0.5], [0.0, 0.0, 1.0]], "float32"))))
    return out
