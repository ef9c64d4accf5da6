"""Transcendental and activation kernels on the CPU backend against torch's CPU kernels
(and numpy's where it has the function): each op at 1e3, 1e5 and 1e7 float32 elements,
interleaved in one run, medians.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/unary_bench.py [--quick] [--markdown FILE]

Each op is called as a user calls it (``ok.ops.erf(x)``: dispatch included); torch with
its default thread count (the machine's cores), opkernel with its intra-op pool.
torch is required.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved  # noqa: E402
from run import environment, torch  # noqa: E402

SIZES = (1_000, 100_000, 10_000_000)


def cases() -> list[tuple[str, Callable[[Any], Any], Callable[[Any], Any], Callable[[np.ndarray], Any] | None, str]]:
    """(op, opkernel call, torch call, numpy call or None, input range)."""
    t, F = torch, torch.nn.functional
    return [
        ("Erf", ok.ops.erf, t.erf, None, "normal"),
        ("Exp", ok.ops.exp, t.exp, np.exp, "normal"),
        ("Log", ok.ops.log, t.log, np.log, "positive"),
        ("Tanh", ok.ops.tanh, t.tanh, np.tanh, "normal"),
        ("Sigmoid", ok.ops.sigmoid, t.sigmoid, None, "normal"),
        ("Softplus", ok.ops.softplus, F.softplus, None, "normal"),
        ("Elu", ok.ops.elu, F.elu, None, "normal"),
        ("Selu", ok.ops.selu, F.selu, None, "normal"),
        ("Rsqrt", ok.ops.rsqrt, t.rsqrt, None, "positive"),
        ("Relu", ok.ops.relu, t.relu, None, "normal"),
        ("Gelu", ok.ops.gelu, F.gelu, None, "normal"),
        # the gradient, x as its own incoming gradient (one input timed, as the others)
        ("GeluGrad", lambda v: ok.ops.gelu_grad(v, v), lambda v: t.ops.aten.gelu_backward(v, v), None, "normal"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if torch is None:
        print("torch is required (pip install torch==2.13.0)")
        return 1
    rng = np.random.default_rng(0)
    lines = ["| op | elements | opkernel | torch | numpy | opkernel / torch |", "|---|---|---|---|---|---|"]
    print(lines[0], lines[1], sep="\n", flush=True)
    with ok.use_backend("cpu"):
        for name, ours, theirs, plain, kind in cases():
            for n in SIZES:
                x = rng.standard_normal(n).astype(np.float32)
                if kind == "positive":
                    x = np.abs(x) + np.float32(0.1)
                ox, tx = ok.tensor(x), torch.from_numpy(x.copy())
                reps = 5 if args.quick else 15
                t_ok, t_torch, t_np = interleaved(
                    [Timed(lambda: ours(ox)), Timed(lambda: theirs(tx)), Timed((lambda: plain(x)) if plain else None)],
                    repeats=reps, rounds=3,
                )
                line = (f"| {name} | {n:.0e} | {fmt_time(t_ok)} | {fmt_time(t_torch)} | {fmt_time(t_np)} | "
                        f"{t_ok / t_torch:.2f}× |")
                print(line, flush=True)
                lines.append(line)
    lines += ["", environment()]
    print(lines[-1])
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
