"""Every kernel of this package, registered in one place.

The generic kernels (``backend="*"``) serve any backend; a fused kernel is
registered only for a backend whose plugin is installed, and nothing here
imports pyopencl or cupy: device programs are built by the kernels on first use.
"""

from __future__ import annotations

import importlib.util

import opkernel as ok

from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["BACKEND_MODULES", "installed", "register_all"]

#: The plugin module that provides each backend this package has fused kernels for.
BACKEND_MODULES = {"cpu": "opkernel_cpu", "opencl": "opkernel_opencl", "cuda": "opkernel_cuda"}


def installed(backend: str) -> bool:
    """Whether the plugin providing ``backend`` is installed (found without importing it)."""
    return importlib.util.find_spec(BACKEND_MODULES[backend]) is not None


def register_all() -> None:
    from . import composite

    ok.register_kernel(MEDIAN_POOL, backend="*")(composite.median_pool2d)
    ok.register_kernel(MEDIAN_POOL_GRAD, backend="*")(composite.median_pool2d_grad)
    if installed("cpu"):
        from . import cpu

        ok.register_kernel(MEDIAN_POOL, backend="cpu")(cpu.median_pool2d)
        ok.register_kernel(MEDIAN_POOL_GRAD, backend="cpu")(cpu.median_pool2d_grad)
    if installed("opencl"):
        from . import opencl

        ok.register_kernel(MEDIAN_POOL, backend="opencl", type_constraints={"T": opencl.TYPES})(opencl.MedianPool2D)
        ok.register_kernel(MEDIAN_POOL_GRAD, backend="opencl", type_constraints={"T": opencl.TYPES})(
            opencl.MedianPool2DGrad
        )
    if installed("cuda"):
        from . import cuda

        ok.register_kernel(MEDIAN_POOL, backend="cuda", type_constraints={"T": cuda.TYPES})(cuda.MedianPool2D)
        ok.register_kernel(MEDIAN_POOL_GRAD, backend="cuda", type_constraints={"T": cuda.TYPES})(cuda.MedianPool2DGrad)
