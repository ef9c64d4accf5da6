"""The suite's own rules: how values are compared and how the reference is stored.
(A comparison that let a difference through would pass every case silently.)"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import recording
from test_tf_values import _mismatch
from tf_suite import Reference

F32 = np.float32


@pytest.mark.parametrize("got, want", [
    ([np.nan, 1.0], [1.0, 1.0]),            # NaN where TensorFlow has a number
    ([1.0, 1.0], [np.nan, 1.0]),            # a number where TensorFlow has NaN
    ([np.inf], [-np.inf]),
    ([np.inf], [3.0e38]),
    ([0.0], [-0.0]),                        # signed zeros count
    ([1.0001], [1.0]),                      # past float32's default rtol
], ids=["nan_missing", "nan_extra", "inf_sign", "inf_vs_finite", "signed_zero", "past_tolerance"])
def test_float_differences_are_caught(got: list[float], want: list[float]) -> None:
    assert _mismatch(np.array(got, F32), np.array(want, F32), "float32", None) is not None


def test_float_agreement() -> None:
    got = np.array([np.nan, np.inf, -0.0, 1.0 + 5e-7, 0.0], F32)
    want = np.array([np.nan, np.inf, -0.0, 1.0, 5e-7], F32)
    assert _mismatch(got, want, "float32", None) is None


def test_integers_exact_and_tolerance_from_the_case() -> None:
    assert _mismatch(np.array([2**31 - 1], np.int32), np.array([2**31 - 2], np.int32), "int32", None)
    assert _mismatch(np.array([1.01], F32), np.array([1.0], F32), "float32", (0.02, 0.0)) is None


def test_complex_parts_and_shapes() -> None:
    want = np.array([1 + 1j, complex(2, -0.0)], np.complex64)
    assert _mismatch(np.array([1 + 1j, 2 + 0j], np.complex64), want, "complex64", None)   # imag -0 vs +0
    assert _mismatch(want[:1], want, "complex64", None)
    assert _mismatch(np.array([b"a"], np.bytes_), np.array([b"b"], np.bytes_), "string", None)


def test_recording_round_trip_keeps_dtypes_and_shapes(tmp_path: Path) -> None:
    arrays = {
        "A/x#o0": (np.float32(1.5) * np.ones((), F32), "float32"),            # 0-d stays 0-d
        "A/x#o1": (np.array([1.5, -0.0], ml_dtypes.bfloat16), "bfloat16"),
        "A/x#o2": (np.array([[b"x", b""]], object), "string"),
        "A/x#o3": (np.zeros((0, 3), np.int64), "int64"),
    }
    outputs = [{"dtype": d, "shape": list(a.shape)} for a, d in arrays.values()]
    doc = {"tensorflow": "t", "family": "f", "module_error": None, "cases": {"A/x": {"op": "A", "outputs": outputs}}}
    recording.write_family(tmp_path, "f", doc, arrays)
    first = (tmp_path / "values_f.npz").read_bytes()
    recording.write_family(tmp_path, "f", doc, arrays)
    assert (tmp_path / "values_f.npz").read_bytes() == first        # no timestamps: no diff on re-record
    back = recording.read_dir(tmp_path)["f"]["cases"]["A/x"]["outputs"]
    for (a, dtype), spec in zip(arrays.values(), back):
        v = spec["value"]
        assert v.shape == a.shape and recording.dtype_name(v) == dtype
        assert v.tolist() == a.tolist() or dtype == "bfloat16" and np.array_equal(v, a)
    assert np.signbit(back[1]["value"][1])


def test_upstream_gradient_is_deterministic() -> None:
    specs = [((2, 3), "float32"), ((2,), "int32"), ((1,), "complex64")]
    a, b = recording.upstream(7, specs), recording.upstream(7, specs)
    assert a[1] is None and b[1] is None
    assert all(np.array_equal(x, y) for x, y in zip(a, b) if x is not None)
    assert a[0].dtype == np.float32 and a[2].dtype == np.complex64 and a[2].imag.any()


def test_recorder_reports_broken_modules_and_cases_and_goes_on(reference: Reference) -> None:
    """One broken table or case is recorded as such; it never stops the others."""
    if reference.selftest is None:
        pytest.skip(f"the recorder did not run here: {reference.source}")
    fams = reference.selftest
    assert "this table is broken" in fams["broken"]["module_error"]
    odd = fams["odd"]["cases"]
    assert [g["input"] for g in odd["Add/fine"]["grads"]] == ["x", "y"]
    assert odd["Add/one_input"]["error"]["class"] == "RecorderError"
    assert "NoSuchOp" in odd["NoSuchOp/x"]["error"]["message"]
    assert odd["Add/int_grad"]["grad_error"]["class"] == "RecorderError"
    assert odd["MatMul/rejected"]["error"]["class"] == "InvalidArgumentError"
