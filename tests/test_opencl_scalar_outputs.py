"""Ops whose result is 0-d (issue 24): on OpenCL they used to return garbage or kill the
process with SIGSEGV, nondeterministically, because the layout of a copy down to a scalar
was read from a numpy scalar's address instead of a view's.  Each case runs in a child
process, repeated so that a wild read or write shows, and compares exact values."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from typing import Any

import pytest
from isolated import TESTS, child_env, run_isolated

PRELUDE = """
import json, numpy as np, opkernel as ok
out = []
for _ in range(50):
"""

CASES = {
    # Unpack of a vector: every output is a scalar.
    "Unpack": "    out = [float(t.numpy()) for t in ok.ops.unpack(np.array([1.5, -2.0, 3.25], np.float32), num=3)]",
    # StridedSlice with shrink_axis_mask on every dimension.
    "StridedSlice": (
        "    x = np.arange(12, dtype=np.float32).reshape(3, 4)\n"
        "    out = [float(ok.ops.strided_slice(x, [2, 1], [3, 2], [1, 1], shrink_axis_mask=3).numpy())]"
    ),
    # Its gradient writes a scalar dy into a zero tensor: a wild write before the fix.
    "StridedSliceGrad": (
        "    g = ok.ops.strided_slice_grad([3, 4], [2, 1], [3, 2], [1, 1], np.float32(7.0), shrink_axis_mask=3)\n"
        "    out = g.numpy().ravel().tolist()"
    ),
    # The gradient of Pack on scalars is an Unpack of a vector.
    "PackGrad": (
        "    xs = [ok.tensor(np.float32(v)) for v in (1.0, 2.0, 3.0)]\n"
        "    with ok.GradientTape() as tape:\n"
        "        tape.watch(xs)\n"
        "        y = ok.ops.pack(xs) * np.array([2.0, 3.0, 4.0], np.float32)\n"
        "    out = [float(g.numpy()) for g in tape.gradient(y, xs)]"
    ),
}

EXPECTED = {
    "Unpack": [1.5, -2.0, 3.25],
    "StridedSlice": [9.0],
    "StridedSliceGrad": [0.0] * 9 + [7.0] + [0.0] * 2,
    "PackGrad": [2.0, 3.0, 4.0],
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_scalar_result_is_exact_and_does_not_crash(op: str, backend: str) -> None:
    code = PRELUDE + CASES[op] + "\nprint(json.dumps(out))\n"
    done = run_isolated(code, backend=backend, what=f"{op} to a 0-d result on {backend}", timeout=120)
    assert json.loads(done.stdout.strip().splitlines()[-1]) == EXPECTED[op]


# ---------------------------------------------------------------- the sweep (issue 24, item 3)

# Every OpenCL kernel on 0-d and empty inputs and outputs, against the CPU backend's
# answer in the same process: the same dtypes, shapes and values (NaN equal to NaN,
# floats to 1e-5), or the same exception class.  One test per op.  The cases run in
# child processes, all in one while none crashes (a child costs 1.5 s to start); a
# crash or hang fails the op it was running, and the rest go on in a new child.
SWEEP = {
    # elementwise unary: a 0-d input and an empty one
    **{op: [f"ok.ops.{fn}(S)", f"ok.ops.{fn}(E)"] for op, fn in [
        ("Abs", "abs"), ("Cos", "cos"), ("Elu", "elu"), ("Erf", "erf"), ("Exp", "exp"), ("Log", "log"),
        ("Floor", "floor"), ("Ceil", "ceil"), ("Expm1", "expm1"), ("Sinh", "sinh"), ("Cosh", "cosh"), ("Atan", "atan"),
        ("Log1p", "log1p"), ("Neg", "neg"), ("Relu", "relu"), ("Relu6", "relu6"), ("Rsqrt", "rsqrt"),
        ("Selu", "selu"), ("Sigmoid", "sigmoid"), ("Sign", "sign"), ("Sin", "sin"), ("Softplus", "softplus"),
        ("Sqrt", "sqrt"), ("Square", "square"), ("Tanh", "tanh"), ("ZerosLike", "zeros_like"),
        ("OnesLike", "ones_like"), ("Identity", "identity"), ("StopGradient", "stop_gradient"),
        ("Tan", "tan"), ("Asin", "asin"), ("Acos", "acos"), ("Asinh", "asinh"), ("Acosh", "acosh"), ("Atanh", "atanh"),
        ("Reciprocal", "reciprocal"), ("Round", "round"), ("IsNan", "is_nan"), ("IsInf", "is_inf"),
        ("IsFinite", "is_finite"), ("LeakyRelu", "leaky_relu"), ("Gelu", "gelu")]},
    # the stateless random ops: a 0-d output ([] shape) and empty ones
    **{op: [f"ok.ops.{fn}(np.array([], np.int32), np.array([7], np.uint64), np.array([1, 2], np.uint64), np.int32(1){dt})",
            f"ok.ops.{fn}(np.array([0, 3], np.int64), np.array([7], np.uint64), np.array([1, 2], np.uint64), np.int32(3){dt})"]
       for op, fn, dt in [("StatelessRandomUniformV2", "stateless_random_uniform_v2", ""),
                          ("StatelessRandomNormalV2", "stateless_random_normal_v2", ", dtype=ok.float16"),
                          ("StatelessTruncatedNormalV2", "stateless_truncated_normal_v2", ", dtype=ok.float64"),
                          ("StatelessRandomUniformFullIntV2", "stateless_random_uniform_full_int_v2", ", dtype=ok.int32")]},
    "StatelessRandomUniformIntV2": [
        "ok.ops.stateless_random_uniform_int_v2(np.array([], np.int32), np.array([7], np.uint64), np.array([1, 2], np.uint64), "
        "np.int32(1), np.int64(-3), np.int64(9))",
        "ok.ops.stateless_random_uniform_int_v2(np.array([0], np.int32), np.array([7], np.uint64), np.array([1, 2], np.uint64), "
        "np.int32(1), np.int32(-3), np.int32(9))"],
    **{op: [f"ok.ops.{fn}(np.array([], np.int32), np.array([1, 2], np.int64))",
            f"ok.ops.{fn}(np.array([2, 0], np.int32), np.array([1, 2], np.int32))"]
       for op, fn in [("StatelessRandomUniform", "stateless_random_uniform"), ("StatelessRandomNormal", "stateless_random_normal"),
                      ("StatelessTruncatedNormal", "stateless_truncated_normal")]},
    "StatelessRandomUniformInt": [
        "ok.ops.stateless_random_uniform_int(np.array([], np.int32), np.array([1, 2], np.int64), np.int32(0), np.int32(5))",
        "ok.ops.stateless_random_uniform_int(np.array([0], np.int32), np.array([1, 2], np.int64), np.int64(0), np.int64(5))"],
    "StatelessRandomGetKeyCounter": ["ok.ops.stateless_random_get_key_counter(np.array([1, 2], np.int64))"],
    "StatelessMultinomial": [
        "ok.ops.stateless_multinomial(np.zeros((0, 3), np.float32), np.int32(2), np.array([1, 2], np.int64))",
        "ok.ops.stateless_multinomial(np.zeros((2, 3), np.float32), np.int32(0), np.array([1, 2], np.int64))"],
    "RngReadAndSkip": ["ok.ops.rng_read_and_skip(ok.Variable(np.array([1, 2, 3], np.int64)), np.int32(1), np.uint64(0))"],
    "ReverseV2": ["ok.ops.reverse_v2(S, np.zeros(0, np.int32))", "ok.ops.reverse_v2(E, np.array([0, 1], np.int32))"],
    "MatrixBandPart": ["ok.ops.matrix_band_part(np.zeros((0, 2, 3), np.float32), np.int64(1), np.int64(0))",
                       "ok.ops.matrix_band_part(np.zeros((2, 0), np.float32), np.int64(-1), np.int64(0))"],
    "Cumsum": ["ok.ops.cumsum(E, np.int32(0))", "ok.ops.cumsum(E, np.int32(1), exclusive=True)"],
    "Cumprod": ["ok.ops.cumprod(E, np.int32(0), reverse=True)", "ok.ops.cumprod(E0, np.int32(0))"],
    "LinSpace": ["ok.ops.lin_space(np.float32(1.0), np.float32(2.0), np.int32(1))"],
    "MirrorPad": ["ok.ops.mirror_pad(S, np.zeros((0, 2), np.int32), mode='REFLECT')",
                  "ok.ops.mirror_pad(E, np.array([[0, 0], [1, 1]], np.int32), mode='SYMMETRIC')"],
    "MirrorPadGrad": ["ok.ops.mirror_pad_grad(S, np.zeros((0, 2), np.int32), mode='REFLECT')",
                      "ok.ops.mirror_pad_grad(E, np.array([[0, 0], [1, 1]], np.int32), mode='SYMMETRIC')"],
    "TopKV2": ["ok.ops.top_kv2(E, np.int32(0))", "ok.ops.top_kv2(V3, np.int32(0))", "ok.ops.top_kv2(V3, np.int32(3))"],
    "GatherNd": ["ok.ops.gather_nd(V3, np.array([[1]], np.int32))", "ok.ops.gather_nd(E, np.zeros((0, 1), np.int32))"],
    "ScatterNd": ["ok.ops.scatter_nd(np.array([[1]], np.int32), np.ones(1, np.float32), np.array([3], np.int32))",
                  "ok.ops.scatter_nd(np.zeros((0, 1), np.int32), np.zeros((0, 3), np.float32), np.array([0, 3], np.int32))"],
    "TensorScatterUpdate": ["ok.ops.tensor_scatter_update(V3, np.array([[2]], np.int32), np.ones(1, np.float32))",
                            "ok.ops.tensor_scatter_update(E, np.zeros((0, 1), np.int32), np.zeros((0, 3), np.float32))"],
    "LogicalNot": ["ok.ops.logical_not(B)", "ok.ops.logical_not(EB)"],
    "Cast": ["ok.ops.cast(S, DstT=ok.int32)", "ok.ops.cast(E, DstT=ok.float16)", "ok.ops.cast(S64, DstT=ok.float32, Truncate=True)"],
    # binary: 0-d with 0-d, empty with empty, empty with 0-d
    **{op: [f"ok.ops.{fn}(S, S2)", f"ok.ops.{fn}(E, E)", f"ok.ops.{fn}(E, S2)", f"ok.ops.{fn}(S, E0)"] for op, fn in [
        ("Add", "add"), ("Sub", "sub"), ("Mul", "mul"), ("RealDiv", "real_div"), ("FloorDiv", "floor_div"),
        ("FloorMod", "floor_mod"), ("Pow", "pow"), ("Maximum", "maximum"), ("Minimum", "minimum"),
        ("Equal", "equal"), ("NotEqual", "not_equal"), ("Less", "less"), ("LessEqual", "less_equal"),
        ("Greater", "greater"), ("GreaterEqual", "greater_equal"), ("ReluGrad", "relu_grad"), ("Atan2", "atan2"),
        ("SquaredDifference", "squared_difference"), ("LeakyReluGrad", "leaky_relu_grad"), ("EluGrad", "elu_grad"),
        ("GeluGrad", "gelu_grad")]},
    **{op: [f"ok.ops.{fn}(np.int32(6), np.int32(3))", f"ok.ops.{fn}(np.zeros((0, 3), np.uint8), np.zeros((0, 3), np.uint8))",
            f"ok.ops.{fn}(np.zeros((0, 3), np.int64), np.int64(-1))"]
       for op, fn in [("BitwiseAnd", "bitwise_and"), ("BitwiseOr", "bitwise_or"), ("BitwiseXor", "bitwise_xor")]},
    "LogicalAnd": ["ok.ops.logical_and(B, B)", "ok.ops.logical_and(EB, B)"],
    "LogicalOr": ["ok.ops.logical_or(B, B)", "ok.ops.logical_or(EB, EB)"],
    "AddN": ["ok.ops.add_n([S, S2])", "ok.ops.add_n([E, E, E])"],
    "Select": ["ok.ops.select(B, S, S2)", "ok.ops.select(EB, E, E)", "ok.ops.select(B, E, E)", "ok.ops.select(np.zeros(0, bool), E, E)"],
    "SelectV2": ["ok.ops.select_v2(B, S, S2)", "ok.ops.select_v2(EB, E, S2)"],
    "ClipByValue": ["ok.ops.clip_by_value(S, S2, S2)", "ok.ops.clip_by_value(E, S, S2)"],
    # reductions: a 0-d input over no axes, empty inputs over their empty and non-empty axes
    **{op: [f"ok.ops.{fn}(S, [])", f"ok.ops.{fn}(E, 0)", f"ok.ops.{fn}(E, 1)", f"ok.ops.{fn}(E, [0, 1], keep_dims=True)"] for op, fn in [
        ("Sum", "sum"), ("Mean", "mean"), ("Prod", "prod"), ("Max", "max"), ("Min", "min")]},
    "All": ["ok.ops.all(B, [])", "ok.ops.all(EB, 0)"],
    "Any": ["ok.ops.any(B, [])", "ok.ops.any(EB, 0)"],
    "ArgMax": ["ok.ops.arg_max(V3, 0)", "ok.ops.arg_max(E, 0)", "ok.ops.arg_max(E, 1)", "ok.ops.arg_max(S, 0)"],
    "ArgMin": ["ok.ops.arg_min(V3, 0)", "ok.ops.arg_min(E, 0)", "ok.ops.arg_min(E.T, 0)"],
    # shapes and data movement
    "Pack": ["ok.ops.pack([S, S2])", "ok.ops.pack([E, E], axis=1)", "ok.ops.pack([E0])"],
    "Unpack": ["ok.ops.unpack(V3, num=3)", "ok.ops.unpack(E0, num=0)", "ok.ops.unpack(E, num=0)", "ok.ops.unpack(E.T, num=3)"],
    "ConcatV2": ["ok.ops.concat_v2([E, E], 0)", "ok.ops.concat_v2([E, np.ones((2, 3), np.float32)], 0)", "ok.ops.concat_v2([S, S], 0)"],
    "ExpandDims": ["ok.ops.expand_dims(S, 0)", "ok.ops.expand_dims(E, 1)"],
    "Reshape": ["ok.ops.reshape(S, [1, 1])", "ok.ops.reshape(np.ones((1, 1), np.float32), [])", "ok.ops.reshape(E, [3, 0])", "ok.ops.reshape(E, [-1])"],
    "Squeeze": ["ok.ops.squeeze(np.ones((1, 1), np.float32))", "ok.ops.squeeze(np.zeros((1, 0), np.float32))"],
    "Shape": ["ok.ops.shape(S)", "ok.ops.shape(E)"],
    "Size": ["ok.ops.size(S)", "ok.ops.size(E)"],
    "Rank": ["ok.ops.rank(S)", "ok.ops.rank(E)"],
    "Fill": ["ok.ops.fill(np.zeros(0, np.int32), S)", "ok.ops.fill([0, 2], S)"],
    "Pad": ["ok.ops.pad(S, np.zeros((0, 2), np.int32))", "ok.ops.pad(E, [[1, 1], [0, 0]])", "ok.ops.pad(E0, [[0, 0]])"],
    "Tile": ["ok.ops.tile(S, np.zeros(0, np.int32))", "ok.ops.tile(E, [2, 1])", "ok.ops.tile(V3, [0])"],
    "Transpose": ["ok.ops.transpose(S, np.zeros(0, np.int32))", "ok.ops.transpose(E, [1, 0])"],
    "BroadcastTo": ["ok.ops.broadcast_to(S, np.zeros(0, np.int32))", "ok.ops.broadcast_to(S, [2, 0])", "ok.ops.broadcast_to(E0, [3, 0])"],
    "Slice": ["ok.ops.slice(V3, [1], [0])", "ok.ops.slice(E, [0, 0], [0, 3])", "ok.ops.slice(S, np.zeros(0, np.int32), np.zeros(0, np.int32))"],
    "StridedSlice": ["ok.ops.strided_slice(V3, [1], [2], [1], shrink_axis_mask=1)", "ok.ops.strided_slice(E, [0], [0], [1])",
                     "ok.ops.strided_slice(V3, [2], [1], [1])"],
    "StridedSliceGrad": ["ok.ops.strided_slice_grad([3], [1], [2], [1], S, shrink_axis_mask=1)", "ok.ops.strided_slice_grad([0, 3], [0], [0], [1], E)"],
    "Split": ["ok.ops.split(0, E, num_split=1)", "ok.ops.split(1, E, num_split=3)"],
    "GatherV2": ["ok.ops.gather_v2(V3, np.int32(2), 0)", "ok.ops.gather_v2(V3, np.zeros(0, np.int32), 0)", "ok.ops.gather_v2(E, np.zeros(0, np.int32), 0)"],
    "UnsortedSegmentSum": ["ok.ops.unsorted_segment_sum(V3, np.zeros(3, np.int32), 2)", "ok.ops.unsorted_segment_sum(E0, np.zeros(0, np.int32), 2)",
                           "ok.ops.unsorted_segment_sum(S, np.int32(0), 1)"],
    "OneHot": ["ok.ops.one_hot(np.int32(1), 3, S, S2)", "ok.ops.one_hot(np.zeros(0, np.int32), 3, S, S2)", "ok.ops.one_hot(np.int32(1), 0, S, S2)"],
    "Range": ["ok.ops.range(0, 0, 1)", "ok.ops.range(np.float32(1), np.float32(1), np.float32(0.5))"],
    "InvertPermutation": ["ok.ops.invert_permutation(np.zeros(0, np.int32))"],
    "ConcatOffset": ["ok.ops.concat_offset(0, [np.zeros(1, np.int32), np.zeros(1, np.int32)])"],
    "Where": ["ok.ops.where(B)", "ok.ops.where(EB)"],
    "StringToNumber": ["ok.ops.string_to_number(np.array('1.5'))", "ok.ops.string_to_number(np.array([], dtype=object).astype(str))"],
    # linear algebra and nn
    "MatMul": ["ok.ops.mat_mul(E, np.ones((3, 2), np.float32))", "ok.ops.mat_mul(E.T, E)", "ok.ops.mat_mul(np.ones((2, 0), np.float32), np.ones((0, 3), np.float32))"],
    "BatchMatMul": ["ok.ops.batch_mat_mul(np.zeros((0, 2, 3), np.float32), np.ones((3, 4), np.float32))",
                    "ok.ops.batch_mat_mul(np.ones((2, 2, 0), np.float32), np.ones((2, 0, 4), np.float32))"],
    "BiasAdd": ["ok.ops.bias_add(E, np.ones(3, np.float32))", "ok.ops.bias_add(np.ones((2, 0), np.float32), E0)"],
    "BiasAddGrad": ["ok.ops.bias_add_grad(E)", "ok.ops.bias_add_grad(np.ones((2, 0), np.float32))"],
    "Softmax": ["ok.ops.softmax(E)", "ok.ops.softmax(np.ones((2, 0), np.float32))"],
    "LogSoftmax": ["ok.ops.log_softmax(E)", "ok.ops.log_softmax(np.ones((2, 0), np.float32))"],
    "SoftmaxGrad": ["ok.ops.softmax_grad(E, E)", "ok.ops.softmax_grad(np.ones((2, 0), np.float32), np.ones((2, 0), np.float32))"],
    "SoftmaxCrossEntropyWithLogits": ["ok.ops.softmax_cross_entropy_with_logits(E, E)"],
    "SparseSoftmaxCrossEntropyWithLogits": ["ok.ops.sparse_softmax_cross_entropy_with_logits(E, np.zeros(0, np.int32))"],
    "Conv2D": ["ok.ops.conv2d(np.zeros((0, 3, 3, 2), np.float32), np.ones((2, 2, 2, 4), np.float32), strides=[1, 1, 1, 1], padding='VALID')",
               "ok.ops.conv2d(np.ones((1, 3, 3, 0), np.float32), np.ones((2, 2, 0, 4), np.float32), strides=[1, 1, 1, 1], padding='SAME')"],
    "Conv2DBackpropInput": ["ok.ops.conv2d_backprop_input([0, 3, 3, 2], np.ones((2, 2, 2, 4), np.float32), np.zeros((0, 2, 2, 4), np.float32), strides=[1, 1, 1, 1], padding='VALID')"],
    "Conv2DBackpropFilter": ["ok.ops.conv2d_backprop_filter(np.zeros((0, 3, 3, 2), np.float32), [2, 2, 2, 4], np.zeros((0, 2, 2, 4), np.float32), strides=[1, 1, 1, 1], padding='VALID')"],
    "FusedLayerNorm": ["ok.ops.fused_layer_norm(np.zeros((0, 3), np.float32), np.ones(3, np.float32), np.zeros(3, np.float32))",
                       "ok.ops.fused_layer_norm(np.ones(1, np.float32), np.ones(1, np.float32), np.zeros(1, np.float32))"],
    "FusedLayerNormGrad": ["ok.ops.fused_layer_norm_grad(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), np.ones(3, np.float32))",
                           "ok.ops.fused_layer_norm_grad(np.ones(1, np.float32), np.ones(1, np.float32), np.ones(1, np.float32))"],
    "ResizeBilinear": ["ok.ops.resize_bilinear(np.zeros((0, 2, 2, 1), np.float32), np.array([3, 3], np.int32))",
                       "ok.ops.resize_bilinear(np.ones((1, 1, 1, 1), np.float32), np.array([1, 1], np.int32))"],
    "ResizeBilinearGrad": ["ok.ops.resize_bilinear_grad(np.zeros((0, 3, 3, 1), np.float32), np.zeros((0, 2, 2, 1), np.float32))",
                           "ok.ops.resize_bilinear_grad(np.ones((1, 1, 1, 1), np.float32), np.zeros((1, 1, 1, 1), np.float32))"],
    "ResizeNearestNeighbor": ["ok.ops.resize_nearest_neighbor(np.zeros((0, 2, 2, 1), np.float32), np.array([3, 3], np.int32))",
                              "ok.ops.resize_nearest_neighbor(np.ones((1, 1, 1, 1), np.float32), np.array([1, 1], np.int32))"],
    "ResizeNearestNeighborGrad": ["ok.ops.resize_nearest_neighbor_grad(np.zeros((0, 3, 3, 1), np.float32), np.array([2, 2], np.int32))",
                                  "ok.ops.resize_nearest_neighbor_grad(np.ones((1, 1, 1, 1), np.float32), np.array([1, 1], np.int32))"],
    "DepthwiseConv2dNative": ["ok.ops.depthwise_conv2d_native(np.zeros((0, 3, 3, 2), np.float32), np.ones((2, 2, 2, 3), np.float32), strides=[1, 1, 1, 1], padding='VALID')",
                              "ok.ops.depthwise_conv2d_native(np.ones((1, 3, 3, 2), np.float32), np.ones((2, 2, 2, 0), np.float32), strides=[1, 1, 1, 1], padding='SAME')"],
    "DepthwiseConv2dNativeBackpropInput": ["ok.ops.depthwise_conv2d_native_backprop_input([0, 3, 3, 2], np.ones((2, 2, 2, 2), np.float32), np.zeros((0, 2, 2, 4), np.float32), strides=[1, 1, 1, 1], padding='VALID')"],
    "DepthwiseConv2dNativeBackpropFilter": ["ok.ops.depthwise_conv2d_native_backprop_filter(np.zeros((0, 3, 3, 2), np.float32), [2, 2, 2, 2], np.zeros((0, 2, 2, 4), np.float32), strides=[1, 1, 1, 1], padding='VALID')"],
    **{op: [f"ok.ops.{fn}(X0, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"] for op, fn in [
        ("MaxPool", "max_pool"), ("AvgPool", "avg_pool"), ("MaxPoolWithArgmax", "max_pool_with_argmax")]},
    "MaxPoolGrad": ["ok.ops.max_pool_grad(X0, np.zeros((0, 2, 2, 2), np.float32), np.zeros((0, 2, 2, 2), np.float32), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "MaxPoolGradGrad": ["ok.ops.max_pool_grad_grad(X0, np.zeros((0, 2, 2, 2), np.float32), X0, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "AvgPoolGrad": ["ok.ops.avg_pool_grad([0, 3, 3, 2], np.zeros((0, 2, 2, 2), np.float32), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "MaxPoolGradWithArgmax": ["ok.ops.max_pool_grad_with_argmax(X0, np.zeros((0, 2, 2, 2), np.float32), np.zeros((0, 2, 2, 2), np.int64), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "MaxPoolGradGradWithArgmax": ["ok.ops.max_pool_grad_grad_with_argmax(X0, X0, np.zeros((0, 2, 2, 2), np.int64), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "FusedMatMul": ["ok.ops.fused_mat_mul(E, np.ones((3, 2), np.float32), np.ones(2, np.float32))"],
    "FusedConv2D": ["ok.ops.fused_conv2d(X0, np.ones((2, 2, 2, 4), np.float32), np.ones(4, np.float32), strides=[1, 1, 1, 1], padding='VALID')"],
    "SparseSoftmaxCrossEntropyLoss": ["ok.ops.sparse_softmax_cross_entropy_loss(E, np.zeros(0, np.int32))"],
    "Addons>MedianPool2D": ["ok.execute('Addons>MedianPool2D', X0, ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    "Addons>MedianPool2DGrad": ["ok.execute('Addons>MedianPool2DGrad', X0, np.zeros((0, 2, 2, 2), np.float32), ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding='VALID')"],
    # state: variables of a 0-d and of an empty value
    **{op: [f"ok.ops.{fn}(ok.Variable(S), S2)", f"ok.ops.{fn}(ok.Variable(E), E)"] for op, fn in [
        ("Assign", "assign"), ("AssignAdd", "assign_add"), ("AssignSub", "assign_sub")]},
    "ApplyGradientDescent": ["ok.ops.apply_gradient_descent(ok.Variable(S), S2, S)", "ok.ops.apply_gradient_descent(ok.Variable(E), S2, E)"],
    "ApplyMomentum": ["ok.ops.apply_momentum(ok.Variable(S), ok.Variable(S), S2, S, S2)", "ok.ops.apply_momentum(ok.Variable(E), ok.Variable(E), S2, E, S2)"],
    "ApplyAdam": ["ok.ops.apply_adam(*[ok.Variable(x) for x in (S, S, S)], S2, S2, S2, S2, S2, S2, S)",
                  "ok.ops.apply_adam(*[ok.Variable(x) for x in (E, E, E)], S2, S2, S2, S2, S2, S2, E)"],
}



SWEEP_CHILD = r"""
import json, sys
import numpy as np
import opkernel as ok
S, S2, S64 = np.float32(1.5), np.float32(-0.5), np.float64(1 / 3)
E, E0, EB, B = np.zeros((0, 3), np.float32), np.zeros(0, np.float32), np.zeros((0, 3), bool), np.bool_(True)
V3, X0 = np.array([3.0, -1.0, 2.0], np.float32), np.zeros((0, 3, 3, 2), np.float32)

def run(expr, backend):
    with ok.use_backend(backend):
        try:
            result = eval(expr)
        except Exception as e:
            return ["raise", type(e).__name__, str(e)[:300]]
        outs = result if isinstance(result, (list, tuple)) else [result]
        return ["ok", [(str(t.dtype), list(t.shape), t.numpy()) for t in outs]]

def same(a, b):
    if a[0] != b[0] or a[0] == "raise":
        return a[:2] == b[:2]
    if len(a[1]) != len(b[1]):
        return False
    for (da, sa, va), (db, sb, vb) in zip(a[1], b[1]):
        if da != db or sa != sb:
            return False
        if va.dtype.kind in "fc":
            if not np.allclose(va, vb, rtol=1e-5, atol=1e-6, equal_nan=True):
                return False
        elif not np.array_equal(va, vb):
            return False
    return True

for op, exprs in json.loads(sys.stdin.read()):
    print("BEGIN " + op, flush=True)
    problems = []
    for expr in exprs:
        a, b = run(expr, "cpu"), run(expr, "opencl")
        if not same(a, b):
            problems.append([expr, repr(a)[:400], repr(b)[:400]])
    print("RESULT " + json.dumps([op, problems]), flush=True)
"""


def _run_sweep(ops: list[str]) -> dict[str, Any]:
    """{op: list of problems, or ('crashed', how)}: children until every op has run."""
    results: dict[str, Any] = {}
    todo = list(ops)
    while todo:
        batch = json.dumps([[op, SWEEP[op]] for op in todo])
        try:
            done = subprocess.run([sys.executable, "-c", SWEEP_CHILD], input=batch, env=child_env(), cwd=str(TESTS),
                                  capture_output=True, text=True, timeout=120 + 10 * len(todo))
            out, code = done.stdout, done.returncode
            how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}: {done.stderr[-1500:]}"
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            how = "a hang (timeout)"
        started = None
        for line in out.splitlines():
            if line.startswith("BEGIN "):
                started = line[6:]
            elif line.startswith("RESULT "):
                op, problems = json.loads(line[7:])
                results[op] = problems
                started = None
        todo = [op for op in todo if op not in results]
        if todo:  # the child died: the op it had begun (else the next one) crashed
            culprit = started if started in todo else todo[0]
            results[culprit] = ("crashed", how)
            todo.remove(culprit)
    return results


def _need_opencl(config: pytest.Config) -> None:
    """Skip without an OpenCL backend, unless --opkernel-backends requires one: then fail."""
    from opkernel import engine

    status = {name: reason for name, _, reason in engine.backend_status()}
    if status.get("opencl", "not installed") is not None:
        required = "opencl" in str(config.getoption("--opkernel-backends") or "").split(",")
        (pytest.fail if required else pytest.skip)(f"backend 'opencl' unavailable: {status.get('opencl', 'not installed')}")


@pytest.fixture(scope="module")
def sweep(request: pytest.FixtureRequest) -> dict[str, Any]:
    _need_opencl(request.config)
    return _run_sweep(sorted(SWEEP))


def _opencl_ops() -> set[str]:
    import opkernel as ok
    from opkernel import kernels

    ok.engine.backend_instance("opencl")
    return {k.op for k in kernels.all_kernels() if k.backend == "opencl"}


def test_every_opencl_kernel_is_swept(request: pytest.FixtureRequest) -> None:
    _need_opencl(request.config)
    missing = sorted(_opencl_ops() - set(SWEEP))
    assert not missing, f"OpenCL kernels without a 0-d/empty sweep case: {missing}"


@pytest.mark.parametrize("op", sorted(SWEEP))
def test_opencl_kernel_on_0d_and_empty_tensors(op: str, sweep: dict[str, Any]) -> None:
    result = sweep[op]
    if isinstance(result, tuple):
        # Run it again on its own, so that the failure carries its signal and stderr.
        run_isolated(SWEEP_CHILD, what=f"{op} on 0-d/empty tensors", input=json.dumps([[op, SWEEP[op]]]))
        pytest.fail(f"op {op!r}: the sweep's child process died with {result[1]} while running it")
    assert not result, f"op {op!r}: OpenCL differs from CPU on 0-d/empty tensors:\n" + "\n".join(map(str, result))
