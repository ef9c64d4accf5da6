"""Where opkernel used to give a different answer than TensorFlow (issue 24).

TensorFlow's CPU kernels are the reference.  Its answers are written here as literals,
each with the TensorFlow source that produces it, so these tests need no TensorFlow.
Every test body runs on every installed backend (the ``backend`` fixture).
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok

# ---------------------------------------------------------------- Mean of integers

# tensorflow/core/kernels/reduction_ops.h, CASTING_SPECIALIZATION: Mean sums 8- to 32-bit
# integers in (u)int64, divides there (C++ division, toward zero), then casts back.
MEAN_CASES = [
    ("uint8", [200, 101], 150),
    ("uint8", [255] * 20000, 255),  # long enough for the multi-pass device reduction
    ("int8", [-128] * 20000, -128),
    ("int8", [-128, -127], -127),  # -255 / 2 truncates toward zero
    ("int16", [30000, 30001, 30002], 30001),
    ("int32", [2**31 - 1] * 3, 2**31 - 1),
    ("int32", [-3, -4], -3),
    ("uint32", [2**32 - 1, 2**32 - 3], 2**32 - 2),
]


@pytest.mark.parametrize("dtype,values,expected", MEAN_CASES, ids=[f"{c[0]}-{len(c[1])}-{c[2]}" for c in MEAN_CASES])
def test_mean_of_integers_does_not_overflow(backend: str, dtype: str, values: list[int], expected: int) -> None:
    x = np.array(values, dtype)
    y = ok.ops.mean(x, 0)
    assert y.dtype == ok.as_dtype(dtype)
    assert int(y.numpy()) == expected
    columns = ok.ops.mean(np.stack([x, x], axis=1), 0).numpy()  # the column (strided) kernels too
    assert columns.tolist() == [expected, expected]


# ---------------------------------------------------------------- Select (v1) picks rows

# tensorflow/core/kernels/select_op.cc: a vector condition against a higher-rank t
# is ComputeBroadcasting (BatchSelectFunctor): condition[i] picks row i of t or e.
# SelectV2 (select_v2) is the broadcasting one.
COND = np.array([True, False, True, False])
T44 = np.arange(16, dtype=np.float32).reshape(4, 4)


def test_select_with_a_vector_condition_picks_rows(backend: str) -> None:
    out = ok.ops.select(COND, T44, -T44).numpy()
    expected = np.array([[0, 1, 2, 3], [-4, -5, -6, -7], [8, 9, 10, 11], [-12, -13, -14, -15]], np.float32)
    np.testing.assert_array_equal(out, expected)
    rows3 = ok.ops.select(COND, T44.reshape(4, 2, 2), -T44.reshape(4, 2, 2)).numpy()
    np.testing.assert_array_equal(rows3.reshape(4, 4), expected)
    # SelectV2 broadcasts the same vector along the last dimension.
    np.testing.assert_array_equal(ok.ops.select_v2(COND, T44, -T44).numpy()[0], [0, -1, 2, -3])


def test_select_gradient_follows_the_rows(backend: str) -> None:
    t, e = ok.tensor(T44), ok.tensor(-T44)
    w = np.arange(16, dtype=np.float32).reshape(4, 4) + 1
    with ok.GradientTape(persistent=True) as tape:
        tape.watch([t, e])
        y = ok.ops.mul(ok.ops.select(COND, t, e), w)
    gt, ge = tape.gradient(y, [t, e])
    rows = COND[:, None].astype(np.float32)
    np.testing.assert_array_equal(gt.numpy(), w * rows)
    np.testing.assert_array_equal(ge.numpy(), w * (1 - rows))


@pytest.mark.parametrize(
    "cond,t,e,match",
    [
        ((3,), (4, 4), (4, 4), "size 3 must equal the first dimension"),
        ((4,), (4, 4), (4,), "'t' and 'e' must have the same shape"),
        ((4, 1), (4, 4), (4, 4), "got \\[4, 1\\]"),
        ((2,), (), (), "needs 't' of rank 1"),
    ],
)
def test_select_rejects_shapes_that_tensorflow_rejects(backend: str, cond: tuple[int, ...], t: tuple[int, ...], e: tuple[int, ...], match: str) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="op 'Select': .*" + match):
        ok.ops.select(np.ones(cond, bool), np.ones(t, np.float32), np.ones(e, np.float32))
    with pytest.raises(ok.errors.ShapeError):
        ok.infer_shapes("Select", [cond, t, e])


def test_select_shape_function_matches_tensorflow() -> None:
    assert ok.infer_shapes("Select", [(4,), (4, 3), (4, 3)])[0].as_list() == [4, 3]
    assert ok.infer_shapes("Select", [(), (4, 3), (4, 3)])[0].as_list() == [4, 3]
    assert ok.infer_shapes("SelectV2", [(3,), (4, 3), ()])[0].as_list() == [4, 3]


# ---------------------------------------------------------------- Range of floats

# tensorflow/core/kernels/sequence_ops.cc: size = ceil(|(limit - start) / delta|) computed
# in Tidx, values start + T(i) * delta in Tidx.  In float32, 0.3f / 0.1f rounds to 3.
def test_float32_range_size_is_computed_in_float32(backend: str) -> None:
    f = np.float32
    out = ok.ops.range(f(0.0), f(0.3), f(0.1))
    assert out.dtype == ok.float32
    np.testing.assert_array_equal(out.numpy(), np.array([0.0, 0.1, 0.2], np.float32))
    assert ok.ops.range(f(1.0), f(0.0), f(-0.1)).numpy().shape == (10,)
    # float64 keeps float64's answer: 0.3 / 0.1 = 2.9999999999999996.
    assert ok.ops.range(np.float64(0.0), np.float64(0.3), np.float64(0.1)).numpy().shape == (3,)


def test_range_shape_function_uses_the_inputs_dtype() -> None:
    f = np.float32
    (shape,) = ok.infer_shapes("Range", [(), (), ()], {"Tidx": ok.float32}, [f(0.0), f(0.3), f(0.1)])
    assert shape.as_list() == [3]


@pytest.mark.parametrize("start,limit", [(np.nan, 1.0), (0.0, np.inf)])
def test_range_with_a_non_finite_size_is_an_error(backend: str, start: float, limit: float) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="'Range'.*must be finite"):
        ok.ops.range(np.float32(start), np.float32(limit), np.float32(1.0))


# ---------------------------------------------------------------- ArgMax / ArgMin and NaN

# tensorflow/core/kernels/argmax_op.h calls Eigen's argmax/argmin, whose ArgMaxPairReducer
# (TensorFunctors.h) starts from (0, lowest finite value) and moves only to a strictly
# greater element: NaN is never picked, and nothing above lowest() leaves index 0.
NAN, INF, FMAX = np.nan, np.inf, float(np.finfo(np.float32).max)
ARG_CASES = [
    # values, ArgMax, ArgMin
    ([1.0, NAN, 3.0], 2, 0),
    ([NAN, 2.0, 1.0], 1, 2),
    ([NAN, NAN], 0, 0),
    ([NAN, -INF], 0, 1),
    ([INF, NAN, -INF], 0, 2),
    ([-INF, -INF], 0, 0),
    ([5.0, NAN, 5.0], 0, 0),
    ([-INF, -FMAX], 0, 0),  # float32: -FMAX is lowest(), not greater than it
]


@pytest.mark.parametrize("values,amax,amin", ARG_CASES, ids=[str(i) for i in range(len(ARG_CASES))])
def test_arg_max_and_min_treat_nan_as_tensorflow_does(backend: str, values: list[float], amax: int, amin: int) -> None:
    x = np.array(values, np.float32)
    assert int(ok.ops.arg_max(x, 0).numpy()) == amax
    assert int(ok.ops.arg_min(x, 0).numpy()) == amin
    rows = np.stack([x, x[::-1]])  # also along an inner axis, and along axis 0 of the transpose
    assert ok.ops.arg_max(rows, 1).numpy().tolist()[0] == amax
    assert ok.ops.arg_max(np.ascontiguousarray(rows.T), 0).numpy().tolist()[0] == amax
    assert int(ok.ops.arg_max(x.astype(np.float64), 0).numpy()) == (1 if values == [-INF, -FMAX] else amax)


# ---------------------------------------------------------------- MaxPool and NaN

# tensorflow/core/kernels/pooling_ops_common.h (SpatialMaxPool): MaxPool is a cwiseMax from
# NumTraits<T>::lowest(), so NaN and -inf never win and a window of them gives lowest().
# maxpooling_op.cc (SpatialMaxPoolWithArgMaxHelper): MaxPoolWithArgmax takes a window's
# first element, then each strictly greater one; its output is the element it took, so a
# NaN is the output only as the window's first element.
_ = np.nan
POOL_X = np.array([
    [1.0, _, 3.0, 2.0, _, _],
    [_, _, 0.0, 5.0, _, -INF],
    [_, 2.0, 7.0, 1.0, -INF, -INF],
    [4.0, 4.0, 1.0, _, -INF, _],
], np.float32).reshape(1, 4, 6, 1)
POOL_ATTRS = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
LOWEST32 = float(np.finfo(np.float32).min)


def test_max_pool_never_picks_nan(backend: str) -> None:
    out = ok.ops.max_pool(POOL_X, **POOL_ATTRS).numpy().ravel()
    np.testing.assert_array_equal(out, np.array([1.0, 5.0, LOWEST32, 4.0, 7.0, LOWEST32], np.float32))


def test_max_pool_with_argmax_outputs_the_element_at_its_argmax(backend: str) -> None:
    out, argmax = ok.ops.max_pool_with_argmax(POOL_X, **POOL_ATTRS)
    assert argmax.numpy().ravel().tolist() == [0, 9, 4, 12, 14, 16]
    np.testing.assert_array_equal(out.numpy().ravel(), np.array([1.0, 5.0, _, _, 7.0, -INF], np.float32))
    grad = ok.ops.max_pool_grad(POOL_X, ok.ops.max_pool(POOL_X, **POOL_ATTRS), np.ones((1, 2, 3, 1), np.float32), **POOL_ATTRS)
    assert np.flatnonzero(grad.numpy().ravel()).tolist() == [0, 4, 9, 12, 14, 16]  # MaxPoolGrad routes by that argmax


# ---------------------------------------------------------------- ClipByValue and NaN

# tensorflow/core/kernels/cwise_op_clip.cc: std::max(std::min(t, max), min), so a NaN in t
# stays NaN, a NaN bound is ignored and min > max gives min.
def test_clip_by_value_keeps_nan_as_tensorflow_does(backend: str) -> None:
    f = np.float32
    t = np.array([_, -5.0, 0.5, 5.0, INF], f)
    np.testing.assert_array_equal(ok.ops.clip_by_value(t, f(-1), f(1)).numpy(), np.array([_, -1, 0.5, 1, 1], f))
    np.testing.assert_array_equal(ok.ops.clip_by_value(t, f(_), f(_)).numpy(), t)
    np.testing.assert_array_equal(ok.ops.clip_by_value(t, np.full(5, 2, f), f(1)).numpy(), np.array([_, 2, 2, 2, 2], f))
    assert ok.ops.clip_by_value(np.array([-5, 0, 5], np.int32), np.int32(2), np.int32(1)).numpy().tolist() == [2, 2, 2]


# ---------------------------------------------------------------- Selu's gradient at 0

# tensorflow/core/kernels/relu_op_functor.h, SeluGrad: (activations < 0).select(
# gradients * (activations + scale * alpha), gradients * scale): at x = 0 the slope is scale.
SELU_SCALE, SELU_ALPHA = 1.0507009873554804934193349852946, 1.6732632423543772848170429068531


def test_selu_gradient_at_zero_is_scale(backend: str) -> None:
    x = ok.tensor(np.array([-1.0, 0.0, 2.0], np.float64))
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.selu(x)
    g = tape.gradient(y, x).numpy()
    np.testing.assert_allclose(g, [SELU_SCALE * SELU_ALPHA * np.exp(-1.0), SELU_SCALE, SELU_SCALE], rtol=1e-12)


# ---------------------------------------------------------------- Cast(Truncate=True)

# tensorflow/core/kernels/cast_op.h: with Truncate, CAST_FUNCTORS' pairs first zero the low
# significand bits the output cannot hold (LSBZeroSetter; NaN left alone), so the cast
# rounds toward zero.  1/3 in float32: round-to-nearest gives bits 0x3EAAAAAB, truncation
# 0x3EAAAAAA.  Other pairs ignore Truncate.
def test_cast_truncate_rounds_toward_zero(backend: str) -> None:
    x = np.array([1 / 3, -1 / 3, 0.1, _, INF], np.float64)
    cut = ok.ops.cast(x, DstT=ok.float32, Truncate=True).numpy()
    assert cut[:3].view(np.uint32).tolist() == [0x3EAAAAAA, 0xBEAAAAAA, 0x3DCCCCCC]
    assert np.isnan(cut[3]) and cut[4] == INF
    assert ok.ops.cast(x, DstT=ok.float32).numpy()[:3].view(np.uint32).tolist() == [0x3EAAAAAB, 0xBEAAAAAB, 0x3DCCCCCD]
    # float32 -> float16: 0.7 is 0x399A rounded, 0x3999 truncated; 0.3 is 0x34CD, 0x34CC.
    f = np.array([0.7, 0.3, -0.7], np.float32)
    assert ok.ops.cast(f, DstT=ok.float16, Truncate=True).numpy().view(np.uint16).tolist() == [0x3999, 0x34CC, 0xB999]
    assert ok.ops.cast(f, DstT=ok.float16).numpy().view(np.uint16).tolist() == [0x399A, 0x34CD, 0xB99A]
    assert ok.ops.cast(np.array([-2.7, 2.7]), DstT=ok.int32, Truncate=True).numpy().tolist() == [-2, 2]


# ---------------------------------------------------------------- op interfaces of TensorFlow 2.21

# tensorflow/core/ops/math_ops.cc: ComplexAbs(x: T) -> y: Tout; MatMul has grad_a/grad_b and
# BatchMatMul grad_x/grad_y (bool = false), hints set by the gradient that leave the result alone.
def test_op_interfaces_match_tensorflow() -> None:
    abs_def = ok.op_def("ComplexAbs")
    assert [a.name for a in abs_def.inputs] == ["x"] and [a.name for a in abs_def.outputs] == ["y"]
    for op, names in (("MatMul", ("grad_a", "grad_b")), ("BatchMatMul", ("grad_x", "grad_y"))):
        attrs = {a.name: a for a in ok.op_def(op).attrs}
        for name in names:
            assert attrs[name].type == "bool" and attrs[name].default is False


def test_grad_attrs_reach_no_kernel_as_an_error_and_change_nothing(backend: str) -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    plain = ok.ops.mat_mul(a, b).numpy()
    np.testing.assert_array_equal(ok.ops.mat_mul(a, b, grad_a=True, grad_b=True).numpy(), plain)
    np.testing.assert_array_equal(ok.ops.batch_mat_mul(a[None], b[None], grad_x=True, grad_y=True).numpy()[0], plain)
    x = ok.tensor(a)
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.batch_mat_mul(ok.ops.expand_dims(ok.ops.mat_mul(x, b), 0), b.T[None])
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.ones((2, 3), np.float32) @ b @ b.T, rtol=1e-6)


def test_complex_abs_takes_x(backend: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.complex64):
        pytest.skip(f"backend {backend!r} holds no complex tensors")
    z = np.array([3 + 4j, -1j], np.complex64)
    assert ok.ops.complex_abs(x=z, Tout=ok.float32).numpy().tolist() == [5.0, 1.0]


@pytest.mark.parametrize("pads", [[0, 0, 3, 0, 0, 0, 0, 0], [0, 0, 0, 2, 0, 0, 0, 0], [0, 0, 0, 0, 2, 0, 0, 0],
                                  [0, 0, 0, 0, 1, 5, 0, 0]])
def test_max_pool_rejects_padding_as_wide_as_the_window(backend: str, pads: list[int]) -> None:
    # TensorFlow's pools (pooling_ops_common.cc) reject explicit padding as wide as the
    # window ("Top padding 3 needs to be smaller than the window size 2"), so no window
    # ever pools padding alone (TensorFlow 2.21's answer to tests/tf_conformance's
    # MaxPool/explicit_padding_larger_than_window).
    x = np.ones((1, 2, 2, 1), np.float32)
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 3, 3, 1], "padding": "EXPLICIT", "explicit_paddings": pads}
    with pytest.raises(ok.errors.InvalidArgumentError, match="MaxPool.*padding .* must be smaller than the window"):
        ok.ops.max_pool(x, **attrs)
    with pytest.raises(ok.errors.InvalidArgumentError, match="MaxPoolGrad.*padding .* must be smaller than the window"):
        ok.ops.max_pool_grad(x, np.ones((1, 1, 1, 1), np.float32), np.ones((1, 1, 1, 1), np.float32), **attrs)
    below = [min(p, 1) for p in pads]  # padding narrower than the window stays valid
    assert ok.ops.max_pool(x, **{**attrs, "explicit_paddings": below}).numpy().max() == 1.0


def test_arg_max_of_float16_starts_from_its_own_lowest(backend: str) -> None:
    # The same reducer in half: lowest() is -65504, so [-inf, -65504] stays at index 0,
    # whatever wider type a backend computes in.
    h = np.float16
    assert int(ok.ops.arg_max(np.array([-INF, -65504.0], h), 0).numpy()) == 0
    assert int(ok.ops.arg_max(np.array([-65504.0, -INF, 2.0], h), 0).numpy()) == 2
    assert int(ok.ops.arg_min(np.array([65504.0, INF], h), 0).numpy()) == 0
    assert int(ok.ops.arg_max(np.array([_, 1.0, _], h), 0).numpy()) == 1


def test_max_pool_of_float16_starts_from_its_own_lowest(backend: str) -> None:
    # In half, lowest() is -65504: a window of NaN and -inf pools to it, not to -inf.
    out = ok.ops.max_pool(POOL_X.astype(np.float16), **POOL_ATTRS).numpy().ravel()
    np.testing.assert_array_equal(out, np.array([1.0, 5.0, -65504.0, 4.0, 7.0, -65504.0], np.float16))
