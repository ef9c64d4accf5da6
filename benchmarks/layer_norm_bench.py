"""The cpu plugin's FusedLayerNorm and FusedLayerNormGrad kernels, called directly (no
dispatch: eager ops run on a background executor, so timing ``ok.ops`` calls would time
the hand-off), the native row kernel against the plugin's numpy passes and torch's
``layer_norm`` forward and backward, interleaved in one run, medians.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/layer_norm_bench.py
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved  # noqa: E402
from run import environment, torch  # noqa: E402

from opkernel_cpu import nn_kernels, sharding  # noqa: E402

SHAPES = [(2048, 64), (2048, 256), (8192, 1024)]  # the transformer's rows first
FLOAT32 = ok.dtypes.as_dtype("float32")


@contextmanager
def numpy_passes() -> Iterator[None]:
    """The plugin's numpy path: the native module hidden from the kernels."""
    saved = sharding._native
    sharding._native = None
    try:
        yield
    finally:
        sharding._native = saved


def in_numpy(fn: Callable[[], Any]) -> Callable[[], Any]:
    def call() -> Any:
        with numpy_passes():
            return fn()
    return call


def torch_layer_norm(x: np.ndarray, dy: np.ndarray, scale: np.ndarray,
                     offset: np.ndarray) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """torch's layer_norm forward (no autograd) and its backward (x, weight and bias)."""
    assert torch is not None
    tx, tw, tb, tdy = (torch.from_numpy(v).requires_grad_(True) for v in (x, scale, offset, dy))
    shape = x.shape[-1:]

    def forward() -> Any:
        with torch.no_grad():
            return torch.nn.functional.layer_norm(tx, shape, tw, tb, 1e-5)

    ty = torch.nn.functional.layer_norm(tx, shape, tw, tb, 1e-5)

    def backward() -> Any:
        return torch.autograd.grad(ty, (tx, tw, tb), tdy, retain_graph=True)

    return forward, backward


def main() -> int:
    print(environment())
    print("| shape | pass | native kernel | numpy passes | torch | native ÷ numpy | native ÷ torch |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        rng = np.random.default_rng(0)
        x = rng.standard_normal(shape).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        scale, offset = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32), np.zeros(shape[-1], np.float32)

        def forward() -> Any:
            return nn_kernels.fused_layer_norm(x, scale, offset, 1e-5, FLOAT32)

        def backward() -> Any:
            return nn_kernels.fused_layer_norm_grad(dy, x, scale, 1e-5, FLOAT32)

        # The two paths agree before they are timed.
        with numpy_passes():
            want_y, want_g = forward(), backward()
        np.testing.assert_allclose(forward(), want_y, rtol=1e-4, atol=1e-5)
        for a, b in zip(backward(), want_g):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
        t_fwd, t_bwd = torch_layer_norm(x, dy, scale, offset) if torch is not None else (None, None)
        for name, native, theirs in (("forward", forward, t_fwd), ("gradient", backward, t_bwd)):
            n, p, t = interleaved([Timed(native), Timed(in_numpy(native)), Timed(theirs)], rounds=5)
            print(f"| {list(shape)} | {name} | {fmt_time(n)} | {fmt_time(p)} | {fmt_time(t)} | {n / p:.2f}× | {n / t:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
