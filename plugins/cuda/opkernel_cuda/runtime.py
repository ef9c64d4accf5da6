"""What the CUDA kernels share at run time: the device, cupy's memory pool, the
compiled raw programs, and the out-of-memory retry every kernel runs under.

Nothing here imports cupy: ``activate`` receives it from the backend's
``__init__``.  Until then (during discovery, and in processes that never use
the backend) ``STATE.cupy`` is None.

The retry: cupy keeps freed device memory in its pool.  When an allocation
inside a kernel fails, ``guarded`` frees the pool's cached blocks
(``free_all_blocks``) and runs the kernel once more; a second failure reaches
the engine, whose ``translate_error`` hook turns it into a
``ResourceExhaustedError`` naming the op and the bytes asked for.  Kernels
that update a variable in place (``Ref`` inputs) are not retried, since the
first attempt may have written part of the update.
"""

from __future__ import annotations

import inspect
import threading
from typing import Any, Callable

from .lazy import LazyFunction
from .sources import OPTIONS, SOURCES, expression, source

__all__ = ["STATE", "activate", "guarded", "launch", "grid", "module_for"]

BLOCK = 256
MAX_BLOCKS = 1 << 16


class _State:
    """The backend's live objects, set once by ``activate``."""

    def __init__(self) -> None:
        self.cupy: Any = None
        self.device: Any = None
        self.device_index = 0
        self.pool: Any = None
        self.pinned_pool: Any = None
        self.retries = 0  # kernels that ran again after the pool was emptied (tests and ok.memory read it)
        self.modules: dict[str, Any] = {}
        self.functions: dict[tuple[str, str], Any] = {}
        self.lock = threading.RLock()


STATE = _State()


def activate(cupy: Any, device: Any, index: int) -> None:
    STATE.cupy = cupy
    STATE.device = device
    STATE.device_index = index
    STATE.pool = cupy.get_default_memory_pool()
    STATE.pinned_pool = cupy.get_default_pinned_memory_pool()


def free_cached_blocks() -> None:
    if STATE.pool is not None:
        STATE.pool.free_all_blocks()
    if STATE.pinned_pool is not None:
        STATE.pinned_pool.free_all_blocks()


def guarded(fn: Callable[..., Any], retry: bool = True) -> Callable[..., Any]:
    """``fn`` run on the backend's device, retried once after an out-of-memory error.

    cupy's current device is per thread: a thread other than the one that
    initialised the backend starts on device 0, so a non-zero device is
    entered around each call (device 0 costs nothing).
    """

    def call(args: tuple[Any, ...], attrs: dict[str, Any]) -> Any:
        if STATE.device_index:
            with STATE.device:
                return fn(*args, **attrs)
        return fn(*args, **attrs)

    def kernel(*args: Any, **attrs: Any) -> Any:
        try:
            return call(args, attrs)
        except MemoryError:
            if not retry or STATE.pool is None:
                raise
            free_cached_blocks()
            STATE.retries += 1
            return call(args, attrs)

    kernel.__name__ = getattr(fn, "__name__", "kernel")
    kernel.__doc__ = getattr(fn, "__doc__", None)
    if isinstance(fn, LazyFunction):  # a ufunc: the engine passes it no attrs
        kernel.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("arrays", inspect.Parameter.VAR_POSITIONAL)]
        )
    else:  # the engine reads the attrs to pass from fn's own signature
        kernel.__wrapped__ = fn  # type: ignore[attr-defined]
    return kernel


# ------------------------------------------------------------ raw programs


def module_for(name: str) -> Any:
    """The ``cupy.RawModule`` of source ``name`` (built on first use, compiled on first launch;
    cupy caches the binary on disk under CUPY_CACHE_DIR)."""
    module = STATE.modules.get(name)
    if module is None:
        with STATE.lock:
            module = STATE.modules.get(name)
            if module is None:
                src = source(name)
                module = STATE.cupy.RawModule(code=src.code, options=OPTIONS, name_expressions=src.name_expressions())
                STATE.modules[name] = module
    return module


def function(name: str, kernel: str, args: tuple[str, ...]) -> Any:
    key = (name, expression(kernel, args))
    fn = STATE.functions.get(key)
    if fn is None:
        with STATE.lock:  # the first get_function compiles; one thread does it
            fn = STATE.functions.get(key)
            if fn is None:
                fn = module_for(name).get_function(key[1])
                STATE.functions[key] = fn
    return fn


def compile_all() -> int:
    """Compile every raw source now (``ok.warmup``); returns how many were compiled."""
    built = 0
    for src in SOURCES:
        if src.name in STATE.modules:
            continue  # already built (and compiled when first launched)
        module_for(src.name).compile()
        built += 1
    return built


def grid(n: int) -> int:
    """Blocks for a grid-stride loop over ``n`` items."""
    return max(1, min((n + BLOCK - 1) // BLOCK, MAX_BLOCKS))


def launch(name: str, kernel: str, args: tuple[str, ...], blocks: Any, threads: int, params: tuple[Any, ...], shared: int = 0) -> None:
    """Launch one instantiation on cupy's current stream."""
    fn = function(name, kernel, args)
    fn(blocks if isinstance(blocks, tuple) else (blocks,), (threads,), params, shared_mem=shared)
