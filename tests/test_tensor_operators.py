"""Tensors behave like TensorFlow 2's (and numpy's, for the methods): Python indexing
through StridedSlice and GatherV2, elementwise comparisons giving bool tensors, ``**``,
``%``, ``//``, ``abs()``, ``~``, ``.T``, the usual methods, unhashable tensors with
``.ref()``; every one on every backend against numpy, recorded on tapes and traced."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import opkernel as ok

X = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5

KEYS: list[Any] = [
    0, -1, 1, (0, 2), (1, -1, 3), slice(None), slice(1, None), slice(None, None, -1), slice(-2, None),
    (slice(None), 1), (Ellipsis, 2), (Ellipsis, slice(None, None, 2)), (None, 0), (0, None, slice(1, 3)),
    (slice(None), slice(None, None, -2), Ellipsis), (1, slice(0, 3, 2), slice(3, 0, -1)), (Ellipsis, None),
    (slice(5, 9),), (np.int64(1), np.int32(-1)), [1, 0, 1], np.array([1, 1]),
]


@pytest.mark.parametrize("key", KEYS, ids=[repr(k) for k in KEYS])
def test_indexing_matches_numpy(backend: str, key: Any) -> None:
    t = ok.tensor(X)
    got = t[key]
    want = X[key]
    assert got.shape == want.shape and got.dtype == ok.float32
    np.testing.assert_array_equal(got.numpy(), want)


def test_indexing_with_an_int_tensor_and_iteration(backend: str) -> None:
    t = ok.tensor(X)
    np.testing.assert_array_equal(t[ok.tensor(np.array([1, 0], np.int64))].numpy(), X[[1, 0]])
    np.testing.assert_array_equal(t[ok.tensor(np.int32(1))].numpy(), X[1])
    rows = list(t)
    assert len(rows) == 2 and all(isinstance(r, ok.Tensor) for r in rows)
    np.testing.assert_array_equal(rows[1].numpy(), X[1])


def test_bad_indices_say_what_is_allowed(backend: str) -> None:
    t = ok.tensor(X)
    with pytest.raises(TypeError, match="bool mask"):
        t[np.array([True, False])]
    with pytest.raises(TypeError, match="got float 1.5"):
        t[1.5]
    with pytest.raises(TypeError, match="got str 'a'"):
        t[0, "a"]
    with pytest.raises(ValueError, match="step cannot be zero"):
        t[::0]
    with pytest.raises(ok.errors.InvalidArgumentError):
        t[5]  # out of range: StridedSlice's own error
    with pytest.raises(TypeError, match="does not support item assignment"):
        t[0] = 1.0
    with pytest.raises(TypeError, match="0-d"):
        iter(ok.tensor(1.0))


@pytest.mark.parametrize("name, fn", [
    ("==", lambda a, b: a == b), ("!=", lambda a, b: a != b), ("<", lambda a, b: a < b),
    ("<=", lambda a, b: a <= b), (">", lambda a, b: a > b), (">=", lambda a, b: a >= b),
])
def test_comparisons_are_elementwise_bool_tensors(backend: str, name: str, fn: Any) -> None:
    a = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], np.float32)
    b = np.array([2.0, 2.0, 2.0], np.float32)
    for left, right in ((ok.tensor(a), ok.tensor(b)), (ok.tensor(a), 2.0), (2.0, ok.tensor(a)), (a, ok.tensor(b))):
        got = fn(left, right)
        want = fn(np.asarray(left), np.asarray(right))
        assert isinstance(got, ok.Tensor) and got.dtype == ok.bool_, (name, type(got))
        np.testing.assert_array_equal(got.numpy(), want)


def test_arithmetic_operators_match_numpy(backend: str) -> None:
    a = np.array([[-3.5, -1.0, 0.0], [1.0, 2.5, 7.0]], np.float32)
    t = ok.tensor(a)
    np.testing.assert_allclose((t ** 2).numpy(), a ** 2)
    np.testing.assert_allclose((2.0 ** ok.tensor(np.array([1.0, 3.0], np.float32))).numpy(), [2.0, 8.0])
    np.testing.assert_array_equal((t % 2.0).numpy(), np.mod(a, 2.0))
    np.testing.assert_array_equal((7.0 % ok.tensor(np.array([2.0, -3.0], np.float32))).numpy(), np.mod(7.0, [2.0, -3.0]))
    np.testing.assert_array_equal((t // 2.0).numpy(), np.floor_divide(a, 2.0))
    np.testing.assert_array_equal((9 // ok.tensor(np.array([2, -4], np.int32))).numpy(), [4, -3])
    np.testing.assert_array_equal(abs(t).numpy(), np.abs(a))
    np.testing.assert_array_equal((~(t > 0)).numpy(), ~(a > 0))
    with pytest.raises(TypeError, match="logical not of a bool tensor"):
        ~t
    assert t.T.shape == (3, 2)
    np.testing.assert_array_equal(ok.tensor(X).T.numpy(), X.T)


def test_abs_of_a_complex_tensor_is_its_real_magnitude(backend: str) -> None:
    if not ok.engine.backend_instance(backend).supports_dtype(ok.complex64):
        pytest.skip(f"{backend} has no complex64")
    z = ok.tensor(np.array([3 + 4j, -1j], np.complex64))
    got = abs(z)
    assert got.dtype == ok.float32
    np.testing.assert_allclose(got.numpy(), [5.0, 1.0])


def test_methods_match_numpy(backend: str) -> None:
    t = ok.tensor(X)
    np.testing.assert_array_equal(t.reshape(4, -1).numpy(), X.reshape(4, -1))
    np.testing.assert_array_equal(t.reshape((6, 4)).numpy(), X.reshape(6, 4))
    assert t.astype("int32").dtype == ok.int32 and t.astype(ok.float32) is t and t.cast("float64").dtype == ok.float64
    np.testing.assert_allclose(t.sum().numpy(), X.sum())
    np.testing.assert_allclose(t.sum(axis=1, keepdims=True).numpy(), X.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(t.mean(axis=(0, 2)).numpy(), X.mean(axis=(0, 2)), rtol=1e-6)
    np.testing.assert_array_equal(t.max(axis=-1).numpy(), X.max(axis=-1))
    np.testing.assert_array_equal(t.min().numpy(), X.min())
    assert t.argmax().dtype == ok.int64 and int(t.argmax()) == X.argmax()
    np.testing.assert_array_equal(t.argmax(axis=2).numpy(), X.argmax(axis=2))


def test_tensors_are_unhashable_and_refs_are_keys(backend: str) -> None:
    a, b = ok.tensor([1.0]), ok.tensor([1.0])
    with pytest.raises(TypeError, match=r"unhashable.*ref\(\)"):
        {a: 1}
    with pytest.raises(TypeError, match="unhashable"):
        hash(ok.Variable([1.0]))
    table = {a.ref(): "a", b.ref(): "b"}
    assert table[a.ref()] == "a" and table[b.ref()] == "b" and a.ref().deref() is a
    assert a.ref() != b.ref() and (a == None) is False and (a != None) is True  # noqa: E711


def test_indexing_and_operators_are_differentiable(backend: str) -> None:
    x = ok.tensor(X)
    with ok.GradientTape() as tape:
        tape.watch(x)
        y = (x[1, :, 1:3] ** 2).sum() + abs(x[0, -1]).sum() + x[[0, 0]].sum()
    g = tape.gradient(y, x).numpy()
    want = np.zeros_like(X)
    want[1, :, 1:3] += 2 * X[1, :, 1:3]
    want[0, -1] += np.sign(X[0, -1])
    want[0] += 2.0
    np.testing.assert_allclose(g, want, rtol=1e-6)


def test_operators_are_traced(backend: str) -> None:
    @ok.function
    def f(x: ok.Tensor) -> ok.Tensor:
        return ((x[:, 1:] > 0).astype("float32") * x[:, 1:] ** 2).sum(axis=1) // 1.0 % 100.0

    x = ok.tensor(X[0])
    want = (((X[0][:, 1:] > 0) * X[0][:, 1:] ** 2).sum(axis=1) // 1.0) % 100.0
    np.testing.assert_allclose(f(x).numpy(), want)
    ops = [n.op for n in f.get_concrete_function(x).graph.nodes]
    assert "StridedSlice" in ops and "Greater" in ops and "Pow" in ops and "FloorMod" in ops, ops


def test_matmul_operator_is_tf_matmul_on_every_rank(backend: str) -> None:
    """``@`` is tf.matmul: MatMul on matrices, BatchMatMul (broadcast batch dimensions)
    when either side has rank 3 or more, recorded on tapes and traced as such."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    b = rng.standard_normal((3, 5, 2)).astype(np.float32)
    m = rng.standard_normal((5, 2)).astype(np.float32)
    np.testing.assert_allclose((ok.tensor(a) @ ok.tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((ok.tensor(a) @ m).numpy(), a @ m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((a[0, 0] @ ok.tensor(b)).numpy(), a[0, 0] @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose((ok.tensor(a[0, 0]) @ ok.tensor(m)).numpy(), a[0, 0] @ m, rtol=1e-5, atol=1e-6)

    x = ok.Variable(a)
    with ok.GradientTape() as tape:
        y = (x @ ok.tensor(m)).sum()
    np.testing.assert_allclose(tape.gradient(y, x).numpy(), np.broadcast_to(m.sum(axis=1), a.shape), rtol=1e-5)

    @ok.function
    def f(p: ok.Tensor, q: ok.Tensor) -> ok.Tensor:
        return p @ q

    np.testing.assert_allclose(f(ok.tensor(a), ok.tensor(b)).numpy(), a @ b, rtol=1e-5, atol=1e-6)
    ops = [n.op for n in f.get_concrete_function(ok.tensor(a), ok.tensor(b)).graph.nodes]
    assert "BatchMatMul" in ops and "MatMul" not in ops, ops
    with pytest.raises(ok.errors.OpkernelError, match="MatMul"):
        ok.tensor(a[0, 0]) @ ok.tensor(a[0, 0])  # [4, 5] @ [4, 5]
