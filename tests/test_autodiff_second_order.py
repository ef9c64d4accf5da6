"""Second-order gradients through nested GradientTapes, against analytic derivatives.

The gradient functions are written with ops, so the outer tape records the inner
tape's backward pass; differentiating the sum of a first derivative gives the
diagonal of the Hessian for elementwise ops.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

import opkernel as ok

ops = ok.ops


def total(t: ok.Tensor) -> ok.Tensor:
    return ops.sum(t, np.arange(len(t.shape), dtype=np.int32))


def first_and_second(f: Callable[..., ok.Tensor], *values: np.ndarray, wrt: int = 0) -> tuple[Any, list[Any]]:
    """(d sum f / d x_wrt, [d sum(d sum f / d x_wrt) / d x_i for every i])."""
    xs = [ok.tensor(v) for v in values]
    with ok.autodiff.GradientTape() as outer:
        outer.watch(xs)
        with ok.autodiff.GradientTape() as inner:
            inner.watch(xs)
            y = total(f(*xs))
        g = inner.gradient(y, xs[wrt])
        s = total(g)
    second = outer.gradient(s, xs, unconnected_gradients="zero")
    return g.numpy(), [h.numpy() for h in second]


X = np.array([[-1.3, -0.4, 0.2], [0.7, 1.1, 2.0]])

# op, f(x) -> tensor, f'(x), f''(x)
ELEMENTWISE = [
    ("Exp", ops.exp, np.exp, np.exp),
    ("Tanh", ops.tanh, lambda x: 1 - np.tanh(x) ** 2, lambda x: -2 * np.tanh(x) * (1 - np.tanh(x) ** 2)),
    (
        "Sigmoid",
        ops.sigmoid,
        lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s),
        lambda x: (s := 1 / (1 + np.exp(-x))) * (1 - s) * (1 - 2 * s),
    ),
    ("Sin", ops.sin, np.cos, lambda x: -np.sin(x)),
    ("Square", ops.square, lambda x: 2 * x, lambda x: 2 + 0 * x),
    ("Mul-self", lambda x: ops.mul(x, x), lambda x: 2 * x, lambda x: 2 + 0 * x),
    ("Pow-const_exponent", lambda x: ops.pow(ops.abs(x), 3.0), lambda x: 3 * x * np.abs(x), lambda x: 6 * np.abs(x)),
]


@pytest.mark.parametrize("name,f,d1,d2", ELEMENTWISE, ids=[e[0] for e in ELEMENTWISE])
def test_elementwise_second_derivative(name: str, f: Any, d1: Any, d2: Any, backend: str) -> None:
    g, (h,) = first_and_second(f, X)
    np.testing.assert_allclose(g, d1(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(h, d2(X), rtol=1e-12, atol=1e-12)


def test_mul_mixed_second_derivative(backend: str) -> None:
    # f = sum((x*y)^2): df/dx = 2 x y^2; d/dx sum(df/dx) = 2 y^2, d/dy sum(df/dx) = 4 x y.
    x, y = X, np.array([0.5, -1.5, 2.5])

    def f(a: ok.Tensor, b: ok.Tensor) -> ok.Tensor:
        z = ops.mul(a, b)
        return ops.mul(z, z)

    g, (hx, hy) = first_and_second(f, x, y)
    np.testing.assert_allclose(g, 2 * x * y**2, rtol=1e-12)
    np.testing.assert_allclose(hx, np.broadcast_to(2 * y**2, x.shape), rtol=1e-12)
    np.testing.assert_allclose(hy, (4 * x * y).sum(axis=0), rtol=1e-12)


def test_pow_second_derivatives(backend: str) -> None:
    x, y = np.array([0.5, 1.2, 2.0, 3.0]), np.array([-1.0, 0.5, 2.0, 2.5])
    g, (hxx, hxy) = first_and_second(ops.pow, x, y, wrt=0)
    np.testing.assert_allclose(g, y * x ** (y - 1), rtol=1e-12)
    np.testing.assert_allclose(hxx, y * (y - 1) * x ** (y - 2), rtol=1e-12)
    np.testing.assert_allclose(hxy, x ** (y - 1) * (1 + y * np.log(x)), rtol=1e-12)
    g, (hyx, hyy) = first_and_second(ops.pow, x, y, wrt=1)
    np.testing.assert_allclose(g, x**y * np.log(x), rtol=1e-12)
    np.testing.assert_allclose(hyy, x**y * np.log(x) ** 2, rtol=1e-12)
    np.testing.assert_allclose(hyx, hxy, rtol=1e-12)  # the mixed partials agree


@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_second_derivatives(transpose_a: bool, transpose_b: bool, backend: str) -> None:
    # f = sum((A B)^2), so dF/dA = 2 (A B) B^T, and with u = A^T 1, w = 1:
    # s = sum(dF/dA) = 2 u^T B B^T w;  ds/dA = 2 * outer(1, B B^T w);  ds/dB = 2 (u w^T + w u^T) B.
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    a_in = a.T.copy() if transpose_a else a
    b_in = b.T.copy() if transpose_b else b

    def f(p: ok.Tensor, q: ok.Tensor) -> ok.Tensor:
        return ops.square(ops.mat_mul(p, q, transpose_a=transpose_a, transpose_b=transpose_b))

    g, (ha, hb) = first_and_second(f, a_in, b_in)
    u, w = a.T @ np.ones(2), np.ones(3)
    expected_g = 2 * (a @ b) @ b.T
    expected_ha = 2 * np.outer(np.ones(2), b @ b.T @ w)
    expected_hb = 2 * (np.outer(u, w) + np.outer(w, u)) @ b
    np.testing.assert_allclose(g, expected_g.T if transpose_a else expected_g, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ha, expected_ha.T if transpose_a else expected_ha, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(hb, expected_hb.T if transpose_b else expected_hb, rtol=1e-12, atol=1e-12)


def test_third_order_through_three_tapes(backend: str) -> None:
    # d^3/dx^3 sin(x) = -cos(x)
    x = ok.tensor(X)
    with ok.autodiff.GradientTape() as t3:
        t3.watch(x)
        with ok.autodiff.GradientTape() as t2:
            t2.watch(x)
            with ok.autodiff.GradientTape() as t1:
                t1.watch(x)
                y = total(ops.sin(x))
            g1 = total(t1.gradient(y, x))
        g2 = total(t2.gradient(g1, x))
    np.testing.assert_allclose(t3.gradient(g2, x).numpy(), -np.cos(X), rtol=1e-12)


def _batch_norm_composed(x: ok.Tensor, scale: ok.Tensor, offset: ok.Tensor, mean: np.ndarray, variance: np.ndarray,
                         fmt: str, training: bool) -> ok.Tensor:
    axes = [0, 2, 3] if fmt == "NCHW" else [0, 1, 2]
    bshape = [1, -1, 1, 1] if fmt == "NCHW" else [1, 1, 1, -1]
    if training:
        m = ops.mean(x, axes, keep_dims=True)
        centered = x - m
        r = ops.rsqrt(ops.mean(ops.square(centered), axes, keep_dims=True) + np.float32(1e-3))
    else:
        centered = x - ops.reshape(ok.tensor(mean), bshape)
        r = ops.reshape(ok.tensor((1 / np.sqrt(variance + np.float32(1e-3))).astype(np.float32)), bshape)
    return centered * r * ops.reshape(scale, bshape) + ops.reshape(offset, bshape)


@pytest.mark.parametrize("fmt", ["NHWC", "NCHW"])
@pytest.mark.parametrize("training", [True, False], ids=["training", "inference"])
def test_batch_norm_second_order_equals_the_composition(backend: str, training: bool, fmt: str) -> None:
    """FusedBatchNormV3's gradient is FusedBatchNormGradV3, whose own gradient is written
    with ops: the second derivatives (through x, scale and offset, with an upstream
    gradient that depends on the output) equal those of batch normalization composed
    from elementwise ops and reductions."""
    rng = np.random.default_rng(7)
    shape = (3, 4, 2, 5) if fmt == "NHWC" else (3, 5, 4, 2)
    x0 = rng.standard_normal(shape).astype(np.float32)
    scale0 = rng.uniform(0.5, 2.0, 5).astype(np.float32)
    offset0 = rng.standard_normal(5).astype(np.float32)
    c = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal(shape).astype(np.float32)
    axes = (0, 2, 3) if fmt == "NCHW" else (0, 1, 2)
    mean, variance = x0.mean(axes), x0.var(axes) + np.float32(0.25)

    def fused(x: ok.Tensor, scale: ok.Tensor, offset: ok.Tensor) -> ok.Tensor:
        stats = (np.zeros(0, np.float32),) * 2 if training else (mean, variance)
        return ops.fused_batch_norm_v3(x, scale, offset, *stats, epsilon=1e-3, data_format=fmt,
                                       is_training=training)[0]

    def composed(x: ok.Tensor, scale: ok.Tensor, offset: ok.Tensor) -> ok.Tensor:
        return _batch_norm_composed(x, scale, offset, mean, variance, fmt, training)

    def derivatives(f: Callable[..., ok.Tensor]) -> list[np.ndarray]:
        xs = [ok.tensor(x0), ok.tensor(scale0), ok.tensor(offset0)]
        with ok.GradientTape() as outer:
            outer.watch(xs)
            with ok.GradientTape() as inner:
                inner.watch(xs)
                y = f(*xs)
                loss = total(y * y * c)  # its gradient dy = 2 c y depends on x, scale and offset
            gx, gscale, _ = inner.gradient(loss, xs)
            s = total(gx * w) + ops.sum(gscale * np.float32(0.5), [0])
        return [gx.numpy()] + [g.numpy() for g in outer.gradient(s, xs, unconnected_gradients="zero")]

    for got, want, name in zip(derivatives(fused), derivatives(composed), ["dx", "d2/dx", "d2/dscale", "d2/doffset"]):
        np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3, err_msg=name)


def test_softmax_cross_entropy_backprop_gradient_with_broadcast_features() -> None:
    # SoftmaxCrossEntropyWithLogits broadcasts features [1, C] against labels [B, C]: the
    # gradient through its backprop output takes the softmax Jacobian of a [B, C] gradient
    # with a [1, C] softmax, composed (SoftmaxGrad takes one shape), then summed back to [1, C].
    rng = np.random.default_rng(3)
    feats = rng.standard_normal((1, 4))
    labels = rng.dirichlet(np.ones(4), size=3)
    w = rng.standard_normal((3, 4))
    with ok.use_backend("cpu"):
        x = ok.tensor(feats)
        with ok.GradientTape() as tape:
            tape.watch(x)
            _, backprop = ok.ops.softmax_cross_entropy_with_logits(x, labels)
            total = ok.ops.sum(ok.ops.mul(backprop, w), [0, 1])
        got = tape.gradient(total, x).numpy()
    s = np.exp(feats - feats.max()) / np.exp(feats - feats.max()).sum()
    want = ((w - (w * s).sum(-1, keepdims=True)) * s).sum(0, keepdims=True)  # backprop = softmax - labels
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
