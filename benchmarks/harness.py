"""Timing helpers shared by the benchmarks: medians of many repetitions, and
interleaved blocks for contenders compared in one run."""

from __future__ import annotations

import contextlib
import statistics
import time
from typing import Any, Callable, Sequence


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


class Timed:
    """One contender of ``interleaved``: a zero-argument function, an optional
    device synchronise run at the end of each block, and an optional context
    (e.g. ``torch.no_grad``) entered around each block, never per call."""

    def __init__(self, fn: Callable[[], Any] | None, sync: Callable[[], Any] | None = None,
                 context: Callable[[], Any] | None = None) -> None:
        self.fn, self.sync, self.context = fn, sync, context

    def block(self, n: int) -> float:
        assert self.fn is not None
        fn, sync = self.fn, self.sync
        with self.context() if self.context else contextlib.nullcontext():
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            if sync:
                sync()
            return time.perf_counter() - t0


def interleaved(contenders: Sequence[Timed], *, min_block_s: float = 0.02, repeats: int = 15, rounds: int = 3) -> list[float]:
    """Median seconds per call of each contender over ``repeats`` blocks, taken in
    ``rounds`` turns (the starting contender rotating), so that a burst of load on a
    shared machine hits all of them alike and the ratios stay meaningful.  Each turn
    starts with an untimed block: the previous contender's worker threads (torch's
    and OpenBLAS's spin after their work) settle before the timed ones.  A contender
    whose ``fn`` is None gets nan."""
    live = [c for c in contenders if c.fn is not None]
    sizes: dict[int, int] = {}
    for c in live:
        c.block(1)  # warm up
        n = 1
        while True:
            dt = c.block(n)
            if dt >= min_block_s or n >= 1 << 22:
                break
            n *= 2 if dt == 0 else max(2, min(100, int(min_block_s / max(dt, 1e-9)) + 1))
        sizes[id(c)] = n
    samples: dict[int, list[float]] = {id(c): [] for c in live}
    per_turn = max(1, -(-repeats // rounds))
    for r in range(rounds):
        for k in range(len(live)):
            c = live[(r + k) % len(live)]
            n = sizes[id(c)]
            time.sleep(0.05)  # idle worker threads of the previous contender go to sleep
            c.block(n)  # settle
            for _ in range(per_turn):
                samples[id(c)].append(c.block(n) / n)
    return [statistics.median(samples[id(c)]) if c.fn is not None else float("nan") for c in contenders]


def fmt_time(seconds: float) -> str:
    if seconds != seconds:  # nan
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"
