"""A ``distributed`` worker plugin that picks each worker's opkernel backend.

The class is built at its first use (``opkernel.dask._plugin.BackendPlugin``), so
importing this module imports neither distributed nor dask.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BackendPlugin"]


def _setup(self: Any, worker: Any) -> None:
    from .. import engine, plugins
    from ..errors import BackendNotFoundError

    plugins.ensure_loaded()
    if self.intra_op_threads is not None:
        engine.config.intra_op_parallelism_threads = self.intra_op_threads
    if self.backend is None:
        engine.active_backend()
        return
    errors = []
    for name in (self.backend, *self.fallback):
        try:
            engine.set_backend(name)
            return
        except BackendNotFoundError as e:
            errors.append(str(e))
    raise BackendNotFoundError(
        f"worker {getattr(worker, 'address', '?')}: none of the backends {[self.backend, *self.fallback]} "
        "is available: " + "; ".join(errors)
    )


def _init(self: Any, backend: str | None = None, fallback: tuple[str, ...] = (), intra_op_threads: int | None = 1) -> None:
    self.backend = backend
    self.fallback = tuple(fallback)
    self.intra_op_threads = intra_op_threads
    self.name = f"opkernel-backend-{backend or 'default'}"


_DOC = """Make ``backend`` the default backend of every worker it is registered on.

    client.register_plugin(ok.dask.BackendPlugin("cuda"))

``backend=None`` keeps each worker's own default (its ``OPKERNEL_BACKEND``,
else the best available backend) and only loads opkernel's plugins there, so
the first chunk does not pay for discovery.  ``fallback`` names backends a
worker uses instead when ``backend`` is unavailable on it (a CPU-only worker in
a cluster of GPU workers): ``BackendPlugin("cuda", fallback=("cpu",))``.
A worker where none is available fails to start the plugin, naming the backends.

``intra_op_threads`` (default 1) sets each worker's
``ok.config.intra_op_parallelism_threads``: the cluster's parallelism comes from its
workers and their threads, as Dask's workers run BLAS and OpenMP on one thread each;
None leaves the backend's own setting.
"""


def _build() -> type:
    from distributed.diagnostics.plugin import WorkerPlugin

    cls = type("BackendPlugin", (WorkerPlugin,), {
        "__doc__": _DOC, "__module__": __name__, "__init__": _init, "setup": _setup,
    })
    return cls


def __getattr__(name: str) -> Any:
    if name == "BackendPlugin":
        cls = globals()["BackendPlugin"] = _build()
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
