"""Median pooling, 3x3, stride 1, VALID, on an (8, 256, 256, 16) float32 NHWC batch:
opkernel-medianpool's kernel on every available backend, side by side with the
compositions a user would otherwise write (numpy: sliding_window_view + partition;
torch: unfold + median), all in one run, every figure a median of repetitions.

    .venv/bin/python benchmarks/median_pool.py [--quick] [--generic] [--shape 8,256,256,16]

``--generic`` also times the package's generic kernel (written with opkernel ops)
on the cpu backend.  torch is optional.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import fmt_time, per_call  # noqa: E402

try:
    import torch
except ImportError:  # an optional benchmark dependency
    torch = None

ATTRS = {"ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}


def numpy_partition(x: np.ndarray) -> Callable[[], np.ndarray]:
    """The composition in numpy: every window as a row of 9, then the 5th smallest."""

    def run() -> np.ndarray:
        windows = sliding_window_view(x, (3, 3), axis=(1, 2))  # (n, oh, ow, c, 3, 3), a view
        return np.partition(windows.reshape(*windows.shape[:4], 9), 4, axis=-1)[..., 4]

    return run


def numpy_median(x: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: np.median(sliding_window_view(x, (3, 3), axis=(1, 2)), axis=(-2, -1))


def torch_unfold(x: np.ndarray) -> Callable[[], Any]:
    """The composition in torch: unfold the NCHW view into columns of 9, median over them."""
    assert torch is not None
    t = torch.from_numpy(x).permute(0, 3, 1, 2)  # NCHW view of the NHWC data
    n, c, h, w = t.shape

    def run() -> Any:
        with torch.no_grad():
            cols = torch.nn.functional.unfold(t, 3)  # (n, c * 9, oh * ow)
            return cols.view(n, c, 9, -1).median(dim=2).values.view(n, c, h - 2, w - 2)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--generic", action="store_true", help="also time the generic kernel (slow)")
    parser.add_argument("--shape", default="8,256,256,16")
    parser.add_argument("--backends", default="", help="comma-separated (default: every available backend)")
    args = parser.parse_args(argv)
    shape = tuple(int(d) for d in args.shape.split(","))
    repeats = 5 if args.quick else 11
    x = np.random.default_rng(0).random(shape, dtype=np.float32)
    expected = numpy_partition(x)()
    rows: list[tuple[str, str, float]] = []

    def timed(what: str, how: str, fn: Callable[[], Any], **kw: Any) -> float:
        seconds = per_call(fn, repeats=repeats, min_block_s=0.2, **kw)
        rows.append((what, how, seconds))
        print(f"{what:34} {how:58} {fmt_time(seconds):>9}", flush=True)
        return seconds

    compositions = [timed("numpy", "sliding_window_view + partition (composition)", numpy_partition(x))]
    if not args.quick:
        compositions.append(timed("numpy", "sliding_window_view + median (composition)", numpy_median(x)))
    if torch is not None:
        check = torch_unfold(x)().numpy().transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(check, expected)
        compositions.append(timed("torch", f"unfold + median, {torch.get_num_threads()} threads (composition)", torch_unfold(x)))
    best = min(compositions)
    backends = [b for b in args.backends.split(",") if b] or ok.available_backends()
    fused: dict[str, float] = {}
    for name in backends:
        be = ok.engine.backend_instance(name)
        with ok.use_backend(name):
            t = ok.tensor(x)
            op = ok.ops.addons.median_pool2d
            kernel = ok.engine.select_kernel(ok.op_def("Addons>MedianPool2D"), name, {"T": ok.float32})
            np.testing.assert_array_equal(op(t, **ATTRS).numpy(), expected)
            kind = "generic kernel" if kernel.is_generic else f"fused {name} kernel"
            fused[name] = timed(f"opkernel on {name}", kind, lambda: op(t, **ATTRS), sync=be.synchronize)
    if args.generic:
        from opkernel_medianpool import composite

        with ok.use_backend("cpu"):
            t = ok.tensor(x)
            timed("opkernel on cpu", "generic kernel (written with opkernel ops)",
                  lambda: composite.median_pool2d(t, T=ok.float32, **ATTRS))
    env = [
        f"date {datetime.date.today().isoformat()}", f"{platform.machine()} {os.cpu_count()} cores",
        f"Python {platform.python_version()}", f"numpy {np.__version__}", f"opkernel {ok.__version__}",
    ]
    if torch is not None:
        env.append(f"torch {torch.__version__}")
    for name in backends:
        desc = ok.engine.backend_instance(name).describe()
        env.append(f"{name}: {desc.get('device', '?')}" + (f" ({desc['platform']})" if "platform" in desc else ""))
    print("\nEnvironment: " + "; ".join(env) + f"\nInput: {shape} float32 NHWC, 3x3, stride 1, VALID\n")
    print("| implementation | how | time per call | speed-up over the best composition |")
    print("|---|---|---|---|")
    for what, how, seconds in rows:
        print(f"| {what} | {how} | {fmt_time(seconds)} | {best / seconds:.1f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
