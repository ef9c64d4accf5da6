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

The kernel cache: compiled kernels run as this user's code, so ``activate``
points cupy's compiler at a directory private to this user, with entries bound
to their keys (``use_private_kernel_cache``), before anything is compiled.
"""

from __future__ import annotations

import inspect
import os
import threading
from typing import Any, Callable

from opkernel.cachedirs import cache_root, private_dir, read_entry, write_entry

from .lazy import LazyFunction
from .sources import OPTIONS, SOURCES, expression, source

__all__ = ["STATE", "activate", "guarded", "launch", "grid", "module_for", "kernel_cache_dir", "use_private_kernel_cache"]

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
        self.kernel_cache: str | None = None  # where compiled kernels are cached (None: in memory)
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
    STATE.kernel_cache = use_private_kernel_cache(cupy)  # before the first compile


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
    cupy caches the binary on disk in ``STATE.kernel_cache``, verified)."""
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


# ------------------------------------------------------------ the kernel cache


def kernel_cache_dir() -> str | None:
    """Where cupy may cache compiled kernels: ``$CUPY_CACHE_DIR`` (cupy's default
    ``~/.cupy/kernel_cache``) when private to this user; else, after an
    ``UnsafeCacheWarning``, ``$XDG_CACHE_HOME/opkernel/cuda``; None when neither is
    private (kernels are then compiled in memory)."""
    chosen = os.environ.get("CUPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cupy", "kernel_cache")
    if private_dir(chosen, "cuda backend (CUPY_CACHE_DIR, cupy's kernel cache)") is not None:
        return os.path.abspath(os.path.expanduser(chosen))
    return private_dir(os.path.join(cache_root(), "cuda"), "cuda backend (the private kernel cache)")


def verified_kernel_cache(base: type, where: str) -> Any:
    """A cupy kernel cache backend (a subclass of cupy's ``KernelCacheBackend``) whose
    entries are bound to their key: cupy's own format checks a cubin against its own
    digest only, so two entries swapped would load each other's kernels."""

    class VerifiedKernelCache(base):  # type: ignore[misc]
        MAGIC = b"opkernel-cupy-kernel 1"

        def __init__(self) -> None:
            self.where = where

        def _path(self, name: str) -> str:
            return os.path.join(self.where, os.path.basename(name) + ".okv")

        def load(self, name: str) -> bytes | None:
            return read_entry(self._path(name), name, self.MAGIC)[0]

        def save(self, name: str, cubin: bytes, source: str) -> None:
            write_entry(self._path(name), name, bytes(cubin), self.MAGIC)

    return VerifiedKernelCache()


def use_private_kernel_cache(cupy: Any) -> str | None:
    """Point cupy's compiler at ``kernel_cache_dir()`` with verified entries (or at memory
    when there is none); returns the directory.  Process-wide: cupy has one cache."""
    where = kernel_cache_dir()
    if where is None:
        os.environ["CUPY_CACHE_IN_MEMORY"] = "1"
        return None
    os.environ["CUPY_CACHE_DIR"] = where  # cupy before 14 reads it at each compile
    compiler = cupy.cuda.compiler
    setter = getattr(compiler, "_set_kernel_cache_backend", None)
    base = getattr(getattr(cupy.cuda, "_compiler_cache", None), "KernelCacheBackend", None)
    if setter is not None and base is not None:
        setter(verified_kernel_cache(base, where))
    elif hasattr(compiler, "_kernel_cache_backend"):  # a cupy whose cache we cannot redirect
        os.environ["CUPY_CACHE_IN_MEMORY"] = "1"
        return None
    return where


def grid(n: int) -> int:
    """Blocks for a grid-stride loop over ``n`` items."""
    return max(1, min((n + BLOCK - 1) // BLOCK, MAX_BLOCKS))


def launch(name: str, kernel: str, args: tuple[str, ...], blocks: Any, threads: int, params: tuple[Any, ...], shared: int = 0) -> None:
    """Launch one instantiation on cupy's current stream."""
    fn = function(name, kernel, args)
    fn(blocks if isinstance(blocks, tuple) else (blocks,), (threads,), params, shared_mem=shared)
