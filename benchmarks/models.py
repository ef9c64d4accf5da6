"""The training steps benchmarked three ways: opkernel, hand-written numpy, torch eager.

Each factory builds the model and data once and returns a zero-argument step
function (forward, backward, SGD update) so that only the step is timed.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

import opkernel as ok

BATCH, LR = 64, 0.01


#: (inputs, hidden, classes) of the benchmarked MLP; TINY_MLP (batch 4) makes every
#: kernel negligible, so its step time is what the framework itself adds per step.
MLP = (784, 256, 10)
TINY_MLP, TINY_BATCH = (8, 8, 3), 4


def _mlp_data(sizes: tuple[int, int, int] = MLP, batch: int = BATCH) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    n_in, n_hidden, n_out = sizes
    rng = np.random.default_rng(0)
    x = rng.standard_normal((batch, n_in)).astype(np.float32)
    y = rng.integers(0, n_out, batch)
    params = [
        (rng.standard_normal((n_in, n_hidden)) * 0.05).astype(np.float32), np.zeros(n_hidden, np.float32),
        (rng.standard_normal((n_hidden, n_out)) * 0.05).astype(np.float32), np.zeros(n_out, np.float32),
    ]
    return x, y, params


def mlp_step_opkernel(sizes: tuple[int, int, int] = MLP, batch: int = BATCH) -> Callable[[], None]:
    n_in, n_hidden, n_out = sizes
    x_np, y_np, _ = _mlp_data(sizes, batch)
    x, y = ok.tensor(x_np), ok.tensor(y_np)
    model = ok.nn.Sequential([ok.nn.Dense(n_in, n_hidden, "relu", seed=1), ok.nn.Dense(n_hidden, n_out, seed=2)])
    opt = ok.nn.SGD(LR)
    variables = model.variables

    def step() -> None:
        with ok.GradientTape() as tape:
            loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))

    return step


def _softmax_xent_grad(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1
    p /= len(y)
    return p


def mlp_step_numpy(sizes: tuple[int, int, int] = MLP, batch: int = BATCH) -> Callable[[], None]:
    x, y, (w1, b1, w2, b2) = _mlp_data(sizes, batch)

    def step() -> None:
        h = x @ w1 + b1
        r = np.maximum(h, 0)
        dz = _softmax_xent_grad(r @ w2 + b2, y)
        dr = dz @ w2.T
        dh = dr * (h > 0)
        np.subtract(w2, LR * (r.T @ dz), out=w2)
        np.subtract(b2, LR * dz.sum(0), out=b2)
        np.subtract(w1, LR * (x.T @ dh), out=w1)
        np.subtract(b1, LR * dh.sum(0), out=b1)

    return step


def mlp_step_torch(torch: Any, sizes: tuple[int, int, int] = MLP, batch: int = BATCH) -> Callable[[], None]:
    x_np, y_np, params = _mlp_data(sizes, batch)
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    w1, b1, w2, b2 = [torch.tensor(p, requires_grad=True) for p in params]
    f = torch.nn.functional

    def step() -> None:
        loss = f.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)
        loss.backward()
        with torch.no_grad():
            for p in (w1, b1, w2, b2):
                p -= LR * p.grad
                p.grad = None

    return step


# ------------------------------------------------------------------ CNN (the digits model)


def _cnn_data() -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(0)
    x = rng.random((BATCH, 8, 8, 1), dtype=np.float32)
    y = rng.integers(0, 10, BATCH)
    params = [
        (rng.standard_normal((3, 3, 1, 16)) * 0.3).astype(np.float32), np.zeros(16, np.float32),
        (rng.standard_normal((3, 3, 16, 32)) * 0.1).astype(np.float32), np.zeros(32, np.float32),
        (rng.standard_normal((128, 10)) * 0.1).astype(np.float32), np.zeros(10, np.float32),
    ]
    return x, y, params


def cnn_step_opkernel() -> Callable[[], None]:
    from digits import build_model, train_step

    x_np, y_np, _ = _cnn_data()
    x, y = ok.tensor(x_np), ok.tensor(y_np)
    model, opt = build_model(), ok.nn.SGD(LR)

    def step() -> None:  # the loss is not read: reading it would wait for the device every step
        train_step(model, opt, x, y)

    return step


def _conv_same(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, h, wd, c = x.shape
    cols = sliding_window_view(np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0))), (3, 3), axis=(1, 2))
    cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(n * h * wd, 9 * c)
    return (cols @ w.reshape(9 * c, -1)).reshape(n, h, wd, -1), cols


def _conv_same_backward(dy: np.ndarray, cols: np.ndarray, w: np.ndarray, x_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    n, h, wd, c = x_shape
    dy2 = dy.reshape(n * h * wd, -1)
    dw = (cols.T @ dy2).reshape(w.shape)
    dcols = (dy2 @ w.reshape(9 * c, -1).T).reshape(n, h, wd, 3, 3, c)
    dxp = np.zeros((n, h + 2, wd + 2, c), dy.dtype)
    for i in range(3):
        for j in range(3):
            dxp[:, i:i + h, j:j + wd] += dcols[:, :, :, i, j]
    return dxp[:, 1:-1, 1:-1], dw


def _pool(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n, h, w, c = x.shape
    win = x.reshape(n, h // 2, 2, w // 2, 2, c)
    out = win.max(axis=(2, 4))
    mask = win == out[:, :, None, :, None]
    return out, mask


def _pool_backward(dy: np.ndarray, mask: np.ndarray) -> np.ndarray:
    n, h2, _, w2, _, c = mask.shape
    return (mask * dy[:, :, None, :, None]).reshape(n, h2 * 2, w2 * 2, c)


def cnn_step_numpy() -> Callable[[], None]:
    x, y, (k1, c1, k2, c2, w, b) = _cnn_data()

    def step() -> None:
        a1, cols1 = _conv_same(x, k1)
        a1 += c1
        r1 = np.maximum(a1, 0)
        p1, m1 = _pool(r1)
        a2, cols2 = _conv_same(p1, k2)
        a2 += c2
        r2 = np.maximum(a2, 0)
        p2, m2 = _pool(r2)
        flat = p2.reshape(BATCH, -1)
        dz = _softmax_xent_grad(flat @ w + b, y)
        dflat = dz @ w.T
        np.subtract(w, LR * (flat.T @ dz), out=w)
        np.subtract(b, LR * dz.sum(0), out=b)
        da2 = _pool_backward(dflat.reshape(p2.shape), m2) * (a2 > 0)
        dp1, dk2 = _conv_same_backward(da2, cols2, k2, p1.shape)
        da1 = _pool_backward(dp1, m1) * (a1 > 0)
        _, dk1 = _conv_same_backward(da1, cols1, k1, x.shape)
        np.subtract(k2, LR * dk2, out=k2)
        np.subtract(c2, LR * da2.sum((0, 1, 2)), out=c2)
        np.subtract(k1, LR * dk1, out=k1)
        np.subtract(c1, LR * da1.sum((0, 1, 2)), out=c1)

    return step


def cnn_step_torch(torch: Any) -> Callable[[], None]:
    x_np, y_np, params = _cnn_data()
    x, y = torch.from_numpy(x_np).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(y_np)
    k1, c1, k2, c2, w, b = [torch.tensor(p, requires_grad=True) for p in params]
    f = torch.nn.functional

    def step() -> None:
        h = f.max_pool2d(torch.relu(f.conv2d(x, k1.permute(3, 2, 0, 1), c1, padding=1)), 2)
        h = f.max_pool2d(torch.relu(f.conv2d(h, k2.permute(3, 2, 0, 1), c2, padding=1)), 2)
        loss = f.cross_entropy(h.permute(0, 2, 3, 1).reshape(BATCH, -1) @ w + b, y)
        loss.backward()
        with torch.no_grad():
            for p in (k1, c1, k2, c2, w, b):
                p -= LR * p.grad
                p.grad = None

    return step
