"""The randomized differential test: opkernel against TensorFlow on random calls.

    .venv/bin/python tests/tf_conformance/differential.py --per-op 300 --backends cpu,opencl \\
        --findings differential-findings.json

For every op both libraries have (``tf.raw_ops``), ``--per-op`` random calls made by
diff_gen.py from ``--seed`` (shapes with empty and 0-d dims, broadcasting, every dtype
both declare, NaN/±inf/±0/denormals/integer limits, random attrs and index inputs).
Each call runs on TensorFlow's reference CPU kernels and on each backend, each in a
worker process of its own (diff_worker.py): a crash or a hang fails that call, names
it, and the worker is restarted.  Compared: accept/reject (a call TensorFlow rejects
must raise an opkernel error naming the op), output dtypes, shapes and values
(compare.py's rules, with a tolerance that grows with the number of terms an output
sums), and for about half the calls the gradients with respect to every floating
input.

A divergence is shrunk to a small call that still diverges the same way (smaller
dims, fewer special values), and every divergence is written to ``--findings`` with
the command that remakes it alone (``--op X --index I``).  Calls where opkernel
differs on purpose match a rule in ``KNOWN_DIFFERENCES`` (with its reason, listed in
docs/conformance.md); calls TensorFlow's CPU build has no kernel for are counted
apart.  ``make test`` runs a fixed seed and budget (test_tf_differential.py).

This process imports opkernel (for its OpDefs) but never TensorFlow.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import select
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterable

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import numpy as np  # noqa: E402

import diff_gen  # noqa: E402
import diff_worker  # noqa: E402
import recording  # noqa: E402
from case import Case  # noqa: E402
from compare import TOLERANCE, mismatch  # noqa: E402

TF_OPDEFS = HERE / "recorded" / "tf_opdefs.json.gz"
BATCH = 24
#: Seconds a worker may take to start, and for one call (an OpenCL program's first build included).
START_TIMEOUT, CALL_TIMEOUT = 180.0, 60.0

# ------------------------------------------------------------------ what counts as what

#: TensorFlow errors that say its CPU build has no kernel for the call (not that the
#: call is wrong): opkernel may answer such a call; it is counted, not compared.
TF_UNSUPPORTED = (
    re.compile(r"^(NotFoundError|UnimplementedError)$"),
)
TF_UNSUPPORTED_MESSAGES = (
    re.compile(r"only supports NHWC", re.I),
    re.compile(r"Could not find device for node"),
    re.compile(r"No OpKernel was registered"),
    re.compile(r"Current CPU implementations do not yet support"),
)


@dataclass(frozen=True)
class Rule:
    """A deliberate difference: a divergence of ``op`` (any op for "*") where
    ``applies(case, tf_entry, ok_entry, detail)`` holds; ``detail`` is the divergence's text."""

    id: str
    op: str
    why: str
    applies: Callable[[Case, dict[str, Any], dict[str, Any], str], bool]


def _floats(case: Case) -> list[np.ndarray]:
    return [a for a in _arrays(case.inputs) if a.dtype.kind in "fc" or a.dtype.name == "bfloat16"]


def _near_max(case: Case) -> bool:
    """Whether a floating input has a finite component within 8x of its dtype's largest."""
    for a in _floats(case):
        parts = [a.real, a.imag] if a.dtype.kind == "c" else [a]
        for p in parts:
            f = np.abs(p.astype(np.float64))
            if (f[np.isfinite(f)] > float(np.finfo(p.dtype).max) / 8).any():
                return True
    return False


#: The reason TensorFlow's answer is matched by opkernel on inputs with denormals flushed.
FLUSHED_DENORMALS = ("TensorFlow runs its CPU kernels with denormals flushed to zero (ScopedFlushDenormal: FTZ and DAZ "
                     "set around each kernel); opkernel keeps IEEE denormals.  A divergence is this difference when "
                     "opkernel, given the same call with every denormal input replaced by a zero of its sign, gives "
                     "TensorFlow's answer")

KNOWN_DIFFERENCES: list[Rule] = [
    Rule("avgpoolgrad-checks-grad-shape", "AvgPoolGrad",
         "TensorFlow's CPU AvgPoolGrad does not check grad's shape against the pooled shape of orig_input_shape "
         "(it reads grad as if it had that shape), nor that a VALID window fits the input; opkernel raises "
         "InvalidArgumentError naming the shapes (the conformance case AvgPoolGrad/grad_shape_mismatch)",
         lambda case, tf, got, detail: "error" not in tf and any(
             m in got.get("error", {}).get("message", "")
             for m in ("input 'grad' must have shape", "output size would be negative"))),
    Rule("xent-labels-gradient", "SoftmaxCrossEntropyWithLogits",
         "TensorFlow's gradient with respect to labels is -log_softmax(features) * grad_loss: it drops backprop's own "
         "term and, for broadcast labels, fails in its BatchMatMul or returns the broadcast shape; opkernel returns the "
         "full derivative in the labels' shape (the conformance cases SoftmaxCrossEntropyWithLogits/*_gradient)",
         lambda case, tf, got, detail: detail.startswith("[gradient") and "gradient of features" not in detail),
    *[Rule("complex-sqrt-near-max", op,
           "complex Sqrt and Rsqrt of a number within 8x of the dtype's largest: TensorFlow's (Eigen's) complex sqrt "
           "overflows in |z| + |re z| and answers inf or NaN; opkernel's is C99 csqrt (numpy's), finite and correctly "
           "rounded",
           lambda case, tf, got, detail: _near_max(case) and detail.startswith("[values]"))
      for op in ("Sqrt", "Rsqrt")],
    *[Rule("sum-zero-sign", op,
           "the sign of a zero that is a sum of products: TensorFlow's Eigen contraction keeps the first product's "
           "-0.0 where a BLAS-style accumulator starting at +0.0 gives +0.0 (IEEE: -0.0 + +0.0 = +0.0); the values "
           "are otherwise equal",
           lambda case, tf, got, detail: detail.startswith("[values]") and _equal_but_zero_signs(tf, got))
      for op in sorted(diff_gen.ACCUMULATING)],
    Rule("einsum-broadcast-empty-gradient", "Einsum",
         "TensorFlow's Einsum gradient fails with a Reshape error when a label of size 1 in one operand broadcast "
         "against size 0 in the other; opkernel's sums the empty dimension (tests/tf_conformance/cases_reduce.py "
         "and tests/test_ops_math.py check the gradient elsewhere)",
         lambda case, tf, got, detail: detail.startswith("[gradient_tf_fails]") and _something_empty(case, got)),
    Rule("resize-grad-gradient", "ResizeBilinearGrad",
         "TensorFlow registers no gradient for ResizeBilinearGrad (its tape gives zeros); opkernel's is its adjoint, "
         "the bilinear resize of the incoming gradient to the gradient image's size, checked in tests/test_ops_nn.py "
         "(test_resize_bilinear_gradients_are_adjoint)",
         lambda case, tf, got, detail: detail.startswith("[gradient]")
         and all(not np.any(np.asarray(w["value"])) for w in tf.get("grads") or [])),
    Rule("round-integers-zero", "Round",
         "TensorFlow 2.21's CPU kernel of Round returns 0 for every integer input; opkernel returns the integer "
         "(the conformance cases Round/int32 and Round/int64)",
         lambda case, tf, got, detail: detail.startswith("[values]") and np.asarray(case.inputs[0]).dtype.kind == "i"
         and all(not np.any(np.asarray(w["value"])) for w in tf.get("outputs") or [])),
    *[Rule("relu-negative-zero", op,
           "TensorFlow's sign of Relu(-0.0) and Relu6(-0.0) depends on where the element falls (+0.0 in Eigen's SIMD "
           "packets, -0.0 in the scalar tail); opkernel gives +0.0 everywhere (the conformance cases *_specials)",
           lambda case, tf, got, detail: detail.startswith("[values]") and _equal_but_zero_signs(tf, got))
      for op in ("Relu", "Relu6")],
    *[Rule("grad-kernel-empty-input", op,
           "TensorFlow's CPU kernel (for Conv2D: its gradient's Conv2DBackpropFilter), when the pooled output, the "
           "input or the output gradient it reads is empty (a VALID window larger than the input), returns memory it "
           "never wrote (values vary from run to run); opkernel returns zeros",
           lambda case, tf, got, detail: detail.startswith(("[values]", "[gradient]")) and _something_empty(case, got))
      for op in ("MaxPool", "MaxPoolGrad", "MaxPoolGradGrad", "Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
                 "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter")],
    Rule("avgpoolgrad-zero-stride", "AvgPoolGrad",
         "TensorFlow's CPU AvgPoolGrad does not check its strides (a zero stride runs); opkernel refuses a "
         "non-positive stride, as TensorFlow's AvgPool and every other pooling op do",
         lambda case, tf, got, detail: 0 in case.attrs.get("strides", []) and "strides" in
         got.get("error", {}).get("message", "")),
    Rule("maxpoolwithargmax-empty-input", "MaxPoolWithArgmax",
         "TensorFlow's CPU MaxPoolWithArgmax alone rejects an empty input ('tensor_in must not be empty'); opkernel "
         "gives the empty outputs, as TensorFlow's MaxPool, MaxPoolGrad and MaxPoolGradWithArgmax do (the conformance "
         "case MaxPoolWithArgmax/empty_batch)",
         lambda case, tf, got, detail: detail.startswith("[accepts]") and np.asarray(case.inputs[0]).size == 0),
    Rule("cast-out-of-range", "Cast",
         "a float out of the integer type's range (or inf, NaN): C++ leaves the conversion undefined and TensorFlow's "
         "CPU answer depends on the element's position (SIMD lanes saturate through int32, the scalar tail wraps, x86 "
         "gives 2**63 for inf); opkernel saturates and sends NaN to 0 on every backend, as TensorFlow's GPU kernels "
         "do (the conformance cases Cast/*_out_of_range)",
         lambda case, tf, got, detail: detail.startswith("[values]") and _cast_out_of_range(case)),
    *[Rule("log-denormal", op,
           "Log (and Pow, which takes it) of a float32 denormal: TensorFlow's vectorized log (Eigen's plog) takes "
           "denormal arguments through its own exponent extraction and misses by up to ln 2 (ln 1.4e-45 is -103.279; "
           "TensorFlow gives -103.972); opkernel's is the C library's",
           lambda case, tf, got, detail: detail.startswith("[values]") and has_denormals(case))
      for op in ("Log", "Pow")],
    Rule("pow-huge-exponent", "Pow",
         "Pow (and its gradient) with an exponent within 8x of the largest double: TensorFlow's vectorized pow "
         "(Eigen's generic_pow) splits y * log2(x) into high and low parts, which overflow with opposite signs and "
         "give NaN where the limit is 0 or inf; opkernel's is the C library's pow",
         lambda case, tf, got, detail: detail.startswith(("[values]", "[gradient]")) and _near_max(case)),
    Rule("erf-huge", "Erf",
         "Erf of a float64 within 8x of the largest double: TensorFlow's (Eigen's) erf computes exp(-x*x) * (1/x) "
         "terms that give 0 * inf = NaN there; opkernel's (the C library's erf) is 1.0",
         lambda case, tf, got, detail: detail.startswith("[values]")
         and (_near_max(case) or any(np.isinf(a.astype(np.float64)).any() for a in _floats(case)))),
    Rule("assign-validate-shape", "Assign",
         "the oracle runs Assign as TensorFlow's resource AssignVariableOp, which lets a variable take the value's "
         "shape; opkernel's Assign has TensorFlow's ref Assign's validate_shape (default true) and refuses a value "
         "of another shape",
         lambda case, tf, got, detail: case.attrs.get("validate_shape", True) and "the variable's shape" in
         got.get("error", {}).get("message", "")),
    Rule("batchmatmul-broadcasts", "BatchMatMul",
         "TensorFlow's BatchMatMul (v1) wants equal batch dimensions and ranks; opkernel's broadcasts them, as "
         "BatchMatMulV2 and numpy.matmul do",
         lambda case, tf, got, detail: detail.startswith("[accepts]")
         and any(w in tf.get("error", {}).get("message", "") for w in ("ndims", "batch dimensions", "must be the same"))),
    Rule("selu-tiny-negative-gradient", "Selu",
         "Selu's gradient at tiny negative inputs: TensorFlow's exp(x) - 1 rounds to 0 there and its SeluGrad takes "
         "the right side's slope; opkernel's expm1 keeps the derivative (the conformance case "
         "Selu/float32_gradient_tiny_negative)",
         lambda case, tf, got, detail: detail.startswith("[gradient]")
         and bool(np.any((np.asarray(case.inputs[0], np.float64) < 0) & (np.asarray(case.inputs[0], np.float64) > -1e-3)))),
    Rule("transpose-negative-perm-gradient", "Transpose",
         "a perm entry counted from the end (-1): TensorFlow's Transpose runs it, but its gradient's InvertPermutation "
         "rejects it; opkernel's gradient inverts the normalized permutation",
         lambda case, tf, got, detail: detail.startswith("[gradient_tf_fails]") and bool((np.asarray(case.inputs[1]) < 0).any())),
    *[Rule("optimizer-overflow", op,
           "an optimizer update at overflow or with an infinite hyperparameter: TensorFlow's Eigen expression and "
           "opkernel's kernels group the products differently (and OpenCL contracts a*b + c into fma, as OpenCL C "
           "allows by default), so whether such an update is inf or NaN differs; finite updates agree",
           lambda case, tf, got, detail: detail.startswith("[values]")
           and (_near_max(case) or any(not np.isfinite(a).all() for a in _floats(case)))
           and _differs_only_where_nonfinite(tf, got, either=True))
      for op in ("ApplyAdam", "ApplyMomentum", "ApplyGradientDescent")],
    Rule("half-update-rounding", "ApplyGradientDescent",
         "a float16 update on OpenCL is computed in float and rounded to half once (vload_half/vstore_half: half "
         "arithmetic is optional in OpenCL C); TensorFlow rounds alpha * delta to half first, so where var and "
         "alpha * delta nearly cancel the two differ by up to one half-precision ulp of the larger term",
         lambda case, tf, got, detail: detail.startswith("[values]") and _half_sgd_within_one_rounding(case, tf, got)),
    *[Rule("zero-sign-of-ties", op,
           "which of +0.0 and -0.0 is the maximum (or minimum) of the two: they are equal, and TensorFlow keeps the "
           "first where numpy's 16-bit and OpenCL's fmax may give the other; the values are otherwise equal",
           lambda case, tf, got, detail: detail.startswith("[values]") and _equal_but_zero_signs(tf, got))
      for op in ("Maximum", "Minimum", "MaxPool", "ClipByValue")],
    Rule("half-gradient-overflow", "*",
         "a float16 or bfloat16 gradient that overflows in one library and not the other: the chain rule's products "
         "are grouped differently (TensorFlow: grad * (z * log(x)) for Pow; opkernel: (grad * z) * log(x)), and a "
         "16-bit intermediate overflows by the grouping; only values that are inf or NaN on one side differ",
         lambda case, tf, got, detail: detail.startswith("[gradient]")
         and any(g["dtype"] in ("float16", "bfloat16") for g in got.get("grads") or [])
         and _differs_only_where_nonfinite(tf, got, either=True, key="grads")),
    *[Rule("complex-branch-cut", op,
           "a negative real number with a -0.0 imaginary part lies on the lower side of the branch cut in C99 "
           "(numpy, opkernel): sqrt(-x - 0j) is -i sqrt(x); TensorFlow's (Eigen's) complex functions ignore the "
           "sign of the zero and answer +i sqrt(x)",
           lambda case, tf, got, detail: detail.startswith(("[values]", "[gradient]")) and _on_branch_cut(case))
      for op in ("Sqrt", "Rsqrt", "Log", "Log1p", "Pow")],
    Rule("complex-zero-sign", "*",
         "the sign of a zero part of a complex result: TensorFlow's (Eigen's) complex reciprocal is conj(z) / |z|^2, "
         "which gives -0.0 where numpy's division gives +0.0 (1 / (93 + 0j)); the values are otherwise equal",
         lambda case, tf, got, detail: detail.startswith("[values]")
         and any(o["dtype"].startswith("complex") for o in got.get("outputs") or []) and _equal_but_zero_signs(tf, got)),
    Rule("complex-overflow", "*",
         "complex arithmetic that overflows: where TensorFlow's (Eigen's) textbook formulas and C99's (numpy's) "
         "differ between inf and NaN, or one overflows where the other does not; only values that are inf or NaN on "
         "one side differ, the rest are compared as usual",
         lambda case, tf, got, detail: any(a.dtype.kind == "c" for a in _arrays(case.inputs))
         and _differs_only_where_nonfinite(tf, got, either=True, key="grads" if detail.startswith("[gradient") else "outputs")),
    *[Rule("floordiv-denormal-quotient", op, FLUSHED_DENORMALS + " (here the quotient x / y is a denormal, flushed "
           "to zero before the floor: TensorFlow's -1 // 3.4e38 is -0.0, opkernel's -1.0)",
           lambda case, tf, got, detail: detail.startswith("[values]") and _denormal_quotient(case))
      for op in ("FloorDiv", "FloorMod")],
    *[Rule("complex-nonfinite", op,
           "complex arithmetic on inputs with an infinite, NaN or near-overflow part: TensorFlow's (Eigen's) complex "
           "functions use textbook formulas (|z| as sqrt(a*a + b*b), division without scaling), which overflow or "
           "give NaN where C99 Annex G (numpy, opkernel) gives the limit; only calls with such inputs are excused",
           lambda case, tf, got, detail: _complex_nonfinite(case))
      for op in ("Sign", "RealDiv", "Angle", "Log", "Log1p", "Pow", "Mul", "Exp", "Tanh", "Sigmoid", "Sqrt", "Rsqrt",
                 "ComplexAbs", "Abs", "Square", "Sum", "Mean", "Prod", "MatMul", "BatchMatMul")],
    *[Rule("complex-product-infinities", op,
           "complex products with an infinite or NaN part: TensorFlow's (Eigen's) complex multiply is the textbook "
           "(ac - bd) + (ad + bc)i, BLAS's cgemm/zgemm and the OpenCL kernels group the terms otherwise, so where a "
           "result is not finite the two may differ between inf and NaN; finite results are compared as usual",
           lambda case, tf, got, detail: detail.startswith("[values]")
           and any(a.dtype.kind == "c" and not np.isfinite(a).all() for a in _arrays(case.inputs))
           and _differs_only_where_nonfinite(tf, got))
      for op in ("MatMul", "BatchMatMul")],
    *[Rule("blas-zero-times-inf", op,
           "the cpu backend's matrix products call BLAS (OpenBLAS through numpy), which skips a zero multiplier: a "
           "0 * inf term adds nothing instead of NaN, so a NaN that comes only from such a term is missing (and a zero "
           "may lose its sign); TensorFlow's Eigen contraction computes every product, as does the native kernel "
           "that float32 BatchMatMul items with k and n up to 512 take when the batch is shared out (docs/index.md): "
           "which one a call gets depends on its sizes.  Finite inputs agree",
           lambda case, tf, got, detail: detail.startswith("[values]")
           and any(not np.isfinite(a).all() for a in _floats(case)) and _differs_only_where_tf_nan_or_zero(tf, got))
      for op in ("MatMul", "BatchMatMul")],
    Rule("sign-complex-gradient", "Sign",
         "TensorFlow passes back a zero gradient for complex Sign; opkernel gives the derivative of z/|z| "
         "(PyTorch's sgn rule), checked numerically in tests/test_autodiff.py",
         lambda case, tf, got, detail: detail.startswith("[gradient]") and np.asarray(case.inputs[0]).dtype.kind == "c"),
    Rule("unpack-num-zero", "Unpack",
         "tf.raw_ops.Unpack with num=0 returns an empty list without running the kernel's checks of num and axis; "
         "opkernel checks that num equals the dimension unpacked",
         lambda case, tf, got, detail: case.attrs.get("num") == 0 and "error" not in tf and not tf["outputs"]),
    Rule("where-scalar", "Where",
         "TensorFlow's CPU Where has cases for ranks 1 to 8 only ('Unhandled input dimensions: 0'); opkernel gives "
         "the defined [num_true, 0] int64 result of a scalar, as numpy.argwhere (the conformance cases "
         "Where/scalar_*)",
         lambda case, tf, got, detail: np.asarray(case.inputs[0]).ndim == 0 and detail.startswith("[accepts]")),
    *[Rule("sparse-segment-grad-no-indices", op,
           "TensorFlow's gradient kernel of the sparse segment reductions, given no indices, returns memory it never "
           "wrote (values vary from run to run); opkernel's gradient is zeros, as no data row was read",
           lambda case, tf, got, detail: detail.startswith("[gradient]") and np.asarray(case.inputs[1]).size == 0)
      for op in ("SparseSegmentSum", "SparseSegmentMean")],
    Rule("sparse-to-dense-gradient-shapes", "SparseToDense",
         "TensorFlow's gradient passes sparse_indices to GatherNd unchanged, so a vector (or scalar) of indices is read "
         "as one multi-dimensional index (a wrong gradient, or a GatherNd error), and a scalar sparse_values gets a "
         "gradient of shape [N]; opkernel's gradient "
         "reads each index as TensorFlow's forward kernel does and sums the scalar's gradient (tests/test_ops_array.py "
         "checks it against finite differences)",
         lambda case, tf, got, detail: detail.startswith(("[gradient]", "[gradient_tf_fails]"))
         and (np.asarray(case.inputs[0]).ndim < 2 or np.asarray(case.inputs[2]).ndim == 0)),
    Rule("lrn-band-matrix", "LRN",
         "TensorFlow's CPU LRN sums each window as a product with a band matrix, so one infinite or NaN input makes "
         "the whole depth row NaN (0 * inf), and computes float16 in float16, whose squares overflow past 256; "
         "opkernel sums only the window and computes float16 in float32",
         lambda case, tf, got, detail: any(
             not np.isfinite(a.astype(np.float64)).all() or (a.dtype == np.float16 and (np.abs(a) >= 256).any())
             for a in _floats(case))),
]


def _cast_out_of_range(case: Case) -> bool:
    x, dst = np.asarray(case.inputs[0]), str(case.attrs.get("DstT"))
    if not (x.dtype.kind in "fc" or x.dtype.name == "bfloat16") or dst not in (
            "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        return False
    v = (x.real if x.dtype.kind == "c" else x).astype(np.float64)
    info = np.iinfo(np.dtype(dst))
    return bool((~np.isfinite(v) | (v < float(info.min)) | (v >= float(info.max) + 1)).any())


def _denormal_quotient(case: Case) -> bool:
    x, y = (np.asarray(a) for a in case.inputs[:2])
    if not (x.dtype.kind == "f" or x.dtype.name == "bfloat16"):
        return False
    with np.errstate(all="ignore"):
        q = np.asarray(x.astype(np.float64) / y.astype(np.float64))
    return bool(((q != 0) & (np.abs(q) < float(np.finfo(x.dtype).tiny))).any())


def _complex_nonfinite(case: Case) -> bool:
    cs = [a for a in _arrays(case.inputs) if a.dtype.kind == "c"]
    return bool(cs) and (any(not np.isfinite(a).all() for a in cs) or _near_max(case))


def _differs_only_where_nonfinite(tf: dict[str, Any], got: dict[str, Any], either: bool = False,
                                  key: str = "outputs") -> bool:
    """Every value (of the outputs, or of the gradients with key="grads") that differs is
    non-finite on both sides (inf against NaN), or with ``either`` on one side at least."""
    outs = got.get(key) or []
    if not outs or len(outs) != len(tf.get(key) or []):
        return False
    for o, w in zip(outs, tf[key]):
        a, b = np.asarray(o["value"]), np.asarray(w["value"])
        if o["dtype"] != w["dtype"] or a.shape != b.shape or a.dtype.kind not in "fcV":
            return False
        a64, b64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64), \
            b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
        finite = np.isfinite(a64) & np.isfinite(b64)
        if mismatch(np.where(finite, a64, 0), np.where(finite, b64, 0), "complex128" if a.dtype.kind == "c"
                    else "float64", TOLERANCE.get(w["dtype"]), signed_zeros=False):
            return False
        if not either and (np.isfinite(a64) != np.isfinite(b64)).any():
            return False
    return True


def _half_sgd_within_one_rounding(case: Case, tf: dict[str, Any], got: dict[str, Any]) -> bool:
    var, alpha, delta = (np.asarray(a, np.float64) for a in case.inputs)
    if np.asarray(case.inputs[0]).dtype != np.float16 or not got.get("outputs"):
        return False
    ours, theirs = (np.asarray(e["outputs"][0]["value"], np.float64) for e in (got, tf))
    term = np.abs(alpha * delta)
    with np.errstate(invalid="ignore"):
        largest = np.maximum.reduce([np.abs(var), term, np.abs(theirs), np.full(var.shape, 2.0**-14)])
    ulp = 2.0 ** (np.floor(np.log2(largest)) - 10)     # of the largest of var, alpha * delta and the result
    with np.errstate(invalid="ignore"):
        return bool(np.all((np.abs(ours - theirs) <= ulp) | (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))))


def _on_branch_cut(case: Case) -> bool:
    """A complex input has a negative real part and a -0.0 imaginary part."""
    return any(bool(((a.real < 0) & (a.imag == 0) & np.signbit(a.imag)).any())
               for a in _arrays(case.inputs) if a.dtype.kind == "c")


def _something_empty(case: Case, got: dict[str, Any]) -> bool:
    """An input, or an output opkernel gave, has no elements."""
    return any(a.size == 0 for a in _arrays(case.inputs)) or any(
        np.asarray(o["value"]).size == 0 for o in got.get("outputs") or [])


def _differs_only_where_tf_nan_or_zero(tf: dict[str, Any], got: dict[str, Any]) -> bool:
    """Every output value that differs is NaN or a zero in TensorFlow's answer."""
    outs = got.get("outputs") or []
    if len(outs) != len(tf.get("outputs") or []):
        return False
    for o, w in zip(outs, tf["outputs"]):
        a, b = np.asarray(o["value"]), np.asarray(w["value"])
        if o["dtype"] != w["dtype"] or a.shape != b.shape:
            return False
        excused = np.isnan(b) | (b == 0)
        if mismatch(np.where(excused, 0, a), np.where(excused, 0, b), w["dtype"], None, signed_zeros=False):
            return False
    return True


def _equal_but_zero_signs(tf: dict[str, Any], got: dict[str, Any]) -> bool:
    """The outputs agree once +0.0 and -0.0 count as equal."""
    outs = got.get("outputs") or []
    return len(outs) == len(tf.get("outputs") or []) and all(
        o["dtype"] == w["dtype"] and mismatch(np.asarray(o["value"]), np.asarray(w["value"]), w["dtype"], None,
                                              signed_zeros=False) is None
        for o, w in zip(outs, tf["outputs"]))


def known(case: Case, tf: dict[str, Any], got: dict[str, Any], detail: str) -> Rule | None:
    for rule in KNOWN_DIFFERENCES:
        if rule.op in (case.op, "*") and rule.applies(case, tf, got, detail):
            return rule
    return None


def has_denormals(case: Case) -> bool:
    for a in _floats(case):
        for p in ([a.real, a.imag] if a.dtype.kind == "c" else [a]):
            f = p.astype(np.float64)
            if ((f != 0) & (np.abs(f) < float(np.finfo(p.dtype).tiny))).any():
                return True
    return False


def flush_denormals(case: Case) -> Case:
    """``case`` with every denormal input replaced by a zero of its sign."""
    def flush(a: np.ndarray) -> np.ndarray:
        if not (a.dtype.kind in "fc" or a.dtype.name == "bfloat16"):
            return a
        def part(p: np.ndarray) -> np.ndarray:
            f = p.astype(np.float64)
            tiny = (f != 0) & (np.abs(f) < float(np.finfo(p.dtype).tiny))
            return np.where(tiny, np.copysign(0.0, f), f).astype(p.dtype)
        if a.dtype.kind == "c":
            out = np.empty_like(a)
            out.real, out.imag = part(a.real), part(a.imag)
            return out
        return part(a)
    out = case.inputs
    for k in range(len(_arrays(case.inputs))):
        out = _map_arrays(out, k, flush)
    return replace(case, inputs=out)


# ------------------------------------------------------------------ signatures


def tf_opdefs() -> dict[str, dict[str, Any]]:
    data = json.loads(gzip.decompress(TF_OPDEFS.read_bytes()))
    return {op["name"]: op for op in data["ops"]}


def signatures(ops: Iterable[str] | None = None) -> dict[str, diff_gen.Signature]:
    """The signature of every op both libraries have (or of ``ops``)."""
    import opkernel as ok
    from opkernel import op_registry, plugins

    plugins.ensure_loaded()
    tf = tf_opdefs()
    names = sorted(set(op_registry.op_names()) & set(tf)) if ops is None else list(ops)
    known_names = set(diff_gen.DTYPE_NAMES.values())
    out = {}
    for name in names:
        top, mine = tf[name], ok.op_def(name)
        ok_allowed = {a.name: a.allowed_values for a in mine.attrs if a.type == "type"}
        dtypes = {}
        for a in top["attrs"]:
            if a["type"] != "type":
                continue
            theirs = {diff_gen.DTYPE_NAMES[t] for t in a["allowed"] if t in diff_gen.DTYPE_NAMES} \
                if a["allowed"] else known_names - {"string"}
            ours = {d.name for d in ok_allowed[a["name"]]} if ok_allowed.get(a["name"]) else known_names - {"string"}
            dtypes[a["name"]] = tuple(sorted(theirs & ours))
        inputs = tuple({"name": i["name"], "type": diff_gen.DTYPE_NAMES.get(i["type"]) if i["type"] else None,
                        "type_attr": i["type_attr"], "number_attr": i["number_attr"], "is_ref": i["is_ref"]}
                       for i in top["inputs"])
        attrs = {a["name"]: a for a in top["attrs"]}
        out[name] = diff_gen.Signature(name, inputs, attrs, dtypes)
    return out


# ------------------------------------------------------------------ workers


class WorkerDied(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind, self.detail = kind, detail


class Worker:
    """One worker process (diff_worker.py), restarted after a crash or a hang."""

    def __init__(self, mode: list[str], env: dict[str, str] | None = None) -> None:
        self.mode, self.env = mode, env
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = tempfile.TemporaryFile()
        self.restarts = 0

    @property
    def name(self) -> str:
        return "TensorFlow" if self.mode[0] == "tf" else self.mode[1]

    def start(self) -> None:
        self.stderr.seek(0)
        self.stderr.truncate()
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "diff_worker.py"), *self.mode], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=self.stderr, env=self.env)
        ready = self._read(START_TIMEOUT)
        if ready != "ready":
            raise WorkerDied("start", f"the {self.name} worker answered {ready!r}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.close()
            self.proc.stdout.close()
            self.proc = None

    def send(self, batch: list[Case]) -> None:
        if self.proc is None:
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            diff_worker.write_frame(self.proc.stdin, batch)      # type: ignore[arg-type]
        except BrokenPipeError:
            pass                                                 # the read below reports it

    def receive(self, timeout: float) -> list[dict[str, Any]]:
        try:
            out: list[dict[str, Any]] = self._read(timeout)
            return out
        except WorkerDied:
            self.stop()
            self.restarts += 1
            raise

    def _read(self, timeout: float) -> Any:
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        buf = b""
        need = 8
        size = None
        while len(buf) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise WorkerDied("hang", f"no answer from the {self.name} worker within {timeout:.0f} s")
            chunk = os.read(fd, max(need - len(buf), 1 << 16))
            if not chunk:
                code = self.proc.wait()
                raise WorkerDied("crash", f"the {self.name} worker died ({_exit(code)}): {self._tail()}")
            buf += chunk
            if size is None and len(buf) >= 8:
                (size,) = struct.unpack("<Q", buf[:8])
                need = 8 + size
        import pickle
        return pickle.loads(buf[8:need])

    def _tail(self) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode("utf-8", "replace").strip().splitlines()
        return " | ".join(text[-6:])[-1500:]

    def run(self, batch: list[Case]) -> list[dict[str, Any]]:
        """Each case's entry; a case that crashes or hangs the worker gets ``{"died": kind, "detail"}``."""
        self.send(batch)
        try:
            return self.receive(CALL_TIMEOUT * max(len(batch) / 4, 1))
        except WorkerDied as e:
            if len(batch) == 1:
                return [{"op": batch[0].op, "died": e.kind, "detail": e.detail}]
        out = []
        for case in batch:                 # find the case that did it: one at a time
            try:
                self.send([case])
                out += self.receive(CALL_TIMEOUT)
            except WorkerDied as e:
                out.append({"op": case.op, "died": e.kind, "detail": e.detail})
        return out


def _exit(code: int) -> str:
    if code < 0:
        import signal
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


def run_one(worker: Worker, case: Case) -> dict[str, Any]:
    try:
        return worker.run([case])[0]
    except WorkerDied as e:
        return {"op": case.op, "died": e.kind, "detail": e.detail}


# ------------------------------------------------------------------ comparing


def _arrays(value: Any) -> list[np.ndarray]:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _arrays(v)]
    return [np.asarray(value)]


_PRODUCTS = frozenset({"MatMul", "BatchMatMul", "Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "Prod",
                       "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                       "DepthwiseConv2dNativeBackpropFilter", "Einsum"})


def tolerance(case: Case, dtype: str, gradient: bool = False) -> tuple[float, float] | None:
    """compare.py's tolerance for ``dtype``, grown for an output that sums many terms (the
    order of additions differs between libraries) by the terms' count and magnitude."""
    if dtype not in TOLERANCE:
        return None
    rtol, atol = TOLERANCE[dtype]
    if dtype in ("float16", "bfloat16"):
        rtol, atol = rtol * 2, atol * 2     # one rounding of a float32 result each side
    if case.op not in diff_gen.ACCUMULATING and not gradient:
        return rtol, atol
    floats = [a for a in _arrays(case.inputs) if a.dtype.kind in "fc" or a.dtype.name == "bfloat16"]
    finite = [np.abs(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)) for a in floats]
    big = max([float(np.max(f[np.isfinite(f)])) for f in finite if np.isfinite(f).any()] + [1.0])
    terms = max([a.size for a in floats] + [1])
    scale = big * big if case.op in _PRODUCTS or gradient else big
    return rtol * 8, atol + rtol * terms * min(scale, 1e30)


@dataclass
class Outcome:
    kind: str                       # agrees, difference, tf_unsupported, tf_no_gradient, tf_died, missing_kernel, divergence
    detail: str = ""
    rule: str = ""

    @property
    def diverges(self) -> bool:
        return self.kind == "divergence"


def _tf_unsupported(err: dict[str, str]) -> bool:
    return any(p.search(err["class"]) for p in TF_UNSUPPORTED) or \
        any(p.search(err["message"]) for p in TF_UNSUPPORTED_MESSAGES)


def compare(case: Case, tf: dict[str, Any], got: dict[str, Any], backend: str) -> Outcome:
    out = _compare(case, tf, got, backend)
    if out.diverges:
        rule = known(case, tf, got, out.detail)
        if rule is not None:
            return Outcome("difference", out.detail, rule.id)
    return out


def _bad_error(case: Case, err: dict[str, Any]) -> str | None:
    if not err.get("opkernel"):
        return f"raised {err['class']} (not an opkernel.errors error): {err['message'][:300]}"
    if err.get("internal"):
        return f"raised an internal error, not a specific one: {err['message'][:300]}"
    if case.op not in err["message"]:
        return f"{err['class']} does not name the op {case.op!r}: {err['message'][:300]}"
    return None


def _compare(case: Case, tf: dict[str, Any], got: dict[str, Any], backend: str) -> Outcome:
    if "died" in tf:
        return Outcome("tf_died", tf["detail"])
    if tf.get("error", {}).get("class") == "RecorderError":
        return Outcome("divergence", f"[harness] TensorFlow's worker could not run the call: {tf['error']['message']}")
    if "died" in got:
        return Outcome("divergence", f"[{got['died']}] {got['detail']}")
    if "error" in tf:
        if _tf_unsupported(tf["error"]):
            if "error" in got and _bad_error(case, got["error"]) and not got["error"].get("missing_kernel"):
                return Outcome("divergence", f"[error] {_bad_error(case, got['error'])}")
            return Outcome("tf_unsupported", f"{tf['error']['class']}: {tf['error']['message'][:200]}")
        if "error" in got:
            why = _bad_error(case, got["error"])
            return Outcome("divergence", f"[error] {why}") if why else Outcome("agrees")
        shapes = [(o["dtype"], tuple(o["shape"])) for o in got["outputs"]]
        return Outcome("divergence", f"[accepts] TensorFlow rejects the call ({tf['error']['class']}: "
                                     f"{tf['error']['message'][:300]}); opkernel returned {shapes}")
    if "error" in got:
        err = got["error"]
        if err.get("missing_kernel") and backend != "cpu":
            return Outcome("missing_kernel", err["message"][:200])
        return Outcome("divergence", f"[rejects] TensorFlow runs the call; opkernel raised {err['class']}: "
                                     f"{err['message'][:300]}")
    if len(got["outputs"]) != len(tf["outputs"]):
        return Outcome("divergence", f"[values] {len(got['outputs'])} outputs, TensorFlow {len(tf['outputs'])}")
    problems = []
    for j, (o, w) in enumerate(zip(got["outputs"], tf["outputs"])):
        if o["dtype"] != w["dtype"]:
            problems.append(f"output {j}: dtype {o['dtype']}, TensorFlow {w['dtype']}")
            continue
        why = mismatch(np.asarray(o["value"]), np.asarray(w["value"]), w["dtype"], tolerance(case, w["dtype"]))
        if why:
            problems.append(f"output {j}: {why}")
    if problems:
        return Outcome("divergence", "[values] " + "; ".join(problems))
    if not case.grad:
        return Outcome("agrees")
    if "grad_error" in tf:
        terr = tf["grad_error"]
        if terr["class"] == "RecorderError" or "grad_error" in got:
            return Outcome("agrees")
        if terr["class"] == "LookupError" or "gradient" in terr["message"].lower() and "no" in terr["message"].lower():
            return Outcome("tf_no_gradient", terr["message"][:200])
        if _tf_unsupported(terr):
            return Outcome("tf_unsupported", f"gradient: {terr['class']}: {terr['message'][:200]}")
        return Outcome("divergence", f"[gradient_tf_fails] TensorFlow cannot take the gradient ({terr['class']}: "
                                     f"{terr['message'][:300]}); opkernel can")
    if "grad_error" in got:
        if got["grad_error"].get("missing_kernel") and backend != "cpu":
            return Outcome("missing_kernel", got["grad_error"]["message"][:200])
        return Outcome("divergence", f"[gradient_fails] TensorFlow takes the gradient; opkernel raised "
                                     f"{got['grad_error']['class']}: {got['grad_error']['message'][:300]}")
    if len(got["grads"]) != len(tf["grads"]):
        return Outcome("divergence", f"[gradient] {len(got['grads'])} gradients, TensorFlow {len(tf['grads'])}")
    for spec, g in zip(tf["grads"], got["grads"]):
        if g["dtype"] != spec["dtype"]:
            problems.append(f"gradient of {spec['input']}: dtype {g['dtype']}, TensorFlow {spec['dtype']}")
            continue
        # A gradient's signed zeros depend on how the chain rule's products are grouped
        # (TensorFlow: dy * (1 - y*y) for Tanh; opkernel: dy - dy*y*y): zeros of either sign agree.
        why = mismatch(np.asarray(g["value"]), np.asarray(spec["value"]), spec["dtype"],
                       tolerance(case, spec["dtype"], gradient=True), signed_zeros=False)
        if why:
            problems.append(f"gradient of {spec['input']}: {why}")
    if problems:
        return Outcome("divergence", "[gradient] " + "; ".join(problems))
    return Outcome("agrees")


# ------------------------------------------------------------------ shrinking


def _size(case: Case) -> int:
    return sum(a.size for a in _arrays(case.inputs)) + (1 if case.grad else 0)


def _map_arrays(inputs: tuple[Any, ...], k: int, fn: Callable[[np.ndarray], np.ndarray]) -> tuple[Any, ...]:
    """``inputs`` with the k-th array (in _arrays order) replaced by fn(it)."""
    count = [0]

    def walk(v: Any) -> Any:
        if isinstance(v, list):
            return [walk(x) for x in v]
        i = count[0]
        count[0] += 1
        return fn(v) if i == k else v

    return tuple(walk(v) for v in inputs)


def candidates(case: Case) -> Iterable[Case]:
    """Smaller or plainer variants of ``case``: fewer elements along one axis, special values
    made ordinary, no gradient.  (A variant that breaks the call's consistency simply
    does not diverge the same way and is dropped.)"""
    arrays = _arrays(case.inputs)
    if case.grad:
        yield replace(case, grad=False)
    for k, a in enumerate(arrays):
        for axis, d in enumerate(a.shape):
            for part in _parts(d):
                # every input of the same rank and size along this axis together (they often must
                # agree), then this input alone
                same = [j for j, b in enumerate(arrays) if b.ndim == a.ndim and b.shape[axis] == d]
                for chosen in ([same, [k]] if len(same) > 1 else [[k]]):
                    inputs = case.inputs
                    for j in chosen:
                        inputs = _map_arrays(inputs, j, lambda x, ax=axis, p=part: np.take(x, p, axis=ax))
                    yield replace(case, inputs=inputs)
    for k, a in enumerate(arrays):
        if a.dtype.kind in "fc" or a.dtype.name == "bfloat16":
            f = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
            if not np.isfinite(f).all() or (np.abs(f[np.isfinite(f)]) > 1e4).any():
                plain = np.where(np.isfinite(f), np.clip(f.real if a.dtype.kind != "c" else f, -1e4, 1e4), 1.0)
                yield replace(case, inputs=_map_arrays(case.inputs, k, lambda x, p=plain: p.astype(x.dtype)))
            if (f != np.round(f)).any():
                yield replace(case, inputs=_map_arrays(case.inputs, k, lambda x, r=np.round(f): r.astype(x.dtype)))


def _parts(d: int) -> list[np.ndarray]:
    """Index sets that keep part of an axis of size d: the first or last element, either half."""
    if d < 2:
        return []
    out = [np.arange(1), np.arange(d - 1, d)]
    if d > 2:
        out += [np.arange(d // 2), np.arange(d // 2, d)]
    return out


def shrink(case: Case, diverges: Callable[[Case], bool], budget: int = 60) -> tuple[Case, int]:
    """A small call for which ``diverges`` still holds (greedy, at most ``budget`` tries)."""
    tries = 0
    improved = True
    while improved and tries < budget:
        improved = False
        for cand in candidates(case):
            if tries >= budget:
                break
            if _size(cand) > _size(case) or (_size(cand) == _size(case) and cand.grad == case.grad
                                             and _same_arrays(cand, case)):
                continue
            tries += 1
            if diverges(cand):
                case, improved = cand, True
                break
    return case, tries


def _same_arrays(a: Case, b: Case) -> bool:
    return all(x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()
               for x, y in zip(_arrays(a.inputs), _arrays(b.inputs)))


def describe(case: Case) -> dict[str, Any]:
    """The call as JSON: each input's dtype, shape and values (the first 64)."""
    def one(a: np.ndarray) -> dict[str, Any]:
        flat = a.ravel()[:64]
        vals = [str(v) for v in flat.tolist()] if a.dtype.kind in "fcSUO" or a.dtype.name == "bfloat16" \
            else flat.tolist()
        return {"dtype": recording.dtype_name(a), "shape": list(a.shape), "values": vals}
    inputs = [[one(x) for x in v] if isinstance(v, list) else one(np.asarray(v)) for v in case.inputs]
    return {"op": case.op, "inputs": inputs, "attrs": case.attrs, "grad": case.grad, "seed": case.seed}


# ------------------------------------------------------------------ the run


@dataclass
class Report:
    seed: int
    per_op: int
    backends: list[str]
    counts: dict[str, Counter[str]] = field(default_factory=dict)          # backend -> outcome kind -> n
    rules: Counter[str] = field(default_factory=Counter)
    findings: list[dict[str, Any]] = field(default_factory=list)
    tf_died: list[str] = field(default_factory=list)       # calls that crashed or hung TensorFlow's worker
    calls: int = 0
    seconds: float = 0.0
    ops: list[str] = field(default_factory=list)

    def summary(self) -> list[str]:
        lines = [f"seed {self.seed}, {self.per_op} calls per op, {len(self.ops)} ops: {self.calls} calls per backend "
                 f"in {self.seconds:.0f} s"]
        for b in self.backends:
            c = self.counts.get(b, Counter())
            parts = ", ".join(f"{c[k]} {k.replace('_', ' ')}" for k in
                              ("agrees", "difference", "tf_unsupported", "tf_no_gradient", "missing_kernel", "tf_died",
                               "divergence"))
            lines.append(f"{b}: {parts}")
        if self.rules:
            lines.append("deliberate differences matched: " + ", ".join(f"{k} {v}" for k, v in sorted(self.rules.items())))
        return lines


def run(seed: int, per_op: int, backends: list[str], ops: list[str] | None = None, index: int | None = None,
        shrink_budget: int = 60, tf_cache: dict[str, dict[str, Any]] | None = None,
        env: dict[str, str] | None = None, log: Callable[[str], None] = lambda s: None) -> Report:
    """Run the differential test; ``tf_cache`` (case id -> TensorFlow's entry) lets runs share TensorFlow's answers."""
    start = time.perf_counter()
    sigs = signatures(ops)
    missing = [op for op in (ops or []) if op not in diff_gen.GENERATORS]
    if missing:
        raise SystemExit(f"no generator for {missing}")
    report = Report(seed, per_op, backends, {b: Counter() for b in backends},
                    ops=sorted(op for op in sigs if op in diff_gen.GENERATORS))
    indices = [index] if index is not None else list(range(per_op))
    cases = [diff_gen.generate(sigs[op], seed, i) for op in sorted(sigs) if op in diff_gen.GENERATORS for i in indices]
    report.calls = len(cases)
    tf_cache = {} if tf_cache is None else tf_cache
    tf_worker = Worker(["tf"], env)
    workers = {b: Worker(["ok", b], env) for b in backends}
    try:
        for lo in range(0, len(cases), BATCH):
            batch = cases[lo:lo + BATCH]
            todo = [c for c in batch if c.id not in tf_cache]
            if todo:
                tf_worker.send(todo)
            for w in workers.values():
                w.send(batch)
            if todo:
                for c, e in zip(todo, _receive(tf_worker, todo)):
                    tf_cache[c.id] = e
            for b, w in workers.items():
                for case, got in zip(batch, _receive(w, batch)):
                    outcome = judge(case, tf_cache[case.id], got, b, w)
                    report.counts[b][outcome.kind] += 1
                    if outcome.kind == "difference":
                        report.rules[outcome.rule] += 1
                    if outcome.kind == "tf_died" and case.id not in report.tf_died:
                        report.tf_died.append(case.id)
                        log(f"TensorFlow's worker died on {case.id}: {outcome.detail[:300]}")
                    if outcome.diverges:
                        log(f"{b}: {case.id} diverges: {outcome.detail[:300]}")
                        report.findings.append(_finding(case, outcome, b, tf_worker, w, shrink_budget))
            log(f"{min(lo + BATCH, len(cases))}/{len(cases)} calls")
    finally:
        tf_worker.stop()
        for w in workers.values():
            w.stop()
    report.seconds = time.perf_counter() - start
    return report


def judge(case: Case, tf: dict[str, Any], got: dict[str, Any], backend: str, worker: Worker) -> Outcome:
    """compare(), and for a divergence on inputs with denormals, the flushed-denormal check:
    opkernel given the call with denormals flushed to zero answers as TensorFlow did."""
    outcome = compare(case, tf, got, backend)
    if outcome.diverges and has_denormals(case):
        again = compare(case, tf, run_one(worker, flush_denormals(case)), backend)
        if not again.diverges:
            return Outcome("difference", outcome.detail, "tf-flushes-denormals")
    return outcome


def _receive(worker: Worker, batch: list[Case]) -> list[dict[str, Any]]:
    """The worker's answers to ``batch`` (sent already); one at a time after a crash or hang."""
    try:
        return worker.receive(CALL_TIMEOUT * max(len(batch) / 4, 1))
    except WorkerDied:
        pass
    out = []
    for case in batch:
        out.append(run_one(worker, case))
    return out


def _kind(detail: str) -> str:
    m = re.match(r"\[(\w+)\]", detail)
    return m.group(1) if m else ""


def _finding(case: Case, outcome: Outcome, backend: str, tf: Worker, w: Worker, budget: int) -> dict[str, Any]:
    kind = _kind(outcome.detail)

    def diverges(cand: Case) -> bool:
        o = judge(cand, run_one(tf, cand), run_one(w, cand), backend, w)
        return o.diverges and _kind(o.detail) == kind

    small, tries = shrink(case, diverges, budget) if kind not in ("crash", "hang") else (case, 0)
    detail = outcome.detail
    if small is not case:
        again = compare(small, run_one(tf, small), run_one(w, small), backend)
        detail = again.detail
    seed, index = case.id.split("/")[1].split(":")
    return {
        "op": case.op, "backend": backend, "kind": kind, "detail": detail, "first_detail": outcome.detail,
        "case": case.id, "shrink_tries": tries, "minimal": describe(small),
        "repro": f"python tests/tf_conformance/differential.py --seed {seed} --op {case.op} --index {index} "
                 f"--backends {backend}",
    }


DOC = HERE.parents[1] / "docs" / "conformance.md"
RULES_START, RULES_END = "<!-- differential-rules:start -->", "<!-- differential-rules:end -->"


def rules_markdown() -> str:
    """The deliberate differences the differential test excuses, as docs/conformance.md lists them."""
    rows: dict[str, tuple[list[str], str]] = {"tf-flushes-denormals": (["any op"], FLUSHED_DENORMALS)}
    for r in KNOWN_DIFFERENCES:
        rows.setdefault(r.id, ([], r.why))[0].append(r.op)
    lines = ["| rule | ops | why opkernel differs from TensorFlow |", "|---|---|---|"]
    for rid, (ops, why) in sorted(rows.items()):
        lines.append(f"| `{rid}` | {', '.join(ops)} | {' '.join(why.split()).replace('|', '/')} |")
    return "\n".join(lines)


def write_docs() -> None:
    text = DOC.read_text()
    start, end = text.index(RULES_START) + len(RULES_START), text.index(RULES_END)
    DOC.write_text(text[:start] + "\n" + rules_markdown() + "\n" + text[end:])


def write_findings(path: Path, report: Report) -> None:
    doc = {"seed": report.seed, "per_op": report.per_op, "backends": report.backends, "summary": report.summary(),
           "tf_died": report.tf_died, "findings": report.findings}
    path.write_text(json.dumps(doc, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-op", type=int, default=10, help="random calls per op (default 10)")
    p.add_argument("--backends", default="cpu", help="comma-separated backends (default cpu)")
    p.add_argument("--op", action="append", help="only this op (repeatable)")
    p.add_argument("--index", type=int, help="only call number INDEX of each op (remakes one finding)")
    p.add_argument("--findings", type=Path, default=Path("differential-findings.json"))
    p.add_argument("--shrink-budget", type=int, default=60, help="most tries to shrink one divergence")
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--write-docs", action="store_true", help="rewrite docs/conformance.md's list of the rules, and exit")
    args = p.parse_args(argv)
    if args.write_docs:
        write_docs()
        return 0
    report = run(args.seed, args.per_op, args.backends.split(","), args.op, args.index, args.shrink_budget,
                 log=(lambda s: print(s, file=sys.stderr, flush=True)) if args.verbose else (lambda s: None))
    write_findings(args.findings, report)
    for line in report.summary():
        print(line)
    for f in report.findings:
        print(f"DIVERGENCE {f['backend']} {f['case']}: {f['detail'][:400]}\n    {f['repro']}")
    print(f"findings written to {args.findings}")
    return 1 if report.findings else 0


if __name__ == "__main__":
    sys.exit(main())
