"""Median-pool an image stack larger than a worker's memory, on a Dask cluster.

    make dask-demo                  # or: .venv/bin/python examples/dask_median.py

The stack (256 images of 1024 x 1024 float32, 1 GiB by default) is written as a
chunked zarr array; a LocalCluster of 2 worker processes, each limited to 768 MiB
(a worker on the OpenCL backend holds the OpenCL drivers it loaded: about 330 MiB
with both PoCL and Intel's CPU runtime, and Dask pauses a worker at 80% of its limit),
runs opkernel-medianpool's ``Addons>MedianPool2D`` chunk by chunk through
``ok.dask.apply`` and writes the result to a second zarr array, with Dask's
progress bar; neither the workers nor this process ever hold the whole stack.
Then a random sample of output tiles is checked against the op run in this
process on whole images.  Each worker runs its chunks on its own default backend
(``--backend`` picks one for all of them through ``ok.dask.BackendPlugin``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=256, help="images in the stack (default 256)")
    p.add_argument("--size", type=int, default=1024, help="height and width of each image (default 1024)")
    p.add_argument("--chunk", type=int, default=512, help="chunk height and width (default 512)")
    p.add_argument("--ksize", type=int, default=3, help="median window height and width (default 3)")
    p.add_argument("--memory-limit", default="768MiB", help="each worker's memory limit (default 768MiB)")
    p.add_argument("--backend", default=None, help="the workers' opkernel backend (default: each worker's best)")
    p.add_argument("--samples", type=int, default=6, help="output tiles checked against the single-process op")
    p.add_argument("--workdir", type=Path, default=None,
                   help="where the zarr arrays go and stay (default: a temporary folder, removed at the end)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.workdir is None:
        with tempfile.TemporaryDirectory(prefix="opkernel-dask-") as tmp:  # removed afterwards: 1 GiB of zarr
            return run(args, Path(tmp))
    return run(args, args.workdir)


def run(args: argparse.Namespace, workdir: Path) -> int:
    import dask.array as da
    import zarr
    from dask.utils import format_bytes, parse_bytes
    from distributed import Client, LocalCluster, progress

    import opkernel as ok

    src, dst = str(workdir / "stack.zarr"), str(workdir / "median.zarr")
    shape = (args.images, args.size, args.size, 1)
    chunks = (1, args.chunk, args.chunk, 1)
    nbytes = int(np.prod(shape)) * 4
    limit = parse_bytes(args.memory_limit)
    attrs = dict(ksize=[1, args.ksize, args.ksize, 1], strides=[1, 1, 1, 1], padding="SAME")
    print(f"stack {shape} float32 = {format_bytes(nbytes)}, {nbytes / limit:.1f}x a worker's "
          f"{format_bytes(limit)} memory limit; zarr arrays in {workdir}")

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        if args.backend:
            client.register_plugin(ok.dask.BackendPlugin(args.backend))
        backends = sorted(set(client.run(ok.get_backend).values()))
        print(f"2 workers, backend {', '.join(backends)}")

        # The input: written chunk by chunk by the workers, never held whole anywhere.
        stack = da.random.default_rng(2026).random(shape, dtype=np.float32, chunks=chunks)
        print("writing the input stack:")
        future = client.compute(stack.to_zarr(src, overwrite=True, compute=False))
        progress(future)
        future.result()

        x = da.from_zarr(src)
        y = ok.dask.apply("Addons>MedianPool2D", x, **attrs)  # lazy: shape, dtype and chunks only
        print(f"\nmedian pool {args.ksize}x{args.ksize}: {y.npartitions} chunks of {y.chunksize}")
        start = time.perf_counter()
        future = client.compute(y.to_zarr(dst, overwrite=True, compute=False))
        progress(future)
        future.result()
        seconds = time.perf_counter() - start
        print(f"\n{format_bytes(nbytes)} in {seconds:.1f} s ({nbytes / seconds / 2**20:.0f} MiB/s)")

    # Check a random sample of output tiles against the op on whole images, in this process.
    out, inp = zarr.open_array(dst, mode="r"), zarr.open_array(src, mode="r")
    rng = np.random.default_rng()
    tiles = -(-args.size // args.chunk)
    for _ in range(args.samples):
        n, ty, tx = int(rng.integers(args.images)), int(rng.integers(tiles)), int(rng.integers(tiles))
        rows = slice(ty * args.chunk, (ty + 1) * args.chunk)
        cols = slice(tx * args.chunk, (tx + 1) * args.chunk)
        want = ok.execute("Addons>MedianPool2D", inp[n: n + 1], **attrs).numpy()[0, rows, cols]
        got = out[n, rows, cols]
        if not np.array_equal(got, want):
            print(f"tile (image {n}, row {ty}, column {tx}) differs from the single-process op", file=sys.stderr)
            return 1
    print(f"{args.samples} random tiles equal the single-process op")
    return 0


if __name__ == "__main__":
    sys.exit(main())
