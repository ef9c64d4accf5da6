"""Intra-op parallelism for large elementwise kernels (TensorFlow's Shard).

A large elementwise op is split into contiguous chunks of the flattened
output, one per thread of a shared pool, each computed by the same ufunc into
its slice of one output array.  numpy releases the GIL inside ufunc loops, so
the chunks run in parallel, and every element is computed exactly as it would
be single-threaded (bit-identical results).  Small inputs, broadcasting inputs
and non-contiguous inputs take the plain single-threaded call.

The thread count is ``ok.config.intra_op_parallelism_threads`` (default: the
number of cores); 1 turns sharding off.

Outputs of 32 MB and more are taken from a small pool of arrays that nothing
references any more (``_output``), so a loop of large ops writes into warm
memory instead of page-faulting fresh mmaps in every call.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

import opkernel as ok

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

#: Below this many output elements a kernel runs on the calling thread: the
#: hand-off to a pool thread (~10 µs) would cost more than it saves.
MIN_ELEMENTS_PER_SHARD = 1 << 17

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0

#: Outputs at least this large come from ``_buffers``: above glibc's mmap threshold
#: (see allocator.py) every fresh array is new memory, page-faulted in as it is first
#: written (a 40 MB add then costs 1.6x one writing into warm memory).
MIN_POOLED_BYTES = 32 << 20
#: At most this many spare arrays per (shape, dtype), and this many bytes in all.
POOLED_PER_SHAPE, POOLED_BYTES = 2, 512 << 20
_buffers: dict[tuple[tuple[int, ...], np.dtype[Any]], list[np.ndarray]] = {}
_buffers_lock = threading.Lock()


def _free_in(bucket: list[np.ndarray], free_count: int) -> np.ndarray | None:
    """The first array of ``bucket`` whose reference count is ``free_count``: held by
    the list only (a view of it, a tensor or a memoryview would hold another)."""
    for arr in bucket:
        if sys.getrefcount(arr) == free_count:
            return arr
    return None


def _calibrate() -> int:
    """What ``getrefcount`` reads in ``_free_in`` for an array only the list holds (3 up to
    CPython 3.13; a borrowed load in later versions may count one less)."""
    for free_count in range(1, 8):
        if _free_in([np.empty(0)], free_count) is not None:
            return free_count
    raise RuntimeError("cannot calibrate the output pool's reference count")


#: The reference count of a pooled array nothing else holds, measured on this interpreter.
_FREE_REFS = _calibrate()


def _output(shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    """An array for a large result: a pooled one nobody references any more, else a new
    one that joins the pool (while there is room)."""
    if math.prod(shape) * dtype.itemsize < MIN_POOLED_BYTES:
        return np.empty(shape, dtype)
    key = (shape, dtype)
    with _buffers_lock:
        bucket = _buffers.get(key)
        if bucket:
            free = _free_in(bucket, _FREE_REFS)
            if free is not None:
                return free
        out = np.empty(shape, dtype)
        held = sum(a.nbytes for b in _buffers.values() for a in b)
        if len(bucket or ()) < POOLED_PER_SHAPE and held + out.nbytes <= POOLED_BYTES:
            _buffers.setdefault(key, []).append(out)
        return out


def release_buffers() -> int:
    """Drop every pooled output array (for tests and memory-tight programs); returns bytes dropped."""
    with _buffers_lock:
        freed = sum(a.nbytes for b in _buffers.values() for a in b)
        _buffers.clear()
    return freed


def _executor(threads: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    from concurrent.futures import ThreadPoolExecutor  # at the first large op, not when kernels register

    with _lock:
        if _pool is None or _pool_size != threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="opkernel-shard")
            _pool_size = threads
        return _pool


def threads() -> int:
    n = getattr(ok.config, "intra_op_parallelism_threads", None)
    return int(n) if n else (os.cpu_count() or 1)


#: (ufunc, input dtypes) -> the ufunc's own output dtype.
_out_dtypes: dict[tuple[Any, ...], np.dtype[Any]] = {}


def _quiet(fn: Callable[..., Any], *args: np.ndarray, out: np.ndarray) -> None:
    with np.errstate(all="ignore"):  # errstate is per thread: set it where the chunk runs
        fn(*args, out=out)


def _run_sharded(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], n_threads: int, quiet: bool) -> np.ndarray:
    size = arrays[0].size
    flats = [a.reshape(-1) for a in arrays]
    key = (fn, *[a.dtype for a in arrays])
    dtype = _out_dtypes.get(key)
    if dtype is None:  # the ufunc's own output type (an empty slice: no warnings)
        dtype = _out_dtypes.setdefault(key, fn(*[f[:0] for f in flats]).dtype)
    out = _output(arrays[0].shape, dtype)
    flat_out = out.reshape(-1)
    shards = min(n_threads, size // MIN_ELEMENTS_PER_SHARD)
    bounds = [size * i // shards for i in range(shards + 1)]
    # Every slice is cut before the hand-off, and the pool threads call the ufunc
    # itself: they need the GIL only to start it, so they start at once.
    chunks = [([f[lo:hi] for f in flats], flat_out[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
    pool = _executor(n_threads)
    if quiet:
        futures = [pool.submit(_quiet, fn, *args, out=o) for args, o in chunks[1:]]
        _quiet(fn, *chunks[0][0], out=chunks[0][1])
    else:
        futures = [pool.submit(fn, *args, out=o) for args, o in chunks[1:]]
        fn(*chunks[0][0], out=chunks[0][1])
    for f in futures:
        f.result()
    return out


def elementwise(fn: Callable[..., Any], quiet: bool = False) -> Callable[..., Any]:
    """A kernel running the ufunc ``fn`` sharded across threads when that pays.

    ``quiet`` silences numpy's floating-point warnings (TensorFlow returns inf
    and nan without a word).
    """

    def kernel(*arrays: np.ndarray) -> Any:
        first = arrays[0]
        if first.size >= 2 * MIN_ELEMENTS_PER_SHARD:
            n = threads()
            if n > 1 and all(a.shape == first.shape and a.flags.c_contiguous for a in arrays):
                return _run_sharded(fn, arrays, n, quiet)
        if quiet:
            with np.errstate(all="ignore"):
                return fn(*arrays)
        return fn(*arrays)

    kernel.__name__ = getattr(fn, "__name__", "elementwise")
    return kernel
