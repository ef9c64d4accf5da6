"""opkernel-opencl: the OpenCL backend (pyopencl; PoCL gives a CPU device).

Registered through the ``opkernel`` entry-point group; everything here is a
pluggy hook implementation, called once at discovery.  Importing this package
imports neither pyopencl nor any kernel module: the kernel tables are read in
``opkernel_register_kernels`` and pyopencl is imported when the backend is
first initialised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import opkernel as ok

from ._version import __version__ as __version__

if TYPE_CHECKING:
    from .backend import OpenCLBackend
    from .device_kernels import DeviceProgram, ElementwiseKernel, Kernel, Program, backend_of, ctype

#: The device-kernel API for op packages (``device_kernels``), imported at first use.
__all__ = ["DeviceProgram", "ElementwiseKernel", "Kernel", "OpenCLBackend", "Program", "backend_of", "ctype"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        import importlib

        module = "backend" if name == "OpenCLBackend" else "device_kernels"
        return getattr(importlib.import_module(f"{__name__}.{module}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: The kernel modules, one registration table each.
FAMILIES = (
    "elementwise", "array_kernels", "reduction_kernels", "linalg_kernels", "nn_kernels", "state_kernels", "random_kernels",
    "nd_kernels", "image_kernels", "norm_kernels",
)


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import OpenCLBackend

    return [OpenCLBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    import importlib

    for name in FAMILIES:
        importlib.import_module(f"{__name__}.{name}").register_all()
