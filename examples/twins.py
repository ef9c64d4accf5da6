"""What the PyTorch twins of the examples share: Adam as Keras and TensorFlow define it,
and the side-by-side training run each example's ``main`` is.

``ok.nn.Adam`` is TensorFlow's ``ApplyAdam`` (and Keras's Adam): the step is
``lr * sqrt(1 - beta2^t) / (1 - beta1^t) * m / (sqrt(v) + epsilon)``, epsilon added to
the square root of the *uncorrected* second moment.  ``torch.optim.Adam`` adds it to
the bias-corrected one, ``sqrt(v / (1 - beta2^t))``; where gradients are small (an
embedding's rare rows) the two steps differ, and loss curves drift apart by about 1e-4
within a few steps.  A twin that is to equal opkernel's curve uses ``keras_adam``; a
benchmark times torch's own optimizer."""

from __future__ import annotations

import argparse
import math
from types import ModuleType
from typing import Any, Iterable


def keras_adam(torch: Any, params: Iterable[Any], lr: float, beta1: float = 0.9, beta2: float = 0.999,
               epsilon: float = 1e-7) -> Any:
    """A ``torch.optim.Optimizer`` taking Keras's (TensorFlow's) Adam step."""

    class KerasAdam(torch.optim.Optimizer):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__(list(params), {"lr": lr})
            self.t = 0

        @torch.no_grad()  # type: ignore[misc]
        def step(self, closure: Any = None) -> None:
            self.t += 1
            for group in self.param_groups:
                rate = group["lr"] * math.sqrt(1 - beta2 ** self.t) / (1 - beta1 ** self.t)
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if not state:
                        state["m"], state["v"] = torch.zeros_like(p), torch.zeros_like(p)
                    m, v = state["m"], state["v"]
                    m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                    v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                    p.sub_(rate * m / (v.sqrt() + epsilon))

    return KerasAdam()


def side_by_side(example: ModuleType, argv: list[str] | None = None) -> int:
    """Train an example's model (``Config``, ``initial_weights``, ``batches``,
    ``opkernel_step``) and its PyTorch twin (``torch_step``, called with the example's
    ``TWIN_OPTIONS``) on the same batches, printing both loss curves (torch is optional:
    without it only opkernel's is printed)."""
    import opkernel as ok

    parser = argparse.ArgumentParser(description=(example.__doc__ or "").splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--traced", action="store_true", help="train with ok.function")
    args = parser.parse_args(argv)
    cfg = example.Config()
    w = example.initial_weights(cfg)
    try:
        import torch
    except ImportError:
        torch = None
    with ok.use_backend(args.backend):
        ours = example.opkernel_step(cfg, w, traced=args.traced)
        theirs = example.torch_step(torch, cfg, w, **example.TWIN_OPTIONS) if torch is not None else None
        data = example.batches(cfg)
        print("step  opkernel  torch")
        for s in range(args.steps):
            x, y = data()
            a = float(ours(x, y).numpy())
            b = float(theirs(x, y)) if theirs is not None else float("nan")
            print(f"{s:4d}  {a:8.4f}  {b:8.4f}")
    return 0
