"""nn ops where opkernel used to give a different answer than TensorFlow (issue 24),
found by tests/tf_conformance/cases_nn.py.

TensorFlow's CPU kernels are the reference; its answers are written here as literals with
the source that produces them, so these tests need no TensorFlow.  Every test body runs
on every installed backend (the ``backend`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel.testing.gradient_checker import compute_gradient_error

# ---------------------------------------------------------------- signed zeros of activations

# tensorflow/core/kernels/relu_op_functor.h: Relu is features.cwiseMax(0) and Relu6
# cwiseMax(0).cwiseMin(6); over whole SIMD packets (the bulk of any tensor) -0.0 gives +0.0.
# Elu is (features < 0).select(exp(features) - 1, features) and Selu the same with its
# scales: -0.0 is not < 0, so it passes through as -0.0.
SIZES = [1, 16, 5000]  # 0-d-like, one vector loop, numpy's blocked path and native sizes


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_relu_and_relu6_of_negative_zero_are_positive_zero(backend: str, dtype: str, n: int) -> None:
    # Which operand of a tie numpy's maximum returns varies with its loop (a nan in the
    # array, the alignment): mixed with nan and misaligned, -0.0 came out as -0.0.
    mixed = np.resize(np.array([np.nan, -0.0, 1.0, -0.0], dtype), n + 1)
    for x in (np.full(n, -0.0, dtype), mixed[:n], mixed[1:]):
        for fn in (ok.ops.relu, ok.ops.relu6):
            y = fn(x).numpy()
            assert not np.signbit(y[x == 0]).any(), f"{fn.__name__}(-0.0) kept the sign"
            np.testing.assert_array_equal(np.isnan(y), np.isnan(x))  # nan still passes through
    assert not np.signbit(ok.ops.relu(np.array(-0.0, dtype)).numpy())


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elu_and_selu_of_negative_zero_keep_the_sign(backend: str, dtype: str, n: int) -> None:
    x = ok.tensor(np.full(n, -0.0, dtype))
    for fn in (ok.ops.elu, ok.ops.selu):
        y = fn(x).numpy()
        assert (y == 0).all() and np.signbit(y).all(), f"{fn.__name__}(-0.0) lost the sign"
        assert not np.signbit(fn(np.zeros(n, dtype)).numpy()).any()


# ---------------------------------------------------------------- Softmax of an empty last axis

# tensorflow/core/kernels/softmax_op.cc: only rank >= 1 is required; an empty tensor (the
# class axis included) gives an empty result.  A 0-d tensor stays an error.
@pytest.mark.parametrize("shape", [(3, 0), (0,), (2, 0, 0)])
def test_softmax_of_an_empty_last_axis_is_empty(backend: str, shape: tuple[int, ...]) -> None:
    x = np.zeros(shape, np.float32)
    for fn in (ok.ops.softmax, ok.ops.log_softmax):
        y = fn(x)
        assert y.shape == shape and y.dtype == ok.float32


def test_softmax_of_a_scalar_is_an_error_naming_the_op(backend: str) -> None:
    for fn, op in ((ok.ops.softmax, "Softmax"), (ok.ops.log_softmax, "LogSoftmax")):
        with pytest.raises(ok.errors.InvalidArgumentError, match=op):
            fn(np.float32(1.0))


# ---------------------------------------------------------------- MaxPool of small integers

# MaxPool and MaxPoolWithArgmax take every realnumbertype on TensorFlow's CPU; the OpenCL
# backend had kernels for 32- and 64-bit integers only.
@pytest.mark.parametrize("dtype", ["int8", "int16", "uint8", "uint16"])
def test_max_pool_of_small_integers(backend: str, dtype: str) -> None:
    info = np.iinfo(dtype)
    x = np.array([info.min, info.max, 3, info.min, 7, 7, info.min, info.min, 1], dtype).reshape(1, 3, 3, 1)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "SAME"}
    y = ok.ops.max_pool(x, **attrs)
    assert y.dtype == ok.as_dtype(dtype)
    assert y.numpy().ravel().tolist() == [info.max, info.max, 7, 7, 7, 7, info.min, 1, 1]
    out, argmax = ok.ops.max_pool_with_argmax(x, **attrs)
    assert out.numpy().ravel().tolist() == y.numpy().ravel().tolist()
    assert argmax.numpy().ravel().tolist() == [1, 1, 5, 4, 4, 5, 6, 8, 8]


# ---------------------------------------------------------------- cross entropy without classes

# tensorflow/core/kernels/xent_op.cc: features [batch, 0] give each example the empty sum,
# a loss of 0, and an empty backprop.  sparse_xent_op.cc: "Must have at least one class",
# even for an empty batch.
def test_softmax_cross_entropy_without_classes_is_a_zero_loss(backend: str) -> None:
    for batch in (3, 0):
        loss, backprop = ok.ops.softmax_cross_entropy_with_logits(np.zeros((batch, 0), np.float32),
                                                                  np.zeros((batch, 0), np.float32))
        assert loss.numpy().tolist() == [0.0] * batch and backprop.shape == (batch, 0)
    # Broadcast against a real batch: the loss is written, not left as whatever memory held.
    loss, _ = ok.ops.softmax_cross_entropy_with_logits(np.zeros((1, 0), np.float32), np.zeros((4096, 0), np.float32))
    assert not loss.numpy().any()


@pytest.mark.parametrize("op", ["sparse_softmax_cross_entropy_with_logits", "sparse_softmax_cross_entropy_loss"])
@pytest.mark.parametrize("batch", [2, 0])
def test_sparse_cross_entropy_needs_a_class(backend: str, op: str, batch: int) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="at least one class"):
        getattr(ok.ops, op)(np.zeros((batch, 0), np.float32), np.zeros(batch, np.int64))


# ---------------------------------------------------------------- grouped Conv2D

# tensorflow/core/kernels/conv_ops.cc: an input depth that is a multiple of the filter's
# in_channels is a grouped convolution (each group of in_channels input channels with its
# slice of out_channels).  TensorFlow's CPU has no gradient for it; opkernel's gradient is
# each group's ordinary one, checked numerically.
@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_grouped_conv2d_convolves_each_group_with_its_filters(backend: str, data_format: str) -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 5, 4, 6)).astype(np.float32)
    f = rng.standard_normal((3, 2, 2, 9)).astype(np.float32)
    nchw = data_format == "NCHW"
    attrs = {"strides": [1, 1, 2, 1] if nchw else [1, 2, 1, 1], "padding": "SAME", "data_format": data_format}
    to = (lambda a: a.transpose(0, 3, 1, 2)) if nchw else (lambda a: a)
    y = ok.ops.conv2d(to(x), f, **attrs).numpy()
    parts = [ok.ops.conv2d(to(np.ascontiguousarray(x[..., 2 * g:2 * g + 2])), np.ascontiguousarray(f[..., 3 * g:3 * g + 3]),
                           **attrs).numpy() for g in range(3)]
    np.testing.assert_array_equal(y, np.concatenate(parts, axis=1 if nchw else 3))
    with pytest.raises(ok.errors.InvalidArgumentError, match="Conv2D.*output depth 8 must be evenly divisible"):
        ok.ops.conv2d(to(x), f[..., :8], **attrs)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW"])
def test_grouped_conv2d_gradient(backend: str, data_format: str) -> None:
    rng = np.random.default_rng(4)
    shape = (1, 4, 3, 4) if data_format == "NHWC" else (1, 4, 4, 3)
    x, f = rng.standard_normal(shape), rng.standard_normal((2, 2, 2, 4))
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID", "data_format": data_format}
    err = compute_gradient_error(lambda a, b: ok.ops.conv2d(a, b, **attrs), [x, f])
    assert err < 1e-6


def test_grouped_conv2d_shape_function() -> None:
    attrs = {"strides": [1, 1, 1, 1], "padding": "VALID"}
    (s,) = ok.infer_shapes("Conv2D", [(1, 3, 3, 4), (2, 2, 2, 6)], attrs)
    assert s.as_list() == [1, 2, 2, 6]
    (s,) = ok.infer_shapes("Conv2D", [(1, 3, 3, 4), (2, 2, 2, None)], attrs)
    assert s.as_list() == [1, 2, 2, None]
    with pytest.raises(ok.errors.ShapeError, match="Conv2D.*output depth 3 must be evenly divisible by the number of groups 2"):
        ok.infer_shapes("Conv2D", [(1, 3, 3, 4), (2, 2, 2, 3)], attrs)
