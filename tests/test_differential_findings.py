"""Calls the randomized differential test against TensorFlow found wrong
(tests/tf_conformance/differential.py), each on every backend; TensorFlow's answers
are written out here (recorded from TensorFlow 2.21)."""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok
from opkernel import errors


def _run(backend: str, op: str, *args: object, **attrs: object) -> object:
    with ok.use_backend(backend):
        return ok.execute(op, *args, **attrs)


def test_max_pool_with_argmax_window_larger_than_input_gives_empty_outputs(backend: str) -> None:
    out, arg = _run(backend, "MaxPoolWithArgmax", np.array([3, 9], np.int16).reshape(1, 1, 2, 1),
                    ksize=[1, 3, 3, 1], strides=[1, 3, 2, 1], padding="VALID", Targmax=ok.int32)
    assert out.shape == arg.shape == (1, 0, 0, 1) and out.dtype == ok.int16 and arg.dtype == ok.int32


def test_pool_gradients_with_nothing_pooled_are_zeros(backend: str) -> None:
    dx = _run(backend, "AvgPoolGrad", np.array([5, 2, 1, 2], np.int32), np.zeros((5, 0, 0, 2), np.float32),
              ksize=[1, 3, 2, 1], strides=[1, 2, 3, 1], padding="VALID")
    assert dx.shape == (5, 2, 1, 2) and not dx.numpy().any()
    gg = _run(backend, "MaxPoolGradGrad", np.ones((3, 4, 2, 4), np.float32), np.ones((3, 2, 0, 4), np.float32),
              np.ones((3, 4, 2, 4), np.float32), ksize=[1, 2, 3, 1], strides=[1, 2, 1, 1], padding="VALID")
    assert gg.shape == (3, 2, 0, 4)


def test_window_overhanging_by_less_than_a_stride_gives_an_empty_output(backend: str) -> None:
    """TensorFlow's output size is (in + pads - k + stride) / stride in C (toward zero): W 0, k 3, stride 2 is 0."""
    y = _run(backend, "Conv2D", np.zeros((1, 1, 0, 1), np.float32), np.ones((1, 3, 1, 1), np.float32),
             strides=[1, 3, 2, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 2, 2, 0, 0, 0, 0])
    assert y.shape == (1, 2, 0, 1)
    with pytest.raises(errors.InvalidArgumentError, match="negative"):
        _run(backend, "Conv2D", np.zeros((1, 1, 0, 1), np.float32), np.ones((1, 5, 1, 1), np.float32),
             strides=[1, 1, 2, 1], padding="VALID")          # (0 - 5 + 2) / 2 is -1 in C too


def test_fill_takes_a_one_element_vector_value(backend: str) -> None:
    assert _run(backend, "Fill", np.array([3], np.int32), np.array([4], np.uint16)).numpy().tolist() == [4, 4, 4]
    with pytest.raises(errors.InvalidArgumentError, match="Fill"):
        _run(backend, "Fill", np.array([3], np.int32), np.array([4, 5], np.uint16))


def test_integer_pow_with_an_empty_result_checks_no_exponent(backend: str) -> None:
    assert _run(backend, "Pow", np.zeros([0], np.int8), np.array([-9], np.int8)).shape == (0,)
    with pytest.raises(errors.InvalidArgumentError, match="negative integer powers"):
        _run(backend, "Pow", np.ones([1], np.int32), np.array([-9], np.int32))


@pytest.mark.parametrize("op", ["SoftmaxCrossEntropyWithLogits", "SparseSoftmaxCrossEntropyWithLogits"])
def test_cross_entropy_of_one_class_is_positive_zero(backend: str, op: str) -> None:
    labels = np.array([[1.0]], np.float32) if op.startswith("Softmax") else np.array([0], np.int64)
    loss, _ = _run(backend, op, np.array([[-3.0]], np.float32), labels)
    assert loss.numpy()[0] == 0 and not np.signbit(loss.numpy()[0])


def test_float16_floor_div_of_scalars_is_a_scalar(backend: str) -> None:
    q = _run(backend, "FloorDiv", np.float16(-7), np.float16(2))
    assert q.shape == () and q.numpy() == -4


def test_max_pool_gradient_of_negative_zero_is_positive_zero(backend: str) -> None:
    """TensorFlow sums into zeros: a -0.0 gradient reaching its argmax gives +0.0 there."""
    x = np.arange(16, dtype=np.float64).reshape(1, 4, 4, 1)
    y = _run(backend, "MaxPool", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    dx = _run(backend, "MaxPoolGrad", x, y.numpy(), np.full((1, 2, 2, 1), -0.0), ksize=[1, 2, 2, 1],
              strides=[1, 2, 2, 1], padding="VALID")
    assert not np.signbit(dx.numpy()).any()
    _, argmax = _run(backend, "MaxPoolWithArgmax", x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    dx = _run(backend, "MaxPoolGradWithArgmax", x, np.full((1, 2, 2, 1), -0.0), argmax.numpy(), ksize=[1, 2, 2, 1],
              strides=[1, 2, 2, 1], padding="VALID")
    assert not np.signbit(dx.numpy()).any()
