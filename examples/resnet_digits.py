"""A small residual network with batch normalization on scikit-learn's digits, written
with ``ok.nn`` as a user would, and its PyTorch twin with the same initial weights, for
side-by-side training.

A 3x3 stem convolution, two residual blocks (the second halves the resolution, its
shortcut a strided 1x1 convolution), each convolution followed by BatchNormalization
(FusedBatchNormV3) in training mode, ReLU, global average pooling, a linear head,
sparse cross-entropy and SGD with momentum, on the 8x8 digit images (NHWC).

    .venv/bin/python examples/resnet_digits.py [--steps 30] [--backend cpu] [--traced]

trains both models on the same batches and prints the two loss curves (torch is
optional: without it only opkernel's is printed).  ``tests/test_model_zoo.py`` checks
that the curves agree.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import opkernel as ok
from opkernel import nn

from twins import side_by_side


# How main and tests/test_model_zoo.py call torch_step: SGD with momentum is one formula in both frameworks.
TWIN_OPTIONS: dict[str, Any] = {}


@dataclass(frozen=True)
class Config:
    width: int = 16  # the stem's and first block's channels; the second block has twice as many
    batch: int = 64
    learning_rate: float = 0.05
    momentum: float = 0.9  # SGD's
    bn_momentum: float = 0.99  # Keras's convention (torch's momentum is 1 - this)
    epsilon: float = 1e-3  # BatchNormalization's (Keras's default)


# (name, kernel size, channels in, channels out, stride) of every convolution, in order.
def convolutions(cfg: Config) -> list[tuple[str, int, int, int, int]]:
    c = cfg.width
    return [("stem", 3, 1, c, 1),
            ("b1.conv1", 3, c, c, 1), ("b1.conv2", 3, c, c, 1),
            ("b2.conv1", 3, c, 2 * c, 2), ("b2.conv2", 3, 2 * c, 2 * c, 1), ("b2.short", 1, c, 2 * c, 2)]


def initial_weights(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Every weight by name, float32 (convolution kernels HWIO, He-normal), drawn once so
    that both frameworks start equal."""
    rng = np.random.default_rng(seed)
    w: dict[str, np.ndarray] = {}
    for name, k, cin, cout, _ in convolutions(cfg):
        w[name] = (rng.standard_normal((k, k, cin, cout)) * math.sqrt(2 / (k * k * cin))).astype(np.float32)
        w[name + "_b"] = np.zeros(cout, np.float32)
    w["head"] = (rng.standard_normal((2 * cfg.width, 10)) / math.sqrt(2 * cfg.width)).astype(np.float32)
    w["head_b"] = np.zeros(10, np.float32)
    return w


def batches(cfg: Config, seed: int = 1) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """A function returning the next (images [batch, 8, 8, 1] float32, labels [batch] int32)
    batch drawn from scikit-learn's digits."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    rng = np.random.default_rng(seed)

    def next_batch() -> tuple[np.ndarray, np.ndarray]:
        rows = rng.integers(0, len(images), cfg.batch)
        return images[rows], labels[rows]

    return next_batch


# ---------------------------------------------------------------- opkernel


def _set(var: ok.Variable, value: np.ndarray) -> None:
    var.assign(ok.tensor(value))


class ConvBN(nn.Layer):
    """A convolution (SAME padding) followed by batch normalization."""

    def __init__(self, cfg: Config, w: dict[str, np.ndarray], name: str, k: int, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv = nn.Conv2D(cin, cout, k, strides=stride)
        _set(self.conv.kernel, w[name])
        _set(self.conv.bias, w[name + "_b"])
        self.bn = nn.BatchNormalization(cout, momentum=cfg.bn_momentum, epsilon=cfg.epsilon)

    def __call__(self, x: ok.Tensor, training: bool = False) -> ok.Tensor:
        return self.bn(self.conv(x), training=training)


class ResNet(nn.Layer):
    def __init__(self, cfg: Config, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.layers = {spec[0]: ConvBN(cfg, w, *spec) for spec in convolutions(cfg)}
        self.head = nn.Dense(2 * cfg.width, 10)
        _set(self.head.kernel, w["head"])
        _set(self.head.bias, w["head_b"])

    def __call__(self, x: ok.Tensor, training: bool = False) -> ok.Tensor:
        ops, layer = ok.ops, self.layers
        x = ops.relu(layer["stem"](x, training))
        y = ops.relu(layer["b1.conv1"](x, training))
        x = ops.relu(x + layer["b1.conv2"](y, training))
        y = ops.relu(layer["b2.conv1"](x, training))
        x = ops.relu(layer["b2.short"](x, training) + layer["b2.conv2"](y, training))
        return self.head(ops.mean(x, [1, 2]))  # global average pooling, then [batch, 10]


def opkernel_step(cfg: Config, w: dict[str, np.ndarray], traced: bool = False) -> Callable[[np.ndarray, np.ndarray], Any]:
    """A training step ``step(images, labels) -> loss tensor`` (eager or ``ok.function``)."""
    model = ResNet(cfg, w)
    opt = nn.SGD(cfg.learning_rate, momentum=cfg.momentum)

    def train(x: ok.Tensor, y: ok.Tensor) -> ok.Tensor:
        variables = model.trainable_variables
        with ok.GradientTape() as tape:
            loss = nn.sparse_softmax_cross_entropy(model(x, training=True), y)
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    fn = ok.function(train) if traced else train

    def step(x: np.ndarray, y: np.ndarray) -> Any:
        return fn(ok.tensor(x), ok.tensor(y))

    step.model = model  # type: ignore[attr-defined]
    return step


# ---------------------------------------------------------------- torch


def torch_step(torch: Any, cfg: Config, w: dict[str, np.ndarray]) -> Callable[[np.ndarray, np.ndarray], Any]:
    """The same model and step in PyTorch (NCHW inside; TensorFlow's SAME padding, which
    pads a strided 3x3 convolution of an even size at the bottom and right only)."""
    F = torch.nn.functional
    convs = convolutions(cfg)
    p = {k: torch.nn.Parameter(torch.from_numpy(v.transpose(3, 2, 0, 1).copy() if v.ndim == 4 else v.copy()))
         for k, v in w.items()}
    bn = {name: (torch.nn.Parameter(torch.ones(cout)), torch.nn.Parameter(torch.zeros(cout)),
                 torch.zeros(cout), torch.ones(cout)) for name, _, _, cout, _ in convs}
    params = list(p.values()) + [t for q in bn.values() for t in q[:2]]
    opt = torch.optim.SGD(params, lr=cfg.learning_rate, momentum=cfg.momentum)
    spec = {name: (k, stride) for name, k, _, _, stride in convs}

    def conv_bn(x: Any, name: str) -> Any:
        k, stride = spec[name]
        if k == 3 and stride == 2:  # SAME on an even size: the one padding row and column at the end
            y = F.conv2d(F.pad(x, (0, 1, 0, 1)), p[name], p[name + "_b"], stride=2)
        else:
            y = F.conv2d(x, p[name], p[name + "_b"], stride=stride, padding=k // 2)
        gamma, beta, mean, var = bn[name]
        return F.batch_norm(y, mean, var, gamma, beta, training=True, momentum=1 - cfg.bn_momentum, eps=cfg.epsilon)

    def forward(images: Any, labels: Any) -> Any:
        x = F.relu(conv_bn(images.permute(0, 3, 1, 2), "stem"))
        y = F.relu(conv_bn(x, "b1.conv1"))
        x = F.relu(x + conv_bn(y, "b1.conv2"))
        y = F.relu(conv_bn(x, "b2.conv1"))
        x = F.relu(conv_bn(x, "b2.short") + conv_bn(y, "b2.conv2"))
        logits = x.mean((2, 3)) @ p["head"] + p["head_b"]
        return F.cross_entropy(logits, labels.long())

    def step(x: np.ndarray, y: np.ndarray) -> Any:
        opt.zero_grad(set_to_none=True)
        loss = forward(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> int:
    return side_by_side(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
