"""ok.function against eager execution, side by side in one run (medians of many
paired repetitions): training steps traced vs eager vs torch eager, the
replay's cost per node against eager dispatch per op, and the cost of tracing.

    .venv/bin/python benchmarks/function_bench.py [--quick] [--backend cpu] [--threads N] [--markdown FILE]

torch is optional (``pip install torch==2.13.0``); without it the torch column is empty.
``--threads N`` runs every library with N threads (OpenBLAS, opkernel's intra-op pool,
torch): on a shared machine under load, one thread per library keeps a kernel from
waiting on a descheduled worker thread, which otherwise swings figures tenfold.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable


def _threads_arg(argv: list[str]) -> int | None:
    """--threads, read before numpy is imported (OpenBLAS reads its setting then)."""
    for k, a in enumerate(argv):
        if a == "--threads" and k + 1 < len(argv):
            return int(argv[k + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return None


THREADS = _threads_arg(sys.argv[1:])
if THREADS is not None:
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(THREADS)

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time  # noqa: E402
from run import environment, torch  # noqa: E402  (torch: None when not installed)

import models  # noqa: E402

NAN = float("nan")
#: Ops in the chain of tiny ops (replay overhead per node, tracing cost per op).
CHAIN = 200


def paired(contenders: list[Timed], rounds: int) -> tuple[list[float], list[float]]:
    """Median seconds per call of each contender, and the median over rounds of each
    one's time divided by the last contender's time in the same round.

    A round times one block (>= 20 ms) of each contender back to back, in rotating
    order; on a shared machine whose load comes in bursts of seconds, a ratio taken
    within a round compares contenders under the same load, where medians taken
    over whole runs can each come from a different burst."""
    live = [c for c in contenders if c.fn is not None]
    sizes = {}
    for c in live:
        c.block(1)
        n = 1
        while c.block(n) < 0.02 and n < 1 << 20:
            n *= 2
        sizes[id(c)] = n
    times: dict[int, list[float]] = {id(c): [] for c in live}
    ratios: dict[int, list[float]] = {id(c): [] for c in live}
    ref = contenders[-1]
    for r in range(rounds):
        this: dict[int, float] = {}
        for k in range(len(live)):
            c = live[(r + k) % len(live)]
            this[id(c)] = c.block(sizes[id(c)]) / sizes[id(c)]
            times[id(c)].append(this[id(c)])
        for c in live:
            ratios[id(c)].append(this[id(c)] / this[id(ref)])
    med = [statistics.median(times[id(c)]) if c.fn is not None else NAN for c in contenders]
    rat = [statistics.median(ratios[id(c)]) if c.fn is not None else NAN for c in contenders]
    return med, rat


def _sync(backend: str) -> Callable[[], None]:
    return ok.engine.backend_instance(backend).synchronize


def _train(model: Any, opt: Any, x: Any, y: Any) -> Any:
    with ok.GradientTape() as tape:
        loss = ok.nn.sparse_softmax_cross_entropy(model(x), y)
    grads = tape.gradient(loss, model.variables)
    opt.apply_gradients(zip(grads, model.variables))
    return loss


def _mlp(sizes: tuple[int, int, int], batch: int) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """(eager step, traced step) of the benchmarked MLP, each with its own model."""
    n_in, n_hidden, n_out = sizes
    x_np, y_np, _ = models._mlp_data(sizes, batch)
    x, y = ok.tensor(x_np), ok.tensor(y_np)
    traced = ok.nn.Sequential([ok.nn.Dense(n_in, n_hidden, "relu", seed=1), ok.nn.Dense(n_hidden, n_out, seed=2)])
    opt = ok.nn.SGD(models.LR)
    step = ok.function(_train)
    return models.mlp_step_opkernel(sizes, batch), lambda: step(traced, opt, x, y)


def _cnn() -> tuple[Callable[[], Any], Callable[[], Any]]:
    from digits import build_model

    x_np, y_np, _ = models._cnn_data()
    x, y = ok.tensor(x_np), ok.tensor(y_np)
    model, opt = build_model(), ok.nn.SGD(models.LR)
    step = ok.function(_train)
    return models.cnn_step_opkernel(), lambda: step(model, opt, x, y)


def steps(backend: str, quick: bool) -> list[list[str]]:
    rows = []
    cases: list[tuple[str, Callable[[], tuple[Callable[[], Any], Callable[[], Any]]], Callable[[], Any] | None,
                      Callable[[], Any]]] = [
        (f"MLP {'-'.join(map(str, models.MLP))} train step, batch {models.BATCH}",
         lambda: _mlp(models.MLP, models.BATCH),
         (lambda: models.mlp_step_torch(torch)) if torch is not None else None,
         lambda: models.mlp_step_numpy()),
        (f"MLP {'-'.join(map(str, models.TINY_MLP))} train step, batch {models.TINY_BATCH}",
         lambda: _mlp(models.TINY_MLP, models.TINY_BATCH),
         (lambda: models.mlp_step_torch(torch, models.TINY_MLP, models.TINY_BATCH)) if torch is not None else None,
         lambda: models.mlp_step_numpy(models.TINY_MLP, models.TINY_BATCH)),
        ("digits CNN train step, batch 64", _cnn, (lambda: models.cnn_step_torch(torch)) if torch is not None else None,
         models.cnn_step_numpy),
    ]
    for name, make, make_torch, make_numpy in cases:
        with ok.use_backend(backend):
            eager, traced = make()
            traced()  # traces
            sync = _sync(backend)
            (t_eager, t_torch, t_numpy, t_traced), (r_eager, r_torch, r_numpy, _) = paired(
                [Timed(eager, sync=sync), Timed(make_torch() if make_torch else None), Timed(make_numpy()),
                 Timed(traced, sync=sync)],
                rounds=9 if quick else 41,
            )
        rows.append([
            name, backend, fmt_time(t_eager), fmt_time(t_traced), fmt_time(t_torch), fmt_time(t_numpy),
            f"{r_eager:.2f}×", "-" if r_torch != r_torch else f"{r_torch:.2f}×", f"{1 / r_numpy:.2f}×",
        ])
    return rows


def _chain(x: Any, c: Any) -> Any:
    for _ in range(CHAIN):
        x = ok.ops.mul(x, c)
    return x


def overhead(backend: str, quick: bool) -> list[list[str]]:
    """Per op of a chain of tiny Muls (4 float32 elements): the kernel alone, eager
    dispatch, and the replay; each one's overhead is its time less the kernel's.  The
    replay runs node by node here (graph fusion off): fused, the chain is a few calls
    of 32 Muls each (the row with fusion on says what that costs per node)."""
    fused = ok.config.graph_fusion
    ok.config.graph_fusion = False
    try:
        rows = _overhead(backend, quick)
    finally:
        ok.config.graph_fusion = fused
    with ok.use_backend(backend):
        x, c = ok.tensor(np.ones(4, np.float32)), ok.tensor(np.full(4, 0.999, np.float32))
        f = ok.function(_chain)
        f(x, c)
        sync = _sync(backend)
        (t_fused,), _ = paired([Timed(lambda: f(x, c), sync=sync)], rounds=9 if quick else 41)
        groups = len(f.concrete_functions[0]._plans[ok.engine.backend_instance(backend)].groups)
    rows.append([f"the same chain, graph fusion on ({groups} fused groups)", backend, "-", "-", fmt_time(t_fused / CHAIN),
                 "-", "-", "-"])
    return rows


def _overhead(backend: str, quick: bool) -> list[list[str]]:
    with ok.use_backend(backend):
        x, c = ok.tensor(np.ones(4, np.float32)), ok.tensor(np.full(4, 0.999, np.float32))
        f = ok.function(_chain)
        f(x, c)
        cf = f.concrete_functions[0]
        sig = cf._plans[ok.engine.active_backend()].steps[0][1]
        fn, kw = sig.kernel.impl, ok.engine.kernel_kwargs(sig.kernel.impl, sig.attrs)
        xv, cv = x.value, c.value

        def kernel_only() -> None:  # the kernel called as the replay calls it
            y = xv
            if kw:
                for _ in range(CHAIN):
                    y = fn(y, cv, **kw)
            else:
                for _ in range(CHAIN):
                    y = fn(y, cv)

        sync = _sync(backend)
        (t_eager, t_replay, t_kernel), _ = paired(
            [Timed(lambda: _chain(x, c), sync=sync), Timed(lambda: f(x, c), sync=sync), Timed(kernel_only, sync=sync)],
            rounds=9 if quick else 41,
        )
    per = [t / CHAIN for t in (t_kernel, t_eager, t_replay)]
    eager_over, replay_over = per[1] - per[0], per[2] - per[0]
    return [[
        f"chain of {CHAIN} tiny Mul ops (graph fusion off)", backend, fmt_time(per[0]), fmt_time(per[1]), fmt_time(per[2]),
        fmt_time(eager_over), fmt_time(replay_over), f"{replay_over / eager_over:.2f}",
    ]]


def tracing(backend: str, quick: bool) -> list[list[str]]:
    """Milliseconds per traced op: tracing (a fresh Function each time) and the first
    call's binding and compilation on the backend, per node."""
    rows = []
    reps = 5 if quick else 11
    with ok.use_backend(backend):
        x, c = ok.tensor(np.ones(4, np.float32)), ok.tensor(np.full(4, 0.999, np.float32))
        x_np, y_np, _ = models._mlp_data(models.MLP, models.BATCH)
        mx, my = ok.tensor(x_np), ok.tensor(y_np)
        model = ok.nn.Sequential([ok.nn.Dense(784, 256, "relu", seed=1), ok.nn.Dense(256, 10, seed=2)])
        opt = ok.nn.SGD(models.LR)
        for name, fn, args in ((f"chain of {CHAIN} tiny Mul ops", _chain, (x, c)),
                               ("MLP 784-256-10 train step (forward, tape, SGD)", _train, (model, opt, mx, my))):
            trace_s, bind_s = [], []
            nodes = 0
            for _ in range(reps):
                f = ok.function(fn)
                t0 = time.perf_counter()
                cf = f.get_concrete_function(*args)
                t1 = time.perf_counter()
                cf._bind(ok.engine.active_backend())
                t2 = time.perf_counter()
                trace_s.append(t1 - t0)
                bind_s.append(t2 - t1)
                nodes = len(cf.graph.nodes)
            tr, bi = statistics.median(trace_s), statistics.median(bind_s)
            rows.append([name, backend, str(nodes), fmt_time(tr), f"{tr / nodes * 1e3:.3f} ms", f"{bi / nodes * 1e3:.3f} ms"])
    return rows


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--backend", default="cpu", help="the backend to measure (default: cpu)")
    parser.add_argument("--markdown", default="", help="also write the tables and environment to this file")
    parser.add_argument("--threads", type=int, default=None, help="threads per library (default: each its own)")
    args = parser.parse_args(argv)
    be = args.backend
    if args.threads is not None:
        ok.config.intra_op_parallelism_threads = args.threads
        if torch is not None:
            torch.set_num_threads(args.threads)
    parts = [
        table(["case", "backend", "eager", "ok.function", "torch eager", "numpy (hand-written)", "eager / traced (paired)",
               "torch / traced (paired)", "traced / numpy (paired)"], steps(be, args.quick)),
        table(["case", "backend", "kernel alone / op", "eager / op", "replay / node", "eager overhead / op",
               "replay overhead / node", "replay / eager overhead"], overhead(be, args.quick)),
        table(["traced function", "backend", "nodes", "tracing", "tracing / op", "first-call binding / node"],
              tracing(be, args.quick)),
    ]
    env = environment()
    if args.threads is not None:
        env += f"; threads per library: {args.threads} (OPENBLAS_NUM_THREADS, ok.config.intra_op_parallelism_threads, torch)"
    text = "\n\n".join(parts)
    print(env + "\n\n" + text)
    if args.markdown:
        cmd = "python benchmarks/function_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.markdown).write_text(f"Command: `{cmd.strip()}`\n\nEnvironment: {env}\n\n{text}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
