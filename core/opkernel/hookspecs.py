"""Every hook a plugin can implement, in one place.

A plugin is a module (or object) exposed by an entry point in the group
``opkernel``, or passed to ``ok.register_plugin``.  It implements any of the
hooks below, marked with ``@opkernel.hookimpl``.  The plugin manager calls one
plugin's hooks at a time, in the order listed here, with that plugin recorded
as the provider of everything registered; if any hook raises, everything the
plugin registered is removed again and the failure is reported (a warning, or
an error with ``OPKERNEL_STRICT_PLUGINS=1``).

Hooks run once, at discovery (the first time opkernel needs its registries),
never per op call.  They must not import heavy dependencies (cupy, pyopencl)
or touch a device: do that in the backend's ``__init__``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from .backend import Backend

PROJECT = "opkernel"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

#: Bumped when a hook's contract changes incompatibly.
PLUGIN_API_VERSION = 1


@hookspec
def opkernel_register_backends() -> list[type[Backend]]:
    """Return the Backend subclasses this plugin provides.

    Called first.  Return classes, not instances: a backend is instantiated
    only when it is first used.
    """
    raise NotImplementedError


@hookspec
def opkernel_register_ops() -> None:
    """Register op specs with ``opkernel.register_op``.

    Called after backends.  Ops are finalized lazily, so an op may refer to
    nothing registered by other plugins.
    """


@hookspec
def opkernel_register_kernels() -> None:
    """Register kernels with ``opkernel.register_kernel``.

    Kernels for ops of other plugins are fine: they are checked against the op
    when first looked up.  Register kernels for a backend only if this plugin
    can run on it; importing the backend's array library here is not allowed.
    """


@hookspec
def opkernel_register_gradients() -> None:
    """Register gradient functions with ``opkernel.register_gradient`` and
    ``opkernel.not_differentiable``."""
