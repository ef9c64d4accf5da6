"""ok.nn's layers, activations, optimizers, schedules and initializers against numpy
references, on every backend."""

from __future__ import annotations

import math

import numpy as np
import pytest

import opkernel as ok
from opkernel.errors import InvalidArgumentError

RNG = np.random.default_rng(7)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf)(x.astype(np.float64))


def test_dense_takes_inputs_of_any_rank(backend: str) -> None:
    layer = ok.nn.Dense(4, 3, "relu", seed=1)
    x = RNG.standard_normal((2, 5, 4)).astype(np.float32)
    want = np.maximum(x @ layer.kernel.numpy() + layer.bias.numpy(), 0)
    got = layer(ok.tensor(x))
    assert got.shape == (2, 5, 3)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer(ok.tensor(x[0, 0])).numpy(), want[0, 0], rtol=1e-5, atol=1e-6)

    # traced with an unknown batch size: the output shape comes from the input's at run time
    @ok.function(input_signature=[ok.TensorSpec([None, 5, 4], "float32")])
    def f(t: ok.Tensor) -> ok.Tensor:
        return layer(t)

    np.testing.assert_allclose(f(ok.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("approximate", [False, True])
def test_gelu_exact_and_tanh(backend: str, approximate: bool) -> None:
    x = np.linspace(-4, 4, 17, dtype=np.float32)
    if approximate:
        want = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        want = 0.5 * x * (1 + _erf(x / math.sqrt(2)))
    np.testing.assert_allclose(ok.nn.gelu(ok.tensor(x), approximate=approximate).numpy(), want, rtol=1e-5, atol=1e-6)
    layer = ok.nn.Dense(17, 2, "gelu" if not approximate else "gelu_tanh", seed=3)
    pre = x[None] @ layer.kernel.numpy() + layer.bias.numpy()
    ref = 0.5 * pre * (1 + (np.tanh(math.sqrt(2 / math.pi) * (pre + 0.044715 * pre ** 3)) if approximate
                            else _erf(pre / math.sqrt(2))))
    np.testing.assert_allclose(layer(ok.tensor(x[None])).numpy(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
def test_softmax_along_any_axis(backend: str, axis: int) -> None:
    x = RNG.standard_normal((2, 3, 4)).astype(np.float32)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    np.testing.assert_allclose(ok.nn.softmax(ok.tensor(x), axis).numpy(), e / e.sum(axis=axis, keepdims=True),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidArgumentError, match="axis 3 is out of range"):
        ok.nn.softmax(ok.tensor(x), 3)


def test_embedding_looks_up_rows_and_its_gradient_reaches_only_them(backend: str) -> None:
    emb = ok.nn.Embedding(10, 4, seed=2)
    table = emb.embeddings.numpy().copy()
    ids = np.array([[1, 3], [3, 9]], np.int32)
    with ok.GradientTape() as tape:
        out = emb(ids)
        loss = out.sum()
    np.testing.assert_array_equal(out.numpy(), table[ids])
    (g,) = tape.gradient(loss, emb.trainable_variables)
    want = np.zeros_like(table)
    np.add.at(want, ids.ravel(), 1.0)
    np.testing.assert_allclose(g.numpy(), want)


@pytest.mark.parametrize("fused", [True, False])
def test_layer_normalization(backend: str, fused: bool) -> None:
    layer = ok.nn.LayerNormalization(4, epsilon=1e-3, fused=fused)
    layer.gamma.assign([1.0, 2.0, 0.5, 1.0])
    layer.beta.assign([0.0, 1.0, 0.0, -1.0])
    x = RNG.standard_normal((3, 2, 4)).astype(np.float32) * 3 + 1
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-3) * np.array([1, 2, 0.5, 1]) + np.array([0, 1, 0, -1])
    np.testing.assert_allclose(layer(ok.tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
    assert len(layer.variables) == 2
    err = ok.testing.compute_gradient_error(lambda t: layer(t), [ok.tensor(x[:1, :1])])
    assert err < 2e-2, err
    with pytest.raises(InvalidArgumentError, match="epsilon must be positive"):
        ok.nn.LayerNormalization(4, epsilon=0.0)


def test_fused_and_composed_layer_normalization_agree_with_gradients(backend: str) -> None:
    """The fused op and the composition give the same values, gradients and second-order
    gradients (FusedLayerNormGrad's own gradient, through dx, dgamma and dbeta)."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 16)) * 2 + 0.5).astype(np.float32)
    g = rng.standard_normal(x.shape).astype(np.float32)
    results = []
    for fused in (True, False):
        layer = ok.nn.LayerNormalization(16, fused=fused)
        layer.gamma.assign(np.linspace(0.5, 1.5, 16).astype(np.float32))
        layer.beta.assign(np.linspace(-1, 1, 16).astype(np.float32))
        xv = ok.Variable(x)
        with ok.GradientTape() as tape:
            y = layer(xv)
        grads = tape.gradient(y, [xv, layer.gamma, layer.beta], output_gradients=[ok.tensor(g)])
        results.append([y.numpy()] + [t.numpy() for t in grads])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=2e-5)
    second = []
    w = rng.standard_normal((2, 3, 6))
    for fused in (True, False):
        layer = ok.nn.LayerNormalization(6, fused=fused, dtype="float64")
        layer.gamma.assign(np.linspace(0.5, 1.5, 6))
        layer.beta.assign(np.linspace(-1, 1, 6))
        xv = ok.Variable(x[..., :6].astype(np.float64))
        with ok.GradientTape() as outer:
            with ok.GradientTape() as inner:
                y = ok.ops.sum(ok.ops.mul(ok.ops.square(layer(xv)), w), [0, 1, 2])
            dx, dg, db = inner.gradient(y, [xv, layer.gamma, layer.beta])
            z = ok.ops.sum(ok.ops.square(dx), [0, 1, 2]) + ok.ops.sum(dg * dg, [0]) + ok.ops.sum(db * dg, [0])
        second.append([t.numpy() for t in outer.gradient(z, [xv, layer.gamma, layer.beta])])
    for a, b in zip(*second):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9)


def test_clip_by_global_norm(backend: str) -> None:
    a = np.array([3.0, 4.0], np.float32)
    b = np.array([[12.0]], np.float32)
    clipped, norm = ok.nn.clip_by_global_norm([ok.tensor(a), None, ok.tensor(b)], 6.5)
    assert clipped[1] is None and float(norm) == pytest.approx(13.0)
    np.testing.assert_allclose(clipped[0].numpy(), a * 0.5)  # type: ignore[union-attr]
    np.testing.assert_allclose(clipped[2].numpy(), b * 0.5)  # type: ignore[union-attr]
    same, _ = ok.nn.clip_by_global_norm([ok.tensor(a)], 100.0)
    np.testing.assert_allclose(same[0].numpy(), a)  # type: ignore[union-attr]
    with pytest.raises(InvalidArgumentError, match="clip_norm must be positive"):
        ok.nn.clip_by_global_norm([ok.tensor(a)], 0.0)


def test_adamw_matches_its_definition(backend: str) -> None:
    lr, wd, b1, b2, eps = 0.1, 0.05, 0.9, 0.999, 1e-7
    w0 = np.array([1.0, -2.0, 0.5], np.float32)
    grads = [np.array([0.3, -0.1, 0.2], np.float32), np.array([-0.2, 0.4, 0.0], np.float32)]
    var = ok.Variable(w0)
    opt = ok.nn.AdamW(lr, weight_decay=wd)
    w, m, v = w0.astype(np.float64), np.zeros(3), np.zeros(3)
    for t, g in enumerate(grads, 1):
        opt.apply_gradients([(ok.tensor(g), var)])
        w = w - lr * wd * w  # decoupled decay first
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
        lr_t = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        w = w - lr_t * m / (np.sqrt(v) + eps)
        np.testing.assert_allclose(var.numpy(), w, rtol=1e-5)
    with pytest.raises(InvalidArgumentError, match="weight_decay"):
        ok.nn.AdamW(weight_decay=-1.0)


def test_learning_rate_schedules() -> None:
    assert ok.nn.ConstantSchedule(0.1)(50) == 0.1
    step = ok.nn.StepDecay(1.0, 0.5, 10)
    assert [step(s) for s in (0, 9, 10, 25)] == [1.0, 1.0, 0.5, 0.25]
    assert ok.nn.StepDecay(1.0, 0.5, 10, staircase=False)(5) == pytest.approx(0.5 ** 0.5)
    cosine = ok.nn.CosineDecay(1.0, 100, alpha=0.1)
    assert cosine(0) == pytest.approx(1.0) and cosine(50) == pytest.approx(0.55) and cosine(200) == pytest.approx(0.1)
    warm = ok.nn.LinearWarmup(cosine, 10)
    assert [warm(s) for s in (0, 5)] == [0.0, pytest.approx(0.5)] and warm(10) == pytest.approx(1.0)
    with pytest.raises(InvalidArgumentError, match="decay_steps must be positive"):
        ok.nn.CosineDecay(1.0, 0)


def test_an_optimizer_follows_its_schedule_eagerly_and_refuses_it_traced(backend: str) -> None:
    var = ok.Variable(np.zeros(1, np.float32))
    opt = ok.nn.SGD(ok.nn.StepDecay(1.0, 0.5, 1))
    for _ in range(3):
        opt.apply_gradients([(ok.tensor(np.ones(1, np.float32)), var)])
    np.testing.assert_allclose(var.numpy(), [-(1.0 + 0.5 + 0.25)])

    @ok.function
    def step(g: ok.Tensor) -> None:
        opt.apply_gradients([(g, var)])

    with pytest.raises(InvalidArgumentError, match="set opt.learning_rate = schedule"):
        step(ok.tensor(np.ones(1, np.float32)))


def test_initializers() -> None:
    rng = np.random.default_rng(0)
    t = ok.nn.truncated_normal(0.1)((2000,), ok.float32, rng)
    assert t.dtype == np.float32 and np.abs(t).max() <= 0.2 and 0.07 < t.std() < 0.1
    for mode, n in (("fan_in", 300), ("fan_out", 100), ("fan_avg", 200)):
        for dist in ("truncated_normal", "untruncated_normal", "uniform"):
            w = ok.nn.variance_scaling(2.0, mode, dist)((300, 100), ok.float32, rng)
            assert w.shape == (300, 100) and w.var() == pytest.approx(2.0 / n, rel=0.1), (mode, dist, w.var())
    q = ok.nn.orthogonal()((6, 4), ok.float64, rng)
    np.testing.assert_allclose(q.T @ q, np.eye(4), atol=1e-12)
    wide = ok.nn.orthogonal(2.0)((3, 5), ok.float32, rng)
    np.testing.assert_allclose(wide @ wide.T, 4 * np.eye(3), atol=1e-5)
    assert ok.nn.ones((2,), ok.float32, rng).tolist() == [1.0, 1.0]
    with pytest.raises(InvalidArgumentError, match="mode must be"):
        ok.nn.variance_scaling(mode="fan")
    with pytest.raises(InvalidArgumentError, match="rank 2 or more"):
        ok.nn.orthogonal()((3,), ok.float32, rng)


# ---------------------------------------------------------------- MultiHeadAttention


def _mha_reference(layer, q, v, mask=None, causal=False):
    """numpy: the same projections, scores, masks (-1e9 added), softmax and output."""
    h, k, kv = layer.num_heads, layer.key_dim, layer.value_dim

    def proj(x, dense, size):
        y = x @ dense.kernel.numpy() + dense.bias.numpy()
        return y.reshape(x.shape[0], x.shape[1], h, size).transpose(0, 2, 1, 3)

    qh, kh, vh = proj(q, layer.query_dense, k), proj(v, layer.key_dense, k), proj(v, layer.value_dense, kv)
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(k)
    keep = np.ones(scores.shape[-2:], bool)
    if causal:
        keep = np.tril(keep)
    if mask is not None:
        keep = keep & mask[:, None]
    scores = scores + (1.0 - keep) * -1e9
    e = np.exp(scores - scores.max(-1, keepdims=True))
    probs = e / e.sum(-1, keepdims=True)
    heads = (probs @ vh).transpose(0, 2, 1, 3).reshape(q.shape[0], q.shape[1], h * kv)
    return heads @ layer.output_dense.kernel.numpy() + layer.output_dense.bias.numpy(), probs


@pytest.mark.parametrize("causal", [False, True])
def test_multi_head_attention_matches_a_numpy_reference(backend, causal):
    rng = np.random.default_rng(4)
    q = rng.standard_normal((2, 5, 8)).astype(np.float32)
    v = rng.standard_normal((2, 6, 12)).astype(np.float32)
    mask = rng.random((2, 5, 6)) > 0.3
    mask[:, :, 0] = True  # every query attends somewhere (a fully masked row: see below)
    layer = ok.nn.MultiHeadAttention(3, 4, 8, value_input_dim=12, value_dim=5, seed=2)
    out, probs = layer(ok.tensor(q), ok.tensor(v), attention_mask=mask, use_causal_mask=causal,
                       return_attention_scores=True)
    want, want_probs = _mha_reference(layer, q.astype(np.float64), v.astype(np.float64), mask, causal)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(probs.numpy(), want_probs, rtol=1e-4, atol=1e-6)
    if causal:
        assert (probs.numpy()[..., np.triu_indices(5, 1, 6)[0], np.triu_indices(5, 1, 6)[1]] < 1e-6).all()
    assert len(layer.trainable_variables) == 8
    none = np.zeros((2, 5, 6), bool)  # every score masked: -1e9 swamps them in float32, so uniform, as Keras's
    _, flat = layer(ok.tensor(q), ok.tensor(v), attention_mask=none, return_attention_scores=True)
    np.testing.assert_allclose(flat.numpy(), np.full((2, 3, 5, 6), 1 / 6), rtol=1e-5)


def test_multi_head_attention_trains_traced_and_checks_its_inputs():
    layer = ok.nn.MultiHeadAttention(2, 4, 8, dropout=0.1, seed=0)
    x = ok.tensor(np.random.default_rng(1).standard_normal((2, 4, 8)).astype(np.float32))

    @ok.function
    def loss() -> ok.Tensor:
        return ok.ops.sum(ok.ops.square(layer(x, x, use_causal_mask=True)), [0, 1, 2])

    eager = ok.ops.sum(ok.ops.square(layer(x, x, use_causal_mask=True)), [0, 1, 2]).numpy()
    np.testing.assert_allclose(loss().numpy(), eager, rtol=1e-5)  # no dropout outside training
    with ok.GradientTape() as tape:
        y = ok.ops.sum(layer(x, x, training=True), [0, 1, 2])
    grads = tape.gradient(y, layer.trainable_variables)
    assert all(g is not None and np.isfinite(g.numpy()).all() for g in grads)
    with pytest.raises(ok.errors.InvalidArgumentError, match="rank 3"):
        layer(ok.tensor(np.ones((4, 8), np.float32)), x)


# ---------------------------------------------------------------- BatchNormalization


def test_batch_normalization_trains_and_infers_as_keras(backend):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((8, 5)) * 3 + 1).astype(np.float32)
    layer = ok.nn.BatchNormalization(5, momentum=0.9, epsilon=1e-3)
    layer.gamma.assign(np.linspace(0.5, 1.5, 5).astype(np.float32))
    y = layer(ok.tensor(x), training=True).numpy()
    m, v = x.mean(0), x.var(0)
    np.testing.assert_allclose(y, (x - m) / np.sqrt(v + 1e-3) * np.linspace(0.5, 1.5, 5), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.moving_mean.numpy(), 0.1 * m, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.moving_variance.numpy(), 0.9 + 0.1 * v, rtol=1e-5)  # Keras 3: uncorrected
    z = layer(ok.tensor(x)).numpy()  # inference: the moving statistics
    mm, mv = layer.moving_mean.numpy(), layer.moving_variance.numpy()
    np.testing.assert_allclose(z, (x - mm) / np.sqrt(mv + 1e-3) * np.linspace(0.5, 1.5, 5), rtol=1e-4, atol=1e-5)
    assert [v.name.split("/")[-1] for v in layer.trainable_variables] == ["gamma", "beta"]
    assert len(layer.variables) == 4


def test_batch_normalization_gradients_images_and_tracing():
    rng = np.random.default_rng(8)
    x = ok.Variable(rng.standard_normal((2, 3, 3, 4)).astype(np.float64).astype(np.float32))
    layer = ok.nn.BatchNormalization(4)
    with ok.GradientTape() as tape:
        loss = ok.ops.sum(ok.ops.square(layer(x, training=True)) * np.float32(0.5), [0, 1, 2, 3])
    dx, dgamma, dbeta = tape.gradient(loss, [x, layer.gamma, layer.beta])
    xv = x.numpy().astype(np.float64)
    xhat = (xv - xv.mean((0, 1, 2))) / np.sqrt(xv.var((0, 1, 2)) + 1e-3)
    np.testing.assert_allclose(dgamma.numpy(), (xhat * xhat).sum((0, 1, 2)), rtol=1e-4)
    np.testing.assert_allclose(dbeta.numpy(), xhat.sum((0, 1, 2)), atol=1e-4)
    # d/dx of sum(y^2)/2 with y = xhat (gamma 1): the batch-norm backward formula
    dy = xhat
    want = (dy - dy.mean((0, 1, 2)) - xhat * (dy * xhat).mean((0, 1, 2))) / np.sqrt(xv.var((0, 1, 2)) + 1e-3)
    np.testing.assert_allclose(dx.numpy(), want, atol=1e-4)
    nchw = ok.nn.BatchNormalization(4, axis=1)
    out = nchw(ok.tensor(np.transpose(x.numpy(), (0, 3, 1, 2))), training=True).numpy()
    np.testing.assert_allclose(np.transpose(out, (0, 2, 3, 1)), xhat, atol=1e-4)

    traced_layer = ok.nn.BatchNormalization(4, momentum=0.5)

    @ok.function
    def step(t: ok.Tensor) -> ok.Tensor:
        return traced_layer(t, training=True)

    step(ok.tensor(x.numpy()))
    step(ok.tensor(x.numpy()))
    np.testing.assert_allclose(traced_layer.moving_mean.numpy(), 0.75 * xv.mean((0, 1, 2)), rtol=1e-4, atol=1e-6)
    with pytest.raises(ok.errors.InvalidArgumentError, match="axis"):
        ok.nn.BatchNormalization(4, axis=2)


# ---------------------------------------------------------------- DepthwiseConv2D


def test_depthwise_conv2d_layer_matches_keras_definition_and_trains(backend):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 6, 5, 3)).astype(np.float32)
    layer = ok.nn.DepthwiseConv2D(3, 3, depth_multiplier=2, padding="SAME", activation="relu")
    k = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    layer.kernel.assign(k)
    layer.bias.assign(np.linspace(-1, 1, 6).astype(np.float32))
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((2, 6, 5, 3, 2), np.float32)
    for i in range(3):
        for j in range(3):
            want += xp[:, i:i + 6, j:j + 5, :, None] * k[i, j]
    want = np.maximum(want.reshape(2, 6, 5, 6) + np.linspace(-1, 1, 6), 0)
    np.testing.assert_allclose(layer(ok.tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)
    assert [v.name.split("/")[-1] for v in layer.trainable_variables] == ["depthwise_kernel", "bias"]
    opt = ok.nn.SGD(0.05)
    losses = []
    for _ in range(5):
        with ok.GradientTape() as tape:
            loss = ok.ops.mean(ok.ops.square(layer(ok.tensor(x)) - np.float32(0.5)), [0, 1, 2, 3])
        grads = tape.gradient(loss, layer.trainable_variables)
        opt.apply_gradients(zip(grads, layer.trainable_variables))
        losses.append(float(loss.numpy()))
    assert losses[-1] < losses[0]
    strided = ok.nn.DepthwiseConv2D(3, (2, 3), strides=2, use_bias=False)
    assert strided(ok.tensor(x)).shape == (2, 3, 2, 3) and strided.bias is None
