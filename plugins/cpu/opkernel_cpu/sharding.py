"""Intra-op parallelism for large elementwise kernels (TensorFlow's Shard).

A large elementwise op is split into contiguous blocks of the flattened
output, computed by the calling thread and the threads of a shared pool, each
into its slice of one output array with the inner loop numpy itself would run,
so every element is computed exactly as it would be single-threaded
(bit-identical results).  Small inputs, broadcasting inputs and non-contiguous
inputs take the plain single-threaded call.

Two pools do this.  The native one (``_native.c``, built with the package when a C
compiler is there) runs numpy's inner loops on threads that never take the GIL:
they spin a while after each op, so back-to-back large ops start on every core
at once, and they claim small blocks one at a time, so a thread that wakes late
simply does fewer.  Without it, Python threads run the chunks (numpy releases
the GIL inside ufunc loops); each hand-off then costs a wake-up of an idle core
plus a GIL hand-over, so the chunks are uneven: a pool thread gets a wake-up's
worth less work (``_split``, from timings of earlier calls).

The thread count is ``ok.config.intra_op_parallelism_threads`` (default: the
number of cores; at most ``ok.engine.MAX_INTRA_OP_THREADS``, checked where it is
set); 1 turns sharding off.

Outputs of 32 MB and more are taken from a small pool of arrays that nothing
references any more (``_output``), so a loop of large ops writes into warm
memory instead of page-faulting fresh mmaps in every call.
"""

from __future__ import annotations

import math
import os
import sys
import threading
import time
from typing import Any, Callable

import numpy as np

import opkernel as ok
from opkernel.shapes import broadcast_layout

try:
    from . import _native
except ImportError:  # built without a C compiler: the Python pool below
    _native = None  # type: ignore[assignment]


def native_pool() -> bool:
    """Whether large elementwise ops run on the native pool (``_native.c``) rather than Python threads."""
    return _native is not None


def native_module() -> Any:
    """The native module ``opkernel_cpu._native`` (also home of native kernels), or None."""
    return _native


#: The fewest elements worth a shard of their own, by the ufunc's cost per element
#: (TensorFlow's Shard weighs ``cost_per_unit`` the same way).  A hand-off costs about
#: 50 µs on this kind of machine (waking the pool thread's idle core, then the caller's
#: at the join), so a shard must hold ~100 µs of work: a cheap ufunc (add: 0.25 ns an
#: element in cache, twice that from memory) gains from 512 K elements on, a division
#: or square root (0.5 ns) from 256 K, a transcendental (exp 4 ns, tanh 7 ns) from 32 K.
#: The native pool's threads start within a microsecond while they still spin after
#: the previous op (a 64 K-element add then gains 1.7x), but after a pause they sleep
#: and cost the same wake-up, so both pools use these sizes.
MIN_ELEMENTS_PER_SHARD = 1 << 18
_DIVIDING_PER_SHARD = 1 << 17
_TRANSCENDENTAL_PER_SHARD = 1 << 14
_DIVIDING = {np.true_divide, np.floor_divide, np.remainder, np.fmod, np.sqrt, np.reciprocal}
_TRANSCENDENTAL = {np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10, np.log1p, np.sin, np.cos, np.tan,
                   np.arcsin, np.arccos, np.arctan, np.arctan2, np.sinh, np.cosh, np.tanh, np.arcsinh,
                   np.arccosh, np.arctanh, np.power, np.float_power, np.hypot, np.cbrt}
if _native is not None:
    _TRANSCENDENTAL.update((_native.exp, _native.rsqrt, _native.erf, _native.sigmoid, _native.elu, _native.selu, _native.softplus, _native.gelu,
                            _native.gelu_grad))


def min_per_shard(fn: Callable[..., Any]) -> int:
    """The fewest elements a shard of ``fn`` gets (its cost class; see above)."""
    if fn in _TRANSCENDENTAL:
        return _TRANSCENDENTAL_PER_SHARD
    return _DIVIDING_PER_SHARD if fn in _DIVIDING else MIN_ELEMENTS_PER_SHARD

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


_QUIET: dict[str, Any] = {"all": "ignore"}


def _chunk(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], out: np.ndarray, lo: int, hi: int,
           errors: dict[str, Any] | None) -> None:
    """``fn`` over elements ``lo:hi`` of the flattened (C-contiguous) ``arrays``, into ``out``,
    under numpy's error state ``errors`` (None: this thread's own)."""
    args = [a.reshape(-1)[lo:hi] for a in arrays]
    if errors is None:
        fn(*args, out=out.reshape(-1)[lo:hi])
    else:
        with np.errstate(**errors):  # errstate is per thread: set it where the chunk runs
            fn(*args, out=out.reshape(-1)[lo:hi])


class _Worker:
    """A pool thread that runs one chunk at a time.  It sleeps on its own lock, so a
    hand-off is one lock release: about 13 µs to a no-op and back here, against 45-50 µs
    for a ``ThreadPoolExecutor`` round trip (its future, queue and condition).  The
    worker cuts its own slices, so the caller does as little as possible before the
    hand-off: right after a large op the caches are cold, and every Python step costs
    several times its usual few hundred nanoseconds."""

    def __init__(self, name: str) -> None:
        self._go = threading.Lock()
        self._go.acquire()
        self._done = threading.Lock()
        self._done.acquire()
        self._job: tuple[Any, ...] | None = None
        self._error: BaseException | None = None
        #: perf_counter() when this thread last woke up for a chunk (see ``_split``).
        self.woke = 0.0
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def _loop(self) -> None:
        while True:
            self._go.acquire()
            self.woke = time.perf_counter()
            job, self._job = self._job, None
            if job is None:  # stop()
                return
            try:
                _chunk(*job)
            except BaseException as exc:  # handed to the caller by join()
                self._error = exc
            # Hold nothing between chunks: the output pool sees an array as free by its
            # reference count.
            job = None
            self._done.release()

    def start(self, job: tuple[Any, ...]) -> None:
        """Run ``_chunk(*job)`` on this thread."""
        self._job = job
        self._go.release()

    def join(self) -> None:
        self._done.acquire()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        self._job = None
        self._go.release()


#: The pool threads, and the lock held by the one kernel using them: a kernel that finds
#: them busy (another Python thread is running a sharded op) runs unsharded rather than wait.
_workers: list[_Worker] = []
_busy = threading.Lock()


def _resize(n_workers: int) -> None:
    """Start or stop pool threads until there are ``n_workers``; the caller holds ``_busy``."""
    while len(_workers) > n_workers:
        _workers.pop().stop()
    while len(_workers) < n_workers:
        _workers.append(_Worker(f"opkernel-shard-{len(_workers)}"))


def _after_fork() -> None:
    """A forked child has none of the parent's threads, and may have inherited ``_busy`` held."""
    global _busy
    _workers.clear()
    _busy = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


_CORES = min(os.cpu_count() or 1, ok.engine.MAX_INTRA_OP_THREADS)


#: (ufunc, input dtypes) -> the ufunc's own output dtype.
_out_dtypes: dict[tuple[Any, ...], np.dtype[Any]] = {}

#: How the work is split, learnt from the calls themselves (``_split``): the seconds from
#: handing a chunk to a pool thread until it runs (one moving average for the pool), and
#: per (ufunc, input dtypes) the caller's seconds per element while the pool threads run.
_wake = [0.0]
_per_element: dict[tuple[Any, ...], float] = {}
#: Weight of a new measurement in those averages, and the most one wake-up may count:
#: a thread descheduled for a millisecond says nothing about the next hand-off.
_AVERAGING, _MAX_WAKE = 0.125, 200e-6


def _split(size: int, shards: int, key: tuple[Any, ...]) -> list[int]:
    """Chunk boundaries ``[0, b1, ..., size]``: the caller's chunk first, then one per
    pool thread.  A pool thread starts its chunk a wake-up later than the caller (tens
    of microseconds when its core sleeps: a fifth of a 1e6-element float32 add), so
    with the average wake-up ``L`` and the caller's time per element, the caller
    takes ``(T + (s-1) L) / s`` of the ``T`` seconds of work and each pool thread
    ``L`` less: all finish together, and the caller rarely sleeps on a join (a
    second wake-up).  Every pool thread keeps at least a quarter of an even share, so that
    its wake-ups go on being measured; the first call of a ufunc splits evenly."""
    rate = _per_element.get(key)
    even = size // shards
    worker = even
    if rate:  # None before the first measurement (0 only if the clock did not move)
        total = rate * size
        finish = (total + (shards - 1) * _wake[0]) / shards
        worker = min(even, max(even // 4, int(size * (finish - _wake[0]) / total)))
    first = size - worker * (shards - 1)
    return [0] + [first + worker * i for i in range(shards)]


def _learn(key: tuple[Any, ...], handed: float, ran: float, done: float, elements: int, started: list[_Worker]) -> None:
    """Fold one sharded call's timings into ``_wake`` and ``_per_element``."""
    if elements:
        old = _per_element.get(key)
        sample = (done - ran) / elements
        _per_element[key] = sample if old is None else old + _AVERAGING * (sample - old)
    for worker in started:
        late = min(max(worker.woke - handed, 0.0), _MAX_WAKE)
        _wake[0] += _AVERAGING * (late - _wake[0])


#: Keys ``(ufunc, *input dtypes)`` the native pool has no inner loop for (the Python pool runs them).
_not_native: set[tuple[Any, ...]] = set()
#: Ufuncs whose integer loops can raise a Python error from inside (numpy's integer power
#: on a negative exponent takes the GIL to raise ValueError): never on native pool threads.
_PYTHON_API = {np.power}
#: numpy's error categories (``np.geterr``) by the floating-point flag that raises them.
_FPE_CATEGORIES = tuple(_native.fpe_flags().items()) if _native is not None else ()


def _report_like_numpy(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], out: np.ndarray, raised: int) -> None:
    """The native pool's blocks raised the floating-point flags ``raised``: when numpy's
    error state does not ignore one of them, run the op again single-threaded into
    ``out`` (the same values), so numpy warns or raises exactly as it would have."""
    state: dict[str, Any] = dict(np.geterr())
    if any(raised & flag and state[category] != "ignore" for category, flag in _FPE_CATEGORIES):
        fn(*arrays, out=out)


def _run_native(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], out: np.ndarray, threads: int, quiet: bool,
                per_shard: int, key: tuple[Any, ...]) -> bool:
    """Run ``fn`` on the native pool; False when it cannot (the caller computes ``out`` then)."""
    assert _native is not None
    # blocks of a quarter shard: a thread that wakes late still finds some left
    raised = _native.run(fn, arrays, out, threads, max(per_shard // 4, 1024))
    if raised == -3:  # not a plain ufunc, or no inner loop for these types: never ask again
        _not_native.add(key)
        return False
    if raised < 0:  # -1: another thread's op holds the pool; -2: unaligned or byte-swapped arrays
        return False
    if raised and not quiet:
        _report_like_numpy(fn, arrays, out, raised)
    return True


def _run_sharded(fn: Callable[..., Any], arrays: tuple[np.ndarray, ...], n_threads: int, quiet: bool,
                 per_shard: int, key: tuple[Any, ...]) -> np.ndarray:
    """``fn`` over ``arrays`` (C-contiguous, one shape) in up to ``n_threads`` chunks of at
    least ``per_shard`` elements; ``key`` is ``(fn, *input dtypes)``."""
    first = arrays[0]
    dtype = _out_dtypes.get(key)
    if dtype is None:  # the ufunc's own output type (an empty slice: no warnings)
        dtype = _out_dtypes.setdefault(key, fn(*[a.reshape(-1)[:0] for a in arrays]).dtype)
    size = first.size
    out = np.empty(first.shape, dtype) if size * dtype.itemsize < MIN_POOLED_BYTES else _output(first.shape, dtype)
    if _native is not None and key not in _not_native and not (fn in _PYTHON_API and first.dtype.kind in "biu"):
        if _run_native(fn, arrays, out, max(1, min(n_threads, size // per_shard)), quiet, per_shard, key):
            return out
        if key not in _not_native:  # the pool is busy, or the arrays are unaligned or byte-swapped
            _chunk(fn, arrays, out, 0, size, _QUIET if quiet else None)
            return out
    if not _busy.acquire(blocking=False):  # another thread's op holds the pool
        _chunk(fn, arrays, out, 0, size, _QUIET if quiet else None)
        return out
    try:
        shards = max(1, min(n_threads, size // per_shard))
        if len(_workers) != n_threads - 1:
            _resize(n_threads - 1)
        bounds = _split(size, shards, key)
        state: dict[str, Any] = _QUIET if quiet else dict(np.geterr())  # pool threads' chunks run under the caller's error state
        started = []
        handed = time.perf_counter()
        try:
            for i in range(1, shards):
                worker = _workers[i - 1]
                worker.start((fn, arrays, out, bounds[i], bounds[i + 1], state))
                started.append(worker)
            ran = time.perf_counter()
            _chunk(fn, arrays, out, 0, bounds[1], _QUIET if quiet else None)
            done = time.perf_counter()
        finally:
            errors = []
            for worker in started:  # every started chunk finishes before the output is returned
                try:
                    worker.join()
                except BaseException as exc:
                    errors.append(exc)
        if errors:
            raise errors[0]
        if started:
            _learn(key, handed, ran, done, bounds[1], started)
    finally:
        _busy.release()
    return out


_BROADCAST_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _broadcast(fn: Callable[..., Any], x: np.ndarray, y: np.ndarray, quiet: bool, per_shard: int,
               least: int) -> np.ndarray | None:
    """A large binary op whose inputs broadcast (a scalar, a row of the last axes, a column
    of the first ones, against the result's shape) by the native fused evaluator: numpy's
    own inner loop over sub-blocks, the broadcast input gathered per sub-block, blocks
    shared on the pool (numpy runs broadcasts on one thread, a row at a time).  The same
    loop on the same values: bit-identical to ``fn(x, y)``.  None where it does not apply
    (no native module, not C-contiguous numpy float arrays, a result smaller than
    ``least`` elements, another broadcast pattern)."""
    if _native is None or type(x) is not np.ndarray or type(y) is not np.ndarray:
        return None
    if not (x.flags.c_contiguous and y.flags.c_contiguous):
        return None
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        return None  # the kernel's own call raises numpy's error, translated as usual
    size = math.prod(shape)
    if size < least:  # a small result (the inputs' sizes only said it might be large)
        return None
    lx, ly = broadcast_layout(x.shape, shape), broadcast_layout(y.shape, shape)
    if lx is None or ly is None:
        return None
    out = np.empty(shape, x.dtype)
    threads = max(1, min(ok.config.intra_op_parallelism_threads or _CORES, size // per_shard))
    raised = _native.fused(((fn, (0, 1), 2),), (x, y), (lx, ly), (out,), (2,), threads)
    if raised < 0:
        return None
    if raised and not quiet:
        _report_like_numpy(fn, (x, y), out, raised)
    return out


#: The native module's ufuncs (quiet: they leave no floating-point flag).
_NATIVE_UFUNCS = frozenset(v for v in vars(_native).values() if isinstance(v, np.ufunc)) if _native is not None else frozenset()
#: The types ``_native.quiet_twin`` ufuncs compute.
_TWIN_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def elementwise(fn: Callable[..., Any], quiet: bool = False) -> Callable[..., Any]:
    """A kernel running the ufunc ``fn`` sharded across threads when that pays.

    ``quiet`` silences numpy's floating-point warnings (TensorFlow returns inf
    and nan without a word).  ``fn`` is a unary or binary ufunc; its kernel has that arity:
    fewer steps between a large op's start and its hand-off to the pool threads,
    when every step runs on caches the previous large op has flushed.
    """
    config = ok.config
    # the native module's own ufuncs leave no flag (their quiet_loop): quiet, and with no
    # np.errstate to enter (sharded or through _broadcast, their flags are not reported)
    flagless = fn in _NATIVE_UFUNCS
    silence = quiet and not flagless  # calls that need np.errstate (or fn's quiet twin)
    quiet = quiet or flagless
    per_shard = min_per_shard(fn)
    least = 2 * per_shard
    # the float types whose loop gives the input type (not a comparison's bool): broadcasts
    # of these run on the native evaluator (_broadcast)
    types = getattr(fn, "types", ())
    broadcast_types = tuple(t for t in _BROADCAST_TYPES if f"{t.char}{t.char}->{t.char}" in types)

    # numpy's own float32/float64 loops of fn leaving no flag (_native.quiet_twin): a quiet
    # call without np.errstate, which costs more than a 1000-element op
    twin = _native.quiet_twin(fn) if silence and _native is not None and fn not in _PYTHON_API else None

    def silenced(*arrays: np.ndarray) -> Any:
        if twin is not None:
            dt = arrays[0].dtype
            if dt in _TWIN_TYPES and all(type(a) is np.ndarray and a.dtype == dt for a in arrays):
                return twin(*arrays)
        with np.errstate(all="ignore"):
            return fn(*arrays)

    def binary(x: np.ndarray, y: np.ndarray) -> Any:
        if x.size >= least and x.shape == y.shape:
            n = config.intra_op_parallelism_threads or _CORES
            if n > 1 and x.flags.c_contiguous and y.flags.c_contiguous:
                return _run_sharded(fn, (x, y), n, quiet, per_shard, (fn, x.dtype, y.dtype))
        elif (x.shape != y.shape and x.dtype is y.dtype and x.dtype in broadcast_types
              and (x.size >= least or y.size >= least
                   # an outer product's inputs are small: its size, from the shapes (same rank only)
                   or (x.ndim == y.ndim and math.prod(map(max, x.shape, y.shape)) >= least))):
            out = _broadcast(fn, x, y, quiet, per_shard, least)
            if out is not None:
                return out
        return silenced(x, y) if silence else fn(x, y)

    def unary(x: np.ndarray) -> Any:
        if x.size >= least:
            n = config.intra_op_parallelism_threads or _CORES
            if n > 1 and x.flags.c_contiguous:
                return _run_sharded(fn, (x,), n, quiet, per_shard, (fn, x.dtype))
        return silenced(x) if silence else fn(x)

    nin = getattr(fn, "nin", None)
    if nin not in (1, 2):
        raise TypeError(f"elementwise kernels wrap unary or binary ufuncs, got {fn!r}")
    chosen = unary if nin == 1 else binary
    chosen.__name__ = getattr(fn, "__name__", "elementwise")
    chosen.ufunc = fn  # type: ignore[union-attr]  # what fusion.py computes in its place
    return chosen


def cores() -> int:
    """The threads a sharded op uses when ``intra_op_parallelism_threads`` is 0."""
    return _CORES


#: ``_native.rows`` kinds.
SOFTMAX, LOG_SOFTMAX, ROW_SUM = 0, 1, 2
#: The fewest elements worth sharing a row kernel with the pool: softmax costs about 1 ns
#: an element (a 64 K-element call 60 µs, past a sleeping thread's wake-up), a sum a tenth.
_ROWS_PER_SHARD = {SOFTMAX: 1 << 16, LOG_SOFTMAX: 1 << 16, ROW_SUM: 1 << 19}
_ROW_TYPES = (np.dtype(np.float32), np.dtype(np.float64))


def rows(kind: int, x: Any) -> np.ndarray | None:
    """Softmax (``SOFTMAX``), log-softmax or the sums (``ROW_SUM``) over the last axis of
    ``x`` by the native row kernels (``_native.rows``), or None where they do not apply:
    no native module, not a C-contiguous float32/float64 numpy array, or empty rows."""
    if (_native is None or type(x) is not np.ndarray or x.dtype not in _ROW_TYPES or not x.ndim
            or not x.shape[-1] or not x.flags.c_contiguous):
        return None
    out = np.empty(x.shape[:-1] if kind == ROW_SUM else x.shape, x.dtype)
    threads = 1
    if x.size >= 2 * _ROWS_PER_SHARD[kind]:
        threads = min(ok.config.intra_op_parallelism_threads or _CORES, x.size // _ROWS_PER_SHARD[kind])
    if _native.rows(kind, x, out, threads) < 0:
        return None
    return out


def softmax_grad(g: Any, s: Any) -> np.ndarray | None:
    """SoftmaxGrad's (g - sum(g * s, -1)) * s by the native row kernel
    (``_native.softmax_grad``), or None where it does not apply (the caller's numpy path
    runs): no native module, not C-contiguous float32/float64 numpy arrays of one type and
    shape, or empty rows."""
    if not _norm_ready(g, s) or g.shape != s.shape or not g.ndim or not g.shape[-1]:
        return None
    out = np.empty(g.shape, g.dtype)
    threads = 1
    if g.size >= 2 * _ROWS_PER_SHARD[SOFTMAX]:
        threads = min(ok.config.intra_op_parallelism_threads or _CORES, g.size // _ROWS_PER_SHARD[SOFTMAX])
    return out if _native.softmax_grad(g, s, out, threads) >= 0 else None


#: Layer norm costs about 1-2 ns an element each way: share it past 64 K elements.
_NORM_PER_SHARD = 1 << 16


def _norm_ready(*arrays: Any) -> bool:
    return _native is not None and all(type(a) is np.ndarray and a.dtype == arrays[0].dtype and a.flags.c_contiguous
                                       for a in arrays) and arrays[0].dtype in _ROW_TYPES


def layer_norm(x: Any, scale: Any, offset: Any, eps: float) -> np.ndarray | None:
    """FusedLayerNorm's y by the native row kernel (``_native.layer_norm``), or None where it
    does not apply (the caller's numpy path runs): no native module, or not C-contiguous
    float32/float64 numpy arrays of one type, or empty rows."""
    if not _norm_ready(x, scale, offset) or not x.ndim or not x.shape[-1]:
        return None
    out = np.empty(x.shape, x.dtype)
    threads = min(ok.config.intra_op_parallelism_threads or _CORES, max(x.size // _NORM_PER_SHARD, 1))
    return out if _native.layer_norm(x, None, scale, offset, out, None, eps, threads) == 0 else None


def layer_norm_grad(dy: Any, x: Any, scale: Any, eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(dx, dscale, doffset): FusedLayerNormGrad's gradients by the native row kernel, the
    parameters' from its per-block column sums (summed here over the blocks), or None
    where it does not apply."""
    if not _norm_ready(x, dy, scale) or not x.ndim or not x.shape[-1]:
        return None
    n = x.shape[-1]
    rows = x.size // n
    block = max((1 << 14) // n, 1)  # the kernel's blocks of rows: one [2, n] slice of partial sums each
    out = np.empty(x.shape, x.dtype)
    stats = np.empty((rows, 2), x.dtype)
    partials = np.zeros((-(-rows // block), 2, n), x.dtype)
    threads = min(ok.config.intra_op_parallelism_threads or _CORES, max(x.size // _NORM_PER_SHARD, 1))
    if _native.layer_norm(x, dy, scale, None, out, stats, eps, threads, partials) != 0:
        return None
    sums = partials.sum(axis=0)
    return out, sums[0], sums[1]


#: Batched products go to ``_native.matmul`` when each item is at most this many
#: multiply-adds (OpenBLAS runs products up to 4 * 65536 on the calling thread; larger
#: ones it threads itself, and its threads then fight the pool's for the cores) and the
#: whole batch at least ``_MATMUL_MIN_WORK`` (about 15 µs on one core of this kind).
_MATMUL_MAX_ITEM = 1 << 18
_MATMUL_MIN_WORK = 1 << 20
_MATMUL_TYPES = _ROW_TYPES


def batched_matmul(a: Any, b: Any) -> np.ndarray | None:
    """``np.matmul(a, b)`` for float32/float64 numpy arrays of rank >= 2, one of them of
    rank >= 3, with the batch items shared out on the native pool where they lie (float32
    items with k and m up to 512 by the module's register-blocked kernel, within float32
    rounding of BLAS; others by numpy's own loop per item, the same bits); None where that
    does not apply (the caller runs
    numpy's call): other types, batches that do not broadcast, items too large or batches
    too small to gain."""
    if _native is None or type(a) is not np.ndarray or type(b) is not np.ndarray or a.dtype not in _MATMUL_TYPES \
            or b.dtype != a.dtype or a.ndim < 2 or b.ndim < 2:
        return None
    n, k = a.shape[-2:]
    m = b.shape[-1]
    work = n * k * m
    if b.shape[-2] != k or work > _MATMUL_MAX_ITEM:
        return None
    sa, sb = a.shape[:-2], b.shape[:-2]
    if sa == sb:
        batch_shape = sa
    else:
        try:
            batch_shape = np.broadcast_shapes(sa, sb)
        except ValueError:
            return None
        rank = len(batch_shape) + 2
        a = a.reshape((1,) * (rank - a.ndim) + a.shape)  # leading 1s: always a view
        b = b.reshape((1,) * (rank - b.ndim) + b.shape)
    batch = math.prod(batch_shape)
    if batch < 2 or batch * work < _MATMUL_MIN_WORK:
        return None
    out = np.empty(batch_shape + (n, m), a.dtype)
    threads = min(ok.config.intra_op_parallelism_threads or _CORES, batch)
    raised = _native.matmul(a, b, out, threads)
    if raised < 0:
        return None
    if raised:
        _report_like_numpy(np.matmul, (a, b), out, raised)
    return out
