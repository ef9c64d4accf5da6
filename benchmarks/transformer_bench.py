"""The character-level transformer LM of examples/transformer_lm.py, one training step
four ways, interleaved in one process: opkernel eager, opkernel traced (``ok.function``),
torch eager and ``torch.compile``; then ``ok.profile`` of one eager and one traced step.

    .venv/bin/python benchmarks/transformer_bench.py [--backend cpu] [--quick] [--no-compile] [--markdown FILE]

Run with the machine's OpenBLAS pins unset (``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``)
so numpy gets its best GEMM kernels.  torch is optional (``pip install torch==2.13.0``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time  # noqa: E402
from run import environment, torch  # noqa: E402

import transformer_lm as lm  # noqa: E402


def rounds(contenders: list[Timed], n_rounds: int) -> tuple[list[float], list[list[float]]]:
    """Median seconds per step of each contender, and per round the ratio of each one to
    the first (rounds rotate the order; a round times one block of each, back to back)."""
    live = [c for c in contenders if c.fn is not None]
    sizes = {}
    for c in live:
        c.block(2)
        n = 1
        while c.block(n) < 0.1 and n < 1 << 12:
            n *= 2
        sizes[id(c)] = n
    times: dict[int, list[float]] = {id(c): [] for c in live}
    ratios: list[list[float]] = []
    for r in range(n_rounds):
        this: dict[int, float] = {}
        for k in range(len(live)):
            c = live[(r + k) % len(live)]
            time.sleep(0.02)
            this[id(c)] = c.block(sizes[id(c)]) / sizes[id(c)]
            times[id(c)].append(this[id(c)])
        ratios.append([this[id(c)] / this[id(contenders[0])] if c.fn is not None else float("nan") for c in contenders])
    med = [statistics.median(times[id(c)]) if c.fn is not None else float("nan") for c in contenders]
    return med, ratios


def memory_line(fn: Any, be: ok.Backend) -> str:
    """The arrays one traced step makes, and those its fused groups write into a dead input
    instead (planned memory; the plan's own figures, so static shapes only)."""
    from opkernel._symbolic import graph_shapes

    cf = fn.concrete_functions[-1]
    plan = cf._plans[be]
    shapes = graph_shapes(cf.graph)
    grouped = {i for g in plan.groups for i in g.members}

    def nbytes(i: int, k: int = 0) -> int:
        spec = shapes[i][k]
        dims = spec.shape if spec.shape is not None and None not in spec.shape else ()
        return int(np.prod(dims)) * spec.dtype.np.itemsize

    made = [nbytes(i, k) for i, _ in plan.steps if i not in grouped for k in range(len(cf.graph.nodes[i].outputs))]
    made += [nbytes(i) for g in plan.groups for i in g.outputs]
    reused = [nbytes(g.outputs[j]) for g in plan.groups for j, d in enumerate(getattr(g.runner, "reuse", ())) if d is not None]
    mb = 1 << 20
    return (f"Arrays per traced step: {len(made)} values, {sum(made) / mb:.1f} MiB; written into a dead input's array "
            f"instead of a new one (ok.config.buffer_reuse {'on' if ok.config.buffer_reuse else 'off'}): "
            f"{len(reused)} ({sum(reused) / mb:.1f} MiB), so {len(made) - len(reused)} new arrays, "
            f"{(sum(made) - sum(reused)) / mb:.1f} MiB")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out (its cold compile takes 25 s or more)")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    cfg = lm.Config()
    w = lm.initial_weights(cfg)
    x, y = lm.batches(cfg)()
    out: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        out.append(line)

    with ok.use_backend(args.backend):
        sync = ok.engine.backend_instance(args.backend).synchronize
        eager, traced = lm.opkernel_step(cfg, w), lm.opkernel_step(cfg, w, traced=True)
        t0 = time.perf_counter()
        traced(x, y)
        trace_s = time.perf_counter() - t0
        contenders = [Timed(lambda: eager(x, y), sync=sync), Timed(lambda: traced(x, y), sync=sync)]
        names = ["opkernel eager", "opkernel traced"]
        if torch is not None:
            t_eager = lm.torch_step(torch, cfg, w)
            contenders.append(Timed(lambda: t_eager(x, y)))
            names.append("torch eager")
            if not args.no_compile:
                t_comp = lm.torch_step(torch, cfg, w, compiled=True)
                t0 = time.perf_counter()
                t_comp(x, y)
                t_comp(x, y)
                compile_s = time.perf_counter() - t0
                contenders.append(Timed(lambda: t_comp(x, y)))
                names.append("torch.compile")
        med, ratios = rounds(contenders, 5 if args.quick else 15)
        say(f"## Transformer LM training step ({args.backend})")
        say()
        say(f"d_model {cfg.d_model}, {cfg.heads} heads, context {cfg.context}, batch {cfg.batch}, {cfg.layers} blocks, "
            f"erf-GELU MLP ×{cfg.mlp}, Adam; medians of {len(ratios)} interleaved rounds.")
        say()
        ref = names.index("torch eager") if "torch eager" in names else 0
        say(f"| step | time | ÷ opkernel eager | ÷ {names[ref]} |")
        say("|---|---|---|---|")
        for k, name in enumerate(names):
            over_eager = statistics.median(r[k] for r in ratios)
            over_ref = statistics.median(r[k] / r[ref] for r in ratios)
            say(f"| {name} | {fmt_time(med[k])} | {over_eager:.2f}× | {over_ref:.2f}× |")
        say()
        say(f"Tracing and binding the step: {trace_s:.2f} s" + (
            f"; torch.compile's first two steps: {compile_s:.1f} s" if "torch.compile" in names else ""))
        be = ok.engine.backend_instance(args.backend)
        if hasattr(be, "_enqueue"):  # OpenCL: kernel launches (enqueues) per step
            counts = []
            for step in (eager, traced):
                n = [0]
                enqueue = be._enqueue

                def counting(*a: object, **k: object) -> object:
                    n[0] += 1
                    return enqueue(*a, **k)

                be._enqueue = counting
                try:
                    step(x, y)
                    sync()
                finally:
                    del be._enqueue  # the class's method again
                counts.append(n[0])
            say()
            say(f"OpenCL kernel launches per step: eager {counts[0]}, traced {counts[1]} "
                f"(graph fusion {'on' if ok.config.graph_fusion else 'off'})")
        say()
        say(memory_line(traced.function, be))
        for name, step in (("eager", eager), ("traced", traced)):
            with ok.profile() as prof:
                step(x, y)
            rows = sorted(prof.rows(), key=lambda r: -r[3])
            total = sum(r[3] for r in rows)
            calls = sum(r[2] for r in rows)
            say()
            say(f"`ok.profile` of one {name} step: {calls} kernel calls, {fmt_time(total)} in kernels; the ten largest:")
            say()
            say("| op | calls | time | share |")
            say("|---|---|---|---|")
            for _backend, op, n, seconds, _nbytes in rows[:10]:
                say(f"| {op} | {n} | {fmt_time(seconds)} | {seconds / total:.0%} |")
    say()
    say(environment())
    if args.markdown:
        args.markdown.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    raise SystemExit(main())
