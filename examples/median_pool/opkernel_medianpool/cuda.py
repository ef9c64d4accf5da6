"""CUDA kernels of median pooling (registered when opkernel-cuda is installed).

The source is ``device.source("cuda", ...)``, built through the backend's public
device-kernel API (``opkernel_cuda.DeviceProgram``, a ``cupy.RawModule``): compiled
by NVRTC at first use, kept in the backend's verified kernel cache, and compiled
ahead of time by ``ok.warmup("cuda")`` for 3x3 windows of stride 1 in every dtype.
cupy is imported only by the backend and inside the kernels, never when this
package is imported.  Native arrays are ``cupy.ndarray``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel_cuda import DeviceProgram, Kernel

from .device import CTYPES, ROW_OUTPUTS, source
from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["TYPES", "PROGRAM", "MedianPool2D", "MedianPool2DGrad", "module"]

TYPES = tuple(CTYPES["cuda"])
KERNELS = ("median_pool", "median3x3", "median_pos", "median_pool_grad")


def _render(dtype: str, kh: int, kw: int, sw: int, wide: bool) -> str:
    return source("cuda", dtype, kh, kw, sw, 1, wide)


#: One module per (dtype, window, column stride, index width).
PROGRAM = DeviceProgram(
    "Addons>MedianPool2D", _render, warmup=[{"dtype": d, "kh": 3, "kw": 3, "sw": 1, "wide": False} for d in TYPES]
)


def module(be: ok.Backend, op: str, dtype: str, g: Window, wide: bool) -> dict[str, Kernel]:
    """The kernels for ``dtype`` and ``g``'s window on backend ``be`` (compiled once)."""
    program = PROGRAM.build(be, op=op, dtype=dtype, kh=g.kh, kw=g.kw, sw=g.sw, wide=wide)
    names = KERNELS if g.taps == 9 else tuple(k for k in KERNELS if k != "median3x3")
    return {name: program.kernel(name) for name in names}


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

    def prepare(self, ctx: ok.OpKernelContext, x: Any) -> tuple[Window, bool, dict[str, Kernel]]:
        g = window(self.op, x.shape, self.ksize, self.strides, self.padding)
        wide = max(g.n * g.h * g.w * g.c, g.n * g.oh * g.ow * g.c) >= 2**31
        return g, wide, module(ctx.backend, self.op, self.dtype, g, wide)


class MedianPool2D(_Kernel):
    op = MEDIAN_POOL

    def compute(self, ctx: ok.OpKernelContext) -> None:
        import cupy

        x = cupy.ascontiguousarray(ctx.input(0))
        g, wide, ks = self.prepare(ctx, x)
        out = cupy.empty(g.out_shape, x.dtype)
        ctx.set_output(0, out)
        if not out.size:
            return
        r0, r1, c0, c1 = g.interior()
        strips = [((0, g.oh), (0, g.ow))]
        if g.taps == 9 and r0 < r1 and c0 < c1:
            n = g.n * (r1 - r0) * -(-(c1 - c0) // ROW_OUTPUTS) * g.c
            ks["median3x3"].launch1d(n, out, x, *_args(g, n, wide), *_region((r0, r1), (c0, c1)))
            strips = [((0, r0), (0, g.ow)), ((r1, g.oh), (0, g.ow)), ((r0, r1), (0, c0)), ((r0, r1), (c1, g.ow))]
        for rows, cols in strips:
            n = g.n * (rows[1] - rows[0]) * (cols[1] - cols[0]) * g.c
            if n:
                ks["median_pool"].launch1d(n, out, x, *_args(g, n, wide), *_region(rows, cols))


class MedianPool2DGrad(_Kernel):
    op = MEDIAN_POOL_GRAD

    def compute(self, ctx: ok.OpKernelContext) -> None:
        import cupy

        x, dy = cupy.ascontiguousarray(ctx.input(0)), cupy.ascontiguousarray(ctx.input(1))
        g, wide, ks = self.prepare(ctx, x)
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
        ks["median_pos"].launch1d(dy.size, pos, x, *_args(g, dy.size, wide))
        ks["median_pool_grad"].launch1d(dx.size, dx, dy, pos, *_args(g, dx.size, wide))
