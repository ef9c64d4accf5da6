"""First use of the OpenCL backend in a fresh process, with a cold and a warm program cache.

    python benchmarks/program_cache.py [--reps 4]

Each run is a whole process (import, backend start-up, Add, Sub, MatMul, Relu, Sum,
Maximum and Conv2D on small float32 tensors, exit, where the program cache is
written): its wall time is what a user waits for.  Per repetition: one run with an
empty cache directory, then two with the cache it left.  Set ``PYTHONPATH`` to
another checkout's ``plugins/opencl`` to time another version of the backend.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

CHILD = """
import numpy as np, opkernel as ok
with ok.use_backend("opencl"):
    x = ok.tensor(np.random.rand(64, 64).astype(np.float32))
    y = ok.ops.relu(ok.ops.add(x @ x, x))
    float(ok.ops.sum(y, [0, 1]))
    ok.ops.sub(x, 1.0).numpy(), ok.ops.maximum(x, x).numpy()
    img = ok.tensor(np.random.rand(2, 8, 8, 3).astype(np.float32))
    f = ok.tensor(np.random.rand(3, 3, 3, 4).astype(np.float32))
    ok.ops.conv2d(img, f, strides=[1, 1, 1, 1], padding="SAME").numpy()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"cold": [], "warm": []}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPKERNEL_", "POCL_CACHE_DIR"))}
    for _ in range(args.reps):
        where = tempfile.mkdtemp(prefix="opkernel-bench-cache-")
        shutil.rmtree(where)
        env["OPKERNEL_OPENCL_CACHE_DIR"] = where
        try:
            for phase in ("cold", "warm", "warm"):
                t = time.perf_counter()
                subprocess.run([sys.executable, "-c", CHILD], env=env, check=True)
                times[phase].append(time.perf_counter() - t)
        finally:
            shutil.rmtree(where, ignore_errors=True)
    for phase, xs in times.items():
        print(f"{phase} cache: median {statistics.median(xs):.2f} s, min {min(xs):.2f} s over {len(xs)} processes")


if __name__ == "__main__":
    main()
