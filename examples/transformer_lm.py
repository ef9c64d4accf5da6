"""A character-level transformer language model, written with ``ok.nn`` as a user would,
and its PyTorch twin with the same initial weights, for side-by-side training.

Two pre-LayerNorm blocks (causal multi-head self-attention, an erf-GELU MLP), token and
position embeddings, a linear head, sparse cross-entropy, Adam.  The default sizes are
those of the benchmark in ``benchmarks/transformer_bench.py``: d_model 64, 4 heads,
context 64, batch 32.

    .venv/bin/python examples/transformer_lm.py [--steps 30] [--backend cpu]

trains both models on the same batches of a fixed text (corpus.py) and prints the two loss
curves (torch is optional: without it only opkernel's is printed).
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
    vocab: int = 96
    d_model: int = 64
    heads: int = 4
    context: int = 64
    layers: int = 2
    batch: int = 32
    mlp: int = 4  # the MLP's width, in multiples of d_model
    learning_rate: float = 3e-3
    epsilon: float = 1e-5  # LayerNorm's (torch's default)


def initial_weights(cfg: Config, seed: int = 0) -> dict[str, np.ndarray]:
    """Every weight by name, float32, drawn once so that both frameworks start equal."""
    rng = np.random.default_rng(seed)
    d, f = cfg.d_model, cfg.mlp * cfg.d_model

    def dense(n_in: int, n_out: int) -> np.ndarray:
        return (rng.standard_normal((n_in, n_out)) * (1 / math.sqrt(n_in))).astype(np.float32)

    w = {"tok": (rng.standard_normal((cfg.vocab, d)) * 0.02).astype(np.float32),
         "pos": (rng.standard_normal((cfg.context, d)) * 0.02).astype(np.float32)}
    for i in range(cfg.layers):
        w[f"{i}.qkv"] = dense(d, 3 * d)
        w[f"{i}.qkv_b"] = np.zeros(3 * d, np.float32)
        w[f"{i}.proj"] = dense(d, d)
        w[f"{i}.proj_b"] = np.zeros(d, np.float32)
        w[f"{i}.fc1"] = dense(d, f)
        w[f"{i}.fc1_b"] = np.zeros(f, np.float32)
        w[f"{i}.fc2"] = dense(f, d)
        w[f"{i}.fc2_b"] = np.zeros(d, np.float32)
    w["head"] = dense(d, cfg.vocab)
    w["head_b"] = np.zeros(cfg.vocab, np.float32)
    return w


def batches(cfg: Config, seed: int = 1) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    """A function returning the next (inputs, targets) batch of int32 character ids
    [batch, context] drawn from a fixed text (corpus.py)."""
    ids = character_ids(cfg.vocab)
    rng = np.random.default_rng(seed)

    def next_batch() -> tuple[np.ndarray, np.ndarray]:
        starts = rng.integers(0, len(ids) - cfg.context - 1, cfg.batch)
        rows = np.stack([ids[s:s + cfg.context + 1] for s in starts])
        return rows[:, :-1].copy(), rows[:, 1:].copy()

    return next_batch


# ---------------------------------------------------------------- opkernel


def _set(var: ok.Variable, value: np.ndarray) -> None:
    var.assign(ok.tensor(value))


class Block(nn.Layer):
    def __init__(self, cfg: Config, w: dict[str, np.ndarray], i: int) -> None:
        super().__init__()
        d = cfg.d_model
        self.cfg = cfg
        self.ln1, self.ln2 = nn.LayerNormalization(d, epsilon=cfg.epsilon), nn.LayerNormalization(d, epsilon=cfg.epsilon)
        self.qkv, self.proj = nn.Dense(d, 3 * d), nn.Dense(d, d)
        self.fc1, self.fc2 = nn.Dense(d, cfg.mlp * d, "gelu"), nn.Dense(cfg.mlp * d, d)
        for name in ("qkv", "proj", "fc1", "fc2"):
            layer = getattr(self, name)
            _set(layer.kernel, w[f"{i}.{name}"])
            _set(layer.bias, w[f"{i}.{name}_b"])
        t = cfg.context
        self.mask = ok.tensor(np.triu(np.full((t, t), -1e9, np.float32), 1))

    def attention(self, x: ok.Tensor) -> ok.Tensor:
        cfg, ops = self.cfg, ok.ops
        b, t, d, h = cfg.batch, cfg.context, cfg.d_model, cfg.heads
        qkv = ops.reshape(self.qkv(x), [b, t, 3, h, d // h])
        qkv = ops.transpose(qkv, [2, 0, 3, 1, 4])  # [3, b, h, t, d/h]
        q, k, v = ops.unpack(qkv, num=3)  # one Unpack (its gradient one Pack), as torch unbinds
        scores = ops.batch_mat_mul(q, k, adj_y=True) * (1.0 / math.sqrt(d // h)) + self.mask
        y = ops.batch_mat_mul(ops.softmax(scores), v)  # [b, h, t, d/h]
        return self.proj(ops.reshape(ops.transpose(y, [0, 2, 1, 3]), [b, t, d]))

    def __call__(self, x: ok.Tensor) -> ok.Tensor:
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.fc1(self.ln2(x)))


class TransformerLM(nn.Layer):
    def __init__(self, cfg: Config, w: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok, self.pos = nn.Embedding(cfg.vocab, cfg.d_model), nn.Embedding(cfg.context, cfg.d_model)
        _set(self.tok.embeddings, w["tok"])
        _set(self.pos.embeddings, w["pos"])
        self.blocks = [Block(cfg, w, i) for i in range(cfg.layers)]
        self.ln = nn.LayerNormalization(cfg.d_model, epsilon=cfg.epsilon)
        self.head = nn.Dense(cfg.d_model, cfg.vocab)
        _set(self.head.kernel, w["head"])
        _set(self.head.bias, w["head_b"])
        self.positions = ok.tensor(np.arange(cfg.context, dtype=np.int32))

    def __call__(self, ids: ok.Tensor) -> ok.Tensor:
        x = self.tok(ids) + self.pos(self.positions)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))  # [batch, context, vocab]


def opkernel_step(cfg: Config, w: dict[str, np.ndarray], traced: bool = False) -> Callable[[np.ndarray, np.ndarray], Any]:
    """A training step ``step(inputs, targets) -> loss tensor`` (eager or ``ok.function``)."""
    model = TransformerLM(cfg, w)
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

    step.function = fn  # type: ignore[attr-defined]  # the ok.function when traced
    return step


# ---------------------------------------------------------------- torch


def torch_step(torch: Any, cfg: Config, w: dict[str, np.ndarray], compiled: bool = False,
               same_adam: bool = False) -> Callable[[np.ndarray, np.ndarray], Any]:
    """The same model and step in PyTorch (``compiled``: through ``torch.compile``;
    ``same_adam``: Keras's Adam step, as ``ok.nn.Adam`` takes, rather than
    ``torch.optim.Adam``'s, which places epsilon differently: twins.py)."""
    F = torch.nn.functional
    p = {k: torch.nn.Parameter(torch.from_numpy(v.copy())) for k, v in w.items()}
    ln = {k: (torch.nn.Parameter(torch.ones(cfg.d_model)), torch.nn.Parameter(torch.zeros(cfg.d_model)))
          for k in [f"{i}.ln{j}" for i in range(cfg.layers) for j in (1, 2)] + ["ln"]}
    params = list(p.values()) + [t for pair in ln.values() for t in pair]
    opt = (keras_adam(torch, params, cfg.learning_rate) if same_adam
           else torch.optim.Adam(params, lr=cfg.learning_rate, eps=1e-7))
    b, t, d, h = cfg.batch, cfg.context, cfg.d_model, cfg.heads
    mask = torch.from_numpy(np.triu(np.full((t, t), -1e9, np.float32), 1))
    positions = torch.arange(t)

    def norm(x: Any, key: str) -> Any:
        return F.layer_norm(x, (d,), ln[key][0], ln[key][1], cfg.epsilon)

    def forward(ids: Any, targets: Any) -> Any:
        x = p["tok"][ids] + p["pos"][positions]
        for i in range(cfg.layers):
            a = norm(x, f"{i}.ln1") @ p[f"{i}.qkv"] + p[f"{i}.qkv_b"]
            q, k, v = a.reshape(b, t, 3, h, d // h).permute(2, 0, 3, 1, 4)
            s = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(d // h)) + mask, -1)
            x = x + (s @ v).transpose(1, 2).reshape(b, t, d) @ p[f"{i}.proj"] + p[f"{i}.proj_b"]
            m = F.gelu(norm(x, f"{i}.ln2") @ p[f"{i}.fc1"] + p[f"{i}.fc1_b"])
            x = x + m @ p[f"{i}.fc2"] + p[f"{i}.fc2_b"]
        logits = norm(x, "ln") @ p["head"] + p["head_b"]
        return F.cross_entropy(logits.reshape(-1, cfg.vocab), targets.reshape(-1).long())

    fwd = torch.compile(forward) if compiled else forward

    def step(x: np.ndarray, y: np.ndarray) -> Any:
        opt.zero_grad(set_to_none=True)
        loss = fwd(torch.from_numpy(x), torch.from_numpy(y))
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> int:
    return side_by_side(sys.modules[__name__], argv)


if __name__ == "__main__":
    raise SystemExit(main())
