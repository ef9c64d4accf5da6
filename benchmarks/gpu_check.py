"""Check the CUDA backend on a machine with an NVIDIA GPU, and print one table.

    python benchmarks/gpu_check.py [--skip tests,checks,digits,bench] [--quick]

1. tests:  the whole test suite with cuda required (pytest --opkernel-backends=cpu,cuda)
2. checks: check_op for every op across cpu and cuda, with inputs taken from the
           op test tables (tests/test_ops_*.py) and a few rows below for the
           variable updates
3. digits: the digits demo on cuda (examples/digits.py --backends cpu,cuda)
4. bench:  a float32 elementwise Add of 1e8 elements against the device-to-device
           copy bandwidth measured in the same run; MatMul 8192^2 in float32 and
           float16 against cupy.matmul; the per-op dispatch overhead of a tiny op
           against cupy's own call and torch's CUDA eager call (if torch is installed)

Written from cupy's documentation, not yet run on a GPU (see docs/cuda.md).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import opkernel as ok  # noqa: E402
from harness import per_call  # noqa: E402

Row = tuple[str, str, str]  # (section, what, result)
rows: list[Row] = []
failures: list[str] = []


def record(section: str, what: str, result: str) -> None:
    rows.append((section, what, result))
    print(f"[{section}] {what}: {result}", flush=True)


def step(section: str, fn: Callable[[], None]) -> None:
    try:
        fn()
    except Exception as e:  # one failing step must not hide the others
        record(section, "error", f"{type(e).__name__}: {e}")
        failures.append(section)
        traceback.print_exc()


# ------------------------------------------------------------ 1. the test suite


def run_tests() -> None:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--opkernel-backends=cpu,cuda", "-x", "--no-header"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    summary = (out.stdout.strip().splitlines() or ["no output"])[-1]
    record("tests", "pytest --opkernel-backends=cpu,cuda", f"exit {out.returncode}: {summary} ({time.perf_counter() - t0:.0f} s)")
    if out.returncode:
        failures.append("tests")
        print(out.stdout[-6000:], out.stderr[-3000:])


# ------------------------------------------------------------ 2. check_op for every op


def _state_inputs() -> dict[str, tuple[list[Any], dict[str, Any]]]:
    rng = np.random.default_rng(0)
    v = lambda: rng.standard_normal((4, 3)).astype(np.float32)  # noqa: E731
    s = lambda x: np.array(x, np.float32)  # noqa: E731
    return {
        "Assign": ([v(), v()], {}),
        "AssignAdd": ([v(), v()], {}),
        "AssignSub": ([v(), v()], {}),
        "ApplyGradientDescent": ([v(), s(0.1), v()], {}),
        "ApplyMomentum": ([v(), v(), s(0.1), v(), s(0.9)], {"use_nesterov": True}),
        "ApplyAdam": ([v(), v(), np.abs(v()), s(0.9), s(0.999), s(0.01), s(0.9), s(0.999), s(1e-7), v()], {}),
    }


def _table_inputs() -> dict[str, tuple[list[Any], dict[str, Any], bool]]:
    import test_ops_array
    import test_ops_math
    import test_ops_nn

    found: dict[str, tuple[list[Any], dict[str, Any], bool]] = {}
    for case in test_ops_math.CASES + test_ops_array.CASES + test_ops_nn.CASES:
        if case.op in found:
            continue
        dtype = "float32" if "float32" in case.dtypes else case.dtypes[0]
        found[case.op] = (list(case.inputs(np.random.default_rng(0), dtype)), dict(case.attrs), case.grad)
    return found


def run_checks() -> None:
    from opkernel import op_registry, plugins
    from opkernel.testing.check_op import CheckOpFailure, check_op

    plugins.ensure_loaded()
    table = _table_inputs()
    state = _state_inputs()
    passed, failed, missing = 0, [], []
    for op in sorted(op_registry.op_names()):
        if op == "StringToNumber":
            continue  # CPU only: strings cannot live on the device
        if op in table:
            inputs, attrs, grads = table[op]
        elif op in state:
            (inputs, attrs), grads = state[op], False
        else:
            missing.append(op)
            continue
        try:
            check_op(op, inputs, attrs, backends=["cpu", "cuda"], check_gradients=grads)
            passed += 1
        except CheckOpFailure as e:
            failed.append(op)
            print(e)
    failures.extend(f"check_op {op}" for op in failed)
    record("check_op", f"{passed + len(failed)} ops on cpu and cuda", f"{passed} passed, {len(failed)} failed {failed or ''}")
    if missing:
        record("check_op", "ops without inputs here", ", ".join(missing))


# ------------------------------------------------------------ 3. the digits demo


def run_digits() -> None:
    cmd = [sys.executable, str(ROOT / "examples" / "digits.py"), "--backends", "cpu,cuda"]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    lines = [ln for ln in out.stdout.strip().splitlines() if ln.strip()]
    record("digits", "examples/digits.py --backends cpu,cuda", f"exit {out.returncode} ({time.perf_counter() - t0:.0f} s)")
    for ln in lines[-4:]:
        record("digits", "output", ln.strip())
    if out.returncode:
        failures.append("digits")
        print(out.stderr[-3000:])


# ------------------------------------------------------------ 4. benchmarks


def _device_seconds(cp: Any, fn: Callable[[], Any], repeats: int = 10) -> float:
    """Median device time of ``fn`` between two CUDA events on cupy's current stream."""
    fn()
    cp.cuda.Device().synchronize()
    times = []
    for _ in range(repeats):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) / 1e3)  # milliseconds -> seconds
    return float(np.median(times))


def run_bench(quick: bool) -> None:
    import cupy as cp

    n = 10**7 if quick else 10**8
    with ok.use_backend("cuda"):
        x = ok.tensor(np.ones(n, np.float32))
        y = ok.tensor(np.full(n, 2.0, np.float32))
        src, dst = x.value, cp.empty_like(x.value)
        copy_s = _device_seconds(cp, lambda: cp.copyto(dst, src))
        add_s = _device_seconds(cp, lambda: ok.ops.add(x, y))
        copy_gbs = 2 * 4 * n / copy_s / 1e9  # read + write
        add_gbs = 3 * 4 * n / add_s / 1e9  # two reads + one write
        record("bench", f"Add float32, {n:.0e} elements", f"{add_s * 1e3:.2f} ms, {add_gbs:.0f} GB/s = {add_gbs / copy_gbs:.0%} of copy")
        record("bench", "device-to-device copy (same run)", f"{copy_s * 1e3:.2f} ms, {copy_gbs:.0f} GB/s")
        del x, y, src, dst
        cp.get_default_memory_pool().free_all_blocks()

        m = 2048 if quick else 8192
        for dtype in ("float32", "float16"):
            rng = np.random.default_rng(0)
            a = ok.tensor(rng.standard_normal((m, m)).astype(dtype))
            b = ok.tensor(rng.standard_normal((m, m)).astype(dtype))
            ours = _device_seconds(cp, lambda: ok.ops.mat_mul(a, b), repeats=5)
            ref = _device_seconds(cp, lambda: cp.matmul(a.value, b.value), repeats=5)
            flops = 2 * m**3
            record(
                "bench", f"MatMul {m}^2 {dtype}",
                f"{flops / ours / 1e12:.1f} TFLOP/s vs cupy.matmul {flops / ref / 1e12:.1f} TFLOP/s ({ref / ours:.0%})",
            )
            del a, b
        cp.get_default_memory_pool().free_all_blocks()

        # Dispatch overhead: host time per call of a tiny op (no synchronisation per call).
        tx, ty = ok.tensor(np.ones(1, np.float32)), ok.tensor(np.ones(1, np.float32))
        sync = cp.cuda.Device().synchronize
        ours = per_call(lambda: ok.ops.add(tx, ty), sync=sync)
        cx, cy = tx.value, ty.value
        cupy_s = per_call(lambda: cp.add(cx, cy), sync=sync)
        line = f"opkernel {ours * 1e6:.1f} us, cupy {cupy_s * 1e6:.1f} us"
        try:
            import torch

            if torch.cuda.is_available():
                gx, gy = torch.ones(1, device="cuda"), torch.ones(1, device="cuda")
                torch_s = per_call(lambda: gx + gy, sync=torch.cuda.synchronize)
                line += f", torch eager {torch_s * 1e6:.1f} us"
            else:
                line += ", torch: no CUDA"
        except ImportError:
            line += ", torch not installed"
        record("bench", "dispatch, Add of 1 float32", line)


# ------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip", default="", help="comma-separated steps to skip: tests, checks, digits, bench")
    parser.add_argument("--quick", action="store_true", help="smaller benchmark sizes")
    args = parser.parse_args(argv)
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}

    reason = {n: r for n, _, r in ok.engine.backend_status()}.get("cuda", "opkernel-cuda is not installed")
    if reason is not None:
        print(f"the cuda backend is not available here: {reason}")
        return 2
    be = ok.engine.backend_instance("cuda")
    for k, v in be.describe().items():
        record("device", k, v)
    record("device", "warmup", f"{ok.warmup('cuda')} raw sources compiled")
    os.environ.setdefault("OPKERNEL_STRICT_PLUGINS", "1")

    if "tests" not in skip:
        step("tests", run_tests)
    if "checks" not in skip:
        step("check_op", run_checks)
    if "digits" not in skip:
        step("digits", run_digits)
    if "bench" not in skip:
        step("bench", lambda: run_bench(args.quick))

    width = max(len(w) for _, w, _ in rows)
    print("\n" + "=" * 100)
    print(f"{'section':<9} {'what':<{width}}  result")
    print("-" * 100)
    for section, what, result in rows:
        print(f"{section:<9} {what:<{width}}  {result}")
    print(f"\n{'FAILED: ' + ', '.join(failures) if failures else 'all checks passed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
