"""A character-level LSTM language model built from ops (the recurrence unrolled in
Python, so ``ok.function`` traces it into one graph), written with ``ok.nn`` as a user
would, and its PyTorch twin (``torch.nn.LSTM``) with the same initial weights, for
side-by-side training.

An embedding, one LSTM layer (gates in PyTorch's order: input, forget, cell, output;
``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``), a linear
head on every step's output, sparse cross-entropy and Adam, on a fixed text (corpus.py).

    .venv/bin/python examples/char_lstm.py [--steps 30] [--backend cpu] [--traced]

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

from corpus import character_ids
from twins import keras_adam, side_by_side

# How main and tests/test_model_zoo.py call torch_step: Keras's Adam step in the twin, so the curves compare the models (twins.py).
TWIN_OPTIONS: dict[str, Any] = {"same_adam": True}


@dataclass(frozen=True)
class Config:
    vocab: int = 96  # printable ASCII, from the space
    embed: int = 16
    hidden: int = 64
    steps: int = 24  # characters per sequence (the unrolled length)
    batch: int = 16
    learning_rate: float = 1e-2


def initial_weights(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Every weight by name, float32, drawn once so that both frameworks start equal
    (``wx`` [embed, 4 hidden] and ``wh`` [hidden, 4 hidden]: the gates side by side)."""
    rng = np.random.default_rng(seed)
    e, h = cfg.embed, cfg.hidden
    bound = 1 / math.sqrt(h)  # torch.nn.LSTM's uniform initialization
    w = {"embed": rng.standard_normal((cfg.vocab, e)).astype(np.float32),
         "wx": rng.uniform(-bound, bound, (e, 4 * h)).astype(np.float32),
         "wh": rng.uniform(-bound, bound, (h, 4 * h)).astype(np.float32),
         "b": rng.uniform(-bound, bound, 4 * h).astype(np.float32),
         "head": (rng.standard_normal((h, cfg.vocab)) / math.sqrt(h)).astype(np.float32),
         "head_b": np.zeros(cfg.vocab, np.float32)}
    return w


def batches(cfg: Config, seed: int = 1) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """A function returning the next (inputs, targets) batch of int32 character ids
    [batch, steps] drawn from ``corpus.TEXT``."""
    ids = character_ids(cfg.vocab)
    rng = np.random.default_rng(seed)

    def next_batch() -> tuple[np.ndarray, np.ndarray]:
        starts = rng.integers(0, len(ids) - cfg.steps - 1, cfg.batch)
        rows = np.stack([ids[s:s + cfg.steps + 1] for s in starts])
        return rows[:, :-1].copy(), rows[:, 1:].copy()

    return next_batch


# ---------------------------------------------------------------- opkernel


def _set(var: ok.Variable, value: np.ndarray) -> None:
    var.assign(ok.tensor(value))


class LSTM(nn.Layer):
    """One LSTM layer over [batch, steps, features] inputs, returning every step's output
    [batch, steps, hidden]; the input projection of all steps is one matmul."""

    def __init__(self, cfg: Config, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.cfg = cfg
        self.input = nn.Dense(cfg.embed, 4 * cfg.hidden)  # x @ wx + b
        _set(self.input.kernel, w["wx"])
        _set(self.input.bias, w["b"])
        self.recurrent = nn.Dense(cfg.hidden, 4 * cfg.hidden)  # h @ wh (its bias stays zero: frozen)
        _set(self.recurrent.kernel, w["wh"])
        self.recurrent.bias.trainable = False

    def __call__(self, x: ok.Tensor) -> ok.Tensor:
        ops, cfg = ok.ops, self.cfg
        projected = self.input(x)  # [batch, steps, 4 hidden]
        h = c = ok.tensor(np.zeros((cfg.batch, cfg.hidden), np.float32))
        outputs = []
        for t in range(cfg.steps):
            i, f, g, o = ops.split(1, projected[:, t] + self.recurrent(h), num_split=4)
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
            h = ops.sigmoid(o) * ops.tanh(c)
            outputs.append(h)
        return ops.pack(outputs, axis=1)


class CharLSTM(nn.Layer):
    def __init__(self, cfg: Config, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.embed = nn.Embedding(cfg.vocab, cfg.embed)
        _set(self.embed.embeddings, w["embed"])
        self.lstm = LSTM(cfg, w)
        self.head = nn.Dense(cfg.hidden, cfg.vocab)
        _set(self.head.kernel, w["head"])
        _set(self.head.bias, w["head_b"])

    def __call__(self, ids: ok.Tensor) -> ok.Tensor:
        return self.head(self.lstm(self.embed(ids)))  # [batch, steps, vocab]


def opkernel_step(cfg: Config, w: dict[str, np.ndarray], traced: bool = False) -> Callable[[np.ndarray, np.ndarray], Any]:
    """A training step ``step(inputs, targets) -> loss tensor`` (eager or ``ok.function``)."""
    model = CharLSTM(cfg, w)
    opt = nn.Adam(cfg.learning_rate)

    def train(x: ok.Tensor, y: ok.Tensor) -> ok.Tensor:
        variables = model.trainable_variables
        with ok.GradientTape() as tape:
            logits = model(x)
            loss = nn.sparse_softmax_cross_entropy(ok.ops.reshape(logits, [-1, cfg.vocab]), ok.ops.reshape(y, [-1]))
        opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    fn = ok.function(train) if traced else train

    def step(x: np.ndarray, y: np.ndarray) -> Any:
        return fn(ok.tensor(x), ok.tensor(y))

    step.model = model  # type: ignore[attr-defined]
    return step


# ---------------------------------------------------------------- torch


def torch_step(torch: Any, cfg: Config, w: dict[str, np.ndarray], same_adam: bool = False) -> Callable[[np.ndarray, np.ndarray], Any]:
    """The same model and step in PyTorch, with ``torch.nn.LSTM`` (its ``bias_hh`` held at
    zero, untrained, so that the one bias trained is opkernel's ``b``; ``same_adam``:
    Keras's Adam step, as ``ok.nn.Adam`` takes, rather than ``torch.optim.Adam``'s, which
    places epsilon differently: twins.py)."""
    F = torch.nn.functional
    embed = torch.nn.Parameter(torch.from_numpy(w["embed"].copy()))
    lstm = torch.nn.LSTM(cfg.embed, cfg.hidden, batch_first=True)
    with torch.no_grad():
        lstm.weight_ih_l0.copy_(torch.from_numpy(w["wx"].T.copy()))
        lstm.weight_hh_l0.copy_(torch.from_numpy(w["wh"].T.copy()))
        lstm.bias_ih_l0.copy_(torch.from_numpy(w["b"]))
        lstm.bias_hh_l0.zero_()
    lstm.bias_hh_l0.requires_grad_(False)
    head = torch.nn.Parameter(torch.from_numpy(w["head"].copy()))
    head_b = torch.nn.Parameter(torch.from_numpy(w["head_b"].copy()))
    params = [embed, lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, head, head_b]
    opt = (keras_adam(torch, params, cfg.learning_rate) if same_adam
           else torch.optim.Adam(params, lr=cfg.learning_rate, eps=1e-7))

    def step(x: np.ndarray, y: np.ndarray) -> Any:
        opt.zero_grad(set_to_none=True)
        out, _ = lstm(embed[torch.from_numpy(x).long()])
        logits = out @ head + head_b
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab), torch.from_numpy(y).reshape(-1).long())
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> int:
    return side_by_side(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
