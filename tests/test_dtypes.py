"""DType properties, as_dtype conversions and type classes."""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

from opkernel import dtypes
from opkernel.dtypes import as_dtype
from opkernel.errors import OpTypeError

# name, enum, numpy scalar type, floating, integer, unsigned, complex, quantized
PROPERTIES = [
    ("bool", "DT_BOOL", np.bool_, False, False, False, False, False),
    ("int8", "DT_INT8", np.int8, False, True, False, False, False),
    ("int16", "DT_INT16", np.int16, False, True, False, False, False),
    ("int32", "DT_INT32", np.int32, False, True, False, False, False),
    ("int64", "DT_INT64", np.int64, False, True, False, False, False),
    ("uint8", "DT_UINT8", np.uint8, False, True, True, False, False),
    ("uint16", "DT_UINT16", np.uint16, False, True, True, False, False),
    ("uint32", "DT_UINT32", np.uint32, False, True, True, False, False),
    ("uint64", "DT_UINT64", np.uint64, False, True, True, False, False),
    ("float16", "DT_HALF", np.float16, True, False, False, False, False),
    ("bfloat16", "DT_BFLOAT16", ml_dtypes.bfloat16, True, False, False, False, False),
    ("float32", "DT_FLOAT", np.float32, True, False, False, False, False),
    ("float64", "DT_DOUBLE", np.float64, True, False, False, False, False),
    ("complex64", "DT_COMPLEX64", np.complex64, False, False, False, True, False),
    ("complex128", "DT_COMPLEX128", np.complex128, False, False, False, True, False),
    ("string", "DT_STRING", np.object_, False, False, False, False, False),
    ("qint8", "DT_QINT8", np.int8, False, False, False, False, True),
    ("quint8", "DT_QUINT8", np.uint8, False, False, True, False, True),
    ("qint16", "DT_QINT16", np.int16, False, False, False, False, True),
    ("quint16", "DT_QUINT16", np.uint16, False, False, True, False, True),
    ("qint32", "DT_QINT32", np.int32, False, False, False, False, True),
]


def test_all_dtypes_listed_once() -> None:
    assert [dt.name for dt in dtypes.ALL_DTYPES] == [row[0] for row in PROPERTIES]
    assert len(set(dtypes.ALL_DTYPES)) == len(dtypes.ALL_DTYPES)


@pytest.mark.parametrize("row", PROPERTIES, ids=[row[0] for row in PROPERTIES])
def test_properties(row: tuple[object, ...]) -> None:
    name, enum, scalar, floating, integer, unsigned, complex_, quantized = row
    dt = as_dtype(name)
    assert (dt.name, dt.enum, dt.as_numpy_dtype) == (name, enum, scalar)
    assert dt.np == np.dtype(scalar)
    assert dt.size == np.dtype(scalar).itemsize
    flags = (dt.is_floating, dt.is_integer, dt.is_unsigned, dt.is_complex, dt.is_quantized)
    assert flags == (floating, integer, unsigned, complex_, quantized)
    assert dt.is_bool == (name == "bool")
    assert dt.is_numeric == (name not in ("bool", "string"))
    assert dt.is_numeric == (dt in dtypes.numbertype)


def test_repr_str_and_identity() -> None:
    assert repr(dtypes.float32) == "ok.float32"
    assert str(dtypes.bool_) == "bool"
    assert as_dtype("float32") is dtypes.float32
    assert {dtypes.int32: 1}[as_dtype(np.int32)] == 1
    assert dtypes.half is dtypes.float16 and dtypes.double is dtypes.float64


@pytest.mark.parametrize("dt", dtypes.ALL_DTYPES, ids=str)
def test_pickle_keeps_singletons(dt: dtypes.DType) -> None:
    assert pickle.loads(pickle.dumps(dt)) is dt


@pytest.mark.parametrize(
    "dt, lo, hi",
    [
        (dtypes.int8, -128, 127),
        (dtypes.uint8, 0, 255),
        (dtypes.int64, -(2**63), 2**63 - 1),
        (dtypes.uint64, 0, 2**64 - 1),
        (dtypes.qint8, -128, 127),
        (dtypes.quint16, 0, 65535),
        (dtypes.float16, -65504.0, 65504.0),
        (dtypes.float32, float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)),
        (dtypes.float64, float(np.finfo(np.float64).min), float(np.finfo(np.float64).max)),
    ],
    ids=str,
)
def test_min_max(dt: dtypes.DType, lo: float, hi: float) -> None:
    assert (dt.min, dt.max) == (lo, hi)


def test_bfloat16_limits() -> None:
    assert dtypes.bfloat16.max == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert dtypes.bfloat16.min == -dtypes.bfloat16.max


@pytest.mark.parametrize("dt", [dtypes.bool_, dtypes.string, dtypes.complex64, dtypes.complex128], ids=str)
def test_min_max_undefined(dt: dtypes.DType) -> None:
    with pytest.raises(OpTypeError, match="not a real number type"):
        dt.min
    with pytest.raises(OpTypeError):
        dt.max


AS_DTYPE = [
    (dtypes.float32, dtypes.float32),
    ("float", dtypes.float32),
    ("float32", dtypes.float32),
    ("DT_FLOAT", dtypes.float32),
    ("half", dtypes.float16),
    ("DT_HALF", dtypes.float16),
    ("double", dtypes.float64),
    ("float64", dtypes.float64),
    ("bool", dtypes.bool_),
    ("DT_BOOL", dtypes.bool_),
    ("string", dtypes.string),
    ("bfloat16", dtypes.bfloat16),
    ("qint8", dtypes.qint8),
    ("DT_QUINT16", dtypes.quint16),
    (np.dtype("float32"), dtypes.float32),
    (np.float64, dtypes.float64),
    (np.dtype(">i4"), dtypes.int32),
    (np.int8, dtypes.int8),
    (np.uint64, dtypes.uint64),
    (np.complex128, dtypes.complex128),
    (np.bool_, dtypes.bool_),
    (np.dtype(object), dtypes.string),
    (np.dtype("U5"), dtypes.string),
    (np.dtype("S3"), dtypes.string),
    (ml_dtypes.bfloat16, dtypes.bfloat16),
    (np.dtype(ml_dtypes.bfloat16), dtypes.bfloat16),
    (bool, dtypes.bool_),
    (int, dtypes.int32),
    (float, dtypes.float32),
    (complex, dtypes.complex64),
    (str, dtypes.string),
    (bytes, dtypes.string),
]


@pytest.mark.parametrize("value, expected", AS_DTYPE, ids=repr)
def test_as_dtype(value: object, expected: dtypes.DType) -> None:
    assert as_dtype(value) is expected


@pytest.mark.parametrize("dt", dtypes.ALL_DTYPES, ids=str)
def test_as_dtype_names_round_trip(dt: dtypes.DType) -> None:
    assert as_dtype(dt.name) is dt
    assert as_dtype(dt.enum) is dt
    assert as_dtype(dt.spec_name) is dt
    if not dt.is_quantized:
        assert as_dtype(dt.np) is dt
        assert as_dtype(dt.as_numpy_dtype) is dt


@pytest.mark.parametrize(
    "value", ["float31", "DT_NOPE", "", "Float32", 3, None, [1], np.dtype("M8[s]"), object, list], ids=repr
)
def test_as_dtype_rejects(value: object) -> None:
    with pytest.raises(OpTypeError, match="cannot interpret .* as a dtype; expected") as info:
        as_dtype(value)
    assert repr(value) in str(info.value)


def test_type_classes() -> None:
    real = {
        dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.int16,
        dtypes.int8, dtypes.uint16, dtypes.float16, dtypes.uint32, dtypes.uint64, dtypes.bfloat16,
    }
    quantized = {dtypes.qint8, dtypes.quint8, dtypes.qint16, dtypes.quint16, dtypes.qint32}
    assert dtypes.realnumbertype == real == dtypes.realnumerictype
    assert dtypes.quantizedtype == quantized
    assert dtypes.numbertype == real | {dtypes.complex64, dtypes.complex128} | quantized
    assert dtypes.numerictype == dtypes.numbertype
    assert dtypes.TYPE_CLASSES["type"] == set(dtypes.ALL_DTYPES)
    assert dtypes.TYPE_CLASSES["realnumbertype"] is dtypes.realnumbertype
    assert dtypes.bool_ not in dtypes.numbertype and dtypes.string not in dtypes.numbertype


@pytest.mark.parametrize("dt", dtypes.ALL_DTYPES, ids=str)
def test_real_dtype(dt: dtypes.DType) -> None:
    parts = {"complex64": dtypes.float32, "complex128": dtypes.float64}
    assert dt.real_dtype is parts.get(dt.name, dt)
    if dt.is_complex:
        assert dt.real_dtype.np == np.zeros(1, dt.np).real.dtype
