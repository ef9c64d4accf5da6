"""Train a small CNN on scikit-learn's digits (8x8 images, shipped with the
package) on every available backend in turn, with opkernel ops alone.

Prints, per backend: test accuracy, time per epoch, and the largest difference
of the final test logits from the CPU run.  Exits non-zero if a backend's
accuracy is under 95% or its logits disagree with the CPU run.

    python examples/digits.py [--epochs N] [--backends cpu,opencl]
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table
from sklearn.datasets import load_digits

import opkernel as ok

MIN_ACCURACY = 0.95
LOGIT_TOLERANCE = 5e-2  # absolute, on logits of magnitude ~10, after all training steps


@dataclass
class Result:
    backend: str
    accuracy: float
    seconds_per_epoch: float
    logits: np.ndarray
    final_loss: float


def load(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]  # NHWC
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    split = int(0.8 * len(x))
    return x[order[:split]], y[order[:split]], x[order[split:]], y[order[split:]]


def build_model() -> ok.nn.Sequential:
    nn = ok.nn
    return nn.Sequential([
        nn.Conv2D(1, 16, 3, activation="relu", seed=1),
        nn.MaxPool2D(2),
        nn.Conv2D(16, 32, 3, activation="relu", seed=2),
        nn.MaxPool2D(2),
        nn.Flatten(),
        nn.Dense(2 * 2 * 32, 10, seed=3),
    ])


def train_step(model: ok.nn.Sequential, opt: ok.nn.Optimizer, x: ok.Tensor, y: ok.Tensor) -> ok.Tensor:
    with ok.GradientTape() as tape:
        loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
    grads = tape.gradient(loss, model.variables)
    opt.apply_gradients(zip(grads, model.variables))
    return loss


def train(backend: str, epochs: int, batch: int, progress: Progress) -> Result:
    x_train, y_train, x_test, y_test = load()
    with ok.use_backend(backend):
        model, opt = build_model(), ok.nn.Adam(learning_rate=0.01)
        steps = len(x_train) // batch
        task = progress.add_task(f"[{backend}] training", total=epochs * steps)
        start = time.perf_counter()
        loss = None
        for epoch in range(epochs):
            order = np.random.default_rng(100 + epoch).permutation(len(x_train))  # same batches on every backend
            for s in range(steps):
                idx = order[s * batch:(s + 1) * batch]
                loss = train_step(model, opt, ok.tensor(x_train[idx]), ok.tensor(y_train[idx]))
                progress.advance(task)
        logits = model(ok.tensor(x_test)).numpy()
        elapsed = time.perf_counter() - start
    accuracy = float((logits.argmax(axis=1) == y_test).mean())
    return Result(backend, accuracy, elapsed / epochs, logits, float(loss.numpy()) if loss is not None else float("nan"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--backends", default=None, help="comma-separated (default: every available backend)")
    args = parser.parse_args(argv)
    backends = args.backends.split(",") if args.backends else ok.available_backends()
    backends = sorted(backends, key=lambda b: b != "cpu")  # the CPU run is the reference
    console = Console()
    with Progress(console=console, transient=True) as progress:
        results = [train(b, args.epochs, args.batch, progress) for b in backends]
    reference = results[0].logits if results[0].backend == "cpu" else None
    table = Table(title=f"digits CNN, {args.epochs} epochs, batch {args.batch}")
    for col in ("backend", "test accuracy", "s / epoch", "final loss", "max |logits - cpu|", "verdict"):
        table.add_column(col)
    failed = False
    for r in results:
        diff = float(np.max(np.abs(r.logits - reference))) if reference is not None else float("nan")
        good = r.accuracy >= MIN_ACCURACY and (reference is None or diff <= LOGIT_TOLERANCE)
        failed |= not good
        table.add_row(r.backend, f"{r.accuracy:.2%}", f"{r.seconds_per_epoch:.3f}", f"{r.final_loss:.4f}",
                      f"{diff:.2e}", "ok" if good else "FAILED")
    console.print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
