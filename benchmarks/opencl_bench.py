"""The OpenCL backend side by side with numpy, in one run.

    python benchmarks/opencl_bench.py [--reps 15] [--quick]

Rows (medians of ``--reps`` repetitions, after a warm-up call):

* ``add 1e7 float32``: ``ok.ops.add`` on the opencl backend (plus one
  ``synchronize``) vs ``np.add``, as throughput: 3 x 4 bytes per element; the
  second row gives numpy a preallocated output (``out=``), as the backend's memory
  pool gives the op one.
* ``matmul 1024 float32``: ``ok.ops.mat_mul`` (plus ``synchronize``) vs numpy's
  BLAS ``a @ b``, in GFLOP/s.
* ``dispatch, 4 elements``: the cost of one ``ok.ops.add`` call on tiny tensors
  (1000 calls, then one synchronize), next to pyopencl's own raw enqueue of the
  same compiled kernel and to numpy's ``np.add`` on the same data.

Speed claims in docs/opencl.md come from this script, never from tests.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import time
from typing import Any, Callable

import numpy as np

import opkernel as ok


def median_time(fn: Callable[[], Any], reps: int, sync: Callable[[], None] = lambda: None) -> float:
    fn()
    sync()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (a smoke test)")
    args = parser.parse_args()
    reps = args.reps
    be: Any = ok.engine.backend_instance("opencl")
    sync = be.synchronize
    rows: list[tuple[str, str, str, str]] = []
    rng = np.random.default_rng(0)

    n = 10**6 if args.quick else 10**7
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    with ok.use_backend("opencl"):
        A, B = ok.tensor(a), ok.tensor(b)
        t_ocl = median_time(lambda: ok.ops.add(A, B), reps, sync)
    t_np = median_time(lambda: np.add(a, b), reps)
    c = np.empty_like(a)
    t_np_out = median_time(lambda: np.add(a, b, out=c), reps)
    gb = 3 * 4 * n / 1e9
    rows.append((f"add {n:.0e} float32", f"{gb / t_ocl:.1f} GB/s ({t_ocl * 1e3:.2f} ms)", f"{gb / t_np:.1f} GB/s ({t_np * 1e3:.2f} ms)", f"{t_np / t_ocl:.2f}"))
    rows.append((f"add {n:.0e} float32, numpy out=", "(as above)", f"{gb / t_np_out:.1f} GB/s ({t_np_out * 1e3:.2f} ms)", f"{t_np_out / t_ocl:.2f}"))

    m = 256 if args.quick else 1024
    x, y = rng.random((m, m), dtype=np.float32), rng.random((m, m), dtype=np.float32)
    with ok.use_backend("opencl"):
        X, Y = ok.tensor(x), ok.tensor(y)
        err = np.abs(ok.ops.mat_mul(X, Y).numpy() - x @ y).max()
        t_ocl = median_time(lambda: ok.ops.mat_mul(X, Y), reps, sync)
    t_np = median_time(lambda: x @ y, reps)
    flop = 2 * m**3 / 1e9
    rows.append((f"matmul {m} float32", f"{flop / t_ocl:.1f} GFLOP/s ({t_ocl * 1e3:.1f} ms)", f"{flop / t_np:.1f} GFLOP/s ({t_np * 1e3:.1f} ms)", f"{t_np / t_ocl:.2f}"))

    calls = 1000
    s1, s2 = np.ones(4, np.float32), np.ones(4, np.float32)
    with ok.use_backend("opencl"):
        T1, T2 = ok.tensor(s1), ok.tensor(s2)

        def dispatch() -> None:
            for _ in range(calls):
                ok.ops.add(T1, T2)

        t_op = median_time(dispatch, max(3, reps // 3), sync) / calls
        knl = be.programs.kernel("ew:Add", "float32", "k_vv", "Add")
        out = be.new_array((4,), np.dtype(np.float32))

        def raw() -> None:
            for _ in range(calls):
                knl(be.queue, (4,), (1,), out.base_data, T1.value.base_data, T2.value.base_data)

        t_raw = median_time(raw, max(3, reps // 3), sync) / calls
    t_np = median_time(lambda: [np.add(s1, s2) for _ in range(calls)], max(3, reps // 3)) / calls
    rows.append(("dispatch, 4 elements (per call)", f"{t_op * 1e6:.1f} us", f"{t_np * 1e6:.2f} us (np.add)", f"pyopencl raw enqueue {t_raw * 1e6:.1f} us"))

    facts = be.describe()
    import pyopencl

    print(f"# opkernel OpenCL benchmark, {datetime.date.today()}; medians of {reps} repetitions")
    print(f"# device: {facts['device']} ({facts['platform']}, {facts['opencl']}, driver {facts['driver']})")
    print(f"# host: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; python {platform.python_version()}, "
          f"numpy {np.__version__}, pyopencl {pyopencl.VERSION_TEXT}; matmul max abs error {err:.2g}")
    widths = [max(len(r[i]) for r in rows + [("case", "opencl", "numpy", "numpy time / opencl time")]) for i in range(4)]
    header = ("case", "opencl", "numpy", "numpy time / opencl time")
    for row in [header, tuple("-" * w for w in widths), *rows]:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths)))


if __name__ == "__main__":
    main()
