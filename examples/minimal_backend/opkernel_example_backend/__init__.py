"""opkernel-example-backend: a complete minimal backend for opkernel.

The entry point ``example = "opkernel_example_backend"`` (group ``opkernel``)
names this module; opkernel calls the hooks below once, at discovery.  Importing
this module must stay cheap: the backend class and the kernels are imported
inside the hooks, and nothing touches a device until the backend is used.
"""

from __future__ import annotations

import opkernel as ok

__version__ = "0.1.0"


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import ExampleBackend

    return [ExampleBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    from . import kernels

    kernels.register_all()
