"""OpenCL kernels of median pooling (registered when opkernel-opencl is installed).

The programs are built through the backend's public device-kernel API
(``opkernel_opencl.DeviceProgram``): once per (backend, dtype, window), kept in the
backend's verified disk cache across processes, and built ahead of time by
``ok.warmup("opencl")`` for 3x3 windows of stride 1 in every dtype.  Nothing here
imports pyopencl: the backend carries it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import opkernel as ok
from opkernel_opencl import DeviceProgram, Kernel, backend_of

from .device import CTYPES, ROW_OUTPUTS, source
from .geometry import Window, window
from .ops import MEDIAN_POOL, MEDIAN_POOL_GRAD

__all__ = ["TYPES", "PROGRAM", "MedianPool2D", "MedianPool2DGrad", "kernels"]

TYPES = tuple(CTYPES["opencl"])


def _render(dtype: str, kh: int, kw: int, sw: int, vector: int, wide: bool) -> str:
    return source("opencl", dtype, kh, kw, sw, vector, wide)


#: One program per (dtype, window, column stride, channels per work-item, index width).
PROGRAM = DeviceProgram(
    "Addons>MedianPool2D", _render,
    warmup=[
        {"dtype": d, "kh": 3, "kw": 3, "sw": 1, "vector": min(8, 32 // np.dtype(d).itemsize), "wide": False}
        for d in TYPES
    ],
)


def kernels(be: ok.Backend, op: str, dtype: str, g: Window, vector: int, wide: bool) -> dict[str, Kernel]:
    """The kernels for ``dtype`` and ``g``'s window on backend ``be`` (built once, then cached)."""
    program = PROGRAM.build(be, op=op, dtype=dtype, kh=g.kh, kw=g.kw, sw=g.sw, vector=vector, wide=wide)
    return {name: program.kernel(name) for name in program.kernel_names}


def _vector(channels: int, dtype: str) -> int:
    """Channels per work-item of median3x3: at most 32 bytes, since PoCL passes a 64-byte
    vector (double8) to its builtins with an ABI that x86 without AVX-512 does not share,
    and the program crashes."""
    itemsize = np.dtype(dtype).itemsize
    return next(v for v in (8, 4, 2, 1) if channels % v == 0 and v * itemsize <= 32)


def _args(g: Window, n: int, wide: bool) -> list[Any]:
    index = np.int64 if wide else np.int32
    return [index(n), *(np.int32(v) for v in (g.h, g.w, g.c, g.oh, g.ow, g.sh, g.sw, g.top, g.left))]


def _region(rows: tuple[int, int], cols: tuple[int, int]) -> list[Any]:
    return [np.int32(rows[0]), np.int32(rows[1] - rows[0]), np.int32(cols[0]), np.int32(cols[1] - cols[0])]


def _dense(x: Any) -> Any:
    """``x`` at offset 0 (the engine's tensors always are; the kernel checks contiguity)."""
    return x if x.offset == 0 else x.copy()


class _Kernel(ok.OpKernel):
    op = ""

    def __init__(self, ctx: ok.OpKernelConstruction) -> None:
        self.ksize = ctx.get_attr("ksize")
        self.strides = ctx.get_attr("strides")
        self.padding = ctx.get_attr("padding")
        self.dtype = ctx.get_attr("T").name
        self._kernels: dict[tuple[Any, ...], dict[str, Kernel]] = {}

    def window(self, x: Any) -> tuple[Window, bool]:
        g = window(self.op, x.shape, self.ksize, self.strides, self.padding)
        return g, max(g.n * g.h * g.w * g.c, g.n * g.oh * g.ow * g.c) >= 2**31

    def kernels(self, be: ok.Backend, g: Window, wide: bool) -> dict[str, Kernel]:
        key = (be, g.kh, g.kw, g.sw, _vector(g.c, self.dtype), wide)  # one backend per instance, in practice
        found = self._kernels.get(key)
        if found is None:
            found = self._kernels[key] = kernels(be, self.op, self.dtype, g, key[4], wide)
        return found


class MedianPool2D(_Kernel):
    op = MEDIAN_POOL

    def compute(self, ctx: ok.OpKernelContext) -> None:
        be, x = backend_of(ctx, f"op {self.op!r}"), ctx.input(0)
        g, wide = self.window(x)
        out = ctx.allocate_output(0, g.out_shape)
        if not out.size:
            return
        ks, data = self.kernels(be, g, wide), _dense(x)
        r0, r1, c0, c1 = g.interior()
        strips = [((0, g.oh), (0, g.ow))]
        if g.taps == 9 and r0 < r1 and c0 < c1:
            blocks = -(-(c1 - c0) // ROW_OUTPUTS)
            n = g.n * (r1 - r0) * blocks * (g.c // _vector(g.c, self.dtype))
            ks["median3x3"].launch1d(n, out, data, *_args(g, n, wide), *_region((r0, r1), (c0, c1)))
            strips = [((0, r0), (0, g.ow)), ((r1, g.oh), (0, g.ow)), ((r0, r1), (0, c0)), ((r0, r1), (c1, g.ow))]
        for rows, cols in strips:
            n = g.n * (rows[1] - rows[0]) * (cols[1] - cols[0]) * g.c
            if n:
                ks["median_pool"].launch1d(n, out, data, *_args(g, n, wide), *_region(rows, cols))


class MedianPool2DGrad(_Kernel):
    op = MEDIAN_POOL_GRAD

    def compute(self, ctx: ok.OpKernelContext) -> None:
        be, x, dy = backend_of(ctx, f"op {self.op!r}"), ctx.input(0), ctx.input(1)
        g, wide = self.window(x)
        if tuple(dy.shape) != g.out_shape:
            raise ok.errors.InvalidArgumentError(
                f"op '{self.op}': grad must have the shape of the pooled output {list(g.out_shape)}, "
                f"got {list(dy.shape)}",
                op=self.op,
            )
        dx = ctx.allocate_output(0, x.shape)
        if not dx.size:
            return
        if not dy.size:
            dx.fill(0)
            return
        ks = self.kernels(be, g, wide)
        pos = be.new_array(g.out_shape, np.dtype(np.int64 if wide else np.int32))
        ks["median_pos"].launch1d(dy.size, pos, _dense(x), *_args(g, dy.size, wide))
        ks["median_pool_grad"].launch1d(dx.size, dx, _dense(dy), pos, *_args(g, dx.size, wide))
