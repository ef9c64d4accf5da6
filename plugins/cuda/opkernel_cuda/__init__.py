"""opkernel-cuda: the CUDA backend (cupy).

Registered through the ``opkernel`` entry-point group; everything here is a
pluggy hook implementation, called once at discovery.  Nothing imported here
imports cupy: the backend imports it when it is first initialised, and the
kernels reach it through ``LazyModule`` and the arrays they are given.
"""

from __future__ import annotations

import opkernel as ok

__version__ = "0.1.0"


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import CudaBackend

    return [CudaBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    from .kernels import register_all

    register_all()
