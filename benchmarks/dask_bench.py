"""ok.dask on a 2-worker LocalCluster against the single-process op and dask-image.

    .venv/bin/python benchmarks/dask_bench.py --markdown /tmp/dask_bench.md

Three parts, all in one run (docs/benchmarks.md, "Scaling out on Dask"):

1. Throughput over an image stack ``--factor`` (default 8) times a worker's memory
   limit (default 256 MiB: a 2 GiB stack), read from and written to zarr, chunk by
   chunk on 2 worker processes (1 thread each): ``MedianPool2D`` 3x3 and a 3x3
   ``Conv2D`` (one channel in and out), against the same op run once in this
   process on the whole stack held in memory (no zarr), and against dask-image's
   ``median_filter`` and ``correlate`` (scipy.ndimage per chunk) on the same cluster
   and zarr arrays; a zarr-to-zarr copy with no op gives the I/O floor.  Each contender runs ``--reps`` times, in rotating order;
   the median is reported.
2. Chunk size: the median pool over a smaller stack with chunks from 128² to 1024².
3. Scheduling overhead per chunk: ``Relu`` over thousands of 64-element chunks
   through ok.dask.apply and, as Dask's own floor, ``map_blocks(np.negative)``,
   on the cluster and on the threaded scheduler.
"""

from __future__ import annotations

import argparse
import logging
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

MEDIAN = dict(ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding="SAME")
CONV = dict(strides=[1, 1, 1, 1], padding="SAME")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--memory-limit", default="256MiB", help="each worker's memory limit (default 256MiB)")
    p.add_argument("--factor", type=float, default=8.0, help="stack size / a worker's memory limit (default 8)")
    p.add_argument("--size", type=int, default=1024, help="image height and width (default 1024)")
    p.add_argument("--chunk", type=int, default=1024, help="chunk height and width for part 1 (default 1024)")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each part-1 contender (default 3)")
    p.add_argument("--backend", default="cpu", help="the backend of the workers and of this process (default cpu)")
    p.add_argument("--workdir", type=Path, default=None, help="where the zarr arrays go (default: a temporary folder)")
    p.add_argument("--markdown", type=Path, default=None, help="also write the tables here")
    return p.parse_args()


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rotating(contenders: dict[str, Callable[[], Any]], reps: int) -> dict[str, float]:
    """Median seconds of each contender over ``reps`` turns, the starting one rotating."""
    names = list(contenders)
    samples: dict[str, list[float]] = {n: [] for n in names}
    for turn in range(reps):
        for name in names[turn % len(names):] + names[: turn % len(names)]:
            samples[name].append(timed(contenders[name]))
            print(f"  {name}: {samples[name][-1]:.2f} s", file=sys.stderr)
    return {n: statistics.median(s) for n, s in samples.items()}


def main() -> int:
    args = parse_args()
    import dask
    import dask.array as da
    from importlib.metadata import version

    import dask_image.ndfilters as ndf
    import distributed
    import zarr
    from dask.utils import format_bytes, parse_bytes

    import opkernel as ok

    limit = parse_bytes(args.memory_limit)
    images = max(1, int(round(args.factor * limit / (args.size * args.size * 4))))
    shape = (images, args.size, args.size, 1)
    nbytes = images * args.size * args.size * 4
    tmp = Path(tempfile.mkdtemp(prefix="opkernel-dask-bench-", dir=args.workdir))
    lines: list[str] = []

    def out(line: str = "") -> None:
        print(line)
        lines.append(line)

    rng = np.random.default_rng(0)
    weights = rng.standard_normal((3, 3, 1, 1)).astype(np.float32)
    try:
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, memory_limit=limit,
                                      dashboard_address=":0", silence_logs=logging.ERROR) as cluster, \
                distributed.Client(cluster) as client:
            client.register_plugin(ok.dask.BackendPlugin(args.backend))
            src = str(tmp / "stack.zarr")
            chunks = (1, args.chunk, args.chunk, 1)
            client.compute(da.random.default_rng(1).random(shape, dtype=np.float32, chunks=chunks)
                           .to_zarr(src, overwrite=True, compute=False)).result()
            x = da.from_zarr(src)

            def to_zarr(y: Any, name: str) -> Callable[[], Any]:
                path = str(tmp / f"{name}.zarr")

                def run() -> None:
                    client.compute(y.to_zarr(path, overwrite=True, compute=False)).result()
                    shutil.rmtree(path, ignore_errors=True)
                return run

            x3 = x[..., 0]
            contenders = {
                "zarr copy, no op (the I/O floor)": to_zarr(x, "copy"),
                "ok.dask MedianPool2D": to_zarr(ok.dask.apply("Addons>MedianPool2D", x, **MEDIAN), "median"),
                "dask-image median_filter": to_zarr(ndf.median_filter(x3, size=(1, 3, 3)), "di-median"),
                "ok.dask Conv2D": to_zarr(ok.dask.apply("Conv2D", x, weights, **CONV), "conv"),
                "dask-image correlate": to_zarr(ndf.correlate(x3, weights[:, :, 0, 0][None], mode="constant"),
                                                "di-conv"),
            }
            print(f"part 1: {format_bytes(nbytes)} stack, {args.reps} reps", file=sys.stderr)
            cluster_s = rotating(contenders, args.reps)

            # The single-process op on the whole stack in memory (read once, untimed).
            whole = np.asarray(zarr.open_array(src, mode="r")[...])
            single: dict[str, float] = {}
            threads = ok.config.intra_op_parallelism_threads
            with ok.use_backend(args.backend):
                ok.execute("Addons>MedianPool2D", whole[:1], **MEDIAN)  # warm-up: first calls build kernels
                ok.execute("Conv2D", whole[:1], weights, **CONV)
                for label, n in (("", threads), (" (1 thread)", 1)):
                    ok.config.intra_op_parallelism_threads = n
                    try:
                        single.update(rotating({
                            "single-process MedianPool2D" + label:
                                lambda: ok.execute("Addons>MedianPool2D", whole, **MEDIAN),
                            "single-process Conv2D" + label: lambda: ok.execute("Conv2D", whole, weights, **CONV),
                        }, args.reps))
                    finally:
                        ok.config.intra_op_parallelism_threads = threads
            del whole

            # Part 2: chunk size, on an eighth of the stack.
            small = x[: max(2, images // 8)]
            chunk_s = {}
            for c in (128, 256, 512, 1024):
                if c > args.size:
                    continue
                y = ok.dask.apply("Addons>MedianPool2D", small.rechunk((1, c, c, 1)), **MEDIAN)
                run = to_zarr(y.rechunk((1, args.chunk, args.chunk, 1)), f"chunk{c}")
                chunk_s[c] = statistics.median(timed(run) for _ in range(args.reps))
            small_bytes = small.nbytes

            # Part 3: overhead per chunk.
            n_chunks, per = 1024, 64
            tiny = da.zeros((n_chunks * per,), dtype=np.float32, chunks=per)
            overhead: dict[str, float] = {}
            for sched in ("cluster", "threads"):
                for label, y in (("ok.dask.apply(Relu)", ok.dask.apply("Relu", tiny)),
                                 ("map_blocks(np.negative)", tiny.map_blocks(np.negative))):
                    if sched == "cluster":
                        def go(y: Any = y) -> Any:
                            return client.compute(y).result()
                    else:
                        def go(y: Any = y) -> Any:
                            with ok.use_backend(args.backend):
                                return y.compute(scheduler="threads", num_workers=2)
                    go()
                    overhead[f"{sched}: {label}"] = statistics.median(timed(go) for _ in range(7)) / n_chunks
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    mib = 2**20
    out(f"Command: `.venv/bin/python benchmarks/dask_bench.py {' '.join(sys.argv[1:])}`".rstrip() + "; "
        f"{time.strftime('%Y-%m-%d', time.gmtime())}; {platform.machine()}, {_cores()} cores; "
        f"Python {platform.python_version()}, numpy {np.__version__}, dask {dask.__version__}, distributed "
        f"{distributed.__version__}, zarr {zarr.__version__}, dask-image {version('dask-image')}, opkernel "
        f"{ok.__version__} ({args.backend} backend).")
    out()
    out(f"Part 1: a {shape} float32 stack ({format_bytes(nbytes)}, {nbytes / limit:.1f}x a worker's "
        f"{format_bytes(limit)} limit), chunks {chunks}, 2 workers x 1 thread, zarr in and out; "
        f"single-process: the op once on the stack in memory. Median of {args.reps}.")
    out()
    out("| contender | seconds | MiB/s | vs single-process op |")
    out("|---|---|---|---|")
    base = {"MedianPool2D": single["single-process MedianPool2D"], "Conv2D": single["single-process Conv2D"]}
    for name, s in {**cluster_s, **single}.items():
        kind = "MedianPool2D" if ("Median" in name or "median" in name) else "Conv2D"
        ratio = f"{base[kind] / s:.2f}x" if "floor" not in name else "-"
        out(f"| {name} | {s:.2f} | {nbytes / s / mib:.0f} | {ratio} |")
    out()
    out(f"Part 2: MedianPool2D 3x3 over {format_bytes(small_bytes)}, zarr in and out, by chunk size.")
    out()
    out("| chunk (H x W) | chunk bytes | seconds | MiB/s |")
    out("|---|---|---|---|")
    for c, s in chunk_s.items():
        out(f"| {c} x {c} | {format_bytes(c * c * 4)} | {s:.2f} | {small_bytes / s / mib:.0f} |")
    out()
    out(f"Part 3: wall time per chunk over {n_chunks} chunks of {per} float32 (median of 7).")
    out()
    out("| scheduler: graph | per chunk |")
    out("|---|---|")
    for name, s in overhead.items():
        out(f"| {name} | {s * 1e6:.0f} µs |")
    if args.markdown:
        args.markdown.write_text("\n".join(lines) + "\n")
    return 0


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


if __name__ == "__main__":
    sys.exit(main())
