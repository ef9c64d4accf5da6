"""What an OpenCL upload from a caller's large numpy buffer costs, three ways.

    python benchmarks/opencl_upload.py [--reps 15]

An upload must not read the caller's buffer after ``from_numpy`` returns (a data
loader refills it at once).  Rows, for 1e6 and 1e7 float32 (medians of ``--reps``):

* ``async, no copy``: the old path (an asynchronous write straight from the
  caller's buffer): the speed to match, though its results were wrong.
* ``host copy + async``: a private copy, then the asynchronous write.
* ``blocking write`` (``from_numpy`` today): the write done before returning.

Columns: the upload alone on an idle device (upload + synchronize); the same
after a 384x384 MatMul was queued; and one step of a loader loop (refill a
slice, upload, multiply, 5 steps and one synchronize).  Each cell is the median,
then the minimum (less disturbed by other work on a shared machine).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable

import numpy as np

import opkernel as ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    be: Any = ok.engine.backend_instance("opencl")
    cl = be.cl

    def unsafe(a: np.ndarray) -> Any:
        host = np.ascontiguousarray(a)
        out = be.new_array(host.shape, host.dtype)
        be._track_upload(cl.enqueue_copy(be.queue, out.base_data, host, is_blocking=False))
        return out

    def copied(a: np.ndarray) -> Any:
        host = np.array(a, order="C", copy=True)
        out = be.new_array(host.shape, host.dtype)
        be._track_upload(cl.enqueue_copy(be.queue, out.base_data, host, is_blocking=False))
        return out

    ways: dict[str, Callable[[np.ndarray], Any]] = {
        "async, no copy": unsafe, "host copy + async": copied, "blocking write": type(be).from_numpy.__get__(be),
    }
    rng = np.random.default_rng(0)
    two = ok.tensor(np.float32(2), backend="opencl")
    m = ok.tensor(rng.random((384, 384), dtype=np.float32), backend="opencl")
    print(f"# device: {be.device_name}; median (minimum) of {args.reps} repetitions; ms")
    print(f"{'size':>6} {'upload':<18} {'idle':>14} {'after matmul':>14} {'loop step':>14}")
    with ok.use_backend("opencl"):
        for n in (10**6, 10**7):
            a = rng.random(n, dtype=np.float32)
            times: dict[str, list[list[float]]] = {k: [[], [], []] for k in ways}
            for rep in range(args.reps + 1):
                for name, up in ways.items():
                    be.from_numpy = up
                    try:
                        be.synchronize()
                        t0 = time.perf_counter()
                        up(a)
                        be.synchronize()
                        t1 = time.perf_counter()
                        ok.ops.mat_mul(m, m)
                        t2 = time.perf_counter()
                        up(a)
                        be.synchronize()
                        t3 = time.perf_counter()
                        for i in range(5):
                            a[:1024] = i
                            ok.ops.mul(a, two)
                        be.synchronize()
                        t4 = time.perf_counter()
                    finally:
                        del be.from_numpy
                    if rep:  # the first round warms up
                        for col, t in zip(times[name], (t1 - t0, t3 - t2, (t4 - t3) / 5)):
                            col.append(t)
            for name, cols in times.items():
                cells = " ".join(f"{statistics.median(c) * 1e3:7.2f} ({min(c) * 1e3:.2f})".rjust(14) for c in cols)
                print(f"{n:6.0e} {name:<18} {cells}")


if __name__ == "__main__":
    main()
