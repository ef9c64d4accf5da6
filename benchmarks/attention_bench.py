"""The kernels of a small transformer's attention and optimizer step, each against what
it replaced and against torch, interleaved in one run, medians.

cpu (the plugin's kernels called directly: no dispatch):

* BatchMatMul, the six products of an attention layer's step (scores, weighted sum and
  their gradients, [32, 4, 64, 16]-sized queries): the native register-blocked kernel
  against numpy's matmul loop per item (the native module hidden) and ``torch.matmul``;
* SoftmaxGrad on [32, 4, 64, 64]: the native row kernel against the composition's numpy
  passes and torch's ``_softmax_backward_data``;
* ApplyAdam on a [64, 256] float32 variable: the native pass against the numpy passes.

``--backend opencl`` (the ops called through dispatch, synchronised per block): the
same BatchMatMuls with ``OPKERNEL_OPENCL_MATMUL=direct`` (A read in place) against
``packed``, and UnsortedSegmentSum of the embeddings' gradient.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE OPENBLAS_THREAD_TIMEOUT=18 .venv/bin/python benchmarks/attention_bench.py
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/attention_bench.py --backend opencl
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved  # noqa: E402
from layer_norm_bench import in_numpy  # noqa: E402  (the native module hidden from the kernels)
from run import environment, torch  # noqa: E402

FLOAT32 = ok.dtypes.as_dtype("float32")

#: (name, x shape, y shape, adj_x, adj_y): an attention layer's products, forward then gradients
PRODUCTS = [
    ("q k^T", (32, 4, 64, 16), (32, 4, 64, 16), False, True),
    ("p v", (32, 4, 64, 64), (32, 4, 64, 16), False, False),
    ("dout v^T", (32, 4, 64, 16), (32, 4, 64, 16), False, True),
    ("p^T dout", (32, 4, 64, 64), (32, 4, 64, 16), True, False),
    ("ds k", (32, 4, 64, 64), (32, 4, 64, 16), False, False),
    ("ds^T q", (32, 4, 64, 64), (32, 4, 64, 16), True, False),
]


def row(*cells: Any) -> None:
    print("| " + " | ".join(str(c) for c in cells) + " |")


def ratio(a: float, b: float) -> str:
    return "-" if b != b else f"{a / b:.2f}×"


def cpu() -> None:
    from opkernel_cpu import math_kernels, nn_kernels, state_kernels

    rng = np.random.default_rng(0)
    print("| kernel | shape | native | numpy path | torch | native ÷ numpy | native ÷ torch |")
    print("|---|---|---|---|---|---|---|")
    total = [0.0, 0.0, 0.0]
    for name, sx, sy, ax, ay in PRODUCTS:
        x, y = rng.standard_normal(sx).astype(np.float32), rng.standard_normal(sy).astype(np.float32)

        def native(x: np.ndarray = x, y: np.ndarray = y, ax: bool = ax, ay: bool = ay) -> Any:
            return math_kernels.batch_mat_mul(x, y, ax, ay, FLOAT32)

        want = np.matmul(np.swapaxes(x, -1, -2) if ax else x, np.swapaxes(y, -1, -2) if ay else y)
        np.testing.assert_allclose(native(), want, rtol=1e-4, atol=1e-4)
        theirs = None
        if torch is not None:
            tx, ty = torch.from_numpy(x), torch.from_numpy(y)
            theirs = (lambda tx=tx, ty=ty, ax=ax, ay=ay: torch.matmul(tx.transpose(-1, -2) if ax else tx,
                                                                     ty.transpose(-1, -2) if ay else ty))
        n, p, t = interleaved([Timed(native), Timed(in_numpy(native)), Timed(theirs)], rounds=5)
        total = [total[0] + n, total[1] + p, total[2] + t]
        row(f"BatchMatMul {name}", f"{list(sx)} · {list(sy)}", fmt_time(n), fmt_time(p), fmt_time(t), ratio(n, p), ratio(n, t))
    row("BatchMatMul, the six", "", fmt_time(total[0]), fmt_time(total[1]), fmt_time(total[2]),
        ratio(total[0], total[1]), ratio(total[0], total[2]))

    shape = (32, 4, 64, 64)
    g = rng.standard_normal(shape).astype(np.float32)
    logits = rng.standard_normal(shape)
    s = (np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)).astype(np.float32)

    def softmax_grad() -> Any:
        return nn_kernels.softmax_grad(g, s, FLOAT32)

    np.testing.assert_allclose(softmax_grad(), nn_kernels.softmax_grad_values(g, s), rtol=1e-4, atol=1e-6)
    theirs = None
    if torch is not None:
        tg, ts = torch.from_numpy(g), torch.from_numpy(s)
        theirs = (lambda: torch.ops.aten._softmax_backward_data(tg, ts, -1, torch.float32))
    n, p, t = interleaved([Timed(softmax_grad), Timed(in_numpy(softmax_grad)), Timed(theirs)], rounds=5)
    row("SoftmaxGrad", list(shape), fmt_time(n), fmt_time(p), fmt_time(t), ratio(n, p), ratio(n, t))

    slots = [rng.standard_normal((64, 256)).astype(np.float32) for _ in range(3)]
    slots[2] = np.abs(slots[2])
    grad = rng.standard_normal((64, 256)).astype(np.float32)
    scalars = [np.asarray(v, np.float32) for v in (0.9, 0.999, 1e-3, 0.9, 0.999, 1e-7)]

    def adam() -> Any:
        return state_kernels.apply_adam(*slots, *scalars, grad, use_nesterov=False)

    n, p, _ = interleaved([Timed(adam), Timed(in_numpy(adam)), Timed(None)], rounds=5)
    row("ApplyAdam", [64, 256], fmt_time(n), fmt_time(p), "-", ratio(n, p), "-")


def opencl() -> None:
    from opkernel_opencl import linalg_kernels
    from opkernel_opencl.array_kernels import BE

    ok.set_backend("opencl")
    be = BE()
    rng = np.random.default_rng(0)

    def under(variant: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            os.environ[linalg_kernels.ENV_MATMUL] = variant
            return fn()
        return call

    print(f"| op (OpenCL: {be.device_name}) | shape | A read in place (direct) | A and B packed | direct ÷ packed |")
    print("|---|---|---|---|---|")
    for name, sx, sy, ax, ay in PRODUCTS:
        x, y = ok.tensor(rng.standard_normal(sx).astype(np.float32)), ok.tensor(rng.standard_normal(sy).astype(np.float32))

        def product(x: Any = x, y: Any = y, ax: bool = ax, ay: bool = ay) -> Any:
            return ok.ops.batch_mat_mul(x, y, adj_x=ax, adj_y=ay)

        got = under("direct", product)().numpy()
        np.testing.assert_allclose(got, under("packed", product)().numpy(), rtol=1e-4, atol=1e-4)
        d, p = interleaved([Timed(under("direct", product), sync=be.synchronize),
                            Timed(under("packed", product), sync=be.synchronize)], rounds=5)
        row(f"BatchMatMul {name}", f"{list(sx)} · {list(sy)}", fmt_time(d), fmt_time(p), ratio(d, p))
    os.environ.pop(linalg_kernels.ENV_MATMUL, None)
    data = ok.tensor(rng.standard_normal((2048, 64)).astype(np.float32))
    ids = ok.tensor(rng.integers(0, 96, 2048).astype(np.int32))
    (t,) = interleaved([Timed(lambda: ok.ops.unsorted_segment_sum(data, ids, np.int64(96)), sync=be.synchronize)],
                       rounds=3)
    print()
    print(f"UnsortedSegmentSum [2048, 64] into 96 segments (the embeddings' gradient): {fmt_time(t)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=["cpu", "opencl"], default="cpu")
    args = parser.parse_args()
    print(environment())
    print()
    cpu() if args.backend == "cpu" else opencl()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
