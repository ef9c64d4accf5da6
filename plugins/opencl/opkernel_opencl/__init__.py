"""opkernel-opencl: the OpenCL backend (pyopencl; PoCL gives a CPU device).

Registered through the ``opkernel`` entry-point group; everything here is a
pluggy hook implementation, called once at discovery.  Importing this package
imports neither pyopencl nor any kernel module: the kernel tables are read in
``opkernel_register_kernels`` and pyopencl is imported when the backend is
first initialised.
"""

from __future__ import annotations

import opkernel as ok

__version__ = "0.1.0"

#: The kernel modules, one registration table each.
FAMILIES = ("elementwise", "array_kernels", "reduction_kernels", "linalg_kernels", "nn_kernels", "state_kernels")


@ok.hookimpl
def opkernel_register_backends() -> list[type[ok.Backend]]:
    from .backend import OpenCLBackend

    return [OpenCLBackend]


@ok.hookimpl
def opkernel_register_kernels() -> None:
    import importlib

    for name in FAMILIES:
        importlib.import_module(f"{__name__}.{name}").register_all()
