"""opkernel-cpu: the numpy backend.

Registered through the ``opkernel`` entry-point group; everything here is a
pluggy hook implementation, called once at discovery.
"""

from __future__ import annotations

import opkernel as ok

__version__ = "0.1.0"


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import CpuBackend

    return [CpuBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    from . import array_kernels, math_kernels, nn_kernels, random_kernels, state_kernels

    for family in (math_kernels, array_kernels, nn_kernels, state_kernels, random_kernels):
        family.register_all()
