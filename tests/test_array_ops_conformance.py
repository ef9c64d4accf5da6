"""Array ops where opkernel differed from TensorFlow, and the deliberate differences of
tests/tf_conformance/cases_array.py checked against the mathematical definition.

TensorFlow's CPU kernels are the reference; these tests need no TensorFlow (numpy gives
the expected values).  Every test body runs on every installed backend.
"""

from __future__ import annotations

import numpy as np
import pytest

import opkernel as ok

# ---------------------------------------------------------------- Transpose


def test_transpose_counts_negative_perm_entries_from_the_end(backend: str) -> None:
    # tensorflow/core/kernels/transpose_op.cc: `if (d < 0) d += dims;` before the range check.
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = ok.ops.transpose(x, np.array([-1, 0, 1], np.int32))
    np.testing.assert_array_equal(y.numpy(), np.transpose(x, (2, 0, 1)))
    with pytest.raises(ok.errors.InvalidArgumentError, match="Transpose"):
        ok.ops.transpose(x, np.array([-4, 0, 1], np.int32))


def test_transpose_gradient_with_negative_perm(backend: str) -> None:
    # TensorFlow's own gradient fails here (InvertPermutation rejects -1); the definition
    # of the gradient of a permutation is the inverse permutation of the upstream gradient.
    x = ok.tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
    up = np.arange(24, dtype=np.float32).reshape(4, 2, 3) * 0.5
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = ok.ops.transpose(x, np.array([-1, -3, 1], np.int64))
    (g,) = tape.gradient([y], [x], output_gradients=[ok.tensor(up)])
    np.testing.assert_array_equal(g.numpy(), np.transpose(up, np.argsort((2, 0, 1))))


# ---------------------------------------------------------------- UnsortedSegmentSum


def test_unsorted_segment_sum_gradient_of_dropped_rows_is_positive_zero(backend: str) -> None:
    # TensorFlow (math_grad.py, _GatherDropNegatives) selects zeros for negative ids: +0.0,
    # whatever the upstream gradient of segment 0 (negative, inf or NaN) that is gathered.
    data = ok.tensor(np.ones((4, 2), np.float32))
    ids = np.array([0, -1, 1, -3], np.int32)
    up = np.array([[-2.0, np.inf], [3.0, np.nan]], np.float32)
    with ok.GradientTape() as tape:
        tape.watch(data)
        y = ok.ops.unsorted_segment_sum(data, ids, np.int32(2))
    (g,) = tape.gradient([y], [data], output_gradients=[ok.tensor(up)])
    got = g.numpy()
    np.testing.assert_array_equal(got[[0, 2]], up)
    np.testing.assert_array_equal(got[[1, 3]], np.zeros((2, 2), np.float32))
    assert not np.signbit(got[[1, 3]]).any()


# ---------------------------------------------------------------- zero padding of any dtype


@pytest.mark.parametrize("dtype", ["complex64", "complex128", "float16", "int8", "bool"])
def test_pad_and_strided_slice_grad_of_any_movable_dtype(backend: str, dtype: str) -> None:
    # The OpenCL backend's zero fill had no kernel for complex types: a raw KeyError.
    x = (np.arange(6).reshape(2, 3) + 1).astype(dtype)
    if dtype.startswith("complex"):
        x = x * (1 - 2j)
    padded = ok.ops.pad(x, np.array([[1, 2], [0, 3]], np.int32)).numpy()
    np.testing.assert_array_equal(padded, np.pad(x, [[1, 2], [0, 3]]))
    assert padded.dtype == x.dtype
    grad = ok.ops.strided_slice_grad(
        np.array([4, 5], np.int32), np.array([1, 0], np.int32), np.array([3, 5], np.int32), np.array([1, 2], np.int32), x
    ).numpy()
    expected = np.zeros((4, 5), dtype)
    expected[1:3, 0:5:2] = x
    np.testing.assert_array_equal(grad, expected)


# ---------------------------------------------------------------- deliberate differences


@pytest.mark.parametrize("dtype", ["int8", "int16", "uint16", "uint32"])
def test_range_of_types_tensorflow_has_no_cpu_kernel_for(backend: str, dtype: str) -> None:
    # cases_array.DIFFERENCES: TensorFlow registers Range for these in the OpDef but has no
    # CPU kernel; the definition is numpy's arange.
    if ok.as_dtype(dtype).name not in _kernel_types(backend, "Range", "Tidx"):
        pytest.skip(f"no Range kernel for {dtype} on {backend}")
    t = np.dtype(dtype).type
    for start, limit, delta in ((1, 9, 4), (0, 100, 7), (9, 1, -3) if np.dtype(dtype).kind == "i" else (3, 3, 1)):
        y = ok.ops.range(t(start), t(limit), t(delta))
        np.testing.assert_array_equal(y.numpy(), np.arange(start, limit, delta, dtype=dtype))
        assert y.dtype == ok.as_dtype(dtype)


def test_tile_of_uint16(backend: str) -> None:
    # cases_array.DIFFERENCES: TensorFlow's CPU Tile has no uint16 instantiation.
    x = np.array([[1, 65535], [7, 0]], np.uint16)
    np.testing.assert_array_equal(ok.ops.tile(x, np.array([2, 3], np.int32)).numpy(), np.tile(x, (2, 3)))


def test_where_of_float16_and_of_scalars(backend: str) -> None:
    # cases_array.DIFFERENCES: TensorFlow's CPU Where refuses float16 and rank 0; the
    # definition is numpy's argwhere (NaN is non-zero, -0.0 is zero).
    x = np.array([[0.0, np.nan], [-0.0, 1.5]], np.float16)
    if "float16" in _kernel_types(backend, "Where", "T"):
        np.testing.assert_array_equal(ok.ops.where(x).numpy(), np.argwhere(x))
    for v in (True, False):
        y = ok.ops.where(np.bool_(v)).numpy()
        assert y.dtype == np.int64 and y.shape == np.argwhere(np.bool_(v)).shape


def _kernel_types(backend: str, op: str, attr: str) -> set[str]:
    """The dtypes ``attr`` may take in ``op``'s kernels on ``backend`` (a backend may hold fewer types)."""
    from opkernel import kernels
    from opkernel.dtypes import ALL_DTYPES

    names: set[str] = set()
    for k in kernels.kernels_for(op, backend):
        allowed = k.type_constraints.get(attr)
        names |= {d.name for d in (ALL_DTYPES if allowed is None else allowed)}
    return names


# ---------------------------------------------------------------- StringToNumber


@pytest.mark.parametrize(
    "out_type,strings,expected",
    [
        ("float64", ["0.1", "-1e300", "0x1p3", " 2 "], [0.1, -1e300, 8.0, 2.0]),
        ("int64", ["9223372036854775807", "-3", "+5"], [2**63 - 1, -3, 5]),
        ("uint32", ["4294967295", "0"], [2**32 - 1, 0]),
        ("uint64", ["18446744073709551615"], [2**64 - 1]),
        ("float32", ["1e39", "-0x10", "infinity"], [np.inf, -16.0, np.inf]),
    ],
)
def test_string_to_number_takes_tensorflows_out_types_and_syntax(
    backend: str, out_type: str, strings: list[str], expected: list[float]
) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.string):
        pytest.skip("strings cannot live on a CUDA device: StringToNumber has a cpu kernel only (docs/cuda.md)")
    # tensorflow/core/kernels/string_to_number_op.cc: float, double, int32, int64, uint32, uint64
    # through strtod / safe_strto*; a float past float32's range is inf.
    y = ok.ops.string_to_number(np.array([s.encode() for s in strings], object), out_type=out_type)
    assert y.dtype == ok.as_dtype(out_type)
    np.testing.assert_array_equal(y.numpy(), np.array(expected, out_type))


@pytest.mark.parametrize(
    "out_type,text", [("float32", "1_000"), ("int64", "1_000"), ("float64", "abc"), ("uint32", "-1"), ("int32", "0x10")]
)
def test_string_to_number_rejects_what_tensorflow_rejects(backend: str, out_type: str, text: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.string):
        pytest.skip("strings cannot live on a CUDA device: StringToNumber has a cpu kernel only (docs/cuda.md)")
    # Python's float/int read digit separators, and float.fromhex reads "abc"; strtod does not.
    with pytest.raises(ok.errors.InvalidArgumentError, match="StringToNumber"):
        ok.ops.string_to_number(np.array([text.encode()], object), out_type=out_type)


# ---------------------------------------------------------------- Reshape


@pytest.mark.parametrize(
    "shape,sizes,expected",
    [((0, 4), [-1, 0], (4, 0)), ((0, 6), [-1, 0, 3], (2, 0, 3)), ((0,), [0, -1, 0], (0, 1, 0)),
     ((3, 0, 5), [-1, 0], (15, 0)), ((0, 4), [-1, 0, 3], (1, 0, 3)), ((0, 4), [-1, 3], (0, 3))],
)
def test_reshape_of_an_empty_tensor_infers_minus_one_as_tensorflow(
    backend: str, shape: tuple[int, ...], sizes: list[int], expected: tuple[int, ...]
) -> None:
    # tensorflow/core/kernels/reshape_op.h: with a 0 among the sizes, the -1 is the product of
    # the input's non-zero dimensions over the other non-zero sizes (integer division).
    y = ok.ops.reshape(np.zeros(shape, np.float32), np.array(sizes, np.int32))
    assert tuple(y.shape) == expected and y.numpy().shape == expected


def test_reshape_of_a_non_empty_tensor_to_zero_elements_is_rejected(backend: str) -> None:
    with pytest.raises(ok.errors.InvalidArgumentError, match="Reshape"):
        ok.ops.reshape(np.zeros((2, 3), np.float32), np.array([-1, 0], np.int32))


# ---------------------------------------------------------------- Fill, ZerosLike, OnesLike


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_fill_zeros_like_and_ones_like_of_complex(backend: str, dtype: str) -> None:
    # TensorFlow has CPU kernels for complex Fill/ZerosLike/OnesLike; OpenCL had none.
    x = (np.arange(210).reshape(70, 3) * (1 - 2j)).astype(dtype)  # past one work-group of 64
    zeros = ok.ops.zeros_like(x).numpy()
    np.testing.assert_array_equal(zeros, np.zeros_like(x))
    assert zeros.dtype == x.dtype and not np.signbit(zeros.real).any() and not np.signbit(zeros.imag).any()
    np.testing.assert_array_equal(ok.ops.ones_like(x).numpy(), np.ones_like(x))
    filled = ok.ops.fill(np.array([67, 2], np.int32), np.array(-0.0 - 2.5j, dtype)).numpy()
    np.testing.assert_array_equal(filled, np.full((67, 2), -0.0 - 2.5j, dtype))
    assert filled.dtype == x.dtype and np.signbit(filled.real).all()
    assert ok.ops.fill(np.array([0, 2], np.int32), np.array(1j, dtype)).shape == (0, 2)


# ---------------------------------------------------------------- Range of half, Where of complex


def test_range_of_float16_in_half_arithmetic(backend: str) -> None:
    # tensorflow/core/kernels/sequence_ops.cc: start + T(i) * delta in Eigen::half, each step
    # rounded to half (numpy's float16 does the same); OpenCL had no float16 kernel.
    y = ok.ops.range(np.float16(0), np.float16(10), np.float16(0.3))
    i = np.arange(34).astype(np.float16)
    assert y.dtype == ok.float16
    np.testing.assert_array_equal(y.numpy(), np.float16(0) + i * np.float16(0.3))
    assert ok.ops.range(np.float16(1), np.float16(1), np.float16(1)).shape == (0,)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_where_of_complex(backend: str, dtype: str) -> None:
    # A complex element is true when either part is non-zero (NaN is non-zero, -0.0 is zero).
    x = np.array([[0j, 1j], [complex(-0.0, 0.0), complex(np.nan, 0)], [2, 0]], dtype)
    np.testing.assert_array_equal(ok.ops.where(x).numpy(), np.argwhere(x))


def test_transpose_rejects_int64_perm_entries_past_int32(backend: str) -> None:
    # cases_array.DIFFERENCES: TensorFlow truncates int64 perm entries to int32 (2**32 + 1 acts
    # as 1); a permutation of 3 dimensions has no entry 2**32 + 1, so opkernel rejects it.
    x = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(ok.errors.InvalidArgumentError, match="Transpose"):
        ok.ops.transpose(x, np.array([2**32 + 1, 0, 2], np.int64))


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unsorted_segment_sum_of_complex(backend: str, dtype: str) -> None:
    # TensorFlow sums complex segments on CPU; OpenCL had no complex kernel.
    x = (np.arange(18).reshape(6, 3) * (1 - 2j) + 0.5j).astype(dtype)
    ids = np.array([0, 2, 0, -1, 2, 2], np.int32)
    y = ok.ops.unsorted_segment_sum(x, ids, np.int32(4))
    expected = np.zeros((4, 3), dtype)
    for row, i in zip(x, ids):
        if i >= 0:
            expected[i] += row
    assert y.dtype == ok.as_dtype(dtype)
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_one_hot_of_complex(backend: str, dtype: str) -> None:
    # TensorFlow's CPU OneHot takes any T; OpenCL had no complex kernel.
    on, off = np.array(1.5 - 2j, dtype), np.array(complex(-0.0, 0.25), dtype)
    idx = np.arange(100, dtype=np.int32).reshape(50, 2) % 7 - 1
    y = ok.ops.one_hot(idx, np.int32(7), on, off, axis=1).numpy()
    expected = np.where((idx[:, None, :] == np.arange(7)[None, :, None]), on, off).astype(dtype)
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(np.signbit(y.real), np.signbit(expected.real))


def test_fill_one_hot_and_where_of_bfloat16(backend: str) -> None:
    # TensorFlow's CPU kernels take bfloat16 here; OpenCL had none (these ops only move values).
    if not ok.engine.backend_instance(backend).supports_dtype(ok.bfloat16):
        pytest.skip(f"backend {backend!r} holds no bfloat16 tensors (cupy has no bfloat16: docs/cuda.md)")
    bf16 = ok.bfloat16.np
    x = np.array([[0.0, 1.5], [-0.0, np.nan]], np.float32).astype(bf16)
    np.testing.assert_array_equal(ok.ops.where(x).numpy(), np.argwhere(x))
    assert ok.ops.zeros_like(x).numpy().tobytes() == np.zeros((2, 2), bf16).tobytes()
    assert ok.ops.ones_like(x).numpy().tobytes() == np.ones((2, 2), bf16).tobytes()
    filled = ok.ops.fill(np.array([70], np.int32), np.array(-2.5, bf16))
    assert filled.dtype == ok.bfloat16 and filled.numpy().tobytes() == np.full(70, -2.5, bf16).tobytes()
    hot = ok.ops.one_hot(np.array([0, 2, -1], np.int32), np.int32(3), np.array(1.5, bf16), np.array(-0.0, bf16))
    expected = np.where(np.array([0, 2, -1])[:, None] == np.arange(3), 1.5, -0.0).astype(bf16)
    assert hot.dtype == ok.bfloat16 and hot.numpy().tobytes() == expected.tobytes()
