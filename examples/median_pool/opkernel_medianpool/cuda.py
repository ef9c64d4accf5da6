"""CUDA kernels of median pooling (registered when opkernel-cuda is installed).

The source is ``device.source("cuda", ...)``, compiled with cupy's NVRTC
(``cupy.RawModule``) the first time a kernel needs it; cupy is imported there,
inside the kernel, never when this package is imported.  Native arrays are
``cupy.ndarray``.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

import opkernel as ok

from .device import CTYPES, ROW_OUTPUTS, source
from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["TYPES", "MedianPool2D", "MedianPool2DGrad", "module", "BLOCK"]

TYPES = tuple(CTYPES["cuda"])
BLOCK = 256
KERNELS = ("median_pool", "median3x3", "median_pos", "median_pool_grad")

_lock = threading.Lock()
_modules: dict[tuple[Any, ...], dict[str, Any]] = {}


def module(op: str, dtype: str, g: Window, wide: bool) -> dict[str, Any]:
    """The kernels for ``dtype`` and ``g``'s window on the current CUDA device (compiled once)."""
    import cupy

    key = (cupy.cuda.Device().id, dtype, g.kh, g.kw, g.sw, wide)
    with _lock:
        found = _modules.get(key)
        if found is None:
            names = KERNELS if g.taps == 9 else tuple(k for k in KERNELS if k != "median3x3")
            try:
                mod = cupy.RawModule(code=source("cuda", dtype, g.kh, g.kw, g.sw, 1, wide), options=("--std=c++11",))
                found = {name: mod.get_function(name) for name in names}
            except cupy.cuda.compiler.CompileException as e:
                raise ok.errors.InternalError(
                    f"op '{op}': the median pooling CUDA program for {dtype}, window {g.kh}x{g.kw}, failed to "
                    f"compile: {e}",
                    op=op,
                ) from e
            _modules[key] = found
    return found


def _launch(fn: Any, n: int, *args: Any) -> None:
    fn(((n + BLOCK - 1) // BLOCK,), (BLOCK,), args)


def _args(g: Window, n: int, wide: bool) -> tuple[Any, ...]:
    index = np.int64 if wide else np.int32
    return (index(n), *(np.int32(v) for v in (g.h, g.w, g.c, g.oh, g.ow, g.sh, g.sw, g.top, g.left)))


def _region(rows: tuple[int, int], cols: tuple[int, int]) -> tuple[Any, ...]:
    return (np.int32(rows[0]), np.int32(rows[1] - rows[0]), np.int32(cols[0]), np.int32(cols[1] - cols[0]))


class _Kernel(ok.OpKernel):
    op = ""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.ksize = ctx.get_attr("ksize")
        self.strides = ctx.get_attr("strides")
        self.padding = ctx.get_attr("padding")
        self.dtype = ctx.get_attr("T").name

    def prepare(self, x: Any) -> tuple[Window, bool, dict[str, Any]]:
        g = window(self.op, x.shape, self.ksize, self.strides, self.padding)
        wide = max(g.n * g.h * g.w * g.c, g.n * g.oh * g.ow * g.c) >= 2**31
        return g, wide, module(self.op, self.dtype, g, wide)


class MedianPool2D(_Kernel):
    op = MEDIAN_POOL

    def compute(self, ctx: ok.OpKernelContext) -> None:
        import cupy

        x = cupy.ascontiguousarray(ctx.input(0))
        g, wide, ks = self.prepare(x)
        out = cupy.empty(g.out_shape, x.dtype)
        ctx.set_output(0, out)
        if not out.size:
            return
        r0, r1, c0, c1 = g.interior()
        strips = [((0, g.oh), (0, g.ow))]
        if g.taps == 9 and r0 < r1 and c0 < c1:
            n = g.n * (r1 - r0) * -(-(c1 - c0) // ROW_OUTPUTS) * g.c
            _launch(ks["median3x3"], n, out, x, *_args(g, n, wide), *_region((r0, r1), (c0, c1)))
            strips = [((0, r0), (0, g.ow)), ((r1, g.oh), (0, g.ow)), ((r0, r1), (0, c0)), ((r0, r1), (c1, g.ow))]
        for rows, cols in strips:
            n = g.n * (rows[1] - rows[0]) * (cols[1] - cols[0]) * g.c
            if n:
                _launch(ks["median_pool"], n, out, x, *_args(g, n, wide), *_region(rows, cols))


class MedianPool2DGrad(_Kernel):
    op = MEDIAN_POOL_GRAD

    def compute(self, ctx: ok.OpKernelContext) -> None:
        import cupy

        x, dy = cupy.ascontiguousarray(ctx.input(0)), cupy.ascontiguousarray(ctx.input(1))
        g, wide, ks = self.prepare(x)
        if tuple(dy.shape) != g.out_shape:
            raise ok.errors.InvalidArgumentError(
                f"op '{self.op}': grad must have the shape of the pooled output {list(g.out_shape)}, "
                f"got {list(dy.shape)}",
                op=self.op,
            )
        dx = cupy.zeros(x.shape, x.dtype)
        ctx.set_output(0, dx)
        if not dx.size or not dy.size:
            return
        pos = cupy.empty(g.out_shape, np.int64 if wide else np.int32)
        _launch(ks["median_pos"], dy.size, pos, x, *_args(g, dy.size, wide))
        _launch(ks["median_pool_grad"], dx.size, dx, dy, pos, *_args(g, dx.size, wide))
