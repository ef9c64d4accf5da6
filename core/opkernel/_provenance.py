"""Who registered what: the provider recorded with every op, kernel and gradient.

While the plugin manager calls a plugin's hooks it sets ``CURRENT_PROVIDER``; a
registration made outside any hook (a user's script, a test) records the module
that made it instead.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

__all__ = ["Provider", "current_provider", "providing", "caller_location"]


@dataclass(frozen=True)
class Provider:
    """The plugin (or module) a registration came from."""

    plugin: str
    distribution: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.distribution:
            return f"{self.plugin} ({self.distribution} {self.version or '?'})"
        return self.plugin


CURRENT_PROVIDER: ContextVar[Provider | None] = ContextVar("opkernel_provider", default=None)

# The registration machinery: frames of these modules are never "the caller".
# Op-library modules (opkernel.ops.math_ops, plugins) are callers like any other.
_MACHINERY = (
    "opkernel._provenance", "opkernel.op_registry", "opkernel.spec", "opkernel.kernels", "opkernel.gradients",
    "opkernel.plugins", "opkernel.engine", "opkernel.ops._builtin", "opkernel.dask.rules", "pluggy", "contextlib", "functools",
    "importlib",
)


def _first_foreign_frame() -> tuple[str, str, int]:
    frame = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__", "?")
        if module != "opkernel" and not module.startswith(_MACHINERY):
            return module, frame.f_code.co_filename, frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return "?", "?", 0


def current_provider() -> Provider:
    """The active plugin, or the module outside opkernel that is registering."""
    provider = CURRENT_PROVIDER.get()
    if provider is not None:
        return provider
    return Provider(plugin=_first_foreign_frame()[0])


def caller_location() -> str:
    """``file:line`` of the first caller outside opkernel (for error messages)."""
    _, filename, lineno = _first_foreign_frame()
    return f"{filename}:{lineno}"


@contextmanager
def providing(provider: Provider) -> Iterator[Provider]:
    """Record ``provider`` as the source of every registration in the block."""
    token = CURRENT_PROVIDER.set(provider)
    try:
        yield provider
    finally:
        CURRENT_PROVIDER.reset(token)
