"""Timing helpers shared by the benchmarks: medians of many repetitions."""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable


def per_call(fn: Callable[[], Any], *, min_block_s: float = 0.02, repeats: int = 15, sync: Callable[[], Any] | None = None) -> float:
    """Median seconds per call of ``fn``: calls are timed in blocks long enough
    to dwarf the timer's resolution, ``repeats`` blocks, median of the blocks.
    ``sync`` (e.g. a device synchronise) runs at the end of every block."""
    fn()
    if sync:
        sync()
    n = 1
    while True:  # size the block
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        dt = time.perf_counter() - t0
        if dt >= min_block_s or n >= 1 << 22:
            break
        n *= 2 if dt == 0 else max(2, min(100, int(min_block_s / max(dt, 1e-9)) + 1))
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        if sync:
            sync()
        samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"
