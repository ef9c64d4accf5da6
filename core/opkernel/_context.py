"""The runtime's context: settings (``ok.config``), the installed backends and the
active one, and the per-context state the dispatch path reads (kernel labels, the
fallback in effect, open traces and profilers).

The lowest room of the runtime: it knows backends and plugins, not tensors or ops.
The rooms above use its public names; ``opkernel.engine`` re-exports the user-facing ones.
"""

from __future__ import annotations

import numbers
import os
import threading
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import plugins
from .backend import Backend
from .errors import BackendNotFoundError, BackendUnavailableError, InvalidArgumentError, OpTypeError

MAX_INTRA_OP_THREADS = 256


class _Config:
    """Process-wide settings (``ok.config``).

    ``transfer_policy``: ``"error"`` (default) makes a tensor on another backend
    an error; ``"copy"`` copies it to the active backend (counted in
    ``transfers``).
    ``intra_op_parallelism_threads``: how many threads a backend may split one
    large op across (TensorFlow's setting of that name): an int from 0 to
    ``MAX_INTRA_OP_THREADS``; 0 means the core count (the default, capped at
    that maximum); 1 keeps every op on the calling thread.
    ``kernel_fallback``: the backends, in order, that run a call the active
    backend has no kernel for (default ``()``: none, the call is a
    ``KernelNotFoundError``); the environment variable
    ``OPKERNEL_KERNEL_FALLBACK=cpu[,name...]`` sets it at startup and
    ``with ok.kernel_fallback("cpu"):`` for one context.
    ``fallbacks``: how many calls fell back, by (op, from backend, to backend).
    ``graph_fusion``: whether ``ok.function`` computes groups of elementwise nodes in
    one call where the backend can (default True; docs/functions.md, "Fusion");
    ``OPKERNEL_GRAPH_FUSION=0`` turns it off at startup.  Changing it makes every
    function bind its graphs again on its next call.
    ``buffer_reuse``: whether a fused group may write its result into the array of an
    input that dies there (default True; docs/functions.md, "Planned memory");
    ``OPKERNEL_BUFFER_REUSE=0`` turns it off at startup.  Changing it makes every
    function bind its graphs again.
    """

    _intra_op_threads: int

    def __init__(self) -> None:
        self.transfer_policy = "error"
        self.transfers = 0
        self.intra_op_parallelism_threads = min(os.cpu_count() or 1, MAX_INTRA_OP_THREADS)
        # Names only: checked against the installed backends when a fallback is first
        # looked for, so that reading the variable does not discover plugins at import.
        self._kernel_fallback: tuple[str, ...] = _fallback_names(
            os.environ.get("OPKERNEL_KERNEL_FALLBACK", "").split(","), "OPKERNEL_KERNEL_FALLBACK", check=False
        )
        self._fallbacks: dict[tuple[str, str, str], int] = {}
        self._graph_fusion = _env_switch("OPKERNEL_GRAPH_FUSION")
        self._buffer_reuse = _env_switch("OPKERNEL_BUFFER_REUSE")

    @property
    def graph_fusion(self) -> bool:
        return self._graph_fusion

    @graph_fusion.setter
    def graph_fusion(self, on: bool) -> None:
        was, self._graph_fusion = self._graph_fusion, _checked_bool("graph_fusion", on)
        if on != was:
            _notify()

    @property
    def buffer_reuse(self) -> bool:
        return self._buffer_reuse

    @buffer_reuse.setter
    def buffer_reuse(self, on: bool) -> None:
        was, self._buffer_reuse = self._buffer_reuse, _checked_bool("buffer_reuse", on)
        if on != was:
            _notify()

    @property
    def kernel_fallback(self) -> tuple[str, ...]:
        """The fallback backends in effect in this context (``ok.kernel_fallback`` blocks included)."""
        scoped = FALLBACK.get()
        return self._kernel_fallback if scoped is None else scoped

    @kernel_fallback.setter
    def kernel_fallback(self, names: Sequence[str]) -> None:
        self._kernel_fallback = _fallback_names(names, "ok.config.kernel_fallback")

    @property
    def fallbacks(self) -> Mapping[tuple[str, str, str], int]:
        """A read-only snapshot: calls that ran on a fallback backend, by (op, from, to)."""
        with lock:
            return MappingProxyType(dict(self._fallbacks))

    @property
    def intra_op_parallelism_threads(self) -> int:
        return self._intra_op_threads

    @intra_op_parallelism_threads.setter
    def intra_op_parallelism_threads(self, n: int) -> None:
        # Checked here, where the mistake is made: a backend reads it in the middle of
        # an op, where a bad value would start thousands of threads or fail every call.
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise OpTypeError(f"ok.config.intra_op_parallelism_threads must be an int, got {type(n).__name__} {n!r}")
        if not 0 <= n <= MAX_INTRA_OP_THREADS:
            raise InvalidArgumentError(
                f"ok.config.intra_op_parallelism_threads must be between 0 (the core count) and "
                f"{MAX_INTRA_OP_THREADS}, got {n}"
            )
        self._intra_op_threads = int(n)


def _fallback_names(names: Any, what: str, check: bool = True) -> tuple[str, ...]:
    """``names`` as a tuple of backend names, in order, without repeats or blanks;
    ``check``: each must be an installed backend (one installed but unavailable
    here is allowed: a fallback skips it)."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise OpTypeError(
            f"{what} must be a tuple of backend names, such as ('cpu',), got {type(names).__name__} {names!r}"
        )
    out: list[str] = []
    for name in names:
        if not isinstance(name, str):
            raise OpTypeError(f"{what} must hold backend names (str), got {type(name).__name__} {name!r}")
        name = name.strip()
        if name and name not in out:
            out.append(name)
    if check:
        installed = plugins.backend_classes()
        for name in out:
            if name not in installed:
                raise unknown_backend(name)
    return tuple(out)


def _env_switch(variable: str) -> bool:
    """An on/off setting read from the environment at startup (on unless 0/false/no/off)."""
    return os.environ.get(variable, "1").strip().lower() not in ("0", "false", "no", "off")


def _checked_bool(name: str, on: Any) -> bool:
    if not isinstance(on, bool):
        raise OpTypeError(f"ok.config.{name} must be a bool, got {type(on).__name__} {on!r}")
    return on


def _notify() -> None:
    for listener in list(CONFIG_LISTENERS):
        listener()


#: Called after a setting that compiled graphs depend on changes (``graph_fusion``,
#: ``buffer_reuse``).
CONFIG_LISTENERS: list[Callable[[], None]] = []

#: The kernel fallback of this context (``ok.kernel_fallback``); None: ``config``'s.
FALLBACK: ContextVar[tuple[str, ...] | None] = ContextVar("opkernel_kernel_fallback", default=None)

config = _Config()

# ---------------------------------------------------------------- backends

ACTIVE: ContextVar[Backend | None] = ContextVar("opkernel_backend", default=None)
LABELS: ContextVar[Mapping[str, str] | None] = ContextVar("opkernel_kernel_labels", default=None)
lock = threading.RLock()
#: The process-wide default backend, in a cell that generated wrappers read directly.
DEFAULT: list[Backend | None] = [None]
#: How many blocks that need the general dispatch path are open in any context
#: (kernel_label_map, profile); while 0, generated wrappers may take their fast path.
SLOW_SCOPES = [0]
#: The active profilers (ok.profile); execute() reports every call to each.
PROFILERS: list[Any] = []
#: While ok.function traces in this context: the callback that records a call as a graph
#: node instead of running it (the tracer holds a SLOW_SCOPES count, so every call comes here).
TRACER: ContextVar[Callable[..., Any] | None] = ContextVar("opkernel_tracer", default=None)
_instances: dict[str, Backend] = {}
_init_errors: dict[str, str] = {}


def _classes_by_priority() -> list[tuple[str, type[Backend]]]:
    classes = plugins.backend_classes()
    return sorted(((n, c) for n, (c, _) in classes.items()), key=lambda nc: (-nc[1].priority, nc[0]))


def _unavailable_reason(name: str, cls: type[Backend]) -> str | None:
    if name in _init_errors:
        return _init_errors[name]
    try:
        return cls.availability()
    except Exception as e:  # availability() must not raise; treat it as unavailable if it does
        return f"availability check raised {type(e).__name__}: {e}"


def backend_status() -> list[tuple[str, int, str | None]]:
    """(name, priority, reason it is unavailable or None) for every installed backend."""
    return [(n, c.priority, _unavailable_reason(n, c)) for n, c in _classes_by_priority()]


def available_backends() -> list[str]:
    """Names of the backends usable here, highest priority first."""
    return [n for n, _, reason in backend_status() if reason is None]


def unknown_backend(name: str) -> BackendNotFoundError:
    status = backend_status()
    names = [n for n, _, _ in status]
    for n, _, reason in status:
        if n == name:
            return BackendUnavailableError(
                f"backend {name!r} is installed but not available: {reason}. "
                f"Available backends: {available_backends()}.",
                backend=name,
            )
    failure = plugins.failure_of(name)
    if failure is not None:  # installed, but its plugin is broken: say so, not "pip install"
        return BackendNotFoundError(
            f"backend {name!r} cannot be used: {failure.failed_to_load()}. Installed backends: {names}; "
            "`opkernel info` lists plugin errors.",
            backend=name,
        )
    import difflib  # only for this error message; not imported with opkernel

    hint = difflib.get_close_matches(name, names, n=1)
    did_you_mean = f" Did you mean {hint[0]!r}?" if hint else ""
    return BackendNotFoundError(
        f"unknown backend {name!r}; installed backends: {names}.{did_you_mean} "
        f"Backends come from plugins (pip install opkernel-{name}).",
        backend=name,
    )


def backend_instance(name: str) -> Backend:
    """The (lazily initialised) backend called ``name``."""
    inst = _instances.get(name)
    if inst is not None:
        return inst
    plugins.ensure_loaded()  # before taking lock: loading holds the plugin lock, then its listeners take ours
    with lock:
        if name in _instances:
            return _instances[name]
        classes = plugins.backend_classes()
        if name not in classes:
            raise unknown_backend(name)
        cls = classes[name][0]
        if _unavailable_reason(name, cls) is not None:
            raise unknown_backend(name)
        try:
            inst = cls()
        except Exception as e:
            _init_errors[name] = f"initialisation failed: {type(e).__name__}: {e}"
            raise unknown_backend(name) from e
        _instances[name] = inst
        return inst


def default_backend() -> Backend:
    be = DEFAULT[0]
    if be is not None:
        return be
    plugins.ensure_loaded()  # before taking lock, as in backend_instance
    with lock:
        be = DEFAULT[0]
        if be is None:
            wanted = os.environ.get("OPKERNEL_BACKEND")
            be = DEFAULT[0] = backend_instance(wanted) if wanted else _first_usable_backend()
        return be


def _first_usable_backend() -> Backend:
    """The available backend of highest priority whose initialisation succeeds.

    A backend whose ``__init__`` raises is skipped with a warning (and reported
    as unavailable from then on), so the default does not depend on whether
    it was tried before.
    """
    for name in available_backends():
        try:
            return backend_instance(name)
        except BackendUnavailableError as e:
            warnings.warn(f"{e} Falling back to the next backend.", RuntimeWarning, stacklevel=4)
    raise BackendNotFoundError(
        "no backend is available. Install one (pip install opkernel-cpu); "
        f"installed: {[(n, r) for n, _, r in backend_status()]}"
    )


def active_backend() -> Backend:
    """The backend ops dispatch to in this context."""
    return ACTIVE.get() or default_backend()


def get_backend() -> str:
    """Name of the active backend."""
    return active_backend().name


def set_backend(name: str) -> None:
    """Make ``name`` the process-wide default backend.

    ``use_backend`` overrides it for one context (thread or asyncio task).
    """
    DEFAULT[0] = backend_instance(name)


@contextmanager
def use_backend(name: str) -> Iterator[Backend]:
    """Dispatch to ``name`` inside the block, in this context only."""
    token = ACTIVE.set(backend_instance(name))
    try:
        yield ACTIVE.get()  # type: ignore[misc]
    finally:
        ACTIVE.reset(token)


@contextmanager
def kernel_fallback(*names: str) -> Iterator[tuple[str, ...]]:
    """Inside the block, in this context only (thread or asyncio task), a call the
    active backend has no kernel for runs on the first of ``names`` that has one:
    ``with ok.kernel_fallback("cpu"):``.  No names: no fallback in the block."""
    token = FALLBACK.set(_fallback_names(names, "ok.kernel_fallback"))
    try:
        yield FALLBACK.get()  # type: ignore[misc]
    finally:
        FALLBACK.reset(token)


@contextmanager
def kernel_label_map(labels: Mapping[str, str]) -> Iterator[None]:
    """Choose kernels by label per op inside the block (TensorFlow's ``_kernel`` attr)."""
    outer = LABELS.get() or {}
    token = LABELS.set({**outer, **labels})
    with lock:
        SLOW_SCOPES[0] += 1
    try:
        yield
    finally:
        with lock:
            SLOW_SCOPES[0] -= 1
        LABELS.reset(token)


def reset_backends() -> None:
    """Forget the default backend and every backend instance (tests that change plugins)."""
    with lock:
        DEFAULT[0] = None
        _instances.clear()
        _init_errors.clear()


def _on_plugins_changed() -> None:
    """Drop instances of backends whose class is no longer provided (a removed
    plugin's backend must not stay usable through the instance cache)."""
    with lock:
        provided = {n: c for n, (c, _) in plugins.backend_classes().items()}
        for name in [n for n, inst in _instances.items() if provided.get(n) is not type(inst)]:
            del _instances[name]
        for name in [n for n in _init_errors if n not in provided]:
            del _init_errors[name]
        default = DEFAULT[0]
        if default is not None and _instances.get(default.name) is not default:
            DEFAULT[0] = None


plugins.on_change(_on_plugins_changed)


# ---------------------------------------------------------------- seams for the rooms above

def label_for(op_name: str) -> str | None:
    """The kernel label ``ok.kernel_label_map`` gives ``op_name`` in this context, if any."""
    labels = LABELS.get()
    return None if labels is None else labels.get(op_name)


@contextmanager
def tracing(tracer: Callable[..., Any]) -> Iterator[None]:
    """Inside the block, in this context, every op call goes to ``tracer(op, inputs,
    attrs, label)`` instead of running (``ok.function`` records a graph this way).
    The block holds a slow-path count, so generated wrappers skip their fast path."""
    with lock:
        SLOW_SCOPES[0] += 1
    token = TRACER.set(tracer)
    try:
        yield
    finally:
        TRACER.reset(token)
        with lock:
            SLOW_SCOPES[0] -= 1


@contextmanager
def not_tracing() -> Iterator[None]:
    """Run op calls for real inside the block, even while a trace is open (a tracer
    folding a call on constants)."""
    token = TRACER.set(None)
    try:
        yield
    finally:
        TRACER.reset(token)


def is_tracing() -> bool:
    """Whether op calls in this context are being traced."""
    return bool(SLOW_SCOPES[0]) and TRACER.get() is not None


@contextmanager
def profiling(profiler: Any) -> Iterator[None]:
    """Report every op call to ``profiler.add(backend, op, seconds, bytes)`` inside the block
    (``ok.profile``); a ``synchronize`` attribute that is true makes each call wait for its device."""
    with lock:
        PROFILERS.append(profiler)
        SLOW_SCOPES[0] += 1
    try:
        yield
    finally:
        with lock:
            PROFILERS.remove(profiler)
            SLOW_SCOPES[0] -= 1
