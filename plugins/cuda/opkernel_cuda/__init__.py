"""opkernel-cuda: the CUDA backend (cupy).

Registered through the ``opkernel`` entry-point group; everything here is a
pluggy hook implementation, called once at discovery.  Nothing imported here
imports cupy: the backend imports it when it is first initialised, and the
kernels reach it through ``LazyModule`` and the arrays they are given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import opkernel as ok

if TYPE_CHECKING:
    from .backend import CudaBackend
    from .device_kernels import DeviceProgram, ElementwiseKernel, Kernel, Program, backend_of, ctype

__version__ = "0.1.0"

#: The device-kernel API for op packages (``device_kernels``), imported at first use.
__all__ = ["CudaBackend", "DeviceProgram", "ElementwiseKernel", "Kernel", "Program", "backend_of", "ctype"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        module = "backend" if name == "CudaBackend" else "device_kernels"
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import CudaBackend

    return [CudaBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    from .kernels import register_all

    register_all()
