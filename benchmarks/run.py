"""opkernel's benchmark suite: every figure a median of many repetitions, every
comparison a ratio measured in the same run.

    .venv/bin/python benchmarks/run.py [--quick] [--markdown FILE] [--only CASES]

torch is optional (``pip install torch==2.13.0``); without it the torch columns are empty.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

import opkernel as ok  # noqa: E402
from harness import Timed, fmt_time, interleaved, per_call  # noqa: E402

try:
    import torch

    torch.set_num_threads(os.cpu_count() or 1)
except ImportError:  # torch is an optional benchmark dependency
    torch = None

NAN = float("nan")


@dataclass
class Row:
    case: str
    backend: str
    opkernel: float
    numpy: float = NAN
    torch: float = NAN
    note: str = ""

    def ratio(self, other: float) -> str:
        return "-" if other != other or self.opkernel != self.opkernel else f"{self.opkernel / other:.2f}×"


def _sync(backend: str) -> Callable[[], None]:
    be = ok.engine.backend_instance(backend)
    return be.synchronize


def tiny_ops(backend: str, quick: bool) -> list[Row]:
    rows = []
    rep = 7 if quick else 15
    with ok.use_backend(backend):
        a = ok.tensor(np.ones(1, np.float32))
        m = ok.tensor(np.ones((4, 4), np.float32))
        na, nm = np.ones(1, np.float32), np.ones((4, 4), np.float32)
        add, mul, mat_mul = ok.ops.add, ok.ops.mul, ok.ops.mat_mul
        cases: list[tuple[str, Callable[[], Any], Callable[[], Any], Any]] = [
            ("add 1 elem", lambda: add(a, a), lambda: np.add(na, na), "add"),
            ("mul 1 elem", lambda: mul(a, a), lambda: np.multiply(na, na), "mul"),
            ("matmul 4×4", lambda: mat_mul(m, m), lambda: np.matmul(nm, nm), "matmul"),
        ]
        for name, f_ok, f_np, tname in cases:
            tf = tfg = None
            if torch is not None:
                ta, tm = torch.ones(1), torch.ones(4, 4)
                tf = {"add": lambda: torch.add(ta, ta), "mul": lambda: torch.mul(ta, ta), "matmul": lambda: torch.matmul(tm, tm)}[tname]
                tga, tgm = torch.ones(1, requires_grad=True), torch.ones(4, 4, requires_grad=True)
                tfg = {"add": lambda: torch.add(tga, tga), "mul": lambda: torch.mul(tga, tga), "matmul": lambda: torch.matmul(tgm, tgm)}[tname]

            def taped(f: Callable[[], Any] = f_ok) -> None:  # a tape records 100 calls, then is dropped
                with ok.GradientTape() as tape:
                    tape.watch(a)
                    tape.watch(m)
                    for _ in range(100):
                        f()

            # Back to back, each in its own steady state: a call of a microsecond depends on the
            # interpreter's warm caches, which turns with idle pauses between them would disturb.
            t_ok, t_np, t_ok_tape = per_call(f_ok, repeats=rep), per_call(f_np, repeats=rep), per_call(taped, repeats=rep)
            t_t = t_tg = NAN
            if tf is not None and tfg is not None:
                with torch.no_grad():
                    t_t = per_call(tf, repeats=rep)
                t_tg = per_call(tfg, repeats=rep)
            rows.append(Row(f"dispatch: {name}", backend, t_ok, t_np, t_t, "torch: autograd off"))
            rows.append(Row(f"dispatch: {name}, recording tape", backend, t_ok_tape / 100, NAN, t_tg,
                            "torch: requires_grad; opkernel: per call, 100 calls per tape"))
    return rows


def elementwise(backend: str, quick: bool) -> list[Row]:
    rows = []
    sync = _sync(backend)
    for n in (10**6, 10**7):
        x, y = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32)
        with ok.use_backend(backend):
            a, b = ok.tensor(x), ok.tensor(y)
            tx, ty = (torch.from_numpy(x), torch.from_numpy(y)) if torch is not None else (None, None)
            t_ok, t_np, t_t = interleaved(
                [Timed(lambda: ok.ops.add(a, b), sync=sync), Timed(lambda: np.add(x, y)),
                 Timed((lambda: torch.add(tx, ty)) if torch is not None else None)],
                repeats=7 if quick else 15,
            )
        gbs = 3 * 4 * n / t_ok / 1e9
        rows.append(Row(f"add {n:.0e} float32", backend, t_ok, t_np, t_t, f"{gbs:.1f} GB/s"))
    if backend == "cpu":
        n = 10**7
        x, y, out = np.random.rand(n).astype(np.float32), np.random.rand(n).astype(np.float32), np.empty(n, np.float32)
        fresh, reused = interleaved([Timed(lambda: np.add(x, y)), Timed(lambda: np.add(x, y, out=out))], repeats=7)
        rows.append(Row("numpy add 1e7: fresh output vs out=", "numpy", fresh, reused, NAN, "page-fault cost of fresh 40 MB outputs"))
    return rows


def matmul(backend: str, quick: bool) -> list[Row]:
    rows = []
    sync = _sync(backend)
    for n in ((256, 1024) if quick else (256, 1024, 2048)):
        x, y = np.random.rand(n, n).astype(np.float32), np.random.rand(n, n).astype(np.float32)
        with ok.use_backend(backend):
            a, b = ok.tensor(x), ok.tensor(y)
            tx, ty = (torch.from_numpy(x), torch.from_numpy(y)) if torch is not None else (None, None)
            t_ok, t_np, t_t = interleaved(
                [Timed(lambda: ok.ops.mat_mul(a, b), sync=sync), Timed(lambda: x @ y),
                 Timed((lambda: tx @ ty) if torch is not None else None)],
                repeats=5, min_block_s=0.05,
            )
        rows.append(Row(f"matmul {n}² float32", backend, t_ok, t_np, t_t, f"{2 * n**3 / t_ok / 1e9:.1f} GFLOP/s"))
    return rows


def mlp(backend: str, quick: bool) -> list[Row]:
    from models import MLP, TINY_BATCH, TINY_MLP, BATCH, mlp_step_numpy, mlp_step_opkernel, mlp_step_torch

    rows = []
    for sizes, batch, note in ((MLP, BATCH, "numpy: hand-written"),
                               (TINY_MLP, TINY_BATCH, "kernels negligible: the framework's cost per step")):
        f_np = mlp_step_numpy(sizes, batch)
        with ok.use_backend(backend):
            f_ok = mlp_step_opkernel(sizes, batch)
            f_t = mlp_step_torch(torch, sizes, batch) if torch is not None else None
            t_ok, t_np, t_t = interleaved(
                [Timed(f_ok, sync=_sync(backend)), Timed(f_np), Timed(f_t)], repeats=7 if quick else 15,
            )
        name = "-".join(map(str, sizes))
        rows.append(Row(f"MLP {name} train step, batch {batch}", backend, t_ok, t_np, t_t, note))
    return rows


def cnn(backend: str, quick: bool) -> list[Row]:
    from models import cnn_step_numpy, cnn_step_opkernel, cnn_step_torch

    f_np = cnn_step_numpy()
    with ok.use_backend(backend):
        f_ok = cnn_step_opkernel()
        t_ok, t_np, t_t = interleaved(
            [Timed(f_ok, sync=_sync(backend)), Timed(f_np), Timed(cnn_step_torch(torch) if torch is not None else None)],
            repeats=5 if quick else 11,
        )
    return [Row("digits CNN train step, batch 64", backend, t_ok, t_np, t_t, "numpy: hand-written")]


def pool(backend: str, quick: bool) -> list[Row]:
    """The digits CNN's two 2×2 max pools (NHWC), forward and gradient, alone."""
    rows = []
    rep = 7 if quick else 15
    attrs = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"}
    rng = np.random.default_rng(0)
    for n, h, w, c in ((64, 8, 8, 16), (64, 4, 4, 32)):
        x = np.maximum(rng.standard_normal((n, h, w, c)), 0).astype(np.float32)  # after Relu: ties at 0
        windows = x.reshape(n, h // 2, 2, w // 2, 2, c)
        y = windows.max(axis=(2, 4))
        dy = rng.standard_normal(y.shape).astype(np.float32)

        def np_grad() -> np.ndarray:  # the numpy CNN step's mask (it marks every tie) and product
            mask = windows == y[:, :, None, :, None]
            return (mask * dy[:, :, None, :, None]).reshape(n, h, w, c)

        def np_fwd_mask() -> tuple[np.ndarray, np.ndarray]:  # the numpy step's forward: max and mask
            out = windows.max(axis=(2, 4))
            return out, windows == out[:, :, None, :, None]

        t_fwd = t_fwd_idx = t_bwd = None
        if torch is not None:
            f = torch.nn.functional
            tx = torch.from_numpy(x).permute(0, 3, 1, 2)  # NCHW view of NHWC memory: channels_last
            ty, idx = f.max_pool2d(tx, 2, return_indices=True)
            tdy = torch.from_numpy(dy).permute(0, 3, 1, 2)
            t_fwd = lambda: f.max_pool2d(tx, 2)  # noqa: E731
            t_fwd_idx = lambda: f.max_pool2d(tx, 2, return_indices=True)  # noqa: E731
            t_bwd = lambda: torch.ops.aten.max_pool2d_with_indices_backward(  # noqa: E731
                tdy, tx, [2, 2], [2, 2], [0, 0], [1, 1], False, idx)
        with ok.use_backend(backend):
            ox, oy, ody = ok.tensor(x), ok.tensor(y), ok.tensor(dy)
            argmax = ok.ops.max_pool_with_argmax(ox, include_batch_in_index=True, **attrs).argmax
            sync = _sync(backend)
            fwd = interleaved([Timed(lambda: ok.ops.max_pool(ox, **attrs), sync=sync),
                               Timed(lambda: windows.max(axis=(2, 4))), Timed(t_fwd)], repeats=rep)
            fwd_idx = interleaved([
                Timed(lambda: ok.ops.max_pool_with_argmax(ox, include_batch_in_index=True, **attrs), sync=sync),
                Timed(np_fwd_mask), Timed(t_fwd_idx)], repeats=rep)
            bwd = interleaved([Timed(lambda: ok.ops.max_pool_grad(ox, oy, ody, **attrs), sync=sync),
                               Timed(np_grad), Timed(t_bwd)], repeats=rep)
            bwd_idx = interleaved([
                Timed(lambda: ok.ops.max_pool_grad_with_argmax(ox, ody, argmax, include_batch_in_index=True, **attrs),
                      sync=sync),
                Timed(np_grad), Timed(t_bwd)], repeats=rep)
        shape = f"{n}×{h}×{w}×{c}"
        rows.append(Row(f"MaxPool 2×2, {shape}", backend, *fwd, "numpy: reshape + max; torch: channels_last"))
        rows.append(Row(f"MaxPoolWithArgmax 2×2, {shape}", backend, *fwd_idx,
                        "numpy: max + tie mask; torch: return_indices"))
        rows.append(Row(f"MaxPoolGrad 2×2, {shape}", backend, *bwd,
                        "numpy: mask + product; torch: from the forward's indices"))
        rows.append(Row(f"MaxPoolGradWithArgmax 2×2, {shape}", backend, *bwd_idx,
                        "numpy: mask + product; torch: from the forward's indices"))
    return rows


def _subprocess_seconds(code: str, runs: int, **env: str) -> float:
    """Median over ``runs`` fresh interpreters, after one untimed run.  Bytecode
    caching is on (as for an installed package) even where the environment turns
    it off: a source compile of every module would be timed otherwise."""
    times = []
    full_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | env
    subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, env=full_env)
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=full_env).stdout
        times.append(float(out.strip().splitlines()[-1]))
    return float(np.median(times))


def startup(quick: bool) -> list[Row]:
    runs = 5 if quick else 11
    imp = _subprocess_seconds("import time; t=time.perf_counter(); import opkernel; print(time.perf_counter()-t)", runs)
    np_imp = _subprocess_seconds("import time; t=time.perf_counter(); import numpy; print(time.perf_counter()-t)", runs)
    first_op = ("import time; t=time.perf_counter(); import opkernel as ok; ok.ops.add(ok.tensor([1.0]), ok.tensor([1.0]));"
                " print(time.perf_counter()-t)")
    first_cpu = _subprocess_seconds(first_op, runs, OPKERNEL_BACKEND="cpu")
    default = ok.available_backends()[0]
    first_default = _subprocess_seconds(first_op, runs)
    heavy = subprocess.run(
        [sys.executable, "-c", "import sys, opkernel; print(sorted(m for m in ('cupy', 'pyopencl', 'torch') if m in sys.modules))"],
        capture_output=True, text=True, check=True).stdout.strip()
    return [
        Row("import opkernel", "-", imp, np_imp, NAN, f"numpy column: import numpy; heavy modules imported: {heavy}"),
        Row("import + first op (plugin discovery)", "cpu", first_cpu, NAN, NAN, "OPKERNEL_BACKEND=cpu"),
        Row("import + first op (plugin discovery)", default, first_default, NAN, NAN,
            "the default backend: includes its initialisation"),
    ]


CASES: dict[str, Callable[[str, bool], list[Row]]] = {
    "tiny": tiny_ops, "elementwise": elementwise, "matmul": matmul, "pool": pool, "mlp": mlp, "cnn": cnn,
}


def environment() -> str:
    parts = [
        f"date {datetime.date.today().isoformat()}",
        f"{platform.machine()} {os.cpu_count()} cores ({platform.processor() or 'unknown cpu'})",
        f"Python {platform.python_version()}", f"numpy {np.__version__}", f"opkernel {ok.__version__}",
    ]
    if torch is not None:
        parts.append(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    for name in ok.available_backends():
        desc = ok.engine.backend_instance(name).describe()
        parts.append(f"{name}: " + ", ".join(f"{k}={v}" for k, v in desc.items()))
    return "; ".join(parts)


def render(rows: list[Row]) -> str:
    lines = [
        "| case | backend | opkernel | numpy | torch | opkernel / numpy | opkernel / torch | note |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r.case} | {r.backend} | {fmt_time(r.opkernel)} | {fmt_time(r.numpy)} | {fmt_time(r.torch)} | "
                     f"{r.ratio(r.numpy)} | {r.ratio(r.torch)} | {r.note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions and sizes")
    parser.add_argument("--only", default="", help=f"comma-separated subset of: startup,{','.join(CASES)}")
    parser.add_argument("--backends", default="", help="comma-separated (default: every available backend)")
    parser.add_argument("--markdown", default="", help="also write the table and environment to this file")
    args = parser.parse_args(argv)
    only = [c for c in args.only.split(",") if c] or ["startup", *CASES]
    backends = [b for b in args.backends.split(",") if b] or ok.available_backends()
    rows: list[Row] = []
    if "startup" in only:
        rows += startup(args.quick)
    for case, fn in CASES.items():
        if case in only:
            for backend in backends:
                new_rows = fn(backend, args.quick)
                rows += new_rows
                for line in render(new_rows).splitlines()[2:]:
                    print(line, flush=True)
    env = environment()
    table = render(rows)
    print("\n" + env + "\n\n" + table)
    if args.markdown:
        cmd = "python benchmarks/run.py " + " ".join(argv if argv is not None else sys.argv[1:])
        Path(args.markdown).write_text(f"Command: `{cmd.strip()}`\n\nEnvironment: {env}\n\n{table}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
