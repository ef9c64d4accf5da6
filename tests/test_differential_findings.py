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


@pytest.mark.parametrize("op", ["RealDiv", "FloorDiv", "FloorMod"])
def test_integer_division_with_an_empty_result_checks_no_divisor(backend: str, op: str) -> None:
    """TensorFlow's functors flag a zero divisor where they compute a quotient: none for an empty result."""
    assert _run(backend, op, np.zeros((1, 1, 0), np.int16), np.zeros((1, 1, 1), np.int16)).shape == (1, 1, 0)
    with pytest.raises(errors.InvalidArgumentError, match="division by zero"):
        _run(backend, op, np.ones(2, np.int16), np.zeros(2, np.int16))


def test_unsorted_segment_sum_of_no_data_reads_no_id(backend: str) -> None:
    out = _run(backend, "UnsortedSegmentSum", np.zeros((4, 4, 0), np.float32), np.zeros((4, 4), np.int32), np.int64(0))
    assert out.shape == (0, 0)
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):
        _run(backend, "UnsortedSegmentSum", np.ones((2, 3), np.float32), np.array([0, 2], np.int32), np.int64(2))
    with pytest.raises(errors.InvalidArgumentError, match="out of range"):  # data, and no segment to put it in
        _run(backend, "UnsortedSegmentSum", np.array([9], np.int32), np.int64(0), np.int32(0))


def test_gather_gradient_of_empty_params(backend: str) -> None:
    with ok.use_backend(backend):
        x = ok.Variable(np.zeros((0, 1, 0, 1), np.float32))
        with ok.GradientTape() as tape:
            y = ok.execute("GatherV2", x, np.array([0], np.int32), np.int64(0))
        assert tape.gradient(y, x).shape == (0, 1, 0, 1)


def test_a_reduction_over_size_one_axes_is_a_reshape(backend: str) -> None:
    """TensorFlow reshapes when there is nothing to reduce: -0.0 stays -0.0 (Sum added it to +0.0)."""
    for op in ("Sum", "Mean", "Max", "Prod"):
        out = _run(backend, op, np.array([[-0.0, 2.0]], np.float32), np.array([0], np.int32), keep_dims=False)
        assert out.numpy().tolist() == [0.0, 2.0] and np.signbit(out.numpy()[0]), op


def test_complex_reductions_keep_infinite_parts(backend: str) -> None:
    if backend == "opencl":
        pytest.skip("the OpenCL backend has no complex reductions (a missing kernel, named by the conformance suite)")
    z = np.array([[[complex(-0.0, -np.inf)]]])
    assert _run(backend, "Mean", z, np.zeros(0, np.int64), keep_dims=True).numpy().ravel()[0] == complex(-0.0, -np.inf)
    assert _run(backend, "Prod", np.array([complex(np.inf, 0)]), np.array([0]), keep_dims=False).numpy() == complex(np.inf, 0)
    mean = _run(backend, "Mean", np.array([complex(-0.0, -np.inf), 1 + 0j]), np.array([0]), keep_dims=False).numpy()
    assert mean.real == 0.5 and mean.imag == -np.inf     # a division by the count, not by count + 0j (NaN)


def test_max_pool_grad_of_an_empty_output_is_zeros(backend: str) -> None:
    dx = _run(backend, "MaxPoolGrad", np.array([-2, 3], np.int16).reshape(1, 1, 2, 1), np.zeros((1, 0, 0, 1), np.int16),
              np.zeros((1, 0, 0, 1), np.int16), ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding="VALID")
    assert dx.shape == (1, 1, 2, 1) and not dx.numpy().any()


def test_max_pool_with_argmax_outputs_the_input_at_the_argmax(backend: str) -> None:
    """-0.0 then +0.0 tie: the first is the argmax, and the output is that element (-0.0)."""
    x = np.array([-0.0, 0.0], np.float32).reshape(1, 2, 1, 1)
    out, arg = _run(backend, "MaxPoolWithArgmax", x, ksize=[1, 3, 1, 1], strides=[1, 1, 1, 1], padding="SAME")
    assert arg.numpy().ravel().tolist() == [0, 0] and np.signbit(out.numpy()).all()


def test_float16_floor_div_of_shapes_that_do_not_broadcast_names_floor_div(backend: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="op 'FloorDiv': Incompatible shapes"):
        _run(backend, "FloorDiv", np.zeros((0, 1, 2), np.float16), np.zeros((0, 1, 3), np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, "bfloat16"])
def test_max_pool_gradient_is_positive_zero_off_the_argmax(backend: str, dtype: object) -> None:
    """A negative gradient times "not the argmax" was -0.0 off the argmax (the tiled path)."""
    import ml_dtypes

    dt = ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype
    x = np.array([61.0, 37.0]).astype(dt).reshape(1, 1, 2, 1)
    try:
        dx = _run(backend, "MaxPoolGrad", x, np.array([61.0]).astype(dt).reshape(1, 1, 1, 1),
                  np.array([-1.0]).astype(dt).reshape(1, 1, 1, 1), ksize=[1, 1, 2, 1], strides=[1, 1, 2, 1],
                  padding="VALID")
    except errors.KernelNotFoundError:
        pytest.skip(f"no MaxPoolGrad kernel for {dtype} on {backend}")
    got = dx.numpy().astype(np.float32).ravel()
    assert got.tolist() == [-1.0, 0.0] and not np.signbit(got[1])
