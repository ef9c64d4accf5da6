"""The discovery seam of the registries.

The kernel and gradient registries sit below the plugin layer, yet their public lookups
must see the kernels and gradients of the installed plugins: each calls ``discover()``
first, and the plugin layer installs the function that loads the plugins (``install``).
Before it does (or for a registry used on its own) ``discover`` does nothing.
"""

from __future__ import annotations

from typing import Callable

__all__ = ["discover", "install"]

_HOOK: list[Callable[[], None]] = []


def install(fn: Callable[[], None]) -> None:
    """Make ``fn`` the discovery that ``discover()`` runs (the plugin layer's ``ensure_loaded``)."""
    _HOOK[:] = [fn]


def discover() -> None:
    """Run the installed discovery, if any: called by registry lookups before they read."""
    if _HOOK:
        _HOOK[0]()
